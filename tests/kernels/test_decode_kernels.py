"""The decode GEMVs and the decode-step kernels against numpy, edge tiles included."""
from __future__ import annotations

import math

import cuda.tile as ct
import ml_dtypes
import numpy as np
import pytest

import tilelab as tl
from tilelab.kernels.attention import decode_combine_kernel
from tilelab.kernels.decode.step import (LOG2E, advance_kernel, decode_attention_kernel,
                                         decode_split_kernel,
                                         embed_at_kernel, gumbel_noise, kv_fill_kernel,
                                         lm_head_partial_kernel, pick_token_kernel,
                                         qk_norm_rope_cache_kernel)
from tilelab.kernels.decode.gemv import (GemvConfig, default_gemv_config, gemv_silu_mul,
                                         plan_row_gemv, row_gemv)
from tilelab.kernels.rope import rope_tables

BF16 = ml_dtypes.bfloat16
DEV = "cpu"


def _t(a, dtype=None):
    return tl.tensor(np.asarray(a), dtype=dtype, device=DEV)


def _f32(t):
    return t.numpy().astype(np.float32)


# ------------------------------------------------------------------ GEMVs

@pytest.mark.parametrize("n,k,bn,bk", [(37, 100, 16, 32), (5, 7, 4, 4), (64, 512, 16, 512)])
def test_row_gemv_with_edge_tiles_and_residual(rng, n, k, bn, bk):
    w = _t(rng.standard_normal((n, k)).astype(BF16))
    x = _t(rng.standard_normal(k).astype(BF16))
    r = _t(rng.standard_normal(n).astype(BF16))
    cfg = GemvConfig(bn=bn, bk=bk)
    want = _f32(w) @ _f32(x)
    got = _f32(row_gemv(w, x, config=cfg))
    assert np.abs(got - want).max() <= 1e-2 * np.abs(want).max() + 1e-3
    got_r = _f32(row_gemv(w, x, residual=r, config=cfg))
    assert np.abs(got_r - (want + _f32(r))).max() <= 1e-2 * np.abs(want).max() + 1e-2


def test_row_gemv_float32_is_exact_to_rounding(rng):
    w = _t(rng.standard_normal((33, 70)).astype(np.float32))
    x = _t(rng.standard_normal(70).astype(np.float32))
    got = row_gemv(w, x, config=GemvConfig(bn=8, bk=16)).numpy()
    np.testing.assert_allclose(got, w.numpy() @ x.numpy(), rtol=1e-5, atol=1e-5)


def test_gemv_silu_mul_matches_numpy(rng):
    i, k = 37, 90
    w = _t(rng.standard_normal((2, i, k)).astype(np.float32))
    x = _t(rng.standard_normal(k).astype(np.float32))
    g, u = w.numpy()[0] @ x.numpy(), w.numpy()[1] @ x.numpy()
    want = g / (1 + np.exp(-g)) * u
    got = gemv_silu_mul(w, x, config=GemvConfig(bn=16, bk=32)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_gemv_config_and_shape_errors(rng):
    with pytest.raises(ValueError, match="GemvConfig.bn=24 must be a power of two"):
        GemvConfig(bn=24)
    with pytest.raises(ValueError, match="GemvConfig.occupancy=0"):
        GemvConfig(occupancy=0)
    w = _t(np.ones((4, 6), np.float32))
    with pytest.raises(ValueError, match=r"w must be \(N, K\) and x \(K,\)"):
        row_gemv(w, _t(np.ones(5, np.float32)))
    with pytest.raises(ValueError, match=r"residual must have shape \(4,\)"):
        row_gemv(w, _t(np.ones(6, np.float32)), residual=_t(np.ones(3, np.float32)))
    with pytest.raises(ValueError, match=r"w must be \(2, I, K\)"):
        gemv_silu_mul(w, _t(np.ones(6, np.float32)))
    assert default_gemv_config(1024, 4096).bn == 4
    assert plan_row_gemv(w, _t(np.ones(6, np.float32))).launches[0][0].name == "gemv_kernel"


# ------------------------------------------------------------------ argmax and sampling

def _partials(logits_col: np.ndarray, bn: int, *, sample: int = 0, inv_temp: float = 1.0,
              seed: int = 0, pos: int = 0, nonfinite: int = 0):
    """Run lm_head_partial_kernel on w = [logits_col, zeros...] and x = e_0, so the
    logits are exactly ``logits_col``; then pick_token_kernel, whose flag must be
    ``nonfinite``. Returns (logits, token)."""
    v = logits_col.shape[0]
    w = np.zeros((v, 8), np.float32)
    w[:, 0] = logits_col
    x = np.zeros(8, np.float32)
    x[0] = 1.0
    blocks = -(-v // bn)
    lg = tl.empty(v, "float32", device=DEV)
    pv, pi = tl.empty(blocks, "float32", device=DEV), tl.empty(blocks, "int32", device=DEV)
    p = _t(np.array([pos], np.int32))
    lm_head_partial_kernel(lg.partition(bn), pv.partition(1), pi.partition(1), _t(w), _t(x),
                           _t(np.array([inv_temp], np.float32)),
                           _t(np.array([seed], np.int32)), p, 8, 0, sample)
    tokens = tl.zeros(16, "int32", device=DEV)
    flags = tl.full(16, 7, "int32", device=DEV)
    pick_token_kernel(tokens.partition(16), flags.partition(16), pv, pi, p, 2)
    out, flag = tokens.numpy(), flags.numpy()
    assert (np.delete(out, pos + 1) == 0).all()      # only tokens[pos + 1] is written
    assert (np.delete(flag, pos) == 7).all() and flag[pos] == nonfinite  # nonfinite[pos]
    return lg.numpy(), int(out[pos + 1])


def test_argmax_takes_the_first_index_on_ties_within_and_across_blocks(rng):
    col = rng.standard_normal(300).astype(np.float32)      # 300: not a multiple of 64
    col[[70, 200, 299]] = 9.0
    lg, tok = _partials(col, 64)
    np.testing.assert_array_equal(lg, col)
    assert tok == 70
    col[[3, 9]] = 10.0
    assert _partials(col, 64)[1] == 3


def test_argmax_with_a_last_partial_tile_and_infinite_logits_flagged(rng):
    col = np.full(300, -7.0, np.float32)
    col[297] = -5.0
    assert _partials(col, 64, pos=3)[1] == 297
    col[10] = -np.inf                 # not finite: flagged (the token is not used)
    _partials(col, 64, pos=3, nonfinite=1)
    _partials(np.full(300, -np.inf, np.float32), 64, nonfinite=1)


def test_sampling_is_gumbel_max_reproducible_and_greedy_when_cold(rng):
    col = rng.standard_normal(100).astype(np.float32)
    a = [_partials(col, 32, sample=1, seed=5, pos=p)[1] for p in range(6)]
    assert a == [_partials(col, 32, sample=1, seed=5, pos=p)[1] for p in range(6)]
    assert a != [_partials(col, 32, sample=1, seed=6, pos=p)[1] for p in range(6)]
    assert _partials(col, 32, sample=1, inv_temp=1e6, seed=9)[1] == int(col.argmax())


def test_gumbel_noise_has_the_gumbel_moments():
    out = tl.empty(1 << 14, "float32", device=DEV)
    _noise_kernel(out.partition(1 << 12), 123, 7)
    g = out.numpy()
    assert np.isfinite(g).all()
    assert abs(g.mean() - 0.5772) < 0.03                    # Euler-Mascheroni
    assert abs(g.var() - math.pi ** 2 / 6) < 0.08
    assert len(np.unique(g)) > 0.99 * g.size


@tl.kernel
def _noise_kernel(y: tl.Out, seed: int, step: int):
    bn = y.tile_shape[0]
    idx = y.tile_index[0] * bn + ct.arange(bn, dtype=ct.int32)
    y.store(gumbel_noise(seed, step, idx))


# ------------------------------------------------------------------ attention and cache

@pytest.mark.parametrize("length", [1, 5, 17, 40, 64])
def test_decode_split_attention_reads_the_length_from_device(rng, length):
    hk, g, d, cap, splits = 2, 3, 16, 64, 3
    q = _t(rng.standard_normal((hk, g, d)).astype(BF16))
    kc = _t(rng.standard_normal((hk, cap, d)).astype(BF16))
    vc = _t(rng.standard_normal((hk, cap, d)).astype(BF16))
    po = tl.empty((hk, splits, g * d), "float32", device=DEV)
    pl = tl.empty((hk, splits, g), "float32", device=DEV)
    o = tl.empty(hk * g * d, "bfloat16", device=DEV)
    pos = _t(np.array([length - 1], np.int32))
    decode_split_kernel(po.partition((1, 1, 16 * d)), pl.partition((1, 1, 16)), q, kc, vc,
                        pos, LOG2E / math.sqrt(d), 8, d)
    decode_combine_kernel(o.reshape(hk, g, d).partition((1, 4, d)), po, pl, 4, d)
    want = _attention_ref(q, kc, vc, length)
    assert np.abs(_f32(o) - want).max() < 2e-2
    # the one-pass form: one block per KV head, no partials, no combine
    o1 = tl.empty(hk * g * d, "bfloat16", device=DEV)
    decode_attention_kernel(o1.reshape(hk, g, d).partition((1, 16, d)), q, kc, vc, pos,
                            LOG2E / math.sqrt(d), 8, d)
    assert np.abs(_f32(o1) - want).max() < 2e-2


def _attention_ref(q, kc, vc, length):
    d = q.shape[-1]
    qq, kk, vv = _f32(q), _f32(kc)[:, :length], _f32(vc)[:, :length]
    s = np.einsum("hgd,hsd->hgs", qq, kk) / math.sqrt(d)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("hgs,hsd->hgd", p / p.sum(-1, keepdims=True), vv).reshape(-1)


def _rot(x, cos, sin, p):
    h = x.shape[-1] // 2
    c, s = cos[p], sin[p]
    return np.concatenate([x[..., :h] * c - x[..., h:] * s, x[..., h:] * c + x[..., :h] * s], -1)


def test_qk_norm_rope_cache_writes_one_row_at_the_device_position(rng):
    hk, g, d, cap, p = 2, 2, 16, 32, 7
    hq = hk * g
    cos, sin = rope_tables(64, d, device=DEV)
    qkv = _t(rng.standard_normal((hq + 2 * hk) * d).astype(BF16))
    qn = _t((1 + 0.1 * rng.standard_normal(d)).astype(BF16))
    kn = _t((1 + 0.1 * rng.standard_normal(d)).astype(BF16))
    qo = tl.empty((hk, g, d), "bfloat16", device=DEV)
    kc, vc = (tl.zeros((hk, cap, d), "bfloat16", device=DEV) for _ in range(2))
    nq, nkv = hq * d, hk * d
    qk_norm_rope_cache_kernel(qo.partition((1, 2, d)), kc.partition((1, cap, d)),
                              vc.partition((1, cap, d)), qkv[:nq].reshape(hk, g, d),
                              qkv[nq:nq + nkv].reshape(hk, d), qkv[nq + nkv:].reshape(hk, d),
                              qn, kn, cos, sin, _t(np.array([p], np.int32)), 1e-6, d)
    a = _f32(qkv)

    def norm(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * _f32(w)

    want_q = _rot(norm(a[:nq].reshape(hk, g, d), qn), cos.numpy(), sin.numpy(), p)
    want_k = _rot(norm(a[nq:nq + nkv].reshape(hk, d), kn), cos.numpy(), sin.numpy(), p)
    assert np.abs(_f32(qo) - want_q).max() < 2e-2
    assert np.abs(_f32(kc)[:, p] - want_k).max() < 2e-2
    np.testing.assert_array_equal(_f32(vc)[:, p], a[nq + nkv:].reshape(hk, d))
    for c in (kc, vc):
        assert (np.delete(c.numpy(), p, axis=1) == 0).all()


def test_a_position_past_the_cache_writes_nothing(rng):
    hk, d, cap = 1, 8, 8
    kc, vc = (tl.zeros((hk, cap, d), "bfloat16", device=DEV) for _ in range(2))
    qo = tl.empty((hk, 1, d), "bfloat16", device=DEV)
    cos, sin = rope_tables(64, d, device=DEV)
    qkv = _t(rng.standard_normal(3 * d).astype(BF16))
    w = _t(np.ones(d, np.float32).astype(BF16))
    qk_norm_rope_cache_kernel(qo.partition((1, 1, d)), kc.partition((1, cap, d)),
                              vc.partition((1, cap, d)), qkv[:d].reshape(1, 1, d),
                              qkv[d:2 * d].reshape(1, d), qkv[2 * d:].reshape(1, d), w, w,
                              cos, sin, _t(np.array([cap + 3], np.int32)), 1e-6, d)
    assert (kc.numpy() == 0).all() and (vc.numpy() == 0).all()


def test_embed_at_advance_and_kv_fill(rng):
    table = _t(rng.standard_normal((50, 24)).astype(BF16))
    tokens = _t(np.array([4, 8, 15, 16, 23, 42], np.int32))
    pos = _t(np.array([3], np.int32))
    x = tl.empty(24, "bfloat16", device=DEV)
    embed_at_kernel(x.partition(16), table, tokens, pos)
    np.testing.assert_array_equal(x.numpy(), table.numpy()[16])
    advance_kernel(pos.partition(1))
    assert pos.numpy().tolist() == [4]
    t, hk, d = 5, 2, 16
    kv = _t(rng.standard_normal((t, hk, d)).astype(BF16))
    cache = tl.zeros((hk, 32, d), "bfloat16", device=DEV)
    kv_fill_kernel(cache[:, :t].partition((1, 4, d)), kv)
    np.testing.assert_array_equal(cache.numpy()[:, :t], kv.numpy().transpose(1, 0, 2))
    assert (cache.numpy()[:, t:] == 0).all()


def test_the_decode_kernels_are_safe_kernels():
    for k in (embed_at_kernel, qk_norm_rope_cache_kernel, decode_split_kernel,
              decode_attention_kernel,
              lm_head_partial_kernel, pick_token_kernel, advance_kernel, kv_fill_kernel):
        assert not k.definition.options.unsafe, k.definition.name


@pytest.mark.parametrize("name", ["decode.step", "decode.gemv", "decode.gemv_mma"])
def test_module_examples_run_and_public_names_have_examples(name, monkeypatch):
    import doctest
    import importlib
    import inspect

    monkeypatch.undo()                      # examples show real (unpoisoned) output
    module = importlib.import_module(f"tilelab.kernels.{name}")
    res = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.attempted > 0 and res.failed == 0
    for attr in module.__all__:
        obj = getattr(module, attr)
        if inspect.isfunction(obj) or inspect.isclass(obj) or isinstance(obj, tl.Kernel):
            assert "Example" in (obj.__doc__ or ""), f"{name}.{attr}"
