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

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from tilelab.lab.theme import Theme, get_theme, new_figure, themed

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["roofline_figure", "save_png", "ceiling_label", "short_gpu_name",
           "point_from_trace", "infer_precision"]

_TENSOR_STYLES = ("-", "--", "-.", (0, (5, 1, 1, 1)))
# where point labels go, in turn, so that neighbouring kernels' names do not collide
_LABEL_OFFSETS = ((7, 6), (-7, -13), (7, -13), (-7, 6))


def short_gpu_name(spec: Any) -> str:
    """A GPU's name as a legend shows it: no 'NVIDIA', 'GeForce' or form factor.

    Example:
        >>> from tilelab.perf.specs import lookup_gpu
        >>> short_gpu_name(lookup_gpu("rtx5090")), short_gpu_name(lookup_gpu("h200"))
        ('RTX 5090', 'H200')
    """
    from tilelab.perf.specs import UnknownGPUError, lookup_gpu

    try:
        name = lookup_gpu(spec).name
    except UnknownGPUError:
        name = str(spec)
    measured = "(measured)" in name
    for word in ("NVIDIA ", "GeForce ", " (measured)", " SXM5", " SXM", " PCIe", " 80GB"):
        name = name.replace(word, "")
    return name.strip() + (" measured" if measured else "")


def ceiling_label(gpu: Any, precision: str, density: str = "dense") -> str:
    """Legend text of one compute ceiling: GPU, precision, accumulator, density.

    Example:
        >>> ceiling_label("h200", "bf16"), ceiling_label("b200", "fp32")
        ('H200 bf16 (fp32 acc, dense)', 'B200 fp32 (CUDA cores, dense)')
        >>> ceiling_label("rtx5090", "fp16_acc16", "sparse")
        'RTX 5090 fp16 (fp16 acc, 2:4 sparse)'
    """
    from tilelab.perf.specs import PRECISIONS, check_precision

    info = PRECISIONS[check_precision(precision)]
    name = precision.replace("_acc16", "").replace("_tc", " tensor")
    if not info.tensor:
        how = "CUDA cores"
    elif "accumulate" in info.label:
        how = info.label.split(",")[-1].replace("accumulate", "").strip().lower() + " acc"
    else:
        how = name.split()[0] + " acc"
    dens = "2:4 sparse" if str(density) in ("sparse", "Density.SPARSE") else "dense"
    return f"{short_gpu_name(gpu)} {name} ({how}, {dens})"


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


def point_from_trace(trace: Any, *, name: str | None = None, precision: str | None = None,
                     seconds: float | None = None, device: str | None = None,
                     predict_on: Any = "h200", work: Any = None) -> Any:
    """A roofline point from an interpreter trace: FLOPs as the interpreter counted them
    (extrapolated when sampled) and bytes either the trace's tile traffic or, given a
    :class:`~tilelab.perf.counting.Work`, its compulsory bytes (each tensor moved once —
    the convention of :mod:`tilelab.perf.counting`, which keeps measured points under
    the memory roof). With ``seconds`` the point is measured on ``device``; without, it
    is predicted for ``predict_on`` (its lower-bound time there).

    Example:
        >>> from types import SimpleNamespace as NS
        >>> t = NS(kernel="add", flops=1024, bytes=12288, flops_mma=0, flops_elementwise=1024,
        ...        args={"x": NS(dtype="float32")})
        >>> p = point_from_trace(t)
        >>> p.measured, p.device, round(p.intensity, 4)
        (False, 'NVIDIA H200 SXM', 0.0833)
    """
    from tilelab.perf.roofline import RooflinePoint, project
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
    return RooflinePoint(label, point.flops, nbytes, prec, project(point, spec).seconds,
                         False, spec.name)


def _as_points(points: Any) -> tuple[list, list]:
    """(points, gpus of a Roofline passed in) from points, Work objects or a Roofline."""
    from tilelab.perf.roofline import Roofline, RooflinePoint

    if isinstance(points, Roofline):
        return list(points.points), list(points.gpus)
    if points is None:
        return [], []
    if isinstance(points, RooflinePoint) or hasattr(points, "flops"):
        points = [points]
    out = []
    for p in points:
        if isinstance(p, RooflinePoint):
            out.append(p)
        elif all(hasattr(p, a) for a in ("flops", "bytes", "precision")):
            out.append(RooflinePoint.from_work(p))
        else:
            raise TypeError(f"roofline points are RooflinePoint or Work objects, got "
                            f"{type(p).__name__}")
    return out, []


# ============================================================================ drawing

def _si_ticks(value: float, _pos: Any = None) -> str:
    from tilelab.perf.roofline import format_flops

    return format_flops(value, unit="", digits=3).strip()


def _intensity_ticks(value: float, _pos: Any = None) -> str:
    """Powers of two as 1/32 ... 1 ... 2048."""
    if value <= 0:
        return ""
    return f"{value:g}" if value >= 1 else f"1/{1 / value:g}"


def _home(point: dict, gpus: list[dict], specs: dict[str, Any]) -> str | None:
    """Key of the GPU a point belongs to: measured on, or predicted for."""
    if point.get("measured_on"):
        return point["measured_on"]
    dev = point.get("device")
    if dev:
        hits = [g["key"] for g in gpus if specs[g["key"]].matches(dev)]
        hits.sort(key=lambda k: not specs[k].measured)
        if hits:
            return hits[0]
    return None


def _draw_ceilings(ax: Any, data: dict, specs: dict, t: Theme,
                   precs: Sequence[str]) -> tuple[list, list]:
    """One polyline per GPU and precision, ridge markers, memory labels."""
    from tilelab.perf.roofline import format_bandwidth
    from tilelab.perf.specs import PRECISIONS

    handles, labels = [], []
    for gi, g in enumerate(data["gpus"]):
        key, spec = g["key"], specs[g["key"]]
        color = t.gpu_color(key, gi)
        lw = 2.4 if g["measured"] else 1.4
        tensor_i = 0
        for c in g["ceilings"]:
            prec = c["precision"]
            if PRECISIONS[prec].tensor:
                style = _TENSOR_STYLES[tensor_i % len(_TENSOR_STYLES)]
                tensor_i += 1
            else:
                style = ":"
            label = ceiling_label(spec, prec, c["density"])
            line = c["polyline"]
            (h,) = ax.plot(line["intensity"], line["performance"], color=color, lw=lw,
                           ls=style, label=label, gid=f"ceiling:{key}:{prec}", zorder=2)
            handles.append(h)
            labels.append(label)
            r = c["ridge"]
            ax.plot([r["intensity"]], [r["performance"]], marker="D", ms=4, color=color,
                    ls="none", gid=f"ridge:{key}:{prec}", zorder=3)
            if prec == precs[-1] or len(precs) == 1:
                ax.annotate(f"{r['intensity']:.0f}", (r["intensity"], r["performance"]),
                            xytext=(0, 4), textcoords="offset points", fontsize=6.5,
                            color=color, ha="center", va="bottom")
        mem = g["memory"]
        mem_label = f"{short_gpu_name(spec)} memory {format_bandwidth(mem['value'])}"
        (h,) = ax.plot([], [], color=color, lw=lw, ls="-", alpha=0.6, label=mem_label,
                       gid=f"memory:{key}")
        handles.append(h)
        labels.append(mem_label)
    return handles, labels


def _draw_points(ax: Any, data: dict, specs: dict, t: Theme) -> dict[str, list]:
    drawn: dict[str, list] = {"measured": [], "predicted": [], "projections": []}
    palette = list(t.point_colors)
    for i, p in enumerate(data["points"]):
        home = _home(p, data["gpus"], specs)
        x = p["intensity"]
        if x <= 0:
            continue
        y = p["performance"]
        if y is None:   # counted only: place it at what the first GPU allows
            first = next((k for k, v in p["on"].items() if v.get("supported")), None)
            home = home or first
            y = p["on"][first]["attainable"] if first else None
        if y is None or y <= 0:
            continue
        color = palette[i % len(palette)]
        kind = "measured" if p["measured"] else "predicted"
        ax.plot([x], [y], marker="o", ms=8, ls="none", mec=color, mew=1.8,
                mfc=color if p["measured"] else "none", gid=f"point:{p['name']}", zorder=5)
        dx, dy = _LABEL_OFFSETS[i % len(_LABEL_OFFSETS)]
        ax.annotate(p["name"], (x, y), xytext=(dx, dy), textcoords="offset points",
                    fontsize=7.5, color=t.foreground, ha="left" if dx > 0 else "right",
                    zorder=6, gid=f"point-label:{p['name']}")
        drawn[kind].append({"name": p["name"], "x": x, "y": y, "home": home})
        for gi, g in enumerate(data["gpus"]):
            on = p["on"].get(g["key"], {})
            if g["key"] == home or not on.get("supported"):
                continue
            gc = t.gpu_color(g["key"], gi)
            ax.plot([x], [on["attainable"]], marker="s", ms=5, ls="none", mec=gc, mfc=gc,
                    alpha=0.3, gid=f"projection:{p['name']}:{g['key']}", zorder=4)
            drawn["projections"].append({"name": p["name"], "gpu": g["key"], "x": x,
                                         "y": on["attainable"]})
    return drawn


def roofline_figure(points: Any = (), gpus: Sequence[Any] = ("b200", "rtx5090", "h200"), *,
                    precisions: Sequence[str] | None = None, current: Any = None,
                    theme: "Theme | str | None" = None, title: str | None = None,
                    density: str = "dense") -> "Figure":
    """A log-log roofline: FLOP/B against FLOP/s, one ceiling line per GPU and precision
    (ridge points marked, memory slopes labelled with their bandwidth), the current
    device's *measured* ceilings when ``current`` is given (a
    :class:`~tilelab.perf.ceilings.MeasuredCeilings` or a measured GPUSpec), and each
    launch as a point labelled with its kernel: filled when measured on a GPU, hollow when
    predicted from counts on the CPU, with faint projections onto the other GPUs.

    ``points`` are :class:`~tilelab.perf.roofline.RooflinePoint`, counted
    :class:`~tilelab.perf.counting.Work` or a whole :class:`~tilelab.perf.roofline.Roofline`
    (``gpus=None`` then draws that Roofline's GPUs). ``precisions`` defaults to FP32 and
    those of the points; ``density="sparse"`` draws 2:4-sparse tensor rates instead.

    Example:
        >>> from tilelab.perf.counting import softmax
        >>> fig = roofline_figure([softmax(4096, 4096)], gpus=("h200",), theme="dark")
        >>> fig.tilelab["legend"]  # doctest: +NORMALIZE_WHITESPACE
        ['H200 fp32 (CUDA cores, dense)', 'H200 memory 4.8 TB/s',
         'predicted (counted, no GPU time)']
    """
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    from tilelab.perf.roofline import Roofline
    from tilelab.perf.specs import lookup_gpu

    t = get_theme(theme)
    pts, roof_gpus = _as_points(points)
    r = Roofline(gpus if gpus is not None else roof_gpus, density=density)
    if current is not None:
        r.add_gpu(current.spec() if hasattr(current, "spec") and callable(current.spec)
                  else lookup_gpu(current))
    for p in pts:
        r.add_point(p)
    data = r.series(precisions=precisions)
    precs = list(precisions or r.default_precisions())
    specs = {g.key: g for g in r.gpus}
    with themed(t):
        fig = new_figure(t, figsize=(10.0, 5.6))
        ax = fig.add_subplot()
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        handles, labels = _draw_ceilings(ax, data, specs, t, precs)
        drawn = _draw_points(ax, data, specs, t)
        proxies = []
        if drawn["measured"]:
            proxies.append((Line2D([], [], marker="o", ls="none", mfc=t.foreground,
                                   mec=t.foreground), "measured on a GPU"))
        if drawn["predicted"]:
            predicted = [p for p in data["points"] if not p["measured"]]
            what = ("predicted (counted, no GPU time)"
                    if all(p["seconds"] is None for p in predicted)
                    else "predicted (counted on the CPU; lower-bound time)")
            proxies.append((Line2D([], [], marker="o", ls="none", mfc="none", mec=t.foreground,
                                   mew=1.8), what))
        if drawn["projections"]:
            proxies.append((Line2D([], [], marker="s", ls="none", mfc=t.muted, mec=t.muted,
                                   alpha=0.4), "projection onto another GPU (lower bound)"))
        handles += [h for h, _ in proxies]
        labels += [lab for _, lab in proxies]
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7.5,
                  frameon=True)
        lo, hi = data["intensity_range"]
        ax.set_xlim(lo, hi)
        ys = [y for g in data["gpus"] for c in g["ceilings"] for y in c["polyline"]["performance"]]
        ys += [p["y"] for k in ("measured", "predicted") for p in drawn[k]]
        ys += [p["y"] for p in drawn["projections"]]
        if ys:
            ax.set_ylim(10 ** math.floor(math.log10(min(ys) / 1.5)),
                        10 ** math.ceil(math.log10(max(ys) * 1.5)))
        ax.yaxis.set_major_locator(LogLocator(base=10))
        ax.yaxis.set_major_formatter(FuncFormatter(_si_ticks))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.xaxis.set_major_formatter(FuncFormatter(_intensity_ticks))
        ax.grid(True, which="major", lw=0.5)
        ax.set_xlabel("arithmetic intensity (FLOP/B)")
        ax.set_ylabel("performance (FLOP/s)")
        ax.set_title(title or "Roofline: dense ceilings (no 2:4 sparsity); projections are "
                              "lower bounds", fontsize=10)
    fig.tilelab = {"kind": "roofline", "series": data, "legend": labels, "drawn": drawn,
                   "theme": t.name}
    return fig


def save_png(fig: Any, path: "str | Path", *, dpi: int = 150) -> Path:
    """Write ``fig`` as a PNG (parent folders created) in its own background color.

    Example:
        >>> import tempfile, os
        >>> fig = roofline_figure([], gpus=("h200",), theme="light")
        >>> p = save_png(fig, os.path.join(tempfile.mkdtemp(), "r", "roof.png"))
        >>> p.read_bytes()[:4] == b"\\x89PNG"
        True
    """
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png", dpi=dpi, facecolor=fig.get_facecolor())
    return out
