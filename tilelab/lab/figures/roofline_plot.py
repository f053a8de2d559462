"""Roofline figures: launches as points under the ceilings of a GPU (others on demand).

Why: one picture answers "is this kernel limited by memory or by math, and how far is it
from what the hardware allows?" — on the GPU its time is for and, on request, projected
onto others. The numbers all come from :mod:`tilelab.perf.roofline` (``Roofline.series()``)
and :func:`tilelab.perf.predict`; this module makes points from interpreter traces, and
:mod:`tilelab.lab.figures.roofline_svg` draws them. Points measured on a GPU are filled;
points predicted from counted bytes and FLOPs (the CPU interpreter) are hollow, with their
roofline bound drawn as a bar.

Example:
    >>> from tilelab.perf.counting import gemm
    >>> from tilelab.perf.roofline import RooflinePoint
    >>> p = RooflinePoint.from_work(gemm(4096, 4096, 4096), seconds=3e-4, device="NVIDIA H200")
    >>> fig = roofline_figure([p], theme="light")
    >>> "H200 bf16 (fp32 acc, dense)" in fig.tilelab["legend"]
    True
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from tilelab.lab.figures.roofline_svg import roofline_figure
from tilelab.perf.prediction import infer_precision
from tilelab.perf.roofline import RooflinePoint

__all__ = ["roofline_figure", "save_png", "point_from_trace", "infer_precision",
           "gemm_shape_of"]


# ============================================================================ points

def gemm_shape_of(event: Any, trace: Any) -> Any:
    """The :class:`~tilelab.perf.predict_model.GemmShape` of a GEMM-like launch — a partitioned
    2-D output C (m × n) and two 2-D inputs (m × k) and (k × n) — or None.

    Example:
        >>> gemm_shape_of(None, None) is None
        True
    """
    from tilelab.perf.predict_model import GemmShape
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
                     resources: Any = None, at: str | None = None) -> RooflinePoint:
    """A roofline point from an interpreter trace: FLOPs as the interpreter counted them
    (extrapolated when sampled) and bytes either the trace's tile traffic or, given a
    :class:`~tilelab.perf.counting.Work`, its compulsory bytes (each tensor moved once —
    the convention of :mod:`tilelab.perf.counting`, which keeps measured points under
    the memory roof). With ``seconds`` the point is measured on ``device``; without, it
    is predicted for ``predict_on`` by :func:`tilelab.perf.predict` (the point carries
    its :class:`~tilelab.perf.prediction.Prediction`: launch floor, kernel body, roofline
    bound; for GEMM-like launches given their ``event`` the DRAM traffic of tile reuse;
    ``resources`` — a compiled kernel's ``art.resources`` — sets blocks per SM; ``at``
    names the problem the trace was counted at). ``predict_on=None`` leaves the point
    counted only (no time).

    Example:
        >>> from types import SimpleNamespace as NS
        >>> t = NS(kernel="add", flops=1024, bytes=12288, flops_mma=0, flops_elementwise=1024,
        ...        flops_executed=1024, num_blocks=4, args={"x": NS(dtype="float32")})
        >>> p = point_from_trace(t)
        >>> p.measured, p.device, round(p.intensity, 4), p.prediction.limited_by
        (False, 'NVIDIA H200 SXM', 0.0833, 'launch floor')
    """
    from tilelab.perf.prediction import predict

    prec = precision or getattr(work, "precision", None) or infer_precision(trace)
    nbytes = float(work.bytes) if work is not None else float(trace.bytes)
    label = name or getattr(trace, "kernel", "kernel")
    if seconds is not None:
        return RooflinePoint(label, float(trace.flops), nbytes, prec, float(seconds), True,
                             device)
    if predict_on is None:
        return RooflinePoint(label, float(trace.flops), nbytes, prec)
    return predict(trace, predict_on, name=label, precision=prec, dram_bytes=nbytes,
                   resources=resources, gemm=gemm_shape_of(event, trace), at=at).point()


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
