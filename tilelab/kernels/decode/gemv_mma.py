"""Decode GEMVs on the tensor cores: ``y[N] = W[N, K] @ x[K]`` as a 16-column MMA.

A GEMV has no reuse, so the tensor cores buy no arithmetic here; what they buy is the
compiler's pipeline. cuTile compiles a K loop whose body is an ``ct.mma`` into a
warp-specialized loop that keeps several weight tiles in flight through the bulk
tensor copy engine (on the H200: four to six 32 KB stages, 200 KB of shared memory per
block), where the element-wise GEMV of :mod:`tilelab.kernels.decode.gemv` keeps fewer
bytes in flight per SM. Each block owns ``bn`` outputs (a tile of the ``tl.Out``
partition of ``y``) and multiplies its ``(bn, bk)`` weight tile, the MMA's A operand,
by the ``bk`` slice of ``x`` placed in column 0 of a ``(bk, 16)`` B operand whose other
15 columns are zero padding, so column 0 of the fp32 accumulator is the result and the
other columns are exact zeros (the row sum at the end adds nothing else).

The fused forms are those of the element-wise kernels (the same flags, the same host
functions: ``GemvConfig(mma=True)`` selects these kernels): ``x + x2`` formed in fp32,
RMSNorm folded as a sum of squares and one scale at the end, one or two residuals,
and gate/up with SiLU·mul. The input slice is rounded to the weight's 16-bit type for
the MMA (as a bf16 model's own linear layer rounds its input); accumulation is fp32.
Every tensor is a ``tl.In`` read with zero padding, so no block writes anything but its
own outputs.

Example:
    >>> import numpy as np, tilelab as tl
    >>> from tilelab.kernels.decode.gemv import GemvConfig, row_gemv
    >>> w = tl.tensor(np.ones((64, 32), np.float32), dtype="bfloat16", device="cpu")
    >>> x = tl.tensor(np.arange(32, dtype=np.float32), dtype="bfloat16", device="cpu")
    >>> row_gemv(w, x, config=GemvConfig(bn=64, bk=16, mma=True)).numpy()[:3].tolist()
    [496.0, 496.0, 496.0]
"""
from __future__ import annotations

import cuda.tile as ct

import tilelab as tl
from tilelab.kernels._host.device import silu_mul, weight_tile

__all__ = ["gemv_mma_kernel", "gemv_mma_silu_mul_kernel", "MMA_COLS"]

#: columns of the MMA's B operand: x in column 0, zero padding in the rest
MMA_COLS = 16


def _x_col(v, k, BK):
    """Slice k of the (1, K) vector view ``v`` as column 0 of a (BK, 16) float32 tile;
    the zero padding of the view's single row fills the other columns."""
    t = ct.load(v, index=(k, 0), shape=(BK, MMA_COLS), order=(1, 0),
                padding_mode=ct.PaddingMode.ZERO)
    return t.astype(ct.float32)


def _input(x, x2, g, ss, k, BK, HAS_X2, NORM):
    """Slice k of the GEMV input ``x (+ x2)`` (times the norm weight ``g`` with NORM) as
    a (BK, 16) float32 column tile; ``ss`` (1, 16) accumulates the squares of
    ``x (+ x2)`` with NORM (only its column 0 is ever non-zero)."""
    xk = _x_col(x, k, BK)
    if HAS_X2:
        xk = xk + _x_col(x2, k, BK)
    if NORM:
        ss = ss + ct.sum(xk * xk, axis=0, keepdims=True)
        xk = xk * _x_col(g, k, BK)
    return xk, ss


def _scale(out, ss, k, eps, NORM):
    """``out`` times ``1 / sqrt(mean(x**2) + eps)`` with NORM (``ss`` the (1, 16) sums of
    squares over a length-``k`` input), else ``out``."""
    if NORM:
        return out * ct.rsqrt(ct.sum(ss, axis=1) / k + eps)
    return out


@tl.kernel
def gemv_mma_kernel(y: tl.Out, w: tl.In, x: tl.In, x2: tl.In, g: tl.In, res: tl.In,
                    res2: tl.In, eps: float, BK: ct.Constant[int], LAT: ct.Constant[int],
                    HAS_X2: ct.Constant[int], NORM: ct.Constant[int],
                    HAS_RES: ct.Constant[int], HAS_RES2: ct.Constant[int]):
    """``y = w @ rmsnorm_g(x + x2) + res + res2`` (each part optional, as in
    :func:`~tilelab.kernels.decode.gemv.gemv_fused_kernel`) on the tensor cores.

    ``w`` is (N, K) row-major and 16-bit; ``x``, ``x2`` and ``g`` are (1, K) views of
    the vectors (their single row is the MMA's column 0); ``res``, ``res2`` are (N,).
    A tensor a flag leaves unread may be any tensor of the right rank.

    Example:
        >>> gemv_mma_kernel(y.partition(64), w, x1k, x1k, x1k, y0, y0, 1e-6, 256, 0,
        ...                 0, 0, 0, 0)                                   # doctest: +SKIP
    """
    bn = y.tile_shape[0]
    n = y.tile_index[0]
    acc = ct.full((bn, MMA_COLS), 0.0, dtype=ct.float32)
    ss = ct.full((1, MMA_COLS), 0.0, dtype=ct.float32)
    for k in range(ct.cdiv(w.shape[1], BK)):
        xk, ss = _input(x, x2, g, ss, k, BK, HAS_X2, NORM)
        acc = ct.mma(weight_tile(w, (n, k), (bn, BK), LAT), xk.astype(w.dtype), acc)
    out = _scale(ct.sum(acc, axis=1), ss, w.shape[1], eps, NORM)
    if HAS_RES:
        out = out + tl.load_like(res, y).astype(ct.float32)
    if HAS_RES2:
        out = out + tl.load_like(res2, y).astype(ct.float32)
    y.store(out.astype(y.dtype))


@tl.kernel
def gemv_mma_silu_mul_kernel(y: tl.Out, w: tl.In, x: tl.In, x2: tl.In, g: tl.In,
                             eps: float, BK: ct.Constant[int], LAT: ct.Constant[int],
                             HAS_X2: ct.Constant[int], NORM: ct.Constant[int]):
    """``y = silu(w[0] @ n) * (w[1] @ n)``, ``n = rmsnorm_g(x + x2)`` (HAS_X2, NORM as in
    :func:`gemv_mma_kernel`), gate and up rows of ``w`` (2, I, K) on the tensor cores.

    Example:
        >>> gemv_mma_silu_mul_kernel(y.partition(64), w2, x1k, x1k, x1k, 1e-6, 256, 0,
        ...                          0, 0)                                # doctest: +SKIP
    """
    bn = y.tile_shape[0]
    n = y.tile_index[0]
    ga = ct.full((bn, MMA_COLS), 0.0, dtype=ct.float32)
    ua = ct.full((bn, MMA_COLS), 0.0, dtype=ct.float32)
    ss = ct.full((1, MMA_COLS), 0.0, dtype=ct.float32)
    for k in range(ct.cdiv(w.shape[2], BK)):
        xk, ss = _input(x, x2, g, ss, k, BK, HAS_X2, NORM)
        xb = xk.astype(w.dtype)
        ga = ct.mma(weight_tile(w, (0, n, k), (1, bn, BK), LAT), xb, ga)
        ua = ct.mma(weight_tile(w, (1, n, k), (1, bn, BK), LAT), xb, ua)
    gate = _scale(ct.sum(ga, axis=1), ss, w.shape[2], eps, NORM)
    up = _scale(ct.sum(ua, axis=1), ss, w.shape[2], eps, NORM)
    y.store(silu_mul(gate, up).astype(y.dtype))
