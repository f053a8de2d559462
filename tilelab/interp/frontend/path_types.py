"""A variable whose type depends on the branch taken, read from a function's source.

Why: cuTile types a kernel once for all its paths; at the end of an ``if`` on a run-time
value, a variable assigned on both sides must have one type, and so must a helper's
return value ("Type of `a` depends on path taken: Tile[float32,()] (line 7) vs.
Tile[int32,()] (line 5)"). Python runs one side and never sees the other, so the
interpreter reads this rule from the source when a function is first called, branches
not taken included. The types it compares are those the source shows without running
anything: literals (``3`` is ``Tile[int32,()]``, ``2.0`` ``Tile[float32,()]``), enum
members (each is a type of its own in cuTile: ``ct.MemoryOrder.WEAK``), and tiled views
of one array with constant tile shapes (``x.tiled_view(TILE_A)``); a value whose type
needs the run is not compared (the check refuses only what cuTile surely refuses). An
``if`` is run-time when its condition calls a cuTile op or reads a run-time argument
(or a local computed from one); an ``if`` on constants is folded by cuTile and by the
interpreter alike. The same holds for an ``a if cond else b`` expression whose value is
used, on a run-time ``cond``: its two sides must have one type (``condition0 if
condition0 else xi - 1`` mixes ``Tile[bool_,()]`` and ``Tile[float32,(128)]``), with the
types :class:`~tilelab.interp.frontend.static_types.Scope` reads (arguments, literals, cuTile ops
with constant shapes and the element-wise ops of those).

Example:
    >>> import cuda.tile as ct
    >>> def helper():
    ...     if ct.bid(0) == 0:
    ...         return 3
    ...     else:
    ...         return 5.0
    >>> path_refusal(helper, {}).message
    'Type of return value depends on path taken: Tile[float32,()] (line 5) vs. Tile[int32,()] (line 3)'
"""
from __future__ import annotations

import ast
import enum
import types
from typing import Any, Mapping

from tilelab.errors import CompileError
from tilelab.interp import _cutile
from tilelab.interp.context import function_source, location_at
from tilelab.interp.frontend.static_types import Scope, names_seen, own_nodes

__all__ = ["path_refusal"]

_MISSING = object()


def path_refusal(fn: types.FunctionType, args: Mapping[str, Any]) -> CompileError | None:
    """cuTile's refusal of a variable or return value of ``fn`` whose type depends on
    the path taken, for a call with ``args`` (parameter name -> value), or None."""
    found = function_source(fn)
    if found is None:
        return None
    func, line0, indent = found
    env = names_seen(fn, args)
    body = list(own_nodes(func))
    runtime = _runtime_locals(body, env)
    for node in body:
        if not isinstance(node, ast.If) or not _is_runtime(node.test, env, runtime):
            continue
        then, other = _assigned(node.body), _assigned(node.orelse)
        for name in then.keys() & other.keys():
            if not _used_after(body, name, node):
                continue
            error = _mismatch(f"`{name}`", then[name], other[name], env, line0)
            if error is not None:
                return _located(error, other[name], fn, line0, indent)
        then_ret, other_ret = _returns(node.body), _returns(node.orelse)
        if then_ret and other_ret:
            error = _mismatch("return value", then_ret[0], other_ret[0], env, line0)
            if error is not None:
                return _located(error, other_ret[0], fn, line0, indent)
    return _if_expression_refusal(fn, args, line0, indent) or \
        _fall_through_refusal(fn, args, line0, indent)


def _if_expression_refusal(fn: types.FunctionType, args: Mapping[str, Any], line0: int,
                           indent: int) -> CompileError | None:
    """``a if cond else b`` on a run-time ``cond`` whose value is used, with sides of
    surely different types (cuTile: "Type of `$57` depends on path taken: ...", naming
    its temporary; here the expression's source)."""
    scope = Scope.of(fn, args)
    if scope is None:
        return None
    body = scope.nodes
    parents = {id(child): node for node in body for child in ast.iter_child_nodes(node)}
    for node in body:
        if not isinstance(node, ast.IfExp) or not scope.surely_runtime(node.test) or \
                not _value_used(node, parents, body):
            continue
        then, other = scope.type_of(node.body), scope.type_of(node.orelse)
        if then is None or other is None or not then.surely_differs(other):
            continue
        message = (f"Type of `{ast.unparse(node)}` depends on path taken: {other} (line "
                   f"{line0 + node.orelse.lineno}) vs. {then} (line "
                   f"{line0 + node.body.lineno})")
        return _located(message, node.orelse, fn, line0, indent)
    return None


def _fall_through_refusal(fn: types.FunctionType, args: Mapping[str, Any], line0: int,
                          indent: int) -> CompileError | None:
    """A helper that returns a value on a run-time path (inside a run-time loop or
    ``if``) and can also reach the end of its body, where it returns None (cuTile:
    "Type of return value depends on path taken: None (line 3) vs. Tile[int32,()] (line
    8)", whether or not the caller uses the result)."""
    scope = Scope.of(fn, args)
    if scope is None or not _falls_through(scope.func.body):   # type: ignore[attr-defined]
        return None
    for node in scope.nodes:
        if not isinstance(node, ast.Return) or node.value is None or \
                not scope.surely_not_none(node.value) or \
                not _on_run_time_path(node, scope):
            continue
        found = scope.type_of(node.value)
        what = str(found) if found is not None and found.complete else \
            f"the type of `{ast.unparse(node.value)}`"
        message = (f"Type of return value depends on path taken: None (line "
                   f"{line0 + scope.func.lineno}) vs. {what} (line {line0 + node.lineno})")
        return _located(message, node, fn, line0, indent)
    return None


def _falls_through(stmts: list[ast.stmt]) -> bool:
    """Whether running ``stmts`` may reach their end (conservatively: False where a loop
    on a constant true condition or a ``try`` makes it unclear)."""
    if not stmts:
        return True
    last = stmts[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return False
    if isinstance(last, ast.If):
        return _falls_through(last.body) or _falls_through(last.orelse)
    if isinstance(last, ast.While):
        return not (isinstance(last.test, ast.Constant) and last.test.value)
    if isinstance(last, (ast.With, ast.AsyncWith)):
        return _falls_through(last.body)
    if isinstance(last, (ast.Try, ast.Match)):
        return False
    return True


def _on_run_time_path(node: ast.AST, scope: Scope) -> bool:
    """Whether ``node`` sits inside a run-time loop (not ``ct.static_iter``) or a branch
    of an ``if`` on a run-time value."""
    for parent in scope._ancestors(node):
        if isinstance(parent, ast.While):
            return True
        if isinstance(parent, ast.For) and not (
                isinstance(parent.iter, ast.Call) and
                isinstance(parent.iter.func, (ast.Attribute, ast.Name)) and
                getattr(parent.iter.func, "attr", getattr(parent.iter.func, "id", None))
                == "static_iter"):
            return True
        if isinstance(parent, ast.If) and scope.surely_runtime(parent.test):
            return True
    return False


def _value_used(node: ast.IfExp, parents: Mapping[int, ast.AST], body: list[ast.AST]
                ) -> bool:
    """Whether cuTile uses an if expression's value (it raises a path-dependent type
    only where the value is used): not as a statement of its own, nor as the value of
    a name never read after."""
    parent = parents.get(id(node))
    if parent is None or isinstance(parent, ast.Expr):
        return False
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and \
            isinstance(parent.targets[0], ast.Name):
        name, end = parent.targets[0].id, parent.end_lineno or parent.lineno
        return any(isinstance(n, ast.Name) and n.id == name and
                   isinstance(n.ctx, ast.Load) and n.lineno > end for n in body) or \
            any(isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and
                n.target.id == name for n in body)
    return not isinstance(parent, ast.Return)




def _resolve(node: ast.expr, env: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Name):
        return env.get(node.id, _MISSING)
    if isinstance(node, ast.Attribute):
        owner = _resolve(node.value, env)
        if owner is not _MISSING and (isinstance(owner, (types.ModuleType, type))):
            return getattr(owner, node.attr, _MISSING)
    return _MISSING


def _is_runtime(expr: ast.expr, env: Mapping[str, Any], runtime: set[str]) -> bool:
    """Whether ``expr`` has a run-time value: it calls a cuTile op (other than the few
    cuTile evaluates at compile time) or reads a run-time argument or local."""
    from tilelab.interp.values.tile import Tile

    for node in ast.walk(expr):
        if isinstance(node, ast.Call):
            callee = _resolve(node.func, env)
            if isinstance(callee, types.FunctionType) and \
                    (callee.__module__ or "").startswith("cuda.tile") and \
                    not _cutile.static_eval_safe(callee):
                return True
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id in runtime:
                return True
            value = env.get(node.id, _MISSING)
            if isinstance(value, Tile) and not value._c:
                return True
    return False


def _runtime_locals(body: list[ast.AST], env: Mapping[str, Any]) -> set[str]:
    """Local names bound to a run-time value somewhere (a loop variable, an assignment
    of a run-time expression)."""
    runtime: set[str] = set()
    for node in body:
        if isinstance(node, ast.For):
            runtime |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and \
                node.value is not None and _is_runtime(node.value, env, runtime):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            runtime |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return runtime


def _assigned(stmts: list[ast.stmt]) -> dict[str, ast.Assign]:
    """The last plain assignment of each name among a branch's own statements."""
    out: dict[str, ast.Assign] = {}
    for stmt in stmts:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
                isinstance(stmt.targets[0], ast.Name):
            out[stmt.targets[0].id] = stmt
    return out


def _returns(stmts: list[ast.stmt]) -> list[ast.Return]:
    return [s for s in stmts if isinstance(s, ast.Return) and s.value is not None]


def _used_after(body: list[ast.AST], name: str, node: ast.If) -> bool:
    end = node.end_lineno or node.lineno
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
               and n.lineno > end for n in body)


def _type_of(expr: ast.expr, env: Mapping[str, Any]) -> str | None:
    """cuTile's type of ``expr`` when the source shows it without running anything."""
    if isinstance(expr, ast.Constant):
        value = expr.value
        if isinstance(value, bool):
            return "Tile[bool_,()]"
        if isinstance(value, int):
            return "Tile[int32,()]"
        if isinstance(value, float):
            return "Tile[float32,()]"
        return None
    if isinstance(expr, ast.Attribute):
        value = _resolve(expr, env)
        if isinstance(value, enum.Enum):
            return f"<enum constant {type(value).__name__}.{value.name}>"
        return None
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and \
            expr.func.attr == "tiled_view" and isinstance(expr.func.value, ast.Name):
        shapes = []
        for arg in expr.args:
            value = _constant(arg, env)
            if value is _MISSING:
                return None
            shapes.append(value)
        if expr.keywords:
            return None
        return f"TiledView[{expr.func.value.id}, tile_shape={shapes[0]!r}" + \
            "".join(f", {s!r}" for s in shapes[1:]) + "]"
    return None


def _constant(arg: ast.expr, env: Mapping[str, Any]) -> Any:
    if isinstance(arg, ast.Constant):
        return arg.value
    if isinstance(arg, ast.Tuple):
        items = [_constant(e, env) for e in arg.elts]
        return _MISSING if _MISSING in items else tuple(items)
    if isinstance(arg, ast.Name):
        value = env.get(arg.id, _MISSING)
        if isinstance(value, (int, tuple)) and not isinstance(value, bool):
            return value
    return _MISSING


def _mismatch(what: str, first: ast.AST, second: ast.AST, env: Mapping[str, Any],
              line0: int) -> str | None:
    t1 = _type_of(first.value, env)   # type: ignore[attr-defined]
    t2 = _type_of(second.value, env)   # type: ignore[attr-defined]
    if t1 is None or t2 is None or t1 == t2:
        return None
    return (f"Type of {what} depends on path taken: {t2} (line {line0 + second.lineno})"
            f" vs. {t1} (line {line0 + first.lineno})")


def _located(message: str, node: ast.AST, fn: types.FunctionType, line0: int,
             indent: int) -> CompileError:
    return CompileError(message,
                        location=location_at(fn.__code__.co_filename, line0 + node.lineno,
                                             node.col_offset + indent),
                        foreign=_cutile.exception_classes()["TileTypeError"],
                        hint="give the variable one type on every path (an explicit "
                             "astype, or a value of the same kind on both sides)")
