"""A stated model of a launch's time on a GPU, for points the CPU interpreter counted.

Why: the roofline bound ``max(flops / peak, bytes / bandwidth)`` puts every predicted point
exactly on the roof, so changing a tile size or a schedule on the CPU teaches nothing. This
model adds what moves real kernels off the roof, each term stated:

- **launch floor**: a fixed latency per launch (tiny grids are dominated by it);
- **waves**: blocks run in waves of ``SMs × blocks per SM`` (from the kernel's registers,
  threads and shared memory when known); the last, partial wave leaves SMs idle, and a
  wave takes as long whether it is full or not;
- **padding waste**: the lanes an edge tile executes beyond the tensor (the interpreter
  counts executed and useful FLOPs) cost time but do no useful work;
- **DRAM traffic from tile reuse** (GEMM-like launches): the A and B panels the blocks of
  one wave read are fetched from DRAM once per wave and shared through L2; across waves
  they are fetched again, unless all of A and B fit in L2 (then once). The schedule's
  order decides how many distinct panels a wave touches: ``tl.grouped`` touches fewer;
- **efficiencies**: the fraction of the datasheet peak and bandwidth a good kernel
  reaches.

The constants are in :data:`CONSTANTS`, each with its source; the efficiencies and the
launch floor are *uncalibrated assumptions* (a GPU run fits them), and every prediction
lists the assumptions it used.

Example:
    >>> p = predict_launch(LaunchShape(blocks=4, useful_flops=4096, executed_flops=4096,
    ...                                dram_bytes=49152, precision="fp32"), "h200")
    >>> p.limiter, p.seconds > CONSTANTS["launch_floor"].value
    ('launch floor', True)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

__all__ = ["Constant", "CONSTANTS", "SMLimits", "SM_LIMITS", "GemmShape", "LaunchShape",
           "Prediction", "predict_launch", "blocks_per_sm", "gemm_dram_bytes"]


@dataclass(frozen=True)
class Constant:
    """One named model constant: its value, unit, where it comes from, and whether it was
    fitted to GPU measurements (``calibrated``).

    Example:
        >>> CONSTANTS["launch_floor"].describe()
        'launch floor 4 µs (uncalibrated assumption: order of magnitude of a CUDA launch)'
    """

    name: str
    value: float
    unit: str
    source: str
    calibrated: bool = False

    def describe(self) -> str:
        """The constant in one line, saying whether it is calibrated."""
        v = self.value
        shown = (f"{v * 1e6:g} µs" if self.unit == "s" else
                 f"{v * 100:g}%" if self.unit == "fraction" else f"{v:g} {self.unit}")
        how = "calibrated" if self.calibrated else "uncalibrated assumption"
        return f"{self.name} {shown} ({how}: {self.source})"


#: every constant of the model, in one place
CONSTANTS: dict[str, Constant] = {
    "launch_floor": Constant("launch floor", 4e-6, "s",
                             "order of magnitude of a CUDA launch"),
    "eff_memory": Constant("DRAM efficiency", 0.80, "fraction",
                           "a streaming kernel's share of datasheet bandwidth"),
    "eff_tensor": Constant("tensor-core efficiency", 0.70, "fraction",
                           "a tuned GEMM's share of the dense tensor peak"),
    "eff_cuda": Constant("CUDA-core efficiency", 0.60, "fraction",
                         "element-wise math's share of the FP32 peak"),
}


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
    blocks take C tiles (``order``: (row, col) per block; None = row-major), and the
    element sizes of A, B and C in bytes.

    Example:
        >>> GemmShape(256, 256, 64, 64, 64).tiles
        (4, 4)
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

    @property
    def tiles(self) -> tuple[int, int]:
        """Tiles of C per dimension."""
        return math.ceil(self.m / self.tile_m), math.ceil(self.n / self.tile_n)


def gemm_dram_bytes(g: GemmShape, concurrent: int, l2_bytes: float) -> dict[str, float]:
    """DRAM bytes of a GEMM from tile reuse: per wave of ``concurrent`` blocks, each distinct
    A row panel (tile_m × K) and B column panel (K × tile_n) is read once (shared in L2);
    every wave reads its panels again, unless A and B together fit in ``l2_bytes`` (then
    each is read once). C is written once.

    Example:
        >>> g = GemmShape(8192, 8192, 8192, 128, 128)
        >>> rm = gemm_dram_bytes(g, 132, 50e6)["bytes"]
        >>> order = [divmod(i, 64) for i in range(64 * 64)]  # row-major, as the default
        >>> from tilelab.compiler.device import grouped_tile_index
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

    Example:
        >>> LaunchShape(blocks=8, useful_flops=1.0, executed_flops=2.0, dram_bytes=8.0,
        ...             precision="fp32").lane_efficiency
        0.5
    """

    blocks: int
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


@dataclass(frozen=True)
class Prediction:
    """A predicted time and every term of it, with the assumptions it used.

    Example:
        >>> p = predict_launch(LaunchShape(blocks=133, useful_flops=1e9, executed_flops=1e9,
        ...                                dram_bytes=1e6, precision="fp32"), "h200")
        >>> p.waves, p.idle_sms_last_wave
        (2, 131)
    """

    gpu: str
    seconds: float
    bound_seconds: float
    launch_s: float
    compute_s: float
    memory_s: float
    waves: int
    blocks_per_sm: int
    blocks_per_sm_why: str
    idle_sms_last_wave: int
    wave_efficiency: float
    lane_efficiency: float
    dram_bytes: float
    limiter: str
    assumptions: tuple[str, ...] = field(default=())

    def summary(self) -> str:
        """One line: the terms that add up to the time.

        Example:
            >>> p = predict_launch(LaunchShape(blocks=1, useful_flops=1, executed_flops=1,
            ...                                dram_bytes=4, precision="fp32"), "h200")
            >>> p.summary().startswith("4 µs launch + max(")
            True
        """
        return (f"{_us(self.launch_s)} launch + max({_us(self.compute_s)} math, "
                f"{_us(self.memory_s)} DRAM) ÷ {self.wave_efficiency:.0%} wave use = "
                f"{_us(self.seconds)}; {self.waves} wave(s) of {self.blocks_per_sm} "
                f"block(s)/SM, {self.idle_sms_last_wave} SMs idle in the last; "
                f"{self.lane_efficiency:.0%} of lanes useful; limited by {self.limiter}")


def _us(s: float) -> str:
    v = s * 1e6
    if v < 1:
        return f"{v * 1000:.3g} ns"
    return f"{v:.3g} µs" if v < 1000 else f"{v / 1000:.3g} ms"


def _kind(precision: str) -> str:
    from tilelab.perf.specs import PRECISIONS

    return "eff_tensor" if PRECISIONS[precision].tensor else "eff_cuda"


def predict_launch(shape: LaunchShape, gpu: Any, *,
                   constants: dict[str, Constant] | None = None) -> Prediction:
    """The model's time of ``shape`` on ``gpu`` (a spec or key), with every term.

    ``time = launch floor + max(executed FLOPs / (peak × eff), DRAM bytes / (bandwidth ×
    eff)) ÷ wave use``, where wave use = blocks / (waves × SMs × blocks per SM).

    Example:
        >>> tiny = LaunchShape(blocks=1, useful_flops=1e3, executed_flops=1e3,
        ...                    dram_bytes=1e4, precision="fp32")
        >>> big = LaunchShape(blocks=132 * 64, useful_flops=1e12, executed_flops=1e12,
        ...                   dram_bytes=1e9, precision="fp32")
        >>> predict_launch(tiny, "h200").limiter, predict_launch(big, "h200").limiter
        ('launch floor', 'math')
    """
    from tilelab.perf.roofline import _peak, project
    from tilelab.perf.specs import Density, lookup_gpu

    spec = lookup_gpu(gpu)
    k = dict(CONSTANTS, **(constants or {}))
    sms = int(spec.sm_count.value) if spec.sm_count is not None else 132
    l2 = float(spec.l2_size.value) if spec.l2_size is not None else 0.0
    bps, why = blocks_per_sm(spec.arch, shape.threads, shape.registers, shape.shared_bytes)
    slots = sms * bps
    waves = max(1, math.ceil(shape.blocks / slots))
    last = shape.blocks - (waves - 1) * slots
    idle = max(0, sms - math.ceil(last / bps))
    use = shape.blocks / (waves * slots)
    dram, notes = float(shape.dram_bytes), []
    if shape.gemm is not None:
        reuse = gemm_dram_bytes(shape.gemm, slots, l2)
        dram = reuse["bytes"]
        notes.append(f"L2 {l2 / 2**20:.0f} MiB ({spec.name} datasheet): " + (
            "A and B fit, each read once" if reuse["fits_l2"] else
            f"A read {reuse['a_reads']:.2g}×, B read {reuse['b_reads']:.2g}× "
            "(once per wave that needs a panel)"))
    eff_c, eff_m = k[_kind(shape.precision)], k["eff_memory"]
    compute = shape.executed_flops / (_peak(spec, shape.precision, Density.DENSE) * eff_c.value)
    memory = dram / (spec.bandwidth * eff_m.value)
    body = max(compute, memory) / use
    floor = k["launch_floor"].value
    limiter = "launch floor" if floor >= body else ("math" if compute >= memory else "DRAM")
    from types import SimpleNamespace

    bound = project(SimpleNamespace(name="k", flops=shape.useful_flops,
                                    bytes=float(shape.dram_bytes),
                                    precision=shape.precision), spec).seconds
    used = [k["launch_floor"].describe(), eff_c.describe(), eff_m.describe(),
            f"{bps} block(s)/SM: {why}", f"{sms} SMs ({spec.name} datasheet)"] + notes
    return Prediction(spec.name, floor + body, bound, floor, compute, memory, waves, bps, why,
                      idle, use, shape.lane_efficiency, dram, limiter, tuple(used))
