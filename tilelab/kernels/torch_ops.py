"""Library kernels as torch custom ops, for models compiled with ``torch.compile``.

Importing this module (it imports torch; ``import tilelab`` never does) registers the
ops below in the ``tilelab`` namespace with :func:`torch.library.custom_op`, each with
a fake-tensor shape function (:func:`torch.library.register_fake`), so that
``torch.compile`` traces them as single graph nodes instead of breaking the graph at
tilelab's Python. Each op allocates its output with torch and fills it with the
library kernel: on the GPU on torch's current stream (see
:mod:`tilelab.runtime.foreign`), on the CPU through the interpreter.

========================  =============================================================
``torch.ops.tilelab.``    computes
========================  =============================================================
``add/sub/mul(x, y)``     ``x + y``, ``x - y``, ``x * y`` (:func:`tilelab.kernels.add`;
                          ``y`` may broadcast as a row, a column or one element)
``matmul(a, b)``          ``a @ b`` for (M, K) @ (K, N) (:func:`tilelab.kernels.matmul`)
``rms_norm(x, w, eps)``   RMSNorm over the last dimension (:func:`~tilelab.kernels.rms_norm`)
``softmax(x)``            softmax over the last dimension (:func:`~tilelab.kernels.softmax`)
========================  =============================================================

The ops are forward only (no autograd formula is registered: calling them on tensors
that require grad raises torch's error).

Example:
    >>> import torch
    >>> import tilelab.kernels.torch_ops                       # registers the ops
    >>> f = torch.compile(lambda x, w: torch.ops.tilelab.rms_norm(x, w, 1e-6) * 2,
    ...                   fullgraph=True, backend="aot_eager")
    >>> f(torch.ones(2, 64), torch.ones(64)).shape
    torch.Size([2, 64])
"""
from __future__ import annotations

import torch
from torch.library import custom_op, register_fake

import tilelab.kernels as K

__all__ = ["add", "sub", "mul", "matmul", "rms_norm", "softmax"]


def _broadcast_out(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.empty(torch.broadcast_shapes(x.shape, y.shape), dtype=x.dtype,
                       device=x.device)


@custom_op("tilelab::add", mutates_args=())
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``x + y`` by :func:`tilelab.kernels.add`, as a torch op.

    Example:
        >>> add(torch.ones(4), torch.ones(4)).tolist()
        [2.0, 2.0, 2.0, 2.0]
    """
    out = _broadcast_out(x, y)
    K.add(x, y, out=out)
    return out


@custom_op("tilelab::sub", mutates_args=())
def sub(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``x - y`` by :func:`tilelab.kernels.sub`, as a torch op.

    Example:
        >>> sub(torch.ones(2), torch.ones(2)).tolist()
        [0.0, 0.0]
    """
    out = _broadcast_out(x, y)
    K.sub(x, y, out=out)
    return out


@custom_op("tilelab::mul", mutates_args=())
def mul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``x * y`` by :func:`tilelab.kernels.mul`, as a torch op.

    Example:
        >>> mul(torch.full((2,), 3.0), torch.full((2,), 2.0)).tolist()
        [6.0, 6.0]
    """
    out = _broadcast_out(x, y)
    K.mul(x, y, out=out)
    return out


for _op in (add, sub, mul):
    _op.register_fake(_broadcast_out)


@custom_op("tilelab::matmul", mutates_args=())
def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for (M, K) and (K, N) by :func:`tilelab.kernels.matmul`, as a torch op.

    Example:
        >>> matmul(torch.ones(3, 8), torch.ones(8, 5)).shape
        torch.Size([3, 5])
    """
    out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
    K.matmul(a, b, out=out)
    return out


@register_fake("tilelab::matmul")
def _matmul_fake(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    torch._check(a.dim() == 2 and b.dim() == 2,
                 lambda: f"tilelab::matmul takes (M, K) and (K, N), got {tuple(a.shape)} "
                         f"and {tuple(b.shape)}")
    torch._check(a.shape[1] == b.shape[0],
                 lambda: f"tilelab::matmul: a is {tuple(a.shape)} but b is {tuple(b.shape)}")
    return a.new_empty(a.shape[0], b.shape[1])


@custom_op("tilelab::rms_norm", mutates_args=())
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm of ``x`` over its last dimension by :func:`tilelab.kernels.rms_norm`.

    Example:
        >>> rms_norm(torch.full((2, 8), 3.0), torch.ones(8)).mean().item()
        1.0
    """
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    K.rms_norm(x, weight, eps=eps, out=out)
    return out


@register_fake("tilelab::rms_norm")
def _rms_norm_fake(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
                   ) -> torch.Tensor:
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@custom_op("tilelab::softmax", mutates_args=())
def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax of ``x`` over its last dimension by :func:`tilelab.kernels.softmax`.

    Example:
        >>> softmax(torch.zeros(1, 4)).tolist()
        [[0.25, 0.25, 0.25, 0.25]]
    """
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    K.softmax(x, out=out)
    return out


@register_fake("tilelab::softmax")
def _softmax_fake(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x, memory_format=torch.contiguous_format)
