"""Comparing what an answer produced with what it should have: writes and values, told
by *where* they are wrong (which tiles, the partial edge ones?), never by the value
expected.

Why: a FAIL that prints ``expected 7.0`` invites typing 7.0 back; one that says "right
in the full tiles, wrong in the partial last tile" points at the concept. Every kernel
exercise asks the same questions of its output, so the graders of every notebook ask
them here; the expected numbers a comparison looked at are returned as ``secrets``, for
tests to check that no message shows them.

Example:
    >>> import numpy as np
    >>> got, want = np.arange(10.0), np.arange(10.0)
    >>> got[8:] = 0
    >>> print(wrong_values(got, want, 1e-6, (4,), "z").text)
    2 of 10 elements of z are wrong: the full tiles are right, wrong in the partial edge tile; the first wrong element is z[8]
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["write_counts", "Mismatch", "wrong_values", "unwritten", "unwritten_fill",
           "UNWRITTEN_BITS", "tile_grid", "first_wrong"]


def write_counts(trace: Any, arg: str) -> np.ndarray:
    """How many times each element of ``arg`` was written, over all blocks of a trace.

    Example:
        >>> write_counts(tl.interpret(add, z.partition(256), x, y), "z").max()  # doctest: +SKIP
        1
    """
    counts = np.zeros(trace.args[arg].shape, np.int64)
    for access in trace.regions(arg, kind="write"):
        once = np.zeros(counts.shape, bool)
        access.paint(once, True)
        counts += once
    return counts


@dataclass(frozen=True)
class Mismatch:
    """Where an output is wrong: the message (``text``), whether only partial edge
    tiles are wrong (``edge_only``), whether every tile is (``everywhere``), and the
    expected numbers looked at (``secrets``).

    Example:
        >>> Mismatch("z is wrong", False, True, (1.0,)).everywhere
        True
    """

    text: str
    edge_only: bool
    everywhere: bool
    secrets: tuple[float, ...] = ()


def tile_grid(shape: tuple[int, ...], tile: tuple[int, ...]) -> tuple[int, ...]:
    """Tiles along each dimension (the last one may be partial).

    Example:
        >>> tile_grid((1000, 70), (256, 32))
        (4, 3)
    """
    return tuple(math.ceil(s / t) for s, t in zip(shape, tile))


def _bad_tiles(bad: np.ndarray, tile: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(bad per tile, partial per tile) over the tile grid of ``bad``'s shape."""
    grid = tile_grid(bad.shape, tile)
    per_tile = np.zeros(grid, bool)
    partial = np.zeros(grid, bool)
    for idx in np.ndindex(*grid):
        box = tuple(slice(i * t, (i + 1) * t) for i, t in zip(idx, tile))
        per_tile[idx] = bad[box].any()
        partial[idx] = any((i + 1) * t > s for i, t, s in zip(idx, tile, bad.shape))
    return per_tile, partial


def _where(bad: np.ndarray, tile: tuple[int, ...], verb: str) -> tuple[str, bool, bool]:
    """Which tiles hold the ``bad`` elements, in words (``verb``: "wrong", "missing"),
    whether only partial edge tiles do, and whether every tile does."""
    per_tile, partial = _bad_tiles(bad, tile)
    n_bad, n_all = int(per_tile.sum()), per_tile.size
    if n_bad == n_all:
        return (f"{verb} in every tile" if n_all > 1 else f"{verb} in its one tile"), \
            False, True
    if partial.any() and not (per_tile & ~partial).any():
        what = "tile" if n_bad == 1 else "tiles"
        return f"the full tiles are right, {verb} in the partial edge {what}", True, False
    first = tuple(int(i) for i in np.argwhere(per_tile)[0])
    return (f"{verb} in {n_bad} of {n_all} tiles, the first tile "
            f"{first if len(first) > 1 else first[0]}"), False, False


def _index(i: tuple[int, ...]) -> str:
    return ", ".join(map(str, i))


def wrong_values(got: np.ndarray, want: np.ndarray, tol: float, tile: tuple[int, ...],
                 name: str) -> Mismatch | None:
    """None when ``got`` matches ``want`` (relative and absolute ``tol``), else where it
    does not, by tiles of ``tile``. Values are never quoted.

    Example:
        >>> wrong_values(np.zeros(8), np.ones(8), 1e-6, (4,), "z").everywhere
        True
    """
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    bad = ~np.isclose(got, want, rtol=tol, atol=tol, equal_nan=True)
    if not bad.any():
        return None
    where, edge_only, everywhere = _where(bad, tile, "wrong")
    first = tuple(int(v) for v in np.argwhere(bad)[0])
    secrets = tuple(float(want[tuple(i)]) for i in np.argwhere(bad)[:3])
    text = (f"{int(bad.sum())} of {bad.size} elements of {name} are wrong: {where}; "
            f"the first wrong element is {name}[{_index(first)}]")
    return Mismatch(text, edge_only, everywhere, secrets)


#: the bits of the float32 NaN graders fill outputs with: arithmetic never makes this
#: payload, so an element that still holds it was never written (a computed NaN is wrong)
UNWRITTEN_BITS = 0x7FE5A5A5


def unwritten_fill(shape: tuple[int, ...]) -> np.ndarray:
    """A float32 array of ``shape`` filled with the :data:`UNWRITTEN_BITS` NaN.

    Example:
        >>> bool(np.isnan(unwritten_fill((2,))).all())
        True
    """
    return np.full(shape, UNWRITTEN_BITS, np.uint32).view(np.float32)


def unwritten(got: np.ndarray, tile: tuple[int, ...], name: str) -> Mismatch | None:
    """None when no element of ``got`` (float32) still holds the grader's fill
    (:func:`unwritten_fill`), else where the answer left elements unwritten.

    Example:
        >>> got = unwritten_fill((3,)); got[[0, 2]] = 1.0
        >>> print(unwritten(got, (2,), "z").text)
        1 of 3 elements of z were never written: missing in 1 of 2 tiles, the first tile 0; the first is z[1]
    """
    got = np.ascontiguousarray(got)
    left = (got.view(np.uint32) == UNWRITTEN_BITS) if got.dtype == np.float32 else \
        np.zeros(got.shape, bool)
    if not left.any():
        return None
    where, edge_only, everywhere = _where(left, tile, "missing")
    first = tuple(int(v) for v in np.argwhere(left)[0])
    return Mismatch(f"{int(left.sum())} of {left.size} elements of {name} were never "
                    f"written: {where}; the first is {name}[{_index(first)}]",
                    edge_only, everywhere)


def first_wrong(got: np.ndarray, want: np.ndarray, tol: float) -> str | None:
    """None when ``got`` matches ``want`` within ``tol``, else how many elements are
    wrong and the first of them (its value as computed, never the expected one). For
    outputs that are not tiled; :func:`wrong_values` says which tiles are wrong.

    Example:
        >>> first_wrong(np.zeros(3), np.ones(3), 1e-6)
        '3 of 3 elements are wrong, e.g. [0] is 0'
    """
    bad = ~np.isclose(got, want, rtol=tol, atol=tol, equal_nan=False)
    if not bad.any():
        return None
    i = tuple(int(v) for v in np.argwhere(bad)[0])
    return (f"{int(bad.sum())} of {bad.size} elements are wrong, e.g. [{_index(i)}] is "
            f"{float(got[i]):.6g}")
