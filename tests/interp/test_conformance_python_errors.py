"""A Python error a kernel's own code raises is cuTile's refusal of it (issue #41):
unpacking, a missing dictionary key, calling what is not callable, dataclasses.replace
of a field that does not exist, and an exception inside ct.static_eval, each with
cuTile's words, class and place; other Python errors keep Python's words."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import cuda.tile as ct
from tilelab.errors import CompileError
from tilelab.interp import interpret


def _line_of(fn, text: str) -> int:
    import inspect
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def _refusal(kernel, *args, cls=CompileError) -> CompileError:
    with pytest.raises(cls) as info:
        interpret(kernel, *args, grid=(1,))
    assert isinstance(info.value, CompileError)
    return info.value


def test_too_few_values_to_unpack():
    @ct.kernel
    def k():
        t = 1, 2
        a, b, c = t

    err = _refusal(k, cls=ct.TileValueError)
    assert err.message == "Too few values to unpack (expected 3, got 2)"
    assert err.location.line == _line_of(k._pyfunc if hasattr(k, "_pyfunc") else k,
                                         "a, b, c = t")


def test_too_many_values_to_unpack():
    @ct.kernel
    def k():
        t = 1, 2, 3
        a, b = t

    err = _refusal(k, cls=ct.TileValueError)
    assert err.message.startswith("Too many values to unpack (expected 2")


def _lookup(**kwargs):
    return kwargs["qux"]


def test_a_missing_dictionary_key():
    @ct.kernel
    def k():
        _lookup(foo=1, bar=2)

    err = _refusal(k, cls=ct.TileTypeError)
    assert err.message == "Key 'qux' not found in dictionary"
    assert err.location.line == _line_of(_lookup, 'kwargs["qux"]')


@dataclasses.dataclass(frozen=True)
class _Pair:
    x: int
    y: int


def test_calling_a_dataclass_without_call():
    @ct.kernel
    def k():
        d = _Pair(3, 5)
        d(7)

    err = _refusal(k, cls=ct.TileTypeError)
    assert err.message == "Cannot call an object of type _Pair"


def test_replacing_a_field_that_does_not_exist():
    @ct.kernel
    def k():
        p = _Pair(2, 7)
        dataclasses.replace(p, z=8)

    err = _refusal(k, cls=ct.TileTypeError)
    assert err.message == "Dataclass '_Pair' has no such field 'z'"


def test_an_exception_inside_static_eval():
    @ct.kernel
    def k(n: ct.Constant):
        ct.static_eval(1 // n)

    err = _refusal(k, 0, cls=ct.TileStaticEvalError)
    assert err.message == ("Exception was raised inside static_eval() (ZeroDivisionError: "
                           "integer division or modulo by zero)")
    assert err.location.col == _column_of_static_eval(k)


def _column_of_static_eval(k) -> int:
    import inspect
    fn = getattr(k, "_pyfunc", k)
    line = next(l for l in inspect.getsourcelines(fn)[0] if "static_eval(" in l)
    return line.index("ct.static_eval") + 1


def test_an_exception_inside_a_static_assert_message():
    @ct.kernel
    def k(n: ct.Constant):
        ct.static_assert(n > 0, "bad " + {}["key"])

    err = _refusal(k, 0, cls=ct.TileStaticEvalError)
    assert err.message == ("Exception was raised inside static_assert() message (KeyError: "
                           "'key')")


def _pop(**kwargs):
    return kwargs.pop("qux")


def test_other_python_errors_keep_pythons_words():
    @ct.kernel
    def k(y):
        _pop(foo=1)       # a KeyError, but not of a subscript: not cuTile's key message
        ct.scatter(y, (), 1)

    err = _refusal(k, np.zeros((), np.int32))
    assert err.message == "KeyError: 'qux'"
