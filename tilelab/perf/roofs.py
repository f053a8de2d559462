"""The roofs of one GPU: its compute ceilings and its memory ceiling, the ridge point
where they meet, and the rate a kernel of a given intensity can attain under them.

Why: the roofline (:mod:`tilelab.perf.roofline`), a point's fraction of its ceiling
(:mod:`tilelab.perf.roofline_point`) and the prediction's model
(:mod:`tilelab.perf.predict_model`, :mod:`tilelab.perf.prediction`) all price work at the
same peak rates; :func:`peak_rate` is that one number, and :func:`resolve_precision`
says whose units it is (:data:`CEILING_FALLBACK`). The rates are a
:class:`~tilelab.perf.specs.GPUSpec`'s: the datasheet's, or the ones measured on this
machine (:mod:`tilelab.perf.ceilings` measures them). Everything here is re-exported by
:mod:`tilelab.perf.roofline`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tilelab.perf.specs import (PRECISIONS, Density, GPUSpec, Source, UnsupportedPrecisionError,
                                check_precision, lookup_gpu)
from tilelab.perf.units import format_bandwidth, format_flops

__all__ = ["Ceiling", "compute_ceiling", "memory_ceiling", "ridge_point", "attainable",
           "peak_rate", "resolve_precision", "CEILING_FALLBACK"]

CEILING_FALLBACK: dict[str, str] = {"fp64_tc": "fp64"}
"""Where a GPU lacks a precision's units but still runs the work: an FP64 GEMM on a part
without FP64 tensor cores runs on its FP64 CUDA cores. No other precision falls back."""


@dataclass(frozen=True)
class Ceiling:
    """One horizontal (compute) or slanted (memory) line of a roofline.

    ``value`` is FLOP/s (OP/s for int8) for compute ceilings and B/s for the memory ceiling.
    ``precision`` is the precision asked for; ``hardware_precision`` the one whose units the
    number is (they differ only through :data:`CEILING_FALLBACK`).

    Example:
        >>> c = compute_ceiling(lookup_gpu("rtx5090"), "bf16")
        >>> c.value / 1e12, c.label
        (209.5, 'NVIDIA GeForce RTX 5090 · BF16 tensor, FP32 accumulate · 209.5 TFLOP/s dense')
    """

    kind: str
    value: float
    unit: str
    gpu: str
    precision: str | None
    hardware_precision: str | None
    density: Density
    measured: bool
    source: Source
    label: str

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON.

        Example:
            >>> memory_ceiling(lookup_gpu("h200")).to_dict()["value"]
            4800000000000.0
        """
        return {"kind": self.kind, "value": self.value, "unit": self.unit, "gpu": self.gpu,
                "precision": self.precision, "hardware_precision": self.hardware_precision,
                "density": self.density.value, "measured": self.measured,
                "label": self.label, "source": _source_dict(self.source)}


def _source_dict(source: Source) -> dict[str, str]:
    return {"title": source.title, "url": source.url, "note": source.note, "kind": source.kind}


def resolve_precision(spec: GPUSpec, precision: str) -> str:
    """The precision whose ceiling applies on ``spec`` (see :data:`CEILING_FALLBACK`)."""
    check_precision(precision)
    if spec.supports(precision):
        return precision
    fallback = CEILING_FALLBACK.get(precision)
    if fallback is not None and spec.supports(fallback):
        return fallback
    raise UnsupportedPrecisionError(
        f"{spec.name} has no {precision} rate ({PRECISIONS[precision].label})",
        hint=f"{spec.name} has: {', '.join(spec.precisions)}")


def peak_rate(spec: GPUSpec, precision: str, density: Density) -> float:
    """Peak of the applicable precision; sparse where it exists, else the dense rate."""
    entry = spec.peaks[resolve_precision(spec, precision)]
    if density is Density.SPARSE and entry.sparse is not None:
        return entry.sparse
    return entry.dense


def compute_ceiling(spec: "GPUSpec | str", precision: str,
                    density: "Density | str" = Density.DENSE) -> Ceiling:
    """The compute ceiling of ``precision`` on ``spec``.

    With ``density='sparse'`` tensor precisions use their 2:4-sparse rate; CUDA-core
    precisions have only one rate and keep it (the label says 'dense').

    Example:
        >>> compute_ceiling("h100", "fp8", "sparse").value / 1e12
        3958.0
        >>> compute_ceiling("rtx5090", "fp64_tc").hardware_precision   # no FP64 tensor cores
        'fp64'
    """
    spec = lookup_gpu(spec)
    density = Density.parse(density)
    used = resolve_precision(spec, precision)
    entry = spec.peaks[used]
    actual = density if (density is Density.SPARSE and entry.sparse is not None) else Density.DENSE
    value = entry.rate(actual)
    info = PRECISIONS[used]
    label = f"{spec.name} · {info.label} · {format_flops(value, info.unit)} {actual.value}"
    if used != precision:
        label += f" (no {precision} units; {used} used)"
    if spec.measured:
        label += " (measured)"
    return Ceiling("compute", value, info.unit, spec.name, precision, used, actual,
                   spec.measured, entry.source, label)


def memory_ceiling(spec: "GPUSpec | str") -> Ceiling:
    """The DRAM bandwidth ceiling of ``spec`` (B/s).

    Example:
        >>> memory_ceiling("b200").label
        'NVIDIA B200 · memory 8 TB/s'
    """
    spec = lookup_gpu(spec)
    label = f"{spec.name} · memory {format_bandwidth(spec.bandwidth)}"
    if spec.measured:
        label += " (measured)"
    return Ceiling("memory", spec.bandwidth, "B/s", spec.name, None, None, Density.DENSE,
                   spec.measured, spec.memory_bandwidth.source, label)


def ridge_point(spec: "GPUSpec | str", precision: str,
                density: "Density | str" = Density.DENSE) -> float:
    """Intensity (FLOP/B) where the memory slope meets the compute ceiling: peak / bandwidth.

    Below it a kernel is memory-bound, above it compute-bound.

    Example:
        >>> ridge_point("h200", "bf16")   # 989.5e12 FLOP/s / 4.8e12 B/s
        206.14583333333334
    """
    spec = lookup_gpu(spec)
    return peak_rate(spec, precision, Density.parse(density)) / spec.bandwidth


def attainable(spec: "GPUSpec | str", intensity: float, precision: str,
               density: "Density | str" = Density.DENSE) -> float:
    """The most FLOP/s a kernel of ``intensity`` FLOP/B can reach: min(peak, I x bandwidth).

    Example:
        >>> attainable("h200", 10.0, "bf16") / 1e12     # memory-bound: 10 x 4.8 TB/s
        48.0
        >>> attainable("h200", 1000.0, "bf16") / 1e12   # compute-bound: the peak
        989.5
    """
    if not (intensity >= 0):
        raise ValueError(f"intensity must be a non-negative number of FLOP/B, got {intensity!r}")
    spec = lookup_gpu(spec)
    return min(peak_rate(spec, precision, Density.parse(density)), intensity * spec.bandwidth)
