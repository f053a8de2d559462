"""tilelab.kernels: a library of kernels written in the safe language.

Each host function allocates its outputs (or takes ``out=``), picks tiles, launches and
returns tensors; it works on GPU and CPU tensors and on torch/cupy/numpy arrays (borrowed
without copies). ``tilelab.kernels.examples`` holds the four kernels of the tour.

**Where things are.** The memory-bound ops are one module each (``elementwise``,
``softmax``, ``norms``, ``rope``, ``embedding``, ``reduce``); the compute-bound ones are
families with their configurations and kernels beside them (``matmul/``, ``attention/``);
``decode/`` holds the decode engine's kernels, ``reference/`` the float64 numpy
references the tests compare with, ``activation`` the fused activations. Choosing configs
without running (``plan_*``, ``compile_*``, the ``*Config`` classes and search spaces)
is :mod:`tilelab.kernels.tuning`. ``_host`` is private: what the host functions share
(argument checks, tiles, plans, the caches of repeated calls) and the device helpers
their kernels inline.

**Synchronous or not.** By default (``sync=True``) a call returns when its kernels have
finished, like ``kernel(...)``. With ``sync=False`` it launches without waiting, on
``stream=`` (default: the caller's stream, i.e. the current stream of torch or cupy when
the call is given their GPU tensors, else tilelab's; see :mod:`tilelab.runtime.foreign`),
and returns ``(out, future)``: ``future`` is the ``tl.Future`` of the call's last launch,
and since one stream runs a call's launches in order, observing it (``future.wait()``)
observes them all. Until then the outputs are borrowed: reading ``out`` raises
``tl.BorrowError``. A call with nothing to launch (empty tensors) returns a future that
is already done; inside ``with tl.graph():`` the launches are recorded and the future is
None. Functions with two outputs return ``((y, h), future)``.

**Activations.** Every kernel that fuses an activation (the element-wise ops, the GEMM
epilogue) takes it as ``activation=``: None, an :class:`Activation` or its name
(``"relu"``, ``"gelu"`` = ``"gelu_tanh"``, ``"gelu_erf"``, ``"silu"``, ``"sigmoid"``,
``"exp"``); see :mod:`tilelab.kernels.activation`.

**Repeated calls are cheap.** A call repeated with the same tensor objects (torch and
numpy arrays included, as long as they still describe the same memory) and ``out=``
given reuses what the first call prepared — validation, config, views, partitions,
scratch — and hands the runtime the very same launch arguments, which it launches on
its prepared path. Nothing is reused that could make a call read stale data or write
elsewhere than ``out`` (see :mod:`tilelab.kernels._host`); :func:`clear_caches` drops
everything cached.

Example:
    >>> import tilelab as tl
    >>> from tilelab.kernels import softmax
    >>> y = softmax(tl.randn(4, 100, device="cpu"))
    >>> y.shape
    (4, 100)
    >>> x = tl.randn(4, 100, device="cpu"); y = tl.empty((4, 100), device="cpu")
    >>> out, fut = softmax(x, out=y, sync=False)
    >>> fut.wait(); round(float(out.numpy().sum()), 3)
    4.0
"""
from tilelab.kernels._host import clear_caches
from tilelab.kernels.activation import Activation
from tilelab.kernels.attention import attention, decode_attention
from tilelab.kernels.elementwise import (add, sub, mul, div, maximum, minimum, binary, exp,
                                         relu, gelu, silu, sigmoid, unary)
from tilelab.kernels.embedding import embedding
from tilelab.kernels.matmul import matmul, bmm, gemv
from tilelab.kernels.norms import layer_norm, rms_norm, add_layer_norm, add_rms_norm
from tilelab.kernels.reduce import row_sum, row_mean, row_max, row_min, row_argmax
from tilelab.kernels.rope import rope, apply_rope, rope_tables
from tilelab.kernels.softmax import softmax, log_softmax
from tilelab.kernels import tuning  # the planning and tuning names: kernels.tuning

__all__ = [
    # element-wise
    "add", "sub", "mul", "div", "maximum", "minimum", "binary", "exp", "relu", "gelu", "silu",
    "sigmoid", "unary",
    # rows
    "softmax", "log_softmax", "layer_norm", "rms_norm", "add_layer_norm", "add_rms_norm",
    "rope", "apply_rope", "rope_tables", "embedding", "row_sum", "row_mean", "row_max",
    "row_min", "row_argmax",
    # compute-bound
    "matmul", "bmm", "gemv", "attention", "decode_attention",
    # shared
    "Activation", "clear_caches",
]
