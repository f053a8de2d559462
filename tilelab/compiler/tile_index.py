"""Tile-side index helpers that lowered kernels call.

Lowering turns ``p.store(tile)`` into ``ct.store(p, index=<this block's tile>, ...)``.
For the schedules whose tile index is more than a block id, the index math lives here,
as plain scalar Python that cuTile compiles inline (and that the CPU interpreter runs
as ordinary Python). Keep these functions free of ``cuda.tile`` calls: they take and
return integers only. The two exceptions are :func:`grid_dependency_prologue`, the first
statement of every lowered kernel, and :func:`sub_tile_store`, the guarded store
``p.store(tile, offset=...)`` lowers to; they reach cuTile through ``ct``,
``static_iter`` and ``static_assert``, which the frozen copy generated code calls
(``__tl_dev``) binds to the pristine cuTile objects (cuTile recognizes the two static
constructs by the identity of a bare name's value).
"""
from __future__ import annotations

import cuda.tile as ct
from cuda.tile import static_assert, static_iter


def grouped_tile_index(pid, num_m, num_n, group_m):
    """(m, n) of linear block ``pid`` in an L2-friendly grouped order.

    Blocks walk ``group_m`` rows of tiles column by column, so neighbouring blocks share
    rows of A and columns of B in the L2 cache. Every (m, n) of the ``num_m`` x ``num_n``
    grid is produced by exactly one ``pid`` in ``range(num_m * num_n)``.

    Example:
        >>> [grouped_tile_index(p, 4, 2, 2) for p in range(8)]
        [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (3, 0), (2, 1), (3, 1)]
    """
    if group_m == 1:
        # row-major order; group_m is a compile-time constant, so this branch is folded
        # and a block spends two divisions, not four, before its first load (RoPE of
        # 131072 tokens, the 1-D grid past CUDA's 65535 grid rows: 3.63 -> 3.93 TB/s,
        # benchmarks/results/claims/rope-tiles-h200/ceilings_rope_h200_2026-11-30[b].json)
        return pid // num_n, pid % num_n
    width = group_m * num_n
    group_id = pid // width
    first_m = group_id * group_m
    group_size = min(num_m - first_m, group_m)
    within = pid % width
    return first_m + within % group_size, within // group_size


def grouped_tile_index_3d(b, pid, num_m, num_n, group_m):
    """(b, m, n): batch ``b`` as given, (m, n) of ``pid`` in grouped order.

    Example:
        >>> grouped_tile_index_3d(5, 2, 4, 2, 2)
        (5, 0, 1)
    """
    m, n = grouped_tile_index(pid, num_m, num_n, group_m)
    return b, m, n


def unravel_2d(t, num_n):
    """(m, n) of linear tile number ``t`` in row-major order over ``num_n`` columns.

    Example:
        >>> unravel_2d(7, 3)
        (2, 1)
    """
    return t // num_n, t % num_n


def unravel_3d(t, num_1, num_2):
    """(b, m, n) of linear tile number ``t`` in row-major order.

    Example:
        >>> unravel_3d(7, 2, 3)
        (1, 0, 1)
    """
    per_batch = num_1 * num_2
    within = t % per_batch
    return t // per_batch, within // num_2, within % num_2


# ---- rank 4 and 5: the tile grid is linearised onto a 1-D launch grid -----------------
#
# CUDA grids have three axes, so partitions of rank 4 and 5 launch prod(grid) blocks along
# x and every block (or persistent loop step) unravels its linear number ``t`` here. The
# leading grid dimension is never needed: ``t`` is below the product, so the first index
# is what remains after the others are divided out.


def unravel_4d(t, num_1, num_2, num_3):
    """(i0, i1, i2, i3) of linear tile number ``t`` in row-major order.

    ``num_1``..``num_3`` are the tiles per dimension 1..3 (dimension 3 is fastest).

    Example:
        >>> unravel_4d(23, 3, 2, 2)
        (1, 2, 1, 1)
    """
    i3 = t % num_3
    r = t // num_3
    i2 = r % num_2
    r = r // num_2
    return r // num_1, r % num_1, i2, i3


def unravel_5d(t, num_1, num_2, num_3, num_4):
    """(i0, i1, i2, i3, i4) of linear tile number ``t`` in row-major order.

    Example:
        >>> unravel_5d(47, 2, 3, 2, 2)
        (1, 1, 2, 1, 1)
    """
    i4 = t % num_4
    r = t // num_4
    i3 = r % num_3
    r = r // num_3
    i2 = r % num_2
    r = r // num_2
    return r // num_1, r % num_1, i2, i3, i4


def grouped_tile_index_4d(t, num_1, num_m, num_n, group_m):
    """(b0, b1, m, n) of linear block ``t``: grouped (m, n) within each batch (b0, b1).

    As :func:`grouped_tile_index_3d` does for its batch: the last two tile dimensions
    (``num_m`` x ``num_n``) are walked in grouped order by ``t % (num_m * num_n)``; the
    batch number ``t // (num_m * num_n)`` is unravelled row-major over the two leading
    dimensions (``num_1`` tiles in dimension 1). Consecutive blocks finish one batch's
    (m, n) grid before starting the next.

    Example:
        >>> [grouped_tile_index_4d(t, 2, 4, 2, 2) for t in (0, 1, 2, 8, 17)]
        [(0, 0, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1), (0, 1, 0, 0), (1, 0, 1, 0)]
    """
    per = num_m * num_n
    b = t // per
    m, n = grouped_tile_index(t % per, num_m, num_n, group_m)
    return b // num_1, b % num_1, m, n


def grouped_tile_index_5d(t, num_1, num_2, num_m, num_n, group_m):
    """(b0, b1, b2, m, n) of linear block ``t``: grouped (m, n) within each batch.

    The batch number ``t // (num_m * num_n)`` is unravelled row-major over the three
    leading dimensions (``num_1``, ``num_2`` tiles in dimensions 1 and 2); (m, n) as in
    :func:`grouped_tile_index_4d`.

    Example:
        >>> grouped_tile_index_5d(45, 2, 3, 2, 2, 2)
        (1, 1, 2, 1, 0)
    """
    per = num_m * num_n
    b = t // per
    m, n = grouped_tile_index(t % per, num_m, num_n, group_m)
    b2 = b % num_2
    b = b // num_2
    return b // num_1, b % num_1, b2, m, n


# ---- the prologue: programmatic dependent launch ----------------------------------------


def grid_dependency_prologue():
    """Wait until the previous kernel of the stream has finished and its writes are
    visible, then let the next kernel be scheduled.

    Every lowered kernel whose body starts with a simple statement calls this first,
    before any load or store (docs/safety.md, "Programmatic dependent launch"). That is
    what makes it sound for the launcher to start such a kernel with programmatic
    dependent launch, i.e. while the previous kernel of the stream is still running:
    nothing it reads or writes is touched before the previous kernel is done. Launched
    without it (or on sm_80, where the two instructions do not exist) the wait returns
    at once. The next kernel can then start early, but it waits the same way (or is
    launched normally, after this one ends).

    Example (the first line of a lowered kernel)::

        __tl_dev.grid_dependency_prologue(); z.store(...)
    """
    ct.grid_dependency_control_wait()
    ct.grid_dependency_control_launch_dependents()


# ---- the sub-tile store: p.store(tile, offset=(o0, o1, ...)) ---------------------------


def sub_tile_store(array, tile_index, tile_shape, tile, offset, latency=None, allow_tma=None):
    """Store ``tile`` (shape ``s``) as sub-tile number ``offset`` of the partition tile
    ``tile_index`` (shape ``tile_shape``, ``T``) of ``array``, or write nothing.

    The destination, in units of ``s``, is ``tile_index[d] * (T[d] // s[d]) +
    offset[d]``. The store runs only when every ``offset[d]`` lies in ``[0, T[d] //
    s[d])`` (so the written elements lie inside the block's own tile, whatever the
    offset's value) and the sub-tile starts inside the array (cuTile leaves a tile
    entirely outside its array undefined; a partial one is masked). ``s`` must divide
    ``T`` on every axis, checked when cuTile compiles the kernel. ``latency`` and
    ``allow_tma`` are the store's performance hints, passed on to ``ct.store``.

    Example (what ``k_cache.store(row, offset=(0, pos, 0))`` lowers to; the arguments
    are this block's tile index and the partition's tile-shape constants)::

        __tl_dev.sub_tile_store(k_cache, (__tl_ct.bid(0), 0, 0),
                                (__tl_k_cache_t0, __tl_k_cache_t1, __tl_k_cache_t2),
                                row, (0, pos, 0))
    """
    s = tile.shape
    static_assert(len(s) == len(tile_shape) and len(offset) == len(tile_shape),
                  "p.store(tile, offset=...): the tile, the offset and the partition "
                  "must have the same rank")
    ok = True
    index = ()
    for d in static_iter(range(len(tile_shape))):
        static_assert(tile_shape[d] % s[d] == 0,
                      "p.store(tile, offset=...): the tile's shape must divide the "
                      "partition's tile shape on every axis")
        per = tile_shape[d] // s[d]
        i = tile_index[d] * per + offset[d]
        ok = ok & (offset[d] >= 0) & (offset[d] < per) & (i * s[d] < array.shape[d])
        index = index + (i,)
    if ok:  # the only write, guarded by ok:
        ct.store(array, index=index, tile=tile, latency=latency, allow_tma=allow_tma)
