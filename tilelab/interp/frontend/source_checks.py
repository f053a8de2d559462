"""What cuTile refuses in a kernel's source that Python would run: repeating a tuple.

Why: the interpreter runs kernel code as Python, where ``(0,) * x.ndim`` builds the
tuple ``(0,)``; cuTile compiles no tuple repetition (``*`` or ``*=`` with a tuple
operand), whatever the other operand, and refuses the kernel with "Unsupported operand
types for *: Tuple[Tile[int32,()]] and Tile[int32,()]". The interpreter cannot see the
operation at run time: Python folds ``(0,) * 2`` into ``(0, 0)`` when it compiles the
source, and a tuple display built at run time is a plain tuple. So each function the
interpreter runs (the kernel and every helper it reaches, see
:mod:`tilelab.interp.rebuild`) is read once from its source: a ``*`` whose operand is
a tuple display, a ``.shape``/``.strides``/``.tile_shape``, a sum of those, or a local
name only ever bound to one of them, is refused when the function is first called,
before any of it runs, branches not taken included (cuTile compiles both sides of an
``if``), at the operation's place, in cuTile's words. The argument of ``ct.static_eval``
and ``ct.static_assert`` is plain Python evaluated at compile time, where a repetition is
allowed (``ct.static_eval((0,) * len(shape))``). The operand types of the message
come from the literals and from the call's arguments (``x.ndim`` is int32); an operand
whose type needs the run (a local tile) is written as its source text.

Example:
    >>> def helper(x):
    ...     return (0,) * x.ndim
    >>> found = tuple_repeats(helper)
    >>> [(r.line, r.col) for r in found]
    [(2, 11)]
"""
from __future__ import annotations

import ast
import collections
import functools
import inspect
import sys
import types
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from tilelab.errors import CompileError
from tilelab.interp.context import call_locations, function_source, location_at

__all__ = ["TupleRepeat", "tuple_repeats", "refusing"]

#: attributes that are tuples in cuTile (an array's or tile's shape and strides, a
#: partition's tile shape)
_TUPLE_ATTRS = frozenset({"shape", "strides", "tile_shape"})


@dataclass(frozen=True)
class TupleRepeat:
    """One tuple repetition in a function's source: its operands' expressions and
    where it is (line in the function's file, 0-based column)."""

    left: ast.expr
    right: ast.expr
    line: int
    col: int


#: per code object: its tuple repetitions and its local names bound only to tuples
_FOUND: "weakref.WeakKeyDictionary[types.CodeType, tuple]" = weakref.WeakKeyDictionary()


def tuple_repeats(fn: types.FunctionType) -> tuple[TupleRepeat, ...]:
    """The tuple repetitions in ``fn``'s source, in source order (cached per code object;
    none when the source cannot be read)."""
    return _scanned(fn)[0]


def _scanned(fn: types.FunctionType) -> tuple[tuple[TupleRepeat, ...], dict]:
    code = fn.__code__
    found = _FOUND.get(code)
    if found is None:
        found = _FOUND[code] = _scan(fn)
    return found


def _scan(fn: types.FunctionType) -> tuple[tuple[TupleRepeat, ...], dict]:
    found = function_source(fn)
    if found is None:
        return (), {}
    func, line0, indent = found
    tuples = _tuple_names(func)
    out = []
    for node in _outside_static_eval(func):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            left, right, at = node.left, node.right, node
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Mult):
            left, right, at = node.target, node.value, node
        else:
            continue
        if _is_tuple(left, tuples) or _is_tuple(right, tuples):
            out.append(TupleRepeat(left, right, line0 + at.lineno, at.col_offset + indent))
    return tuple(sorted(out, key=lambda r: (r.line, r.col))), tuples


#: calls whose argument is evaluated by Python at compile time, where a tuple repetition
#: is plain Python (``ct.static_eval((0,) * len(shape))``)
_STATIC_CALLS = frozenset({"static_eval", "static_assert"})


def _outside_static_eval(func: ast.AST) -> list[ast.AST]:
    """The nodes of ``func`` that cuTile compiles: all but the arguments of
    ``static_eval``/``static_assert`` calls."""
    out: list[ast.AST] = []
    todo = [func]
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.Call) and _callee_name(node.func) in _STATIC_CALLS:
            todo.append(node.func)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


def _callee_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _tuple_names(func: ast.AST) -> dict[str, ast.expr]:
    """Local names every binding of which is a tuple (name -> its first value)."""
    values: dict[str, list[ast.expr | None]] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    values.setdefault(target.id, []).append(node.value)
                else:   # unpacking, subscripts: the names bound there are not known
                    for n in ast.walk(target):
                        if isinstance(n, ast.Name):
                            values.setdefault(n.id, []).append(None)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and \
                isinstance(node.target, ast.Name):
            value = node.value if not isinstance(node, ast.AugAssign) else None
            if isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.Add, ast.Mult)):
                continue   # (t += (1,), t *= 2 keep a tuple a tuple)
            values.setdefault(node.target.id, []).append(value)
        elif isinstance(node, (ast.For, ast.comprehension, ast.With, ast.withitem)):
            target = getattr(node, "target", None) or getattr(node, "optional_vars", None)
            for n in ast.walk(target) if target is not None else ():
                if isinstance(n, ast.Name):
                    values.setdefault(n.id, []).append(None)
    for arg in ast.walk(func.args) if hasattr(func, "args") else ():
        if isinstance(arg, ast.arg):
            values.setdefault(arg.arg, []).append(None)
    tuples: dict[str, ast.expr] = {}
    changed = True
    while changed:   # (a name bound to another tuple name)
        changed = False
        for name, vals in values.items():
            if name not in tuples and vals and all(
                    v is not None and _is_tuple(v, tuples) for v in vals):
                tuples[name] = vals[0]   # type: ignore[assignment]
                changed = True
    return tuples


def _is_tuple(node: ast.expr, tuples: dict[str, ast.expr]) -> bool:
    if isinstance(node, ast.Tuple):
        return True
    if isinstance(node, ast.Attribute):
        return node.attr in _TUPLE_ATTRS
    if isinstance(node, ast.Name):
        return node.id in tuples
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _is_tuple(node.left, tuples) or _is_tuple(node.right, tuples)
    return False


# ---- the message -------------------------------------------------------------------------

def _type_of(value: Any) -> str | None:
    """cuTile's name of a value's type (``Tile[int32,()]``), None when not a number,
    tile or tuple of them."""
    from tilelab.interp.values.dtypes import loose_dtype
    from tilelab.interp.values.tile import Tile

    if isinstance(value, Tile):
        return f"Tile[{value.dtype},({','.join(map(str, value.shape))})]"
    if isinstance(value, (bool, int, float)):
        try:
            return f"Tile[{loose_dtype(value)},()]"
        except CompileError:
            return None
    if isinstance(value, tuple):
        items = [_type_of(v) for v in value]
        return None if None in items else "Tuple[" + ",".join(items) + "]"   # type: ignore
    return None


def _value(node: ast.expr, env: Mapping[str, Any], tuples: dict[str, ast.expr],
           depth: int = 0) -> Any:
    """The value of an operand made of literals, the call's arguments and the function's
    globals, read without calling anything; ``_UNKNOWN`` otherwise."""
    if depth > 8:
        return _UNKNOWN
    if isinstance(node, ast.Constant) and isinstance(node.value, (bool, int, float)):
        return node.value
    if isinstance(node, ast.Tuple):
        items = tuple(_value(e, env, tuples, depth + 1) for e in node.elts)
        return _UNKNOWN if any(i is _UNKNOWN for i in items) else items
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _value(node.operand, env, tuples, depth + 1)
        return -v if isinstance(v, (int, float)) and not isinstance(v, bool) else _UNKNOWN
    if isinstance(node, ast.Name):
        if node.id in tuples:
            return _value(tuples[node.id], env, tuples, depth + 1)
        return env.get(node.id, _UNKNOWN)
    if isinstance(node, ast.Attribute) and (node.attr in _TUPLE_ATTRS or node.attr == "ndim"):
        owner = _value(node.value, env, tuples, depth + 1)
        if owner is not _UNKNOWN:   # (an argument: the kernel body reads it too)
            try:
                return getattr(owner, node.attr)
            except Exception:   # noqa: BLE001 - the body will say what is wrong with it
                return _UNKNOWN
        if node.attr == "ndim":
            return 0   # (an int whatever it holds: its type is all the message needs)
    return _UNKNOWN


_UNKNOWN = object()


def _describe(node: ast.expr, env: Mapping[str, Any], tuples: dict[str, ast.expr]) -> str:
    value = _value(node, env, tuples)
    found = None if value is _UNKNOWN else _type_of(value)
    return found if found is not None else ast.unparse(node)


def _error(fn: types.FunctionType, repeat: TupleRepeat, env: Mapping[str, Any],
           chain: list) -> CompileError:
    tuples = _scanned(fn)[1]
    left = _describe(repeat.left, env, tuples)
    right = _describe(repeat.right, env, tuples)
    message = f"Unsupported operand types for *: {left} and {right}"
    if chain:   # a helper: the calls that led there, as the compiler says them
        message += " (called from " + ", ".join(map(str, chain)) + ")"
    return CompileError(message,
                        location=location_at(fn.__code__.co_filename, repeat.line,
                                             repeat.col),
                        hint="cuTile compiles no tuple repetition: write the tuple out, "
                             "e.g. (0, 0) for the index of a 2-D array")


def _repeats_a_tuple(repeat: TupleRepeat, env: Mapping[str, Any],
                     tuples: dict[str, ast.expr]) -> bool:
    """Whether ``repeat`` is one as the call's arguments show: an operand whose value
    they give and which is no tuple (``cfg.shape`` of a constant that holds an int) is
    not repeated; one they do not give counts as the source says."""
    for side in (repeat.left, repeat.right):
        if not _is_tuple(side, tuples):
            continue
        value = _value(side, env, tuples)
        if value is _UNKNOWN or isinstance(value, tuple):
            return True
    return False


def refusing(fn: types.FunctionType, rebuilt: Callable[..., Any]
             ) -> Callable[..., Any] | None:
    """``rebuilt`` (``fn`` rebuilt for the interpreter) made to raise cuTile's refusal of
    ``fn``'s first tuple repetition when called (before any of it runs), or None when
    ``fn``'s source has none."""
    found, tuples = _scanned(fn)
    if not found:
        return None
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        signature = None

    @functools.wraps(rebuilt)
    def checked(*args: Any, **kwargs: Any) -> Any:
        bound: dict[str, Any] = {}
        if signature is not None:
            try:
                bound = dict(signature.bind(*args, **kwargs).arguments)
            except TypeError:   # (the call itself is wrong: Python says so below)
                pass
        env = collections.ChainMap(bound, fn.__globals__)
        for repeat in found:
            if _repeats_a_tuple(repeat, env, tuples):
                raise _error(fn, repeat, env, call_locations(sys._getframe(1)))
        return rebuilt(*args, **kwargs)
    return checked
