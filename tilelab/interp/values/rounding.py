"""Correctly rounded dtype conversions, the way the GPU does them.

numpy and ml_dtypes convert most pairs correctly, but not all: ml_dtypes goes from float64
to bfloat16 through float32 (rounding twice), overflowing fp8 conversions give NaN where
the GPU saturates (PTX ``cvt ... .satfinite``), float-to-int casts of NaN or huge values
are undefined in C, and cuTile also offers directed rounding modes (``RoundingMode.RZ``,
``RM``, ``RP``, ``RA``). This module converts with one rounding from the exact value:
it brackets the source value between two neighbouring values of the target format and
picks the one the rounding mode asks for.

Conventions of the GPU that we follow:
  * float -> int truncates toward zero, saturates at the integer range, NaN -> 0;
  * float -> fp8/fp4 saturates to the largest finite value (``.satfinite``);
  * ``astype(ct.tfloat32)`` keeps 10 mantissa bits (to nearest even unless a rounding
    mode says otherwise); ``mma`` of float32 operands does not round them (full fp32),
    only tiles cast to ``ct.tfloat32`` are tf32. :func:`round_to_tf32_rna` is the
    ties-away rounding of ``cvt.rna.tf32.f32``, for tools that model it.
"""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from cuda.tile import RoundingMode
from tilelab.interp.values.dtypes import (BOOL, FLOAT32, FLOAT64, RESTRICTED, TFLOAT32,
                                          TileDType)

__all__ = ["convert", "round_to_tf32_rna", "flush_subnormals", "to_float64",
           "float_max", "DIRECTED_MODES"]

DIRECTED_MODES = (RoundingMode.RZ, RoundingMode.RM, RoundingMode.RP, RoundingMode.RA)

# Storage types whose values convert exactly to float32 / float64.
_NARROW_FLOATS = {np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32),
                  np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2),
                  np.dtype(ml_dtypes.float8_e8m0fnu), np.dtype(ml_dtypes.float4_e2m1fn)}


class _Bits:
    """How to step between neighbouring values of a float format on its bit pattern."""

    def __init__(self, uint: Any, bitwidth: int, step: int, signed: bool, has_inf: bool):
        self.uint = np.dtype(uint)
        self.bitwidth = bitwidth
        self.step = step
        self.sign = (1 << (bitwidth - 1)) if signed else 0
        self.mag_mask = (1 << (bitwidth - 1 if signed else bitwidth)) - 1
        self.has_inf = has_inf


_BITS: dict[str, _Bits] = {
    "float16": _Bits(np.uint16, 16, 1, True, True),
    "bfloat16": _Bits(np.uint16, 16, 1, True, True),
    "float32": _Bits(np.uint32, 32, 1, True, True),
    "tfloat32": _Bits(np.uint32, 32, 1 << 13, True, True),
    "float8_e4m3fn": _Bits(np.uint8, 8, 1, True, False),
    "float8_e5m2": _Bits(np.uint8, 8, 1, True, True),
    "float8_e8m0fnu": _Bits(np.uint8, 8, 1, False, False),
    "float4_e2m1fn": _Bits(np.uint8, 4, 1, True, False),
}


def float_max(dtype: TileDType) -> float:
    """Largest finite value of a float dtype."""
    if dtype is TFLOAT32:
        return float(np.finfo(np.float32).max) - 2.0 ** 104 * (2.0 ** 13 - 1)
    return float(ml_dtypes.finfo(dtype.storage).max)


def to_float64(values: np.ndarray) -> np.ndarray:
    """Exact float64 copy of float or integer values (bool -> 0/1)."""
    if values.dtype == np.float64:
        return values
    return values.astype(np.float64)


def flush_subnormals(values: np.ndarray) -> np.ndarray:
    """Replace float32 subnormals by zeros of the same sign (``flush_to_zero=True``)."""
    tiny = np.float32(np.finfo(np.float32).tiny)
    mask = (np.abs(values) < tiny) & (values != 0)
    if not mask.any():
        return values
    return np.where(mask, np.copysign(np.float32(0), values), values).astype(values.dtype)


def round_to_tf32_rna(values: np.ndarray) -> np.ndarray:
    """Round float32 values to tf32 (10 mantissa bits), to nearest, ties away from zero."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)
    return np.where(np.isnan(values), values, rounded).astype(np.float32)


def _saturate(x: np.ndarray, dtype: TileDType) -> np.ndarray:
    """Clamp to the finite range (NaN passes), like PTX ``.satfinite`` conversions."""
    m = float_max(dtype)
    return np.clip(x, -m, m) if dtype.signed else np.clip(x, None, m)


def _neighbours(c: np.ndarray, spec: _Bits, up: bool) -> np.ndarray:
    """The next representable value above (``up``) or below each value of ``c``."""
    u = c.view(spec.uint).astype(np.int64)
    neg = (u & spec.sign) != 0 if spec.sign else np.zeros(u.shape, bool)
    mag = u & spec.mag_mask
    step = spec.step
    if up:
        out = np.where(neg, np.where(mag == 0, step, u - step), u + step)
    else:
        out = np.where(neg, u + step,
                       np.where(mag == 0, spec.sign | step if spec.sign else u, u - step))
    return out.astype(spec.uint).view(c.dtype)


def _lsb_even(c: np.ndarray, spec: _Bits) -> np.ndarray:
    u = c.view(spec.uint).astype(np.int64)
    return ((u // spec.step) & 1) == 0


def _round_bracket(x: np.ndarray, dtype: TileDType, mode: RoundingMode | None) -> np.ndarray:
    """Round exact float64 values ``x`` into ``dtype`` with one rounding."""
    spec = _BITS[dtype.name]
    storage = dtype.storage
    if dtype is TFLOAT32:
        x32 = x.astype(np.float32)
        c = (x32.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
        c = np.where(np.isinf(x32), x32, c).astype(np.float32)
    else:
        with np.errstate(over="ignore"):   # (overflow is rounded below, to inf or max)
            c = x.astype(storage)
    c = np.asarray(c, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
    c64 = c.astype(np.float64)
    up = _neighbours(c, spec, up=True)
    down = _neighbours(c, spec, up=False)
    below = c64 < x  # c is the lower end of the bracket
    lo = np.where(below, c, down)
    hi = np.where(below, up, c)
    lo64, hi64 = lo.astype(np.float64), hi.astype(np.float64)
    if mode is None or mode in (RoundingMode.RN, RoundingMode.RA):
        # Treat infinity as the value one ulp above the largest finite number.
        big = float_max(dtype)
        big_array = np.array([big], dtype=np.float32 if dtype is TFLOAT32 else storage)
        below_big = float(_neighbours(big_array, spec, up=False)[0])
        pseudo_inf = 2 * big - below_big
        hi_eff = np.where(np.isposinf(hi64), pseudo_inf, hi64)
        lo_eff = np.where(np.isneginf(lo64), -pseudo_inf, lo64)
        d_lo, d_hi = x - lo_eff, hi_eff - x
        if mode is RoundingMode.RA:
            tie_pick_hi = x > 0
        else:  # ties to even; the pseudo infinities have an even last digit
            tie_pick_hi = np.where(np.isposinf(hi64), True,
                                   np.where(np.isneginf(lo64), False, _lsb_even(hi, spec)))
        pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & tie_pick_hi)
    elif mode is RoundingMode.RZ:
        pick_hi = x < 0
    elif mode is RoundingMode.RM:
        pick_hi = np.zeros(x.shape, bool)
    elif mode is RoundingMode.RP:
        pick_hi = np.ones(x.shape, bool)
    else:
        raise ValueError(f"unsupported rounding mode {mode}")
    out = np.where(pick_hi, hi, lo)
    exact = (c64 == x) | np.isnan(x)
    return np.where(exact, c, out).astype(storage if dtype is not TFLOAT32 else np.float32)


def convert(values: np.ndarray, src: TileDType, dst: TileDType,
            mode: RoundingMode | None = None) -> np.ndarray:
    """Convert stored values of ``src`` into storage of ``dst`` as the GPU would.

    ``mode`` is a float-to-float rounding mode (None means round to nearest even).

    Example:
        >>> import numpy as np
        >>> from tilelab.interp.values.dtypes import DTYPES
        >>> convert(np.array([300.7, -1e20, np.nan], np.float32), DTYPES["float32"],
        ...         DTYPES["int8"])
        array([ 127, -128,    0], dtype=int8)
    """
    if src is dst:
        return values
    if dst is BOOL:
        if src.kind == "f" and values.dtype not in (np.float32, np.float64):
            values = values.astype(np.float32)
        return np.asarray(values != 0)
    if dst.kind in "iu":
        if src.kind in "biu":
            return values.astype(dst.storage)
        x = to_float64(values)
        info = np.iinfo(dst.storage)
        x = np.trunc(np.where(np.isnan(x), 0.0, x))
        top = float(info.max)
        if top > info.max:  # 2**63 - 1 and 2**64 - 1 are not floats: stay below them
            top = float(np.nextafter(top, 0.0))
        out = np.clip(x, float(info.min), top).astype(dst.storage)
        return np.where(x > top, np.array(info.max, dst.storage), out)
    # float destination
    if dst is FLOAT64:
        return values.astype(np.float64)
    restricted = dst.category == RESTRICTED and dst is not TFLOAT32
    simple = (mode is None or mode is RoundingMode.RN) and dst is not TFLOAT32 and (
        values.dtype in _NARROW_FLOATS or values.dtype == np.bool_
        or (values.dtype.kind in "iu" and values.dtype.itemsize <= 2)
        or (dst is FLOAT32 and values.dtype.kind in "fiu"))
    if simple:
        if restricted:
            values = _saturate(values.astype(np.float32) if values.dtype.kind != "f"
                               or values.dtype.itemsize < 4 else values, dst)
        return values.astype(dst.storage)
    x = to_float64(values)
    if restricted:
        x = _saturate(x, dst)
    return _round_bracket(x, dst, mode)
