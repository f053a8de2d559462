"""A variable used where cuTile cannot prove it assigned (issue #41, cause 2).

cuTile checks every path when it compiles; Python raises ``UnboundLocalError`` only in a
block whose run reaches the unassigned use. The interpreter reads the rule from the
source before a function first runs (:mod:`tilelab.interp.frontend.undefined_rules`),
with cuTile 1.7's words, class and place (each refusal below is cuTile 1.7's for the
same kernel compiled for sm_90), so a kernel refused on the GPU is refused on the CPU
whichever blocks run.
"""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import cuda.tile as ct
from tilelab.errors import CompileError
from tilelab.interp import interpret
from tilelab.interp._cutile import exception_classes


def _line(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def _refusal(kernel, *args, grid=(1,)) -> CompileError:
    with pytest.raises(CompileError) as info:
        interpret(kernel, *args, grid=grid)
    return info.value


def test_a_use_before_any_assignment_on_its_path():
    @ct.kernel
    def k(x, y, tile: ct.Constant[int]):
        i = ct.bid(0)
        if i == 0:
            acc = ct.load(y, index=(i,), shape=(tile,))
        else:
            acc = ct.load(x, index=(i,), shape=(tile,)) + acc
        ct.store(y, index=(i,), tile=acc)

    x = np.zeros(256, np.float32)
    y = np.ones(256, np.float32)
    error = _refusal(k, x, y, 128)      # (block 0 alone would run: it assigns acc first)
    assert error.message == "Undefined variable acc used"
    assert isinstance(error, exception_classes()["TileSyntaxError"])
    assert isinstance(error, NameError)  # (as the run's UnboundLocalError is)
    assert error.location.line == _line(k._pyfunc, ") + acc")
    assert (y == 1).all()


def test_a_use_after_an_if_that_assigns_on_one_side():
    @ct.kernel
    def k(x, y, tile: ct.Constant[int]):
        i = ct.bid(0)
        xi = ct.load(x, index=(i,), shape=(tile,))
        if i == 0:
            acc = ct.load(y, index=(i,), shape=(tile,))
            yi = acc + xi
        else:
            yi = xi
        yi += acc
        ct.store(y, index=(i,), tile=yi)

    x = np.zeros(256, np.float32)
    error = _refusal(k, x, np.zeros_like(x), 128, grid=(1,))
    assert error.message == "Use of potentially undefined variable `acc`"
    assert isinstance(error, ct.TileTypeError)
    assert error.location.line == _line(k._pyfunc, "if i == 0:")   # (cuTile: the if)


def test_a_loop_that_assigns_what_it_reads_first_or_what_is_read_after_it():
    @ct.kernel
    def carried(x, n):
        for k in range(n):
            acc = acc + 1
        ct.scatter(x, 0, 1)

    @ct.kernel
    def after(x, n):
        for k in range(n):
            v = k
        ct.scatter(x, 0, v)

    x = np.zeros(1, np.int32)
    for kernel, name, line in ((carried, "acc", "for k in range(n):"),
                               (after, "v", "for k in range(n):")):
        error = _refusal(kernel, x, 2)
        assert error.message == f"Use of potentially undefined variable `{name}`"
        assert error.location.line == _line(kernel._pyfunc, line)


def test_what_cutile_compiles_runs():
    @ct.kernel
    def k(x, N: ct.Constant[int]):
        if N > 4:                       # a constant condition: cuTile folds it
            a = 1
        if ct.bid(0) == 0:              # both sides assign
            b = 1
        else:
            b = 3
        for i in ct.static_iter(range(2)):   # unrolled
            c = i
        if ct.bid(0) == 0:              # the other side does not fall through
            d = 4
        else:
            return
        unused = 0
        if ct.bid(0) == 0:              # assigned on one side, never read after
            unused = 1
        ct.scatter(x, 0, a + b + c + d)

    x = np.zeros(1, np.int32)
    interpret(k, x, 5, grid=(1,))
    assert x.tolist() == [7]


def test_a_comprehension_condition_reading_a_later_loop_variable():
    @ct.kernel
    def k():
        _ = tuple(i
                  for i in ct.static_iter(range(3))
                  if n > 0  # noqa: F821
                  for n in ct.static_iter(range(4)))

    error = _refusal(k)
    assert error.message == "Undefined variable n used"
    assert isinstance(error, exception_classes()["TileSyntaxError"])
    assert error.location.line == _line(k._pyfunc, "if n > 0")
