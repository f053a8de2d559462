"""Name resolution for the checker: what a function binds, and what its free names
mean when the kernel is checked (closure cells, module globals, builtins).

Every resolution is recorded in the :class:`~tilelab.compiler.safety.snapshot.Snapshot`
and in the function's :class:`Resolved` table, from which the frozen namespace the
compiled code runs in is built.
"""
from __future__ import annotations

import ast
import builtins
import sys
import types
import typing
from dataclasses import dataclass, field
from typing import Any

from tilelab.compiler.safety.snapshot import Snapshot

__all__ = ["UNRESOLVED", "bound_names", "Scope", "Resolved"]


class _Unresolved:
    def __repr__(self) -> str:
        return "UNRESOLVED"


UNRESOLVED = _Unresolved()
#: the class of ``typing.Annotated[...]`` objects
_ANNOTATED = type(typing.Annotated[int, ""])


def bound_names(func: ast.FunctionDef) -> set[str]:
    """Every name the function binds anywhere in its body (parameters, assignments,
    loop and comprehension variables, walrus, except/with/match names, imports,
    nested definitions): none of them may be a call target."""
    a = func.args
    names = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
    for extra in (a.vararg, a.kwarg):
        if extra is not None:
            names.add(extra.arg)
    for stmt in func.body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                names.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((al.asname or al.name).split(".")[0] for al in node.names)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                names.add(node.name)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
                names.add(node.name)
            elif isinstance(node, ast.MatchMapping) and node.rest:
                names.add(node.rest)
    return names


@dataclass
class Resolved:
    """What one function's free names resolved to (its frozen namespace's source)."""

    #: free name -> object (closure cells, globals and the builtins it resolved to)
    names: dict[str, Any] = field(default_factory=dict)
    #: free name of a module -> attribute paths used through it, e.g. {("helper",)}
    module_paths: dict[str, set[tuple[str, ...]]] = field(default_factory=dict)


class Scope:
    """Resolves a function's free names statically, recording each resolution."""

    def __init__(self, fn: types.FunctionType, bound: set[str], snapshot: Snapshot):
        self.fn = fn
        self.globals = fn.__globals__
        self.bound = bound
        self.snapshot = snapshot
        self.cells: dict[str, types.CellType] = {}
        if fn.__closure__:
            self.cells = dict(zip(fn.__code__.co_freevars, fn.__closure__))
        self.resolved = Resolved()

    def lookup(self, name: str) -> Any:
        """The object a free name refers to now (UNRESOLVED when it has none)."""
        if name in self.bound:
            raise AssertionError(f"{name} is bound locally")
        cell = self.cells.get(name)
        if cell is not None:
            try:
                obj = cell.cell_contents
            except ValueError:  # an empty cell: assigned later in the enclosing function
                self.snapshot.record_cell(cell, UNRESOLVED)
                return UNRESOLVED
            self.snapshot.record_cell(cell, obj)
            self.resolved.names[name] = obj
            self._annotated(obj)
            return obj
        if name in self.globals:
            obj = self.globals[name]
            self.snapshot.record_name(self.globals, name, obj)
            self.resolved.names[name] = obj
            self._annotated(obj)
            return obj
        self.snapshot.record_absent(self.globals, name)
        if hasattr(builtins, name):
            obj = getattr(builtins, name)
            self.snapshot.record_name(vars(builtins), name, obj)
            self.resolved.names[name] = obj   # bound by name in the frozen namespace
            return obj
        return UNRESOLVED

    def _annotated(self, obj: Any) -> None:
        """Record what a ``typing.Annotated`` object (``ct.Constant[int]``, an alias of
        it) is made of: its attributes can be assigned, and it decides a parameter's
        kind and what cuTile compiles."""
        if type(obj) is _ANNOTATED:
            self.snapshot.record_annotation(obj)

    def attribute(self, base: Any, attr: str, root: str | None,
                  path: tuple[str, ...]) -> Any:
        """``base.attr`` for a module or a cuTile class/enum (UNRESOLVED otherwise)."""
        if isinstance(base, types.ModuleType):
            if base.__name__ == "tilelab":   # its public names are imported on first use
                getattr(base, attr, None)
            ns = vars(base)
            if attr in ns:
                obj = ns[attr]
                self.snapshot.record_name(ns, attr, obj)
            else:  # a submodule not imported as an attribute yet (cuda.tile)
                obj = sys.modules.get(f"{base.__name__}.{attr}", UNRESOLVED)
                self.snapshot.record_absent(ns, attr)
            if root is not None:
                self.resolved.module_paths.setdefault(root, set()).add(path)
            self._annotated(obj)
            return obj
        if isinstance(base, type) and (base.__module__ or "").startswith("cuda.tile"):
            return getattr(base, attr, UNRESOLVED)
        return UNRESOLVED
