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

The configurations live in :mod:`tilelab.kernels.attention.config` and the kernels in
:mod:`tilelab.kernels.attention.kernels`; their public names are importable from here.

Example:
    >>> import tilelab as tl
    >>> q = tl.randn(1, 4, 40, 64, dtype="bf16", device="cpu", seed=0)
    >>> kv = tl.randn(1, 2, 40, 64, dtype="bf16", device="cpu", seed=1)
    >>> attention(q, kv, kv, causal=True, config=AttentionConfig(bm=16, bn=16)).shape
    (1, 4, 40, 64)
"""
from __future__ import annotations

import math
import operator
from typing import Any, Callable

import tilelab as tl
from tilelab.kernels._host import (CallCache, Plan, TensorResult, hinted, planning_sms,
                                   pow2_ceil, tensor_arg)
from tilelab.kernels.attention.config import ROW_SUMS  # noqa: F401  (importable here)
from tilelab.kernels.attention.config import (AttentionConfig, DecodeConfig,
                                              attention_search_space,
                                              default_attention_config,
                                              default_decode_config)
from tilelab.kernels.attention.kernels import (LOG2E, decode_combine_kernel,
                                               decode_split_kernel, flash_attention_kernel,
                                               persistent_attention_kernel)

__all__ = ["AttentionConfig", "DecodeConfig", "default_attention_config",
           "default_decode_config", "attention_search_space", "attention",
           "decode_attention", "plan_attention", "plan_decode_attention",
           "compile_attention", "compile_decode_attention",
           "flash_attention_kernel", "persistent_attention_kernel", "decode_split_kernel",
           "decode_combine_kernel"]

_DTYPES = ("float16", "bfloat16")
_OUT_DTYPES = ("float16", "bfloat16", "float32")
#: decode pads a GQA group's query rows to this many (the smallest tensor-core MMA)
_MMA_ROWS = 16


# ======================================================================================
# host side


def _tensor(x: Any, name: str, who: str) -> tl.Tensor:
    return tensor_arg(x, name, who)


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
    dp = pow2_ceil(q.shape[-1])
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
                                       causal, planning_sms(q.device)))


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
    ``sync=False`` it launches without waiting (on ``stream``, default the caller's) and
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
    gc, dp = max(_MMA_ROWS, pow2_ceil(g)), pow2_ceil(d)
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
             (o3.partition((1, pow2_ceil(g), dp)), po, plse,
              min(cfg.combine_chunk, pow2_ceil(splits)), dp))]


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
                                    s, planning_sms(dev),
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
