"""The Race tab: which elements two blocks fought over, drawn as SVG, and each race listed.

Why: a race stops a launch with a :class:`~tilelab.errors.LaunchError` whose message is a
list of races; a picture of the array, every element coloured by what happened to it,
says at a glance which blocks collide and where. Where the tab shows the races, the error
printed beside it names only the first (:func:`race_error_text`), so each race is
printed once. The picture is inline SVG coloured with
the page's ``--tl-*`` variables (see :func:`tilelab.lab.figures.theme.css_variables`), so it
follows a light or dark theme without a re-run. Arrays of rank 3 and more are drawn as one
small grid per leading index, every slice in index order (up to :data:`MAX_SLICES`; the
picture says when it stops); locations are named as cells (``In[3], line 6``).

Example:
    >>> import numpy as np
    >>> svg = categories_svg(np.array([[0, 1, 3, 3]]), "x")
    >>> svg.startswith("<svg") and "var(--tl-race" in svg
    True
"""
from __future__ import annotations

import html
import math
import uuid
from typing import Any, Callable

import numpy as np

from tilelab.lab.figures.theme import css_var

__all__ = ["MAX_SLICES", "categories_svg", "race_rows", "race_panel", "race_error_text"]

#: slices of a rank >= 3 array drawn at most (a note says how many more there are)
MAX_SLICES = 256
_MAX_CELLS = 96                     # per side of one slice; larger arrays are pooled (max)
_FILL = ("empty", "written", "race_read", "race")
_LEGEND = ("not written", "written by one block", "written by one block, read by another",
           "written by ≥ 2 blocks (race)")


def _fill(cat: int) -> str:
    if cat == 1:
        return "var(--tl-written, #8fa9c4)"
    return css_var(_FILL[cat])


def _pool(a: np.ndarray, limit: int) -> tuple[np.ndarray, int, int]:
    """``a`` (2-D) max-pooled to at most ``limit`` cells a side, with the pool factors."""
    fr = max(1, math.ceil(a.shape[0] / limit))
    fc = max(1, math.ceil(a.shape[1] / limit))
    if fr == fc == 1:
        return a, 1, 1
    rows, cols = math.ceil(a.shape[0] / fr), math.ceil(a.shape[1] / fc)
    padded = np.zeros((rows * fr, cols * fc), a.dtype)
    padded[:a.shape[0], :a.shape[1]] = a
    return padded.reshape(rows, fr, cols, fc).max(axis=(1, 3)), fr, fc


def _grid_rects(a: np.ndarray, x0: float, y0: float, cell: float) -> list[str]:
    out = []
    for r, row in enumerate(a):
        c = 0
        while c < len(row):
            end = c
            while end + 1 < len(row) and row[end + 1] == row[c]:
                end += 1
            out.append(f'<rect x="{x0 + c * cell:.1f}" y="{y0 + r * cell:.1f}" '
                       f'width="{(end - c + 1) * cell:.1f}" height="{cell:.1f}" '
                       f'fill="{_fill(int(row[c]))}"/>')
            c = end + 1
    return out


def categories_svg(cats: np.ndarray, name: str) -> str:
    """An SVG of race categories (0 untouched, 1 written once, 2 read-write race, 3
    write-write race) of array ``name``: one grid per leading index for rank >= 3.

    Example:
        >>> import numpy as np
        >>> categories_svg(np.zeros((2, 3, 4, 4), np.int8), "out").count("out[")
        6
    """
    a = np.asarray(cats)
    if a.ndim < 2:
        a = a.reshape(1, -1)
    lead = a.shape[:-2]
    slices = list(np.ndindex(*lead)) if lead else [()]
    shown = slices[:MAX_SLICES]
    pooled = [_pool(a[idx], _MAX_CELLS) for idx in shown]
    rows, cols = pooled[0][0].shape
    cell = max(4.0, min(14.0, 160.0 / max(rows, cols))) if lead else \
        max(3.0, min(14.0, 900.0 / max(cols, 1)))
    w, h = cols * cell, rows * cell
    label_h, gap = 16.0, 10.0
    per_row = max(1, int((1000 + gap) // (w + gap))) if lead else 1
    grid_rows = math.ceil(len(shown) / per_row)
    legend_y = grid_rows * (h + label_h + gap) + 4
    width = max(per_row * (w + gap), 620)
    height = legend_y + 40
    uid = f"tlr{uuid.uuid4().hex[:8]}"
    fg = css_var("foreground")
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" id="{uid}" class="tl-race-svg" '
             f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
             f'role="img" aria-label="race picture of {html.escape(name)}" '
             f'font-family="var(--jp-ui-font-family, sans-serif)" font-size="11">']
    for i, (idx, (p, fr, fc)) in enumerate(zip(shown, pooled)):
        x = (i % per_row) * (w + gap)
        y = (i // per_row) * (h + label_h + gap)
        where = ", ".join([*map(str, idx), ":", ":"]) if lead else ""
        label = f"{name}[{where}]" if lead else \
            f"{name}: {' × '.join(map(str, cats.shape))}"
        if fr > 1 or fc > 1:
            label += f" (1 cell = {fr}×{fc} elements)"
        parts.append(f'<text x="{x:.1f}" y="{y + 12:.1f}" fill="{fg}">{html.escape(label)}</text>')
        parts += _grid_rects(p, x, y + label_h, cell)
        parts.append(f'<rect x="{x:.1f}" y="{y + label_h:.1f}" width="{w:.1f}" height="{h:.1f}" '
                     f'fill="none" stroke="{css_var("muted")}" stroke-width="0.6"/>')
    lx = 0.0
    for cat in (3, 2, 1, 0):
        parts.append(f'<rect x="{lx:.0f}" y="{legend_y:.0f}" width="12" height="12" '
                     f'fill="{_fill(cat)}" stroke="{css_var("muted")}" stroke-width="0.6"/>')
        parts.append(f'<text x="{lx + 16:.0f}" y="{legend_y + 10:.0f}" fill="{fg}">'
                     f"{html.escape(_LEGEND[cat])}</text>")
        lx += 16 + 6.2 * len(_LEGEND[cat]) + 18
    if len(slices) > len(shown):
        parts.append(f'<text x="0" y="{legend_y + 30:.0f}" fill="{fg}">showing the first '
                     f"{len(shown)} of {len(slices)} slices</text>")
    parts.append("</svg>")
    return "".join(parts)


def _where(loc: Any, rename: Callable[[str], str]) -> str:
    if loc is None:
        return "?"
    return f"{rename(loc.filename)}, line {loc.line}"


def _n(count: int) -> str:
    """``1 element``, ``1,024 elements``."""
    return f"{count:,} element{'s' * (count != 1)}"


def race_rows(trace: Any, rename: Callable[[str], str] = str) -> list[dict[str, str]]:
    """One dict per race the trace found: kind, argument, blocks, elements, examples and
    where each access is (``In[3], line 6``).

    Example:
        >>> race_rows(type("T", (), {"races": []})())
        []
    """
    out = []
    for r in trace.races:
        a, b = r.blocks
        ex = ", ".join(f"[{', '.join(map(str, e))}]" for e in r.examples[:3])
        out.append({"kind": r.kind, "argument": r.arg, "blocks": f"{a} and {b}",
                    "elements": str(r.count), "e.g.": ex,
                    "earlier": f"{r.accesses[0]} at {_where(r.locations[0], rename)}",
                    "later": f"{r.accesses[1]} at {_where(r.locations[1], rename)}"})
    return out


def _table(rows: list[dict[str, str]], limit: int) -> str:
    head = ("<tr><th>race</th><th>on</th><th>blocks</th><th>elements</th><th>e.g.</th>"
            "<th>earlier access</th><th>later access</th></tr>")
    body = []
    for row in rows[:limit]:
        body.append("<tr>" + "".join(f'<td class="tl-left">{html.escape(v)}</td>'
                                     for v in row.values()) + "</tr>")
    more = (f'<p class="tl-note">… and {len(rows) - limit} more races</p>'
            if len(rows) > limit else "")
    return f'<table class="tl-table tl-races"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>{more}'


def race_panel(trace: Any, message: str, rename: Callable[[str], str] = str,
               limit: int = 12) -> tuple[str, str]:
    """(HTML, text) of the Race tab: the error's headline, one picture per racing array
    and the table of races.

    Example:
        >>> page, text = race_panel(trace, str(error), rename)     # doctest: +SKIP
        >>> "<svg" in page                                          # doctest: +SKIP
        True
    """
    from tilelab.lab.figures.ownership import race_data

    rows = race_rows(trace, rename)
    headline = message.splitlines()[0] if message else f"{len(rows)} race(s)"
    hint = next((l for l in message.splitlines() if l.startswith("hint:")), "")
    parts = [f'<p><b>{html.escape(headline)}</b></p>']
    if hint:
        parts.append(f'<p class="tl-note">{html.escape(hint)}</p>')
    text = [headline]
    for arg in dict.fromkeys(r.arg for r in trace.races):
        if arg not in trace.args:
            continue
        d = race_data(trace, arg)
        n_ww, n_rw = int(d.write_write.sum()), int(d.read_write.sum())
        caption = (f"{trace.kernel}: {_n(n_ww)} of '{arg}' written by more than one "
                   f"block" + (f", {n_rw:,} read while another block writes them" if n_rw
                               else "") + f"; blocks involved: {len(d.blocks)}")
        parts.append(f'<figure class="tl-figure tl-svg">{categories_svg(d.categories, arg)}'
                     f"<figcaption>{html.escape(caption)}</figcaption></figure>")
        text.append(caption)
    parts.append(_table(rows, limit))
    text += [f"- {r['kind']} on {r['argument']}: blocks {r['blocks']}, "
             f"{_n(int(r['elements']))} ({r['earlier']}; {r['later']})"
             for r in rows[:limit]]
    return "".join(parts), "\n".join(text)


def race_error_text(err: Any, trace: Any, where: str = "above") -> str:
    """The located text of a race error that a Race tab shows ``where`` ("above" or
    "below" the error): the count, the first race, the source line and the hint; the
    list of every race is the tab's.

    Example:
        >>> from tilelab.errors import LaunchError
        >>> T = type("T", (), {"races": [1, 2], "race_report":
        ...          lambda self, limit: "2 race(s) in kernel 'k':\\n  - a\\n  ... and 1 more"})
        >>> print(race_error_text(LaunchError("...", hint="fix it"), T()))
        2 race(s) in kernel 'k' (each drawn and listed in the Race tab above); the first:
          - a
        hint: fix it
    """
    from tilelab.errors import LaunchError

    n = len(trace.races) + getattr(trace, "races_dropped", 0)
    lines = trace.race_report(limit=1).rstrip().splitlines()
    if len(lines) > 2 and lines[-1].lstrip().startswith("..."):   # the tab lists them
        lines.pop()
    head = lines[0].rstrip(":")
    head += (f" (drawn in the Race tab {where}):" if n == 1 else
             f" (each drawn and listed in the Race tab {where}); the first:")
    return str(LaunchError("\n".join([head, *lines[1:]]),
                           location=getattr(err, "location", None),
                           hint=getattr(err, "hint", None)))
