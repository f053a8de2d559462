"""Element-wise binary cuTile ops: arithmetic, bitwise, comparisons and ``where``.

Typing follows cuTile exactly (see :mod:`tilelab.interp.values.dtypes`): two loosely typed
Python constants fold with Python semantics, anything else is promoted to a common dtype
first (``truediv`` of integers gives float32), and the errors are the compiler's.

Numerics follow the GPU: integer ops wrap, ``//`` and ``%`` round toward negative infinity
(Python style, which cuTile implements on top of C-style division), float16 and bfloat16
ops are computed in float32 and rounded once (which is exact for + - * / sqrt),
``pow`` and ``atan2`` are computed in float64 and rounded once (correctly rounded for
float32 and narrower but for rare double roundings),
a float ``//`` divides in the operands' dtype (and rounding mode) and then floors, as
cuTile's ``DivFOp`` + ``FloorOp`` do (float16 ``93.5 // 4.453`` is 21, not the floor of
the float32 quotient 20.996), directed rounding modes are honoured, and ``flush_to_zero`` flushes float32 subnormals.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Callable

import numpy as np

import cuda.tile as ct
from cuda.tile import RoundingMode
from tilelab.interp import _cutile
from tilelab.interp.context import active, compile_error
from tilelab.interp.values.dtypes import (BOOL, FLOAT32, FLOAT64, INT32, RESTRICTED,
                                          TileDType, from_numpy, is_loose, loose_dtype,
                                          promote_operands)
from tilelab.interp.values.methods import method
from tilelab.interp.values.rounding import DIRECTED_MODES, convert, flush_subnormals
from tilelab.interp.values.tile import Tile

__all__ = [
    "operand", "const_array", "coerce", "make", "is_const", "broadcast_shape", "count_flops",
    "valid_of", "attach_operator",
    "check_rounding", "require_bool_flag", "float_binary", "directed_f64",
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow_", "atan2", "minimum",
    "maximum", "divmod_", "cdiv", "bitwise_and", "bitwise_or", "bitwise_xor",
    "bitwise_lshift", "bitwise_rshift", "equal", "not_equal", "less", "less_equal",
    "greater", "greater_equal", "where", "OPERATORS",
]


# ---- operands -------------------------------------------------------------------------------

def operand(x: Any, what: str = "operand") -> tuple[Any, TileDType | None]:
    """``(values, dtype)`` of a tile, or ``(x, None)`` for a loosely typed constant."""
    if isinstance(x, Tile):
        return x._v, x._dt
    if is_loose(x):
        return x, None
    if isinstance(x, np.generic):
        return np.asarray(x), from_numpy(x.dtype)
    raise compile_error(f"expected a tile or a scalar for {what}, got {type(x).__name__}")


_CONSTS: dict[tuple, np.ndarray] = {}


def const_array(value: bool | int | float, dtype: TileDType) -> np.ndarray:
    """A 0-d array of ``dtype`` holding a Python constant, as cuTile's compiler folds it:
    integers wrap, floats round to nearest even with cuTile's own encoder, so overflow
    gives inf (NaN in float8_e4m3fn, which has no inf; cuTile folds constants without
    the ``.satfinite`` of run-time conversions) and 0 in float8_e8m0fnu is 2^-127 (0x00);
    a value the format cannot hold (a negative in float8_e8m0fnu) is a CompileError with
    cuTile's message.

    The result is read-only and cached (a bf16 padding value or a ``0.5`` costs one
    correctly rounded conversion per launch of the interpreter process, not per use).
    """
    key = (dtype.name, type(value), value, math.copysign(1.0, value)
           if isinstance(value, float) else 0)
    found = _CONSTS.get(key)
    if found is not None:
        return found
    if dtype is BOOL:
        out = np.asarray(bool(value))
    elif dtype.kind in "iu":
        bits = dtype.bitwidth
        v = int(value) & ((1 << bits) - 1)
        if dtype.kind == "i" and v >= 1 << (bits - 1):
            v -= 1 << bits
        out = np.asarray(v, dtype=dtype.storage)
    elif dtype is FLOAT64 or dtype.storage is None:
        out = convert(np.asarray(float(value), dtype=np.float64), FLOAT64, dtype)
    else:   # encoded as cuTile's compiler encodes constants (0 -> 0x00 in float8_e8m0fnu)
        try:
            exact = _cutile.constant_float_value(value, dtype.real)
        except ValueError as e:   # cuTile raises it as a TileValueError
            raise compile_error(str(e), foreign=ct.TileValueError) from None
        out = np.asarray(exact, dtype=np.float64).astype(dtype.storage)
    out = np.array(out, copy=True)
    out.setflags(write=False)
    if len(_CONSTS) < 4096 and value == value:  # (NaN keys never match)
        _CONSTS[key] = out
    return out


def coerce(values: Any, src: TileDType | None, dst: TileDType) -> np.ndarray:
    """Values of an operand converted to ``dst`` (constants are converted exactly once)."""
    if src is None:
        return const_array(values, dst)
    return convert(values, src, dst)


def make(values: Any, dtype: TileDType, const: bool = False,
         valid: np.ndarray | None = None) -> Tile:
    """Wrap computed values as a tile, making sure they are an array of the storage type
    (``valid``: the useful-lane mask, see :class:`~tilelab.interp.values.tile.Tile`)."""
    arr = np.asarray(values)
    if arr.dtype != dtype.storage:
        arr = arr.astype(dtype.storage)
    if valid is not None and valid.shape != arr.shape:
        valid = np.broadcast_to(valid, arr.shape)
    return Tile(arr, dtype, const, valid)


def valid_of(*xs: Any) -> np.ndarray | None:
    """The useful-lane mask of an element-wise result: lanes where every tile operand
    is useful (constants always are); None when all lanes are."""
    out = None
    for x in xs:
        m = x._m if isinstance(x, Tile) else None
        if m is not None:
            out = m if out is None else (out & m)
    return out


def is_const(*xs: Any) -> bool:
    """Whether all operands are compile-time constants (loose or constant tiles)."""
    return all(x._c if isinstance(x, Tile) else True for x in xs)


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy/cuTile broadcasting of shapes, or CompileError naming them."""
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        listed = ", ".join(str(tuple(s)) for s in shapes)
        raise compile_error(f"Shapes are not broadcastable: {listed}") from None


def count_flops(n: int, valid: np.ndarray | None = None) -> None:
    """Add ``n`` executed element-wise FLOPs to the running block (when tracing); the
    useful ones are the lanes set in ``valid`` (all ``n`` when None)."""
    state = active()
    if state is not None and state.tracer is not None:
        useful = None if valid is None else \
            int(np.count_nonzero(valid)) * (int(n) // max(1, valid.size))
        state.tracer.count_flops(int(n), useful=useful)


# ---- rounding-mode / flush-to-zero validation -----------------------------------------------

def check_rounding(fn: str, mode: RoundingMode | None, ftz: bool, dtype: TileDType) -> None:
    """CompileError unless cuTile accepts ``rounding_mode``/``flush_to_zero`` for this op."""
    if mode is None and not ftz:
        return
    rules = _cutile.math_op_rules(fn)
    modes, ftz_ok = rules if rules is not None else ((), False)
    if mode is not None:
        if not isinstance(mode, RoundingMode):
            raise compile_error(f"Expected RoundingMode, but given value has type "
                                f"{type(mode).__name__}")
        if mode not in modes:
            raise compile_error(f"Rounding mode {mode.value} is not supported for {fn}")
        if dtype.kind != "f" or dtype.category == RESTRICTED:
            raise compile_error(f"Rounding mode can only be used for unrestricted float "
                                f"types, but got {dtype}")
        if mode in (RoundingMode.APPROX, RoundingMode.FULL) and dtype is not FLOAT32:
            raise compile_error(f"Rounding mode {mode.value} can only be used for float32 "
                                f"type, but got {dtype}")
    if ftz:
        if not ftz_ok:
            raise compile_error(f"Flush to zero is not supported for {fn}")
        if dtype is not FLOAT32:
            raise compile_error(f"Flush to zero can only be used for float32 type, but got "
                                f"{dtype}")


def require_bool_flag(value: Any, name: str) -> bool:
    """A compile-time bool option (``keepdims``, ``flush_to_zero``...), else CompileError."""
    if not isinstance(value, bool):
        raise compile_error(f"{name} must be a constant bool, got {value!r}")
    return value


# ---- float kernels --------------------------------------------------------------------------

_FLOAT_BINARY: dict[str, Callable] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
    "mod": np.remainder, "pow": np.power, "atan2": np.arctan2,
}


def _two_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """p + e == a * b exactly (Dekker), for float64 arrays."""
    p = a * b
    split = 134217729.0  # 2**27 + 1
    ta, tb = split * a, split * b
    ah, bh = ta - (ta - a), tb - (tb - b)
    al, bl = a - ah, b - bh
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def directed_f64(fn: str, a: np.ndarray, b: np.ndarray | None,
                 mode: RoundingMode) -> np.ndarray:
    """float64 op rounded with a directed mode, from the RN result and its exact error."""
    if fn in ("add", "sub"):
        bb = -b if fn == "sub" else b
        s = a + bb
        z = s - a
        err = (a - (s - z)) + (bb - z)
    elif fn == "mul":
        s, err = _two_product(a, b)
    elif fn == "truediv":
        s = a / b
        p, pe = _two_product(s, b)
        err = ((a - p) - pe) * np.sign(b)
    elif fn == "sqrt":
        s = np.sqrt(a)
        p, pe = _two_product(s, s)
        err = (a - p) - pe
    else:
        raise AssertionError(fn)
    finite = np.isfinite(s) & np.isfinite(err)
    err = np.where(finite, err, 0.0)
    if mode is RoundingMode.RP:
        out = np.where(err > 0, np.nextafter(s, np.inf), s)
    elif mode is RoundingMode.RM:
        out = np.where(err < 0, np.nextafter(s, -np.inf), s)
    elif mode is RoundingMode.RZ:
        toward = ((err > 0) & (s < 0)) | ((err < 0) & (s > 0))
        out = np.where(toward, np.nextafter(s, 0.0), s)
    else:  # RA: differs from RN only on exact ties rounded toward zero
        half = (np.nextafter(np.abs(s), np.inf) - np.abs(s)) / 2
        tie_in = (np.abs(err) == half) & (np.sign(err) == np.sign(s)) & (err != 0)
        out = np.where(tie_in, np.nextafter(s, np.copysign(np.inf, s)), s)
    return out


def float_binary(fn: str, a: np.ndarray, b: np.ndarray, dtype: TileDType,
                 mode: RoundingMode | None, ftz: bool, propagate_nan: bool) -> np.ndarray:
    """A float op in ``dtype`` (f16/bf16 via float32, directed modes via float64)."""
    if fn in ("min", "max"):
        if dtype.storage.itemsize < 4:
            a, b = a.astype(np.float32), b.astype(np.float32)
        if ftz:
            a, b = flush_subnormals(a), flush_subnormals(b)
        f = {("min", True): np.minimum, ("min", False): np.fmin,
             ("max", True): np.maximum, ("max", False): np.fmax}[(fn, propagate_nan)]
        return convert(f(a, b), FLOAT32 if a.dtype == np.float32 else FLOAT64, dtype) \
            if dtype is not FLOAT64 else f(a, b)
    if fn == "floordiv":   # cuTile: DivFOp in the tile dtype (and mode), then FloorOp
        q = float_binary("truediv", a, b, dtype, mode, ftz, propagate_nan)
        if q.dtype in (np.float32, np.float64):
            return np.floor(q)
        return np.floor(q.astype(np.float32)).astype(q.dtype)   # exact: q is integral-safe
    op = _FLOAT_BINARY[fn]
    if fn in ("pow", "atan2") and dtype is not FLOAT64:
        # numpy's float32 versions are up to 3 ulp off: float64, rounded once
        return convert(op(a.astype(np.float64), b.astype(np.float64)), FLOAT64, dtype)
    directed = mode in DIRECTED_MODES
    if dtype is FLOAT64:
        if directed and fn in ("add", "sub", "mul", "truediv"):
            return directed_f64(fn, a, b, mode)
        return op(a, b)
    if directed:
        r = op(a.astype(np.float64), b.astype(np.float64))
        return convert(r, FLOAT64, dtype, mode)
    if dtype is FLOAT32:
        if ftz:
            a, b = flush_subnormals(a), flush_subnormals(b)
        r = np.asarray(op(a, b), dtype=np.float32)
        return flush_subnormals(r) if ftz else r
    r = op(a.astype(np.float32), b.astype(np.float32))
    return convert(np.asarray(r, dtype=np.float32), FLOAT32, dtype)


_INT_BINARY: dict[str, Callable] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "floordiv": np.floor_divide,
    "mod": np.remainder, "min": np.minimum, "max": np.maximum,
}

_PY_BINARY: dict[str, Callable] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul,
    "truediv": operator.truediv, "floordiv": operator.floordiv, "mod": operator.mod,
    "pow": operator.pow, "min": min, "max": max, "atan2": math.atan2,
    "cdiv": lambda x, y: -((-x) // y),
}


def _fold(fn: str, x: Any, y: Any) -> Any:
    """Two loose constants: cuTile folds them with Python semantics."""
    try:
        return _PY_BINARY[fn](x, y)
    except (ZeroDivisionError, ValueError, OverflowError, TypeError) as e:
        raise compile_error(f"{type(e).__name__}: {e}") from None


def _arith(fn: str, x: Any, y: Any, *, rounding_mode: RoundingMode | None = None,
           flush_to_zero: bool = False, propagate_nan: bool = False) -> Any:
    xv, xd = operand(x, "left-hand side")
    yv, yd = operand(y, "right-hand side")
    if xd is None and yd is None:
        return _fold(fn, xv, yv)
    for d, side in ((xd, "Left-hand side"), (yd, "Right-hand side")):
        if d is not None and not d.arithmetic:
            raise compile_error(f"{side} has non-arithmetic dtype {d}",
                                hint="convert it first, e.g. .astype(ct.float32)")
    common = promote_operands(xv, yv, xd, yd, force_float=(fn == "truediv"))
    if common is BOOL:
        raise compile_error(f"Binary arithmetic op `{fn}` does not support bool, please cast "
                            f"bool to int")
    check_rounding(fn, rounding_mode, flush_to_zero, common)
    a = coerce(xv, xd, common)
    b = coerce(yv, yd, common)
    if a.shape != b.shape:
        broadcast_shape(a.shape, b.shape)
    valid = valid_of(x, y)
    if common.kind == "f":
        out = float_binary(fn, a, b, common, rounding_mode, flush_to_zero, propagate_nan)
        if valid is not None:
            valid = np.broadcast_to(valid, np.shape(out))
        count_flops(np.size(out), valid)
    else:
        if fn in ("pow", "atan2", "truediv"):
            raise compile_error(f"`{fn}` is not supported for {common} operands",
                                hint="convert to a float dtype first")
        if fn == "cdiv":
            q = np.floor_divide(a, b)
            out = q + (np.remainder(a, b) != 0).astype(common.storage)
        else:
            out = _INT_BINARY[fn](a, b)
    return make(out, common, is_const(x, y), valid)


def add(x, y, /, *, rounding_mode=None, flush_to_zero=False):
    """``x + y`` with broadcasting and promotion; see :mod:`tilelab.interp.ops.elementwise`."""
    return _arith("add", x, y, rounding_mode=rounding_mode,
                  flush_to_zero=require_bool_flag(flush_to_zero, "flush_to_zero"))


def sub(x, y, /, *, rounding_mode=None, flush_to_zero=False):
    """``x - y``."""
    return _arith("sub", x, y, rounding_mode=rounding_mode,
                  flush_to_zero=require_bool_flag(flush_to_zero, "flush_to_zero"))


def mul(x, y, /, *, rounding_mode=None, flush_to_zero=False):
    """``x * y``."""
    return _arith("mul", x, y, rounding_mode=rounding_mode,
                  flush_to_zero=require_bool_flag(flush_to_zero, "flush_to_zero"))


def truediv(x, y, /, *, rounding_mode=None, flush_to_zero=False):
    """``x / y``; integers are divided as float32 (cuTile's ``force_float`` promotion)."""
    return _arith("truediv", x, y, rounding_mode=rounding_mode,
                  flush_to_zero=require_bool_flag(flush_to_zero, "flush_to_zero"))


def floordiv(x, y, /):
    """``x // y``: rounds toward negative infinity for integers, ``floor(x / y)`` for floats."""
    return _arith("floordiv", x, y)


def mod(x, y, /):
    """``x % y`` with the sign of ``y`` (Python semantics)."""
    xv, xd = operand(x)
    yv, yd = operand(y)
    if xd is BOOL and yd is BOOL:
        raise compile_error("Modulo operation does not support bool")
    return _arith("mod", x, y)


def cdiv(x, y, /):
    """``ceil(x / y)`` for integers (also usable on the host with Python ints)."""
    return _arith("cdiv", x, y)


def atan2(x1, x2, /):
    """Element-wise arc tangent of ``x1 / x2`` in radians."""
    return _arith("atan2", x1, x2)


def minimum(x, y, /, *, flush_to_zero=False, propagate_nan=False):
    """Element-wise minimum; NaN inputs are ignored unless ``propagate_nan=True``."""
    return _arith("min", x, y, flush_to_zero=require_bool_flag(flush_to_zero, "flush_to_zero"),
                  propagate_nan=require_bool_flag(propagate_nan, "propagate_nan"))


def maximum(x, y, /, *, flush_to_zero=False, propagate_nan=False):
    """Element-wise maximum; NaN inputs are ignored unless ``propagate_nan=True``."""
    return _arith("max", x, y, flush_to_zero=require_bool_flag(flush_to_zero, "flush_to_zero"),
                  propagate_nan=require_bool_flag(propagate_nan, "propagate_nan"))


def pow_(x, y, /):
    """``x ** y``. A float base with an integer exponent keeps the base's dtype (FPowI)."""
    xv, xd = operand(x)
    yv, yd = operand(y)
    if xd is None and yd is None:
        return _fold("pow", xv, yv)
    y_dtype = yd if yd is not None else loose_dtype(yv)
    if (xd is not None and xd.kind == "f" and xd.category != RESTRICTED
            and y_dtype.kind in "iu" and y_dtype.bitwidth <= (32 if y_dtype.kind == "i" else 16)):
        broadcast_shape(np.shape(xv), np.shape(yv))
        base = xv.astype(np.float64)   # (in float64, rounded once to the base's dtype)
        exponent = coerce(yv, yd, INT32).astype(np.float64)
        out = np.asarray(np.power(base, exponent))
        if xd is not FLOAT64:
            out = convert(out, FLOAT64, xd)
        valid = valid_of(x, y)
        if valid is not None:
            valid = np.broadcast_to(valid, out.shape)
        count_flops(out.size, valid)
        return make(out, xd, is_const(x, y), valid)
    return _arith("pow", x, y)


def divmod_(x, y, /):
    """``(x // y, x % y)`` for integers; floats are rejected as in cuTile."""
    xv, xd = operand(x)
    yv, yd = operand(y)
    if xd is None and yd is None:
        return (_fold("floordiv", xv, yv), _fold("mod", xv, yv))
    if xd is BOOL and yd is BOOL:
        raise compile_error("divmod() operation does not support bool")
    common = promote_operands(xv, yv, xd, yd)
    if common.kind == "f":
        raise compile_error("divmod() is not implemented for floating point values",
                            hint="use ct.floor(x / y) and x % y")
    return floordiv(x, y), mod(x, y)


# ---- bitwise --------------------------------------------------------------------------------

_PY_BITWISE = {"and": operator.and_, "or": operator.or_, "xor": operator.xor,
               "lshift": operator.lshift, "rshift": operator.rshift}
_NP_BITWISE = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
               "lshift": np.left_shift, "rshift": np.right_shift}


def _bitwise(fn: str, x: Any, y: Any) -> Any:
    xv, xd = operand(x)
    yv, yd = operand(y)
    if xd is None and yd is None:
        try:
            return _PY_BITWISE[fn](xv, yv)
        except (TypeError, ValueError) as e:
            raise compile_error(f"{type(e).__name__}: {e}") from None
    ld = xd if xd is not None else loose_dtype(xv)
    rd = yd if yd is not None else loose_dtype(yv)
    if fn in ("lshift", "rshift"):
        if ld.kind not in "iu":
            raise compile_error(f"Bitwise shift requires an integer for left-hand side, got: "
                                f"{ld}")
        if rd.kind not in "iu":
            raise compile_error(f"Bitwise shift requires an integer for right-hand side, got: "
                                f"{rd}")
    else:
        if ld.kind not in "biu" or rd.kind not in "biu":
            raise compile_error("Bitwise operations require integers or booleans. Use an "
                                "explicit cuda.tile.bitcast() for non-integer operands.")
        if (xd is None) == (yd is None) and ld is not rd:
            raise compile_error(f"Bitwise operands must have same data type, got: {ld} and {rd}")
        if {ld.name, rd.name} == {"bool_", "int8"}:
            raise compile_error("Bitwise op does not support bool and int8")
    common = promote_operands(xv, yv, xd, yd)
    a = coerce(xv, xd, common)
    b = coerce(yv, yd, common)
    if a.shape != b.shape:
        broadcast_shape(a.shape, b.shape)
    if fn in ("lshift", "rshift"):
        # Shifting by the bit width or more is undefined on the GPU; numpy gives 0 or -1.
        b = b.astype(common.storage)
    return make(_NP_BITWISE[fn](a, b), common, is_const(x, y), valid_of(x, y))


def bitwise_and(x, y, /):
    """``x & y`` on integers or booleans of the same dtype."""
    return _bitwise("and", x, y)


def bitwise_or(x, y, /):
    """``x | y``."""
    return _bitwise("or", x, y)


def bitwise_xor(x, y, /):
    """``x ^ y``."""
    return _bitwise("xor", x, y)


def bitwise_lshift(x, y, /):
    """``x << y`` on integers."""
    return _bitwise("lshift", x, y)


def bitwise_rshift(x, y, /):
    """``x >> y``: arithmetic shift for signed, logical for unsigned integers."""
    return _bitwise("rshift", x, y)


# ---- comparisons ----------------------------------------------------------------------------

_PY_CMP = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
           "gt": operator.gt, "ge": operator.ge}
_NP_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
           "gt": np.greater, "ge": np.greater_equal}


def _compare(fn: str, x: Any, y: Any) -> Any:
    xv, xd = operand(x)
    yv, yd = operand(y)
    if xd is None and yd is None:
        return _PY_CMP[fn](xv, yv)
    common = promote_operands(xv, yv, xd, yd)
    a = coerce(xv, xd, common)
    b = coerce(yv, yd, common)
    if a.shape != b.shape:
        broadcast_shape(a.shape, b.shape)
    if common.category == RESTRICTED:
        a, b = a.astype(np.float32), b.astype(np.float32)
    # Floats compare ordered, except != which is unordered (NaN != x), like numpy.
    return make(_NP_CMP[fn](a, b), BOOL, is_const(x, y), valid_of(x, y))


def equal(x, y, /):
    """``x == y`` element-wise (a bool tile)."""
    return _compare("eq", x, y)


def not_equal(x, y, /):
    """``x != y`` element-wise; NaN != NaN is True."""
    return _compare("ne", x, y)


def less(x, y, /):
    """``x < y`` element-wise."""
    return _compare("lt", x, y)


def less_equal(x, y, /):
    """``x <= y`` element-wise."""
    return _compare("le", x, y)


def greater(x, y, /):
    """``x > y`` element-wise."""
    return _compare("gt", x, y)


def greater_equal(x, y, /):
    """``x >= y`` element-wise."""
    return _compare("ge", x, y)


# ---- selection --------------------------------------------------------------------------------

def where(cond, x, y, /):
    """``x`` where ``cond`` is true, else ``y`` (with promotion and broadcasting)."""
    cv, cd = operand(cond, "cond")
    xv, xd = operand(x, "x")
    yv, yd = operand(y, "y")
    if cd is None:
        cd = loose_dtype(cv)
        cv = const_array(cv, cd)
    dtype = promote_operands(xv, yv, xd, yd)
    shape = broadcast_shape(np.shape(cv), np.shape(xv), np.shape(yv))
    c = convert(cv, cd, BOOL)
    a = coerce(xv, xd, dtype)
    b = coerce(yv, yd, dtype)
    return make(np.broadcast_to(np.where(c, a, b), shape), dtype, is_const(cond, x, y),
                valid_of(cond, x, y))


#: Python operator name -> implementation: Tile's ``__<name>__`` computes it, and so does
#: ``__r<name>__`` with the operands swapped (but for the comparisons, which Python
#: reflects into each other); ``@`` is attached by tilelab.interp.ops.matmul
OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "add": add, "sub": sub, "mul": mul, "truediv": truediv, "floordiv": floordiv,
    "mod": mod, "pow": pow_, "divmod": divmod_, "and": bitwise_and, "or": bitwise_or,
    "xor": bitwise_xor, "lshift": bitwise_lshift, "rshift": bitwise_rshift,
    "lt": less, "le": less_equal, "gt": greater, "ge": greater_equal, "eq": equal,
    "ne": not_equal,
}

_COMPARISONS = frozenset({"lt", "le", "gt", "ge", "eq", "ne"})

#: the operands Tile's operators take (anything else: NotImplemented, so that Python
#: tries the other operand's operator, or raises its TypeError)
_TILE_LIKE = (Tile, int, float, bool, np.generic)


def attach_operator(name: str, impl: Callable[[Any, Any], Any], *,
                    reflected: bool = True) -> None:
    """Give :class:`Tile` the operator ``__<name>__`` computing ``impl(tile, other)`` and,
    when ``reflected``, ``__r<name>__`` computing ``impl(other, tile)`` (see
    :mod:`tilelab.interp.values.methods`)."""
    def forward(self, o):
        return _binop(impl, self, o)
    forward.__module__ = impl.__module__   # (the operator is its op module's)
    method(Tile, f"__{name}__")(forward)
    if reflected:
        def backward(self, o):
            return _binop(impl, o, self)
        backward.__module__ = impl.__module__
        method(Tile, f"__r{name}__")(backward)


def _binop(impl: Callable[[Any, Any], Any], x: Any, y: Any) -> Any:
    if not isinstance(x, _TILE_LIKE) or not isinstance(y, _TILE_LIKE):
        return NotImplemented
    return impl(x, y)


for _name, _impl in OPERATORS.items():
    attach_operator(_name, _impl, reflected=_name not in _COMPARISONS)
