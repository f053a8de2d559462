"""The element-wise decode GEMVs with one and two weight tiles loaded before their wait
(``GemvConfig.prefetch``) on the GPU: each form the decode step launches, alone and as
a chain replayed in a graph whose programmatic edges let every GEMV start while the
kernel before it (which wrote its input) still runs. Checked against a float64
reference of the same bf16 data, outputs poisoned first."""
from __future__ import annotations

import numpy as np
import pytest

import tilelab as tl
from tilelab.kernels.decode.gemv import GemvConfig, gemv_silu_mul, row_gemv

from test_decode_gemv_mma_gpu import _f64, _gpu, _poisoned, _rel, _rms, check_fused_qkv


@pytest.mark.parametrize("prefetch", [1, 2])
@pytest.mark.parametrize("bn,bk,occ", [(32, 512, 2), (8, 512, 4), (16, 1024, 2)])
def test_each_form_with_one_or_two_tiles_ahead(prefetch, bn, bk, occ):
    cfg = GemvConfig(bn=bn, bk=bk, occupancy=occ, prefetch=prefetch)
    rng = np.random.default_rng()
    w, h, down, g = check_fused_qkv(cfg, rng)
    out = _poisoned(6144)
    row_gemv(w, h, residual=_gpu(np.ones(6144)), out=out, config=cfg)   # the plain kernel
    assert _rel(out, _f64(w) @ _f64(h) + 1) < 1e-2

    wgu = _gpu(rng.standard_normal((2, 9728, 2560)) * 0.02)
    for norm in (None, g):
        out = _poisoned(9728)
        gemv_silu_mul(wgu, h, norm_weight=norm, out=out, config=cfg)
        n = _f64(h) if norm is None else _rms(_f64(h), _f64(g))
        gate, up = _f64(wgu)[0] @ n, _f64(wgu)[1] @ n
        assert _rel(out, gate / (1 + np.exp(-gate)) * up) < 1.5e-2


def test_a_chain_of_gemvs_replayed_with_programmatic_edges():
    """Each GEMV reads the vector the one before it wrote, and its weight before its
    wait: the graph starts each early, and every result must still be exact."""
    rng = np.random.default_rng()
    k = 2048
    ws = [_gpu(rng.standard_normal((k, k)) / np.sqrt(k)) for _ in range(6)]
    x0 = _gpu(rng.standard_normal(k))
    vs = [_poisoned(k) for _ in ws]
    cfgs = [GemvConfig(bn=16, bk=512, prefetch=1 + i % 2) for i in range(len(ws))]
    with tl.graph() as graph:
        src = x0
        for w, v, cfg in zip(ws, vs, cfgs):
            row_gemv(w, src, out=v, config=cfg, sync=False)
            src = v
    assert graph.pdl == f"{len(ws) - 1} programmatic edges", graph.pdl
    graph.replay()
    tl.synchronize()
    want = _f64(x0)
    for w, v in zip(ws, vs):
        want = _f64(w) @ want
        assert _rel(v, want) < 2e-2
        want = _f64(v)        # (each step's input is the bf16 vector the last one wrote)
