"""Refusals said in cuTile's words where the interpreter had its own (issue #41): a
tiled view's shape of the wrong rank, a repeated axis in a load's order, an axis that
is not an integer constant, and a range() bound that is not a scalar."""
from __future__ import annotations

import numpy as np
import pytest

import cuda.tile as ct
from tilelab.interp import interpret


def _refused(kernel, *args) -> ct.TileTypeError:
    with pytest.raises(ct.TileTypeError) as info:
        interpret(kernel, *args, grid=(1,))
    return info.value


@pytest.mark.parametrize("tile", [(64, 64), (64, 64, 64)])
def test_a_tiled_view_shape_of_another_rank(tile):
    @ct.kernel
    def k(x, TILE: ct.Constant):
        x.tiled_view(TILE)

    err = _refused(k, np.zeros(256, np.float32), tile)
    assert err.message == f"Expected shape length to be 1, got {len(tile)}"


@pytest.mark.parametrize("order, axis", [((1, 1), 1), ((0, -2), 0)])
def test_a_repeated_axis_in_a_load_order(order, axis):
    @ct.kernel
    def k(x, ORDER: ct.Constant):
        ct.load(x, index=(0, 1), shape=(16, 16), order=ORDER)

    err = _refused(k, np.zeros((32, 32), np.float32), order)
    assert err.message == (f"ct.load: Axis order must be a permutation, but axis {axis} is "
                           f"used at least twice")


def test_an_axis_that_is_none():
    @ct.kernel
    def k(x, y):
        t = ct.load(x, index=(0,), shape=(8,))
        ct.store(y, index=(0,), tile=ct.scan(t, axis=None, func=lambda a, b: a + b,
                                             identity=0))

    err = _refused(k, np.zeros(8, np.int32), np.zeros(8, np.int32))
    assert err.message == "axis: Expected an integer constant, but given value has type None"


def test_a_range_bound_that_is_an_array():
    @ct.kernel
    def k(stop):
        for i in range(stop):
            pass

    err = _refused(k, np.zeros(10, np.int32))
    assert err.message == ("range: Expected a scalar value, but given value has type "
                           "Array[int32,(?):(?)]")


def test_a_range_bound_that_is_a_tile():
    @ct.kernel
    def k(x):
        for i in range(ct.load(x, index=(0,), shape=(4,))):
            pass

    err = _refused(k, np.zeros(4, np.int32))
    assert err.message == ("range: Expected a scalar value, but given value has type "
                           "Tile[int32,(4)]")


def test_a_range_bound_that_is_a_float_scalar_is_not_a_signed_integer():
    @ct.kernel
    def k(n):
        for i in range(n):
            pass

    err = _refused(k, 1.5)
    assert "Expected a signed integer scalar" in err.message


@ct.kernel
def _sum_pair(y, addends: tuple[int, int]):
    ct.scatter(y, (), addends[0] + addends[1])


@pytest.mark.parametrize("addends", [(1, 2, 3), (1,)])
def test_a_tuple_argument_of_another_length_than_its_annotation(addends):
    with pytest.raises(TypeError) as info:
        interpret(_sum_pair, np.zeros((), np.int32), addends, grid=(1,))
    assert (f"Received a tuple of length {len(addends)} for a parameter annotated as a "
            f"tuple of length 2") in str(info.value)


def test_a_non_tuple_argument_for_a_tuple_annotation():
    with pytest.raises(TypeError) as info:
        interpret(_sum_pair, np.zeros((), np.int32), 3, grid=(1,))
    assert "Received a non-tuple argument for a parameter annotated as a tuple" in \
        str(info.value)
