"""The roofline model: ceilings, attainable performance, points, projections, plot data.

Why: the lab shows every kernel launch as a point under the ceilings of several GPUs. The
model is the classic one (Williams, Waterman & Patterson, 2009): at arithmetic intensity
I (FLOP/B) a GPU attains at most ``min(peak, I * bandwidth)`` FLOP/s. This module keeps the
arithmetic in one place, states units everywhere (FLOP/s, B/s, FLOP/B, s), and hands the
plotter pure data (:meth:`Roofline.series`); drawing is the lab's job.

A *projection* runs the same counted work against another GPU's ceilings:
``seconds = max(flops / peak, bytes / bandwidth)``. It is the roofline *bound*: no real
kernel overlaps compute and memory perfectly or reaches either peak. A *prediction* of a
launch's time (launch floor and kernel body included) is
:func:`tilelab.perf.predict`, re-exported here as :func:`predict`: one function, one
meaning.

Example:
    >>> from tilelab.perf.counting import gemm
    >>> w = gemm(8192, 8192, 8192, a_dtype="bf16")
    >>> p = RooflinePoint.from_work(w, seconds=1.6e-3, device="NVIDIA H200")
    >>> format_flops(p.achieved_flops), round(p.fraction_of_ceiling(lookup_gpu("h200")), 2)
    ('687.2 TFLOP/s', 0.69)
    >>> format_seconds(project(p, lookup_gpu("b200")).seconds)
    '488.7 µs'
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from tilelab.perf.prediction import predict
from tilelab.perf.specs import (PRECISIONS, Density, GPUSpec, Source, UnsupportedPrecisionError,
                                ROOFLINE_GPUS, check_precision, lookup_gpu)

__all__ = [
    "Ceiling", "compute_ceiling", "memory_ceiling", "ridge_point", "attainable",
    "RooflinePoint", "Projection", "project", "predict", "Roofline",
    "format_flops", "format_bandwidth", "format_seconds", "format_bytes", "format_intensity",
    "CEILING_FALLBACK",
]

CEILING_FALLBACK: dict[str, str] = {"fp64_tc": "fp64"}
"""Where a GPU lacks a precision's units but still runs the work: an FP64 GEMM on a part
without FP64 tensor cores runs on its FP64 CUDA cores. No other precision falls back."""


# --------------------------------------------------------------------------- formatting

_PREFIXES = ("", "k", "M", "G", "T", "P", "E")
_SMALL = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"), (1e-12, "ps"))


def _si(value: float | None, unit: str, digits: int, base: int = 1000,
        prefixes: Sequence[str] = _PREFIXES) -> str:
    """``value`` with an SI (or binary) prefix and ``digits`` significant digits."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if math.isinf(value):
        return f"{'-' if value < 0 else ''}inf {unit}"
    if value == 0:
        return f"0 {unit}"
    sign, mag = ("-" if value < 0 else ""), abs(value)
    step = min(max(int(math.floor(math.log(mag, base) + 1e-12)), 0), len(prefixes) - 1)
    mant = float(f"{mag / base ** step:.{digits}g}")
    if mant >= base and step < len(prefixes) - 1:
        step += 1
        mant = float(f"{mag / base ** step:.{digits}g}")
    return f"{sign}{mant:g} {prefixes[step]}{unit}"


def format_flops(value: float | None, unit: str = "FLOP/s", digits: int = 4) -> str:
    """A rate with an SI prefix: FLOP/s (pass ``unit='OP/s'`` for INT8).

    Example:
        >>> format_flops(7.3e14), format_flops(2.25e15), format_flops(None)
        ('730 TFLOP/s', '2.25 PFLOP/s', 'n/a')
    """
    return _si(value, unit, digits)


def format_bandwidth(value: float | None, digits: int = 4) -> str:
    """A bandwidth in decimal B/s units, as vendors quote them.

    Example:
        >>> format_bandwidth(4.8e12), format_bandwidth(864e9)
        ('4.8 TB/s', '864 GB/s')
    """
    return _si(value, "B/s", digits)


def format_bytes(value: float | None, binary: bool = False, digits: int = 4) -> str:
    """A byte count: decimal (kB, MB, ...) by default, binary (KiB, MiB, ...) on request.

    Example:
        >>> format_bytes(100663296), format_bytes(141 * 2**30, binary=True)
        ('100.7 MB', '141 GiB')
    """
    if binary:
        return _si(value, "B", digits, 1024, ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))
    return _si(value, "B", digits)


def format_seconds(value: float | None, digits: int = 4) -> str:
    """A duration in s, ms, µs, ns or ps.

    Example:
        >>> format_seconds(1.5e-6), format_seconds(0.0123), format_seconds(2.5)
        ('1.5 µs', '12.3 ms', '2.5 s')
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if value <= 0 or value >= 1:
        return f"{float(f'{value:.{digits}g}'):g} s"
    for scale, unit in _SMALL:
        if value >= scale * (1 - 5e-13):
            mant = float(f"{value / scale:.{digits}g}")
            if mant >= 1000 and scale < 1:
                return f"{float(f'{value / (scale * 1000):.{digits}g}'):g} {_unit_above(unit)}"
            return f"{mant:g} {unit}"
    return f"{float(f'{value / 1e-12:.{digits}g}'):g} ps"


def _unit_above(unit: str) -> str:
    names = [u for _, u in _SMALL]
    return names[names.index(unit) - 1]


def format_intensity(value: float | None, digits: int = 4) -> str:
    """An arithmetic intensity in FLOP/B (no prefix: ridge points are 1 to 1000s).

    Example:
        >>> format_intensity(206.1458), format_intensity(0.0833333)
        ('206.1 FLOP/B', '0.08333 FLOP/B')
    """
    if value is None:
        return "n/a"
    return f"{float(f'{value:.{digits}g}'):g} FLOP/B"


# --------------------------------------------------------------------------- ceilings

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


def _resolve(spec: GPUSpec, precision: str) -> str:
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


def _peak(spec: GPUSpec, precision: str, density: Density) -> float:
    """Peak of the applicable precision; sparse where it exists, else the dense rate."""
    entry = spec.peaks[_resolve(spec, precision)]
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
    used = _resolve(spec, precision)
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
    return _peak(spec, precision, Density.parse(density)) / spec.bandwidth


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
    return min(_peak(spec, precision, Density.parse(density)), intensity * spec.bandwidth)


# --------------------------------------------------------------------------- points

@dataclass(frozen=True)
class RooflinePoint:
    """One kernel launch on the roofline: counted work, and a time when there is one.

    ``measured`` is True for a time measured on ``device``; False for a prediction (or a CPU
    run with no GPU time at all, ``seconds=None``). A predicted point carries its
    :class:`~tilelab.perf.prediction.Prediction` (``prediction``; its ``seconds`` are the
    predicted total, :meth:`Prediction.point <tilelab.perf.prediction.Prediction.point>`).
    Coordinates: x = ``intensity`` (FLOP/B), y = ``achieved_flops`` (FLOP/s).

    Example:
        >>> p = RooflinePoint("add", flops=1e6, bytes=12e6, precision="fp32", seconds=5e-6,
        ...                   measured=True, device="NVIDIA H200")
        >>> round(p.intensity, 4), format_bandwidth(p.achieved_bandwidth)
        (0.0833, '2.4 TB/s')
    """

    name: str
    flops: float
    bytes: float
    precision: str
    seconds: float | None = None
    measured: bool = False
    device: str | None = None
    label: str | None = None
    prediction: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        check_precision(self.precision)
        if not (self.flops >= 0 and math.isfinite(self.flops)):
            raise ValueError(f"{self.name}: flops must be a non-negative number")
        if not (self.bytes > 0 and math.isfinite(self.bytes)):
            raise ValueError(f"{self.name}: bytes must be positive (a point needs traffic)")
        if self.seconds is not None and not (self.seconds > 0 and math.isfinite(self.seconds)):
            raise ValueError(f"{self.name}: seconds must be positive, got {self.seconds!r}")
        if self.measured and self.seconds is None:
            raise ValueError(f"{self.name}: a measured point needs its measured seconds")

    @classmethod
    def from_work(cls, work: Any, *, seconds: float | None = None, device: str | None = None,
                  measured: bool | None = None, name: str | None = None) -> "RooflinePoint":
        """A point from a :class:`~tilelab.perf.counting.Work` (or anything with ``flops``,
        ``bytes`` and ``precision``). ``measured`` defaults to whether ``seconds`` is given.

        Example:
            >>> from tilelab.perf.counting import softmax
            >>> RooflinePoint.from_work(softmax(1024, 1024)).measured
            False
        """
        return cls(name or getattr(work, "name", "kernel"), float(work.flops),
                   float(work.bytes), work.precision, seconds,
                   seconds is not None if measured is None else measured, device)

    @property
    def intensity(self) -> float:
        """Arithmetic intensity in FLOP/B.

        Example:
            >>> RooflinePoint("k", 100.0, 50.0, "fp32").intensity
            2.0
        """
        return self.flops / self.bytes

    @property
    def achieved_flops(self) -> float | None:
        """FLOP/s over ``seconds``, or None without a time.

        Example:
            >>> RooflinePoint("k", 1e12, 1e9, "bf16", seconds=2e-3).achieved_flops
            500000000000000.0
        """
        return None if self.seconds is None else self.flops / self.seconds

    @property
    def achieved_bandwidth(self) -> float | None:
        """B/s over ``seconds`` (counted minimal bytes, so useful bandwidth), or None.

        Example:
            >>> RooflinePoint("k", 0.0, 4e9, "fp32", seconds=1e-3).achieved_bandwidth
            4000000000000.0
        """
        return None if self.seconds is None else self.bytes / self.seconds

    def bound_on(self, spec: "GPUSpec | str", density: "Density | str" = Density.DENSE) -> str:
        """'memory' if the point sits left of ``spec``'s ridge for its precision, else 'compute'.

        Example:
            >>> RooflinePoint("k", 1e9, 1e9, "bf16").bound_on("h200")
            'memory'
        """
        ridge = ridge_point(spec, self.precision, density)
        return "memory" if self.intensity < ridge else "compute"

    def fraction_of_ceiling(self, spec: "GPUSpec | str",
                            density: "Density | str" = Density.DENSE) -> float | None:
        """Achieved FLOP/s over the attainable FLOP/s at this intensity on ``spec`` (the
        relevant ceiling: memory slope left of the ridge, compute roof right of it). For a
        point with no FLOPs, achieved over peak bandwidth. None without a time.

        Example:
            >>> p = RooflinePoint("k", 1e9, 1e9, "bf16", seconds=1e9 / 2.4e12)   # 2.4 TFLOP/s
            >>> round(p.fraction_of_ceiling("h200"), 3)
            0.5
        """
        if self.seconds is None:
            return None
        spec = lookup_gpu(spec)
        if self.flops == 0:
            return self.achieved_bandwidth / spec.bandwidth
        return self.achieved_flops / attainable(spec, self.intensity, self.precision, density)

    def describe(self) -> str:
        """A one-line label: name, intensity, performance and where it came from.

        Example:
            >>> RooflinePoint("k", 2e12, 1e9, "bf16", 4e-3, True, "NVIDIA H200").describe()
            'k: 2000 FLOP/B, 500 TFLOP/s (measured on NVIDIA H200)'
        """
        if self.label:
            return self.label
        text = f"{self.name}: {format_intensity(self.intensity)}"
        if self.seconds is not None:
            text += f", {format_flops(self.achieved_flops, PRECISIONS[self.precision].unit)}"
        if self.measured:
            return text + f" (measured on {self.device or 'this device'})"
        at = getattr(self.prediction, "at", None)
        where = f"predicted for {self.device}" + (f" at {at}" if at else "")
        return text + (f" ({where})" if self.device else " (counted)")


# --------------------------------------------------------------------------- projections

@dataclass(frozen=True)
class Projection:
    """The roofline bound of a point's counted work on a GPU (a bound, not a prediction).

    ``seconds = max(compute_seconds, memory_seconds)`` with compute = flops / peak and
    memory = bytes / bandwidth. It assumes perfect overlap and peak rates, so a real kernel
    takes at least this long (``lower_bound`` is always True, to say so in data).

    Example:
        >>> pr = project(RooflinePoint("k", 1e12, 1e9, "bf16"), "h200")
        >>> pr.bound, format_seconds(pr.seconds), pr.lower_bound
        ('compute', '1.011 ms', True)
    """

    point: str
    gpu: str
    precision: str
    hardware_precision: str
    density: Density
    flops: float
    bytes: float
    peak: float
    bandwidth: float
    measured_ceilings: bool
    lower_bound: bool = True

    @property
    def compute_seconds(self) -> float:
        """flops / peak, in s.

        Example:
            >>> project(RooflinePoint("k", 67e12, 1.0, "fp32"), "h100").compute_seconds
            1.0
        """
        return self.flops / self.peak

    @property
    def memory_seconds(self) -> float:
        """bytes / bandwidth, in s.

        Example:
            >>> project(RooflinePoint("k", 0.0, 3.35e12, "fp32"), "h100").memory_seconds
            1.0
        """
        return self.bytes / self.bandwidth

    @property
    def seconds(self) -> float:
        """The bound time in s.

        Example:
            >>> project(RooflinePoint("k", 0.0, 4.8e9, "fp32"), "h200").seconds
            0.001
        """
        return max(self.compute_seconds, self.memory_seconds)

    @property
    def bound(self) -> str:
        """'compute' or 'memory': which ceiling sets the bound.

        Example:
            >>> project(RooflinePoint("k", 1.0, 1e9, "fp32"), "b200").bound
            'memory'
        """
        return "compute" if self.compute_seconds >= self.memory_seconds else "memory"

    @property
    def attainable_flops(self) -> float:
        """FLOP/s of the counted work at the bound time: min(peak, intensity x bandwidth).

        Example:
            >>> pr = project(RooflinePoint("k", 1e12, 1e9, "bf16"), "h200")
            >>> format_flops(pr.attainable_flops)
            '989.5 TFLOP/s'
        """
        return self.flops / self.seconds

    def to_dict(self) -> dict[str, Any]:
        """Plain data for tables and JSON.

        Example:
            >>> sorted(project(RooflinePoint("k", 1.0, 1.0, "fp32"), "h200").to_dict())[:3]
            ['attainable_flops', 'bandwidth', 'bound']
        """
        return {"point": self.point, "gpu": self.gpu, "precision": self.precision,
                "hardware_precision": self.hardware_precision, "density": self.density.value,
                "flops": self.flops, "bytes": self.bytes, "peak": self.peak,
                "bandwidth": self.bandwidth, "seconds": self.seconds,
                "compute_seconds": self.compute_seconds, "memory_seconds": self.memory_seconds,
                "bound": self.bound, "attainable_flops": self.attainable_flops,
                "lower_bound": self.lower_bound, "measured_ceilings": self.measured_ceilings}


def project(point: Any, spec: "GPUSpec | str",
            density: "Density | str" = Density.DENSE) -> Projection:
    """Project a point's (or a Work's) counted FLOPs and bytes onto ``spec``: the roofline
    bound there (:func:`predict` gives the predicted time).

    Raises UnsupportedPrecisionError when ``spec`` cannot run the precision at all (FP8 on
    A100, FP4 on H200).

    Example:
        >>> from tilelab.perf.counting import gemm
        >>> w = gemm(4096, 4096, 4096, a_dtype="fp8", c_dtype="bf16")
        >>> [format_seconds(project(w, g).seconds) for g in ("b200", "h200", "rtx5090")]
        ['30.54 µs', '69.45 µs', '328 µs']
    """
    spec = lookup_gpu(spec)
    density = Density.parse(density)
    used = _resolve(spec, point.precision)
    return Projection(
        point=getattr(point, "name", "kernel"), gpu=spec.name, precision=point.precision,
        hardware_precision=used, density=density, flops=float(point.flops),
        bytes=float(point.bytes), peak=_peak(spec, point.precision, density),
        bandwidth=spec.bandwidth, measured_ceilings=spec.measured)


# --------------------------------------------------------------------------- the model

class Roofline:
    """The GPUs and points of one roofline plot, and the pure data a plotter needs.

    GPUs default to :data:`~tilelab.perf.specs.ROOFLINE_GPUS` (B200, RTX 5090, H200); add
    the current device's measured spec with :meth:`add_gpu`. Ceilings are dense unless
    ``density='sparse'``.

    Example:
        >>> from tilelab.perf.counting import gemm, softmax
        >>> r = Roofline()
        >>> _ = r.add_work(gemm(4096, 4096, 4096), seconds=2.0e-4, device="NVIDIA H200")
        >>> _ = r.add_work(softmax(8192, 8192))
        >>> [g.key for g in r.gpus], len(r.points)
        (['b200', 'rtx5090', 'h200'], 2)
        >>> d = r.series()
        >>> [c["precision"] for c in d["gpus"][0]["ceilings"]]
        ['fp32', 'bf16']
    """

    def __init__(self, gpus: Iterable["GPUSpec | str"] = ROOFLINE_GPUS, *,
                 density: "Density | str" = Density.DENSE) -> None:
        self.density = Density.parse(density)
        self._gpus: list[GPUSpec] = []
        self._points: list[RooflinePoint] = []
        if isinstance(gpus, (str, GPUSpec)):
            gpus = [gpus]
        for g in gpus:
            self.add_gpu(g)

    # -- collecting
    @property
    def gpus(self) -> tuple[GPUSpec, ...]:
        """The GPUs drawn, in the order added.

        Example:
            >>> [g.key for g in Roofline(["h100"]).gpus]
            ['h100']
        """
        return tuple(self._gpus)

    @property
    def points(self) -> tuple[RooflinePoint, ...]:
        """The points added, in order.

        Example:
            >>> Roofline().points
            ()
        """
        return tuple(self._points)

    def add_gpu(self, gpu: "GPUSpec | str") -> GPUSpec:
        """Add a GPU (a spec or a name); a GPU with the same key replaces the earlier one.

        Example:
            >>> from tilelab.perf.specs import measured_spec
            >>> r = Roofline()
            >>> r.add_gpu(measured_spec("NVIDIA H200", copy_bandwidth=4.2e12,
            ...                         gemm_flops=7.5e14)).key
            'current'
        """
        spec = lookup_gpu(gpu)
        self._gpus = [g for g in self._gpus if g.key != spec.key] + [spec]
        return spec

    def add_point(self, point: RooflinePoint) -> RooflinePoint:
        """Add a point.

        Example:
            >>> Roofline().add_point(RooflinePoint("k", 1.0, 1.0, "fp32")).name
            'k'
        """
        if not isinstance(point, RooflinePoint):
            raise TypeError(f"add_point takes a RooflinePoint, got {type(point).__name__}")
        self._points.append(point)
        return point

    def add_work(self, work: Any, *, seconds: float | None = None, device: str | None = None,
                 measured: bool | None = None, name: str | None = None) -> RooflinePoint:
        """Add a point from counted work (see :meth:`RooflinePoint.from_work`).

        Example:
            >>> from tilelab.perf.counting import gemv
            >>> Roofline().add_work(gemv(4096, 4096)).measured
            False
        """
        return self.add_point(RooflinePoint.from_work(
            work, seconds=seconds, device=device, measured=measured, name=name))

    def gpu_of(self, point: RooflinePoint) -> GPUSpec | None:
        """The GPU of this plot a measured point was measured on (a measured spec of the
        device wins over its datasheet entry), else None.

        Example:
            >>> r = Roofline()
            >>> r.gpu_of(RooflinePoint("k", 1.0, 1.0, "fp32", 1.0, True, "NVIDIA H200")).key
            'h200'
        """
        if not point.measured or not point.device:
            return None
        hits = [g for g in self._gpus if g.matches(point.device)]
        hits.sort(key=lambda g: not g.measured)
        return hits[0] if hits else None

    # -- derived data
    def projections(self) -> list[Projection]:
        """Every point projected onto every GPU that can run its precision.

        Example:
            >>> from tilelab.perf.counting import gemm
            >>> r = Roofline(["h200", "b200"])
            >>> _ = r.add_work(gemm(1024, 1024, 1024, a_dtype="fp4"))
            >>> [p.gpu for p in r.projections()]          # H200 has no FP4
            ['NVIDIA B200']
        """
        out = []
        for point in self._points:
            for gpu in self._gpus:
                try:
                    out.append(project(point, gpu, self.density))
                except UnsupportedPrecisionError:
                    continue
        return out

    def default_precisions(self) -> tuple[str, ...]:
        """Precisions to draw: FP32 and those of the points, or FP32/BF16/FP8 with no points.

        Example:
            >>> Roofline().default_precisions()
            ('fp32', 'bf16', 'fp8')
        """
        used = {p.precision for p in self._points} | {"fp32"}
        if not self._points:
            used |= {"bf16", "fp8"}
        return tuple(k for k in PRECISIONS if k in used)

    def intensity_range(self, precisions: Sequence[str] | None = None) -> tuple[float, float]:
        """A power-of-two range of x (FLOP/B) holding every point and ridge with margin.

        Example:
            >>> Roofline(["h200"]).intensity_range(["bf16"])
            (0.0625, 1024.0)
        """
        precisions = tuple(precisions or self.default_precisions())
        xs = [p.intensity for p in self._points if p.intensity > 0]
        for g in self._gpus:
            for prec in precisions:
                try:
                    xs.append(ridge_point(g, prec, self.density))
                except UnsupportedPrecisionError:
                    pass
        lo = min([1 / 16] + [x / 2 for x in xs])
        hi = max([64.0] + [x * 4 for x in xs])
        return 2.0 ** math.floor(math.log2(lo)), 2.0 ** math.ceil(math.log2(hi))

    def series(self, intensity_range: tuple[float, float] | None = None,
               precisions: Sequence[str] | None = None) -> dict[str, Any]:
        """Everything a plotter needs, as plain JSON-able data (units in ``units``).

        Per GPU: the memory ceiling, and per precision the compute ceiling, its ridge point and
        the roofline polyline (its vertices; straight segments on log-log axes, with log10
        copies), plus the precisions it cannot run and why. Per point: coordinates, label,
        measured flag and, per GPU, the bound projection (and, on the GPU it was
        measured on, the fraction of the ceiling reached).

        Example:
            >>> r = Roofline(["h200"])
            >>> c = r.series((1.0, 1024.0), ["bf16"])["gpus"][0]["ceilings"][0]
            >>> line = c["polyline"]
            >>> line["intensity"], [round(y / 1e12, 1) for y in line["performance"]]
            ([1.0, 206.14583333333334, 1024.0], [4.8, 989.5, 989.5])
        """
        precisions = tuple(check_precision(p) for p in (precisions or self.default_precisions()))
        lo, hi = intensity_range or self.intensity_range(precisions)
        if not (0 < lo < hi):
            raise ValueError(f"intensity range must satisfy 0 < lo < hi, got {(lo, hi)}")
        gpus = []
        for g in self._gpus:
            ceilings, unsupported = [], []
            for prec in precisions:
                try:
                    ceilings.append(self._ceiling_data(g, prec, lo, hi))
                except UnsupportedPrecisionError as e:
                    unsupported.append({"precision": prec, "reason": e.message})
            gpus.append({"key": g.key, "name": g.name, "arch": g.arch, "measured": g.measured,
                         "memory": memory_ceiling(g).to_dict(), "ceilings": ceilings,
                         "unsupported": unsupported})
        return {
            "units": {"intensity": "FLOP/B", "performance": "FLOP/s", "bandwidth": "B/s",
                      "time": "s", "int8_performance": "OP/s"},
            "density": self.density.value,
            "intensity_range": [lo, hi],
            "gpus": gpus,
            "points": [self._point_data(p) for p in self._points],
            "note": "projections are roofline bounds: max(flops / peak, bytes / bandwidth)",
        }

    def to_dict(self) -> dict[str, Any]:
        """:meth:`series` with the default range and precisions.

        Example:
            >>> import json
            >>> len(json.dumps(Roofline().to_dict())) > 1000
            True
        """
        return self.series()

    def _ceiling_data(self, g: GPUSpec, prec: str, lo: float, hi: float) -> dict[str, Any]:
        ceiling = compute_ceiling(g, prec, self.density)
        ridge = ceiling.value / g.bandwidth
        xs = [lo] + ([ridge] if lo < ridge < hi else []) + [hi]
        ys = [min(ceiling.value, x * g.bandwidth) for x in xs]
        data = ceiling.to_dict()
        data.update({
            "ridge": {"intensity": ridge, "performance": ceiling.value,
                      "label": f"ridge {format_intensity(ridge)}"},
            "polyline": {"intensity": xs, "performance": ys,
                         "log10_intensity": [math.log10(x) for x in xs],
                         "log10_performance": [math.log10(y) for y in ys]},
        })
        return data

    def _point_data(self, p: RooflinePoint) -> dict[str, Any]:
        home = self.gpu_of(p)
        on: dict[str, Any] = {}
        for g in self._gpus:
            try:
                pr = project(p, g, self.density)
            except UnsupportedPrecisionError as e:
                on[g.key] = {"supported": False, "reason": e.message}
                continue
            entry = {"supported": True, "bound_seconds": pr.seconds, "bound": pr.bound,
                     "attainable": pr.attainable_flops, "lower_bound": True}
            if home is not None and g.key == home.key:
                entry["fraction_of_ceiling"] = p.fraction_of_ceiling(g, self.density)
            on[g.key] = entry
        return {"name": p.name, "label": p.describe(), "precision": p.precision,
                "measured": p.measured, "device": p.device, "flops": p.flops, "bytes": p.bytes,
                "seconds": p.seconds, "intensity": p.intensity,
                "performance": p.achieved_flops, "bandwidth": p.achieved_bandwidth,
                "log10_intensity": math.log10(p.intensity) if p.intensity > 0 else None,
                "measured_on": home.key if home is not None else None, "on": on}
