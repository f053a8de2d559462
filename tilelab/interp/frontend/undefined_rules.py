"""Variables used where cuTile cannot prove them defined, read from a function's source.

Why: Python raises ``UnboundLocalError`` only when the run reaches an unassigned use, so
a kernel whose block 0 takes the branch that assigns ``acc`` runs block 0 and fails in
block 1, or never fails at all if every block takes that branch. cuTile checks every
path when it compiles: a use with no assignment before it on its path is "Undefined
variable acc used" (``TileSyntaxError``; here also a
:class:`~tilelab.interp.context.KernelNameError`, a ``NameError``, as the run would raise
it), and a use after a run-time ``if`` that assigns
the variable on one side only, after a run-time ``for`` loop that assigns it, or inside
such a loop before the loop assigns it (the first iteration), is "Use of potentially
undefined variable `acc`" (``TileTypeError``, at the ``if`` or loop). So each function
the interpreter runs is read once from its source, and its first such use is refused
before any of it runs.

The analysis is kept to what cuTile surely refuses: an ``if`` whose condition is not
surely a run-time value (cuTile may fold it) counts as assigning what either side
assigns, and so do ``while`` loops, ``static_iter`` loops, ``try`` and ``match``
statements; uses inside lambdas are not read, and inside a comprehension only an ``if``
that reads a variable of a later ``for`` of it is refused.

Example:
    >>> import cuda.tile as ct
    >>> def kernel(x):
    ...     if ct.bid(0) == 0:
    ...         acc = 1
    ...     ct.scatter(x, 0, acc)
    >>> undefined_refusal(kernel, {"x": None}).message
    'Use of potentially undefined variable `acc`'
"""
from __future__ import annotations

import ast
import types
from dataclasses import dataclass, field
from typing import Any, Mapping

from tilelab.errors import CompileError
from tilelab.interp import _cutile
from tilelab.interp.context import KernelNameError, function_source, location_at
from tilelab.interp.frontend.static_types import Scope

__all__ = ["undefined_refusal"]

_HINT = ("assign the variable before the `if` or loop (e.g. acc = ct.zeros(...)), or on "
         "every path that reaches its use")


@dataclass
class _State:
    """What is surely assigned at a point, and what only maybe (name -> the statement
    that merged the paths)."""

    defined: set[str]
    maybe: dict[str, ast.stmt] = field(default_factory=dict)

    def copy(self) -> "_State":
        return _State(set(self.defined), dict(self.maybe))


class _Found(Exception):
    def __init__(self, message: str, node: ast.AST, syntax: bool):
        super().__init__(message)
        self.message, self.node, self.syntax = message, node, syntax


def undefined_refusal(fn: types.FunctionType, args: Mapping[str, Any]
                      ) -> CompileError | None:
    """cuTile's refusal of the first use in ``fn``'s source of a variable not surely
    assigned on its path, for a call with ``args`` (parameter name -> value), or None."""
    scope = Scope.of(fn, args)
    if scope is None:
        return None
    found = function_source(fn)
    assert found is not None
    func, line0, indent = found
    func = scope.func
    declared = {n for node in scope.nodes if isinstance(node, (ast.Global, ast.Nonlocal))
                for n in node.names}
    params = {a.arg for a in ast.walk(func.args) if isinstance(a, ast.arg)}
    local = _assigned_names(func.body) - declared
    checker = _Checker(scope, local, [])
    try:
        checker.block(func.body, _State(set(params)))
    except _Found as e:
        classes = _cutile.exception_classes()
        where = location_at(fn.__code__.co_filename, line0 + e.node.lineno,
                            e.node.col_offset + indent)
        if e.syntax:   # (Python's UnboundLocalError: a NameError, as the run raises it)
            error = KernelNameError(e.message, location=where, hint=_HINT,
                                    name=getattr(e.node, "id", None))
            error.foreign = classes["TileSyntaxError"]
            return error
        return CompileError(e.message, location=where, hint=_HINT,
                            foreign=classes["TileTypeError"])
    return None


def _assigned_names(stmts: list[ast.stmt]) -> set[str]:
    """The names a function body binds (not inside nested functions, classes or
    comprehensions, which have scopes of their own)."""
    out: set[str] = set()
    todo: list[ast.AST] = list(stmts)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
            continue
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                             ast.GeneratorExp)):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in node.names}
        todo.extend(ast.iter_child_nodes(node))
    return out


def _terminates(stmts: list[ast.stmt]) -> bool:
    return bool(stmts) and isinstance(stmts[-1], (ast.Return, ast.Raise, ast.Break,
                                                  ast.Continue))


class _Checker:
    def __init__(self, scope: Scope, local: set[str], loops: list):
        self.scope = scope
        self.local = local
        self.loops = loops   # enclosing run-time for loops: (node, names they bind)

    # ---- statements ----------------------------------------------------------------------
    def block(self, stmts: list[ast.stmt], state: _State) -> _State | None:
        """The state after ``stmts`` (None: they never fall through)."""
        for stmt in stmts:
            after = self.statement(stmt, state)
            if after is None:
                return None
            state = after
        return state

    def statement(self, stmt: ast.stmt, state: _State) -> _State | None:
        if isinstance(stmt, (ast.Return, ast.Raise)):
            self.uses(stmt, state)
            return None
        if isinstance(stmt, (ast.Break, ast.Continue)):
            return None
        if isinstance(stmt, ast.If):
            return self.if_(stmt, state)
        if isinstance(stmt, ast.For):
            return self.for_(stmt, state)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for deco in stmt.decorator_list:
                self.uses(deco, state)
            return self.bind(state, {stmt.name})
        if isinstance(stmt, ast.With):
            for item in stmt.items:
                self.uses(item.context_expr, state)
                if item.optional_vars is not None:
                    state = self.bind(state, _assigned_names([ast.Expr(item.optional_vars)]))
            return self.block(stmt.body, state)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr,
                             ast.Delete, ast.Assert, ast.Pass, ast.Import,
                             ast.ImportFrom, ast.Global, ast.Nonlocal)):
            self.uses(stmt, state)
            return self.bind(state, _assigned_names([stmt]))
        # while, try, match...: whatever they bind counts as bound, nothing is read
        return self.bind(state, _assigned_names([stmt]))

    def bind(self, state: _State, names: set[str]) -> _State:
        state = state.copy()
        state.defined |= names
        for name in names:
            state.maybe.pop(name, None)
        return state

    def if_(self, stmt: ast.If, state: _State) -> _State | None:
        self.uses(stmt.test, state)
        then = self.block(stmt.body, state.copy())
        other = self.block(stmt.orelse, state.copy())
        if then is None or other is None:
            return then if other is None else other
        if not self.scope.surely_runtime(stmt.test):   # (cuTile may fold it)
            return self.bind(then, other.defined | set(other.maybe))
        merged = _State(then.defined & other.defined, {**then.maybe, **other.maybe})
        for name in (then.defined | other.defined) - merged.defined:
            merged.maybe.setdefault(name, stmt)
        return merged

    def for_(self, stmt: ast.For, state: _State) -> _State:
        self.uses(stmt.iter, state)
        targets = _assigned_names([ast.Expr(stmt.target)])
        body_names = _assigned_names(stmt.body)
        static = isinstance(stmt.iter, ast.Call) and \
            _callee(stmt.iter.func) == "static_iter"
        if static or stmt.orelse:
            return self.bind(state, targets | body_names | _assigned_names(stmt.orelse))
        self.loops.append((stmt, body_names))
        try:
            self.block(stmt.body, self.bind(state, targets))
        finally:
            self.loops.pop()
        after = state.copy()   # (a run-time loop may not run at all)
        for name in body_names | targets:
            if name not in after.defined:
                after.maybe.setdefault(name, stmt)
        return after

    # ---- uses ----------------------------------------------------------------------------
    def uses(self, node: ast.AST, state: _State) -> None:
        """Refuse the first read in ``node`` of a local not surely assigned."""
        todo = [node]
        reads: list[ast.Name] = []
        while todo:
            n = todo.pop()
            if isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                self.comprehension(n, state)
                continue
            if isinstance(n, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef,
                              ast.ClassDef)):
                continue
            if isinstance(n, ast.NamedExpr):
                return   # (a walrus binds in the middle of the expression: not read)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                reads.append(n)
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                reads.append(n.target)
            todo.extend(ast.iter_child_nodes(n))
        for name in sorted(reads, key=lambda n: (n.lineno, n.col_offset)):
            self.read(name, state)

    def comprehension(self, node: ast.AST, state: _State) -> None:
        """A comprehension's ``if`` reading a variable only a later ``for`` of it
        introduces (cuTile: "Undefined variable n used")."""
        generators = node.generators   # type: ignore[attr-defined]
        later = [_assigned_names([ast.Expr(g.target)]) for g in generators]
        for i, generator in enumerate(generators):
            ahead = set().union(*later[i + 1:]) - set().union(*later[:i + 1])
            for condition in generator.ifs:
                for n in ast.walk(condition):
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and \
                            n.id in ahead and n.id not in state.defined:
                        raise _Found(f"Undefined variable {n.id} used", n, syntax=True)

    def read(self, name: ast.Name, state: _State) -> None:
        if name.id not in self.local or name.id in state.defined:
            return
        merged = state.maybe.get(name.id)
        if merged is not None:
            raise _Found(f"Use of potentially undefined variable `{name.id}`", merged,
                         syntax=False)
        for loop, names in reversed(self.loops):
            if name.id in names:   # (assigned later in the loop: not on the first pass)
                raise _Found(f"Use of potentially undefined variable `{name.id}`", loop,
                             syntax=False)
        raise _Found(f"Undefined variable {name.id} used", name, syntax=True)


def _callee(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None
