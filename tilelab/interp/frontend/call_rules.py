"""Calls cuTile's compiler has no implementation of, read from a function's source.

Why: a kernel body runs as Python in the interpreter, so ``eval("2 + 2")``,
``sum(t)``, ``isinstance(x, int)`` or ``Foo()`` (an instance of a plain class) simply
run; cuTile compiles a call only to what it implements (``len``, ``tuple``, ``min``...,
its own ops, helpers, frozen dataclasses, enums) and refuses the kernel otherwise,
whichever path the run takes: "eval() is not supported in device code", 'Creating
instances of type "Foo" is not supported in device code' (``UnsupportedCallError``).
So each function the interpreter runs is read once from its source before it first
runs, and the first such call is refused at its place, in cuTile's words. A callee is
resolved only through names the function does not bind itself (globals, closure
variables, builtins) and attributes of modules and classes; the arguments of
``ct.static_eval``, ``static_assert`` and ``static_iter`` are plain Python that cuTile
evaluates at compile time (``ct.static_eval(sum(shape))``) and are not read, nor is
the exception of a ``raise`` (cuTile's front end has its own rule for it). An enum
member is made from one constant: ``Color(ct.bid(0))`` is refused ("Enum constructor
argument must be a constant").

Example:
    >>> def kernel():
    ...     eval("2 + 2")
    >>> call_refusal(kernel, {}).message
    'eval() is not supported in device code'
"""
from __future__ import annotations

import ast
import builtins
import dataclasses
import enum
import types
from typing import Any, Mapping

from tilelab.errors import CompileError
from tilelab.interp import _cutile
from tilelab.interp.context import function_source, location_at
from tilelab.interp.frontend.static_types import MISSING, Scope
from tilelab.interp.library import is_library_module

__all__ = ["call_refusal"]

#: calls whose arguments cuTile evaluates as Python at compile time
_STATIC_CALLS = frozenset({"static_eval", "static_assert", "static_iter"})


def call_refusal(fn: types.FunctionType, args: Mapping[str, Any]) -> CompileError | None:
    """cuTile's refusal of the first call in ``fn``'s source to something its compiler
    does not implement, for a call with ``args`` (parameter name -> value), or None."""
    scope = Scope.of(fn, args)
    if scope is None:
        return None
    found = function_source(fn)
    assert found is not None
    _func, line0, indent = found
    skipped: set[int] = set()
    for node in scope.nodes:
        if isinstance(node, ast.Call) and _callee_name(node.func) in _STATIC_CALLS:
            skipped |= {id(n) for a in [*node.args, *(k.value for k in node.keywords)]
                        for n in ast.walk(a)}
        elif isinstance(node, ast.Raise) and node.exc is not None:
            skipped |= {id(n) for n in ast.walk(node.exc)}
    calls = sorted((n for n in scope.nodes if isinstance(n, ast.Call) and
                    id(n) not in skipped), key=lambda n: (n.lineno, n.col_offset))
    for call in calls:
        callee = _callee(call.func, scope)
        where = location_at(fn.__code__.co_filename, line0 + call.lineno,
                            call.col_offset + indent)
        message = _unsupported(callee)
        if message is not None:
            return CompileError(
                message, location=where,
                foreign=_cutile.exception_classes()["UnsupportedCallError"],
                hint="cuTile compiles calls of its own ops, of Python helpers and of the "
                     "builtins it implements (len, tuple, min, max, abs, range...); "
                     "compute other values with ct.static_eval at compile time, or with "
                     "tile ops")
        message = _enum_refusal(callee, call, scope)
        if message is not None:
            return CompileError(message, location=where,
                                foreign=_cutile.exception_classes()["TileTypeError"],
                                hint="an enum member is a compile-time constant: make it "
                                     "from a constant, or compare the run-time value "
                                     "with the members' values")
    return None


def _enum_refusal(callee: Any, call: ast.Call, scope: Scope) -> str | None:
    """cuTile makes an enum member from one constant positional argument only."""
    if not (isinstance(callee, type) and issubclass(callee, enum.Enum)):
        return None
    if len(call.args) != 1 or call.keywords or isinstance(call.args[0], ast.Starred):
        return "Enum constructor takes exactly one positional argument"
    if scope.surely_runtime(call.args[0]):
        return "Enum constructor argument must be a constant"
    return None


def _callee(func: ast.expr, scope: Scope) -> Any:
    """What a call calls when the source settles it (a global, a closure variable, a
    builtin, an attribute of a module or class), else MISSING."""
    found = scope.resolve(func)
    if found is MISSING and isinstance(func, ast.Name) and \
            func.id not in scope._bindings and \
            scope.env.get(func.id, MISSING) is MISSING and hasattr(builtins, func.id):
        return getattr(builtins, func.id)
    return found


def _unsupported(callee: Any) -> str | None:
    if callee is MISSING or _cutile.has_device_implementation(callee):
        return None
    if isinstance(callee, types.BuiltinFunctionType) and \
            getattr(callee, "__module__", None) == "builtins":
        return f"{callee.__name__}() is not supported in device code"
    if isinstance(callee, type) and _plain_class(callee):
        return f'Creating instances of type "{callee.__name__}" is not supported in ' \
               f'device code'
    return None


def _plain_class(cls: type) -> bool:
    """A class cuTile does not create in a kernel: a builtin type it has no
    implementation of (``enumerate``, ``list``), or a class of the user's own code that
    is no dataclass, enum, exception or tuple."""
    if dataclasses.is_dataclass(cls) or issubclass(cls, (enum.Enum, BaseException, tuple)):
        return False
    module = getattr(cls, "__module__", None) or ""
    if module == "builtins":
        return True
    return bool(module) and not is_library_module(module) and \
        not module.startswith("tilelab")


def _callee_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None
