"""Decode attention with the q/k RMSNorm, RoPE and KV-cache write folded in.

The plain decode step launches two kernels per layer between its qkv projection and
its o projection: :func:`~tilelab.kernels.decode.step.qk_norm_rope_cache_kernel` (q/k
per-head norm, RoPE at ``pos``, the new key and value into the cache) and the one-pass
attention. Both run one block per KV head, so they can be one kernel — except that a
safe kernel may not read a tensor it writes, and attention reads the very cache rows
the first kernel writes. :func:`rope_attention_kernel` therefore

* normalizes and rotates the raw q and k of its KV head from the qkv projection;
* attends over the cache rows ``0..pos - 1``, then folds in the new key and value from
  registers as one more online-softmax step (the cache row at ``pos`` is not used: its
  weight is zero, as for the rows past ``pos`` in the plain kernel; the MMA loop is the
  plain kernel's, and the extra step is element-wise);
* writes the new key and value, rounded to the cache's dtype, into a small staging
  tensor ``kv_new`` (Hkv, 2, D) of its own layer;
* writes the *previous* layer's staged key and value into that layer's cache at
  ``pos``: an offset store into the block's own cache head, as the plain kernel makes
  (docs/safety.md, "Sub-tile stores at a data-dependent offset"). The previous layer's
  cache is another tensor region than the one this kernel reads, so no argument
  written overlaps one read, and the launch ledger proves it at every launch.

The last layer's staged key and value go to its cache in :func:`kv_store_kernel`, one
small launch per step. A step of L layers so runs L + 1 launches where the plain form
runs 2 L, and every cache row is written before the step ends, exactly as in the plain
form (the written values are the same bits: the same norm, rotation and rounding). The
attention output differs from the plain form's only by the order of the online softmax
(the new key is its own last step, not a lane of the last tile): float32 rounding.

Example:
    >>> import numpy as np, tilelab as tl
    >>> kc = tl.zeros((1, 4, 8), "float32", device="cpu")
    >>> vc = tl.zeros((1, 4, 8), "float32", device="cpu")
    >>> kv = tl.tensor(np.arange(16, dtype=np.float32).reshape(1, 2, 8), device="cpu")
    >>> pos = tl.tensor(np.array([2], np.int32), device="cpu")
    >>> kv_store_kernel(kc.partition((1, 4, 8)), vc.partition((1, 4, 8)), kv, pos)
    >>> kc.numpy()[0, 2].tolist() == list(range(8)), vc.numpy()[0, 2, 0].item()
    (True, 8.0)
"""
from __future__ import annotations

import math

import cuda.tile as ct

import tilelab as tl
from tilelab.kernels.attention.kernels import _softmax_step, _split_result
from tilelab.kernels.decode.step import _rms_halves, _rope_halves, _scalar_at

__all__ = ["rope_attention_kernel", "kv_store_kernel"]


def _rope_row(c, s, q, q_norm, eps, index, rows, D):
    """Rows ``rows`` of ``q`` at ``index`` (zero padded), RMS-normed with ``q_norm`` and
    rotated with the cos/sin rows ``c``, ``s`` (1, 1, D/2): float32 (1, rows, D)."""
    half = D // 2
    a = ct.load(q, index=index + (0,), shape=(1, rows, half),
                padding_mode=ct.PaddingMode.ZERO).astype(ct.float32)
    b = ct.load(q, index=index + (1,), shape=(1, rows, half),
                padding_mode=ct.PaddingMode.ZERO).astype(ct.float32)
    a, b = _rms_halves(a, b, q_norm, eps, D)
    return _rope_halves(a, b, c, s)


def _attend_then_fold(qt, kcache, vcache, hk, kn, vn, p, qk_scale, BN, D):
    """Online-softmax state of the (gc, D) queries ``qt`` over positions ``0..p`` of KV
    head ``hk``: rows below ``p`` from the caches, tile by tile as the plain one-pass
    kernel walks them (the loop body feeds the MMAs straight from the loads), then the
    new key ``kn`` and value ``vn`` (1, D) folded in as one more step, element-wise, in
    registers (the cache's row ``p`` weighs zero: its old contents are not used)."""
    gc = qt.shape[0]
    m_i = ct.full((gc, 1), -math.inf, dtype=ct.float32)
    l_i = ct.full((gc, 1), 0.0, dtype=ct.float32)
    acc = ct.full((gc, D), 0.0, dtype=ct.float32)
    for j in range(ct.cdiv(p, BN)):
        kt = ct.load(kcache, index=(hk, 0, j), shape=(1, D, BN), order=(0, 2, 1),
                     padding_mode=ct.PaddingMode.ZERO)
        sc = ct.mma(qt, ct.reshape(kt, (D, BN)), ct.full((gc, BN), 0.0, dtype=ct.float32))
        krow = ct.reshape(j * BN + ct.arange(BN, dtype=ct.int32), (1, BN))
        sc = ct.where(krow < p, sc, -math.inf)
        vt = ct.load(vcache, index=(hk, j, 0), shape=(1, BN, D),
                     padding_mode=ct.PaddingMode.ZERO)
        m_i, l_i, acc = _softmax_step(sc, m_i, l_i, acc, ct.reshape(vt, (BN, D)), qk_scale)
    # the new key: its score per query row, then the same update as _softmax_step's,
    # the probability rounded to the values' dtype as the MMA there rounds it
    s_new = ct.sum(qt.astype(ct.float32) * kn.astype(ct.float32), axis=1, keepdims=True)
    m_new = ct.maximum(m_i, s_new * qk_scale)
    p_new = ct.exp2(s_new * qk_scale - m_new, flush_to_zero=True)
    alpha = ct.exp2(m_i - m_new, flush_to_zero=True)
    l_i = l_i * alpha + p_new
    acc = acc * alpha + p_new.astype(vn.dtype).astype(ct.float32) * vn.astype(ct.float32)
    return m_new, l_i, acc


@tl.kernel
def rope_attention_kernel(o: tl.Out, kv_new: tl.Out, k_prev: tl.Out, v_prev: tl.Out,
                          q: tl.In, k: tl.In, v: tl.In, k_cache: tl.In, v_cache: tl.In,
                          kv_prev: tl.In, q_norm: tl.In, k_norm: tl.In, cos: tl.In,
                          sin: tl.In, pos: tl.In, eps: float, qk_scale: float,
                          BN: ct.Constant[int], D: ct.Constant[int],
                          PREV: ct.Constant[int]):
    """One layer's q/k norm, RoPE and decode attention at ``pos``, one block per KV
    head, and (PREV) the previous layer's new key and value into its cache.

    ``q`` (Hkv, G, D), ``k``, ``v`` (Hkv, D): the raw projections; ``o`` the (Hkv, G, D)
    output partitioned (1, GC, D), GC >= 16 a power of two >= G (the MMA's padding
    rows, clipped by the store); ``k_cache``/``v_cache`` (Hkv, S, D) this layer's caches,
    read at rows below ``pos``; ``kv_new`` (Hkv, 2, D) partitioned (1, 2, D): this
    layer's rotated key and value, in the caches' dtype; ``k_prev``/``v_prev`` the
    previous layer's (Hkv, S, D) caches partitioned (1, S, D) and ``kv_prev`` its
    staged keys and values (with PREV 0 nothing is written there and ``kv_prev`` is
    unread: pass any tensors of those shapes). ``qk_scale`` is log2(e)/sqrt(D); D a
    power of two. Row ``pos`` must lie inside the cache, as the step guarantees.

    Example:
        >>> rope_attention_kernel(o3.partition((1, 16, 128)), kvn.partition((1, 2, 128)),
        ...                       kp.partition((1, S, 128)), vp.partition((1, S, 128)),
        ...                       q3, k2, v2, kc, vc, kvp, qn, kn, cos, sin, pos, 1e-6,
        ...                       LOG2E / 128 ** 0.5, 256, 128, 1)   # doctest: +SKIP
    """
    hk = o.tile_index[0]
    gc = o.tile_shape[1]
    half = D // 2
    p = _scalar_at(pos, 0)
    prow = ct.full((1, 1), p, dtype=ct.int32)
    cols = ct.reshape(ct.arange(half, dtype=ct.int32), (1, half))
    c = ct.gather(cos, (prow, cols)).astype(ct.float32)
    s = ct.gather(sin, (prow, cols)).astype(ct.float32)
    c3 = ct.reshape(c, (1, 1, half))
    s3 = ct.reshape(s, (1, 1, half))
    # the new key and value, rounded as the cache holds them
    k1 = ct.load(k, index=(hk, 0), shape=(1, half)).astype(ct.float32)
    k2 = ct.load(k, index=(hk, 1), shape=(1, half)).astype(ct.float32)
    k1, k2 = _rms_halves(k1, k2, k_norm, eps, D)
    kr = _rope_halves(k1, k2, c, s).astype(kv_new.dtype)
    vr = ct.load(v, index=(hk, 0), shape=(1, D)).astype(kv_new.dtype)
    kv_new.store(ct.reshape(ct.cat((kr, vr), axis=-1), (1, 2, D)))
    # the queries, rounded as the plain form stores them before attending
    qr = _rope_row(c3, s3, q, q_norm, eps, (hk, 0), gc, D).astype(q.dtype)
    m_i, l_i, acc = _attend_then_fold(
        ct.reshape(qr, (gc, D)), k_cache, v_cache, hk, kr.astype(k_cache.dtype),
        vr.astype(v_cache.dtype), p, qk_scale, BN, D)
    out, _lse = _split_result(m_i, l_i, acc)
    o.store(ct.reshape(out.astype(o.dtype), (1, gc, D)))
    if PREV:
        kp = ct.load(kv_prev, index=(hk, 0, 0), shape=(1, 1, D))
        k_prev.store(kp.astype(k_prev.dtype), offset=(0, p, 0))
        vp = ct.load(kv_prev, index=(hk, 1, 0), shape=(1, 1, D))
        v_prev.store(vp.astype(v_prev.dtype), offset=(0, p, 0))


@tl.kernel
def kv_store_kernel(k_cache: tl.Out, v_cache: tl.Out, kv: tl.In, pos: tl.In):
    """A layer's staged key and value ``kv`` (Hkv, 2, D) into its caches at ``pos``:
    ``k_cache``/``v_cache`` (Hkv, S, D) partitioned (1, S, D), one block per KV head
    writing one row of its own head (nothing when ``pos`` is past the cache).

    Example:
        >>> kv_store_kernel(kc.partition((1, S, 128)), vc.partition((1, S, 128)), kv,
        ...                 pos)                                     # doctest: +SKIP
    """
    hk = k_cache.tile_index[0]
    d = k_cache.tile_shape[2]
    p = _scalar_at(pos, 0)
    kt = ct.load(kv, index=(hk, 0, 0), shape=(1, 1, d))
    k_cache.store(kt.astype(k_cache.dtype), offset=(0, p, 0))
    vt = ct.load(kv, index=(hk, 1, 0), shape=(1, 1, d))
    v_cache.store(vt.astype(v_cache.dtype), offset=(0, p, 0))
