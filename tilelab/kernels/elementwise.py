"""Element-wise kernels: binary ops with broadcasting, activations, fused
``activation(x op y)``.

Every op loads tiles in the storage dtype, computes in float32 and rounds once on the
store, which is what torch does for bf16/f16 element-wise math. The host functions view
the output as a 2-D ``(rows, cols)`` grid (``cols`` = the last dimension; same-shape
contiguous operands are flattened to one long row so no lane is wasted on padding) and
give each block one ``(block_m, block_n)`` tile of it; a row vector, a column vector, a
single element or a Python scalar broadcast over it. ``activation=`` takes an
:class:`~tilelab.kernels.Activation` or its name (see :mod:`tilelab.kernels.activation`).

Example:
    >>> import numpy as np, tilelab as tl
    >>> x = tl.tensor(np.array([-1.0, 3.0], np.float32), device="cpu")
    >>> add(x, x, activation="relu").numpy()
    array([0., 6.], dtype=float32)
"""
from __future__ import annotations

import math
from typing import Any

import cuda.tile as ct
import numpy as np

import tilelab as tl
from tilelab.kernels._host.device import activate
from tilelab.kernels._host import (TILE_ELEMS, Call, CallCache, TensorResult, check_block,
                                   check_float, check_same_device, float_scalar,
                                   launch_args, output, partition_2d, rows_of, tensor_arg,
                                   tile_2d)
from tilelab.kernels.activation import ACTIVATIONS, Activation, ActivationLike, activation_code

__all__ = [
    "add", "sub", "mul", "div", "maximum", "minimum", "binary",
    "exp", "relu", "gelu", "silu", "sigmoid", "unary",
    "ACTIVATIONS", "BINARY_OPS", "TILE_ELEMS",
]

#: Default tile of the element-wise kernels: 1024 elements. Measured on the H200 at
#: 2^28 elements (benchmarks/results/claims/tile-sweeps-h200/sweep_h200_*.json): bf16 add
#: at torch's speed with 1024 (371 vs 369 us), 1.54x slower with 4096; fp32 flat 512-4096.
ELEMENTWISE_TILE = 1024

# ---- op codes (compile-time constants of the kernels) ------------------------------

ADD, SUB, MUL, DIV, MAX, MIN = 0, 1, 2, 3, 4, 5
#: binary op name -> kernel code
BINARY_OPS = {"add": ADD, "sub": SUB, "mul": MUL, "div": DIV, "maximum": MAX, "minimum": MIN}

# operand layouts relative to the (rows, cols) output grid
FULL, ROW, COL, ONE = 0, 1, 2, 3


# ======================================================================================
# kernel-side helpers (read-only: they receive tiles and In arrays only)
# ======================================================================================


def _binop(a, b, OP):
    """a <op> b on float32 tiles; max/min propagate NaN as torch does."""
    if OP == ADD:
        return a + b
    if OP == SUB:
        return a - b
    if OP == MUL:
        return a * b
    if OP == DIV:
        return a / b
    if OP == MAX:
        return ct.maximum(a, b, propagate_nan=True)
    return ct.minimum(a, b, propagate_nan=True)


def _operand(x, MODE, m, n, bm, bn):
    """The (bm, bn) float32 tile of operand ``x`` at output tile (m, n), broadcast."""
    if MODE == FULL:
        t = ct.load(x, index=(m, n), shape=(bm, bn), padding_mode=ct.PaddingMode.ZERO)
    elif MODE == ROW:
        t = ct.load(x, index=(0, n), shape=(1, bn), padding_mode=ct.PaddingMode.ZERO)
    elif MODE == COL:
        t = ct.load(x, index=(m, 0), shape=(bm, 1), padding_mode=ct.PaddingMode.ZERO)
    else:
        t = ct.load(x, index=(0, 0), shape=(1, 1), padding_mode=ct.PaddingMode.ZERO)
    return ct.broadcast_to(t.astype(ct.float32), (bm, bn))


# ======================================================================================
# kernels
# ======================================================================================


@tl.kernel
def binary_kernel(z: tl.Out, x: tl.In, y: tl.In, OP: ct.Constant[int],
                  X_MODE: ct.Constant[int], Y_MODE: ct.Constant[int],
                  ACT: ct.Constant[int]):
    """z = act(x <op> y) on one (bm, bn) tile of z; x and y may broadcast (row/col/one).

    Example:
        >>> binary_kernel(z.partition((4, 1024)), x, b, OP=ADD, X_MODE=FULL,
        ...               Y_MODE=ROW, ACT=Activation.RELU)                # doctest: +SKIP
    """
    bm, bn = z.tile_shape
    m, n = z.tile_index
    a = _operand(x, X_MODE, m, n, bm, bn)
    b = _operand(y, Y_MODE, m, n, bm, bn)
    z.store(activate(_binop(a, b, OP), ACT).astype(z.dtype))


@tl.kernel
def binary_scalar_kernel(z: tl.Out, x: tl.In, s: float, OP: ct.Constant[int],
                         X_MODE: ct.Constant[int], REVERSED: ct.Constant[int],
                         ACT: ct.Constant[int]):
    """z = act(x <op> s), or act(s <op> x) when REVERSED, for a float32 scalar s.

    Example:
        >>> binary_scalar_kernel(z.partition((1, 4096)), x, 2.0, OP=MUL, X_MODE=FULL,
        ...                      REVERSED=0, ACT=Activation.NONE)         # doctest: +SKIP
    """
    bm, bn = z.tile_shape
    m, n = z.tile_index
    a = _operand(x, X_MODE, m, n, bm, bn)
    b = ct.full((bm, bn), s, dtype=ct.float32)
    if REVERSED:
        r = _binop(b, a, OP)
    else:
        r = _binop(a, b, OP)
    z.store(activate(r, ACT).astype(z.dtype))


@tl.kernel
def unary_kernel(z: tl.Out, x: tl.In, ACT: ct.Constant[int]):
    """z = act(x), computed in float32.

    Example:
        >>> unary_kernel(z.partition((1, 4096)), x, ACT=Activation.SILU)  # doctest: +SKIP
    """
    z.store(activate(tl.load_like(x, z).astype(ct.float32), ACT).astype(z.dtype))


# ======================================================================================
# host side: broadcasting and launch arguments
# ======================================================================================


def _layout(t: tl.Tensor, out_shape: tuple[int, ...]) -> tuple[int, tl.Tensor] | None:
    """(mode, 2-D view) of operand ``t`` against the (rows, cols) view of ``out_shape``.

    None when ``t`` broadcasts in a way the kernels do not cover.
    """
    cols = out_shape[-1] if out_shape else 1
    lead = out_shape[:-1]
    shape = (1,) * (len(out_shape) - t.ndim) + t.shape
    if shape == tuple(out_shape):
        return FULL, rows_of(t)
    if math.prod(t.shape) == 1:
        return ONE, (t.reshape(1, 1) if t.is_contiguous else t.contiguous().reshape(1, 1))
    if shape[-1] == cols and all(s == 1 for s in shape[:-1]):
        v = t.reshape(-1) if t.is_contiguous else t.contiguous().reshape(-1)
        return ROW, v.reshape(1, cols)
    if shape[-1] == 1 and shape[:-1] == tuple(lead):
        return COL, rows_of(t.reshape(*lead, 1) if t.is_contiguous else
                            t.contiguous().reshape(*lead, 1))
    return None


def _broadcast_shape(fn: str, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        raise ValueError(f"{fn}(): shapes {a} and {b} do not broadcast") from None


def _flat_or_rows(z: tl.Tensor, t: tl.Tensor) -> tuple[int, tl.Tensor, tl.Tensor]:
    """(FULL, t view, z view): one long row when both are contiguous, else (rows, cols)."""
    if t.is_contiguous and z.is_contiguous:
        return FULL, t.reshape(1, -1), z.reshape(1, -1)
    return FULL, rows_of(t), rows_of(z)


def _scalar_call(fn: str, code: int, act: int, x: Any, y: Any, block_m: int | None,
                 block_n: int | None, out: Any) -> Call:
    """``act(x <op> y)`` where one of x, y is a Python scalar."""
    x_scalar = float_scalar(x)
    s, t = (x, y) if x_scalar else (y, x)
    name = "y" if x_scalar else "x"
    t = tensor_arg(t, name, fn)
    check_float(t, name, fn)
    z = output(out, t.shape, t.dtype, t.device, "out", fn)
    if t.size == 0:
        return Call(binary_scalar_kernel, None, z)
    mode, tv, zv = _flat_or_rows(z, t)
    bm, bn = tile_2d(zv.shape[0], zv.shape[1], block_m, block_n, ELEMENTWISE_TILE)
    args = launch_args(binary_scalar_kernel, z=partition_2d(zv, bm, bn), x=tv, s=float(s),
                       OP=code, X_MODE=mode, REVERSED=int(x_scalar), ACT=act)
    return Call(binary_scalar_kernel, args, z)


def _tensor_views(fn: str, xt: tl.Tensor, yt: tl.Tensor, z: tl.Tensor,
                  shape: tuple[int, ...]) -> tuple[tuple[int, int], tl.Tensor, tl.Tensor,
                                                   tl.Tensor]:
    """((x mode, y mode), z view, x view, y view) of two tensor operands."""
    if xt.shape == shape and yt.shape == shape and \
            xt.is_contiguous and yt.is_contiguous and z.is_contiguous:
        zv, xv, yv = (v.reshape(1, -1) for v in (z, xt, yt))
        return (FULL, FULL), zv, xv, yv
    lx, ly = _layout(xt, shape), _layout(yt, shape)
    if lx is None or ly is None:
        raise ValueError(f"{fn}(): cannot broadcast {xt.shape} with {yt.shape}: "
                         "supported are equal shapes, a row vector (..., N), a column "
                         "vector (..., 1) matching the leading dims, a single element "
                         "or a Python scalar")
    (mx, xv), (my, yv) = lx, ly
    return (mx, my), rows_of(z), xv, yv


def _tensor_call(fn: str, code: int, act: int, x: Any, y: Any, block_m: int | None,
                 block_n: int | None, out: Any) -> Call:
    """``act(x <op> y)`` of two tensors (one may broadcast)."""
    xt, yt = tensor_arg(x, "x", fn), tensor_arg(y, "y", fn)
    check_float(xt, "x", fn)
    check_float(yt, "y", fn)
    if xt.dtype != yt.dtype:
        raise TypeError(f"{fn}(): x is {xt.dtype.name} and y is {yt.dtype.name}; convert "
                        "one with .astype(...) (no implicit promotion)")
    device = check_same_device(fn, x=xt, y=yt)
    shape = _broadcast_shape(fn, xt.shape, yt.shape)
    z = output(out, shape, xt.dtype, device, "out", fn)
    if z.size == 0:
        return Call(binary_kernel, None, z)
    (mx, my), zv, xv, yv = _tensor_views(fn, xt, yt, z, shape)
    bm, bn = tile_2d(zv.shape[0], zv.shape[1], block_m, block_n, ELEMENTWISE_TILE)
    args = launch_args(binary_kernel, z=partition_2d(zv, bm, bn), x=xv, y=yv, OP=code,
                       X_MODE=mx, Y_MODE=my, ACT=act)
    return Call(binary_kernel, args, z)


def _binary_call(op: str, x: Any, y: Any, *, activation: ActivationLike = None,
                 block_m: int | None = None, block_n: int | None = None,
                 out: Any = None) -> Call:
    """The launch of ``binary(op, x, y, ...)`` (see :func:`binary`)."""
    fn = op
    if op not in BINARY_OPS:
        raise ValueError(f"binary(): unknown op {op!r}; choose one of "
                         f"{', '.join(BINARY_OPS)}")
    code, act = BINARY_OPS[op], int(activation_code(activation, f"{fn}()"))
    block_m = check_block(block_m, "block_m", fn)
    block_n = check_block(block_n, "block_n", fn)
    x_scalar, y_scalar = float_scalar(x), float_scalar(y)
    if x_scalar and y_scalar:
        raise TypeError(f"{fn}(): at least one operand must be a tensor, got two scalars")
    build = _scalar_call if x_scalar or y_scalar else _tensor_call
    return build(fn, code, act, x, y, block_m, block_n, out)


def _unary_call(x: Any, activation: ActivationLike, fn: str, *, block_m: int | None = None,
                block_n: int | None = None, out: Any = None) -> Call:
    """The launch of ``unary(x, activation)`` (see :func:`unary`)."""
    act = int(activation_code(activation, f"{fn}()"))
    block_m = check_block(block_m, "block_m", fn)
    block_n = check_block(block_n, "block_n", fn)
    xt = tensor_arg(x, "x", fn)
    check_float(xt, "x", fn)
    z = output(out, xt.shape, xt.dtype, xt.device, "out", fn)
    if xt.size == 0:
        return Call(unary_kernel, None, z)
    _, xv, zv = _flat_or_rows(z, xt)
    bm, bn = tile_2d(zv.shape[0], zv.shape[1], block_m, block_n, ELEMENTWISE_TILE)
    return Call(unary_kernel, launch_args(unary_kernel, z=partition_2d(zv, bm, bn), x=xv,
                                          ACT=act), z)


# ======================================================================================
# public host functions
# ======================================================================================

#: prepared calls (see tilelab.kernels._host): a repeated call with the same tensors and
#: ``out=`` relaunches the same argument objects, the runtime's fast path
_BINARY = CallCache("binary")
_UNARY = CallCache("unary")


def _unary(x: Any, activation: ActivationLike, fn: str, block_m: int | None,
           block_n: int | None, out: Any, sync: bool, stream: Any) -> Any:
    """Run ``activation(x)`` through the call cache (the body of every unary function)."""
    return _UNARY.prepare(_unary_call, x, activation, fn, block_m=block_m,
                          block_n=block_n, out=out).run(sync, stream)


def binary(op: str, x: Any, y: Any, *, activation: ActivationLike = None,
           block_m: int | None = None, block_n: int | None = None, out: Any = None,
           sync: bool = True, stream: Any = None) -> TensorResult:
    """``activation(x <op> y)`` for op in add/sub/mul/div/maximum/minimum, one fused pass.

    ``x``/``y`` are tensors of one float dtype (f32, f16, bf16) or Python scalars; a
    row vector ``(..., N)``, a column vector ``(..., 1)`` or a single element broadcasts
    over the other operand. Math is float32, rounded once on the store. ``activation``
    is None, an :class:`~tilelab.kernels.Activation` or its name ("relu", "gelu" =
    "gelu_tanh", "gelu_erf", "silu", "sigmoid", "exp"). ``block_m`` / ``block_n`` are
    the tile (powers of two; default 1024 elements per tile); ``out`` receives the
    result instead of a new tensor (it must not overlap x or y). ``sync=False``
    launches without waiting (on ``stream``, default the caller's) and returns
    ``(out, future)`` (see :mod:`tilelab.kernels`).

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.elementwise import binary
        >>> x = tl.tensor(np.array([[-1.0, 2.0]], np.float32), device="cpu")
        >>> binary("add", x, 1.0, activation="relu").numpy()
        array([[0., 3.]], dtype=float32)
    """
    return _BINARY.prepare(_binary_call, op, x, y, activation=activation, block_m=block_m,
                           block_n=block_n, out=out).run(sync, stream)


def add(x: Any, y: Any, *, activation: ActivationLike = None, block_m: int | None = None,
        block_n: int | None = None, out: Any = None, sync: bool = True,
        stream: Any = None) -> TensorResult:
    """``activation(x + y)`` element-wise with broadcasting; see :func:`binary`.

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.elementwise import add
        >>> x = tl.tensor(np.array([[1.0, 4.0], [2.0, 8.0]], np.float32), device="cpu")
        >>> b = tl.tensor(np.array([2.0, 4.0], np.float32), device="cpu")   # a row vector
        >>> add(x, b).numpy()
        array([[ 3.,  8.],
               [ 4., 12.]], dtype=float32)
    """
    return binary("add", x, y, activation=activation, block_m=block_m,
                  block_n=block_n, out=out, sync=sync, stream=stream)


def sub(x: Any, y: Any, *, activation: ActivationLike = None, block_m: int | None = None,
        block_n: int | None = None, out: Any = None, sync: bool = True,
        stream: Any = None) -> TensorResult:
    """``activation(x - y)`` element-wise with broadcasting; see :func:`binary`.

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.elementwise import sub
        >>> x = tl.tensor(np.array([[1.0, 4.0], [2.0, 8.0]], np.float32), device="cpu")
        >>> b = tl.tensor(np.array([2.0, 4.0], np.float32), device="cpu")   # a row vector
        >>> sub(x, b).numpy()
        array([[-1.,  0.],
               [ 0.,  4.]], dtype=float32)
    """
    return binary("sub", x, y, activation=activation, block_m=block_m,
                  block_n=block_n, out=out, sync=sync, stream=stream)


def mul(x: Any, y: Any, *, activation: ActivationLike = None, block_m: int | None = None,
        block_n: int | None = None, out: Any = None, sync: bool = True,
        stream: Any = None) -> TensorResult:
    """``activation(x * y)`` element-wise with broadcasting; see :func:`binary`.

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.elementwise import mul
        >>> x = tl.tensor(np.array([[1.0, 4.0], [2.0, 8.0]], np.float32), device="cpu")
        >>> b = tl.tensor(np.array([2.0, 4.0], np.float32), device="cpu")   # a row vector
        >>> mul(x, b).numpy()
        array([[ 2., 16.],
               [ 4., 32.]], dtype=float32)
    """
    return binary("mul", x, y, activation=activation, block_m=block_m,
                  block_n=block_n, out=out, sync=sync, stream=stream)


def div(x: Any, y: Any, *, activation: ActivationLike = None, block_m: int | None = None,
        block_n: int | None = None, out: Any = None, sync: bool = True,
        stream: Any = None) -> TensorResult:
    """``activation(x / y)`` element-wise with broadcasting; see :func:`binary`.

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.elementwise import div
        >>> x = tl.tensor(np.array([[1.0, 4.0], [2.0, 8.0]], np.float32), device="cpu")
        >>> b = tl.tensor(np.array([2.0, 4.0], np.float32), device="cpu")   # a row vector
        >>> div(x, b).numpy()
        array([[0.5, 1. ],
               [1. , 2. ]], dtype=float32)
    """
    return binary("div", x, y, activation=activation, block_m=block_m,
                  block_n=block_n, out=out, sync=sync, stream=stream)


def maximum(x: Any, y: Any, *, activation: ActivationLike = None, block_m: int | None = None,
            block_n: int | None = None, out: Any = None, sync: bool = True,
            stream: Any = None) -> TensorResult:
    """``activation(max(x, y))`` element-wise with broadcasting; see :func:`binary`.

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.elementwise import maximum
        >>> x = tl.tensor(np.array([[1.0, 4.0], [2.0, 8.0]], np.float32), device="cpu")
        >>> b = tl.tensor(np.array([2.0, 4.0], np.float32), device="cpu")   # a row vector
        >>> maximum(x, b).numpy()
        array([[2., 4.],
               [2., 8.]], dtype=float32)
    """
    return binary("maximum", x, y, activation=activation, block_m=block_m,
                  block_n=block_n, out=out, sync=sync, stream=stream)


def minimum(x: Any, y: Any, *, activation: ActivationLike = None, block_m: int | None = None,
            block_n: int | None = None, out: Any = None, sync: bool = True,
            stream: Any = None) -> TensorResult:
    """``activation(min(x, y))`` element-wise with broadcasting; see :func:`binary`.

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.elementwise import minimum
        >>> x = tl.tensor(np.array([[1.0, 4.0], [2.0, 8.0]], np.float32), device="cpu")
        >>> b = tl.tensor(np.array([2.0, 4.0], np.float32), device="cpu")   # a row vector
        >>> minimum(x, b).numpy()
        array([[1., 4.],
               [2., 4.]], dtype=float32)
    """
    return binary("minimum", x, y, activation=activation, block_m=block_m,
                  block_n=block_n, out=out, sync=sync, stream=stream)


def unary(x: Any, activation: ActivationLike, *, block_m: int | None = None,
          block_n: int | None = None, out: Any = None, sync: bool = True,
          stream: Any = None) -> TensorResult:
    """``activation(x)`` for an :class:`~tilelab.kernels.Activation` or its name: relu,
    gelu (= gelu_tanh), gelu_tanh, gelu_erf, silu, sigmoid, exp, or none (a copy).

    ``sync=False`` launches without waiting and returns ``(out, future)`` (see
    :func:`binary`); so do the named activations below.

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.elementwise import unary
        >>> unary(tl.tensor(np.zeros(3, np.float32), device="cpu"), "sigmoid").numpy()
        array([0.5, 0.5, 0.5], dtype=float32)
    """
    return _unary(x, activation, "unary", block_m, block_n, out, sync, stream)


def exp(x: Any, *, block_m: int | None = None, block_n: int | None = None,
        out: Any = None, sync: bool = True, stream: Any = None) -> TensorResult:
    """``exp(x)`` element-wise (float32 math).

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels import elementwise as ew
        >>> ew.exp(tl.tensor(np.zeros(2, np.float32), device="cpu")).numpy()
        array([1., 1.], dtype=float32)
    """
    return _unary(x, "exp", "exp", block_m, block_n, out, sync, stream)


def relu(x: Any, *, block_m: int | None = None, block_n: int | None = None,
         out: Any = None, sync: bool = True, stream: Any = None) -> TensorResult:
    """``max(x, 0)`` element-wise.

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels import elementwise as ew
        >>> ew.relu(tl.tensor(np.array([-1.0, 2.0], np.float32), device="cpu")).numpy()
        array([0., 2.], dtype=float32)
    """
    return _unary(x, "relu", "relu", block_m, block_n, out, sync, stream)


def gelu(x: Any, *, approximate: str = "tanh", block_m: int | None = None,
         block_n: int | None = None, out: Any = None, sync: bool = True,
         stream: Any = None) -> TensorResult:
    """GELU: ``approximate="tanh"`` (torch's tanh form) or ``"none"`` (exact, via erf).

    cuTile has no erf op, so the exact form uses a Chebyshev erfc fit with relative
    error below 1.2e-7 (well under float32 rounding of the result).

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels import elementwise as ew
        >>> x = tl.tensor(np.array([0.0, 1.0], np.float32), device="cpu")
        >>> np.round(ew.gelu(x, approximate="none").numpy(), 4)
        array([0.    , 0.8413], dtype=float32)
    """
    if approximate not in ("tanh", "none"):
        raise ValueError(f"gelu(): approximate must be 'tanh' or 'none', got "
                         f"{approximate!r}")
    form = Activation.GELU_TANH if approximate == "tanh" else Activation.GELU_ERF
    return _unary(x, form, "gelu", block_m, block_n, out, sync, stream)


def silu(x: Any, *, block_m: int | None = None, block_n: int | None = None,
         out: Any = None, sync: bool = True, stream: Any = None) -> TensorResult:
    """``x * sigmoid(x)`` element-wise (a.k.a. swish).

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels import elementwise as ew
        >>> ew.silu(tl.tensor(np.zeros(2, np.float32), device="cpu")).numpy()
        array([0., 0.], dtype=float32)
    """
    return _unary(x, "silu", "silu", block_m, block_n, out, sync, stream)


def sigmoid(x: Any, *, block_m: int | None = None, block_n: int | None = None,
            out: Any = None, sync: bool = True, stream: Any = None) -> TensorResult:
    """``1 / (1 + exp(-x))`` element-wise.

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels import elementwise as ew
        >>> ew.sigmoid(tl.tensor(np.zeros(2, np.float32), device="cpu")).numpy()
        array([0.5, 0.5], dtype=float32)
    """
    return _unary(x, "sigmoid", "sigmoid", block_m, block_n, out, sync, stream)
