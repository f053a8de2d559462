"""cuTile's rules for ``ct.static_eval`` and its siblings (issue #41, cause 2).

cuTile evaluates a ``static_eval`` argument as Python at compile time and refuses calls
of tile ops, of methods of kernel values and of functions defined in the kernel there;
it knows ``static_eval``/``static_iter``/``static_assert`` only when called directly by
name. The interpreter reads these rules from the source before a function first runs
(:mod:`tilelab.interp.frontend.static_rules`).
"""
from __future__ import annotations

import numpy as np

import cuda.tile as ct
from tilelab.errors import CompileError
from tilelab.interp import interpret

from support.refusals import refusal, source_line


def _line(fn, text: str) -> int:
    return source_line(fn, text)


def _refusal(kernel, *args) -> CompileError:
    return refusal(kernel, *args)


def test_static_eval_used_by_another_name():
    def kernel(x):
        f = ct.static_eval
        ct.scatter(x, 0, f(1 * 2))

    error = _refusal(kernel, np.zeros(4, np.int32))
    assert error.message == ("static_eval() must be used directly by name, "
                             "e.g. cuda.tile.static_eval() or ct.static_eval().")
    assert isinstance(error, ct.TileSyntaxError)


def test_static_iter_used_by_another_name():
    def kernel(x):
        f = ct.static_iter
        for i in f(range(3)):
            ct.scatter(x, i, 1)

    error = _refusal(kernel, np.zeros(4, np.int32))
    assert error.message == ("static_iter() must be used directly by name, "
                             "e.g. cuda.tile.static_iter() or ct.static_iter().")
    assert error.location.line == _line(kernel, "f = ct.static_iter")
    assert isinstance(error, ct.TileSyntaxError)


def test_calls_cutile_refuses_inside_static_eval():
    def with_closure(x):
        def f(n):
            return n + 1
        ct.scatter(x, 0, ct.static_eval(f(3)))

    def with_method(x):
        ct.static_eval(x.slice(0, 1, 2))

    def with_op(x):
        ct.static_eval(ct.scatter(x, 0, 1))

    def nested(x):
        ct.scatter(x, 0, ct.static_eval(ct.static_eval(20)))

    x = np.zeros(4, np.int32)
    for kernel, words in [(with_closure, "f() cannot be called inside static_eval()."),
                          (with_method, "slice() cannot be called inside static_eval()."),
                          (with_op, "scatter() cannot be called inside static_eval()."),
                          (nested, "static_eval() cannot be used inside static_eval().")]:
        error = _refusal(kernel, x)
        assert error.message == words
        assert isinstance(error, ct.TileStaticEvalError)
    assert x.tolist() == [0, 0, 0, 0]
    assert _refusal(with_method, x).location.line == _line(with_method, "ct.static_eval(")


def test_what_cutile_evaluates_inside_static_eval_runs():
    seen = []

    def kernel(x):
        t = ct.load(x, (0,), (4,))
        n = ct.static_eval(len(t.shape) + ct.cdiv(7, 2))
        reshape = ct.static_eval(t.reshape)   # (a value, not a call)
        ct.static_eval(seen.append(n))
        ct.store(x, (0,), reshape((4,)) + n)

    x = np.zeros(4, np.int32)
    interpret(kernel, x, grid=(1,))
    assert seen == [5] and x.tolist() == [5, 5, 5, 5]
