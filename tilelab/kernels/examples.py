"""The four kernels of the tour: vector add, tiled GEMM, row softmax, persistent GEMM.

They are written in the safe language only (no ``unsafe=True``), so each shows one way
an output is split among blocks: 1-D tiles, 2-D tiles with a K loop, one row-block per
tile, and a fixed set of blocks looping over tiles. ``tilelab demo``, the notebooks, the
tests and the benchmarks all use these same kernels.
"""
from __future__ import annotations

import cuda.tile as ct

import tilelab as tl

__all__ = ["vector_add", "gemm", "softmax", "persistent_gemm", "next_pow2"]


@tl.kernel
def vector_add(z: tl.Out, x: tl.In, y: tl.In):
    """z = x + y, one tile of z per block.

    Example:
        >>> x = tl.randn(4096); y = tl.randn(4096); z = tl.empty(4096)   # doctest: +SKIP
        >>> vector_add(z.partition(1024), x, y)                          # doctest: +SKIP
    """
    z.store(tl.load_like(x, z) + tl.load_like(y, z))


@tl.kernel
def gemm(c: tl.Out, a: tl.In, b: tl.In, K_TILE: ct.Constant[int]):
    """c = a @ b with fp32 accumulation; each block computes one (TM, TN) tile of c.

    Example:
        >>> gemm(c.partition((128, 128)), a, b, 64)                      # doctest: +SKIP
    """
    tm, tn = c.tile_shape
    m, n = c.tile_index
    acc = ct.full((tm, tn), 0, dtype=ct.float32)
    for k in range(ct.cdiv(a.shape[1], K_TILE)):
        x = ct.load(a, index=(m, k), shape=(tm, K_TILE), padding_mode=ct.PaddingMode.ZERO)
        y = ct.load(b, index=(k, n), shape=(K_TILE, tn), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(x, y, acc)
    c.store(acc.astype(c.dtype))


@tl.kernel
def softmax(y: tl.Out, x: tl.In):
    """Row softmax: each block owns whole rows (tile width >= row length).

    Rows are padded with -inf so that padding adds nothing to the max or the sum.

    Example:
        >>> softmax(y.partition((4, next_pow2(n))), x)                   # doctest: +SKIP
    """
    t = ct.load(x, index=y.tile_index, shape=y.tile_shape,
                padding_mode=ct.PaddingMode.NEG_INF).astype(ct.float32)
    e = ct.exp(t - ct.max(t, axis=1, keepdims=True))
    # multiply by the reciprocal of the row sum: one division per row, not per element
    y.store((e * (1.0 / ct.sum(e, axis=1, keepdims=True))).astype(y.dtype))


@tl.kernel
def persistent_gemm(c: tl.Out, a: tl.In, b: tl.In, K_TILE: ct.Constant[int]):
    """GEMM with a fixed number of blocks; each loops over the tiles the schedule gives it.

    Example:
        >>> persistent_gemm(c.partition((128, 128), schedule=tl.persistent()), a, b, 64)  # doctest: +SKIP
    """
    tm, tn = c.tile_shape
    for t in c.tiles():
        m, n = c.tile_index_of(t)
        acc = ct.full((tm, tn), 0, dtype=ct.float32)
        for k in range(ct.cdiv(a.shape[1], K_TILE)):
            x = ct.load(a, index=(m, k), shape=(tm, K_TILE), padding_mode=ct.PaddingMode.ZERO)
            y = ct.load(b, index=(k, n), shape=(K_TILE, tn), padding_mode=ct.PaddingMode.ZERO)
            acc = ct.mma(x, y, acc)
        c.store(acc.astype(c.dtype), at=t)


def next_pow2(n: int) -> int:
    """Smallest power of two >= n (tile sizes must be powers of two).

    Example:
        >>> next_pow2(1000)
        1024
    """
    p = 1
    while p < n:
        p *= 2
    return p
