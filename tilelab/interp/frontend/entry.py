"""cuTile's front-end rules, checked on a function's source before it first runs.

Why: the interpreter runs kernel bodies as Python, and Python accepts much that cuTile's
front end refuses when it turns a function's AST into its own form: ``break``,
``continue`` or ``return`` inside a ``for ... in ct.static_iter(...)`` loop,
``ct.static_iter`` anywhere but as a ``for`` loop's iterable, an assignment expression
(``:=``) inside ``ct.static_eval`` or a tuple comprehension, ``for``/``else``, ``global``
statements... A kernel cuTile refuses must not run on the CPU, and the refusal holds
whether or not the run would reach the offending line (cuTile reads the whole function).
So each function the interpreter runs (the kernel, and each helper it calls; see
:mod:`tilelab.interp.rebuild`) is given to cuTile's own front end once, when it is first
called, and cuTile's refusal becomes a :class:`~tilelab.errors.CompileError` with
cuTile's words, at the place cuTile names, of cuTile's class (``TileSyntaxError``...).
A function whose source cannot be read is run unchecked, as before.

Example:
    >>> import cuda.tile as ct
    >>> def kernel(x):
    ...     for i in ct.static_iter((1, 2)):
    ...         break
    >>> front_end_error(kernel, entry=True).message
    'Break in a for loop with static_iter() is not supported'
"""
from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import sys
import types
import weakref
from typing import Any, Callable

from tilelab.errors import CompileError, SourceLocation
from tilelab.interp import _cutile
from tilelab.interp.context import (KernelNameError, call_locations, function_source,
                                    location_at)
from tilelab.interp.frontend.call_rules import call_refusal
from tilelab.interp.frontend.undefined_rules import undefined_refusal
from tilelab.interp.frontend.path_types import path_refusal
from tilelab.interp.frontend.static_rules import static_refusal
from tilelab.interp.frontend.tuple_rules import tuple_refusal

__all__ = ["front_end_error", "front_end_checked"]

_NONE = object()

#: the code that calls the function of a ``@contextlib.contextmanager`` helper
_CONTEXTMANAGER_INIT = contextlib._GeneratorContextManagerBase.__init__.__code__

#: per code object: {entry: the refusal or _NONE}
_FOUND: "weakref.WeakKeyDictionary[types.CodeType, dict]" = weakref.WeakKeyDictionary()


def front_end_error(fn: types.FunctionType, entry: bool, manager: bool = False
                    ) -> CompileError | None:
    """cuTile's front-end refusal of ``fn``'s source as a CompileError (cached per code
    object), or None when cuTile's front end accepts it or cannot read it. ``entry``:
    ``fn`` is the kernel itself (cuTile reads a kernel and a helper a little apart:
    ``return`` ends a kernel but sets a helper's result); ``manager``: ``fn`` is the
    function of a ``@contextlib.contextmanager`` helper, which cuTile reads by rules of
    its own (one ``yield`` at the top level of its body, no ``return``; its plain front
    end would refuse the ``yield`` as "Unsupported syntax"). A generator function is
    read as one in any case."""
    manager = manager or bool(fn.__code__.co_flags & inspect.CO_GENERATOR)
    seen = _FOUND.setdefault(fn.__code__, {})
    found = seen.get((entry, manager))
    if found is None:
        found = seen[(entry, manager)] = _refusal(fn, entry, manager) or _NONE
    return None if found is _NONE else found


def _refusal(fn: types.FunctionType, entry: bool, manager: bool) -> CompileError | None:
    error = _cutile.front_end_refusal(fn, entry, generator=manager)
    if error is None:
        return None
    loc = getattr(error, "loc", None)
    line = getattr(loc, "line", 0) or 0
    filename = getattr(loc, "filename", None) or fn.__code__.co_filename
    message = getattr(error, "message", None) or str(error)
    where = location_at(filename, line, getattr(loc, "col", 0) or 0) if line else \
        _unlocated(fn, message)
    return CompileError(message, location=where, foreign=type(error),
                        hint=_HINTS.get(_hint_key(message)))


def _unlocated(fn: types.FunctionType, message: str) -> SourceLocation | None:
    """Where a refusal cuTile raises without a place is: for "static_iter() is only
    allowed as iterable..." (and its siblings), the first call of that name that is not
    where cuTile allows it; else the function's definition."""
    found = function_source(fn)
    if found is None:
        return None
    func, line0, indent = found
    name = message.split("()", 1)[0] if "()" in message else None
    allowed: set[int] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.For):
            allowed.add(id(node.iter))
        elif isinstance(node, ast.Raise) and node.exc is not None:
            allowed.add(id(node.exc))
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and id(node) not in allowed and name and \
                _callee_name(node.func) == name:
            return location_at(fn.__code__.co_filename, line0 + node.lineno,
                               node.col_offset + indent)
    return location_at(fn.__code__.co_filename, line0 + func.lineno, func.col_offset + indent)


def _callee_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _hint_key(message: str) -> str | None:
    for key in _HINTS:
        if key in message:
            return key
    return None


#: advice for the refusals a port from plain Python meets most
_HINTS = {
    "static_iter() is not supported":
        "a static_iter loop is unrolled at compile time: compute a flag and test it in "
        "each iteration, or iterate with range() for a run-time loop",
    "static_iter() is only allowed":
        "write `for item in ct.static_iter(...)`",
    "static_eval()":
        "ct.static_eval evaluates one plain expression at compile time",
}


def front_end_checked(fn: types.FunctionType, run: Callable[..., Any], entry: bool
                      ) -> Callable[..., Any]:
    """``run`` (``fn`` rebuilt for the interpreter) made to raise cuTile's front-end
    refusal of ``fn`` (and a broken ``static_eval`` rule, see
    :mod:`tilelab.interp.frontend.static_rules`, a type that depends on the path taken, see
    :mod:`tilelab.interp.frontend.path_types`, or a tuple operation cuTile does not compile, see
    :mod:`tilelab.interp.frontend.tuple_rules`, or a call cuTile does not implement, see
    :mod:`tilelab.interp.frontend.call_rules`, or a variable not surely assigned where
    it is used, see :mod:`tilelab.interp.frontend.undefined_rules`) at its first call, before any of it runs; when a
    helper is refused, the message says from where it was called."""
    checked_ok = False

    @functools.wraps(run)
    def checked(*args: Any, **kwargs: Any) -> Any:
        nonlocal checked_ok
        if not checked_ok:
            bound = _bound(fn, args, kwargs)
            caller = sys._getframe(1)
            manager = _called_by_contextlib(caller)
            error = front_end_error(fn, entry, manager) or static_refusal(fn, bound) or \
                undefined_refusal(fn, bound) or path_refusal(fn, bound) or \
                tuple_refusal(fn, bound) or call_refusal(fn, bound)
            if error is not None:
                raise _at_call(error, call_locations(caller))
            checked_ok = True
        return run(*args, **kwargs)
    return checked


def _called_by_contextlib(frame: Any) -> bool:
    """Whether the call comes from ``contextlib`` making a ``@contextmanager`` helper's
    generator (past the interpreter's own wrappers)."""
    while frame is not None and \
            str(frame.f_globals.get("__name__", "")).startswith("tilelab.interp"):
        frame = frame.f_back
    return frame is not None and frame.f_code is _CONTEXTMANAGER_INIT


def _bound(fn: types.FunctionType, args: tuple, kwargs: dict) -> dict[str, Any]:
    """The call's arguments by parameter name (none when they do not bind: Python says
    why when the function runs)."""
    try:
        return dict(inspect.signature(fn).bind(*args, **kwargs).arguments)
    except (TypeError, ValueError):
        return {}


def _at_call(error: CompileError, chain: list) -> CompileError:
    """A fresh copy of a cached refusal (each raise gets its own traceback), naming the
    calls that led to a helper, as the compiler says them."""
    message = error.message
    if chain:
        message += " (called from " + ", ".join(map(str, chain)) + ")"
    if isinstance(error, KernelNameError):   # (a NameError too, as the run raises it)
        fresh = KernelNameError(message, location=error.location, hint=error.hint,
                                name=error.name)
        fresh.foreign = error.foreign
        return fresh
    return CompileError(message, location=error.location, hint=error.hint,
                        foreign=error.foreign)
