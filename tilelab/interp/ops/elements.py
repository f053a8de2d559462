"""Element-wise memory ops: ``gather``, ``scatter`` and advanced indexing.

Lanes address single elements. Indices are checked the way cuTile does (converted to
uint64 and compared unsigned, so negative indices are out of bounds): out-of-bounds or
masked-off lanes are padded on loads and skipped on stores. With ``check_bounds=False``
an out-of-bounds lane is undefined behaviour in cuTile, and a LaunchError here. Accesses
are recorded as sets of elements when tracing is on.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from cuda.tile import PaddingMode
from tilelab.interp.context import compile_error, launch_error
from tilelab.interp.ops.elementwise import const_array, operand
from tilelab.interp.ops.memory_args import (as_array, as_flag, assign, broadcastable,
                                            check_hints, padding_fill, padding_mode_value)
from tilelab.interp.ops.shapes import is_pow2
from tilelab.interp.values.arrays import Array, Slice, index_value
from tilelab.interp.values.dtypes import BOOL, DTYPES, check_implicit_cast, loose_dtype
from tilelab.interp.values.rounding import convert
from tilelab.interp.values.tile import Tile

__all__ = ["gather", "scatter", "load_advanced_indexing", "store_advanced_indexing",
           "element_indices", "active_lanes", "trace_lanes"]


def element_indices(arr: Array, indices: Any, op: str) -> tuple[list[np.ndarray], tuple]:
    """Per-dimension int64 index arrays broadcast to the common index shape."""
    items = indices if isinstance(indices, tuple) else (indices,)
    if len(items) != arr.ndim:
        msg = (f"For array of rank {arr.ndim}, `indices` must be a tuple of length {arr.ndim}")
        if arr.ndim == 1:
            msg += ", or a single scalar/tile"
        raise compile_error(f"{op}: {msg}. However, `indices` has {len(items)} items.")
    vals = []
    for dim, it in enumerate(items):
        v, d = operand(it, "index")
        if d is None:
            if isinstance(v, (bool, float)):
                raise compile_error(f"{op}: Index has non-integer data type {type(v).__name__}")
            vals.append(np.asarray(v, np.int64))
            continue
        if d.kind not in "iu":
            for_dim = f"for dimension {dim} " if arr.ndim > 1 else ""
            raise compile_error(f"{op}: Index {for_dim}has non-integer data type {d}")
        # cuTile converts indices to uint64 and compares unsigned: negatives are OOB.
        a = v.astype(np.int64) if d is not DTYPES["uint64"] else \
            np.where(v > np.uint64(2**63 - 1), -1, v.astype(np.int64))
        vals.append(a)
    try:
        shape = np.broadcast_shapes(*[v.shape for v in vals]) if vals else ()
    except ValueError:
        listed = ", ".join(str(v.shape) for v in vals)
        raise compile_error(f"{op}: Index shapes {listed} are not broadcastable to a common "
                            f"shape") from None
    return [np.broadcast_to(v, shape) for v in vals], shape


def active_lanes(arr: Array, idx: list[np.ndarray], shape: tuple, check_bounds: bool,
                 mask: np.ndarray | None, op: str) -> np.ndarray:
    """Lanes that access memory: in bounds and not masked off (LaunchError for an
    out-of-bounds lane when ``check_bounds`` is False)."""
    active = np.ones(shape, bool) if mask is None else np.broadcast_to(mask, shape).copy()
    inb = np.ones(shape, bool)
    for i, n in zip(idx, arr._data.shape):
        inb &= (i >= 0) & (i < n)
    if not check_bounds:
        bad = active & ~inb
        if bad.any():
            where = tuple(int(i[bad][0]) for i in idx)
            raise launch_error(f"{op}: check_bounds=False but index {where} is outside array "
                               f"'{arr._root.name}' of shape {arr._data.shape} (undefined "
                               f"behaviour on the GPU)")
    return active & inb


def mask_values(mask: Any, shape: tuple, op: str) -> np.ndarray | None:
    """A custom ``mask`` (bool, broadcastable to the index shape), or None."""
    if mask is None:
        return None
    v, d = operand(mask, "mask")
    if d is None:
        d = BOOL if isinstance(v, bool) else loose_dtype(v)
        v = np.asarray(v)
    if d is not BOOL:
        raise compile_error(f"{op}: Custom mask must have boolean dtype, but got {d}")
    if not broadcastable(np.shape(v), shape):
        raise compile_error(f"{op}: Custom mask shape {np.shape(v)} is not broadcastable to the "
                            f"index shape {shape}")
    return np.asarray(v, bool)


def trace_lanes(arr: Array, kind: str, op: str, idx: list[np.ndarray],
                lanes: np.ndarray) -> tuple:
    """Record the active lanes' elements; returns their coordinates."""
    coords = tuple(i[lanes] for i in idx)
    arr.trace(kind, op, coords, int(lanes.sum()))
    return coords


def gather(array, indices, /, *, mask=None, padding_value=0, check_bounds=True,
           latency=None) -> Tile:
    """Elements of ``array`` at ``indices`` (masked-off / out-of-bounds lanes get
    ``padding_value``)."""
    op = "ct.gather"
    arr = as_array(array, op)
    idx, shape = element_indices(arr, indices, op)
    m = mask_values(mask, shape, op)
    pv, pd = operand(padding_value, "padding_value")
    if np.shape(pv) and not broadcastable(np.shape(pv), shape):
        raise compile_error(f"{op}: Padding shape {np.shape(pv)} is not broadcastable to the "
                            f"index shape {shape}")
    check_implicit_cast(pd, pv, arr.dtype, "Invalid padding value")
    pad = const_array(pv, arr.dtype) if pd is None else convert(pv, pd, arr.dtype)
    check_hints(latency)
    lanes = active_lanes(arr, idx, shape, as_flag(check_bounds, "check_bounds"), m, op)
    out = np.array(np.broadcast_to(pad, shape), dtype=arr._data.dtype, copy=True)
    coords = trace_lanes(arr, "read", op, idx, lanes)
    if arr.ndim == 0:
        if lanes.all():
            out = np.array(arr._data, copy=True).reshape(shape)
    else:
        out[lanes] = arr._data[coords]
    return Tile(out, arr.dtype, False, None if lanes.all() else lanes)


def scatter(array, indices, value, /, *, mask=None, check_bounds=True, latency=None) -> None:
    """Store ``value`` into ``array`` at ``indices`` (masked-off / OOB lanes are skipped)."""
    op = "ct.scatter"
    arr = as_array(array, op)
    idx, shape = element_indices(arr, indices, op)
    m = mask_values(mask, shape, op)
    v, d = operand(value, "value")
    if np.shape(v) and not broadcastable(np.shape(v), shape):
        raise compile_error(f"{op}: Value shape {np.shape(v)} is not broadcastable to the index "
                            f"shape {shape}")
    check_implicit_cast(d, v, arr.dtype, "Stored value is incompatible with array's dtype")
    vals = np.broadcast_to(const_array(v, arr.dtype) if d is None
                           else convert(v, d, arr.dtype), shape)
    check_hints(latency)
    lanes = active_lanes(arr, idx, shape, as_flag(check_bounds, "check_bounds"), m, op)
    coords = trace_lanes(arr, "write", op, idx, lanes)
    if arr.ndim == 0:
        if lanes.all():
            assign(arr, (), vals.reshape(()), op)
    else:
        assign(arr, coords, vals[lanes], op)


def _advanced_index(arr: Array, indices: Any, op: str) -> tuple[list[np.ndarray], tuple]:
    if not isinstance(indices, tuple):
        raise compile_error(f"{op}: Expected a tuple of indices, got {type(indices).__name__}")
    if len(indices) != arr.ndim:
        raise compile_error(f"load_advanced_indexing/store_advanced_indexing index length "
                            f"{len(indices)} does not match array rank {arr.ndim}")
    sparse, shape, parts = [], [], []
    for dim, item in enumerate(indices):
        if isinstance(item, Tile):
            if item.ndim != 1:
                raise compile_error(f"Sparse index at dim {dim} must be a 1D integer tile, got "
                                    f"{item.ndim}D")
            if item._dt.kind not in "iu":
                raise compile_error(f"Sparse index at dim {dim} must be an integer tile, got "
                                    f"dtype {item._dt}")
            sparse.append(dim)
            shape.append(item.shape[0])
            parts.append(("sparse", item._v.astype(np.int64)))
        elif isinstance(item, Slice):
            length = item.length
            if isinstance(length, Tile):
                raise compile_error(f"ct.Slice length at dim {dim} must be a compile-time "
                                    f"constant in load_advanced_indexing/store_advanced_indexing")
            if not isinstance(length, int) or length <= 0:
                raise compile_error(f"ct.Slice length at dim {dim} must be a positive integer, "
                                    f"got {length}")
            shape.append(length)
            parts.append(("dense", index_value(item.start, "ct.Slice start")))
        else:
            raise compile_error(f"load_advanced_indexing/store_advanced_indexing index at dim "
                                f"{dim} must be a 1D integer Tile (sparse dim) or "
                                f"ct.Slice(start, length) (dense dim), got type "
                                f"{type(item).__name__}")
    if len(sparse) != 1:
        found = "none found" if not sparse else f"found {len(sparse)} at dims {sparse}"
        raise compile_error(f"load_advanced_indexing/store_advanced_indexing: exactly one index "
                            f"must be a 1D integer Tile (the sparse dim); {found}")
    for dim, n in enumerate(shape):
        if not is_pow2(n):
            raise compile_error(f"Index at dim {dim} has size {n}; must be a power of two")
    grids = []
    for dim, (kind, val) in enumerate(parts):
        view = [1] * arr.ndim
        view[dim] = shape[dim]
        line = val if kind == "sparse" else val + np.arange(shape[dim], dtype=np.int64)
        grids.append(np.broadcast_to(line.reshape(view), tuple(shape)))
    return grids, tuple(shape)


def load_advanced_indexing(array, indices, /, *, padding_mode=PaddingMode.UNDETERMINED,
                           latency=None, allow_tma=None) -> Tile:
    """Rows (or columns...) selected by one index tile, dense ``ct.Slice`` elsewhere."""
    op = "ct.load_advanced_indexing"
    arr = as_array(array, op)
    if arr.ndim < 2:
        raise compile_error("load_advanced_indexing requires a 2D or higher-rank array; use "
                            "ct.gather() for 1D arrays")
    grids, shape = _advanced_index(arr, indices, op)
    pad = padding_fill(padding_mode_value(padding_mode), arr.dtype, op)
    check_hints(latency, allow_tma)
    lanes = active_lanes(arr, grids, shape, True, None, op)
    out = np.full(shape, pad, dtype=arr._data.dtype)
    coords = trace_lanes(arr, "read", op, grids, lanes)
    out[lanes] = arr._data[coords]
    return Tile(out, arr.dtype, False, None if lanes.all() else lanes)


def store_advanced_indexing(array, indices, tile, /, *, latency=None, allow_tma=None) -> None:
    """Store ``tile`` into the rows selected by one index tile (see the load)."""
    op = "ct.store_advanced_indexing"
    arr = as_array(array, op)
    if arr.ndim < 2:
        raise compile_error("store_advanced_indexing requires a 2D or higher-rank array; use "
                            "ct.scatter() for 1D arrays")
    grids, shape = _advanced_index(arr, indices, op)
    v, d = operand(tile, "tile")
    if np.shape(v) != shape:
        raise compile_error(f"Tile shape {np.shape(v)} does not match the shape implied by "
                            f"indices {shape}")
    check_implicit_cast(d, v, arr.dtype, "Stored tile dtype is incompatible with array dtype")
    vals = convert(v, d, arr.dtype)
    check_hints(latency, allow_tma)
    lanes = active_lanes(arr, grids, shape, True, None, op)
    coords = trace_lanes(arr, "write", op, grids, lanes)
    assign(arr, coords, vals[lanes], op)
