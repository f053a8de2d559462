"""The Timings tab: seven columns per launch, everything else in a row that opens.

Why: a table of every number the lab has (compile stages, counts, bytes, FLOPs, ...) is 19
columns wide and wraps each cell onto many lines. What a reader compares across launches
is kernel, launch, grid, time, GB/s, TFLOP/s and how close the launch is to its roof; the
rest is there for the launch that is being looked at, in a ``<details>`` row under it
(pure HTML: it opens in an exported page too). The full table stays available as
:func:`tilelab.lab.report.cell_report.timings_frame` (and ``timings.csv`` with ``--save``).

Example:
    >>> from tilelab.lab.report.cell_report import CellReport
    >>> timings_html(CellReport())[1]
    '(nothing compiled or launched)'
"""
from __future__ import annotations

import html
import math
from typing import Any

from tilelab.lab.report.cell_report import CellReport, timings_frame

__all__ = ["COLUMNS", "timings_html", "roof_fraction"]

#: the columns always shown (the rest open per row)
COLUMNS = ("kernel", "launch", "grid", "time", "GB/s", "TFLOP/s", "% of roof")
_MAIN = {"kernel", "launch", "grid", "GB/s", "TFLOP/s"}


def roof_fraction(point: Any) -> float | None:
    """How close a roofline point is to the roof of the GPU its time is for (0..1+), or
    None (no time, or a device the datasheets do not know).

    Example:
        >>> from tilelab.perf.roofline import RooflinePoint
        >>> p = RooflinePoint("k", 1e9, 1e9, "bf16", 1e9 / 2.4e12, device="NVIDIA H200")
        >>> round(roof_fraction(p), 2)
        0.5
    """
    if point is None or point.seconds is None or not point.device:
        return None
    from tilelab.perf.specs import lookup_gpu, spec_for_device

    spec = spec_for_device(point.device)
    if spec is None:
        try:
            spec = lookup_gpu(point.device)
        except (KeyError, ValueError):
            return None
    try:
        return point.fraction_of_ceiling(spec)
    except (KeyError, ValueError):
        return None


def _num(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 10 ** digits else f"{value:.{digits}g}"
    return str(value)


def _time_cell(row: dict, prediction: Any = None) -> str:
    us = row.get("device time (µs)")
    if us is None or (isinstance(us, float) and math.isnan(us)):
        return "—"
    kind = str(row.get("time", ""))
    short = "measured" if kind.startswith("measured") else "predicted" if kind else ""
    if prediction is not None and prediction.at:
        short += f" at {prediction.at}"
    return f"{us:.4g} µs" + (f" ({short})" if short else "")


def _prediction_items(prediction: Any) -> dict[str, Any]:
    """The parts of a prediction, for the row that opens: the kernel body and the launch
    floor apart (a launch-bound time says little about the kernel) and the roofline bound
    (the row's ``time`` entry gives the verdict)."""
    if prediction is None:
        return {}
    return {"kernel body (µs)": prediction.kernel_s * 1e6,
            "launch floor (µs)": prediction.launch_s * 1e6,
            "roofline bound (µs)": prediction.bound_s * 1e6}


def _details(row: dict) -> str:
    items = [(k, _num(v)) for k, v in row.items()
             if k not in _MAIN and k != "device time (µs)"]
    dl = "".join(f"<dt>{html.escape(str(k))}</dt><dd>{html.escape(v)}</dd>" for k, v in items)
    stages = ", ".join(f"{k.split(' ')[0]} {_num(v)} ms" for k, v in row.items()
                       if k.endswith("(ms)") and k != "compile (ms)" and _num(v) != "—")
    summary = f"compile: {row.get('compile') or '—'}" + (f" ({stages})" if stages else "")
    return (f"<details><summary>{html.escape(summary)} · device {html.escape(str(row.get('device') or '—'))}"
            f" · more</summary><dl>{dl}</dl></details>")


def timings_html(report: CellReport) -> tuple[str, str]:
    """(HTML, plain text) of the Timings tab (see the module docstring).

    Example:
        >>> from tilelab.lab.report.cell_report import CellReport, KernelReport
        >>> page, text = timings_html(CellReport(kernels=[KernelReport("k", "x", "sm_90")]))
        >>> page.count("<th>"), "<details>" in page, text.split()[0]
        (7, True, 'kernel')
    """
    frame = timings_frame(report)
    if frame.empty:
        return ('<p class="tl-note">Nothing was compiled or launched.</p>',
                "(nothing compiled or launched)")
    rows = frame.to_dict("records")
    points = [l.measurement.point for l in report.launches] or [None] * len(rows)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS)
    body, text_rows = [], []
    for row, point in zip(rows, points):
        frac = roof_fraction(point)
        pred = getattr(point, "prediction", None)
        row.update(_prediction_items(pred))
        cells = [row["kernel"], row["launch"], row["grid"], _time_cell(row, pred),
                 _num(row["GB/s"]),
                 _num(row["TFLOP/s"]), "—" if frac is None else f"{frac * 100:.3g}%"]
        classes = ["", ' class="tl-launch"', ' class="tl-left"', "", "", "", ""]
        body.append("<tr>" + "".join(f"<td{c}>{html.escape(str(v))}</td>"
                                     for c, v in zip(classes, cells)) + "</tr>")
        body.append(f'<tr class="tl-more"><td colspan="{len(COLUMNS)}">{_details(row)}</td></tr>')
        text_rows.append([str(v) for v in cells])
    widths = [max(len(c), *(len(r[i]) for r in text_rows)) for i, c in enumerate(COLUMNS)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)) for r in text_rows]
    table = (f'<table class="tl-table tl-timings"><thead><tr>{head}</tr></thead><tbody>'
             + "".join(body) + "</tbody></table>")
    note = ('<p class="tl-note">Open a row for its compile stages, device, launch count, '
            "FLOPs and bytes, and a prediction's kernel body, launch floor and roofline "
            "bound; the full table is "
            "<code>tilelab.lab.report.cell_report.timings_frame(last_view().report)</code>.</p>")
    return table + note, "\n".join(line.rstrip() for line in lines)
