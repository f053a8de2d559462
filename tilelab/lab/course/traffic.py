"""Counting the bytes launches move, and small teaching charts, for notebooks.

Why: a notebook cell should show the idea (fusion removes a write and a read; the online
softmax rescales its running sum), not the bookkeeping of subscribing to launches,
tracing them and laying out bars. These helpers do the bookkeeping:

- :func:`record_launches` — the launches a function makes, as the runtime reports them;
- :func:`distinct_bytes` — the bytes a trace's arguments need to cross the memory bus
  (every element touched at least once, counted once);
- :func:`count_traffic` — per version and kernel, the counted work and its bytes
  (a :class:`Traffic` with a table and a stacked-bar figure);
- :func:`running_figure` — a row read in chunks beside running values per chunk.

Figures are :class:`tilelab.lab.figures.svg.SvgFigure` (SVG that follows the page's theme, PNG
in notebook outputs).

Example:
    >>> import tilelab as tl
    >>> from tilelab.kernels import add
    >>> x = tl.ones((8, 64), device="cpu")
    >>> [e.kernel.name for e in record_launches(lambda: add(x, x))]
    ['binary_kernel']
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from tilelab.lab.figures.svg import SvgFigure, color, text_width

__all__ = ["record_launches", "distinct_bytes", "count_traffic", "Traffic", "running_figure"]


def record_launches(fn: Callable[[], Any]) -> list[Any]:
    """Run ``fn()`` and return the :class:`~tilelab.runtime.events.LaunchEvent` of every
    kernel launch it made, in order.

    Example:
        >>> record_launches(lambda: None)
        []
    """
    from tilelab.runtime.events import subscribe

    seen: list[Any] = []
    stop = subscribe(seen.append)
    try:
        fn()
    finally:
        stop()
    return seen


def distinct_bytes(trace: Any, kind: str) -> int:
    """Bytes of every argument element the trace's blocks touched with ``kind`` ("read" or
    "write") at least once — what must cross the memory bus, each element once.

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.kernels.examples import vector_add
        >>> x = tl.ones(64, device="cpu"); z = tl.zeros(64, device="cpu")
        >>> distinct_bytes(tl.interpret(vector_add, z.partition(16), x, x), "read")  # x and y
        512
    """
    from tilelab.perf.counting import dtype_size

    return sum(int(trace.footprint(arg, kind=kind).sum() * dtype_size(info.dtype))
               for arg, info in trace.args.items())


@dataclass
class Traffic:
    """Counted work per version and kernel: ``rows`` of dicts (version, kernel, work,
    KiB read, KiB written), in launch order.

    Example:
        >>> Traffic([]).saved
        0.0
    """

    rows: list[dict[str, Any]] = field(default_factory=list)

    def table(self) -> Any:
        """A pandas DataFrame of the rows (without the Work objects)."""
        import pandas as pd

        return pd.DataFrame([{k: v for k, v in r.items() if k != "work"} for r in self.rows])

    def kib(self, version: str) -> float:
        """KiB read plus written by every kernel of ``version``."""
        return sum(r["KiB read"] + r["KiB written"] for r in self.rows
                   if r["version"] == version)

    @property
    def versions(self) -> list[str]:
        """The versions, in the order they were counted."""
        return list(dict.fromkeys(r["version"] for r in self.rows))

    @property
    def saved(self) -> float:
        """The fraction of bytes the last version saves against the first."""
        vs = self.versions
        if len(vs) < 2 or not self.kib(vs[0]):
            return 0.0
        return 1 - self.kib(vs[-1]) / self.kib(vs[0])

    def figure(self, title: str | None = None, unit_note: str = "") -> SvgFigure:
        """Stacked bars: per version, the KiB each kernel moves (read + written)."""
        head = title or f"the last version moves {self.saved:.0%} fewer bytes"
        fig = SvgFigure(760, 70 + 34 * len(self.versions) + 40, title=head)
        fig.text(12, 22, head, size=14, weight="bold", gid="title")
        kernels = list(dict.fromkeys(r["kernel"] for r in self.rows))
        top = max((self.kib(v) for v in self.versions), default=1.0) or 1.0
        x0, w = 110.0, 420.0
        for i, v in enumerate(self.versions):
            y = 44 + 34 * i
            fig.text(x0 - 8, y + 16, v, size=12, anchor="end", gid="bar-label")
            x = x0
            for r in (r for r in self.rows if r["version"] == v):
                kib = r["KiB read"] + r["KiB written"]
                bw = w * kib / top
                fill = color(f"palette:{kernels.index(r['kernel'])}")
                fig.rect(x, y, bw, 24, fill=fill, stroke=color("background"), width=1,
                         gid=f"bar:{v}:{r['kernel']}", tip=f"{r['kernel']}: {kib:,.0f} KiB")
                fig.record(f"bar:{v}:{r['kernel']}", kib=kib)
                x += bw
            fig.text(x + 6, y + 16, f"{self.kib(v):,.0f} KiB", size=11, gid="bar-total")
        ly = 44 + 34 * len(self.versions) + 8
        fig.text(x0, ly + 10, "KiB that cross the memory bus" + unit_note, size=11,
                 fill=color("muted"), gid="axis-title")
        lx = x0 + w + 90
        for k, name in enumerate(kernels):
            fig.rect(lx, 44 + 18 * k, 12, 12, fill=color(f"palette:{k}"), gid="legend-swatch")
            fig.text(lx + 18, 54 + 18 * k, name, size=11, gid="legend")
        fig.height = ly + 26
        fig.width = max(lx + 18 + max((text_width(n, 11) for n in kernels), default=0) + 12,
                        x0 + w + 80)
        fig.tilelab = {"kind": "traffic", "saved": self.saved, "versions": self.versions}
        return fig

    def _repr_html_(self) -> str:
        return self.table().to_html(index=False)


def count_traffic(versions: Mapping[str, Callable[[], Any]]) -> Traffic:
    """Run each version's function, trace every launch it makes on CPU copies of its
    arguments, and count per kernel its FLOPs and the distinct bytes it reads and writes
    (a :class:`~tilelab.perf.counting.Work` in each row's ``work``).

    Example:
        >>> import tilelab as tl
        >>> from tilelab.kernels import add
        >>> x = tl.ones((8, 64), dtype="bfloat16", device="cpu")
        >>> t = count_traffic({"add": lambda: add(x, x)})
        >>> t.rows[0]["kernel"], t.rows[0]["KiB read"], t.rows[0]["KiB written"]
        ('binary_kernel', 2.0, 1.0)
    """
    from tilelab.lab.figures.ownership import trace_launch
    from tilelab.lab.figures.roofline_plot import infer_precision
    from tilelab.perf.counting import Work

    rows = []
    for version, fn in versions.items():
        for event in record_launches(fn):
            trace = trace_launch(event)
            work = Work(event.kernel.name, trace.flops, distinct_bytes(trace, "read"),
                        distinct_bytes(trace, "write"), infer_precision(trace))
            rows.append({"version": version, "kernel": event.kernel.name, "work": work,
                         "KiB read": work.bytes_read / 1024,
                         "KiB written": work.bytes_written / 1024})
    return Traffic(rows)


def _chart(fig: SvgFigure, x: float, y: float, w: float, h: float, xs: Sequence[float],
           ys: Sequence[float], *, title: str, fill: str, log: bool = False,
           marks: Sequence[float] = (), dots: bool = False, xlabel: str = "") -> None:
    """One small line chart in the box (x, y, w, h): title above, min/max on the y axis."""
    vals = [math.log10(v) if log else v for v in ys]
    lo, hi = min(vals), max(vals)
    hi = hi if hi > lo else lo + 1
    x_lo, x_hi = min(xs), max(xs)
    x_hi = x_hi if x_hi > x_lo else x_lo + 1

    def px(v: float) -> float:
        return x + (v - x_lo) / (x_hi - x_lo) * w

    def py(v: float) -> float:
        return y + h - (v - lo) / (hi - lo) * h

    fig.rect(x, y, w, h, fill=color("panel"), stroke=color("muted"), width=1)
    fig.text(x, y - 8, title, size=12, gid="chart-title")
    for m in marks:
        fig.line([(px(m), y), (px(m), y + h)], stroke=color("muted"), width=1, dash=[2, 3])
    pts = [(px(a), py(b)) for a, b in zip(xs, vals)]
    fig.line(pts, stroke=fill, width=1.0 if not dots else 1.6, gid="series")
    if dots:
        for a, b in pts:
            fig.circle(a, b, 3, fill=fill, gid="series-dot")
    fmt = (lambda v: f"{10 ** v:.3g}") if log else (lambda v: f"{v:.3g}")
    fig.text(x - 4, y + 10, fmt(hi), size=10, anchor="end", fill=color("muted"), gid="tick")
    fig.text(x - 4, y + h, fmt(lo), size=10, anchor="end", fill=color("muted"), gid="tick")
    fig.text(x + w / 2, y + h + 16, xlabel, size=10.5, anchor="middle", gid="axis-title")


def running_figure(row: Sequence[float], chunk: int, running: Mapping[str, Sequence[float]],
                   *, mark: int | None = None, log: Sequence[str] = ()) -> SvgFigure:
    """A row read in chunks of ``chunk`` (dotted chunk boundaries) beside one small chart
    per running value (``{"the maximum so far, m": [...], ...}``, one value per chunk);
    ``mark`` draws a line at that chunk count, names in ``log`` use a log scale.

    Example:
        >>> fig = running_figure([0.0, 1.0, 2.0, 3.0], 2, {"m": [1.0, 3.0]}, mark=2)
        >>> fig.tilelab["chunks"]
        2
    """
    values = list(map(float, row))
    n_chunks = math.ceil(len(values) / chunk)
    k = len(running)
    fig = SvgFigure(1000, 250, title="a row read in chunks, and what the kernel keeps")
    wide = 1000 - 110 - 40 * k
    big = wide * 2 / (2 + k)
    small = (wide - big) / max(k, 1)
    _chart(fig, 50, 40, big, 160, range(len(values)), values,
           title=f"one row, read in {n_chunks} chunks of {chunk}", fill=color("palette:0"),
           marks=[c * chunk for c in range(1, n_chunks)], xlabel="column")
    x = 50 + big + 60
    for i, (name, ys) in enumerate(running.items()):
        _chart(fig, x, 40, small, 160, range(1, len(ys) + 1), list(map(float, ys)),
               title=name, fill=color(f"palette:{i + 1}"), log=name in log, dots=True,
               marks=[mark] if mark else [], xlabel="chunks read")
        x += small + 40
    fig.tilelab = {"kind": "running", "chunks": n_chunks, "series": list(running)}
    return fig
