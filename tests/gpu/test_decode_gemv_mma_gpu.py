"""The tensor-core decode GEMVs (``GemvConfig(mma=True)``) on the GPU, at Qwen3-4B's
projection shapes and with each fused form the decode step launches, against a float64
reference of the same bf16 data (fresh random inputs, outputs poisoned first)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tilelab as tl
from tilelab.kernels.decode.gemv import GemvConfig, gemv_silu_mul, row_gemv

BF16 = ml_dtypes.bfloat16


def _gpu(a):
    return tl.tensor(np.ascontiguousarray(a).astype(BF16), device="cuda")


def _poisoned(n):
    out = tl.empty(n, "bfloat16", device="cuda")
    out.copy_(np.full(n, np.nan, BF16))
    return out


def _rel(out, want):
    out = np.asarray(out.numpy(), np.float64)
    assert not np.isnan(out).any(), "an output element was not written"
    return float(np.linalg.norm(out - want) / np.linalg.norm(want))


def _f64(t):
    return np.asarray(t.numpy(), np.float64)


def _rms(x, g, eps=1e-6):
    return x / np.sqrt((x * x).mean() + eps) * g


def check_fused_qkv(cfg, rng):
    """The decode step's norm + qkv GEMV at Qwen3-4B's shape (``x + x2`` RMSNormed)
    with ``cfg``, checked; returns its inputs ``(w, h, down, g)`` for the other forms."""
    w = _gpu(rng.standard_normal((6144, 2560)) * 0.02)
    h, down = _gpu(rng.standard_normal(2560)), _gpu(rng.standard_normal(2560))
    g = _gpu(1 + 0.1 * rng.standard_normal(2560))
    out = _poisoned(6144)
    row_gemv(w, h, x2=down, norm_weight=g, out=out, config=cfg)
    assert _rel(out, _f64(w) @ _rms(_f64(h) + _f64(down), _f64(g))) < 1e-2
    return w, h, down, g


@pytest.mark.parametrize("cfg", [GemvConfig(bn=64, bk=256, occupancy=None, mma=True),
                                 GemvConfig(bn=32, bk=256, occupancy=2, mma=True),
                                 GemvConfig(bn=128, bk=128, occupancy=None, mma=True)],
                         ids=["64x256", "32x256-occ2", "128x128"])
def test_the_decode_step_forms_on_the_tensor_cores(cfg):
    rng = np.random.default_rng()
    _, h, down, g = check_fused_qkv(cfg, rng)

    wo, attn = _gpu(rng.standard_normal((2560, 4096)) * 0.02), _gpu(rng.standard_normal(4096))
    out = _poisoned(2560)
    row_gemv(wo, attn, residual=(h, down), out=out, config=cfg)
    assert _rel(out, _f64(wo) @ _f64(attn) + _f64(h) + _f64(down)) < 1e-2

    wgu = _gpu(rng.standard_normal((2, 9728, 2560)) * 0.02)
    out = _poisoned(9728)
    gemv_silu_mul(wgu, h, norm_weight=g, out=out, config=cfg)
    n = _rms(_f64(h), _f64(g))
    gate, up = _f64(wgu)[0] @ n, _f64(wgu)[1] @ n
    assert _rel(out, gate / (1 + np.exp(-gate)) * up) < 1.5e-2
