"""Decode-step kernels that read the step's state from device memory.

A decode step recorded once in a CUDA graph must not take the token or the position
as kernel arguments: replays reuse the recorded arguments. So these kernels read them
from small device tensors — ``tokens`` (every token of the sequence, int32), ``pos``
(the current position, one int32) and the sampling state — and the step itself
advances them:

* :func:`embed_at_kernel`: the embedding row of ``tokens[pos]``;
* :func:`qk_norm_rope_cache_kernel`: q/k per-head RMSNorm, RoPE at ``pos`` and the
  KV-cache write of the new key and value (an offset store into the block's own cache
  head: see docs/safety.md);
* :func:`decode_split_kernel`: phase 1 of split-KV GQA decode attention over the first
  ``pos + 1`` cache positions (the split count is fixed, the key tiles are spread over
  the splits on the device; phase 2 is :func:`decode_combine_head_kernel`), and
  :func:`decode_attention_kernel`, the same attention in one pass and one launch (one
  block per KV head: the form for short contexts);
* :func:`lm_head_partial_kernel` and :func:`pick_token_kernel`: the lm_head GEMV with
  per-block (max, first index) partials of the logits (or of the Gumbel-perturbed
  logits when sampling), and their combine into ``tokens[pos + 1]`` (an offset store),
  with a flag in ``nonfinite[pos]`` when a logit was NaN or infinite (the host raises
  instead of returning that token);
* :func:`advance_kernel`: ``pos += 1``;
* :func:`kv_fill_kernel`: a prefill's keys or values into the first rows of a cache.

Every kernel is a safe kernel: outputs are ``tl.Out``/``tl.InOut`` partitions, every
other tensor is a ``tl.In`` read, and the data-dependent reads (``tokens[pos]``, the
table row, the cos/sin rows) are ``ct.gather``\\ s, which read zeros out of bounds.

Example:
    >>> import numpy as np, tilelab as tl
    >>> pos = tl.tensor(np.array([4], np.int32), device="cpu")
    >>> advance_kernel(pos.partition(1)); int(pos.numpy()[0])
    5
"""
from __future__ import annotations

import math

import cuda.tile as ct

import tilelab as tl
from tilelab.kernels._host.device import weight_tile
from tilelab.kernels.attention.kernels import _softmax_step, _split_result

__all__ = ["embed_at_kernel", "qk_norm_rope_cache_kernel", "decode_split_kernel",
           "decode_attention_kernel",
           "decode_combine_head_kernel", "lm_head_partial_kernel", "pick_token_kernel", "advance_kernel", "kv_fill_kernel", "gumbel_noise",
           "GUMBEL_SCALE", "LOG2E", "NONFINITE"]

LOG2E = 1.4426950408889634
#: 2**-24: the hash's top 24 bits become a uniform number in (0, 1)
GUMBEL_SCALE = 1.0 / 16777216.0
#: an index larger than any vocabulary: what a masked lane offers to a min-index
_NO_INDEX = 2147483647
#: the index partial of an lm_head block whose scores hold NaN or infinity (no index
#: is negative otherwise): the non-finite flag, read by :func:`pick_token_kernel`
NONFINITE = -1


# ======================================================================================
# helpers


def _scalar_at(t, i):
    """Element i of a 1-D int tensor as a scalar (a one-element load, then .item())."""
    return ct.load(t, index=(i,), shape=(1,)).item()


def _mix32(h):
    """A 32-bit integer finalizer (xor-shift-multiply rounds) of a uint32 tile."""
    h = h ^ (h >> 16)
    h = h * ct.full(h.shape, 0x7FEB352D, dtype=ct.uint32)
    h = h ^ (h >> 15)
    h = h * ct.full(h.shape, 0x846CA68B, dtype=ct.uint32)
    return h ^ (h >> 16)


def gumbel_noise(seed, step, idx):
    """Gumbel(0, 1) noise for int32 vocabulary indices ``idx`` (a tile), as float32.

    A counter-based hash of (seed, step, index): the same triple always gives the same
    number, so sampling is reproducible and needs no state. Its top 24 bits make a
    uniform ``u`` in (0, 1) and the noise is ``-log(-log(u))``.

    Example:
        >>> g = gumbel_noise(seed, pos, idx)                              # doctest: +SKIP
    """
    s = _mix32(ct.full(idx.shape, seed, dtype=ct.int32).astype(ct.uint32))
    s = _mix32(s ^ ct.full(idx.shape, step, dtype=ct.int32).astype(ct.uint32))
    h = _mix32(s ^ idx.astype(ct.uint32))
    u = ((h >> 8).astype(ct.float32) + 0.5) * GUMBEL_SCALE
    return -ct.log(-ct.log(u))


# ======================================================================================
# kernels


@tl.kernel
def embed_at_kernel(x: tl.Out, table: tl.In, tokens: tl.In, pos: tl.In):
    """``x = table[tokens[pos]]``: this block's columns of the current token's row.

    Example:
        >>> embed_at_kernel(x.partition(1024), table, tokens, pos)      # doctest: +SKIP
    """
    bd = x.tile_shape[0]
    n = x.tile_index[0]
    p = ct.load(pos, index=(0,), shape=(1,))
    tok = ct.gather(tokens, p)
    cols = n * bd + ct.arange(bd, dtype=ct.int32)
    row = ct.gather(table, (ct.reshape(tok, (1, 1)), ct.reshape(cols, (1, bd))))
    x.store(ct.reshape(row, (bd,)))


def _rms_halves(a, b, w, eps, D):
    """RMSNorm over the last axis of rows held as two halves ``a``, ``b`` (float32), with
    the (D,) weight ``w``; returns the normalized halves."""
    half = D // 2
    ss = ct.sum(a * a, axis=-1, keepdims=True) + ct.sum(b * b, axis=-1, keepdims=True)
    rstd = ct.rsqrt(ss * (1.0 / D) + eps)
    w1 = ct.load(w, index=(0,), shape=(half,)).astype(ct.float32)
    w2 = ct.load(w, index=(1,), shape=(half,)).astype(ct.float32)
    return a * rstd * w1, b * rstd * w2


def _rope_halves(a, b, c, s):
    """Rotate-half RoPE of halves ``a``, ``b`` with the cos/sin rows ``c``, ``s``."""
    return ct.cat((a * c - b * s, b * c + a * s), axis=-1)


@tl.kernel
def qk_norm_rope_cache_kernel(q_out: tl.Out, k_cache: tl.Out, v_cache: tl.Out, q: tl.In,
                              k: tl.In, v: tl.In, q_norm: tl.In, k_norm: tl.In, cos: tl.In,
                              sin: tl.In, pos: tl.In, eps: float, D: ct.Constant[int]):
    """Per-head RMSNorm of q and k, RoPE at ``pos``, and the new k and v into the caches.

    Block ``h`` handles KV head h: the G query heads of its group (``q`` (Hkv, G, D),
    ``q_out`` the same shape partitioned (1, GP, D), GP = G rounded up to a power of
    two), its key ``k`` (Hkv, D) and value ``v`` (Hkv, D). ``k_cache``/``v_cache`` are
    one layer's (Hkv, S, D) caches partitioned (1, S, D): block h owns head h's whole
    cache and writes one row of it, at the device-held position, with an offset store
    (skipped if ``pos`` is past the cache). ``cos``/``sin`` are (max_pos, D/2) tables,
    gathered at ``pos`` (zeros out of range). D must be a power of two.

    Example:
        >>> qk_norm_rope_cache_kernel(qo.partition((1, 4, 128)), kc.partition((1, S, 128)),
        ...                           vc.partition((1, S, 128)), q3, k2, v2, qn, kn, cos,
        ...                           sin, pos, 1e-6, 128)                 # doctest: +SKIP
    """
    h = k_cache.tile_index[0]
    gp = q_out.tile_shape[1]
    half = D // 2
    p = _scalar_at(pos, 0)
    prow = ct.full((1, 1), p, dtype=ct.int32)
    cols = ct.reshape(ct.arange(half, dtype=ct.int32), (1, half))
    c = ct.gather(cos, (prow, cols)).astype(ct.float32)
    s = ct.gather(sin, (prow, cols)).astype(ct.float32)
    q1 = ct.load(q, index=(h, 0, 0), shape=(1, gp, half), padding_mode=ct.PaddingMode.ZERO)
    q2 = ct.load(q, index=(h, 0, 1), shape=(1, gp, half), padding_mode=ct.PaddingMode.ZERO)
    q1, q2 = _rms_halves(q1.astype(ct.float32), q2.astype(ct.float32), q_norm, eps, D)
    c3 = ct.reshape(c, (1, 1, half))
    s3 = ct.reshape(s, (1, 1, half))
    q_out.store(_rope_halves(q1, q2, c3, s3).astype(q_out.dtype))
    k1 = ct.load(k, index=(h, 0), shape=(1, half)).astype(ct.float32)
    k2 = ct.load(k, index=(h, 1), shape=(1, half)).astype(ct.float32)
    k1, k2 = _rms_halves(k1, k2, k_norm, eps, D)
    kr = ct.reshape(_rope_halves(k1, k2, c, s), (1, 1, D))
    k_cache.store(kr.astype(k_cache.dtype), offset=(0, p, 0))
    vr = ct.reshape(ct.load(v, index=(h, 0), shape=(1, D)), (1, 1, D))
    v_cache.store(vr.astype(v_cache.dtype), offset=(0, p, 0))


@tl.kernel
def decode_split_kernel(po: tl.Out, plse: tl.Out, q: tl.In, k: tl.In, v: tl.In,
                        pos: tl.In, qk_scale: float, BN: ct.Constant[int],
                        DP: ct.Constant[int]):
    """Phase 1 of decode attention over cache positions ``0..pos`` (read on device).

    ``q`` is (Hkv, G, D) (the G query heads of each KV head), ``k``/``v`` the (Hkv, S, D)
    caches. ``po`` (Hkv, splits, G*DP) and ``plse`` (Hkv, splits, G) are fp32 scratch
    partitioned (1, 1, GC*DP) and (1, 1, GC), GC >= 16 a power of two (the padding rows
    are zeros and the stores clip them). The ``ceil((pos+1)/BN)`` key tiles are spread
    evenly over the splits; block (hk, s) writes its normalized partial output and its
    log2-sum-exp (-inf for an empty split).

    Example:
        >>> decode_split_kernel(po.partition((1, 1, 16 * 128)), plse.partition((1, 1, 16)),
        ...                     q3, kc, vc, pos, scale * LOG2E, 64, 128)   # doctest: +SKIP
    """
    hk, s, _ = po.tile_index
    gc = plse.tile_shape[2]
    splits = po.shape[1]
    kv_len = _scalar_at(pos, 0) + 1
    n_tiles = ct.cdiv(kv_len, BN)
    per = ct.cdiv(n_tiles, splits)
    t0 = s * per
    m_i, l_i, acc = _attend_tiles(q, k, v, hk, gc, kv_len, t0, min(t0 + per, n_tiles),
                                  qk_scale, BN, DP)
    out, lse = _split_result(m_i, l_i, acc)
    po.store(ct.reshape(out, (1, 1, gc * DP)))
    plse.store(ct.reshape(lse, (1, 1, gc)))


def _attend_tiles(q, k, v, hk, gc, kv_len, t0, t1, qk_scale, BN, DP):
    """The online-softmax state (max, sum, unnormalized output) of KV head ``hk``'s
    ``gc`` (padded) query rows over key tiles ``t0..t1`` of the caches, keys at or past
    ``kv_len`` masked out."""
    qt = ct.reshape(ct.load(q, index=(hk, 0, 0), shape=(1, gc, DP),
                            padding_mode=ct.PaddingMode.ZERO), (gc, DP))
    m_i = ct.full((gc, 1), -math.inf, dtype=ct.float32)
    l_i = ct.full((gc, 1), 0.0, dtype=ct.float32)
    acc = ct.full((gc, DP), 0.0, dtype=ct.float32)
    for j in range(t0, t1):
        kt = ct.load(k, index=(hk, 0, j), shape=(1, DP, BN), order=(0, 2, 1),
                     padding_mode=ct.PaddingMode.ZERO)
        sc = ct.mma(qt, ct.reshape(kt, (DP, BN)), ct.full((gc, BN), 0.0, dtype=ct.float32))
        kpos = ct.reshape(j * BN + ct.arange(BN, dtype=ct.int32), (1, BN))
        sc = ct.where(kpos < kv_len, sc, -math.inf)
        vt = ct.load(v, index=(hk, j, 0), shape=(1, BN, DP), padding_mode=ct.PaddingMode.ZERO)
        m_i, l_i, acc = _softmax_step(sc, m_i, l_i, acc, ct.reshape(vt, (BN, DP)), qk_scale)
    return m_i, l_i, acc


@tl.kernel
def decode_attention_kernel(o: tl.Out, q: tl.In, k: tl.In, v: tl.In, pos: tl.In,
                            qk_scale: float, BN: ct.Constant[int], DP: ct.Constant[int]):
    """Decode attention over cache positions ``0..pos`` in one pass, one block per KV
    head: no split partials and no combine launch (the short-context form).

    ``q`` is (Hkv, G, D), ``k``/``v`` the (Hkv, S, D) caches, ``o`` the (Hkv, G, D) view
    of the output partitioned (1, GC, D), GC >= 16 a power of two >= G (the padding rows
    of the MMA; the store clips them).

    Example:
        >>> decode_attention_kernel(o3.partition((1, 16, 128)), q3, kc, vc, pos,
        ...                         scale * LOG2E, 64, 128)               # doctest: +SKIP
    """
    hk = o.tile_index[0]
    gc = o.tile_shape[1]
    kv_len = _scalar_at(pos, 0) + 1
    m_i, l_i, acc = _attend_tiles(q, k, v, hk, gc, kv_len, 0, ct.cdiv(kv_len, BN),
                                  qk_scale, BN, DP)
    out, _lse = _split_result(m_i, l_i, acc)
    o.store(ct.reshape(out.astype(o.dtype), (1, gc, DP)))


@tl.kernel
def decode_combine_head_kernel(o: tl.Out, po: tl.In, plse: tl.In, SC: ct.Constant[int],
                               DP: ct.Constant[int]):
    """Decode phase 2 with one block per query head: merge the splits' partial outputs,
    weighted by their sum-exps (base 2, as :func:`decode_split_kernel` writes them).

    ``o`` is the (Hkv, G, D) view of the output partitioned (1, 1, DP); ``po`` the
    (Hkv, splits, GC, DP) view of the split partials and ``plse`` (Hkv, splits, GC) their
    log-sum-exps, GC >= G the split kernel's padded group. Splits are read SC at a time
    (padding: lse -inf, outputs 0, so padding weighs nothing). One block per query head
    instead of per KV head spreads the merge over G times more SMs.

    Example:
        >>> decode_combine_head_kernel(o3.partition((1, 1, 128)), po4, plse, 16, 128)
        ... # doctest: +SKIP
    """
    bkv, gi, _ = o.tile_index
    chunks = ct.cdiv(plse.shape[1], SC)
    mx = ct.full((1, 1), -math.inf, dtype=ct.float32)
    for c in range(chunks):
        lse = ct.load(plse, index=(bkv, c, gi), shape=(1, SC, 1),
                      padding_mode=ct.PaddingMode.NEG_INF)
        mx = ct.maximum(mx, ct.max(ct.reshape(lse, (SC, 1)), axis=0, keepdims=True))
    mx = ct.where(mx == -math.inf, 0.0, mx)   # an empty head: no NaN from -inf - -inf
    den = ct.full((1, 1), 0.0, dtype=ct.float32)
    acc = ct.full((1, DP), 0.0, dtype=ct.float32)
    for c in range(chunks):
        lse = ct.load(plse, index=(bkv, c, gi), shape=(1, SC, 1),
                      padding_mode=ct.PaddingMode.NEG_INF)
        w = ct.exp2(ct.reshape(lse, (SC, 1)) - mx)
        den = den + ct.sum(w, axis=0, keepdims=True)
        part = ct.load(po, index=(bkv, c, gi, 0), shape=(1, SC, 1, DP),
                       padding_mode=ct.PaddingMode.ZERO)
        acc = acc + ct.sum(w * ct.reshape(part, (SC, DP)), axis=0, keepdims=True)
    den = ct.where(den > 0.0, den, 1.0)
    o.store(ct.reshape((acc / den).astype(o.dtype), (1, 1, DP)))


def _vector_row(x, k, BK):
    """Slice k of the vector ``x`` as a zero-padded (1, BK) float32 tile."""
    xk = ct.load(x, index=(k,), shape=(BK,), padding_mode=ct.PaddingMode.ZERO)
    return ct.reshape(xk.astype(ct.float32), (1, BK))


@tl.kernel
def lm_head_partial_kernel(logits: tl.Out, pval: tl.Out, pidx: tl.Out, w: tl.In, x: tl.In,
                           inv_temp: tl.In, seed: tl.In, pos: tl.In, BK: ct.Constant[int],
                           LAT: ct.Constant[int], SAMPLE: ct.Constant[int]):
    """Logits ``w @ x`` (fp32) of this block's rows and their (max, first index) partial.

    With SAMPLE the partial is that of ``logits * inv_temp + gumbel(seed, pos, index)``
    (the Gumbel-max trick: the argmax of the perturbed scores is a sample of
    softmax(logits / T)); without it, that of the logits. Rows past the vocabulary are
    masked out; ``pval``/``pidx`` are (blocks,) partitioned (1,). A block with a NaN or
    infinite score (a NaN weight, an overflow) writes the partial (-inf,
    :data:`NONFINITE`): the flag :func:`pick_token_kernel` passes on.

    Example:
        >>> lm_head_partial_kernel(lg.partition(16), pv.partition(1), pi.partition(1), w, x,
        ...                        inv_t, seed, pos, 512, 0, 0)          # doctest: +SKIP
    """
    bn = logits.tile_shape[0]
    n = logits.tile_index[0]
    w0 = weight_tile(w, (n, 0), (bn, BK), LAT)   # streams while the previous kernel ends
    tl.wait_for_previous_kernel()
    acc = w0.astype(ct.float32) * _vector_row(x, 0, BK)
    for k in range(1, ct.cdiv(w.shape[1], BK)):
        wk = weight_tile(w, (n, k), (bn, BK), LAT)
        acc = acc + wk.astype(ct.float32) * _vector_row(x, k, BK)
    lg = ct.sum(acc, axis=1)
    logits.store(lg)
    idx = n * bn + ct.arange(bn, dtype=ct.int32)
    score = lg
    if SAMPLE:
        t = ct.load(inv_temp, index=(0,), shape=(1,))
        score = lg * t + gumbel_noise(_scalar_at(seed, 0), _scalar_at(pos, 0), idx)
    valid = idx < w.shape[0]
    # NaN or +-inf among this block's scores: no index of them is a token (the flag)
    odd = valid & (ct.isnan(score) | (ct.abs(score) == math.inf))
    bad = ct.max(odd.astype(ct.int32), axis=0, keepdims=True) > 0
    score = ct.where(valid, score, -math.inf)
    best = ct.max(score, axis=0, keepdims=True)
    first = ct.min(ct.where(valid & (score == best), idx, _NO_INDEX), axis=0, keepdims=True)
    pval.store(ct.where(bad, -math.inf, best))
    pidx.store(ct.where(bad, NONFINITE, first))


@tl.kernel
def pick_token_kernel(tokens: tl.Out, nonfinite: tl.Out, pval: tl.In, pidx: tl.In,
                      pos: tl.In, CHUNK: ct.Constant[int]):
    """Combine the lm_head partials into ``tokens[pos + 1]``: the index of the largest
    score, the first one on ties; and ``nonfinite[pos]``: 1 when a partial carries the
    :data:`NONFINITE` flag (the scores at ``pos`` held NaN or infinity), else 0.

    Blocks cover increasing indices, so the smallest partial index among the blocks
    that reach the maximum is the first index of the maximum overall. ``tokens`` and
    ``nonfinite`` are the (S,) int32 sequence and its flags, each partitioned as one
    tile (S a power of two); the token is an offset store at ``pos + 1`` (skipped when
    that is past the end), the flag one at ``pos``. The host reads the flags with the
    tokens and raises for a flagged one. Partials are read ``CHUNK`` at a time.

    Example:
        >>> pick_token_kernel(tokens.partition(S), flags.partition(S), pv, pi, pos, 1024)
        ... # doctest: +SKIP
    """
    chunks = ct.cdiv(pval.shape[0], CHUNK)
    best = ct.full((1,), -math.inf, dtype=ct.float32)
    for c in range(chunks):
        v = ct.load(pval, index=(c,), shape=(CHUNK,), padding_mode=ct.PaddingMode.NEG_INF)
        best = ct.maximum(best, ct.max(v, axis=0, keepdims=True))
    first = ct.full((1,), _NO_INDEX, dtype=ct.int32)
    bad = ct.full((1,), 0, dtype=ct.int32)
    for c in range(chunks):
        v = ct.load(pval, index=(c,), shape=(CHUNK,), padding_mode=ct.PaddingMode.NEG_INF)
        i = ct.load(pidx, index=(c,), shape=(CHUNK,), padding_mode=ct.PaddingMode.ZERO)
        lane = c * CHUNK + ct.arange(CHUNK, dtype=ct.int32)
        real = lane < pval.shape[0]
        hit = (v == best) & real & (i >= 0)
        first = ct.minimum(first, ct.min(ct.where(hit, i, _NO_INDEX), axis=0, keepdims=True))
        flagged = (real & (i == NONFINITE)).astype(ct.int32)
        bad = ct.maximum(bad, ct.max(flagged, axis=0, keepdims=True))
    nxt = ct.where(first == _NO_INDEX, 0, first)
    p = _scalar_at(pos, 0)
    tokens.store(nxt, offset=(p + 1,))
    nonfinite.store(bad, offset=(p,))


@tl.kernel
def advance_kernel(pos: tl.InOut):
    """``pos += 1`` on the device (``pos`` a (1,) int32 tensor partitioned (1,)).

    Example:
        >>> advance_kernel(pos.partition(1))                             # doctest: +SKIP
    """
    pos.store(pos.load() + 1)


@tl.kernel
def kv_fill_kernel(cache: tl.Out, kv: tl.In):
    """Rows ``0..T`` of one layer's cache from a prefill's (T, Hkv, D) keys or values.

    ``cache`` is the (Hkv, T, D) view of the cache's first T positions, partitioned
    (1, BT, D): block (h, m) copies tokens m*BT.. of head h.

    Example:
        >>> kv_fill_kernel(kc[:, :T].partition((1, 16, 128)), k)         # doctest: +SKIP
    """
    _, bt, dp = cache.tile_shape
    h, m, _ = cache.tile_index
    t = ct.load(kv, index=(m, h, 0), shape=(bt, 1, dp), padding_mode=ct.PaddingMode.ZERO)
    cache.store(ct.reshape(t, (1, bt, dp)))
