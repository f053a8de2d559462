"""A type that depends on the path taken (issue #41, cause 2).

cuTile types every path of a kernel: after an ``if`` on a run-time value, a variable
used later must have one type, and so must a helper's return value. Python runs one
side only; the interpreter reads the rule from the source before a function first runs
(:mod:`tilelab.interp.frontend.path_types`), for the types the source shows (literals, enum
members, tiled views with constant tile shapes), branches not taken included.
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
    return refusal(kernel, *args, foreign=ct.TileTypeError)


def test_a_helper_returning_an_int_or_a_float():
    def helper():
        if ct.bid(0) == 0:
            return 3
        else:
            return 5.0

    def kernel(x):
        ct.scatter(x, 0, 1)
        helper()

    x = np.zeros(2, np.float32)
    error = _refusal(kernel, x)
    then, other = _line(helper, "return 3"), _line(helper, "return 5.0")
    assert error.message.startswith(
        f"Type of return value depends on path taken: Tile[float32,()] (line {other}) vs. "
        f"Tile[int32,()] (line {then})")
    assert error.location.line == other


def test_enum_members_on_two_paths():
    def kernel(x):
        if ct.bid(0) == 0:
            val = ct.MemoryOrder.RELAXED
        else:
            val = ct.MemoryOrder.WEAK
        ct.scatter(x, 0, 1 if val == ct.MemoryOrder.WEAK else 2)

    error = _refusal(kernel, np.zeros(2, np.int32))
    assert error.message == (
        f"Type of `val` depends on path taken: <enum constant MemoryOrder.WEAK> "
        f"(line {_line(kernel, 'val = ct.MemoryOrder.WEAK')}) vs. <enum constant "
        f"MemoryOrder.RELAXED> (line {_line(kernel, 'val = ct.MemoryOrder.RELAXED')})")


def test_tiled_views_of_two_tile_shapes():
    def kernel(x, cond: bool, TILE_A: ct.Constant[int], TILE_B: ct.Constant[int]):
        if cond:
            tv = x.tiled_view(TILE_A)
        else:
            tv = x.tiled_view(TILE_B)
        tv.store(0, ct.full(TILE_A, 1.0, ct.float32))

    x = np.zeros(128, np.float32)
    error = _refusal(kernel, x, True, 64, 32)
    assert "Type of `tv` depends on path taken" in error.message
    assert error.location.line == _line(kernel, "tv = x.tiled_view(TILE_B)")
    assert not x.any()


def test_what_has_one_type_on_every_path_runs():
    def kernel(x, cond: bool, TILE: ct.Constant[int], FLAG: ct.Constant[int]):
        if cond:
            tv = x.tiled_view(TILE)
            a = 1
        else:
            tv = x.tiled_view(TILE)
            a = 2
        if FLAG == 1:   # (a constant condition: cuTile keeps one side)
            b = 3
        else:
            b = 4.0
        unused = 1 if cond else 2.0   # (never read: cuTile does not object)
        if ct.bid(0) == 0:
            c = 1
        else:
            c = 2.0   # (never read after the if)
        tv.store(0, ct.full(TILE, 1.0, ct.float32) * a + b)

    x = np.zeros(64, np.float32)
    interpret(kernel, x, True, 64, 1, grid=(1,))
    assert (x == 4.0).all()


def test_an_if_expression_on_a_run_time_condition_with_two_types():
    @ct.kernel
    def k(x, condition0: bool, tile: ct.Constant[int]):
        i = ct.bid(0)
        xi = ct.load(x, index=(i,), shape=(tile,))
        xi = condition0 if condition0 else xi - 1
        ct.store(x, index=(i,), tile=xi)

    x = np.zeros(256, np.float32)
    for flag in (True, False):   # (cuTile 1.7 refuses it whichever value the run has)
        error = _refusal(k, x, flag, 128)
        assert error.message == (
            "Type of `condition0 if condition0 else xi - 1` depends on path taken: "
            f"Tile[float32,(128)] (line {_line(k._pyfunc, 'xi = condition0')}) vs. "
            f"Tile[bool_,()] (line {_line(k._pyfunc, 'xi = condition0')})")
        assert error.location.line == _line(k._pyfunc, "xi = condition0")
    assert not x.any()


def test_an_if_expression_of_a_tile_or_a_constant_and_of_int_or_float():
    @ct.kernel
    def tile_or_constant(x, tile: ct.Constant[int]):
        xi = ct.load(x, index=(0,), shape=(tile,))
        v = xi if ct.bid(0) > 0 else 2.0
        ct.store(x, (0,), v)

    @ct.kernel
    def int_or_float(x, c: bool):
        ct.scatter(x, 0, (1 if c else 2.0) + 1)

    x = np.zeros(128, np.float32)
    assert "Tile[float32,()]" in _refusal(tile_or_constant, x, 128).message
    assert "Tile[float32,()] (line" in _refusal(int_or_float, x, True).message


def test_if_expressions_cutile_compiles_run():
    @ct.kernel
    def k(x, c: bool):
        v = 1 if c else 2                      # one type
        w = 1 if True else 2.0                 # a constant condition: folded
        unused = 1 if c else 2.0               # never used: cuTile drops it
        s = ct.bid(0) + 1.5 if c else 0.0      # float32 scalars on both sides
        ct.scatter(x, 0, v + w + s)

    x = np.zeros(1, np.float32)
    interpret(k, x, True, grid=(1,))
    assert x.tolist() == [3.5]


def test_a_helper_returning_a_value_on_a_run_time_path_and_none_at_its_end():
    def fib_above(n):
        a, b = 1, 1
        for i in range(n):
            a, b = b, a + b
            if b > n:
                return b

    def fib_above_forever(n):                      # (never reaches its end)
        a, b = 1, 1
        while True:
            a, b = b, a + b
            if b > n:
                return b

    @ct.kernel
    def refused(n, y):
        n = ct.load(n, index=(0,), shape=(1,))
        ct.store(y, (0,), ct.full((1,), fib_above(n.item()), dtype=ct.int32))

    @ct.kernel
    def runs(n, y):
        n = ct.load(n, index=(0,), shape=(1,))
        ct.store(y, (0,), ct.full((1,), fib_above_forever(n.item()), dtype=ct.int32))

    n, y = np.array([15], np.int32), np.zeros(1, np.int32)
    error = _refusal(refused, n, y)
    assert error.message.startswith(
        f"Type of return value depends on path taken: None (line {_line(fib_above, 'def')})"
        f" vs. the type of `b` (line {_line(fib_above, 'return b')})")
    interpret(runs, n, y, grid=(1,))
    assert y.tolist() == [21]
