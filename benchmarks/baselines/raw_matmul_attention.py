"""Baselines: the matmul and attention kernels of tilelab.kernels written raw in cuTile.

Each kernel mirrors what tilelab lowers the safe kernel to (same tiles, same loads, same
block-to-tile mapping, the epilogue left out), so timing both measures the cost of
safety and nothing else. The ``*_launch`` functions return ``(grid, kernel, args)``:
on a GPU ``ct.launch(stream, *matmul_launch(c, a, b))``; on the CPU
``tl.interpret(kernel, *args, grid=grid)`` with numpy arrays (the tests do that).

tilelab's block mapping: a rank-R partition's tile coordinate d is ``ct.bid(R - 1 - d)``
(row-major), so the CUDA grid is the tile grid reversed; grouped schedules use a 1-D
grid (a 3-D one for batches) and the swizzle of ``_grouped`` below.
"""
from __future__ import annotations

import functools
import math
from typing import Any

import cuda.tile as ct

ZERO = ct.PaddingMode.ZERO
NEG_INF = ct.PaddingMode.NEG_INF
LOG2E = 1.4426950408889634


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _grouped(pid, num_m, num_n, group_m):
    """(m, n) of block pid walking group_m tile rows column by column (L2 swizzle)."""
    width = group_m * num_n
    first_m = (pid // width) * group_m
    rows = min(num_m - first_m, group_m)
    within = pid % width
    return first_m + within % rows, within // rows


def _operand(x):
    """fp32 operands run on the tensor cores as tf32."""
    if x.dtype == ct.float32:
        x = x.astype(ct.tfloat32)
    return x


# ---- GEMM -----------------------------------------------------------------------------


@ct.kernel
def raw_matmul(c, a, b, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int],
               GROUP_M: ct.Constant[int]):
    m, n = _grouped(ct.bid(0), ct.cdiv(c.shape[0], TM), ct.cdiv(c.shape[1], TN), GROUP_M)
    acc = ct.full((TM, TN), 0, dtype=ct.float32)
    for k in range(ct.cdiv(a.shape[1], TK)):
        x = ct.load(a, index=(m, k), shape=(TM, TK), padding_mode=ZERO)
        y = ct.load(b, index=(k, n), shape=(TK, TN), padding_mode=ZERO)
        acc = ct.mma(_operand(x), _operand(y), acc)
    ct.store(c, index=(m, n), tile=acc.astype(c.dtype))


@ct.kernel
def raw_swap_matmul(c, a, b, TM: ct.Constant[int], TN: ct.Constant[int],
                    TK: ct.Constant[int], GROUP_M: ct.Constant[int]):
    """raw_matmul with each tile computed transposed, (B^T A^T)^T (``swap_ab``)."""
    m, n = _grouped(ct.bid(0), ct.cdiv(c.shape[0], TM), ct.cdiv(c.shape[1], TN), GROUP_M)
    acc = ct.full((TN, TM), 0, dtype=ct.float32)
    for k in range(ct.cdiv(a.shape[1], TK)):
        y = ct.load(b, index=(n, k), shape=(TN, TK), order=(1, 0), padding_mode=ZERO)
        x = ct.load(a, index=(k, m), shape=(TK, TM), order=(1, 0), padding_mode=ZERO)
        acc = ct.mma(_operand(y), _operand(x), acc)
    ct.store(c, index=(m, n), tile=ct.transpose(acc).astype(c.dtype))


@ct.kernel
def raw_persistent_matmul(c, a, b, TM: ct.Constant[int], TN: ct.Constant[int],
                          TK: ct.Constant[int], GROUP_M: ct.Constant[int]):
    num_m = ct.cdiv(c.shape[0], TM)
    num_n = ct.cdiv(c.shape[1], TN)
    num_k = ct.cdiv(a.shape[1], TK)
    for t in range(ct.bid(0), num_m * num_n, ct.num_blocks(0)):
        m, n = _grouped(t, num_m, num_n, GROUP_M)
        acc = ct.full((TM, TN), 0, dtype=ct.float32)
        for k in range(num_k):
            x = ct.load(a, index=(m, k), shape=(TM, TK), padding_mode=ZERO)
            y = ct.load(b, index=(k, n), shape=(TK, TN), padding_mode=ZERO)
            acc = ct.mma(_operand(x), _operand(y), acc)
        ct.store(c, index=(m, n), tile=acc.astype(c.dtype))


@ct.kernel
def raw_batched_matmul(c, a, b, TM: ct.Constant[int], TN: ct.Constant[int],
                       TK: ct.Constant[int], GROUP_M: ct.Constant[int]):
    g = ct.bid(1)
    m, n = _grouped(ct.bid(0), ct.cdiv(c.shape[1], TM), ct.cdiv(c.shape[2], TN), GROUP_M)
    acc = ct.full((TM, TN), 0, dtype=ct.float32)
    for k in range(ct.cdiv(a.shape[2], TK)):
        x = ct.load(a, index=(g, m, k), shape=(1, TM, TK), padding_mode=ZERO)
        y = ct.load(b, index=(g, k, n), shape=(1, TK, TN), padding_mode=ZERO)
        acc = ct.mma(_operand(ct.reshape(x, (TM, TK))), _operand(ct.reshape(y, (TK, TN))),
                     acc)
    ct.store(c, index=(g, m, n), tile=ct.reshape(acc.astype(c.dtype), (1, TM, TN)))


@ct.kernel
def raw_gemv(c, a, b, TN: ct.Constant[int], TK: ct.Constant[int],
             TRANS_B: ct.Constant[bool]):
    n = ct.bid(0)
    acc = ct.full((TK, TN), 0, dtype=ct.float32)
    for k in range(ct.cdiv(a.shape[1], TK)):
        x = ct.load(a, index=(0, k), shape=(1, TK), padding_mode=ZERO)
        if TRANS_B:      # b holds B^T (N, K): read K-major
            w = ct.load(b, index=(k, n), shape=(TK, TN), order=(1, 0), padding_mode=ZERO)
        else:
            w = ct.load(b, index=(k, n), shape=(TK, TN), padding_mode=ZERO)
        acc = acc + ct.reshape(x.astype(ct.float32), (TK, 1)) * w.astype(ct.float32)
    ct.store(c, index=(0, n), tile=ct.sum(acc, axis=0, keepdims=True).astype(c.dtype))


@ct.kernel
def raw_gemv_rows(c, a, w, TN: ct.Constant[int], TK: ct.Constant[int]):
    n = ct.bid(0)
    acc = ct.full((TN, TK), 0, dtype=ct.float32)
    for k in range(ct.cdiv(a.shape[1], TK)):
        x = ct.load(a, index=(0, k), shape=(1, TK), padding_mode=ZERO)
        wt = ct.load(w, index=(n, k), shape=(TN, TK), padding_mode=ZERO)
        acc = acc + wt.astype(ct.float32) * x.astype(ct.float32)
    out = ct.reshape(ct.sum(acc, axis=1), (1, TN))
    ct.store(c, index=(0, n), tile=out.astype(c.dtype))


def matmul_launch(c: Any, a: Any, b: Any, tm: int = 128, tn: int = 128, tk: int = 64,
                  group_m: int = 8, swap_ab: bool = False,
                  num_worker_warps: int | None = None) -> tuple:
    """(grid, kernel, args) of the grouped GEMM, like ``MatmulConfig(schedule='grouped')``
    (``swap_ab``: tiles computed transposed, like ``MatmulConfig(swap_ab=True)``;
    ``num_worker_warps``: the cuTile hint, as the library's config)."""
    m, n = c.shape
    kernel = _with_hints(raw_swap_matmul if swap_ab else raw_matmul, None, num_worker_warps)
    return (_cdiv(m, tm) * _cdiv(n, tn), 1, 1), kernel, (c, a, b, tm, tn, tk, group_m)


def persistent_matmul_launch(c: Any, a: Any, b: Any, num_blocks: int, tm: int = 128,
                             tn: int = 128, tk: int = 64, group_m: int = 8,
                             num_worker_warps: int | None = None) -> tuple:
    """(grid, kernel, args) of the persistent GEMM with ``num_blocks`` blocks
    (``num_worker_warps``: the cuTile hint, as the library's config)."""
    tiles = _cdiv(c.shape[0], tm) * _cdiv(c.shape[1], tn)
    return ((min(num_blocks, tiles), 1, 1),
            _with_hints(raw_persistent_matmul, None, num_worker_warps),
            (c, a, b, tm, tn, tk, group_m))


def batched_matmul_launch(c: Any, a: Any, b: Any, tm: int = 128, tn: int = 128,
                          tk: int = 64, group_m: int = 8) -> tuple:
    """(grid, kernel, args) of the batched GEMM (grouped within each batch)."""
    g, m, n = c.shape
    return ((_cdiv(m, tm) * _cdiv(n, tn), g, 1), raw_batched_matmul,
            (c, a, b, tm, tn, tk, group_m))


def gemv_launch(c: Any, a: Any, b: Any, tn: int = 64, tk: int = 256,
                trans_b: bool = False) -> tuple:
    """(grid, kernel, args) of the M = 1 GEMV (c and a are (1, N) and (1, K); b is
    (K, N), or the (N, K) weight itself with ``trans_b``, as ``gemv(w, x)`` reads it)."""
    return (_cdiv(c.shape[1], tn), 1, 1), raw_gemv, (c, a, b, tn, tk, trans_b)


def gemv_rows_launch(c: Any, a: Any, w: Any, tn: int = 8, tk: int = 512) -> tuple:
    """(grid, kernel, args) of the decode GEMV on a row-major (N, K) weight ``w``,
    streaming whole rows in (tn, tk) tiles, like the library's ``gemv(w, x)``."""
    return (_cdiv(c.shape[1], tn), 1, 1), raw_gemv_rows, (c, a, w, tn, tk)


# ---- attention -------------------------------------------------------------------------


def _online_softmax(s, m_i, l_i, acc, vt, qk_scale):
    m_new = ct.maximum(m_i, ct.max(s, axis=1, keepdims=True) * qk_scale)
    p = ct.exp2(s * qk_scale - m_new, flush_to_zero=True)
    alpha = ct.exp2(m_i - m_new, flush_to_zero=True)
    l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
    acc = ct.mma(p.astype(vt.dtype), vt, acc * alpha)
    return m_new, l_i, acc


def _online_softmax_mma(s, m_i, l_i, acc, vt, qk_scale):
    m_new = ct.maximum(m_i, ct.max(s, axis=1, keepdims=True) * qk_scale)
    p = ct.exp2(s * qk_scale - m_new, flush_to_zero=True).astype(vt.dtype)
    alpha = ct.exp2(m_i - m_new, flush_to_zero=True)
    ones = ct.full((s.shape[1], 16), 1.0, dtype=vt.dtype)
    return m_new, ct.mma(p, ones, l_i * alpha), ct.mma(p, vt, acc * alpha)


def _raw_attend(q, k, v, bh, mi, qk_scale, q_offset, BM, BN, DP, CAUSAL, SUM_MMA):
    heads = q.shape[1]
    b = bh // heads
    h = bh % heads
    hk = h // (heads // k.shape[1])
    kv_len = k.shape[2]
    qt = ct.reshape(ct.load(q, index=(b, h, mi, 0), shape=(1, 1, BM, DP), padding_mode=ZERO),
                    (BM, DP))
    m_i = ct.full((BM, 1), -math.inf, dtype=ct.float32)
    l_i = ct.full((BM, 16 if SUM_MMA else 1), 0.0, dtype=ct.float32)
    acc = ct.full((BM, DP), 0.0, dtype=ct.float32)
    q_lo = mi * BM + q_offset
    qpos = ct.reshape(q_lo + ct.arange(BM, dtype=ct.int32), (BM, 1))
    n_tiles = ct.cdiv(kv_len, BN)
    mask_from = kv_len // BN
    if CAUSAL:
        n_tiles = min(n_tiles, ct.cdiv(q_lo + BM, BN))
        mask_from = min(mask_from, q_lo // BN)
    for j in range(n_tiles):
        kt = ct.load(k, index=(b, hk, 0, j), shape=(1, 1, DP, BN), order=(0, 1, 3, 2),
                     padding_mode=ZERO)
        s = ct.mma(qt, ct.reshape(kt, (DP, BN)), ct.full((BM, BN), 0.0, dtype=ct.float32))
        if j >= mask_from:
            kpos = ct.reshape(j * BN + ct.arange(BN, dtype=ct.int32), (1, BN))
            ok = kpos < kv_len
            if CAUSAL:
                ok = ok & (kpos <= qpos)
            s = ct.where(ok, s, -math.inf)
        vt = ct.reshape(ct.load(v, index=(b, hk, j, 0), shape=(1, 1, BN, DP),
                                padding_mode=ZERO), (BN, DP))
        if SUM_MMA:
            m_i, l_i, acc = _online_softmax_mma(s, m_i, l_i, acc, vt, qk_scale)
        else:
            m_i, l_i, acc = _online_softmax(s, m_i, l_i, acc, vt, qk_scale)
    if SUM_MMA:
        l_i = ct.sum(l_i, axis=1, keepdims=True) * (1.0 / 16)
    return acc / l_i


@ct.kernel
def raw_flash_attention(o, q, k, v, qk_scale: float, q_offset: int, BM: ct.Constant[int],
                        BN: ct.Constant[int], DP: ct.Constant[int],
                        CAUSAL: ct.Constant[bool], SUM_MMA: ct.Constant[bool]):
    bh = ct.bid(2)
    mi = ct.bid(1)
    out = _raw_attend(q, k, v, bh, mi, qk_scale, q_offset, BM, BN, DP, CAUSAL, SUM_MMA)
    ct.store(o, index=(bh, mi, 0), tile=ct.reshape(out.astype(o.dtype), (1, BM, DP)))


@ct.kernel
def raw_persistent_flash_attention(o, q, k, v, qk_scale: float, q_offset: int,
                                   BM: ct.Constant[int], BN: ct.Constant[int],
                                   DP: ct.Constant[int], CAUSAL: ct.Constant[bool],
                                   SUM_MMA: ct.Constant[bool]):
    num_m = ct.cdiv(o.shape[1], BM)
    for t in range(ct.bid(0), o.shape[0] * num_m, ct.num_blocks(0)):
        bh = t // num_m
        mi = t % num_m
        out = _raw_attend(q, k, v, bh, mi, qk_scale, q_offset, BM, BN, DP, CAUSAL, SUM_MMA)
        ct.store(o, index=(bh, mi, 0), tile=ct.reshape(out.astype(o.dtype), (1, BM, DP)))


@ct.kernel
def raw_decode_split(po, plse, q, k, v, qk_scale: float, kv_len: int, tiles_per_split: int,
                     BN: ct.Constant[int], DP: ct.Constant[int], GC: ct.Constant[int]):
    bkv = ct.bid(2)
    s = ct.bid(1)
    heads_kv = k.shape[1]
    b = bkv // heads_kv
    hk = bkv % heads_kv
    qt = ct.reshape(ct.load(q, index=(b, hk, 0, 0), shape=(1, 1, GC, DP), padding_mode=ZERO),
                    (GC, DP))
    m_i = ct.full((GC, 1), -math.inf, dtype=ct.float32)
    l_i = ct.full((GC, 1), 0.0, dtype=ct.float32)
    acc = ct.full((GC, DP), 0.0, dtype=ct.float32)
    t0 = s * tiles_per_split
    t1 = min(t0 + tiles_per_split, ct.cdiv(kv_len, BN))
    for j in range(t0, t1):
        kt = ct.load(k, index=(b, hk, 0, j), shape=(1, 1, DP, BN), order=(0, 1, 3, 2),
                     padding_mode=ZERO)
        sc = ct.mma(qt, ct.reshape(kt, (DP, BN)), ct.full((GC, BN), 0.0, dtype=ct.float32))
        if (j + 1) * BN > kv_len:
            kpos = ct.reshape(j * BN + ct.arange(BN, dtype=ct.int32), (1, BN))
            sc = ct.where(kpos < kv_len, sc, -math.inf)
        vt = ct.reshape(ct.load(v, index=(b, hk, j, 0), shape=(1, 1, BN, DP),
                                padding_mode=ZERO), (BN, DP))
        m_i, l_i, acc = _online_softmax(sc, m_i, l_i, acc, vt, qk_scale)
    seen = l_i > 0.0
    l_safe = ct.where(seen, l_i, 1.0)
    ct.store(po, index=(bkv, s, 0), tile=ct.reshape(acc / l_safe, (1, 1, GC * DP)))
    lse = ct.where(seen, m_i + ct.log2(l_safe), -math.inf)
    ct.store(plse, index=(bkv, s, 0), tile=ct.reshape(lse, (1, 1, GC)))


@ct.kernel
def raw_decode_combine(o, po, plse, SC: ct.Constant[int], DP: ct.Constant[int],
                       GO: ct.Constant[int]):
    bkv = ct.bid(2)
    chunks = ct.cdiv(plse.shape[1], SC)
    mx = ct.full((1, GO), -math.inf, dtype=ct.float32)
    for c in range(chunks):
        lse = ct.load(plse, index=(bkv, c, 0), shape=(1, SC, GO), padding_mode=NEG_INF)
        mx = ct.maximum(mx, ct.max(ct.reshape(lse, (SC, GO)), axis=0, keepdims=True))
    mx = ct.where(mx == -math.inf, 0.0, mx)
    den = ct.full((1, GO), 0.0, dtype=ct.float32)
    acc = ct.full((GO, DP), 0.0, dtype=ct.float32)
    for c in range(chunks):
        lse = ct.load(plse, index=(bkv, c, 0), shape=(1, SC, GO), padding_mode=NEG_INF)
        w = ct.exp2(ct.reshape(lse, (SC, GO)) - mx)
        den = den + ct.sum(w, axis=0, keepdims=True)
        part = ct.load(po, index=(bkv, c, 0), shape=(1, SC, GO * DP), padding_mode=ZERO)
        acc = acc + ct.sum(ct.reshape(w, (SC, GO, 1)) * ct.reshape(part, (SC, GO, DP)),
                           axis=0)
    den = ct.where(den > 0.0, den, 1.0)
    out = acc / ct.reshape(den, (GO, 1))
    ct.store(o, index=(bkv, 0, 0), tile=ct.reshape(out.astype(o.dtype), (1, GO, DP)))


def flash_attention_launch(o3: Any, q: Any, k: Any, v: Any, *, causal: bool,
                           scale: float | None = None, bm: int = 128,
                           bn: int = 64, sum_mma: bool = False,
                           num_blocks: int | None = None, occupancy: int | None = None,
                           num_worker_warps: int | None = None) -> tuple:
    """(grid, kernel, args) of flash attention; ``o3`` is the (B*H, Sq, D) output view;
    ``sum_mma``: the row sums on the tensor cores (the library's ``row_sum="mma"``);
    ``num_blocks``: the persistent kernel with that many blocks (at most one per tile);
    ``occupancy`` and ``num_worker_warps``: cuTile hints, as the library's config."""
    bsz, heads, sq, d = q.shape
    s = 1.0 / math.sqrt(d) if scale is None else scale
    kernel = _with_hints(raw_flash_attention if num_blocks is None
                         else raw_persistent_flash_attention, occupancy, num_worker_warps)
    args = (o3, q, k, v, s * LOG2E, k.shape[2] - sq, bm, bn, _next_pow2(d), causal, sum_mma)
    if num_blocks is not None:
        return (min(num_blocks, bsz * heads * _cdiv(sq, bm)), 1, 1), kernel, args
    return (1, _cdiv(sq, bm), bsz * heads), kernel, args


@functools.cache
def _with_hints(kernel: Any, occupancy: int | None, num_worker_warps: int | None) -> Any:
    """The kernel itself, or its copy compiled with these cuTile hints (made once)."""
    hints = {k: v for k, v in (("occupancy", occupancy),
                               ("num_worker_warps", num_worker_warps)) if v is not None}
    return kernel.replace_hints(**hints) if hints else kernel


def decode_launches(o3: Any, po: Any, plse: Any, q4: Any, k: Any, v: Any, *, kv_len: int,
                    scale: float | None = None, bn: int = 64,
                    combine_chunk: int = 16) -> list[tuple]:
    """[(grid, kernel, args)] of both decode phases.

    ``q4`` is q viewed (B, Hkv, G, D); ``o3`` the output viewed (B*Hkv, G, D); ``po``
    (B*Hkv, splits, G*DP) and ``plse`` (B*Hkv, splits, G) are fp32 scratch, DP =
    next_pow2(D); the split count is po.shape[1].
    """
    bsz, heads_kv, g, d = q4.shape
    dp = _next_pow2(d)
    splits = po.shape[1]
    n_tiles = _cdiv(kv_len, bn)
    per = _cdiv(n_tiles, splits)
    s = 1.0 / math.sqrt(d) if scale is None else scale
    gc = max(16, _next_pow2(g))
    return [((1, splits, bsz * heads_kv), raw_decode_split,
             (po, plse, q4, k, v, s * LOG2E, kv_len, per, bn, dp, gc)),
            ((1, 1, bsz * heads_kv), raw_decode_combine,
             (o3, po, plse, min(combine_chunk, _next_pow2(splits)), dp, _next_pow2(g)))]
