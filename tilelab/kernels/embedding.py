"""Embedding lookup: rows of a ``(vocab, dim)`` table for int32/int64 token ids.

Each block owns ``block_t`` tokens x ``block_d`` columns of the output, loads its ids
once and gathers the table rows with ``ct.gather`` (one index tile for the rows, one
for the columns, broadcast against each other). ``ct.gather`` checks bounds: an id
outside ``[0, vocab)`` (negative ones included) reads zeros, so the kernel cannot read
out of bounds whatever the ids are. The host function by default also checks the ids
(reading them on the host: a device sync on the GPU) and raises ValueError naming the
first bad one; ``check_ids=False`` skips that check, and bad ids then give zero rows.
"""
from __future__ import annotations

from typing import Any

import cuda.tile as ct
import numpy as np

import tilelab as tl
from tilelab.kernels._host import (TILE_ELEMS, Call, CallCache, check_block,
                                   check_same_device, output, partition_2d, pow2_ceil,
                                   tensor_arg, TensorResult)

__all__ = ["embedding"]


@tl.kernel
def embedding_kernel(out: tl.Out, ids: tl.In, table: tl.In):
    """out[t, :] = table[ids[t], :] for this block's (block_t, block_d) tile.

    Example:
        >>> embedding_kernel(out.partition((16, 1024)), ids, table)        # doctest: +SKIP
    """
    bt, bd = out.tile_shape
    m, n = out.tile_index
    rows = ct.load(ids, index=(m,), shape=(bt,), padding_mode=ct.PaddingMode.ZERO)
    cols = n * bd + ct.arange(bd, dtype=ct.int32)
    out.store(ct.gather(table, (ct.reshape(rows, (bt, 1)), ct.reshape(cols, (1, bd)))))


def _embedding_call(ids: Any, table: Any, *, check_ids: bool = True,
                    block_t: int | None = None, block_d: int | None = None,
                    out: Any = None) -> Call:
    fn = "embedding"
    block_t = check_block(block_t, "block_t", fn)
    block_d = check_block(block_d, "block_d", fn)
    it = tensor_arg(ids, "ids", fn)
    if it.dtype.name not in ("int32", "int64"):
        raise TypeError(f"{fn}(): ids must be int32 or int64, got {it.dtype.name}")
    tt = tensor_arg(table, "table", fn)
    if tt.ndim != 2:
        raise ValueError(f"{fn}(): table must be 2-D (vocab, dim), got shape {tt.shape}")
    device = check_same_device(fn, ids=it, table=tt)
    vocab, dim = tt.shape
    if check_ids and it.size:
        v = it.numpy()
        bad = np.flatnonzero((v.reshape(-1) < 0) | (v.reshape(-1) >= vocab))
        if bad.size:
            where = np.unravel_index(int(bad[0]), it.shape)
            raise ValueError(f"{fn}(): ids{list(map(int, where))} = "
                             f"{int(v.reshape(-1)[bad[0]])} is outside the table's "
                             f"{vocab} rows (0..{vocab - 1})")
    o = output(out, it.shape + (dim,), tt.dtype, device, "out", fn)
    if it.size == 0 or dim == 0:
        return Call(embedding_kernel, None, o)
    flat = it.reshape(-1) if it.is_contiguous else it.contiguous().reshape(-1)
    bd = block_d or min(pow2_ceil(dim), TILE_ELEMS)
    bt = block_t or max(1, min(pow2_ceil(flat.shape[0]), TILE_ELEMS // bd))
    ov = o if o.ndim == 2 else o.reshape(flat.shape[0], dim)
    return Call(embedding_kernel, (partition_2d(ov, bt, bd), flat, tt), o)


#: prepared calls (see tilelab.kernels._host); only with check_ids=False: the check
#: reads the ids on the host, so it runs on every call
_EMBEDDING = CallCache("embedding")


def embedding(ids: Any, table: Any, *, check_ids: bool = True, block_t: int | None = None,
              block_d: int | None = None, out: Any = None, sync: bool = True,
              stream: Any = None) -> TensorResult:
    """Rows of ``table`` (vocab, dim) for integer ``ids`` of any shape -> ids.shape + (dim,).

    ``table`` may have any dtype (the rows are copied bit for bit). Ids must lie in
    ``[0, vocab)``: a ValueError names the first one that does not, unless
    ``check_ids=False`` (no host read; such ids then give rows of zeros).
    ``block_t`` tokens x ``block_d`` columns per tile (powers of two). ``sync=False``
    launches without waiting (on ``stream``, default the caller's) and returns
    ``(out, future)`` (see :mod:`tilelab.kernels`).

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.embedding import embedding
        >>> table = tl.tensor(np.arange(6, dtype=np.float32).reshape(3, 2), device="cpu")
        >>> ids = tl.tensor(np.array([2, 0], np.int32), device="cpu")
        >>> embedding(ids, table).numpy()
        array([[4., 5.],
               [0., 1.]], dtype=float32)
    """
    if check_ids:
        call = _embedding_call(ids, table, check_ids=True, block_t=block_t, block_d=block_d,
                               out=out)
    else:
        call = _EMBEDDING.prepare(_embedding_call, ids, table, check_ids=False,
                                  block_t=block_t, block_d=block_d, out=out)
    return call.run(sync, stream)
