"""Who owns what: the plain data behind the ownership and race pictures.

Why: the pictures in :mod:`tilelab.lab.figures.ownership_svg` must show exactly what the device
does, so the data comes from the very functions the device uses
(:meth:`tilelab.Partition.owners`, :meth:`tilelab.Partition.order`) and from the CPU
interpreter's trace (:meth:`tilelab.interp.Trace.footprint`). This module computes it and
draws nothing.

Example:
    >>> import tilelab as tl
    >>> d = ownership_data(tl.zeros((256, 128), device="cpu").partition(
    ...     (64, 64), schedule=tl.grouped(2)))
    >>> d.owners.tolist()
    [[0, 2], [1, 3], [4, 6], [5, 7]]
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from tilelab.compiler.safety.kinds import is_partition, read_only

__all__ = ["OwnershipData", "ownership_data", "schedule_label", "RaceData", "race_data",
           "block_name", "tile_name"]


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


def _fmt_dims(shape: Sequence[int]) -> str:
    return "×".join(str(int(s)) for s in shape)


def _slice_text(name: str, bounds: Sequence[tuple[int, int]]) -> str:
    parts = [f"{a}" if b == a + 1 else f"{a}:{b}" for a, b in bounds]
    return f"{name}[{', '.join(parts)}]"


def _block_linear(trace: Any, block: Any) -> int:
    """A trace block given as a linear id or (x, y, z), checked to have run."""
    rec = trace.block(block)  # KeyError with the trace's own message if it did not run
    return int(rec.linear)


def block_name(trace: Any, linear: int) -> str:
    """A block as the pictures name it: its linear id, and for 2-D/3-D grids its
    ``ct.bid`` index spelled out (x first, as ``ct.bid(0)``), so it is never confused
    with a tile's ``[row, col]``.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> t = NS(block=lambda i: NS(index=(1, 2, 0)))
        >>> block_name(t, 5)
        'block 5 (bid x=1, y=2)'
    """
    rec = trace.block(linear)
    x, y, z = rec.index
    if (y, z) == (0, 0):
        return f"block {linear}"
    return f"block {linear} (bid x={x}, y={y}" + (f", z={z})" if z else ")")


def tile_name(tile: Sequence[int]) -> str:
    """A tile as the pictures name it: its index in the tile grid, row first (the order
    of the tensor's own indices), in brackets.

    Example:
        >>> tile_name((2, 5))
        'tile [2, 5]'
    """
    return "tile [" + ", ".join(str(int(i)) for i in tile) + "]"


_block_name = block_name


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
        names = [p.name for p in params if read_only(p.kind)]
    else:
        written = {a.arg for b in trace.blocks for a in b.accesses if a.kind != "read"}
        names = [n for n in trace.args if n not in written]
    return [n for n in names if n in trace.args and n not in exclude]


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
        writers = [p.name for p in params or [] if is_partition(p.kind)]
        candidates = writers or [n for n in trace.args
                                 if any(a.arg == n and a.kind == "write"
                                        for b in trace.blocks for a in b.accesses)]
        for n in candidates:
            if n in trace.args and tuple(trace.args[n].shape) == shape:
                return n
    if params is not None:
        outs = [p.name for p in params if is_partition(p.kind)]
        if len(outs) == 1:
            return outs[0]
    return "tensor"


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


