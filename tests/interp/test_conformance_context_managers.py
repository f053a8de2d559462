"""A ``@contextlib.contextmanager`` helper runs in a kernel, as cuTile 1.7 compiles it.

cuTile reads the generator behind such a helper through a path of its own; its plain
front end (which the interpreter gives every other function before its first call)
refuses ``yield`` as "Unsupported syntax", so the interpreter does not give it
generator functions (issue #41: a kernel cuTile accepts must run). This kernel compiles
with cuTile 1.7 for sm_90.
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np

import cuda.tile as ct
from tilelab.interp import interpret


def _append(x, val):
    i = ct.gather(x, 0) + 1
    ct.scatter(x, 0, i)
    ct.scatter(x, i, val)


@contextmanager
def _bracket(x, start_val, end_val):
    _append(x, start_val)
    yield start_val
    _append(x, end_val)


def test_a_context_manager_helper_runs_its_two_halves_around_the_body():
    @ct.kernel
    def k(x):
        _append(x, 10)
        with _bracket(x, 20, 30) as val:
            _append(x, 40)
            ct.static_assert(val == 20)
        _append(x, 50)

    x = np.zeros(10, np.int32)
    interpret(k, x, grid=(1,))
    assert x.tolist() == [5, 10, 20, 40, 30, 50, 0, 0, 0, 0]
