"""``@contextlib.contextmanager`` helpers in a kernel, as cuTile 1.7 reads them.

cuTile reads the generator behind such a helper by rules of its own (one ``yield``, at
the top level of the body, no ``return``); its plain front end would refuse the
``yield`` as "Unsupported syntax". The interpreter gives a generator function to
cuTile's front end in that mode, before it first runs (issue #41: a kernel cuTile
accepts runs, one it refuses is refused with its words). Each kernel here was compiled
with cuTile 1.7 for sm_90: the first compiles, the others are refused as below.
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest

import cuda.tile as ct
from tilelab.errors import CompileError
from tilelab.interp import interpret
from tilelab.interp._cutile import exception_classes


def _append(x, val):
    i = ct.gather(x, 0) + 1
    ct.scatter(x, 0, i)
    ct.scatter(x, i, val)


@contextmanager
def _bracket(x, start_val, end_val):
    _append(x, start_val)
    yield start_val
    _append(x, end_val)


def test_a_context_manager_helper_runs_its_two_halves_around_the_body():
    @ct.kernel
    def k(x):
        _append(x, 10)
        with _bracket(x, 20, 30) as val:
            _append(x, 40)
            ct.static_assert(val == 20)
        _append(x, 50)

    x = np.zeros(10, np.int32)
    interpret(k, x, grid=(1,))
    assert x.tolist() == [5, 10, 20, 40, 30, 50, 0, 0, 0, 0]


@contextmanager
def _two_yields(x):
    _append(x, 1)
    yield
    _append(x, 2)
    yield


@contextmanager
def _no_yield(x):
    _append(x, 1)


@contextmanager
def _yield_in_if(x, flag):
    if flag:
        yield
    _append(x, 2)


@contextmanager
def _returns():
    if ct.bid(0) == 1:
        return
    yield


@pytest.mark.parametrize("manager, words, cls", [
    (_two_yields, "Generator-based context manager must have one `yield` statement",
     "TileTypeError"),
    (_no_yield, "Expected a generator function, but no reachable `yield` statement has "
                "been found", "TileTypeError"),
    (_yield_in_if, "`yield` statement of a generator-based context manager must be placed "
                   "outside of loops and conditional statements", "TileTypeError"),
    (_returns, "Returning from a generator-based context manager is not supported",
     "TileSyntaxError"),
])
def test_a_context_manager_cutile_refuses_is_refused_before_it_runs(manager, words, cls):
    def k(x):
        with manager(*((x,) if manager is not _yield_in_if else (x, True))[:
                       0 if manager is _returns else 2]):
            _append(x, 99)

    x = np.zeros(8, np.int32)
    with pytest.raises(CompileError) as e:
        interpret(k, x, grid=(1,))
    assert e.value.message.startswith(words)
    assert isinstance(e.value, exception_classes()[cls])
    assert x.tolist() == [0] * 8
