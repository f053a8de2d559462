"""The content of each tab of a ``%%tile`` view, as HTML fragments and plain text.

Why: the widget tabs and the static HTML page must show exactly the same thing, so each
tab is built once here as a :class:`Panel` and the containers in :mod:`tilelab.lab.views`
only arrange panels. Fragments use the classes styled by :data:`tilelab.lab.views.CSS`
(theme variables, no hard-coded backgrounds) and stay readable when a renderer strips all
CSS (GitHub): listings are ``<pre>`` blocks with one line per text line.

Example:
    >>> from tilelab.lab.report import CellReport
    >>> [p.title for p in build_panels(CellReport(views=("lowered", "timings")))]
    ['Lowered', 'Timings']
"""
from __future__ import annotations

import base64
import html
import uuid
import linecache
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Callable

from tilelab.lab.highlight import highlight_lines
from tilelab.lab.report import CellReport, KernelReport, timings_frame

__all__ = ["VIEWS", "TITLES", "Panel", "build_panels", "remarks_text", "sass_text"]

#: every view ``--show`` accepts, in tab order
VIEWS = ("tileir", "lowered", "ptx", "sass", "resources", "remarks", "ownership", "roofline",
         "timings")
#: the tab title of each view
TITLES = {"tileir": "Source ↔ Tile IR", "lowered": "Lowered", "ptx": "PTX", "sass": "SASS",
          "resources": "Resources", "remarks": "Remarks", "ownership": "Ownership",
          "roofline": "Roofline", "timings": "Timings"}



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


def _band(line: int) -> str:
    """A colour per source line, shared by both sides of the Source ↔ Tile IR view."""
    return f"hsl({(line * 47) % 360}, 65%, 52%)"


def _kernel_head(k: KernelReport) -> str:
    extra = f" · {k.launches} launch{'es' * (k.launches != 1)}" if k.launches else ""
    return (f'<h4 class="tl-kernel-title"><code>{_esc(k.name)}</code> '
            f'<span class="tl-dim">({_esc(k.signature)}) · {_esc(k.arch)}{extra}</span></h4>')


def _sections(report: CellReport, body: Callable[[KernelReport], str]) -> str:
    if not report.kernels:
        return _note("No kernels ran or were compiled in this cell.")
    return "".join(f'<section class="tl-kernel">{_kernel_head(k)}{body(k)}</section>'
                   for k in report.kernels)


# ----------------------------------------------------------------- Source ↔ Tile IR

def _source_rows(k: KernelReport, anchor: str, used: set[int]) -> list[str]:
    block = range(k.source_first_line, k.source_first_line + len(k.source_lines))
    shown = sorted(set(block) | used)
    texts = {n: k.source_lines[n - k.source_first_line].rstrip("\n") for n in block}
    for n in shown:
        if n not in texts:
            texts[n] = linecache.getline(k.source_file, n).rstrip("\n")
    rows, previous = [], None
    for n in shown:
        if previous is not None and n != previous + 1:
            rows.append('<span class="tl-row tl-gap">⋮</span>')
        hl = highlight_lines(texts[n], "python")
        code = hl[0] if hl else ""
        style = f' style="border-left-color: {_band(n)}"' if n in used else ""
        rows.append(f'<span class="tl-row tl-l{n}" id="{anchor}-L{n}"{style}>'
                    f'<span class="tl-ln">{n}</span> {code}</span>')
        previous = n
    return rows


def _ir_rows(k: KernelReport, anchor: str,
             rename: Callable[[str], str]) -> tuple[list[str], set[int]]:
    hl = highlight_lines("\n".join(l.text for l in k.ir_lines), "tileir")
    rows, used = [], set()
    for line, code in zip(k.ir_lines, hl):
        if line.line is None:
            rows.append(f'<span class="tl-row"><span class="tl-ln"></span> {code}</span>')
        elif line.filename == k.source_file:
            used.add(line.line)
            rows.append(f'<span class="tl-row tl-l{line.line}" '
                        f'style="border-left-color: {_band(line.line)}" '
                        f'title="{_esc(rename(line.filename))}, line {line.line}, '
                        f'column {line.col}">'
                        f'<a class="tl-ln" href="#{anchor}-L{line.line}">{line.line}</a> '
                        f'{code}</span>')
        else:
            where = f"{PurePath(rename(line.filename or '')).name}:{line.line}"
            rows.append(f'<span class="tl-row" title="{_esc(where)}"><span class="tl-ln '
                        f'tl-ln-wide">{_esc(where)}</span> {code}</span>')
    return rows, used


def _tileir_section(k: KernelReport, rename: Callable[[str], str]) -> str:
    if k.error:
        return _error(k.error) + _listing("".join(k.source_lines), "python",
                                          k.source_first_line)
    anchor = f"tl{uuid.uuid4().hex[:12]}"  # unique across kernels and sessions
    ir_rows, used = _ir_rows(k, anchor, rename)
    src_rows = _source_rows(k, anchor, used)
    hover = "".join(f"#{anchor}:has(.tl-l{n}:hover) .tl-l{n} {{ background: var(--tl-hover); }}"
                    for n in sorted(used))
    note = _note(k.ir_problem) if k.ir_problem else ""
    return (f"<style>{hover}</style>{note}"
            f'<div class="tl-pair" id="{anchor}">'
            f'<div class="tl-col"><div class="tl-col-head">source · {_esc(rename(k.source_file))}'
            f'</div><pre class="tl-code">' + "\n".join(src_rows) + "</pre></div>"
            f'<div class="tl-col"><div class="tl-col-head">Tile IR · {_esc(k.arch)} · each op '
            f'linked to its source line</div><pre class="tl-code">' + "\n".join(ir_rows)
            + "</pre></div></div>")


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


def _ptx(art: Any) -> str:
    return _listing(art.ptx, "ptx") if art.ptx else _note("The cubin carries no PTX.")


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
    return _listing(sass_text(k, rename), "sass")


def _resources(art: Any) -> str:
    res = art.resources
    rows = "".join(f"<tr><th>{_esc(str(key))}</th><td>{_esc(str(value))}</td></tr>"
                   for key, value in res.as_dict().items() if value is not None)
    stages = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in art.timings.items())
    hit = " (disk cache hit)" if art.cache_hit else ""
    return (f'<pre class="tl-code">{_esc(str(res))}</pre>'
            f'<table class="tl-table"><tbody>{rows}</tbody></table>'
            + _note(f"compile{hit}: {stages}") + _note(f"toolchain: {art.toolchain}"))


def remarks_text(k: KernelReport, rename: Callable[[str], str]) -> str:
    """tileiras' remarks of a kernel, one per line, cell files named as IPython names them.

    Example:
        >>> remarks_text(KernelReport("k", "", "sm_90"), str)
        '(no remarks)'
    """
    from tilelab.compiler.remarks import format_remarks

    text = format_remarks(k.remarks, full_paths=True)
    return text.replace(k.source_file, rename(k.source_file)) if k.source_file else text


def _image(png: bytes, caption: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (f'<figure class="tl-figure"><img alt="{_esc(caption)}" '
            f'src="data:image/png;base64,{data}"/><figcaption>{_esc(caption)}</figcaption>'
            "</figure>")


def _ownership(k: KernelReport) -> str:
    parts = [_note(k.ownership_note)] if k.ownership_note else []
    parts += [_image(img.png, img.caption) for img in k.ownership]
    if not parts:
        parts.append(_note("No ownership diagram: the kernel did not run in this cell."))
    return "".join(parts)


def _roofline(report: CellReport) -> str:
    parts = []
    if report.roofline is not None:
        parts.append(_image(report.roofline.png, report.roofline.caption))
    if report.roofline_note:
        parts.append(_note(report.roofline_note))
    rows = []
    for l in report.launches:
        m = l.measurement
        if m.point is None:
            continue
        p = m.point
        perf = p.achieved_flops
        rows.append(f"<tr><td><code>{_esc(l.name)}</code></td><td>{_esc(l.description)}</td>"
                    f"<td>{p.intensity:.4g}</td><td>{'' if perf is None else f'{perf / 1e12:.4g}'}"
                    f"</td><td>{_esc(p.precision)}</td><td>{_esc(m.describe_time())}</td></tr>")
    if rows:
        parts.append('<table class="tl-table"><thead><tr><th>kernel</th><th>launch</th>'
                     "<th>FLOP/B</th><th>TFLOP/s</th><th>precision</th><th>time</th></tr>"
                     "</thead><tbody>" + "".join(rows) + "</tbody></table>")
    gpus = ", ".join(report.roofline_gpus)
    parts.append(_note(f"Ceilings: {gpus} (dense). Work is counted by the CPU interpreter "
                       "(bytes each block moved, FLOPs it executed); times are measured on "
                       "a GPU, else predicted as lower bounds from the ceilings."))
    return "".join(parts)


def _timings(report: CellReport) -> tuple[str, str]:
    frame = timings_frame(report)
    if frame.empty:
        return _note("Nothing was compiled or launched."), "(nothing compiled or launched)"
    table = frame.to_html(index=False, na_rep="—", border=0, classes="tl-table",
                          float_format=lambda v: f"{v:.4g}")
    return table, frame.to_string(index=False, na_rep="-", float_format=lambda v: f"{v:.4g}")


def build_panels(report: CellReport) -> list[Panel]:
    """One :class:`Panel` per view of ``report.views``, in :data:`VIEWS` order.

    Example:
        >>> from tilelab.lab.report import CellReport
        >>> build_panels(CellReport(views=("timings",)))[0].text
        '(nothing compiled or launched)'
    """
    rn = report.rename
    out = []
    for key in VIEWS:
        if key not in report.views:
            continue
        title = TITLES[key]
        if key == "tileir":
            body = _sections(report, lambda k: _tileir_section(k, rn))
            text = "\n\n".join(f"{k.title}\n{_tileir_text(k)}" for k in report.kernels)
        elif key == "lowered":
            body = _sections(report, _lowered)
            text = "\n\n".join(f"{k.title}\n{k.lowered_source or k.error}"
                               for k in report.kernels)
        elif key == "ptx":
            body = _sections(report, lambda k: _artifact(k, _ptx))
            text = "\n\n".join(f"{k.title}\n{k.artifacts.ptx if k.artifacts else k.error}"
                               for k in report.kernels)
        elif key == "sass":
            body = _sections(report, lambda k: _artifact(k, lambda _a: _sass(k, rn)))
            text = "\n\n".join(f"{k.title}\n{k.error or sass_text(k, rn) or k.sass_unavailable}"
                                for k in report.kernels)
        elif key == "resources":
            body = _sections(report, lambda k: _artifact(k, _resources))
            text = "\n\n".join(str(k.artifacts.resources) if k.artifacts else
                               f"{k.title}\n{k.error}" for k in report.kernels)
        elif key == "remarks":
            body = _sections(report, lambda k: _artifact(
                k, lambda _a: f'<pre class="tl-code">{_esc(remarks_text(k, rn))}</pre>'))
            text = "\n\n".join(f"{k.title}\n" + (k.error or remarks_text(k, rn))
                               for k in report.kernels)
        elif key == "ownership":
            body = _sections(report, _ownership)
            text = "\n".join(f"{k.title}: " + ("; ".join(i.caption for i in k.ownership)
                                               or k.ownership_note or "no diagram")
                             for k in report.kernels)
        elif key == "roofline":
            body = _roofline(report)
            text = "\n".join(p.describe() for p in report.points) or (
                report.roofline_note or "no roofline points")
        else:
            body, text = _timings(report)
        out.append(Panel(key, title, body, text))
    return out
