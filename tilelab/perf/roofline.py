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

The pieces live in modules of their own, re-exported here: the number formats
(:mod:`tilelab.perf.units`), a GPU's ceilings (:mod:`tilelab.perf.roofs`) and the point
(:mod:`tilelab.perf.roofline_point`); this module adds the projection and the plot data.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from tilelab.perf.prediction import predict
from tilelab.perf.roofline_point import RooflinePoint
from tilelab.perf.roofs import (CEILING_FALLBACK, Ceiling, attainable, compute_ceiling,
                                memory_ceiling, peak_rate, resolve_precision, ridge_point)
from tilelab.perf.specs import (PRECISIONS, Density, GPUSpec, UnsupportedPrecisionError,
                                ROOFLINE_GPUS, check_precision, lookup_gpu)
from tilelab.perf.units import (format_bandwidth, format_bytes, format_flops,
                                format_intensity, format_seconds)

__all__ = [
    "Ceiling", "compute_ceiling", "memory_ceiling", "ridge_point", "attainable",
    "RooflinePoint", "Projection", "project", "predict", "Roofline",
    "format_flops", "format_bandwidth", "format_seconds", "format_bytes", "format_intensity",
    "CEILING_FALLBACK",
]


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
    used = resolve_precision(spec, point.precision)
    return Projection(
        point=getattr(point, "name", "kernel"), gpu=spec.name, precision=point.precision,
        hardware_precision=used, density=density, flops=float(point.flops),
        bytes=float(point.bytes), peak=peak_rate(spec, point.precision, density),
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
