"""Tile picking, 2-D row views and schedules shared by the memory-bound kernels.

A memory-bound host function views its tensors as a 2-D ``(rows, cols)`` grid
(:func:`rows_of`), picks a tile (:func:`tile_2d` for element-wise work,
:func:`row_tiles` for kernels that need whole rows) and partitions the output
(:func:`partition_2d`, :func:`row_schedule`). The row kernels compile with the
measured hints of :data:`ROW_HINTS` (:func:`row_kernel`).

Example:
    >>> tile_2d(1000, 300, None, None), row_tiles(64, 20000, None, None)
    ((8, 512), (1, 4096, True))
"""
from __future__ import annotations

import math
from typing import Any

import tilelab as tl
from tilelab.kernels._host.args import pow2_ceil
from tilelab.kernels._host.plan import hinted

__all__ = ["TILE_ELEMS", "MAX_ROW_TILE", "LOOP_TILE_N", "ONE_PASS_MAX_16BIT",
           "LONG_ROW_WIDTH", "ROW_HINTS", "ROW_HINTS_BY_ARCH", "MAX_GRID_Y", "rows_of",
           "tile_2d", "long_row_split", "row_tiles", "row_kernel", "row_schedule",
           "grid_schedule", "partition_2d"]

#: Default elements per tile: 4096 (16 KB of f32 / 8 KB of bf16 per operand) keeps
#: enough bytes in flight per block for a memory-bound op without spilling registers.
TILE_ELEMS = 4096


def rows_of(t: tl.Tensor) -> tl.Tensor:
    """``t`` as a 2-D (rows, last-dim) tensor: a view when possible, else a copy.

    Example:
        >>> rows_of(tl.zeros((2, 3, 4), device="cpu")).shape
        (6, 4)
    """
    if t.ndim == 2:
        return t
    rows, n = math.prod(t.shape[:-1]), (t.shape[-1] if t.ndim else 1)
    if t.is_contiguous:
        return t.reshape(rows, n)
    if t.ndim == 1:
        return t[None, :]
    return t.contiguous().reshape(rows, n)


def tile_2d(rows: int, cols: int, block_m: int | None, block_n: int | None,
             elems: int = TILE_ELEMS) -> tuple[int, int]:
    """Default (block_m, block_n): whole rows up to ``elems``, then more rows per tile.

    Example:
        >>> tile_2d(1, 1 << 20, None, None), tile_2d(100, 64, None, 16)
        ((1, 4096), (128, 16))
    """
    bn = block_n or min(pow2_ceil(cols), elems)
    bm = block_m or max(1, min(pow2_ceil(rows), elems // bn))
    return bm, bn


#: Widest row (elements) a row kernel keeps whole in one tile; longer rows loop over
#: column tiles of ``LOOP_TILE_N`` (two passes over memory instead of one).
MAX_ROW_TILE = 8192
LOOP_TILE_N = 4096


#: 16-bit rows longer than ``MAX_ROW_TILE`` and up to this many elements can still run in
#: one pass, as sub-rows of ``LONG_ROW_WIDTH`` in one tile (softmax, RMSNorm)
ONE_PASS_MAX_16BIT = 32768
LONG_ROW_WIDTH = 128


def long_row_split(n: int, itemsize: int) -> int:
    """G when a row of n 16-bit elements, too long for ``MAX_ROW_TILE``, fits one tile as
    G sub-rows of ``LONG_ROW_WIDTH`` with no padding (n = 16384 or 32768); 0 otherwise.
    Padding would turn the TMA loads into plain ones (1.8x slower for softmax at 8192).

    Example:
        >>> long_row_split(16384, 2), long_row_split(32768, 2), long_row_split(8192, 2)
        (128, 256, 0)
        >>> long_row_split(20000, 2), long_row_split(16384, 4), long_row_split(65536, 2)
        (0, 0, 0)
    """
    g = n // LONG_ROW_WIDTH
    if (itemsize != 2 or not MAX_ROW_TILE < n <= ONE_PASS_MAX_16BIT
            or n % LONG_ROW_WIDTH or g & (g - 1)):
        return 0
    return g


def row_tiles(rows: int, n: int, block_m: int | None, block_n: int | None,
               elems: int = TILE_ELEMS) -> tuple[int, int, bool]:
    """(block_m, block_n, looped) for a kernel that works on whole rows of length n.

    One pass when ``block_n >= n`` (the row fits a tile, padded to a power of two);
    otherwise the looped form streams the row in ``block_n`` column tiles.

    Example:
        >>> row_tiles(64, 1000, None, None)
        (4, 1024, False)
    """
    if block_n is None:
        block_n = pow2_ceil(n) if pow2_ceil(n) <= MAX_ROW_TILE else LOOP_TILE_N
    looped = block_n < n
    if block_m is None:
        block_m = 1 if looped else max(1, min(pow2_ceil(rows), elems // block_n))
    return block_m, block_n, looped


#: cuTile's hints for the one-pass row kernels (softmax, the norms). A whole row of
#: 4096-8192 elements makes the compiler use all 255 registers, so one block fits per
#: SM and only one row's loads are in flight there; an occupancy hint of 4 caps the
#: registers at 64 (no spills) and lets four rows stream at once (softmax 3.4x, RMSNorm
#: 3.8x faster on the H200). RoPE's one-token tiles (one tensor) take occupancy 8:
#: 3.40 -> 3.89 TB/s
#: (benchmarks/results/claims/rope-tiles-h200/rope_hints_h200_2026-11-30.json); its q+k
#: kernels keep none (occupancy 8 spills there, the rest was not timed).
#: The looped kernels (row reductions and argmax, the online softmax and the norms of
#: long rows) had no hint, and tileiras pipelines their loops into 256-thread blocks of
#: 255 registers: one block per SM. Occupancy 8 caps them at 32-64 registers; on the H200
#: (benchmarks/results/claims/row-kernels-h200/looped_hints_h200_2026-11-30b.json) row_sum
#: of 16384 x 8192 bf16 went 234 -> 65 us (4.1 TB/s; torch.sum 102), row_max 189 -> 64,
#: row_argmax 249 -> 112, the online softmax of 2048 x 65536 600 -> 292 and its RMSNorm 310
#: -> 203. Where occupancy 8 spills (the online softmax of float32 rows, 168 bytes; layer
#: norm with its bias, 48) occupancy 4 was faster: float32 softmax 686 -> 273 us (8: 304),
#: layer norm 428 -> 219 (8: 240). The bf16 online softmax spills 64 bytes at 8 and is still
#: fastest there. The benchmarks may change these entries (then call
#: ``tilelab.kernels.clear_caches()``).
ROW_HINTS: dict[str, dict[str, int]] = {"softmax": {"occupancy": 4},
                                        "norm": {"occupancy": 4},
                                        "rope": {"occupancy": 8},
                                        "reduce": {"occupancy": 8},
                                        "softmax_16k": {"occupancy": 2},
                                        "softmax_32k": {"occupancy": 1,
                                                        "num_worker_warps": 8},
                                        "norm_16k": {"occupancy": 2},
                                        "norm_32k": {"occupancy": 1, "num_worker_warps": 8},
                                        "softmax_online": {"occupancy": 8},
                                        "softmax_online_f32": {"occupancy": 4},
                                        "norm_looped": {"occupancy": 8},
                                        "layer_norm_looped": {"occupancy": 4}}
#: hints measured faster on one architecture only (arch -> op -> hints). Softmax's
#: ``exp`` kernel took 8 worker warps on sm_90 (5% faster); its ``exp2`` kernels are
#: faster without (140 vs 145 us at 16384 x 8192,
#: claims/row-kernels-h200/variant_probe_h200_*.json), so none is set today; the benchmarks
#: may set some.
ROW_HINTS_BY_ARCH: dict[str, dict[str, dict[str, int]]] = {}


def row_kernel(kernel: tl.Kernel, op: str, device: str) -> tl.Kernel:
    """``kernel`` compiled with the row-kernel hints of ``op`` for ``device``'s GPU.

    Example:
        >>> from tilelab.kernels.examples import softmax
        >>> row_kernel(softmax, "softmax", "cpu").options.occupancy
        4
    """
    hints = ROW_HINTS.get(op, {})
    if device != "cpu":
        from tilelab.runtime.device import current_arch

        hints = ROW_HINTS_BY_ARCH.get(current_arch() or "", {}).get(op, hints)
    return hinted(kernel, **hints)


def row_schedule(rows: int, block_m: int) -> Any:
    """The persistent schedule that gives block b every column tile of row tile b.

    With ``group_m`` at least the number of row tiles the grouped order is
    column-major, so with one block per row tile, block b walks (b, 0), (b, 1), ... in
    order: it computes its rows' statistics once, then writes its tiles left to right.
    (Kernels recompute the statistics whenever the row changes, so any order is still
    correct.) ``group_m`` is a compile-time constant: rounding it up to a power of two
    keeps the variants to one per power of two of the row count.

    Example:
        >>> row_schedule(100, 1)
        Persistent(num_blocks=100, group_m=128)
    """
    row_tiles = -(-rows // block_m)
    return tl.persistent(num_blocks=row_tiles, group_m=pow2_ceil(row_tiles))


#: CUDA's limit on grid y and z: a row-major 2-D tile grid puts its rows in y
MAX_GRID_Y = 65535


def grid_schedule(row_tiles: int) -> Any:
    """The schedule of a 2-D one-block-per-tile launch with ``row_tiles`` tile rows.

    Row-major puts the tile rows in grid y, which CUDA caps at 65535 (a layer norm over
    128k tokens with one row per tile needs more); ``tl.grouped(1)`` walks the same
    row-major order from a 1-D grid instead.

    Example:
        >>> grid_schedule(100), grid_schedule(100_000)
        (RowMajor(), Grouped(group_m=1))
    """
    return tl.row_major if row_tiles <= MAX_GRID_Y else tl.grouped(1)


def partition_2d(t: tl.Tensor, bm: int, bn: int) -> Any:
    """``t`` (2-D) in (bm, bn) tiles, one block per tile (see :func:`grid_schedule`).

    Example:
        >>> partition_2d(tl.zeros((8, 64), device="cpu"), 2, 32).tile_shape
        (2, 32)
    """
    return t.partition((bm, bn), schedule=grid_schedule(-(-t.shape[0] // bm)))
