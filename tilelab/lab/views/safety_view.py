"""The Safety tab: every memory access of a kernel's source, marked with why it is safe.

Why: "why should I trust this kernel?" has an answer for each access, and the answer is
the one the checker gave when it accepted the kernel. So the tab shows records, never a
second analysis: the safety checker's :class:`~tilelab.compiler.safety.AccessRecord` s
(``Artifacts.accesses``: where each access is written, its kind, the checker's reason)
and the Tile IR validator's :class:`~tilelab.compiler.tileir.OpVerdict` s
(``Artifacts.validation.verdicts``: each memory op of the compiled code, accepted and
why, at the source position it maps to). An op is linked to the innermost recorded
access whose span holds its position.

The source is shown as in the Source ↔ Tile IR tab, with each access underlined and
tinted by kind (in the ``%%cython -a`` spirit), beside the memory ops of the Tile IR with
the validator's verdict; a legend counts the accesses per kind and a table gives each
access's reason and its ops. Lines are linked like :mod:`tilelab.lab.views.linked`: the
same colour bar per source line, gutters link to the source line, hovering a line
highlights its accesses and ops everywhere. Colours are translucent tints and mid-tone
underlines that read on light and dark pages alike; text keeps the theme's colour.

Example:
    >>> "tl-acc-unsafe" in CSS and len(KINDS) == 6
    True
"""
from __future__ import annotations

import html
import linecache
import re
import uuid
from collections import Counter
from pathlib import PurePath
from typing import Any, Callable, Sequence

from tilelab.compiler.safety.accesses import AccessKind, AccessRecord
from tilelab.lab.views.highlight import highlight_lines
from tilelab.lab.views.linked import band, shorten

__all__ = ["KINDS", "CSS", "link_verdicts", "mark_line", "safety_section", "safety_text"]

#: the kinds in legend order (stores, the own tile, proofs, checks, opt-outs)
KINDS = tuple(AccessKind)

#: (underline, tint) of each kind: mid tones that read on white and on near-black
_COLOURS = {
    AccessKind.OWN_STORE: ("#2da44e", "rgba(45, 164, 78, .18)"),
    AccessKind.OWN_LOAD: ("#1b9aaa", "rgba(27, 154, 170, .18)"),
    AccessKind.LAUNCH_PROVEN: ("#3e7bd6", "rgba(62, 123, 214, .18)"),
    AccessKind.BOUNDS_CHECKED: ("#8957e5", "rgba(137, 87, 229, .18)"),
    AccessKind.MASKED_GATHER: ("#c98a00", "rgba(201, 138, 0, .20)"),
    AccessKind.UNSAFE: ("#e5484d", "rgba(229, 72, 77, .24)"),
}

CSS = "".join(
    f".tilelab-view .tl-acc-{k.value} {{ --tl-acc: {line}; --tl-acc-bg: {tint}; }}\n"
    for k, (line, tint) in _COLOURS.items()) + """
.tilelab-view .tl-safety-pair { display: grid; gap: 8px; margin: 4px 0;
  grid-template-columns: repeat(auto-fit, minmax(min(100%, 380px), 1fr)); }
.tilelab-view .tl-safety-pair > .tl-col { min-width: 0; }
.tilelab-view .tl-acc { background: var(--tl-acc-bg); border-bottom: 2px solid var(--tl-acc);
  padding-bottom: 2px; border-radius: 2px 2px 0 0; }
.tilelab-view .tl-acc .tl-acc { padding-bottom: 0; }
.tilelab-view .tl-safety-legend { display: flex; flex-wrap: wrap; gap: 4px 14px;
  margin: 6px 0; font-size: 12px; }
.tilelab-view .tl-key { white-space: nowrap; }
.tilelab-view .tl-key.tl-zero { color: var(--tl-dim); }
.tilelab-view .tl-swatch { display: inline-block; width: 1.6em; height: .95em;
  vertical-align: -2px; margin-right: 4px; background: var(--tl-acc-bg);
  border-bottom: 2px solid var(--tl-acc); }
.tilelab-view .tl-verdict { font-weight: 600; }
.tilelab-view .tl-ok { color: var(--jp-success-color1, #2da44e); }
.tilelab-view .tl-refused { color: var(--jp-error-color1, #e5484d); }
.tilelab-view table.tl-safety td, .tilelab-view table.tl-safety th { text-align: left;
  vertical-align: top; }
.tilelab-view table.tl-safety td.tl-wrap { overflow-wrap: anywhere; min-width: 14em; }
.tilelab-view table.tl-safety code { white-space: pre-wrap; overflow-wrap: anywhere; }
.tilelab-view table.tl-safety .tl-op + .tl-op { margin-top: 4px; }
"""
"""The Safety tab's CSS (kind colours, legend, table); :mod:`tabs` adds it to the page."""

_TOKEN = re.compile(r'<span class="([^"]*)">([^<]*)</span>|([^<]+)')


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


# ----------------------------------------------------------------- records and ops

def link_verdicts(records: Sequence[AccessRecord], verdicts: Sequence[Any]
                  ) -> tuple[dict[int, list[Any]], list[Any]]:
    """Each record's validator verdicts (by record index) and the verdicts no record
    holds: an op belongs to the innermost recorded access whose span holds the source
    position it maps to.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> r = AccessRecord(AccessKind.OWN_LOAD, "p.load", ("p",), False, "", "c", 2, 5,
        ...                  2, 13, "p.load()", "k")
        >>> v = NS(location=NS(filename="c", line=2, col=5))
        >>> link_verdicts([r], [v, NS(location=None)])[0][0] == [v]
        True
    """
    linked: dict[int, list[Any]] = {}
    loose = []
    for v in verdicts:
        loc = getattr(v, "location", None)
        holders = [i for i, r in enumerate(records) if loc is not None
                   and r.filename == loc.filename and r.contains(loc.line, loc.col)]
        if not holders:
            loose.append(v)
            continue
        inner = max(holders, key=lambda i: (records[i].line, records[i].col,
                                            -records[i].end_line, -records[i].end_col))
        linked.setdefault(inner, []).append(v)
    return linked, loose


def _ranges(records: Sequence[AccessRecord], filename: str, line: int, text: str
            ) -> list[tuple[int, int, int]]:
    """(start, end, record index) of the marks on one source line (0-based columns)."""
    out = []
    indent = len(text) - len(text.lstrip())
    for i, r in enumerate(records):
        if r.filename != filename or not r.line <= line <= r.end_line:
            continue
        start = r.col - 1 if line == r.line else indent
        end = r.end_col - 1 if line == r.end_line else len(text)
        if end > start:
            out.append((start, end, i))
    return out


def mark_line(highlighted: str, marks: Sequence[tuple[int, int, str, str]]) -> str:
    """A highlighted line (:func:`~tilelab.lab.views.highlight.highlight_lines`) with
    ``<span class="CLASS" title="TITLE">`` around each (start, end, class, title) range
    of characters; ranges nest (AST spans do), token spans are split to stay balanced.

    Example:
        >>> mark_line('<span class="tl-k">return</span> x', [(7, 8, "m", "t")])
        '<span class="tl-k">return</span> <span class="m" title="t">x</span>'
    """
    if not marks:
        return highlighted
    ordered = sorted(marks, key=lambda m: (m[0], -m[1]))
    opens: dict[int, list[str]] = {}
    closes: Counter = Counter()
    for start, end, cls, title in ordered:
        opens.setdefault(start, []).append(f'<span class="{cls}" title="{_esc(title)}">')
        closes[end] += 1
    bounds = sorted(set(opens) | set(closes))
    out: list[str] = []
    pos, b = 0, 0

    def boundary(at: int) -> None:
        out.append("</span>" * closes.pop(at, 0))
        out.extend(opens.pop(at, ()))

    for m in _TOKEN.finditer(highlighted):
        cls, text = (m.group(1), m.group(2)) if m.group(3) is None else (None, m.group(3))
        text = html.unescape(text)
        i = 0
        while i < len(text):
            while b < len(bounds) and bounds[b] <= pos + i:
                boundary(bounds[b])
                b += 1
            stop = bounds[b] - pos if b < len(bounds) else len(text)
            chunk = text[i:min(len(text), stop)]
            out.append(f'<span class="{cls}">{_esc(chunk)}</span>' if cls else _esc(chunk))
            i += len(chunk)
        pos += len(text)
    for at in bounds[b:]:
        boundary(at)
    return "".join(out)


# ----------------------------------------------------------------- the columns

def _source_rows(k: Any, records: Sequence[AccessRecord], anchor: str, used: set[int]
                 ) -> list[str]:
    """The kernel's lines (and other lines of its file holding accesses or ops), each
    access marked by kind."""
    block = range(k.source_first_line, k.source_first_line + len(k.source_lines))
    shown = sorted(set(block) | used)
    rows, previous = [], None
    for n in shown:
        if n in block:
            text = k.source_lines[n - k.source_first_line].rstrip("\n")
        else:
            text = linecache.getline(k.source_file, n).rstrip("\n")
        if previous is not None and n != previous + 1:
            rows.append('<span class="tl-row tl-gap">⋮</span>')
        marks = [(s, e, f"tl-acc tl-acc-{records[i].kind.value}",
                  f"{records[i].kind.label}: {records[i].reason}")
                 for s, e, i in _ranges(records, k.source_file, n, text)]
        hl = highlight_lines(text, "python")
        code = mark_line(hl[0] if hl else "", marks)
        style = f' style="border-left-color: {band(n)}"' if n in used else ""
        rows.append(f'<span class="tl-row tl-l{n}" id="{anchor}-L{n}"{style}>'
                    f'<span class="tl-ln">{n}</span> {code}</span>')
        previous = n
    return rows


def _verdict_mark(v: Any) -> str:
    if v.accepted:
        return '<span class="tl-verdict tl-ok" title="accepted">✓</span>'
    return '<span class="tl-verdict tl-refused" title="refused">✗</span>'


def _gutter(k: Any, loc: Any, anchor: str, rename: Callable[[str], str]) -> tuple[str, str]:
    """(row class, gutter HTML) of a position: a link to the source line, else its
    ``file:line``."""
    if loc is None:
        return "", '<span class="tl-ln"></span>'
    if loc.filename == k.source_file:
        return (f" tl-l{loc.line}",
                f'<a class="tl-ln" href="#{anchor}-L{loc.line}">{loc.line}</a>')
    where = f"{PurePath(rename(loc.filename)).name}:{loc.line}"
    return "", f'<span class="tl-ln tl-ln-wide">{_esc(where)}</span>'


def _op_rows(k: Any, verdicts: Sequence[Any], anchor: str,
             rename: Callable[[str], str]) -> list[str]:
    """The validated memory ops: verdict, IR line and op text, linked to their line."""
    texts = highlight_lines("\n".join(shorten(v.text) for v in verdicts), "tileir")
    rows = []
    for v, code in zip(verdicts, texts):
        cls, gutter = _gutter(k, v.location, anchor, rename)
        style = f' style="border-left-color: {band(v.location.line)}"' if cls else ""
        tip = f"{v.verdict}: {v.reason} · {v.text}"
        rows.append(f'<span class="tl-row{cls}"{style} title="{_esc(tip)}">{gutter} '
                    f'{_verdict_mark(v)} <span class="tl-dim">IR {v.line}</span> '
                    f"{code}</span>")
    return rows


# ----------------------------------------------------------------- legend and table

def _legend(records: Sequence[AccessRecord], validation: Any) -> str:
    counts = Counter(r.kind for r in records)
    keys = "".join(
        f'<span class="tl-key tl-acc-{kind.value}{" tl-zero" * (not counts[kind])}" '
        f'title="{_esc(kind.meaning)}"><span class="tl-swatch"></span>{_esc(kind.label)} '
        f"<b>{counts[kind]}</b></span>" for kind in KINDS)
    return f'<div class="tl-safety-legend">{keys}</div>' + _validator_note(validation)


def _validator_note(validation: Any) -> str:
    if validation is None:
        return ('<p class="tl-note">Tile IR validator: not run. An @tl.kernel(unsafe=True) '
                "kernel is compiled without the check, so its memory ops carry no "
                "verdict.</p>")
    vs = validation.verdicts
    ok = sum(v.accepted for v in vs)
    kinds = Counter(v.access for v in vs)
    what = ", ".join(f"{n} {a}{'s' * (n != 1)}" for a, n in sorted(kinds.items()))
    return (f'<p class="tl-note">Tile IR validator: {len(vs)} memory op'
            f"{'s' * (len(vs) != 1)}, {ok} accepted" + (f" ({_esc(what)})" if what else "")
            + f"; {validation.ops} ops in all, every other one on its list of ops that "
            "touch no memory.</p>")


def _op_cell(ops: Sequence[Any]) -> str:
    """The verdicts of one access's ops; a write's (or a refusal's) reason is spelled
    out, a read's is its tooltip."""
    if not ops:
        return '<span class="tl-dim">no memory op of its own in the Tile IR</span>'
    return "".join(
        f'<div class="tl-op" title="{_esc(v.reason)}">{_verdict_mark(v)} {v.verdict} · '
        f"IR {v.line} <code>{_esc(v.op)}</code>: {_esc(v.access)}"
        + (f" of <code>{_esc(v.param)}</code>" if v.param else "")
        + (f'<br><span class="tl-dim">{_esc(v.reason)}</span>'
           if v.writes or not v.accepted else "") + "</div>" for v in ops)


def _table(k: Any, records: Sequence[AccessRecord], linked: dict[int, list[Any]],
           validation: Any, anchor: str, rename: Callable[[str], str]) -> str:
    rows = []
    for i, r in enumerate(records):
        cls, gutter = _gutter(k, r, anchor, rename)
        text = r.text if len(r.text) <= 60 else r.text[:59] + "…"
        ops = _op_cell(linked.get(i, ())) if validation is not None else \
            '<span class="tl-dim">not validated (unsafe=True)</span>'
        helper = (f'<br><span class="tl-dim">in helper {_esc(r.function)}()</span>'
                  if r.function != k.name else "")
        rows.append(f'<tr class="tl-acc-row{cls}"><td>{gutter}</td>'
                    f'<td class="tl-wrap"><code title="{_esc(r.text)}">{_esc(text)}</code>'
                    f'{helper}</td><td><span class="tl-key tl-acc-{r.kind.value}">'
                    f'<span class="tl-swatch"></span>{_esc(r.kind.label)}</span></td>'
                    f'<td class="tl-wrap">{_esc(r.reason)}</td>'
                    f'<td class="tl-wrap">{ops}</td></tr>')
    return ('<table class="tl-table tl-safety"><thead><tr><th>line</th><th>access</th>'
            "<th>kind</th><th>why (the checker's record)</th><th>Tile IR ops (validator)</th>"
            "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def safety_section(k: Any, rename: Callable[[str], str]) -> str:
    """The Safety tab of one compiled kernel (``k``: a
    :class:`~tilelab.lab.report.cell_report.KernelReport` with artifacts)."""
    art = k.artifacts
    records = tuple(getattr(art, "accesses", ()))
    validation = getattr(art, "validation", None)
    verdicts = list(validation.verdicts) if validation is not None else []
    linked, loose = link_verdicts(records, verdicts)
    anchor = f"tl{uuid.uuid4().hex[:12]}"
    used = {r.line for r in records if r.filename == k.source_file}
    used |= {v.location.line for v in verdicts
             if v.location is not None and v.location.filename == k.source_file}
    ir_rows = _op_rows(k, verdicts, anchor, rename) or [
        '<span class="tl-row tl-dim">' + ("(no memory op in the Tile IR)" if validation
                                          is not None else "(not validated: "
                                          "@tl.kernel(unsafe=True))") + "</span>"]
    hover = "".join(f"#{anchor}:has(.tl-l{n}:hover) .tl-l{n} {{ background: var(--tl-hover); }}"
                    for n in sorted(used))
    notes = ""
    if loose:
        notes = (f'<p class="tl-note">{len(loose)} memory op{"s" * (len(loose) != 1)} '
                 "of the Tile IR map to no recorded access (its position lies outside the "
                 "checked source).</p>")
    if not records:
        notes += '<p class="tl-note">The checker recorded no memory access.</p>'
    return (f"<style>{hover}</style>"
            '<p class="tl-note">Why each memory access is safe, as the safety checker '
            "recorded it when it accepted the kernel, beside the Tile IR validator's "
            "verdict on each memory op of the compiled code. Hover a mark for its reason, "
            "a line to see its ops.</p>"
            + _legend(records, validation) + notes +
            f'<div id="{anchor}"><div class="tl-safety-pair">'
            f'<div class="tl-col"><div class="tl-col-head">source · '
            f"{_esc(rename(k.source_file))} · accesses marked by kind</div>"
            '<pre class="tl-code">' + "\n".join(_source_rows(k, records, anchor, used))
            + "</pre></div>"
            f'<div class="tl-col"><div class="tl-col-head">Tile IR memory ops · '
            f"{_esc(k.arch)} · the validator's verdicts"
            '</div><pre class="tl-code">' + "\n".join(ir_rows) + "</pre></div></div>"
            + _table(k, records, linked, validation, anchor, rename) + "</div>")


def safety_text(k: Any, rename: Callable[[str], str]) -> str:
    """The Safety tab as plain text: the counts, then each access with its reason and
    the verdicts of its Tile IR ops.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> print(safety_text(NS(artifacts=NS(accesses=(), validation=None)), str))
        accesses: none recorded
        Tile IR validator: not run (unsafe=True)
    """
    art = k.artifacts
    records = tuple(getattr(art, "accesses", ()))
    validation = getattr(art, "validation", None)
    verdicts = list(validation.verdicts) if validation is not None else []
    linked, _loose = link_verdicts(records, verdicts)
    counts = Counter(r.kind for r in records)
    lines = ["accesses: " + (", ".join(f"{counts[kd]} {kd.label}" for kd in KINDS
                                       if counts[kd]) or "none recorded")]
    for i, r in enumerate(records):
        lines.append(f"  {rename(r.filename)}:{r.line}:{r.col}  {r.kind.label}: {r.text}"
                     f"\n      {r.reason}")
        lines += [f"      Tile IR {v.line} {v.op}: {v.verdict} ({v.access})"
                  for v in linked.get(i, ())]
    if validation is None:
        lines.append("Tile IR validator: not run (unsafe=True)")
    else:
        ok = sum(v.accepted for v in verdicts)
        lines.append(f"Tile IR validator: {len(verdicts)} memory ops, {ok} accepted")
    return "\n".join(lines)
