"""Row softmax and log-softmax over the last dimension, in one pass or streaming.

* **One pass** (row fits a tile): each block owns ``block_m`` whole rows, padded with
  ``-inf`` to a power of two so padding adds nothing to the max or the sum; memory is
  read once and written once.
* **Online** (rows longer than the tile): each block owns a row tile and walks its
  column tiles. It first streams the row once keeping a running max ``m`` and a running
  sum ``s`` of ``exp(x - m)`` (rescaled by ``exp(m_old - m_new)`` when the max grows),
  then writes ``exp(x - m) / s`` tile by tile: two reads and one write.

The online form uses a persistent schedule (see ``_row_schedule``): the partition still
hands every tile to exactly one block, and the kernel recomputes the row statistics
whenever the loop hands it a tile of another row, so it is correct under any order.
Statistics are float32 whatever the storage dtype.
"""
from __future__ import annotations

from typing import Any

import cuda.tile as ct

import tilelab as tl
from tilelab.kernels._host import CallCache, TensorResult
from tilelab.kernels.elementwise import (_Call, _as_tensor, _check_block, _check_float,
                                         _output, _partition_2d, _row_kernel, _row_schedule,
                                         _row_tiles, _rows_of)

__all__ = ["softmax", "log_softmax"]

NEG_INF = float("-inf")


@tl.kernel
def softmax_rows_kernel(y: tl.Out, x: tl.In, LOG: ct.Constant[int]):
    """Softmax (or log-softmax) of whole rows: the tile of y spans the padded row.

    Example:
        >>> softmax_rows_kernel(y.partition((4, 1024)), x, 0)             # doctest: +SKIP
    """
    t = ct.load(x, index=y.tile_index, shape=y.tile_shape,
                padding_mode=ct.PaddingMode.NEG_INF).astype(ct.float32)
    d = t - ct.max(t, axis=1, keepdims=True)
    e = ct.exp(d)
    s = ct.sum(e, axis=1, keepdims=True)
    if LOG:
        r = d - ct.log(s)
    else:
        r = e * (1.0 / s)     # one division per row: a float32 divide is ~10 instructions
    y.store(r.astype(y.dtype))


def _online_stats(x, m, bm, bn):
    """Running (max, sum of exp(x - max)) of row tile m, streaming bn columns at a time."""
    mx = ct.full((bm, 1), NEG_INF, dtype=ct.float32)
    s = ct.full((bm, 1), 0.0, dtype=ct.float32)
    for j in range(ct.cdiv(x.shape[1], bn)):
        v = ct.load(x, index=(m, j), shape=(bm, bn),
                    padding_mode=ct.PaddingMode.NEG_INF).astype(ct.float32)
        new = ct.maximum(mx, ct.max(v, axis=1, keepdims=True))
        # a chunk of only -inf so far would make exp(-inf - -inf) = NaN: shift by 0 then
        shift = ct.where(new == NEG_INF, 0.0, new)
        s = s * ct.exp(mx - shift) + ct.sum(ct.exp(v - shift), axis=1, keepdims=True)
        mx = new
    return mx, s


@tl.kernel
def softmax_online_kernel(y: tl.Out, x: tl.In, LOG: ct.Constant[int]):
    """Softmax of long rows: online statistics, then one write per column tile.

    Launch with ``y.partition((bm, bn), schedule=_row_schedule(rows, bm))``.

    Example:
        >>> sched = _row_schedule(64, 1)
        >>> softmax_online_kernel(y.partition((1, 4096), schedule=sched), x, 0)  # doctest: +SKIP
    """
    bm, bn = y.tile_shape
    row = -1
    mx = ct.full((bm, 1), NEG_INF, dtype=ct.float32)
    s = ct.full((bm, 1), 1.0, dtype=ct.float32)
    for t in y.tiles():
        m, n = y.tile_index_of(t)
        if m != row:  # a new row tile: stream it once for its statistics
            mx, s = _online_stats(x, m, bm, bn)
            row = m
        v = ct.load(x, index=(m, n), shape=(bm, bn),
                    padding_mode=ct.PaddingMode.NEG_INF).astype(ct.float32)
        if LOG:
            r = v - mx - ct.log(s)
        else:
            r = ct.exp(v - mx) * (1.0 / s)
        y.store(r.astype(y.dtype), at=t)


def _softmax_call(x: Any, *, log: bool = False, block_m: int | None = None,
                  block_n: int | None = None, out: Any = None) -> _Call:
    fn = "log_softmax" if log else "softmax"
    block_m = _check_block(block_m, "block_m", fn)
    block_n = _check_block(block_n, "block_n", fn)
    xt = _as_tensor(x, "x", fn)
    _check_float(xt, "x", fn)
    if xt.ndim == 0:
        raise ValueError(f"{fn}(): x must have at least one dimension")
    y = _output(out, xt.shape, xt.dtype, xt.device, "out", fn)
    if xt.size == 0:
        return _Call(softmax_rows_kernel, None, y)
    xv, yv = _rows_of(xt), _rows_of(y)
    rows, n = xv.shape
    bm, bn, looped = _row_tiles(rows, n, block_m, block_n)
    if looped:
        part = yv.partition((bm, bn), schedule=_row_schedule(rows, bm))
        return _Call(softmax_online_kernel, (part, xv, int(log)), y)
    kernel = _row_kernel(softmax_rows_kernel, "softmax", xt.device)
    return _Call(kernel, (_partition_2d(yv, bm, bn), xv, int(log)), y)


#: prepared calls (see tilelab.kernels._host)
_SOFTMAX = CallCache("softmax")


def softmax(x: Any, *, block_m: int | None = None, block_n: int | None = None,
            out: Any = None, sync: bool = True, stream: Any = None) -> TensorResult:
    """Softmax over the last dimension (float32 statistics, rounded on the store).

    Rows up to 8192 elements are done in one pass (the tile spans the row); longer rows,
    or any ``block_n`` smaller than the row, use the online two-pass form. ``block_m``
    rows share a tile. A row that is entirely ``-inf`` gives NaN, as in torch.
    ``sync=False`` launches without waiting (on ``stream``, default tilelab's) and
    returns ``(out, future)`` (see :mod:`tilelab.kernels`).

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.softmax import softmax
        >>> x = tl.tensor(np.log(np.array([[1.0, 3.0]], np.float32)), device="cpu")
        >>> softmax(x).numpy()
        array([[0.25, 0.75]], dtype=float32)
    """
    return _SOFTMAX.prepare(_softmax_call, x, block_m=block_m, block_n=block_n,
                            out=out).run(sync, stream)


def log_softmax(x: Any, *, block_m: int | None = None, block_n: int | None = None,
                out: Any = None, sync: bool = True, stream: Any = None) -> TensorResult:
    """``log(softmax(x))`` over the last dimension, computed as ``x - max - log(sum)``.

    ``sync=False`` returns ``(out, future)``, as for :func:`softmax`.

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.softmax import log_softmax
        >>> x = tl.tensor(np.zeros((1, 4), np.float32), device="cpu")
        >>> np.round(log_softmax(x).numpy(), 4)
        array([[-1.3863, -1.3863, -1.3863, -1.3863]], dtype=float32)
    """
    return _SOFTMAX.prepare(_softmax_call, x, log=True, block_m=block_m, block_n=block_n,
                            out=out).run(sync, stream)
