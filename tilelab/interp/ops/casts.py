"""Conversions: ``astype``, ``bitcast`` and the dtype constructors (``ct.int16(2)``).

``astype`` rounds float-to-float conversions to nearest even unless a ``rounding_mode``
cuTile accepts for that pair is given, truncates and saturates float-to-int (NaN -> 0) and
saturates float-to-fp8, all through :func:`tilelab.interp.values.rounding.convert`.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from cuda.tile import RoundingMode
from tilelab.interp import _cutile
from tilelab.interp.context import compile_error, unsupported
from tilelab.interp.ops.elementwise import const_array, is_const, operand
from tilelab.interp.values.dtypes import (BOOL, LooseFloat, LooseInt, TileDType, as_dtype,
                                          from_numpy, is_loose, loose_dtype)
from tilelab.interp.values.methods import method
from tilelab.interp.values.rounding import convert
from tilelab.interp.values.tile import Tile, values_of

__all__ = ["construct", "astype", "bitcast", "fold_constant", "python_value"]


def construct(dtype: Any, value: Any = 0) -> Tile:
    """``ct.int16(2)`` / ``ct.float32(x)``: a strictly typed scalar of ``dtype``.

    Constants (strings and ``None`` too, as in cuTile: ``ct.float32("-inf")``; no argument
    means 0) are converted like Python's ``int()``/``float()``/``bool()``, then wrapped or
    encoded into the dtype as cuTile's compiler folds them; a scalar tile is converted with
    ``astype`` (a constant one is folded the same way). float4_e2m1fn, whose values are not
    whole bytes, is no constructor in cuTile.
    """
    dt = as_dtype(dtype)
    if dt.bitwidth % 8:
        raise compile_error(f"Cannot call an object of type DTypeSpec(dtype={dt!r})")
    if is_loose(value) or isinstance(value, str) or value is None:
        py = bool if dt is BOOL else int if dt.kind in "iu" else float
        try:
            v = py(value)
        except (ValueError, TypeError, OverflowError):
            raise compile_error(f"Invalid argument type for {dt}") from None
        return Tile(const_array(v, dt), dt, True)
    if isinstance(value, Tile) and value._c and value.ndim == 0:
        return astype(value, dt)    # folded (see astype)
    vals, src = operand(value)
    if vals.ndim != 0:
        raise compile_error(f"{dt}(): expected a scalar value, but given value has shape "
                            f"{vals.shape}")
    return astype(Tile(vals, src, is_const(value)), dt)


def astype(x, dtype, /, *, rounding_mode=None):
    """Convert to ``dtype``: floats round to nearest even unless ``rounding_mode`` says
    otherwise; float -> int truncates and saturates; fp8 conversions saturate. A scalar
    constant is folded as cuTile folds it (:func:`fold_constant`), even one of a dtype the
    target does not compute with (``ct.float64(ct.float8_e8m0fnu(0.2))`` compiles for
    sm_90: the float8 value never exists on the GPU).

    The conversion is type-checked from the dtypes alone before any value is read: cuTile
    refuses a rounding mode while it infers types and a dtype the target does not compute
    with only in a later pass, so ``t.astype(ct.float32, rounding_mode=RA)`` of a
    float8_e8m0fnu tile on sm_90 is the rounding mode's TileTypeError, not the dtype's."""
    dst = as_dtype(dtype)
    src = _source_dtype(x)
    if dst.storage is None:
        raise unsupported(f"astype to {dst}", "numpy has no storage type for this format")
    mode = _check_rounding_mode(src, dst, rounding_mode)
    if isinstance(x, Tile) and x._c and x.ndim == 0:
        xv, xd = values_of(x), x._dt
    else:
        xv, xd = operand(x)
    if xd is None:
        xd = loose_dtype(xv)
        xv = const_array(xv, xd)
    c = is_const(x)
    m = x._m if isinstance(x, Tile) else None
    if xd is dst:
        return Tile(xv, xd, c, m)
    if c and np.ndim(xv) == 0 and mode is RoundingMode.RN:
        return Tile(fold_constant(xv, xd, dst), dst, True, m)
    return Tile(convert(xv, xd, dst, None if mode is RoundingMode.RN else mode), dst, c, m)


def _source_dtype(x: Any) -> TileDType:
    """The dtype ``astype`` converts from, read without reading a tile's values (a loose
    constant's is the dtype cuTile gives it)."""
    if isinstance(x, Tile):
        return x._dt
    if isinstance(x, np.generic):
        return from_numpy(x.dtype)
    if is_loose(x):
        return loose_dtype(x)
    raise compile_error(f"expected a tile or a scalar for operand, got {type(x).__name__}")


def _check_rounding_mode(src: TileDType, dst: TileDType, rounding_mode: Any) -> RoundingMode:
    """The rounding mode of a conversion from ``src`` to ``dst`` (RN without one), refused
    with cuTile's words where cuTile's type inference refuses it."""
    if rounding_mode is not None and not isinstance(rounding_mode, RoundingMode):
        raise compile_error(f"Expected RoundingMode, got {rounding_mode!r}")
    ftof = src.kind == "f" and dst.kind == "f"
    if not ftof and rounding_mode is not None:
        raise compile_error("rounding_mode is only valid for float to float conversions")
    mode = RoundingMode.RN if rounding_mode is None else rounding_mode
    if ftof and src is not dst:
        modes = _cutile.ftof_rounding_modes(src.real, dst.real)
        if modes is None:
            raise compile_error(f"float conversion from {src} to {dst} is not supported")
        if mode not in modes:
            raise compile_error(
                f"rounding_mode={mode} is not supported for conversion from {src} to {dst}, "
                f"supported rounding modes for this conversion are {modes}")
    return mode


def fold_constant(value: np.ndarray, src: TileDType, dst: TileDType) -> np.ndarray:
    """A scalar constant converted as cuTile's compiler folds it: through Python's
    ``bool()``/``int()``/``float()`` (so a float constant truncates and then wraps into an
    integer dtype, where a run-time conversion saturates), then encoded in ``dst`` (see
    :func:`tilelab.interp.ops.elementwise.const_array`)."""
    py = python_value(value, src)
    target = bool if dst is BOOL else int if dst.kind in "iu" else float
    try:
        folded = target(py)
    except (ValueError, TypeError, OverflowError) as e:
        raise compile_error(f"cannot convert the constant {py!r} to {dst}: {e}") from None
    return const_array(folded, dst)


def python_value(value: np.ndarray, dtype: TileDType) -> bool | int | float:
    """The Python value of a scalar of ``dtype`` (bfloat16 and fp8 included)."""
    if dtype is BOOL:
        return bool(value)
    if dtype.kind in "iu":
        return int(value)
    return float(np.asarray(value).astype(np.float64))


def bitcast(x, /, dtype):
    """Reinterpret the bits of each element as ``dtype`` (same bit width, no bool), checked
    from the dtypes before any value is read (as :func:`astype` is)."""
    dst = as_dtype(dtype)
    xd = _source_dtype(x)
    if xd is BOOL or dst is BOOL:
        raise compile_error(f"Cannot bitcast from {xd} to {dst}: bitcast to or from bool is "
                            f"not supported")
    if xd.bitwidth != dst.bitwidth:
        raise compile_error(f"Cannot bitcast from {xd} to {dst}: bit width is different "
                            f"({xd.bitwidth} vs. {dst.bitwidth})")
    xv, _ = operand(x)
    if not isinstance(x, (Tile, np.generic)):
        xv = const_array(xv, xd)
    m = x._m if isinstance(x, Tile) else None
    if xd is dst:
        return Tile(xv, xd, is_const(x), m)
    if dst.storage is None or xd.storage is None:
        raise unsupported(f"bitcast to {dst}", "numpy has no storage type for this format")
    raw = np.ascontiguousarray(xv)
    if xd.bitwidth == 4:
        out = (raw.view(np.uint8) & np.uint8(0xF)).view(dst.storage)
    else:
        out = raw.view(dst.storage)
    return Tile(out.reshape(xv.shape), dst, is_const(x), m)


# ---- the methods that are conversions (see tilelab.interp.values.methods) -------------

@method(Tile, "astype")
def _tile_astype(self, dtype, *, rounding_mode=None) -> "Tile":
    return astype(self, dtype, rounding_mode=rounding_mode)


@method(TileDType, "__call__")
def _dtype_call(self, value: Any = 0, /) -> Any:
    """``ct.int16(2)``: a strictly typed scalar of this dtype (see ``astype``)."""
    return construct(self, value)


@method(LooseInt, "astype")
def _loose_int_astype(self, dtype: Any, *, rounding_mode: Any = None) -> Any:
    return astype(int(self), dtype, rounding_mode=rounding_mode)


@method(LooseFloat, "astype")
def _loose_float_astype(self, dtype: Any, *, rounding_mode: Any = None) -> Any:
    return astype(float(self), dtype, rounding_mode=rounding_mode)
