"""Roofline figures: launches as points under the ceilings of several GPUs.

Why: one picture answers "is this kernel limited by memory or by math, and how far is it
from what the hardware allows?" — on the GPU it ran on and, projected, on others. The
numbers all come from :mod:`tilelab.perf.roofline` (``Roofline.series()``); this module
only draws them, and says in the legend what each ceiling is: the GPU, the precision, the
accumulator type and that the rate is dense (no 2:4 sparsity). Points measured on a GPU are
filled; points predicted from counted bytes and FLOPs (the CPU interpreter) are hollow;
faint markers project each point onto the other GPUs (lower-bound times).

Example:
    >>> from tilelab.perf.counting import gemm
    >>> from tilelab.perf.roofline import RooflinePoint
    >>> p = RooflinePoint.from_work(gemm(4096, 4096, 4096), seconds=3e-4, device="NVIDIA H200")
    >>> fig = roofline_figure([p], theme="light")
    >>> "H200 bf16 (fp32 acc, dense)" in fig.tilelab["legend"]
    True
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilelab.lab.figures.roofline_svg import roofline_figure
from tilelab.perf.roofline import RooflinePoint

__all__ = ["roofline_figure", "save_png", "point_from_trace", "infer_precision", "ModelPoint",
           "gemm_shape_of"]


# ============================================================================ points

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


@dataclass(frozen=True)
class ModelPoint(RooflinePoint):
    """A predicted :class:`~tilelab.perf.roofline.RooflinePoint` that carries the model's
    :class:`~tilelab.perf.predict.Prediction` (its terms and assumptions) and the
    roofline's own lower-bound time (``bound_seconds``).

    Example:
        >>> from types import SimpleNamespace as NS
        >>> t = NS(kernel="add", flops=1024, bytes=12288, flops_mma=0, flops_elementwise=1024,
        ...        flops_executed=1024, num_blocks=4, args={"x": NS(dtype="float32")})
        >>> p = point_from_trace(t)
        >>> p.seconds > p.prediction.bound_seconds, p.prediction.limiter
        (True, 'launch floor')
    """

    prediction: Any = None


def gemm_shape_of(event: Any, trace: Any) -> Any:
    """The :class:`~tilelab.perf.predict.GemmShape` of a GEMM-like launch — a partitioned
    2-D output C (m × n) and two 2-D inputs (m × k) and (k × n) — or None.

    Example:
        >>> gemm_shape_of(None, None) is None
        True
    """
    from tilelab.perf.predict import GemmShape
    from tilelab.runtime.partition import Partition

    if event is None or trace is None:
        return None
    parts = [a for a in event.args if isinstance(a, Partition) and len(a.tensor.shape) == 2]
    if not parts or not any(b.flops_mma for b in trace.blocks):   # GEMM-like: it MMAs
        return None
    p = parts[0]
    m, n = (int(s) for s in p.tensor.shape)
    out_name = _param_name(event, p)
    infos = [i for i in trace.args.values() if len(i.shape) == 2]
    out = next((i for i in infos if i.name == out_name), None) or next(
        (i for i in infos if tuple(i.shape) == (m, n)), None)
    # A (m, k) and B (k, n) among the other 2-D arguments (all three are (m, m) in a
    # square GEMM, so they are told apart by parameter, not by shape)
    mats = [i for i in infos if i is not out]
    for a in mats:
        if int(a.shape[0]) != m:
            continue
        k = int(a.shape[1])
        b = next((i for i in mats if i is not a and tuple(i.shape) == (k, n)), None)
        if b is not None and out is not None:
            order = [tuple(int(x) for x in t[-2:]) for t in p.order()]
            return GemmShape(m, n, k, int(p.tile_shape[0]), int(p.tile_shape[1]),
                             a.itemsize, b.itemsize, out.itemsize, order)
    return None


def _param_name(event: Any, value: Any) -> str | None:
    """The kernel parameter ``value`` was passed as in ``event``, or None."""
    try:
        params = event.kernel.definition.analysis.params
        return next(prm.name for prm, a in zip(params, event.args) if a is value)
    except (AttributeError, StopIteration):
        return None


def point_from_trace(trace: Any, *, name: str | None = None, precision: str | None = None,
                     seconds: float | None = None, device: str | None = None,
                     predict_on: Any = "h200", work: Any = None, event: Any = None,
                     resources: Any = None) -> Any:
    """A roofline point from an interpreter trace: FLOPs as the interpreter counted them
    (extrapolated when sampled) and bytes either the trace's tile traffic or, given a
    :class:`~tilelab.perf.counting.Work`, its compulsory bytes (each tensor moved once —
    the convention of :mod:`tilelab.perf.counting`, which keeps measured points under
    the memory roof). With ``seconds`` the point is measured on ``device``; without, it
    is predicted for ``predict_on`` by :func:`tilelab.perf.predict.predict_launch` (a
    :class:`ModelPoint`: launch floor, waves, padding, and for GEMM-like launches given
    their ``event`` the DRAM traffic of tile reuse; ``resources`` — a compiled kernel's
    ``art.resources`` — sets blocks per SM).

    Example:
        >>> from types import SimpleNamespace as NS
        >>> t = NS(kernel="add", flops=1024, bytes=12288, flops_mma=0, flops_elementwise=1024,
        ...        args={"x": NS(dtype="float32")})
        >>> p = point_from_trace(t)
        >>> p.measured, p.device, round(p.intensity, 4)
        (False, 'NVIDIA H200 SXM', 0.0833)
    """
    from tilelab.perf.predict import LaunchShape, predict_launch
    from tilelab.perf.specs import lookup_gpu

    prec = precision or getattr(work, "precision", None) or infer_precision(trace)
    nbytes = float(work.bytes) if work is not None else float(trace.bytes)
    label = name or getattr(trace, "kernel", "kernel")
    point = RooflinePoint(label, float(trace.flops), nbytes, prec)
    if seconds is not None:
        return RooflinePoint(label, point.flops, nbytes, prec, float(seconds), True, device)
    if predict_on is None:
        return point
    spec = lookup_gpu(predict_on)
    shape = LaunchShape(
        blocks=int(getattr(trace, "num_blocks", 1) or 1), useful_flops=float(trace.flops),
        executed_flops=float(getattr(trace, "flops_executed", trace.flops) or trace.flops),
        dram_bytes=nbytes, precision=prec,
        threads=_res(resources, "threads_per_block"), registers=_res(resources, "registers"),
        shared_bytes=_shared(resources), gemm=gemm_shape_of(event, trace))
    pred = predict_launch(shape, spec)
    return ModelPoint(label, point.flops, nbytes, prec, pred.seconds, False, spec.name,
                      prediction=pred)


def _shared(resources: Any) -> int | None:
    total = (_res(resources, "shared_bytes") or 0) + (_res(resources, "reserved_shared_bytes")
                                                      or 0)
    return total or None


def _res(resources: Any, attr: str) -> int | None:
    value = getattr(resources, attr, None)
    return int(value) if isinstance(value, (int, float)) and value > 0 else None


def save_png(fig: Any, path: "str | Path", *, dpi: int = 150) -> Path:
    """Write ``fig`` (an SVG figure or a matplotlib one) as a PNG (parent folders created)
    in its own theme's colours.

    Example:
        >>> import tempfile, os
        >>> fig = roofline_figure([], gpus=("h200",), theme="light")
        >>> p = save_png(fig, os.path.join(tempfile.mkdtemp(), "r", "roof.png"))
        >>> p.read_bytes()[:4] == b"\\x89PNG"
        True
    """
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    if hasattr(fig, "to_png"):          # an SvgFigure: PNG in its theme's colours
        out.write_bytes(fig.to_png(fig.theme, dpi=dpi))
    else:                               # a matplotlib figure
        fig.savefig(out, format="png", dpi=dpi, facecolor=fig.get_facecolor())
    return out
