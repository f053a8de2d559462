"""Row reductions over the last dimension: sum, mean, max, min and argmax.

The output is one value per row, so each block owns ``block_m`` rows of it (a 1-D
partition) and streams those rows in ``(block_m, block_n)`` tiles, accumulating in
float32 in registers: any row length works with one read of the input. Padding is the
identity of the reduction (0 for sums, -inf for max, +inf for min). (Infinite padding
makes the loads plain loads rather than TMA; zero-padded TMA loads, where the rows fill
their tiles, were slower here: row_max of 16384 x 8192 bf16 255 us against 193 on the
H200, benchmarks/results/claims/row-kernels-h200/variant_probe_h200_2026-11-30d.json.)
The kernels compile with an occupancy hint of 8 (``ROW_HINTS["reduce"]``): without it
the loop became one 255-register block per SM, 3-4x slower. Max, min and argmax
propagate NaN as torch does (a row with a NaN has max NaN, and argmax the index of its
first NaN).
"""
from __future__ import annotations

from typing import Any

import cuda.tile as ct
import numpy as np

import tilelab as tl
from tilelab.kernels._host import (TILE_ELEMS, Call, CallCache, check_block, check_float,
                                   output, PairResult, pow2_ceil, row_kernel, rows_of,
                                   tensor_arg, TensorResult)

__all__ = ["row_sum", "row_mean", "row_max", "row_min", "row_argmax"]

SUM, MEAN, MAX, MIN = 0, 1, 2, 3
#: reduction name -> kernel code
REDUCTIONS = {"sum": SUM, "mean": MEAN, "max": MAX, "min": MIN}

NEG_INF = float("-inf")
POS_INF = float("inf")


def _reduce_tile(x, m, j, bm, bn, acc, OP):
    """acc combined with the reduction of column tile j of row tile m (float32)."""
    if OP == MAX:
        v = ct.load(x, index=(m, j), shape=(bm, bn), padding_mode=ct.PaddingMode.NEG_INF)
        r = ct.max(v.astype(ct.float32), axis=1, propagate_nan=True)
        return ct.maximum(acc, r, propagate_nan=True)
    if OP == MIN:
        v = ct.load(x, index=(m, j), shape=(bm, bn), padding_mode=ct.PaddingMode.POS_INF)
        r = ct.min(v.astype(ct.float32), axis=1, propagate_nan=True)
        return ct.minimum(acc, r, propagate_nan=True)
    v = ct.load(x, index=(m, j), shape=(bm, bn), padding_mode=ct.PaddingMode.ZERO)
    return acc + ct.sum(v.astype(ct.float32), axis=1)


@tl.kernel
def row_reduce_kernel(out: tl.Out, x: tl.In, OP: ct.Constant[int], BN: ct.Constant[int]):
    """out[i] = reduce(x[i, :]) for this block's rows, streaming BN columns at a time.

    Example:
        >>> row_reduce_kernel(out.partition(4), x, SUM, 1024)             # doctest: +SKIP
    """
    (m,) = out.tile_index
    (bm,) = out.tile_shape
    if OP == MAX:
        acc = ct.full((bm,), NEG_INF, dtype=ct.float32)
    elif OP == MIN:
        acc = ct.full((bm,), POS_INF, dtype=ct.float32)
    else:
        acc = ct.zeros((bm,), dtype=ct.float32)
    for j in range(ct.cdiv(x.shape[1], BN)):
        acc = _reduce_tile(x, m, j, bm, BN, acc, OP)
    if OP == MEAN:
        acc = acc / x.shape[1]
    out.store(acc.astype(out.dtype))


@tl.kernel
def row_argmax_kernel(values: tl.Out, indices: tl.Out, x: tl.In, BN: ct.Constant[int]):
    """values[i], indices[i] = max and first index of the max of row i (NaN wins).

    Example:
        >>> row_argmax_kernel(v.partition(4), i.partition(4), x, 1024)    # doctest: +SKIP
    """
    (m,) = values.tile_index
    (bm,) = values.tile_shape
    best = ct.full((bm,), NEG_INF, dtype=ct.float32)
    arg = ct.zeros((bm,), dtype=ct.int32)
    for j in range(ct.cdiv(x.shape[1], BN)):
        v = ct.load(x, index=(m, j), shape=(bm, BN), padding_mode=ct.PaddingMode.NEG_INF)
        v = v.astype(ct.float32)
        tile_max = ct.max(v, axis=1, propagate_nan=True)
        tile_arg = ct.argmax(v, axis=1, propagate_nan=True).astype(ct.int32) + j * BN
        # strictly greater keeps the first index on ties; a first NaN beats any number
        better = (tile_max > best) | (ct.isnan(tile_max) & (best == best))
        arg = ct.where(better, tile_arg, arg)
        best = ct.where(better, tile_max, best)
    values.store(best.astype(values.dtype))
    indices.store(arg.astype(indices.dtype))


def _reduce_setup(fn: str, x: Any, block_m: int | None, block_n: int | None
                  ) -> tuple[tl.Tensor, tl.Tensor, int, int]:
    block_m = check_block(block_m, "block_m", fn)
    block_n = check_block(block_n, "block_n", fn)
    xt = tensor_arg(x, "x", fn)
    check_float(xt, "x", fn)
    if xt.ndim == 0:
        raise ValueError(f"{fn}(): x must have at least one dimension")
    xv = rows_of(xt)
    rows, n = xv.shape
    bn = block_n or min(pow2_ceil(n), TILE_ELEMS)
    bm = block_m or max(1, min(pow2_ceil(rows), TILE_ELEMS // bn))
    return xt, xv, bm, bn


def _flat(t: tl.Tensor) -> tl.Tensor:
    """A 1-D view of a per-row output (a strided 1-D ``out`` is used as it is)."""
    return t if t.ndim == 1 else t.reshape(-1)


def _reduce_call(op: str, x: Any, *, block_m: int | None = None,
                 block_n: int | None = None, out: Any = None) -> Call:
    fn = f"row_{op}"
    xt, xv, bm, bn = _reduce_setup(fn, x, block_m, block_n)
    y = output(out, xt.shape[:-1], xt.dtype, xt.device, "out", fn)
    if xt.shape[-1] == 0 and xv.shape[0]:
        if op != "sum":
            raise ValueError(f"{fn}(): rows are empty (x has shape {xt.shape}); only "
                             "row_sum is defined for them")
        y.copy_(np.zeros(y.shape, y.dtype))
        return Call(row_reduce_kernel, None, y)
    if xv.shape[0] == 0:
        return Call(row_reduce_kernel, None, y)
    kernel = row_kernel(row_reduce_kernel, "reduce", xt.device)
    return Call(kernel, (_flat(y).partition(bm), xv, REDUCTIONS[op], bn), y)


def _argmax_call(x: Any, *, block_m: int | None = None, block_n: int | None = None,
                 out: Any = None) -> Call:
    fn = "row_argmax"
    xt, xv, bm, bn = _reduce_setup(fn, x, block_m, block_n)
    if out is not None and (not isinstance(out, tuple) or len(out) != 2):
        raise TypeError(f"{fn}(): out must be a pair (values, indices)")
    outs = out or (None, None)
    v = output(outs[0], xt.shape[:-1], xt.dtype, xt.device, "values", fn)
    i = output(outs[1], xt.shape[:-1], np.dtype("int64"), xt.device, "indices", fn)
    if xt.shape[-1] == 0 and xv.shape[0]:
        raise ValueError(f"{fn}(): rows are empty (x has shape {xt.shape})")
    if xv.shape[0] == 0:
        return Call(row_argmax_kernel, None, (v, i))
    args = (_flat(v).partition(bm), _flat(i).partition(bm), xv, bn)
    return Call(row_kernel(row_argmax_kernel, "reduce", xt.device), args, (v, i))


#: prepared calls (see tilelab.kernels._host)
_REDUCE = CallCache("reduce")


def _reduce(op: str, x: Any, block_m: int | None, block_n: int | None, out: Any,
            sync: bool, stream: Any) -> Any:
    """Run a reduction through the call cache (the body of every host function)."""
    if op == "argmax":
        call = _REDUCE.prepare(_argmax_call, x, block_m=block_m, block_n=block_n, out=out)
    else:
        call = _REDUCE.prepare(_reduce_call, op, x, block_m=block_m, block_n=block_n,
                               out=out)
    return call.run(sync, stream)


def row_sum(x: Any, *, block_m: int | None = None, block_n: int | None = None,
            out: Any = None, sync: bool = True, stream: Any = None) -> TensorResult:
    """Sum over the last dimension (float32 accumulation, x's dtype out).

    ``sync=False`` launches without waiting (on ``stream``, default the caller's) and
    returns ``(out, future)`` (see :mod:`tilelab.kernels`); so do the other reductions.

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.reduce import row_sum
        >>> x = tl.tensor(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32), device="cpu")
        >>> row_sum(x).numpy()
        array([3., 7.], dtype=float32)
    """
    return _reduce("sum", x, block_m, block_n, out, sync, stream)


def row_mean(x: Any, *, block_m: int | None = None, block_n: int | None = None,
             out: Any = None, sync: bool = True, stream: Any = None) -> TensorResult:
    """Mean over the last dimension (float32 accumulation).

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.reduce import row_mean
        >>> x = tl.tensor(np.array([[1.0, 2.0], [3.0, 5.0]], np.float32), device="cpu")
        >>> row_mean(x).numpy()
        array([1.5, 4. ], dtype=float32)
    """
    return _reduce("mean", x, block_m, block_n, out, sync, stream)


def row_max(x: Any, *, block_m: int | None = None, block_n: int | None = None,
            out: Any = None, sync: bool = True, stream: Any = None) -> TensorResult:
    """Maximum over the last dimension (NaN if the row has a NaN).

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.reduce import row_max
        >>> x = tl.tensor(np.array([[1.0, 2.0], [4.0, 3.0]], np.float32), device="cpu")
        >>> row_max(x).numpy()
        array([2., 4.], dtype=float32)
    """
    return _reduce("max", x, block_m, block_n, out, sync, stream)


def row_min(x: Any, *, block_m: int | None = None, block_n: int | None = None,
            out: Any = None, sync: bool = True, stream: Any = None) -> TensorResult:
    """Minimum over the last dimension (NaN if the row has a NaN).

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.reduce import row_min
        >>> x = tl.tensor(np.array([[1.0, 2.0], [4.0, 3.0]], np.float32), device="cpu")
        >>> row_min(x).numpy()
        array([1., 3.], dtype=float32)
    """
    return _reduce("min", x, block_m, block_n, out, sync, stream)


def row_argmax(x: Any, *, block_m: int | None = None, block_n: int | None = None,
               out: Any = None, sync: bool = True, stream: Any = None) -> PairResult:
    """``(values, indices)`` of the maximum of each row; indices are int64.

    Ties give the first index; a row with NaN gives NaN and the index of its first NaN
    (like ``torch.max(x, dim=-1)``). ``sync=False`` returns ``((values, indices),
    future)``.

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.reduce import row_argmax
        >>> x = tl.tensor(np.array([[1.0, 5.0, 5.0]], np.float32), device="cpu")
        >>> v, i = row_argmax(x)
        >>> v.numpy(), i.numpy()
        (array([5.], dtype=float32), array([1]))
    """
    return _reduce("argmax", x, block_m, block_n, out, sync, stream)
