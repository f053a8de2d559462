"""What a check resolved, recorded so that a change is noticed before code runs.

The check resolves every global, closure cell and module attribute a kernel and its
helpers use. The snapshot keeps each binding with the object it had; before every
compile and launch, :meth:`Snapshot.changed` compares them by identity (a notebook that
redefines a helper, rebinds an alias, swaps a ``__code__`` or edits a closure cell is
seen there), and the kernel is checked again before anything is built from the change.
A function's default values are part of its program: a new ``__defaults__`` tuple, or a
``__kwdefaults__`` dict replaced or edited in place, is a change too; so is a new origin
or metadata tuple of a ``typing.Annotated`` object the check read (``ct.Constant[int]``,
an alias of it), whose attributes can be assigned.
"""
from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Snapshot"]

_MISSING = object()


@dataclass
class Snapshot:
    """Bindings (namespace, name, object) and code objects, compared by identity.

    Example:
        >>> ns = {"f": len}
        >>> s = Snapshot(); s.record_name(ns, "f", len)
        >>> s.changed(), (ns.update(f=abs), s.changed())[1]
        (False, True)
    """

    #: (dict, name, object): ``dict.get(name) is object``; object may be _MISSING
    names: list = field(default_factory=list)
    #: (cell, object)
    cells: list = field(default_factory=list)
    #: (function, code object)
    codes: list = field(default_factory=list)
    #: (function, __defaults__, __kwdefaults__, its items): the tuple and the dict by
    #: identity, the items by identity of each value (the dict can be edited in place)
    defaults: list = field(default_factory=list)
    #: (typing.Annotated object, its __origin__, its __metadata__), by identity
    annotations: list = field(default_factory=list)
    _seen: set = field(default_factory=set, repr=False)
    bindings: list = field(default_factory=list, repr=False)

    def record_name(self, namespace: dict, name: str, obj: Any) -> None:
        key = (id(namespace), name)
        if key not in self._seen:
            self._seen.add(key)
            self.names.append((namespace, name, obj))

    def record_absent(self, namespace: dict, name: str) -> None:
        """``name`` must stay unbound in ``namespace`` (a builtin it would shadow)."""
        self.record_name(namespace, name, _MISSING)

    def record_cell(self, cell: types.CellType, obj: Any) -> None:
        self.cells.append((cell, obj))

    def record_code(self, fn: types.FunctionType) -> None:
        self.codes.append((fn, fn.__code__))

    def record_defaults(self, fn: types.FunctionType) -> None:
        kw = fn.__kwdefaults__
        self.defaults.append((fn, fn.__defaults__, kw,
                              tuple(kw.items()) if kw is not None else None))

    def record_annotation(self, obj: Any) -> None:
        """``obj`` is a ``typing.Annotated`` object: keep what it is made of."""
        self.annotations.append((obj, getattr(obj, "__origin__", None),
                                 getattr(obj, "__metadata__", None)))

    def seal(self) -> None:
        """End of the check: fix the lists the launch paths compare."""
        #: the (dict, name, object) entries of names bound to an object: the part of the
        #: snapshot the native launch path compares (cells, code objects, defaults,
        #: annotations and names that must stay unbound are compared by :meth:`changed`,
        #: on the Python path)
        self.bindings = [t for t in self.names if t[2] is not _MISSING]
        self._seen = set()

    def changed(self) -> bool:
        """Whether any recorded binding now refers to another object."""
        for ns, name, obj in self.names:
            if ns.get(name, _MISSING) is not obj:
                return True
        for cell, obj in self.cells:
            try:
                if cell.cell_contents is not obj:
                    return True
            except ValueError:
                return True
        for fn, code in self.codes:
            if fn.__code__ is not code:
                return True
        for fn, positional, kw, items in self.defaults:   # (inline: every launch asks)
            if fn.__defaults__ is not positional or fn.__kwdefaults__ is not kw:
                return True
            if items is not None:
                if len(kw) != len(items):
                    return True
                for name, value in items:
                    if kw.get(name, _MISSING) is not value:
                        return True
        for obj, origin, meta in self.annotations:
            if getattr(obj, "__origin__", None) is not origin or \
                    getattr(obj, "__metadata__", None) is not meta:
                return True
        return False

    def describe_change(self) -> str | None:
        """A short description of the first change (for messages and logs)."""
        for ns, name, obj in self.names:
            if ns.get(name, _MISSING) is not obj:
                return f"{name!r} was rebound"
        for cell, obj in self.cells:
            try:
                if cell.cell_contents is not obj:
                    return "a closure variable was rebound"
            except ValueError:
                return "a closure variable was deleted"
        for fn, code in self.codes:
            if fn.__code__ is not code:
                return f"the code of {fn.__name__!r} was replaced"
        for fn, positional, kw, items in self.defaults:
            if Snapshot(defaults=[(fn, positional, kw, items)]).changed():
                return f"the default values of {fn.__name__!r} were changed"
        for obj, origin, meta in self.annotations:
            if getattr(obj, "__origin__", None) is not origin or \
                    getattr(obj, "__metadata__", None) is not meta:
                return f"the annotation {obj!r} was changed"
        return None

