"""Attention kernels of the acceptance corpus: cuTile's FMHA sample (online softmax,
GQA, causal masks), a causal variant on a persistent schedule that skips the key
tiles past the diagonal with ``continue``, and the FMHA backward's preprocessing.

The FMHA sample maps ``ct.bid(0)`` to the query tile and ``ct.bid(1)`` to batch x
head; its port gets all three from the rank-4 output partition's ``tile_index``.
"""
from __future__ import annotations

import math

import cuda.tile as ct
import numpy as np
from cuda.tile import RoundingMode as RMd

import tilelab as tl

from .registry import Run, accept, out, tensor

INV_LOG_2 = 1.0 / math.log(2)
ConstInt = ct.Constant[int]
ConstBool = ct.Constant[bool]


def _qkv(shape, rng):
    b, h, hkv, sq, skv, d = shape
    return {"q": rng.standard_normal((b, h, sq, d)).astype(np.float16),
            "k": rng.standard_normal((b, hkv, skv, d)).astype(np.float16),
            "v": rng.standard_normal((b, hkv, skv, d)).astype(np.float16)}


def _attention_ref(d, causal, input_pos=0):
    q, k, v = (d[n].astype(np.float64) for n in ("q", "k", "v"))
    group = q.shape[1] // k.shape[1]
    k = np.repeat(k, group, axis=1)
    v = np.repeat(v, group, axis=1)
    s = q @ np.swapaxes(k, 2, 3) / math.sqrt(q.shape[3])
    if causal:
        qpos = input_pos + np.arange(q.shape[2])[:, None]
        s = np.where(np.arange(k.shape[2])[None, :] <= qpos, s, -np.inf)
    p = np.exp(s - s.max(axis=3, keepdims=True))
    return [(p / p.sum(axis=3, keepdims=True)) @ v]


# ---- cuTile FMHA sample --------------------------------------------------------------


def _fmha_run(d, causal):
    b, h, sq, dk = d["q"].shape
    skv = d["k"].shape[2]
    o = out((b, h, sq, dk), "float16")
    tile_m, tile_n = 16, 32
    return Run((tensor(d["q"]), tensor(d["k"]), tensor(d["v"]),
                o.partition((1, 1, tile_m, dk)), 1.0 / math.sqrt(dk), 0, dk, dk, tile_m,
                tile_n, h // d["k"].shape[1], causal, skv % tile_n == 0), [o])


@accept("fmha_sample_gqa", shapes=[(1, 4, 2, 32, 64, 32), (2, 2, 1, 20, 45, 16)],
        inputs=_qkv, run=lambda d: _fmha_run(d, False),
        reference=lambda d: _attention_ref(d, False), tol=(1e-2, 1e-2), occupancy=2,
        origin="cuTile",
        ports="cuTile AttentionFMHA sample: offs[:, None], qk += mask, max(), RMd.APPROX")
def fmha_kernel(Q, K, V, Out: tl.Out,
                qk_scale: float,
                input_pos: int,
                Dqk: ConstInt,              # head dimension of Q and K
                Dv: ConstInt,               # head dimension of V
                TILE_M: ConstInt,
                TILE_N: ConstInt,
                QUERY_GROUP_SIZE: ConstInt,
                CAUSAL: ConstBool,
                EVEN_K: ConstBool):
    batch_idx, head_idx, bid_x, _ = Out.tile_index
    off_kv_h = head_idx // QUERY_GROUP_SIZE
    qk_scale = qk_scale * INV_LOG_2                 # exp2 below
    offs_m = bid_x * TILE_M + ct.arange(TILE_M, dtype=np.int32)
    offs_m += input_pos
    offs_m = offs_m[:, None]                        # [TILE_M, 1]
    offs_n_tile = ct.arange(TILE_N, dtype=np.int32)
    offs_n_tile = offs_n_tile[None, :]              # [1, TILE_N]
    m_i = ct.full((TILE_M, 1), -np.inf, dtype=np.float32)
    l_i = ct.full((TILE_M, 1), 0.0, dtype=np.float32)
    acc = ct.full((TILE_M, Dv), 0.0, dtype=np.float32)
    q = ct.load(Q, index=(batch_idx, head_idx, bid_x, 0),
                shape=(1, 1, TILE_M, Dqk)).reshape((TILE_M, Dqk))
    m_end = input_pos + (bid_x + 1) * TILE_M
    k_seqlen = K.shape[2]
    if CAUSAL:
        mask_start = (input_pos + bid_x * TILE_M) // TILE_N
        mask_start = min(mask_start, k_seqlen // TILE_N)
        Tc = ct.cdiv(min(m_end, k_seqlen), TILE_N)
    else:
        Tc = ct.cdiv(k_seqlen, TILE_N)
        mask_start = k_seqlen // TILE_N
    for j in range(0, Tc):
        k = ct.load(K, index=(batch_idx, off_kv_h, 0, j), shape=(1, 1, Dqk, TILE_N),
                    order=(0, 1, 3, 2), latency=2)
        k = k.reshape((Dqk, TILE_N))
        qk = ct.full((TILE_M, TILE_N), 0., dtype=np.float32)
        qk = ct.mma(q, k, qk)
        if (CAUSAL or not EVEN_K) and j >= mask_start:
            offs_n = j * TILE_N + offs_n_tile
            mask = ct.full((TILE_M, TILE_N), True, dtype=np.bool_)
            if not EVEN_K:
                mask = mask & (offs_n < k_seqlen)
            if CAUSAL:
                mask = mask & (offs_m >= offs_n)
            mask = ct.where(mask, 0.0, -np.inf)
            qk += mask
        m_ij = max(m_i, ct.max(qk, axis=-1, keepdims=True) * qk_scale)
        qk = qk * qk_scale - m_ij
        p = ct.exp2(qk, flush_to_zero=True)
        l_ij = ct.sum(p, axis=-1, keepdims=True)
        alpha = ct.exp2(m_i - m_ij, flush_to_zero=True)
        l_i = l_i * alpha + l_ij
        acc = acc * alpha
        v = ct.load(V, index=(batch_idx, off_kv_h, j, 0), shape=(1, 1, TILE_N, Dv),
                    latency=4).reshape((TILE_N, Dv))
        p = p.astype(Q.dtype)
        acc = ct.mma(p, v, acc)
        m_i = m_ij
    acc = ct.truediv(acc, l_i, flush_to_zero=True, rounding_mode=RMd.APPROX)
    acc = acc.reshape((1, 1, TILE_M, Dv)).astype(Out.dtype)
    Out.store(acc)


# ---- causal attention, persistent, skipping tiles past the diagonal ------------------


def _causal_run(d):
    b, h, sq, dk = d["q"].shape
    o = out((b, h, sq, dk), "float16")
    p = o.partition((1, 1, 16, dk), schedule=tl.persistent(num_blocks=3))
    return Run((p, tensor(d["q"]), tensor(d["k"]), tensor(d["v"]), 1.0 / math.sqrt(dk), 32),
               [o])


@accept("causal_attention_persistent_continue", shapes=[(1, 2, 2, 48, 48, 32),
                                                         (1, 2, 1, 30, 30, 16)],
        inputs=_qkv, run=_causal_run, reference=lambda d: _attention_ref(d, True),
        tol=(1e-2, 1e-2),
        origin="idiom",
        ports="causal FMHA on tl.persistent: `continue` skips key tiles past the diagonal")
def causal_attention(o: tl.Out, q, k, v, sm_scale: float, BN: ct.Constant[int]):
    _, _, bm, dh = o.tile_shape
    group = q.shape[1] // k.shape[1]
    kv_len = k.shape[2]
    for t in o.tiles():
        b, h, mi, _ = o.tile_index_of(t)
        qt = ct.load(q, index=(b, h, mi, 0), shape=(1, 1, bm, dh),
                     padding_mode=ct.PaddingMode.ZERO).reshape((bm, dh))
        qpos = ct.reshape(mi * bm + ct.arange(bm, dtype=ct.int32), (bm, 1))
        m_i = ct.full((bm, 1), -math.inf, dtype=ct.float32)
        l_i = ct.full((bm, 1), 0.0, dtype=ct.float32)
        acc = ct.full((bm, dh), 0.0, dtype=ct.float32)
        for j in range(ct.cdiv(kv_len, BN)):
            if j * BN > mi * bm + bm - 1:
                continue                       # every key of this tile is in the future
            kt = ct.load(k, index=(b, h // group, 0, j), shape=(1, 1, dh, BN),
                         order=(0, 1, 3, 2), padding_mode=ct.PaddingMode.ZERO)
            s = ct.mma(qt, kt.reshape((dh, BN)), ct.zeros((bm, BN), dtype=ct.float32))
            kpos = ct.reshape(j * BN + ct.arange(BN, dtype=ct.int32), (1, BN))
            s = ct.where((kpos <= qpos) & (kpos < kv_len), s * sm_scale, -math.inf)
            m_new = ct.maximum(m_i, ct.max(s, axis=1, keepdims=True))
            p = ct.exp(s - m_new)
            alpha = ct.exp(m_i - m_new)
            l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
            vt = ct.load(v, index=(b, h // group, j, 0), shape=(1, 1, BN, dh),
                         padding_mode=ct.PaddingMode.ZERO).reshape((BN, dh))
            acc = ct.mma(p.astype(vt.dtype), vt, acc * alpha)
            m_i = m_new
        res = (acc / l_i).astype(o.dtype)
        o.store(ct.reshape(res, (1, 1, bm, dh)), at=t)


# ---- FMHA backward preprocessing: delta = rowsum(O * dO) ------------------------------


def _prep_inputs(shape, rng):
    b, h, s, d = shape
    return {"o": rng.standard_normal((b, h, s, d)).astype(np.float32),
            "do": rng.standard_normal((b, h, s, d)).astype(np.float32)}


def _prep_run(d):
    b, h, s, dh = d["o"].shape
    delta = out((b, h, s), "float32")
    return Run((tensor(d["o"]), tensor(d["do"]), delta.partition((1, 1, 16)), 16, dh),
               [delta])


@accept("fmha_bwd_preprocess", shapes=[(2, 3, 32, 16), (1, 2, 20, 8)], inputs=_prep_inputs,
        run=_prep_run,
        reference=lambda d: [np.sum(d["o"].astype(np.float64) * d["do"], axis=3)],
        tol=(1e-5, 1e-5), occupancy=1,
        origin="cuTile",
        ports="cuTile test fmha_bwd_preprocess_kernel: chained .reshape(), ct.sum(axis=1)")
def fmha_bwd_preprocess(O, Grad, Delta: tl.Out, TILE_M: ConstInt, TILE_D: ConstInt):
    batch_idx, head_idx, bid_x = Delta.tile_index
    o = ct.load(O, index=(batch_idx, head_idx, bid_x, 0), shape=(1, 1, TILE_M, TILE_D),
                latency=2).reshape((TILE_M, TILE_D))
    do = ct.load(Grad, index=(batch_idx, head_idx, bid_x, 0), shape=(1, 1, TILE_M, TILE_D),
                 latency=2).reshape((TILE_M, TILE_D))
    delta = ct.sum(o * do, axis=1).reshape((1, 1, TILE_M))
    Delta.store(delta)
