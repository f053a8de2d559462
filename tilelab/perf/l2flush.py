"""The read-only kernel that ``tl.bench`` uses to evict the L2 cache (see
``tilelab.perf.bench._L2Flusher``): reading leaves clean cache lines, so the timed
kernel does not pay for another kernel's write-backs."""
from __future__ import annotations

import cuda.tile as ct

import tilelab as tl

__all__ = ["read_rows_kernel"]


@tl.kernel
def read_rows_kernel(out: tl.Out, buf: tl.In, ROWS: ct.Constant[int], N: ct.Constant[int]):
    """Block b reads rows [b * ROWS, (b + 1) * ROWS) of ``buf`` (N columns) and stores
    their sum.

    ``out`` is (blocks, 1) partitioned (1, 1); storing the sum keeps the loads alive.

    Example:
        >>> read_rows_kernel(sink.partition((1, 1)), buf, 16, 4096)  # doctest: +SKIP
    """
    b, _ = out.tile_index
    acc = ct.full((1, N), 0.0, dtype=ct.float32)
    for i in range(ROWS):
        acc = acc + ct.load(buf, index=(b * ROWS + i, 0), shape=(1, N))
    out.store(ct.sum(acc, axis=1, keepdims=True))
