"""The decode GEMVs with a fused RMSNorm prologue (``norm_weight=``, ``x2=``) and a
residual pair: against numpy on the CPU interpreter, edge tiles included, and compiled
for sm_90 with their Tile IR validated."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tilelab as tl
from tilelab.kernels.decode.gemv import (GemvConfig, gemv_fused_kernel,
                                         gemv_fused_silu_mul_kernel, gemv_silu_mul,
                                         plan_gemv_silu_mul, plan_row_gemv, row_gemv)

BF16 = ml_dtypes.bfloat16
DEV = "cpu"


def _t(a):
    return tl.tensor(np.asarray(a), device=DEV)


def _f32(t):
    return t.numpy().astype(np.float32)


def _rms(x, g, eps):
    return x / np.sqrt((x * x).mean() + eps) * g


def _close(got, want, tol):
    assert np.abs(got - want).max() <= tol * np.abs(want).max() + tol, \
        (np.abs(got - want).max(), np.abs(want).max())


@pytest.mark.parametrize("prefetch", [1, 2])
@pytest.mark.parametrize("n,k,bn,bk", [(37, 100, 16, 32), (5, 7, 4, 4), (64, 512, 16, 512),
                                       (48, 96, 8, 2048)])
def test_row_gemv_with_the_norm_the_second_input_and_a_residual_pair(rng, n, k, bn, bk,
                                                                    prefetch):
    """(with prefetch 2 and a single K step, the second tile lies wholly past K: its
    zero padding adds nothing)"""
    w = _t(rng.standard_normal((n, k)).astype(BF16))
    a, b = (_t((3 * rng.standard_normal(k)).astype(BF16)) for _ in range(2))
    g = _t((1 + 0.2 * rng.standard_normal(k)).astype(BF16))
    r1, r2 = (_t(rng.standard_normal(n).astype(BF16)) for _ in range(2))
    cfg = GemvConfig(bn=bn, bk=bk, prefetch=prefetch)
    x = _f32(a) + _f32(b)                               # in fp32, never rounded
    want = _f32(w) @ _rms(x, _f32(g), 1e-5)
    got = _f32(row_gemv(w, a, x2=b, norm_weight=g, eps=1e-5, config=cfg))
    _close(got, want, 1e-2)
    got = _f32(row_gemv(w, a, norm_weight=g, eps=1e-5, residual=(r1, r2), config=cfg))
    _close(got, _f32(w) @ _rms(_f32(a), _f32(g), 1e-5) + _f32(r1) + _f32(r2), 1e-2)
    got = _f32(row_gemv(w, a, residual=(r1, r2), config=cfg))
    _close(got, _f32(w) @ _f32(a) + _f32(r1) + _f32(r2), 1e-2)
    got = _f32(row_gemv(w, a, x2=b, config=cfg))          # the sum without a norm
    _close(got, _f32(w) @ x, 1e-2)
    got = _f32(row_gemv(w, a, residual=r1, config=cfg))   # the plain kernel
    _close(got, _f32(w) @ _f32(a) + _f32(r1), 1e-2)


def test_the_fused_norm_in_float32_is_exact_to_rounding(rng):
    n, k = 33, 70
    w, a, b, g, r = (_t(rng.standard_normal(s).astype(np.float32))
                     for s in ((n, k), k, k, k, n))
    got = row_gemv(w, a, x2=b, norm_weight=g, eps=0.5, residual=(r, r),
                   config=GemvConfig(bn=8, bk=16)).numpy()
    want = w.numpy() @ _rms(a.numpy() + b.numpy(), g.numpy(), 0.5) + 2 * r.numpy()
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("prefetch", [1, 2])
@pytest.mark.parametrize("bn,bk", [(16, 32), (4, 128), (8, 2048)])
def test_gemv_silu_mul_with_the_fused_norm(rng, bn, bk, prefetch):
    i, k = 37, 90
    w = _t(rng.standard_normal((2, i, k)).astype(np.float32))
    a, b, g = (_t(rng.standard_normal(k).astype(np.float32)) for _ in range(3))
    cfg = GemvConfig(bn=bn, bk=bk, latency=2, prefetch=prefetch)
    for x2, x in ((None, a.numpy()), (b, a.numpy() + b.numpy())):
        nx = _rms(x, g.numpy(), 1e-6)
        gate, up = w.numpy()[0] @ nx, w.numpy()[1] @ nx
        want = gate / (1 + np.exp(-gate)) * up
        got = gemv_silu_mul(w, a, x2=x2, norm_weight=g, config=cfg).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    gate, up = w.numpy()[0] @ x, w.numpy()[1] @ x
    got = gemv_silu_mul(w, a, x2=b, config=cfg).numpy()
    np.testing.assert_allclose(got, gate / (1 + np.exp(-gate)) * up, rtol=1e-4, atol=1e-4)
    gate, up = w.numpy()[0] @ a.numpy(), w.numpy()[1] @ a.numpy()
    got = gemv_silu_mul(w, a, config=cfg).numpy()                  # the plain kernel
    np.testing.assert_allclose(got, gate / (1 + np.exp(-gate)) * up, rtol=1e-4, atol=1e-4)


def test_which_kernel_each_form_launches():
    w, w2 = _t(np.ones((8, 6), np.float32)), _t(np.ones((2, 8, 6), np.float32))
    x, r = _t(np.ones(6, np.float32)), _t(np.ones(8, np.float32))

    def names(plan):
        return [k.name for k, _ in plan.launches]

    assert names(plan_row_gemv(w, x, residual=r)) == ["gemv_kernel"]
    assert names(plan_row_gemv(w, x, residual=(r,))) == ["gemv_kernel"]
    assert names(plan_row_gemv(w, x, residual=(r, None))) == ["gemv_kernel"]
    assert names(plan_row_gemv(w, x, residual=(r, r))) == ["gemv_fused_kernel"]
    assert names(plan_row_gemv(w, x, x2=x)) == ["gemv_fused_kernel"]
    assert names(plan_gemv_silu_mul(w2, x)) == ["gemv_silu_mul_kernel"]
    assert names(plan_gemv_silu_mul(w2, x, norm_weight=x)) == ["gemv_fused_silu_mul_kernel"]


def test_errors_users_read():
    w, w2 = _t(np.ones((4, 6), np.float32)), _t(np.ones((2, 4, 6), np.float32))
    x, r = _t(np.ones(6, np.float32)), _t(np.ones(4, np.float32))
    with pytest.raises(ValueError, match=r"row_gemv\(\): x2 must have shape \(6,\), got "
                                         r"\(4,\)"):
        row_gemv(w, x, x2=r)
    with pytest.raises(ValueError, match=r"gemv_silu_mul\(\): norm_weight must have shape "
                                         r"\(6,\)"):
        gemv_silu_mul(w2, x, norm_weight=r)
    with pytest.raises(ValueError, match="residual must be one vector or a pair"):
        row_gemv(w, x, residual=(r, r, r))
    with pytest.raises(ValueError, match=r"residual must have shape \(4,\)"):
        row_gemv(w, x, residual=(r, x))
    with pytest.raises(ValueError, match="eps must be a non-negative float, got -1.0"):
        row_gemv(w, x, norm_weight=x, eps=-1.0)
    with pytest.raises(TypeError, match="norm_weight is int32"):
        row_gemv(w, x, norm_weight=_t(np.ones(6, np.int32)))


def test_a_fused_gemv_may_not_write_what_it_reads():
    """The decode step ping-pongs its residual stream because of this."""
    w = _t(np.ones((6, 6), np.float32))
    h, down = _t(np.ones(6, np.float32)), _t(np.ones(6, np.float32))
    with pytest.raises(tl.AliasError):
        row_gemv(w, down, residual=(h, down), out=h)
    with pytest.raises(tl.AliasError):
        row_gemv(w, h, x2=down, norm_weight=h, out=down)


def test_the_fused_kernels_are_safe_kernels():
    for k in (gemv_fused_kernel, gemv_fused_silu_mul_kernel):
        assert not k.definition.options.unsafe, k.definition.name


# ------------------------------------------------------------------ compiled for sm_90

def _launches():
    """The fused kernels' launches as the decode step makes them (Qwen3-4B shapes)."""
    S = tl.spec
    h, w = S(2560, "bfloat16"), S((6144, 2560), "bfloat16")
    o, wo, attn = S(2560, "bfloat16"), S((2560, 4096), "bfloat16"), S(4096, "bfloat16")
    wgu, act = S((2, 9728, 2560), "bfloat16"), S(9728, "bfloat16")
    qkv = S(6144, "bfloat16")
    return {
        "norm_qkv": (gemv_fused_kernel, (qkv.partition(32), w, h, h, h, h, h, 1e-6, 512, 0,
                                         1, 1, 1, 0, 0)),
        "norm_qkv_layer0": (gemv_fused_kernel, (qkv.partition(16), w, h, h, h, h, h, 1e-6,
                                                2048, 4, 2, 0, 1, 0, 0)),
        "o_residual_pair": (gemv_fused_kernel, (o.partition(16), wo, attn, attn, attn, o,
                                                o, 1e-6, 1024, 8, 1, 0, 0, 1, 1)),
        "norm_gate_up": (gemv_fused_silu_mul_kernel, (act.partition(8), wgu, h, h, h, 1e-6,
                                                      512, 0, 2, 0, 1)),
        "norm_gate_up_x2": (gemv_fused_silu_mul_kernel, (act.partition(4), wgu, h, h, h,
                                                         1e-6, 2048, 2, 1, 1, 1)),
    }


@pytest.mark.parametrize("name", sorted(_launches()))
@pytest.mark.toolchain
def test_the_fused_kernels_compile_for_sm90_and_pass_the_tileir_validator(name):
    pytest.importorskip("cuda.tile")
    from tilelab.compiler.export import export_tileir
    from tilelab.compiler.tileir import check_tileir
    from tilelab.compiler.toolchain import find_toolchain

    if find_toolchain().tileirdisasm is None:      # pragma: no cover - CUDA < 13.4
        pytest.skip("tileirdisasm is not installed")
    kern, args = _launches()[name]
    art = kern.compile(*args, arch="sm_90", cache=False)
    assert art.cubin
    d = kern.definition
    sp = d.specialize(args)
    lk = d.lowered(sp.plan)
    _bc, text = export_tileir(d.fn, lk, sp, options=d.options.hints())
    assert check_tileir(text, lk, sp).partition_stores == 1
