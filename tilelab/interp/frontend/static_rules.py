"""cuTile's rules for ``ct.static_eval`` and its siblings, read from a function's source.

Why: cuTile evaluates the argument of ``ct.static_eval`` (and of ``static_assert``,
``static_iter``) as Python at compile time, where calling a tile op (``ct.scatter``), a
method of a kernel value (``x.slice(...)``) or a function defined inside the kernel is
refused ("slice() cannot be called inside static_eval()."); and it only knows these
helpers when they are called directly by name (``f = ct.static_eval; f(2)`` is refused:
"static_eval() must be used directly by name, ..."). The interpreter evaluates the
argument as ordinary Python before ``static_eval`` even sees it, so it reads these rules
from the source: each function it runs is checked at its first call, with the values of
the call's arguments and the function's globals and closure (which tell whether ``ct``
is cuTile and whether ``x`` is an array), before any of it runs.

Example:
    >>> import cuda.tile as ct
    >>> def kernel(y):
    ...     f = ct.static_eval
    ...     ct.scatter(y, (), f(2))
    >>> static_refusal(kernel, {"y": None}).message
    'static_eval() must be used directly by name, e.g. cuda.tile.static_eval() or ct.static_eval().'
"""
from __future__ import annotations

import ast
import types
from typing import Any, Mapping

import cuda.tile as real_ct
from tilelab.errors import CompileError
from tilelab.interp import _cutile
from tilelab.interp.context import function_source, location_at
from tilelab.interp.frontend.static_types import names_seen

__all__ = ["static_refusal"]

#: cuTile's compile-time helpers, and what cuTile calls the place of their argument
_STATIC = {"static_eval": "static_eval()", "static_assert": "static_assert() condition",
           "static_iter": "static_iter() iterable", "static_exception": None}

_MISSING = object()


def static_refusal(fn: types.FunctionType, args: Mapping[str, Any]) -> CompileError | None:
    """cuTile's refusal of ``fn``'s use of ``static_eval`` and its siblings, called with
    ``args`` (parameter name -> value), or None."""
    found = function_source(fn)
    if found is None:
        return None
    func, line0, indent = found
    env = names_seen(fn, args)
    local_defs = {n.name for n in ast.walk(func)
                  if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n is not func}
    local_defs |= {t.id for n in ast.walk(func) if isinstance(n, ast.Assign)
                   and isinstance(n.value, ast.Lambda) for t in n.targets
                   if isinstance(t, ast.Name)}
    callees: set[int] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Call):
            callees.add(id(node.func))

    def at(node: ast.AST) -> Any:
        return location_at(fn.__code__.co_filename, line0 + node.lineno,
                           node.col_offset + indent)

    classes = _cutile.exception_classes()
    for node in ast.walk(func):
        helper = _static_helper(node, env)
        if helper is not None and id(node) not in callees:
            return CompileError(
                f"{helper}() must be used directly by name, e.g. cuda.tile.{helper}() or "
                f"ct.{helper}().", location=at(node), foreign=classes["TileSyntaxError"],
                hint=f"call ct.{helper}(...) itself where its value is needed")
        if isinstance(node, ast.Call) and _static_helper(node.func, env) and node.args \
                and _STATIC.get(_static_helper(node.func, env) or ""):
            where = _STATIC[_static_helper(node.func, env)]   # type: ignore[index]
            for inner in ast.walk(node.args[0]):
                if not isinstance(inner, ast.Call):
                    continue
                nested = _static_helper(inner.func, env)
                if nested in ("static_eval", "static_assert", "static_iter"):
                    return CompileError(f"{nested}() cannot be used inside {where}.",
                                        location=at(node),
                                        foreign=classes["TileStaticEvalError"])
                name = _refused_callee(inner.func, env, local_defs)
                if name is not None:
                    return CompileError(
                        f"{name}() cannot be called inside {where}.", location=at(node),
                        foreign=classes["TileStaticEvalError"],
                        hint="compile-time expressions compute with Python values; call "
                             "tile operations outside ct.static_eval")
    return None


def _resolve(node: ast.expr, env: Mapping[str, Any]) -> Any:
    """The value of a name or a dotted name read from ``env`` (``_MISSING`` if unknown)."""
    if isinstance(node, ast.Name):
        return env.get(node.id, _MISSING)
    if isinstance(node, ast.Attribute):
        owner = _resolve(node.value, env)
        if isinstance(owner, types.ModuleType):
            return getattr(owner, node.attr, _MISSING)
    return _MISSING


def _static_helper(node: ast.AST, env: Mapping[str, Any]) -> str | None:
    """The name of the cuTile compile-time helper ``node`` refers to, if it does."""
    if not isinstance(node, (ast.Name, ast.Attribute)) or \
            not isinstance(getattr(node, "ctx", None), ast.Load):
        return None
    value = _resolve(node, env)
    for name in _STATIC:
        if value is getattr(real_ct, name):
            return name
    return None


def _refused_callee(func: ast.expr, env: Mapping[str, Any], local_defs: set[str]
                    ) -> str | None:
    """The name cuTile gives a call it refuses inside a compile-time expression: a
    function defined inside the kernel, a cuTile op that is not one of the few allowed
    there, or a method of an array or tile argument."""
    from tilelab.interp.values.arrays import Array, TiledView
    from tilelab.interp.values.tile import Tile

    if isinstance(func, ast.Name) and func.id in local_defs:
        return func.id
    value = _resolve(func, env)
    if isinstance(value, types.FunctionType) and \
            (value.__module__ or "").startswith("cuda.tile") and \
            _static_helper(func, env) is None and not _cutile.static_eval_safe(value):
        return getattr(value, "__name__", None) or ast.unparse(func)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        owner = env.get(func.value.id, _MISSING)
        if isinstance(owner, (Array, TiledView, Tile)):
            return func.attr
    return None
