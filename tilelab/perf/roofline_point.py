"""One kernel launch on the roofline: :class:`RooflinePoint`, its counted work and, when
there is one, its time (measured, or the total of a prediction).

Why: a point is what every other part of perf hands around: a measurement becomes one,
:meth:`Prediction.point <tilelab.perf.prediction.Prediction.point>` makes one, and the
roofline (:mod:`tilelab.perf.roofline`, which re-exports the class) draws them. It needs
only the GPU's roofs (:mod:`tilelab.perf.roofs`), so the prediction can build points
without the roofline that draws its predictions.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from tilelab.perf.roofs import attainable, ridge_point
from tilelab.perf.specs import PRECISIONS, Density, GPUSpec, check_precision, lookup_gpu
from tilelab.perf.units import format_flops, format_intensity

__all__ = ["RooflinePoint"]


@dataclass(frozen=True)
class RooflinePoint:
    """One kernel launch on the roofline: counted work, and a time when there is one.

    ``measured`` is True for a time measured on ``device``; False for a prediction (or a CPU
    run with no GPU time at all, ``seconds=None``). A predicted point carries its
    :class:`~tilelab.perf.prediction.Prediction` (``prediction``; its ``seconds`` are the
    predicted total, :meth:`Prediction.point <tilelab.perf.prediction.Prediction.point>`).
    Coordinates: x = ``intensity`` (FLOP/B), y = ``achieved_flops`` (FLOP/s).

    Example:
        >>> from tilelab.perf.units import format_bandwidth
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
