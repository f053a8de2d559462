"""Source-linked listings: the kernel's source beside its Tile IR, PTX or SASS, both ways.

Why: a listing teaches when each line says which source line made it. The Tile IR carries
debug locations (:mod:`tilelab.lab.report.debuginfo`), SASS carries
``//## File "...", line N`` comments (``nvdisasm`` with line info) and PTX carries ``.loc``
directives when the compiler emits them; each becomes a list of
:class:`~tilelab.lab.report.debuginfo.IRLine`, shown beside the source with one colour per
source line, links from the listing to the source line and hover highlighting across both
columns. Boilerplate (argument assumptions, tensor views, section headers, parameter
declarations) is folded into a collapsed ``<details>`` block, and mangled names are
shortened (``add_Kt1_A1f32_1i…p16_I256``) with the full line in the row's tooltip.

Example:
    >>> sass_lines('//## File "cell", line 3\\n  /*0000*/ LDC R1, c[0x0][0x28] ;')[0].line
    3
    >>> shorten("add_Kt1_A1f32_1i16t1_p16_A1f32_1i16t1_p16_I256")
    'add_Kt1_A1f32_1i…p16_I256'
"""
from __future__ import annotations

import html
import linecache
import re
import uuid
from pathlib import PurePath
from typing import Any, Callable, Sequence

from tilelab.lab.report.debuginfo import IRLine
from tilelab.lab.views.highlight import highlight_lines

__all__ = ["shorten", "is_boilerplate", "sass_lines", "ptx_lines", "linked_section", "band"]

_LONG = re.compile(r"[A-Za-z_$][\w$]{27,}")
_SASS_FILE = re.compile(r'^\s*//## File "((?:[^"\\]|\\.)*)", line (\d+)')
_PTX_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"((?:[^"\\]|\\.)*)"')
_PTX_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)")
_BOILER = {
    "tileir": re.compile(r"^\s*(%[\w$.,% ]+ = )?(make_token|assume|constant|make_tensor_view)"
                         r"\b"),
    "sass": re.compile(r"^\s*(\.(target|elftype|section|align|global|type|size|other)\b|"
                       r"//-{5,}|\.?[\w.$]+:\s*$)"),
    "ptx": re.compile(r"^\s*(\.(version|target|address_size|param|reg|visible|reqntid|"
                      r"minnctapersm|maxntid|language|file)\b|ld\.param\b|\)$|\{$)"),
}
_FOLD_MIN = 4


def band(line: int) -> str:
    """A colour per source line, shared by both columns of a linked listing.

    Example:
        >>> band(3)
        'hsl(141, 65%, 52%)'
    """
    return f"hsl({(line * 47) % 360}, 65%, 52%)"


def shorten(text: str, keep: int = 16, tail: int = 8) -> str:
    """``text`` with every identifier of 28 characters or more cut to its first ``keep``
    and last ``tail`` characters around ``…`` (mangled kernel names, parameter names).

    Example:
        >>> shorten("ld.param.b64 %rd7, [gemm_Kt1_A2bf16_A2bf16_A2f32_I64_I64_I32_param_0];")
        'ld.param.b64 %rd7, [gemm_Kt1_A2bf16_…_param_0];'
    """
    return _LONG.sub(lambda m: m.group(0)[:keep] + "…" + m.group(0)[-tail:], text)


def is_boilerplate(kind: str, text: str) -> bool:
    """Whether a listing line is set-up rather than the kernel's work: Tile IR argument
    assumptions, constants and tensor views; SASS section directives; PTX declarations.

    Example:
        >>> is_boilerplate("tileir", "  %assume = assume div_by<16>, %arg0 : tile<ptr<f32>>")
        True
        >>> is_boilerplate("tileir", "  %1 = addf %tile, %tile_20  : tile<256xf32>")
        False
    """
    pattern = _BOILER.get(kind)
    return bool(pattern and pattern.match(text))


def sass_lines(text: str) -> list[IRLine]:
    """SASS lines located by the ``//## File "f", line N`` comments ``nvdisasm`` prints
    before the instructions of each source line (the comments themselves are consumed).

    Example:
        >>> [l.line for l in sass_lines('.text.k:\\n//## File "c", line 4\\n /*0010*/ NOP ;')]
        [None, 4]
    """
    out, where = [], None
    for raw in text.splitlines():
        m = _SASS_FILE.match(raw)
        if m:
            where = (m.group(1), int(m.group(2)))
            continue
        instr = raw.strip().startswith("/*")
        if where is not None and instr:
            out.append(IRLine(raw.rstrip(), where[0], where[1], 0))
        else:
            out.append(IRLine(raw.rstrip(), None, None, None))
    return out


def ptx_lines(text: str, location_map: Any = None) -> tuple[list[IRLine], bool]:
    """PTX lines located by their ``.loc file line col`` directives (``.file`` names the
    files; ``location_map`` maps the lowered source to the user's). Returns the lines and
    whether any line carried a location (tileiras does not always emit ``.loc``).

    Example:
        >>> lines, found = ptx_lines('.file 1 "k.py"\\n.loc 1 7 2\\nadd.f32 %r1, %r2, %r3;')
        >>> found, [(l.text.strip(), l.line) for l in lines if l.line]
        (True, [('add.f32 %r1, %r2, %r3;', 7)])
    """
    files: dict[str, str] = {}
    out, where, found = [], None, False
    for raw in text.splitlines():
        f = _PTX_FILE.match(raw)
        if f:
            files[f.group(1)] = f.group(2)
        m = _PTX_LOC.match(raw)
        if m:
            name = files.get(m.group(1), m.group(1))
            pos = (name, int(m.group(2)), int(m.group(3)))
            mapped = location_map(*pos) if location_map is not None else None
            where = mapped or pos
            continue
        code = raw.strip() and not raw.strip().startswith(("//", "."))
        if where is not None and code:
            found = True
            out.append(IRLine(raw.rstrip(), where[0], int(where[1]), int(where[2])))
        else:
            out.append(IRLine(raw.rstrip(), None, None, None))
    return out, found


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _source_rows(k: Any, anchor: str, used: set[int]) -> list[str]:
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
        style = f' style="border-left-color: {band(n)}"' if n in used else ""
        rows.append(f'<span class="tl-row tl-l{n}" id="{anchor}-L{n}"{style}>'
                    f'<span class="tl-ln">{n}</span> {code}</span>')
        previous = n
    return rows


def _row(k: Any, line: IRLine, code: str, anchor: str, rename: Callable[[str], str],
         used: set[int]) -> str:
    full = f' title="{_esc(line.text.strip())}"' if shorten(line.text) != line.text else ""
    if line.line is None:
        return f'<span class="tl-row"{full}><span class="tl-ln"></span> {code}</span>'
    if line.filename == k.source_file:
        used.add(line.line)
        tip = line.text.strip() + "\n" if full else ""
        return (f'<span class="tl-row tl-l{line.line}" '
                f'style="border-left-color: {band(line.line)}" '
                f'title="{_esc(tip)}{_esc(rename(line.filename))}, line {line.line}, '
                f'column {line.col}">'
                f'<a class="tl-ln" href="#{anchor}-L{line.line}">{line.line}</a> {code}</span>')
    where = f"{PurePath(rename(line.filename or '')).name}:{line.line}"
    return (f'<span class="tl-row" title="{_esc(where)}"><span class="tl-ln tl-ln-wide">'
            f"{_esc(where)}</span> {code}</span>")


def _listing_rows(k: Any, lines: Sequence[IRLine], kind: str, anchor: str,
                  rename: Callable[[str], str]) -> tuple[list[str], set[int], int]:
    """Rows of the listing, runs of boilerplate folded into ``<details>``; the source
    lines used; how many lines were folded."""
    hl = highlight_lines("\n".join(shorten(l.text) for l in lines), kind)
    rows: list[str] = []
    used: set[int] = set()
    run: list[str] = []
    folded = 0

    def flush() -> None:
        nonlocal folded
        if len(run) >= _FOLD_MIN:
            folded += len(run)
            rows.append(f'<details class="tl-fold"><summary>⋯ {len(run)} set-up lines '
                        f"({_FOLD_WHAT[kind]}): show</summary>" + "\n".join(run)
                        + "</details>")
        else:
            rows.extend(run)
        run.clear()

    for line, code in zip(lines, hl):
        r = _row(k, line, code, anchor, rename, used)
        if is_boilerplate(kind, line.text) or (run and not line.text.strip()):
            run.append(r)
        else:
            flush()
            rows.append(r)
    flush()
    return rows, used, folded


_FOLD_WHAT = {"tileir": "argument assumptions, constants, tensor views",
              "sass": "section directives", "ptx": "declarations and parameter loads"}


def linked_section(k: Any, lines: Sequence[IRLine], rename: Callable[[str], str], *,
                   kind: str = "tileir", title: str = "Tile IR", note: str = "") -> str:
    """The source beside a located listing (``lines``), linked both ways: a coloured bar
    per source line on both sides, listing line numbers link to the source line, hovering
    a line highlights its partners; boilerplate folded, long names shortened.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> k = NS(source_file="c", source_first_line=1, source_lines=("x = 1\\n",), arch="sm_90")
        >>> html_ = linked_section(k, [IRLine("%0 = addf %a, %b", "c", 1, 0)], str)
        >>> 'href="#' in html_ and "tl-l1" in html_
        True
    """
    anchor = f"tl{uuid.uuid4().hex[:12]}"  # unique across kernels and sessions
    rows, used, folded = _listing_rows(k, lines, kind, anchor, rename)
    src_rows = _source_rows(k, anchor, used)
    hover = "".join(f"#{anchor}:has(.tl-l{n}:hover) .tl-l{n} {{ background: var(--tl-hover); }}"
                    for n in sorted(used))
    fold_note = (f" · {folded} set-up lines folded; long names shortened (hover a line for "
                 "its full text)") if folded else ""
    return (f"<style>{hover}</style>{note}"
            f'<div class="tl-pair" id="{anchor}">'
            f'<div class="tl-col"><div class="tl-col-head">source · {_esc(rename(k.source_file))}'
            f'</div><pre class="tl-code">' + "\n".join(src_rows) + "</pre></div>"
            f'<div class="tl-col"><div class="tl-col-head">{_esc(title)} · {_esc(k.arch)} · each '
            f'line linked to its source line{_esc(fold_note)}</div><pre class="tl-code">'
            + "\n".join(rows) + "</pre></div></div>")
