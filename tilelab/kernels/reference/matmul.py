"""float64 numpy references for the matmul and attention kernels (for tests and checks).

They compute in float64 from the exact input values (bf16/fp16/fp8 inputs widen
losslessly), so the difference to a kernel is the kernel's own rounding: fp32
accumulation, tf32 operands for fp32 inputs, the bf16/fp16 rounding of P before the PV
product in attention, and the final rounding to the output dtype.

Example:
    >>> import numpy as np
    >>> from tilelab.kernels.reference.matmul import matmul_ref
    >>> matmul_ref(np.ones((2, 3)), np.ones((3, 4)), bias=np.arange(4.0))[0]
    array([3., 4., 5., 6.])
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from tilelab.kernels.reference.memory_bound import unary

__all__ = ["to_f64", "activation_ref", "matmul_ref", "bmm_ref", "attention_ref",
           "decode_attention_ref", "rel_error"]


def to_f64(x: Any) -> np.ndarray:
    """Any tensor or array (tilelab, numpy, bf16/fp8 via ml_dtypes) as float64 numpy.

    Example:
        >>> to_f64([1, 2]).dtype
        dtype('float64')
    """
    if hasattr(x, "numpy") and not isinstance(x, np.ndarray):
        x = x.numpy()
    return np.asarray(x).astype(np.float64)


def activation_ref(x: np.ndarray, activation: Any) -> np.ndarray:
    """The fused activations of :func:`tilelab.kernels.matmul.matmul`, in float64 (the
    same function as the element-wise reference, :func:`tilelab.kernels.reference.unary`).

    Example:
        >>> activation_ref(np.array([-1.0, 2.0]), "relu")
        array([0., 2.])
    """
    return unary(x, activation)


def matmul_ref(a: Any, b: Any, *, bias: Any = None, activation: Any = None,
               residual: Any = None, alpha: float = 1.0) -> np.ndarray:
    """``act(alpha * a @ b + bias) + residual`` in float64.

    Example:
        >>> matmul_ref(np.eye(2), np.full((2, 2), 3.0), alpha=2.0)
        array([[6., 6.],
               [6., 6.]])
    """
    r = alpha * (to_f64(a) @ to_f64(b))
    if bias is not None:
        r = r + to_f64(bias)
    r = activation_ref(r, activation)
    if residual is not None:
        r = r + to_f64(residual)
    return r


def bmm_ref(a: Any, b: Any, **epilogue: Any) -> np.ndarray:
    """Batched :func:`matmul_ref` (``b`` may be 2-D, shared by all batches).

    Example:
        >>> bmm_ref(np.ones((2, 1, 3)), np.ones((3, 2))).shape
        (2, 1, 2)
    """
    return matmul_ref(a, b, **epilogue)


def attention_ref(q: Any, k: Any, v: Any, *, causal: bool = False,
                  scale: float | None = None) -> np.ndarray:
    """softmax(q k^T * scale) v in float64 with GQA and end-aligned causal masking.

    q (B, H, Sq, D); k, v (B, Hkv, Skv, D); query i sees keys j <= i + Skv - Sq.

    Example:
        >>> x = np.random.default_rng(0).standard_normal((1, 2, 5, 4))
        >>> attention_ref(x, x[:, :1], x[:, :1], causal=True).shape
        (1, 2, 5, 4)
    """
    q, k, v = to_f64(q), to_f64(k), to_f64(v)
    heads, heads_kv = q.shape[1], k.shape[1]
    g = heads // heads_kv
    k = np.repeat(k, g, axis=1)
    v = np.repeat(v, g, axis=1)
    s = (scale if scale is not None else 1.0 / math.sqrt(q.shape[-1]))
    scores = np.einsum("bhqd,bhkd->bhqk", q, k) * s
    if causal:
        sq, skv = q.shape[2], k.shape[2]
        allowed = np.arange(skv)[None, :] <= np.arange(sq)[:, None] + (skv - sq)
        scores = np.where(allowed, scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("bhqk,bhkd->bhqd", p, v)


def decode_attention_ref(q: Any, k: Any, v: Any, *, kv_len: int | None = None,
                         scale: float | None = None) -> np.ndarray:
    """One query per sequence against the first ``kv_len`` cache positions, float64.

    q (B, H, D) or (B, H, 1, D); k, v (B, Hkv, S, D). Returns q's shape.

    Example:
        >>> x = np.ones((1, 2, 8))
        >>> decode_attention_ref(x, np.ones((1, 1, 5, 8)), np.ones((1, 1, 5, 8))).shape
        (1, 2, 8)
    """
    q = to_f64(q)
    shape = q.shape
    q4 = q.reshape(shape[0], shape[1], 1, shape[-1])
    n = to_f64(k).shape[2] if kv_len is None else kv_len
    o = attention_ref(q4, to_f64(k)[:, :, :n], to_f64(v)[:, :, :n], scale=scale)
    return o.reshape(shape)


def rel_error(got: Any, want: Any) -> float:
    """Relative error in the Frobenius norm, ||got - want|| / ||want||.

    A norm (not the worst element) so that one unlucky rounding among millions does not
    decide; 0 when both are zero, inf when ``got`` has a NaN.

    Example:
        >>> round(rel_error(np.array([3.0, 4.04]), np.array([3.0, 4.0])), 6)
        0.008
    """
    g, w = to_f64(got), to_f64(want)
    if np.isnan(g).any():
        return float("inf")
    den = float(np.linalg.norm(w))
    num = float(np.linalg.norm(g - w))
    return num / den if den else num
