"""Attention in the safe language: flash attention (prefill) and split-KV decode.

Partitions are rank <= 3, so the (B, H, S, D) output is partitioned through its
(B*H, S, D) view with tiles (1, bm, D): block (bh, m) owns query rows m*bm.. of head bh
and derives b = bh // H, h = bh % H (and the KV head h // (H / Hkv) for GQA) from its
tile index. Q, K and V are read-only inputs loaded with ``ct.load`` at (b, h) in any
strided 4-D layout. Softmax is online, in fp32, in the log2 domain (scores are scaled by
``scale * log2(e)`` so that ``exp2`` does the exponentials); causal blocks stop at the
diagonal, so fully masked K tiles are never loaded.

Decode (one query token per sequence, long KV) splits the KV sequence: phase 1 writes
per-split partial outputs and log-sum-exps into partitioned fp32 scratch tensors (one
block per (batch, KV head, split), all query heads of a GQA group together), phase 2
merges the splits. Both phases are safe kernels.

Example:
    >>> import tilelab as tl
    >>> q = tl.randn(1, 4, 40, 64, dtype="bf16", device="cpu", seed=0)
    >>> kv = tl.randn(1, 2, 40, 64, dtype="bf16", device="cpu", seed=1)
    >>> attention(q, kv, kv, causal=True, config=AttentionConfig(bm=16, bn=16)).shape
    (1, 4, 40, 64)
"""
from __future__ import annotations

import dataclasses
import math
import operator
from dataclasses import dataclass
from typing import Any, Callable

import cuda.tile as ct

import tilelab as tl
from tilelab.kernels._host import (CallCache, Plan, TensorResult, hash_once, hinted,
                                   state_without_hash)
from tilelab.kernels.elementwise import _pow2_ceil
from tilelab.kernels.matmul import _as_tensor, _sms, zero_padded_load

__all__ = ["AttentionConfig", "DecodeConfig", "default_attention_config",
           "default_decode_config", "attention_search_space", "attention",
           "decode_attention", "plan_attention", "plan_decode_attention",
           "compile_attention", "compile_decode_attention",
           "flash_attention_kernel", "persistent_attention_kernel", "decode_split_kernel",
           "decode_combine_kernel"]

LOG2E = 1.4426950408889634
_DTYPES = ("float16", "bfloat16")
_OUT_DTYPES = ("float16", "bfloat16", "float32")
#: decode pads a GQA group's query rows to this many (the smallest tensor-core MMA)
_MMA_ROWS = 16


def _pow2(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1 and not v & (v - 1)


def _check_hint(owner: str, name: str, v: Any, lo: int, hi: int) -> None:
    if v is not None and not (isinstance(v, int) and not isinstance(v, bool)
                              and lo <= v <= hi):
        raise ValueError(f"{owner}.{name}={v!r} must be an int in {lo}..{hi}, or None")


# ======================================================================================
# configuration


#: how flash attention keeps its softmax row sums (see AttentionConfig.row_sum)
ROW_SUMS = ("reduce", "mma")


@dataclass(frozen=True)
class AttentionConfig:
    """Tiles and hints of flash attention (what an autotuner searches).

    ``bm``: query rows per block; ``bn``: keys per inner step (powers of two);
    ``latency_k``, ``latency_v``: cuTile load latency hints (1..10, None: inferred);
    ``occupancy``: blocks per SM hint; ``num_worker_warps``: cuTile's worker-warp hint
    (8 warp-specializes the kernel on sm_90); ``row_sum``: how the softmax row sums are
    kept, ``"reduce"`` (a row reduction of P every step) or ``"mma"`` (P, as multiplied
    with V, times a (bn, 16) ones tile on the tensor cores: 6-8% faster with 128x256
    tiles and 8 worker warps at 4K-16K keys on the H200, slower with 64x128 tiles at 2K);
    ``persistent``: launch one block per SM (``occupancy`` per SM with that hint), each
    looping over query tiles, instead of one block per tile.

    Example:
        >>> AttentionConfig(bm=64).with_(bn=32).bn
        32
    """

    bm: int = 128
    bn: int = 128
    latency_k: int | None = None
    latency_v: int | None = None
    occupancy: int | None = None
    num_worker_warps: int | None = None
    row_sum: str = "reduce"
    persistent: bool = False

    __hash__ = hash_once            # computed once: calls key on their config
    __getstate__ = state_without_hash

    def __post_init__(self):
        for name in ("bm", "bn"):
            if not _pow2(getattr(self, name)):
                raise ValueError(f"AttentionConfig.{name}={getattr(self, name)!r} must be "
                                 "a power of two")
        if not isinstance(self.persistent, bool):
            raise ValueError(f"AttentionConfig.persistent={self.persistent!r} must be a "
                             "bool")
        if self.row_sum not in ROW_SUMS:
            raise ValueError(f"AttentionConfig.row_sum={self.row_sum!r}: choose one of "
                             f"{', '.join(map(repr, ROW_SUMS))}")
        _check_hint("AttentionConfig", "latency_k", self.latency_k, 1, 10)
        _check_hint("AttentionConfig", "latency_v", self.latency_v, 1, 10)
        _check_hint("AttentionConfig", "occupancy", self.occupancy, 1, 32)
        _check_hint("AttentionConfig", "num_worker_warps", self.num_worker_warps, 1, 32)
        if self.num_worker_warps is not None and not _pow2(self.num_worker_warps):
            raise ValueError(f"AttentionConfig.num_worker_warps={self.num_worker_warps!r} "
                             "must be a power of two")

    def with_(self, **changes: Any) -> "AttentionConfig":
        """A copy with some fields changed.

        Example:
            >>> AttentionConfig().with_(bm=64).bm
            64
        """
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class DecodeConfig:
    """Tiles and split count of split-KV decode attention.

    ``bn``: keys per inner step; ``num_splits``: KV splits per (batch, KV head) (None:
    enough to give every SM two blocks); ``combine_chunk``: splits merged per step of
    phase 2 (a power of two).

    Example:
        >>> DecodeConfig(num_splits=8).num_splits
        8
    """

    bn: int = 64
    num_splits: int | None = None
    combine_chunk: int = 16
    latency_k: int | None = None
    latency_v: int | None = None
    occupancy: int | None = None

    __hash__ = hash_once            # computed once: calls key on their config
    __getstate__ = state_without_hash

    def __post_init__(self):
        for name in ("bn", "combine_chunk"):
            if not _pow2(getattr(self, name)):
                raise ValueError(f"DecodeConfig.{name}={getattr(self, name)!r} must be a "
                                 "power of two")
        if self.num_splits is not None and not (isinstance(self.num_splits, int)
                                                and self.num_splits >= 1):
            raise ValueError(f"DecodeConfig.num_splits={self.num_splits!r} must be a "
                             "positive int or None")
        _check_hint("DecodeConfig", "latency_k", self.latency_k, 1, 10)
        _check_hint("DecodeConfig", "latency_v", self.latency_v, 1, 10)
        _check_hint("DecodeConfig", "occupancy", self.occupancy, 1, 32)

    def with_(self, **changes: Any) -> "DecodeConfig":
        """A copy with some fields changed.

        Example:
            >>> DecodeConfig().with_(bn=128).bn
            128
        """
        return dataclasses.replace(self, **changes)


def default_attention_config(head_dim: int, causal: bool = False,
                             kv_len: int | None = None) -> AttentionConfig:
    """Hopper defaults (no register spills on sm_90), from sweeps on the H200
    (benchmarks/results/sweep*_h200_*.json):

    * head_dim <= 64: 128 query rows and 128 keys per step;
    * larger heads: 64 query rows, 128 keys per step and two blocks per SM (the
      occupancy hint alone is worth 1.3-1.6x), the fastest at 1K keys;
    * from 4096 keys (``kv_len``): 128 query rows, 256 keys per step and 8 worker warps,
      which tileiras turns into a warp-specialized kernel (a producer warpgroup and two
      consumers): 4% faster at 4K keys, 1% at 8K; with the row sums on the tensor cores
      (``row_sum="mma"``) another 6-8% at 4K-16K (variant_probe_h200_2026-11-30g.json);
      without a causal mask also persistent (one block per SM looping over query tiles),
      which saves each tile part of a block's start-up: 1-8.5% faster at 4K keys and
      2-4.5% at 8K (variant_probe_h200_2026-11-30h.json and i); with a causal mask the
      warp-specialized kernel only from 8192 keys (at 4096 the 64x128 tiles are 5%
      faster, run i), and not persistent (the static tile order balances causal tiles
      worse: 4% slower at 8K).

    Example:
        >>> default_attention_config(128).bm, default_attention_config(128).bn
        (64, 128)
        >>> cfg = default_attention_config(128, kv_len=8192)
        >>> cfg.num_worker_warps, cfg.persistent
        (8, True)
    """
    if head_dim <= 64:
        return AttentionConfig(bm=128, bn=128)
    if kv_len is not None and kv_len >= (8192 if causal else 4096):
        return AttentionConfig(bm=128, bn=256, num_worker_warps=8, row_sum="mma",
                               persistent=not causal)
    return AttentionConfig(bm=64, bn=128, occupancy=2)


def attention_search_space(head_dim: int) -> list[AttentionConfig]:
    """Configurations worth timing for flash attention on Hopper (the default first).

    Example:
        >>> space = attention_search_space(128)
        >>> space[0] == default_attention_config(128), len(space) > 4
        (True, True)
    """
    space = [default_attention_config(head_dim)]
    for bm, bn in ((128, 64), (128, 128), (64, 64), (64, 128)):
        for occ in (None, 2):
            for lat in ((None, None), (2, 4)):
                cfg = AttentionConfig(bm, bn, lat[0], lat[1], occ)
                if cfg not in space:
                    space.append(cfg)
    for bm, bn in ((128, 128), (128, 256), (256, 64)):   # warp-specialized
        for row_sum in ROW_SUMS:
            for persistent in (False, True):
                cfg = AttentionConfig(bm, bn, num_worker_warps=8, row_sum=row_sum,
                                      persistent=persistent)
                if cfg not in space:
                    space.append(cfg)
    space.append(AttentionConfig(64, 128, occupancy=2, row_sum="mma"))
    space.append(AttentionConfig(64, 128, occupancy=2, persistent=True))
    return space


def default_decode_config() -> DecodeConfig:
    """Decode defaults: 64 keys per step, splits chosen from the SM count, and an
    occupancy hint of 4. Without the hint the split kernel took 255 registers and
    111 KiB, one block per SM; with it, 64 registers (16 bytes spilled) and 44 KiB. On
    the H200 (Qwen3-8B attention, benchmarks/results/decode_attention_h200_*.json) that
    is 10-24% faster at batch 1-64 and caches of 2K-32K keys (batch 8, 4096 keys:
    72.7 -> 57.3 us); 128 keys per step with occupancy 2 was within 1-8%, more splits
    were slower (but at batch 8) and occupancy 8 spills 848 bytes and is 3-4x slower.

    Example:
        >>> default_decode_config().bn, default_decode_config().occupancy
        (64, 4)
    """
    return DecodeConfig(occupancy=4)


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
    seen = l_i > 0.0
    l_safe = ct.where(seen, l_i, 1.0)
    po.store(ct.reshape(acc / l_safe, (1, 1, gc * DP)))
    lse = ct.where(seen, m_i + ct.log2(l_safe), -math.inf)
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


# ======================================================================================
# host side


def _tensor(x: Any, name: str, who: str) -> tl.Tensor:
    return _as_tensor(x, name, who)


def _check_qkv(q: tl.Tensor, k: tl.Tensor, v: tl.Tensor, who: str) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dtype.name not in _DTYPES:
            raise TypeError(f"{who}: {name} is {t.dtype.name}; attention takes float16 or "
                            "bfloat16 inputs")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"{who}: q, k, v must share one dtype, got {q.dtype.name}, "
                        f"{k.dtype.name}, {v.dtype.name}")
    if k.ndim != 4 or k.shape != v.shape:
        raise ValueError(f"{who}: k and v must both be (B, Hkv, S, D), got {k.shape} and "
                         f"{v.shape}")
    if not q.device == k.device == v.device:
        raise ValueError(f"{who}: q, k, v live on different devices ({q.device}, "
                         f"{k.device}, {v.device})")
    d = q.shape[-1]
    if k.shape[-1] != d:
        raise ValueError(f"{who}: q has head_dim {d} but k/v have {k.shape[-1]}")
    if not 1 <= d <= 256:
        raise ValueError(f"{who}: head_dim {d} is not supported (1..256)")
    if k.shape[0] != q.shape[0]:
        raise ValueError(f"{who}: q has batch {q.shape[0]} but k/v have {k.shape[0]}")
    heads, heads_kv = q.shape[1], k.shape[1]
    if heads_kv < 1 or heads % heads_kv:
        raise ValueError(f"{who}: query heads ({heads}) must be a multiple of KV heads "
                         f"({heads_kv}) for grouped-query attention")


def _out(out: Any, shape: tuple[int, ...], dtype: str, device: str, who: str) -> tl.Tensor:
    if out is None:
        return tl.empty(shape, dtype, device=device)
    out = _tensor(out, "out", who)
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"{who}: out has shape {out.shape}, expected {shape}")
    if out.dtype.name not in _OUT_DTYPES:
        raise TypeError(f"{who}: out must be float16, bfloat16 or float32, got "
                        f"{out.dtype.name}")
    if out.device != device:
        raise ValueError(f"{who}: out lives on {out.device}, the inputs on {device}")
    if not out.is_contiguous:
        raise ValueError(f"{who}: out must be contiguous (it is partitioned through a "
                         "reshaped view)")
    return out


def _scale(scale: float | None, d: int, who: str) -> float:
    s = 1.0 / math.sqrt(d) if scale is None else float(scale)
    if not s > 0 or not math.isfinite(s):
        raise ValueError(f"{who}: scale={scale!r} must be a positive finite number")
    return s


def _attention_launches(cfg: AttentionConfig, o3: Any, q: Any, k: Any, v: Any,
                        scale: float, causal: bool, sms: int) -> list[tuple]:
    """The flash-attention launch; ``o3`` is the (B*H, Sq, D) output view (or spec);
    a persistent config launches ``sms`` blocks (times its occupancy hint)."""
    dp = _pow2_ceil(q.shape[-1])
    kernel, part = flash_attention_kernel, o3.partition((1, cfg.bm, dp))
    if cfg.persistent:
        tiles = o3.shape[0] * -(-o3.shape[1] // cfg.bm)
        blocks = min(tiles, sms * (cfg.occupancy or 1))
        kernel = persistent_attention_kernel
        part = o3.partition((1, cfg.bm, dp), schedule=tl.persistent(num_blocks=blocks))
    return [(hinted(kernel, occupancy=cfg.occupancy, num_worker_warps=cfg.num_worker_warps),
             (part, q, k, v, scale * LOG2E, k.shape[2] - q.shape[2], cfg.bn, bool(causal),
              cfg.latency_k or 0, cfg.latency_v or 0, cfg.row_sum == "mma"))]


def plan_attention(q: Any, k: Any, v: Any, *, causal: bool = False,
                   scale: float | None = None, out: Any = None,
                   config: AttentionConfig | None = None) -> Plan:
    """Check the arguments of :func:`attention` and plan its launch without running it.

    Example:
        >>> import tilelab as tl
        >>> q = tl.randn(1, 2, 8, 16, dtype="f16", device="cpu", seed=0)
        >>> plan_attention(q, q, q).launches[0][0].name
        'flash_attention_kernel'
    """
    who = "attention"
    q, k, v = (_tensor(t, n, who) for t, n in ((q, "q"), (k, "k"), (v, "v")))
    if q.ndim != 4:
        raise ValueError(f"{who}: q must be (B, H, S, D), got shape {q.shape}")
    _check_qkv(q, k, v, who)
    bsz, heads, sq, d = q.shape
    skv = k.shape[2]
    if skv < 1:
        raise ValueError(f"{who}: no keys (k is {k.shape})")
    if causal and sq > skv:
        raise ValueError(f"{who}: causal attention with more queries ({sq}) than keys "
                         f"({skv}) would leave the first queries with no key")
    if config is not None and not isinstance(config, AttentionConfig):
        raise TypeError(f"{who}: config must be an AttentionConfig, got "
                        f"{type(config).__name__}")
    cfg = config or default_attention_config(d, causal, skv)
    s = _scale(scale, d, who)
    o = _out(out, q.shape, q.dtype.name, q.device, who)
    if bsz * heads * sq == 0:
        return Plan(o, [])                      # an empty result needs no launch
    return Plan(o, _attention_launches(cfg, o.reshape(bsz * heads, sq, d), q, k, v, s,
                                       causal, _sms(q.device)))


#: prepared calls (see tilelab.kernels._host)
_ATTENTION = CallCache("attention")
_DECODE = CallCache("decode_attention")


def attention(q: Any, k: Any, v: Any, *, causal: bool = False, scale: float | None = None,
              out: Any = None, config: AttentionConfig | None = None, sync: bool = True,
              stream: Any = None) -> TensorResult:
    """Flash attention forward: softmax(q k^T * scale [+ causal mask]) v.

    q is (B, H, Sq, D); k and v are (B, Hkv, Skv, D) with H a multiple of Hkv (GQA);
    fp16 or bf16, any strides. ``scale`` defaults to 1/sqrt(D). Causal attention aligns
    the last query with the last key (query i sees keys <= i + Skv - Sq), so it needs
    Sq <= Skv. Returns ``out`` or a new (B, H, Sq, D) tensor of q's dtype; with
    ``sync=False`` it launches without waiting (on ``stream``, default tilelab's) and
    returns ``(out, future)`` (see :mod:`tilelab.kernels`).

    Example:
        >>> import tilelab as tl
        >>> q = tl.randn(2, 2, 24, 64, dtype="f16", device="cpu", seed=0)
        >>> attention(q, q, q, config=AttentionConfig(bm=16, bn=16)).shape
        (2, 2, 24, 64)
    """
    return _ATTENTION.prepare(plan_attention, q, k, v, causal=causal, scale=scale, out=out,
                              config=config).run(sync, stream)


def _num_splits(cfg: DecodeConfig, n_tiles: int, blocks: int, sms: int) -> int:
    """KV splits: the configured count, else two blocks per SM; never an empty split."""
    want = cfg.num_splits if cfg.num_splits is not None else -(-2 * sms // blocks)
    want = max(1, min(want, n_tiles))
    per = -(-n_tiles // want)
    return -(-n_tiles // per)


def _decode_launches(cfg: DecodeConfig, o3: Any, q4: Any, k: Any, v: Any, kv_len: int,
                     scale: float, sms: int, alloc: Callable) -> list[tuple]:
    """Both decode phases; ``q4`` is q viewed (B, Hkv, G, D), ``o3`` out as (B*Hkv, G, D)."""
    bsz, heads_kv, g, d = q4.shape
    gc, dp = max(_MMA_ROWS, _pow2_ceil(g)), _pow2_ceil(d)
    n_tiles = -(-kv_len // cfg.bn)
    splits = _num_splits(cfg, n_tiles, bsz * heads_kv, sms)
    per = -(-n_tiles // splits)
    po = alloc((bsz * heads_kv, splits, g * dp), "float32")
    plse = alloc((bsz * heads_kv, splits, g), "float32")
    return [(hinted(decode_split_kernel, occupancy=cfg.occupancy),
             (po.partition((1, 1, gc * dp)), plse.partition((1, 1, gc)), q4, k, v,
              scale * LOG2E, kv_len, per, cfg.bn, dp, cfg.latency_k or 0,
              cfg.latency_v or 0)),
            (decode_combine_kernel,
             (o3.partition((1, _pow2_ceil(g), dp)), po, plse,
              min(cfg.combine_chunk, _pow2_ceil(splits)), dp))]


def plan_decode_attention(q: Any, k: Any, v: Any, *, kv_len: int | None = None,
                          scale: float | None = None, out: Any = None,
                          config: DecodeConfig | None = None) -> Plan:
    """Check the arguments of :func:`decode_attention` and plan its two launches.

    Example:
        >>> import tilelab as tl
        >>> q = tl.randn(1, 4, 32, dtype="bf16", device="cpu", seed=0)
        >>> kv = tl.randn(1, 1, 64, 32, dtype="bf16", device="cpu", seed=1)
        >>> [k.name for k, _ in plan_decode_attention(q, kv, kv).launches]
        ['decode_split_kernel', 'decode_combine_kernel']
    """
    who = "decode_attention"
    q, k, v = (_tensor(t, n, who) for t, n in ((q, "q"), (k, "k"), (v, "v")))
    if q.ndim == 4 and q.shape[2] == 1:
        q3 = q[:, :, 0, :]
    elif q.ndim == 3:
        q3 = q
    else:
        raise ValueError(f"{who}: q must be (B, H, D) or (B, H, 1, D), got {q.shape}")
    _check_qkv(q3[:, :, None, :], k, v, who)
    bsz, heads, d = q3.shape
    heads_kv, cache = k.shape[1], k.shape[2]
    try:
        kv_len = cache if kv_len is None else operator.index(kv_len)
    except TypeError:
        kv_len = None
    if kv_len is None or not 1 <= kv_len <= cache:
        raise ValueError(f"{who}: kv_len must be an int in 1..{cache} (the cache length)")
    if config is not None and not isinstance(config, DecodeConfig):
        raise TypeError(f"{who}: config must be a DecodeConfig, got "
                        f"{type(config).__name__}")
    cfg = config or default_decode_config()
    s = _scale(scale, d, who)
    o = _out(out, q.shape, q.dtype.name, q.device, who)
    if bsz * heads == 0:
        return Plan(o, [])
    g = heads // heads_kv
    q4 = (q3 if q3.is_contiguous else q3.contiguous()).reshape(bsz, heads_kv, g, d)
    dev = q.device
    return Plan(o, _decode_launches(cfg, o.reshape(bsz * heads_kv, g, d), q4, k, v, kv_len,
                                    s, _sms(dev),
                                    lambda shape, dt: tl.empty(shape, dt, device=dev)))


def decode_attention(q: Any, k: Any, v: Any, *, kv_len: int | None = None,
                     scale: float | None = None, out: Any = None,
                     config: DecodeConfig | None = None, sync: bool = True,
                     stream: Any = None) -> TensorResult:
    """Attention of one new token per sequence over a long KV cache (split-KV).

    q is (B, H, D) or (B, H, 1, D); k and v are (B, Hkv, S, D) caches of which the first
    ``kv_len`` positions (default: all) are attended; H a multiple of Hkv. Returns
    ``out`` or a new tensor shaped like q; ``sync=False`` returns ``(out, future)``,
    the future of the second (combine) launch, which stream order puts after the first.

    Example:
        >>> import tilelab as tl
        >>> q = tl.randn(2, 8, 64, dtype="bf16", device="cpu", seed=0)
        >>> kv = tl.randn(2, 2, 300, 64, dtype="bf16", device="cpu", seed=1)
        >>> decode_attention(q, kv, kv, kv_len=250, config=DecodeConfig(num_splits=3)).shape
        (2, 8, 64)
    """
    return _DECODE.prepare(plan_decode_attention, q, k, v, kv_len=kv_len, scale=scale,
                           out=out, config=config).run(sync, stream)


def compile_attention(batch: int, heads: int, seq: int, head_dim: int, *,
                      heads_kv: int | None = None, kv_seq: int | None = None,
                      causal: bool = False, dtype: Any = "bfloat16",
                      config: AttentionConfig | None = None, num_sms: int = 132,
                      arch: str = "sm_90") -> list:
    """Compile (without data or a GPU) the flash-attention kernel for these shapes
    (``num_sms``: the blocks of a persistent config).

    Example:
        >>> arts = compile_attention(8, 32, 4096, 128, causal=True)   # doctest: +SKIP
        >>> "HGMMA" in arts[0].sass                                    # doctest: +SKIP
        True
    """
    hk, skv = heads_kv or heads, kv_seq or seq
    q = tl.spec((batch, heads, seq, head_dim), dtype)
    kv = tl.spec((batch, hk, skv, head_dim), dtype)
    o3 = tl.spec((batch * heads, seq, head_dim), dtype)
    cfg = config or default_attention_config(head_dim, causal, skv)
    return [kern.compile(*args, arch=arch)
            for kern, args in _attention_launches(cfg, o3, q, kv, kv,
                                                  1.0 / math.sqrt(head_dim), causal,
                                                  num_sms)]


def compile_decode_attention(batch: int, heads: int, heads_kv: int, cache_len: int,
                             head_dim: int, *, kv_len: int | None = None,
                             dtype: Any = "bfloat16", config: DecodeConfig | None = None,
                             num_sms: int = 132, arch: str = "sm_90") -> list:
    """Compile (without data or a GPU) both kernels of split-KV decode attention.

    Example:
        >>> arts = compile_decode_attention(8, 32, 8, 8192, 128)     # doctest: +SKIP
        >>> len(arts)                                                 # doctest: +SKIP
        2
    """
    g = heads // heads_kv
    q4 = tl.spec((batch, heads_kv, g, head_dim), dtype)
    kv = tl.spec((batch, heads_kv, cache_len, head_dim), dtype)
    o3 = tl.spec((batch * heads_kv, g, head_dim), dtype)
    launches = _decode_launches(config or default_decode_config(), o3, q4, kv, kv,
                                kv_len or cache_len, 1.0 / math.sqrt(head_dim), num_sms,
                                tl.spec)
    return [kern.compile(*args, arch=arch) for kern, args in launches]
