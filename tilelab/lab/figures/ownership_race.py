"""Drawing the race pictures as SVG: the elements of an argument several blocks wrote.

Why: a race is a picture — the elements two blocks write (red), or that one block reads
while another writes them (orange) — with the blocks involved and the racing line named.
The counts come from :func:`tilelab.lab.figures.ownership_data.race_data`; the panels are
drawn like the ownership diagrams' read panels (:mod:`tilelab.lab.figures.ownership_svg`).

Example:
    >>> import numpy as np, cuda.tile as ct
    >>> from tilelab.interp import interpret
    >>> @ct.kernel
    ... def same_tile(x, T: ct.Constant[int]):
    ...     ct.store(x, (0,), ct.full((T,), 1.0, ct.float32))
    >>> race_figure(interpret(same_tile, np.zeros(8, np.float32), 4, grid=(2,)), "x",
    ...             theme="light").tilelab["write_write"]
    4
"""
from __future__ import annotations

import os
from typing import Any

from tilelab.errors import SourceLocation, display_filename
from tilelab.lab.figures.ownership_data import _extent, _fmt_dims, block_name, race_data
from tilelab.lab.figures.svg import SvgFigure, color
from tilelab.lab.figures.theme import Theme, get_theme

__all__ = ["race_figure", "race_location"]


_RACE_LEGEND = ("written by ≥ 2 blocks (race)", "written by one block, read by another",
                "written by one block", "not written")


def race_location(loc: SourceLocation) -> str:
    """Where a racing access is, as the race reports say it: a notebook cell as IPython's
    tracebacks do (``In[3], line 5``), a file by its name (``kernels.py:12``).

    Example:
        >>> race_location(SourceLocation("/home/me/kernels.py", 12))
        'kernels.py:12'
    """
    shown = display_filename(loc.filename)
    if shown != loc.filename:
        return f"{shown}, line {loc.line}"
    return f"{os.path.basename(loc.filename)}:{loc.line}"


def _race_title(trace: Any, arg: str, d: Any) -> str:
    n_ww, n_rw = int(d.write_write.sum()), int(d.read_write.sum())
    names = [block_name(trace, b).replace("block ", "") for b in d.blocks[:6]]
    who = ", ".join(names) + (f" and {len(d.blocks) - 6} more" if len(d.blocks) > 6 else "")
    if not (n_ww or n_rw):
        scope = " among the sampled blocks" if getattr(trace, "sampled", False) else ""
        return f"{trace.kernel}: no block writes what another block touches in '{arg}'{scope}"
    title = (f"{trace.kernel}: {n_ww:,} elements of '{arg}' written by more than one block"
             + (f", {n_rw:,} read while another block writes them" if n_rw else "")
             + f"\n{len(d.blocks)} blocks involved: {who}")
    loc = d.races[0].locations[1] if d.races else None
    if loc is not None:
        title += f"\nthe racing access: {race_location(loc)}"
    return title


def race_figure(trace: Any, arg: str, *, theme: "Theme | str | None" = None,
                max_panels: int = 12, max_cells: int = 250_000) -> SvgFigure:
    """The elements of ``arg`` written by more than one block, in red (read by one block
    while another writes them: orange), naming the blocks involved and the racing line.

    Arrays of rank 3 and more become small multiples over their leading indices (slices
    with races first).

    Example:
        >>> import numpy as np, cuda.tile as ct
        >>> from tilelab.interp import interpret
        >>> @ct.kernel
        ... def same_tile(x, T: ct.Constant[int]):
        ...     ct.store(x, (0,), ct.full((T,), 1.0, ct.float32))
        >>> fig = race_figure(interpret(same_tile, np.zeros(8, np.float32), 4, grid=(2,)), "x",
        ...                   theme="light")
        >>> fig.tilelab["sections"][0]["panels"][0]["values"].tolist()
        [[3, 3, 3, 3, 0, 0, 0, 0]]
    """
    t = get_theme(theme)
    d = race_data(trace, arg)
    info = trace.args[arg]
    title = _race_title(trace, arg, d)
    fills = [color("empty"), "hsl(211, 33%, 62%)", color("race_read"), color("race")]
    cats = d.categories
    lead_rank = max(cats.ndim - 2, 0)
    prefer = (cats >= 2).reshape(cats.shape[:lead_rank] + (-1,)).any(-1) if lead_rank else None
    fig = SvgFigure(1000.0, 100, title=title, theme=t)
    from tilelab.lab.figures.ownership_svg import _PAD, _element_section, _layout, _place

    y = _layout(fig, title, "")
    legend_y = y
    for i, (f, text) in enumerate(zip(fills[::-1], _RACE_LEGEND)):
        lx = _PAD + i * 240
        fig.rect(lx, legend_y, 14, 14, fill=f, stroke=color("muted"), gid="legend-swatch")
        fig.text(lx + 20, legend_y + 11.5, text, size=11.5, gid="legend")
    sec = _place(fig, y + 24, [_extent(info.shape)], [
        lambda x, y0, w: _element_section(
            fig, arg, cats, fills, x, y0, w, title=f"{arg}: {_fmt_dims(info.shape)} "
            f"{info.dtype}", gid=f"race:{arg}", max_panels=max_panels, max_cells=max_cells,
            prefer=prefer)])[0]
    sec.update(kind="race", write_write=d.write_write, read_write=d.read_write,
               blocks=d.blocks)
    fig.tilelab = {"kind": "race", "kernel": trace.kernel, "arg": arg, "sections": [sec],
                   "blocks": d.blocks, "write_write": int(d.write_write.sum()),
                   "read_write": int(d.read_write.sum()), "legend": list(_RACE_LEGEND),
                   "theme": t.name}
    return fig
