"""Source-linked listings: the kernel's source beside its Tile IR, PTX or SASS, both ways.

Why: a listing teaches when each line says which source line made it. The Tile IR carries
debug locations (:mod:`tilelab.lab.report.debuginfo`), SASS carries
``//## File "...", line N`` comments and PTX carries ``.loc`` directives when the
compiler emits them (read by :mod:`tilelab.lab.views.listings`); each becomes a list of
:class:`~tilelab.lab.report.debuginfo.IRLine`, shown beside the source with one colour per
source line, links from the listing to the source line and hover highlighting across both
columns. A source line's partners may be many and far away (an ``ct.mma`` makes dozens of
SASS instructions), so hovering it shows how many there are and a link to the first, and
each partner links to the next. Only lines of the kernel and its helpers are linked (line
information that names host code is shown unlinked, saying so). Set-up (argument
assumptions, grid-dependency control, section headers, parameter declarations) is folded
into a collapsed ``<details>`` block that names what it holds; Tile IR rows carry what
their op does in the tooltip; mangled names are shortened (``add_Kt1_A1f32_1i…p16_I256``)
with the full line in the row's tooltip. The source column is as wide as its code (at most
half the view), so the listing gets the rest.

Example:
    >>> from types import SimpleNamespace as NS
    >>> k = NS(source_file="c", source_first_line=1, source_lines=("x = 1\\n",), arch="sm_90")
    >>> page = linked_section(k, [IRLine("%0 = addf %a, %b", "c", 1, 0)], str)
    >>> "1 Tile IR line" in page and "addf: element-wise addition" in page
    True
"""
from __future__ import annotations

import html
import linecache
import uuid
from typing import Any, Callable, Sequence

from tilelab.lab.report.debuginfo import IRLine
from tilelab.lab.views.highlight import highlight_lines
from tilelab.lab.views.listings import (device_lines, fold_label, is_boilerplate, ptx_lines,
                                        sass_lines, short_file, shorten)
from tilelab.lab.views.tileir_ops import AUX_OPS, describe_op, op_name

__all__ = ["shorten", "is_boilerplate", "sass_lines", "ptx_lines", "device_lines",
           "linked_section", "folded_listing", "band"]

_FOLD_MIN = 4
_MAX_SOURCE_SHARE = "50%"   # the source column's widest, beside a listing


def band(line: int) -> str:
    """A colour per source line, shared by both columns of a linked listing.

    Example:
        >>> band(3)
        'hsl(141, 65%, 52%)'
    """
    return f"hsl({(line * 47) % 360}, 65%, 52%)"


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _title(lines: Sequence[str]) -> str:
    """A tooltip of several lines, as one line of HTML (``&#10;`` breaks it), so every
    listing row stays one line of the page."""
    return html.escape("\n".join(lines), quote=True).replace("\n", "&#10;")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


def _highlighted(lines: Sequence[IRLine], kind: str) -> list[str]:
    """Highlighted, shortened text per line; the ``…`` of a shortened name is dimmed
    (a lexer may call it an error token)."""
    hl = highlight_lines("\n".join(shorten(l.text) for l in lines), kind)
    return [h.replace('<span class="tl-e">…</span>', '<span class="tl-dim">…</span>')
            for h in hl]


def _folded(lines: Sequence[IRLine], kind: str) -> list[bool]:
    """Which lines fall in a run of at least :data:`_FOLD_MIN` set-up lines (blank lines
    continue a run)."""
    out = [False] * len(lines)
    run: list[int] = []

    def flush() -> None:
        if len(run) >= _FOLD_MIN:
            for i in run:
                out[i] = True
        run.clear()

    for i, line in enumerate(lines):
        if fold_label(kind, line.text) is not None or (run and not line.text.strip()):
            run.append(i)
        else:
            flush()
    flush()
    return out


class _Listing:
    """The rows of one listing and what the source column needs to know of them."""

    def __init__(self, k: Any, lines: Sequence[IRLine], kind: str, title: str, anchor: str,
                 rename: Callable[[str], str], device: set[int] | None) -> None:
        self.k, self.lines, self.kind, self.title = k, lines, kind, title
        self.anchor, self.rename, self.device = anchor, rename, device
        self.folded = _folded(lines, kind)
        src = getattr(k, "source_file", None)
        self.linked = [l.line is not None and src is not None and l.filename == src and
                       (device is None or l.line in device) for l in lines]
        self.host = sum(1 for l, ok in zip(lines, self.linked)
                        if not ok and l.line is not None and src and l.filename == src)
        self.total: dict[int, int] = {}            # source line -> partner rows
        self.visible: dict[int, list[int]] = {}    # source line -> unfolded partner rows
        for i, (l, ok) in enumerate(zip(lines, self.linked)):
            if ok:
                self.total[l.line] = self.total.get(l.line, 0) + 1
                if not self.folded[i]:
                    self.visible.setdefault(l.line, []).append(i)
        self.step = {i: (n, s) for n, rows in self.visible.items()
                     for s, i in enumerate(rows)}

    def pid(self, line: int, step: int) -> str:
        return f"{self.anchor}-p{line}-{step}"

    # ------------------------------------------------------------------ rows
    def _tip(self, line: IRLine) -> list[str]:
        tip = [line.text.strip()] if shorten(line.text) != line.text else []
        if self.kind == "tileir":
            what = describe_op(line.text)
            if what:
                tip.append(what)
        return tip

    def row(self, i: int, code: str) -> str:
        line = self.lines[i]
        tip = self._tip(line)
        aux = self.kind == "tileir" and op_name(line.text) in AUX_OPS
        cls = "tl-row tl-aux" if aux else "tl-row"
        if line.line is None:
            title = f' title="{_title(tip)}"' if tip else ""
            gutter = '<span class="tl-ln"></span> ' if self.k is not None else ""
            return f'<span class="{cls}"{title}>{gutter}{code}</span>'
        if not self.linked[i]:
            return self._unlinked(line, code, cls, tip)
        n = line.line
        tip.append(f"{self.rename(line.filename)}, line {n}, column {line.col}")
        ident, badge = "", ""
        if i in self.step:
            _, s = self.step[i]
            rows = self.visible[n]
            ident = f' id="{self.pid(n, s)}"'
            if len(rows) > 1:
                last = s + 1 == len(rows)
                target = self.pid(n, 0 if last else s + 1)
                word = "↑ first" if last else "next ↓"
                badge = (f'<a class="tl-jump" href="#{target}">{s + 1}/{len(rows)} '
                         f"{word}</a>")
        return (f'<span class="{cls} tl-l{n}"{ident} style="border-left-color: {band(n)}" '
                f'title="{_title(tip)}">'
                f'<a class="tl-ln" href="#{self.anchor}-L{n}">{n}</a> {code}{badge}</span>')

    def _unlinked(self, line: IRLine, code: str, cls: str, tip: list[str]) -> str:
        name = self.rename(line.filename or "")
        if line.filename == getattr(self.k, "source_file", None):
            tip.append(f"the line information names {name}, line {line.line}: host code, "
                       "not the kernel or a helper it calls (instructions the compiler "
                       "made for the kernel as a whole), so it is not linked")
            return (f'<span class="{cls}" title="{_title(tip)}">'
                    f'<span class="tl-ln">·</span> {code}</span>')
        where = f"{short_file(name)}:{line.line}"
        tip.append(f"{name}, line {line.line}")
        return (f'<span class="{cls}" title="{_title(tip)}"><span class="tl-ln '
                f'tl-ln-wide">{_esc(where)}</span> {code}</span>')

    def rows(self) -> tuple[list[str], int]:
        """The rows, runs of set-up folded into ``<details>``; how many were folded."""
        out: list[str] = []
        run: list[int] = []
        folded = 0
        hl = _highlighted(self.lines, self.kind)

        def flush() -> None:
            nonlocal folded
            if not run:
                return
            folded += len(run)
            labels = [fold_label(self.kind, self.lines[i].text) for i in run]
            what = ", ".join(dict.fromkeys(x for x in labels if x))
            out.append(f'<details class="tl-fold"><summary>⋯ {len(run)} set-up lines'
                       f"{f' ({what})' if what else ''}: show</summary>"
                       + "\n".join(self.row(i, hl[i]) for i in run) + "</details>")
            run.clear()

        for i in range(len(self.lines)):
            if self.folded[i]:
                run.append(i)
            else:
                flush()
                out.append(self.row(i, hl[i]))
        flush()
        return out, folded

    # ------------------------------------------------------------------ source side
    def badge(self, n: int) -> str:
        total = self.total.get(n, 0)
        if not total:
            return ""
        text = f"{total} {self.title} line{'s' * (total != 1)}"
        hidden = total - len(self.visible.get(n, ()))
        if hidden:
            text += f" ({hidden} folded)"
        if n not in self.visible:
            return f'<span class="tl-jump">{_esc(text)}</span>'
        return f'<a class="tl-jump" href="#{self.pid(n, 0)}">{_esc(text)} — first ↓</a>'


def _source_rows(k: Any, listing: _Listing) -> tuple[list[str], int]:
    """The source column's rows (the kernel, then lines of helpers the listing names,
    after a ``⋮``) and the widest line in characters."""
    block = range(k.source_first_line, k.source_first_line + len(k.source_lines))
    used = set(listing.total)
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
        style = f' style="border-left-color: {band(n)}"' if n in used else ""
        rows.append(f'<span class="tl-row tl-l{n}" id="{listing.anchor}-L{n}"{style}>'
                    f'<span class="tl-ln">{n}</span> {code}{listing.badge(n)}</span>')
        previous = n
    width = max((len(texts[n].expandtabs()) for n in shown), default=0)
    return rows, width


def linked_section(k: Any, lines: Sequence[IRLine], rename: Callable[[str], str], *,
                   kind: str = "tileir", title: str = "Tile IR", note: str = "",
                   device: set[int] | None = None) -> str:
    """The source beside a located listing (``lines``), linked both ways: a coloured bar
    per source line on both sides, listing line numbers link to the source line, hovering
    a line highlights its partners, and hovering a source line shows how many partners it
    has with a link to the first (each partner links to the next); set-up folded, long
    names shortened, Tile IR ops explained in their tooltips.

    ``device`` (see :func:`~tilelab.lab.views.listings.device_lines`) is the set of lines
    of the kernel's file that may be linked; lines naming others are shown unlinked.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> k = NS(source_file="c", source_first_line=1, source_lines=("x = 1\\n",), arch="sm_90")
        >>> html_ = linked_section(k, [IRLine("%0 = addf %a, %b", "c", 1, 0)], str)
        >>> 'href="#' in html_ and "tl-l1" in html_
        True
    """
    anchor = f"tl{uuid.uuid4().hex[:12]}"  # unique across kernels and sessions
    listing = _Listing(k, lines, kind, title, anchor, rename, device)
    rows, folded = listing.rows()
    src_rows, width = _source_rows(k, listing)
    hover = "".join(f"#{anchor}:has(.tl-l{n}:hover) .tl-l{n} {{ background: var(--tl-hover); }}"
                    for n in sorted(listing.total))
    head = ["each line linked to its source line"]
    if folded:
        head.append(f"{folded} set-up lines folded; long names shortened (hover a line for "
                    "its full text)")
    if listing.host:
        head.append(f"{_plural(listing.host, 'line')} whose line information names host "
                    "code, not linked (·)")
    return (f"<style>{hover}</style>{note}"
            f'<div class="tl-pair-box"><div class="tl-pair" id="{anchor}">'
            f'<div class="tl-col tl-col-src" style="--tl-src-ch: {width}">'
            f'<div class="tl-col-head">source · {_esc(rename(k.source_file))} · hover a '
            f'line for its {_esc(title)} lines</div><pre class="tl-code">'
            + "\n".join(src_rows) + "</pre></div>"
            f'<div class="tl-col tl-col-ir"><div class="tl-col-head">{_esc(title)} · '
            f'{_esc(k.arch)} · {_esc(" · ".join(head))}</div><pre class="tl-code">'
            + "\n".join(rows) + "</pre></div></div></div>")


def folded_listing(lines: Sequence[IRLine] | str, kind: str) -> str:
    """A listing without line information (PTX without ``.loc``), set-up folded and long
    names shortened like a linked one, each shortened row's full text in its tooltip.

    Example:
        >>> page = folded_listing(".version 9.4\\n.target sm_90a\\n.address_size 64\\n"
        ...                       ".param .u32 p_1,\\n{\\nret;", "ptx")
        >>> "⋯ 5 set-up lines (module header, parameters)" in page
        True
    """
    if isinstance(lines, str):
        lines = [IRLine(t, None, None, None) for t in lines.splitlines()]
    listing = _Listing(None, lines, kind, kind, "", str, None)
    rows, _ = listing.rows()
    return '<pre class="tl-code">' + "\n".join(rows) + "</pre>"
