"""Labels of the ownership pictures' tiles: which block owns a tile, legible and in place.

Why: a label is only useful when it can be read and when it sits on its own tile. Tiles
come in every shape — large squares, tiny squares of a big grid, thin rows of 1×2048 — so
the label's form (``b3 #2`` on one line for wide thin tiles, ``b3`` over ``#2`` in
squares), its size (never below :data:`MIN_FONT` px), a regular sample when not every
tile has room, and the height of thin rows are decided here; labels are kept inside their
panel so they never run over the ticks. :mod:`tilelab.lab.figures.ownership_svg` draws the
rest of the picture.

Example:
    >>> import tilelab as tl
    >>> from tilelab.lab.figures.ownership import ownership_figure
    >>> fig = ownership_figure(tl.zeros((8, 16384), device="cpu").partition(
    ...     (1, 2048), schedule=tl.persistent(num_blocks=8)), name="y")
    >>> sorted({i["s"] for i in fig.items_of("tile-label")})[:2]
    ['b0 #1', 'b0 #2']
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from tilelab.lab.figures.ownership_data import OwnershipData
from tilelab.lab.figures.svg import SvgFigure, text_width

__all__ = ["MIN_FONT", "LABEL_ROW_PX", "draw_labels", "thin_rows"]

#: the smallest label, px (readable at 1:1)
MIN_FONT = 8.0


def _label_steps(gr: int, gc: int, cell_w: float, cell_h: float, chars: int,
                 lines: int, strip: bool, max_labels: int) -> tuple[int, int, float]:
    """Row and column steps of the labelled lattice and the font size: legible (at least
    :data:`MIN_FONT` px), at most ~12 labels per row and column (40 along a strip) and
    ``max_labels`` in all."""
    def fit(sr: int, sc: int) -> float:
        return min(13.0, 0.85 * sc * cell_w / (0.6 * chars), 0.62 * sr * cell_h / lines)

    lim = 40 if strip else 12
    s_r, s_c = (1 if strip else math.ceil(gr / lim)), math.ceil(gc / lim)
    while fit(s_r, s_c) < MIN_FONT and (s_c < gc or (not strip and s_r < gr)):
        if 0.85 * s_c * cell_w / (0.6 * chars) < MIN_FONT and s_c < gc:
            s_c += 1
        elif not strip and s_r < gr:
            s_r += 1
        else:
            break
    while math.ceil(gr / s_r) * math.ceil(gc / s_c) > max_labels:
        s_r, s_c = (s_r if strip else s_r + 1), s_c + 1
    return s_r, s_c, max(MIN_FONT, fit(s_r, s_c))


def _label_form(data: OwnershipData, cell_w: float, cell_h: float) -> tuple[bool, int, int]:
    """Whether labels take one line (``b3 #2`` side by side, for wide, thin tiles) or two
    (``b3`` over ``#2``), and the characters and lines that means."""
    chars = len(f"b{data.num_blocks - 1}")
    if not data.persistent:
        return True, chars, 1
    one = len(f"b{data.num_blocks - 1} #{int(data.step.max()) + 1}")
    fit_one = min(13.0, 0.85 * cell_w / (0.6 * one), 0.62 * cell_h)
    fit_two = min(13.0, 0.85 * cell_w / (0.6 * chars), 0.62 * cell_h / 2)
    return (True, one, 1) if fit_one > fit_two else (False, chars, 2)


def draw_labels(fig: SvgFigure, g: Any, data: OwnershipData, s: dict, lead_t: tuple,
                r_edges: list, c_edges: list, block: int | None,
                max_labels: int) -> list[tuple[int, int]]:
    """Label the tiles of one panel (``g``: its geometry; ``s``: its slab; the edges in
    elements): every tile, or a regular sample plus ``block``'s tiles; each label inside
    the panel. Records ``tile-labels`` (positions in elements, texts, the font size) and
    returns the labelled (row, col) cells."""
    gr, gc, strip = s["gr"], s["gc"], s["strip"]
    cell_w, cell_h = s["tcol"] * g.sx, (40.0 if strip else s["trow"] * g.sy)
    single, chars, lines = _label_form(data, cell_w, cell_h)
    s_r, s_c, size = _label_steps(gr, gc, cell_w, cell_h, chars, lines, strip, max_labels)
    y_lo, y_hi = g.py(0), g.py(1 if strip else r_edges[-1])   # labels stay inside
    cells = [(i, j) for i in range(gr) for j in range(gc)
             if (i - s_r // 2) % s_r == 0 and (j - s_c // 2) % s_c == 0]
    if block is not None:
        mine = {(int(i), int(j)) for i, j in zip(*np.nonzero(s["owners"] == block))}
        cells = sorted(set(cells) | mine)
    found = {}
    for i, j in cells:
        tile = lead_t + ((j,) if strip else (i, j))
        text = data.label(tile)
        xe = (c_edges[j] + c_edges[j + 1]) / 2
        ye = 0.5 if strip else (r_edges[i] + r_edges[i + 1]) / 2
        parts = [text] if single else text.split(" ")
        room_w = (c_edges[j + 1] - c_edges[j]) * g.sx
        room_h = 40.0 if strip else (r_edges[i + 1] - r_edges[i]) * g.sy
        fs = size
        if room_w < text_width(parts[0], fs) + 2 or room_h < fs * 1.2 * len(parts):
            # a thin edge tile: label the whole tile, padding included (over the hatching)
            xe = (j + 0.5) * s["tcol"] if c_edges[j + 1] - c_edges[j] < s["tcol"] else xe
            if not strip and r_edges[i + 1] - r_edges[i] < s["trow"]:
                ye = (i + 0.5) * s["trow"]
        top = g.py(ye) - fs * 0.65 * (len(parts) - 1) + fs * 0.35
        top = max(top, y_lo + fs * 0.8)                           # not over the ticks
        top = min(top, y_hi - fs * 0.25 - fs * 1.15 * (len(parts) - 1))
        for n, part in enumerate(parts):
            fig.text(g.px(xe), top + n * fs * 1.15, part, size=fs, anchor="middle",
                     halo=True, gid="tile-label")
        found[(round(float(xe), 3), round(float(ye), 3))] = "\n".join(parts)
    fig.record("tile-labels" + (":" + ",".join(map(str, lead_t)) if lead_t else ""),
               labels=found, size=size)
    return cells


#: a tile row this tall holds a one-line label at a legible size, px
LABEL_ROW_PX = 16.0


def thin_rows(sy: float, sx: float, s: dict, ah: float) -> float:
    """px per element row: tiles much wider than tall (a 1×2048 tile) drawn to scale
    leave no room for a label, so their rows get up to :data:`LABEL_ROW_PX`, as far as
    the panel's height allows."""
    tile_h, tile_w = s["trow"] * sy, s["tcol"] * sx
    if tile_h >= LABEL_ROW_PX or tile_w < 2 * tile_h:
        return sy
    rows = s["gr"] * s["trow"]
    return max(sy, min(LABEL_ROW_PX / s["trow"], ah / rows))
