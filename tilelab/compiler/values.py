"""Which values a launch passes to a kernel as scalars and constants, and how.

A scalar or ``ct.Constant`` argument reaches the kernel body (the CPU interpreter runs
the body on it; cuTile traces it into the compiled code), so it must be a value whose
operators are Python's or numpy's own: an object of a user type there would run the
user's code in the middle of a safe kernel (its ``__add__`` could write a ``tl.In``
tensor while blocks read it), and cuTile cannot compile it. The rule, for every path
that binds arguments (launches, ``kernel.compile``, graph capture, ``tl.interpret``):

- a constant is an exact ``bool``, ``int`` or ``float``; a numpy scalar of a kernel
  dtype is converted to the Python value (``np.int32(3)`` -> ``3``);
- a run-time scalar is an exact ``bool``, ``int`` or ``float``, or a numpy scalar of a
  kernel dtype (its dtype is the parameter's C type);
- anything else (a subclass, ``IntEnum`` members included, a 0-d array, a string) is
  a :class:`~tilelab.errors.LaunchError` naming the parameter, the type and what to
  pass instead (cuTile itself refuses a string kernel constant: its compile API's
  ``ConstantConstraint`` raises TypeError for one; a string inside the kernel body,
  a message, is another thing). Deciding costs ``type()`` and set lookups: no code of
  the value's own runs (its ``__eq__``, ``__hash__``, ``__index__``, ``__repr__`` are
  never called).

Constants specialize the kernel, so each distinct constant is its own compiled code;
:func:`constant_key` is what tables of compiled code file it under (``1``, ``True``
and ``1.0`` apart, ``-0.0`` apart from ``0.0``, a NaN equal to itself). Run-time
scalars never specialize beyond their dtype (:func:`tilelab.compiler.signature.
scalar_spec`).

Example:
    >>> import numpy as np
    >>> constant_value(np.int32(3), "N", "k"), constant_value(np.float32(1.5), "C", "k")
    (3, 1.5)
    >>> nan = float("nan")
    >>> constant_key(-0.0) == constant_key(0.0), constant_key(nan) == constant_key(float(nan))
    (False, True)
"""
from __future__ import annotations

import struct
import sys
from typing import Any

import numpy as np

from tilelab.errors import LaunchError
from tilelab.limits import STR_CONSTANT_WHY, str_constant_hint

__all__ = ["EXACT_SCALARS", "NUMBER_TYPES", "is_numpy_scalar", "constant_value", "scalar_value",
           "constant_key", "describe_type"]

#: the Python types a scalar or constant may have, exactly (never a subclass)
EXACT_SCALARS = frozenset((bool, int, float))

#: what counts as a number to these rules (then exact, or refused): ``isinstance`` with
#: these reads only the type
NUMBER_TYPES = (bool, int, float, np.generic)

#: numpy's scalar types of the kernel dtypes (ml_dtypes' are added by is_numpy_scalar)
_NUMPY_SCALARS = frozenset((np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
                            np.uint16, np.uint32, np.uint64, np.float16, np.float32,
                            np.float64))
_ML_NAMES = ("bfloat16", "float8_e4m3fn", "float8_e5m2")
_ml_scalars: frozenset = frozenset()


def is_numpy_scalar(value: Any) -> bool:
    """Whether ``value``'s type is exactly the numpy (or ml_dtypes) scalar type of a
    kernel dtype: numpy's own operators, no subclass.

    Example:
        >>> import numpy as np
        >>> is_numpy_scalar(np.float16(1)), is_numpy_scalar(np.array(1.0)), is_numpy_scalar(1)
        (True, False, False)
    """
    global _ml_scalars
    t = type(value)
    if t in _NUMPY_SCALARS:
        return True
    ml = sys.modules.get("ml_dtypes")   # (an ml_dtypes scalar exists only once imported)
    if ml is None:
        return False
    if not _ml_scalars:
        _ml_scalars = frozenset(getattr(ml, n) for n in _ML_NAMES if hasattr(ml, n))
    return t in _ml_scalars


def describe_type(value: Any) -> str:
    """How messages name an argument's type, read from the type alone (the value's own
    ``__repr__`` is never called).

    Example:
        >>> import enum, numpy as np
        >>> class Mode(enum.IntEnum):
        ...     A = 1
        >>> describe_type(Mode.A), describe_type(np.zeros(())), describe_type("x")
        ('Mode (a subclass of int)', 'a 0-d numpy.ndarray', 'str')
    """
    t = type(value)
    if isinstance(value, np.ndarray):   # (ndarray's own ndim: a subclass may redefine it)
        kind = "numpy.ndarray" if t is np.ndarray else f"{t.__name__} (a numpy.ndarray)"
        return f"a {np.ndarray.ndim.__get__(value)}-d {kind}"
    for base in (bool, int, float, str):
        if isinstance(value, base) and t is not base and not isinstance(value, np.generic):
            return f"{t.__name__} (a subclass of {base.__name__})"
    if isinstance(value, np.generic):
        return f"numpy scalar {t.__name__} (not a kernel dtype)" if t.__module__ in (
            "numpy", "ml_dtypes") else f"{t.__name__} (a subclass of a numpy scalar type)"
    return t.__name__


def _hint(value: Any, param: str) -> str:
    if type(value) is str:
        return str_constant_hint(param)
    if isinstance(value, np.ndarray) and np.ndarray.ndim.__get__(value) == 0:
        return f"pass {param}=a.item() (a plain Python value) for a 0-d array a"
    if isinstance(value, float):
        return f"pass a plain Python value computed before the launch, e.g. float({param})"
    if isinstance(value, (bool, int)):
        return f"pass a plain Python value computed before the launch, e.g. int({param})"
    return "pass a Python bool, int or float"


def constant_value(value: Any, param: str, where: str) -> bool | int | float:
    """The value a ``ct.Constant`` parameter gets: ``value`` if it is an exact bool,
    int or float, a numpy scalar converted to one; LaunchError otherwise.

    ``where`` names the call for the message (``"kern()"``).

    Example:
        >>> import numpy as np
        >>> constant_value(np.bool_(True), "FLAG", "k()")
        True
        >>> try:
        ...     constant_value(np.zeros(()), "N", "k()")
        ... except LaunchError as e:
        ...     print(e.message.split("; ")[-1], "|", e.hint)
        got a 0-d numpy.ndarray | pass N=a.item() (a plain Python value) for a 0-d array a
    """
    t = type(value)
    if t in EXACT_SCALARS:
        return value
    if is_numpy_scalar(value):
        return value.item()
    why = ""
    if t is str:   # (cuda.tile.compilation.ConstantConstraint raises TypeError for one)
        why = f" ({STR_CONSTANT_WHY})"
    elif not isinstance(value, (np.ndarray, np.generic)) and isinstance(
            value, (bool, int, float, str)):
        why = ", whose own operators would run inside the kernel"
    raise LaunchError(f"{where}: parameter {param!r} is a ct.Constant and takes an exact "
                      "bool, int or float (numpy scalars are converted); got "
                      f"{describe_type(value)}{why}", hint=_hint(value, param))


def scalar_value(value: Any, param: str, where: str) -> Any:
    """``value`` as a run-time scalar argument: an exact bool, int or float, or a
    numpy scalar of a kernel dtype, as it is; LaunchError for any other number-like
    value (a subclass of int or float, a numpy scalar subclass or of another dtype).

    Example:
        >>> scalar_value(2.5, "alpha", "k()")
        2.5
        >>> class Evil(int):
        ...     pass
        >>> try:
        ...     scalar_value(Evil(3), "n", "k()")
        ... except LaunchError as e:
        ...     print(e.message.split("; ")[-1])
        got Evil (a subclass of int), whose own operators would run inside the kernel
    """
    if type(value) in EXACT_SCALARS or is_numpy_scalar(value):
        return value
    why = ", whose own operators would run inside the kernel" if isinstance(
        value, (bool, int, float)) and not isinstance(value, np.generic) else ""
    raise LaunchError(f"{where}: argument {param!r} is a scalar and takes an exact bool, "
                      "int or float, or a numpy scalar of a kernel dtype; got "
                      f"{describe_type(value)}{why}", hint=_hint(value, param))


def constant_key(value: bool | int | float) -> tuple:
    """What a table of compiled code files a constant under (after
    :func:`constant_value`): the type and, for floats, the bits, so that ``1``,
    ``True`` and ``1.0`` are three keys, ``-0.0`` is not ``0.0``, and a NaN finds
    itself (``nan != nan``: filed by value, every NaN would be a new entry).

    Example:
        >>> constant_key(True) == constant_key(1), constant_key(2.0)
        (False, (<class 'float'>, 4611686018427387904))
    """
    t = type(value)
    if t is float:
        return (float, struct.unpack("<q", struct.pack("<d", value))[0])
    return (t, value)
