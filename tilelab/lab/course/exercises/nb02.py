"""Notebook 02 (vector add and ownership): its exercises' graders and reference answers.

- ``saxpy_edge``: z = a·x + y with a partial last tile, any tile size, any scalar;
- ``broadcast_2d``: a matrix scaled by a row vector and shifted by a column vector — a
  block loads the slices of the vectors at its own tile and broadcasts them.

Example:
    >>> from tilelab.lab.course.exercises import grade, solution
    >>> grade("saxpy_edge", solution("saxpy_edge")).passed
    True
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import cuda.tile as ct
import tilelab as tl
from tilelab.lab.course.exercises.budget import Budget
from tilelab.lab.course.exercises.compare import tile_grid
from tilelab.lab.course.exercises.hidden import Case
from tilelab.lab.course.exercises.kernels import KernelExercise, Setup, nan_tensor
from tilelab.lab.course.grading import Lesson, Result, reference, register

NOTEBOOK = "02_vector_add_and_ownership"

EDGES = "3. Partial edge tiles"
BROADCAST = "4. Vectors beside a matrix: 2-D broadcasting"


def _randn(shape: tuple[int, ...], seed: int) -> Any:
    data = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return tl.tensor(data, device="cpu")


# ---- saxpy_edge --------------------------------------------------------------------------

_SAXPY_LESSONS = {
    "formula": Lesson(
        "what saxpy computes: a times x, plus y, element by element", "02",
        "1. The kernel, in a `%%tile` cell",
        ("both inputs are loaded at z's tile, and the scalar multiplies only one of them",
         "compare your kernel's z with numpy's a * x + y on a small vector")),
    "scalar": Lesson(
        "a scalar parameter is a launch value: the kernel must use the a it is given",
        "02", "1. The kernel, in a `%%tile` cell",
        ("the checker launches your kernel with several values of a",)),
    "tile": Lesson(
        "the tile shape belongs to the partition, not to the kernel", "02",
        "2. A partition is an ownership map",
        ("the checker launches your kernel with several tile sizes: where does your "
         "kernel assume one?",)),
    "edge": Lesson(
        "the partial last tile: its loads are padded and its store stops at the end of z",
        "02", EDGES,
        ("a load at z's position (tl.load_like) already has the edge right; an index or "
         "shape you compute yourself must too",)),
    "budget": Lesson(
        "bytes moved: x and y read once and z written once, 12 bytes an element", "02",
        "7. Bandwidth on the roofline",
        ("every load moves its tile again, even of a tile already loaded: load each "
         "input once and reuse the value",)),
}


def _saxpy_setup(case: Case) -> Setup:
    (n,) = case.shape
    a = case.params["a"]
    x, y = _randn((n,), case.seed), _randn((n,), case.seed + 100)
    want = a * x.numpy().astype(np.float64) + y.numpy()
    return Setup(nan_tensor((n,)), (x, y, a), want,
                 Budget(12 * n, "12n: x and y read once, z written once"))


SAXPY = KernelExercise(
    "saxpy_edge",
    [Case("the notebook's size, a partial last tile", (1000,), (256,), {"a": 3.0}),
     Case("another scalar", (1000,), (256,), {"a": -0.5}, lesson="scalar", seed=1),
     Case("another tile size", (4096,), (1024,), {"a": 3.0}, lesson="tile", seed=2),
     Case("a short last tile", (333,), (128,), {"a": 2.5}, lesson="edge", seed=3)],
    _saxpy_setup, _SAXPY_LESSONS, tol=1e-5, output="z")


@register("saxpy_edge", NOTEBOOK,
          "saxpy(z: tl.Out, x: tl.In, y: tl.In, a: float): z = a·x + y, every element "
          "written once; budget 12n bytes")
def _saxpy_edge(answer: Any) -> Result:
    return SAXPY.grade(answer)


def saxpy(z: tl.Out, x: tl.In, y: tl.In, a: float):
    z.store(a * tl.load_like(x, z) + tl.load_like(y, z))


@reference("saxpy_edge")
def saxpy_edge() -> Callable:
    """One load of each input, one store: every element once, 12 bytes each.

    Example:
        >>> saxpy_edge().__name__
        'saxpy'
    """
    return saxpy


# ---- broadcast_2d ------------------------------------------------------------------------

_BROADCAST_LESSONS = {
    "formula": Lesson(
        "2-D broadcasting: element (i, j) takes the row vector's value of its column j "
        "and the column vector's value of its row i", "02", BROADCAST,
        ("a block at tile (m, n) needs the slice of the row vector at its column tile n "
         "and the slice of the column vector at its row tile m",
         "a (tn,) slice becomes a row by reshaping it to (1, tn); a (tm,) slice becomes a "
         "column by reshaping it to (tm, 1): which one spreads along which axis?")),
    "shape": Lesson(
        "non-square tiles (BM ≠ BN): the row and the column slices have different lengths",
        "02", BROADCAST,
        ("with square tiles, swapping the two tile indices or the two slices goes unnoticed; "
         "check which index of z.tile_index and z.tile_shape belongs to rows",)),
    "tile": Lesson(
        "the tile shape belongs to the partition, not to the kernel", "02",
        "2. A partition is an ownership map",
        ("the checker launches your kernel with several tile shapes",)),
    "edge": Lesson(
        "partial edge tiles in two dimensions: the bottom row and the right column of "
        "tiles are short", "02", EDGES,
        ("the vector slices of an edge tile run past the end of the vectors: what does "
         "their padding add?",)),
    "budget": Lesson(
        "bytes moved: x and z once; each block reads only its own slices of the two "
        "vectors", "02", BROADCAST,
        ("loading a whole vector in every block, or a slice twice, costs bytes the "
         "budget does not have",)),
}


def _broadcast_setup(case: Case) -> Setup:
    M, N = case.shape
    TM, TN = case.tile
    x = _randn((M, N), case.seed)
    row, col = _randn((N,), case.seed + 1), _randn((M,), case.seed + 2)
    want = x.numpy().astype(np.float64) * row.numpy()[None, :] + col.numpy()[:, None]
    gm, gn = tile_grid((M, N), (TM, TN))
    return Setup(nan_tensor((M, N)), (x, row, col), want,
                 Budget(8 * M * N + 4 * (gm * N + gn * M),
                        "x read and z written once, 8MN, plus each block's slices of "
                        "row and col"))


BROADCAST_2D = KernelExercise(
    "broadcast_2d",
    [Case("the notebook's size", (64, 128), (32, 32)),
     Case("tiles with BM ≠ BN", (64, 128), (16, 32), lesson="shape", seed=1),
     Case("square tiles of another size", (128, 64), (64, 64), lesson="tile", seed=2),
     Case("sizes that are not multiples of the tile", (100, 70), (32, 16), lesson="edge",
          seed=3),
     Case("tiles with BM ≠ BN the other way", (128, 64), (32, 16), lesson="shape", seed=4)],
    _broadcast_setup, _BROADCAST_LESSONS, tol=1e-5, output="z")


@register("broadcast_2d", NOTEBOOK,
          "broadcast_2d(z: tl.Out, x: tl.In, row: tl.In, col: tl.In): z[i, j] = x[i, j]·"
          "row[j] + col[i]; budget 8MN bytes plus each block's slices of row and col")
def _broadcast_2d(answer: Any) -> Result:
    return BROADCAST_2D.grade(answer)


def _scale_shift_2d(z: tl.Out, x: tl.In, row: tl.In, col: tl.In):
    m, n = z.tile_index
    tm, tn = z.tile_shape
    r = ct.load(row, index=(n,), shape=(tn,), padding_mode=ct.PaddingMode.ZERO)
    c = ct.load(col, index=(m,), shape=(tm,), padding_mode=ct.PaddingMode.ZERO)
    z.store(tl.load_like(x, z) * ct.reshape(r, (1, tn)) + ct.reshape(c, (tm, 1)))


@reference("broadcast_2d")
def broadcast_2d() -> Callable:
    """Block ``(m, n)`` loads the row vector's slice at column tile ``n`` and the column
    vector's at row tile ``m``, reshapes them to ``(1, tn)`` and ``(tm, 1)``, and lets
    broadcasting spread them over its tile.

    Example:
        >>> broadcast_2d().__name__
        '_scale_shift_2d'
    """
    return _scale_shift_2d
