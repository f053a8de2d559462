"""The attention kernels of :mod:`tilelab.kernels.attention` and their device helpers:
flash attention (one block per query tile, or persistent), and the two phases of
split-KV decode. All four are safe kernels: every output and scratch is a ``tl.Out``
partition.

Example:
    >>> sorted(k.name for k in (flash_attention_kernel, decode_combine_kernel))
    ['decode_combine_kernel', 'flash_attention_kernel']
"""
from __future__ import annotations

import math

import cuda.tile as ct

import tilelab as tl
from tilelab.kernels._host.device import zero_padded_load

__all__ = ["flash_attention_kernel", "persistent_attention_kernel", "decode_split_kernel",
           "decode_combine_kernel", "LOG2E"]

#: log2(e): the kernels work in the log2 domain (scores scaled by ``scale * LOG2E``)
LOG2E = 1.4426950408889634


# ======================================================================================
# device-side helpers


def _load_kt(k, b, hk, j, DP, BN, LAT):
    """K^T tile (DP, BN) of keys j*BN.. of head (b, hk), read K-major (order (0,1,3,2))."""
    t = zero_padded_load(k, (b, hk, 0, j), (1, 1, DP, BN), (0, 1, 3, 2), LAT)
    return ct.reshape(t, (DP, BN))


def _load_v(v, b, hk, j, BN, DP, LAT):
    """V tile (BN, DP) of keys j*BN.. of head (b, hk)."""
    return ct.reshape(zero_padded_load(v, (b, hk, j, 0), (1, 1, BN, DP), "C", LAT),
                      (BN, DP))


def _softmax_step(s, m_i, l_i, acc, vt, qk_scale):
    """One online-softmax step: fold the raw scores s (rows, BN) and V into the state.

    ``m_i`` is the running row max of the scaled scores (log2 domain), ``l_i`` the
    running sum of exp2(score - m_i), ``acc`` the unnormalized output.
    """
    m_new = ct.maximum(m_i, ct.max(s, axis=1, keepdims=True) * qk_scale)
    p = ct.exp2(s * qk_scale - m_new, flush_to_zero=True)
    alpha = ct.exp2(m_i - m_new, flush_to_zero=True)
    l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
    acc = ct.mma(p.astype(vt.dtype), vt, acc * alpha)
    return m_new, l_i, acc


def _split_result(m_i, l_i, acc):
    """A KV split's normalized output and its log-sum-exp (base 2) from the online
    softmax state; a split that saw no key gives output 0 and lse -inf, so the combine
    weighs it nothing."""
    seen = l_i > 0.0
    l_safe = ct.where(seen, l_i, 1.0)
    return acc / l_safe, ct.where(seen, m_i + ct.log2(l_safe), -math.inf)


def _softmax_step_mma(s, m_i, l_i, acc, vt, qk_scale):
    """:func:`_softmax_step` with the running sums on the tensor cores: ``l_i`` is
    (rows, 16), every column the row sum of P (rounded as it is multiplied with V), got
    as P times a (BN, 16) tile of ones, so no row reduction runs inside the loop."""
    m_new = ct.maximum(m_i, ct.max(s, axis=1, keepdims=True) * qk_scale)
    p = ct.exp2(s * qk_scale - m_new, flush_to_zero=True).astype(vt.dtype)
    alpha = ct.exp2(m_i - m_new, flush_to_zero=True)
    ones = ct.full((s.shape[1], 16), 1.0, dtype=vt.dtype)
    return m_new, ct.mma(p, ones, l_i * alpha), ct.mma(p, vt, acc * alpha)


# ======================================================================================
# kernels


def _attend(q, k, v, bh, mi, bm, dp, qk_scale, q_offset, BN, CAUSAL, LAT_K, LAT_V,
            SUM_MMA):
    """softmax(Q K^T * scale) V, normalized, in fp32 (bm, dp), for query rows mi*bm.. of
    head bh of the (B*H) heads: the body of both flash-attention kernels."""
    heads = q.shape[1]
    b = bh // heads
    h = bh % heads
    hk = h // (heads // k.shape[1])
    kv_len = k.shape[2]
    qt = ct.reshape(ct.load(q, index=(b, h, mi, 0), shape=(1, 1, bm, dp),
                            padding_mode=ct.PaddingMode.ZERO), (bm, dp))
    m_i = ct.full((bm, 1), -math.inf, dtype=ct.float32)
    l_i = ct.full((bm, 16 if SUM_MMA else 1), 0.0, dtype=ct.float32)
    acc = ct.full((bm, dp), 0.0, dtype=ct.float32)
    q_lo = mi * bm + q_offset                 # first query row, in key positions
    qpos = ct.reshape(q_lo + ct.arange(bm, dtype=ct.int32), (bm, 1))
    n_tiles = ct.cdiv(kv_len, BN)
    mask_from = kv_len // BN                  # the ragged last tile needs a mask
    if CAUSAL:
        n_tiles = min(n_tiles, ct.cdiv(q_lo + bm, BN))   # skip tiles past the diagonal
        mask_from = min(mask_from, q_lo // BN)
    for j in range(n_tiles):
        s = ct.mma(qt, _load_kt(k, b, hk, j, dp, BN, LAT_K),
                   ct.full((bm, BN), 0.0, dtype=ct.float32))
        if j >= mask_from:
            kpos = ct.reshape(j * BN + ct.arange(BN, dtype=ct.int32), (1, BN))
            ok = kpos < kv_len
            if CAUSAL:
                ok = ok & (kpos <= qpos)
            s = ct.where(ok, s, -math.inf)
        vt = _load_v(v, b, hk, j, BN, dp, LAT_V)
        if SUM_MMA:
            m_i, l_i, acc = _softmax_step_mma(s, m_i, l_i, acc, vt, qk_scale)
        else:
            m_i, l_i, acc = _softmax_step(s, m_i, l_i, acc, vt, qk_scale)
    if SUM_MMA:   # 16 equal columns (extracting one spills registers on sm_90)
        l_i = ct.sum(l_i, axis=1, keepdims=True) * (1.0 / 16)
    return acc * (1.0 / l_i)


@tl.kernel
def flash_attention_kernel(o: tl.Out, q: tl.In, k: tl.In, v: tl.In, qk_scale: float,
                     q_offset: int, BN: ct.Constant[int], CAUSAL: ct.Constant[bool],
                     LAT_K: ct.Constant[int], LAT_V: ct.Constant[int],
                     SUM_MMA: ct.Constant[bool]):
    """softmax(Q K^T * scale) V for one (bm, D) block of queries of one head.

    ``o`` is the (B*H, Sq, D) view of the output partitioned (1, bm, DP); q is
    (B, H, Sq, D), k and v (B, Hkv, Skv, D). ``qk_scale`` is scale * log2(e); causal
    query i sees keys j <= i + q_offset (q_offset = Skv - Sq: aligned at the end).
    ``SUM_MMA`` keeps the row sums on the tensor cores (``AttentionConfig.row_sum``).

    Example:
        >>> flash_attention_kernel(o.reshape(B * H, S, D).partition((1, 128, 128)), q, k, v,
        ...                        scale * LOG2E, 0, 64, True, 0, 0, False)  # doctest: +SKIP
    """
    bh, mi, _ = o.tile_index
    _, bm, dp = o.tile_shape
    out = _attend(q, k, v, bh, mi, bm, dp, qk_scale, q_offset, BN, CAUSAL, LAT_K, LAT_V,
                  SUM_MMA)
    o.store(ct.reshape(out.astype(o.dtype), (1, bm, dp)))


@tl.kernel
def persistent_attention_kernel(o: tl.Out, q: tl.In, k: tl.In, v: tl.In, qk_scale: float,
                                q_offset: int, BN: ct.Constant[int],
                                CAUSAL: ct.Constant[bool], LAT_K: ct.Constant[int],
                                LAT_V: ct.Constant[int], SUM_MMA: ct.Constant[bool]):
    """:func:`flash_attention_kernel` with a fixed set of blocks, each looping over its
    query tiles (``AttentionConfig.persistent``): a block's next Q and K loads start
    while its last output is stored, instead of each tile paying a block's start-up.

    Example:
        >>> persistent_attention_kernel(o3.partition((1, 128, 128), schedule=tl.persistent(
        ...     num_blocks=132)), q, k, v, scale * LOG2E, 0, 256, False, 0, 0,
        ...     True)  # doctest: +SKIP
    """
    _, bm, dp = o.tile_shape
    for t in o.tiles():
        bh, mi, _ = o.tile_index_of(t)
        out = _attend(q, k, v, bh, mi, bm, dp, qk_scale, q_offset, BN, CAUSAL, LAT_K,
                      LAT_V, SUM_MMA)
        o.store(ct.reshape(out.astype(o.dtype), (1, bm, dp)), at=t)


@tl.kernel
def decode_split_kernel(po: tl.Out, plse: tl.Out, q: tl.In, k: tl.In, v: tl.In,
                  qk_scale: float, kv_len: int, tiles_per_split: int,
                  BN: ct.Constant[int], DP: ct.Constant[int], LAT_K: ct.Constant[int],
                  LAT_V: ct.Constant[int]):
    """Decode phase 1: attention of one GQA group's queries over one KV split.

    ``q`` is (B, Hkv, G, D) (the G query heads sharing a KV head); ``po`` is the
    (B*Hkv, splits, G*DP) fp32 scratch partitioned (1, 1, GC*DP) and ``plse`` the
    (B*Hkv, splits, G) scratch partitioned (1, 1, GC); GC >= G is a power of two, at
    least 16 so that the scores run on the tensor cores (padding rows are zeros, and
    the stores clip them); block
    (bkv, s) covers key tiles [s*tiles_per_split, (s+1)*tiles_per_split) below kv_len
    and writes the normalized partial output and its log2-sum-exp (-inf if empty).

    Example:
        >>> decode_split_kernel(po.partition((1, 1, 8 * 128)), plse.partition((1, 1, 8)),
        ...                     q4, k, v, scale * LOG2E, 4096, 8, 64, 128, 0,
        ...                     0)  # doctest: +SKIP
    """
    bkv, s, _ = po.tile_index
    _, _, gc = plse.tile_shape
    heads_kv = k.shape[1]
    b = bkv // heads_kv
    hk = bkv % heads_kv
    qt = ct.reshape(ct.load(q, index=(b, hk, 0, 0), shape=(1, 1, gc, DP),
                            padding_mode=ct.PaddingMode.ZERO), (gc, DP))
    m_i = ct.full((gc, 1), -math.inf, dtype=ct.float32)
    l_i = ct.full((gc, 1), 0.0, dtype=ct.float32)
    acc = ct.full((gc, DP), 0.0, dtype=ct.float32)
    t0 = s * tiles_per_split
    t1 = min(t0 + tiles_per_split, ct.cdiv(kv_len, BN))
    for j in range(t0, t1):
        sc = ct.mma(qt, _load_kt(k, b, hk, j, DP, BN, LAT_K),
                    ct.full((gc, BN), 0.0, dtype=ct.float32))
        if (j + 1) * BN > kv_len:
            kpos = ct.reshape(j * BN + ct.arange(BN, dtype=ct.int32), (1, BN))
            sc = ct.where(kpos < kv_len, sc, -math.inf)
        m_i, l_i, acc = _softmax_step(sc, m_i, l_i, acc, _load_v(v, b, hk, j, BN, DP, LAT_V),
                                      qk_scale)
    out, lse = _split_result(m_i, l_i, acc)
    po.store(ct.reshape(out, (1, 1, gc * DP)))
    plse.store(ct.reshape(lse, (1, 1, gc)))


@tl.kernel
def decode_combine_kernel(o: tl.Out, po: tl.In, plse: tl.In, SC: ct.Constant[int],
                    DP: ct.Constant[int]):
    """Decode phase 2: merge the splits' partial outputs, weighted by their sum-exps.

    ``o`` is the (B*Hkv, G, D) view of the output partitioned (1, GC, DP); the splits
    are read SC at a time (padding: lse -inf, outputs 0, so padding weighs nothing).

    Example:
        >>> decode_combine_kernel(o.reshape(B * Hkv, G, D).partition((1, 8, 128)), po,
        ...                       plse, 16, 128)  # doctest: +SKIP
    """
    bkv, _, _ = o.tile_index
    _, gc, _ = o.tile_shape
    chunks = ct.cdiv(plse.shape[1], SC)
    mx = ct.full((1, gc), -math.inf, dtype=ct.float32)
    for c in range(chunks):
        lse = ct.load(plse, index=(bkv, c, 0), shape=(1, SC, gc),
                      padding_mode=ct.PaddingMode.NEG_INF)
        mx = ct.maximum(mx, ct.max(ct.reshape(lse, (SC, gc)), axis=0, keepdims=True))
    mx = ct.where(mx == -math.inf, 0.0, mx)   # padded heads: no NaN from -inf - -inf
    den = ct.full((1, gc), 0.0, dtype=ct.float32)
    acc = ct.full((gc, DP), 0.0, dtype=ct.float32)
    for c in range(chunks):
        lse = ct.load(plse, index=(bkv, c, 0), shape=(1, SC, gc),
                      padding_mode=ct.PaddingMode.NEG_INF)
        w = ct.exp2(ct.reshape(lse, (SC, gc)) - mx)
        den = den + ct.sum(w, axis=0, keepdims=True)
        part = ct.load(po, index=(bkv, c, 0), shape=(1, SC, gc * DP),
                       padding_mode=ct.PaddingMode.ZERO)
        acc = acc + ct.sum(ct.reshape(w, (SC, gc, 1)) * ct.reshape(part, (SC, gc, DP)),
                           axis=0)
    den = ct.where(den > 0.0, den, 1.0)
    out = acc / ct.reshape(den, (gc, 1))
    o.store(ct.reshape(out.astype(o.dtype), (1, gc, DP)))
