"""Unary cuTile ops: math functions, negation, absolute value, bitwise not, ``isnan``.

Each op treats bool/integer/float inputs as cuTile does (``exp`` of an int32 tile is
float32, ``floor`` rejects integers, ``-bool_tile`` is int32...). The math functions
(``exp``, ``log``, ``sin``, ``tanh``, ``rsqrt``...) of float32, float16 and bfloat16 are
computed in float64 and rounded once to the tile's dtype, so they are correctly rounded
except where float64 lands within 2^-29 ulp of a rounding boundary (at most 0.5 + 2^-28
ulp); ``sqrt`` is IEEE and its directed rounding modes are exact. A Python constant folds
with ``math``.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Callable

import numpy as np

from cuda.tile import RoundingMode
from tilelab.interp.context import compile_error
from tilelab.interp.ops.casts import astype
from tilelab.interp.ops.elementwise import (check_rounding, count_flops, directed_f64,
                                            is_const, make, operand, require_bool_flag)
from tilelab.interp.values.dtypes import BOOL, FLOAT32, FLOAT64, INT32, RESTRICTED
from tilelab.interp.values.methods import method
from tilelab.interp.values.rounding import DIRECTED_MODES, convert, flush_subnormals
from tilelab.interp.values.tile import Tile

__all__ = ["exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tan", "sinh",
           "cosh", "tanh", "floor", "ceil", "abs_", "negative", "positive", "bitwise_not",
           "invert", "isnan"]


_PY_UNARY: dict[str, Callable] = {
    "abs": abs, "neg": operator.neg, "exp": math.exp, "exp2": lambda v: 2 ** v,
    "sin": math.sin, "sinh": math.sinh, "cos": math.cos, "cosh": math.cosh, "tan": math.tan,
    "tanh": math.tanh, "log": math.log, "log2": math.log2, "sqrt": math.sqrt,
    "rsqrt": lambda v: v ** -0.5, "floor": math.floor, "ceil": math.ceil,
    "bitwise_not": lambda v: (not v) if isinstance(v, bool) else ~v,
}

_NP_UNARY: dict[str, Callable] = {
    "exp": np.exp, "exp2": np.exp2, "sin": np.sin, "sinh": np.sinh, "cos": np.cos,
    "cosh": np.cosh, "tan": np.tan, "tanh": np.tanh, "log": np.log, "log2": np.log2,
    "sqrt": np.sqrt, "rsqrt": lambda v: 1.0 / np.sqrt(v), "floor": np.floor, "ceil": np.ceil,
}

#: ops whose float32 result numpy computes exactly or correctly rounded (IEEE sqrt,
#: floor, ceil); the math functions are computed in float64 and rounded once instead,
#: since numpy's float32 versions are up to 3 ulp off (see docs/interp.md, "Accuracy")
_EXACT_IN_FLOAT32 = frozenset({"sqrt", "floor", "ceil"})

# How each unary op treats bool / integer / float inputs (cuTile's UnaryBehavior):
# "float" converts bool and integers to float32; "strict" rejects them; "preserve" keeps.
_FLOAT, _STRICT, _INT_FLOAT, _BOOL_INT, _ANY = "float", "strict", "int_float", "bool_int", "any"


def _unary(fn: str, behavior: str, x: Any, *, rounding_mode: RoundingMode | None = None,
           flush_to_zero: bool = False) -> Any:
    xv, xd = operand(x)
    if xd is None:
        try:
            return _PY_UNARY[fn](xv)
        except (ValueError, OverflowError, ZeroDivisionError, TypeError) as e:
            raise compile_error(f"{type(e).__name__}: {e}") from None
    if xd.kind == "b":
        if behavior in (_FLOAT,):
            xv, xd = convert(xv, xd, FLOAT32), FLOAT32
        elif behavior == _INT_FLOAT:
            xv, xd = convert(xv, xd, INT32), INT32
        elif behavior not in (_BOOL_INT, _ANY):
            raise compile_error(f"{fn}: Boolean inputs are not supported")
    elif xd.kind in "iu":
        if behavior == _FLOAT:
            xv, xd = convert(xv, xd, FLOAT32), FLOAT32
        elif behavior == _STRICT:
            raise compile_error(f"{fn}: Integer inputs are not supported",
                                hint="convert with .astype(ct.float32) first")
    else:
        if behavior == _BOOL_INT:
            raise compile_error(f"{fn}: Float inputs are not supported",
                                hint="use ct.bitcast to reinterpret float bits as integers")
        if xd.category == RESTRICTED:
            raise compile_error(f"{fn} is not supported on {xd} tiles",
                                hint="convert with .astype(ct.float32) first")
    check_rounding(fn, rounding_mode, flush_to_zero, xd)
    c = is_const(x)
    m = x._m if isinstance(x, Tile) else None
    if fn == "neg":
        return make(np.negative(xv), xd, c, m)
    if fn == "abs":
        return make(np.abs(xv) if xd.kind != "b" else xv, xd, c, m)
    if fn == "bitwise_not":
        return make(np.logical_not(xv) if xd.kind == "b" else np.invert(xv), xd, c, m)
    f = _NP_UNARY[fn]
    if xd is FLOAT64:
        if fn == "sqrt" and rounding_mode in DIRECTED_MODES:
            out = directed_f64("sqrt", xv, None, rounding_mode)
        else:
            out = f(xv)
    else:
        a = xv if xd is FLOAT32 else xv.astype(np.float32)
        if flush_to_zero:
            a = flush_subnormals(a)
        if fn in _EXACT_IN_FLOAT32 and rounding_mode not in DIRECTED_MODES:
            out = convert(np.asarray(f(a), dtype=np.float32), FLOAT32, xd)
        else:   # in float64, rounded once: correctly rounded but for rare double roundings
            directed = rounding_mode if rounding_mode in DIRECTED_MODES else None
            out = convert(np.asarray(f(a.astype(np.float64))), FLOAT64, xd, directed)
        if flush_to_zero:
            out = flush_subnormals(out)
    count_flops(np.size(out), m)
    return make(out, xd, c, m)


def exp(x, /, *, rounding_mode=None):
    """``e ** x``; integers and bools are converted to float32 first."""
    return _unary("exp", _FLOAT, x, rounding_mode=rounding_mode)


def exp2(x, /, *, flush_to_zero=False):
    """``2 ** x``."""
    ftz = require_bool_flag(flush_to_zero, "flush_to_zero")
    return _unary("exp2", _FLOAT, x, flush_to_zero=ftz)


def log(x, /):
    """Natural logarithm."""
    return _unary("log", _FLOAT, x)


def log2(x, /):
    """Base-2 logarithm."""
    return _unary("log2", _FLOAT, x)


def sqrt(x, /, *, rounding_mode=None, flush_to_zero=False):
    """Square root (correctly rounded; directed modes honoured)."""
    return _unary("sqrt", _FLOAT, x, rounding_mode=rounding_mode,
                  flush_to_zero=require_bool_flag(flush_to_zero, "flush_to_zero"))


def rsqrt(x, /, *, flush_to_zero=False):
    """``1 / sqrt(x)``."""
    ftz = require_bool_flag(flush_to_zero, "flush_to_zero")
    return _unary("rsqrt", _FLOAT, x, flush_to_zero=ftz)


def sin(x, /):
    """Sine."""
    return _unary("sin", _FLOAT, x)


def cos(x, /):
    """Cosine."""
    return _unary("cos", _FLOAT, x)


def tan(x, /):
    """Tangent."""
    return _unary("tan", _FLOAT, x)


def sinh(x, /):
    """Hyperbolic sine."""
    return _unary("sinh", _FLOAT, x)


def cosh(x, /):
    """Hyperbolic cosine."""
    return _unary("cosh", _FLOAT, x)


def tanh(x, /, *, rounding_mode=None):
    """Hyperbolic tangent."""
    return _unary("tanh", _FLOAT, x, rounding_mode=rounding_mode)


def floor(x, /):
    """Round down; floats only."""
    return _unary("floor", _STRICT, x)


def ceil(x, /):
    """Round up; floats only."""
    return _unary("ceil", _STRICT, x)


def abs_(x, /):
    """Absolute value (integers wrap at their minimum, as on the GPU)."""
    return _unary("abs", _ANY, x)


def negative(x, /):
    """``-x``; bools become int32."""
    return _unary("neg", _INT_FLOAT, x)


def positive(x, /):
    """``+x``; bools become int32."""
    xv, xd = operand(x)
    if xd is None:
        return +xv
    return astype(x, INT32) if xd is BOOL else x


def bitwise_not(x, /):
    """``~x`` for integers, logical not for bools."""
    return _unary("bitwise_not", _BOOL_INT, x)


def invert(x, /):
    """The ``~`` operator (same as :func:`bitwise_not` on tiles)."""
    if isinstance(x, bool):
        raise compile_error("`~` on boolean constant is not supported, please use "
                            "ct.bitwise_not")
    return _unary("bitwise_not", _BOOL_INT, x)


def isnan(x, /):
    """Whether each element is NaN (a bool tile); integers are rejected."""
    xv, xd = operand(x)
    if xd is None:
        return math.isnan(xv)
    if xd.kind != "f":
        raise compile_error(f"isnan: Unexpected input type {xd}")
    return make(np.isnan(xv.astype(np.float32) if xd.storage.itemsize < 4 else xv), BOOL,
                is_const(x), x._m if isinstance(x, Tile) else None)


# ---- Tile's unary operators (see tilelab.interp.values.methods) -----------------------

@method(Tile, "__neg__")
def _tile_neg(self):
    return negative(self)


@method(Tile, "__pos__")
def _tile_pos(self):
    return positive(self)


@method(Tile, "__invert__")
def _tile_invert(self):
    return invert(self)


@method(Tile, "__abs__")
def _tile_abs(self):
    return abs_(self)
