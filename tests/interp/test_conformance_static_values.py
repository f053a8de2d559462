"""What ``ct.astile`` and ``ct.static_iter`` take, with cuTile 1.7's words (issue #41).

``ct.astile`` makes a tile from a scalar or a nested tuple of scalars: a tile of rank
one or more is refused (``astype`` converts those), and so is a leaf that is no scalar.
``ct.static_iter`` unrolls a compile-time iterable whose items cuTile can hold (numbers,
tuples, tiles...): a list item is refused as cuTile refuses it (``StaticEvalError``), and
so is a ``range`` with a run-time bound (``StaticException``, a ``StaticEvalError``).
Each message is cuTile 1.7's for the same kernel compiled for sm_90.
"""
from __future__ import annotations

import numpy as np
import pytest

import cuda.tile as ct
from tilelab.errors import CompileError
from tilelab.interp import interpret
from tilelab.interp._cutile import exception_classes


def _refusal(kernel, *args) -> CompileError:
    with pytest.raises(CompileError) as info:
        interpret(kernel, *args, grid=(1,))
    assert info.value.location is not None and info.value.location.line > 0
    return info.value


def test_astile_of_a_tile_is_refused():
    @ct.kernel
    def k():
        ct.astile(ct.full((4,), 1, dtype=ct.int32), dtype=ct.int32)

    error = _refusal(k)
    assert error.message == ("Expected a scalar or (possibly nested) tuple of scalars; got "
                             "value of type Tile[int32,(4)]")
    assert isinstance(error, ct.TileTypeError)


def test_astile_of_a_tuple_with_a_string_leaf_is_refused():
    @ct.kernel
    def k(X):
        ct.store(X, (0, 0), ct.astile((1, "a"), dtype=ct.int32))

    error = _refusal(k, np.zeros((2, 2), np.int32))
    assert error.message == ("Expected scalar elements at value[1]; got element of type "
                             "<string constant 'a'>")


def test_astile_of_scalars_runs():
    @ct.kernel
    def k(X):
        ct.store(X, (0, 0), ct.astile(((1, ct.bid(0)), (3.0, 4)), dtype=ct.int32))

    x = np.full((2, 2), 9, np.int32)
    interpret(k, x, grid=(1,))
    assert x.tolist() == [[1, 0], [3, 4]]


def test_a_list_item_of_static_iter_is_refused():
    @ct.kernel
    def k(x):
        for i in ct.static_iter(([1, 2], [3, 4])):
            ct.scatter(x, 0, i)

    error = _refusal(k, np.zeros(1, np.int32))
    assert error.message == ("Invalid item #0 of static_iter() iterable: Cannot create "
                             "constant from value of type list.")
    assert isinstance(error, exception_classes()["StaticEvalError"])


def test_a_run_time_bound_of_static_iter_is_refused():
    @ct.kernel
    def k(x, n):
        for i in ct.static_iter(range(n)):
            ct.scatter(x, i, 1)

    error = _refusal(k, np.zeros(10, np.int32), 3)
    assert error.message == (
        "Exception was raised inside static_iter() iterable (ValueError: Symbolic tile has "
        "no concrete value and thus cannot be converted to an integer)")
    assert isinstance(error, exception_classes()["StaticException"])
    assert isinstance(error, exception_classes()["StaticEvalError"])


def test_static_iter_over_tuples_of_tiles_and_constants_runs():
    @ct.kernel
    def k(x, N: ct.Constant[int]):
        tiles = (ct.full((2,), 5, ct.int32), ct.full((2,), 7, ct.int32))
        for i, t in ct.static_iter(enumerate(tiles)):
            ct.store(x, (i,), t)
        for j in ct.static_iter(range(N)):
            ct.scatter(x, 4 + j, j)
        for pair in ct.static_iter(((1, 2.0), ("a", None))):
            pass

    x = np.zeros(6, np.int32)
    interpret(k, x, 2, grid=(1,))
    assert x.tolist() == [5, 5, 7, 7, 0, 1]


def test_indexing_a_tile_other_than_inserting_axes_is_refused():
    """cuTile's tile subscript takes None or a constant tuple of None, ``...`` and
    ``:`` (it inserts axes); any other key is refused with cuTile 1.7's words."""
    @ct.kernel
    def full_slice(x, y):
        t = ct.load(x, (0, 0), (16, 16))
        ct.store(y, (0, 0), t[:])

    @ct.kernel
    def inserts(x, y):
        t = ct.load(x, (0, 0), (16, 16))
        ct.store(y, (0, 0, 0), t[:, :][..., None])

    x = np.arange(256, dtype=np.float32).reshape(16, 16)
    error = _refusal(full_slice, x, np.zeros_like(x))
    assert error.message == ("Directly indexing a tile is not supported; use `extract()` "
                             "or `item()` instead.")
    y = np.zeros((16, 16, 1), np.float32)
    interpret(inserts, x, y, grid=(1,))
    assert (y[..., 0] == x).all()
