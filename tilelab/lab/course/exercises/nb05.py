"""Notebook 05 (unsafe kernels and races): its exercises' graders and reference answers.

Example:
    >>> from tilelab.lab.course.exercises import grade, solution
    >>> grade("race_hunt", solution("race_hunt")).passed
    True
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import cuda.tile as ct
import tilelab as tl
from tilelab.lab.course.grading import Result, as_kernel, failed, passed, reference, register

NOTEBOOK = "05_unsafe_kernels_and_races"


@register("race_hunt", NOTEBOOK,
          "total(out: tl.Raw, x: tl.In, T: ct.Constant[int]), unsafe, grid (n // T,): "
          "out[0] = sum of x, with no race")
def _race_hunt(answer: Any) -> Result:
    name, n, T = "race_hunt", 4096, 256
    kern = as_kernel(answer, unsafe=True)
    x = tl.randn(n, dtype="float32", device="cpu", seed=3)
    out = tl.zeros(1, dtype="float32", device="cpu")
    trace = tl.interpret(kern, out, x, T, grid=(n // T,))
    if trace.has_races:
        first = str(trace.races[0]).split(";")[0]
        return failed(name, f"{len(trace.races)} race(s), e.g. {first}",
                      "all blocks write out[0]: add into it with ct.atomic_add(out, (0,), "
                      "partial) (atomics do not race), or write partials to a partition "
                      "and sum them in a second launch")
    want = float(x.numpy().astype(np.float64).sum())
    got = float(out.numpy()[0])
    if not abs(got - want) <= 1e-3 * max(1.0, abs(want)):
        return failed(name, f"out[0] = {got}, the sum is {want:.6g}",
                      "each block must add the sum of its whole tile of x")
    return passed(name, f"no race, and out[0] = {got:.6g} is the sum")


def _block_sum(out: tl.Raw, x: tl.In, T: ct.Constant[int]):
    t = ct.load(x, index=(ct.bid(0),), shape=(T,), padding_mode=ct.PaddingMode.ZERO)
    ct.atomic_add(out, (0,), ct.sum(t))


@reference("race_hunt")
def race_hunt() -> Callable:
    """Every block adds its partial sum into ``out[0]`` with an atomic add.

    Example:
        >>> race_hunt().__name__
        '_block_sum'
    """
    return _block_sum
