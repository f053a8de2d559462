"""Notebook 01 (hello tiles): its exercises' graders and reference answers.

- ``fix_refused``: a kernel the checker refuses, rewritten to store through its partition;
- ``pair_sum``: the first kernel that indexes a load itself — ``index=`` counts tiles of
  the shape asked for, and the last tile may be partial.

Example:
    >>> from tilelab.lab.course.exercises import grade, solution
    >>> grade("fix_refused", solution("fix_refused")).passed
    True
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import cuda.tile as ct
import tilelab as tl
from tilelab.lab.course.exercises.budget import Budget
from tilelab.lab.course.exercises.hidden import Case
from tilelab.lab.course.exercises.kernels import KernelExercise, Setup, nan_tensor
from tilelab.lab.course.grading import Lesson, Result, reference, register

NOTEBOOK = "01_hello_tiles"

FIRST_KERNEL = "2. A first kernel in a `%%tile` cell"
PRIMER = "4. The cuTile API in five minutes"

# ---- fix_refused -------------------------------------------------------------------------

_FIX_LESSONS = {
    "formula": Lesson(
        "what the kernel computes: every element of z is twice x's plus one", "01",
        FIRST_KERNEL,
        ("a block loads the tile of x that sits where its tile of z sits, computes, and "
         "stores its tile of z: which of the two steps of the task is missing or off?",
         "check the scale and the shift apart: run your kernel on a few elements and "
         "compare with numpy")),
    "edge": Lesson(
        "the partial last tile: loads past the end of x are padded, the store stops at "
        "the end of z", "01", PRIMER,
        ("the tile shape is the partition's, not a number written in the kernel",)),
    "tile": Lesson(
        "the tile shape belongs to the partition: the same kernel must work for any "
        "tile the launch chooses", "01", "1. A tensor, cut into tiles",
        ("read the tile's shape from z (z.tile_shape) instead of writing it in the "
         "kernel",)),
    "budget": Lesson(
        "bytes moved: x is read once and z written once, 4 bytes an element", "01",
        FIRST_KERNEL,
        ("each load moves its tile's bytes again: load a tile once and reuse the value",)),
}


def _fix_setup(case: Case) -> Setup:
    (n,) = case.shape
    x = tl.tensor(np.random.default_rng(case.seed).standard_normal(n).astype(np.float32),
                  device="cpu")
    return Setup(nan_tensor((n,)), (x,), 2.0 * x.numpy().astype(np.float64) + 1.0,
                 Budget(8 * n, "8n: x read once, z written once"))


FIX_REFUSED = KernelExercise(
    "fix_refused",
    [Case("the notebook's size, a partial last tile", (1000,), (256,)),
     Case("another tile size", (4096,), (512,), lesson="tile", seed=1),
     Case("one partial tile", (77,), (128,), lesson="edge", seed=2)],
    _fix_setup, _FIX_LESSONS, tol=1e-6, output="z")


@register("fix_refused", NOTEBOOK,
          "scale_shift(z: tl.Out, x: tl.In): z = 2x + 1, written through z's partition; "
          "budget 8n bytes")
def _fix_refused(answer: Any) -> Result:
    return FIX_REFUSED.grade(answer)


def _scale_shift(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) * 2.0 + 1.0)


@reference("fix_refused")
def fix_refused() -> Callable:
    """Store through the partition of ``z``, not into the input ``x``.

    Example:
        >>> fix_refused().__name__
        '_scale_shift'
    """
    return _scale_shift


# ---- pair_sum ----------------------------------------------------------------------------

_PAIR_LESSONS = {
    "formula": Lesson(
        "which elements of x a block needs: element j of z sums the pair x[2j], x[2j+1], "
        "so z's tile i needs a tile of x twice as long", "01", PRIMER,
        ("ct.load's index= counts tiles of the shape you ask for, not elements: with a "
         "shape twice z's tile, which index is the one at z's tile i?",
         "after the load, a (2t,) tile can be viewed as t rows of 2 (ct.reshape) and "
         "reduced along the axis of the pairs")),
    "edge": Lesson(
        "the partial last tile: x may have an odd length, and the last element of z then "
        "pairs x's last element with nothing (zero)", "01", PRIMER,
        ("what does a load return for elements past the end of x, and which padding "
         "adds nothing to a sum?",)),
    "tile": Lesson(
        "the tile shape belongs to the partition: read it from z, do not write it in "
        "the kernel", "01", PRIMER,
        ("the checker launches your kernel with several tile sizes",)),
    "shape": Lesson(
        "sizes that are not multiples of the tile", "01", PRIMER,
        ("count the tiles of x your blocks load for an x of odd length",)),
    "budget": Lesson(
        "bytes moved: each element of x is read once and z written once", "01", PRIMER,
        ("a block needs only the pairs of its own tile: load them in one tile, once",)),
}


def _pair_setup(case: Case) -> Setup:
    (m,) = case.shape
    n = case.params["n"]
    x = tl.tensor(np.random.default_rng(case.seed).standard_normal(n).astype(np.float32),
                  device="cpu")
    padded = np.append(x.numpy().astype(np.float64), 0.0)[:2 * m]
    return Setup(nan_tensor((m,)), (x,), padded[0::2] + padded[1::2],
                 Budget(4 * n + 4 * m, "4n + 4·ceil(n/2): x read once, z written once"))


PAIR_SUM = KernelExercise(
    "pair_sum",
    [Case("the notebook's size", (500,), (128,), {"n": 1000}),
     Case("another tile size", (1024,), (256,), {"n": 2048}, lesson="tile", seed=1),
     Case("an odd length", (39,), (16,), {"n": 77}, lesson="shape", seed=2),
     Case("x shorter than one tile", (5,), (8,), {"n": 9}, lesson="edge", seed=3)],
    _pair_setup, _PAIR_LESSONS, tol=1e-5, output="z")


@register("pair_sum", NOTEBOOK,
          "pair_sum(z: tl.Out, x: tl.In): z[j] = x[2j] + x[2j+1] (x[n] counts as 0), z of "
          "length ceil(n/2); budget 4n + 4·ceil(n/2) bytes")
def _pair_sum(answer: Any) -> Result:
    return PAIR_SUM.grade(answer)


def _pair_sum_kernel(z: tl.Out, x: tl.In):
    (i,) = z.tile_index
    (t,) = z.tile_shape
    pairs = ct.load(x, index=(i,), shape=(2 * t,), padding_mode=ct.PaddingMode.ZERO)
    z.store(ct.sum(ct.reshape(pairs, (t, 2)), axis=1))


@reference("pair_sum")
def pair_sum() -> Callable:
    """Block ``i`` loads tile ``i`` of ``x`` in tiles of twice its own length (``index``
    counts tiles of the shape asked for), views it as pairs and sums each pair; zero
    padding completes an odd last pair.

    Example:
        >>> pair_sum().__name__
        '_pair_sum_kernel'
    """
    return _pair_sum_kernel

