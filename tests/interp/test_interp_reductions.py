"""Reductions and scans against numpy (tree order in the tile's dtype)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import cuda.tile as ct
from tilelab.errors import CompileError

from .harness import fast, run_tiles

SHAPES = st.sampled_from([(8,), (4, 4), (2, 4, 2), (1, 8)])


def _tree_sum(a: np.ndarray, axis: int, dtype) -> np.ndarray:
    """Pairwise halves, rounding to ``dtype`` at every step (the interpreter's order)."""
    a = np.moveaxis(a, axis, 0)
    while a.shape[0] > 1:
        h = a.shape[0] // 2
        exact = a[:h].astype(np.float64) + a[h:].astype(np.float64)
        a = exact.astype(np.float32).astype(dtype)
    return a[0]


@fast(25)
@given(data=st.data(), shape=SHAPES,
       dtype=st.sampled_from([np.float16, ml_dtypes.bfloat16, np.float32]))
def test_float_sum_follows_tree_order(data, shape, dtype):
    a = data.draw(hnp.arrays(np.float32, shape, elements=st.floats(-100, 100, width=32))
                  ).astype(dtype)
    axis = data.draw(st.integers(0, len(shape) - 1))
    got = run_tiles(lambda t: ct.sum(t, axis), a)
    assert got.dtype == getattr(ct, np.dtype(dtype).name)
    assert np.array_equal(got.numpy(), _tree_sum(a, axis, dtype))


@fast(25)
@given(data=st.data(), shape=SHAPES,
       dtype=st.sampled_from([np.int8, np.int32, np.uint16, np.int64]))
def test_integer_reductions_are_exact_and_wrap(data, shape, dtype):
    a = data.draw(hnp.arrays(dtype, shape))
    axes = None if data.draw(st.booleans()) else data.draw(st.integers(0, len(shape) - 1))
    keep = data.draw(st.booleans())
    for fn, ref in ((ct.sum, np.sum), (ct.prod, np.prod), (ct.max, np.max), (ct.min, np.min)):
        got = run_tiles(lambda t: fn(t, axes, keepdims=keep), a).numpy()
        with np.errstate(all="ignore"):
            exp = ref(a, axis=axes, keepdims=keep).astype(dtype)
        assert np.array_equal(got, exp), fn


def test_reduce_over_tuple_of_axes_and_bool_input():
    a = np.arange(16, dtype=np.int32).reshape(2, 2, 4)
    assert run_tiles(lambda t: ct.sum(t, (0, 2)), a).numpy().tolist() == \
        a.sum(axis=(0, 2)).tolist()
    b = np.array([True, False, True, True])
    r = run_tiles(lambda t: ct.sum(t), b)
    assert r.dtype == ct.int32 and int(r.numpy()) == 3
    with pytest.raises(CompileError, match="Repeated reduction axis"):
        run_tiles(lambda t: ct.sum(t, (0, 0)), a)


def test_max_min_nan_handling():
    a = np.array([[1.0, np.nan, 3.0, -np.inf], [np.nan, np.nan, np.nan, np.nan]], np.float32)
    assert np.array_equal(run_tiles(lambda t: ct.max(t, 1), a).numpy(), [3.0, np.nan],
                          equal_nan=True)
    assert np.array_equal(run_tiles(lambda t: ct.max(t, 1, propagate_nan=True), a).numpy(),
                          [np.nan, np.nan], equal_nan=True)
    assert run_tiles(lambda t: ct.min(t, 1), a).numpy()[0] == -np.inf


def test_argmax_argmin_ties_and_nans():
    a = np.array([[0, 3, 3, 1], [2, 2, 2, 2]], np.int32)
    assert run_tiles(lambda t: ct.argmax(t, 1), a).numpy().tolist() == [1, 0]
    assert run_tiles(lambda t: ct.argmin(t, 1), a).numpy().tolist() == [0, 0]
    assert int(run_tiles(lambda t: ct.argmax(t), a).numpy()) == 1
    assert run_tiles(lambda t: ct.argmax(t, keepdims=True), a).shape == (1, 1)
    f = np.array([1.0, np.nan, 5.0, np.nan], np.float32)
    assert int(run_tiles(lambda t: ct.argmax(t), f).numpy()) == 2
    assert int(run_tiles(lambda t: ct.argmax(t, propagate_nan=True), f).numpy()) == 1
    assert int(run_tiles(lambda t: ct.argmin(t), f).numpy()) == 0
    with pytest.raises(CompileError, match="tuple of axes is not supported"):
        run_tiles(lambda t: ct.argmax(t, (0, 1)), a)


@fast(20)
@given(data=st.data(), shape=SHAPES)
def test_custom_reduce_matches_builtin(data, shape):
    a = data.draw(hnp.arrays(np.int32, shape, elements=st.integers(-1000, 1000)))
    axis = data.draw(st.integers(0, len(shape) - 1))
    got = run_tiles(lambda t: ct.reduce(t, axis, lambda x, y: ct.maximum(x, y), -2**31), a)
    assert np.array_equal(got.numpy(), a.max(axis=axis))
    s, m = run_tiles(lambda t: ct.reduce((t, t), axis, lambda a1, b1, a2, b2: (a1 + a2,
                                                                               ct.minimum(b1, b2)),
                                         (0, 2**31 - 1), keepdims=True), a)
    assert np.array_equal(s.numpy(), a.sum(axis=axis, keepdims=True))
    assert np.array_equal(m.numpy(), a.min(axis=axis, keepdims=True))


def test_custom_reduce_body_rules():
    a = np.arange(4, dtype=np.int32)
    with pytest.raises(CompileError, match="Branching inside reduction body is not supported"):
        run_tiles(lambda t: ct.reduce(t, 0, lambda x, y: x if x > y else y, 0), a)
    with pytest.raises(CompileError, match="must return a tuple of 2 values"):
        run_tiles(lambda t: ct.reduce((t, t), 0, lambda a1, b1, a2, b2: (a1,), (0, 0)), a)
    with pytest.raises(CompileError, match="unexpected dtype"):
        run_tiles(lambda t: ct.reduce(t, 0, lambda x, y: x + y + 0.5, 0), a)


@fast(25)
@given(data=st.data(), shape=SHAPES, reverse=st.booleans())
def test_cumsum_cumprod_and_scan(data, shape, reverse):
    a = data.draw(hnp.arrays(np.int64, shape, elements=st.integers(-50, 50)))
    axis = data.draw(st.integers(0, len(shape) - 1))

    def ref(fn):
        x = np.flip(a, axis) if reverse else a
        r = fn(x, axis=axis)
        return np.flip(r, axis) if reverse else r

    got = run_tiles(lambda t: ct.cumsum(t, axis, reverse=reverse), a).numpy()
    assert np.array_equal(got, ref(np.cumsum))
    got = run_tiles(lambda t: ct.cumprod(t, axis, reverse=reverse), a).numpy()
    with np.errstate(all="ignore"):
        assert np.array_equal(got, ref(np.cumprod))
    got = run_tiles(lambda t: ct.scan(t, axis, lambda x, y: ct.maximum(x, y), -10**9,
                                      reverse=reverse), a).numpy()
    assert np.array_equal(got, ref(np.maximum.accumulate))


def test_float_cumsum_and_errors():
    a = np.arange(8, dtype=np.float32) / 4
    assert np.allclose(run_tiles(lambda t: ct.cumsum(t), a).numpy(), np.cumsum(a))
    with pytest.raises(CompileError, match="Non-arithmetic dtype"):
        run_tiles(lambda t: ct.cumsum(t), np.ones(4, ml_dtypes.float8_e5m2))
    with pytest.raises(CompileError, match="out of range"):
        run_tiles(lambda t: ct.sum(t, 2), a)
