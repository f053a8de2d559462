"""Drawing the ownership pictures as SVG: tile grids by owner, what a block reads, races.

Why: the pictures teach tilelab's safety story (every output tile has exactly one owning
block; inputs are shared; races are elements written by two blocks), so they must be
readable at a glance: drawn at full width and 1:1 in the page (SVG, sharp at any size),
block labels at a legible size (sampled when tiles are too small for all of them), the
padding of edge tiles hatched, and one naming convention stated in the figure's legend
line (``bN`` = block N; tiles are ``[row, col]`` of a 2-D tile grid, ``[i]`` of a 1-D one).
Thin tiles (one row of 2048, say) get rows tall enough for a label, and labels are kept
inside their panel, clear of the ticks. Colours are the page's
theme variables (:mod:`tilelab.lab.figures.svg`). The data comes from
:mod:`tilelab.lab.figures.ownership_data`; each figure records it (``fig.tilelab`` and
``fig.find(gid)``) so tests check the picture against the device's own functions.

Example:
    >>> import tilelab as tl
    >>> fig = ownership_figure(tl.zeros((300, 200), device="cpu").partition((128, 64)),
    ...                        name="c", theme="light")
    >>> fig.find("padding:c")[0]["boxes"]
    [((0, 384), (200, 256)), ((300, 384), (0, 200))]
"""
from __future__ import annotations

import math
import textwrap
from typing import Any, Sequence

import numpy as np

from tilelab.lab.figures.ownership_data import (OwnershipData, _as_2d, _bbox_text,
                                                _block_linear, _choose_panels, _extent,
                                                _fmt_dims, _input_names, _kernel_name,
                                                _partition_name, _reduce, block_name,
                                                ownership_data, tile_name)
from tilelab.lab.figures.ownership_labels import draw_labels, thin_rows
from tilelab.lab.figures.svg import SvgFigure, color, owner_fill, text_width
from tilelab.lab.figures.theme import Theme, get_theme

__all__ = ["ownership_figure", "reads_figure", "NAMING", "naming"]

_TILE_NAMES = {
    1: "tiles are named [i], their index along the tensor",
    2: "tiles are named [row, col] in the tile grid, row first like the tensor's own indices",
}


def naming(rank: int) -> str:
    """The legend line of an ownership figure of a rank-``rank`` partition: how blocks
    and tiles are named (tiles by as many indices as the tensor has dimensions).

    Example:
        >>> naming(1).split("; ")[1]
        'tiles are named [i], their index along the tensor'
        >>> naming(3).split("; ")[1][:49]
        'tiles are named [i, row, col] in the tile grid: i'
    """
    tiles = _TILE_NAMES.get(rank)
    if tiles is None:
        lead = ", ".join("ijkl"[:rank - 2])
        tiles = (f"tiles are named [{lead}, row, col] in the tile grid: {lead} pick"
                 f"{'s' * (rank == 3)} the small grid (one per leading tile index), then "
                 "row and column within it")
    return (f"bN = block N (its linear id, the order blocks are launched); {tiles}; "
            "hatched = padding of an edge tile beyond the tensor (loads masked, never stored)")


#: the legend line of a 2-D ownership figure (:func:`naming` gives any rank's)
NAMING = naming(2)

_W = 1000.0           # the widest figure, px: fits an 1100 px notebook output at 1:1
_PAD = 12.0
_PANEL_H = 440.0      # the tallest single panel, px


def _lines(text: str, width_px: float, size: float) -> list[str]:
    chars = max(20, int(width_px / (0.58 * size)))
    return [ln for part in text.split("\n")
            for ln in (textwrap.wrap(part, chars, break_on_hyphens=False) or [""])]


def _text_block(fig: SvgFigure, x: float, y: float, text: str, width: float, *,
                size: float = 12.0, fill: str | None = None, weight: str = "normal",
                gid: str | None = None) -> float:
    """Wrapped lines from ``y`` (their top); returns the height used."""
    lines = _lines(text, width, size)
    for i, line in enumerate(lines):
        fig.text(x, y + size * (1.0 + 1.3 * i), line, size=size, fill=fill, weight=weight,
                 gid=gid)
    return size * 1.3 * len(lines) + 4


def _ticks(edges: Sequence[int], to_px: Any, min_gap: float, size: float) -> list[int]:
    """Edge values to print, at least ``min_gap`` px (plus their width) apart."""
    out: list[int] = []
    last = -1e9
    for v in dict.fromkeys(int(e) for e in edges):
        p = to_px(v)
        if p - last >= min_gap + text_width(str(v), size):
            out.append(v)
            last = p
    return out


# ============================================================================ tile panels

class _Panel:
    """The geometry of one slab: element coordinates -> px."""

    def __init__(self, x: float, y: float, sx: float, sy: float) -> None:
        self.x, self.y, self.sx, self.sy = x, y, sx, sy

    def px(self, col: float) -> float:
        return self.x + col * self.sx

    def py(self, row: float) -> float:
        return self.y + row * self.sy


def _panel_scale(rows_ext: int, cols_ext: int, aw: float, ah: float,
                 strip: bool) -> tuple[float, float]:
    """px per element in x and y: equal unless the slab is a sliver (or a strip)."""
    if strip:
        return aw / max(cols_ext, 1), 40.0
    ratio = rows_ext / max(cols_ext, 1)
    if 1 / 6 <= ratio <= 6:
        s = min(aw / cols_ext, ah / rows_ext)
        return s, s
    sx = aw / cols_ext
    height = min(ah, max(90.0, aw * ratio))
    return sx, min(height / rows_ext, sx * 6 if ratio > 6 else height / rows_ext)


def _slab(data: OwnershipData, lead_t: tuple[int, ...]) -> dict[str, Any]:
    """The owners, positions and sizes of one slab (strips as one row)."""
    k = len(lead_t)
    owners = data.owners[lead_t] if k else data.owners
    owners2, strip = _as_2d(owners)
    pos2 = (data.position[lead_t] if k else data.position).reshape(owners2.shape)
    shape, tshape = data.shape[k:], data.tile_shape[k:]
    if strip:
        rows, cols, trow, tcol = 1, shape[0], 1, tshape[0]
    else:
        (rows, cols), (trow, tcol) = shape, tshape
    return dict(owners=owners2, pos=pos2, strip=strip, rows=rows, cols=cols, trow=trow,
                tcol=tcol, gr=owners2.shape[0], gc=owners2.shape[1])


def _draw_tiles(fig: SvgFigure, g: _Panel, data: OwnershipData, s: dict, shown: np.ndarray,
                r_edges: list, c_edges: list, gid: str) -> None:
    nb, few = data.num_blocks, shown.size <= 1024
    stroke = color("panel") if few else None
    for i in range(shown.shape[0]):
        for j in range(shown.shape[1]):
            o = int(shown[i, j])
            x0, x1 = g.px(c_edges[j]), g.px(c_edges[j + 1])
            y0, y1 = g.py(r_edges[i]), g.py(r_edges[i + 1])
            tip = (f"b{o} owns the tile starting at element "
                   f"[{r_edges[i]}, {c_edges[j]}]" if not s["strip"]
                   else f"b{o} owns elements {c_edges[j]}:{c_edges[j + 1]}")
            fig.rect(x0, y0, x1 - x0, y1 - y0, fill=owner_fill(o, nb), stroke=stroke,
                     width=1.0, gid=gid, tip=tip)


def _draw_padding(fig: SvgFigure, g: _Panel, s: dict, name: str, suffix: str) -> None:
    rows_ext, cols_ext = s["gr"] * s["trow"], s["gc"] * s["tcol"]
    rows, cols = (1, s["cols"]) if s["strip"] else (s["rows"], s["cols"])
    rows_ext = 1 if s["strip"] else rows_ext
    boxes = []
    if cols_ext > cols:
        boxes.append(((0, rows_ext), (cols, cols_ext)))
    if rows_ext > rows:
        boxes.append(((rows, rows_ext), (0, cols)))
    for (r0, r1), (c0, c1) in boxes:
        fig.rect(g.px(c0), g.py(r0), (c1 - c0) * g.sx, (r1 - r0) * g.sy,
                 fill=color("empty"), hatch=True, gid=f"padding:{name}{suffix}",
                 tip="padding: the edge tile's lanes beyond the tensor (masked)")
    fig.line([(g.px(0), g.py(0)), (g.px(cols), g.py(0)), (g.px(cols), g.py(rows)),
              (g.px(0), g.py(rows)), (g.px(0), g.py(0))], stroke=color("muted"), width=1.2,
             gid=f"edge:{name}{suffix}")
    fig.record(f"padding:{name}{suffix}", boxes=boxes)


def _draw_order(fig: SvgFigure, g: _Panel, data: OwnershipData, s: dict, r_edges: list,
                c_edges: list) -> list | None:
    swizzled = "grouped" in data.schedule or "group_m" in data.schedule
    pos2 = s["pos"]
    if not swizzled or pos2.size > 1024:
        return None
    order = np.argsort(pos2, axis=None)[: min(pos2.size, 256)]
    ii, jj = np.unravel_index(order, pos2.shape)
    pts = [((c_edges[j] + c_edges[j + 1]) / 2,
            0.5 if s["strip"] else (r_edges[i] + r_edges[i + 1]) / 2) for i, j in zip(ii, jj)]
    fig.line([(g.px(x), g.py(y)) for x, y in pts], stroke=color("foreground"), width=1.2,
             opacity=0.55, gid="order-path")
    fig.circle(g.px(pts[0][0]), g.py(pts[0][1]), 3.5, fill=color("foreground"),
               gid="order-start", tip="the schedule's first tile")
    fig.record("order-path", points=[(float(x), float(y)) for x, y in pts])
    return pts


def _draw_ticks(fig: SvgFigure, g: _Panel, s: dict, r_edges: list, c_edges: list) -> None:
    rows, cols = (1, s["cols"]) if s["strip"] else (s["rows"], s["cols"])
    col_edges = sorted(set(c_edges) | {cols})
    for v in _ticks(col_edges, g.px, 6.0, 10.0):
        fig.text(g.px(v), g.y - 4, str(v), size=10, anchor="middle", fill=color("muted"),
                 gid="tick")
    if s["strip"]:
        return
    row_edges = sorted(set(r_edges) | {rows})
    last = -1e9
    for v in row_edges:
        if g.py(v) - last >= 14:
            fig.text(g.x - 4, g.py(v) + 3.5, str(v), size=10, anchor="end",
                     fill=color("muted"), gid="tick")
            last = g.py(v)


def _tile_panel(fig: SvgFigure, data: OwnershipData, lead: Any, x: float, y: float,
                w: float, h_max: float, *, block: int | None, max_tiles: int,
                max_labels: int) -> dict[str, Any]:
    """Draw one slab of the tile grid at (x, y) within ``w`` × ``h_max`` px; returns what
    was drawn (and the height used)."""
    lead_t = () if lead is None else (lead if isinstance(lead, tuple) else (lead,))
    suffix = "" if not lead_t else ":" + ",".join(map(str, lead_t))
    s = _slab(data, lead_t)
    gr, gc, strip = s["gr"], s["gc"], s["strip"]
    fr = fc = 1   # aggregate: every f-th tile row/column when the grid is too large
    while math.ceil(gr / fr) * math.ceil(gc / fc) > max_tiles:
        if gr / fr >= gc / fc and gr > 1:
            fr *= 2
        else:
            fc *= 2
    rows, cols = (1, s["cols"]) if strip else (s["rows"], s["cols"])
    r_edges = [0, 1] if strip else [min(i * s["trow"], rows) for i in range(0, gr, fr)] + [rows]
    c_edges = [min(j * s["tcol"], cols) for j in range(0, gc, fc)] + [cols]
    shown = s["owners"][::fr, ::fc]
    aggregated = fr > 1 or fc > 1
    title = data.name
    if lead_t:
        bounds = data.tile_bounds(lead_t + (0,) * (len(data.grid) - len(lead_t)))[:len(lead_t)]
        at = ", ".join(f"{lo}" if hi == lo + 1 else f"{lo}:{hi}" for lo, hi in bounds)
        title = f"{data.name}[{at}, :, :]"
    ml, top = (6.0 if strip else 44.0), 36.0
    sx, sy = _panel_scale(gr * s["trow"], gc * s["tcol"], w - ml - 8, h_max - top - 6, strip)
    if not strip and not aggregated:
        sy = thin_rows(sy, sx, s, h_max - top - 6)
    g = _Panel(x + ml, y + top, sx, sy)
    ext_h = (1 if strip else gr * s["trow"]) * sy
    fig.rect(g.x, g.y, gc * s["tcol"] * sx, ext_h, fill=color("empty"))
    gid = f"tiles:{data.name}{suffix}"
    _draw_tiles(fig, g, data, s, shown, r_edges, c_edges, gid)
    _draw_padding(fig, g, s, data.name, suffix)
    path = None if aggregated else _draw_order(fig, g, data, s, r_edges, c_edges)
    labelled = [] if aggregated else draw_labels(fig, g, data, s, lead_t, r_edges, c_edges,
                                                 block, max_labels)
    outlined = []
    for t in (data.tiles_of(block) if block is not None else []):
        if lead_t and tuple(t[:len(lead_t)]) != lead_t:
            continue
        b = data.tile_bounds(t)
        (r0, r1), (c0, c1) = ((0, 1), b[0]) if strip else b[-2:]
        fig.rect(g.px(c0) + 1, g.py(r0) + 1, (c1 - c0) * sx - 2, (r1 - r0) * sy - 2,
                 stroke=color("highlight"), width=2.6, gid="block-tiles")
        fig.record("block-tiles", x=c0, y=r0, width=c1 - c0, height=r1 - r0, tile=t)
        outlined.append(t)
    _draw_ticks(fig, g, s, r_edges, c_edges)
    if aggregated:
        title += f" (every {fr}×{fc}-th tile shown)" if not strip else f" (every {fc}-th tile)"
    elif len(labelled) < gr * gc:
        title += f" ({len(labelled)} of {gr * gc} tiles labelled)"
    fig.text(x + ml, y + 13, title, size=12, gid="panel-title")
    fig.record(gid, owners=shown, row_edges=r_edges, col_edges=c_edges, title=title,
               fills=[owner_fill(int(o), data.num_blocks) for o in shown.ravel()])
    return {"lead": lead, "owners": shown, "row_edges": r_edges, "col_edges": c_edges,
            "labelled": labelled, "aggregated": aggregated, "outlined": outlined,
            "path": path, "title": title, "height": top + ext_h + 8}


def _grid_of(k: int, w: float) -> tuple[int, int, float]:
    cols = math.ceil(math.sqrt(k))
    rows = math.ceil(k / cols)
    return rows, cols, (w - 10 * (cols - 1)) / cols


def _partition_section(fig: SvgFigure, data: OwnershipData, x: float, y: float, w: float, *,
                       block: int | None, max_tiles: int, max_labels: int,
                       max_panels: int) -> dict[str, Any]:
    more, leads = "", [None]
    lead_rank = len(data.grid) - 2
    if lead_rank >= 1:
        prefer = None
        if block is not None:
            prefer = np.zeros(data.grid[:lead_rank], bool)
            for t in data.tiles_of(block):
                prefer[tuple(t[:lead_rank])] = True
        chosen, total = _choose_panels(data.grid, lead_rank, max_panels, prefer)
        leads = [c[0] if lead_rank == 1 else c for c in chosen]
        more = f"; {len(leads)} of {total} slabs shown" if len(leads) < total else ""
    caption = data.describe() + more
    hy = _text_block(fig, x, y, caption, w, gid="section-title")
    rows, cols, pw = _grid_of(len(leads), w)
    h_max = _PANEL_H if len(leads) == 1 else max(150.0, 520.0 / rows)
    panels, yy, row_h = [], y + hy, 0.0
    for n, lead in enumerate(leads):
        if n and n % cols == 0:
            yy, row_h = yy + row_h + 6, 0.0
        p = _tile_panel(fig, data, lead, x + (n % cols) * (pw + 10), yy, pw, h_max,
                        block=block, max_tiles=max(16, max_tiles // len(leads)),
                        max_labels=max(8, max_labels // len(leads)))
        panels.append(p)
        row_h = max(row_h, p["height"])
    return {"kind": "partition", "name": data.name, "owners": data.owners,
            "position": data.position, "num_blocks": data.num_blocks,
            "colors": [owner_fill(i, data.num_blocks) for i in range(data.num_blocks)],
            "schedule": data.schedule, "panels": panels, "block": block, "caption": caption,
            "block_tiles": data.tiles_of(block) if block is not None else [],
            "height": yy + row_h - y}


# ============================================================================ element panels

def _runs(coarse: np.ndarray) -> list[tuple[int, int, int, int, int]]:
    """Rectangles (r0, r1, c0, c1, value) covering the non-zero cells: runs along rows,
    merged down over identical rows."""
    out: list[list[int]] = []
    open_: dict[tuple[int, int, int], list[int]] = {}
    for i, row in enumerate(coarse):
        runs = []
        j, n = 0, row.size
        while j < n:
            v = int(row[j])
            k = j + 1
            while k < n and row[k] == v:
                k += 1
            if v:
                runs.append((j, k, v))
            j = k
        nxt = {}
        for c0, c1, v in runs:
            rect = open_.get((c0, c1, v))
            if rect is not None and rect[1] == i:
                rect[1] = i + 1
            else:
                rect = [i, i + 1, c0, c1, v]
                out.append(rect)
            nxt[(c0, c1, v)] = rect
        open_ = nxt
    return [tuple(r) for r in out]


def _element_section(fig: SvgFigure, name: str, values: np.ndarray, fills: list[str],
                     x: float, y: float, w: float, *, title: str, gid: str, max_panels: int,
                     max_cells: int, prefer: np.ndarray | None) -> dict[str, Any]:
    """Small multiples of an element-level category array (0 = background)."""
    lead_rank = max(values.ndim - 2, 0)
    leads, total = _choose_panels(values.shape, lead_rank, max_panels, prefer)
    strip = values.ndim <= 1
    more = f" ({len(leads)} of {total} slices shown)" if len(leads) < total else ""
    hy = _text_block(fig, x, y, title + more, w, gid="section-title")
    rows_n, cols_n, pw = _grid_of(len(leads), w)
    h_max = _PANEL_H if len(leads) == 1 else max(140.0, 520.0 / rows_n)
    panels, yy, row_h = [], y + hy, 0.0
    for n, lead in enumerate(leads):
        if n and n % cols_n == 0:
            yy, row_h = yy + row_h + 6, 0.0
        plane, _ = _as_2d(values[lead] if lead_rank else values)
        cells = max(1, max_cells // len(leads))
        coarse, r_edges, c_edges = _reduce(plane, cells, np.maximum)
        runs = _runs(coarse)
        while len(runs) > 12_000 and cells > 64:    # keep the SVG small: coarser cells
            cells //= 4
            coarse, r_edges, c_edges = _reduce(plane, cells, np.maximum)
            runs = _runs(coarse)
        if strip:
            r_edges = [0, 1]
        px0 = x + (n % cols_n) * (pw + 10)
        top = 20.0 if lead_rank else 4.0
        sx, sy = _panel_scale(r_edges[-1], c_edges[-1], pw - 8, h_max - top - 6, strip)
        g = _Panel(px0 + 4, yy + top, sx, sy)
        fig.rect(g.x, g.y, c_edges[-1] * sx, r_edges[-1] * sy, fill=color("empty"),
                 stroke=color("muted"), width=1.0)
        suffix = "" if not lead_rank else ":" + ",".join(map(str, lead))
        for r0, r1, c0, c1, v in runs:
            fig.rect(g.px(c_edges[c0]), g.py(r_edges[r0]),
                     (c_edges[c1] - c_edges[c0]) * sx, (r_edges[r1] - r_edges[r0]) * sy,
                     fill=fills[v], gid=gid + suffix)
        if lead_rank:
            fig.text(g.x, yy + 14, f"{name}[{', '.join(map(str, lead))}, :, :]", size=11,
                     gid="panel-title")
        rec = {"lead": lead, "values": coarse, "row_edges": r_edges, "col_edges": c_edges,
               "exact": coarse.shape == plane.shape, "fills": fills}
        fig.record(gid + suffix, **rec)
        panels.append(rec)
        row_h = max(row_h, top + r_edges[-1] * sy + 8)
    return {"name": name, "panels": panels, "lead_rank": lead_rank, "caption": title + more,
            "height": yy + row_h - y}


def _reads_section(fig: SvgFigure, trace: Any, arg: str, block: int, fill: str, x: float,
                   y: float, w: float, *, max_panels: int, max_cells: int) -> dict[str, Any]:
    mask = trace.footprint(arg, block=block, kind="read")
    info = trace.args[arg]
    what = _bbox_text(arg, mask)
    title = (f"{arg}: {_fmt_dims(info.shape)} {info.dtype}, shared input; "
             f"{block_name(trace, block)} reads {what}")
    lead_rank = max(mask.ndim - 2, 0)
    prefer = mask.reshape(mask.shape[:lead_rank] + (-1,)).any(-1) if lead_rank else None
    out = _element_section(fig, arg, mask.astype(np.int8), [color("empty"), fill], x, y, w,
                           title=title, gid=f"reads:{arg}", max_panels=max_panels,
                           max_cells=max_cells, prefer=prefer)
    out.update(kind="reads", block=block, mask=mask, description=what)
    return out


# ============================================================================ figures

def _section_widths(extents: list[tuple[int, int]], total: float) -> list[float]:
    ratios = [max(0.6, min(2.0, cols / max(rows, 1))) ** 0.5 for rows, cols in extents]
    ratios[0] *= 1.4 if len(ratios) > 1 else 1.0   # the owner grid is the main picture
    if all(r == 1 for r, _ in extents):      # strips: stack them at full width
        return [total] * len(extents)
    s = sum(ratios)
    return [(total - 16 * (len(ratios) - 1)) * r / s for r in ratios]


def _layout(fig: SvgFigure, head: str, legend: str) -> float:
    """Title and legend line on top; returns where the sections start."""
    wrap = min(fig.width, 640.0) - 2 * _PAD     # the figure may shrink to 640 px
    y = _PAD + _text_block(fig, _PAD, _PAD, head, wrap, size=14, weight="bold", gid="title")
    if legend:
        y += _text_block(fig, _PAD, y, legend, wrap, size=11.5,
                         fill=color("muted"), gid="legend")
    return y + 4


def _place(fig: SvgFigure, y: float, extents: list[tuple[int, int]], draw: list) -> list:
    """Sections side by side (strips: one under the other) from ``y``; sets the height."""
    widths = _section_widths(extents, fig.width - 2 * _PAD)
    stacked = all(r == 1 for r, _ in extents)
    x, out, bottom = _PAD, [], y
    for w, fn in zip(widths, draw):
        sec = fn(x, y if not stacked else bottom, w)
        out.append(sec)
        if stacked:
            bottom += sec["height"] + 10
        else:
            x += w + 16
            bottom = max(bottom, y + sec["height"])
    fig.height = bottom + _PAD
    def right_edge(kind: str, d: dict) -> float:
        if kind == "rect":
            return d["x"] + d["w"]
        if kind == "text" and d["anchor"] == "start":
            return d["x"] + text_width(d["s"], d["size"])
        if kind == "text" and d["anchor"] == "middle":
            return d["x"] + text_width(d["s"], d["size"]) / 2
        return d["x"] + (d.get("r") or 0)

    right = max(right_edge(k, d) for k, d in fig.items if k in ("rect", "circle", "text"))
    fig.width = min(fig.width, max(right + _PAD, 640.0))   # no empty half figure
    return out


def _ownership_head(kname: str | None, data: OwnershipData, trace: Any, linear: int | None,
                    reads: bool) -> str:
    """The title: which block owns which tile (and reads what)."""
    head = f"{kname}: " if kname else ""
    if reads:
        mine = data.tiles_of(linear)
        tiles = ", ".join(tile_name(m).replace("tile ", "") for m in mine)
        head += (f"{block_name(trace, linear)} owns tile{'s' if len(mine) > 1 else ''} "
                 f"{tiles} of {data.name} and reads the highlighted regions")
    else:
        head += f"which block owns which tile of {data.name}"
    if trace is not None and getattr(trace, "sampled", False):
        head += " (sampled trace)"
    return head


def ownership_figure(partition: Any, *, trace: Any = None, block: Any = None,
                     kernel: Any = None, max_tiles: int = 4096, theme: "Theme | str | None" = None,
                     name: str | None = None, num_blocks: int | None = None,
                     inputs: Sequence[str] | None = None, max_labels: int = 256,
                     max_panels: int = 12, max_cells: int = 250_000) -> SvgFigure:
    """The tile grid of ``partition`` coloured by owning block, labelled ``b<owner>`` (and
    ``#k`` = the block's k-th tile for persistent schedules), edge tiles' padding hatched;
    swizzled schedules also show the order path. With ``block``, that block's tiles are
    outlined; with a ``trace`` (of a launch over this partition), one more section per
    shared input shows what ``block`` read, in the block's colour.

    ``block`` is a linear block id or ``(x, y, z)`` (default with a trace: the first block
    that ran); ``kernel`` (a ``tl.kernel`` or its name) tells inputs from outputs;
    ``inputs`` picks the input arguments (None: every ``tl.In``; ``()``: none). Tile grids
    beyond ``max_tiles`` are drawn every f-th tile; only a legible sample of at most
    ``max_labels`` tiles is labelled; 3-D partitions become small multiples over their
    leading tile index, 4-D and 5-D ones over their two or three leading tile indices (at
    most ``max_panels``). ``theme`` only picks the colours of PNG output: in a page the
    SVG follows the page's theme.

    Example:
        >>> import tilelab as tl
        >>> p = tl.zeros((300, 200), device="cpu").partition((128, 64))
        >>> fig = ownership_figure(p, name="c", theme="light")
        >>> fig.tilelab["sections"][0]["panels"][0]["row_edges"]
        [0, 128, 256, 300]
    """
    from tilelab.runtime.partition import Partition

    if not isinstance(partition, Partition):
        raise TypeError(f"ownership diagrams draw a tl.Partition (tensor.partition(...)), "
                        f"got {type(partition).__name__}")
    t = get_theme(theme)
    linear = None
    if trace is not None:
        linear = _block_linear(trace, trace.execution_order[0] if block is None else block)
    elif block is not None:
        linear = int(block) if not isinstance(block, tuple) else None
        if linear is None:
            raise ValueError("without a trace, give the block as its linear id (an int)")
    label = name or _partition_name(partition, trace, kernel)
    data = ownership_data(partition, num_blocks=num_blocks, name=label)
    if linear is not None and not 0 <= linear < data.num_blocks:
        raise IndexError(f"block {linear} is outside the launch's {data.num_blocks} blocks "
                         f"of {label}")
    if trace is not None and inputs is None:
        inputs = _input_names(trace, kernel, exclude=(label,))
    inputs = list(inputs or []) if trace is not None else []
    for arg in inputs:
        trace._check_arg(arg)
    kname = _kernel_name(kernel, trace)
    head = _ownership_head(kname, data, trace, linear, bool(inputs))
    fig = SvgFigure(_W, 100, title=head, theme=t)
    y = _layout(fig, head, naming(len(data.grid)) + ("; outlined = the tiles of the block "
                                                     "shown" if linear is not None else ""))
    draw = [lambda x, y0, w: _partition_section(fig, data, x, y0, w, block=linear,
                                                max_tiles=max_tiles, max_labels=max_labels,
                                                max_panels=max_panels)]
    fill = owner_fill(linear, data.num_blocks) if linear is not None else ""
    for arg in inputs:
        draw.append(lambda x, y0, w, arg=arg: _reads_section(
            fig, trace, arg, linear, fill, x, y0, w, max_panels=max_panels,
            max_cells=max_cells))
    extents = [_extent(data.shape)] + [_extent(trace.args[a].shape) for a in inputs]
    sections = _place(fig, y, extents, draw)
    fig.tilelab = {"kind": "ownership", "kernel": kname, "block": linear,
                   "sections": sections, "inputs": inputs, "theme": t.name}
    return fig


def reads_figure(trace: Any, block: Any = None, inputs: Sequence[str] | None = None, *,
                 kernel: Any = None, theme: "Theme | str | None" = None,
                 max_panels: int = 12, max_cells: int = 250_000) -> SvgFigure:
    """What one block read of each shared input (for launches without a partition, e.g.
    raw kernels run with ``tl.interpret``).

    Example:
        >>> import numpy as np, cuda.tile as ct
        >>> from tilelab.interp import interpret
        >>> @ct.kernel
        ... def row_sum(x, y, T: ct.Constant[int]):
        ...     ct.store(y, (ct.bid(0),), ct.sum(ct.load(x, (ct.bid(0), 0), (1, T)), axis=1))
        >>> tr = interpret(row_sum, np.ones((4, 8), np.float32), np.zeros(4, np.float32), 8,
        ...                grid=(4,))
        >>> reads_figure(tr, block=2, theme="light").tilelab["sections"][0]["description"]
        'x[2, 0:8]'
    """
    t = get_theme(theme)
    linear = _block_linear(trace, trace.execution_order[0] if block is None else block)
    names = list(inputs) if inputs is not None else _input_names(trace, kernel)
    if not names:
        raise ValueError(f"kernel '{trace.kernel}' has no shared input arrays to draw")
    head = f"{trace.kernel}: what {block_name(trace, linear)} reads"
    fig = SvgFigure(_W, 100, title=head, theme=t)
    y = _layout(fig, head, "coloured = elements the block loaded (its footprint, from the "
                           "interpreter's trace)")
    draw = [lambda x, y0, w, a=a: _reads_section(fig, trace, a, linear, color("palette:0"),
                                                 x, y0, w, max_panels=max_panels,
                                                 max_cells=max_cells) for a in names]
    sections = _place(fig, y, [_extent(trace.args[a].shape) for a in names], draw)
    fig.tilelab = {"kind": "reads", "kernel": trace.kernel, "block": linear,
                   "sections": sections, "inputs": names, "theme": t.name}
    return fig
