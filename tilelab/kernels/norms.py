"""Layer norm and RMSNorm over the last dimension, optionally fused with a residual add.

``layer_norm``: ``(h - mean) / sqrt(var + eps) * weight (+ bias)`` with the biased
variance; ``rms_norm``: ``h / sqrt(mean(h^2) + eps) * weight``. The ``add_*`` forms
compute ``h = x + residual`` (rounded to the storage dtype, as an unfused
``x + residual`` would be), store ``h`` and normalize that stored ``h`` — one pass
instead of three kernels. Statistics are float32.

Rows up to 8192 elements fit one tile (one read, one write; the variance is the exact
two-pass ``mean((h - mean)^2)`` over the tile in registers). Longer rows use a
persistent schedule (see ``row_schedule``) and stream the row twice: once for the
statistics, merging per-tile means and squared deviations with Chan's formula (no
``E[h^2] - E[h]^2`` cancellation), then once to normalize and store. ``rms_norm`` of
bf16/fp16 rows of 16384 or 32768 still reads them once, as 128 or 256 sub-rows of 128
in one tile (``rms_split_kernel``).
"""
from __future__ import annotations

from typing import Any

import cuda.tile as ct

import tilelab as tl
from tilelab.kernels._host import (Call, CallCache, check_block, check_float,
                                   check_same_device, grid_schedule, long_row_split, output,
                                   PairResult, partition_2d, row_kernel, row_schedule,
                                   row_tiles, rows_of, tensor_arg, TensorResult)

#: Element budget of a whole-row tile of the normalization kernels: 2 rows of 4096.
#: (RMSNorm 65536 x 4096 bf16 on the H200 without an occupancy hint: 364 us with 8 rows
#: per tile, 1016 us with 1; with the occupancy hint of ``ROW_HINTS`` 2 rows fit without
#: register spills.)
NORM_TILE_ELEMS = 8192

__all__ = ["layer_norm", "rms_norm", "add_layer_norm", "add_rms_norm"]


# ======================================================================================
# kernel helpers
# ======================================================================================


def _load_h(x, r, m, j, bm, bn, ADD):
    """Tile (m, j) of h: x, or x + r rounded to x's dtype, as float32 (zero padded)."""
    v = ct.load(x, index=(m, j), shape=(bm, bn), padding_mode=ct.PaddingMode.ZERO)
    v = v.astype(ct.float32)
    if ADD:
        u = ct.load(r, index=(m, j), shape=(bm, bn), padding_mode=ct.PaddingMode.ZERO)
        v = (v + u.astype(ct.float32)).astype(x.dtype).astype(ct.float32)
    return v


def _col_mask(j, bn, n):
    """(1, bn) mask of the columns of column tile j that lie inside a row of n."""
    cols = j * bn + ct.arange(bn, dtype=ct.int32)
    return ct.reshape(cols < n, (1, bn))


def _tile_stats(h, n, bm, bn, RMS, eps):
    """(mean, rstd) of rows that fit tile h (zero padded); mean is 0 for RMSNorm."""
    if RMS:
        mean = ct.zeros((bm, 1), dtype=ct.float32)
        var = ct.sum(h * h, axis=1, keepdims=True) / n
    else:
        mean = ct.sum(h, axis=1, keepdims=True) / n
        d = ct.where(_col_mask(0, bn, n), h - mean, 0.0)
        var = ct.sum(d * d, axis=1, keepdims=True) / n
    return mean, ct.rsqrt(var + eps)


def _streamed_stats(x, r, m, bm, bn, ADD, RMS, eps):
    """(mean, rstd) of row tile m, streaming column tiles and merging (Chan et al.)."""
    n = x.shape[1]
    mean = ct.zeros((bm, 1), dtype=ct.float32)
    m2 = ct.zeros((bm, 1), dtype=ct.float32)
    for j in range(ct.cdiv(n, bn)):
        h = _load_h(x, r, m, j, bm, bn, ADD)
        if RMS:
            m2 = m2 + ct.sum(h * h, axis=1, keepdims=True)
        else:
            seen = j * bn * 1.0                       # columns merged so far (all full)
            count = ct.minimum(bn, n - j * bn) * 1.0  # valid columns of this tile
            tile_mean = ct.sum(h, axis=1, keepdims=True) / count
            d = ct.where(_col_mask(j, bn, n), h - tile_mean, 0.0)
            delta = tile_mean - mean
            total = seen + count
            mean = mean + delta * (count / total)
            m2 = m2 + ct.sum(d * d, axis=1, keepdims=True) + \
                delta * delta * (seen * count / total)
    return mean, ct.rsqrt(m2 / n + eps)


def _affine(h, mean, rstd, w, b, j, bn, HAS_BIAS):
    """(h - mean) * rstd * w (+ b) for column tile j (w, b are 1-D, zero padded)."""
    g = ct.load(w, index=(j,), shape=(bn,), padding_mode=ct.PaddingMode.ZERO)
    y = (h - mean) * rstd * ct.reshape(g.astype(ct.float32), (1, bn))
    if HAS_BIAS:
        c = ct.load(b, index=(j,), shape=(bn,), padding_mode=ct.PaddingMode.ZERO)
        y = y + ct.reshape(c.astype(ct.float32), (1, bn))
    return y


# ======================================================================================
# kernels
# ======================================================================================


@tl.kernel
def norm_rows_kernel(y: tl.Out, x: tl.In, w: tl.In, b: tl.In, eps: float,
                     RMS: ct.Constant[int], HAS_BIAS: ct.Constant[int]):
    """Layer norm (RMS=0) or RMSNorm (RMS=1) of rows that fit one tile of y.

    ``b`` is only read when HAS_BIAS (pass ``w`` again otherwise).

    Example:
        >>> norm_rows_kernel(y.partition((2, 4096)), x, w, w, 1e-6, 1, 0)   # doctest: +SKIP
    """
    bm, bn = y.tile_shape
    m, j = y.tile_index
    h = _load_h(x, x, m, j, bm, bn, 0)
    mean, rstd = _tile_stats(h, x.shape[1], bm, bn, RMS, eps)
    y.store(_affine(h, mean, rstd, w, b, j, bn, HAS_BIAS).astype(y.dtype))


@tl.kernel
def rms_split_kernel(y: tl.Out, x: tl.In, w: tl.In, eps: float):
    """RMSNorm of one long row per tile, held as G sub-rows (one read of x, not two).

    ``x`` and ``y`` are the (rows * G, W) views of the (rows, n) tensors, ``y``
    partitioned (G, W); ``w`` is the (G, W) view of the weight. The sum of squares
    reduces each sub-row, then the G partial sums.

    Example:
        >>> rms_split_kernel(y.reshape(rows * 128, 128).partition((128, 128)),
        ...                  x.reshape(rows * 128, 128), w.reshape(128, 128),
        ...                  1e-6)                                        # doctest: +SKIP
    """
    g, wd = y.tile_shape
    m, _ = y.tile_index
    h = _load_h(x, x, m, 0, g, wd, 0)
    ss = ct.sum(ct.sum(h * h, axis=1, keepdims=True), axis=0, keepdims=True)
    gw = ct.load(w, index=(0, 0), shape=(g, wd), padding_mode=ct.PaddingMode.ZERO)
    y.store((h * ct.rsqrt(ss / (g * wd) + eps) * gw.astype(ct.float32)).astype(y.dtype))


@tl.kernel
def add_norm_rows_kernel(y: tl.Out, h_out: tl.Out, x: tl.In, r: tl.In, w: tl.In,
                         b: tl.In, eps: float, RMS: ct.Constant[int],
                         HAS_BIAS: ct.Constant[int]):
    """h = x + r (stored) and y = norm(h), rows that fit one tile.

    Example:
        >>> add_norm_rows_kernel(y.partition((2, 4096)), h.partition((2, 4096)),
        ...                      x, r, w, w, 1e-6, 1, 0)                   # doctest: +SKIP
    """
    bm, bn = y.tile_shape
    m, j = y.tile_index
    h = _load_h(x, r, m, j, bm, bn, 1)
    h_out.store(h.astype(h_out.dtype))
    mean, rstd = _tile_stats(h, x.shape[1], bm, bn, RMS, eps)
    y.store(_affine(h, mean, rstd, w, b, j, bn, HAS_BIAS).astype(y.dtype))


@tl.kernel
def norm_looped_kernel(y: tl.Out, x: tl.In, w: tl.In, b: tl.In, eps: float,
                       RMS: ct.Constant[int], HAS_BIAS: ct.Constant[int]):
    """Norm of long rows: streamed statistics, then one store per column tile.

    Launch with ``y.partition((bm, bn), schedule=row_schedule(rows, bm))``.

    Example:
        >>> sched = row_schedule(64, 1)
        >>> norm_looped_kernel(y.partition((1, 4096), schedule=sched),
        ...                    x, w, w, 1e-6, 1, 0)                       # doctest: +SKIP
    """
    bm, bn = y.tile_shape
    row = -1
    mean = ct.zeros((bm, 1), dtype=ct.float32)
    rstd = ct.zeros((bm, 1), dtype=ct.float32)
    for t in y.tiles():
        m, j = y.tile_index_of(t)
        if m != row:
            mean, rstd = _streamed_stats(x, x, m, bm, bn, 0, RMS, eps)
            row = m
        h = _load_h(x, x, m, j, bm, bn, 0)
        y.store(_affine(h, mean, rstd, w, b, j, bn, HAS_BIAS).astype(y.dtype), at=t)


@tl.kernel
def add_norm_looped_kernel(y: tl.Out, h_out: tl.Out, x: tl.In, r: tl.In, w: tl.In,
                           b: tl.In, eps: float, RMS: ct.Constant[int],
                           HAS_BIAS: ct.Constant[int]):
    """h = x + r and y = norm(h) for long rows (statistics pass, then store pass).

    Example:
        >>> sched = row_schedule(64, 1)
        >>> add_norm_looped_kernel(y.partition((1, 4096), schedule=sched),
        ...                        h.partition((1, 4096), schedule=sched),
        ...                        x, r, w, w, 1e-6, 1, 0)                 # doctest: +SKIP
    """
    bm, bn = y.tile_shape
    row = -1
    mean = ct.zeros((bm, 1), dtype=ct.float32)
    rstd = ct.zeros((bm, 1), dtype=ct.float32)
    for t in y.tiles():
        m, j = y.tile_index_of(t)
        if m != row:
            mean, rstd = _streamed_stats(x, r, m, bm, bn, 1, RMS, eps)
            row = m
        h = _load_h(x, r, m, j, bm, bn, 1)
        h_out.store(h.astype(h_out.dtype), at=t)
        y.store(_affine(h, mean, rstd, w, b, j, bn, HAS_BIAS).astype(y.dtype), at=t)


# ======================================================================================
# host
# ======================================================================================


def _norm_operands(fn: str, x: Any, weight: Any, bias: Any, residual: Any, eps: float
                   ) -> tuple[tl.Tensor, tl.Tensor, tl.Tensor | None, tl.Tensor | None, str]:
    """(x, weight, bias or None, residual or None, device), checked."""
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not eps >= 0:
        raise ValueError(f"{fn}(): eps must be a non-negative float, got {eps!r}")
    xt = tensor_arg(x, "x", fn)
    check_float(xt, "x", fn)
    if xt.ndim == 0:
        raise ValueError(f"{fn}(): x must have at least one dimension")
    n = xt.shape[-1]
    wt = tensor_arg(weight, "weight", fn)
    check_float(wt, "weight", fn)
    if wt.shape != (n,):
        raise ValueError(f"{fn}(): weight must have shape ({n},) (the last dimension of x "
                         f"{xt.shape}), got {wt.shape}")
    bt = None
    if bias is not None:
        bt = tensor_arg(bias, "bias", fn)
        check_float(bt, "bias", fn)
        if bt.shape != (n,):
            raise ValueError(f"{fn}(): bias must have shape ({n},), got {bt.shape}")
    rt = None
    if residual is not None:
        rt = tensor_arg(residual, "residual", fn)
        if rt.shape != xt.shape or rt.dtype != xt.dtype:
            raise ValueError(f"{fn}(): residual must match x ({xt.shape} {xt.dtype.name}), "
                             f"got {rt.shape} {rt.dtype.name}")
    device = check_same_device(fn, x=xt, weight=wt, bias=bt, residual=rt)
    return xt, wt, bt, rt, device


def _norm_outputs(fn: str, out: Any, xt: tl.Tensor, fused: bool,
                  device: str) -> tuple[tl.Tensor, tl.Tensor | None]:
    """(y, h): the output, and with a residual the sum ``h`` (None without one)."""
    outs = out if fused and out is not None else (out, None)
    if fused and out is not None and (not isinstance(out, tuple) or len(out) != 2):
        raise TypeError(f"{fn}(): out must be a pair (out, h) of tensors")
    y = output(outs[0], xt.shape, xt.dtype, device, "out", fn)
    h = None if not fused else output(outs[1], xt.shape, xt.dtype, device, "h", fn)
    return y, h


def _norm_call(fn: str, x: Any, weight: Any, bias: Any, residual: Any, eps: float,
               rms: bool, block_m: int | None, block_n: int | None, out: Any) -> Call:
    """The launch of a (fused add +) layer norm or RMSNorm (see :func:`layer_norm`)."""
    block_m = check_block(block_m, "block_m", fn)
    block_n = check_block(block_n, "block_n", fn)
    xt, wt, bt, rt, device = _norm_operands(fn, x, weight, bias, residual, eps)
    y, h = _norm_outputs(fn, out, xt, residual is not None, device)
    result = y if h is None else (y, h)
    if xt.size == 0:
        return Call(norm_rows_kernel, None, result)
    n = xt.shape[-1]
    xv, yv = rows_of(xt), rows_of(y)
    rows = xv.shape[0]
    bm, bn, looped = row_tiles(rows, n, block_m, block_n, NORM_TILE_ELEMS)
    g = long_row_split(n, xt.dtype.itemsize) if looped else 0
    if (g and rms and rt is None and block_m is None and block_n is None
            and xv.is_contiguous and yv.is_contiguous and wt.is_contiguous):
        # RMSNorm of 16-bit rows of 16384/32768 in one pass, as G sub-rows of 128: on the
        # H200 (claims/row-kernels-h200/looped_hints_h200_2026-11-30d.json) 1.3x the looped
        # form (4096 x 16384 bf16 93.2 -> 71.9 us, torch 109.5; 2048 x 32768 103.7 -> 80.7,
        # torch 108.1). Layer norm was slower so (123 vs 105 us at 16384); fused add untimed.
        wd = n // g
        kernel = row_kernel(rms_split_kernel, "norm_16k" if n <= 16384 else "norm_32k",
                            device)
        ys = yv.reshape(rows * g, wd)
        return Call(kernel, (partition_2d(ys, g, wd), xv.reshape(rows * g, wd),
                             wt.reshape(g, wd), float(eps)), result)
    sched = row_schedule(rows, bm) if looped else grid_schedule(-(-rows // bm))
    flags = (float(eps), int(rms), int(bt is not None))
    b_arg = bt if bt is not None else wt      # never read when HAS_BIAS is 0
    looped_hints = "norm_looped" if rms else "layer_norm_looped"
    if h is None:
        kernel = (row_kernel(norm_looped_kernel, looped_hints, device) if looped
                  else row_kernel(norm_rows_kernel, "norm", device))
        args = (yv.partition((bm, bn), schedule=sched), xv, wt, b_arg) + flags
    else:
        kernel = (row_kernel(add_norm_looped_kernel, looped_hints, device) if looped
                  else row_kernel(add_norm_rows_kernel, "norm", device))
        args = (yv.partition((bm, bn), schedule=sched),
                rows_of(h).partition((bm, bn), schedule=sched), xv, rows_of(rt), wt,
                b_arg) + flags
    return Call(kernel, args, result)


#: prepared calls (see tilelab.kernels._host)
_NORM = CallCache("norm")


def _norm(fn: str, x: Any, weight: Any, bias: Any, residual: Any, eps: float, rms: bool,
          block_m: int | None, block_n: int | None, out: Any, sync: bool,
          stream: Any) -> Any:
    """Run one of the norms through the call cache (the body of every host function)."""
    return _NORM.prepare(_norm_call, fn, x, weight, bias, residual, eps, rms, block_m,
                         block_n, out=out).run(sync, stream)


def layer_norm(x: Any, weight: Any, bias: Any = None, *, eps: float = 1e-5,
               block_m: int | None = None, block_n: int | None = None,
               out: Any = None, sync: bool = True, stream: Any = None) -> TensorResult:
    """Layer norm over the last dimension: ``(x - mean) / sqrt(var + eps) * w + b``.

    ``weight``/``bias`` are ``(N,)`` float tensors (any float dtype; ``bias`` may be
    None). Statistics are float32; the result has x's dtype. ``block_n >= N`` (default
    up to 8192) normalizes whole rows in one pass; smaller ``block_n`` streams them.
    ``sync=False`` launches without waiting (on ``stream``, default the caller's) and
    returns ``(out, future)`` (see :mod:`tilelab.kernels`); so do the other norms.

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.norms import layer_norm
        >>> x = tl.tensor(np.array([[1.0, 3.0]], np.float32), device="cpu")
        >>> w = tl.tensor(np.ones(2, np.float32), device="cpu")
        >>> np.round(layer_norm(x, w, eps=0.0).numpy(), 4)
        array([[-1.,  1.]], dtype=float32)
    """
    return _norm("layer_norm", x, weight, bias, None, eps, False, block_m, block_n, out,
                 sync, stream)


def rms_norm(x: Any, weight: Any, *, eps: float = 1e-6, block_m: int | None = None,
             block_n: int | None = None, out: Any = None, sync: bool = True,
             stream: Any = None) -> TensorResult:
    """RMSNorm over the last dimension: ``x / sqrt(mean(x^2) + eps) * weight``.

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.norms import rms_norm
        >>> x = tl.tensor(np.array([[3.0, 4.0]], np.float32), device="cpu")
        >>> w = tl.tensor(np.ones(2, np.float32), device="cpu")
        >>> np.round(rms_norm(x, w, eps=0.0).numpy(), 4)
        array([[0.8485, 1.1314]], dtype=float32)
    """
    return _norm("rms_norm", x, weight, None, None, eps, True, block_m, block_n, out,
                 sync, stream)


def add_layer_norm(x: Any, residual: Any, weight: Any, bias: Any = None, *,
                   eps: float = 1e-5, block_m: int | None = None,
                   block_n: int | None = None, out: Any = None, sync: bool = True,
                   stream: Any = None) -> PairResult:
    """``h = x + residual``; returns ``(layer_norm(h), h)`` from one fused pass.

    ``h`` is rounded to x's dtype before it is normalized, so the result equals
    ``layer_norm(x + residual)`` computed unfused. ``out`` may be a pair ``(out, h)``.
    ``sync=False`` returns ``((y, h), future)``.

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.norms import add_layer_norm
        >>> x = tl.tensor(np.array([[1.0, 2.0]], np.float32), device="cpu")
        >>> w = tl.tensor(np.ones(2, np.float32), device="cpu")
        >>> y, h = add_layer_norm(x, x, w, eps=0.0)
        >>> h.numpy(), np.round(y.numpy(), 4)
        (array([[2., 4.]], dtype=float32), array([[-1.,  1.]], dtype=float32))
    """
    return _norm("add_layer_norm", x, weight, bias, residual, eps, False, block_m, block_n,
                 out, sync, stream)


def add_rms_norm(x: Any, residual: Any, weight: Any, *, eps: float = 1e-6,
                 block_m: int | None = None, block_n: int | None = None,
                 out: Any = None, sync: bool = True, stream: Any = None) -> PairResult:
    """``h = x + residual``; returns ``(rms_norm(h), h)`` from one fused pass.

    This is the pre-norm transformer step: the new residual stream ``h`` and the
    normalized input of the next block, reading x and residual once.

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.norms import add_rms_norm
        >>> x = tl.tensor(np.array([[1.0, 1.0]], np.float32), device="cpu")
        >>> r = tl.tensor(np.array([[2.0, 3.0]], np.float32), device="cpu")
        >>> w = tl.tensor(np.ones(2, np.float32), device="cpu")
        >>> y, h = add_rms_norm(x, r, w, eps=0.0)
        >>> h.numpy(), np.round(y.numpy(), 4)
        (array([[3., 4.]], dtype=float32), array([[0.8485, 1.1314]], dtype=float32))
    """
    return _norm("add_rms_norm", x, weight, None, residual, eps, True, block_m, block_n,
                 out, sync, stream)
