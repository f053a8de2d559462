"""What a ``ct.reduce``/``ct.scan`` combiner may not do (issue #41, cause 2).

cuTile compiles a custom combiner into one operation's body and refuses branches on
run-time values, loops, memory effects (loads, stores, atomics, printing) and nested
reductions there. The interpreter runs the combiner as Python, so it refuses these
while a combiner runs (:mod:`tilelab.interp.body_rules`), in cuTile's words and class,
at the combiner's line; what cuTile accepts there (arithmetic, ``ct.where``, an ``if``
on a constant) still runs.
"""
from __future__ import annotations

import numpy as np
import pytest

import cuda.tile as ct
from tilelab.errors import CompileError
from tilelab.interp import interpret

from support.refusals import source_line


def _line(fn, text: str) -> int:
    return source_line(fn, text)


def _run(kernel, *args):
    return interpret(kernel, *args, grid=(1,))


def _refusal(kernel, *args) -> CompileError:
    with pytest.raises(CompileError) as info:
        _run(kernel, *args)
    assert isinstance(info.value, ct.TileSyntaxError)
    return info.value


def _data():
    return np.arange(64, dtype=np.int32).reshape(8, 8), np.zeros(8, np.int32)


def test_a_branch_on_a_scalar_in_a_reduction_body():
    def kernel(x, y):
        def f(a, b):
            if ct.bid(0) == 0:
                return a + b
            return a - b

        ct.store(y, (0,), ct.reduce(ct.load(x, (0, 0), (8, 8)), 1, f, 0))

    error = _refusal(kernel, *_data())
    assert error.message == ("Branching inside reduction body is not supported. "
                             "Consider ct.where() as a workaround.")
    assert error.location.line == _line(kernel, "if ct.bid(0) == 0:")


def test_a_loop_in_a_scan_body():
    def kernel(x, y):
        def f(a, b):
            res = a
            for i in range(2):
                res = res + b
            return res

        ct.store(y, (0, 0), ct.scan(ct.load(x, (0, 0), (8, 8)), axis=1, func=f, identity=0))

    x, _ = _data()
    error = _refusal(kernel, x, np.zeros((8, 8), np.int32))
    assert error.message == "Loops inside scan body are not supported"
    assert error.location.line == _line(kernel, "for i in range(2):")


@pytest.mark.parametrize("body", ["printf", "print", "load"])
def test_memory_effects_in_a_reduction_body(body):
    def kernel(x, y):
        def f(a, b):
            if body == "printf":
                ct.printf("%d", a)
            elif body == "print":
                print(a)
            else:
                ct.load(x, (0, 0), (1, 1))
            return a + b

        ct.store(y, (0,), ct.reduce(ct.load(x, (0, 0), (8, 8)), 1, f, 0))

    error = _refusal(kernel, *_data())
    assert error.message == \
        "Operations with memory effects are not supported inside reduction body"


def test_a_reduction_inside_a_scan_body():
    def kernel(x, y):
        def f(a, b):
            return a + b + ct.sum(ct.full((2,), 1, ct.int32))

        ct.store(y, (0, 0), ct.scan(ct.load(x, (0, 0), (8, 8)), axis=1, func=f, identity=0))

    x, _ = _data()
    error = _refusal(kernel, x, np.zeros((8, 8), np.int32))
    assert error.message == "Nested scan/reduction is not supported"
    assert error.location.line == _line(kernel, "return a + b + ct.sum")


def test_what_cutile_accepts_in_a_body_runs():
    def kernel(x, y, z, FLAG: ct.Constant[int]):
        def f(a, b):
            if FLAG == 1:   # (a constant: no branch)
                return ct.where(a > b, a, b)
            return a + b

        tile = ct.load(x, (0, 0), (8, 8))
        ct.store(y, (0,), ct.reduce(tile, 1, f, 0))
        ct.store(z, (0, 0), ct.scan(tile, 1, lambda a, b: a + b, 0))
        for i in range(2):   # (loops and branches outside the body are fine)
            if ct.bid(0) == 0:
                ct.store(y, (1,), ct.full((1,), ct.sum(tile) * 0 + i, ct.int32))

    x, y = _data()
    z = np.zeros((8, 8), np.int32)
    _run(kernel, x, y, z, 1)
    assert y[0] == 7 and y[1] == 1 and y[2:].tolist() == x[2:].max(axis=1).tolist()
    assert (z == np.cumsum(x, axis=1)).all()
