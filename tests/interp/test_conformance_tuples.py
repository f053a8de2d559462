"""Tuple operations cuTile does not compile are refused from the source (issue #41, cause 2).

Each refused kernel below is refused by cuTile 1.7's compiler with the same words (checked
by compiling it for sm_90); the interpreter refuses it before any of it runs, also when
the offending line is on a path no block takes. The kernels that run are ones cuTile
compiles: constant indices (a ``ct.static_iter`` loop variable), comparisons of scalars,
tuples of different lengths, constant tuples.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import cuda.tile as ct
from tilelab.errors import CompileError
from tilelab.interp import interpret


def _refused(kernel, *args, match: str) -> CompileError:
    with pytest.raises(CompileError) as e:
        interpret(kernel, *args, grid=(1,))
    assert re.search(match, e.value.message), e.value.message
    assert isinstance(e.value, ct.TileTypeError)
    assert e.value.location is not None and e.value.location.line > 0
    return e.value


def test_a_run_time_tuple_index_is_refused():
    @ct.kernel
    def k(x):
        t = (1, 2, 3)
        ct.scatter(x, 0, t[ct.bid(0)])

    x = np.zeros(1, np.int32)
    e = _refused(k, x, match="^Tuple indices must be constant$")
    assert e.location.line == k._pyfunc.__code__.co_firstlineno + 3
    assert x.tolist() == [0]


def test_a_run_time_index_of_an_array_shape_is_refused_on_a_path_not_taken():
    @ct.kernel
    def k(x, flag: bool):
        i = ct.bid(0)
        if flag:
            ct.scatter(x, 0, x.shape[i])

    _refused(k, np.zeros(4, np.int32), False, match="Tuple indices must be constant")


def test_indices_that_are_no_integer_scalars_are_refused_with_their_types():
    @ct.kernel
    def by_float():
        t = (1, 2, 3)
        t[1.0]

    @ct.kernel
    def by_tile():
        t = (1, 2, 3)
        i = ct.ones((2,), dtype=ct.int32)
        t[i]

    @ct.kernel
    def by_tuple():
        t = (1, 2, 3)
        t[(4, 5)]

    _refused(by_float, match=r"Tuple indices must be integers or slices, not "
                             r"Tile\[float32,\(\)\]")
    _refused(by_tile, match=r"not Tile\[int32,\(2\)\]")
    _refused(by_tuple, match=r"not Tuple\[Tile\[int32,\(\)\],Tile\[int32,\(\)\]\]")


def test_item_assignment_and_starred_tiles_are_refused():
    def helper(*items):
        pass

    @ct.kernel
    def assign():
        t = (1, 2, 3)
        t[0] = 7

    @ct.kernel
    def starred():
        tile = ct.ones((4,), dtype=ct.int32)
        helper(*tile)

    _refused(assign, match=r"^Tuples are immutable: item assignment is not supported\.$")
    _refused(starred, match=r"Expected a tuple after \*, got Tile\[int32,\(4\)\]")


def test_ordering_tuples_is_refused():
    @ct.kernel
    def k():
        if (1, 2) < (3, 4):
            pass

    _refused(k, match="^Operator '<' is not supported for tuples$")


def test_comparing_tuples_of_tiles_or_arrays_is_refused():
    @ct.kernel
    def tiles():
        t = ct.ones((4,), dtype=ct.int32)
        if (t,) == (t,):
            pass

    @ct.kernel
    def arrays(x, y):
        if (x,) == (y,):
            pass

    _refused(tiles, match="^Tuple comparison is not supported for non-scalar elements$")
    x = np.zeros(4, np.int32)
    _refused(arrays, x, x.copy(),
             match=r"Tuple comparison is not supported for elements of type "
                   r"Array\[int32,\(\?\):\(\?\)\]")


def test_in_with_a_non_scalar_operand_is_refused():
    @ct.kernel
    def needle():
        ct.ones((4,), dtype=ct.int32) in (1, 2)

    @ct.kernel
    def middle():
        2 in (1, ct.ones((4,), dtype=ct.int32), 2)

    _refused(needle, match=r"'in' requires scalar operands, but got shape \(4,\)")
    _refused(middle, match=r"'in' requires scalar operands, but got shape \(4,\)")


def test_a_run_time_condition_in_a_tuple_comprehension_is_refused():
    @ct.kernel
    def k(x, y, cond: bool):
        tiles = tuple(ct.load(x, (i,), (16,)) for i in ct.static_iter(range(3)))
        result = tuple(t for i, t in ct.static_iter(enumerate(tiles)) if cond)
        for i, t in ct.static_iter(enumerate(result)):
            ct.store(y, (i,), t)

    x = np.arange(48, dtype=np.int32)
    _refused(k, x, np.zeros(48, np.int32), True,
             match="Tuple comprehension if-conditions must be statically known; if the "
                   "condition can be evaluated at compile time, wrap it with "
                   r"ct.static_eval\(\)")


def test_what_cutile_compiles_runs():
    @ct.kernel
    def k(x, M: ct.Constant[int]):
        a = ct.bid(0)
        t = (10, 20, 30)
        for i in ct.static_iter(range(3)):
            ct.scatter(x, i, t[i])                      # constant index
        if ((a, 1), 2) == ((0, 1), 2):                  # scalars, run-time: compiled
            ct.scatter(x, 3, 1)
        tile = ct.ones((4,), dtype=ct.int32)
        if (a, 1) == (1,):                              # lengths differ: a constant
            ct.scatter(x, 4, 1)
        if (M, 2) == (4, 2):                            # constants: folded
            ct.scatter(x, 5, 1)
        if 2 in (2, tile):                              # a constant match first
            ct.scatter(x, 6, 1)
        ct.scatter(x, 7, t[M - 3])                      # a constant expression
        ct.scatter(x, 8, t[1:][0])                      # a slice

    x = np.zeros(9, np.int32)
    interpret(k, x, 4, grid=(1,))
    assert x.tolist() == [10, 20, 30, 1, 0, 1, 1, 20, 20]


@pytest.mark.parametrize("module", ["static_types", "tuple_rules", "call_rules",
                                    "undefined_rules", "path_types", "grid_rules"])
def test_the_front_end_rule_modules_examples(module):
    import doctest
    import importlib
    m = importlib.import_module(f"tilelab.interp.frontend.{module}")
    assert doctest.testmod(m, optionflags=doctest.NORMALIZE_WHITESPACE).failed == 0
