"""Argument checks shared by the memory ops (tile, element and atomic accesses).

cuTile validates these when it compiles a kernel, so they raise CompileError with the
compiler's wording; writing through a read-only numpy view is a LaunchError.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from cuda.tile import MemoryOrder, MemoryScope, PaddingMode
from tilelab.interp.context import compile_error, launch_error
from tilelab.interp.ops.elementwise import const_array, operand
from tilelab.interp.ops.shapes import constant_int_tuple, normalize_axis
from tilelab.interp.values.arrays import Array, TiledView, index_value
from tilelab.interp.values.dtypes import TileDType, check_implicit_cast, loose_dtype
from tilelab.interp.values.rounding import convert
from tilelab.interp.values.tile import Tile

__all__ = ["as_array", "check_index_types", "tile_index", "axis_order", "padding_mode_value", "as_flag",
           "check_hints", "check_memory_semantics", "padding_fill", "stored_values", "assign",
           "broadcastable", "view_values"]


def as_array(x: Any, op: str) -> Array:
    """The array argument of a memory op, or CompileError."""
    if not isinstance(x, Array):
        raise compile_error(f"{op}: Expected an array, but given value has type "
                            f"{type(x).__name__}")
    return x


def check_index_types(index: Any, function: str) -> None:
    """Refuse a tile index that is not signed integer scalars, as cuTile words it for the
    ``index`` argument of ``ct.<function>`` (``load``, ``store``): naming the item and its
    type, ``Tile[float32,()]`` for a float (a Python float is a float32 constant)."""
    items, single = (index, False) if isinstance(index, tuple) else ((index,), True)
    for i, x in enumerate(items):
        if isinstance(x, Tile):
            dt, shape = x.dtype, x.shape
        elif isinstance(x, (bool, int, float)):
            dt, shape = loose_dtype(x), ()
        else:   # not a scalar at all: tile_index says what it is
            continue
        if shape == () and dt.kind == "i":
            continue
        what = "given value" if single else f"item #{i}"
        ty = f"Tile[{dt},({','.join(map(str, shape))})]"
        raise compile_error(f'Invalid argument "index" of {function}(): Expected a tuple of '
                            "signed integers or a single signed integer scalar, but "
                            f"{what} has type {ty}")


def tile_index(index: Any, ndim: int, op: str, what: str = "array") -> list[int]:
    """A tile index (tuple of signed integer scalars, or one for 1-D) as Python ints."""
    items = index if isinstance(index, tuple) else (index,)
    if len(items) != ndim:
        where = "" if op in ("ct.load", "ct.store") else f"{op}: "   # (as cuTile says it)
        raise compile_error(f"{where}Index size {len(items)} does not match the {what} rank "
                            f"{ndim}")
    return [index_value(i, f"{op} index") for i in items]


def axis_order(order: Any, ndim: int, op: str) -> tuple[int, ...]:
    """``order`` ("C", "F" or a permutation) as a tuple of axes."""
    if order == "C":
        return tuple(range(ndim))
    if order == "F":
        return tuple(range(ndim - 1, -1, -1))
    if isinstance(order, str):
        raise compile_error(f"{op}: Expected 'C' or 'F', got '{order}'")
    axes = constant_int_tuple(order, f"{op} order")
    if len(axes) != ndim:
        raise compile_error(f"{op}: Expected tuple of length {ndim}, got {len(axes)}")
    norm = tuple(normalize_axis(a, ndim) for a in axes)
    if len(set(norm)) != len(norm):
        repeated = max(norm, key=norm.count)      # (cuTile names the most repeated axis)
        raise compile_error(f"{op}: Axis order must be a permutation, but axis {repeated} "
                            f"is used at least twice")
    return norm


def padding_mode_value(mode: Any) -> PaddingMode:
    """A PaddingMode from the enum or its member name."""
    if isinstance(mode, PaddingMode):
        return mode
    if isinstance(mode, str) and mode in PaddingMode.__members__:
        return PaddingMode[mode]
    raise compile_error(f"Expected PaddingMode, but given value has type {type(mode).__name__}")


def as_flag(value: Any, name: str) -> bool:
    """A compile-time bool option such as ``check_bounds``."""
    if not isinstance(value, bool):
        raise compile_error(f"{name} must be a constant bool, got {value!r}")
    return value


def check_hints(latency: Any, allow_tma: Any = None) -> None:
    """Validate the performance hints (they have no effect on the CPU)."""
    if latency is not None:
        if isinstance(latency, bool) or not isinstance(latency, int):
            raise compile_error(f"Expected an integer constant for latency, got {latency!r}")
        if not 1 <= latency <= 10:
            raise compile_error(f"Latency must be between 1 and 10, got {latency}")
    if allow_tma is not None and not isinstance(allow_tma, bool):
        raise compile_error(f"Allow TMA must be a boolean, got {allow_tma}")


def check_memory_semantics(op: str, order: Any, scope: Any, valid: tuple) -> None:
    """cuTile's memory order/scope rules (they have no other effect on serialized blocks)."""
    if not isinstance(order, MemoryOrder):
        raise compile_error(f"{op}: Expected MemoryOrder, got {order!r}")
    if not isinstance(scope, MemoryScope):
        raise compile_error(f"{op}: Expected MemoryScope, got {scope!r}")
    if order not in valid:
        raise compile_error(f"Invalid memory order for {op}. Got {order}, expected one of "
                            f"{', '.join(str(o) for o in valid)}")
    if order == MemoryOrder.WEAK and scope != MemoryScope.NONE:
        raise compile_error(f"{op} with WEAK memory ordering cannot specify a memory scope")
    if order != MemoryOrder.WEAK and scope == MemoryScope.NONE:
        raise compile_error(f"{op} with {order.name} memory ordering requires a memory scope")


def padding_fill(mode: PaddingMode, dtype: TileDType, op: str) -> np.ndarray:
    """The value out-of-bounds elements of a load get (UNDETERMINED: zero)."""
    if mode in (PaddingMode.UNDETERMINED, PaddingMode.ZERO):
        return const_array(0, dtype)
    if mode == PaddingMode.NEG_ZERO:
        return const_array(-0.0 if dtype.kind == "f" else 0, dtype)
    if dtype.kind != "f":
        raise compile_error(f"{op}: padding mode {mode.name} needs a floating-point array, got "
                            f"{dtype}")
    value = {PaddingMode.NAN: float("nan"), PaddingMode.POS_INF: float("inf"),
             PaddingMode.NEG_INF: float("-inf")}[mode]
    return np.asarray(value, np.float32).astype(dtype.storage)


def stored_values(tile: Any, dtype: TileDType, what: str) -> tuple[np.ndarray, tuple]:
    """Values of a tile (or constant) implicitly cast to an array's dtype."""
    v, d = operand(tile, "tile")
    check_implicit_cast(d, v, dtype, what)
    if d is None:
        return const_array(v, dtype), ()
    return convert(v, d, dtype), v.shape


def assign(arr: Array, where: Any, values: np.ndarray, op: str) -> None:
    """Write into the caller's array (LaunchError for read-only arrays)."""
    try:
        arr._data[where] = values
    except ValueError as e:
        if not arr._data.flags.writeable:
            raise launch_error(f"{op}: array '{arr._root.name}' is read-only",
                               hint="pass a writeable numpy array") from e
        raise


def broadcastable(src: tuple, dst: tuple) -> bool:
    """Whether a shape broadcasts to another (NumPy rule, without changing ``dst``)."""
    pairs = zip(reversed(src), reversed(dst))
    return len(src) <= len(dst) and all(s in (t, 1) for s, t in pairs)


def view_values(view: TiledView, tile: Any, what: str) -> tuple[Any, Any, tuple]:
    """Values of a tile stored into a tiled view, checked against its tile shape."""
    v, d = operand(tile, "tile")
    if not broadcastable(np.shape(v), view._tile_shape):
        raise compile_error(f"{what} shape {np.shape(v)} is not broadcastable to the tiled "
                            f"view's tile shape {view._tile_shape}")
    full = view._tile_shape if view._tile_shape else (1,) * view._array.ndim
    return v, d, full
