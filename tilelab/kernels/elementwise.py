"""Element-wise kernels: binary ops with broadcasting, activations, fused ``act(x op y)``.

Every op loads tiles in the storage dtype, computes in float32 and rounds once on the
store, which is what torch does for bf16/f16 element-wise math. The host functions view
the output as a 2-D ``(rows, cols)`` grid (``cols`` = the last dimension; same-shape
contiguous operands are flattened to one long row so no lane is wasted on padding) and
give each block one ``(block_m, block_n)`` tile of it; a row vector, a column vector, a
single element or a Python scalar broadcast over it.

This module also holds the small host-side helpers the other memory-bound kernel
modules share (argument conversion, validation, tile picking, output allocation).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import cuda.tile as ct
import numpy as np

import tilelab as tl
from tilelab.kernels._host import (CallCache, TensorResult, as_tensor as _wrap_array,
                                   hinted, run_launches)

__all__ = [
    "add", "sub", "mul", "div", "maximum", "minimum", "binary",
    "exp", "relu", "gelu", "silu", "sigmoid", "unary",
    "ACTIVATIONS", "BINARY_OPS", "TILE_ELEMS",
]

#: Default elements per tile: 4096 (16 KB of f32 / 8 KB of bf16 per operand) keeps
#: enough bytes in flight per block for a memory-bound op without spilling registers.
TILE_ELEMS = 4096
#: Default tile of the element-wise kernels: 1024 elements. Measured on the H200 at
#: 2^28 elements (benchmarks/results/sweep_h200_*.json): bf16 add runs at torch's speed
#: with 1024 (371 vs 369 us) but 1.54x slower with 4096; float32 is flat from 512 to 4096.
ELEMENTWISE_TILE = 1024
#: Element budget of a whole-row tile of the normalization kernels: 2 rows of 4096.
#: (RMSNorm 65536 x 4096 bf16 on the H200 without an occupancy hint: 364 us with 8 rows
#: per tile, 1016 us with 1; with the occupancy hint of ``ROW_HINTS`` 2 rows fit without
#: register spills.)
NORM_TILE_ELEMS = 8192

FLOAT_DTYPES = ("float32", "float16", "bfloat16")

# ---- op codes (compile-time constants of the kernels) ------------------------------

ADD, SUB, MUL, DIV, MAX, MIN = 0, 1, 2, 3, 4, 5
#: binary op name -> kernel code
BINARY_OPS = {"add": ADD, "sub": SUB, "mul": MUL, "div": DIV, "maximum": MAX, "minimum": MIN}

NONE, RELU, GELU_TANH, GELU_ERF, SILU, SIGMOID, EXP = 0, 1, 2, 3, 4, 5, 6
#: activation name -> kernel code (``None`` is the identity)
ACTIVATIONS = {None: NONE, "none": NONE, "relu": RELU, "gelu": GELU_TANH,
               "gelu_tanh": GELU_TANH, "gelu_erf": GELU_ERF, "silu": SILU,
               "sigmoid": SIGMOID, "exp": EXP}

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


def _erfc_nonneg(z):
    """erfc(z) for z >= 0 with relative error < 1.2e-7 (Numerical Recipes' erfcc).

    cuTile has no erf; this Chebyshev fit costs one exp and keeps the *relative*
    error small in the far tail, where 1 - erf(z) would cancel.
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


def _activate(v, ACT):
    """The activation ``ACT`` of a float32 tile."""
    if ACT == RELU:
        return ct.maximum(v, 0.0)
    if ACT == GELU_TANH:
        # 0.5 * v * (1 + tanh(u)) == v * sigmoid(2u): the same function without the
        # cancellation of 1 + tanh(u) for negative v (and one exp instead of a tanh)
        u = 0.7978845608028654 * (v + 0.044715 * v * v * v)
        return v / (1.0 + ct.exp(-2.0 * u))
    if ACT == GELU_ERF:
        half_tail = 0.5 * _erfc_nonneg(ct.abs(v) * 0.7071067811865476)
        return v * ct.where(v >= 0.0, 1.0 - half_tail, half_tail)
    if ACT == SILU:
        return v / (1.0 + ct.exp(-v))
    if ACT == SIGMOID:
        return 1.0 / (1.0 + ct.exp(-v))
    if ACT == EXP:
        return ct.exp(v)
    return v


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
        >>> binary_kernel(z.partition((4, 1024)), x, b, ADD, FULL, ROW, RELU)  # doctest: +SKIP
    """
    bm, bn = z.tile_shape
    m, n = z.tile_index
    a = _operand(x, X_MODE, m, n, bm, bn)
    b = _operand(y, Y_MODE, m, n, bm, bn)
    z.store(_activate(_binop(a, b, OP), ACT).astype(z.dtype))


@tl.kernel
def binary_scalar_kernel(z: tl.Out, x: tl.In, s: float, OP: ct.Constant[int],
                         X_MODE: ct.Constant[int], REVERSED: ct.Constant[int],
                         ACT: ct.Constant[int]):
    """z = act(x <op> s), or act(s <op> x) when REVERSED, for a float32 scalar s.

    Example:
        >>> binary_scalar_kernel(z.partition((1, 4096)), x, 2.0, MUL, FULL, 0, 0)  # doctest: +SKIP
    """
    bm, bn = z.tile_shape
    m, n = z.tile_index
    a = _operand(x, X_MODE, m, n, bm, bn)
    b = ct.full((bm, bn), s, dtype=ct.float32)
    if REVERSED:
        r = _binop(b, a, OP)
    else:
        r = _binop(a, b, OP)
    z.store(_activate(r, ACT).astype(z.dtype))


@tl.kernel
def unary_kernel(z: tl.Out, x: tl.In, ACT: ct.Constant[int]):
    """z = act(x), computed in float32.

    Example:
        >>> unary_kernel(z.partition((1, 4096)), x, SILU)                   # doctest: +SKIP
    """
    z.store(_activate(tl.load_like(x, z).astype(ct.float32), ACT).astype(z.dtype))


# ======================================================================================
# host helpers shared by the memory-bound kernel modules
# ======================================================================================


@dataclass
class _Call:
    """A kernel with its launch arguments and what the host function returns.

    ``args is None`` means there is nothing to compute (an empty tensor). Tests and
    tools use it to compile (``kernel.compile(*args)``) or interpret the exact launch.
    It reads like a :class:`~tilelab.kernels._host.Plan` (``launches``, ``out``), which
    is what the library's call cache keeps.
    """

    kernel: Any
    args: tuple | None
    result: Any

    @property
    def launches(self) -> list[tuple[Any, tuple]]:
        return [] if self.args is None else [(self.kernel, self.args)]

    @property
    def out(self) -> Any:
        return self.result

    def run(self, sync: bool = True, stream: Any = None) -> Any:
        """Launch; the result, or ``(result, future)`` with ``sync=False``."""
        return run_launches(self.launches, self.result, sync=sync, stream=stream)


def _as_tensor(x: Any, name: str, fn: str) -> tl.Tensor:
    """``x`` as a tensor; foreign arrays (numpy, torch, cupy) are borrowed where they live."""
    if isinstance(x, tl.Tensor):
        return x
    if x is None or isinstance(x, (bool, int, float, complex, str)):
        raise TypeError(f"{fn}(): {name} must be a tensor or array, got "
                        f"{type(x).__name__}")
    try:
        return _wrap_array(x)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{fn}(): cannot use {name} ({type(x).__name__}) as a tensor: "
                        f"{e}") from None


def _check_float(t: tl.Tensor, name: str, fn: str) -> None:
    if t.dtype.name not in FLOAT_DTYPES:
        raise TypeError(f"{fn}(): {name} has dtype {t.dtype.name}; supported dtypes are "
                        f"{', '.join(FLOAT_DTYPES)}")


def _check_same_device(fn: str, **tensors: tl.Tensor | None) -> str:
    """The common device of the given tensors (ValueError naming two that differ)."""
    seen: dict[str, str] = {}
    for name, t in tensors.items():
        if t is not None:
            seen.setdefault(t.device, name)
    if len(seen) > 1:
        listed = ", ".join(f"{n} on {d}" for d, n in seen.items())
        raise ValueError(f"{fn}(): tensors live on different devices ({listed}); move them "
                         "to one device with .to(...)")
    return next(iter(seen))


def _pow2_ceil(n: int) -> int:
    """Smallest power of two >= n (and >= 1)."""
    return 1 << max(0, int(n) - 1).bit_length()


def _check_block(v: int | None, name: str, fn: str) -> int | None:
    """Validate a tile-size keyword: None (pick a default) or a positive power of two."""
    if v is None:
        return None
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1 or v & (v - 1):
        raise ValueError(f"{fn}(): {name}={v!r} must be a positive power of two "
                         "(cuTile tiles are powers of two)")
    return int(v)


def _rows_of(t: tl.Tensor) -> tl.Tensor:
    """``t`` as a 2-D (rows, last-dim) tensor: a view when possible, else a copy."""
    if t.ndim == 2:
        return t
    rows, n = math.prod(t.shape[:-1]), (t.shape[-1] if t.ndim else 1)
    if t.is_contiguous:
        return t.reshape(rows, n)
    if t.ndim == 1:
        return t[None, :]
    return t.contiguous().reshape(rows, n)


def _output(out: Any, shape: tuple[int, ...], dtype: Any, device: str, name: str,
            fn: str) -> tl.Tensor:
    """A new output tensor, or ``out`` after checking shape, dtype and device."""
    if out is None:
        return tl.empty(shape, dtype=dtype, device=device)
    t = _as_tensor(out, name, fn)
    want = np.dtype(dtype) if not isinstance(dtype, np.dtype) else dtype
    if t.shape != tuple(shape) or t.dtype != want or t.device != device:
        raise ValueError(f"{fn}(): {name} must be a {tuple(shape)} {want.name} tensor on "
                         f"{device}, got {t.shape} {t.dtype.name} on {t.device}")
    if t.ndim > 2 and not t.is_contiguous:
        raise ValueError(f"{fn}(): {name} must be contiguous (or at most 2-D) to be "
                         "written in tiles")
    return t


def _tile_2d(rows: int, cols: int, block_m: int | None, block_n: int | None,
             elems: int = TILE_ELEMS) -> tuple[int, int]:
    """Default (block_m, block_n): whole rows up to ``elems``, then more rows per tile."""
    bn = block_n or min(_pow2_ceil(cols), elems)
    bm = block_m or max(1, min(_pow2_ceil(rows), elems // bn))
    return bm, bn


#: Widest row (elements) a row kernel keeps whole in one tile; longer rows loop over
#: column tiles of ``LOOP_TILE_N`` (two passes over memory instead of one).
MAX_ROW_TILE = 8192
LOOP_TILE_N = 4096


#: 16-bit rows longer than ``MAX_ROW_TILE`` and up to this many elements can still run in
#: one pass, as sub-rows of ``LONG_ROW_WIDTH`` in one tile (softmax, RMSNorm)
ONE_PASS_MAX_16BIT = 32768
LONG_ROW_WIDTH = 128


def _long_row_split(n: int, itemsize: int) -> int:
    """G when a row of n 16-bit elements, too long for ``MAX_ROW_TILE``, fits one tile as
    G sub-rows of ``LONG_ROW_WIDTH`` with no padding (n = 16384 or 32768); 0 otherwise.
    Padding would turn the TMA loads into plain ones (1.8x slower for softmax at 8192).

    Example:
        >>> _long_row_split(16384, 2), _long_row_split(32768, 2), _long_row_split(8192, 2)
        (128, 256, 0)
        >>> _long_row_split(20000, 2), _long_row_split(16384, 4), _long_row_split(65536, 2)
        (0, 0, 0)
    """
    g = n // LONG_ROW_WIDTH
    if (itemsize != 2 or not MAX_ROW_TILE < n <= ONE_PASS_MAX_16BIT
            or n % LONG_ROW_WIDTH or g & (g - 1)):
        return 0
    return g


def _row_tiles(rows: int, n: int, block_m: int | None, block_n: int | None,
               elems: int = TILE_ELEMS) -> tuple[int, int, bool]:
    """(block_m, block_n, looped) for a kernel that works on whole rows of length n.

    One pass when ``block_n >= n`` (the row fits a tile, padded to a power of two);
    otherwise the looped form streams the row in ``block_n`` column tiles.
    """
    if block_n is None:
        block_n = _pow2_ceil(n) if _pow2_ceil(n) <= MAX_ROW_TILE else LOOP_TILE_N
    looped = block_n < n
    if block_m is None:
        block_m = 1 if looped else max(1, min(_pow2_ceil(rows), elems // block_n))
    return block_m, block_n, looped


#: cuTile's hints for the one-pass row kernels (softmax, the norms). A whole row of
#: 4096-8192 elements makes the compiler use all 255 registers, so one block fits per
#: SM and only one row's loads are in flight there; an occupancy hint of 4 caps the
#: registers at 64 (no spills) and lets four rows stream at once (softmax 3.4x, RMSNorm
#: 3.8x faster on the H200). RoPE's one-token tiles (one tensor) take occupancy 8:
#: 3.40 -> 3.89 TB/s (benchmarks/results/rope_hints_h200_2026-11-30.json); its q+k
#: kernels keep none (occupancy 8 spills there, the rest was not timed).
#: The looped kernels (row reductions and argmax, the online softmax and the norms of
#: long rows) had no hint, and tileiras pipelines their loops into 256-thread blocks of
#: 255 registers: one block per SM. Occupancy 8 caps them at 32-64 registers; on the H200
#: (benchmarks/results/looped_hints_h200_2026-11-30b.json) row_sum of 16384 x 8192 bf16
#: went 234 -> 65 us (4.1 TB/s; torch.sum 102), row_max 189 -> 64, row_argmax 249 -> 112,
#: the online softmax of 2048 x 65536 600 -> 292 and its RMSNorm 310 -> 203. Where
#: occupancy 8 spills (the online softmax of float32 rows, 168 bytes; layer norm with
#: its bias, 48) occupancy 4 was faster: float32 softmax 686 -> 273 us (8: 304), layer
#: norm 428 -> 219 (8: 240). The bf16 online softmax spills 64 bytes at 8 and is still
#: fastest there. The benchmarks may change these entries (then call
#: ``tilelab.kernels.clear_caches()``).
ROW_HINTS: dict[str, dict[str, int]] = {"softmax": {"occupancy": 4},
                                        "norm": {"occupancy": 4},
                                        "rope": {"occupancy": 8},
                                        "reduce": {"occupancy": 8},
                                        "softmax_16k": {"occupancy": 2},
                                        "softmax_32k": {"occupancy": 1,
                                                        "num_worker_warps": 8},
                                        "norm_16k": {"occupancy": 2},
                                        "norm_32k": {"occupancy": 1, "num_worker_warps": 8},
                                        "softmax_online": {"occupancy": 8},
                                        "softmax_online_f32": {"occupancy": 4},
                                        "norm_looped": {"occupancy": 8},
                                        "layer_norm_looped": {"occupancy": 4}}
#: hints measured faster on one architecture only (arch -> op -> hints). Softmax's
#: ``exp`` kernel took 8 worker warps on sm_90 (5% faster); its ``exp2`` kernels are
#: faster without (140 vs 145 us at 16384 x 8192, variant_probe_h200_*.json), so none is
#: set today; the benchmarks may set some.
ROW_HINTS_BY_ARCH: dict[str, dict[str, dict[str, int]]] = {}


def _row_kernel(kernel: tl.Kernel, op: str, device: str) -> tl.Kernel:
    """``kernel`` compiled with the row-kernel hints of ``op`` for ``device``'s GPU."""
    hints = ROW_HINTS.get(op, {})
    if device != "cpu":
        from tilelab.runtime.device import current_arch

        hints = ROW_HINTS_BY_ARCH.get(current_arch() or "", {}).get(op, hints)
    return hinted(kernel, **hints)


def _row_schedule(rows: int, block_m: int) -> Any:
    """The persistent schedule that gives block b every column tile of row tile b.

    With ``group_m`` at least the number of row tiles the grouped order is
    column-major, so with one block per row tile, block b walks (b, 0), (b, 1), ... in
    order: it computes its rows' statistics once, then writes its tiles left to right.
    (Kernels recompute the statistics whenever the row changes, so any order is still
    correct.) ``group_m`` is a compile-time constant: rounding it up to a power of two
    keeps the variants to one per power of two of the row count.

    Example:
        >>> _row_schedule(100, 1)
        Persistent(num_blocks=100, group_m=128)
    """
    row_tiles = -(-rows // block_m)
    return tl.persistent(num_blocks=row_tiles, group_m=_pow2_ceil(row_tiles))


#: CUDA's limit on grid y and z: a row-major 2-D tile grid puts its rows in y
MAX_GRID_Y = 65535


def _grid_schedule(row_tiles: int) -> Any:
    """The schedule of a 2-D one-block-per-tile launch with ``row_tiles`` tile rows.

    Row-major puts the tile rows in grid y, which CUDA caps at 65535 (a layer norm over
    128k tokens with one row per tile needs more); ``tl.grouped(1)`` walks the same
    row-major order from a 1-D grid instead.

    Example:
        >>> _grid_schedule(100), _grid_schedule(100_000)
        (RowMajor(), Grouped(group_m=1))
    """
    return tl.row_major if row_tiles <= MAX_GRID_Y else tl.grouped(1)


def _partition_2d(t: tl.Tensor, bm: int, bn: int) -> Any:
    """``t`` (2-D) in (bm, bn) tiles, one block per tile (see :func:`_grid_schedule`)."""
    return t.partition((bm, bn), schedule=_grid_schedule(-(-t.shape[0] // bm)))


def _float_scalar(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


# ---- broadcasting -------------------------------------------------------------------


def _layout(t: tl.Tensor, out_shape: tuple[int, ...]) -> tuple[int, tl.Tensor] | None:
    """(mode, 2-D view) of operand ``t`` against the (rows, cols) view of ``out_shape``.

    None when ``t`` broadcasts in a way the kernels do not cover.
    """
    cols = out_shape[-1] if out_shape else 1
    lead = out_shape[:-1]
    shape = (1,) * (len(out_shape) - t.ndim) + t.shape
    if shape == tuple(out_shape):
        return FULL, _rows_of(t)
    if math.prod(t.shape) == 1:
        return ONE, (t.reshape(1, 1) if t.is_contiguous else t.contiguous().reshape(1, 1))
    if shape[-1] == cols and all(s == 1 for s in shape[:-1]):
        v = t.reshape(-1) if t.is_contiguous else t.contiguous().reshape(-1)
        return ROW, v.reshape(1, cols)
    if shape[-1] == 1 and shape[:-1] == tuple(lead):
        return COL, _rows_of(t.reshape(*lead, 1) if t.is_contiguous else
                             t.contiguous().reshape(*lead, 1))
    return None


def _broadcast_shape(fn: str, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        raise ValueError(f"{fn}(): shapes {a} and {b} do not broadcast") from None


def _act_code(act: Any, fn: str) -> int:
    try:
        return ACTIVATIONS[act]
    except (KeyError, TypeError):
        names = ", ".join(repr(k) for k in ACTIVATIONS if k is not None)
        raise ValueError(f"{fn}(): unknown activation {act!r}; choose None or one of "
                         f"{names}") from None


def _binary_call(op: str, x: Any, y: Any, *, act: Any = None, block_m: int | None = None,
                 block_n: int | None = None, out: Any = None) -> _Call:
    fn = op
    if op not in BINARY_OPS:
        raise ValueError(f"binary(): unknown op {op!r}; choose one of "
                         f"{', '.join(BINARY_OPS)}")
    code, act_code = BINARY_OPS[op], _act_code(act, fn)
    block_m = _check_block(block_m, "block_m", fn)
    block_n = _check_block(block_n, "block_n", fn)
    x_scalar, y_scalar = _float_scalar(x), _float_scalar(y)
    if x_scalar and y_scalar:
        raise TypeError(f"{fn}(): at least one operand must be a tensor, got two scalars")
    if x_scalar or y_scalar:
        reversed_ = int(x_scalar)
        s, t = (x, y) if x_scalar else (y, x)
        t = _as_tensor(t, "y" if x_scalar else "x", fn)
        _check_float(t, "y" if x_scalar else "x", fn)
        z = _output(out, t.shape, t.dtype, t.device, "out", fn)
        if t.size == 0:
            return _Call(binary_scalar_kernel, None, z)
        mode, tv, zv = _flat_or_rows(z, t)
        bm, bn = _tile_2d(zv.shape[0], zv.shape[1], block_m, block_n, ELEMENTWISE_TILE)
        args = (_partition_2d(zv, bm, bn), tv, float(s), code, mode, reversed_, act_code)
        return _Call(binary_scalar_kernel, args, z)
    xt, yt = _as_tensor(x, "x", fn), _as_tensor(y, "y", fn)
    _check_float(xt, "x", fn)
    _check_float(yt, "y", fn)
    if xt.dtype != yt.dtype:
        raise TypeError(f"{fn}(): x is {xt.dtype.name} and y is {yt.dtype.name}; convert "
                        "one with .astype(...) (no implicit promotion)")
    device = _check_same_device(fn, x=xt, y=yt)
    shape = _broadcast_shape(fn, xt.shape, yt.shape)
    z = _output(out, shape, xt.dtype, device, "out", fn)
    if z.size == 0:
        return _Call(binary_kernel, None, z)
    if xt.shape == shape and yt.shape == shape and \
            xt.is_contiguous and yt.is_contiguous and z.is_contiguous:
        zv, xv, yv = (v.reshape(1, -1) for v in (z, xt, yt))
        modes = (FULL, FULL)
    else:
        lx, ly = _layout(xt, shape), _layout(yt, shape)
        if lx is None or ly is None:
            raise ValueError(f"{fn}(): cannot broadcast {xt.shape} with {yt.shape}: "
                             "supported are equal shapes, a row vector (..., N), a column "
                             "vector (..., 1) matching the leading dims, a single element "
                             "or a Python scalar")
        (mx, xv), (my, yv) = lx, ly
        modes = (mx, my)
        zv = _rows_of(z)
    bm, bn = _tile_2d(zv.shape[0], zv.shape[1], block_m, block_n, ELEMENTWISE_TILE)
    args = (_partition_2d(zv, bm, bn), xv, yv, code, modes[0], modes[1], act_code)
    return _Call(binary_kernel, args, z)


def _flat_or_rows(z: tl.Tensor, t: tl.Tensor) -> tuple[int, tl.Tensor, tl.Tensor]:
    """(FULL, t view, z view): one long row when both are contiguous, else (rows, cols)."""
    if t.is_contiguous and z.is_contiguous:
        return FULL, t.reshape(1, -1), z.reshape(1, -1)
    return FULL, _rows_of(t), _rows_of(z)


def _unary_call(x: Any, act: Any, fn: str, *, block_m: int | None = None,
                block_n: int | None = None, out: Any = None) -> _Call:
    code = _act_code(act, fn)
    block_m = _check_block(block_m, "block_m", fn)
    block_n = _check_block(block_n, "block_n", fn)
    xt = _as_tensor(x, "x", fn)
    _check_float(xt, "x", fn)
    z = _output(out, xt.shape, xt.dtype, xt.device, "out", fn)
    if xt.size == 0:
        return _Call(unary_kernel, None, z)
    _, xv, zv = _flat_or_rows(z, xt)
    bm, bn = _tile_2d(zv.shape[0], zv.shape[1], block_m, block_n, ELEMENTWISE_TILE)
    return _Call(unary_kernel, (_partition_2d(zv, bm, bn), xv, code), z)


# ======================================================================================
# public host functions
# ======================================================================================

#: prepared calls (see tilelab.kernels._host): a repeated call with the same tensors and
#: ``out=`` relaunches the same argument objects, the runtime's fast path
_BINARY = CallCache("binary")
_UNARY = CallCache("unary")


def _unary(x: Any, act: Any, fn: str, block_m: int | None, block_n: int | None, out: Any,
           sync: bool, stream: Any) -> Any:
    """Run ``act(x)`` through the call cache (the body of every unary host function)."""
    return _UNARY.prepare(_unary_call, x, act, fn, block_m=block_m, block_n=block_n,
                          out=out).run(sync, stream)


def binary(op: str, x: Any, y: Any, *, act: str | None = None, block_m: int | None = None,
           block_n: int | None = None, out: Any = None, sync: bool = True,
           stream: Any = None) -> TensorResult:
    """``act(x <op> y)`` for op in add/sub/mul/div/maximum/minimum, one fused pass.

    ``x``/``y`` are tensors of one float dtype (f32, f16, bf16) or Python scalars; a
    row vector ``(..., N)``, a column vector ``(..., 1)`` or a single element broadcasts
    over the other operand. Math is float32, rounded once on the store. ``block_m`` /
    ``block_n`` are the tile (powers of two; default 1024 elements per tile); ``out``
    receives the result instead of a new tensor (it must not overlap x or y).
    ``sync=False`` launches without waiting (on ``stream``, default tilelab's) and
    returns ``(out, future)`` (see :mod:`tilelab.kernels`).

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.elementwise import binary
        >>> x = tl.tensor(np.array([[-1.0, 2.0]], np.float32), device="cpu")
        >>> binary("add", x, 1.0, act="relu").numpy()
        array([[0., 3.]], dtype=float32)
    """
    return _BINARY.prepare(_binary_call, op, x, y, act=act, block_m=block_m,
                           block_n=block_n, out=out).run(sync, stream)


def add(x: Any, y: Any, *, act: str | None = None, block_m: int | None = None,
        block_n: int | None = None, out: Any = None, sync: bool = True,
        stream: Any = None) -> TensorResult:
    """``act(x + y)`` element-wise with broadcasting; see :func:`binary`.

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.elementwise import add
        >>> x = tl.tensor(np.array([[1.0, 4.0], [2.0, 8.0]], np.float32), device="cpu")
        >>> b = tl.tensor(np.array([2.0, 4.0], np.float32), device="cpu")   # a row vector
        >>> add(x, b).numpy()
        array([[ 3.,  8.],
               [ 4., 12.]], dtype=float32)
    """
    return binary("add", x, y, act=act, block_m=block_m, block_n=block_n, out=out,
                  sync=sync, stream=stream)


def sub(x: Any, y: Any, *, act: str | None = None, block_m: int | None = None,
        block_n: int | None = None, out: Any = None, sync: bool = True,
        stream: Any = None) -> TensorResult:
    """``act(x - y)`` element-wise with broadcasting; see :func:`binary`.

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.elementwise import sub
        >>> x = tl.tensor(np.array([[1.0, 4.0], [2.0, 8.0]], np.float32), device="cpu")
        >>> b = tl.tensor(np.array([2.0, 4.0], np.float32), device="cpu")   # a row vector
        >>> sub(x, b).numpy()
        array([[-1.,  0.],
               [ 0.,  4.]], dtype=float32)
    """
    return binary("sub", x, y, act=act, block_m=block_m, block_n=block_n, out=out,
                  sync=sync, stream=stream)


def mul(x: Any, y: Any, *, act: str | None = None, block_m: int | None = None,
        block_n: int | None = None, out: Any = None, sync: bool = True,
        stream: Any = None) -> TensorResult:
    """``act(x * y)`` element-wise with broadcasting; see :func:`binary`.

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.elementwise import mul
        >>> x = tl.tensor(np.array([[1.0, 4.0], [2.0, 8.0]], np.float32), device="cpu")
        >>> b = tl.tensor(np.array([2.0, 4.0], np.float32), device="cpu")   # a row vector
        >>> mul(x, b).numpy()
        array([[ 2., 16.],
               [ 4., 32.]], dtype=float32)
    """
    return binary("mul", x, y, act=act, block_m=block_m, block_n=block_n, out=out,
                  sync=sync, stream=stream)


def div(x: Any, y: Any, *, act: str | None = None, block_m: int | None = None,
        block_n: int | None = None, out: Any = None, sync: bool = True,
        stream: Any = None) -> TensorResult:
    """``act(x / y)`` element-wise with broadcasting; see :func:`binary`.

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.elementwise import div
        >>> x = tl.tensor(np.array([[1.0, 4.0], [2.0, 8.0]], np.float32), device="cpu")
        >>> b = tl.tensor(np.array([2.0, 4.0], np.float32), device="cpu")   # a row vector
        >>> div(x, b).numpy()
        array([[0.5, 1. ],
               [1. , 2. ]], dtype=float32)
    """
    return binary("div", x, y, act=act, block_m=block_m, block_n=block_n, out=out,
                  sync=sync, stream=stream)


def maximum(x: Any, y: Any, *, act: str | None = None, block_m: int | None = None,
            block_n: int | None = None, out: Any = None, sync: bool = True,
            stream: Any = None) -> TensorResult:
    """``act(max(x, y))`` element-wise with broadcasting; see :func:`binary`.

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.elementwise import maximum
        >>> x = tl.tensor(np.array([[1.0, 4.0], [2.0, 8.0]], np.float32), device="cpu")
        >>> b = tl.tensor(np.array([2.0, 4.0], np.float32), device="cpu")   # a row vector
        >>> maximum(x, b).numpy()
        array([[2., 4.],
               [2., 8.]], dtype=float32)
    """
    return binary("maximum", x, y, act=act, block_m=block_m, block_n=block_n, out=out,
                  sync=sync, stream=stream)


def minimum(x: Any, y: Any, *, act: str | None = None, block_m: int | None = None,
            block_n: int | None = None, out: Any = None, sync: bool = True,
            stream: Any = None) -> TensorResult:
    """``act(min(x, y))`` element-wise with broadcasting; see :func:`binary`.

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.elementwise import minimum
        >>> x = tl.tensor(np.array([[1.0, 4.0], [2.0, 8.0]], np.float32), device="cpu")
        >>> b = tl.tensor(np.array([2.0, 4.0], np.float32), device="cpu")   # a row vector
        >>> minimum(x, b).numpy()
        array([[1., 4.],
               [2., 4.]], dtype=float32)
    """
    return binary("minimum", x, y, act=act, block_m=block_m, block_n=block_n, out=out,
                  sync=sync, stream=stream)


def unary(x: Any, act: str, *, block_m: int | None = None, block_n: int | None = None,
          out: Any = None, sync: bool = True, stream: Any = None) -> TensorResult:
    """``act(x)`` for act in relu, gelu (tanh), gelu_erf, silu, sigmoid, exp.

    ``sync=False`` launches without waiting and returns ``(out, future)`` (see
    :func:`binary`); so do the named activations below.

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.elementwise import unary
        >>> unary(tl.tensor(np.zeros(3, np.float32), device="cpu"), "sigmoid").numpy()
        array([0.5, 0.5, 0.5], dtype=float32)
    """
    return _unary(x, act, "unary", block_m, block_n, out, sync, stream)


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
    act = "gelu_tanh" if approximate == "tanh" else "gelu_erf"
    return _unary(x, act, "gelu", block_m, block_n, out, sync, stream)


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
