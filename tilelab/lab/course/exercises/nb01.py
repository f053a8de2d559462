"""Notebook 01 (hello tiles): its exercises' graders and reference answers.

Example:
    >>> from tilelab.lab.course.exercises import grade, solution
    >>> grade("fix_refused", solution("fix_refused")).passed
    True
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import tilelab as tl
from tilelab.lab.course.exercises.compare import first_wrong
from tilelab.lab.course.grading import Result, as_kernel, failed, passed, reference, register

NOTEBOOK = "01_hello_tiles"


@register("fix_refused", NOTEBOOK,
          "scale_shift(z: tl.Out, x: tl.In): z = 2x + 1, written through z's partition")
def _fix_refused(answer: Any) -> Result:
    name = "fix_refused"
    kern = as_kernel(answer)
    x = tl.arange(1000, dtype="float32", device="cpu")
    z = tl.full(1000, np.nan, dtype="float32", device="cpu")
    tl.interpret(kern, z.partition(256), x)
    wrong = first_wrong(z.numpy(), 2 * x.numpy() + 1, 1e-6)
    if wrong:
        return failed(name, wrong, "store 2 * tl.load_like(x, z) + 1 with z.store(...)")
    return passed(name, "accepted by the checker, and z = 2x + 1 on all 1000 elements")


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
