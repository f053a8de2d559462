"""Decode GEMVs with fused epilogues: ``y[N] = W[N, K] @ x[K]`` on a row-major weight.

The decode step of a transformer multiplies every weight matrix by one activation
vector, so it is bound by how fast the weights stream from memory. Each block owns
``bn`` outputs (a tile of the ``tl.Out`` partition of ``y``) and walks K in ``bk``-wide
steps, loading a ``(bn, bk)`` tile of whole weight rows (the layout nn.Linear stores,
so every load is contiguous) and the matching ``bk`` slice of ``x``; the products
accumulate element-wise in an fp32 ``(bn, bk)`` tile that is reduced over K once, after
the loop. ``W`` and ``x`` are ``tl.In`` reads (zero padded at the edges), so no block
can write anything but its own outputs. Each block loads its first weight tile before
``tl.wait_for_previous_kernel()``: in a graph the weights then start streaming while
the kernel that produced ``x`` is still finishing.

Fused forms serve a Qwen3/Llama decoder:

* :func:`row_gemv` with ``residual=``: ``y = W @ x + residual`` (the o and down
  projections add the residual stream in their epilogue); ``residual=(a, b)`` adds the
  sum of two vectors, so a residual stream kept as two parts is never written whole;
* :func:`gemv_silu_mul`: ``y = silu(W_gate @ x) * (W_up @ x)`` from one ``(2, I, K)``
  weight holding gate and up, read in one pass (the MLP's first half);
* both with ``norm_weight=g`` (and ``eps``): the GEMV of ``rmsnorm(x) * g``. Since
  ``W @ (g * x * rstd) = rstd * (W @ (g * x))`` with the scalar
  ``rstd = 1 / sqrt(mean(x**2) + eps)``, each block sums ``x**2`` in the K loop that
  already reads all of ``x`` and scales its dot products once at the end: the norm
  costs no kernel and no pass of its own. ``x2=b`` makes the GEMV's input ``x + b``,
  formed in fp32 as it is loaded (the residual stream plus the last down projection,
  never stored).

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
from tilelab.kernels._host.args import check_hint, check_pow2_fields
from tilelab.kernels._host.device import silu_mul, weight_tile, zero_padded_load
from tilelab.kernels._host import (Plan, TensorResult, as_tensor, hinted, run_launches)
from tilelab.kernels.decode.gemv_mma import gemv_mma_kernel, gemv_mma_silu_mul_kernel

__all__ = ["GemvConfig", "default_gemv_config", "row_gemv", "gemv_silu_mul", "plan_row_gemv",
           "plan_gemv_silu_mul", "gemv_kernel", "gemv_silu_mul_kernel", "gemv_fused_kernel",
           "gemv_fused_silu_mul_kernel"]

_FLOATS = ("float16", "bfloat16", "float32")


@dataclass(frozen=True)
class GemvConfig:
    """Tiles and hints of the decode GEMVs.

    ``bn``: output rows per block (weight rows streamed together); ``bk``: elements of
    K per step (both powers of two); ``latency``: cuTile's load latency hint (1..10,
    None: inferred); ``occupancy``: blocks per SM hint; ``mma``: run the GEMV on the
    tensor cores (:mod:`tilelab.kernels.decode.gemv_mma`: 16-bit weights only, ``bk``
    at least 16); ``prefetch``: weight tiles (of ``bn`` x ``bk``) each block loads
    before it waits for the previous kernel, 1 or 2 (element-wise kernels). The
    defaults (16 rows of 512, two blocks per SM, element-wise, one tile ahead) are the
    tiles the library's row-major GEMV measured fastest on the H200 for Qwen3-8B's
    projections.

    Example:
        >>> GemvConfig(bn=32).with_(bk=1024)
        GemvConfig(bn=32, bk=1024, latency=None, occupancy=2, mma=False, prefetch=1)
    """

    bn: int = 16
    bk: int = 512
    latency: int | None = None
    occupancy: int | None = 2
    mma: bool = False
    prefetch: int = 1

    def __post_init__(self):
        check_pow2_fields(self, "bn", "bk")
        check_hint("GemvConfig", "latency", self.latency, 1, 10)
        check_hint("GemvConfig", "occupancy", self.occupancy, 1, 32)
        if not isinstance(self.mma, bool):
            raise TypeError(f"GemvConfig.mma must be True or False, got {self.mma!r}")
        if self.mma and self.bk < 16:
            raise ValueError(f"GemvConfig(mma=True) needs bk >= 16 (the MMA's K step), "
                             f"got bk={self.bk}")
        if type(self.prefetch) is not int or self.prefetch not in (1, 2):
            raise ValueError(f"GemvConfig.prefetch must be 1 or 2 (weight tiles loaded "
                             f"before the wait), got {self.prefetch!r}")
        if self.mma and self.prefetch != 1:
            raise ValueError("GemvConfig(mma=True) loads one weight tile before its wait: "
                             f"prefetch must be 1, got {self.prefetch}")

    def with_(self, **changes: Any) -> "GemvConfig":
        """A copy with some fields changed.

        Example:
            >>> GemvConfig().with_(bn=64).bn
            64
        """
        return dataclasses.replace(self, **changes)


def default_gemv_config(n: int, k: int, num_sms: int = 132) -> GemvConfig:
    """16 rows of 512 per block, or 4 rows when 16 would leave SMs without a block; two
    weight tiles loaded before the wait when K has two steps or more (in the Qwen3
    decode steps replayed on an H100, two tiles ahead on every projection took 2.4%
    (4B) and 0.3% (8B) off the step against one: decode_h100_2026-12-06.json).

    Example:
        >>> default_gemv_config(4096, 4096).bn, default_gemv_config(1024, 4096).bn
        (16, 4)
        >>> default_gemv_config(4096, 4096).prefetch, default_gemv_config(64, 512).prefetch
        (2, 1)
    """
    bk = min(512, max(16, 1 << max(0, (k - 1).bit_length())))
    return GemvConfig(bn=16 if n // 16 >= num_sms else 4, bk=bk, prefetch=2 if k > bk else 1)


# ======================================================================================
# kernels


def _row_dot(w0, w1, w, x, n, bn, BK, LAT, PRE):
    """fp32 (bn,) dot products of weight rows n*bn.. of ``w`` (N, K) with ``x`` (K,);
    ``w0`` (and ``w1`` when PRE is 2) are their first (bn, BK) tiles, loaded before the
    kernel's wait."""
    acc = w0.astype(ct.float32) * _x_row(x, 0, BK, LAT)
    if PRE > 1:
        acc = acc + w1.astype(ct.float32) * _x_row(x, 1, BK, LAT)
    for k in range(PRE, ct.cdiv(w.shape[1], BK)):
        acc = acc + _weight_tile(w, (n, k), (bn, BK), LAT) * _x_row(x, k, BK, LAT)
    return ct.sum(acc, axis=1)


def _x_row(x, k, BK, LAT):
    """The (1, BK) float32 slice k of the vector x, zero padded."""
    t = zero_padded_load(x, (k,), (BK,), "C", LAT)
    return ct.reshape(t.astype(ct.float32), (1, BK))


def _weight_tile(w, index, shape, LAT):
    """A zero-padded weight tile as float32, reshaped to its last two dimensions."""
    return weight_tile(w, index, shape, LAT).astype(ct.float32)


def _second_tile(first, w, index, shape, LAT, PRE):
    """The weight tile at ``index`` (the second along K) when PRE is 2, else ``first``
    again, unread: what a kernel loads ahead of its wait beside its first tile (the
    constant branch folds away when cuTile compiles it)."""
    if PRE > 1:
        return weight_tile(w, index, shape, LAT)
    return first


@tl.kernel
def gemv_kernel(y: tl.Out, w: tl.In, x: tl.In, res: tl.In, BK: ct.Constant[int],
                LAT: ct.Constant[int], PRE: ct.Constant[int], HAS_RES: ct.Constant[int]):
    """``y = w @ x (+ res)`` for this block's ``bn`` outputs; ``w`` is (N, K) row-major.

    ``res`` is read only when HAS_RES (pass ``x`` again otherwise); PRE weight tiles
    (1 or 2) are loaded before the wait.

    Example:
        >>> gemv_kernel(y.partition(16), w, x, x, 512, 0, 1, 0)        # doctest: +SKIP
    """
    bn = y.tile_shape[0]
    n = y.tile_index[0]
    w0 = weight_tile(w, (n, 0), (bn, BK), LAT)   # streams while the previous kernel ends
    w1 = _second_tile(w0, w, (n, 1), (bn, BK), LAT, PRE)
    tl.wait_for_previous_kernel()
    out = _row_dot(w0, w1, w, x, n, bn, BK, LAT, PRE)
    if HAS_RES:
        out = out + tl.load_like(res, y).astype(ct.float32)
    y.store(out.astype(y.dtype))


@tl.kernel
def gemv_silu_mul_kernel(y: tl.Out, w: tl.In, x: tl.In, BK: ct.Constant[int],
                         LAT: ct.Constant[int], PRE: ct.Constant[int]):
    """``y = silu(w[0] @ x) * (w[1] @ x)``: gate and up rows of ``w`` (2, I, K) together.

    Example:
        >>> gemv_silu_mul_kernel(y.partition(16), w2, x, 512, 0, 1)    # doctest: +SKIP
    """
    bn = y.tile_shape[0]
    n = y.tile_index[0]
    g0 = weight_tile(w, (0, n, 0), (1, bn, BK), LAT)   # stream while the previous
    u0 = weight_tile(w, (1, n, 0), (1, bn, BK), LAT)   # kernel ends
    g1 = _second_tile(g0, w, (0, n, 1), (1, bn, BK), LAT, PRE)
    u1 = _second_tile(u0, w, (1, n, 1), (1, bn, BK), LAT, PRE)
    tl.wait_for_previous_kernel()
    x0 = _x_row(x, 0, BK, LAT)
    g = g0.astype(ct.float32) * x0
    u = u0.astype(ct.float32) * x0
    if PRE > 1:
        x1 = _x_row(x, 1, BK, LAT)
        g = g + g1.astype(ct.float32) * x1
        u = u + u1.astype(ct.float32) * x1
    for k in range(PRE, ct.cdiv(w.shape[2], BK)):
        xk = _x_row(x, k, BK, LAT)
        g = g + _weight_tile(w, (0, n, k), (1, bn, BK), LAT) * xk
        u = u + _weight_tile(w, (1, n, k), (1, bn, BK), LAT) * xk
    gate = ct.sum(g, axis=1)
    up = ct.sum(u, axis=1)
    y.store(silu_mul(gate, up).astype(y.dtype))


def _x_fused(x, x2, g, ss, k, BK, LAT, HAS_X2, NORM):
    """Slice k of the GEMV input: ``x (+ x2)`` as (1, BK) float32, times the norm weight
    ``g`` with NORM; ``ss`` (1, BK) accumulates the squares of ``x (+ x2)`` (NORM)."""
    xk = _x_row(x, k, BK, LAT)
    if HAS_X2:
        xk = xk + _x_row(x2, k, BK, LAT)
    if NORM:
        ss = ss + xk * xk
        xk = xk * _x_row(g, k, BK, LAT)
    return xk, ss


def _rstd(ss, k, eps):
    """``1 / sqrt(mean(x**2) + eps)`` as a (1,) tile, from the (1, BK) partial sums of
    squares ``ss`` over a length-``k`` vector (the zero padding adds nothing)."""
    return ct.rsqrt(ct.sum(ss, axis=1) / k + eps)


@tl.kernel
def gemv_fused_kernel(y: tl.Out, w: tl.In, x: tl.In, x2: tl.In, g: tl.In, res: tl.In,
                      res2: tl.In, eps: float, BK: ct.Constant[int], LAT: ct.Constant[int],
                      PRE: ct.Constant[int], HAS_X2: ct.Constant[int], NORM: ct.Constant[int],
                      HAS_RES: ct.Constant[int], HAS_RES2: ct.Constant[int]):
    """``y = w @ rmsnorm_g(x + x2) + res + res2``, each part optional, for this block's
    ``bn`` outputs; ``w`` is (N, K) row-major.

    HAS_X2: add the (K,) vector ``x2`` to ``x`` (in fp32, as each slice is loaded);
    NORM: RMSNorm the input with the (K,) weight ``g`` and ``eps`` (each block sums the
    squares of the whole input in its K loop, then scales its dot products by the
    inverse RMS); HAS_RES, HAS_RES2: add ``res``, ``res2`` (both (N,)). A tensor a flag
    leaves unread may be any tensor (the host passes ``x`` again).

    Example:
        >>> gemv_fused_kernel(y.partition(16), w, h, down, g, x, x, 1e-6, 512, 0, 1, 1,
        ...                   1, 0, 0)                                    # doctest: +SKIP
    """
    bn = y.tile_shape[0]
    n = y.tile_index[0]
    w0 = weight_tile(w, (n, 0), (bn, BK), LAT)   # streams while the previous kernel ends
    w1 = _second_tile(w0, w, (n, 1), (bn, BK), LAT, PRE)
    tl.wait_for_previous_kernel()
    ss = ct.full((1, BK), 0.0, dtype=ct.float32)
    xk, ss = _x_fused(x, x2, g, ss, 0, BK, LAT, HAS_X2, NORM)
    acc = w0.astype(ct.float32) * xk
    if PRE > 1:
        xk, ss = _x_fused(x, x2, g, ss, 1, BK, LAT, HAS_X2, NORM)
        acc = acc + w1.astype(ct.float32) * xk
    for k in range(PRE, ct.cdiv(w.shape[1], BK)):
        xk, ss = _x_fused(x, x2, g, ss, k, BK, LAT, HAS_X2, NORM)
        acc = acc + _weight_tile(w, (n, k), (bn, BK), LAT) * xk
    out = ct.sum(acc, axis=1)
    if NORM:
        out = out * _rstd(ss, w.shape[1], eps)
    if HAS_RES:
        out = out + tl.load_like(res, y).astype(ct.float32)
    if HAS_RES2:
        out = out + tl.load_like(res2, y).astype(ct.float32)
    y.store(out.astype(y.dtype))


@tl.kernel
def gemv_fused_silu_mul_kernel(y: tl.Out, w: tl.In, x: tl.In, x2: tl.In, g: tl.In,
                               eps: float, BK: ct.Constant[int], LAT: ct.Constant[int],
                               PRE: ct.Constant[int], HAS_X2: ct.Constant[int],
                               NORM: ct.Constant[int]):
    """``y = silu(w[0] @ n) * (w[1] @ n)`` with ``n = rmsnorm_g(x + x2)`` (HAS_X2, NORM
    as in :func:`gemv_fused_kernel`): gate and up rows of ``w`` (2, I, K) together.

    Example:
        >>> gemv_fused_silu_mul_kernel(y.partition(8), w2, h, h, g, 1e-6, 512, 0, 1, 0,
        ...                            1)                                 # doctest: +SKIP
    """
    bn = y.tile_shape[0]
    n = y.tile_index[0]
    g0 = weight_tile(w, (0, n, 0), (1, bn, BK), LAT)   # stream while the previous
    u0 = weight_tile(w, (1, n, 0), (1, bn, BK), LAT)   # kernel ends
    g1 = _second_tile(g0, w, (0, n, 1), (1, bn, BK), LAT, PRE)
    u1 = _second_tile(u0, w, (1, n, 1), (1, bn, BK), LAT, PRE)
    tl.wait_for_previous_kernel()
    ss = ct.full((1, BK), 0.0, dtype=ct.float32)
    xk, ss = _x_fused(x, x2, g, ss, 0, BK, LAT, HAS_X2, NORM)
    ga = g0.astype(ct.float32) * xk
    ua = u0.astype(ct.float32) * xk
    if PRE > 1:
        xk, ss = _x_fused(x, x2, g, ss, 1, BK, LAT, HAS_X2, NORM)
        ga = ga + g1.astype(ct.float32) * xk
        ua = ua + u1.astype(ct.float32) * xk
    for k in range(PRE, ct.cdiv(w.shape[2], BK)):
        xk, ss = _x_fused(x, x2, g, ss, k, BK, LAT, HAS_X2, NORM)
        ga = ga + _weight_tile(w, (0, n, k), (1, bn, BK), LAT) * xk
        ua = ua + _weight_tile(w, (1, n, k), (1, bn, BK), LAT) * xk
    gate = ct.sum(ga, axis=1)
    up = ct.sum(ua, axis=1)
    if NORM:
        r = _rstd(ss, w.shape[2], eps)
        gate = gate * r
        up = up * r
    y.store(silu_mul(gate, up).astype(y.dtype))


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


def _prefetch(cfg: GemvConfig, k: int) -> int:
    """The weight tiles to load before the wait: ``cfg.prefetch``, but one when K has a
    single step (a second tile would lie wholly outside the weight, which cuTile leaves
    undefined)."""
    return cfg.prefetch if k > cfg.bk else 1


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


def _vector(v: Any, name: str, length: int, device: str, who: str) -> tl.Tensor | None:
    """``v`` checked as a float vector of ``length`` on ``device`` (None stays None)."""
    if v is None:
        return None
    t = _tensor(v, name, who)
    if t.shape != (length,):
        raise ValueError(f"{who}(): {name} must have shape ({length},), got {t.shape}")
    if t.device != device:
        raise ValueError(f"{who}(): {name} lives on {t.device}, the inputs on {device}")
    return t


def _prologue(who: str, k: int, device: str, x2: Any, norm_weight: Any,
              eps: Any) -> tuple[tl.Tensor | None, tl.Tensor | None, float]:
    """The checked ``x2``, ``norm_weight`` and ``eps`` of a GEMV's fused input."""
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps >= 0:
        raise ValueError(f"{who}(): eps must be a non-negative float, got {eps!r}")
    return (_vector(x2, "x2", k, device, who),
            _vector(norm_weight, "norm_weight", k, device, who), float(eps))


def _residuals(residual: Any, n: int, device: str, who: str) -> list[tl.Tensor]:
    """``residual`` (None, a vector, or a tuple of one or two, None parts left out) as
    a list of vectors."""
    if residual is None:
        return []
    parts = list(residual) if isinstance(residual, (tuple, list)) else [residual]
    parts = [p for p in parts if p is not None]
    if not 1 <= len(parts) <= 2:
        raise ValueError(f"{who}(): residual must be one vector or a pair (a, b) whose sum "
                         f"is added; got {len(parts)} vectors")
    return [_vector(r, "residual", n, device, who) for r in parts]


def _check_mma(w: tl.Tensor, who: str) -> None:
    """ValueError unless the weight suits the tensor-core GEMV (16-bit)."""
    if w.dtype.name not in ("float16", "bfloat16"):
        raise ValueError(f"{who}(): GemvConfig(mma=True) needs a float16 or bfloat16 "
                         f"weight, got {w.dtype.name}; use mma=False")


def _as_rows(x: tl.Tensor, x2: tl.Tensor | None,
             g: tl.Tensor | None) -> tuple[tl.Tensor, tl.Tensor, tl.Tensor]:
    """The (K,) input vectors as (1, K) views, the MMA kernels' B-operand layout
    (a vector left out is ``x`` again: its flag keeps it unread)."""
    vecs = (x, x if x2 is None else x2, x if g is None else g)
    rows = [v if v.is_contiguous else v.contiguous() for v in vecs]
    return tuple(v.reshape(1, v.shape[0]) for v in rows)


def plan_row_gemv(w: Any, x: Any, *, x2: Any = None, norm_weight: Any = None,
                  eps: float = 1e-6, residual: Any = None, out: Any = None,
                  config: GemvConfig | None = None) -> Plan:
    """Check the arguments of :func:`row_gemv` and plan its launch: ``gemv_kernel``, or
    ``gemv_fused_kernel`` when ``x2``, ``norm_weight`` or a residual pair is given.

    Example:
        >>> import tilelab as tl
        >>> w = tl.randn(40, 24, dtype="bf16", device="cpu", seed=0)
        >>> x = tl.randn(24, device="cpu")
        >>> [k.name for k, _ in plan_row_gemv(w, x).launches]
        ['gemv_kernel']
        >>> [k.name for k, _ in plan_row_gemv(w, x, norm_weight=x).launches]
        ['gemv_fused_kernel']
    """
    who = "row_gemv"
    wt, xt = _tensor(w, "w", who), _tensor(x, "x", who)
    if wt.ndim != 2 or xt.ndim != 1 or wt.shape[1] != xt.shape[0]:
        raise ValueError(f"{who}(): w must be (N, K) and x (K,); got {wt.shape} and "
                         f"{xt.shape}")
    n, k = wt.shape
    device = _same_device(who, w=wt, x=xt)
    x2t, gt, eps = _prologue(who, k, device, x2, norm_weight, eps)
    res = _residuals(residual, n, device, who)
    cfg = _check_config(config, n, k, who)
    o = _out(out, n, xt.dtype, device, who)
    if n == 0:
        return Plan(o, [])
    part, lat, pre = o.partition(cfg.bn), cfg.latency or 0, _prefetch(cfg, k)
    if cfg.mma:
        _check_mma(wt, who)
        r1, r2 = (res + [xt, xt])[:2]
        x1, x2v, gv = _as_rows(xt, x2t, gt)
        kern = hinted(gemv_mma_kernel, occupancy=cfg.occupancy)
        return Plan(o, [(kern, (part, wt, x1, x2v, gv, r1, r2, eps, cfg.bk, lat,
                                int(x2t is not None), int(gt is not None),
                                int(len(res) > 0), int(len(res) > 1)))])
    if x2t is None and gt is None and len(res) < 2:
        kern = hinted(gemv_kernel, occupancy=cfg.occupancy)
        return Plan(o, [(kern, (part, wt, xt, res[0] if res else xt, cfg.bk, lat,
                                pre, len(res)))])
    r1, r2 = (res + [xt, xt])[:2]
    kern = hinted(gemv_fused_kernel, occupancy=cfg.occupancy)
    return Plan(o, [(kern, (part, wt, xt, xt if x2t is None else x2t,
                            xt if gt is None else gt, r1, r2, eps, cfg.bk, lat, pre,
                            int(x2t is not None), int(gt is not None), int(len(res) > 0),
                            int(len(res) > 1)))])


def plan_gemv_silu_mul(w: Any, x: Any, *, x2: Any = None, norm_weight: Any = None,
                       eps: float = 1e-6, out: Any = None,
                       config: GemvConfig | None = None) -> Plan:
    """Check the arguments of :func:`gemv_silu_mul` and plan its launch:
    ``gemv_silu_mul_kernel``, or ``gemv_fused_silu_mul_kernel`` with ``x2`` or
    ``norm_weight``.

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
    x2t, gt, eps = _prologue(who, k, device, x2, norm_weight, eps)
    cfg = _check_config(config, n, k, who)
    o = _out(out, n, xt.dtype, device, who)
    if n == 0:
        return Plan(o, [])
    part, lat, pre = o.partition(cfg.bn), cfg.latency or 0, _prefetch(cfg, k)
    if cfg.mma:
        _check_mma(wt, who)
        x1, x2v, gv = _as_rows(xt, x2t, gt)
        kern = hinted(gemv_mma_silu_mul_kernel, occupancy=cfg.occupancy)
        return Plan(o, [(kern, (part, wt, x1, x2v, gv, eps, cfg.bk, lat,
                                int(x2t is not None), int(gt is not None)))])
    if x2t is None and gt is None:
        kern = hinted(gemv_silu_mul_kernel, occupancy=cfg.occupancy)
        return Plan(o, [(kern, (part, wt, xt, cfg.bk, lat, pre))])
    kern = hinted(gemv_fused_silu_mul_kernel, occupancy=cfg.occupancy)
    return Plan(o, [(kern, (part, wt, xt, xt if x2t is None else x2t,
                            xt if gt is None else gt, eps, cfg.bk, lat, pre,
                            int(x2t is not None), int(gt is not None)))])


def row_gemv(w: Any, x: Any, *, x2: Any = None, norm_weight: Any = None,
             eps: float = 1e-6, residual: Any = None, out: Any = None,
             config: GemvConfig | None = None, sync: bool = True,
             stream: Any = None) -> TensorResult:
    """``w @ n (+ residual)`` for a row-major weight ``w`` (N, K) and a vector ``x`` (K,),
    where ``n`` is ``x + x2`` (``x2`` a second (K,) vector, added in fp32 and never
    stored) or ``x``, RMSNormed with ``norm_weight`` (K,) and ``eps`` when it is given.

    ``residual``: an (N,) vector added to the result, or a pair ``(a, b)`` whose sum
    is (a None in the pair is left out). fp32 accumulation; the result has x's dtype (or ``out``'s). ``sync=False``
    launches without waiting and returns ``(out, future)`` (see :mod:`tilelab.kernels`).

    Example:
        >>> import numpy as np, tilelab as tl
        >>> w = tl.tensor(np.eye(3, dtype=np.float32), device="cpu")
        >>> x = tl.tensor(np.array([1.0, 2.0, 3.0], np.float32), device="cpu")
        >>> row_gemv(w, x, residual=x).numpy()
        array([2., 4., 6.], dtype=float32)
        >>> row_gemv(w, x, x2=x, residual=(x, x)).numpy()        # w @ (x + x) + x + x
        array([ 4.,  8., 12.], dtype=float32)
        >>> g = tl.tensor(np.full(3, 2.0, np.float32), device="cpu")
        >>> np.round(row_gemv(w, x, norm_weight=g, eps=0.0).numpy(), 4)  # x / rms(x) * 2
        array([0.9258, 1.8516, 2.7775], dtype=float32)
    """
    plan = plan_row_gemv(w, x, x2=x2, norm_weight=norm_weight, eps=eps,
                         residual=residual, out=out, config=config)
    return run_launches(plan.launches, plan.out, sync=sync, stream=stream)


def gemv_silu_mul(w: Any, x: Any, *, x2: Any = None, norm_weight: Any = None,
                  eps: float = 1e-6, out: Any = None, config: GemvConfig | None = None,
                  sync: bool = True, stream: Any = None) -> TensorResult:
    """``silu(w[0] @ n) * (w[1] @ n)`` for gate and up stacked as ``w`` (2, I, K), with
    ``n`` the input of :func:`row_gemv` (``x (+ x2)``, RMSNormed with ``norm_weight``).

    Example:
        >>> import numpy as np, tilelab as tl
        >>> w = tl.tensor(np.ones((2, 2, 3), np.float32), device="cpu")
        >>> x = tl.tensor(np.ones(3, np.float32), device="cpu")
        >>> np.round(gemv_silu_mul(w, x).numpy(), 4)      # silu(3) * 3
        array([8.5732, 8.5732], dtype=float32)
        >>> np.round(gemv_silu_mul(w, x, x2=x, norm_weight=x).numpy(), 4)  # rms(2x) = 2
        array([8.5732, 8.5732], dtype=float32)
    """
    plan = plan_gemv_silu_mul(w, x, x2=x2, norm_weight=norm_weight, eps=eps, out=out,
                              config=config)
    return run_launches(plan.launches, plan.out, sync=sync, stream=stream)
