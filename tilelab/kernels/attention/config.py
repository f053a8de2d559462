"""Attention configurations: :class:`AttentionConfig` (flash attention),
:class:`DecodeConfig` (split-KV decode), their tuned defaults and the autotuner's
search space. Nothing here launches (:mod:`tilelab.kernels.attention` does).

Example:
    >>> default_attention_config(128, causal=True).bm in (64, 128)
    True
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from tilelab.kernels._host.args import check_hint, check_pow2_fields
from tilelab.kernels._host import hash_once, is_pow2, state_without_hash

__all__ = ["AttentionConfig", "DecodeConfig", "ROW_SUMS", "default_attention_config",
           "default_decode_config", "attention_search_space"]


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
        check_pow2_fields(self, "bm", "bn")
        if not isinstance(self.persistent, bool):
            raise ValueError(f"AttentionConfig.persistent={self.persistent!r} must be a "
                             "bool")
        if self.row_sum not in ROW_SUMS:
            raise ValueError(f"AttentionConfig.row_sum={self.row_sum!r}: choose one of "
                             f"{', '.join(map(repr, ROW_SUMS))}")
        check_hint("AttentionConfig", "latency_k", self.latency_k, 1, 10)
        check_hint("AttentionConfig", "latency_v", self.latency_v, 1, 10)
        check_hint("AttentionConfig", "occupancy", self.occupancy, 1, 32)
        check_hint("AttentionConfig", "num_worker_warps", self.num_worker_warps, 1, 32)
        if self.num_worker_warps is not None and not is_pow2(self.num_worker_warps):
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
        check_pow2_fields(self, "bn", "combine_chunk")
        if self.num_splits is not None and not (isinstance(self.num_splits, int)
                                                and self.num_splits >= 1):
            raise ValueError(f"DecodeConfig.num_splits={self.num_splits!r} must be a "
                             "positive int or None")
        check_hint("DecodeConfig", "latency_k", self.latency_k, 1, 10)
        check_hint("DecodeConfig", "latency_v", self.latency_v, 1, 10)
        check_hint("DecodeConfig", "occupancy", self.occupancy, 1, 32)

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
    (benchmarks/results/claims/tile-sweeps-h200/sweep*_h200_*.json):

    * head_dim <= 64: 128 query rows and 128 keys per step;
    * larger heads: 64 query rows, 128 keys per step and two blocks per SM (the
      occupancy hint alone is worth 1.3-1.6x), the fastest at 1K keys;
    * from 4096 keys (``kv_len``): 128 query rows, 256 keys per step and 8 worker warps,
      which tileiras turns into a warp-specialized kernel (a producer warpgroup and two
      consumers): 4% faster at 4K keys, 1% at 8K; with the row sums on the tensor cores
      (``row_sum="mma"``) another 6-8% at 4K-16K
      (claims/attention-forms-h200/variant_probe_h200_2026-11-30g.json);
      without a causal mask also persistent (one block per SM looping over query tiles),
      which saves each tile part of a block's start-up: 1-8.5% faster at 4K keys and
      2-4.5% at 8K (claims/attention-forms-h200/variant_probe_h200_2026-11-30h.json and i);
      with a causal mask the warp-specialized kernel only from 8192 keys (at 4096 the 64x128
      tiles are 5% faster, run i), and not persistent (the static tile order balances causal
      tiles worse: 4% slower at 8K).

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
