"""Block ids, device printing, assertions and the static (compile-time) helpers.

Also the Python builtins that cuTile gives tile semantics inside kernels: ``range`` yields
int32 scalars (cuTile's loop induction variables are run-time int32 values), ``min``/
``max`` of tiles are ``ct.minimum``/``ct.maximum``, ``print`` is the device print, and
``int()``/``float()`` only accept compile-time constants.
"""
from __future__ import annotations

import builtins
import dataclasses
import sys
from typing import Any, Iterator

import numpy as np

from tilelab.interp import _cutile
from tilelab.interp.context import compile_error, current, launch_error
from tilelab.interp.ops.elementwise import const_array, maximum, minimum, operand
from tilelab.interp.ops.shapes import constant_int
from tilelab.interp.ops.static_python import reevaluate_static_argument
from tilelab.interp.values.arrays import Array
from tilelab.interp.values.dtypes import (INT32, LooseFloat, LooseInt, TileDType, is_loose,
                                          loose_dtype, promote)
from tilelab.interp.values.tile import Tile, format_printf, format_tile

__all__ = ["bid", "num_blocks", "printf", "print_", "assert_", "static_eval",
           "static_assert", "static_iter", "static_exception", "ensure_constant",
           "assume_divisible_by", "grid_dependency_control_wait",
           "grid_dependency_control_launch_dependents", "TileRange", "BUILTINS",
           "flush_output"]


def _axis(axis: Any) -> int:
    a = constant_int(axis, "axis")
    if a not in (0, 1, 2):
        raise compile_error(f"Axis must be 0, 1, or 2, but {a} was given.")
    return a


def bid(axis) -> Tile:
    """Index of the running block along ``axis`` (an int32 scalar)."""
    return Tile(np.asarray(current().block[_axis(axis)], np.int32), INT32)


def num_blocks(axis) -> Tile:
    """Number of blocks of the grid along ``axis`` (an int32 scalar)."""
    return Tile(np.asarray(current().grid[_axis(axis)], np.int32), INT32)


# ---- device output --------------------------------------------------------------------------

def _emit(text: str) -> None:
    """Write device output, prefixing each line with the block that printed it."""
    state = current()
    pending = getattr(state, "pending_output", "") + text
    *lines, rest = pending.split("\n")
    out = state.stdout if state.stdout is not None else sys.stdout
    prefix = f"[block {state.block}] "
    for line in lines:
        out.write(prefix + line + "\n")
    state.pending_output = rest


def flush_output() -> None:
    """Write out a block's unterminated last line (called when the block ends)."""
    state = current()
    rest = getattr(state, "pending_output", "")
    if rest:
        out = state.stdout if state.stdout is not None else sys.stdout
        out.write(f"[block {state.block}] {rest}\n")
        state.pending_output = ""


def _device_repr(x: Any) -> str:
    """``repr`` as cuTile's device print spells it: a tile is its values (so is a tile
    inside a tuple or a dataclass, through :meth:`Tile.__repr__` while a kernel runs), a
    string is quoted, a dataclass without a ``repr`` is ``<Name object>``; a custom
    ``__str__`` is not used (a tuple of dataclasses shows their reprs)."""
    if isinstance(x, Tile):
        return format_tile(x, "")
    if isinstance(x, tuple):
        inner = ", ".join(_device_repr(i) for i in x)
        return f"({inner},)" if len(x) == 1 else f"({inner})"
    if _is_dataclass_instance(x) and type(x).__repr__ is object.__repr__:
        return f"<{type(x).__name__} object>"
    return repr(x)


def _device_str(x: Any) -> str:
    """``str`` as cuTile's device print spells it: a custom ``__str__`` first, else the
    device repr."""
    if isinstance(x, str):
        return x
    if isinstance(x, (Tile, tuple)) or type(x).__str__ is object.__str__:
        return _device_repr(x)
    return str(x)


def _is_dataclass_instance(x: Any) -> bool:
    return dataclasses.is_dataclass(x) and not isinstance(x, type)


def printf(format, *args) -> None:
    """C-style device printf; each argument is a tile, printed as a nested list."""
    if not isinstance(format, str):
        raise compile_error(f"Expected a string constant for the format, got {format!r}")
    tiles = []
    for a in args:
        v, d = operand(a, "printf argument")
        if d is None:
            d = loose_dtype(v)
            v = const_array(v, d)
        tiles.append(Tile(v, d))
    _emit(format_printf(format, tuple(tiles)))


def print_(*args, sep=" ", end="\n") -> None:
    """Python-style device print (also what ``print`` means inside a kernel)."""
    if not isinstance(sep, str) or not isinstance(end, str):
        raise compile_error("print(): sep and end must be strings")
    _emit(sep.join(_device_str(a) for a in args) + end)


def assert_(cond, /, message=None) -> None:
    """Fail the launch (LaunchError) when any element of the bool tile ``cond`` is False,
    after printing the failure to the device output, as the GPU does (its kernel prints
    and traps, and the launch fails)."""
    v, d = operand(cond, "cond")
    if d is None:
        d = loose_dtype(v)
    if d.kind != "b":
        raise compile_error(f"Type of condition must be bool, got {d}")
    if message is not None and not isinstance(message, str):
        raise compile_error(f"Expected a string constant for the message, got {message!r}")
    if not bool(np.all(v)):
        text = f"assertion failed: {message}" if message else "assertion failed"
        bad = np.argwhere(~np.asarray(v, bool))
        if np.ndim(v):
            text += f" (first failing element {tuple(int(i) for i in bad[0])})"
        _emit(f"\n{text}\n" if getattr(current(), "pending_output", "") else f"{text}\n")
        raise launch_error(text)


# ---- compile-time helpers -------------------------------------------------------------------

def _constant_value(x: Any) -> Any:
    """The Python value of a compile-time constant, or raise if ``x`` is a run-time value."""
    if isinstance(x, Tile):
        if not x._c or x.ndim:
            raise compile_error("value is not a compile-time constant")
        return x._v.item()
    return x


def static_eval(expr, /):
    """The value of a compile-time expression (the interpreter has already computed it).

    Ints and floats in the result (in tuples too) come back as constants with cuTile's
    constant methods (``astype``), as cuTile turns static results back into constants.
    """
    return _as_constants(expr)


def _as_constants(x: Any) -> Any:
    if type(x) is int:
        return LooseInt(x)
    if type(x) is float:
        return LooseFloat(x)
    if type(x) is tuple:
        return tuple(_as_constants(i) for i in x)
    return x


def static_assert(condition, message=None, /) -> None:
    """Raise CompileError when a compile-time condition is False."""
    if isinstance(condition, Tile) and not condition._c:
        # cuTile evaluates the condition as plain Python: a helper looping over a
        # constant range folds (see tilelab.interp.ops.static_python)
        ok, value = reevaluate_static_argument(0)
        if not ok or (isinstance(value, Tile) and not value._c):
            raise compile_error("static_assert() condition must be a compile-time constant",
                                hint="conditions on run-time values need ct.assert_")
        condition = value
    if isinstance(condition, Tile):
        condition = _constant_value(condition)
    if isinstance(condition, np.bool_):
        condition = bool(condition)
    if not isinstance(condition, bool):
        raise compile_error(f"static_assert() condition must be a boolean, not "
                            f"{type(condition).__name__}")
    if not condition:
        text = "" if message is None else str(message)
        raise compile_error(f"Static assertion failed: {text}" if text
                            else "Static assertion failed")


def static_iter(iterable) -> list:
    """Unroll a compile-time iterable (at most 1000 items)."""
    if isinstance(iterable, TileRange):
        iterable = iterable.constant_range()
    try:
        it = iter(iterable)
    except TypeError as e:
        raise compile_error(f"Invalid static_iter() iterable: {e}") from None
    items = []
    for i, item in enumerate(it):
        if i >= 1000:
            raise compile_error("Maximum number of iterations (1000) has been reached while "
                                "unpacking the static_iter() iterable")
        bad = _not_a_constant(item)
        if bad is not None:   # (cuTile makes each item a constant or a symbolic value)
            prefix = "" if bad.__module__ == "builtins" else f"{bad.__module__}."
            raise compile_error(f"Invalid item #{i} of static_iter() iterable: Cannot create "
                                f"constant from value of type {prefix}{bad.__qualname__}.",
                                foreign=_cutile.exception_classes()["StaticEvalError"])
        items.append(item)
    return items


#: Python containers cuTile cannot make a compile-time constant of
_NOT_CONSTANTS = (list, dict, set, frozenset, bytes, bytearray, complex)


def _not_a_constant(item: Any) -> type | None:
    """The type in a ``static_iter`` item that cuTile cannot hold as a value (a list),
    or None."""
    if isinstance(item, tuple):
        for part in item:
            bad = _not_a_constant(part)
            if bad is not None:
                return bad
        return None
    return type(item) if isinstance(item, _NOT_CONSTANTS) else None


def static_exception(exc, /):
    """``raise ct.static_exception(ValueError(...))`` fails compilation with that error."""
    if not isinstance(exc, BaseException):
        raise compile_error(f"static_exception() expects an exception object, got "
                            f"{type(exc).__name__}")
    return compile_error(f"Exception was raised at compile time ({type(exc).__name__}: {exc})")


def ensure_constant(value, /):
    """Return ``value`` if it is a compile-time constant, else CompileError."""
    if isinstance(value, Tile) and not value._c:
        raise compile_error("Argument of ensure_constant() is not a compile-time constant")
    return value


def assume_divisible_by(x, divisor):
    """Return ``x``; checks the promise (breaking it is undefined behaviour in cuTile)."""
    d = constant_int(divisor, "divisor")
    if d <= 0:
        raise compile_error(f"divisor must be a positive integer constant, got {d}")
    v, dt = operand(x, "x")
    if dt is not None and dt.kind not in "iu":
        raise compile_error(f"assume_divisible_by expects an integer scalar, got {dt}")
    if int(np.asarray(v)) % d:
        raise launch_error(f"assume_divisible_by: {int(np.asarray(v))} is not divisible by {d} "
                           f"(undefined behaviour on the GPU)")
    return x


def grid_dependency_control_wait() -> None:
    """No effect: interpreted launches are already serialized."""


def grid_dependency_control_launch_dependents() -> None:
    """No effect: interpreted launches are already serialized."""


# ---- builtins with tile semantics -----------------------------------------------------------

class TileRange:
    """``range`` inside a kernel: yields run-time int32 (or wider) scalars, like cuTile.

    Example:
        >>> [int(i) for i in TileRange(1, 7, 2)]
        [1, 3, 5]
    """

    def __init__(self, *args: Any):
        if not 1 <= len(args) <= 3:
            raise compile_error(f"range: Invalid number of arguments: {len(args)}")
        dtype: TileDType = INT32
        values = []
        self._const = True
        for a in args:
            if not (isinstance(a, (Tile, np.generic)) or is_loose(a)) or np.ndim(a) != 0:
                # (cuTile asks for a scalar before it asks for a signed integer)
                raise compile_error(f"range: Expected a scalar value, but given value has "
                                    f"type {_type_name(a)}")
            v, d = operand(a, "range argument")
            if d is None:
                if isinstance(v, bool) or not isinstance(v, int):
                    raise compile_error(f"range: Expected a signed integer scalar, got {v!r}")
                d = loose_dtype(v)
            elif d.kind != "i" or np.ndim(v):
                raise compile_error(f"range: Expected a signed integer scalar, but got {d}"
                                    f"{np.shape(v)}")
            else:
                self._const &= a._c
            dtype = promote(dtype, d)
            values.append(int(np.asarray(v)))
        if len(values) == 1:
            values = [0, values[0], 1]
        elif len(values) == 2:
            values.append(1)
        self.start, self.stop, self.step = values
        self.dtype = dtype
        if self.step <= 0:
            if len(args) == 3 and (isinstance(args[2], int) or self._const):
                raise compile_error(f"Step must be positive, got {self.step}")
            raise launch_error(f"range step must be positive, got {self.step}")

    def constant_range(self) -> range:
        if not self._const:   # (cuTile's words: int() of a run-time value fails in it)
            raise compile_error(
                "Exception was raised inside static_iter() iterable (ValueError: Symbolic "
                "tile has no concrete value and thus cannot be converted to an integer)",
                hint="static_iter unrolls at compile time: its range needs constant bounds "
                     "(ct.Constant parameters, literals); use range() for a run-time loop",
                foreign=_cutile.exception_classes()["StaticException"])
        return range(self.start, self.stop, self.step)

    def __iter__(self) -> Iterator[Tile]:
        storage = self.dtype.storage
        dt = self.dtype
        for v in range(self.start, self.stop, self.step):
            yield Tile(np.asarray(v, storage), dt)

    def __len__(self) -> int:
        return len(range(self.start, self.stop, self.step))


def _min(*args: Any, **kwargs: Any) -> Any:
    if len(args) == 2 and not kwargs and any(isinstance(a, Tile) for a in args):
        return minimum(*args)
    return builtins.min(*args, **kwargs)


def _max(*args: Any, **kwargs: Any) -> Any:
    if len(args) == 2 and not kwargs and any(isinstance(a, Tile) for a in args):
        return maximum(*args)
    return builtins.max(*args, **kwargs)


class _CtorMeta(type):
    """Keeps ``isinstance(x, int)`` working when ``int`` means the kernel's ``int()``."""

    _py: type

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, cls._py)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, cls._py)

    def __repr__(cls) -> str:
        return repr(cls._py)


def _constant_arg(py: type, x: Any) -> Any:
    if isinstance(x, Tile):
        if not x._c:
            wide = "int32" if py is int else "float32"
            raise compile_error(f"{py.__name__}() expects a constant argument",
                                hint=f"use x.astype(ct.{wide}) for run-time values")
        return x._v.item()
    return x


class _KernelInt(metaclass=_CtorMeta):
    """``int()`` inside a kernel: constants only (cuTile folds it at compile time)."""

    _py = int

    def __new__(cls, x: Any = 0, *rest: Any) -> int:  # type: ignore[misc]
        return int(_constant_arg(int, x), *rest)


class _KernelFloat(metaclass=_CtorMeta):
    """``float()`` inside a kernel: constants only."""

    _py = float

    def __new__(cls, x: Any = 0.0) -> float:  # type: ignore[misc]
        return float(_constant_arg(float, x))


#: Builtins that differ inside kernels (merged into the kernel's ``__builtins__``).
BUILTINS: dict[str, Any] = {
    "range": TileRange,
    "min": _min,
    "max": _max,
    "print": print_,
    "int": _KernelInt,
    "float": _KernelFloat,
}


def _type_name(value: Any) -> str:
    """cuTile's name of a range argument's type in its messages (``Tile[int32,(4)]``)."""
    if isinstance(value, Tile):
        return f"Tile[{value._dt},({','.join(map(str, value.shape))})]"
    if isinstance(value, Array):
        return f"Array[{value.dtype},({','.join('?' * value.ndim)}):" \
               f"({','.join('?' * value.ndim)})]"
    return type(value).__name__
