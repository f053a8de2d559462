"""The one prediction of a launch's time on a GPU: :func:`predict` and its :class:`Prediction`.

Why: a number called "predicted" must mean one thing wherever it is shown (a plain cell,
the ``%%tile`` tabs, the roofline figure, the explorer, the demo's ``summary.csv``). A
:class:`Prediction` therefore names its parts, and every view shows them by name:

- ``bound_s`` — the **roofline bound**, ``max(FLOPs / peak, bytes / bandwidth)`` of the
  counted work at the datasheet's peak rates: no kernel gets there (a *bound*, drawn
  with its own marker, never called "predicted");
- ``kernel_s`` — the **kernel body** as the model of :mod:`tilelab.perf.predict_model`
  times it (waves, padding, tile reuse, the tile MMA law, efficiencies), without the
  launch floor;
- ``launch_s`` — the **launch floor**, the fixed latency of one launch;
- ``total_s = launch_s + kernel_s`` — the **predicted** time of the launch.

``bound_s <= kernel_s`` always holds: the body's math runs the executed FLOPs at a
fraction of the peak, its DRAM term moves at least the bytes the bound prices at a
fraction of the bandwidth. (For a GEMM whose shape is known the bound prices its
compulsory bytes, A, B and C once each, since the model's tile reuse may move fewer
bytes than the tiles' counted traffic.) ``verdict`` says in plain words what the time
is made of, so a launch dominated by the floor is never shown as a kernel's speed
without saying so.

Example:
    >>> from tilelab.perf.counting import elementwise
    >>> p = predict(elementwise(1 << 14, dtype="float32", name="add"), "h200")
    >>> p.bound_s <= p.kernel_s < p.launch_s < p.total_s
    True
    >>> p.verdict
    'launch-bound: ~3.9 µs of launch, 0.043 µs of bytes'
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from tilelab.perf.predict_model import (BODY_WORDS, GemmShape, LaunchShape, ModelTerms,
                                        compulsory_gemm_bytes, model_terms)

__all__ = ["Prediction", "predict", "launch_shape", "infer_precision", "gpu_for_arch",
           "format_pair"]


@dataclass(frozen=True)
class Prediction:
    """A launch's predicted time on one GPU, part by part (see the module docstring).

    ``flops`` and ``bytes`` are the counted work the point is drawn by (x = FLOPs /
    bytes); ``bound_bytes`` the bytes the bound prices (``bytes``, or a known GEMM's
    compulsory bytes when fewer); ``bound_by`` which roof sets the bound ('memory' or
    'compute'); ``limited_by`` what the model says the time is spent on ('launch floor',
    'math', 'DRAM' or 'block latency'); ``at`` the problem it was predicted at (None: as
    counted); ``terms`` every term of the model, with its assumptions.

    Example:
        >>> from tilelab.perf.counting import gemm
        >>> p = predict(gemm(4096, 4096, 4096), "h200")
        >>> p.limited_by, p.bound_by, round(p.total_s - p.launch_s - p.kernel_s, 15)
        ('math', 'compute', 0.0)
    """

    name: str
    gpu: str
    precision: str
    flops: float
    bytes: float
    bound_s: float
    kernel_s: float
    launch_s: float
    bound_by: str
    limited_by: str
    terms: ModelTerms
    bound_bytes: float
    at: str | None = None

    @property
    def total_s(self) -> float:
        """The predicted time of the launch: launch floor + kernel body, in s.

        Example:
            >>> from tilelab.perf.counting import gemv
            >>> p = predict(gemv(4096, 4096), "h200")
            >>> p.total_s == p.launch_s + p.kernel_s
            True
        """
        return self.launch_s + self.kernel_s

    @property
    def intensity(self) -> float:
        """FLOP/B of the counted work (the point's x).

        Example:
            >>> from tilelab.perf.counting import elementwise
            >>> round(predict(elementwise(1024), "h200").intensity, 4)
            0.0833
        """
        return self.flops / self.bytes

    @property
    def launch_bound(self) -> bool:
        """Whether the launch floor is at least the kernel body (the time says little
        about the kernel: predict a bigger problem to see the body move).

        Example:
            >>> from tilelab.perf.counting import elementwise
            >>> predict(elementwise(1024), "h200").launch_bound
            True
        """
        return self.limited_by == "launch floor"

    @property
    def assumptions(self) -> tuple[str, ...]:
        """The constants the prediction used (each says whether a GPU run fitted it)
        and where its terms came from.

        Example:
            >>> from tilelab.perf.counting import elementwise
            >>> predict(elementwise(1024), "h200").assumptions[0].startswith("launch floor")
            True
        """
        return self.terms.assumptions

    @property
    def verdict(self) -> str:
        """One line in plain words: what bounds the launch and what its time is made of.

        Example:
            >>> from tilelab.perf.counting import elementwise
            >>> predict(elementwise(1 << 26), "h200").verdict
            'memory-bound: 176 µs of bytes, + 3.9 µs of launch'
        """
        body = BODY_WORDS[self.terms.body_limited_by]
        if self.launch_bound:
            launch, kernel = format_pair(self.launch_s, self.kernel_s)
            return f"launch-bound: ~{launch} of launch, {kernel} of {body}"
        kernel, launch = format_pair(self.kernel_s, self.kernel_s)[0], \
            format_pair(self.launch_s, self.launch_s)[0]
        kind = {"DRAM": "memory-bound", "math": "compute-bound",
                "block latency": "latency-bound"}[self.limited_by]
        if self.limited_by == "block latency":
            body = f"block latency ({self.terms.waves} waves)"
        return f"{kind}: {kernel} of {body}, + {launch} of launch"

    def summary(self) -> str:
        """Every part in one line: total = launch + kernel body (the body's terms), and
        the roofline bound.

        Example:
            >>> from tilelab.perf.counting import elementwise
            >>> predict(elementwise(1 << 26), "h200").summary()[:60]
            'predicted 180 µs = 3.92 µs launch floor + 176 µs kernel body'
        """
        from tilelab.perf.units import format_seconds

        at = f" at {self.at}" if self.at else ""
        return (f"predicted {format_seconds(self.total_s, 3)} = "
                f"{format_seconds(self.launch_s, 3)} launch floor + "
                f"{format_seconds(self.kernel_s, 3)} kernel body{at} on {self.gpu} "
                f"({self.terms.summary()}); roofline bound "
                f"{format_seconds(self.bound_s, 3)} ({self.bound_by}); limited by "
                f"{self.limited_by}")

    def point(self) -> Any:
        """The predicted roofline point: the counted work at the total time, carrying
        this prediction (so figures can draw the bound and the verdict).

        Example:
            >>> from tilelab.perf.counting import elementwise
            >>> pt = predict(elementwise(1024, name="add"), "h200").point()
            >>> pt.measured, pt.seconds == pt.prediction.total_s, pt.device
            (False, True, 'NVIDIA H200 SXM')
        """
        from tilelab.perf.roofline_point import RooflinePoint

        return RooflinePoint(self.name, self.flops, self.bytes, self.precision,
                             self.total_s, False, self.gpu, prediction=self)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for tables and JSON (times in s).

        Example:
            >>> from tilelab.perf.counting import elementwise
            >>> sorted(predict(elementwise(1024), "h200").to_dict())[:4]
            ['at', 'bound_by', 'bound_bytes', 'bound_s']
        """
        return {"name": self.name, "gpu": self.gpu, "precision": self.precision,
                "flops": self.flops, "bytes": self.bytes, "bound_bytes": self.bound_bytes,
                "bound_s": self.bound_s, "kernel_s": self.kernel_s,
                "launch_s": self.launch_s, "total_s": self.total_s,
                "bound_by": self.bound_by, "limited_by": self.limited_by,
                "verdict": self.verdict, "at": self.at}


# ============================================================================ formatting

_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"), (1e-12, "ps"))


def _in(v: float, scale: float) -> str:
    v /= scale
    return f"{v:.0f}" if v >= 10 else f"{v:.2g}"


def _unit(v: float) -> tuple[float, str]:
    return next(((s, u) for s, u in _UNITS if v >= s * 0.9995), _UNITS[-1])


def format_pair(a: float, b: float) -> tuple[str, str]:
    """Two durations in the unit of the first, so they compare at a glance (the second
    in its own unit when it is under a hundredth of that unit), with two significant
    digits (whole numbers from 10 up).

    Example:
        >>> format_pair(3.92e-6, 1.2e-7), format_pair(1.76e-4, 3.92e-6)
        (('3.9 µs', '0.12 µs'), ('176 µs', '3.9 µs'))
        >>> format_pair(3.92e-6, 3.6e-11)
        ('3.9 µs', '36 ps')
    """
    scale, unit = _unit(a)
    if b < 0.01 * scale:
        b_scale, b_unit = _unit(b)
        return f"{_in(a, scale)} {unit}", f"{_in(b, b_scale)} {b_unit}"
    return f"{_in(a, scale)} {unit}", f"{_in(b, scale)} {unit}"


# ============================================================================ the inputs

def infer_precision(trace: Any) -> str:
    """The ceiling a traced kernel runs against: a tensor-core precision from its arrays'
    narrowest float dtype when MMA FLOPs dominate, else FP32 (FP64 for float64 data).

    Example:
        >>> from types import SimpleNamespace as NS
        >>> t = NS(flops_mma=10, flops_elementwise=1,
        ...        args={"a": NS(dtype="bfloat16"), "c": NS(dtype="float32")})
        >>> infer_precision(t)
        'bf16'
    """
    from tilelab.perf.counting import dtype_size, gemm_precision

    floats = []
    for info in trace.args.values():
        name = str(info.dtype)
        if "float" in name:
            try:
                floats.append((dtype_size(name), name))
            except ValueError:
                continue
    if not floats:
        return "fp32"
    if trace.flops_mma > trace.flops_elementwise:
        try:
            return gemm_precision(min(floats)[1])
        except ValueError:
            return "fp32"
    return "fp64" if all(n == "float64" for _, n in floats) else "fp32"


def _res(resources: Any, attr: str) -> int | None:
    value = getattr(resources, attr, None)
    return int(value) if isinstance(value, (int, float)) and value > 0 else None


def _shared(resources: Any) -> int | None:
    total = (_res(resources, "shared_bytes") or 0) + (
        _res(resources, "reserved_shared_bytes") or 0)
    return total or None


def launch_shape(work: Any, *, precision: str | None = None, dram_bytes: float | None = None,
                 blocks: int | None = None, resources: Any = None,
                 gemm: GemmShape | None = None) -> LaunchShape:
    """The model's :class:`~tilelab.perf.predict_model.LaunchShape` of ``work``: a
    LaunchShape (the keywords override its fields), an interpreter trace (its blocks,
    useful and executed FLOPs, bytes; its precision inferred), or counted work with
    ``flops``, ``bytes`` and ``precision`` (a :class:`~tilelab.perf.counting.Work`, a
    roofline point; its grid unknown unless ``blocks`` is given). ``resources`` (a
    compiled kernel's ``art.resources``) gives threads, registers and shared memory,
    hence blocks per SM; ``gemm`` the tile shape and order of a GEMM-like launch.

    Example:
        >>> from tilelab.perf.counting import elementwise
        >>> s = launch_shape(elementwise(4096))
        >>> s.blocks, s.dram_bytes, s.precision
        (None, 49152.0, 'fp32')
    """
    extra = {"threads": _res(resources, "threads_per_block"),
             "registers": _res(resources, "registers"), "shared_bytes": _shared(resources)}
    extra = {k: v for k, v in extra.items() if v is not None}
    extra.update({k: v for k, v in (("precision", precision), ("dram_bytes", dram_bytes),
                                    ("blocks", blocks), ("gemm", gemm)) if v is not None})
    if isinstance(work, LaunchShape):
        return replace(work, **extra)
    if hasattr(work, "num_blocks") and hasattr(work, "flops_mma"):     # an interpreter trace
        flops = float(work.flops)
        executed = float(getattr(work, "flops_executed", flops) or flops)
        base = LaunchShape(int(work.num_blocks or 1), flops, max(flops, executed),
                           float(work.bytes), precision or infer_precision(work))
        return replace(base, **extra)
    missing = [a for a in ("flops", "bytes", "precision") if not hasattr(work, a)]
    if missing:
        raise TypeError(f"predict() takes counted work (flops, bytes, precision), an "
                        f"interpreter trace or a LaunchShape; {type(work).__name__} has no "
                        f"{', '.join(missing)}")
    base = LaunchShape(None, float(work.flops), float(work.flops), float(work.bytes),
                       work.precision)
    return replace(base, **extra)


def gpu_for_arch(arch: str | None) -> str:
    """The GPU a launch compiled for ``arch`` is predicted on: the roofline GPU of that
    arch (H200 for sm_90, B200 for sm_100, RTX 5090 for sm_120), else any datasheet GPU
    of it, else the H200.

    Example:
        >>> gpu_for_arch("sm_90"), gpu_for_arch("sm_80"), gpu_for_arch(None)
        ('h200', 'a100', 'h200')
    """
    from tilelab.perf.specs import GPUS, ROOFLINE_GPUS, lookup_gpu

    keys = list(ROOFLINE_GPUS) + [k for k in GPUS if k not in ROOFLINE_GPUS]
    return next((k for k in keys if lookup_gpu(k).arch == arch), "h200")


# ============================================================================ the prediction

def predict(work: Any, gpu: Any, *, name: str | None = None, precision: str | None = None,
            dram_bytes: float | None = None, blocks: int | None = None,
            resources: Any = None, gemm: GemmShape | None = None, at: str | None = None,
            constants: dict | None = None) -> Prediction:
    """Predict ``work`` on ``gpu`` (a :class:`~tilelab.perf.specs.GPUSpec` or a name
    :func:`~tilelab.perf.specs.lookup_gpu` knows): the one prediction of the package.

    ``work`` is counted work (a :class:`~tilelab.perf.counting.Work` or a roofline
    point: its grid is not known, so whole waves are assumed), an interpreter trace
    (``tl.interpret``'s: its blocks and executed FLOPs count) or a
    :class:`~tilelab.perf.predict_model.LaunchShape`; the keywords refine it (see
    :func:`launch_shape`). ``dram_bytes`` places the point by other bytes than the
    work's own (the compulsory bytes of a traced launch, say). ``at`` names the problem
    the work was counted at, for the labels. ``constants`` overrides model constants
    (:func:`tilelab.perf.predict_fit.load_fit` reads a fit's).

    Raises :class:`~tilelab.perf.specs.UnsupportedPrecisionError` when ``gpu`` cannot
    run the precision (FP8 on an A100).

    Example:
        >>> from tilelab.perf.counting import gemm
        >>> p = predict(gemm(8192, 8192, 8192, name="gemm"), "b200")
        >>> p.gpu, p.limited_by, p.bound_s < p.kernel_s
        ('NVIDIA B200', 'math', True)
    """
    from tilelab.perf.roofs import peak_rate
    from tilelab.perf.specs import Density, lookup_gpu

    spec = lookup_gpu(gpu)
    shape = launch_shape(work, precision=precision, dram_bytes=dram_bytes, blocks=blocks,
                         resources=resources, gemm=gemm)
    terms = model_terms(shape, spec, constants=constants)
    peak = peak_rate(spec, shape.precision, Density.DENSE)
    bound_bytes = float(shape.dram_bytes)
    if shape.gemm is not None:
        bound_bytes = min(bound_bytes, compulsory_gemm_bytes(shape.gemm))
    compute_s, memory_s = shape.useful_flops / peak, bound_bytes / spec.bandwidth
    label = name or getattr(work, "name", None) or getattr(work, "kernel", None) or "kernel"
    return Prediction(str(label), spec.name, shape.precision, float(shape.useful_flops),
                      float(shape.dram_bytes), max(compute_s, memory_s), terms.body_s,
                      terms.launch_s, "compute" if compute_s >= memory_s else "memory",
                      terms.limited_by, terms, bound_bytes, at)

