"""The CPU interpreter against the GPU on the semantics it models: full-precision fp32
MMA (tf32 only for operands cast to ct.tfloat32), raw-memory atomics, and a split-K GEMM
serialised by a spin lock per tile. The kernels are the interpreter tests' own, launched
unmodified with ``ct.launch`` on torch tensors."""
from __future__ import annotations

import numpy as np
import pytest

import cuda.tile as ct

torch = pytest.importorskip("torch", reason="the GPU agreement tests launch on torch tensors")
from interp import test_interp_fidelity as F  # noqa: E402

from tilelab.interp import interpret  # noqa: E402


def _launch(kernel, grid, *args):
    ct.launch(torch.cuda.current_stream(), grid, kernel, args)
    torch.cuda.synchronize()


def _gpu(a: np.ndarray):
    return torch.from_numpy(np.ascontiguousarray(a)).cuda()


@pytest.mark.parametrize("m,n,k", [(64, 64, 64), (100, 70, 300), (33, 129, 1000)])
def test_float32_mma_matches_the_gpu_at_1e_5(m, n, k):
    rng = np.random.default_rng(m * n + k)
    A = rng.standard_normal((m, k)).astype(np.float32)
    B = rng.standard_normal((k, n)).astype(np.float32)
    grid = (-(-m // 32), -(-n // 32), 1)
    C_gpu = torch.zeros((m, n), device="cuda")
    _launch(F.gemm_f32, grid, _gpu(A), _gpu(B), C_gpu, 32, 32, 16, False)
    C_cpu = np.zeros((m, n), np.float32)
    interpret(F.gemm_f32, A, B, C_cpu, 32, 32, 16, False, grid=grid[:2])
    ref = A.astype(np.float64) @ B.astype(np.float64)
    np.testing.assert_allclose(C_gpu.cpu().numpy(), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(C_cpu, C_gpu.cpu().numpy(), rtol=1e-5, atol=1e-5)


def test_tf32_only_when_cast_on_both():
    rng = np.random.default_rng(7)
    A = rng.standard_normal((64, 256)).astype(np.float32)
    B = rng.standard_normal((256, 32)).astype(np.float32)
    full = A.astype(np.float64) @ B.astype(np.float64)
    C_gpu = torch.zeros((64, 32), device="cuda")
    _launch(F.gemm_f32, (2, 1, 1), _gpu(A), _gpu(B), C_gpu, 32, 32, 32, True)
    C_cpu = np.zeros((64, 32), np.float32)
    interpret(F.gemm_f32, A, B, C_cpu, 32, 32, 32, True, grid=(2, 1))
    g = C_gpu.cpu().numpy()
    scale = np.max(np.abs(full))
    assert 1e-5 < np.max(np.abs(g - full)) / scale < 1e-2       # the GPU rounds to tf32
    assert np.max(np.abs(C_cpu - g)) / scale < 1e-4            # and so does the CPU


def test_raw_memory_atomic_histogram_matches():
    vals = np.random.default_rng(0).integers(0, 16, 1000).astype(np.int32)
    bins = torch.zeros(16, dtype=torch.int32, device="cuda")
    _launch(F.histogram, (8, 1, 1), _gpu(vals), bins, 128)
    assert np.array_equal(bins.cpu().numpy(), np.bincount(vals, minlength=16))


def test_lock_based_split_k_gives_the_right_sums():
    rng = np.random.default_rng(5)
    A = rng.standard_normal((64, 200)).astype(np.float32)
    B = rng.standard_normal((200, 48)).astype(np.float32)
    C = torch.zeros((64, 48), device="cuda")
    locks = torch.zeros(6, dtype=torch.int32, device="cuda")
    _launch(F.splitk_gemm, (2, 3, 4), _gpu(A), _gpu(B), C, locks, 32, 16, 16, 4, True)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    np.testing.assert_allclose(C.cpu().numpy(), ref, rtol=1e-5, atol=1e-5)
    assert not locks.cpu().numpy().any()
