"""Conversions: ``astype``, ``bitcast`` and the dtype constructors (``ct.int16(2)``).

``astype`` rounds float-to-float conversions to nearest even unless a ``rounding_mode``
cuTile accepts for that pair is given, truncates and saturates float-to-int (NaN -> 0) and
saturates float-to-fp8, all through :func:`tilelab.interp.rounding.convert`.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from cuda.tile import RoundingMode
from tilelab.interp import _cutile
from tilelab.interp.context import compile_error, unsupported
from tilelab.interp.dtypes import BOOL, as_dtype, is_loose, loose_dtype
from tilelab.interp.elementwise import const_array, is_const, operand
from tilelab.interp.rounding import convert
from tilelab.interp.tile import Tile

__all__ = ["construct", "astype", "bitcast"]


def construct(dtype: Any, value: Any) -> Tile:
    """``ct.int16(2)`` / ``ct.float32(x)``: a strictly typed scalar of ``dtype``.

    Constants are converted like Python's ``int()``/``float()``/``bool()`` (then wrapped or
    rounded into the dtype); a scalar tile is converted with ``astype``.
    """
    dt = as_dtype(dtype)
    if is_loose(value):
        py = bool if dt is BOOL else int if dt.kind in "iu" else float
        try:
            v = py(value)
        except (ValueError, TypeError, OverflowError):
            raise compile_error(f"Invalid argument type for {dt}") from None
        return Tile(const_array(v, dt), dt, True)
    vals, src = operand(value)
    if vals.ndim != 0:
        raise compile_error(f"{dt}(): expected a scalar value, but given value has shape "
                            f"{vals.shape}")
    return astype(Tile(vals, src, is_const(value)), dt)


def astype(x, dtype, /, *, rounding_mode=None):
    """Convert to ``dtype``: floats round to nearest even unless ``rounding_mode`` says
    otherwise; float -> int truncates and saturates; fp8 conversions saturate."""
    dst = as_dtype(dtype)
    xv, xd = operand(x)
    if xd is None:
        xd = loose_dtype(xv)
        xv = const_array(xv, xd)
    if dst.storage is None:
        raise unsupported(f"astype to {dst}", "numpy has no storage type for this format")
    if rounding_mode is not None and not isinstance(rounding_mode, RoundingMode):
        raise compile_error(f"Expected RoundingMode, got {rounding_mode!r}")
    ftof = xd.kind == "f" and dst.kind == "f"
    if not ftof and rounding_mode is not None:
        raise compile_error("rounding_mode is only valid for float to float conversions")
    c = is_const(x)
    m = x._m if isinstance(x, Tile) else None
    if xd is dst:
        return Tile(xv, xd, c, m)
    if ftof:
        modes = _cutile.ftof_rounding_modes(xd.real, dst.real)
        if modes is None:
            raise compile_error(f"float conversion from {xd} to {dst} is not supported")
        mode = RoundingMode.RN if rounding_mode is None else rounding_mode
        if mode not in modes:
            raise compile_error(
                f"rounding_mode={mode} is not supported for conversion from {xd} to {dst}, "
                f"supported rounding modes for this conversion are {modes}")
        return Tile(convert(xv, xd, dst, None if mode is RoundingMode.RN else mode), dst, c, m)
    return Tile(convert(xv, xd, dst), dst, c, m)


def bitcast(x, /, dtype):
    """Reinterpret the bits of each element as ``dtype`` (same bit width, no bool)."""
    dst = as_dtype(dtype)
    xv, xd = operand(x)
    if xd is None:
        xd = loose_dtype(xv)
        xv = const_array(xv, xd)
    if xd is BOOL or dst is BOOL:
        raise compile_error(f"Cannot bitcast from {xd} to {dst}: bitcast to or from bool is "
                            f"not supported")
    if xd.bitwidth != dst.bitwidth:
        raise compile_error(f"Cannot bitcast from {xd} to {dst}: bit width is different "
                            f"({xd.bitwidth} vs. {dst.bitwidth})")
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
