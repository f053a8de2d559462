"""``Tensor.partition(tile_shape, schedule)``: a tensor split into disjoint tiles.

A partition is what a ``tl.Out``/``tl.InOut`` parameter takes: every tile belongs to
exactly one block, so blocks cannot race on it. The schedule only decides *which* block
owns which tile. This module answers that question on the host with the very functions
the lowered kernels call (:mod:`tilelab.compiler.tile_index`), so ownership diagrams and the
device agree.

Block numbers are CUDA's linear block ids (``x + y*gx + z*gx*gy``) of the launch.
Partitions of rank 4 and 5 launch a 1-D grid of one block per tile (persistent: one
block per SM), and the block id is unravelled onto the tile grid.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from tilelab.compiler import tile_index as _tiles
from tilelab.compiler.language import Grouped, Persistent, RowMajor, Schedule, row_major
from tilelab.compiler.signature import PartitionSpec, normalize_tile_shape
from tilelab.compiler.tile_shapes import TileShapeError

__all__ = ["Partition", "TileShapeError"]


def _scheduled_tile(k: int, g: Sequence[int], sched: Schedule) -> tuple[int, ...]:
    """The tile of grid ``g`` that ``sched`` hands out k-th, by the device's own helpers.

    Row-major and grouped: ``k`` is the block's linear id (CUDA's ``x + y*gx + z*gx*gy``);
    persistent: ``k`` is the loop's tile number (block b takes b, b + num_blocks, ...).
    Ranks 1 to 3 launch a grid of their rank (grouped: (m, n) along x, the batch along
    y); ranks 4 and 5 launch a 1-D grid of ``prod(g)`` blocks and unravel ``k``.
    ``group_m`` (grouped, or persistent with ``group_m``) walks the last two tile
    dimensions in grouped order within each batch of the leading ones.

    Example:
        >>> from tilelab.compiler.language import grouped
        >>> _scheduled_tile(9, (2, 2, 2, 3), grouped(2))
        (0, 1, 1, 1)
    """
    r = len(g)
    gm = getattr(sched, "group_m", None) if isinstance(sched, (Grouped, Persistent)) else None
    if r == 1:
        return (k,)
    if r == 2:
        return (_tiles.grouped_tile_index(k, g[0], g[1], gm) if gm
                else _tiles.unravel_2d(k, g[1]))
    if r == 3:
        per = g[1] * g[2]
        return (_tiles.grouped_tile_index_3d(k // per, k % per, g[1], g[2], gm) if gm
                else _tiles.unravel_3d(k, g[1], g[2]))
    if r == 4:
        return (_tiles.grouped_tile_index_4d(k, g[1], g[2], g[3], gm) if gm
                else _tiles.unravel_4d(k, g[1], g[2], g[3]))
    if r == 5:
        return (_tiles.grouped_tile_index_5d(k, g[1], g[2], g[3], g[4], gm) if gm
                else _tiles.unravel_5d(k, g[1], g[2], g[3], g[4]))
    raise ValueError(f"partitions of rank {r} are not supported")  # pragma: no cover


class Partition:
    """A tensor split into tiles of ``tile_shape``, handed to blocks by ``schedule``.

    Tiles are powers of two (rank 1 to 5); edge tiles may be partial. Make one with
    ``tensor.partition(tile_shape, schedule=...)``; a tile shape that is not one of
    these raises :class:`TileShapeError` at the calling line.

    Attributes:
        tensor: the partitioned tensor. tile_shape: the tile size per dimension.
        schedule: the schedule (``tl.row_major``, ``tl.grouped(...)``,
        ``tl.persistent(...)``). grid: tiles per dimension, partial edge tiles included.

    Example:
        >>> import tilelab as tl
        >>> p = tl.zeros((300, 200), device="cpu").partition((128, 64))
        >>> p.grid, p.num_tiles, p.tile_of((2, 3))
        ((3, 4), 12, (slice(256, 300, None), slice(192, 200, None)))
    """

    __slots__ = ("tensor", "tile_shape", "schedule", "grid", "_spec", "_order", "_pos",
                 "__weakref__")

    def __init__(self, tensor: Any, tile_shape: int | Sequence[int],
                 schedule: Schedule = row_major):
        if type(schedule) not in (RowMajor, Grouped, Persistent):
            raise TypeError(f"schedule must be tl.row_major, tl.grouped(...) or "
                            f"tl.persistent(...) themselves (schedules are a closed set: "
                            f"no subclasses), got {schedule!r} of type "
                            f"{type(schedule).__qualname__}")
        self.tensor = tensor
        self.tile_shape: tuple[int, ...] = normalize_tile_shape(tile_shape, tensor.shape)
        self.schedule = schedule
        #: tiles per dimension (partial edge tiles included)
        self.grid: tuple[int, ...] = tuple(-(-s // t) for s, t in
                                           zip(tensor.shape, self.tile_shape))
        self._spec: PartitionSpec | None = None
        self._order: list[tuple[int, ...]] | None = None
        self._pos: dict[tuple[int, ...], int] | None = None

    _FROZEN = frozenset({"tensor", "tile_shape", "schedule", "grid"})

    def __setattr__(self, name: str, value: Any) -> None:
        # A launch plan (and a check_bounds=False proof) is cached per partition: what
        # it describes cannot change under it.
        if name in Partition._FROZEN and hasattr(self, "grid"):
            raise AttributeError(f"a partition's {name} cannot change; make a new one "
                                 "with tensor.partition(tile_shape, schedule=...)")
        object.__setattr__(self, name, value)

    @property
    def num_tiles(self) -> int:
        """Number of tiles (the product of :attr:`grid`).

        Example:
            >>> import tilelab as tl
            >>> tl.zeros((10, 10), device="cpu").partition((4, 8)).num_tiles
            6
        """
        return math.prod(self.grid)

    @property
    def ndim(self) -> int:
        """Rank of the tensor (and of the tiles).

        Example:
            >>> import tilelab as tl
            >>> tl.zeros((10, 10), device="cpu").partition((4, 8)).ndim
            2
        """
        return len(self.grid)

    def __tilelab_spec__(self) -> PartitionSpec:
        """The compiler's :class:`~tilelab.compiler.signature.PartitionSpec` (cached).

        Example:
            >>> import tilelab as tl
            >>> tl.zeros(1000, device="cpu").partition(256).__tilelab_spec__().grid
            (4,)
        """
        s = self._spec
        array = self.tensor.__tilelab_spec__()
        # identity compares: a spec describes exactly this tensor, tile shape and
        # schedule, even if the slots were rewritten behind __setattr__'s back
        if s is None or s.array is not array or s.tile_shape is not self.tile_shape \
                or s.schedule is not self.schedule:
            s = self._spec = PartitionSpec(array, self.tile_shape, self.schedule)
        return s

    # ---- geometry ---------------------------------------------------------------
    def _check_index(self, index: Any) -> tuple[int, ...]:
        if isinstance(index, (int, np.integer)):
            index = (index,)
        idx = tuple(int(i) for i in index)
        if len(idx) != self.ndim or not all(0 <= i < g for i, g in zip(idx, self.grid)):
            raise IndexError(f"tile index {idx} is outside the tile grid {self.grid}")
        return idx

    def tile_of(self, index: int | Sequence[int]) -> tuple[slice, ...]:
        """The region of the tensor that tile ``index`` covers (clipped at the edges).

        Example:
            >>> import tilelab as tl
            >>> tl.zeros(10, device="cpu").partition(4).tile_of(2)
            (slice(8, 10, None),)
        """
        idx = self._check_index(index)
        return tuple(slice(i * t, min((i + 1) * t, s))
                     for i, t, s in zip(idx, self.tile_shape, self.tensor.shape))

    def view(self, index: int | Sequence[int]) -> Any:
        """The tensor view of tile ``index``.

        Example:
            >>> import tilelab as tl
            >>> tl.arange(10, device="cpu").partition(4).view(1).numpy()
            array([4, 5, 6, 7])
        """
        return self.tensor[self.tile_of(index)]

    # ---- ownership --------------------------------------------------------------
    def _tile_at(self, k: int) -> tuple[int, ...]:
        """The tile the schedule hands out k-th (a block id, or a persistent loop step)."""
        return _scheduled_tile(k, self.grid, self.schedule)

    def order(self) -> list[tuple[int, ...]]:
        """Every tile, in the order the schedule hands tiles to blocks.

        Row-major and grouped: block 0's tile, block 1's, ... Persistent: the loop order
        (block b takes tiles b, b + num_blocks, ...).

        Example:
            >>> import tilelab as tl
            >>> p = tl.zeros((4, 4), device="cpu").partition((1, 2), schedule=tl.grouped(2))
            >>> p.order()[:4]
            [(0, 0), (1, 0), (0, 1), (1, 1)]
        """
        if self._order is None:
            self._order = [self._tile_at(k) for k in range(self.num_tiles)]
        return list(self._order)

    def num_blocks(self, num_blocks: int | None = None) -> int:
        """How many blocks a launch over this partition runs.

        One per tile, except persistent schedules: ``schedule.num_blocks``, else
        ``num_blocks``, else one per SM of the tensor's device (CPU: one per core),
        never more than the tiles.

        Example:
            >>> import tilelab as tl
            >>> tl.zeros(1024, device="cpu").partition(
            ...     64, schedule=tl.persistent(num_blocks=4)).num_blocks()
            4
        """
        if not isinstance(self.schedule, Persistent):
            return self.num_tiles
        n = self.schedule.num_blocks or num_blocks
        if n is None:
            from tilelab.runtime.device import num_sms

            n = num_sms(self.tensor.device)
        return max(1, min(int(n), self.num_tiles))

    def owner(self, tile_index: int | Sequence[int], num_blocks: int | None = None) -> int:
        """The block that owns tile ``tile_index``.

        Example:
            >>> import tilelab as tl
            >>> p = tl.zeros(1024, device="cpu").partition(
            ...     64, schedule=tl.persistent(num_blocks=4))
            >>> [p.owner(i) for i in range(6)]
            [0, 1, 2, 3, 0, 1]
        """
        idx = self._check_index(tile_index)
        if self._pos is None:
            self._pos = {t: k for k, t in enumerate(self.order())}
        k = self._pos[idx]
        if isinstance(self.schedule, Persistent):
            return k % self.num_blocks(num_blocks)
        return k

    def tiles_of(self, block: int, num_blocks: int | None = None) -> list[tuple[int, ...]]:
        """The tiles block ``block`` owns, in the order it handles them.

        Example:
            >>> import tilelab as tl
            >>> p = tl.zeros(8, device="cpu").partition(2, schedule=tl.persistent(2))
            >>> p.tiles_of(1)
            [(1,), (3,)]
        """
        nb = self.num_blocks(num_blocks)
        if not 0 <= block < nb:
            raise IndexError(f"block {block} is outside the launch's {nb} blocks")
        order = self.order()
        if isinstance(self.schedule, Persistent):
            return order[block::nb]
        return [order[block]]

    def owners(self, num_blocks: int | None = None) -> np.ndarray:
        """An int array of shape :attr:`grid`: the owning block of every tile.

        Example:
            >>> import tilelab as tl
            >>> tl.zeros((4, 4), device="cpu").partition((2, 2)).owners()
            array([[0, 1],
                   [2, 3]])
        """
        out = np.empty(self.grid, dtype=np.int64)
        nb = self.num_blocks(num_blocks)
        persistent = isinstance(self.schedule, Persistent)
        for k, t in enumerate(self.order()):
            out[t] = k % nb if persistent else k
        return out

    def __repr__(self) -> str:
        t = self.tensor
        return (f"<tl.Partition of {t.shape} {t.dtype.name} on {t.device} into tiles "
                f"{self.tile_shape}: grid {self.grid} ({self.num_tiles} tiles), "
                f"{self.schedule}>")
