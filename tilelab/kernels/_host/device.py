"""Device-side helpers shared by the library's kernels (plain cuTile, inlined).

These are plain module-level functions: a safe kernel reaches them through a
module-global name (``from tilelab.kernels._host.device import activate``), and the safety
checker checks each one it reaches, recursively, like the kernel itself. They receive
tiles and read-only arrays only; none of them writes.

The activation codes are plain ints (the values of
:class:`tilelab.kernels.activation.Activation`), so a kernel's ``ACT`` constant folds the
branches of :func:`activate` at compile time.

Example:
    >>> import numpy as np, tilelab as tl
    >>> from tilelab.kernels import unary
    >>> x = tl.tensor(np.array([-30.0, 0.0, 3.0], np.float32), device="cpu")
    >>> np.round(unary(x, "gelu_erf").numpy(), 4)
    array([-0.   ,  0.   ,  2.996], dtype=float32)
"""
from __future__ import annotations

import cuda.tile as ct

from tilelab.kernels.activation import Activation

__all__ = ["activate", "erfc_nonneg", "zero_padded_load", "weight_tile", "silu_mul", "NONE",
           "RELU", "GELU_TANH", "GELU_ERF", "SILU", "SIGMOID", "EXP"]

NONE = int(Activation.NONE)
RELU = int(Activation.RELU)
GELU_TANH = int(Activation.GELU_TANH)
GELU_ERF = int(Activation.GELU_ERF)
SILU = int(Activation.SILU)
SIGMOID = int(Activation.SIGMOID)
EXP = int(Activation.EXP)


def erfc_nonneg(z):
    """erfc(z) for z >= 0 with relative error < 1.2e-7 (Numerical Recipes' erfcc).

    cuTile has no erf; this Chebyshev fit costs one exp and keeps the *relative*
    error small in the far tail, where 1 - erf(z) would cancel (a fit of the absolute
    error, such as Abramowitz-Stegun 7.1.26, loses all digits there).

    Example:
        >>> half_tail = 0.5 * erfc_nonneg(ct.abs(v) * 0.7071067811865476)  # doctest: +SKIP
    """
    t = 1.0 / (1.0 + 0.5 * z)
    p = -0.82215223 + t * 0.17087277
    p = 1.48851587 + t * p
    p = -1.13520398 + t * p
    p = 0.27886807 + t * p
    p = -0.18628806 + t * p
    p = 0.09678418 + t * p
    p = 0.37409196 + t * p
    p = 1.00002368 + t * p
    return t * ct.exp(-z * z - 1.26551223 + t * p)


def activate(v, ACT):
    """The activation with code ``ACT`` (an :class:`Activation` value) of a float32 tile.

    GELU's tanh form is computed as ``v * sigmoid(2u)``: the same function as
    ``0.5 * v * (1 + tanh(u))`` without the cancellation of ``1 + tanh(u)`` for
    negative ``v`` (and one exp instead of a tanh). The erf form goes through
    :func:`erfc_nonneg`.

    Example:
        >>> z.store(activate(acc, ACT).astype(z.dtype))             # doctest: +SKIP
    """
    if ACT == RELU:
        return ct.maximum(v, 0.0)
    if ACT == GELU_TANH:
        u = 0.7978845608028654 * (v + 0.044715 * v * v * v)
        return v / (1.0 + ct.exp(-2.0 * u))
    if ACT == GELU_ERF:
        half_tail = 0.5 * erfc_nonneg(ct.abs(v) * 0.7071067811865476)
        return v * ct.where(v >= 0.0, 1.0 - half_tail, half_tail)
    if ACT == SILU:
        return v / (1.0 + ct.exp(-v))
    if ACT == SIGMOID:
        return 1.0 / (1.0 + ct.exp(-v))
    if ACT == EXP:
        return ct.exp(v)
    return v


def zero_padded_load(arr, index, shape, order, LAT):
    """``ct.load`` of a zero-padded tile; LAT > 0 passes cuTile's latency hint, 0 none
    (the hint is a compile-time choice: the branch folds). Shared by the GEMM and
    attention kernels.

    Example:
        >>> zero_padded_load(a, (m, k), (128, 64), "C", 0)         # doctest: +SKIP
    """
    if LAT > 0:
        return ct.load(arr, index=index, shape=shape, order=order,
                       padding_mode=ct.PaddingMode.ZERO, latency=LAT)
    return ct.load(arr, index=index, shape=shape, order=order,
                   padding_mode=ct.PaddingMode.ZERO)


def weight_tile(w, index, shape, LAT):
    """A zero-padded tile of weight ``w`` in its own dtype, reshaped to its last two
    dimensions (the decode GEMVs' ``(rows, K step)`` tile; LAT as in
    :func:`zero_padded_load`).

    Example:
        >>> weight_tile(w, (0, n, k), (1, 8, 512), 0)              # doctest: +SKIP
    """
    return ct.reshape(zero_padded_load(w, index, shape, "C", LAT), (shape[-2], shape[-1]))


def silu_mul(gate, up):
    """``silu(gate) * up``, in the inputs' (float32) precision: the MLP's gated
    activation.

    Example:
        >>> silu_mul(gate, up)                                     # doctest: +SKIP
    """
    return gate / (1.0 + ct.exp(-gate)) * up
