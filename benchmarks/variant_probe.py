"""Kernel-shape experiments for the two memory/compute gaps left in the suite.

Why: softmax (16384 x 8192 bf16) runs at 72% of nominal bandwidth against the copy
ceiling's 89%, and flash attention at 0.92x SDPA, after every tile and hint in the
sweeps. Both gaps would need a different kernel, not a different config, so this
times candidate kernels (in interleaved rounds, each checked against torch first):

* softmax ``split``: each row is viewed as G sub-rows of 8192/G, so the max and the sum
  reduce within a sub-row first and then over G partial results (one exponential per
  element, as before); ``exp2``: the one-pass kernel with exp2 and flush-to-zero;
* attention ``pipe``: the next K tile's scores are issued before this tile's softmax
  (the overlap FlashAttention-3 gets inside a warpgroup), ``lazy``: the running max is
  only moved when it grows by more than 2^8, which skips most rescales of the
  accumulator; ``kt``: K loaded in its own layout and transposed in the kernel.

    python benchmarks/variant_probe.py --out probe.json [--only softmax,rmsnorm,rope,attention]
        [--seqs 1024,2048] [--causal-seqs 4096]

What it found on the H200 (``results/variant_probe_h200_2026-11-30*.json``):

* softmax 16384 x 8192 bf16: ``exp2`` 140-142 us and ``split`` 134-136 us against the
  library's 157.6 (``exp``, 8 worker warps). The library then took the split kernel but
  ran 240.8 us: its -inf padding made the loads plain loads instead of TMA. With zero
  padding where no row is padded it runs 135.8 us (run d), 3.95 TB/s.
* RMSNorm: sub-row splits 279-349 us against the library's 265; RoPE: table rows as
  tiles, whole-token loads and 2-4 tokens per tile 141-634 us against the library's
  141.6; reduce (row_max): TMA loads 255 us against the plain loads' 193 (run d, code
  since removed). The library keeps its kernels there.
* attention: ``pipe`` and ``lazy`` slower at every tile; ``kt`` within +-2% of the
  library (1.5-2.5% faster at 4096 keys, 1% slower at 16384).
* attention, persistent (runs h-j): one block per SM looping over query tiles, 128x256
  tiles with 8 worker warps, 1-8.5% faster at 4096 keys and 2-4.5% at 8192 than the
  same tiles per tile (now the library's default there, ``AttentionConfig.persistent``);
  no gain at 1K-2K keys (64x128 tiles, occupancy 2, stay); occupancy 3 and 64x64 tiles
  no better; num_ctas=2 2-50x slower; causal 4K: 64x128 tiles 5% faster than the
  warp-specialized ones. Caveat: up to run j the probe timed its variants in a fixed
  order, and the same config timed twice in one run differed by up to 6% (run j at 2K
  keys); since run k each round starts one variant later, as the suite's rounds. Run k
  (rotated, five rounds) kept every default: 1K-2K keys 64x128 occupancy 2 (2K: 945 us
  both times it ran, persistent 128x256 1000); 4K persistent 128x256 1% faster than per
  tile (3713 against 3749; the same config also timed 3817); causal 4K 64x128 tiles
  2185-2274 us against 2326 warp-specialized; causal 8K per-tile 128x256 8088-8251
  against 8345 persistent.
"""
from __future__ import annotations

import argparse
import importlib
import json
import math
import statistics
import sys
from pathlib import Path

import cuda.tile as ct

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import tilelab as tl  # noqa: E402
from probe_rounds import print_failures, time_rounds  # noqa: E402
from tilelab.kernels._host import hinted  # noqa: E402
from tilelab.kernels.attention import (LOG2E, AttentionConfig, _load_kt,  # noqa: E402
                                       _load_v, _softmax_step, plan_attention)
from tilelab.kernels.elementwise import _partition_2d, _row_schedule  # noqa: E402
from tilelab.kernels.rope import _rotate, rope_seq_kernel  # noqa: E402
from tilelab.kernels.softmax import softmax_online_kernel  # noqa: E402

LN2_INV = 1.4426950408889634


# ---- softmax candidates ----------------------------------------------------------------

@tl.kernel
def softmax_split(y: tl.Out, x: tl.In):
    """One row per (G, W) tile: reduce each sub-row, then the G partial results."""
    t = ct.load(x, index=y.tile_index, shape=y.tile_shape).astype(ct.float32)
    mloc = ct.max(t, axis=1, keepdims=True)
    e = ct.exp2((t - mloc) * LN2_INV, flush_to_zero=True)
    sloc = ct.sum(e, axis=1, keepdims=True)
    mx = ct.max(mloc, axis=0, keepdims=True)
    w = ct.exp2((mloc - mx) * LN2_INV, flush_to_zero=True)
    s = ct.sum(sloc * w, axis=0, keepdims=True)
    y.store((e * (w * (1.0 / s))).astype(y.dtype))


@tl.kernel
def softmax_exp2(y: tl.Out, x: tl.In):
    """The library's one-pass kernel with exp2 (log2(e) folded in) and flush-to-zero."""
    t = ct.load(x, index=y.tile_index, shape=y.tile_shape).astype(ct.float32)
    mx = ct.max(t, axis=1, keepdims=True)
    e = ct.exp2((t - mx) * LN2_INV, flush_to_zero=True)
    s = ct.sum(e, axis=1, keepdims=True)
    y.store((e * (1.0 / s)).astype(y.dtype))


@tl.kernel
def softmax_recompute(y: tl.Out, x: tl.In):
    """The row stays bf16 in registers: the max is taken on bf16 (exact), and the
    exponentials are computed twice (for the sum, then with log2 of the sum folded into
    the shift) instead of keeping an fp32 copy of the row live, so more rows fit per SM."""
    t = ct.load(x, index=y.tile_index, shape=y.tile_shape)
    c = ct.max(t, axis=1, keepdims=True).astype(ct.float32) * LN2_INV
    s = ct.sum(ct.exp2(t.astype(ct.float32) * LN2_INV - c, flush_to_zero=True), axis=1,
               keepdims=True)
    r = ct.exp2(t.astype(ct.float32) * LN2_INV - (c + ct.log2(s)), flush_to_zero=True)
    y.store(r.astype(y.dtype))


@tl.kernel
def rms_split(y: tl.Out, x: tl.In, w: tl.In, eps: float, G: ct.Constant[int]):
    """RMSNorm of BM rows, each viewed as G sub-rows of W: tile (BM*G, W), w (G, W)."""
    rg, wd = y.tile_shape
    bm = rg // G
    h = ct.load(x, index=y.tile_index, shape=y.tile_shape).astype(ct.float32)
    ss = ct.sum(ct.reshape(h * h, (bm, G, wd)), axis=2, keepdims=True)
    ms = ct.sum(ss, axis=1, keepdims=True) * (1.0 / (G * x.shape[1]))
    g = ct.reshape(ct.load(w, index=(0, 0), shape=(G, wd)).astype(ct.float32), (1, G, wd))
    r = ct.reshape(h, (bm, G, wd)) * ct.rsqrt(ms + eps) * g
    y.store(ct.reshape(r, (rg, wd)).astype(y.dtype))


@tl.kernel
def rope_seq_tma(out: tl.Out, x: tl.In, cos: tl.In, sin: tl.In, seq_len: int,
                 HEAD_DIM: ct.Constant[int]):
    """RoPE with the table rows loaded as one tile (TMA) instead of gathered: valid when
    seq_len is a multiple of the token tile (a tile's positions are then contiguous)."""
    bt, width = out.tile_shape
    m, _ = out.tile_index
    half = HEAD_DIM // 2
    t = m % (seq_len // bt)
    c = ct.load(cos, index=(t, 0), shape=(bt, half), padding_mode=ct.PaddingMode.ZERO)
    s = ct.load(sin, index=(t, 0), shape=(bt, half), padding_mode=ct.PaddingMode.ZERO)
    c = ct.reshape(c.astype(ct.float32), (bt, 1, half))
    s = ct.reshape(s.astype(ct.float32), (bt, 1, half))
    out.store(_rotate(x, m, bt, width // HEAD_DIM, half, c, s).astype(out.dtype))


@tl.kernel
def rope_seq_whole(out: tl.Out, x: tl.In, cos: tl.In, sin: tl.In, seq_len: int,
                   HEAD_DIM: ct.Constant[int]):
    """RoPE loading each token tile whole (one contiguous load) and splitting the halves
    in registers, with the tables as tiles (as rope_seq_tma)."""
    bt, width = out.tile_shape
    m, _ = out.tile_index
    half = HEAD_DIM // 2
    bh = width // HEAD_DIM
    t = m % (seq_len // bt)
    c = ct.load(cos, index=(t, 0), shape=(bt, half), padding_mode=ct.PaddingMode.ZERO)
    s = ct.load(sin, index=(t, 0), shape=(bt, half), padding_mode=ct.PaddingMode.ZERO)
    c = ct.reshape(c.astype(ct.float32), (bt, 1, half))
    s = ct.reshape(s.astype(ct.float32), (bt, 1, half))
    v = ct.load(x, index=(m, 0, 0), shape=(bt, bh, HEAD_DIM),
                padding_mode=ct.PaddingMode.ZERO).astype(ct.float32)
    x1 = ct.extract(v, (0, 0, 0), shape=(bt, bh, half))
    x2 = ct.extract(v, (0, 0, 1), shape=(bt, bh, half))
    r = ct.cat((x1 * c - x2 * s, x2 * c + x1 * s), axis=2)
    out.store(ct.reshape(r, (bt, bh * HEAD_DIM)).astype(out.dtype))


# ---- attention candidates (non-causal, kv_len a multiple of BN) ------------------------

def _head(bh, q, k):
    heads = q.shape[1]
    b = bh // heads
    h = bh % heads
    return b, h, h // (heads // k.shape[1])


def _load_q(q, b, h, mi, bm, dp):
    return ct.reshape(ct.load(q, index=(b, h, mi, 0), shape=(1, 1, bm, dp),
                              padding_mode=ct.PaddingMode.ZERO), (bm, dp))


def _start(q, k, tile_index, tile_shape):
    """(bm, dp, b, hk, the Q tile, running max, running sum, accumulator) of the block
    that owns the output tile at ``tile_index`` (a kernel may not hand its partition to
    a helper, so it passes the tile's index and shape)."""
    _, bm, dp = tile_shape
    bh, mi, _ = tile_index
    b, h, hk = _head(bh, q, k)
    qt = _load_q(q, b, h, mi, bm, dp)
    return (bm, dp, b, hk, qt, ct.full((bm, 1), -math.inf, dtype=ct.float32),
            ct.full((bm, 1), 0.0, dtype=ct.float32), ct.full((bm, dp), 0.0, dtype=ct.float32))


@tl.kernel
def attn_pipe(o: tl.Out, q: tl.In, k: tl.In, v: tl.In, qk_scale: float,
              BN: ct.Constant[int]):
    """Scores of tile j+1 are issued before the softmax of tile j."""
    bm, dp, b, hk, qt, m_i, l_i, acc = _start(q, k, o.tile_index, o.tile_shape)
    n_tiles = ct.cdiv(k.shape[2], BN)
    s = ct.mma(qt, _load_kt(k, b, hk, 0, dp, BN, 0), ct.full((bm, BN), 0.0, dtype=ct.float32))
    for j in range(n_tiles - 1):
        s_next = ct.mma(qt, _load_kt(k, b, hk, j + 1, dp, BN, 0),
                        ct.full((bm, BN), 0.0, dtype=ct.float32))
        m_i, l_i, acc = _softmax_step(s, m_i, l_i, acc, _load_v(v, b, hk, j, BN, dp, 0),
                                      qk_scale)
        s = s_next
    m_i, l_i, acc = _softmax_step(s, m_i, l_i, acc, _load_v(v, b, hk, n_tiles - 1, BN, dp, 0),
                                  qk_scale)
    o.store(ct.reshape((acc * (1.0 / l_i)).astype(o.dtype), (1, bm, dp)))


@tl.kernel
def attn_lazy(o: tl.Out, q: tl.In, k: tl.In, v: tl.In, qk_scale: float,
              BN: ct.Constant[int]):
    """The running max moves only when some row's max grows by more than 8 (log2)."""
    bm, dp, b, hk, qt, m_i, l_i, acc = _start(q, k, o.tile_index, o.tile_shape)
    for j in range(ct.cdiv(k.shape[2], BN)):
        s = ct.mma(qt, _load_kt(k, b, hk, j, dp, BN, 0),
                   ct.full((bm, BN), 0.0, dtype=ct.float32))
        m_new = ct.maximum(m_i, ct.max(s, axis=1, keepdims=True) * qk_scale)
        if ct.max(m_new - m_i) > 8.0:
            alpha = ct.exp2(m_i - m_new, flush_to_zero=True)
            acc = acc * alpha
            l_i = l_i * alpha
            m_i = m_new
        p = ct.exp2(s * qk_scale - m_i, flush_to_zero=True)
        l_i = l_i + ct.sum(p, axis=1, keepdims=True)
        acc = ct.mma(p.astype(q.dtype), _load_v(v, b, hk, j, BN, dp, 0), acc)
    o.store(ct.reshape((acc * (1.0 / l_i)).astype(o.dtype), (1, bm, dp)))


@tl.kernel
def attn_kt(o: tl.Out, q: tl.In, k: tl.In, v: tl.In, qk_scale: float,
            BN: ct.Constant[int]):
    """K tiles loaded (BN, D) as stored and transposed in the kernel."""
    bm, dp, b, hk, qt, m_i, l_i, acc = _start(q, k, o.tile_index, o.tile_shape)
    for j in range(ct.cdiv(k.shape[2], BN)):
        kt = ct.transpose(_load_v(k, b, hk, j, BN, dp, 0))
        s = ct.mma(qt, kt, ct.full((bm, BN), 0.0, dtype=ct.float32))
        m_i, l_i, acc = _softmax_step(s, m_i, l_i, acc, _load_v(v, b, hk, j, BN, dp, 0),
                                      qk_scale)
    o.store(ct.reshape((acc * (1.0 / l_i)).astype(o.dtype), (1, bm, dp)))


def _scores(qt, k, b, hk, j, dp, BN, bm):
    """Raw scores (bm, BN) of the Q tile against key tile j."""
    return ct.mma(qt, _load_kt(k, b, hk, j, dp, BN, 0), ct.full((bm, BN), 0.0, dtype=ct.float32))


def _fold(s, m_i, l_i, acc, v, b, hk, j, BN, dp, qk_scale):
    """The online-softmax step of scores s with V tile j."""
    return _softmax_step(s, m_i, l_i, acc, _load_v(v, b, hk, j, BN, dp, 0), qk_scale)


@tl.kernel
def attn_plain(o: tl.Out, q: tl.In, k: tl.In, v: tl.In, qk_scale: float,
               BN: ct.Constant[int]):
    """The library's loop without its mask branch (what the branch costs when no tile
    needs a mask)."""
    bm, dp, b, hk, qt, m_i, l_i, acc = _start(q, k, o.tile_index, o.tile_shape)
    for j in range(ct.cdiv(k.shape[2], BN)):
        m_i, l_i, acc = _fold(_scores(qt, k, b, hk, j, dp, BN, bm), m_i, l_i, acc, v, b,
                              hk, j, BN, dp, qk_scale)
    o.store(ct.reshape((acc * (1.0 / l_i)).astype(o.dtype), (1, bm, dp)))


@tl.kernel
def attn_two_loops(o: tl.Out, q: tl.In, k: tl.In, v: tl.In, qk_scale: float,
                   BN: ct.Constant[int]):
    """Unmasked tiles in one loop, the masked tail (none here) in a second one."""
    bm, dp, b, hk, qt, m_i, l_i, acc = _start(q, k, o.tile_index, o.tile_shape)
    kv_len = k.shape[2]
    n_tiles = ct.cdiv(kv_len, BN)
    mask_from = kv_len // BN
    for j in range(mask_from):
        m_i, l_i, acc = _fold(_scores(qt, k, b, hk, j, dp, BN, bm), m_i, l_i, acc, v, b,
                              hk, j, BN, dp, qk_scale)
    for j in range(mask_from, n_tiles):
        kpos = ct.reshape(j * BN + ct.arange(BN, dtype=ct.int32), (1, BN))
        s = ct.where(kpos < kv_len, _scores(qt, k, b, hk, j, dp, BN, bm), -math.inf)
        m_i, l_i, acc = _fold(s, m_i, l_i, acc, v, b, hk, j, BN, dp, qk_scale)
    o.store(ct.reshape((acc * (1.0 / l_i)).astype(o.dtype), (1, bm, dp)))


@tl.kernel
def attn_lsum_mma(o: tl.Out, q: tl.In, k: tl.In, v: tl.In, qk_scale: float,
                  BN: ct.Constant[int]):
    """The row sums on the tensor cores: P (bf16, as multiplied with V) times a ones
    tile, instead of a cross-lane row reduction every step."""
    bm, dp, b, hk, qt, m_i, _, acc = _start(q, k, o.tile_index, o.tile_shape)
    ones = ct.full((BN, 16), 1.0, dtype=q.dtype)
    lsum = ct.full((bm, 16), 0.0, dtype=ct.float32)
    for j in range(ct.cdiv(k.shape[2], BN)):
        s = _scores(qt, k, b, hk, j, dp, BN, bm)
        m_new = ct.maximum(m_i, ct.max(s, axis=1, keepdims=True) * qk_scale)
        p = ct.exp2(s * qk_scale - m_new, flush_to_zero=True).astype(q.dtype)
        alpha = ct.exp2(m_i - m_new, flush_to_zero=True)
        lsum = ct.mma(p, ones, lsum * alpha)
        acc = ct.mma(p, _load_v(v, b, hk, j, BN, dp, 0), acc * alpha)
        m_i = m_new
    l_i = ct.sum(lsum, axis=1, keepdims=True) * (1.0 / 16)
    o.store(ct.reshape((acc * (1.0 / l_i)).astype(o.dtype), (1, bm, dp)))


@tl.kernel
def attn_lsum_defer(o: tl.Out, q: tl.In, k: tl.In, v: tl.In, qk_scale: float,
                    BN: ct.Constant[int]):
    """The row sums kept element-wise (bm, BN) and reduced once, after the loop."""
    bm, dp, b, hk, qt, m_i, _, acc = _start(q, k, o.tile_index, o.tile_shape)
    lacc = ct.full((bm, BN), 0.0, dtype=ct.float32)
    for j in range(ct.cdiv(k.shape[2], BN)):
        s = _scores(qt, k, b, hk, j, dp, BN, bm)
        m_new = ct.maximum(m_i, ct.max(s, axis=1, keepdims=True) * qk_scale)
        p = ct.exp2(s * qk_scale - m_new, flush_to_zero=True)
        alpha = ct.exp2(m_i - m_new, flush_to_zero=True)
        lacc = lacc * alpha + p
        acc = ct.mma(p.astype(q.dtype), _load_v(v, b, hk, j, BN, dp, 0), acc * alpha)
        m_i = m_new
    l_i = ct.sum(lacc, axis=1, keepdims=True)
    o.store(ct.reshape((acc * (1.0 / l_i)).astype(o.dtype), (1, bm, dp)))


# 2^x on the FMA pipe (x <= 0): 2^x = 2^n * 2^f with n = round(x) from the 1.5 * 2^23
# trick (the float's low mantissa bits hold n), f in [-0.5, 0.5], 2^f by a cubic (relative
# error 2.2e-4, well under bf16's 3.9e-3), and n added to the exponent field as an int.
# The MUFU unit does 16 exp2 per clock per SM against 4096 bf16 FLOP/clock of the tensor
# cores: a 64x128 score tile's exponentials cost half its two MMAs. Moving half of them
# to the FMA pipe is FlashAttention-4's trick. Run l (variant_probe_h200_2026-11-30l.json,
# 64x128 tiles, occupancy 2): half on the FMA pipe 7-10% slower than the library at 1K-4K
# keys, all of them 23-27% slower: MUFU is not what holds the loop back here.
EXP2_MAGIC = 12582912.0
EXP2_C0, EXP2_C1, EXP2_C2, EXP2_C3 = 0.99996275, 0.69358677, 0.24215189, 0.05286743


def _exp2_poly(x):
    """2^x for x <= 0 without the MUFU unit (x below -125 gives 2^-125, not 0)."""
    x = ct.maximum(x, -125.0)
    t = x + EXP2_MAGIC
    f = x - (t - EXP2_MAGIC)
    p = EXP2_C0 + f * (EXP2_C1 + f * (EXP2_C2 + f * EXP2_C3))
    bits = ct.bitcast(p, ct.int32) + ct.bitwise_lshift(ct.bitcast(t, ct.int32), 23)
    return ct.bitcast(bits, ct.float32)


def _step_poly(s, m_i, l_i, acc, vt, qk_scale, HALF):
    """:func:`_softmax_step` with the exponentials on the FMA pipe (all, or the second
    half of the columns while MUFU does the first)."""
    m_new = ct.maximum(m_i, ct.max(s, axis=1, keepdims=True) * qk_scale)
    x = s * qk_scale - m_new
    if HALF:
        bm, bn = x.shape
        lo = ct.exp2(ct.extract(x, (0, 0), shape=(bm, bn // 2)), flush_to_zero=True)
        hi = _exp2_poly(ct.extract(x, (0, 1), shape=(bm, bn // 2)))
        p = ct.cat((lo, hi), 1)
    else:
        p = _exp2_poly(x)
    alpha = ct.exp2(m_i - m_new, flush_to_zero=True)
    l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
    return m_new, l_i, ct.mma(p.astype(vt.dtype), vt, acc * alpha)


def _attend_poly(q, k, v, tile_index, tile_shape, qk_scale, BN, HALF):
    """The (1, bm, dp) output tile of the plain loop with :func:`_step_poly`."""
    bm, dp, b, hk, qt, m_i, l_i, acc = _start(q, k, tile_index, tile_shape)
    for j in range(ct.cdiv(k.shape[2], BN)):
        m_i, l_i, acc = _step_poly(_scores(qt, k, b, hk, j, dp, BN, bm), m_i, l_i, acc,
                                   _load_v(v, b, hk, j, BN, dp, 0), qk_scale, HALF)
    return ct.reshape(acc * (1.0 / l_i), (1, bm, dp))


@tl.kernel
def attn_poly(o: tl.Out, q: tl.In, k: tl.In, v: tl.In, qk_scale: float,
              BN: ct.Constant[int]):
    """Every exponential of the scores on the FMA pipe."""
    out = _attend_poly(q, k, v, o.tile_index, o.tile_shape, qk_scale, BN, False)
    o.store(out.astype(o.dtype))


@tl.kernel
def attn_polyhalf(o: tl.Out, q: tl.In, k: tl.In, v: tl.In, qk_scale: float,
                  BN: ct.Constant[int]):
    """Half the exponentials on MUFU, half on the FMA pipe."""
    out = _attend_poly(q, k, v, o.tile_index, o.tile_shape, qk_scale, BN, True)
    o.store(out.astype(o.dtype))


#: the first run (variant_probe_h200_2026-11-30.json): pipe and lazy slower everywhere;
#: kt within 2% (runs b-e); plain and two within 3% of the library (run f; two has since
#: been written with the shared helpers: same semantics, its SASS differs by a few lines)
#: lsum_mma and lsum_defer: run g (the library took lsum_mma as row_sum="mma")
ATTN_KERNELS: dict = {"poly": attn_poly, "polyhalf": attn_polyhalf}
#: (bm, bn, hints) of the attention candidates
ATTN_TILES = [(64, 128, {"occupancy": 2}), (128, 128, {"num_worker_warps": 8}),
              (128, 256, {"num_worker_warps": 8})]
_WS = {"num_worker_warps": 8}
#: library configs timed at every length next to the candidates: name -> (config, extra
#: cuTile hints); run h compared the persistent kernel (then a probe candidate) with them,
#: run i also num_ctas=2 (64x128 and persistent 128x256: 2-50x slower)
LIBRARY_ATTN = {
    "64x128occ2": (AttentionConfig(64, 128, occupancy=2), {}),
    "64x128occ2p": (AttentionConfig(64, 128, occupancy=2, persistent=True), {}),
    "64x128occ3": (AttentionConfig(64, 128, occupancy=3), {}),
    "64x64occ3": (AttentionConfig(64, 64, occupancy=3), {}),
    "64x64occ4": (AttentionConfig(64, 64, occupancy=4), {}),
    "128x128ws8p": (AttentionConfig(128, 128, **_WS, persistent=True), {}),
    "128x256ws8m": (AttentionConfig(128, 256, **_WS, row_sum="mma"), {}),
    "128x256ws8mp": (AttentionConfig(128, 256, **_WS, row_sum="mma", persistent=True), {}),
}
SOFTMAX_HINTS = [{"occupancy": 4}]
SPLITS = (64, 128)
#: (block_n, hints) of the library's online (two-read) kernel, which streams the row in
#: chunks: small chunks need few registers, so many rows can be in flight per SM
RECOMPUTE_ON = False  # the first run: no faster than exp2 at the same hints
ONLINE_ON = False   # the first run: 232 us at best against the one-pass kernels' 135
ONLINE = [(bn, {"occupancy": occ}) for bn in (1024, 2048, 4096) for occ in (4, 8, 16)]


def softmax_variants(x, y) -> dict:
    """name -> (kernel, args) for the softmax candidates on x (rows, cols) into y."""
    rows, cols = x.shape
    out = {}
    for hints in SOFTMAX_HINTS:
        tag = ",".join(f"{k[:3]}{v}" for k, v in hints.items())
        out[f"exp2[{tag}]"] = (hinted(softmax_exp2, **hints), (y.partition((1, cols)), x))
        if RECOMPUTE_ON:
            out[f"recompute[{tag}]"] = (hinted(softmax_recompute, **hints),
                                        (y.partition((1, cols)), x))
        for g in SPLITS:
            xv = x.reshape((rows * g, cols // g))
            yv = y.reshape((rows * g, cols // g))
            out[f"split{g}[{tag}]"] = (hinted(softmax_split, **hints),
                                      (yv.partition((g, cols // g)), xv))
    for bn, hints in ONLINE if ONLINE_ON else ():
        sched = _row_schedule(rows, 1)
        out[f"online{bn}[occ{hints['occupancy']}]"] = (
            hinted(softmax_online_kernel, **hints),
            (y.partition((1, bn), schedule=sched), x, 0))
    return out


RMS_SPLITS = [(1, g, {"occupancy": occ}) for g in (16, 32, 64) for occ in (4, 6, 8)]


def rms_variants(x, w, y) -> dict:
    """name -> (kernel, args) for the RMSNorm candidates."""
    rows, cols = x.shape
    out = {}
    for bm, g, hints in RMS_SPLITS:
        xv = x.reshape((rows * g, cols // g))
        yv = y.reshape((rows * g, cols // g))
        out[f"rms_split{g}_bm{bm}[occ{hints['occupancy']}]"] = (
            hinted(rms_split, **hints),
            (_partition_2d(yv, bm * g, cols // g), xv, w.reshape((g, cols // g)), 1e-6, g))
    return out


ROPE_TILES = [(bt, {"occupancy": occ}) for bt in (1, 2, 4) for occ in (2, 4, 8)]


def rope_variants(x, cos, sin, o, rp) -> dict:
    """name -> (kernel, args): the library kernel and the TMA-table one, per token tile."""
    out = {}
    for bt, hints in ROPE_TILES:
        call = rp._rope_call("apply_rope", x, None, cos, sin, None, bt, False, o)
        tag = f"bt{bt}[occ{hints['occupancy']}]"
        out[f"gather_{tag}"] = (hinted(rope_seq_kernel, **hints), call.args)
        out[f"tma_{tag}"] = (hinted(rope_seq_tma, **hints), call.args)
        out[f"whole_{tag}"] = (hinted(rope_seq_whole, **hints), call.args)
    return out


def attention_variants(q, k, v, o, causal: bool, tiles: str = "", library: str = "") -> dict:
    """name -> (kernel, args) for the attention candidates and the library configs
    (``tiles``: only these 'BMxBN' tiles for the candidates; ``library``: only these
    LIBRARY_ATTN names; empty: all)."""
    bsz, heads, s, d = q.shape
    o3 = o.reshape((bsz * heads, s, d))
    scale = LOG2E / math.sqrt(d)
    out = {}
    keep_tiles = set(filter(None, tiles.split(",")))
    keep_lib = set(filter(None, library.split(",")))
    for name, kern in ATTN_KERNELS.items() if not causal else ():
        for bm, bn, hints in ATTN_TILES:
            if keep_tiles and f"{bm}x{bn}" not in keep_tiles:
                continue
            tag = ",".join(f"{k[:3]}{v}" for k, v in hints.items())
            out[f"{name}{bm}x{bn}[{tag}]"] = (hinted(kern, **hints),
                                              (o3.partition((1, bm, d)), q, k, v, scale, bn))
    for name, (cfg, extra) in LIBRARY_ATTN.items():
        if keep_lib and name not in keep_lib:
            continue
        (kern, args), = plan_attention(q, k, v, causal=causal, out=o, config=cfg).launches
        out[f"library[{name}]"] = (hinted(kern, **extra), args)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="variant_probe.json")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rep", type=int, default=20)
    ap.add_argument("--seqs", default="4096,16384")
    ap.add_argument("--causal-seqs", default="", help="lengths timed with a causal mask")
    ap.add_argument("--only", default="softmax,rmsnorm,attention")
    ap.add_argument("--attn-tiles", default="",
                    help="candidate tiles to time, e.g. 64x128,128x256 (default: all)")
    ap.add_argument("--attn-library", default="",
                    help="LIBRARY_ATTN configs to time, e.g. 64x128occ2 (default: all)")
    ns = ap.parse_args()
    import torch

    from tilelab.kernels.attention import attention
    from tilelab.kernels.norms import rms_norm
    from tilelab.kernels.softmax import softmax
    from tilelab.runtime.device import gpu

    torch.cuda.set_stream(torch.cuda.ExternalStream(gpu().stream_handle))
    from suite_env import env_info

    res: dict = {"env": env_info("gpu"), "argv": sys.argv[1:], "cases": {}}
    cases = []
    if "softmax" in ns.only:
        x = torch.randn(16384, 8192, device="cuda", dtype=torch.bfloat16) * 2
        y = torch.empty_like(x)
        xs, ys = tl.from_dlpack(x), tl.from_dlpack(y)
        ref = torch.softmax(x.float(), -1)
        calls = {"torch": lambda: torch.softmax(x, -1),
                 "library": lambda xs=xs, ys=ys: softmax(xs, out=ys, sync=False)}
        for name, (kern, args) in softmax_variants(xs, ys).items():
            calls[name] = lambda kern=kern, args=args: kern.launch_async(*args)
        cases.append(("softmax/16384x8192", calls, y, ref, 2e-2, 2 * x.numel() * 2, 0))
    if "rmsnorm" in ns.only:
        h = torch.randn(65536, 4096, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
        y = torch.empty_like(h)
        hs, ws, ys = tl.from_dlpack(h), tl.from_dlpack(w), tl.from_dlpack(y)
        ref = torch.nn.functional.rms_norm(h.float(), (4096,), w.float(), 1e-6)
        calls = {"torch": lambda: torch.nn.functional.rms_norm(h, (4096,), w, 1e-6),
                 "library": lambda hs=hs, ws=ws, ys=ys: rms_norm(hs, ws, eps=1e-6, out=ys,
                                                                  sync=False)}
        for name, (kern, args) in rms_variants(hs, ws, ys).items():
            calls[name] = lambda kern=kern, args=args: kern.launch_async(*args)
        cases.append(("rmsnorm/65536x4096", calls, y, ref, 2e-2, 2 * h.numel() * 2, 0))
    if "rope" in ns.only:
        rp = importlib.import_module("tilelab.kernels.rope")
        tok, heads, hd = 32768, 32, 128
        x = torch.randn(tok, heads, hd, device="cuda", dtype=torch.bfloat16)
        ang = torch.rand(tok, hd // 2, device="cuda") * 6.28
        cos, sin = ang.cos(), ang.sin()
        o = torch.empty_like(x)
        xs, cs, ss, os_ = (tl.from_dlpack(t) for t in (x, cos, sin, o))
        x1, x2 = x.float()[..., :hd // 2], x.float()[..., hd // 2:]
        c3, s3 = cos[:, None, :], sin[:, None, :]
        ref = torch.cat((x1 * c3 - x2 * s3, x2 * c3 + x1 * s3), -1)

        def eager(x=x, c3=c3, s3=s3):
            a, b = x[..., :hd // 2], x[..., hd // 2:]
            return torch.cat((a * c3 - b * s3, b * c3 + a * s3), -1)

        calls = {"torch": eager,
                 "library": lambda xs=xs, cs=cs, ss=ss, os_=os_:
                     rp.apply_rope(xs, cs, ss, out=os_, sync=False)}
        for name, (kern, args) in rope_variants(xs, cs, ss, os_, rp).items():
            calls[name] = lambda kern=kern, args=args: kern.launch_async(*args)
        cases.append(("rope/32768x32x128", calls, o, ref, 2e-2,
                      x.numel() * 2 * 2 + 2 * cos.numel() * 4, 0))
    if "attention" in ns.only:
        lengths = [(int(v), False) for v in ns.seqs.split(",") if v]
        lengths += [(int(v), True) for v in ns.causal_seqs.split(",") if v]
        for s, causal in lengths:
            q, k, v = (torch.randn(8, 32, s, 128, device="cuda", dtype=torch.bfloat16)
                       for _ in range(3))
            o = torch.empty_like(q)
            qs, ks, vs, os_ = (tl.from_dlpack(t) for t in (q, k, v, o))
            sdpa = torch.nn.functional.scaled_dot_product_attention
            ref = sdpa(q, k, v, is_causal=causal).float()
            calls = {"torch": lambda q=q, k=k, v=v, c=causal: sdpa(q, k, v, is_causal=c),
                     "library": lambda qs=qs, ks=ks, vs=vs, os_=os_, c=causal:
                         attention(qs, ks, vs, causal=c, out=os_, sync=False)}
            for name, (kern, args) in attention_variants(qs, ks, vs, os_, causal,
                                                         ns.attn_tiles,
                                                         ns.attn_library).items():
                calls[name] = lambda kern=kern, args=args: kern.launch_async(*args)
            cases.append((f"attention/b8h32s{s}d128{'_causal' if causal else ''}", calls, o,
                          ref, 2e-2, 0, 4 * 8 * 32 * s * s * 128 // (2 if causal else 1)))
    for cid, calls, out, ref, tol, nbytes, flops in cases:
        row: dict = {"bytes": nbytes, "flops": flops, "variants": {}}
        res["cases"][cid] = row
        ok = {}
        for name, fn in calls.items():
            item = row["variants"].setdefault(name, {})
            try:
                if name != "torch":
                    out.fill_(float("nan"))
                    fn()
                    tl.synchronize()
                    err = ((out.float() - ref).norm() / ref.norm().clamp_min(1e-30)).item()
                    item["rel_err"] = err
                    if not err <= tol:
                        item["status"] = "wrong"
                        continue
                ok[name] = fn
                item["status"] = "ok"
                item["times"] = []
            except Exception as e:   # a candidate that does not compile or launch
                item["status"] = "error"
                item["error"] = f"{type(e).__name__}: {e}"[:600]
        # each round starts one variant later, as the suite's (see probe_rounds)
        for name, times in time_rounds(ok, ns.rounds, ns.rep).items():
            row["variants"][name]["times"] = times
        for name in ok:
            item = row["variants"][name]
            item["median_s"] = statistics.median(item["times"])
        t_torch = row["variants"]["torch"]["median_s"]
        for name in ok:
            item = row["variants"][name]
            item["vs_torch"] = t_torch / item["median_s"]
            if nbytes:
                item["TBps"] = nbytes / item["median_s"] / 1e12
            if flops:
                item["TFLOPs"] = flops / item["median_s"] / 1e12
        ranked = sorted(ok, key=lambda n: row["variants"][n]["median_s"])
        print(cid, flush=True)
        for name in ranked:
            it = row["variants"][name]
            print(f"   {name:34s} {it['median_s'] * 1e6:10.1f} us  {it['vs_torch']:.3f}x",
                  flush=True)
        print_failures(row["variants"], 34)
    Path(ns.out).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
