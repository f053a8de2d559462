"""A launch as the time model (:mod:`tilelab.perf.predict_model`) sees it: its grid, its
kernel's resources and so the blocks resident per SM, its FLOPs and DRAM bytes, and for
a GEMM-like launch its tiles and the order the blocks take them in.

Why: these describe the launch and the GPU's residency limits, and hold no constant of
the model: the explorer, the resources view and the notebooks compute residency and
tile reuse from them directly, and the model prices them. The names are re-exported by
:mod:`tilelab.perf.predict_model` (``tilelab.perf.predict_model.blocks_per_sm`` is the
documented path).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

__all__ = ["SMLimits", "SM_LIMITS", "blocks_per_sm", "GemmShape", "gemm_dram_bytes",
           "LaunchShape", "compulsory_gemm_bytes", "DEFAULT_TILE_K"]

#: the K-step of a GEMM whose launch does not give it (the explorer's of notebook 03)
DEFAULT_TILE_K = 32


@dataclass(frozen=True)
class SMLimits:
    """Per-SM residency limits of one compute capability.

    Example:
        >>> SM_LIMITS["sm_90"].registers
        65536
    """

    registers: int
    shared_bytes: int
    threads: int
    blocks: int
    source: str = "CUDA C++ Programming Guide, technical specifications per compute capability"


SM_LIMITS: dict[str, SMLimits] = {
    "sm_80": SMLimits(65536, 164 * 1024, 2048, 32),
    "sm_90": SMLimits(65536, 228 * 1024, 2048, 32),
    "sm_100": SMLimits(65536, 228 * 1024, 2048, 32),
    "sm_120": SMLimits(65536, 100 * 1024, 1536, 32),
}


def blocks_per_sm(arch: str, threads: int | None, registers: int | None,
                  shared_bytes: int | None) -> tuple[int, str]:
    """Resident blocks per SM from a kernel's resources, and what limits it; ``(1, why)``
    when the resources are unknown (stated as an assumption).

    Example:
        >>> blocks_per_sm("sm_90", 128, 128, 64 * 1024)
        (3, 'shared memory (64 KiB per block)')
        >>> blocks_per_sm("sm_90", None, None, None)[0]
        1
    """
    lim = SM_LIMITS.get(arch)
    if lim is None or not threads:
        return 1, "assumed (kernel resources unknown)"
    cands = [(lim.blocks, "the per-SM block limit"),
             (lim.threads // threads, f"threads ({threads} per block)")]
    if registers:
        cands.append((lim.registers // (registers * threads),
                      f"registers ({registers} per thread)"))
    if shared_bytes:
        cands.append((lim.shared_bytes // shared_bytes,
                      f"shared memory ({shared_bytes // 1024} KiB per block)"))
    n, why = min(cands, key=lambda c: c[0])
    return max(1, n), why


@dataclass(frozen=True)
class GemmShape:
    """A GEMM-like launch: C (m × n) in tiles of tile_m × tile_n over K, the order in which
    blocks take C tiles (``order``: (row, col) per block; None = row-major), the element
    sizes of A, B and C in bytes, and the K-step of a block's loop (``tile_k``; None:
    not known, :data:`DEFAULT_TILE_K` is assumed).

    Example:
        >>> GemmShape(256, 256, 64, 64, 64).tiles
        (4, 4)
        >>> GemmShape(256, 256, 64, 64, 64, tile_k=64).step_flops   # 2·64·64·64
        524288
    """

    m: int
    n: int
    k: int
    tile_m: int
    tile_n: int
    a_size: int = 2
    b_size: int = 2
    c_size: int = 2
    order: Sequence[tuple[int, int]] | None = None
    tile_k: int | None = None

    @property
    def tiles(self) -> tuple[int, int]:
        """Tiles of C per dimension."""
        return math.ceil(self.m / self.tile_m), math.ceil(self.n / self.tile_n)

    @property
    def step_flops(self) -> int:
        """FLOPs of one K-step's MMA of one block: 2 · tile_m · tile_n · tile_k (the
        K-step no longer than K)."""
        return 2 * self.tile_m * self.tile_n * min(self.k, self.tile_k or DEFAULT_TILE_K)


def gemm_dram_bytes(g: GemmShape, concurrent: int, l2_bytes: float) -> dict[str, float]:
    """DRAM bytes of a GEMM from tile reuse: per wave of ``concurrent`` blocks, each distinct
    A row panel (tile_m × K) and B column panel (K × tile_n) is read once (shared in L2);
    every wave reads its panels again, unless A and B together fit in ``l2_bytes`` (then
    each is read once). C is written once.

    Example:
        >>> g = GemmShape(8192, 8192, 8192, 128, 128)
        >>> rm = gemm_dram_bytes(g, 132, 50e6)["bytes"]
        >>> order = [divmod(i, 64) for i in range(64 * 64)]  # row-major, as the default
        >>> from tilelab.compiler.tile_index import grouped_tile_index
        >>> gr = gemm_dram_bytes(GemmShape(8192, 8192, 8192, 128, 128, order=[
        ...     grouped_tile_index(i, 64, 64, 8) for i in range(64 * 64)]), 132, 50e6)["bytes"]
        >>> gr < rm
        True
    """
    gm, gn = g.tiles
    order = list(g.order) if g.order is not None else [divmod(i, gn) for i in range(gm * gn)]
    a_panel, b_panel = g.tile_m * g.k * g.a_size, g.tile_n * g.k * g.b_size
    a_all, b_all = g.m * g.k * g.a_size, g.k * g.n * g.b_size
    c_bytes = g.m * g.n * g.c_size
    if a_all + b_all <= l2_bytes:
        return {"bytes": a_all + b_all + c_bytes, "a_reads": 1.0, "b_reads": 1.0,
                "fits_l2": True}
    step = max(1, concurrent)
    a_read = b_read = 0
    for w in range(0, len(order), step):
        wave = order[w:w + step]
        a_read += len({r for r, _ in wave})
        b_read += len({c for _, c in wave})
    return {"bytes": a_read * a_panel + b_read * b_panel + c_bytes,
            "a_reads": a_read / gm, "b_reads": b_read / gn, "fits_l2": False}


@dataclass(frozen=True)
class LaunchShape:
    """What the model needs of one launch: blocks, the kernel's resources when known,
    useful and executed FLOPs (padding included), the DRAM bytes without reuse modelling,
    the precision, and for GEMM-like launches their :class:`GemmShape`.

    ``blocks=None`` says the grid is not known (counted work with no launch, such as a
    :class:`~tilelab.perf.counting.Work`): the launch is then taken to fill whole waves
    of the GPU (no partial last wave, no block latency), and the prediction says so.

    Example:
        >>> LaunchShape(blocks=8, useful_flops=1.0, executed_flops=2.0, dram_bytes=8.0,
        ...             precision="fp32").lane_efficiency
        0.5
    """

    blocks: int | None
    useful_flops: float
    executed_flops: float
    dram_bytes: float
    precision: str
    threads: int | None = None
    registers: int | None = None
    shared_bytes: int | None = None
    gemm: GemmShape | None = None

    @property
    def lane_efficiency(self) -> float:
        """Useful over executed FLOPs (1.0 without padded edge tiles)."""
        return self.useful_flops / self.executed_flops if self.executed_flops else 1.0


def compulsory_gemm_bytes(g: GemmShape) -> float:
    """The fewest DRAM bytes a GEMM moves: A, B and C once each.

    Example:
        >>> compulsory_gemm_bytes(GemmShape(64, 64, 64, 32, 32))     # three 64×64 bf16
        24576.0
    """
    return float(g.m * g.k * g.a_size + g.k * g.n * g.b_size + g.m * g.n * g.c_size)
