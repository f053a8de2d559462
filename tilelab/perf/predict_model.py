"""The model behind :func:`tilelab.perf.predict`: a launch's time on a GPU, term by term.

Why: the roofline bound ``max(flops / peak, bytes / bandwidth)`` puts every predicted point
exactly on the roof, so changing a tile size or a schedule on the CPU teaches nothing. This
model adds what moves real kernels off the roof, each term stated. It is the one model
of the package; :func:`tilelab.perf.predict` (in :mod:`tilelab.perf.prediction`) is the
one way to use it, and its :class:`~tilelab.perf.prediction.Prediction` names the parts
(roofline bound, kernel body, launch floor, total). The terms:

- **launch floor**: a fixed latency per launch (tiny grids are dominated by it). It is
  measured on launches of one wave that load and store, so it contains one block's
  memory round trip;
- **waves**: blocks run in waves of ``SMs × blocks per SM`` (from the kernel's registers,
  threads and shared memory when known); for math, the last, partial wave leaves SMs
  idle and takes as long as a full one (math time ÷ wave use);
- **padding waste**: the lanes an edge tile executes beyond the tensor (the interpreter
  counts executed and useful FLOPs) cost time but do no useful work;
- **DRAM traffic from tile reuse** (GEMM-like launches): the A and B panels the blocks of
  one wave read are fetched from DRAM once per wave and shared through L2; across waves
  they are fetched again, unless all of A and B fit in L2 (then once). The schedule's
  order decides how many distinct panels a wave touches: ``tl.grouped`` touches fewer;
- **DRAM bandwidth of a wave**: a wave whose blocks occupy ``a`` of the ``S`` SMs
  streams at ``bandwidth × eff_memory × min(1, a / (dram_sm_share × S))``: one SM can
  pull several times its share of the bandwidth, so a share of the SMs already
  saturates DRAM and a partial wave is *not* slowed in proportion to the SMs it leaves
  idle; only a grid of very few blocks is. (``dram_sm_share`` ≤ 1, so a full wave is
  never limited by it);
- **tile MMA efficiency** (GEMM-like launches): each K-step of a block is one MMA of
  ``tile_m × tile_n × tile_k`` plus fixed costs that a small MMA cannot hide (waiting for
  the next slices of A and B, the barrier, issuing the MMA). With ``t_mma`` the time of
  one step's MMA on one SM at the unit's efficiency, the block reaches

  ``eff_tile = (t_mma / (t_mma + tile_latency)) ** tile_alpha``,
  ``t_mma = 2·tile_m·tile_n·tile_k / (peak per SM × eff_unit)``

  of that efficiency: it grows with the MMA and saturates at 1. The form is an
  assumption; its two constants come from the fit named below. With ``tile_alpha = 1``
  it says exactly "every K-step costs its MMA plus a fixed latency"; the fit wants a
  steeper fall (small tiles lose more than a fixed latency explains). The law holds for
  CUDA-core MMA too, where a step's MMA takes far longer, so it barely bites there.
  *Warps*: every GEMM the constants were fitted to had 256 threads (8 warps) and one
  block per SM (255 registers per thread) whatever its tile, so a 16×16 tile leaves each
  warp a fraction of one warp-level MMA per K-step. The data cannot separate the tile
  from the warps per block or from residency: the law is stated in the MMA size only and
  is calibrated at 8 resident warps per SM; more resident blocks, which would hide more
  of the step latency, get no credit. When a launch does not give its K-step
  (``GemmShape.tile_k`` None), :data:`DEFAULT_TILE_K` is assumed and said;
- **block latency**: a block holds its slot for at least ``block_latency`` (its loads'
  round trip, its dependent steps such as reductions, its stores), so ``w`` waves take
  at least ``(w - 1) × block_latency`` beyond the floor (which contains the first). It
  is applied only when the kernel's resources are known (otherwise the residency, and so
  the number of waves, is a guess);
- **efficiencies**: the fraction of the datasheet bandwidth, of the dense tensor peak,
  of the FP32 peak for tile MMA on CUDA cores (fp32 GEMMs), and of the FP32 peak for
  element-wise math, that a kernel reaches.

``total = launch floor + kernel body``,
``kernel body = max(math ÷ wave use, DRAM, (waves - 1) × block latency)``

The constants are in :data:`CONSTANTS`, each with its source. The calibrated ones were
fitted (:mod:`tilelab.perf.predict_fit`) to the H200 run
``benchmarks/results/predict_fit_h200_2026-12-02.json`` and name it; two remain
uncalibrated assumptions because that run cannot constrain them: ``dram_sm_share`` (its
grids of few blocks are launch-floor bound) and ``eff_cuda`` (no launch in it is limited
by element-wise math: its softmax launches, the only candidates, can also be fitted by a
1.7% FP32 efficiency instead of the block latency, a worse fit of the whole run, so the
fit holds ``eff_cuda`` at its assumption). Every prediction lists the assumptions it
used.

What the model is given, a launch (:class:`LaunchShape`, :class:`GemmShape`) and the
GPU's residency limits (:data:`SM_LIMITS`, :func:`blocks_per_sm`), is described in
:mod:`tilelab.perf.predict_shapes` and re-exported here.

Example:
    >>> m = model_terms(LaunchShape(blocks=4, useful_flops=4096, executed_flops=4096,
    ...                             dram_bytes=49152, precision="fp32"), "h200")
    >>> m.limited_by, m.body_limited_by, m.body_s < m.launch_s
    ('launch floor', 'DRAM', True)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Mapping, Sequence

import numpy as np

from tilelab.perf.predict_shapes import (DEFAULT_TILE_K, SM_LIMITS, GemmShape, LaunchShape,
                                         SMLimits, blocks_per_sm, compulsory_gemm_bytes,
                                         gemm_dram_bytes)

__all__ = ["Constant", "CONSTANTS", "SMLimits", "SM_LIMITS", "GemmShape", "LaunchShape",
           "LaunchTerms", "ModelTerms", "model_terms", "blocks_per_sm", "gemm_dram_bytes",
           "launch_terms", "stack_terms", "model_time", "tile_efficiency", "DEFAULT_TILE_K",
           "UNIT_KEYS", "compulsory_gemm_bytes"]


@dataclass(frozen=True)
class Constant:
    """One named model constant: its value, unit, where it comes from, and whether it was
    fitted to GPU measurements (``calibrated``).

    Example:
        >>> Constant("launch floor", 4e-6, "s", "a guess").describe()
        'launch floor 4 µs (uncalibrated assumption: a guess)'
        >>> CONSTANTS["dram_sm_share"].describe().startswith("SMs that saturate DRAM 33%")
        True
    """

    name: str
    value: float
    unit: str
    source: str
    calibrated: bool = False

    def describe(self) -> str:
        """The constant in one line, saying whether it is calibrated."""
        v, u = self.value, self.unit
        shown = (_seconds(v) if u == "s" else f"{v * 100:g}%" if u == "fraction" else
                 f"{v:g} {u}".rstrip())
        how = "calibrated" if self.calibrated else "uncalibrated assumption"
        return f"{self.name} {shown} ({how}: {self.source})"


def _seconds(v: float) -> str:
    return f"{v * 1e9:g} ns" if 0 < v < 1e-6 else f"{v * 1e6:g} µs"


_FIT = ("fitted to benchmarks/results/predict_fit_h200_2026-12-02.json "
        "(NVIDIA H200, 2026-12-02, 39 launches)")

#: every constant of the model, in one place
CONSTANTS: dict[str, Constant] = {
    "launch_floor": Constant("launch floor", 3.92e-06, "s", _FIT, calibrated=True),
    "eff_memory": Constant("DRAM efficiency", 0.952, "fraction", _FIT, calibrated=True),
    "eff_tensor": Constant("tensor-core efficiency", 0.695, "fraction", _FIT,
                           calibrated=True),
    "eff_cuda_mma": Constant("CUDA-core MMA efficiency", 0.0676, "fraction", _FIT,
                             calibrated=True),
    "tile_latency": Constant("K-step latency", 2.16e-08, "s", _FIT, calibrated=True),
    "tile_alpha": Constant("tile-law exponent", 2.71, "", _FIT, calibrated=True),
    "block_latency": Constant("block latency", 2.8e-06, "s", _FIT, calibrated=True),
    "eff_cuda": Constant("CUDA-core efficiency", 0.60, "fraction",
                         "element-wise math's share of the FP32 peak; no launch of the "
                         "2026-12-02 H200 run is limited by it"),
    "dram_sm_share": Constant("SMs that saturate DRAM", 0.33, "fraction",
                              "Little's law: one SM keeps some 64 KiB in flight, at ~0.6 µs "
                              "DRAM latency about 3× its share of an H200's 4.8 TB/s; the "
                              "2026-12-02 H200 run's few-block grids are floor-bound"),
}

#: the efficiency constant of each math unit, by :attr:`LaunchTerms.unit`
UNIT_KEYS = ("eff_tensor", "eff_cuda_mma", "eff_cuda")


# ============================================================================ the terms

@dataclass(frozen=True)
class LaunchTerms:
    """The quantities of one launch on one GPU that no constant changes: the waves, the
    executed FLOPs and the peak of their unit (``unit`` indexes :data:`UNIT_KEYS`: 0
    tensor cores, 1 CUDA-core MMA, 2 element-wise on CUDA cores), the FLOPs of one
    K-step's MMA (0: not a GEMM), the DRAM bytes (tile reuse applied), and the notes that
    say where they come from. :func:`model_time` turns them into seconds.

    Example:
        >>> t = launch_terms(LaunchShape(blocks=133, useful_flops=1e9, executed_flops=1e9,
        ...                              dram_bytes=1e6, precision="fp32"), "h200")
        >>> t.waves, t.last_wave, t.unit, t.resources_known
        (2, 1, 2, False)
    """

    blocks: int
    sms: int
    blocks_per_sm: int
    waves: int
    last_wave: int
    wave_use: float
    flops: float
    peak: float
    unit: int
    step_flops: float
    dram_bytes: float
    bandwidth: float
    resources_known: bool
    blocks_per_sm_why: str = ""
    notes: tuple[str, ...] = ()
    grid_known: bool = True

    def arrays(self) -> dict[str, np.ndarray]:
        """The numeric terms as 0-d arrays, the input of :func:`model_time`."""
        return stack_terms([self])


def stack_terms(terms: Sequence[LaunchTerms]) -> dict[str, np.ndarray]:
    """The numeric fields of several launches' terms, one array per field (one entry per
    launch), for :func:`model_time` to evaluate them all at once.

    Example:
        >>> s = LaunchShape(blocks=1, useful_flops=1, executed_flops=1, dram_bytes=4,
        ...                 precision="fp32")
        >>> stack_terms([launch_terms(s, "h200")] * 3)["blocks"].tolist()
        [1.0, 1.0, 1.0]
    """
    keys = [f.name for f in fields(LaunchTerms) if f.type not in ("str", "tuple[str, ...]")]
    out = {k: np.array([float(getattr(t, k)) for t in terms]) for k in keys}
    if len(terms) == 1:
        out = {k: v.reshape(()) for k, v in out.items()}
    return out


def _unit(shape: LaunchShape) -> int:
    from tilelab.perf.specs import PRECISIONS

    if PRECISIONS[shape.precision].tensor:
        return 0
    return 1 if shape.gemm is not None else 2


def launch_terms(shape: LaunchShape, gpu: Any) -> LaunchTerms:
    """The constant-free terms of ``shape`` on ``gpu`` (a spec or key).

    Example:
        >>> g = GemmShape(1024, 1024, 1024, 128, 128, tile_k=64)
        >>> t = launch_terms(LaunchShape(64, 2.0 * 1024 ** 3, 2.0 * 1024 ** 3, 6.0 * 2 ** 20,
        ...                              "bf16", gemm=g), "h200")
        >>> t.unit, t.step_flops, t.waves, t.notes[0].startswith("L2 50 MiB")
        (0, 2097152.0, 1, True)
    """
    from tilelab.perf.roofs import peak_rate
    from tilelab.perf.specs import Density, lookup_gpu

    spec = lookup_gpu(gpu)
    sms = int(spec.sm_count.value) if spec.sm_count is not None else 132
    l2 = float(spec.l2_size.value) if spec.l2_size is not None else 0.0
    bps, why = blocks_per_sm(spec.arch, shape.threads, shape.registers, shape.shared_bytes)
    slots = sms * bps
    grid_known = shape.blocks is not None
    blocks = max(1, int(shape.blocks)) if grid_known else slots
    waves = max(1, math.ceil(blocks / slots))
    dram, step = float(shape.dram_bytes), 0.0
    notes = [f"{bps} block(s)/SM: {why}", f"{sms} SMs ({spec.name} datasheet)"]
    if not grid_known:
        notes = [f"{sms} SMs ({spec.name} datasheet)",
                 "grid not given: the launch is taken to fill whole waves (no partial "
                 "last wave, no block latency)"]
    if shape.gemm is not None:
        reuse = gemm_dram_bytes(shape.gemm, slots, l2)
        dram, step = reuse["bytes"], float(shape.gemm.step_flops)
        notes.insert(0, f"L2 {l2 / 2**20:.0f} MiB ({spec.name} datasheet): " + (
            "A and B fit, each read once" if reuse["fits_l2"] else
            f"A read {reuse['a_reads']:.2g}×, B read {reuse['b_reads']:.2g}× "
            "(once per wave that needs a panel)"))
        if shape.gemm.tile_k is None:
            notes.append(f"K-step not given: {DEFAULT_TILE_K} assumed for the tile MMA law")
    known = grid_known and bool(shape.threads) and spec.arch in SM_LIMITS
    if grid_known and not known:
        notes.append("block latency not applied: the kernel's resources, so its "
                     "blocks per SM and waves, are not known")
    return LaunchTerms(blocks, sms, bps, waves, blocks - (waves - 1) * slots,
                       blocks / (waves * slots), float(shape.executed_flops),
                       peak_rate(spec, shape.precision, Density.DENSE), _unit(shape), step, dram,
                       float(spec.bandwidth), known, why, tuple(notes), grid_known)


# ============================================================================ the formula

def _tile_law(step: Any, sm_peak: Any, eff_unit: Any, latency: Any, alpha: Any) -> Any:
    """``(t_mma / (t_mma + latency)) ** alpha`` where a K-step's MMA takes ``t_mma``;
    1 where ``step`` is 0 (not a GEMM)."""
    has = np.asarray(step) > 0
    t_mma = np.where(has, step, 1.0) / (sm_peak * eff_unit)
    return np.where(has, (t_mma / (t_mma + latency)) ** alpha, 1.0)


def model_time(t: Mapping[str, Any], v: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The model's seconds and every term, from terms ``t`` (:meth:`LaunchTerms.arrays` or
    :func:`stack_terms`: one entry per launch) and constant values ``v`` (key -> value;
    arrays of shape (P, 1) evaluate P constant sets at once):

    - ``math`` = executed FLOPs / (peak × eff_unit × eff_tile), ÷ wave use;
    - ``memory`` = each wave's bytes / (bandwidth × eff_memory × min(1, SMs it occupies
      / (dram_sm_share × SMs))), summed over the waves (``capped``: the part where too
      few SMs limit);
    - ``latency`` = (waves - 1) × block_latency where the resources are known;
    - ``seconds`` = launch_floor + max(math, memory, latency).

    Example:
        >>> s = LaunchShape(blocks=8, useful_flops=0, executed_flops=0, dram_bytes=8e6,
        ...                 precision="fp32")
        >>> v = {k: c.value for k, c in CONSTANTS.items()}
        >>> r = model_time(launch_terms(s, "h200").arrays(), v)
        >>> full = 4.8e12 * v["eff_memory"]
        >>> bool(r["capped"] == r["memory"]), round(float(r["memory"]) * full * 8 / (0.33 * 132))
        (True, 8000000)
    """
    unit = np.asarray(t["unit"])
    eff = np.where(unit == 0, v["eff_tensor"],
                   np.where(unit == 1, v["eff_cuda_mma"], v["eff_cuda"]))
    sms, last = t["sms"], t["last_wave"]
    tile = _tile_law(t["step_flops"], t["peak"] / sms, eff, v["tile_latency"],
                     v["tile_alpha"])
    compute = t["flops"] / (t["peak"] * eff * tile)
    math_s = compute / t["wave_use"]
    per_block = t["dram_bytes"] / t["blocks"]
    full = t["bandwidth"] * v["eff_memory"]
    occupied = np.minimum(1.0, np.minimum(sms, last) / (v["dram_sm_share"] * sms))
    mem_full = (t["waves"] - 1) * sms * t["blocks_per_sm"] * per_block / full
    mem_last = last * per_block / (full * occupied)
    memory = mem_full + mem_last
    capped = np.where(occupied < 1, mem_last, 0.0)
    latency = np.where(np.asarray(t["resources_known"]) > 0,
                       (t["waves"] - 1) * v["block_latency"], 0.0)
    body = np.maximum(np.maximum(math_s, memory), latency)
    return {"seconds": v["launch_floor"] + body, "body": body, "compute": compute,
            "math": math_s, "memory": memory, "capped": capped, "latency": latency,
            "tile": tile, "eff": eff, "floor": np.asarray(v["launch_floor"])}


def tile_efficiency(gemm: GemmShape, precision: str, gpu: Any, *,
                    constants: dict[str, Constant] | None = None) -> float:
    """The share of its unit's efficiency that a block of ``gemm`` reaches (the tile MMA
    law of the module docstring): rises with the tile's MMA, saturates at 1.

    Example:
        >>> small, big = (tile_efficiency(GemmShape(2048, 2048, 2048, t, t, tile_k=32),
        ...                               "bf16", "h200") for t in (16, 128))
        >>> small < 0.01 < 0.5 < big < 1
        True
    """
    from tilelab.perf.roofs import peak_rate
    from tilelab.perf.specs import Density, lookup_gpu

    spec = lookup_gpu(gpu)
    k = dict(CONSTANTS, **(constants or {}))
    sms = int(spec.sm_count.value) if spec.sm_count is not None else 132
    from tilelab.perf.specs import PRECISIONS

    eff = k["eff_tensor" if PRECISIONS[precision].tensor else "eff_cuda_mma"].value
    return float(_tile_law(gemm.step_flops, peak_rate(spec, precision, Density.DENSE) / sms, eff,
                           k["tile_latency"].value, k["tile_alpha"].value))


# ============================================================================ one launch's terms

#: what each part of the kernel body is spent on, in plain words (for verdicts)
BODY_WORDS = {"DRAM": "bytes", "math": "math", "block latency": "block latency"}


@dataclass(frozen=True)
class ModelTerms:
    """The model's terms of one launch on one GPU, in seconds and counts.

    ``body_s`` is the kernel body ``max(math_s, dram_s, latency_s)`` and ``launch_s``
    the launch floor; ``body_limited_by`` names the largest part of the body ('math',
    'DRAM' or 'block latency') and ``limited_by`` the largest part of the whole time
    ('launch floor' when the floor is at least the body). ``compute_s`` is the math
    at full waves (``math_s = compute_s ÷ wave_use``); ``tile_efficiency`` the tile MMA
    law's factor (1 when not a GEMM); ``idle_sms_last_wave`` the SMs the last wave
    leaves empty; ``assumptions`` the constants used and where the terms came from.

    Example:
        >>> m = model_terms(LaunchShape(blocks=133, useful_flops=1e9, executed_flops=1e9,
        ...                             dram_bytes=1e6, precision="fp32"), "h200")
        >>> m.waves, m.idle_sms_last_wave, m.body_limited_by
        (2, 131, 'math')
    """

    body_s: float
    launch_s: float
    compute_s: float
    math_s: float
    dram_s: float
    latency_s: float
    body_limited_by: str
    limited_by: str
    waves: int
    blocks: int
    blocks_per_sm: int
    blocks_per_sm_why: str
    idle_sms_last_wave: int
    wave_use: float
    lane_efficiency: float
    dram_bytes: float
    tile_efficiency: float
    grid_known: bool
    assumptions: tuple[str, ...] = field(default=())

    def summary(self) -> str:
        """The terms in one line: how the body is made up, and the waves.

        Example:
            >>> m = model_terms(LaunchShape(blocks=1, useful_flops=1, executed_flops=1,
            ...                             dram_bytes=4, precision="fp32"), "h200")
            >>> m.summary().startswith("kernel body = max(")
            True
        """
        tile = (f"; tile MMA at {self.tile_efficiency:.0%} of its unit's efficiency"
                if self.tile_efficiency < 1 else "")
        grid = (f"{self.waves} wave(s) of {self.blocks_per_sm} block(s)/SM, "
                f"{self.idle_sms_last_wave} SMs idle in the last" if self.grid_known else
                "grid not given: whole waves assumed")
        return (f"kernel body = max({_us(self.compute_s)} math ÷ {self.wave_use:.0%} wave "
                f"use, {_us(self.dram_s)} DRAM, {_us(self.latency_s)} block latency) = "
                f"{_us(self.body_s)}; {grid}; {self.lane_efficiency:.0%} of lanes "
                f"useful{tile}")


def _us(s: float) -> str:
    v = s * 1e6
    if v < 1:
        return f"{v * 1000:.3g} ns"
    return f"{v:.3g} µs" if v < 1000 else f"{v / 1000:.3g} ms"


def _used(k: dict[str, Constant], t: LaunchTerms) -> list[str]:
    keys = ["launch_floor", UNIT_KEYS[t.unit]]
    keys += ["tile_latency", "tile_alpha"] if t.step_flops else []
    keys += ["eff_memory"] + (["dram_sm_share"] if t.grid_known else [])
    keys += ["block_latency"] if t.resources_known else []
    return [k[key].describe() for key in keys]


def model_terms(shape: LaunchShape, gpu: Any, *,
                constants: dict[str, Constant] | None = None) -> ModelTerms:
    """The model's terms of ``shape`` on ``gpu`` (a spec or key) with ``constants``
    (default :data:`CONSTANTS`; a partial dict overrides some): see :func:`model_time`.

    Example:
        >>> tiny = LaunchShape(blocks=1, useful_flops=1e3, executed_flops=1e3,
        ...                    dram_bytes=1e4, precision="fp32")
        >>> big = LaunchShape(blocks=132 * 64, useful_flops=1e12, executed_flops=1e12,
        ...                   dram_bytes=1e9, precision="fp32")
        >>> model_terms(tiny, "h200").limited_by, model_terms(big, "h200").limited_by
        ('launch floor', 'math')
    """
    from tilelab.perf.specs import lookup_gpu

    spec = lookup_gpu(gpu)
    k = dict(CONSTANTS, **(constants or {}))
    t = launch_terms(shape, spec)
    r = {key: float(val) for key, val in
         model_time(t.arrays(), {key: c.value for key, c in k.items()}).items()}
    parts = {"math": r["math"], "DRAM": r["memory"], "block latency": r["latency"]}
    body_by = max(parts, key=parts.get)
    idle = max(0, t.sms - math.ceil(t.last_wave / t.blocks_per_sm)) if t.grid_known else 0
    return ModelTerms(r["body"], r["floor"], r["compute"], r["math"], r["memory"],
                      r["latency"], body_by,
                      "launch floor" if r["floor"] >= r["body"] else body_by,
                      t.waves, t.blocks, t.blocks_per_sm, t.blocks_per_sm_why, idle,
                      t.wave_use, shape.lane_efficiency, t.dram_bytes, r["tile"],
                      t.grid_known, tuple(_used(k, t)) + t.notes)
