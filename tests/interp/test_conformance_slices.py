"""``Array.slice`` with constant bounds has a compile-time extent (issue #41, cause 3).

cuTile types ``x.slice(axis, start, stop)`` with ``stop - start`` as the static extent
of the axis when both bounds are compile-time constants (Python ints, or constant
scalars such as ``ct.astype(8, ct.int64)``), so ``static_assert`` and load shapes can use
it; run-time bounds keep the axis dynamic.
"""
from __future__ import annotations

import numpy as np
import pytest

import cuda.tile as ct
from tilelab.errors import CompileError
from tilelab.interp import interpret


def test_constant_bounds_give_a_static_extent_usable_as_a_tile_shape():
    @ct.kernel
    def k(x, y):
        sub = x.slice(axis=0, start=0, stop=16)
        n = sub.shape[0]
        ct.static_assert(n == 16)
        ct.store(y, (0,), ct.load(sub, (0,), (n,)))

    x = np.arange(32, dtype=np.float32)
    y = np.zeros_like(x)
    interpret(k, x, y, grid=(1,))
    assert y[:16].tolist() == x[:16].tolist() and not y[16:].any()


def test_constant_scalar_bounds_and_chained_slices_stay_static():
    @ct.kernel
    def k(x, y):
        a = x.slice(axis=0, start=4, stop=16)
        b = a.slice(axis=0, start=2, stop=ct.astype(10, ct.int64))
        ct.static_assert(b.shape[0] == 8)
        ct.store(y, (0,), ct.load(b, (0,), (b.shape[0],)))

    x = np.arange(20, dtype=np.int32)
    y = np.zeros(8, np.int32)
    interpret(k, x, y, grid=(1,))
    assert y.tolist() == list(range(6, 14))


def test_other_axes_keep_their_kind():
    @ct.kernel
    def k(x, out):
        s = x.slice(axis=1, start=1, stop=3)
        ct.static_assert(s.shape[1] == 2)
        ct.scatter(out, 0, s.shape[0])      # a run-time int32 scalar, as before

    out = np.zeros(1, np.int32)
    interpret(k, np.zeros((5, 4), np.float32), out, grid=(1,))
    assert out.tolist() == [5]


def test_run_time_bounds_keep_the_extent_dynamic():
    @ct.kernel
    def k(x, start: int, stop: int):
        y = x.slice(axis=0, start=start, stop=stop)
        ct.static_assert(y.shape[0] == 14)

    with pytest.raises(CompileError, match="static_assert"):
        interpret(k, np.zeros(32, np.int32), 2, 16, grid=(1,))


def test_constant_bounds_are_checked_whatever_their_spelling():
    @ct.kernel
    def k(x):
        x.slice(axis=0, start=ct.int8(5), stop=3)

    with pytest.raises(CompileError, match="Slice stop must be greater than or equal to start"):
        interpret(k, np.zeros(10, np.float32), grid=(1,))


def test_a_float_bound_is_refused_in_cutiles_words():
    @ct.kernel
    def k(x):
        x.slice(axis=0, start=1.0, stop=5)

    with pytest.raises(CompileError, match="Expected a signed integer scalar, but got "
                                           r"Tile\[float32,\(\)\]"):
        interpret(k, np.zeros(10, np.float32), grid=(1,))


def test_an_axis_out_of_range_is_refused_in_cutiles_words():
    @ct.kernel
    def k(x):
        x.slice(axis=1, start=0, stop=5)

    with pytest.raises(CompileError, match="Axis 1 is out of range for rank 1'"):
        interpret(k, np.zeros(10, np.float32), grid=(1,))


def test_an_array_reads_as_cutiles_type_inside_a_kernel():
    seen = []

    @ct.kernel
    def k(x, s):
        seen.append(repr(x))
        seen.append(repr(x.slice(axis=1, start=0, stop=2)))
        seen.append(f"{s}")

    interpret(k, np.zeros((3, 4), np.float32), np.zeros((), np.int32), grid=(1,))
    assert seen == ["<array[float32, (?, ?)]>", "<array[float32, (?, 2)]>",
                    "<array[int32, ()]>"]


def test_a_tile_of_an_empty_slice_is_undefined_behaviour_and_refused():
    """An empty slice (start == stop) is a valid array, but every tile of it lies
    entirely outside it, which cuTile documents as undefined ("If the tile lies entirely
    outside the array, the behavior is undefined"): the interpreter refuses the load
    with a LaunchError (a deliberate difference, listed in docs/interp.md), even where
    a GPU happens to leave the output untouched."""
    from tilelab.errors import LaunchError

    @ct.kernel
    def k(x, y, start: int, stop: int):
        tile = ct.load(x.slice(0, start, stop), index=(0,), shape=(8,))
        ct.store(y.slice(0, start, stop), index=(0,), tile=tile)

    x = np.arange(16, dtype=np.int32)
    y = np.zeros_like(x)
    with pytest.raises(LaunchError, match=r"ct.load: the tile at element offset \(0,\) "
                                          r"with shape \(8,\) lies entirely outside array "
                                          r"'x' of shape \(0,\); cuTile leaves this "
                                          r"undefined") as e:
        interpret(k, x, y, 4, 4, grid=(1,))
    assert not isinstance(e.value, CompileError)   # undefined behaviour, not a refusal
    assert not y.any()
    interpret(k, x, y, 4, 5, grid=(1,))            # one element: defined, runs
    assert y.tolist() == [0] * 4 + [4] + [0] * 11
