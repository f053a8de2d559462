"""The checked program of one kernel: its helpers, captured once, and the snapshot of
everything the check resolved.

Helpers are checked recursively by the same rules as the kernel. Each function's
source is captured once per code object (the text that is checked is the text that is
lowered, compiled and interpreted; the file is never read again for that code), and
the function's code object goes into the snapshot, so swapping ``__code__`` is seen.

Captures are found by the code object's identity, never by equality: ``CodeType``'s
``==`` ignores the file name (and a function's defaults and annotations are not in its
code at all), so a helper of the same name, first line and bytecode in another module or
a re-run notebook cell would otherwise be checked, lowered and run from the text captured
for the first one. A function's default values are checked and snapshotted with it
(:mod:`tilelab.compiler.safety.defaults`). The memory accesses the check accepted, with
why each is safe, are collected here too (:attr:`Program.accesses`).
"""
from __future__ import annotations

import ast
import hashlib
import types
import weakref
from dataclasses import dataclass, field
from typing import Any

from tilelab.compiler.capture import CapturedSource, capture_source
from tilelab.compiler.safety.defaults import Defaults
from tilelab.compiler.safety.kinds import ParamKind
from tilelab.compiler.safety.rules import raise_rule
from tilelab.compiler.safety.scope import Resolved
from tilelab.compiler.safety.snapshot import Snapshot
from tilelab.errors import SafetyError

__all__ = ["CheckedFunction", "Program", "captured"]

#: id(code object) -> (a weak reference to that code object, its source), captured the
#: first time the code is checked; the entry goes when the code object does, so an id
#: is never taken for another code's
_CAPTURED: dict[int, tuple[weakref.ref, CapturedSource]] = {}


def captured(fn: types.FunctionType) -> CapturedSource:
    """The source of ``fn``'s current code, captured once (then never re-read).

    Found by the identity of the code object: two code objects that compare equal (the
    same name, first line and bytecode, in two files or two notebook cells) each have
    their own text.
    """
    code = fn.__code__
    found = _CAPTURED.get(id(code))
    if found is not None and found[0]() is code:
        return found[1]
    src = capture_source(fn)
    key = id(code)

    def forget(ref: weakref.ref, key: int = key) -> None:
        entry = _CAPTURED.get(key)
        if entry is not None and entry[0] is ref:
            del _CAPTURED[key]
    _CAPTURED[key] = (weakref.ref(code, forget), src)
    return src


@dataclass
class CheckedFunction:
    """A function the check accepted: its captured source and what its names meant."""

    fn: types.FunctionType
    source: CapturedSource
    resolved: Resolved
    is_kernel: bool = False
    #: the default values the check accepted (what the frozen copy is given)
    defaults: Defaults = field(default_factory=lambda: Defaults(None, None))


@dataclass
class Program:
    """A kernel and every helper it reaches, as checked, with their snapshot."""

    kernel_name: str
    unsafe: bool
    allow_deferred: bool
    snapshot: Snapshot = field(default_factory=Snapshot)
    functions: dict[int, CheckedFunction] = field(default_factory=dict)
    _memo: set = field(default_factory=set, repr=False)
    deferred: list = field(default_factory=list)
    bindings: list = field(default_factory=list, repr=False)
    #: every memory access the check accepted in the kernel and its helpers, with why it
    #: is safe, in source order (:class:`~tilelab.compiler.safety.accesses.AccessRecord`)
    accesses: tuple = ()

    def changed(self) -> bool:
        """Whether anything the check resolved has changed since (identity compares).
        Rebound to the snapshot's own method by :meth:`seal` (the launch path calls it)."""
        return self.snapshot.changed()

    def seal(self) -> None:
        """End of the check: fix the snapshot's lists (see :attr:`bindings`)."""
        self.snapshot.seal()
        self.accesses = tuple(sorted(dict.fromkeys(self.accesses),
                                     key=lambda r: r.sort_key()))
        self.changed = self.snapshot.changed
        #: (dict, name, object) triples the native launch path compares; never empty,
        #: so the Python launch path always asks :meth:`changed` as well
        self.bindings = self.snapshot.bindings or [({"": None}, "", None)]

    def fingerprint(self) -> str:
        """sha256 over every checked function's text, its default values and the values
        its names had."""
        h = hashlib.sha256()
        for cf in sorted(self.functions.values(),
                         key=lambda c: (c.source.filename, c.source.first_line)):
            h.update(f"{cf.source.filename}:{cf.source.first_line}\0".encode())
            h.update(cf.source.fingerprint.encode())
            h.update(f"defaults:{cf.defaults.key()}\0".encode())
            for name in sorted(cf.resolved.names):
                obj = cf.resolved.names[name]
                h.update(f"{name}={_value_key(obj)}\0".encode())
                for path in sorted(cf.resolved.module_paths.get(name, ())):
                    h.update(f"{name}.{'.'.join(path)}={_value_key(follow(obj, path))}"
                             "\0".encode())
        return h.hexdigest()

    def add(self, fn: types.FunctionType, src: CapturedSource, resolved: Resolved,
            is_kernel: bool = False, defaults: Defaults | None = None) -> None:
        self.functions[id(fn)] = CheckedFunction(fn, src, resolved, is_kernel,
                                                 defaults or Defaults(None, None))

    def check_helper(self, fn: types.FunctionType, kinds: dict[str, str], caller: Any,
                     node: ast.AST | None) -> None:
        """Check a helper called from ``caller`` with the given parameter kinds."""
        from tilelab.compiler.safety.checker import FunctionChecker

        key = (id(fn), tuple(sorted(kinds.items())))
        if key in self._memo:
            return
        self._memo.add(key)
        loc = caller.src.location(node) if node is not None else None
        callee = caller.text(node.func if isinstance(node, ast.Call) else node) \
            if node is not None else fn.__name__
        if fn.__name__ == "<lambda>":
            raise_rule("helper-lambda", f"{callee} is a lambda, which cannot be called as "
                                        "a kernel helper: helpers are checked from their "
                                        "source, one 'def' at a time",
                       location=loc, context=caller.context)
        try:
            src = captured(fn)
        except SafetyError:
            raise_rule("helper-source", f"cannot check helper {fn.__name__!r}: its source "
                                        "is not available, so what it does is unknown",
                       location=loc, context=caller.context)
        self.snapshot.record_code(fn)
        _check_decorators(fn, src, caller)
        context = f"helper {fn.__name__!r}, called from kernel {self.kernel_name!r}"
        full = {p: ParamKind(kinds.get(p, ParamKind.IN)) for p in _param_names(src.tree)}
        checker = FunctionChecker(fn, src, full, unsafe=self.unsafe, context=context,
                                  program=self, allow_deferred=self.allow_deferred)
        checker.run()
        self.deferred += checker.deferred
        self.accesses = (*self.accesses, *checker.accesses)
        self.add(fn, src, checker.scope.resolved, defaults=checker.defaults)


def _param_names(func: ast.FunctionDef) -> list[str]:
    a = func.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    names += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    return names


def _check_decorators(fn: types.FunctionType, src: CapturedSource, caller: Any) -> None:
    """Only ``@ct.function`` may decorate a helper (it adds no code of its own)."""
    import cuda.tile as ct

    for dec in src.tree.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        obj = _static_value(target, fn)
        if obj is not ct.function:
            raise_rule("helper-decorated",
                       f"helper {fn.__name__!r} is decorated with "
                       f"@{ast.unparse(dec)}, which runs code the checker does not see",
                       location=src.location(dec), context=caller.context)


def _static_value(e: ast.AST, fn: types.FunctionType) -> Any:
    names = []
    while isinstance(e, ast.Attribute):
        names.append(e.attr)
        e = e.value
    if not isinstance(e, ast.Name):
        return None
    obj = fn.__globals__.get(e.id)
    for attr in reversed(names):
        obj = getattr(obj, attr, None)
    return obj


def follow(obj: Any, path: tuple[str, ...]) -> Any:
    """``obj.a.b`` for path ('a', 'b') (submodules not yet attributes included)."""
    import sys

    for attr in path:
        nxt = getattr(obj, attr, None)
        if nxt is None and isinstance(obj, types.ModuleType):
            nxt = sys.modules.get(f"{obj.__name__}.{attr}")
        obj = nxt
    return obj


def _value_key(obj: Any) -> str:
    if isinstance(obj, types.FunctionType):
        return f"fn:{obj.__module__}.{obj.__qualname__}"
    if isinstance(obj, types.ModuleType):
        return f"mod:{obj.__name__}"
    try:
        return f"{type(obj).__name__}:{obj!r}"
    except Exception:  # pragma: no cover - reprs of allowlisted values do not fail
        return type(obj).__name__
