"""cuTile data types as the interpreter sees them: storage, categories and promotion.

Every tile value is stored in a numpy array of the dtype's *storage* type (``bfloat16``
and the fp8 types come from ``ml_dtypes``; ``tfloat32`` is stored as float32 whose low 13
mantissa bits are zero). Promotion follows cuTile's own table (read from cuTile) and its
rules for *loosely typed* Python constants, so ``int8_tile + 3`` stays int8 and
``int8_tile + 300`` is an error, as in the compiler.

Kernels see :class:`TileDType` objects for ``ct.float32`` and friends: they compare equal
to cuTile's own dtypes and can be called as constructors (``ct.int16(2)``).
"""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from tilelab.interp import _cutile
from tilelab.interp._cutile import ct
from tilelab.interp.context import compile_error
from tilelab.limits import DTYPE_MIN_SM

__all__ = ["TileDType", "DTYPES", "BOOL", "INT32", "INT64", "UINT64", "FLOAT16", "BFLOAT16",
           "FLOAT32", "FLOAT64", "TFLOAT32", "as_dtype", "foreign", "from_numpy", "is_loose", "LooseInt", "LooseFloat",
           "loose_dtype", "promote", "promote_operands", "check_implicit_cast",
           "category", "BOOLEAN", "INTEGRAL", "FLOAT", "RESTRICTED"]

BOOLEAN, INTEGRAL, FLOAT, RESTRICTED = 0, 1, 2, 3


class TileDType:
    """A cuTile dtype: its name, bit width, category and numpy storage type.

    Compares equal to (and hashes like) the matching ``cuda.tile`` dtype, so kernels can
    write ``x.dtype == ct.float32`` whichever object they hold.

    Example:
        >>> from tilelab.interp.values.dtypes import DTYPES
        >>> import cuda.tile as ct
        >>> DTYPES["bfloat16"] == ct.bfloat16, DTYPES["bfloat16"].bitwidth
        (True, 16)
    """

    __slots__ = ("name", "bitwidth", "kind", "category", "real", "storage", "signed",
                 "arithmetic", "itemsize", "min_sm", "_hash")

    def __init__(self, real: Any, storage: Any, kind: str):
        self.real = real
        self.name: str = real.name
        self.bitwidth: int = real.bitwidth
        self.kind = kind  # 'b' bool, 'i' signed int, 'u' unsigned int, 'f' float
        self.storage = None if storage is None else np.dtype(storage)
        self.signed = _is_signed(real)
        restricted = kind == "f" and not _is_arith(real)
        self.category = {"b": BOOLEAN, "i": INTEGRAL, "u": INTEGRAL}.get(
            kind, RESTRICTED if restricted else FLOAT)
        self.arithmetic = _is_arith(real)
        self.itemsize = max(1, self.bitwidth // 8)
        #: the oldest target that computes with it (0: every target), see
        #: :data:`tilelab.limits.DTYPE_MIN_SM` and :mod:`tilelab.interp.values.targets`
        self.min_sm: int = DTYPE_MIN_SM.get(self.name, 0)
        self._hash = hash(real)

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.kind in "iu"

    def __eq__(self, other: object) -> Any:
        if isinstance(other, TileDType):
            return self is other
        if isinstance(other, ct.DType):
            return self.real == other
        native = _cutile.foreign_dtype(other)  # torch.float16, np.float16 (as in cuTile)
        if native is not None:
            return self.real == native
        return NotImplemented

    def __ne__(self, other: object) -> Any:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"<DType '{self.name}'>"

    def __str__(self) -> str:
        return self.name

    # (calling a dtype, ``ct.int16(2)``, is tilelab.interp.ops.casts's ``__call__``)

    def __reduce__(self):
        return (as_dtype, (self.name,))


def _is_arith(real: Any) -> bool:
    from cuda.tile._datatype import is_arithmetic
    return bool(is_arithmetic(real))


def _is_signed(real: Any) -> bool:
    from cuda.tile._datatype import is_signed
    return bool(is_signed(real))


def _make_table() -> dict[str, TileDType]:
    spec = [
        (ct.bool_, np.bool_, "b"),
        (ct.uint8, np.uint8, "u"), (ct.uint16, np.uint16, "u"),
        (ct.uint32, np.uint32, "u"), (ct.uint64, np.uint64, "u"),
        (ct.int8, np.int8, "i"), (ct.int16, np.int16, "i"),
        (ct.int32, np.int32, "i"), (ct.int64, np.int64, "i"),
        (ct.float16, np.float16, "f"), (ct.bfloat16, ml_dtypes.bfloat16, "f"),
        (ct.float32, np.float32, "f"), (ct.float64, np.float64, "f"),
        (ct.tfloat32, np.float32, "f"),
        (ct.float8_e4m3fn, ml_dtypes.float8_e4m3fn, "f"),
        (ct.float8_e5m2, ml_dtypes.float8_e5m2, "f"),
        (ct.float8_e8m0fnu, ml_dtypes.float8_e8m0fnu, "f"),
        (ct.float4_e2m1fn, ml_dtypes.float4_e2m1fn, "f"),
        (ct.float8_e5m3fnu, None, "f"),
    ]
    table = {}
    for real, storage, kind in spec:
        table[real.name] = TileDType(real, storage, kind)
    return table


#: All cuTile dtypes by name.
DTYPES: dict[str, TileDType] = _make_table()
BOOL = DTYPES["bool_"]
INT32 = DTYPES["int32"]
INT64 = DTYPES["int64"]
UINT64 = DTYPES["uint64"]
FLOAT16 = DTYPES["float16"]
BFLOAT16 = DTYPES["bfloat16"]
FLOAT32 = DTYPES["float32"]
FLOAT64 = DTYPES["float64"]
TFLOAT32 = DTYPES["tfloat32"]

_BY_REAL = {d.real: d for d in DTYPES.values()}
_BY_STORAGE: dict[np.dtype, TileDType] = {}
for _d in DTYPES.values():
    if _d.storage is not None and _d is not TFLOAT32:
        _BY_STORAGE.setdefault(_d.storage, _d)


def from_numpy(dtype: Any) -> TileDType:
    """The cuTile dtype that stores like a numpy dtype (float32 -> float32, not tfloat32).

    Raises CompileError for numpy dtypes cuTile has no equivalent for (complex, strings).
    """
    np_dtype = np.dtype(dtype)
    found = _BY_STORAGE.get(np_dtype)
    if found is None:
        raise compile_error(f"numpy dtype {np_dtype} has no cuTile equivalent",
                            hint="use bool, (u)int8..64, float16/32/64 or the ml_dtypes "
                                 "bfloat16/float8 types")
    return found


def foreign(x: Any) -> TileDType | None:
    """The dtype of a torch or numpy dtype object (``torch.int32``, ``np.float16``,
    ``np.dtype(ml_dtypes.bfloat16)``), mapped as cuTile maps them; None for anything else."""
    native = _cutile.foreign_dtype(x)
    return None if native is None else _BY_REAL.get(native)


def as_dtype(x: Any) -> TileDType:
    """Normalize ``ct.float32``, a TileDType, a dtype name, a numpy dtype or a torch dtype
    to a TileDType (cuTile accepts torch and numpy dtypes wherever it expects a dtype).

    Example:
        >>> import cuda.tile as ct, numpy as np
        >>> as_dtype(ct.int8) is as_dtype(np.int8) is as_dtype("int8")
        True
    """
    if isinstance(x, TileDType):
        return x
    if isinstance(x, ct.DType):
        return _BY_REAL[x]
    if isinstance(x, str):
        if x in DTYPES:
            return DTYPES[x]
    else:
        found = foreign(x)
        if found is not None:
            return found
    try:
        return from_numpy(x)
    except TypeError:
        pass
    raise compile_error(f"expected a dtype such as ct.float32, got {x!r}")


def category(dtype: TileDType) -> int:
    """Boolean < integral < float; restricted floats (tf32, fp8, fp4) count as float."""
    return FLOAT if dtype.category == RESTRICTED else dtype.category


class LooseInt(int):
    """A loosely typed int constant with the methods cuTile gives every constant (a
    constant is a 0-d tile there): what ``ct.static_eval`` returns for an int, so
    ``ct.static_eval(t.shape)[1].astype(ct.float32)`` works as in cuTile.

    Example:
        >>> LooseInt(8).astype(DTYPES["float32"]).numpy()
        array(8., dtype=float32)
    """

    __slots__ = ()   # (``astype`` is attached by tilelab.interp.ops.casts)


class LooseFloat(float):
    """A loosely typed float constant with ``astype`` (see :class:`LooseInt`)."""

    __slots__ = ()   # (``astype`` is attached by tilelab.interp.ops.casts)


_LOOSE_TYPES = (int, float, bool, LooseInt, LooseFloat)


def is_loose(x: Any) -> bool:
    """Whether ``x`` is a loosely typed constant: a Python bool, int or float (or a
    :class:`LooseInt`/:class:`LooseFloat`)."""
    return type(x) in _LOOSE_TYPES


def loose_dtype(value: bool | int | float) -> TileDType:
    """The concrete dtype cuTile picks for a Python constant (int32/int64/uint64, float32)."""
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        if -2**31 <= value < 2**31:
            return INT32
        if -2**63 <= value < 2**63:
            return INT64
        if 0 <= value < 2**64:
            return UINT64
        raise compile_error(f"constant {value} is out of range of any supported integer type")
    return FLOAT32


_PROMOTE: dict[tuple[TileDType, TileDType], TileDType | None] = {}
for _a in DTYPES.values():
    for _b in DTYPES.values():
        _r = _cutile.promote_table_entry(_a.real, _b.real)
        _PROMOTE[(_a, _b)] = None if _r is None else _BY_REAL[_r]


def promote(a: TileDType, b: TileDType, force_float: bool = False) -> TileDType:
    """cuTile's common dtype of two concrete dtypes, or CompileError as cuTile reports it."""
    if a is b and (not force_float or a.kind == "f"):
        return a
    if a.category == RESTRICTED or b.category == RESTRICTED:
        raise compile_error(
            f"Implicit promotion of {a} and {b} is not supported as it involves restricted "
            f"float dtypes. Please perform an explicit cast instead.",
            hint="convert with .astype(ct.float32) first")
    result = _PROMOTE[(a, b)]
    if result is None:
        # (cuTile's words, its spelling of "explict" included: the two backends refuse
        # alike, and tests compare the interpreter's text with the compiler's)
        raise compile_error(f"Implicit promotion of {a} and {b} is not supported. "
                            f"Please perform an explict cast instead.",
                            hint=f"convert one operand explicitly, e.g. y.astype(ct.{a})")
    if force_float and result.kind != "f":
        return FLOAT32
    return result


def _promote_with_loose(dtype: TileDType, value: Any, force_float: bool) -> TileDType:
    ldt = loose_dtype(value)
    cat, lcat = category(dtype), category(ldt)
    if cat == lcat:
        result = dtype
        if cat == INTEGRAL and not force_float:
            lo, hi = _cutile.integer_min(dtype.real), _cutile.integer_max(dtype.real)
            if not lo <= value <= hi:
                raise compile_error(f"Integer constant {value} is out of range of {dtype}",
                                    hint="cast the other operand to a wider dtype, e.g. "
                                         ".astype(ct.int32)")
    else:
        result = ldt if lcat > cat else dtype
    if force_float and result.kind != "f":
        return FLOAT32
    return result


def promote_operands(x: Any, y: Any, x_dtype: TileDType | None, y_dtype: TileDType | None,
                     force_float: bool = False) -> TileDType:
    """Common dtype of two operands, each a tile (dtype given) or a loose constant (None)."""
    if x_dtype is None and y_dtype is None:
        return promote(loose_dtype(x), loose_dtype(y), force_float)
    if x_dtype is None:
        return _promote_with_loose(y_dtype, x, force_float)
    if y_dtype is None:
        return _promote_with_loose(x_dtype, y, force_float)
    return promote(x_dtype, y_dtype, force_float)


def check_implicit_cast(src: TileDType | None, value: Any, dst: TileDType, what: str) -> None:
    """Raise CompileError unless a tile of ``src`` (or the constant ``value``) may be
    stored into ``dst`` without an explicit cast, following cuTile's implicit-cast rule."""
    if src is None:
        ldt = loose_dtype(value)
        scat, dcat = category(ldt), category(dst)
        if dst.category == BOOLEAN:
            if scat not in (BOOLEAN, INTEGRAL) or value not in (0, 1):
                raise compile_error(f"{what}: cannot implicitly cast {value} to {dst}")
        elif scat > dcat:
            raise compile_error(f"{what}: cannot implicitly cast {value} to {dst}",
                                hint=f"convert explicitly with ct.astype(..., {dst})")
        elif scat == dcat == INTEGRAL:
            lo, hi = _cutile.integer_min(dst.real), _cutile.integer_max(dst.real)
            if not lo <= value <= hi:
                raise compile_error(f"{what}: {value} is out of range of {dst}")
        return
    if src is dst:
        return
    ok = (src.category != RESTRICTED and dst.category != RESTRICTED
          and _PROMOTE[(src, dst)] is dst)
    if not ok:
        raise compile_error(f"{what}: cannot implicitly cast {src} to {dst}",
                            hint=f"convert explicitly: tile.astype(ct.{dst})")
