"""float64 numpy references for the memory-bound kernels of :mod:`tilelab.kernels`.

Each function has the name and arguments of the kernel's host function, takes anything
``numpy.asarray`` accepts (numpy arrays, CPU ``tl.Tensor``, bf16 via ml_dtypes) and
returns float64 results (ids and indices stay integers). They are the ground truth the
tests compare against: no float32 shortcuts, no fused tricks. (The GEMM/attention
references live in :mod:`tilelab.kernels.reference.matmul`.)

Example:
    >>> import numpy as np
    >>> from tilelab.kernels import reference as ref
    >>> ref.softmax(np.log([[1.0, 3.0]]))
    array([[0.25, 0.75]])
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from tilelab.kernels.activation import Activation, activation_code

__all__ = [
    "binary", "add", "sub", "mul", "div", "maximum", "minimum",
    "unary", "exp", "relu", "gelu", "silu", "sigmoid",
    "softmax", "log_softmax",
    "layer_norm", "rms_norm", "add_layer_norm", "add_rms_norm",
    "rope", "apply_rope", "rope_tables", "embedding",
    "row_sum", "row_mean", "row_max", "row_min", "row_argmax",
]


def _f64(a: Any) -> np.ndarray:
    return np.asarray(a).astype(np.float64)


# ---- element-wise ----------------------------------------------------------------


_ERFC = np.vectorize(math.erfc, otypes=[np.float64])


def unary(x: Any, activation: Any) -> np.ndarray:
    """``activation(x)`` in float64 for any :class:`~tilelab.kernels.Activation` or name
    (None, none, relu, gelu/gelu_tanh, gelu_erf, silu, sigmoid, exp).

    Example:
        >>> from tilelab.kernels import reference as ref
        >>> ref.unary([0.0, 2.0], "relu")
        array([0., 2.])
    """
    act = activation_code(activation, "reference")
    v = _f64(x)
    if act is Activation.NONE:
        return v
    if act is Activation.RELU:
        return np.maximum(v, 0.0)
    with np.errstate(over="ignore"):
        if act is Activation.GELU_TANH:
            # 0.5 * v * (1 + tanh(u)) written as v * sigmoid(2u): 1 + tanh(u) would
            # cancel to 0 for u < -19 even in float64
            u = math.sqrt(2.0 / math.pi) * (v + 0.044715 * v**3)
            return v / (1.0 + np.exp(-2.0 * u))
        if act is Activation.GELU_ERF:
            return 0.5 * v * _ERFC(-v / math.sqrt(2.0))   # erfc keeps the tail exact
        if act is Activation.SILU:
            return v / (1.0 + np.exp(-v))
        if act is Activation.SIGMOID:
            return 1.0 / (1.0 + np.exp(-v))
        return np.exp(v)


def binary(op: str, x: Any, y: Any, activation: Any = None) -> np.ndarray:
    """``activation(x <op> y)`` with numpy broadcasting, in float64.

    Example:
        >>> from tilelab.kernels import reference as ref
        >>> ref.binary("sub", [[1.0, 2.0]], [3.0, 1.0], activation="relu")
        array([[0., 1.]])
    """
    a, b = _f64(x), _f64(y)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
             "maximum": np.maximum, "minimum": np.minimum}[op](a, b)
    return unary(r, activation)


def add(x: Any, y: Any, activation: Any = None) -> np.ndarray:
    """``activation(x + y)``.

    Example:
        >>> from tilelab.kernels import reference as ref
        >>> ref.add([1.0], [2.0])
        array([3.])
    """
    return binary("add", x, y, activation)


def sub(x: Any, y: Any, activation: Any = None) -> np.ndarray:
    """``activation(x - y)``.

    Example:
        >>> from tilelab.kernels import reference as ref
        >>> ref.sub([1.0], [2.0])
        array([-1.])
    """
    return binary("sub", x, y, activation)


def mul(x: Any, y: Any, activation: Any = None) -> np.ndarray:
    """``activation(x * y)``.

    Example:
        >>> from tilelab.kernels import reference as ref
        >>> ref.mul([1.5], [2.0])
        array([3.])
    """
    return binary("mul", x, y, activation)


def div(x: Any, y: Any, activation: Any = None) -> np.ndarray:
    """``activation(x / y)``.

    Example:
        >>> from tilelab.kernels import reference as ref
        >>> ref.div([1.0], [4.0])
        array([0.25])
    """
    return binary("div", x, y, activation)


def maximum(x: Any, y: Any, activation: Any = None) -> np.ndarray:
    """``activation(max(x, y))`` (NaN propagates).

    Example:
        >>> from tilelab.kernels import reference as ref
        >>> ref.maximum([1.0, 5.0], 2.0)
        array([2., 5.])
    """
    return binary("maximum", x, y, activation)


def minimum(x: Any, y: Any, activation: Any = None) -> np.ndarray:
    """``activation(min(x, y))`` (NaN propagates).

    Example:
        >>> from tilelab.kernels import reference as ref
        >>> ref.minimum([1.0, 5.0], 2.0)
        array([1., 2.])
    """
    return binary("minimum", x, y, activation)


def exp(x: Any) -> np.ndarray:
    """``exp(x)``.

    Example:
        >>> from tilelab.kernels import reference as ref
        >>> ref.exp([0.0])
        array([1.])
    """
    return unary(x, "exp")


def relu(x: Any) -> np.ndarray:
    """``max(x, 0)``.

    Example:
        >>> from tilelab.kernels import reference as ref
        >>> ref.relu([-1.0, 1.0])
        array([0., 1.])
    """
    return unary(x, "relu")


def gelu(x: Any, approximate: str = "tanh") -> np.ndarray:
    """GELU, tanh form or exact (``approximate="none"``).

    Example:
        >>> from tilelab.kernels import reference as ref
        >>> round(float(ref.gelu([1.0], approximate="none")[0]), 6)
        0.841345
    """
    return unary(x, "gelu_tanh" if approximate == "tanh" else "gelu_erf")


def silu(x: Any) -> np.ndarray:
    """``x * sigmoid(x)``.

    Example:
        >>> from tilelab.kernels import reference as ref
        >>> ref.silu([0.0])
        array([0.])
    """
    return unary(x, "silu")


def sigmoid(x: Any) -> np.ndarray:
    """``1 / (1 + exp(-x))``.

    Example:
        >>> from tilelab.kernels import reference as ref
        >>> ref.sigmoid([0.0])
        array([0.5])
    """
    return unary(x, "sigmoid")


# ---- softmax ------------------------------------------------------------------------


def softmax(x: Any) -> np.ndarray:
    """Softmax over the last axis.

    Example:
        >>> from tilelab.kernels import reference as ref
        >>> ref.softmax([[0.0, 0.0]])
        array([[0.5, 0.5]])
    """
    v = _f64(x)
    e = np.exp(v - v.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def log_softmax(x: Any) -> np.ndarray:
    """``log(softmax(x))`` over the last axis.

    Example:
        >>> from tilelab.kernels import reference as ref
        >>> ref.log_softmax([[0.0, 0.0]])
        array([[-0.69314718, -0.69314718]])
    """
    v = _f64(x)
    d = v - v.max(-1, keepdims=True)
    return d - np.log(np.exp(d).sum(-1, keepdims=True))


# ---- norms -------------------------------------------------------------------------


def layer_norm(x: Any, weight: Any, bias: Any = None, eps: float = 1e-5) -> np.ndarray:
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the last axis (biased var).

    Example:
        >>> from tilelab.kernels import reference as ref
        >>> ref.layer_norm([[1.0, 3.0]], [1.0, 1.0], eps=0.0)
        array([[-1.,  1.]])
    """
    v = _f64(x)
    mean = v.mean(-1, keepdims=True)
    var = ((v - mean) ** 2).mean(-1, keepdims=True)
    y = (v - mean) / np.sqrt(var + eps) * _f64(weight)
    return y if bias is None else y + _f64(bias)


def rms_norm(x: Any, weight: Any, eps: float = 1e-6) -> np.ndarray:
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last axis.

    Example:
        >>> from tilelab.kernels import reference as ref
        >>> ref.rms_norm([[3.0, 4.0]], [1.0, 1.0], eps=0.0).round(4)
        array([[0.8485, 1.1314]])
    """
    v = _f64(x)
    return v / np.sqrt((v * v).mean(-1, keepdims=True) + eps) * _f64(weight)


def add_layer_norm(x: Any, residual: Any, weight: Any, bias: Any = None,
                   eps: float = 1e-5) -> tuple[np.ndarray, np.ndarray]:
    """``(layer_norm(h), h)`` with ``h = x + residual`` (exact, not rounded).

    Example:
        >>> from tilelab.kernels import reference as ref
        >>> ref.add_layer_norm([[1.0, 2.0]], [[1.0, 2.0]], [1.0, 1.0], eps=0.0)[1]
        array([[2., 4.]])
    """
    h = _f64(x) + _f64(residual)
    return layer_norm(h, weight, bias, eps), h


def add_rms_norm(x: Any, residual: Any, weight: Any,
                 eps: float = 1e-6) -> tuple[np.ndarray, np.ndarray]:
    """``(rms_norm(h), h)`` with ``h = x + residual`` (exact, not rounded).

    Example:
        >>> from tilelab.kernels import reference as ref
        >>> ref.add_rms_norm([[1.0, 1.0]], [[2.0, 3.0]], [1.0, 1.0], eps=0.0)[1]
        array([[3., 4.]])
    """
    h = _f64(x) + _f64(residual)
    return rms_norm(h, weight, eps), h


# ---- rope ---------------------------------------------------------------------------


def rope_tables(max_pos: int, head_dim: int, base: float = 10000.0
                ) -> tuple[np.ndarray, np.ndarray]:
    """float64 ``(cos, sin)`` of shape ``(max_pos, head_dim // 2)``.

    Example:
        >>> from tilelab.kernels import reference as ref
        >>> ref.rope_tables(4, 2)[0][:, 0].round(4)
        array([ 1.    ,  0.5403, -0.4161, -0.99  ])
    """
    inv = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    ang = np.outer(np.arange(max_pos, dtype=np.float64), inv)
    return np.cos(ang), np.sin(ang)


def apply_rope(x: Any, cos: Any, sin: Any, positions: Any = None) -> np.ndarray:
    """NeoX-style RoPE of (batch, seq, heads, dim) ``x`` at the seq index, or of
    (tokens, heads, dim) ``x`` at ``positions`` (default: the token index).

    Example:
        >>> import numpy as np
        >>> from tilelab.kernels import reference as ref
        >>> c, s = ref.rope_tables(4, 2)
        >>> ref.apply_rope(np.array([[[1.0, 0.0]]] * 2), c, s)[1, 0].round(4)
        array([0.5403, 0.8415])
    """
    v = _f64(x)
    half = v.shape[-1] // 2
    c, s = _f64(cos)[:, :half], _f64(sin)[:, :half]
    if v.ndim == 4:
        if positions is not None:
            raise ValueError("positions are for (tokens, heads, head_dim) tensors")
        pos = np.arange(v.shape[1])
        cb, sb = c[pos][None, :, None, :], s[pos][None, :, None, :]
    else:
        pos = np.arange(v.shape[0]) if positions is None else np.asarray(positions)
        cb, sb = c[pos][:, None, :], s[pos][:, None, :]
    x1, x2 = v[..., :half], v[..., half:]
    return np.concatenate([x1 * cb - x2 * sb, x2 * cb + x1 * sb], axis=-1)


def rope(q: Any, k: Any, cos: Any, sin: Any, positions: Any = None
         ) -> tuple[np.ndarray, np.ndarray]:
    """``(apply_rope(q), apply_rope(k))`` with the same tables and positions.

    Example:
        >>> import numpy as np
        >>> from tilelab.kernels import reference as ref
        >>> c, s = ref.rope_tables(4, 2)
        >>> q, k = ref.rope(np.ones((1, 1, 2)), np.ones((1, 1, 2)), c, s)
        >>> q.tolist()
        [[[1.0, 1.0]]]
    """
    return apply_rope(q, cos, sin, positions), apply_rope(k, cos, sin, positions)


# ---- embedding and reductions -------------------------------------------------------


def embedding(ids: Any, table: Any) -> np.ndarray:
    """``table[ids]`` in float64 (ids must be in range).

    Example:
        >>> import numpy as np
        >>> from tilelab.kernels import reference as ref
        >>> ref.embedding([1], np.eye(2))
        array([[0., 1.]])
    """
    return _f64(table)[np.asarray(ids)]


def row_sum(x: Any) -> np.ndarray:
    """Sum over the last axis.

    Example:
        >>> from tilelab.kernels import reference as ref
        >>> ref.row_sum([[1.0, 2.0]])
        array([3.])
    """
    return _f64(x).sum(-1)


def row_mean(x: Any) -> np.ndarray:
    """Mean over the last axis.

    Example:
        >>> from tilelab.kernels import reference as ref
        >>> ref.row_mean([[1.0, 2.0]])
        array([1.5])
    """
    return _f64(x).mean(-1)


def row_max(x: Any) -> np.ndarray:
    """Max over the last axis (NaN propagates).

    Example:
        >>> from tilelab.kernels import reference as ref
        >>> ref.row_max([[1.0, 2.0]])
        array([2.])
    """
    return _f64(x).max(-1)


def row_min(x: Any) -> np.ndarray:
    """Min over the last axis (NaN propagates).

    Example:
        >>> from tilelab.kernels import reference as ref
        >>> ref.row_min([[1.0, 2.0]])
        array([1.])
    """
    return _f64(x).min(-1)


def row_argmax(x: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(max, first index of the max)`` over the last axis; NaN counts as the max.

    Example:
        >>> from tilelab.kernels import reference as ref
        >>> ref.row_argmax([[1.0, 3.0, 3.0]])
        (array([3.]), array([1]))
    """
    v = _f64(x)
    i = np.argmax(v, axis=-1)      # numpy also returns the first NaN
    return np.take_along_axis(v, i[..., None], -1)[..., 0], i.astype(np.int64)
