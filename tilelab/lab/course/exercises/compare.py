"""Comparing what an answer produced with what it should have: values and writes.

Why: every kernel exercise asks the same two questions of its output — was each element
written exactly once, and is its value right — and the graders of every notebook ask them
the same way.

Example:
    >>> import numpy as np
    >>> first_wrong(np.ones(4), np.ones(4), 1e-6) is None
    True
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["write_counts", "first_wrong"]


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


def first_wrong(got: np.ndarray, want: np.ndarray, tol: float) -> str | None:
    """None when ``got`` matches ``want`` within ``tol``, else where it does not.

    Example:
        >>> first_wrong(np.zeros(3), np.ones(3), 1e-6)
        '3 of 3 elements are wrong, e.g. [0] is 0, expected 1'
    """
    bad = ~np.isclose(got, want, rtol=tol, atol=tol, equal_nan=False)
    if not bad.any():
        return None
    i = tuple(int(v) for v in np.argwhere(bad)[0])
    where = ", ".join(map(str, i))
    return (f"{int(bad.sum())} of {bad.size} elements are wrong, e.g. [{where}] is "
            f"{float(got[i]):.6g}, expected {float(want[i]):.6g}")
