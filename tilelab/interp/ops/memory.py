"""Tile-space memory ops: ``ct.load``, ``ct.store``, ``ct.num_tiles`` and tiled views.

``ct.load``/``ct.store`` address the *tile space* of an array (``order`` permutes the axes
first). Elements of a partial tile outside the array are padded on load (per
``padding_mode``; ``UNDETERMINED`` pads with zeros, as TMA does) and dropped on store. A
tile entirely outside the array, or partly outside with ``check_bounds=False``, is
undefined behaviour in cuTile, so the interpreter raises LaunchError there. Every access
is recorded as a box of the argument when tracing is on.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from cuda.tile import MemoryOrder, MemoryScope, PaddingMode
from tilelab.interp.context import active, compile_error, launch_error
from tilelab.interp.ops.elementwise import const_array
from tilelab.interp.ops.memory_args import (as_array, as_flag, assign, axis_order,
                                            check_hints, check_index_types,
                                            check_memory_semantics, padding_fill,
                                            padding_mode_value, stored_values, tile_index,
                                            view_values)
from tilelab.interp.ops.shapes import constant_int, constant_shape, normalize_axis
from tilelab.interp.values.arrays import Array, TiledView, index_value
from tilelab.interp.values.dtypes import INT32, check_implicit_cast
from tilelab.interp.values.methods import method
from tilelab.interp.values.rounding import convert
from tilelab.interp.values.tile import Tile

__all__ = ["load", "store", "num_tiles", "tiled_view_load", "tiled_view_store", "clip_box",
           "box_size", "tile_origin", "padding_mode_value"]


def clip_box(arr: Array, starts: list[int], sizes: tuple[int, ...], check_bounds: bool,
             op: str) -> tuple[tuple, tuple, tuple, bool]:
    """(box, array slices, tile slices, fully inside) of a tile at element ``starts``."""
    shape = arr._data.shape
    lo = [max(s, 0) for s in starts]
    hi = [min(s + n, d) for s, n, d in zip(starts, sizes, shape)]
    if any(stop <= start for start, stop in zip(lo, hi)):
        raise launch_error(
            f"{op}: the tile at element offset {tuple(starts)} with shape {tuple(sizes)} lies "
            f"entirely outside array '{arr._root.name}' of shape {shape}; cuTile leaves this "
            f"undefined",
            hint="check the tile index (e.g. the grid is larger than the number of tiles)")
    inside = all(s >= 0 and s + n <= d for s, n, d in zip(starts, sizes, shape))
    if not inside and not check_bounds:
        raise launch_error(
            f"{op}: check_bounds=False but the tile at element offset {tuple(starts)} with "
            f"shape {tuple(sizes)} extends beyond array '{arr._root.name}' of shape {shape} "
            f"(undefined behaviour on the GPU)",
            hint="drop check_bounds=False, or make the array a multiple of the tile shape")
    box = tuple(zip(lo, hi))
    clipped = tuple(slice(start, stop) for start, stop in box)
    inner = tuple(slice(a - s, b - s) for s, a, b in zip(starts, lo, hi))
    return box, clipped, inner, inside


def box_size(box: tuple) -> int:
    """Number of elements of a box ``((start, stop), ...)``."""
    return math.prod(stop - start for start, stop in box)


def _read_box(arr: Array, starts: list[int], sizes: tuple[int, ...], pad: np.ndarray,
              check_bounds: bool, op: str) -> tuple[np.ndarray, np.ndarray | None]:
    """The values of a tile of ``arr`` and its useful-lane mask (None: all in bounds)."""
    box, clipped, inner, inside = clip_box(arr, starts, sizes, check_bounds, op)
    data = arr._data
    valid = None
    if inside:
        out = np.array(data[clipped], dtype=data.dtype, copy=True)
    else:
        out = np.full(sizes, pad, dtype=data.dtype)
        out[inner] = data[clipped]
        state = active()
        if state is not None and state.tracer is not None:  # (only FLOP counts use it)
            valid = np.zeros(sizes, bool)
            valid[inner] = True
    arr.trace("read", op, box, box_size(box))
    return out, valid


def _write_box(arr: Array, starts: list[int], values: np.ndarray, check_bounds: bool,
               op: str) -> None:
    box, clipped, inner, _inside = clip_box(arr, starts, values.shape, check_bounds, op)
    assign(arr, clipped, values[inner], op)
    arr.trace("write", op, box, box_size(box))


def tile_origin(index: list[int], steps: tuple[int, ...], order: tuple[int, ...],
                sizes_tile: tuple[int, ...]) -> tuple[list[int], tuple[int, ...]]:
    """Element offsets and sizes per *array* axis of the tile at ``index``."""
    ndim = len(order)
    inv = [0] * ndim
    for a, d in enumerate(order):
        inv[d] = a
    starts = [index[inv[d]] * steps[inv[d]] for d in range(ndim)]
    sizes = tuple(sizes_tile[inv[d]] for d in range(ndim))
    return starts, sizes


def _load(arr: Array, index: list[int], shape: tuple[int, ...], order: tuple[int, ...],
          steps: tuple[int, ...] | None, padding: PaddingMode, check_bounds: bool,
          op: str) -> Tile:
    full = shape if shape else (1,) * arr.ndim
    steps = full if steps is None else steps
    starts, sizes = tile_origin(index, steps, order, full)
    pad = padding_fill(padding, arr.dtype, op)
    values, valid = _read_box(arr, starts, sizes, pad, check_bounds, op)
    if valid is not None:
        valid = np.transpose(valid, order).reshape(shape)
    return Tile(np.transpose(values, order).reshape(shape), arr.dtype, False, valid)


def _store(arr: Array, index: list[int], values: np.ndarray, order: tuple[int, ...],
           steps: tuple[int, ...] | None, check_bounds: bool, op: str) -> None:
    full = values.shape
    steps = full if steps is None else steps
    starts, _sizes = tile_origin(index, steps, order, full)
    inv = [0] * len(order)
    for a, d in enumerate(order):
        inv[d] = a
    _write_box(arr, starts, np.transpose(values, inv), check_bounds, op)


def load(array, /, index, shape, *, order="C", padding_mode=PaddingMode.UNDETERMINED,
         check_bounds=True, latency=None, allow_tma=None, memory_order=MemoryOrder.WEAK,
         memory_scope=MemoryScope.NONE) -> Tile:
    """The tile at ``index`` of ``array``'s tile space of ``shape``."""
    op = "ct.load"
    arr = as_array(array, op)
    check_index_types(index, "load")
    idx = tile_index(index, arr.ndim, op)
    sh = constant_shape(shape, "shape", allow_single_int=True, expected_rank=arr.ndim,
                        allow_0d=True, function="load")
    perm = axis_order(order, arr.ndim, op)
    mode = padding_mode_value(padding_mode)
    check_hints(latency, allow_tma)
    check_memory_semantics("tile_load", memory_order, memory_scope,
                           (MemoryOrder.RELAXED, MemoryOrder.ACQUIRE, MemoryOrder.WEAK))
    return _load(arr, idx, sh, perm, None, mode, as_flag(check_bounds, "check_bounds"), op)


def store(array, /, index, tile, *, order="C", check_bounds=True, latency=None,
          allow_tma=None, memory_order=MemoryOrder.WEAK,
          memory_scope=MemoryScope.NONE) -> None:
    """Store ``tile`` at ``index`` of ``array``'s tile space (shape taken from the tile)."""
    op = "ct.store"
    arr = as_array(array, op)
    check_index_types(index, "store")
    idx = tile_index(index, arr.ndim, op)
    values, shape = stored_values(tile, arr.dtype,
                                  "Stored tile is incompatible with array's dtype")
    if len(shape) == 0:
        values = values.reshape((1,) * arr.ndim)
    elif len(shape) != arr.ndim:
        raise compile_error(f"{op}: the rank of the tile ({len(shape)}) must match the rank of "
                            f"the array ({arr.ndim}), unless it is a scalar")
    perm = axis_order(order, arr.ndim, op)
    check_hints(latency, allow_tma)
    check_memory_semantics("tile_store", memory_order, memory_scope,
                           (MemoryOrder.RELAXED, MemoryOrder.RELEASE, MemoryOrder.WEAK))
    _store(arr, idx, values, perm, None, as_flag(check_bounds, "check_bounds"), op)


def num_tiles(array, /, axis, shape, order="C") -> Tile:
    """Number of tiles of ``shape`` along ``axis`` of the array's tile space (int32)."""
    op = "ct.num_tiles"
    arr = as_array(array, op)
    ax = normalize_axis(constant_int(axis, "axis"), arr.ndim)
    sh = constant_shape(shape, "shape", allow_single_int=True, expected_rank=arr.ndim,
                        allow_0d=True, function="num_tiles")
    full = sh if sh else (1,) * arr.ndim
    perm = axis_order(order, arr.ndim, op)
    n = -(-arr._data.shape[perm[ax]] // full[ax])
    return Tile(np.asarray(n, np.int32), INT32)


# ---- tiled views ----------------------------------------------------------------------------

def tiled_view_load(view: TiledView, index: Any, check_bounds: Any, latency: Any,
                    allow_tma: Any) -> Tile:
    """Implementation of ``TiledView.load``."""
    op = "TiledView.load"
    arr = view._array
    idx = tile_index(index, arr.ndim, op, "tiled view")
    check_hints(latency, allow_tma)
    return _load(arr, idx, view._tile_shape, tuple(range(arr.ndim)), view._steps,
                 padding_mode_value(view._padding), as_flag(check_bounds, "check_bounds"), op)


def tiled_view_store(view: TiledView, index: Any, tile: Any, check_bounds: Any, latency: Any,
                     allow_tma: Any) -> None:
    """Implementation of ``TiledView.store``."""
    op = "TiledView.store"
    arr = view._array
    idx = tile_index(index, arr.ndim, op, "tiled view")
    v, d, full = view_values(view, tile, "Tile")
    check_implicit_cast(d, v, arr.dtype, "Stored tile is incompatible with tiled view's dtype")
    values = const_array(v, arr.dtype) if d is None else convert(v, d, arr.dtype)
    values = np.broadcast_to(values, view._tile_shape).reshape(full)
    check_hints(latency, allow_tma)
    _store(arr, idx, values, tuple(range(arr.ndim)), view._steps,
           as_flag(check_bounds, "check_bounds"), op)


def _is_constant(x: Any) -> bool:
    """Whether an index is a compile-time constant (a Python int or a constant scalar)."""
    if isinstance(x, Tile):
        return x._c and x.ndim == 0
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


# ---- the methods of arrays and tiled views that are memory ops (see
# tilelab.interp.values.methods) -------------------------------------------------------------

@method(Array, "slice")
def _array_slice(self, axis: Any, start: Any, stop: Any) -> "Array":
    """A view restricted to ``[start, stop)`` along ``axis`` (no copy)."""
    ax = normalize_axis(constant_int(axis, "axis"), self.ndim)
    lo = index_value(start, "start")
    hi = index_value(stop, "stop")
    const_lo, const_hi = _is_constant(start), _is_constant(stop)
    if const_lo and lo < 0:
        raise compile_error("Slice start must be non-negative")
    if const_hi and hi < 0:
        raise compile_error("Slice stop must be non-negative")
    if const_lo and const_hi and hi < lo:
        raise compile_error("Slice stop must be greater than or equal to start")
    n = self._data.shape[ax]
    if not (0 <= lo <= hi <= n) or (lo == n and n > 0 and hi > lo):
        raise launch_error(f"Array.slice(axis={ax}, start={lo}, stop={hi}) is outside the "
                           f"array's extent {n} along that axis (undefined behaviour on "
                           f"the GPU)")
    sl = [slice(None)] * self.ndim
    sl[ax] = slice(lo, hi)
    origin = list(self._origin)
    origin[ax] += lo
    # cuTile: constant bounds give the sliced axis a compile-time extent (stop - start)
    static = [i < len(self._static) and self._static[i] for i in range(self.ndim)]
    static[ax] = const_lo and const_hi
    return Array(self._root, self._data[tuple(sl)], tuple(origin), tuple(static))


@method(Array, "tiled_view")
def _array_tiled_view(self, tile_shape: Any, *, padding_mode: Any = PaddingMode.UNDETERMINED,
                      traversal_steps: Any = None) -> "TiledView":
    """A view partitioned into tiles of ``tile_shape`` (see :class:`TiledView`)."""
    shape = constant_shape(tile_shape, "shape", allow_single_int=True,   # (cuTile's name)
                           expected_rank=self.ndim, allow_0d=True)
    padding_mode_value(padding_mode)
    full = shape if shape else (1,) * self.ndim
    if traversal_steps is None:
        steps = full
    else:
        steps = constant_shape(traversal_steps, "traversal_steps", allow_single_int=True,
                               expected_rank=self.ndim, allow_non_pow2=True)
    return TiledView(self, shape, padding_mode, steps)


@method(TiledView, "num_tiles")
def _view_num_tiles(self, axis: Any) -> Tile:
    """Number of tile origins along ``axis``: ``cdiv(shape[axis], step[axis])``."""
    ax = normalize_axis(constant_int(axis, "axis"), self._array.ndim)
    n = -(-self._array._data.shape[ax] // self._steps[ax])
    return Tile(np.asarray(n, np.int32), INT32)


@method(TiledView, "load")
def _view_load(self, index: Any, *, check_bounds: Any = True, latency: Any = None,
               allow_tma: Any = None) -> Tile:
    """The tile at ``index`` (out-of-bounds elements get the view's padding)."""
    return tiled_view_load(self, index, check_bounds, latency, allow_tma)


@method(TiledView, "store")
def _view_store(self, index: Any, tile: Any, *, check_bounds: Any = True, latency: Any = None,
                allow_tma: Any = None) -> None:
    """Store ``tile`` (broadcast to ``tile_shape``) at ``index``; OOB elements are dropped."""
    tiled_view_store(self, index, tile, check_bounds, latency, allow_tma)
