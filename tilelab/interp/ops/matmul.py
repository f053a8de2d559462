"""Matrix multiply-accumulate: ``mma``, ``matmul`` (``@``) and ``mma_scaled``.

Numerics: float32 operands are full fp32: the products are summed in float64 and the
sum (with the accumulator) is rounded once to float32, which is within the error of any
fp32 summation order the GPU may use. Operands cast to ``ct.tfloat32`` keep their tf32
values (10 mantissa bits, rounded by ``astype``); their products, and those of
bf16/fp16/fp8 operands, are exact in float32 and are summed in float32 (numpy's float32
GEMM), then added to the accumulator and rounded to its dtype once; integer MMAs are
exact and wrap to int32; float64 is plain float64. ``mma`` counts ``2*M*N*K`` FLOPs per
batch as executed work, and ``2 * sum over k of (valid rows of x at k) * (valid columns
of y at k)`` as useful work (padding lanes of partial tiles excluded), separately from
element-wise FLOPs.
"""
from __future__ import annotations

import numpy as np

from cuda.tile import TileTypeError
from tilelab.interp import _cutile
from tilelab.interp.context import active, compile_error
from tilelab.interp.ops.elementwise import attach_operator, make, require_bool_flag
from tilelab.interp.ops.shapes import to_tile
from tilelab.interp.values.dtypes import (DTYPES, FLOAT32, FLOAT64, TileDType, as_dtype,
                                          promote)
from tilelab.interp.values.rounding import convert
from tilelab.limits import mma_acc_message, mma_shape_message

__all__ = ["mma", "matmul", "mma_scaled"]

_FP8 = (DTYPES["float8_e4m3fn"], DTYPES["float8_e5m2"])


def _broadcast_shapes(xs: tuple, ys: tuple, op: str) -> tuple[tuple, tuple, tuple, tuple]:
    """(x shape, y shape, accumulator shape, output shape) of a (batched) matmul; the
    refusal of shapes that do not multiply says which dimension disagrees (K, or the
    batch) in the compiler's words (:func:`tilelab.limits.mma_shape_message`)."""
    x_given, y_given = xs, ys
    x1, y1 = len(xs) == 1, len(ys) == 1
    if x1:
        xs = (1,) + xs
    if y1:
        ys = ys + (1,)
    try:
        if xs[-1] != ys[-2]:
            raise ValueError("K")
        batch = tuple(np.broadcast_shapes(xs[:-2], ys[:-2]))
    except ValueError:
        raise compile_error(*mma_shape_message(op, x_given, y_given)) from None
    xs, ys = batch + xs[-2:], batch + ys[-2:]
    acc = batch + (xs[-2], ys[-1])
    out = acc
    if x1:
        out = out[:-2] + out[-1:]
    if y1:
        out = out[:-1]
    return xs, ys, acc, out


def _count(x_shape: tuple, y_shape: tuple, xm: np.ndarray | None,
           ym: np.ndarray | None) -> None:
    """Count executed (all lanes) and useful (in-bounds lanes) MMA FLOPs; ``x_shape`` and
    ``y_shape`` have equal batch dimensions."""
    state = active()
    if state is None or state.tracer is None:
        return
    batch = int(np.prod(x_shape[:-2])) if len(x_shape) > 2 else 1
    m, k = x_shape[-2:]
    n = y_shape[-1]
    executed = 2 * m * n * k * batch
    useful = executed
    if xm is not None or ym is not None:
        # sum_ijk vx[i,k] * vy[k,j] == sum_k (valid rows of x at k) * (valid cols of y at k)
        rows = m if xm is None else np.broadcast_to(xm, x_shape).sum(axis=-2, dtype=np.int64)
        cols = n if ym is None else np.broadcast_to(ym, y_shape).sum(axis=-1, dtype=np.int64)
        useful = 2 * int(np.sum(np.broadcast_to(rows * cols, x_shape[:-2] + (k,))))
    state.tracer.count_flops(executed, mma=True, useful=useful)


def _result_valid(xm: np.ndarray | None, ym: np.ndarray | None, x_shape: tuple,
                  y_shape: tuple, acc_valid: np.ndarray | None,
                  acc_shape: tuple) -> np.ndarray | None:
    """Lanes of an MMA result that combine in-bounds data: a valid row of ``x`` and a
    valid column of ``y`` (and a valid accumulator lane); None when all are."""
    valid = None
    if xm is not None or ym is not None:
        rows = True if xm is None else \
            np.broadcast_to(xm, x_shape).any(axis=-1, keepdims=True)
        cols = True if ym is None else \
            np.broadcast_to(ym, y_shape).any(axis=-2, keepdims=True)
        valid = np.broadcast_to(rows & cols, acc_shape)
    if acc_valid is not None:
        valid = acc_valid if valid is None else valid & acc_valid
    return None if valid is None else np.broadcast_to(valid, acc_shape)


def _product(x: np.ndarray, xd: TileDType, y: np.ndarray, yd: TileDType,
             acc: np.ndarray, accd: TileDType) -> np.ndarray:
    """``x @ y + acc`` with the GPU's numerics; returns storage of ``accd``."""
    if accd is FLOAT64:
        return np.matmul(x.astype(np.float64), y.astype(np.float64)) + acc
    if accd.kind == "i":
        prod = np.matmul(x.astype(np.float64), y.astype(np.float64)).astype(np.int64)
        return (prod + acc.astype(np.int64)).astype(np.int32)
    if xd is FLOAT32 or yd is FLOAT32:
        # full fp32: the exact-ish float64 sum, rounded once
        r64 = np.matmul(x.astype(np.float64), y.astype(np.float64)) + acc.astype(np.float64)
        return convert(r64, FLOAT64, accd)
    r = np.matmul(x.astype(np.float32), y.astype(np.float32))
    r = r + acc.astype(np.float32)
    return convert(np.asarray(r, np.float32), FLOAT32, accd)


def mma(x, y, /, acc, *, use_fast_acc=False):
    """``x @ y + acc`` keeping ``acc``'s dtype (fp32/fp16 for float inputs, int32 for 8-bit
    integers); batch dimensions of ``x`` and ``y`` broadcast."""
    use_fast_acc = require_bool_flag(use_fast_acc, "use_fast_acc")
    tx, ty, tacc = to_tile(x, "x"), to_tile(y, "y"), to_tile(acc, "acc")
    if tx.ndim < 2:
        raise compile_error(f"Expect shape of `x` to be at least 2D, got {tx.shape}")
    if ty.ndim < 2:
        raise compile_error(f"Expect shape of `y` to be at least 2D, got {ty.shape}")
    xs, ys, _accs, out_shape = _broadcast_shapes(tx.shape, ty.shape, "ct.mma")
    if tacc.shape != out_shape:
        raise compile_error(*mma_acc_message("ct.mma", tacc.shape, out_shape))
    if use_fast_acc and tx._dt not in _FP8:
        raise compile_error(f"use_fast_acc is only supported for fp8 input dtypes "
                            f"(float8_e4m3fn, float8_e5m2), got {tx._dt}")
    try:
        _cutile.resolve_mma_dtype(tx._dt.real, ty._dt.real, tacc._dt.real)
    except TileTypeError as e:
        raise compile_error(f"mma: {e}") from None
    xv = np.broadcast_to(tx._v, xs)
    yv = np.broadcast_to(ty._v, ys)
    _count(xs, ys, tx._m, ty._m)
    valid = _result_valid(tx._m, ty._m, xs, ys, tacc._m, out_shape)
    return make(_product(xv, tx._dt, yv, ty._dt, tacc._v, tacc._dt), tacc._dt, valid=valid)


def matmul(x, y, /):
    """``x @ y`` in the promoted dtype of ``x`` and ``y`` (1-D operands allowed)."""
    tx, ty = to_tile(x, "x"), to_tile(y, "y")
    if tx.ndim == 0 or ty.ndim == 0:
        raise compile_error("matmul: operands must be at least 1-D tiles")
    xs, ys, accs, out_shape = _broadcast_shapes(tx.shape, ty.shape, "ct.matmul")
    common = promote(tx._dt, ty._dt)
    try:
        acc_real = _cutile.resolve_mma_dtype(common.real, common.real, None)
    except TileTypeError as e:
        raise compile_error(f"matmul: {e}") from None
    accd = as_dtype(acc_real)
    xv = convert(tx._v, tx._dt, common)
    xv = np.broadcast_to(xv.reshape(1, -1) if tx.ndim == 1 else xv, xs)
    yv = convert(ty._v, ty._dt, common)
    yv = np.broadcast_to(yv.reshape(-1, 1) if ty.ndim == 1 else yv, ys)
    xm = None if tx._m is None else np.broadcast_to(
        tx._m.reshape(1, -1) if tx.ndim == 1 else tx._m, xs)
    ym = None if ty._m is None else np.broadcast_to(
        ty._m.reshape(-1, 1) if ty.ndim == 1 else ty._m, ys)
    _count(xs, ys, xm, ym)
    zero = np.zeros(accs, dtype=accd.storage)
    r = _product(xv, common, yv, common, zero, accd)
    valid = _result_valid(xm, ym, xs, ys, None, accs)
    return make(convert(r, accd, common).reshape(out_shape), common,
                valid=None if valid is None else valid.reshape(out_shape))


def mma_scaled(x, x_scale, y, y_scale, /, acc):
    """Block-scaled MMA: ``sum_k x[i,k]*xs[i,k//B] * y[k,j]*ys[k//B,j] + acc[i,j]``."""
    tx, tsx = to_tile(x, "x"), to_tile(x_scale, "x_scale")
    ty, tsy = to_tile(y, "y"), to_tile(y_scale, "y_scale")
    tacc = to_tile(acc, "acc")
    for name, t in (("x", tx), ("y", ty), ("acc", tacc), ("x_scale", tsx), ("y_scale", tsy)):
        if t.ndim not in (2, 3):
            raise compile_error(f"Expect shape of `{name}` to be 2D or 3D, got {t.shape}")
    try:
        _cutile.check_mma_scaled_dtypes(tx._dt.real, tsx._dt.real, ty._dt.real, tsy._dt.real,
                                        tacc._dt.real)
    except TileTypeError as e:
        raise compile_error(f"mma_scaled: {e}") from None
    blocks = []
    for t, s, k_axis, name, sname in ((tx, tsx, tx.ndim - 1, "x", "x_scale"),
                                      (ty, tsy, ty.ndim - 2, "y", "y_scale")):
        if any(a != b for i, (a, b) in enumerate(zip(t.shape, s.shape)) if i != k_axis):
            raise compile_error(f"{sname} shape {s.shape} is not compatible with {name} shape "
                                f"{t.shape}. All dimensions except K axis {k_axis} must match")
        allowed = _cutile.mma_scaled_block_sizes(t._dt.real, s._dt.real)
        b, rem = divmod(t.shape[k_axis], s.shape[k_axis])
        if rem or b not in allowed:
            raise compile_error(
                f"For mma_scaled with dtype={t._dt}, scale_dtype={s._dt}: {name}.shape[{k_axis}] "
                f"must be an exact multiple of {sname}.shape[{k_axis}] with scaling block size "
                f"B = K // K_s in {set(allowed)}, got {name}.shape[{k_axis}] = "
                f"{t.shape[k_axis]} and {sname}.shape[{k_axis}] = {s.shape[k_axis]}")
        if s._dt.storage is None:
            from tilelab.interp.context import unsupported
            raise unsupported(f"mma_scaled with {s._dt} scales",
                              "numpy has no storage type for this format")
        blocks.append(b)
    xs, ys, _accs, out_shape = _broadcast_shapes(tx.shape, ty.shape, "ct.mma_scaled")
    if tacc.shape != out_shape:
        raise compile_error(*mma_acc_message("ct.mma_scaled", tacc.shape, out_shape))
    xf = tx._v.astype(np.float32) * np.repeat(tsx._v.astype(np.float32), blocks[0], axis=-1)
    yf = ty._v.astype(np.float32) * np.repeat(tsy._v.astype(np.float32), blocks[1], axis=-2)
    xf, yf = np.broadcast_to(xf, xs), np.broadcast_to(yf, ys)
    _count(xs, ys, tx._m, ty._m)
    r = np.matmul(xf, yf) + tacc._v.astype(np.float32)
    return make(np.asarray(r, np.float32), tacc._dt,
                valid=_result_valid(tx._m, ty._m, xs, ys, tacc._m, out_shape))


#: ``a @ b`` and its reflection (Tile's operators: see tilelab.interp.values.methods)
attach_operator("matmul", matmul)
