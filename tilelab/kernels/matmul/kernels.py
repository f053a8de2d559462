"""The GEMM kernels of :mod:`tilelab.kernels.matmul` and their device-side helpers.

Every kernel but :func:`splitk_atomic_kernel` writes its output through a partition,
so blocks own disjoint tiles and cannot race. The kernels take their tiles and
epilogue as named compile-time constants (``TK``, ``TRANS_B``, ``LAT``, ``FAST_ACC``,
``SWAP``; ``SCALE``, ``HAS_BIAS``, ``ACT``, ``HAS_RES``); host code builds their
arguments by name with :func:`tilelab.kernels._host.launch_args`. ``ACT`` is an
:class:`~tilelab.kernels.Activation` value, applied by
:func:`tilelab.kernels._host.device.activate`.

Example:
    >>> import tilelab as tl
    >>> from tilelab.kernels._host import launch_args
    >>> a = tl.randn(16, 32, device="cpu", seed=0); c = tl.empty((16, 16), device="cpu")
    >>> matmul_kernel(*launch_args(
    ...     matmul_kernel, c=c.partition((16, 16)), a=a, b=a, bias=a, res=a, alpha=1.0,
    ...     TK=16, TRANS_B=True, LAT=0, FAST_ACC=False, SWAP=False, SCALE=False,
    ...     HAS_BIAS=False, ACT=0, HAS_RES=False))
    >>> bool(abs(c.numpy() - a.numpy() @ a.numpy().T).max() < 0.05)     # tf32 products
    True
"""
from __future__ import annotations

import cuda.tile as ct

import tilelab as tl
from tilelab.kernels._host.device import activate, zero_padded_load

__all__ = ["matmul_kernel", "persistent_matmul_kernel", "batched_matmul_kernel",
           "splitk_partial_kernel", "splitk_reduce_kernel", "splitk_atomic_kernel",
           "gemv_kernel", "gemv_rows_kernel"]


# ======================================================================================
# device-side helpers (plain cuTile, inlined into the kernels)


def _load_a(a, m, k, TM, TK, LAT):
    """A's (TM, TK) tile (m, k), zero-padded; LAT > 0 passes the latency hint."""
    return zero_padded_load(a, (m, k), (TM, TK), "C", LAT)


def _load_b(b, k, n, TK, TN, TRANS_B, LAT):
    """B's (TK, TN) tile (k, n); with TRANS_B, ``b`` holds B^T (N, K), read K-major."""
    return zero_padded_load(b, (k, n), (TK, TN), (1, 0) if TRANS_B else "C", LAT)


def _mma_step(x, y, acc, FAST_ACC):
    """acc += x @ y on the tensor cores (fp32 operands as tf32)."""
    if x.dtype == ct.float32:
        x = x.astype(ct.tfloat32)
        y = y.astype(ct.tfloat32)
    return ct.mma(x, y, acc, use_fast_acc=FAST_ACC)


def _load_bt(b, k, n, TK, TN, TRANS_B, LAT):
    """B^T's (TN, TK) tile (n, k): _load_b's tile, transposed by the load itself."""
    return zero_padded_load(b, (n, k), (TN, TK), "C" if TRANS_B else (1, 0), LAT)


def _mainloop(a, b, m, n, k_begin, k_end, TM, TN, TK, TRANS_B, LAT, FAST_ACC, SWAP):
    """fp32 (TM, TN) tile of A[m-rows, K tiles k_begin..k_end) @ B[..., n-cols].

    SWAP accumulates the transposed tile B^T A^T, (TN, TM), and transposes it once at
    the end: with M <= 16 the weight's columns then fill the MMA's 64 rows instead of
    zero padding (the k/v projection at M = 16: 9.5 against 12.1 us on the H200,
    benchmarks/results/claims/tile-sweeps-h200/skinny_probe_h200_2026-11-30c.json). The
    small A^T tile is read without the latency hint.
    """
    if SWAP:
        acc_t = ct.full((TN, TM), 0, dtype=ct.float32)
        for k in range(k_begin, k_end):
            y = _load_bt(b, k, n, TK, TN, TRANS_B, LAT)
            x = ct.load(a, index=(k, m), shape=(TK, TM), order=(1, 0),
                        padding_mode=ct.PaddingMode.ZERO)
            acc_t = _mma_step(y, x, acc_t, FAST_ACC)
        return ct.transpose(acc_t)
    acc = ct.full((TM, TN), 0, dtype=ct.float32)
    for k in range(k_begin, k_end):
        x = _load_a(a, m, k, TM, TK, LAT)
        y = _load_b(b, k, n, TK, TN, TRANS_B, LAT)
        acc = _mma_step(x, y, acc, FAST_ACC)
    return acc


def _epilogue(acc, bias, n, TN, alpha, SCALE, HAS_BIAS, ACT):
    """alpha * acc + bias[n-cols], then the activation; all in fp32."""
    if SCALE:
        acc = acc * alpha
    if HAS_BIAS:
        bt = ct.load(bias, index=(n,), shape=(TN,), padding_mode=ct.PaddingMode.ZERO)
        acc = acc + ct.reshape(bt.astype(ct.float32), (1, TN))
    return activate(acc, ACT)


# ======================================================================================
# kernels


@tl.kernel
def matmul_kernel(c: tl.Out, a: tl.In, b: tl.In, bias: tl.In, res: tl.In, alpha: float,
                  TK: ct.Constant[int], TRANS_B: ct.Constant[bool], LAT: ct.Constant[int],
                  FAST_ACC: ct.Constant[bool], SWAP: ct.Constant[bool],
                  SCALE: ct.Constant[bool], HAS_BIAS: ct.Constant[bool],
                  ACT: ct.Constant[int], HAS_RES: ct.Constant[bool]):
    """C = act(alpha * A @ B + bias) + res; one (tm, tn) tile of C per block.

    The schedule of ``c``'s partition (row-major or grouped) picks each block's tile.
    ``bias`` and ``res`` are only read when HAS_BIAS / HAS_RES (pass any small tensor
    otherwise). With TRANS_B, ``b`` is B^T, shape (N, K). SWAP computes the tile as
    (B^T A^T)^T (``MatmulConfig.swap_ab``).

    Example:
        >>> matmul_kernel(*launch_args(                             # doctest: +SKIP
        ...     matmul_kernel, c=c.partition((128, 128), schedule=tl.grouped(8)), a=a,
        ...     b=b, bias=a, res=a, alpha=1.0, TK=64, TRANS_B=False, LAT=0,
        ...     FAST_ACC=False, SWAP=False, SCALE=False, HAS_BIAS=False, ACT=0,
        ...     HAS_RES=False))
    """
    tm, tn = c.tile_shape
    m, n = c.tile_index
    acc = _mainloop(a, b, m, n, 0, ct.cdiv(a.shape[1], TK), tm, tn, TK, TRANS_B, LAT,
                    FAST_ACC, SWAP)
    acc = _epilogue(acc, bias, n, tn, alpha, SCALE, HAS_BIAS, ACT)
    if HAS_RES:
        acc = acc + tl.load_like(res, c).astype(ct.float32)
    c.store(acc.astype(c.dtype))


@tl.kernel
def persistent_matmul_kernel(c: tl.Out, a: tl.In, b: tl.In, bias: tl.In, res: tl.In,
                             alpha: float, TK: ct.Constant[int], TRANS_B: ct.Constant[bool],
                             LAT: ct.Constant[int], FAST_ACC: ct.Constant[bool],
                             SWAP: ct.Constant[bool], SCALE: ct.Constant[bool],
                             HAS_BIAS: ct.Constant[bool], ACT: ct.Constant[int],
                             HAS_RES: ct.Constant[bool]):
    """:func:`matmul_kernel` with a fixed set of blocks, each looping over its tiles.

    Example:
        >>> persistent_matmul_kernel(*launch_args(                  # doctest: +SKIP
        ...     persistent_matmul_kernel,
        ...     c=c.partition((128, 128), schedule=tl.persistent(group_m=8)), a=a, b=b,
        ...     bias=a, res=a, alpha=1.0, TK=64, TRANS_B=False, LAT=0, FAST_ACC=False,
        ...     SWAP=False, SCALE=False, HAS_BIAS=False, ACT=0, HAS_RES=False))
    """
    tm, tn = c.tile_shape
    num_k = ct.cdiv(a.shape[1], TK)
    for t in c.tiles():
        m, n = c.tile_index_of(t)
        acc = _mainloop(a, b, m, n, 0, num_k, tm, tn, TK, TRANS_B, LAT, FAST_ACC, SWAP)
        acc = _epilogue(acc, bias, n, tn, alpha, SCALE, HAS_BIAS, ACT)
        if HAS_RES:
            acc = acc + tl.load_like(res, c, at=t).astype(ct.float32)
        c.store(acc.astype(c.dtype), at=t)


@tl.kernel
def batched_matmul_kernel(c: tl.Out, a: tl.In, b: tl.In, bias: tl.In, res: tl.In,
                          alpha: float, TK: ct.Constant[int], B_BATCHED: ct.Constant[bool],
                          LAT: ct.Constant[int], SCALE: ct.Constant[bool],
                          HAS_BIAS: ct.Constant[bool], ACT: ct.Constant[int],
                          HAS_RES: ct.Constant[bool]):
    """Batched C[g] = act(alpha * A[g] @ B[g] + bias) + res[g]; tile (1, tm, tn) of C.

    ``c`` is partitioned (1, tm, tn), usually with ``tl.grouped(group_m)`` (grouped
    within each batch); ``b`` is (G, K, N), or (K, N) shared by every batch when
    B_BATCHED is False.

    Example:
        >>> batched_matmul_kernel(*launch_args(                     # doctest: +SKIP
        ...     batched_matmul_kernel,
        ...     c=c.partition((1, 128, 128), schedule=tl.grouped(8)), a=a, b=b, bias=a,
        ...     res=a, alpha=1.0, TK=64, B_BATCHED=True, LAT=0, SCALE=False,
        ...     HAS_BIAS=False, ACT=0, HAS_RES=False))
    """
    _, tm, tn = c.tile_shape
    g, m, n = c.tile_index
    acc = ct.full((tm, tn), 0, dtype=ct.float32)
    for k in range(ct.cdiv(a.shape[2], TK)):
        x = zero_padded_load(a, (g, m, k), (1, tm, TK), "C", LAT)
        if B_BATCHED:
            y = ct.reshape(zero_padded_load(b, (g, k, n), (1, TK, tn), "C", LAT), (TK, tn))
        else:
            y = _load_b(b, k, n, TK, tn, False, LAT)
        acc = _mma_step(ct.reshape(x, (tm, TK)), y, acc, False)
    acc = _epilogue(acc, bias, n, tn, alpha, SCALE, HAS_BIAS, ACT)
    if HAS_RES:
        acc = acc + ct.reshape(tl.load_like(res, c), (tm, tn)).astype(ct.float32)
    c.store(ct.reshape(acc.astype(c.dtype), (1, tm, tn)))


def _gemv_loop(a, b, m, n, k_begin, k_end, TN, TK, TRANS_B, LAT):
    """fp32 (1, TN) row m of A @ B over K tiles [k_begin, k_end), on the CUDA cores.

    The products accumulate element-wise in a (TK, TN) tile and are reduced over K once,
    after the loop: a reduction per step would cost a cross-thread exchange per tile.
    """
    acc = ct.full((TK, TN), 0, dtype=ct.float32)
    for k in range(k_begin, k_end):
        x = _load_a(a, m, k, 1, TK, LAT)
        w = _load_b(b, k, n, TK, TN, TRANS_B, LAT)
        acc = acc + ct.reshape(x.astype(ct.float32), (TK, 1)) * w.astype(ct.float32)
    return ct.sum(acc, axis=0, keepdims=True)


def _split_slice(a, b, s, m, n, PER, TM, TN, TK, TRANS_B, LAT, FAST_ACC, SWAP):
    """fp32 (TM, TN) tile (m, n) over K slice s (K tiles [s * PER, (s + 1) * PER)): the
    GEMV loop for TM == 1, the tensor cores otherwise."""
    k_begin = s * PER
    k_end = min(k_begin + PER, ct.cdiv(a.shape[1], TK))
    if TM == 1:
        acc = _gemv_loop(a, b, m, n, k_begin, k_end, TN, TK, TRANS_B, LAT)
    else:
        acc = _mainloop(a, b, m, n, k_begin, k_end, TM, TN, TK, TRANS_B, LAT, FAST_ACC,
                        SWAP)
    return acc


@tl.kernel
def splitk_partial_kernel(p: tl.Out, a: tl.In, b: tl.In, TK: ct.Constant[int],
                          K_TILES_PER_SPLIT: int, TRANS_B: ct.Constant[bool],
                          LAT: ct.Constant[int], FAST_ACC: ct.Constant[bool],
                          SWAP: ct.Constant[bool]):
    """Split-K phase 1: P[s] = A[:, K slice s] @ B[K slice s, :] in fp32.

    ``p`` is the (splits, M, N) fp32 scratch partitioned (1, tm, tn); block (s, m, n)
    sums K tiles [s * K_TILES_PER_SPLIT, (s + 1) * K_TILES_PER_SPLIT). With tm == 1
    (GEMV) it multiplies on the CUDA cores, a dot product per column, instead of the
    tensor cores.

    Example:
        >>> splitk_partial_kernel(*launch_args(                     # doctest: +SKIP
        ...     splitk_partial_kernel, p=p.partition((1, 16, 64)), a=a, b=b, TK=128,
        ...     K_TILES_PER_SPLIT=8, TRANS_B=False, LAT=0, FAST_ACC=False, SWAP=False))
    """
    _, tm, tn = p.tile_shape
    s, m, n = p.tile_index
    acc = _split_slice(a, b, s, m, n, K_TILES_PER_SPLIT, tm, tn, TK, TRANS_B, LAT, FAST_ACC,
                       SWAP)
    p.store(ct.reshape(acc, (1, tm, tn)))


@tl.kernel
def splitk_reduce_kernel(c: tl.Out, p: tl.In, bias: tl.In, res: tl.In, alpha: float,
                         SCALE: ct.Constant[bool], HAS_BIAS: ct.Constant[bool],
                         ACT: ct.Constant[int], HAS_RES: ct.Constant[bool]):
    """Split-K phase 2: C = act(alpha * sum_s P[s] + bias) + res, one tile per block.

    Example:
        >>> splitk_reduce_kernel(*launch_args(                      # doctest: +SKIP
        ...     splitk_reduce_kernel, c=c.partition((16, 64)), p=p, bias=a, res=a,
        ...     alpha=1.0, SCALE=False, HAS_BIAS=False, ACT=0, HAS_RES=False))
    """
    tm, tn = c.tile_shape
    m, n = c.tile_index
    acc = ct.full((tm, tn), 0, dtype=ct.float32)
    for s in range(p.shape[0]):
        part = ct.load(p, index=(s, m, n), shape=(1, tm, tn),
                       padding_mode=ct.PaddingMode.ZERO)
        acc = acc + ct.reshape(part, (tm, tn))
    acc = _epilogue(acc, bias, n, tn, alpha, SCALE, HAS_BIAS, ACT)
    if HAS_RES:
        acc = acc + tl.load_like(res, c).astype(ct.float32)
    c.store(acc.astype(c.dtype))


@tl.kernel(unsafe=True)
def splitk_atomic_kernel(c: tl.Raw, a: tl.In, b: tl.In, bias: tl.In, res: tl.In, ws: tl.Raw,
                         count: tl.Raw, alpha: float, TM: ct.Constant[int],
                         TN: ct.Constant[int], TK: ct.Constant[int], K_TILES_PER_SPLIT: int,
                         TRANS_B: ct.Constant[bool], LAT: ct.Constant[int],
                         FAST_ACC: ct.Constant[bool], SWAP: ct.Constant[bool],
                         SCALE: ct.Constant[bool], HAS_BIAS: ct.Constant[bool],
                         ACT: ct.Constant[int], HAS_RES: ct.Constant[bool]):
    """Split-K in one launch: block (s, m, n) adds its K slice of tile (m, n) into an fp32
    workspace with atomics; the last of the tile's blocks to arrive writes C.

    Why ``unsafe=True``: the blocks of one output tile meet in memory (the workspace
    ``ws`` and the per-tile arrival counter ``count``), which a partition cannot express.
    Every slice adds into ``ws`` and ``count`` with atomics, and ``c``'s tile (m, n) is
    written by exactly one block: the one whose ``atomic_add`` on ``count`` returned
    ``splits - 1``. That add is acquire-release, so the other blocks' (relaxed) adds to
    ``ws``, made before their own release on ``count``, are visible to it. It reads the
    sums back with a plain load (no block touches that tile of ``ws`` any more), stores
    zeros there and resets the counter, so ``ws`` and ``count`` are all zeros again after
    every launch, as the next launch needs them (``tests/kernels/test_matmul_splitk.py``
    runs it under the race detector in shuffled block orders). Reading back with
    ``atomic_xchg`` instead cost 5-10x the whole GEMM on the H200: its default
    acquire-release order fences every element.
    The grid is (splits, tiles of M, tiles of N); ``ws`` is (M, N) fp32 and ``count``
    holds one int32 per tile of C.

    Example:
        >>> splitk_atomic_kernel.with_grid((4, 1, 16))(*launch_args(  # doctest: +SKIP
        ...     splitk_atomic_kernel, c=c, a=a, b=b, bias=a, res=a, ws=ws, count=count,
        ...     alpha=1.0, TM=16, TN=64, TK=128, K_TILES_PER_SPLIT=8, TRANS_B=False,
        ...     LAT=0, FAST_ACC=False, SWAP=False, SCALE=False, HAS_BIAS=False, ACT=0,
        ...     HAS_RES=False))
    """
    s = ct.bid(0)
    m = ct.bid(1)
    n = ct.bid(2)
    acc = _split_slice(a, b, s, m, n, K_TILES_PER_SPLIT, TM, TN, TK, TRANS_B, LAT, FAST_ACC,
                       SWAP)
    ws.tiled_view((TM, TN)).atomic_store_add((m, n), acc)
    tile = m * ct.num_blocks(2) + n
    arrived = ct.atomic_add(count, tile, 1)
    if arrived == ct.num_blocks(0) - 1:
        # the acquire above orders these plain (non-TMA) accesses after every slice's adds
        total = ct.load(ws, index=(m, n), shape=(TM, TN), padding_mode=ct.PaddingMode.ZERO,
                        allow_tma=False)
        ct.store(ws, index=(m, n), tile=ct.full((TM, TN), 0, dtype=ct.float32),
                 allow_tma=False)
        out = _epilogue(total, bias, n, TN, alpha, SCALE, HAS_BIAS, ACT)
        if HAS_RES:
            out = out + ct.load(res, index=(m, n), shape=(TM, TN),
                                padding_mode=ct.PaddingMode.ZERO).astype(ct.float32)
        ct.store(c, index=(m, n), tile=out.astype(c.dtype))
        ct.atomic_xchg(count, tile, 0)


@tl.kernel
def gemv_kernel(c: tl.Out, a: tl.In, b: tl.In, bias: tl.In, res: tl.In, alpha: float,
                TK: ct.Constant[int], TRANS_B: ct.Constant[bool], LAT: ct.Constant[int],
                SCALE: ct.Constant[bool], HAS_BIAS: ct.Constant[bool],
                ACT: ct.Constant[int], HAS_RES: ct.Constant[bool]):
    """Row-vector times matrix, c (1, N) = act(alpha * a (1, K) @ b + bias) + res.

    Memory-bound: each block streams a (K, tn) column panel of B once and keeps (TK, tn)
    fp32 partial products, reduced once at the end; ``c`` is partitioned (1, tn).

    Example:
        >>> gemv_kernel(*launch_args(                               # doctest: +SKIP
        ...     gemv_kernel, c=c.partition((1, 64)), a=a, b=b, bias=a, res=a, alpha=1.0,
        ...     TK=256, TRANS_B=False, LAT=0, SCALE=False, HAS_BIAS=False, ACT=0,
        ...     HAS_RES=False))
    """
    _, tn = c.tile_shape
    m, n = c.tile_index
    acc = _gemv_loop(a, b, m, n, 0, ct.cdiv(a.shape[1], TK), tn, TK, TRANS_B, LAT)
    acc = _epilogue(acc, bias, n, tn, alpha, SCALE, HAS_BIAS, ACT)
    if HAS_RES:
        acc = acc + tl.load_like(res, c).astype(ct.float32)
    c.store(acc.astype(c.dtype))


@tl.kernel
def gemv_rows_kernel(c: tl.Out, a: tl.In, w: tl.In, bias: tl.In, res: tl.In, alpha: float,
                     TK: ct.Constant[int], LAT: ct.Constant[int], SCALE: ct.Constant[bool],
                     HAS_BIAS: ct.Constant[bool], ACT: ct.Constant[int],
                     HAS_RES: ct.Constant[bool]):
    """Decode GEMV on a row-major weight: c (1, N) = act(alpha * w (N, K) @ a[0] + bias) + res.

    Each block owns ``tn`` outputs and streams their ``tn`` weight rows along K in
    contiguous (tn, TK) tiles (the layout the weight is stored in, so every load is a
    run of whole rows), multiplying on the CUDA cores into a (tn, TK) fp32 accumulator
    that is reduced once, after the loop. One launch, no split-K scratch: the tile
    height picks the block count. ``c`` is partitioned (1, tn).

    Example:
        >>> gemv_rows_kernel(*launch_args(                          # doctest: +SKIP
        ...     gemv_rows_kernel, c=c.partition((1, 8)), a=x, w=w, bias=x, res=x,
        ...     alpha=1.0, TK=512, LAT=0, SCALE=False, HAS_BIAS=False, ACT=0,
        ...     HAS_RES=False))
    """
    _, tn = c.tile_shape
    m, n = c.tile_index
    acc = ct.full((tn, TK), 0, dtype=ct.float32)
    for k in range(ct.cdiv(a.shape[1], TK)):
        x = _load_a(a, m, k, 1, TK, LAT)
        wt = _load_a(w, n, k, tn, TK, LAT)
        acc = acc + wt.astype(ct.float32) * x.astype(ct.float32)
    out = ct.reshape(ct.sum(acc, axis=1), (1, tn))
    out = _epilogue(out, bias, n, tn, alpha, SCALE, HAS_BIAS, ACT)
    if HAS_RES:
        out = out + tl.load_like(res, c).astype(ct.float32)
    c.store(out.astype(c.dtype))
