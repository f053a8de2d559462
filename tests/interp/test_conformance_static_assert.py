"""``ct.static_assert`` conditions are plain Python, as in cuTile (issue #41, cause 3).

cuTile evaluates the condition at compile time with Python's semantics, so a helper
that loops over a constant range folds to a constant; on a run-time value the condition
stays run-time and is refused.
"""
from __future__ import annotations

import numpy as np
import pytest

import cuda.tile as ct
from tilelab.errors import CompileError
from tilelab.interp import interpret


def factorial(n):
    result = 1
    for i in range(1, n + 1):
        result *= i
    return result


@ct.kernel
def bounded(x, n: ct.Constant):
    ct.static_assert(factorial(n) < 100)
    ct.scatter(x, (), n)


def test_a_helper_looping_over_a_constant_range_is_a_constant():
    x = np.zeros((), np.int32)
    interpret(bounded, x, 4, grid=(1,))
    assert int(x) == 4


def test_a_false_condition_fails_with_cutiles_message():
    with pytest.raises(CompileError, match="Static assertion failed"):
        interpret(bounded, np.zeros((), np.int32), 7, grid=(1,))


def test_the_message_sees_the_folded_values():
    @ct.kernel
    def k(x, n: ct.Constant):
        ct.static_assert(factorial(n) < 100, f"{n}! = {factorial(n)}, and x is {x}")

    with pytest.raises(CompileError, match=r"Static assertion failed: 7! = 5040, and x is "
                                           r"<array\[int32, \(\)\]>"):
        interpret(k, np.zeros((), np.int32), 7, grid=(1,))


def test_a_run_time_value_keeps_the_condition_run_time():
    @ct.kernel
    def from_local(x):
        n = ct.bid(0) + 3
        ct.static_assert(factorial(n) < 100)

    with pytest.raises(CompileError, match="static_assert\\(\\) condition must be a "
                                           "compile-time constant"):
        interpret(from_local, np.zeros(1, np.int32), grid=(1,))


def _block_plus(k):
    return ct.bid(0) + k


def test_a_helper_reading_a_run_time_value_keeps_the_condition_run_time():
    @ct.kernel
    def k(x):
        ct.static_assert(factorial(_block_plus(3)) < 100)

    with pytest.raises(CompileError, match="static_assert"):
        interpret(k, np.zeros(1, np.int32), grid=(1,))
