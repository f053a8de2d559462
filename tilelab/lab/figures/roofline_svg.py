"""Drawing the roofline as SVG: ceilings, ridge points, points with placed labels, a table.

Why: a roofline is read by its labels, so none may sit on another label, on a ceiling or
on a marker, and each must sit beside its own point; and it is read at a glance only when
it holds little. By default it draws one GPU — the one the points' times are for (the
target arch's, or the device a point was measured on) — and no projections; other GPUs
and the projections of each point onto them come on request (``gpus=``,
``projections=True``). Labels are placed by :func:`place_labels` (candidate positions
around the anchor, checked against every placed label, marker and line; a leader line
when a label has to move away). Each point has its own colour and marker and a number
that the table under the plot explains in one plain line (its verdict: what bounds it and
what its time is made of); two launches with the same counted work and time share a
marker and say so; markers of points closer than a marker's width are moved apart by
:func:`spread_markers`, a thin line tying each moved marker to its true spot. Every
number carries its unit; ridge points are labelled ``ridge 206 FLOP/B`` and explained in
the legend, whose line samples are drawn exactly as the plot's lines. A predicted point
(:func:`tilelab.perf.predict`) is a hollow marker at its predicted total time; its
roofline bound is a bar, another marker, where no real kernel gets. The model's terms and
assumptions are not drawn: they are in ``fig.tilelab["predictions"]`` for a view to fold
(the ``%%tile`` Roofline tab puts them in a ``<details>``).

Example:
    >>> from tilelab.perf.counting import softmax
    >>> fig = roofline_figure([softmax(4096, 4096)], theme="light")
    >>> fig.tilelab["legend"][:2]
    ['H200 fp32 (CUDA cores, dense)', 'H200 memory 4.8 TB/s']
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from tilelab.lab.figures.roofline_layout import (Rect, place_labels, rect_hits_segment,
                                                 spread_markers)
from tilelab.lab.figures.svg import SvgFigure, color, text_width
from tilelab.lab.figures.theme import Theme, get_theme

__all__ = ["roofline_figure", "place_labels", "rect_hits_segment", "spread_markers",
           "ceiling_label", "short_gpu_name", "point_verdict", "MARKERS"]

#: marker shapes of the points, in turn (with the colours: a distinct pair per point)
MARKERS = ("circle", "square", "triangle", "diamond", "down", "hexagon")
_TENSOR_DASH: tuple[list[float] | None, ...] = (None, [8, 4], [10, 3, 2, 3], [3, 2])
_CUDA_DASH = [1.5, 3]
_MARKER_R = 6.5                                    # a point marker's radius, px
#: marker centres at least this far apart never overlap: the widest marker (the diamond,
#: 1.3 radii, plus its 1 px half-stroke) reaches half of it
_MARKER_GAP = 2 * (1.3 * _MARKER_R + 1)
_L, _T, _PW, _PH = 92.0, 44.0, 560.0, 360.0       # the plot box, px
_W = 1000.0


# ============================================================================ names and points

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


def _as_points(points: Any) -> tuple[list, list]:
    """(points, gpus of a Roofline passed in) from points, predictions, Work objects or a
    Roofline."""
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
        elif hasattr(p, "total_s") and callable(getattr(p, "point", None)):   # a Prediction
            out.append(p.point())
        elif all(hasattr(p, a) for a in ("flops", "bytes", "precision")):
            out.append(RooflinePoint.from_work(p))
        else:
            raise TypeError(f"roofline points are RooflinePoint, Prediction or Work "
                            f"objects, got {type(p).__name__}")
    return out, []


# ============================================================================ axes

class _Axes:
    def __init__(self, lo: float, hi: float, ylo: float, yhi: float) -> None:
        self.lo, self.hi, self.ylo, self.yhi = math.log2(lo), math.log2(hi), \
            math.log10(ylo), math.log10(yhi)

    def x(self, v: float) -> float:
        return _L + (math.log2(v) - self.lo) / (self.hi - self.lo) * _PW

    def y(self, v: float) -> float:
        return _T + _PH - (math.log10(v) - self.ylo) / (self.yhi - self.ylo) * _PH


def _intensity_tick(v: float) -> str:
    return f"{v:g}" if v >= 1 else f"1/{1 / v:g}"


def _draw_axes(fig: SvgFigure, ax: _Axes) -> None:
    from tilelab.perf.roofline import format_flops

    fig.rect(_L, _T, _PW, _PH, fill=color("panel"), stroke=color("muted"), width=1)
    n = int(ax.hi - ax.lo)
    step = 1 if n <= 14 else 2
    for e in range(math.ceil(ax.lo), math.floor(ax.hi) + 1):
        if (e - math.ceil(ax.lo)) % step:
            continue
        px = ax.x(2.0 ** e)
        fig.line([(px, _T), (px, _T + _PH)], stroke=color("grid"), width=0.7, gid="grid")
        fig.text(px, _T + _PH + 15, _intensity_tick(2.0 ** e), size=10.5, anchor="middle",
                 gid="tick")
    for e in range(math.ceil(ax.ylo), math.floor(ax.yhi) + 1):
        py = ax.y(10.0 ** e)
        fig.line([(_L, py), (_L + _PW, py)], stroke=color("grid"), width=0.7, gid="grid")
        fig.text(_L - 6, py + 4, format_flops(10.0 ** e, digits=3), size=10.5, anchor="end",
                 gid="tick")
    fig.text(_L + _PW / 2, _T + _PH + 34, "arithmetic intensity (FLOP/B, log scale)",
             size=11.5, anchor="middle", gid="axis-title")
    fig.text(16, _T + _PH / 2, "performance (FLOP/s, log scale)", size=11.5, anchor="middle",
             rotate=-90, gid="axis-title")


# ============================================================================ drawing

def _marker(fig: SvgFigure, shape: str, x: float, y: float, r: float, *, fill: str,
            stroke: str, gid: str, tip: str | None = None, width: float = 2.0) -> Rect:
    if shape == "circle":
        fig.circle(x, y, r, fill=fill, stroke=stroke, width=width, gid=gid, tip=tip)
    else:
        k = {"square": [(-1, -1), (1, -1), (1, 1), (-1, 1)],
             "triangle": [(0, -1.2), (1.1, 0.9), (-1.1, 0.9)],
             "down": [(0, 1.2), (1.1, -0.9), (-1.1, -0.9)],
             "diamond": [(0, -1.3), (1.3, 0), (0, 1.3), (-1.3, 0)],
             "hexagon": [(math.cos(a) * 1.15, math.sin(a) * 1.15)
                         for a in (i * math.pi / 3 for i in range(6))]}[shape]
        fig.polygon([(x + r * a, y + r * b) for a, b in k], fill=fill, stroke=stroke,
                    width=width, gid=gid, tip=tip)
    return (x - r - 2, y - r - 2, x + r + 2, y + r + 2)


def _ceilings(fig: SvgFigure, ax: _Axes, data: dict, specs: dict,
              precs: Sequence[str]) -> tuple[list, list, list]:
    """Ceiling polylines and ridge diamonds; returns legend entries, segments, ridges."""
    from tilelab.perf.roofline import format_bandwidth
    from tilelab.perf.specs import PRECISIONS

    legend, segments, ridges = [], [], []
    for g in data["gpus"]:
        key, spec = g["key"], specs[g["key"]]
        col = color(f"gpu:{key}")
        lw = 3.0 if g["measured"] else 1.8
        tensor_i = 0
        for c in g["ceilings"]:
            prec = c["precision"]
            if PRECISIONS[prec].tensor:
                dash = _TENSOR_DASH[tensor_i % len(_TENSOR_DASH)]
                tensor_i += 1
            else:
                dash = _CUDA_DASH
            pts = [(ax.x(i), ax.y(p)) for i, p in zip(c["polyline"]["intensity"],
                                                     c["polyline"]["performance"])]
            label = ceiling_label(spec, prec, c["density"])
            fig.line(pts, stroke=col, width=lw, dash=dash, gid=f"ceiling:{key}:{prec}")
            fig.record(f"ceiling:{key}:{prec}", points=c["polyline"], color=col, width=lw,
                       dash=dash, label=label)
            segments += list(zip(pts, pts[1:]))
            legend.append(("line", dict(stroke=col, width=lw, dash=dash), label))
            r = c["ridge"]
            rx, ry = ax.x(r["intensity"]), ax.y(r["performance"])
            ridges.append((rx, ry, col, r["intensity"], key, prec))
            fig.record(f"ridge:{key}:{prec}", x=r["intensity"], y=r["performance"])
        mem = g["memory"]
        legend.append(("line", dict(stroke=col, width=lw, dash=None),
                       f"{short_gpu_name(spec)} memory {format_bandwidth(mem['value'])}"))
    return legend, segments, ridges


def _point_y(p: dict) -> float | None:
    y = p["performance"]
    if y is None:   # counted only: place it at what the first GPU allows
        first = next((k for k, v in p["on"].items() if v.get("supported")), None)
        y = p["on"][first]["attainable"] if first else None
    return y if y and y > 0 else None


def _home(p: dict, data: dict, specs: dict) -> str | None:
    if p.get("measured_on"):
        return p["measured_on"]
    dev = p.get("device")
    hits = [g["key"] for g in data["gpus"] if dev and specs[g["key"]].matches(dev)]
    hits.sort(key=lambda k: not specs[k].measured)
    return hits[0] if hits else None


def _groups(data: dict) -> list[list[int]]:
    """Indices of points at the same spot (the same FLOP/B and FLOP/s): one marker each."""
    groups: list[list[int]] = []
    spots: list[tuple[float, float]] = []
    for i, p in enumerate(data["points"]):
        y = _point_y(p)
        if p["intensity"] <= 0 or y is None:
            continue
        at = (p["intensity"], y)
        for g, s in zip(groups, spots):
            if all(math.isclose(a, b, rel_tol=1e-9) for a, b in zip(s, at)):
                g.append(i)
                break
        else:
            groups.append([i])
            spots.append(at)
    return groups


def _offset_link(fig: SvgFigure, spot: tuple[float, float], at: tuple[float, float],
                 col: str, name: str) -> Rect:
    """A dot at a point's true spot and a thin line to its moved marker's edge."""
    d = math.dist(spot, at)
    edge = (at[0] + (spot[0] - at[0]) * _MARKER_R / d,
            at[1] + (spot[1] - at[1]) * _MARKER_R / d)
    fig.line([spot, edge], stroke=col, width=1, gid=f"offset:{name}")
    fig.circle(spot[0], spot[1], 1.8, fill=col, gid=f"offset:{name}")
    return (spot[0] - 3, spot[1] - 3, spot[0] + 3, spot[1] + 3)


def _bounds(fig: SvgFigure, ax: _Axes, bounds: list, drawn: dict) -> None:
    """The roofline bound of each predicted point: a bar at the counted FLOPs over the bound
    time, on the roof (at the point's x unless the bound prices fewer bytes than the point
    is placed by: a GEMM's compulsory bytes against its tiles' traffic). A bar of one point
    is in its colour, tied to it by a dotted line; points that share a bound (one GEMM in
    several tile sizes) share one bar in the foreground colour."""
    spots: dict[tuple[float, float], list] = {}
    for pred, px, py, col, name in bounds:
        if pred.flops > 0 and pred.bound_s > 0:
            at = (pred.flops / pred.bound_bytes, pred.flops / pred.bound_s)
            key = next((k for k in spots if all(math.isclose(a, b, rel_tol=1e-9)
                                                for a, b in zip(k, at))), at)
            spots.setdefault(key, []).append((px, py, col, name))
    for (x, y), owners in spots.items():
        bx, by = ax.x(x), ax.y(y)
        col = owners[0][2] if len(owners) == 1 else color("foreground")
        if len(owners) == 1:
            px, py, _, name = owners[0]
            fig.line([(bx, by), (px, py)], stroke=col, width=1, dash=[2, 2],
                     gid=f"bound-link:{name}")
        names = " = ".join(dict.fromkeys(o[3] for o in owners))
        fig.line([(bx - 9, by), (bx + 9, by)], stroke=col, width=3, gid=f"bound:{names}")
        for o in owners:
            drawn["bounds"].append({"name": o[3], "x": x, "y": y, "shared": len(owners) > 1})
        drawn["markers"].append((bx - 10, by - 3, bx + 10, by + 3))


def _projections(fig: SvgFigure, ax: _Axes, data: dict, p: dict, home: str | None,
                 px: float, drawn: dict) -> None:
    """Squares at the bound of the point's counted work on each other GPU drawn."""
    for g in data["gpus"]:
        on = p["on"].get(g["key"], {})
        if g["key"] == home or not on.get("supported"):
            continue
        gc = color(f"gpu:{g['key']}")
        qy = ax.y(on["attainable"])
        fig.rect(px - 4.5, qy - 4.5, 9, 9, fill=gc, stroke=color("foreground"), width=0.8,
                 opacity=0.9, gid=f"projection:{p['name']}:{g['key']}")
        drawn["projections"].append({"name": p["name"], "gpu": g["key"], "x": p["intensity"],
                                     "y": on["attainable"]})
        fig.record(f"projection:{p['name']}:{g['key']}", x=p["intensity"],
                   y=on["attainable"], opacity=0.9, color=gc)
        drawn["markers"].append((px - 6, qy - 6, px + 6, qy + 6))


def _points(fig: SvgFigure, ax: _Axes, data: dict, pts: list, specs: dict,
            projections: bool) -> dict:
    """Markers, bound bars and (on request) projections; returns what was drawn and the
    label anchors."""
    drawn: dict[str, list] = {"measured": [], "predicted": [], "projections": [],
                              "bounds": [], "anchors": [], "markers": []}
    groups, bounds = _groups(data), []
    spots = [(ax.x(data["points"][g[0]]["intensity"]), ax.y(_point_y(data["points"][g[0]])))
             for g in groups]
    for gi, (group, spot, at) in enumerate(zip(groups, spots,
                                               spread_markers(spots, _MARKER_GAP))):
        p = data["points"][group[0]]
        x, y = p["intensity"], _point_y(p)
        (px, py), (mx, my) = spot, at
        col, shape = color(f"point:{gi}"), MARKERS[(gi + gi // 6) % len(MARKERS)]
        home = _home(p, data, specs) or next(
            (k for k, v in p["on"].items() if v.get("supported")), None)
        pred = getattr(pts[group[0]], "prediction", None)
        if pred is not None and home is not None:
            bounds.append((pred, px, py, col, p["name"]))
        offset = (round(mx - px, 2), round(my - py, 2))
        if offset != (0, 0):
            drawn["markers"].append(_offset_link(fig, spot, at, col, p["name"]))
        box = _marker(fig, shape, mx, my, _MARKER_R,
                      fill=col if p["measured"] else color("panel"), stroke=col,
                      gid=f"point:{p['name']}", tip=p["label"])
        drawn["markers"].append(box)
        fig.record(f"point:{p['name']}", x=x, y=y, filled=bool(p["measured"]), color=col,
                   marker=shape, group=[i + 1 for i in group], offset=offset)
        numbers = ", ".join(f"#{i + 1}" for i in group)
        names = list(dict.fromkeys(data["points"][i]["name"] for i in group))
        text = f"{numbers} {' = '.join(names)}" + (" (same spot)" if len(group) > 1 else "")
        drawn["anchors"].append((mx, my, text, col))
        for i in group:
            kind = "measured" if data["points"][i]["measured"] else "predicted"
            drawn[kind].append({"name": data["points"][i]["name"], "x": x, "y": y,
                                "home": home, "number": i + 1, "color": col,
                                "marker": shape, "offset": offset})
        if projections:
            _projections(fig, ax, data, p, home, px, drawn)
    _bounds(fig, ax, bounds, drawn)
    return drawn


def _labels(fig: SvgFigure, drawn: dict, ridges: list, segments: list) -> list[dict]:
    """Ridge and point labels, placed free of each other, the lines and the markers."""
    anchors, texts = [], []
    for rx, ry, col, inten, key, prec in ridges:
        fig.polygon([(rx, ry - 5), (rx + 5, ry), (rx, ry + 5), (rx - 5, ry)], fill=col,
                    gid=f"ridge:{key}:{prec}")
        drawn["markers"].append((rx - 6, ry - 6, rx + 6, ry + 6))
    seen = set()
    for rx, ry, col, inten, key, prec in ridges:
        text = f"ridge {inten:.3g} FLOP/B"
        if (key, round(inten)) in seen:
            continue
        seen.add((key, round(inten)))
        anchors.append((rx, ry, text_width(text, 10), 12.0, 6.0))
        texts.append((text, col, 10.0, "ridge-label", (rx, ry)))
    for px, py, text, col in drawn["anchors"]:
        anchors.append((px, py, text_width(text, 11.5), 14.0, 9.0))
        texts.append((text, color("foreground"), 11.5, "point-label", (px, py)))
    placed = place_labels(anchors, drawn["markers"], segments, (_L + 2, _T + 2, _L + _PW - 2,
                                                                _T + _PH - 2))
    out = []
    for (rect, moved), (text, col, size, gid, at) in zip(placed, texts):
        if moved:
            cx = min(max(at[0], rect[0]), rect[2])
            cy = min(max(at[1], rect[1]), rect[3])
            fig.line([at, (cx, cy)], stroke=color("muted"), width=0.8, gid="leader")
        fig.text(rect[0], rect[3] - 3, text, size=size, fill=col, halo=True, gid=gid)
        out.append({"text": text, "rect": rect, "anchor": at, "moved": moved, "kind": gid})
    return out


def _legend(fig: SvgFigure, entries: list, x: float, y: float, width: float) -> float:
    """Legend rows: a sample drawn as in the plot, then the text (wrapped)."""
    from tilelab.lab.figures.ownership_svg import _lines

    for kind, style, text in entries:
        if kind == "line":
            fig.line([(x, y + 7), (x + 30, y + 7)], gid="legend-sample", **style)
        elif kind == "marker":
            _marker(fig, style["shape"], x + 15, y + 7, 5.5, fill=style["fill"],
                    stroke=style["stroke"], gid="legend-sample")
        elif kind == "bound":
            fig.line([(x + 6, y + 7), (x + 24, y + 7)], stroke=style["stroke"], width=3,
                     gid="legend-sample")
        elif kind == "ridge":
            fig.polygon([(x + 15, y + 2), (x + 20, y + 7), (x + 15, y + 12), (x + 10, y + 7)],
                        fill=style["fill"], gid="legend-sample")
        else:
            fig.rect(x + 10, y + 2.5, 9, 9, fill=style["fill"], stroke=color("foreground"),
                     width=0.8, gid="legend-sample")
        for n, line in enumerate(_lines(text, width - 38, 11)):
            fig.text(x + 38, y + 11 + 14 * n, line, size=11, gid="legend")
            height = 14 * (n + 1)
        y += max(18, height + 4)
    return y


def point_verdict(point: Any, spec: Any = None, *, with_at: bool = True) -> str:
    """One plain line on a roofline point: a prediction's verdict (what bounds it, what its
    time is made of, and with ``with_at`` the problem it was predicted at), or how close
    a measured point came to the roof of ``spec`` (the GPU it ran on), or that a point
    has no time.

    Example:
        >>> from tilelab.perf.counting import elementwise
        >>> from tilelab.perf import predict
        >>> point_verdict(predict(elementwise(1 << 14), "h200").point())
        'launch-bound: ~3.9 µs of launch, 0.043 µs of bytes'
    """
    pred = getattr(point, "prediction", None)
    if pred is not None:
        return pred.verdict + (f" (at {pred.at})" if pred.at and with_at else "")
    if point.seconds is None:
        return "counted only: no time"
    if not point.measured:
        return "time given, not predicted by the model"
    if spec is None:
        return f"measured on {point.device or 'a GPU'}"
    frac = point.fraction_of_ceiling(spec)
    return (f"measured: {frac:.0%} of {short_gpu_name(spec)}'s "
            f"{point.bound_on(spec)} roof")


def _table(fig: SvgFigure, data: dict, drawn: dict, pts: list, specs: dict,
           y: float) -> float:
    """One row per point: number, kernel, FLOP/B, time (measured or predicted) and its
    verdict in plain words."""
    from tilelab.lab.figures.ownership_svg import _lines
    from tilelab.perf.roofline import format_seconds

    cols = (12, 48, 290, 360, 490)
    heads = ("#", "kernel", "FLOP/B", "time", "what the time is")
    for cx, h in zip(cols, heads):
        fig.text(cx, y, h, size=11, weight="bold", gid="table-head")
    y += 17
    marks = {d["number"]: d for k in ("measured", "predicted") for d in drawn[k]}
    verdicts = []
    for i, p in enumerate(data["points"]):
        d = marks.get(i + 1)
        if d is not None:
            _marker(fig, d["marker"], cols[0] + 4, y - 4, 4.5,
                    fill=d["color"] if p["measured"] else color("panel"), stroke=d["color"],
                    gid="table-marker", width=1.6)
        kind = ("measured" if p["measured"] else "predicted"
                if getattr(pts[i], "prediction", None) else "given")
        home = _home(p, data, specs)
        verdict = point_verdict(pts[i], specs.get(home) if home else None)
        verdicts.append(verdict)
        time = (f"{format_seconds(p['seconds'], digits=3)} {kind}" if p["seconds"] else "–")
        row = (f"{i + 1}", p["name"][:38], f"{p['intensity']:.4g}", time)
        for cx, v in zip(cols, row):
            fig.text(cx + (16 if cx == cols[0] else 0), y, v, size=11, gid="table-cell")
        for n, part in enumerate(_lines(verdict, fig.width - cols[4] - 12, 11)):
            fig.text(cols[4], y + 14 * n, part, size=11, gid="table-verdict")
        y += 16 + 14 * max(0, len(_lines(verdict, fig.width - cols[4] - 12, 11)) - 1)
    fig.record("verdicts", lines=verdicts)
    return y


def _legend_entries(data: dict, drawn: dict, pts: list) -> list:
    entries = [("ridge", {"fill": color("muted")},
                "ridge point: peak ÷ bandwidth (FLOP/B); left of it memory-bound, right "
                "compute-bound")]
    if drawn["measured"]:
        entries.append(("marker", {"shape": "circle", "fill": color("foreground"),
                                   "stroke": color("foreground")}, "measured on a GPU"))
    if drawn["predicted"]:
        model = any(getattr(p, "prediction", None) for p in pts)
        counted = all(p["seconds"] is None for p in data["points"] if not p["measured"])
        what = ("counted, no time" if counted else
                "predicted: launch floor + kernel body (the table says which dominates)"
                if model else "not measured: a given time")
        entries.append(("marker", {"shape": "circle", "fill": color("panel"),
                                   "stroke": color("foreground")}, what))
    if drawn["bounds"]:
        entries.append(("bound", {"stroke": color("foreground")},
                        "roofline bound of a predicted point: max(FLOPs / peak, bytes / "
                        "bandwidth), where no real kernel gets"))
    if drawn["projections"]:
        entries.append(("square", {"fill": color("muted")},
                        "roofline bound of the same work on another GPU, in its colour"))
    return entries


def _default_gpus(pts: list) -> list:
    """The GPUs the points' times are for (measured on, predicted for), else the H200."""
    from tilelab.perf.specs import UnknownGPUError, lookup_gpu, spec_for_device

    keys: list = []
    for p in pts:
        if not p.device or (not p.measured and p.prediction is None and p.seconds is None):
            continue
        spec = spec_for_device(p.device) if p.measured else None
        try:
            spec = spec or lookup_gpu(p.device)
        except (UnknownGPUError, KeyError, ValueError):
            continue
        if spec.key not in keys:
            keys.append(spec.key)
    return keys or ["h200"]


def roofline_figure(points: Any = (), gpus: Sequence[Any] | None = None, *,
                    projections: bool = False, precisions: Sequence[str] | None = None,
                    current: Any = None, theme: "Theme | str | None" = None,
                    title: str | None = None, density: str = "dense") -> SvgFigure:
    """A log-log roofline as SVG: FLOP/B against FLOP/s, one ceiling line per GPU and
    precision (ridge points marked and labelled in FLOP/B), the current device's *measured*
    ceilings when ``current`` is given (a :class:`~tilelab.perf.ceilings.MeasuredCeilings`
    or a measured GPUSpec), and each launch as a numbered point with its own colour and
    marker: filled when measured on a GPU, hollow when predicted (its roofline bound a
    bar, another marker); the table under the plot gives each point's time and, in one
    plain line, what bounds it and what its time is made of.

    ``points`` are :class:`~tilelab.perf.roofline.RooflinePoint`,
    :class:`~tilelab.perf.prediction.Prediction`, counted
    :class:`~tilelab.perf.counting.Work` or a whole :class:`~tilelab.perf.roofline.Roofline`
    (``gpus=None`` then draws that Roofline's GPUs). ``gpus`` defaults to the GPUs the
    points' times are for (the H200 when none is): one GPU, one set of ceilings. Name more
    to compare, and pass ``projections=True`` to mark each point's roofline bound on the
    other GPUs. ``precisions`` defaults to FP32 and those of the points;
    ``density="sparse"`` draws 2:4-sparse tensor rates instead.

    Example:
        >>> from tilelab.perf.counting import softmax
        >>> fig = roofline_figure([softmax(4096, 4096)], theme="dark")
        >>> fig.tilelab["legend"]  # doctest: +NORMALIZE_WHITESPACE
        ['H200 fp32 (CUDA cores, dense)', 'H200 memory 4.8 TB/s',
         'ridge point: peak ÷ bandwidth (FLOP/B); left of it memory-bound, right
         compute-bound', 'counted, no time']
    """
    from tilelab.perf.roofline import Roofline
    from tilelab.perf.specs import lookup_gpu

    t = get_theme(theme)
    pts, roof_gpus = _as_points(points)
    if gpus is None:
        gpus = roof_gpus or _default_gpus(pts)
    r = Roofline(gpus, density=density)
    if current is not None:
        r.add_gpu(current.spec() if hasattr(current, "spec") and callable(current.spec)
                  else lookup_gpu(current))
    for p in pts:
        r.add_point(p)
    lo, hi = r.intensity_range(precisions)
    bound_x = [p.prediction.flops / p.prediction.bound_bytes for p in pts
               if p.prediction is not None and p.prediction.flops > 0]
    if bound_x and max(bound_x) * 2 > hi:      # a GEMM's bound sits at its DRAM intensity
        hi = 2.0 ** math.ceil(math.log2(max(bound_x) * 2))
    data = r.series((lo, hi), precisions=precisions)
    precs = list(precisions or r.default_precisions())
    specs = {g.key: g for g in r.gpus}
    lo, hi = data["intensity_range"]
    ys = [y for g in data["gpus"] for c in g["ceilings"] for y in c["polyline"]["performance"]]
    for p, pt in zip(data["points"], pts):
        y = _point_y(p)
        ys += [y] if y else []
        if projections:
            ys += [v["attainable"] for v in p["on"].values() if v.get("supported")]
        pred = pt.prediction
        if pred is not None and pred.flops > 0:
            ys.append(pred.flops / pred.bound_s)
    ylo, yhi = (10 ** math.floor(math.log10(min(ys) / 1.5)),
                10 ** math.ceil(math.log10(max(ys) * 1.5))) if ys else (1e9, 1e16)
    ax = _Axes(lo, hi, ylo, yhi)
    names = ", ".join(short_gpu_name(g) for g in r.gpus)
    head = title or (f"Roofline on {names} (dense ceilings)"
                     + ("; squares: bounds on the other GPUs" if projections else ""))
    fig = SvgFigure(_W, 600, title=head, theme=t)
    fig.text(12, 22, head, size=14, weight="bold", gid="title")
    _draw_axes(fig, ax)
    legend, segments, ridges = _ceilings(fig, ax, data, specs, precs)
    drawn = _points(fig, ax, data, pts, specs, projections)
    labels = _labels(fig, drawn, ridges, segments)
    entries = legend + _legend_entries(data, drawn, pts)
    bottom = _legend(fig, entries, _L + _PW + 18, _T, _W - (_L + _PW + 18) - 8)
    y = _table(fig, data, drawn, pts, specs, max(_T + _PH + 62, bottom + 14))
    fig.height = y + 8
    drawn.pop("markers")
    fig.tilelab = {"kind": "roofline", "series": data, "legend": [e[2] for e in entries],
                   "drawn": drawn, "labels": labels, "segments": segments,
                   "theme": t.name, "precisions": precs, "gpus": [g.key for g in r.gpus],
                   "verdicts": [point_verdict(p, specs.get(_home(d, data, specs) or ""))
                                for p, d in zip(pts, data["points"])],
                   "predictions": [p.prediction for p in pts]}
    return fig
