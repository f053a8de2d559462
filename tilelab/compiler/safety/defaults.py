"""A function's default values are part of its program.

Python evaluates a ``def``'s default expressions once, when the ``def`` runs, and keeps
the values on the function (``__defaults__``, ``__kwdefaults__``), where anyone may
replace them later. cuTile and the CPU interpreter call a helper with those values, not
with its text, so the check reads the values: each must be data a kernel may read from
its module (numbers, strings, tuples, dtypes, cuTile constants). They are recorded in
the program's snapshot (an edit is seen before the next compile or launch, which checks
the kernel again), hashed into its fingerprint (a changed default is a changed program,
never a cache hit of the old one), and given to the frozen copy that runs.
"""
from __future__ import annotations

import ast
import types
from dataclasses import dataclass
from typing import Any

from tilelab.compiler.safety.ct_objects import describe_object
from tilelab.compiler.safety.optable import is_allowed_value

__all__ = ["Defaults", "read_defaults", "DefaultRules"]


@dataclass(frozen=True)
class Defaults:
    """The default values a function had when it was checked.

    ``positional`` is ``__defaults__`` (the last parameters' values); ``keyword`` holds
    the items of ``__kwdefaults__``, copied (the dict itself can be edited in place).

    Example:
        >>> def f(a, b=2, *, c=3): ...
        >>> d = read_defaults(f)
        >>> d.positional, d.keyword, d.key()
        ((2,), (('c', 3),), 'b=int:2;c=int:3')
    """

    positional: tuple | None
    keyword: tuple[tuple[str, Any], ...] | None
    #: positional parameter names, in order (for the key and the messages)
    names: tuple[str, ...] = ()

    def items(self) -> list[tuple[str, Any]]:
        """(parameter, value) of every default, positional ones first."""
        out = []
        if self.positional:
            n = len(self.positional)
            out += list(zip(self.names[len(self.names) - n:], self.positional))
        out += list(self.keyword or ())
        return out

    def key(self) -> str:
        """A stable text of the values, for the program's fingerprint."""
        return ";".join(f"{name}={type(v).__name__}:{v!r}" for name, v in self.items())

    def install(self, fn: types.FunctionType) -> None:
        """Give these values to ``fn`` (a frozen copy): its own tuple and dict."""
        fn.__defaults__ = self.positional
        fn.__kwdefaults__ = dict(self.keyword) if self.keyword is not None else None


def read_defaults(fn: types.FunctionType, names: tuple[str, ...] | None = None
                  ) -> Defaults:
    """The defaults ``fn`` has now; ``names``: its positional parameters (by default
    those of its code object; the checker passes those of the checked text)."""
    if names is None:
        code = fn.__code__
        names = code.co_varnames[:code.co_argcount]
    kw = fn.__kwdefaults__
    return Defaults(fn.__defaults__, tuple(kw.items()) if kw is not None else None,
                    tuple(names))


class DefaultRules:
    """Mixin of the function checker: the function's default values are data."""

    def check_defaults(self) -> Defaults:
        """Check and record the function's defaults; returns what the check saw."""
        fn, func = self.fn, self.func
        self.program.snapshot.record_defaults(fn)
        a = func.args
        params = a.posonlyargs + a.args
        found = read_defaults(fn, tuple(arg.arg for arg in params))
        n = len(found.positional or ())
        if n > len(params):
            self.fail("param-form", func,
                      f"{func.name!r} has {n} default values (its __defaults__) for "
                      f"{len(params)} positional parameters",
                      hint="give defaults in the 'def' itself and leave __defaults__ alone")
        where: dict[str, ast.AST] = {}
        for arg, node in zip(params[len(params) - len(a.defaults):], a.defaults):
            where[arg.arg] = node
        for arg, node in zip(a.kwonlyargs, a.kw_defaults):
            where[arg.arg] = node if node is not None else arg
        args = {arg.arg: arg for arg in params + a.kwonlyargs}
        kwonly = {arg.arg for arg in a.kwonlyargs}
        for name, _ in found.keyword or ():
            if name not in kwonly:
                self.fail("param-form", func,
                          f"{func.name!r} has a default value for {name!r} (its "
                          "__kwdefaults__), which is not one of its keyword-only "
                          "parameters",
                          hint="give defaults in the 'def' itself and leave "
                               "__kwdefaults__ alone")
        for name, value in found.items():
            if not is_allowed_value(value):
                self.fail("global-value", where.get(name, args[name]),
                          f"parameter {name!r} of {func.name!r} defaults to "
                          f"{describe_object(value)}; a default value is data the kernel "
                          "reads: numbers, strings, tuples, dtypes and cuTile constants"
                          + (" (functions are called, never passed around)"
                             if callable(value) else ""),
                          hint="give the parameter a constant default"
                               + (" (a tuple, not a list)" if isinstance(value, list)
                                  else "") + ", or pass the value as an argument")
        return found

