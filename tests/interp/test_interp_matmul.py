"""mma / matmul / mma_scaled numerics and typing."""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cuda.tile as ct
from tilelab.errors import CompileError

from .harness import fast, run_tiles


def _tf32(a: np.ndarray) -> np.ndarray:
    """Round to nearest even at 10 mantissa bits (``astype(ct.tfloat32)``)."""
    bits = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    lsb = (bits >> 13) & 1
    return (((bits + 0xFFF + lsb) & 0xFFFFE000).astype(np.uint32)).view(np.float32)


@fast(15)
@given(seed=st.integers(0, 2**16), dt=st.sampled_from(
    [ml_dtypes.bfloat16, np.float16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2]),
       m=st.sampled_from([1, 4, 16]), n=st.sampled_from([2, 8]), k=st.sampled_from([4, 32]))
def test_low_precision_mma_accumulates_exactly_in_fp32(seed, dt, m, n, k):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)).astype(np.float32).astype(dt)
    y = rng.standard_normal((k, n)).astype(np.float32).astype(dt)
    acc = rng.standard_normal((m, n)).astype(np.float32)
    got = run_tiles(lambda a, b, c: ct.mma(a, b, c), x, y, acc)
    assert got.dtype == ct.float32
    ref = x.astype(np.float64) @ y.astype(np.float64) + acc
    assert np.allclose(got.numpy(), ref, rtol=1e-5, atol=1e-5)


def test_float32_mma_is_full_fp32_and_tf32_only_when_cast():
    # tf32 keeps 10 mantissa bits: 1 + 2**-11 is a tie (to even: 1) and 1 + 2**-12 rounds
    # down to 1; full float32 keeps both: 2 + 2**-11 + 2**-12 is exact in float32.
    x = np.array([[1 + 2**-11, 1 + 2**-12]], np.float32)
    y = np.array([[1.0], [1.0]], np.float32)
    got = run_tiles(lambda a, b: ct.mma(a, b, ct.zeros((1, 1), ct.float32)), x, y)
    assert got.numpy()[0, 0] == 2.0 + 2**-11 + 2**-12
    assert run_tiles(lambda a, b: a @ b, x, y).numpy()[0, 0] == 2.0 + 2**-11 + 2**-12
    tf = run_tiles(lambda a, b: ct.mma(a.astype(ct.tfloat32), b.astype(ct.tfloat32),
                                       ct.zeros((1, 1), ct.float32)), x, y)
    assert tf.dtype == ct.float32
    assert tf.numpy()[0, 0] == np.float32(_tf32(x) @ _tf32(y))[0, 0] == 2.0
    tf_mm = run_tiles(lambda a, b: a.astype(ct.tfloat32) @ b.astype(ct.tfloat32), x, y)
    assert tf_mm.dtype == ct.tfloat32 and tf_mm.astype(ct.float32).numpy()[0, 0] == 2.0


def test_half_accumulator_and_int8_mma():
    x = np.full((2, 4), 0.5, np.float16)
    got = run_tiles(lambda a: ct.mma(a, a.transpose(), ct.ones((2, 2), ct.float16)), x)
    assert got.dtype == ct.float16 and np.all(got.numpy() == 2.0)
    i = np.array([[127, -128], [3, 4]], np.int8)
    u = np.array([[255, 1], [2, 3]], np.uint8)
    got = run_tiles(lambda a, b: ct.mma(a, b, ct.zeros((2, 2), ct.int32)), i, u)
    assert got.dtype == ct.int32
    assert np.array_equal(got.numpy(), i.astype(np.int64) @ u.astype(np.int64))


def test_batched_mma_broadcasts_and_counts_flops():
    x = np.ones((2, 4, 8), np.float32)
    y = np.ones((8, 2), np.float32)
    got = run_tiles(lambda a, b: ct.mma(a, b, ct.zeros((2, 4, 2), ct.float32)), x, y)
    assert got.shape == (2, 4, 2) and np.all(got.numpy() == 8.0)


def test_mma_type_errors():
    a = np.ones((4, 4), np.float32)
    with pytest.raises(CompileError, match="Unsupported acc dtype"):
        run_tiles(lambda t: ct.mma(t, t, ct.zeros((4, 4), ct.float16)), a)
    with pytest.raises(CompileError, match="x and y must have the same dtype"):
        run_tiles(lambda t: ct.mma(t, t.astype(ct.float16), ct.zeros((4, 4), ct.float32)), a)
    with pytest.raises(CompileError, match=re.escape(
            "ct.mma: acc is (2, 4), but x @ y is (4, 4) (M rows of x by N columns of y)")):
        run_tiles(lambda t: ct.mma(t, t, ct.zeros((2, 4), ct.float32)), a)
    with pytest.raises(CompileError, match="at least 2D"):
        run_tiles(lambda t: ct.mma(t.reshape((16,)), t, ct.zeros((4,), ct.float32)), a)
    with pytest.raises(CompileError, match=re.escape(
            "ct.matmul: K differs: x is (4, 4), so K = 4, but y is (2, 8), so K = 2")):
        run_tiles(lambda t: ct.matmul(t, t.reshape((2, 8))), a)
    with pytest.raises(CompileError, match="use_fast_acc is only supported for fp8"):
        run_tiles(lambda t: ct.mma(t, t, ct.zeros((4, 4), ct.float32), use_fast_acc=True), a)


def test_matmul_promotes_and_handles_vectors():
    v = np.arange(4, dtype=np.float16)
    m = np.ones((4, 2), np.float32)
    r = run_tiles(lambda a, b: a @ b, v, m)
    assert r.dtype == ct.float32 and r.shape == (2,) and r.numpy().tolist() == [6.0, 6.0]
    r = run_tiles(lambda a: a @ a, v)
    assert r.shape == () and float(r.numpy()) == 14.0 and r.dtype == ct.float16
    b16 = np.ones((2, 8), ml_dtypes.bfloat16)
    r = run_tiles(lambda a: ct.matmul(a, a.transpose()), b16)
    assert r.dtype == ct.bfloat16 and np.all(r.numpy().astype(np.float32) == 8)


def test_mma_scaled_matches_reference():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 64)).astype(ml_dtypes.float8_e4m3fn)
    y = rng.standard_normal((64, 2)).astype(ml_dtypes.float8_e4m3fn)
    xs = np.array([[2.0, 0.5]] * 4, np.float32).astype(ml_dtypes.float8_e8m0fnu)
    ys = np.array([[4.0, 1.0], [0.25, 2.0]], np.float32).astype(ml_dtypes.float8_e8m0fnu)
    got = run_tiles(lambda a, sa, b, sb: ct.mma_scaled(a, sa, b, sb, ct.zeros((4, 2),
                                                                              ct.float32)),
                    x, xs, y, ys, arch="sm_100")   # (e8m0 scales compile for sm_100 on)
    xf = x.astype(np.float64) * np.repeat(xs.astype(np.float64), 32, axis=1)
    yf = y.astype(np.float64) * np.repeat(ys.astype(np.float64), 32, axis=0)
    assert np.allclose(got.numpy(), xf @ yf, rtol=1e-5)
    with pytest.raises(CompileError, match="scaling block size"):
        run_tiles(lambda a, sa, b, sb: ct.mma_scaled(a, sa, b, sb, ct.zeros((4, 2),
                                                                            ct.float32)),
                  x, np.ones((4, 4), ml_dtypes.float8_e8m0fnu), y, ys, arch="sm_100")
