"""The fused decode attention (q/k norm + RoPE + attention + the KV write one layer
late) against the plain pair it replaces: qk_norm_rope_cache_kernel then
decode_attention_kernel (the cache rows bit for bit, the output to the softmax's
rounding)."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import tilelab as tl
from tilelab.kernels.decode.step import LOG2E, decode_attention_kernel, qk_norm_rope_cache_kernel
from tilelab.kernels.decode.rope_attention import kv_store_kernel, rope_attention_kernel
from tilelab.kernels.rope import rope_tables

BF16 = ml_dtypes.bfloat16
DEV = "cpu"
HK, G, D, CAP, BN = 2, 3, 16, 32, 8


def _t(a):
    return tl.tensor(np.asarray(a), device=DEV)


def _layer(rng):
    """A layer's raw qkv, norm weights and a cache filled with random rows."""
    nq, nkv = HK * G * D, HK * D
    qkv = _t(rng.standard_normal(nq + 2 * nkv).astype(BF16))
    qn = _t((1 + 0.1 * rng.standard_normal(D)).astype(BF16))
    kn = _t((1 + 0.1 * rng.standard_normal(D)).astype(BF16))
    kc = _t(rng.standard_normal((HK, CAP, D)).astype(BF16))
    vc = _t(rng.standard_normal((HK, CAP, D)).astype(BF16))
    q3 = qkv[:nq].reshape(HK, G, D)
    k2, v2 = qkv[nq:nq + nkv].reshape(HK, D), qkv[nq + nkv:].reshape(HK, D)
    return q3, k2, v2, qn, kn, kc, vc


def _plain(layer, p, cos, sin):
    """The plain form: norm + RoPE + cache write, then one-pass attention."""
    q3, k2, v2, qn, kn, kc, vc = layer
    kc, vc = _t(kc.numpy().copy()), _t(vc.numpy().copy())
    q_rot = tl.empty((HK, G, D), "bfloat16", device=DEV)
    pos = _t(np.array([p], np.int32))
    qk_norm_rope_cache_kernel(q_rot.partition((1, 4, D)), kc.partition((1, CAP, D)),
                              vc.partition((1, CAP, D)), q3, k2, v2, qn, kn, cos, sin,
                              pos, 1e-6, D)
    o = tl.empty(HK * G * D, "bfloat16", device=DEV)
    decode_attention_kernel(o.reshape(HK, G, D).partition((1, 16, D)), q_rot, kc, vc, pos,
                            LOG2E / math.sqrt(D), BN, D)
    return o.numpy(), kc.numpy(), vc.numpy()


def _fused(layer, p, cos, sin, prev=None):
    """The fused kernel; ``prev`` = (k cache, v cache, staged kv) of a previous layer."""
    q3, k2, v2, qn, kn, kc, vc = layer
    o = tl.empty(HK * G * D, "bfloat16", device=DEV)
    kv_new = tl.empty((HK, 2, D), "bfloat16", device=DEV)
    if prev is None:
        kp, vp = (tl.zeros((HK, 1, D), "bfloat16", device=DEV) for _ in range(2))
        kvp, flag = q3, 0
    else:
        (kp, vp, kvp), flag = prev, 1
    rope_attention_kernel(o.reshape(HK, G, D).partition((1, 16, D)),
                          kv_new.partition((1, 2, D)), kp.partition((1, kp.shape[1], D)),
                          vp.partition((1, vp.shape[1], D)), q3, k2, v2, kc, vc, kvp, qn,
                          kn, cos, sin, _t(np.array([p], np.int32)), 1e-6,
                          LOG2E / math.sqrt(D), BN, D, flag)
    return o.numpy(), kv_new.numpy(), kp, vp


@pytest.mark.parametrize("p", [0, BN - 1, BN, 2 * BN + 3, CAP - 1])
def test_fused_attention_matches_the_plain_pair(rng, p):
    cos, sin = rope_tables(64, D, device=DEV)
    layer = _layer(rng)
    want_o, want_k, want_v = _plain(layer, p, cos, sin)
    o, kv_new, kp, vp = _fused(layer, p, cos, sin)
    # the new key is the online softmax's own last step here, a lane of the last tile
    # there: float32 rounding, then the bf16 output's (2^-8 relative)
    np.testing.assert_allclose(o.astype(np.float32), want_o.astype(np.float32),
                               rtol=1e-2, atol=1e-2)
    np.testing.assert_array_equal(kv_new[:, 0], want_k[:, p])
    np.testing.assert_array_equal(kv_new[:, 1], want_v[:, p])
    # with PREV 0 the stand-in caches are never written
    assert (kp.numpy() == 0).all() and (vp.numpy() == 0).all()


def test_the_cache_row_at_pos_is_not_used(rng):
    """The new key and value come from registers: whatever the cache's row ``pos``
    holds (stale rows of an earlier sequence; the plain form overwrites it first), the
    output is the same. Like the rows past ``pos`` in the plain kernel, the row is
    loaded with its tile and weighted zero, so it is assumed finite, as cache rows are."""
    cos, sin = rope_tables(64, D, device=DEV)
    p = 11
    layer = _layer(rng)
    want_o = _plain(layer, p, cos, sin)[0]
    kc, vc = layer[5].numpy().copy(), layer[6].numpy().copy()
    kc[:, p] = 1000.0
    vc[:, p] = -1000.0
    o = _fused(layer[:5] + (_t(kc), _t(vc)), p, cos, sin)[0]
    np.testing.assert_array_equal(o, _fused(layer, p, cos, sin)[0])
    np.testing.assert_allclose(o.astype(np.float32), want_o.astype(np.float32),
                               rtol=1e-2, atol=1e-2)


def test_the_previous_layer_row_is_written_at_pos_and_nothing_else(rng):
    cos, sin = rope_tables(64, D, device=DEV)
    p = 5
    staged = _t(rng.standard_normal((HK, 2, D)).astype(BF16))
    kp = tl.zeros((HK, CAP, D), "bfloat16", device=DEV)
    vp = tl.zeros((HK, CAP, D), "bfloat16", device=DEV)
    _fused(_layer(rng), p, cos, sin, prev=(kp, vp, staged))
    np.testing.assert_array_equal(kp.numpy()[:, p], staged.numpy()[:, 0])
    np.testing.assert_array_equal(vp.numpy()[:, p], staged.numpy()[:, 1])
    for c in (kp, vp):
        assert (np.delete(c.numpy(), p, axis=1) == 0).all()


def test_kv_store_writes_one_row_and_nothing_past_the_cache(rng):
    kv = _t(rng.standard_normal((HK, 2, D)).astype(BF16))
    kc = tl.zeros((HK, CAP, D), "bfloat16", device=DEV)
    vc = tl.zeros((HK, CAP, D), "bfloat16", device=DEV)
    kv_store_kernel(kc.partition((1, CAP, D)), vc.partition((1, CAP, D)), kv,
                    _t(np.array([CAP + 2], np.int32)))
    assert (kc.numpy() == 0).all() and (vc.numpy() == 0).all()
    kv_store_kernel(kc.partition((1, CAP, D)), vc.partition((1, CAP, D)), kv,
                    _t(np.array([3], np.int32)))
    np.testing.assert_array_equal(kc.numpy()[:, 3], kv.numpy()[:, 0])
    np.testing.assert_array_equal(vc.numpy()[:, 3], kv.numpy()[:, 1])
    assert (np.delete(kc.numpy(), 3, axis=1) == 0).all()


def test_reading_the_cache_it_writes_is_refused(rng):
    """The one-layer-late write is what keeps the kernel legal: handing it its own
    layer's cache as the one to write is an aliasing error at launch."""
    cos, sin = rope_tables(64, D, device=DEV)
    layer = _layer(rng)
    kc, vc = layer[5], layer[6]
    with pytest.raises(tl.AliasError):
        _fused(layer, 3, cos, sin, prev=(kc, vc, _t(np.zeros((HK, 2, D), BF16))))


@pytest.mark.toolchain
def test_the_kernels_are_safe_and_compile_for_sm90(rng):
    for k in (rope_attention_kernel, kv_store_kernel):
        assert not k.definition.options.unsafe
    cos, sin = rope_tables(64, D, device=DEV)
    q3, k2, v2, qn, kn, kc, vc = _layer(rng)
    o = tl.empty(HK * G * D, "bfloat16", device=DEV)
    kv_new = tl.empty((HK, 2, D), "bfloat16", device=DEV)
    kp = tl.zeros((HK, CAP, D), "bfloat16", device=DEV)
    vp = tl.zeros((HK, CAP, D), "bfloat16", device=DEV)
    staged = tl.zeros((HK, 2, D), "bfloat16", device=DEV)
    pos = _t(np.array([4], np.int32))
    art = rope_attention_kernel.compile(
        o.reshape(HK, G, D).partition((1, 16, D)), kv_new.partition((1, 2, D)),
        kp.partition((1, CAP, D)), vp.partition((1, CAP, D)), q3, k2, v2, kc, vc, staged,
        qn, kn, cos, sin, pos, 1e-6, LOG2E / math.sqrt(D), BN, D, 1, arch="sm_90")
    assert art.cubin
    art = kv_store_kernel.compile(kp.partition((1, CAP, D)), vp.partition((1, CAP, D)),
                                  kv_new, pos, arch="sm_90")
    assert art.cubin
