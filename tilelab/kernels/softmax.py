"""Row softmax and log-softmax over the last dimension, in one pass or streaming.

* **One pass** (row fits a tile): each block owns ``block_m`` whole rows, padded with
  ``-inf`` to a power of two so padding adds nothing to the max or the sum; memory is
  read once and written once. Exponentials are ``exp2`` of the shift times log2(e),
  flushing denormals (one MUFU op each: 11% faster than ``exp`` on the H200).
* **Split** (by default when one row fills a tile, rows of 4096-8192, and bf16/fp16
  rows of 16384 or 32768): the row is viewed as G sub-rows of n/G, so the max and the
  sum reduce within each sub-row and then over G partial results; still one read and one
  write (4% faster at 8192 on the H200, 1.5-1.6x the online form at 16384-32768:
  ``benchmarks/results/claims/row-kernels-h200/``: variant_probe_*c/d, looped_hints_*c).
* **Online** (rows longer than the tile): each block owns a row tile and walks its
  column tiles. It first streams the row once keeping a running max ``m`` and a running
  sum ``s`` of ``exp(x - m)`` (rescaled by ``exp(m_old - m_new)`` when the max grows),
  then writes ``exp(x - m) / s`` tile by tile: two reads and one write.

The online form uses a persistent schedule (see ``row_schedule``): the partition still
hands every tile to exactly one block, and the kernel recomputes the row statistics
whenever the loop hands it a tile of another row, so it is correct under any order.
Statistics are float32 whatever the storage dtype.
"""
from __future__ import annotations

from typing import Any

import cuda.tile as ct

import tilelab as tl
from tilelab.kernels._host import (Call, CallCache, check_block, check_float,
                                   long_row_split, output, partition_2d, pow2_ceil,
                                   row_kernel, row_schedule, row_tiles, rows_of, tensor_arg,
                                   TensorResult)

__all__ = ["softmax", "log_softmax"]

NEG_INF = float("-inf")
LOG2E = 1.4426950408889634
#: a long row is split into at most this many sub-rows of at least SPLIT_MIN_WIDTH
SPLIT_MAX_ROWS = 256
SPLIT_MIN_WIDTH = 128
#: the hints (``ROW_HINTS`` entry) of a one-pass tile by its element count: a row of
#: 16384 compiles without spills at occupancy 2 (128 registers), one of 32768 at
#: occupancy 1 with 8 worker warps (384 threads, 168 registers). On the H200 (bf16,
#: benchmarks/results/claims/row-kernels-h200/looped_hints_h200_2026-11-30c.json): 4096 x
#: 16384 in 79.1 us against 129.4 for the online form and torch's 127.8; 2048 x 32768 in
#: 98.8 against 145.6 and 126.8.
SPLIT_HINTS = ((8192, "softmax"), (16384, "softmax_16k"), (32768, "softmax_32k"))


def _split_rows(n: int) -> int:
    """How many sub-rows (a power of two dividing n) ``softmax_split_kernel`` views a
    row of n as: up to 64, each at least 128 wide; 1 when n has no such split.

    Example:
        >>> _split_rows(8192), _split_rows(6144), _split_rows(1000), _split_rows(129)
        (64, 32, 4, 1)
        >>> _split_rows(32768)
        256
    """
    g = 1
    while (g < SPLIT_MAX_ROWS and n % (2 * g) == 0
           and n // (2 * g) >= SPLIT_MIN_WIDTH):
        g *= 2
    return g


def _load_rows(x, index, shape, PAD):
    """A tile of whole rows as float32. Rows padded to a power of two (``PAD``) are
    padded with -inf, which adds nothing to a max or a sum of exponentials; otherwise
    zero padding (only whole rows past the end, which are never stored) lets the load
    use TMA: -inf padding makes it a plain load, 1.8x slower on the H200."""
    if PAD:
        t = ct.load(x, index=index, shape=shape, padding_mode=ct.PaddingMode.NEG_INF)
    else:
        t = ct.load(x, index=index, shape=shape, padding_mode=ct.PaddingMode.ZERO)
    return t.astype(ct.float32)


@tl.kernel
def softmax_rows_kernel(y: tl.Out, x: tl.In, LOG: ct.Constant[int], PAD: ct.Constant[int]):
    """Softmax (or log-softmax) of whole rows: the tile of y spans the row (padded with
    -inf to a power of two when ``PAD``).

    Example:
        >>> softmax_rows_kernel(y.partition((4, 1024)), x, 0, 0)          # doctest: +SKIP
    """
    t = _load_rows(x, y.tile_index, y.tile_shape, PAD)
    d = t - ct.max(t, axis=1, keepdims=True)
    e = ct.exp2(d * LOG2E, flush_to_zero=True)
    s = ct.sum(e, axis=1, keepdims=True)
    if LOG:
        r = d - ct.log(s)
    else:
        r = e * (1.0 / s)     # one division per row: a float32 divide is ~10 instructions
    y.store(r.astype(y.dtype))


@tl.kernel
def softmax_split_kernel(y: tl.Out, x: tl.In, LOG: ct.Constant[int], PAD: ct.Constant[int]):
    """Softmax (or log-softmax) of one long row per tile, held as G sub-rows.

    ``x`` and ``y`` are the (rows * G, n / G) views of the (rows, n) tensors and ``y`` is
    partitioned (G, W): each tile is one whole row (sub-rows padded with -inf to W when
    ``PAD``). The max and the sum reduce each sub-row first and then the G partial
    results (weighted by exp(m_sub - m_row)).

    Example:
        >>> softmax_split_kernel(y.reshape((rows * 64, 128)).partition((64, 128)),
        ...                      x.reshape((rows * 64, 128)), 0, 0)       # doctest: +SKIP
    """
    t = _load_rows(x, y.tile_index, y.tile_shape, PAD)
    m_sub = ct.max(t, axis=1, keepdims=True)
    # a sub-row of only -inf would make exp(-inf - -inf) = NaN: shift it by 0 instead
    e = ct.exp2((t - ct.where(m_sub == NEG_INF, 0.0, m_sub)) * LOG2E, flush_to_zero=True)
    m = ct.max(m_sub, axis=0, keepdims=True)
    w = ct.exp2((m_sub - m) * LOG2E, flush_to_zero=True)    # NaN only if the row is -inf
    s = ct.sum(ct.sum(e, axis=1, keepdims=True) * w, axis=0, keepdims=True)
    if LOG:
        r = t - (m + ct.log(s))
    else:
        r = e * (w * (1.0 / s))
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

    Launch with ``y.partition((bm, bn), schedule=row_schedule(rows, bm))``.

    Example:
        >>> sched = row_schedule(64, 1)
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
                  block_n: int | None = None, out: Any = None) -> Call:
    fn = "log_softmax" if log else "softmax"
    block_m = check_block(block_m, "block_m", fn)
    block_n = check_block(block_n, "block_n", fn)
    xt = tensor_arg(x, "x", fn)
    check_float(xt, "x", fn)
    if xt.ndim == 0:
        raise ValueError(f"{fn}(): x must have at least one dimension")
    y = output(out, xt.shape, xt.dtype, xt.device, "out", fn)
    if xt.size == 0:
        return Call(softmax_rows_kernel, None, y)
    xv, yv = rows_of(xt), rows_of(y)
    rows, n = xv.shape
    bm, bn, looped = row_tiles(rows, n, block_m, block_n)
    g = _split_rows(n)
    w = pow2_ceil(n // g)
    long_one_pass = looped and long_row_split(n, xt.dtype.itemsize) == g
    if (block_m is None and block_n is None and (long_one_pass or (not looped and bm == 1))
            and g >= 8 and xv.is_contiguous and yv.is_contiguous):
        # one row per tile, as G sub-rows: 4-6% faster at 8192 on the H200, and read
        # once instead of twice up to 32768 (1.5-1.6x the online form)
        xs, ys = xv.reshape(rows * g, n // g), yv.reshape(rows * g, n // g)
        hints = next(name for most, name in SPLIT_HINTS if g * w <= most)
        kernel = row_kernel(softmax_split_kernel, hints, xt.device)
        return Call(kernel, (partition_2d(ys, g, w), xs, int(log), int(w != n // g)), y)
    if looped:
        part = yv.partition((bm, bn), schedule=row_schedule(rows, bm))
        hints = "softmax_online_f32" if xt.dtype.itemsize == 4 else "softmax_online"
        kernel = row_kernel(softmax_online_kernel, hints, xt.device)
        return Call(kernel, (part, xv, int(log)), y)
    kernel = row_kernel(softmax_rows_kernel, "softmax", xt.device)
    return Call(kernel, (partition_2d(yv, bm, bn), xv, int(log), int(bn != n)), y)


#: prepared calls (see tilelab.kernels._host)
_SOFTMAX = CallCache("softmax")


def softmax(x: Any, *, block_m: int | None = None, block_n: int | None = None,
            out: Any = None, sync: bool = True, stream: Any = None) -> TensorResult:
    """Softmax over the last dimension (float32 statistics, rounded on the store).

    Rows up to 8192 elements, and bf16/fp16 rows of 16384 or 32768, are done in one pass
    (the tile spans the row); longer rows, or any ``block_n`` smaller than the row, use
    the online two-pass form. ``block_m`` rows share a tile. A row that is entirely
    ``-inf`` gives NaN, as in torch.
    ``sync=False`` launches without waiting (on ``stream``, default the caller's) and
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
