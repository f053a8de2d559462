"""Teaching-size speed targets on a 2-core machine (generous, but they catch regressions)."""
from __future__ import annotations

import time

import ml_dtypes
import numpy as np

from tilelab.interp import interpret

from .test_interp_kernels import gemm, vector_add


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def test_vector_add_2_20_under_a_second_and_tracing_under_twice_that():
    n = 1 << 20
    x = np.random.default_rng(0).random(n, dtype=np.float32)
    y = np.random.default_rng(1).random(n, dtype=np.float32)
    z = np.zeros_like(x)
    plain = _timed(lambda: interpret(vector_add, x, y, z, 1024, grid=(n // 1024,), trace=False))
    traced = _timed(lambda: interpret(vector_add, x, y, z, 1024, grid=(n // 1024,)))
    assert np.array_equal(z, x + y)
    assert plain <= 1.0, plain
    assert traced <= 2.0, traced


def test_bf16_gemm_512_under_three_seconds_and_tracing_under_twice_that():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((512, 512)).astype(ml_dtypes.bfloat16)
    B = rng.standard_normal((512, 512)).astype(ml_dtypes.bfloat16)
    C = np.zeros((512, 512), np.float32)
    plain = _timed(lambda: interpret(gemm, A, B, C, 64, 64, 32, grid=(8, 8), trace=False))
    traced = _timed(lambda: interpret(gemm, A, B, C, 64, 64, 32, grid=(8, 8)))
    ref = A.astype(np.float64) @ B.astype(np.float64)
    assert np.max(np.abs(C - ref)) <= 1e-2 * np.max(np.abs(ref))
    assert plain <= 3.0, plain
    assert traced <= 6.0, traced
