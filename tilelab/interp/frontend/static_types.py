"""What a function's source shows of its values' cuTile types, without running it.

Why: several of cuTile's refusals depend on types (a run-time tuple index, a tuple
comparison of tiles, the two sides of ``a if cond else b``), and the interpreter must
make them on paths no block takes too, before any of the function runs
(:mod:`tilelab.interp.frontend.tuple_rules`, :mod:`tilelab.interp.frontend.path_types`). A
:class:`Scope` reads one function's source with the values of the call's arguments and
the function's closure and globals, and answers three questions about an expression:
its type as far as the source shows it (:meth:`Scope.type_of`), whether its value is
surely a run-time one (:meth:`Scope.surely_runtime`), and which items it has when it is
surely a tuple (:meth:`Scope.tuple_items`). Every answer is conservative: "unknown"
(None, False) whenever the source alone does not settle it, so that a refusal built on
them is one cuTile surely makes too.

Example:
    >>> import cuda.tile as ct
    >>> def kernel(x):
    ...     t = ct.ones((4,), dtype=ct.int32)
    ...     u = (1, t)
    ...     return u
    >>> scope = Scope.of(kernel, {})
    >>> str(scope.type_of(scope.func.body[-1].value))
    'Tuple[Tile[int32,()],Tile[int32,(4)]]'
"""
from __future__ import annotations

import ast
import collections
import enum
import inspect
import types
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from tilelab.interp import _cutile
from tilelab.interp.context import function_source

__all__ = ["StaticType", "Scope", "MISSING", "names_seen", "own_nodes"]

#: what :meth:`Scope.resolve` and :meth:`Scope.constant` return for "not known"
MISSING = _MISSING = object()

#: attributes that are tuples of an array or tile
_TUPLE_ATTRS = frozenset({"shape", "strides"})


@dataclass(frozen=True)
class StaticType:
    """A type as far as the source shows it. ``kind``: "tile", "tuple", "array" or
    "enum"; ``dtype`` (cuTile's name) and ``shape`` may be None (unknown); ``items`` are
    a tuple's (None: unknown item); ``text`` is cuTile's spelling of an array's or an
    enum's type; ``constant``: a literal (cuTile's loosely typed constant)."""

    kind: str
    dtype: str | None = None
    shape: tuple[int, ...] | None = None
    items: tuple["StaticType | None", ...] | None = None
    text: str | None = None
    constant: bool = False

    @property
    def complete(self) -> bool:
        """Whether every part of the type is known."""
        if self.kind == "tile":
            return self.dtype is not None and self.shape is not None
        if self.kind == "tuple":
            return self.items is not None and all(i is not None and i.complete
                                                  for i in self.items)
        return self.text is not None

    def surely_differs(self, other: "StaticType") -> bool:
        """Whether the two are surely different cuTile types."""
        if self.kind != other.kind:
            return True
        if self.kind == "tile":
            if self.shape is not None and other.shape is not None and \
                    self.shape != other.shape:
                return True
            return self.dtype is not None and other.dtype is not None and \
                self.dtype != other.dtype
        if self.kind == "tuple":
            if self.items is None or other.items is None:
                return False
            if len(self.items) != len(other.items):
                return True
            return any(a is not None and b is not None and a.surely_differs(b)
                       for a, b in zip(self.items, other.items))
        return self.text is not None and other.text is not None and self.text != other.text

    def __str__(self) -> str:
        if self.kind == "tile":
            shape = "?" if self.shape is None else ",".join(map(str, self.shape))
            return f"Tile[{self.dtype or '?'},({shape})]"
        if self.kind == "tuple":
            if self.items is None:
                return "Tuple[...]"
            return "Tuple[" + ",".join("?" if i is None else str(i) for i in self.items) + "]"
        return self.text or self.kind


def tile_type(dtype: Any, shape: tuple[int, ...] | None, constant: bool = False
              ) -> StaticType:
    return StaticType("tile", None if dtype is None else str(dtype),
                      None if shape is None else tuple(int(n) for n in shape),
                      constant=constant)


def value_type(value: Any) -> StaticType | None:
    """The type of a value the interpreter holds (an argument, a global)."""
    from tilelab.interp.values.arrays import Array
    from tilelab.interp.values.dtypes import loose_dtype
    from tilelab.interp.values.tile import Tile

    if isinstance(value, Tile):
        return tile_type(value.dtype, value.shape)
    if isinstance(value, (bool, int, float)):
        try:
            return tile_type(loose_dtype(value), (), constant=True)
        except Exception:   # noqa: BLE001 - an int cuTile cannot type: unknown
            return None
    if isinstance(value, tuple):
        return StaticType("tuple", items=tuple(value_type(v) for v in value))
    if isinstance(value, Array):
        return StaticType("array", dtype=str(value.dtype), text=_array_text(value))
    if isinstance(value, enum.Enum):
        return StaticType("enum", text=f"<enum constant {type(value).__name__}."
                                       f"{value.name}>", constant=True)
    return None


def _array_text(array: Any) -> str:
    """cuTile's spelling of an array argument's type: ``Array[int32,(?):(?)]``."""
    from tilelab.interp.values.arrays import _DATA   # (past UnsupportedArray's guard: only
    static = getattr(array, "_static", ())     # the shape is read, as cuTile reads it)
    dims = ",".join(str(n) if i < len(static) and static[i] else "?"
                    for i, n in enumerate(_DATA.__get__(array).shape))
    return f"Array[{array.dtype},({dims}):({','.join('?' * array.ndim)})]"


class Scope:
    """One function's source with the values of one call (see the module docstring)."""

    def __init__(self, func: ast.AST, env: Mapping[str, Any], params: frozenset[str]):
        self.func = func
        self.env = env
        self.nodes = own_nodes(func)
        self._bindings = _bindings(self.nodes, params)
        self._parents = {id(child): node for node in [func, *self.nodes]
                         for child in ast.iter_child_nodes(node)}
        self._busy: set[int] = set()

    @classmethod
    def of(cls, fn: types.FunctionType, args: Mapping[str, Any]) -> "Scope | None":
        """The scope of ``fn`` called with ``args`` (parameter name -> value), or None
        when its source cannot be read."""
        found = function_source(fn)
        if found is None:
            return None
        func = found[0]
        env = names_seen(fn, args)
        params = frozenset(a.arg for a in ast.walk(func.args) if isinstance(a, ast.arg))
        return cls(func, env, params)

    # ---- names ---------------------------------------------------------------------------
    def _binding(self, name: str) -> list | None:
        """A local name's bindings (see :func:`_bindings`), or None when it is not a
        local (an argument the body never rebinds, a closure variable, a global)."""
        return self._bindings.get(name)

    def _ancestors(self, node: ast.AST) -> list[ast.AST]:
        out = []
        parent = self._parents.get(id(node))
        while parent is not None:
            out.append(parent)
            parent = self._parents.get(id(parent))
        return out

    def reaching(self, use: ast.Name) -> Any:
        """The binding of a local name that surely reaches ``use``: an expression,
        ``_LOOP``, ``_PARAM`` (the call's value), or None when the source does not settle
        it (no binding before, one on a branch, a loop that rebinds it, an unpacking)."""
        bound = self._binding(use.id)
        if bound is None:
            return _PARAM
        at = (use.lineno, use.col_offset)
        before = [(v, n) for v, n in bound if n is not None and _end(n) <= at]
        ancestors = self._ancestors(use)
        loops = [a for a in ancestors if isinstance(a, (ast.For, ast.While))]
        for loop in loops:   # (a loop that rebinds the name carries it around)
            inside = {id(n) for n in ast.walk(loop)}
            if any(n is not None and id(n) in inside and n is not loop
                   for _v, n in bound):
                if not any(id(n) in inside for _v, n in before if n is not loop):
                    return None
        if not before:
            return _PARAM if any(v is _PARAM for v, _n in bound) else None
        value, node = max(before, key=lambda b: _end(b[1]))
        if isinstance(node, ast.For) and value is _LOOP:
            return _LOOP if node in ancestors else None
        chain = self._ancestors(node)
        if any(isinstance(a, ast.stmt) and a not in ancestors for a in chain):
            return None   # (bound on a branch or in a loop the use is not in)
        return value

    def resolve(self, node: ast.expr) -> Any:
        """The value of a global, closure or argument name (or an attribute of a module
        or class reached from one), or ``_MISSING``."""
        if isinstance(node, ast.Name):
            if node.id in self._bindings:
                return _MISSING
            return self.env.get(node.id, _MISSING)
        if isinstance(node, ast.Attribute):
            owner = self.resolve(node.value)
            if owner is not _MISSING and isinstance(owner, (types.ModuleType, type)):
                return getattr(owner, node.attr, _MISSING)
        return _MISSING

    def cutile_op(self, call: ast.Call) -> Any:
        """The cuTile stub a call calls, or None."""
        callee = self.resolve(call.func)
        if isinstance(callee, types.FunctionType) and \
                (callee.__module__ or "").startswith("cuda.tile"):
            return callee
        return None

    # ---- run-time values -----------------------------------------------------------------
    def surely_runtime(self, expr: ast.expr) -> bool:
        """Whether ``expr`` surely has a run-time value in cuTile: it calls a cuTile op
        that is not evaluated at compile time, reads a run-time argument, a local every
        binding of which is such a value, or the variable of a ``for`` loop that is not
        ``ct.static_iter``'s."""
        if isinstance(expr, ast.Call):
            op = self.cutile_op(expr)
            if op is not None and not _cutile.static_eval_safe(op) and \
                    op.__name__ not in ("static_eval", "static_iter"):
                return True
            return False
        if isinstance(expr, ast.Name):
            return self._name_runtime(expr)
        if isinstance(expr, ast.BinOp):
            return self.surely_runtime(expr.left) or self.surely_runtime(expr.right)
        if isinstance(expr, ast.UnaryOp):
            return self.surely_runtime(expr.operand)
        if isinstance(expr, ast.Compare):
            return any(self.surely_runtime(e) for e in [expr.left, *expr.comparators])
        return False

    def _name_runtime(self, use: ast.Name) -> bool:
        from tilelab.interp.values.tile import Tile

        value = self.reaching(use)
        if value is _PARAM:
            found = self.env.get(use.id, _MISSING)
            return isinstance(found, Tile) and not found._c
        if value is _LOOP:
            return True
        if value is None:   # (every binding run-time: so is this one)
            bound = self._binding(use.id) or []
            return bool(bound) and all(v is _LOOP for v, _n in bound)
        return self._guarded(value, self.surely_runtime, False)

    def _guarded(self, expr: ast.expr, question: Any, default: Any) -> Any:
        """``question(expr)`` for a binding's value, ``default`` when already asking it
        (a binding that refers to itself)."""
        if id(expr) in self._busy:
            return default
        self._busy.add(id(expr))
        try:
            return question(expr)
        finally:
            self._busy.discard(id(expr))

    # ---- types ---------------------------------------------------------------------------
    def type_of(self, expr: ast.expr) -> StaticType | None:
        """``expr``'s cuTile type as far as the source shows it, or None."""
        from tilelab.interp.values.dtypes import loose_dtype

        if isinstance(expr, ast.Constant):
            value = expr.value
            if isinstance(value, (bool, int, float)):
                try:
                    return tile_type(loose_dtype(value), (), constant=True)
                except Exception:   # noqa: BLE001
                    return None
            return None
        if isinstance(expr, ast.Tuple):
            if any(isinstance(e, ast.Starred) for e in expr.elts):
                return None
            return StaticType("tuple", items=tuple(self.type_of(e) for e in expr.elts))
        if isinstance(expr, ast.Name):
            return self._name_type(expr)
        if isinstance(expr, ast.Attribute):
            return self._attribute_type(expr)
        if isinstance(expr, ast.Call):
            return self._call_type(expr)
        if isinstance(expr, ast.BinOp) and not isinstance(expr.op, ast.MatMult):
            return self._binop_type(expr)
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
            return self.type_of(expr.operand)
        return None

    def _name_type(self, use: ast.Name) -> StaticType | None:
        value = self.reaching(use)
        if value is _PARAM:
            found = self.env.get(use.id, _MISSING)
            return None if found is _MISSING else value_type(found)
        if value is None or value is _LOOP:
            return None
        return self._guarded(value, self.type_of, None)

    def _attribute_type(self, expr: ast.Attribute) -> StaticType | None:
        value = self.resolve(expr)
        if isinstance(value, enum.Enum):
            return value_type(value)
        if expr.attr in _TUPLE_ATTRS:
            owner = self.type_of(expr.value)
            if owner is None:
                return None
            if owner.kind == "tile" and expr.attr == "shape" and owner.shape is not None:
                return StaticType("tuple", items=tuple(tile_type("int32", (), True)
                                                       for _ in owner.shape))
            array = self._array_value(expr.value) if owner.kind == "array" else None
            if array is not None:
                return StaticType("tuple", items=tuple(tile_type("int32", ())
                                                       for _ in range(array.ndim)))
        return None

    def _array_value(self, expr: ast.expr) -> Any:
        from tilelab.interp.values.arrays import Array

        if isinstance(expr, ast.Name) and self._binding(expr.id) is None:
            value = self.env.get(expr.id, _MISSING)
            if isinstance(value, Array):
                return value
        return None

    def _call_type(self, call: ast.Call) -> StaticType | None:
        """A cuTile op's result when its ``shape`` (and ``dtype``, or an array's) are
        constants in the source: ``ct.ones((4,), dtype=ct.int32)`` is Tile[int32,(4)]."""
        op = self.cutile_op(call)
        if op is None or any(isinstance(a, ast.Starred) for a in call.args) or \
                any(k.arg is None for k in call.keywords):
            return None
        try:
            bound = inspect.signature(op).bind_partial(
                *call.args, **{k.arg: k.value for k in call.keywords if k.arg})
        except (TypeError, ValueError):
            return None
        arguments = bound.arguments
        if "shape" not in arguments or op.__name__ not in _SHAPED:
            return None
        shape = self.constant(arguments["shape"])
        if isinstance(shape, int) and not isinstance(shape, bool):
            shape = (shape,)
        if not isinstance(shape, tuple) or not all(isinstance(n, int) for n in shape):
            return None
        dtype = None
        if "dtype" in arguments:
            found = self.resolve(arguments["dtype"])
            dtype = None if found is _MISSING else _dtype_name(found)
        elif "array" in arguments:
            array = self.type_of(arguments["array"])
            dtype = array.dtype if array is not None and array.kind == "array" else None
        return tile_type(dtype, shape)

    def _binop_type(self, expr: ast.BinOp) -> StaticType | None:
        """An element-wise op of tiles: the operands' broadcast shape; the dtype when one
        side is a literal of the other's category, or both sides share it."""
        left, right = self.type_of(expr.left), self.type_of(expr.right)
        if left is None or right is None or left.kind != "tile" or right.kind != "tile":
            return None
        shape = None
        if left.shape is not None and right.shape is not None:
            try:
                shape = tuple(np.broadcast_shapes(left.shape, right.shape))
            except ValueError:
                return None
        dtype = None
        if not isinstance(expr.op, (ast.Div, ast.Pow)):
            if left.dtype == right.dtype:
                dtype = left.dtype
            elif right.constant and not left.constant and _adopts(left.dtype, right.dtype):
                dtype = left.dtype
            elif left.constant and not right.constant and _adopts(right.dtype, left.dtype):
                dtype = right.dtype
        return tile_type(dtype, shape, constant=left.constant and right.constant)

    def constant(self, expr: ast.expr) -> Any:
        """The value of a constant expression made of literals, tuples and constant
        arguments or globals, or ``_MISSING``."""
        from tilelab.interp.values.tile import Tile

        if isinstance(expr, ast.Constant):
            return expr.value
        if isinstance(expr, ast.Tuple):
            items = [self.constant(e) for e in expr.elts]
            return _MISSING if any(i is _MISSING for i in items) else tuple(items)
        if isinstance(expr, ast.Name):
            value = self.reaching(expr)
            if value is _PARAM:
                found = self.env.get(expr.id, _MISSING)
                if isinstance(found, Tile):
                    return _MISSING
                return found if isinstance(found, (int, float, bool, tuple)) else _MISSING
            if value is not None and value is not _LOOP:
                return self._guarded(value, self.constant, _MISSING)
        return _MISSING

    def surely_not_none(self, expr: ast.expr) -> bool:
        """Whether ``expr``'s value is surely not ``None`` (a literal, an operator's
        result, a tuple, a value of a known type...)."""
        if isinstance(expr, ast.Constant):
            return expr.value is not None
        if isinstance(expr, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.Tuple)):
            return True
        if isinstance(expr, ast.Name):
            value = self.reaching(expr)
            if value is _PARAM:
                return self.env.get(expr.id, None) is not None
            if value is _LOOP:
                return True
            if value is None:
                return False
            return bool(self._guarded(value, self.surely_not_none, False))
        return self.type_of(expr) is not None

    # ---- tuples --------------------------------------------------------------------------
    def is_tuple(self, expr: ast.expr) -> bool:
        """Whether ``expr`` is surely a tuple."""
        found = self.type_of(expr)
        return found is not None and found.kind == "tuple" and found.items is not None


#: cuTile ops whose ``shape`` argument is their result's shape
_SHAPED = frozenset({"full", "zeros", "ones", "load"})


def _adopts(tile: str | None, constant: str | None) -> bool:
    """Whether a literal of dtype ``constant`` takes a tile's dtype ``tile`` in an
    element-wise op (a literal of the same kind, or an integer literal with a float
    tile)."""
    return _same_kind(tile, constant) or (_same_kind(constant, "int32") and
                                          _same_kind(tile, "float32"))


def _same_kind(a: str | None, b: str | None) -> bool:
    def kind(d: str | None) -> str | None:
        if d is None:
            return None
        if d.startswith(("float", "bfloat", "tfloat")):
            return "float"
        if d.startswith(("int", "uint")):
            return "int"
        return d
    return kind(a) is not None and kind(a) == kind(b)


def _dtype_name(value: Any) -> str | None:
    from tilelab.interp.values.dtypes import as_dtype
    try:
        return str(as_dtype(value))
    except Exception:   # noqa: BLE001 - not a dtype
        return None


def names_seen(fn: types.FunctionType, args: Mapping[str, Any]) -> Mapping[str, Any]:
    """The names ``fn``'s body sees on a call with ``args`` (parameter name -> value):
    the arguments, then its closure's cells that hold a value, then its globals."""
    closure = {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            closure[name] = cell.cell_contents
        except ValueError:      # a cell not yet assigned
            pass
    return collections.ChainMap(dict(args), closure, fn.__globals__)


def own_nodes(func: ast.AST) -> list[ast.AST]:
    """The nodes of ``func``'s body, without those of functions defined inside it."""
    out: list[ast.AST] = []
    todo = list(ast.iter_child_nodes(func))
    while todo:
        node = todo.pop(0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                             ast.ClassDef)):
            continue
        out.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return out


#: the binding of a run-time ``for`` loop's variable
_LOOP: Any = ast.Constant(value=None)


def _bindings(nodes: list[ast.AST], params: frozenset[str]) -> dict[str, list]:
    """Each local name's bindings as ``(value, node)``: ``value`` is an expression,
    ``_LOOP`` (a run-time loop variable) or None (one the source does not show); ``node``
    is the binding statement (None for a parameter's own value, listed when the body
    binds the parameter too)."""
    out: dict[str, list] = {}

    def bind(target: ast.AST, value: Any, node: ast.AST) -> None:
        if isinstance(target, ast.Name):
            out.setdefault(target.id, []).append((value, node))
        elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and \
                len(target.elts) == len(value.elts) and \
                not any(isinstance(e, ast.Starred) for e in (*target.elts, *value.elts)):
            for item, item_value in zip(target.elts, value.elts):   # (a, b = b, a + b)
                bind(item, item_value, node)
        else:
            for n in ast.walk(target):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    out.setdefault(n.id, []).append((None, node))

    for node in nodes:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                bind(target, node.value, node)
        elif isinstance(node, ast.AnnAssign):
            bind(node.target, node.value, node)
        elif isinstance(node, (ast.AugAssign, ast.NamedExpr)):
            bind(node.target, None, node)
        elif isinstance(node, ast.For):
            static = isinstance(node.iter, ast.Call) and \
                _callee_name(node.iter.func) == "static_iter"
            for n in ast.walk(node.target):
                if isinstance(n, ast.Name):
                    out.setdefault(n.id, []).append(
                        (None if static or n is not node.target else _LOOP, node))
        elif isinstance(node, ast.comprehension):
            bind(node.target, None, node.target)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            bind(node.optional_vars, None, node.optional_vars)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                out.setdefault((alias.asname or alias.name).split(".")[0], []).append(
                    (None, node))
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                out.setdefault(name, []).append((None, node))
    for name in params & out.keys():
        out[name].append((_PARAM, None))
    return out


def _end(node: ast.AST) -> tuple[int, int]:
    """Where a binding takes effect: after its statement (a ``for`` loop's variable:
    after its iterable)."""
    if isinstance(node, ast.For):
        node = node.iter
    return (node.end_lineno or 0, node.end_col_offset or 0)


#: the binding of a parameter by the call
_PARAM: Any = ast.Constant(value=None)


def _callee_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None
