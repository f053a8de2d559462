"""Which dataclasses a kernel may create (issue #41, cause 2).

cuTile creates dataclass instances in kernels only for frozen dataclasses with the
generated ``__init__`` and plain fields; Python creates any. The interpreter hands
kernel code a stand-in for a refused class that refuses creation with cuTile's words
and class (:mod:`tilelab.interp.frontend.dataclass_rules`); accepted classes are untouched.
"""
from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

import cuda.tile as ct
from tilelab.errors import CompileError
from tilelab.interp import interpret


def _refusal(kernel) -> CompileError:
    with pytest.raises(CompileError) as info:
        interpret(kernel, np.zeros(2, np.int32), grid=(1,))
    assert isinstance(info.value, ct.TileTypeError)
    return info.value


@dataclasses.dataclass
class Thawed:
    foo: int


@dataclasses.dataclass(frozen=True)
class WithNew:
    foo: int

    def __new__(cls, *args):
        return super().__new__(cls)


@dataclasses.dataclass(frozen=True)
class WithFactory:
    foo: int
    bar: int = dataclasses.field(default_factory=lambda: 5)


@dataclasses.dataclass(frozen=True)
class WithHiddenField:
    foo: int
    bar: int = dataclasses.field(init=False, default=1)


@dataclasses.dataclass(frozen=True)
class WithInit:
    foo: int

    def __init__(self, foo):
        object.__setattr__(self, "foo", foo)


@dataclasses.dataclass(frozen=True)
class Plain:
    foo: int
    bar: int = 4


class PlainSubclass(Plain):
    pass


@pytest.mark.parametrize("cls, words", [
    (Thawed, "Only frozen dataclasses are supported"),
    (WithNew, "Dataclasses with custom __new__ are not supported"),
    (WithFactory, "Dataclasses with default_factory fields are not supported"),
    (WithHiddenField, "Dataclasses with init=False fields are not supported"),
    (PlainSubclass, "Non-dataclass subclasses of a dataclass are not supported"),
    (WithInit, "Dataclass instance creation is only supported for dataclasses with a "
               "default generated __init__() method."),
])
def test_creating_a_refused_dataclass(cls, words):
    def kernel(x):
        ct.scatter(x, 0, 1)
        if ct.bid(0) == 0:
            value = cls(2)
            ct.scatter(x, 1, value.foo)

    error = _refusal(kernel)
    assert error.message == words
    lines, start = inspect.getsourcelines(kernel)
    assert error.location.line == start + 3   # (the line that creates it)


def test_a_frozen_dataclass_is_created_and_still_the_class():
    def kernel(x):
        value = Plain(2)
        ct.scatter(x, 0, value.foo + value.bar)
        # (cuTile compiles no isinstance() call; inside static_eval it is Python)
        ct.scatter(x, 1, 1 if ct.static_eval(isinstance(value, Plain)) else 0)

    x = np.zeros(2, np.int32)
    interpret(kernel, x, grid=(1,))
    assert x.tolist() == [6, 1]


def test_a_refused_dataclass_still_answers_isinstance():
    def kernel(x, flag: ct.Constant[int]):
        ct.scatter(x, 0, 1 if ct.static_eval(isinstance(flag, Thawed)) else 2)

    x = np.zeros(2, np.int32)
    interpret(kernel, x, 3, grid=(1,))
    assert x.tolist() == [2, 0]
