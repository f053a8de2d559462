"""cuTile's rules for tuples, read from a function's source before it first runs.

Why: a kernel's tuples are Python tuples in the interpreter, and Python indexes them with
a run-time value (a 0-d tile is an ``__index__``), orders them with ``<``, compares tiles
and arrays inside them (``(t,) == (t,)`` is true by identity before any element is
compared) and tests ``in`` with a non-scalar needle; cuTile refuses all of these when it
compiles the kernel, whichever path the run takes. So each function the interpreter runs
is read once from its source, with the types :class:`~tilelab.interp.frontend.static_types.Scope`
can tell, and the first of these is refused in cuTile's words, at its place:

* an index of a tuple that is no integer scalar ("Tuple indices must be integers or
  slices, not Tile[float32,()]") or not a constant ("Tuple indices must be constant");
* item assignment ("Tuples are immutable: item assignment is not supported.");
* ``*`` of a tile in a call ("Expected a tuple after *, got Tile[int32,(4)]");
* ``<``, ``<=``, ``>``, ``>=`` of two tuples ("Operator '<' is not supported for
  tuples"); ``==``/``!=`` of two tuples of one length that are not both constants, with
  a non-scalar tile or an array among their items ("Tuple comparison is not supported
  for non-scalar elements");
* ``in`` whose needle or an item before the first constant match is a non-scalar tile
  ("'in' requires scalar operands, but got shape (4,)");
* a tuple comprehension whose ``if`` is a run-time value ("Tuple comprehension
  if-conditions must be statically known; ...").

What the source does not show (a tuple a helper returns, a tile whose shape needs the
run) is not refused here; the argument of ``ct.static_eval``/``static_assert`` is plain
Python and is not read.

Example:
    >>> import cuda.tile as ct
    >>> def kernel():
    ...     t = (1, 2, 3)
    ...     return t[ct.bid(0)]
    >>> tuple_refusal(kernel, {}).message
    'Tuple indices must be constant'
"""
from __future__ import annotations

import ast
import types
from typing import Any, Iterator, Mapping

from tilelab.errors import CompileError
from tilelab.interp import _cutile
from tilelab.interp.context import function_source, location_at
from tilelab.interp.frontend.static_types import MISSING as _MISSING, Scope, StaticType

__all__ = ["tuple_refusal"]

_ORDERING = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}

#: calls whose argument is plain Python evaluated at compile time
_STATIC_CALLS = frozenset({"static_eval", "static_assert"})

_HINT = ("cuTile types tuples item by item at compile time: index them with constants "
         "(a loop over ct.static_iter gives constants), compare scalars, and keep "
         "tiles and arrays out of tuple comparisons")


def tuple_refusal(fn: types.FunctionType, args: Mapping[str, Any]) -> CompileError | None:
    """cuTile's refusal of the first tuple operation in ``fn``'s source it does not
    compile, for a call with ``args`` (parameter name -> value), or None."""
    scope = Scope.of(fn, args)
    if scope is None:
        return None
    found = function_source(fn)
    assert found is not None
    _func, line0, indent = found
    for node in _compiled_nodes(scope):
        message = _refusal(node, scope)
        if message is not None:
            where = location_at(fn.__code__.co_filename, line0 + node.lineno,
                                node.col_offset + indent)
            return CompileError(message, location=where, hint=_HINT,
                                foreign=_cutile.exception_classes()["TileTypeError"])
    return None


def _compiled_nodes(scope: Scope) -> list[ast.AST]:
    """The function's own nodes cuTile compiles (not the arguments of static_eval or
    static_assert), in source order."""
    skipped: set[int] = set()
    for node in scope.nodes:
        if isinstance(node, ast.Call) and _callee(node.func) in _STATIC_CALLS:
            skipped |= {id(n) for a in [*node.args, *(k.value for k in node.keywords)]
                        for n in ast.walk(a)}
    nodes = [n for n in scope.nodes if id(n) not in skipped and hasattr(n, "lineno")]
    return sorted(nodes, key=lambda n: (n.lineno, n.col_offset))


def _refusal(node: ast.AST, scope: Scope) -> str | None:
    if isinstance(node, ast.Subscript):
        return _subscript(node, scope)
    if isinstance(node, ast.Call):
        return _starred(node, scope) or _comprehension(node, scope)
    if isinstance(node, ast.Compare):
        for left, op, right in _pairs(node):
            message = _compare(left, op, right, scope)
            if message is not None:
                return message
    return None


def _subscript(node: ast.Subscript, scope: Scope) -> str | None:
    if not scope.is_tuple(node.value):
        return None
    if not isinstance(node.ctx, ast.Load):
        return "Tuples are immutable: item assignment is not supported."
    if isinstance(node.slice, ast.Slice):
        return None
    key = scope.type_of(node.slice)
    if key is not None and (key.kind != "tile" or key.shape not in (None, ()) or
                            (key.dtype is not None and not _integral(key.dtype))) and \
            key.complete:
        return f"Tuple indices must be integers or slices, not {key}"
    if scope.surely_runtime(node.slice):
        return "Tuple indices must be constant"
    return None


def _starred(call: ast.Call, scope: Scope) -> str | None:
    for arg in call.args:
        if isinstance(arg, ast.Starred):
            found = scope.type_of(arg.value)
            if found is not None and found.kind == "tile" and found.complete:
                return f"Expected a tuple after *, got {found}"
    return None


def _comprehension(call: ast.Call, scope: Scope) -> str | None:
    """``tuple(... for ... if <run-time value>)``."""
    if not isinstance(call.func, ast.Name) or call.func.id != "tuple" or \
            scope.resolve(call.func) not in (tuple, _MISSING) or \
            len(call.args) != 1 or not isinstance(call.args[0], ast.GeneratorExp):
        return None
    for generator in call.args[0].generators:
        for condition in generator.ifs:
            if scope.surely_runtime(condition):
                return ("Tuple comprehension if-conditions must be statically known; if "
                        "the condition can be evaluated at compile time, wrap it with "
                        "ct.static_eval()")
    return None


def _pairs(node: ast.Compare) -> Iterator[tuple[ast.expr, ast.cmpop, ast.expr]]:
    left = node.left
    for op, right in zip(node.ops, node.comparators):
        yield left, op, right
        left = right


def _compare(left: ast.expr, op: ast.cmpop, right: ast.expr, scope: Scope) -> str | None:
    if isinstance(op, (ast.In, ast.NotIn)):
        return _contains(left, right, scope)
    if not (scope.is_tuple(left) and scope.is_tuple(right)):
        return None
    symbol = _ORDERING.get(type(op))
    if symbol is not None:
        return f"Operator '{symbol}' is not supported for tuples"
    if not isinstance(op, (ast.Eq, ast.NotEq)):
        return None
    x, y = scope.type_of(left), scope.type_of(right)
    assert x is not None and y is not None and x.items is not None and y.items is not None
    if _all_literals(left, scope) and _all_literals(right, scope):
        return None   # (compared by cuTile at compile time)
    if len(x.items) != len(y.items):
        return None   # (a constant: the lengths differ)
    for item in (*x.items, *y.items):
        if item is None:
            return None   # (cuTile would have refused an earlier item first, or not)
        if item.kind == "tile" and item.shape not in (None, ()):
            return "Tuple comparison is not supported for non-scalar elements"
        if item.kind == "array":
            return f"Tuple comparison is not supported for elements of type {item}"
    return None


def _contains(needle: ast.expr, haystack: ast.expr, scope: Scope) -> str | None:
    """``needle in (a, b, ...)``: each item is compared with ``==`` until a constant
    match; a non-scalar comparison on the way is refused."""
    if not isinstance(haystack, ast.Tuple) or \
            any(isinstance(e, ast.Starred) for e in haystack.elts):
        return None
    first = scope.type_of(needle)
    for item in haystack.elts:
        second = scope.type_of(item)
        if first is None or second is None or first.kind != "tile" or \
                second.kind != "tile" or first.shape is None or second.shape is None:
            return None
        shape = _broadcast(first.shape, second.shape)
        if shape is None:
            return None
        if shape != ():
            return f"'in' requires scalar operands, but got shape {shape}"
        if isinstance(needle, ast.Constant) and isinstance(item, ast.Constant) and \
                needle.value == item.value:
            return None
    return None


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    import numpy as np
    try:
        return tuple(int(n) for n in np.broadcast_shapes(a, b))
    except ValueError:
        return None


def _all_literals(expr: ast.expr, scope: Scope) -> bool:
    """Whether a tuple is a compile-time constant in cuTile (made of literals and
    constants only)."""
    found = scope.type_of(expr)
    return found is not None and _constant_type(found)


def _constant_type(found: StaticType) -> bool:
    if found.kind == "tuple":
        return found.items is not None and all(i is not None and _constant_type(i)
                                               for i in found.items)
    return found.kind in ("tile", "enum") and found.constant


def _integral(dtype: str) -> bool:
    return dtype.startswith(("int", "uint"))


def _callee(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None
