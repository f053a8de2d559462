"""The tensor-core decode GEMVs (``GemvConfig(mma=True)``): against numpy on the CPU
interpreter with every fused form, edge tiles, both 16-bit types and the errors users
read; compiled for sm_90 they stream through the warpgroup MMA with a multi-stage
pipeline and pass the Tile IR validator."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tilelab as tl
from tilelab.kernels.decode import gemv_mma as decode_gemv_mma
from tilelab.kernels.decode.gemv import (GemvConfig, gemv_silu_mul, plan_gemv_silu_mul,
                                         plan_row_gemv, row_gemv)

BF16 = ml_dtypes.bfloat16


def _t(a):
    return tl.tensor(np.asarray(a), device="cpu")


def _f32(t):
    return t.numpy().astype(np.float32)


def _rms(x, g, eps):
    return x / np.sqrt((x * x).mean() + eps) * g


def _rel(got, want):
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


@pytest.mark.parametrize("dtype", [BF16, np.float16])
@pytest.mark.parametrize("n,k,bn,bk", [(64, 256, 64, 64), (100, 300, 64, 128),
                                       (37, 40, 32, 16), (130, 96, 128, 256)])
def test_row_gemv_on_the_tensor_cores_in_every_fused_form(rng, dtype, n, k, bn, bk):
    w = _t(rng.standard_normal((n, k)).astype(dtype))
    a, b = (_t((2 * rng.standard_normal(k)).astype(dtype)) for _ in range(2))
    g = _t((1 + 0.2 * rng.standard_normal(k)).astype(dtype))
    r1, r2 = (_t(rng.standard_normal(n).astype(dtype)) for _ in range(2))
    cfg = GemvConfig(bn=bn, bk=bk, mma=True)
    wf, af, bf, gf = _f32(w), _f32(a), _f32(b), _f32(g)
    cases = [
        (dict(), wf @ af),
        (dict(residual=r1), wf @ af + _f32(r1)),
        (dict(residual=(r1, r2)), wf @ af + _f32(r1) + _f32(r2)),
        (dict(x2=b), wf @ (af + bf)),
        (dict(x2=b, norm_weight=g, eps=1e-5), wf @ _rms(af + bf, gf, 1e-5)),
        (dict(norm_weight=g, residual=(r1, r2)), wf @ _rms(af, gf, 1e-6) + _f32(r1) +
         _f32(r2)),
    ]
    for kw, want in cases:
        got = _f32(row_gemv(w, a, config=cfg, **kw))
        assert got.shape == (n,)
        # the input slice is rounded to 16 bits for the MMA: bf16's 8 bits of mantissa
        assert _rel(got, want) < (1e-2 if dtype is BF16 else 2e-3), kw


@pytest.mark.parametrize("bn,bk", [(64, 64), (32, 128), (128, 16)])
def test_gemv_silu_mul_on_the_tensor_cores(rng, bn, bk):
    i, k = 90, 200
    w = _t(rng.standard_normal((2, i, k)).astype(BF16))
    a, b = (_t(rng.standard_normal(k).astype(BF16)) for _ in range(2))
    g = _t((1 + 0.2 * rng.standard_normal(k)).astype(BF16))
    wf = _f32(w)
    cfg = GemvConfig(bn=bn, bk=bk, mma=True)
    for kw, x in ((dict(), _f32(a)), (dict(x2=b), _f32(a) + _f32(b)),
                  (dict(x2=b, norm_weight=g), _rms(_f32(a) + _f32(b), _f32(g), 1e-6))):
        gate, up = wf[0] @ x, wf[1] @ x
        got = _f32(gemv_silu_mul(w, a, config=cfg, **kw))
        assert _rel(got, gate / (1 + np.exp(-gate)) * up) < 1.5e-2, kw


def test_the_padding_columns_add_exact_zeros(rng):
    """Column 0 of the accumulator is the result: with inputs exact in bf16 and
    integer weights, the tensor-core GEMV is exact."""
    w = _t(rng.integers(-3, 4, (64, 48)).astype(BF16))
    x = _t(rng.integers(-3, 4, 48).astype(BF16))
    got = _f32(row_gemv(w, x, config=GemvConfig(bn=64, bk=16, mma=True)))
    np.testing.assert_array_equal(got, _f32(w) @ _f32(x))


def test_which_kernel_the_mma_config_launches():
    w, w2 = _t(np.ones((8, 32), BF16)), _t(np.ones((2, 8, 32), BF16))
    x = _t(np.ones(32, BF16))
    cfg = GemvConfig(bn=32, bk=16, mma=True)
    assert [k.name for k, _ in plan_row_gemv(w, x, config=cfg).launches] == \
        ["gemv_mma_kernel"]
    assert [k.name for k, _ in plan_gemv_silu_mul(w2, x, config=cfg).launches] == \
        ["gemv_mma_silu_mul_kernel"]
    # the vectors reach the kernel as (1, K) views of the caller's memory
    _kern, args = plan_row_gemv(w, x, config=cfg).launches[0]
    assert args[2].shape == (1, 32) and args[2].data_ptr == x.data_ptr


def test_errors_users_read():
    w32, x32 = _t(np.ones((8, 32), np.float32)), _t(np.ones(32, np.float32))
    with pytest.raises(ValueError, match=r"row_gemv\(\): GemvConfig\(mma=True\) needs a "
                                         r"float16 or bfloat16 weight, got float32"):
        row_gemv(w32, x32, config=GemvConfig(bn=64, bk=16, mma=True))
    with pytest.raises(ValueError, match=r"gemv_silu_mul\(\): GemvConfig\(mma=True\) "
                                         r"needs a float16 or bfloat16 weight"):
        gemv_silu_mul(_t(np.ones((2, 8, 32), np.float32)), x32,
                      config=GemvConfig(bn=64, bk=16, mma=True))
    with pytest.raises(ValueError, match=r"GemvConfig\(mma=True\) needs bk >= 16 \(the "
                                         r"MMA's K step\), got bk=8"):
        GemvConfig(bk=8, mma=True)
    with pytest.raises(TypeError, match="GemvConfig.mma must be True or False, got 1"):
        GemvConfig(mma=1)
    with pytest.raises(ValueError, match=r"GemvConfig.prefetch must be 1 or 2 \(weight "
                                         r"tiles loaded before the wait\), got 3"):
        GemvConfig(prefetch=3)
    with pytest.raises(ValueError, match=r"GemvConfig\(mma=True\) loads one weight tile "
                                         r"before its wait: prefetch must be 1, got 2"):
        GemvConfig(bk=16, mma=True, prefetch=2)


def test_the_tensor_core_kernels_are_safe_kernels():
    for k in (decode_gemv_mma.gemv_mma_kernel, decode_gemv_mma.gemv_mma_silu_mul_kernel):
        assert not k.definition.options.unsafe, k.definition.name


def _launch(kind):
    """The decode step's launch of each form (Qwen3-4B's K, fewer rows)."""
    e = lambda *shape: tl.empty(shape, "bfloat16", device="cpu")  # noqa: E731
    h = e(2560)
    cfg = GemvConfig(bn=64, bk=256, occupancy=None, mma=True)   # one block per SM
    if kind == "norm_qkv":
        return plan_row_gemv(e(768, 2560), h, x2=h, norm_weight=h, out=e(768),
                             config=cfg).launches[0]
    return plan_gemv_silu_mul(e(2, 768, 2560), h, norm_weight=h, out=e(768),
                              config=cfg).launches[0]


@pytest.mark.parametrize("kind", ["norm_qkv", "norm_gate_up"])
@pytest.mark.toolchain
def test_the_tensor_core_gemv_compiles_to_a_pipelined_warpgroup_mma(kind):
    """On sm_90 the K loop becomes HGMMA fed by the bulk tensor copy engine, with
    several weight tiles in flight (what the tensor-core form is for)."""
    pytest.importorskip("cuda.tile")
    kern, args = _launch(kind)
    art = kern.compile(*args, arch="sm_90", cache=False)
    assert "HGMMA" in art.sass and "UTMALDG" in art.sass
    # a 64 x 256 bf16 weight tile is 32 KB: more than four of them in shared memory
    assert art.resources.shared_bytes > 4 * 32768
    assert not art.resources.spill_store_bytes
