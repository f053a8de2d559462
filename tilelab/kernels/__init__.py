"""tilelab.kernels: a library of kernels written in the safe language.

Each host function allocates its outputs (or takes ``out=``), picks tiles, launches and
returns tensors; it works on GPU and CPU tensors and on torch/cupy/numpy arrays (borrowed
without copies). ``tilelab.kernels.examples`` holds the four kernels of the tour.

Example:
    >>> import tilelab as tl
    >>> from tilelab.kernels import softmax
    >>> y = softmax(tl.randn(4, 100, device="cpu"))
    >>> y.shape
    (4, 100)
"""
from tilelab.kernels.elementwise import (add, sub, mul, div, maximum, minimum, binary, exp,
                                         relu, gelu, silu, sigmoid, unary)
from tilelab.kernels.softmax import softmax, log_softmax
from tilelab.kernels.norms import layer_norm, rms_norm, add_layer_norm, add_rms_norm
from tilelab.kernels.rope import rope, apply_rope, rope_tables
from tilelab.kernels.embedding import embedding
from tilelab.kernels.reduce import row_sum, row_mean, row_max, row_min, row_argmax
from tilelab.kernels.matmul import (MatmulConfig, matmul, bmm, gemv, plan_matmul, plan_bmm,
                                    compile_matmul, search_space as matmul_search_space)
from tilelab.kernels.attention import (AttentionConfig, DecodeConfig, attention,
                                       decode_attention, plan_attention,
                                       plan_decode_attention, compile_attention,
                                       compile_decode_attention,
                                       attention_search_space)

__all__ = [
    "add", "sub", "mul", "div", "maximum", "minimum", "binary", "exp", "relu", "gelu", "silu",
    "sigmoid", "unary", "softmax", "log_softmax", "layer_norm", "rms_norm", "add_layer_norm",
    "add_rms_norm", "rope", "apply_rope", "rope_tables", "embedding", "row_sum", "row_mean",
    "row_max", "row_min", "row_argmax", "MatmulConfig", "matmul", "bmm", "gemv",
    "plan_matmul", "plan_bmm", "compile_matmul", "matmul_search_space", "AttentionConfig",
    "DecodeConfig", "attention", "decode_attention", "plan_attention",
    "plan_decode_attention", "compile_attention", "compile_decode_attention",
    "attention_search_space",
]
