"""Atomic read-modify-write ops: ``ct.atomic_*`` and ``TiledView.atomic_store_*``.

Each element is updated atomically; when one call touches an element several times the
lanes are applied one after the other, so results are those of one valid serialization.
The ops return the old values (``atomic_store_*`` return nothing). Dtype rules are
cuTile's: add/xchg on 32/64-bit ints and floats (add also on f16, and on bf16 from
sm_90: :func:`~tilelab.interp.values.targets.check_atomic_add`), min/max and
bitwise ops on 32/64-bit ints, bitwise updates of exactly the array's dtype. For the race
detector a successful ``atomic_cas`` acquires the words it swapped and ``atomic_xchg``
releases words the block holds (lock hand-over, see :mod:`tilelab.interp.races`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from cuda.tile import MemoryOrder, MemoryScope
from tilelab.interp.context import compile_error
from tilelab.interp.ops.elements import active_lanes, element_indices, trace_lanes
from tilelab.interp.ops.elementwise import const_array, operand
from tilelab.interp.ops.memory import box_size, clip_box, tile_origin
from tilelab.interp.ops.memory_args import (as_array, as_flag, assign, broadcastable,
                                            check_memory_semantics, tile_index,
                                            view_values)
from tilelab.interp.values.arrays import Array, TiledView
from tilelab.interp.values.dtypes import (BFLOAT16, DTYPES, FLOAT16, FLOAT32, TileDType,
                                          check_implicit_cast, loose_dtype)
from tilelab.interp.values.methods import method
from tilelab.interp.values.rounding import convert
from tilelab.interp.values.targets import check_atomic_add
from tilelab.interp.values.tile import Tile

__all__ = ["atomic_cas", "atomic_xchg", "atomic_add", "atomic_max", "atomic_min",
           "atomic_and", "atomic_or", "atomic_xor", "tiled_view_atomic"]

_INT_32_64 = tuple(DTYPES[n] for n in ("int32", "int64", "uint32", "uint64"))
_INT_FLOAT_32_64 = _INT_32_64 + (DTYPES["float32"], DTYPES["float64"])
_RMW_DTYPES = {"xchg": _INT_FLOAT_32_64, "add": _INT_FLOAT_32_64 + (FLOAT16, BFLOAT16),
               "min": _INT_32_64, "max": _INT_32_64, "and": _INT_32_64, "or": _INT_32_64,
               "xor": _INT_32_64}
_BITWISE = ("and", "or", "xor")
_ATOMIC_ORDERS = (MemoryOrder.RELAXED, MemoryOrder.ACQUIRE, MemoryOrder.RELEASE,
                  MemoryOrder.ACQ_REL)


def _combine(mode: str, old: np.ndarray, upd: np.ndarray, dtype: TileDType) -> np.ndarray:
    if mode == "xchg":
        return upd
    if mode == "add":
        if dtype in (FLOAT16, BFLOAT16):
            return convert(old.astype(np.float32) + upd.astype(np.float32), FLOAT32, dtype)
        return np.add(old, upd)
    f = {"max": np.maximum, "min": np.minimum, "and": np.bitwise_and, "or": np.bitwise_or,
         "xor": np.bitwise_xor}[mode]
    return f(old, upd)


def _rmw_update(mode: str, update: Any, shape: tuple, dtype: TileDType, what: str
                ) -> np.ndarray:
    v, d = operand(update, "update")
    if np.shape(v) and not broadcastable(np.shape(v), shape):
        raise compile_error(f"{what} shape {np.shape(v)} is not broadcastable to the index "
                            f"shape {shape}")
    src = d if d is not None else loose_dtype(v)
    if mode in _BITWISE:
        if src is not dtype:
            raise compile_error(f"Bitwise atomic read-modify-write operations require the "
                                f"update dtype ({src}) to exactly match the target dtype "
                                f"({dtype})")
    else:
        check_implicit_cast(d, v, dtype, "Update is incompatible with the target dtype")
    vals = const_array(v, dtype) if d is None else convert(v, d, dtype)
    return np.broadcast_to(vals, shape)


def tiled_view_atomic(mode: str, view: TiledView, index: Any, update: Any) -> None:
    """Atomic ``mode`` of ``update`` into the tile at ``index`` of a tiled view (OOB dropped)."""
    op = f"TiledView.atomic_store_{mode}"
    arr = view._array
    if arr.dtype not in _RMW_DTYPES[mode]:
        raise compile_error(f"{op}: Unsupported tiled view dtype: {arr.dtype}")
    idx = tile_index(index, arr.ndim, op, "tiled view")
    _v, _d, full = view_values(view, update, "Update")
    upd = _rmw_update(mode, update, view._tile_shape, arr.dtype, "Update").reshape(full)
    if mode == "add":
        check_atomic_add(arr.dtype)
    starts, sizes = tile_origin(idx, view._steps, tuple(range(arr.ndim)), full)
    box, clipped, inner, _inside = clip_box(arr, starts, sizes, True, op)
    old = arr._data[clipped]
    assign(arr, clipped, _combine(mode, old, upd[inner], arr.dtype), op)
    arr.trace("atomic", op, box, box_size(box))


def _apply_rmw(arr: Array, coords: tuple, lanes: np.ndarray, new_fn, op: str) -> np.ndarray:
    """Apply ``new_fn(old, lane) -> new`` at ``coords`` (the element of each active lane)
    lane by lane; returns the old values, one per active lane."""
    data = arr._data
    count = int(np.count_nonzero(lanes))
    if count == 0:
        return np.empty((0,), data.dtype)
    if data.ndim == 0:   # no coordinates: every active lane updates the one element
        old = np.empty((count,), data.dtype)
        for lane in range(count):
            old[lane] = data[()]
            assign(arr, (), new_fn(np.asarray(data[()]), lane), op)
        return old
    flat = np.ravel_multi_index(coords, data.shape)
    if np.unique(flat).size == flat.size:
        old = np.array(data[coords], copy=True)
        assign(arr, coords, new_fn(old, slice(None)), op)
        return old
    old = np.empty(flat.shape, data.dtype)
    for lane in range(flat.size):
        at = tuple(c[lane] for c in coords)
        old[lane] = data[at]
        assign(arr, at, new_fn(np.asarray(data[at]), lane), op)
    return old


def _atomic_rmw(mode: str, array: Any, indices: Any, update: Any, check_bounds: Any,
                memory_order: Any, memory_scope: Any) -> Tile:
    op = f"ct.atomic_{mode}"
    arr = as_array(array, op)
    if arr.dtype not in _RMW_DTYPES[mode]:
        raise compile_error(f"{op}: Unsupported array dtype: {arr.dtype}",
                            hint="supported dtypes: " + ", ".join(
                                str(d) for d in _RMW_DTYPES[mode]))
    idx, shape = element_indices(arr, indices, op)
    upd = _rmw_update(mode, update, shape, arr.dtype, "Update")
    check_memory_semantics("tile_atomic_rmw", memory_order, memory_scope, _ATOMIC_ORDERS)
    if mode == "add":
        check_atomic_add(arr.dtype)
    lanes = active_lanes(arr, idx, shape, as_flag(check_bounds, "check_bounds"), None, op)
    coords = trace_lanes(arr, "atomic", op, idx, lanes)
    lane_upd = upd[lanes]
    old = _apply_rmw(arr, coords, lanes,
                     lambda o, k: _combine(mode, o, lane_upd[k], arr.dtype), op)
    out = np.zeros(shape, arr._data.dtype)
    out[lanes] = old
    if mode == "xchg" and old.size:
        arr.sync("release", coords)  # hands over a lock the block holds
    return Tile(out, arr.dtype, False, None if lanes.all() else lanes)


def atomic_xchg(array, indices, update, /, *, check_bounds=True,
                memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE) -> Tile:
    """Atomically store ``update``; returns the old values."""
    return _atomic_rmw("xchg", array, indices, update, check_bounds, memory_order, memory_scope)


def atomic_add(array, indices, update, /, *, check_bounds=True,
               memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE) -> Tile:
    """Atomically add ``update``; returns the old values."""
    return _atomic_rmw("add", array, indices, update, check_bounds, memory_order, memory_scope)


def atomic_max(array, indices, update, /, *, check_bounds=True,
               memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE) -> Tile:
    """Atomic maximum (integers); returns the old values."""
    return _atomic_rmw("max", array, indices, update, check_bounds, memory_order, memory_scope)


def atomic_min(array, indices, update, /, *, check_bounds=True,
               memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE) -> Tile:
    """Atomic minimum (integers); returns the old values."""
    return _atomic_rmw("min", array, indices, update, check_bounds, memory_order, memory_scope)


def atomic_and(array, indices, update, /, *, check_bounds=True,
               memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE) -> Tile:
    """Atomic bitwise and (update dtype must match); returns the old values."""
    return _atomic_rmw("and", array, indices, update, check_bounds, memory_order, memory_scope)


def atomic_or(array, indices, update, /, *, check_bounds=True,
              memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE) -> Tile:
    """Atomic bitwise or; returns the old values."""
    return _atomic_rmw("or", array, indices, update, check_bounds, memory_order, memory_scope)


def atomic_xor(array, indices, update, /, *, check_bounds=True,
               memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE) -> Tile:
    """Atomic bitwise xor; returns the old values."""
    return _atomic_rmw("xor", array, indices, update, check_bounds, memory_order, memory_scope)


def atomic_cas(array, indices, expected, desired, /, *, check_bounds=True,
               memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE) -> Tile:
    """Compare-and-swap (bitwise comparison); returns the old values (``expected`` for
    out-of-bounds lanes)."""
    op = "ct.atomic_cas"
    arr = as_array(array, op)
    if arr.dtype not in _INT_FLOAT_32_64:
        raise compile_error(f"{op}: Unsupported array dtype: {arr.dtype}")
    idx, shape = element_indices(arr, indices, op)
    exp = _rmw_update("cas", expected, shape, arr.dtype, "Expected value")
    des = _rmw_update("cas", desired, shape, arr.dtype, "Desired value")
    check_memory_semantics("tile_atomic_cas", memory_order, memory_scope, _ATOMIC_ORDERS)
    lanes = active_lanes(arr, idx, shape, as_flag(check_bounds, "check_bounds"), None, op)
    coords = trace_lanes(arr, "atomic", op, idx, lanes)
    e, dsr = exp[lanes], des[lanes]
    uint = np.dtype(f"u{arr._data.itemsize}")

    def swap(old: np.ndarray, k: Any) -> np.ndarray:
        same = np.asarray(old).view(uint) == np.asarray(e[k]).view(uint)
        return np.where(same, dsr[k], old)

    old = _apply_rmw(arr, coords, lanes, swap, op)
    out = np.array(exp, copy=True)
    out[lanes] = old
    if old.size:
        won = np.asarray(old).view(uint) == np.asarray(e).view(uint)
        if won.any():  # a successful compare-and-swap acquires the word (locks)
            arr.sync("acquire", tuple(c[won] for c in coords))
    return Tile(out, arr.dtype, False, None if lanes.all() else lanes)


# ---- TiledView's atomic stores (see tilelab.interp.values.methods) ---------------------

@method(TiledView, "atomic_store_add")
def _view_atomic_store_add(self, index: Any, update: Any, /) -> None:
    tiled_view_atomic("add", self, index, update)


@method(TiledView, "atomic_store_max")
def _view_atomic_store_max(self, index: Any, update: Any, /) -> None:
    tiled_view_atomic("max", self, index, update)


@method(TiledView, "atomic_store_min")
def _view_atomic_store_min(self, index: Any, update: Any, /) -> None:
    tiled_view_atomic("min", self, index, update)


@method(TiledView, "atomic_store_and")
def _view_atomic_store_and(self, index: Any, update: Any, /) -> None:
    tiled_view_atomic("and", self, index, update)


@method(TiledView, "atomic_store_or")
def _view_atomic_store_or(self, index: Any, update: Any, /) -> None:
    tiled_view_atomic("or", self, index, update)


@method(TiledView, "atomic_store_xor")
def _view_atomic_store_xor(self, index: Any, update: Any, /) -> None:
    tiled_view_atomic("xor", self, index, update)
