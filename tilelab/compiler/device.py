"""Tile-side index helpers that lowered kernels call.

Lowering turns ``p.store(tile)`` into ``ct.store(p, index=<this block's tile>, ...)``.
For the schedules whose tile index is more than a block id, the index math lives here,
as plain scalar Python that cuTile compiles inline (and that the CPU interpreter runs
as ordinary Python). Keep these functions free of ``cuda.tile`` calls: they take and
return integers only.
"""
from __future__ import annotations


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
        # benchmarks/results/ceilings_rope_h200_2026-11-30.json and b)
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
