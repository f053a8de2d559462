"""The library's defaults on the GPU, for the configurations the benchmarks chose: the
k/v projection's swapped and narrow deep GEMM tiles, RoPE's occupancy hint, softmax's split and
one-row kernels (TMA loads unless a row is padded) and persistent flash attention, each
against a float64 reference on fresh random data."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import tilelab as tl
from tilelab.kernels import reference as ref
from tilelab.kernels.reference.matmul import attention_ref

mm = importlib.import_module("tilelab.kernels.matmul")
rp = importlib.import_module("tilelab.kernels.rope")
sm = importlib.import_module("tilelab.kernels.softmax")


def rel_err(out, want) -> float:
    out = np.asarray(out, np.float64)
    assert not np.isnan(out).any(), "NaN in output"
    return float(np.linalg.norm(out - want) / np.linalg.norm(want))


@pytest.mark.parametrize("m", [1, 5, 16, 128])
@pytest.mark.parametrize("weight_rows", [False, True], ids=["b_kn", "b_is_w_T"])
def test_kv_projection_defaults(m, weight_rows):
    """N = 1024, K = 4096: 16-column GEMV panels at M = 1, 16x64x512 tiles computed
    transposed (swap_ab) up to M = 16, 64x32x256 tiles above; B as a (K, N) matrix and
    as the transposed view of an (N, K) weight."""
    cfg = mm.default_config(m, 1024, 4096)
    assert (cfg.tn, cfg.tk, cfg.swap_ab) == ((16, 1024, False) if m == 1 else
                                            (64, 512, True) if m <= 16 else (32, 256, False))
    a = tl.randn(m, 4096, dtype="bfloat16", device="cuda")
    if weight_rows:
        w = tl.randn(1024, 4096, dtype="bfloat16", device="cuda")
        b, bh = w.T, w.numpy().astype(np.float64).T
    else:
        b = tl.randn(4096, 1024, dtype="bfloat16", device="cuda")
        bh = b.numpy().astype(np.float64)
    c = tl.full((m, 1024), float("nan"), dtype="bfloat16", device="cuda")
    mm.matmul(a, b, out=c)
    want = a.numpy().astype(np.float64) @ bh
    assert rel_err(c.numpy(), want) < 1e-2


def test_apply_rope_with_its_occupancy_hint():
    x = tl.randn(300, 32, 128, dtype="bfloat16", device="cuda")
    cos, sin = rp.rope_tables(512, 128, device="cuda")
    call = rp._rope_call("apply_rope", x, None, cos, sin, None, None, False, None)
    assert call.kernel.options.occupancy == 8
    out = rp.apply_rope(x, cos, sin)
    assert rel_err(out.numpy(), ref.apply_rope(x, cos, sin)) < 1e-2


@pytest.mark.parametrize("shape", [(257, 8192), (33, 6144), (9, 5000), (300, 1000),
                                   (70, 16384), (35, 32768)])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_split_and_rows(shape, log):
    """8192 and 6144 run as 64/32 sub-rows (6144's padded), 5000 as 8 padded sub-rows,
    1000 as whole padded rows, 16384 and 32768 as 128/256 sub-rows under occupancy 2 and
    occupancy 1 with 8 worker warps; against float64 on the GPU."""
    x = tl.randn(*shape, dtype="bfloat16", device="cuda")
    y = (sm.log_softmax if log else sm.softmax)(x)
    want = (ref.log_softmax if log else ref.softmax)(x)
    assert rel_err(y.numpy(), want) < 1e-2


def test_softmax_split_masked_rows():
    """-inf sub-rows add nothing, an all -inf row is NaN (as in torch)."""
    a = np.random.default_rng(5).standard_normal((4, 8192)).astype(np.float32) * 3
    a[0, :4000] = -np.inf
    a[3, :] = -np.inf
    y = sm.softmax(tl.tensor(a, device="cuda")).numpy()
    assert np.isnan(y[3]).all() and not np.isnan(y[:3]).any()
    assert rel_err(y[:3], ref.softmax(a[:3])) < 1e-5


@pytest.mark.parametrize("sq,skv,hkv", [(4096, 4096, 4), (4100, 4100, 1), (300, 4500, 2)],
                         ids=["square", "ragged_mqa", "cross_gqa"])
def test_persistent_attention_default(sq, skv, hkv):
    """From 4096 keys, non-causal attention runs the persistent warp-specialized kernel
    (one block per SM, each walking query tiles; ragged tails masked); against float64."""
    at = importlib.import_module("tilelab.kernels.attention")
    assert at.default_attention_config(128, kv_len=skv).persistent
    q = tl.randn(1, 4, sq, 128, dtype="bfloat16", device="cuda")
    k, v = (tl.randn(1, hkv, skv, 128, dtype="bfloat16", device="cuda") for _ in range(2))
    plan = at.plan_attention(q, k, v)
    assert plan.launches[0][0].name == "persistent_attention_kernel"
    out = at.attention(q, k, v)
    assert rel_err(out.numpy(), attention_ref(q, k, v)) < 1e-2


red = importlib.import_module("tilelab.kernels.reduce")
nm = importlib.import_module("tilelab.kernels.norms")


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("shape", [(257, 8192), (33, 20000)])
def test_row_reductions_with_occupancy_8(shape, dtype):
    """The looped reductions under their occupancy hint (8), against float64."""
    x = tl.randn(*shape, dtype=dtype, device="cuda")
    assert red._reduce_call("sum", x).kernel.options.occupancy == 8
    tol = 1e-2 if dtype == "bfloat16" else 1e-5
    for name in ("row_sum", "row_mean", "row_max", "row_min"):
        got = getattr(red, name)(x).numpy()
        assert rel_err(got, getattr(ref, name)(x)) < tol, name
    values, indices = red.row_argmax(x)
    want_v, want_i = ref.row_argmax(x)
    np.testing.assert_array_equal(indices.numpy(), want_i)
    assert rel_err(values.numpy(), want_v) < tol


@pytest.mark.parametrize("n", [16384, 32768])
def test_rms_norm_of_long_16bit_rows_in_one_pass(n):
    """RMSNorm of bf16 rows of 16384/32768 as one tile of sub-rows (occupancy 2; 1 with
    8 worker warps), against float64."""
    x = tl.randn(37, n, dtype="bfloat16", device="cuda")
    w = tl.randn(n, dtype="bfloat16", device="cuda")
    call = nm._norm_call("rms_norm", x, w, None, None, 1e-6, True, None, None, None)
    assert call.kernel.__wrapped__ is nm.rms_split_kernel.__wrapped__
    assert rel_err(nm.rms_norm(x, w).numpy(), ref.rms_norm(x, w)) < 1e-2


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_long_rows_online_softmax_and_looped_norms(dtype):
    """Rows of 20000 (past one tile): the online softmax and the looped norms under
    their occupancy hints (8; 4 for layer norm and float32 softmax), against float64."""
    x = tl.randn(37, 20000, dtype=dtype, device="cuda")
    r = tl.randn(37, 20000, dtype=dtype, device="cuda")
    w = tl.randn(20000, dtype=dtype, device="cuda")
    b = tl.randn(20000, dtype=dtype, device="cuda")
    assert sm._softmax_call(x).kernel.options.occupancy == (4 if dtype == "float32" else 8)
    assert nm._norm_call("layer_norm", x, w, b, None, 1e-5, False, None, None,
                         None).kernel.options.occupancy == 4
    tol = 1e-2 if dtype == "bfloat16" else 1e-5
    assert rel_err(sm.softmax(x).numpy(), ref.softmax(x)) < tol
    assert rel_err(sm.log_softmax(x).numpy(), ref.log_softmax(x)) < tol
    assert rel_err(nm.rms_norm(x, w).numpy(), ref.rms_norm(x, w)) < tol
    assert rel_err(nm.layer_norm(x, w, b).numpy(), ref.layer_norm(x, w, b)) < tol
    y, h = nm.add_rms_norm(x, r, w)
    want_y, want_h = ref.add_rms_norm(x, r, w)
    assert rel_err(h.numpy(), want_h) < tol
    assert rel_err(y.numpy(), want_y) < tol


at = importlib.import_module("tilelab.kernels.attention")


@pytest.mark.parametrize("bsz,cache,kv_len", [(2, 4096, 4096), (3, 5000, 4321), (1, 300, 1)])
def test_decode_attention_default_with_occupancy_4(bsz, cache, kv_len):
    """Split-KV decode under its default occupancy hint (4), GQA 32/8, ragged kv_len,
    against float64."""
    from tilelab.kernels.reference.matmul import decode_attention_ref

    assert at.default_decode_config().occupancy == 4
    q = tl.randn(bsz, 32, 128, dtype="bfloat16", device="cuda")
    k = tl.randn(bsz, 8, cache, 128, dtype="bfloat16", device="cuda")
    v = tl.randn(bsz, 8, cache, 128, dtype="bfloat16", device="cuda")
    out = at.decode_attention(q, k, v, kv_len=kv_len)
    assert rel_err(out.numpy(), decode_attention_ref(q, k, v, kv_len=kv_len)) < 1e-2
