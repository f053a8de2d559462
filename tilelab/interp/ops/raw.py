"""Raw-memory ops: ``RawArrayMemory.load_offset``/``store_offset``/``atomic_*_offset``.

``Array.get_raw_memory()`` addresses memory by element offset from the array's base
pointer, without its shape or strides (cuTile converts the offset to uint64 and adds it to
the pointer, so a negative offset reaches below the base). The interpreter reads and
writes the flat buffer of the allocation the argument lies in; an active lane outside that
allocation is undefined behaviour on the GPU and a LaunchError here, naming the kernel
line. Dtype rules are those of ``gather``/``scatter``/``atomic_*``. Every access is traced
(count, bytes) and race-checked on its addresses; a successful ``atomic_cas_offset`` and
an ``atomic_xchg_offset`` or store of a held word are lock events.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from cuda.tile import MemoryOrder, MemoryScope
from tilelab.interp.context import compile_error, launch_error
from tilelab.interp.ops.elements import mask_values
from tilelab.interp.ops.elementwise import const_array, operand
from tilelab.interp.ops.memory_args import (broadcastable, check_hints,
                                            check_memory_semantics)
from tilelab.interp.values.arrays import RawArrayMemory
from tilelab.interp.values.dtypes import check_implicit_cast
from tilelab.interp.values.methods import method
from tilelab.interp.values.rounding import convert
from tilelab.interp.values.targets import check_atomic_add
from tilelab.interp.values.tile import Tile

__all__ = ["load_offset", "store_offset", "atomic_cas_offset", "atomic_rmw_offset"]


def _offsets(offset: Any, op: str) -> np.ndarray:
    """Integer element offsets (as int64: uint64 wraps like the pointer arithmetic)."""
    v, d = operand(offset, "offset")
    if d is None:
        if isinstance(v, (bool, float)):
            raise compile_error(f"{op}: offset must be an integer, got {v!r}")
        return np.asarray(v, np.int64)
    if d.kind not in "iu":
        raise compile_error(f"{op}: offset has non-integer data type {d}")
    return v.astype(np.int64)


def _lanes(mem: RawArrayMemory, offsets: np.ndarray, mask: Any, op: str
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(active lanes, flat positions in the allocation of the active lanes, their offsets);
    LaunchError when an active lane falls outside the allocation."""
    arr = mem._array
    flat, start = arr._root.allocation()
    m = mask_values(mask, offsets.shape, op)
    active = np.ones(offsets.shape, bool) if m is None else \
        np.broadcast_to(m, offsets.shape).copy()
    base = arr._data.__array_interface__["data"][0]
    size = arr._data.itemsize
    pos = (base - start) // size + offsets
    inside = (pos >= 0) & (pos < flat.size)
    bad = active & ~inside
    if bad.any():
        first = int(offsets[bad].reshape(-1)[0])
        lo = -((base - start) // size)
        raise launch_error(
            f"{op}: element offset {first} from the base of array '{arr._root.name}' is "
            f"outside its allocation (valid offsets: {lo} to {lo + flat.size - 1}); "
            f"undefined behaviour on the GPU",
            hint="mask the out-of-range lanes (mask=...) or check the offset arithmetic")
    return active, pos[active], offsets[active]


def _values(value: Any, shape: tuple, dtype: Any, what: str) -> np.ndarray:
    v, d = operand(value, what.lower())
    if np.shape(v) and not broadcastable(np.shape(v), shape):
        raise compile_error(f"{what} shape {np.shape(v)} is not broadcastable to the offset "
                            f"shape {shape}")
    check_implicit_cast(d, v, dtype, f"{what} is incompatible with RawArrayMemory's dtype")
    return np.broadcast_to(const_array(v, dtype) if d is None else convert(v, d, dtype),
                           shape)


def _writeable(mem: RawArrayMemory, flat: np.ndarray, op: str) -> None:
    if not flat.flags.writeable:
        raise launch_error(f"{op}: array '{mem._array._root.name}' is read-only",
                           hint="pass a writeable array")


def load_offset(mem: RawArrayMemory, offset: Any, mask: Any, padding_value: Any,
                latency: Any) -> Tile:
    op = "RawArrayMemory.load_offset"
    dtype = mem.dtype
    offs = _offsets(offset, op)
    pad = _values(0 if padding_value is None else padding_value, offs.shape, dtype,
                  "Padding value")
    check_hints(latency)
    active, pos, lane_offs = _lanes(mem, offs, mask, op)
    flat, _start = mem._array._root.allocation()
    out = np.array(pad, dtype=flat.dtype, copy=True)
    out[active] = flat[pos]
    mem._array.trace_raw("read", op, lane_offs)
    return Tile(out, dtype, False, None if active.all() else active)


def store_offset(mem: RawArrayMemory, offset: Any, value: Any, mask: Any,
                 latency: Any) -> None:
    op = "RawArrayMemory.store_offset"
    dtype = mem.dtype
    offs = _offsets(offset, op)
    vals = _values(value, offs.shape, dtype, "Value")
    check_hints(latency)
    active, pos, lane_offs = _lanes(mem, offs, mask, op)
    flat, _start = mem._array._root.allocation()
    if pos.size:
        _writeable(mem, flat, op)
        flat[pos] = vals[active]
    mem._array.trace_raw("write", op, lane_offs)


def _rmw(flat: np.ndarray, pos: np.ndarray, new_fn: Any) -> np.ndarray:
    """Apply ``new_fn(old, lanes) -> new`` at ``pos``, lane by lane when positions repeat."""
    if pos.size == 0:
        return np.empty((0,), flat.dtype)
    if np.unique(pos).size == pos.size:
        old = np.array(flat[pos], copy=True)
        flat[pos] = new_fn(old, slice(None))
        return old
    old = np.empty(pos.shape, flat.dtype)
    for lane in range(pos.size):
        old[lane] = flat[pos[lane]]
        flat[pos[lane]] = new_fn(np.asarray(flat[pos[lane]]), lane)
    return old


def atomic_rmw_offset(mode: str, mem: RawArrayMemory, offset: Any, update: Any, mask: Any,
                      memory_order: Any, memory_scope: Any) -> Tile:
    from tilelab.interp.ops.atomics import _RMW_DTYPES, _combine, _rmw_update
    op = f"RawArrayMemory.atomic_{mode}_offset"
    dtype = mem.dtype
    if dtype not in _RMW_DTYPES[mode]:
        raise compile_error(f"{op}: Unsupported array dtype: {dtype}",
                            hint="supported dtypes: " + ", ".join(
                                str(d) for d in _RMW_DTYPES[mode]))
    offs = _offsets(offset, op)
    upd = _rmw_update(mode, update, offs.shape, dtype, "Update")
    check_memory_semantics("tile_atomic_rmw", memory_order, memory_scope,
                           (MemoryOrder.RELAXED, MemoryOrder.ACQUIRE, MemoryOrder.RELEASE,
                            MemoryOrder.ACQ_REL))
    if mode == "add":
        check_atomic_add(dtype)
    active, pos, lane_offs = _lanes(mem, offs, mask, op)
    flat, _start = mem._array._root.allocation()
    if pos.size:
        _writeable(mem, flat, op)
    lane_upd = upd[active]
    old = _rmw(flat, pos, lambda o, k: _combine(mode, o, lane_upd[k], dtype))
    out = np.zeros(offs.shape, flat.dtype)
    out[active] = old
    mem._array.trace_raw("atomic", op, lane_offs)
    if mode == "xchg":
        mem._array.sync_raw("release", lane_offs)
    return Tile(out, dtype, False, None if active.all() else active)


def atomic_cas_offset(mem: RawArrayMemory, offset: Any, expected: Any, desired: Any,
                      mask: Any, memory_order: Any, memory_scope: Any) -> Tile:
    from tilelab.interp.ops.atomics import _INT_FLOAT_32_64, _rmw_update
    op = "RawArrayMemory.atomic_cas_offset"
    dtype = mem.dtype
    if dtype not in _INT_FLOAT_32_64:
        raise compile_error(f"{op}: Unsupported array dtype: {dtype}")
    offs = _offsets(offset, op)
    exp = _rmw_update("cas", expected, offs.shape, dtype, "Expected value")
    des = _rmw_update("cas", desired, offs.shape, dtype, "Desired value")
    check_memory_semantics("tile_atomic_cas", memory_order, memory_scope,
                           (MemoryOrder.RELAXED, MemoryOrder.ACQUIRE, MemoryOrder.RELEASE,
                            MemoryOrder.ACQ_REL))
    active, pos, lane_offs = _lanes(mem, offs, mask, op)
    flat, _start = mem._array._root.allocation()
    if pos.size:
        _writeable(mem, flat, op)
    e, dsr = exp[active], des[active]
    uint = np.dtype(f"u{flat.itemsize}")

    def swap(old: np.ndarray, k: Any) -> np.ndarray:
        same = np.asarray(old).view(uint) == np.asarray(e[k]).view(uint)
        return np.where(same, dsr[k], old)

    old = _rmw(flat, pos, swap)
    out = np.array(exp, copy=True)
    out[active] = old
    mem._array.trace_raw("atomic", op, lane_offs)
    won = old.view(uint) == np.asarray(e).view(uint) if old.size else np.zeros(0, bool)
    if won.any():
        mem._array.sync_raw("acquire", lane_offs[won])
    return Tile(out, dtype, False, None if active.all() else active)


# ---- RawArrayMemory's methods (see tilelab.interp.values.methods) ----------------------

@method(RawArrayMemory, "load_offset")
def _raw_load_offset(self, offset, /, *, mask=None, padding_value=0, latency=None) -> Tile:
    """Elements at ``offset`` (masked-off lanes get ``padding_value``)."""
    return load_offset(self, offset, mask, padding_value, latency)


@method(RawArrayMemory, "store_offset")
def _raw_store_offset(self, offset, value, /, *, mask=None, latency=None) -> None:
    """Store ``value`` (broadcast to the offsets' shape) at ``offset``."""
    store_offset(self, offset, value, mask, latency)


@method(RawArrayMemory, "atomic_cas_offset")
def _raw_atomic_cas_offset(self, offset, expected, desired, /, *, mask=None,
                           memory_order=MemoryOrder.ACQ_REL,
                           memory_scope=MemoryScope.DEVICE) -> Tile:
    return atomic_cas_offset(self, offset, expected, desired, mask, memory_order,
                             memory_scope)


@method(RawArrayMemory, "atomic_xchg_offset")
def _raw_atomic_xchg_offset(self, offset, update, /, *, mask=None,
                            memory_order=MemoryOrder.ACQ_REL,
                            memory_scope=MemoryScope.DEVICE) -> Tile:
    return atomic_rmw_offset("xchg", self, offset, update, mask, memory_order,
                             memory_scope)


@method(RawArrayMemory, "atomic_add_offset")
def _raw_atomic_add_offset(self, offset, update, /, *, mask=None,
                           memory_order=MemoryOrder.ACQ_REL,
                           memory_scope=MemoryScope.DEVICE) -> Tile:
    return atomic_rmw_offset("add", self, offset, update, mask, memory_order,
                             memory_scope)


@method(RawArrayMemory, "atomic_max_offset")
def _raw_atomic_max_offset(self, offset, update, /, *, mask=None,
                           memory_order=MemoryOrder.ACQ_REL,
                           memory_scope=MemoryScope.DEVICE) -> Tile:
    return atomic_rmw_offset("max", self, offset, update, mask, memory_order,
                             memory_scope)


@method(RawArrayMemory, "atomic_min_offset")
def _raw_atomic_min_offset(self, offset, update, /, *, mask=None,
                           memory_order=MemoryOrder.ACQ_REL,
                           memory_scope=MemoryScope.DEVICE) -> Tile:
    return atomic_rmw_offset("min", self, offset, update, mask, memory_order,
                             memory_scope)


@method(RawArrayMemory, "atomic_and_offset")
def _raw_atomic_and_offset(self, offset, update, /, *, mask=None,
                           memory_order=MemoryOrder.ACQ_REL,
                           memory_scope=MemoryScope.DEVICE) -> Tile:
    return atomic_rmw_offset("and", self, offset, update, mask, memory_order,
                             memory_scope)


@method(RawArrayMemory, "atomic_or_offset")
def _raw_atomic_or_offset(self, offset, update, /, *, mask=None,
                          memory_order=MemoryOrder.ACQ_REL,
                          memory_scope=MemoryScope.DEVICE) -> Tile:
    return atomic_rmw_offset("or", self, offset, update, mask, memory_order,
                             memory_scope)


@method(RawArrayMemory, "atomic_xor_offset")
def _raw_atomic_xor_offset(self, offset, update, /, *, mask=None,
                           memory_order=MemoryOrder.ACQ_REL,
                           memory_scope=MemoryScope.DEVICE) -> Tile:
    return atomic_rmw_offset("xor", self, offset, update, mask, memory_order,
                             memory_scope)
