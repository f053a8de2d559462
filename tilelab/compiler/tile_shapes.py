"""The tile shapes a partition may take, and the located error for one it may not.

Why here: ``tensor.partition(...)`` (runtime) and ``tl.spec(...).partition(...)``
(compiler, no memory) take the same tile shapes, so they refuse a bad one with the same
error: a :class:`TileShapeError` at the user's calling line, with the nearest sizes that
work. The runtime imports the compiler (never the other way round), so this module
builds the error for both.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Sequence

from tilelab.errors import LaunchError, SourceLocation

__all__ = ["MAX_PARTITION_RANK", "TileShapeError", "tile_shape_error", "caller_location"]

#: Partitions of rank 1 to 3 launch a grid of the same rank (one block per tile); ranks 4
#: and 5 linearise the tile grid onto a 1-D launch grid (tilelab.compiler.tile_index.unravel_4d,
#: unravel_5d, grouped_tile_index_4d, grouped_tile_index_5d).
MAX_PARTITION_RANK = 5

#: the package's directory: frames of code under it are tilelab's, not the user's
_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class TileShapeError(LaunchError, ValueError):
    """A partition's tile shape is not one a kernel can take: one size per dimension of
    the tensor, each a power of two (cuTile's tiles are). Raised by
    ``tensor.partition(...)`` and ``tl.spec(...).partition(...)`` at the user's line,
    with the nearest sizes that work.

    It is both a :class:`~tilelab.errors.LaunchError` (the launch it was made for cannot
    run) and a ``ValueError`` (a bad value).

    Example:
        >>> import tilelab as tl
        >>> try:
        ...     tl.spec((4096,), "f32").partition(100)
        ... except tl.LaunchError as e:
        ...     print(e.message)
        ...     print(e.hint)
        tile size 100 is not a power of two: cuTile's tiles are powers of two in every dimension (the nearest are 64 and 128)
        write partition(128) or partition(64); edge tiles may be partial, so the tensor's shape (4096,) need not be a multiple of the tile
    """


def caller_location() -> SourceLocation | None:
    """Where the user's code called into tilelab: file, line and the columns of the
    call expression (the first frame outside the package). For error messages only: it
    walks the stack and reads the code's position table.

    Example:
        >>> caller_location().line > 0          # this doctest's own line
        True
    """
    f: Any = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_PKG):
        f = f.f_back
    if f is None:
        return None
    code, line = f.f_code, f.f_lineno
    col, end = 1, None
    try:
        pos = list(code.co_positions())[f.f_lasti // 2]
        if pos[0] == line and pos[2] is not None:
            col = pos[2] + 1
            if pos[1] == line and pos[3] is not None:
                end = pos[3] + 1
    except (AttributeError, IndexError, TypeError):   # (no position table: line only)
        pass
    return SourceLocation(code.co_filename, line or code.co_firstlineno, col, end)


def _pow2_near(t: int) -> tuple[int, int]:
    """The powers of two just below and just above ``t`` (``t`` >= 1, not one itself).

    Example:
        >>> _pow2_near(100), _pow2_near(3)
        ((64, 128), (2, 4))
    """
    lo = 1 << (int(t).bit_length() - 1)
    return lo, lo * 2


def _call(tile: Sequence[int]) -> str:
    """``partition(128)`` or ``partition((128, 64))``: how a tile shape is written."""
    return f"partition({tile[0]})" if len(tile) == 1 else f"partition({tuple(tile)})"


def tile_shape_error(tile: Sequence[int], shape: Sequence[int]) -> TileShapeError | None:
    """The error for a tile shape ``tile`` (ints) of a tensor of ``shape``, located at
    the user's calling line, or None when it is a valid one.

    Example:
        >>> tile_shape_error((128,), (4096,)) is None
        True
        >>> tile_shape_error((100, 64), (300, 200)).hint.split(";")[0]
        'write partition((128, 64)) or partition((64, 64))'
    """
    tile, shape = tuple(int(d) for d in tile), tuple(int(s) for s in shape)
    if len(tile) != len(shape):
        return TileShapeError(
            f"tile shape {tile} has {len(tile)} dims but the tensor has {len(shape)} "
            f"(shape {shape})",
            location=caller_location(),
            hint=f"give one tile size per dimension of the tensor: {len(shape)} sizes, "
                 f"e.g. {_call(tile[-1:] * len(shape))}" if shape else
                 "a 0-d tensor has no tiles; pass it as tl.In, or reshape it to (1,)")
    if not 1 <= len(shape) <= MAX_PARTITION_RANK:
        return TileShapeError(
            f"partitions of rank {len(shape)} are not supported: partition a tensor of "
            f"rank 1 to {MAX_PARTITION_RANK}", location=caller_location(),
            hint="pass higher-rank tensors as tl.In, or reshape the output")
    bad = [i for i, t in enumerate(tile) if t < 1 or t & (t - 1)]
    if not bad:
        return None
    i = next((j for j in bad if tile[j] < 1), bad[0])   # no nearest powers below 1
    t = tile[i]
    which = "tile size" if len(tile) == 1 else f"tile dimension {i}"
    if t < 1:
        return TileShapeError(
            f"{which} {t} is not a power of two: tile sizes are positive powers of two "
            "(1, 2, 4, ..., as cuTile's tiles are)", location=caller_location(),
            hint=f"write e.g. {_call(tuple(1 if j == i else d for j, d in enumerate(tile)))}")
    lo, hi = _pow2_near(t)
    up = tuple(_pow2_near(d)[1] if j in bad else d for j, d in enumerate(tile))
    down = tuple(_pow2_near(d)[0] if j in bad else d for j, d in enumerate(tile))
    return TileShapeError(
        f"{which} {t} is not a power of two: cuTile's tiles are powers of two in every "
        f"dimension (the nearest are {lo} and {hi})", location=caller_location(),
        hint=f"write {_call(up)} or {_call(down)}; edge tiles may be partial, so the "
             f"tensor's shape {shape} need not be a multiple of the tile")
