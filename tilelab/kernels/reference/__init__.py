"""float64 numpy references of the library's kernels: the ground truth tests compare with.

:mod:`~tilelab.kernels.reference.memory_bound` has one function per memory-bound host
function (same name, same arguments; this package hands them on, so
``from tilelab.kernels import reference as ref; ref.softmax(x)`` reads like the kernel
call); :mod:`~tilelab.kernels.reference.matmul` has the GEMM and attention references.

Example:
    >>> import numpy as np
    >>> from tilelab.kernels import reference as ref
    >>> ref.softmax(np.log([[1.0, 3.0]]))
    array([[0.25, 0.75]])
"""
from tilelab.kernels.reference.memory_bound import (
    add, add_layer_norm, add_rms_norm, apply_rope, binary, div, embedding, exp, gelu,
    layer_norm, log_softmax, maximum, minimum, mul, relu, rms_norm, rope, rope_tables,
    row_argmax, row_max, row_mean, row_min, row_sum, sigmoid, silu, softmax, sub, unary)

__all__ = [
    "binary", "add", "sub", "mul", "div", "maximum", "minimum",
    "unary", "exp", "relu", "gelu", "silu", "sigmoid",
    "softmax", "log_softmax",
    "layer_norm", "rms_norm", "add_layer_norm", "add_rms_norm",
    "rope", "apply_rope", "rope_tables", "embedding",
    "row_sum", "row_mean", "row_max", "row_min", "row_argmax",
]
