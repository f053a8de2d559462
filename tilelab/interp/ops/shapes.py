"""Shape ops and tile factories: reshape, permute, cat, extract/insert, full, arange, ...

Shapes, axes and orders must be compile-time constants (Python ints), every tile
dimension must be a power of two, as in cuTile, and a tile holds at most Tile IR's
:data:`~tilelab.limits.MAX_TILE_ELEMENTS`; violations raise CompileError with the
compiler's wording.
"""
from __future__ import annotations

import linecache
import re
import sys
from types import FrameType
from typing import Any

import numpy as np

from tilelab.interp.context import (check_tile_shape, compile_error, launch_error,
                                    unsupported)
from tilelab.interp.ops.casts import astype, bitcast
from tilelab.interp.ops.elementwise import add, const_array, make, mul, operand
from tilelab.interp.values.dtypes import (BOOL, INT32, TileDType, as_dtype, is_loose,
                                          loose_dtype)
from tilelab.interp.values.methods import method
from tilelab.interp.values.tile import Tile, values_of

__all__ = ["to_tile", "constant_shape", "constant_int", "constant_int_tuple",
           "normalize_axis", "reshape", "broadcast_to", "permute", "transpose",
           "expand_dims", "getitem_expand", "cat", "extract", "insert", "full", "zeros",
           "ones", "arange", "astile", "pack_to_bytes", "unpack_from_bytes", "is_pow2",
           "partition_store_param"]


def to_tile(x: Any, what: str = "x") -> Tile:
    """A tile for ``x``; a Python constant becomes a scalar of its cuTile dtype."""
    if isinstance(x, Tile):
        return x
    v, d = operand(x, what)
    if d is None:
        d = loose_dtype(v)
        return Tile(const_array(v, d), d, True)
    return Tile(v, d)


def _map_valid(t: Tile, fn: Any) -> np.ndarray | None:
    """A shape op applied to a tile's useful-lane mask (None stays None)."""
    m = t._m
    if m is None:
        return None
    if m.shape != t._v.shape:
        m = np.broadcast_to(m, t._v.shape)
    return fn(m)


def is_pow2(n: int) -> bool:
    """Whether ``n`` is a positive power of two."""
    return n > 0 and n & (n - 1) == 0


def constant_int(x: Any, what: str) -> int:
    """A compile-time integer constant, or CompileError saying it is not one."""
    if isinstance(x, Tile) and x._c and x.ndim == 0 and x._dt.kind in "iu":
        return int(x._v)
    if isinstance(x, bool) or not isinstance(x, int):
        if isinstance(x, Tile):
            raise compile_error(f"{what}: Expected an integer constant, but given value is "
                                f"not constant",
                                hint="pass it as a ct.Constant[int] parameter or a literal")
        raise compile_error(f"{what}: Expected an integer constant, but given value has "
                            f"type {'None' if x is None else _cutile_type(x)}")
    return x


def constant_int_tuple(x: Any, what: str, allow_single_int: bool = False) -> tuple[int, ...]:
    """A tuple of compile-time integers (``allow_single_int``: an int means ``(int,)``)."""
    if allow_single_int and isinstance(x, int) and not isinstance(x, bool):
        return (x,)
    if isinstance(x, Tile):
        if x._c and x.ndim == 0 and x._dt.kind in "iu" and allow_single_int:
            return (int(x._v),)
        raise compile_error(f"{what}: Expected a constant integer tuple, but given value is "
                            f"not constant")
    if not isinstance(x, tuple):
        raise compile_error(f"{what}: Expected a tuple, but given value has type "
                            f"{type(x).__name__}")
    return tuple(constant_int(v, what) for v in x)


def constant_shape(x: Any, what: str = "shape", *, allow_single_int: bool = False,
                   expected_rank: int | None = None, allow_0d: bool = False,
                   allow_non_pow2: bool = False, function: str | None = None
                   ) -> tuple[int, ...]:
    """A constant tile shape: positive powers of two, optionally of a given rank, of at
    most Tile IR's element limit (``allow_non_pow2``: steps, not a tile: any positive
    ints). ``function``: the cuTile function whose argument ``what`` this is; its
    dimension errors then begin as cuTile's do, ``Invalid argument "shape" of load(): ``."""
    shape = constant_int_tuple(x, what, allow_single_int=allow_single_int)
    if (expected_rank is not None and len(shape) != expected_rank
            and not (allow_0d and len(shape) == 0)):
        raise compile_error(f"Expected {what} length to be {expected_rank}, got {len(shape)}")
    where = "" if function is None else f'Invalid argument "{what}" of {function}(): '
    for i, d in enumerate(shape):
        if d <= 0:
            raise compile_error(f"{where}Dimension #{i} of {what} {shape} is not positive")
        if not allow_non_pow2 and d & (d - 1):
            raise compile_error(f"{where}Dimension #{i} of {what} {shape} is not a power of "
                                "two", hint="tile dimensions must be powers of two; pad "
                                            "with partial tiles instead")
    if not allow_non_pow2:
        check_tile_shape(shape)   # before a tile of that shape is allocated
    return shape


def normalize_axis(axis: int, ndim: int) -> int:
    """``axis`` made non-negative, or CompileError when out of range."""
    a = axis + ndim if axis < 0 else axis
    if not 0 <= a < ndim:
        raise compile_error(f"Axis {axis} is out of range for rank {ndim}'")  # (cuTile's ')
    return a


def reshape(x: Any, /, shape: Any) -> Tile:
    """Reshape (one dimension may be -1)."""
    t = to_tile(x)
    new = list(constant_int_tuple(shape, "reshape shape"))
    numel = t._v.size
    neg = [i for i, d in enumerate(new) if d < 0]
    if any(d < -1 for d in new):
        raise compile_error(f"Dimension can only be -1 or non-negative, got {tuple(new)}")
    if len(neg) > 1:
        raise compile_error(f"Only one dimension can be -1, got {tuple(new)}")
    known = int(np.prod([d for d in new if d >= 0], dtype=np.int64))
    if neg:
        if known == 0 or numel % known:
            raise compile_error(f"Cannot reshape {t.shape} to {tuple(new)}")
        new[neg[0]] = numel // known
    elif known != numel:
        raise compile_error(f"Cannot reshape {t.shape} to {tuple(new)}")
    return Tile(t._v.reshape(new), t._dt, False, _map_valid(t, lambda m: m.reshape(new)))


def broadcast_to(x: Any, /, shape: Any) -> Tile:
    """Broadcast to ``shape`` following NumPy's rule."""
    t = to_tile(x)
    target = constant_shape(shape, "shape", function="broadcast_to")
    src = t.shape
    pairs = zip(reversed(src), reversed(target))
    ok = len(src) <= len(target) and all(s in (d, 1) for s, d in pairs)
    if not ok:
        _refuse_broadcast(src, target, sys._getframe(1))
    return Tile(np.broadcast_to(t._v, target), t._dt, False,
                _map_valid(t, lambda m: np.broadcast_to(m, target)))


def _refuse_broadcast(src: tuple, target: tuple, caller: Any) -> None:
    """cuTile's refusal of a broadcast; when it is a partition store's (``z.store(t)``
    lowers to a broadcast to ``z``'s tile shape), the refusal of that store instead."""
    from tilelab.limits import store_shape_message

    param = partition_store_param(caller)
    if param is not None:
        raise compile_error(*store_shape_message(param, src, target))
    raise compile_error(f"Shape {src} is not broadcastable to {target}")


#: a tile-shape constant of partition ``p`` in lowered code (``__tl_<p>_t<d>``: names the
#: lowering reserves, which user code may not use)
_TILE_CONSTANT = re.compile(r"__tl_(\w+?)_t\d+\b")


def partition_store_param(frame: FrameType | None) -> str | None:
    """The partition whose store the lowered kernel ``frame`` is making, or None.

    A safe store ``z.store(t)`` lowers to ``ct.store(z, ..., tile=ct.broadcast_to(t,
    (__tl_z_t0,)))``: when that ``broadcast_to`` refuses the tile, the call the frame is
    executing ends with the partition's tile-shape constants, which name it. The
    refusal can then say what a partition store needs (see
    :func:`tilelab.limits.store_shape_message`), as the compiler's does.

    Example:
        >>> partition_store_param(None) is None
        True
    """
    if frame is None or not frame.f_code.co_filename.startswith("<tilelab-lowered "):
        return None
    code = frame.f_code
    try:
        line, end_line, col, end_col = list(code.co_positions())[frame.f_lasti // 2]
    except (IndexError, ValueError):
        return None
    if line is None or end_line is None or col is None or end_col is None:
        return None
    rows = [linecache.getline(code.co_filename, n).encode()
            for n in range(line, end_line + 1)]
    if not rows:
        return None
    rows[-1] = rows[-1][:end_col]
    rows[0] = rows[0][col:]
    found = _TILE_CONSTANT.findall(b"".join(rows).decode(errors="replace"))
    return found[-1] if found else None   # the target shape is the call's last argument



def permute(x: Any, /, axes: Any) -> Tile:
    """Reorder the axes of a tile."""
    t = to_tile(x)
    ax = constant_int_tuple(axes, "axes")
    if len(ax) != t.ndim:
        raise compile_error(f"Num axes must match input's rank: {len(ax)} vs {t.ndim}")
    seen = set()
    for i, a in enumerate(ax):
        if a in seen:
            raise compile_error(f"Repeated axis #{i}: {a}")
        seen.add(a)
    norm = tuple(normalize_axis(a, t.ndim) for a in ax)
    return Tile(np.transpose(t._v, norm), t._dt, False,
                _map_valid(t, lambda m: np.transpose(m, norm)))


def transpose(x: Any, /, axis0: Any = None, axis1: Any = None) -> Tile:
    """Swap two axes; a 2-D tile's axes are swapped when none are given."""
    t = to_tile(x)
    if t.ndim < 2:
        raise compile_error("Cannot transpose a tile with fewer than 2 dimensions")
    if axis0 is None and axis1 is None:
        if t.ndim != 2:
            raise compile_error("`axes` must be specified for tile with more than 2 "
                                "dimensions")
        a0, a1 = 1, 0
    elif axis0 is None or axis1 is None:
        raise compile_error(f"transpose axes must either both be specified or both be None, "
                            f"got axis0={axis0}, axis1={axis1}")
    else:
        a0 = normalize_axis(constant_int(axis0, "axis0"), t.ndim)
        a1 = normalize_axis(constant_int(axis1, "axis1"), t.ndim)
    order = list(range(t.ndim))
    order[a0], order[a1] = order[a1], order[a0]
    return Tile(np.transpose(t._v, order), t._dt, False,
                _map_valid(t, lambda m: np.transpose(m, order)))


def expand_dims(x: Any, /, axis: Any) -> Tile:
    """Insert an axis of size 1 (``x[:, None]`` is the same)."""
    t = to_tile(x)
    a = normalize_axis(constant_int(axis, "axis"), t.ndim + 1)
    return Tile(np.expand_dims(t._v, a), t._dt, False,
                _map_valid(t, lambda m: np.expand_dims(m, a)))


def getitem_expand(t: Tile, key: Any) -> Tile:
    """``tile[None, :]``-style indexing, which only inserts axes in cuTile: the key is
    ``None`` or a constant tuple; any other key (``t[:]``, ``t[0]``, ``t[...]``) is
    refused as cuTile refuses it."""
    if key is not None and not isinstance(key, tuple):
        raise compile_error("Directly indexing a tile is not supported; use `extract()` or "
                            "`item()` instead.")
    if isinstance(key, tuple) and any(isinstance(k, Tile) for k in key):
        raise compile_error("Tile subscript must be a constant tuple")
    items = key if isinstance(key, tuple) else (key,)
    for idx in items:
        if not (idx is None or idx is Ellipsis or
                (isinstance(idx, slice) and idx == slice(None))):
            raise compile_error(
                f"Expected `None|np.newaxis` or `ellipsis` or full slice (`:`), but got {idx}. "
                f"Hint: Directly indexing a tile is not supported, use `extract` or `item`.")
    slices = sum(1 for idx in items if isinstance(idx, slice))
    if slices > t.ndim:
        raise compile_error(f"Tile is {t.ndim}-dimensional, but {slices} were indexed")
    if sum(1 for idx in items if idx is Ellipsis) > 1:
        raise compile_error("Only one ellipsis is allowed")
    return Tile(t._v[key], t._dt, False, _map_valid(t, lambda m: m[key]))


def cat(tiles: Any, /, axis: Any) -> Tile:
    """Concatenate two tiles of one dtype along ``axis``."""
    if not isinstance(tiles, tuple):
        raise compile_error(f"cat(): Expected a tuple of tiles, got {type(tiles).__name__}")
    if len(tiles) == 0:
        raise compile_error("cat() received an empty tuple")
    if len(tiles) > 2:
        raise compile_error(f"cat() supports at most 2 tiles, got {len(tiles)}")
    ts = [to_tile(t) for t in tiles]
    if len(ts) == 1:
        return ts[0]
    a, b = ts
    ax = normalize_axis(constant_int(axis, "axis"), a.ndim)
    if b.ndim != a.ndim:
        raise compile_error(f"Expected tiles to have the same rank: {a.ndim} != {b.ndim}")
    if a._dt is not b._dt:
        raise compile_error(f"Expected tiles to have the same dtype: {a._dt} != {b._dt}")
    for i, (p, q) in enumerate(zip(a.shape, b.shape)):
        if i != ax and p != q:
            raise compile_error(f"Expected tiles to have the same shape for non axis "
                                f"dimensions, got {a.shape} and {b.shape}")
    out = np.concatenate([a._v, b._v], axis=ax)
    if not all(is_pow2(d) for d in out.shape):
        raise compile_error(f"Result tile shape must be power of 2, got: {list(out.shape)}")
    valid = None
    if a._m is not None or b._m is not None:
        valid = np.concatenate([a.valid, b.valid], axis=ax)
    return Tile(out, a._dt, False, valid)


def _subtile_index(x: Tile, shape: tuple[int, ...], index: Any, noun: str) -> list[int]:
    items = index if isinstance(index, tuple) else (index,)
    if len(items) != x.ndim:
        raise compile_error(f"Index size {len(items)} does not match the tile rank {x.ndim}")
    out = []
    for i, (s1, s2, idx) in enumerate(zip(x.shape, shape, items)):
        if s1 % s2:
            raise compile_error(f"Input shape {x.shape} is not divisible by {noun} shape "
                                f"{shape} at dimension #{i}")
        n = s1 // s2
        v, d = operand(idx, "index")
        if d is None:
            if isinstance(v, bool) or not isinstance(v, int):
                raise compile_error(f"Expected a tuple of signed integers, but item #{i} is "
                                    f"{v!r}")
            if not 0 <= v < n:
                raise compile_error(
                    f"Index {v} out of bounds at dimension #{i}: valid range is [0, {n}) in "
                    f"tile space (input shape {x.shape}, {noun} shape {shape})")
        else:
            if d.kind != "i" or np.ndim(v) != 0:
                raise compile_error(f"Expected a tuple of signed integers or a single signed "
                                    f"integer scalar, but item #{i} has type {d}{v.shape}")
            v = int(v)
            if not 0 <= v < n:
                raise launch_error(f"subtile index {v} at dimension #{i} is outside [0, {n}) "
                                   f"(undefined behaviour on the GPU)")
        out.append(v)
    return out


def extract(x: Any, /, index: Any, shape: Any) -> Tile:
    """The subtile at grid position ``index`` of a partition of ``x`` into ``shape``."""
    t = to_tile(x)
    sh = constant_shape(shape, "shape", allow_single_int=True, expected_rank=t.ndim,
                        allow_0d=True, function="extract")
    full_shape = sh if sh else (1,) * t.ndim
    idx = _subtile_index(t, full_shape, index, "result")
    sl = tuple(slice(i * s, (i + 1) * s) for i, s in zip(idx, full_shape))
    return Tile(t._v[sl].reshape(sh), t._dt, False, _map_valid(t, lambda m: m[sl].reshape(sh)))


def insert(x: Any, /, index: Any, value: Any) -> Tile:
    """A copy of ``x`` whose subtile at grid position ``index`` is ``value``."""
    t = to_tile(x)
    v = to_tile(value, "value")
    if t._dt is not v._dt:
        raise compile_error(f"Cannot insert a tile of dtype {v._dt} into a tile of dtype "
                            f"{t._dt}")
    if v.ndim == 0:
        shape = (1,) * t.ndim
    elif v.ndim != t.ndim:
        raise compile_error(f"Value rank {v.ndim} does not match the tile rank {t.ndim}")
    else:
        shape = v.shape
    idx = _subtile_index(t, shape, index, "value")
    out = np.array(t._v, copy=True)
    sl = tuple(slice(i * s, (i + 1) * s) for i, s in zip(idx, shape))
    out[sl] = v._v.reshape(shape)
    valid = None
    if t._m is not None or v._m is not None:
        valid = t.valid
        valid[sl] = v.valid.reshape(shape)
    return Tile(out, t._dt, False, valid)


def _numeric_dtype(dtype: Any) -> TileDType:
    dt = as_dtype(dtype)
    if dt.storage is None:
        raise unsupported(f"tiles of {dt}", "numpy has no storage type for this format")
    return dt


def full(shape: Any, fill_value: Any, dtype: Any) -> Tile:
    """A tile of ``shape`` filled with ``fill_value`` converted to ``dtype``."""
    sh = constant_shape(shape, "shape", allow_single_int=True, function="full")
    dt = _numeric_dtype(dtype)
    v, d = operand(fill_value, "fill_value")
    if d is None:
        return Tile(np.broadcast_to(const_array(v, dt), sh), dt, True)
    if np.ndim(v) != 0:
        raise compile_error(f"Expected a scalar or a 0D tile for fill_value, but given value "
                            f"has shape {np.shape(v)}")
    fill = fill_value if isinstance(fill_value, Tile) else Tile(v, d)  # (constants fold)
    return Tile(np.broadcast_to(values_of(astype(fill, dt)), sh), dt)


def zeros(shape: Any, dtype: Any) -> Tile:
    """A tile of zeros."""
    return full(constant_shape(shape, "shape", allow_single_int=True, function="zeros"), 0,
                dtype)


def ones(shape: Any, dtype: Any) -> Tile:
    """A tile of ones."""
    return full(constant_shape(shape, "shape", allow_single_int=True, function="ones"), 1,
                dtype)


def arange(size: Any, /, *, dtype: Any, start: Any = 0, step: Any = 1) -> Tile:
    """``start, start + step, ...`` (``size`` values, a power of two) in ``dtype``."""
    n = constant_int(size, "size")
    dt = _numeric_dtype(dtype)
    if not is_pow2(n):
        raise compile_error(f"Result tile shape must be power of 2, got {n}")
    if dt.kind in "iu":
        result = Tile(np.arange(n).astype(dt.storage), dt)
    else:
        result = astype(Tile(np.arange(n, dtype=np.int32), INT32), dt)
    if not (type(step) is int and step == 1):
        result = mul(result, astype(step, dt))
    if not (type(start) is int and start == 0):
        result = add(result, astype(start, dt))
    return result


def _cutile_type(value: Any) -> str:
    """cuTile's name of a value's type in a message (``Tile[int32,(4)]``)."""
    if isinstance(value, Tile):
        return f"Tile[{value._dt},({','.join(map(str, value.shape))})]"
    if isinstance(value, str):
        return f"<string constant '{value}'>"
    if is_loose(value):
        return f"Tile[{loose_dtype(value)},()]"
    return type(value).__name__


def _is_scalar(value: Any) -> bool:
    return (isinstance(value, Tile) and value.ndim == 0) or is_loose(value) or \
        isinstance(value, np.generic)


def _tuple_shape(value: Any, path: str) -> tuple[int, ...]:
    if not isinstance(value, tuple):
        if not (isinstance(value, Tile) or is_loose(value) or isinstance(value, np.generic)):
            raise compile_error(f"Expected scalar elements at {path}; got element of type "
                                f"{_cutile_type(value)}")
        v, _d = operand(value, path)
        if np.ndim(v) != 0:
            raise compile_error(f"Expected scalar elements at {path}; got a tile of shape "
                                f"{np.shape(v)}")
        return ()
    n = len(value)
    if not is_pow2(n):
        raise compile_error(f"Tuple length {n} at {path} is not a power of 2")
    inner = {_tuple_shape(v, f"{path}[{i}]") for i, v in enumerate(value)}
    if len(inner) != 1:
        raise compile_error(f"Tuple has non-uniform inner shapes at {path}")
    return (n,) + inner.pop()


def _flatten(value: Any) -> list:
    if isinstance(value, tuple):
        return [x for v in value for x in _flatten(v)]
    return [value]


def astile(value: Any, /, *, dtype: Any) -> Tile:
    """A tile from a scalar or a nested tuple of scalars (lengths powers of two)."""
    dt = _numeric_dtype(dtype)
    if not isinstance(value, tuple):
        if not _is_scalar(value):   # (a tile of shape (4,) too: astype converts those)
            raise compile_error("Expected a scalar or (possibly nested) tuple of scalars; "
                                f"got value of type {_cutile_type(value)}")
        return astype(value, dt)
    shape = _tuple_shape(value, "value")
    parts = [values_of(astype(v, dt)).reshape(()) for v in _flatten(value)]
    return Tile(np.array(parts, dtype=dt.storage).reshape(shape), dt)


def pack_to_bytes(x: Any, /) -> Tile:
    """The raw little-endian bytes of a flattened tile as a uint8 tile."""
    from tilelab.interp.values.dtypes import DTYPES
    t = to_tile(x)
    if t._dt is BOOL:
        raise compile_error(f"pack_to_bytes from a {t._dt} tile is not supported")
    flat = reshape(t, (-1,))
    uint8 = DTYPES["uint8"]
    if t._dt.bitwidth == 8:
        return bitcast(flat, uint8)
    n = flat._v.size
    if (n * t._dt.bitwidth) % 8:
        raise compile_error(f"Cannot pack tile {t._dt}{t.shape}: total bits ({n} * "
                            f"{t._dt.bitwidth}) not divisible by 8")
    raw = np.ascontiguousarray(flat._v)
    if t._dt.bitwidth == 4:
        nib = raw.view(np.uint8) & np.uint8(0xF)
        data = (nib[0::2] | (nib[1::2] << np.uint8(4))).astype(np.uint8)
    else:
        data = raw.view(np.uint8).copy()
    return make(data, uint8)


def unpack_from_bytes(x: Any, /, dtype: Any) -> Tile:
    """The inverse of :func:`pack_to_bytes`: a 1-D uint8 tile read as ``dtype`` elements."""
    from tilelab.interp.values.dtypes import DTYPES
    t = to_tile(x)
    dt = _numeric_dtype(dtype)
    if t.ndim != 1:
        raise compile_error(f"unpack_from_bytes requires a 1D tile, got {t.ndim}D tile with "
                            f"shape {t.shape}")
    if t._dt is not DTYPES["uint8"]:
        raise compile_error(f"unpack_from_bytes requires uint8 tile, got {t._dt} tile")
    if dt is BOOL:
        raise compile_error(f"unpack_from_bytes to a {dt} tile is not supported")
    if dt.bitwidth == 8:
        return bitcast(t, dt)
    n = t._v.size
    if (n * 8) % dt.bitwidth:
        raise compile_error(f"Cannot unpack tile uint8{t.shape} to {dt}: total bits ({n} * 8) "
                            f"not divisible by {dt.bitwidth}")
    raw = np.ascontiguousarray(t._v)
    if dt.bitwidth == 4:
        nib = np.empty(n * 2, np.uint8)
        nib[0::2] = raw & np.uint8(0xF)
        nib[1::2] = raw >> np.uint8(4)
        return Tile(nib.view(dt.storage), dt)
    return Tile(raw.view(dt.storage).copy(), dt)


# ---- Tile's methods that are shape ops (see tilelab.interp.values.methods) ------------

@method(Tile, "item")
def _tile_item(self) -> "Tile":
    """``reshape(())``: the single element of a one-element tile as a scalar."""
    return reshape(self, ())


@method(Tile, "extract")
def _tile_extract(self, index, shape) -> "Tile":
    return extract(self, index, shape)


@method(Tile, "insert")
def _tile_insert(self, index, value) -> "Tile":
    return insert(self, index, value)


@method(Tile, "reshape")
def _tile_reshape(self, shape) -> "Tile":
    return reshape(self, shape)


@method(Tile, "permute")
def _tile_permute(self, axes) -> "Tile":
    return permute(self, axes)


@method(Tile, "transpose")
def _tile_transpose(self, axis0=None, axis1=None) -> "Tile":
    return transpose(self, axis0, axis1)


@method(Tile, "__getitem__")
def _tile_getitem(self, key) -> "Tile":
    return getitem_expand(self, key)
