"""Notebook 02 (vector add and ownership): its exercises' graders and reference answers.

Example:
    >>> from tilelab.lab.course.exercises import grade, solution
    >>> grade("saxpy_edge", solution("saxpy_edge")).passed
    True
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import tilelab as tl
from tilelab.lab.course.exercises.compare import first_wrong, write_counts
from tilelab.lab.course.grading import Result, as_kernel, failed, passed, reference, register

NOTEBOOK = "02_vector_add_and_ownership"


@register("saxpy_edge", NOTEBOOK,
          "saxpy(z: tl.Out, x: tl.In, y: tl.In, a: float): z = a·x + y, every element "
          "written exactly once, 12n bytes moved")
def _saxpy_edge(answer: Any) -> Result:
    name, n, a = "saxpy_edge", 1000, 3.0
    kern = as_kernel(answer)
    x = tl.arange(n, dtype="float32", device="cpu")
    y = tl.full(n, 0.5, dtype="float32", device="cpu")
    z = tl.full(n, np.nan, dtype="float32", device="cpu")
    trace = tl.interpret(kern, z.partition(256), x, y, a)
    counts = write_counts(trace, "z")
    if (counts != 1).any():
        i = int(np.argwhere(counts != 1)[0][0])
        return failed(name, f"z[{i}] was written {counts[i]} times",
                      "store once, through the partition: z.store(tile)")
    wrong = first_wrong(z.numpy(), a * x.numpy() + y.numpy(), 1e-6)
    if wrong:
        return failed(name, wrong, "z = a * tl.load_like(x, z) + tl.load_like(y, z)")
    if trace.bytes != 12 * n:
        return failed(name, f"the kernel moved {trace.bytes:,} bytes; the minimum is "
                      f"12n = {12 * n:,} (read x and y once, write z once)",
                      "load each input tile once and reuse the loaded tile")
    return passed(name, f"all {n} elements written once (the edge tile too), "
                  f"{trace.bytes:,} bytes = 12n")


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
