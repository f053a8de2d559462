"""The content of each tab of a ``%%tile`` view, as HTML fragments and plain text.

Why: the widget tabs and the static HTML page must show exactly the same thing, so each
tab is built once here as a :class:`Panel` and the containers in
:mod:`tilelab.lab.views.tabs` only arrange panels. Fragments use the classes styled by
:data:`tilelab.lab.views.tabs.CSS` (theme variables, no hard-coded backgrounds) and stay
readable when a renderer strips all CSS (GitHub): listings are ``<pre>`` blocks with one
line per text line.

Example:
    >>> from tilelab.lab.report.cell_report import CellReport
    >>> [p.title for p in build_panels(CellReport(views=("lowered", "timings")))]
    ['Lowered', 'Timings']
"""
from __future__ import annotations

import base64
import html
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from tilelab.lab.report.cell_report import CellReport, KernelReport
from tilelab.lab.report.options import VIEWS
from tilelab.lab.views.highlight import highlight_lines
from tilelab.lab.views.linked import (device_lines, folded_listing, linked_section, ptx_lines,
                                      sass_lines)

__all__ = ["TITLES", "Panel", "build_panels", "remarks_text", "sass_text"]

#: the tab title of each view
TITLES = {"race": "Race", "tileir": "Source ↔ Tile IR", "safety": "Safety",
          "lowered": "Lowered", "ptx": "PTX", "sass": "SASS", "resources": "Resources",
          "remarks": "Remarks", "ownership": "Ownership", "roofline": "Roofline",
          "timings": "Timings"}



@dataclass(frozen=True)
class Panel:
    """One tab: its view key, title, HTML fragment and a plain-text rendering.

    Example:
        >>> Panel("ptx", "PTX", "<pre>.version 9.4</pre>", ".version 9.4").title
        'PTX'
    """

    key: str
    title: str
    html: str
    text: str


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _note(text: str, cls: str = "tl-note") -> str:
    return f'<p class="{cls}">{_esc(text)}</p>'


def _error(text: str) -> str:
    return f'<pre class="tl-error">{_esc(text)}</pre>'


def _listing(text: str, language: str, first_line: int | None = None) -> str:
    """A highlighted listing; with ``first_line``, numbered from it."""
    rows = []
    for i, line in enumerate(highlight_lines(text, language)):
        gutter = "" if first_line is None else \
            f'<span class="tl-ln">{first_line + i}</span> '
        rows.append(f'<span class="tl-row">{gutter}{line}</span>')
    return '<pre class="tl-code">' + "\n".join(rows) + "</pre>"


def _kernel_head(k: KernelReport) -> str:
    extra = f" · {k.launches} launch{'es' * (k.launches != 1)}" if k.launches else ""
    return (f'<h4 class="tl-kernel-title"><code>{_esc(k.name)}</code> '
            f'<span class="tl-dim">({_esc(k.signature)}) · {_esc(k.arch)}{extra}</span></h4>')


def _pick_label(k: KernelReport) -> str:
    label = f"{k.name}({k.signature})"
    return label if len(label) <= 64 else label[:61] + "…"


def _sections(report: CellReport, body: Callable[[KernelReport], str]) -> str:
    """Each kernel's section; with several specializations a picker shows one at a time
    (radio buttons and CSS, like the tabs) instead of repeating the view per kernel."""
    if not report.kernels:
        return _note("No kernels ran or were compiled in this cell.")
    sections = [f'<section class="tl-kernel">{_kernel_head(k)}{body(k)}</section>'
                for k in report.kernels]
    if len(sections) == 1:
        return sections[0]
    group = f"tlp{uuid.uuid4().hex[:12]}"
    inputs, picks = [], []
    for i, (k, sec) in enumerate(zip(report.kernels, sections)):
        checked = " checked" if i == 0 else ""
        inputs.append(f'<input type="radio" name="{group}" id="{group}-{i}"{checked}>'
                      f'<label for="{group}-{i}" title="{_esc(k.title)}">'
                      f"{_esc(_pick_label(k))}</label>")
        picks.append(f'<div class="tl-pick">{sec}</div>')
    show = "".join(f"#{group}-{i}:checked ~ .tl-pick:nth-of-type({i + 1}) {{ display: block; }}"
                   for i in range(len(sections)))
    return (f"<style>{show}</style>"
            + _note(f"{len(sections)} specializations: pick one") +
            f'<div class="tl-picker">{"".join(inputs)}{"".join(picks)}</div>')


# ----------------------------------------------------------------- Source ↔ Tile IR

def _tileir_section(k: KernelReport, rename: Callable[[str], str]) -> str:
    if k.error:
        return _error(k.error) + _listing("".join(k.source_lines), "python",
                                          k.source_first_line)
    note = _note(k.ir_problem) if k.ir_problem else ""
    return linked_section(k, k.ir_lines, rename, kind="tileir", title="Tile IR", note=note)


def _tileir_text(k: KernelReport) -> str:
    if k.error:
        return k.error
    width = max((len(str(l.line)) for l in k.ir_lines if l.line), default=1)
    return "\n".join(f"{(str(l.line) if l.line else ''):>{width}} | {l.text}"
                     for l in k.ir_lines)


# ----------------------------------------------------------------- the other tabs

def _artifact(k: KernelReport, body: Callable[[Any], str]) -> str:
    if k.error:
        return _error(k.error)
    if k.artifacts is None:
        return _note("not compiled")
    return body(k.artifacts)


def _lowered(k: KernelReport) -> str:
    if not k.lowered_source:
        return _error(k.error) if k.error else _note("not lowered")
    return (_note("The plain cuTile Python this kernel became for these arguments (line "
                  "numbers are those of your source).") +
            _listing(k.lowered_source, "python", k.lowered_first_line))


def _ptx(k: KernelReport, rename: Callable[[str], str]) -> str:
    art = k.artifacts
    if not art.ptx:
        return _note("The cubin carries no PTX.")
    lines, located = ptx_lines(art.ptx, getattr(art, "location_map", None))
    if not located or not k.source_file:
        return (_note("This PTX carries no line information (no .loc directives); the "
                      "SASS and Tile IR tabs link each instruction to its source line.")
                + folded_listing(lines, "ptx"))
    return linked_section(k, lines, rename, kind="ptx", title="PTX",
                          device=device_lines(k, k.ir_lines))


def sass_text(k: KernelReport, rename: Callable[[str], str]) -> str | None:
    """The SASS listing with its ``//## File`` lines naming cells as IPython does.

    Example:
        >>> k = KernelReport("k", "", "sm_90", sass='//## File "<c1>", line 3', source_file="<c1>")
        >>> sass_text(k, lambda f: "In[1]")
        '//## File "In[1]", line 3'
    """
    if k.sass is None or not k.source_file:
        return k.sass
    return k.sass.replace(f'"{k.source_file}"', f'"{rename(k.source_file)}"')


def _sass(k: KernelReport, rename: Callable[[str], str]) -> str:
    if k.sass is None:
        return _note(f"No SASS: {k.sass_unavailable}")
    lines = sass_lines(k.sass)
    if not k.source_file or not any(l.line for l in lines):
        return folded_listing(sass_lines(sass_text(k, rename)), "sass")
    return linked_section(k, lines, rename, kind="sass", title="SASS",
                          device=device_lines(k, k.ir_lines))


def _resources(art: Any) -> str:
    from tilelab.lab.views.resources_view import resources_html

    stages = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in art.timings.items())
    hit = " (disk cache hit)" if art.cache_hit else ""
    return (resources_html(art.resources, art.arch)
            + _note(f"compile{hit}: {stages}") + _note(f"toolchain: {art.toolchain}"))


def _resources_text(k: KernelReport) -> str:
    from tilelab.lab.views.resources_view import resources_text

    if k.artifacts is None:
        return f"{k.title}\n{k.error}"
    return resources_text(k.artifacts.resources, k.artifacts.arch)


def remarks_text(k: KernelReport, rename: Callable[[str], str]) -> str:
    """tileiras' remarks of a kernel, one per line, cell files named as IPython names them.

    Example:
        >>> remarks_text(KernelReport("k", "", "sm_90"), str)
        '(no remarks)'
    """
    from tilelab.compiler.binary.remarks import format_remarks

    text = format_remarks(k.remarks, full_paths=True)
    return text.replace(k.source_file, rename(k.source_file)) if k.source_file else text


def _png(png: bytes, caption: str, cls: str = "") -> str:
    data = base64.b64encode(png).decode("ascii")
    extra = f' class="{cls}"' if cls else ""
    return f'<img{extra} alt="{_esc(caption)}" src="data:image/png;base64,{data}"/>'


def _svg(svg: str) -> str:
    """An SVG document as an inline element (an XML prolog or doctype is dropped)."""
    start = svg.find("<svg")
    return svg[start:] if start > 0 else svg


def figure_html(img: Any) -> str:
    """A figure (:class:`~tilelab.lab.figures.images.Image`) as HTML: its SVG inline
    (coloured by the page's ``--tl-*`` variables), else its PNG, or a light and a dark PNG
    of which CSS shows the one matching the page's theme.

    Example:
        >>> from tilelab.lab.figures.images import Image
        >>> "data:image/png" in figure_html(Image(b"\\x89PNG", "roofline"))
        True
    """
    svg = getattr(img, "svg", None)
    dark = getattr(img, "png_dark", None)
    if svg:
        body, cls = _svg(svg), "tl-figure tl-svg"
    elif dark:
        body = (_png(img.png, img.caption, "tl-only-light")
                + _png(dark, img.caption, "tl-only-dark"))
        cls = "tl-figure"
    else:
        body, cls = _png(img.png, img.caption), "tl-figure"
    return f'<figure class="{cls}">{body}<figcaption>{_esc(img.caption)}</figcaption></figure>'


def _ownership(k: KernelReport) -> str:
    parts = [_note(k.ownership_note)] if k.ownership_note else []
    parts += [figure_html(img) for img in k.ownership]
    if not parts:
        parts.append(_note("No ownership diagram: the kernel did not run in this cell."))
    return "".join(parts)


def _time_of(m: Any) -> str:
    """A launch's time and what it is: ``4.04 µs predicted for H200`` or ``measured``."""
    from tilelab.lab.figures.roofline_svg import short_gpu_name
    from tilelab.perf.roofline import format_seconds

    if not m.seconds:
        return "—"
    if m.time_kind == "measured":
        return f"{format_seconds(m.seconds, 3)} measured on {m.time_device}"
    at = f" at {m.prediction.at}" if m.prediction is not None and m.prediction.at else ""
    return f"{format_seconds(m.seconds, 3)} predicted for {short_gpu_name(m.time_device)}{at}"


def _model_details(predictions: list[Any]) -> str:
    """The model's formula, each predicted launch's terms and the assumptions they used,
    folded in a ``<details>`` (the figure and the table say what a reader needs)."""
    if not predictions:
        return ""
    rows, assumptions = [], []
    for pr in predictions:
        rows.append(f"<li><code>{_esc(pr.name)}</code>: {_esc(pr.summary())}</li>")
        assumptions += [a for a in pr.assumptions if a not in assumptions]
    return ('<details class="tl-model"><summary>The model and its assumptions</summary>'
            + _note("predicted = launch floor + kernel body; kernel body = max(math ÷ wave "
                    "use, DRAM, (waves − 1) × block latency); the roofline bound, max(FLOPs "
                    "/ peak, bytes / bandwidth), is the bar above a point (docs/rooflines.md)")
            + f"<ul>{''.join(rows)}</ul><p>Assumptions (each says whether a GPU run "
            "fitted it):</p><ul>" + "".join(f"<li>{_esc(a)}</li>" for a in assumptions)
            + "</ul></details>")


def _roofline(report: CellReport) -> str:
    from tilelab.lab.figures.roofline_svg import point_verdict

    parts = []
    if report.roofline is not None:
        parts.append(figure_html(report.roofline))
    if report.roofline_note:
        parts.append(_note(report.roofline_note))
    rows, predictions = [], []
    for l in report.launches:
        m = l.measurement
        if m.point is None:
            continue
        if m.prediction is not None:
            predictions.append(m.prediction)
        rows.append(f"<tr><td><code>{_esc(l.name)}</code></td><td>{_esc(l.description)}</td>"
                    f"<td>{m.point.intensity:.4g}</td><td>{_esc(_time_of(m))}</td>"
                    f"<td>{_esc(point_verdict(m.point, _spec_of(m), with_at=False))}"
                    "</td></tr>")
    if rows:
        parts.append('<table class="tl-table"><thead><tr><th>kernel</th><th>launch</th>'
                     "<th>FLOP/B</th><th>time</th><th>what the time is</th></tr></thead>"
                     "<tbody>" + "".join(rows) + "</tbody></table>")
    parts.append(_model_details(predictions))
    if any(p.launch_bound and not p.at for p in predictions):
        parts.append(_note("These launches are launch-bound at the size the cell ran: the "
                           "floor hides what the kernel does. %%tile --predict-at NAME=N "
                           "predicts them at a GPU-sized problem (every dimension equal to "
                           "the cell's NAME becomes N)."))
    gpus = ", ".join(report.roofline_gpus)
    parts.append(_note(f"Ceilings: {gpus} (dense); --roofline GPUS (or all) adds GPUs and "
                       "each point's bound on them. Work is counted by the CPU interpreter "
                       "(bytes each block moved, FLOPs it executed); times are measured on a "
                       "GPU, else predicted by tilelab.perf.predict."))
    return "".join(parts)


def _spec_of(m: Any) -> Any:
    """The datasheet spec of the GPU a measured launch ran on, or None."""
    from tilelab.perf.specs import spec_for_device

    return spec_for_device(m.time_device) if m.time_kind == "measured" and m.time_device \
        else None


def _roofline_text(report: CellReport) -> str:
    from tilelab.lab.figures.roofline_svg import point_verdict

    lines = [f"{l.measurement.point.describe()}: "
             f"{point_verdict(l.measurement.point, _spec_of(l.measurement), with_at=False)}"
             for l in report.launches if l.measurement.point is not None]
    return "\n".join(lines) or report.roofline_note or "no roofline points"


def _joined(report: CellReport, text: Callable[[KernelReport], str]) -> str:
    return "\n\n".join(f"{k.title}\n{text(k)}" for k in report.kernels)


def _panel(key: str, report: CellReport) -> tuple[str, str]:
    """(HTML, text) of one view."""
    rn = report.rename
    if key == "race":
        from tilelab.lab.views.race_view import race_panel

        return race_panel(report.race_trace, report.race_message, rn)
    if key == "tileir":
        return (_sections(report, lambda k: _tileir_section(k, rn)),
                _joined(report, _tileir_text))
    if key == "safety":
        from tilelab.lab.views.safety_view import safety_section, safety_text

        return (_sections(report, lambda k: _artifact(k, lambda _a: safety_section(k, rn))),
                _joined(report, lambda k: k.error or safety_text(k, rn)))
    if key == "lowered":
        return _sections(report, _lowered), _joined(report, lambda k: k.lowered_source or k.error)
    if key == "ptx":
        return (_sections(report, lambda k: _artifact(k, lambda _a: _ptx(k, rn))),
                _joined(report, lambda k: k.artifacts.ptx if k.artifacts else k.error))
    if key == "sass":
        return (_sections(report, lambda k: _artifact(k, lambda _a: _sass(k, rn))),
                _joined(report, lambda k: k.error or sass_text(k, rn) or k.sass_unavailable))
    if key == "resources":
        return (_sections(report, lambda k: _artifact(k, _resources)),
                "\n\n".join(_resources_text(k) for k in report.kernels))
    if key == "remarks":
        return (_sections(report, lambda k: _artifact(
                    k, lambda _a: f'<pre class="tl-code">{_esc(remarks_text(k, rn))}</pre>')),
                _joined(report, lambda k: k.error or remarks_text(k, rn)))
    if key == "ownership":
        return (_sections(report, _ownership),
                "\n".join(f"{k.title}: " + ("; ".join(i.caption for i in k.ownership)
                                            or k.ownership_note or "no diagram")
                          for k in report.kernels))
    if key == "roofline":
        return _roofline(report), _roofline_text(report)
    from tilelab.lab.views.timings_table import timings_html

    return timings_html(report)


def build_panels(report: CellReport) -> list[Panel]:
    """One :class:`Panel` per view of ``report.views``, in the order of
    :data:`~tilelab.lab.report.options.VIEWS`; a Race tab comes first when a race stopped
    the cell (``report.race_trace``).

    Example:
        >>> from tilelab.lab.report.cell_report import CellReport
        >>> build_panels(CellReport(views=("timings",)))[0].text
        '(nothing compiled or launched)'
    """
    keys = [k for k in VIEWS if k in report.views]
    if report.race_trace is not None:
        keys.insert(0, "race")
    out = []
    for key in keys:
        body, text = _panel(key, report)
        out.append(Panel(key, TITLES[key], body, text))
    return out
