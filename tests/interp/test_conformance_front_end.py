"""What cuTile's front end refuses in a kernel's source (issue #41, cause 2).

Python runs ``break`` inside a ``ct.static_iter`` loop, a walrus inside
``ct.static_eval`` or ``ct.static_iter`` used as a value; cuTile's front end refuses
the whole kernel, whatever the run would reach. The interpreter gives each function
it runs to cuTile's front end before the function's first call and refuses with
cuTile's words, class and place (:mod:`tilelab.interp.frontend.entry`).
"""
from __future__ import annotations

import numpy as np

import cuda.tile as ct
from tilelab.errors import CompileError
from tilelab.interp import interpret

from support.refusals import refusal, source_line


def _line(fn, text: str) -> int:
    return source_line(fn, text)


def _refusal(kernel, *args) -> CompileError:
    return refusal(kernel, *args)


def test_break_in_a_static_iter_loop_words_class_and_place():
    def kernel(x, flag):
        for i in ct.static_iter((1, 2)):
            if flag > 5:
                break
            ct.scatter(x, i, i)

    x = np.zeros(4, np.int32)
    error = _refusal(kernel, x, 0)   # (flag is 0: the break is never reached)
    assert error.message == "Break in a for loop with static_iter() is not supported"
    assert isinstance(error, ct.TileSyntaxError)
    assert (error.location.line, error.location.col) == (_line(kernel, "break"), 17)
    assert x.tolist() == [0, 0, 0, 0]   # refused before any of it ran


def test_continue_and_return_in_a_static_iter_loop():
    def with_continue(x):
        for i in ct.static_iter((1, 2)):
            continue

    def with_return(x):
        for i in ct.static_iter((1, 2)):
            return

    x = np.zeros(4, np.int32)
    error = _refusal(with_continue, x)
    assert error.message == "Continue in a for loop with static_iter() is not supported"
    assert error.location.line == _line(with_continue, "continue")
    error = _refusal(with_return, x)
    assert error.message == "Returning from a for loop with static_iter() is not supported"
    assert isinstance(error, ct.TileSyntaxError)


def test_static_iter_outside_a_for_loop():
    def kernel(x):
        items = ct.static_iter((1, 2))
        ct.scatter(x, 0, 1)

    error = _refusal(kernel, np.zeros(4, np.int32))
    assert error.message == ("static_iter() is only allowed as iterable in a `for` loop,"
                             " i.e. `for i in static_iter(...)`")
    assert isinstance(error, ct.TileSyntaxError)
    assert error.location.line == _line(kernel, "items =")


def test_a_walrus_inside_static_eval():
    def kernel(x):
        y = 1
        n = ct.static_eval((y := 2) + 1)
        ct.scatter(x, 0, n)

    error = _refusal(kernel, np.zeros(4, np.int32))
    assert error.message == "static_eval() expression attempted to modify a local variable 'y'"
    assert isinstance(error, ct.TileSyntaxError)
    assert error.location.line == _line(kernel, "n = ct.static_eval")


def test_a_refused_helper_names_the_call_that_led_there():
    def helper(x):
        for i in ct.static_iter((0, 1)):
            break

    def kernel(x):
        ct.scatter(x, 0, 1)
        helper(x)

    x = np.zeros(4, np.int32)
    error = _refusal(kernel, x)
    assert error.message.startswith(
        "Break in a for loop with static_iter() is not supported (called from ")
    assert f":{_line(kernel, 'helper(x)')}:" in error.message
    assert error.location.line == _line(helper, "break")


def test_what_the_front_end_accepts_runs():
    def kernel(x):
        for i in ct.static_iter((1, 2)):
            ct.scatter(x, i, i * 10)
        for j in range(3):
            if j == 1:
                break
            ct.scatter(x, 3, j + 7)

    x = np.zeros(4, np.int32)
    interpret(kernel, x, grid=(1,))
    assert x.tolist() == [0, 10, 20, 7]


def test_a_tuple_repetition_inside_static_eval_is_python():
    def kernel(x):
        shape = (2, 4)
        idx = ct.static_eval((0,) * len(shape))
        ct.store(x, idx, ct.full((2, 4), 3, ct.int32))

    x = np.zeros((2, 4), np.int32)
    interpret(kernel, x, grid=(1,))
    assert (x == 3).all()


def test_a_tuple_repetition_outside_static_eval_is_still_refused():
    def kernel(x):
        idx = ct.static_eval((0,) * 2) + (0,) * 1
        ct.store(x, idx, ct.full((2, 4, 1), 3, ct.int32))

    error = _refusal(kernel, np.zeros((2, 4, 1), np.int32))
    assert error.message.startswith("Unsupported operand types for *: Tuple[")
