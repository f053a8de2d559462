"""The interpreter's tile: an immutable numpy array with a cuTile dtype.

cuTile treats scalars as 0-d tiles with a dtype (``ct.bid(0)`` is an int32 scalar), while
Python literals and ``ct.Constant`` parameters stay *loosely typed* constants. The
interpreter mirrors this: Python ``int``/``float``/``bool`` values flow through kernels
untouched (so ``BLOCK * 2`` is plain Python), and everything with a dtype is a
:class:`Tile`. A 0-d integer tile can index Python sequences and drive ``range`` (through
``__index__``), and a 0-d tile can be the condition of ``if``/``while`` (``__bool__``), as
in cuTile.
"""
from __future__ import annotations

import re

import numpy as np

from tilelab.interp import body_rules
from tilelab.interp.context import active, check_tile_shape, compile_error
from tilelab.interp.values.dtypes import TileDType
from tilelab.interp.values.targets import dtype_error, supported
from tilelab.limits import MAX_TILE_ELEMENTS

__all__ = ["Tile", "UnsupportedTile", "values_of", "format_tile", "format_printf"]


class Tile:
    """A cuTile tile value: ``dtype``, ``shape`` and the values (``numpy()``).

    Tiles are immutable: every op returns a new tile. Operators follow cuTile's typing,
    so ``int8_tile + 1`` is int8 and ``int8_tile + float16_tile`` is float16.

    Example:
        >>> import numpy as np
        >>> from tilelab.interp.values.dtypes import INT32
        >>> t = Tile(np.arange(4, dtype=np.int32), INT32)
        >>> t.shape, t.dtype, str(t)
        ((4,), <DType 'int32'>, '[0, 1, 2, 3]')
    """

    __slots__ = ("_v", "_dt", "_c", "_m")
    __array_ufunc__ = None  # numpy must defer to our reflected operators
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, values: np.ndarray, dtype: TileDType, const: bool = False,
                 valid: np.ndarray | None = None):
        if values.size > MAX_TILE_ELEMENTS:   # any op's result (cat, mma, broadcasts...)
            check_tile_shape(values.shape)
        self._v = values
        self._dt = dtype
        if dtype.min_sm and not supported(dtype):   # fp8/fp4 before their target
            self.__class__ = UnsupportedTile
        # True when the value is a compile-time constant in cuTile (built only from
        # constants, e.g. ``ct.int16(2) + 5``); ``ct.bid(0)`` or a load is not.
        self._c = const
        # Which lanes carry useful work: None (all of them) or a bool array of the tile's
        # shape, False where the lane derives only from padding (the part of a partial
        # tile outside its array, a masked-off gather lane). FLOP counts use it.
        self._m = valid

    # ---- attributes -------------------------------------------------------------------
    @property
    def dtype(self) -> TileDType:
        """The tile's dtype (a compile-time constant)."""
        return self._dt

    @property
    def shape(self) -> tuple[int, ...]:
        """The tile's shape as a tuple of Python ints (compile-time constants)."""
        return self._v.shape

    @property
    def ndim(self) -> int:
        """Number of dimensions (a compile-time constant)."""
        return self._v.ndim

    @property
    def valid(self) -> np.ndarray:
        """Bool mask of the lanes that derive from in-bounds data (all True for a full tile)."""
        if self._m is None:
            return np.ones(self._v.shape, bool)
        return np.array(np.broadcast_to(self._m, self._v.shape), copy=True)

    @property
    def is_constant(self) -> bool:
        """Whether cuTile would know this value at compile time."""
        return self._c

    def numpy(self) -> np.ndarray:
        """A copy of the values in the dtype's numpy storage type (for tests and tools)."""
        return np.array(self._v, copy=True)

    # (the methods that mirror cuda.tile functions, ``item``, ``extract``, ``insert``,
    # ``reshape``, ``permute``, ``transpose`` and ``astype``, are attached by the op
    # modules that define them: see tilelab.interp.values.methods)

    # ---- Python protocol ---------------------------------------------------------------
    def __index__(self) -> int:
        if self._v.ndim != 0 or self._dt.kind not in "iu":
            raise compile_error(f"only an integer scalar can be used as an index, got a "
                                f"{self._dt} tile of shape {self.shape}")
        self._not_in_static_python()
        return int(self._v)

    def _not_in_static_python(self) -> None:
        """A run-time value has no Python value in a static expression (cuTile's proxy)."""
        if not self._c:
            state = active()
            if state is not None and state.static_python:
                raise compile_error("a run-time value cannot be used as a Python value in "
                                    "a static expression")

    def __bool__(self) -> bool:
        self._not_in_static_python()
        if body_rules.current() is not None:   # (a run-time branch in a combiner)
            body_rules.refuse("branch")
        if self._v.ndim != 0:
            raise compile_error(f"the truth value of a tile of shape {self.shape} is "
                                f"ambiguous: conditions must be scalars",
                                hint="reduce it first, e.g. ct.max(mask) > 0, or use "
                                     "ct.where for element-wise choices")
        return bool(self._v != 0)

    def __iter__(self):
        raise compile_error("tiles are not iterable",
                            hint="use ct.extract or a reduction instead")

    def __setitem__(self, key, value) -> None:
        raise compile_error("Tiles are immutable: item assignment is not supported.",
                            hint="build a new tile with ct.where or ct.insert")

    def __format__(self, spec: str) -> str:
        return format_tile(self, spec)

    def __str__(self) -> str:
        return format_tile(self, "")

    def __repr__(self) -> str:
        # Inside a kernel, repr is what cuTile's device print shows for a tile held in a
        # tuple or a dataclass (``f"{(t, 2)}"``): its values. Outside, the type too.
        if active() is not None:
            return format_tile(self, "")
        return f"Tile[{self._dt}, {self.shape}]({format_tile(self, '')})"

    # ---- operators: attached by the op modules that define them: indexing
    # (``t[None, :]``, tilelab.interp.ops.shapes), the arithmetic, bitwise and comparison
    # operators (tilelab.interp.ops.elementwise, with cuTile's typing rules), ``@``
    # (tilelab.interp.ops.matmul) and ``-t``, ``+t``, ``~t``, ``abs(t)``
    # (tilelab.interp.ops.unary)


#: the slot that holds a tile's values, read past :class:`UnsupportedTile`'s guard
_VALUES = Tile.__dict__["_v"]


def values_of(t: Tile) -> np.ndarray:
    """The values of a tile that the calling op has just made (for an
    :class:`UnsupportedTile`, whose values no op may read, too): an op that makes a tile
    through another op (``full`` converts its fill value with ``astype``) reads it here,
    since making a value of a dtype is not using it."""
    return _VALUES.__get__(t)


class UnsupportedTile(Tile):
    """A tile of a dtype that the running launch's target does not compute with (a
    float4 tile for sm_90): it may be made, passed around and asked for its shape and
    dtype, but the first op that reads its values raises cuTile's refusal at that op's
    kernel line, as compiling for the target does (see :mod:`tilelab.interp.values.targets`).

    Example:
        >>> import numpy as np
        >>> from tilelab.interp.values.dtypes import DTYPES
        >>> t = Tile(np.zeros(4, np.float32), DTYPES["float32"])
        >>> type(t).__name__     # (outside a launch every dtype is supported)
        'Tile'
    """

    __slots__ = ()

    @property
    def _v(self) -> np.ndarray:
        raise dtype_error(self._dt)

    @_v.setter
    def _v(self, values: np.ndarray) -> None:
        _VALUES.__set__(self, values)

    @property
    def shape(self) -> tuple[int, ...]:
        return _VALUES.__get__(self).shape

    @property
    def ndim(self) -> int:
        return _VALUES.__get__(self).ndim

    def numpy(self) -> np.ndarray:
        return np.array(_VALUES.__get__(self), copy=True)

    def __repr__(self) -> str:
        return f"Tile[{self._dt}, {self.shape}](not computed on this target)"


# ---- device printing ------------------------------------------------------------------------

def _c_to_python_spec(spec: str, dtype: TileDType) -> tuple[str, bool]:
    """A Python %-format for one element, and whether ints print as unsigned."""
    m = re.fullmatch(r"([-+ #0]*)(\d*)(\.\d+)?(hh|h|ll|l|L)?([diouxXeEfFgGaAc])", spec)
    if m is None:
        raise compile_error(f"unsupported printf format '%{spec}'")
    flags, width, prec, _length, conv = m.groups()
    unsigned = conv in "ouxX" or (conv == "u")
    if conv in "iu":
        conv = "d"
    if conv in "aA":
        conv = "e" if conv == "a" else "E"
    return "%" + flags + width + (prec or "") + conv, unsigned


def _element_strings(t: Tile, pyfmt: str, unsigned: bool) -> np.ndarray:
    values = t._v
    dt = t._dt
    flat = values.reshape(-1)
    out = []
    if dt.kind == "f":
        for v in flat.astype(np.float64):
            out.append(pyfmt % float(v))
    else:
        bits = dt.bitwidth
        for v in flat.tolist():
            v = int(v)
            if unsigned and v < 0:
                v += 1 << bits
            out.append(pyfmt % v)
    return np.array(out, dtype=object).reshape(values.shape)


def _nest(strings: np.ndarray) -> str:
    if strings.ndim == 0:
        return str(strings[()])
    if strings.ndim == 1:
        return "[" + ", ".join(strings.tolist()) + "]"
    return "[" + ", ".join(_nest(strings[i]) for i in range(strings.shape[0])) + "]"


def _default_spec(dtype: TileDType) -> str:
    if dtype.kind == "f":
        return "f"
    return "u" if dtype.kind == "u" else "d"


def format_tile(t: Tile, spec: str) -> str:
    """Render a tile as cuTile's device ``print`` does: ``[1, 2]`` nested per dimension.

    ``spec`` is a Python format spec (``'.3f'``, ``'#x'``, ``'10.4f'``); empty infers
    ``%d``/``%u`` for integers and booleans and ``%f`` for floats.
    """
    dt = t._dt
    if not spec:
        cspec = _default_spec(dt)
    else:
        m = re.fullmatch(r"([<>^])?([+ -])?(#)?(0)?(\d+)?(?:\.(\d+))?([diouxXeEfFgGaA])?", spec)
        if m is None:
            raise compile_error(f"print(): unsupported format spec '{spec}'")
        align, sign, alt, zero, width, prec, typ = m.groups()
        flags = ("-" if align == "<" else "") + (sign if sign in ("+", " ") else "") + \
                ("#" if alt else "") + ("0" if zero and align != "<" else "")
        if typ is None:
            typ = _default_spec(dt)
        elif (typ in "diouxX") != (dt.kind != "f"):
            raise compile_error(f"print(): format spec '{spec}' is incompatible with dtype "
                                f"{dt}")
        cspec = flags + (width or "") + (f".{prec}" if prec is not None else "") + typ
    pyfmt, unsigned = _c_to_python_spec(cspec, dt)
    return _nest(_element_strings(t, pyfmt, unsigned or dt.kind == "u"))


_PRINTF_SPEC = re.compile(r"%([-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|L)?[a-zA-Z%])")


def format_printf(fmt: str, args: tuple) -> str:
    """Expand a C printf format whose arguments are tiles (each printed element-wise)."""
    out = []
    pos = 0
    arg_index = 0
    for m in _PRINTF_SPEC.finditer(fmt):
        out.append(fmt[pos:m.start()])
        pos = m.end()
        spec = m.group(1)
        if spec == "%":
            out.append("%")
            continue
        conv = spec[-1]
        if conv not in "diouxXeEfFgGaA":
            raise compile_error(f"Specifier {conv} in %{spec} is not supported")
        if arg_index >= len(args):
            raise compile_error("Not enough arguments for format string")
        arg = args[arg_index]
        arg_index += 1
        is_int_spec = conv in "diouxX"
        if (arg._dt.kind != "f") != is_int_spec:
            raise compile_error(f"Format %{spec} for arg #{arg_index - 1} got unexpected type "
                                f"{arg._dt}")
        pyfmt, unsigned = _c_to_python_spec(spec, arg._dt)
        out.append(_nest(_element_strings(arg, pyfmt, unsigned or arg._dt.kind == "u")))
    out.append(fmt[pos:])
    if arg_index < len(args):
        raise compile_error("Too many arguments for format string")
    return "".join(out)
