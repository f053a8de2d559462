"""Decode GEMVs with fused epilogues: ``y[N] = W[N, K] @ x[K]`` on a row-major weight.

The decode step of a transformer multiplies every weight matrix by one activation
vector, so it is bound by how fast the weights stream from memory. Each block owns
``bn`` outputs (a tile of the ``tl.Out`` partition of ``y``) and walks K in ``bk``-wide
steps, loading a ``(bn, bk)`` tile of whole weight rows (the layout nn.Linear stores,
so every load is contiguous) and the matching ``bk`` slice of ``x``; the products
accumulate element-wise in an fp32 ``(bn, bk)`` tile that is reduced over K once, after
the loop. ``W`` and ``x`` are ``tl.In`` reads (zero padded at the edges), so no block
can write anything but its own outputs.

Two fused forms serve a Qwen3/Llama decoder:

* :func:`row_gemv` with ``residual=``: ``y = W @ x + residual`` (the o and down
  projections add the residual stream in their epilogue);
* :func:`gemv_silu_mul`: ``y = silu(W_gate @ x) * (W_up @ x)`` from one ``(2, I, K)``
  weight holding gate and up, read in one pass (the MLP's first half).

:class:`GemvConfig` holds the tile sizes and cuTile hints, so a GPU run can tune them.

Example:
    >>> import numpy as np, tilelab as tl
    >>> w = tl.tensor(np.ones((5, 7), np.float32), device="cpu")
    >>> x = tl.tensor(np.arange(7, dtype=np.float32), device="cpu")
    >>> row_gemv(w, x, config=GemvConfig(bn=4, bk=4)).numpy()
    array([21., 21., 21., 21., 21.], dtype=float32)
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import cuda.tile as ct

import tilelab as tl
from tilelab.kernels._host import (Plan, TensorResult, as_tensor, hinted, is_pow2,
                                   run_launches)

__all__ = ["GemvConfig", "default_gemv_config", "row_gemv", "gemv_silu_mul", "plan_row_gemv",
           "plan_gemv_silu_mul", "gemv_kernel", "gemv_silu_mul_kernel"]

_FLOATS = ("float16", "bfloat16", "float32")


@dataclass(frozen=True)
class GemvConfig:
    """Tiles and hints of the decode GEMVs.

    ``bn``: output rows per block (weight rows streamed together); ``bk``: elements of
    K per step (both powers of two); ``latency``: cuTile's load latency hint (1..10,
    None: inferred); ``occupancy``: blocks per SM hint. The defaults (16 rows of 512,
    two blocks per SM) are the tiles the library's row-major GEMV measured fastest on
    the H200 for Qwen3-8B's projections.

    Example:
        >>> GemvConfig(bn=32).with_(bk=1024)
        GemvConfig(bn=32, bk=1024, latency=None, occupancy=2)
    """

    bn: int = 16
    bk: int = 512
    latency: int | None = None
    occupancy: int | None = 2

    def __post_init__(self):
        for name in ("bn", "bk"):
            if not is_pow2(getattr(self, name)):
                raise ValueError(f"GemvConfig.{name}={getattr(self, name)!r} must be a "
                                 "power of two")
        for name, hi in (("latency", 10), ("occupancy", 32)):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, int) and 1 <= v <= hi):
                raise ValueError(f"GemvConfig.{name}={v!r} must be an int in 1..{hi}, "
                                 "or None")

    def with_(self, **changes: Any) -> "GemvConfig":
        """A copy with some fields changed.

        Example:
            >>> GemvConfig().with_(bn=64).bn
            64
        """
        return dataclasses.replace(self, **changes)


def default_gemv_config(n: int, k: int, num_sms: int = 132) -> GemvConfig:
    """16 rows of 512 per block, or 4 rows when 16 would leave SMs without a block.

    Example:
        >>> default_gemv_config(4096, 4096).bn, default_gemv_config(1024, 4096).bn
        (16, 4)
    """
    bk = min(512, max(16, 1 << max(0, (k - 1).bit_length())))
    return GemvConfig(bn=16 if n // 16 >= num_sms else 4, bk=bk)


# ======================================================================================
# kernels


def _row_dot(w, x, n, bn, BK, LAT):
    """fp32 (bn,) dot products of weight rows n*bn.. of ``w`` (N, K) with ``x`` (K,)."""
    acc = ct.full((bn, BK), 0.0, dtype=ct.float32)
    for k in range(ct.cdiv(w.shape[1], BK)):
        acc = acc + _weight_tile(w, (n, k), (bn, BK), LAT) * _x_row(x, k, BK, LAT)
    return ct.sum(acc, axis=1)


def _x_row(x, k, BK, LAT):
    """The (1, BK) float32 slice k of the vector x, zero padded."""
    if LAT > 0:
        t = ct.load(x, index=(k,), shape=(BK,), padding_mode=ct.PaddingMode.ZERO,
                    latency=LAT)
    else:
        t = ct.load(x, index=(k,), shape=(BK,), padding_mode=ct.PaddingMode.ZERO)
    return ct.reshape(t.astype(ct.float32), (1, BK))


def _weight_tile(w, index, shape, LAT):
    """A zero-padded weight tile as float32, reshaped to its last two dimensions."""
    if LAT > 0:
        t = ct.load(w, index=index, shape=shape, padding_mode=ct.PaddingMode.ZERO,
                    latency=LAT)
    else:
        t = ct.load(w, index=index, shape=shape, padding_mode=ct.PaddingMode.ZERO)
    return ct.reshape(t.astype(ct.float32), (shape[-2], shape[-1]))


@tl.kernel
def gemv_kernel(y: tl.Out, w: tl.In, x: tl.In, res: tl.In, BK: ct.Constant[int],
                LAT: ct.Constant[int], HAS_RES: ct.Constant[int]):
    """``y = w @ x (+ res)`` for this block's ``bn`` outputs; ``w`` is (N, K) row-major.

    ``res`` is read only when HAS_RES (pass ``x`` again otherwise).

    Example:
        >>> gemv_kernel(y.partition(16), w, x, x, 512, 0, 0)           # doctest: +SKIP
    """
    bn = y.tile_shape[0]
    n = y.tile_index[0]
    out = _row_dot(w, x, n, bn, BK, LAT)
    if HAS_RES:
        out = out + tl.load_like(res, y).astype(ct.float32)
    y.store(out.astype(y.dtype))


@tl.kernel
def gemv_silu_mul_kernel(y: tl.Out, w: tl.In, x: tl.In, BK: ct.Constant[int],
                         LAT: ct.Constant[int]):
    """``y = silu(w[0] @ x) * (w[1] @ x)``: gate and up rows of ``w`` (2, I, K) together.

    Example:
        >>> gemv_silu_mul_kernel(y.partition(16), w2, x, 512, 0)       # doctest: +SKIP
    """
    bn = y.tile_shape[0]
    n = y.tile_index[0]
    g = ct.full((bn, BK), 0.0, dtype=ct.float32)
    u = ct.full((bn, BK), 0.0, dtype=ct.float32)
    for k in range(ct.cdiv(w.shape[2], BK)):
        xk = _x_row(x, k, BK, LAT)
        g = g + _weight_tile(w, (0, n, k), (1, bn, BK), LAT) * xk
        u = u + _weight_tile(w, (1, n, k), (1, bn, BK), LAT) * xk
    gate = ct.sum(g, axis=1)
    up = ct.sum(u, axis=1)
    y.store((gate / (1.0 + ct.exp(-gate)) * up).astype(y.dtype))


# ======================================================================================
# host


def _tensor(v: Any, name: str, who: str) -> tl.Tensor:
    try:
        t = as_tensor(v)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{who}(): {name} must be a tilelab tensor or an array, got "
                        f"{type(v).__name__} ({e})") from None
    if t.dtype.name not in _FLOATS:
        raise TypeError(f"{who}(): {name} is {t.dtype.name}; use float16, bfloat16 or "
                        "float32")
    return t


def _check_config(config: Any, n: int, k: int, who: str) -> GemvConfig:
    if config is None:
        return default_gemv_config(n, k)
    if not isinstance(config, GemvConfig):
        raise TypeError(f"{who}(): config must be a GemvConfig, got {type(config).__name__}")
    return config


def _out(out: Any, n: int, dtype: Any, device: str, who: str) -> tl.Tensor:
    if out is None:
        return tl.empty(n, dtype, device=device)
    o = _tensor(out, "out", who)
    if o.shape != (n,):
        raise ValueError(f"{who}(): out must have shape ({n},), got {o.shape}")
    if o.device != device:
        raise ValueError(f"{who}(): out lives on {o.device}, the inputs on {device}")
    return o


def _same_device(who: str, **tensors: tl.Tensor) -> str:
    devices = {name: t.device for name, t in tensors.items() if t is not None}
    if len(set(devices.values())) > 1:
        raise ValueError(f"{who}(): tensors live on different devices: " +
                         ", ".join(f"{k} on {v}" for k, v in devices.items()))
    return next(iter(devices.values()))


def plan_row_gemv(w: Any, x: Any, *, residual: Any = None, out: Any = None,
              config: GemvConfig | None = None) -> Plan:
    """Check the arguments of :func:`row_gemv` and plan its launch.

    Example:
        >>> import tilelab as tl
        >>> w = tl.randn(40, 24, dtype="bf16", device="cpu", seed=0)
        >>> [k.name for k, _ in plan_row_gemv(w, tl.randn(24, device="cpu")).launches]
        ['gemv_kernel']
    """
    who = "row_gemv"
    wt, xt = _tensor(w, "w", who), _tensor(x, "x", who)
    if wt.ndim != 2 or xt.ndim != 1 or wt.shape[1] != xt.shape[0]:
        raise ValueError(f"{who}(): w must be (N, K) and x (K,); got {wt.shape} and "
                         f"{xt.shape}")
    n, k = wt.shape
    rt = None if residual is None else _tensor(residual, "residual", who)
    if rt is not None and rt.shape != (n,):
        raise ValueError(f"{who}(): residual must have shape ({n},), got {rt.shape}")
    device = _same_device(who, w=wt, x=xt, residual=rt)
    cfg = _check_config(config, n, k, who)
    o = _out(out, n, xt.dtype, device, who)
    if n == 0:
        return Plan(o, [])
    kern = hinted(gemv_kernel, occupancy=cfg.occupancy)
    return Plan(o, [(kern, (o.partition(cfg.bn), wt, xt, rt if rt is not None else xt,
                            cfg.bk, cfg.latency or 0, int(rt is not None)))])


def plan_gemv_silu_mul(w: Any, x: Any, *, out: Any = None,
                       config: GemvConfig | None = None) -> Plan:
    """Check the arguments of :func:`gemv_silu_mul` and plan its launch.

    Example:
        >>> import tilelab as tl
        >>> w = tl.randn(2, 40, 24, dtype="bf16", device="cpu", seed=0)
        >>> plan_gemv_silu_mul(w, tl.randn(24, device="cpu")).out.shape
        (40,)
    """
    who = "gemv_silu_mul"
    wt, xt = _tensor(w, "w", who), _tensor(x, "x", who)
    if wt.ndim != 3 or wt.shape[0] != 2 or xt.ndim != 1 or wt.shape[2] != xt.shape[0]:
        raise ValueError(f"{who}(): w must be (2, I, K) (gate and up stacked) and x "
                         f"(K,); got {wt.shape} and {xt.shape}")
    _, n, k = wt.shape
    device = _same_device(who, w=wt, x=xt)
    cfg = _check_config(config, n, k, who)
    o = _out(out, n, xt.dtype, device, who)
    if n == 0:
        return Plan(o, [])
    kern = hinted(gemv_silu_mul_kernel, occupancy=cfg.occupancy)
    return Plan(o, [(kern, (o.partition(cfg.bn), wt, xt, cfg.bk, cfg.latency or 0))])


def row_gemv(w: Any, x: Any, *, residual: Any = None, out: Any = None,
         config: GemvConfig | None = None, sync: bool = True,
         stream: Any = None) -> TensorResult:
    """``w @ x (+ residual)`` for a row-major weight ``w`` (N, K) and a vector ``x`` (K,).

    fp32 accumulation; the result has x's dtype (or ``out``'s). ``sync=False``
    launches without waiting and returns ``(out, future)`` (see :mod:`tilelab.kernels`).

    Example:
        >>> import numpy as np, tilelab as tl
        >>> w = tl.tensor(np.eye(3, dtype=np.float32), device="cpu")
        >>> x = tl.tensor(np.array([1.0, 2.0, 3.0], np.float32), device="cpu")
        >>> row_gemv(w, x, residual=x).numpy()
        array([2., 4., 6.], dtype=float32)
    """
    plan = plan_row_gemv(w, x, residual=residual, out=out, config=config)
    return run_launches(plan.launches, plan.out, sync=sync, stream=stream)


def gemv_silu_mul(w: Any, x: Any, *, out: Any = None, config: GemvConfig | None = None,
                  sync: bool = True, stream: Any = None) -> TensorResult:
    """``silu(w[0] @ x) * (w[1] @ x)`` for gate and up stacked as ``w`` (2, I, K).

    Example:
        >>> import numpy as np, tilelab as tl
        >>> w = tl.tensor(np.ones((2, 2, 3), np.float32), device="cpu")
        >>> x = tl.tensor(np.ones(3, np.float32), device="cpu")
        >>> np.round(gemv_silu_mul(w, x).numpy(), 4)      # silu(3) * 3
        array([8.5732, 8.5732], dtype=float32)
    """
    plan = plan_gemv_silu_mul(w, x, out=out, config=config)
    return run_launches(plan.launches, plan.out, sync=sync, stream=stream)
