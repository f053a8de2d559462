"""Ownership diagrams: which block owns which tile, what a block reads, where blocks race.

Why: tilelab's safety story is a picture. An output is split into disjoint tiles and every
tile has exactly one owning block, chosen by the schedule (row-major, ``tl.grouped`` swizzle,
persistent blocks looping over several tiles); inputs are shared, and a GEMM block (m, n)
reads a row panel of A and a column panel of B. When a raw kernel gets the store index
wrong (the head-permutation bug), several blocks write the same elements. These figures
draw exactly that, from the very functions the device uses
(:meth:`tilelab.Partition.owners`, :meth:`tilelab.Partition.order`) and from the CPU
interpreter's trace (:meth:`tilelab.interp.Trace.footprint`), so the picture cannot drift
from the truth.

Public API:

- :func:`ownership_data` — the owner / schedule-order grid of a partition (plain data).
- :func:`ownership_figure` — the tile grid colored by owner, labelled with owner and order;
  with a trace and a block, also the regions of each ``tl.In`` argument that block read.
- :func:`reads_figure` — only the read regions of one block (raw kernels, no partition).
- :func:`race_data` / :func:`race_figure` — elements written by more than one block.
- :func:`ownership_figures` — every figure for one :class:`~tilelab.runtime.events.LaunchEvent`.
- :func:`trace_launch` / :func:`trace_args` — re-run a launch on CPU copies of its
  arguments to get a trace (GPU launches have none).

Every figure carries what it drew in ``fig.tilelab`` (a dict), for tests and views.

Example:
    >>> import tilelab as tl
    >>> p = tl.zeros((256, 128), device="cpu").partition((64, 64), schedule=tl.grouped(2))
    >>> fig = ownership_figure(p, theme="light")
    >>> fig.tilelab["sections"][0]["owners"].tolist()
    [[0, 2], [1, 3], [4, 6], [5, 7]]
"""
from __future__ import annotations

import math
import os
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from tilelab.lab.theme import Theme, get_theme, new_figure, owner_colors, themed

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["OwnershipData", "ownership_data", "ownership_figure", "reads_figure",
           "RaceData", "race_data", "race_figure", "ownership_figures", "trace_launch",
           "trace_args", "cpu_copy", "schedule_label"]


# ============================================================================ data

@dataclass(frozen=True)
class OwnershipData:
    """Who owns which tile of a partition, and when the schedule hands it out.

    Attributes:
        name: the tensor's name in the picture. shape / tile_shape / grid: the tensor's
        shape, the tile shape and the tiles per dimension. owners: int array of shape
        ``grid``, the owning block of every tile. position: the tile's place in the
        schedule's order (:meth:`tilelab.Partition.order`). step: for persistent schedules
        which of its block's tiles it is (0 = first), else 0. num_blocks: blocks launched.
        schedule: a readable name of the schedule. persistent: whether blocks loop.

    Example:
        >>> import tilelab as tl
        >>> d = ownership_data(tl.zeros(8, device="cpu").partition(
        ...     2, schedule=tl.persistent(num_blocks=2)))
        >>> d.owners.tolist(), d.step.tolist(), d.tiles_of(1)
        ([0, 1, 0, 1], [0, 0, 1, 1], [(1,), (3,)])
    """

    name: str
    shape: tuple[int, ...]
    tile_shape: tuple[int, ...]
    grid: tuple[int, ...]
    owners: np.ndarray
    position: np.ndarray
    step: np.ndarray
    num_blocks: int
    schedule: str
    persistent: bool

    @property
    def num_tiles(self) -> int:
        """Number of tiles.

        Example:
            >>> import tilelab as tl
            >>> ownership_data(tl.zeros((10, 10), device="cpu").partition((4, 8))).num_tiles
            6
        """
        return int(self.owners.size)

    def tiles_of(self, block: int) -> list[tuple[int, ...]]:
        """The tiles ``block`` owns, in the order it handles them.

        Example:
            >>> import tilelab as tl
            >>> ownership_data(tl.zeros((4, 4), device="cpu").partition((2, 2))).tiles_of(2)
            [(1, 0)]
        """
        hits = [(int(self.position[t]), t) for t in zip(*np.nonzero(self.owners == block))]
        return [tuple(int(i) for i in t) for _, t in sorted(hits)]

    def tile_bounds(self, tile: Sequence[int]) -> tuple[tuple[int, int], ...]:
        """Per dimension ``(start, stop)`` of a tile, clipped at the tensor's edge.

        Example:
            >>> import tilelab as tl
            >>> ownership_data(tl.zeros(10, device="cpu").partition(4)).tile_bounds((2,))
            ((8, 10),)
        """
        return tuple((i * t, min((i + 1) * t, s))
                     for i, t, s in zip(tile, self.tile_shape, self.shape))

    def label(self, tile: Sequence[int]) -> str:
        """The text a tile carries: its block, and for persistent schedules which of the
        block's tiles it is (``b1 #2``: block 1's second tile).

        Example:
            >>> import tilelab as tl
            >>> d = ownership_data(tl.zeros(8, device="cpu").partition(
            ...     2, schedule=tl.persistent(num_blocks=2)))
            >>> d.label((3,))
            'b1 #2'
        """
        t = tuple(tile)
        text = f"b{int(self.owners[t])}"
        return text + (f" #{int(self.step[t]) + 1}" if self.persistent else "")

    def describe(self) -> str:
        """One line: sizes, schedule and how tiles map to blocks.

        Example:
            >>> import tilelab as tl
            >>> ownership_data(tl.zeros(1000, device="cpu").partition(256), name="z").describe()
            'z: 1000 in tiles of 256 → 4 tiles, 4 blocks, row-major (one tile per block)'
        """
        dims = "×".join(map(str, self.shape))
        tiles = "×".join(map(str, self.tile_shape))
        text = (f"{self.name}: {dims} in tiles of {tiles} → {self.num_tiles} tiles, "
                f"{self.num_blocks} blocks, {self.schedule}")
        if self.persistent:
            nb = self.num_blocks
            return text + f" (block b owns tiles b, b+{nb}, b+{2 * nb}, … in loop order)"
        return text + " (one tile per block)"


def schedule_label(schedule: Any, num_blocks: int | None = None) -> str:
    """A readable name of a schedule.

    Example:
        >>> import tilelab as tl
        >>> schedule_label(tl.grouped(8)), schedule_label(tl.persistent(), 132)
        ('tl.grouped(group_m=8)', 'tl.persistent(num_blocks=132)')
    """
    from tilelab.compiler.language import Grouped, Persistent

    if isinstance(schedule, Grouped):
        return f"tl.grouped(group_m={schedule.group_m})"
    if isinstance(schedule, Persistent):
        parts = [f"num_blocks={schedule.num_blocks or num_blocks}"]
        if schedule.group_m:
            parts.append(f"group_m={schedule.group_m}")
        return f"tl.persistent({', '.join(parts)})"
    return "row-major"


def ownership_data(partition: Any, num_blocks: int | None = None,
                   name: str | None = None) -> OwnershipData:
    """The owners and schedule order of every tile of ``partition``.

    ``num_blocks`` sizes persistent launches that did not fix it (a launch's grid);
    by default the partition's device decides, as for a launch.

    Example:
        >>> import tilelab as tl
        >>> d = ownership_data(tl.zeros((4, 4), device="cpu").partition((2, 2)))
        >>> d.owners.tolist(), d.schedule
        ([[0, 1], [2, 3]], 'row-major')
    """
    from tilelab.compiler.language import Persistent
    from tilelab.runtime.partition import Partition

    if not isinstance(partition, Partition):
        raise TypeError(f"ownership diagrams draw a tl.Partition (tensor.partition(...)), "
                        f"got {type(partition).__name__}")
    nb = partition.num_blocks(num_blocks)
    persistent = isinstance(partition.schedule, Persistent)
    owners = partition.owners(nb)
    position = np.empty(partition.grid, np.int64)
    for k, t in enumerate(partition.order()):
        position[t] = k
    step = position // nb if persistent else np.zeros_like(position)
    return OwnershipData(name or "tensor", tuple(partition.tensor.shape),
                         tuple(partition.tile_shape), tuple(partition.grid), owners, position,
                         step, nb, schedule_label(partition.schedule, nb), persistent)


# ============================================================================ drawing helpers

def _wrap(text: str, width: int) -> str:
    return "\n".join(textwrap.fill(line, width, break_on_hyphens=False)
                     for line in text.split("\n"))


def _luminance(rgba: Sequence[float]) -> float:
    r, g, b = rgba[:3]
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _aspect(rows: float, cols: float) -> str:
    """'equal' unless the panel would be a sliver (then let it fill the axes)."""
    ratio = max(rows, 1) / max(cols, 1)
    return "equal" if 1 / 6 <= ratio <= 6 else "auto"


def _fmt_dims(shape: Sequence[int]) -> str:
    return "×".join(str(int(s)) for s in shape)


def _slice_text(name: str, bounds: Sequence[tuple[int, int]]) -> str:
    parts = [f"{a}" if b == a + 1 else f"{a}:{b}" for a, b in bounds]
    return f"{name}[{', '.join(parts)}]"


def _block_linear(trace: Any, block: Any) -> int:
    """A trace block given as a linear id or (x, y, z), checked to have run."""
    rec = trace.block(block)  # KeyError with the trace's own message if it did not run
    return int(rec.linear)


def _block_name(trace: Any, linear: int) -> str:
    rec = trace.block(linear)
    x, y, z = rec.index
    return f"block {linear}" + ("" if (y, z) == (0, 0) else f" {tuple(rec.index)}")


def _panel_grid(fig_or_sub: Any, k: int, strip: bool) -> list[Any]:
    """``k`` axes in a near-square grid (a column of strips for 1-D data)."""
    if strip:
        axs = fig_or_sub.subplots(k, 1, squeeze=False)
    else:
        cols = math.ceil(math.sqrt(k))
        rows = math.ceil(k / cols)
        axs = fig_or_sub.subplots(rows, cols, squeeze=False)
    flat = list(axs.ravel())
    for ax in flat[k:]:
        ax.set_visible(False)
    rows, cols = axs.shape
    if k > 1:   # small multiples: tick labels on the outer panels only
        for i, ax in enumerate(flat[:k]):
            below = i + cols < k
            ax.tick_params(labelbottom=not below, labelleft=(i % cols == 0) or strip)
    return flat[:k]


def _style_axes(ax: Any, theme: Theme, rows: int, cols: int, strip: bool) -> None:
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)             # row 0 on top, like a printed matrix
    ax.set_facecolor(theme.empty)
    if strip:
        ax.set_yticks([])
        ax.set_aspect("auto")
    else:
        ax.set_aspect(_aspect(rows, cols))
    ax.tick_params(labelsize=7, length=2)
    for spine in ax.spines.values():
        spine.set_color(theme.muted)


def _reduce(values: np.ndarray, max_cells: int,
            how: np.ufunc) -> tuple[np.ndarray, list, list]:
    """Coarsen a 2-D array to at most ``max_cells`` cells with ``how`` (a ufunc such as
    np.maximum). Returns the coarse array and its row and column edges in elements."""
    rows, cols = values.shape
    f = 1
    while math.ceil(rows / f) * math.ceil(cols / f) > max_cells:
        f *= 2
    fr = 1 if rows == 1 else f
    fc = f if rows > 1 else max(1, math.ceil(cols / max_cells))
    r_idx = np.arange(0, rows, fr)
    c_idx = np.arange(0, cols, fc)
    coarse = values
    if fr > 1:
        coarse = how.reduceat(coarse, r_idx, axis=0)
    if fc > 1:
        coarse = how.reduceat(coarse, c_idx, axis=1)
    return coarse, list(r_idx) + [rows], list(c_idx) + [cols]


def _as_2d(arr: np.ndarray) -> tuple[np.ndarray, bool]:
    """A 0-/1-D array as one row (a strip); 2-D as is."""
    if arr.ndim == 0:
        return arr.reshape(1, 1), True
    if arr.ndim == 1:
        return arr.reshape(1, -1), True
    return arr, False


def _choose_panels(shape: Sequence[int], lead_rank: int, max_panels: int,
                   prefer: np.ndarray | None) -> tuple[list[tuple[int, ...]], int]:
    """Leading indices to draw as small multiples — all when few enough, else an even
    sample taking those marked in ``prefer`` first — and how many there are in all."""
    lead_shape = tuple(int(d) for d in shape[:lead_rank])
    total = math.prod(lead_shape)
    if total <= max_panels:
        return [tuple(int(i) for i in t) for t in np.ndindex(*lead_shape)], total
    hot = np.zeros(total, bool) if prefer is None else np.asarray(prefer, bool).ravel()

    def spread(ids: np.ndarray, k: int) -> list[int]:
        if k <= 0 or ids.size == 0:
            return []
        return sorted(set(ids[np.linspace(0, ids.size - 1, min(k, ids.size))
                              .round().astype(int)].tolist()))

    chosen = spread(np.flatnonzero(hot), max_panels)
    chosen += spread(np.flatnonzero(~hot), max_panels - len(chosen))
    return [tuple(int(i) for i in np.unravel_index(c, lead_shape))
            for c in sorted(chosen)], total


# ============================================================================ tile panels

def _tile_panel(ax: Any, data: OwnershipData, lead: int | tuple[int, ...] | None,
                colors: list, theme: Theme, *, block: int | None, max_tiles: int,
                max_labels: int, panel_pt: float = 230.0) -> dict[str, Any]:
    """Draw one 2-D (or strip) slab of the tile grid; returns what was drawn.

    ``lead`` picks the slab of a rank-3 grid (an int) or of a rank-4/5 grid (a tuple of
    the leading tile indices)."""
    from matplotlib.colors import ListedColormap, Normalize
    from matplotlib.patches import Rectangle

    lead_t = () if lead is None else (lead if isinstance(lead, tuple) else (lead,))
    k = len(lead_t)
    owners = data.owners[lead_t] if k else data.owners
    position = data.position[lead_t] if k else data.position
    shape = data.shape[k:]
    tshape = data.tile_shape[k:]
    owners2, strip = _as_2d(owners)
    pos2 = position.reshape(owners2.shape)
    if strip:
        rows, cols, trow, tcol = 1, shape[0], 1, tshape[0]
    else:
        rows, cols = shape
        trow, tcol = tshape
    gr, gc = owners2.shape
    # aggregate: keep every f-th tile row/column when the grid is too large to draw
    fr = fc = 1
    while math.ceil(gr / fr) * math.ceil(gc / fc) > max_tiles:
        if gr / fr >= gc / fc and gr > 1:
            fr *= 2
        else:
            fc *= 2
    r_edges = [min(i * trow, rows) for i in range(0, gr, fr)] + [rows]
    c_edges = [min(j * tcol, cols) for j in range(0, gc, fc)] + [cols]
    if strip:
        r_edges = [0, 1]
    shown = owners2[::fr, ::fc]
    nb = data.num_blocks
    cmap = ListedColormap(colors)
    norm = Normalize(vmin=-0.5, vmax=nb - 0.5)   # owner o -> color o (for any block count)
    few = shown.size <= 1024
    mesh = ax.pcolormesh(c_edges, r_edges, shown, cmap=cmap, norm=norm,
                         edgecolors=theme.panel if few else "face",
                         linewidth=0.6 if few else 0.0)
    mesh.set_gid(f"tiles:{data.name}" + ("" if not k else ":" + ",".join(map(str, lead_t))))
    _style_axes(ax, theme, 1 if strip else rows, cols, strip)

    # labels: all tiles when few enough, else a regular sample plus the chosen block's
    labelled: list[tuple[int, int]] = []
    aggregated = fr > 1 or fc > 1
    if not aggregated:
        cells = [(i, j) for i in range(gr) for j in range(gc)]
        # at most max_labels labels, and at most ~12 per row/column so that they stay
        # legible: a lattice of every s_r-th row and s_c-th column, offset by half a step
        # so that no sampled label sits on an edge
        lim = 40 if strip else 12
        s_r, s_c = (1 if strip else math.ceil(gr / lim)), math.ceil(gc / lim)
        while math.ceil(gr / s_r) * math.ceil(gc / s_c) > max_labels:
            s_r, s_c = (s_r if strip else s_r + 1), s_c + 1
        cells = [(i, j) for i, j in cells
                 if (i - s_r // 2) % s_r == 0 and (j - s_c // 2) % s_c == 0]
        if block is not None:
            mine = set(zip(*np.nonzero(owners2 == block)))
            cells = sorted(set(cells) | {(int(i), int(j)) for i, j in mine})
        labelled = cells
        # font: fit "b<id>" into the spacing between labels (panel_pt wide in points)
        chars = len(f"b{nb - 1}") + (2 if data.persistent else 0)
        spacing = panel_pt * s_c / max(gc, 1)
        size = max(4.0, min(9.0, 1.1 * spacing / chars,
                            110.0 * min(s_c / max(gc, 1), s_r / max(1 if strip else gr, 1))))
        rot = 90 if strip and gc / s_c > 16 else 0
        if rot:   # vertical labels need only their line height between neighbours
            size = max(4.0, min(9.0, 0.8 * spacing))
        for i, j in cells:
            tile = lead_t + ((j,) if strip else (i, j))
            color = colors[int(owners2[i, j])]
            ink = "#000000" if _luminance(color) > 0.5 else "#ffffff"
            x = (c_edges[j] + c_edges[j + 1]) / 2
            y = 0.5 if strip else (r_edges[i] + r_edges[i + 1]) / 2
            # partial edge tiles are drawn at their real size: shrink their labels to fit
            frac = min((c_edges[j + 1] - c_edges[j]) / tcol,
                       1.0 if strip else (r_edges[i + 1] - r_edges[i]) / trow)
            ax.text(x, y, data.label(tile).replace(" ", "\n"), ha="center", va="center",
                    fontsize=max(3.5, size * min(1.0, 0.3 + frac)), color=ink, rotation=rot,
                    gid="tile-label", clip_on=True, zorder=4)

    # the order in which the schedule hands out tiles, for swizzled schedules
    path = None
    swizzled = "grouped" in data.schedule or "group_m" in data.schedule
    if swizzled and not aggregated and pos2.size <= 1024:
        order = np.argsort(pos2, axis=None)[: min(pos2.size, 256)]
        ii, jj = np.unravel_index(order, pos2.shape)
        xs = [(c_edges[j] + c_edges[j + 1]) / 2 for j in jj]
        ys = [0.5 if strip else (r_edges[i] + r_edges[i + 1]) / 2 for i in ii]
        (path,) = ax.plot(xs, ys, color=theme.foreground, lw=0.7, alpha=0.35, gid="order-path",
                         zorder=3)
        ax.plot(xs[:1], ys[:1], marker="o", ms=3, color=theme.foreground, alpha=0.7)

    # the chosen block's tiles, outlined
    outlined = []
    if block is not None:
        for t in data.tiles_of(block):
            if k and tuple(t[:k]) != lead_t:
                continue
            b = data.tile_bounds(t)
            (r0, r1), (c0, c1) = ((0, 1), b[0]) if strip else b[-2:]
            ax.add_patch(Rectangle((c0, r0), c1 - c0, r1 - r0, fill=False, lw=2.2,
                                   edgecolor=theme.highlight, gid="block-tiles"))
            outlined.append(t)
    title = data.name
    if k:
        bounds = data.tile_bounds(lead_t + (0,) * (len(data.grid) - k))[:k]
        at = ", ".join(f"{lo}" if hi == lo + 1 else f"{lo}:{hi}" for lo, hi in bounds)
        title = f"{data.name}[{at}, :, :]"
    if aggregated:
        title += f" (every {fr}×{fc}-th tile shown)" if not strip else f" (every {fc}-th tile)"
    elif len(labelled) < gr * gc:
        title += f" ({len(labelled)} of {gr * gc} tiles labelled)"
    ax.set_title(title, fontsize=9)
    return {"lead": lead, "owners": shown, "row_edges": r_edges, "col_edges": c_edges,
            "labelled": labelled, "aggregated": aggregated, "outlined": outlined,
            "path": None if path is None else list(zip(*path.get_data()))}


def _partition_section(sub: Any, data: OwnershipData, theme: Theme, *, block: int | None,
                       max_tiles: int, max_labels: int, max_panels: int) -> dict[str, Any]:
    colors = owner_colors(data.num_blocks, theme)
    if len(data.grid) >= 3:
        # rank 3: one slab per leading tile index; ranks 4 and 5: one per leading pair or
        # triple (small multiples of the last two tile dimensions)
        lead_rank = len(data.grid) - 2
        prefer = None
        if block is not None:
            prefer = np.zeros(data.grid[:lead_rank], bool)
            for t in data.tiles_of(block):
                prefer[tuple(t[:lead_rank])] = True
        leads, total = _choose_panels(data.grid, lead_rank, max_panels, prefer)
        axes = _panel_grid(sub, len(leads), strip=False)
        per_row = math.ceil(math.sqrt(len(leads)))
        panels = [_tile_panel(ax, data, lead[0] if lead_rank == 1 else lead, colors, theme,
                              block=block,
                              max_tiles=max(16, max_tiles // len(leads)),
                              max_labels=max(8, max_labels // len(leads)),
                              panel_pt=230.0 / per_row)
                  for ax, lead in zip(axes, leads)]
        more = f"; {len(leads)} of {total} slabs shown" if len(leads) < total else ""
    else:
        ax = _panel_grid(sub, 1, strip=len(data.grid) == 1)[0]
        panels = [_tile_panel(ax, data, None, colors, theme, block=block,
                              max_tiles=max_tiles, max_labels=max_labels)]
        more = ""
    sub.suptitle(_wrap(data.describe() + more, 58), fontsize=9)
    return {"kind": "partition", "name": data.name, "owners": data.owners,
            "position": data.position, "num_blocks": data.num_blocks, "colors": colors,
            "schedule": data.schedule, "panels": panels, "block": block,
            "block_tiles": data.tiles_of(block) if block is not None else []}


# ============================================================================ element panels

def _element_section(sub: Any, name: str, values: np.ndarray, cmap_colors: list,
                     theme: Theme, *, title: str, gid: str, max_panels: int,
                     max_cells: int, prefer: np.ndarray | None) -> dict[str, Any]:
    """Small multiples of an element-level category array (0 = background)."""
    from matplotlib.colors import BoundaryNorm, ListedColormap

    lead_rank = max(values.ndim - 2, 0)
    leads, total = _choose_panels(values.shape, lead_rank, max_panels, prefer)
    strip = values.ndim <= 1
    axes = _panel_grid(sub, len(leads), strip=strip)
    n = len(cmap_colors)
    cmap = ListedColormap(cmap_colors)
    norm = BoundaryNorm(np.arange(n + 1) - 0.5, n)
    panels = []
    for ax, lead in zip(axes, leads):
        plane, _ = _as_2d(values[lead] if lead_rank else values)
        coarse, r_edges, c_edges = _reduce(plane, max(1, max_cells // len(leads)),
                                           np.maximum)
        if strip:
            r_edges = [0, 1]
        masked = np.ma.masked_equal(coarse, 0)
        mesh = ax.pcolormesh(c_edges, r_edges, masked, cmap=cmap, norm=norm)
        mesh.set_gid(gid + ("" if not lead_rank else ":" + ",".join(map(str, lead))))
        _style_axes(ax, theme, plane.shape[0] if not strip else 1, plane.shape[1], strip)
        if lead_rank:
            ax.set_title(f"{name}[{', '.join(map(str, lead))}, :, :]", fontsize=8)
        panels.append({"lead": lead, "values": coarse, "row_edges": r_edges,
                       "col_edges": c_edges, "exact": coarse.shape == plane.shape})
    more = f" ({len(leads)} of {total} slices shown)" if len(leads) < total else ""
    sub.suptitle(title + more, fontsize=9)
    return {"name": name, "panels": panels, "lead_rank": lead_rank}


def _bbox_text(name: str, mask: np.ndarray) -> str:
    """``a[64:128, 0:192]`` when the mask is exactly a box, else a count within its box."""
    if not mask.any():
        return f"nothing of {name}"
    idx = np.nonzero(mask)
    bounds = [(int(i.min()), int(i.max()) + 1) for i in idx]
    box = _slice_text(name, bounds)
    volume = math.prod(b - a for a, b in bounds)
    count = int(mask.sum())
    return box if count == volume else f"{count:,} elements within {box}"


def _input_names(trace: Any, kernel: Any, exclude: Sequence[str] = ()) -> list[str]:
    """The shared inputs: tl.In (or unannotated) parameters, else arrays nobody wrote."""
    params = getattr(getattr(getattr(kernel, "definition", None), "analysis", None),
                     "params", None)
    if params is not None:
        names = [p.name for p in params if p.kind in ("In", "auto")]
    else:
        written = {a.arg for b in trace.blocks for a in b.accesses if a.kind != "read"}
        names = [n for n in trace.args if n not in written]
    return [n for n in names if n in trace.args and n not in exclude]


def _reads_section(sub: Any, trace: Any, arg: str, block: int, color: Any, theme: Theme, *,
                   max_panels: int, max_cells: int) -> dict[str, Any]:
    mask = trace.footprint(arg, block=block, kind="read")
    info = trace.args[arg]
    what = _bbox_text(arg, mask)
    title = (f"{arg}: {_fmt_dims(info.shape)} {info.dtype}, shared input\n"
             f"{_block_name(trace, block)} reads {what}")
    lead_rank = max(mask.ndim - 2, 0)
    prefer = mask.reshape(mask.shape[:lead_rank] + (-1,)).any(-1) if lead_rank else None
    out = _element_section(sub, arg, mask.astype(np.int8), [theme.empty, color], theme,
                           title=title, gid=f"reads:{arg}", max_panels=max_panels,
                           max_cells=max_cells, prefer=prefer)
    out.update(kind="reads", block=block, mask=mask, description=what)
    return out


# ============================================================================ figures

def _section_widths(kinds: list[tuple[int, int]]) -> list[float]:
    return [max(0.6, min(2.0, cols / max(rows, 1))) ** 0.5 for rows, cols in kinds]


def _height(shapes: Sequence[Sequence[int]]) -> float:
    """Figure height: low for strips (1-D), taller for many small multiples."""
    if all(len(s) <= 1 for s in shapes):
        return 2.8
    return 4.8 if all(len(s) <= 2 for s in shapes) else 5.6


def _extent(shape: Sequence[int]) -> tuple[int, int]:
    if len(shape) <= 1:
        return 1, int(shape[0]) if shape else 1
    return int(shape[-2]), int(shape[-1])


def _kernel_name(kernel: Any, trace: Any) -> str | None:
    if kernel is not None:
        return kernel if isinstance(kernel, str) else getattr(kernel, "name", None)
    return getattr(trace, "kernel", None)


def _partition_name(partition: Any, trace: Any, kernel: Any) -> str:
    """The parameter name of a partition: the written argument of its shape."""
    params = getattr(getattr(getattr(kernel, "definition", None), "analysis", None),
                     "params", None)
    shape = tuple(partition.tensor.shape)
    if trace is not None:
        writers = [p.name for p in params or [] if p.kind in ("Out", "InOut")]
        candidates = writers or [n for n in trace.args
                                 if any(a.arg == n and a.kind == "write"
                                        for b in trace.blocks for a in b.accesses)]
        for n in candidates:
            if n in trace.args and tuple(trace.args[n].shape) == shape:
                return n
    if params is not None:
        outs = [p.name for p in params if p.kind in ("Out", "InOut")]
        if len(outs) == 1:
            return outs[0]
    return "tensor"


def ownership_figure(partition: Any, *, trace: Any = None, block: Any = None,
                     kernel: Any = None, max_tiles: int = 4096, theme: "Theme | str | None" = None,
                     name: str | None = None, num_blocks: int | None = None,
                     inputs: Sequence[str] | None = None, max_labels: int = 256,
                     max_panels: int = 12, max_cells: int = 250_000) -> "Figure":
    """The tile grid of ``partition`` colored by owning block, labelled ``b<owner>`` (and
    ``#k`` = the block's k-th tile for persistent schedules), partial edge tiles at their
    real size; swizzled schedules also show the order path. With ``block``, that block's
    tiles are outlined; with a ``trace`` (of a launch over this partition), one more panel
    per shared input shows what ``block`` read, in the block's color.

    ``block`` is a linear block id or ``(x, y, z)`` (default with a trace: the first block
    that ran); ``kernel`` (a ``tl.kernel`` or its name) tells inputs from outputs;
    ``inputs`` picks the input arguments (None: every ``tl.In``; ``()``: none). Tile grids
    beyond ``max_tiles`` are drawn every f-th tile; beyond ``max_labels`` tiles only a
    sample is labelled; 3-D partitions become small multiples over their leading tile
    index, 4-D and 5-D ones over their two or three leading tile indices (at most
    ``max_panels``).

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

    extents = [_extent(data.shape)] + [_extent(trace.args[a].shape) for a in inputs]
    widths = _section_widths(extents)
    with themed(t):
        fig = new_figure(t, figsize=(min(4.6 * sum(widths) + 0.4, 20),
                                     _height([data.shape] + [trace.args[a].shape
                                                             for a in inputs])))
        subs = fig.subfigures(1, len(extents), width_ratios=widths, squeeze=False)[0]
        sections = [_partition_section(subs[0], data, t, block=linear, max_tiles=max_tiles,
                                       max_labels=max_labels, max_panels=max_panels)]
        colors = sections[0]["colors"]
        for sub, arg in zip(subs[1:], inputs):
            sections.append(_reads_section(sub, trace, arg, linear, colors[linear], t,
                                           max_panels=max_panels, max_cells=max_cells))
        kname = _kernel_name(kernel, trace)
        head = f"{kname}: " if kname else ""
        if inputs:
            mine = data.tiles_of(linear)
            plural = "s" if len(mine) > 1 else ""
            head += (f"{_block_name(trace, linear)} owns tile{plural} "
                     f"{', '.join(map(str, mine))} of {label} and reads the highlighted regions")
        else:
            head += f"which block owns which tile of {label}"
        if trace is not None and getattr(trace, "sampled", False):
            head += " (sampled trace)"
        fig.suptitle(head, fontsize=10)
    fig.tilelab = {"kind": "ownership", "kernel": kname, "block": linear,
                   "sections": sections, "inputs": inputs, "theme": t.name}
    return fig


def reads_figure(trace: Any, block: Any = None, inputs: Sequence[str] | None = None, *,
                 kernel: Any = None, theme: "Theme | str | None" = None,
                 max_panels: int = 12, max_cells: int = 250_000) -> "Figure":
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
    extents = [_extent(trace.args[a].shape) for a in names]
    widths = _section_widths(extents)
    color = t.palette[0]
    with themed(t):
        fig = new_figure(t, figsize=(min(4.6 * sum(widths) + 0.4, 20),
                                     _height([trace.args[a].shape for a in names])))
        subs = fig.subfigures(1, len(names), width_ratios=widths, squeeze=False)[0]
        sections = [_reads_section(sub, trace, a, linear, color, t, max_panels=max_panels,
                                   max_cells=max_cells) for sub, a in zip(subs, names)]
        fig.suptitle(f"{trace.kernel}: what {_block_name(trace, linear)} reads", fontsize=10)
    fig.tilelab = {"kind": "reads", "kernel": trace.kernel, "block": linear,
                   "sections": sections, "inputs": names, "theme": t.name}
    return fig


# ============================================================================ races

@dataclass(frozen=True)
class RaceData:
    """Per element of one argument: how many blocks wrote it, and where blocks conflict.

    Attributes:
        arg: the argument. writers: int array, the number of distinct blocks that wrote
        each element. write_write: bool array, written by two or more blocks.
        read_write: bool array, written by exactly one block and read by another.
        blocks: linear ids of the blocks whose writes or reads take part in a race.
        races: the trace's :class:`~tilelab.interp.Race` records of this argument.

    Example:
        >>> import numpy as np, cuda.tile as ct
        >>> from tilelab.interp import interpret
        >>> @ct.kernel
        ... def same_tile(x, T: ct.Constant[int]):
        ...     ct.store(x, (0,), ct.full((T,), 1.0, ct.float32))
        >>> d = race_data(interpret(same_tile, np.zeros(8, np.float32), 4, grid=(2,)), "x")
        >>> int(d.write_write.sum()), d.blocks
        (4, [0, 1])
    """

    arg: str
    writers: np.ndarray
    write_write: np.ndarray
    read_write: np.ndarray
    blocks: list[int]
    races: list[Any]

    @property
    def categories(self) -> np.ndarray:
        """0 untouched, 1 written by one block, 2 read-write race, 3 write-write race.

        Example:
            >>> d = RaceData("x", np.array([0, 1, 2]), np.array([False, False, True]),
            ...              np.array([False, True, False]), [0, 1], [])
            >>> d.categories.tolist()
            [0, 2, 3]
        """
        out = (self.writers > 0).astype(np.int8)
        out[self.read_write] = 2
        out[self.write_write] = 3
        return out


def _regions(acc: Any) -> tuple[Any, bool]:
    """An access as an index into a C-contiguous array: (slices, True) or (flat idx, False)."""
    if acc.box is not None:
        return tuple(slice(a, b) for a, b in acc.box), True
    return np.unique(acc.indices), False


def race_data(trace: Any, arg: str) -> RaceData:
    """Count, per element of ``arg``, the distinct blocks that wrote it (atomics excluded,
    as for race detection) and mark write-write and read-write conflicts.

    Example:
        >>> import numpy as np, cuda.tile as ct
        >>> from tilelab.interp import interpret
        >>> @ct.kernel
        ... def own(x, T: ct.Constant[int]):
        ...     ct.store(x, (ct.bid(0),), ct.full((T,), 1.0, ct.float32))
        >>> race_data(interpret(own, np.zeros(8, np.float32), 4, grid=(2,)), "x").blocks
        []
    """
    shape = tuple(trace._check_arg(arg).shape)
    writers = np.zeros(shape, np.int32)
    last = np.full(shape, -1, np.int64)
    flat_w, flat_l = writers.reshape(-1), last.reshape(-1)
    for rec in trace.blocks:
        for acc in rec.accesses:
            if acc.arg != arg or acc.kind != "write":
                continue
            where, box = _regions(acc)
            if box:
                lv, wv = last[where], writers[where]
                fresh = lv != rec.linear
                wv[fresh] += 1
                lv[fresh] = rec.linear
            else:
                idx = where[flat_l[where] != rec.linear]
                flat_w[idx] += 1
                flat_l[idx] = rec.linear
    ww = writers >= 2
    rw = np.zeros(shape, bool)
    flat_rw = rw.reshape(-1)
    involved: set[int] = set()
    for rec in trace.blocks:
        for acc in rec.accesses:
            if acc.arg != arg or acc.kind == "atomic":
                continue
            where, box = _regions(acc)
            sel = (lambda a: a[where]) if box else (lambda a: a.reshape(-1)[where])
            if acc.kind == "write":
                if sel(ww).any():
                    involved.add(rec.linear)
                continue
            other = (sel(writers) == 1) & (sel(last) != rec.linear)
            if other.any():
                involved.add(rec.linear)
                involved.update(int(b) for b in np.unique(sel(last)[other]))
                if box:
                    rw[where] |= other
                else:
                    flat_rw[where[other]] = True
    races = [r for r in getattr(trace, "races", []) if r.arg == arg]
    return RaceData(arg, writers, ww, rw & ~ww, sorted(involved), races)


def race_figure(trace: Any, arg: str, *, theme: "Theme | str | None" = None,
                max_panels: int = 12, max_cells: int = 250_000) -> "Figure":
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
    from matplotlib.patches import Patch

    t = get_theme(theme)
    d = race_data(trace, arg)
    info = trace.args[arg]
    n_ww, n_rw = int(d.write_write.sum()), int(d.read_write.sum())
    colors = [t.empty, "#8fa9c4" if t.name == "light" else "#4a6a8a", t.race_read, t.race]
    names = [_block_name(trace, b).replace("block ", "") for b in d.blocks[:6]]
    who = ", ".join(names) + (f" and {len(d.blocks) - 6} more" if len(d.blocks) > 6 else "")
    if n_ww or n_rw:
        title = (f"{trace.kernel}: {n_ww:,} elements of '{arg}' written by more than one "
                 f"block" + (f", {n_rw:,} read while another block writes them" if n_rw else "")
                 + f"\n{len(d.blocks)} blocks involved: {who}")
        loc = d.races[0].locations[1] if d.races else None
        if loc is not None:
            title += f"\nthe racing access: {os.path.basename(loc.filename)}, line {loc.line}"
    else:
        scope = " among the sampled blocks" if getattr(trace, "sampled", False) else ""
        title = f"{trace.kernel}: no block writes what another block touches in '{arg}'{scope}"
    cats = d.categories
    lead_rank = max(cats.ndim - 2, 0)
    prefer = (cats >= 2).reshape(cats.shape[:lead_rank] + (-1,)).any(-1) if lead_rank else None
    rows, cols = _extent(info.shape)
    with themed(t):
        fig = new_figure(t, figsize=(max(5.0, min(4.6 * _section_widths([(rows, cols)])[0] + 2.6,
                                                  14)), _height([info.shape]) + 0.8))
        sub = fig.subfigures(1, 1)
        section = _element_section(sub, arg, cats, colors, t,
                                   title=f"{arg}: {_fmt_dims(info.shape)} {info.dtype}",
                                   gid=f"race:{arg}", max_panels=max_panels,
                                   max_cells=max_cells, prefer=prefer)
        handles = [Patch(color=colors[3], label="written by ≥ 2 blocks (race)"),
                   Patch(color=colors[2], label="written by one block, read by another"),
                   Patch(color=colors[1], label="written by one block"),
                   Patch(facecolor=colors[0], edgecolor=t.muted, label="not written")]
        fig.legend(handles=handles, loc="outside lower center", ncols=2, fontsize=8)
        fig.suptitle(title, fontsize=10)
    section.update(kind="race", write_write=d.write_write, read_write=d.read_write,
                   blocks=d.blocks)
    fig.tilelab = {"kind": "race", "kernel": trace.kernel, "arg": arg, "sections": [section],
                   "blocks": d.blocks, "write_write": n_ww, "read_write": n_rw,
                   "theme": t.name}
    return fig


# ============================================================================ launches

def cpu_copy(value: Any, persistent_blocks: int | None = None) -> Any:
    """A host copy of a launch argument: tensors and numpy arrays are copied, partitions
    re-made over a copy (an open persistent schedule gets ``persistent_blocks`` blocks, to
    mirror a GPU launch), anything else returned as is.

    Example:
        >>> import tilelab as tl
        >>> p = tl.zeros(64, device="cpu").partition(16, schedule=tl.persistent())
        >>> q = cpu_copy(p, 3)
        >>> q.schedule, q.tensor is p.tensor
        (Persistent(num_blocks=3, group_m=None), False)
    """
    from tilelab.compiler.language import Persistent
    from tilelab.runtime.partition import Partition
    from tilelab.runtime.tensor import Tensor

    if isinstance(value, Partition):
        sched = value.schedule
        if isinstance(sched, Persistent) and sched.num_blocks is None and persistent_blocks:
            sched = Persistent(num_blocks=persistent_blocks, group_m=sched.group_m)
        return Partition(cpu_copy(value.tensor, None), value.tile_shape, sched)
    if isinstance(value, Tensor):
        return value.clone() if value.device == "cpu" else value.to("cpu")
    if isinstance(value, np.ndarray):
        return value.copy()
    return value


def trace_args(kernel: Any, args: Sequence[Any], *, grid: Sequence[int] | None = None,
               sample_blocks: int | None = None, max_bytes: int = 4 << 30,
               count_only: bool = False) -> Any:
    """Trace ``kernel(*args)`` on the CPU interpreter using *copies* of the arguments
    (GPU tensors are copied to the host; nothing of the caller's is written, so
    ``tl.InOut`` arguments are not updated twice). Persistent partitions that leave
    ``num_blocks`` open keep the block count of their own device (or of ``grid``).
    ``sample_blocks`` runs only that many blocks (bytes and FLOPs are extrapolated);
    ``count_only`` traces persistent partitions with one block per tile (see
    :func:`trace_launch`).

    Example:
        >>> import tilelab as tl
        >>> from tilelab.kernels.examples import vector_add
        >>> x = tl.ones(64, device="cpu"); z = tl.zeros(64, device="cpu")
        >>> tr = trace_args(vector_add, (z.partition(16), x, x))
        >>> tr.num_blocks, float(z.numpy().sum())        # z itself was not written
        (4, 0.0)
    """
    from tilelab.compiler.language import Persistent
    from tilelab.runtime.interpret import interpret
    from tilelab.runtime.partition import Partition
    from tilelab.runtime.tensor import Tensor

    total = 0
    for a in args:
        t = a.tensor if isinstance(a, Partition) else a
        total += int(getattr(t, "nbytes", 0)) if isinstance(t, (Tensor, np.ndarray)) else 0
    name = getattr(kernel, "name", getattr(kernel, "__name__", "kernel"))
    if total > max_bytes:
        raise ValueError(f"tracing {name} would copy {total / 2**30:.1f} GiB of arguments "
                         f"to the host (limit {max_bytes / 2**30:.1f} GiB); trace a smaller "
                         "problem")
    blocks = int(np.prod(tuple(grid))) if grid is not None else None
    if blocks is None:
        open_persistent = [a for a in args if isinstance(a, Partition)
                           and isinstance(a.schedule, Persistent) and not a.schedule.num_blocks]
        blocks = open_persistent[0].num_blocks() if open_persistent else None
    copies = [cpu_copy(a, blocks) for a in args]
    if count_only:   # totals do not depend on which block handles a tile
        copies = [Partition(a.tensor, a.tile_shape,
                            Persistent(num_blocks=a.num_tiles, group_m=a.schedule.group_m))
                  if isinstance(a, Partition) and isinstance(a.schedule, Persistent) else a
                  for a in copies]
    has_partition = any(isinstance(a, Partition) for a in copies)
    # Race detection keeps an owner map per element of every argument: worth it for
    # unsafe kernels and small problems, not for counting the work of a large launch.
    options = getattr(kernel, "options", None)
    races = not count_only and (getattr(options, "unsafe", True) or total <= 256 << 20)
    return interpret(kernel, *copies, grid=None if has_partition or grid is None else grid,
                     sample_blocks=sample_blocks, races=races)


def trace_launch(event: Any, *, sample_blocks: int | None = None,
                 max_bytes: int = 4 << 30, count_only: bool = False) -> Any:
    """Re-run a recorded launch on the CPU interpreter, on copies of its arguments (see
    :func:`trace_args`), and return the trace: GPU launches carry none, and the ownership
    and race figures need one.

    ``count_only=True`` is for bytes and FLOPs only: a persistent launch is then traced
    with one block per tile (its totals do not depend on which block handles a tile), so
    a sampled block costs one tile of interpretation rather than tiles / SMs of them.

    Example:
        >>> import tilelab as tl
        >>> from tilelab.kernels.examples import vector_add
        >>> from tilelab.runtime.events import subscribe
        >>> seen = []; stop = subscribe(seen.append)
        >>> x = tl.ones(64, device="cpu"); z = tl.empty(64, device="cpu")
        >>> vector_add(z.partition(16), x, x); stop()
        >>> trace_launch(seen[0]).num_blocks
        4
    """
    return trace_args(event.kernel, event.args, grid=event.grid, sample_blocks=sample_blocks,
                      max_bytes=max_bytes, count_only=count_only)


def ownership_figures(event: Any, trace: Any = None, block: Any = None, *,
                      theme: "Theme | str | None" = None,
                      max_tiles: int = 4096) -> list["Figure"]:
    """Every ownership picture of one launch: one figure per partitioned argument (the
    first also shows what ``block`` read of each ``tl.In`` argument when a trace is at
    hand), a reads figure for launches without partitions, and a race figure per argument
    the trace found races on.

    ``trace`` defaults to ``event.trace`` (CPU launches that traced); for GPU launches pass
    :func:`trace_launch(event) <trace_launch>` to see reads.

    Example:
        >>> import tilelab as tl
        >>> from tilelab.kernels.examples import vector_add
        >>> from tilelab.runtime.events import subscribe
        >>> seen = []; stop = subscribe(seen.append)
        >>> x = tl.ones(64, device="cpu"); z = tl.empty(64, device="cpu")
        >>> vector_add(z.partition(16), x, x); stop()
        >>> [f.tilelab["kind"] for f in ownership_figures(seen[0], theme="light")]
        ['ownership']
    """
    from tilelab.runtime.partition import Partition

    trace = trace if trace is not None else getattr(event, "trace", None)
    kernel = event.kernel
    params = kernel.definition.analysis.params
    parts = [(p.name, a) for p, a in zip(params, event.args) if isinstance(a, Partition)]
    blocks = int(np.prod(tuple(event.grid)))
    if trace is not None and blocks != trace.num_blocks:
        raise ValueError(f"the trace ran {trace.num_blocks} blocks but the launch had "
                         f"{blocks}; trace this launch with trace_launch(event)")
    figs = []
    for i, (name, part) in enumerate(parts):
        figs.append(ownership_figure(part, trace=trace, block=block, kernel=kernel,
                                     name=name, num_blocks=blocks, theme=theme,
                                     max_tiles=max_tiles, inputs=None if i == 0 else ()))
    if not parts and trace is not None and _input_names(trace, kernel):
        figs.append(reads_figure(trace, block, kernel=kernel, theme=theme))
    if trace is not None:
        for arg in dict.fromkeys(r.arg for r in trace.races):
            if arg in trace.args:
                figs.append(race_figure(trace, arg, theme=theme))
    return figs
