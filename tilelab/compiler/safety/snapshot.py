"""What a check resolved, recorded so that a change is noticed before code runs.

The check resolves every global, closure cell and module attribute a kernel and its
helpers use. The snapshot keeps each binding with the object it had; before every
compile and launch, :meth:`Snapshot.changed` compares them by identity (a notebook that
redefines a helper, rebinds an alias, swaps a ``__code__`` or edits a closure cell is
seen there), and the kernel is checked again before anything is built from the change.
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

    def seal(self) -> None:
        """End of the check: fix the lists the launch paths compare."""
        #: the (dict, name, object) entries of names bound to an object: the part of the
        #: snapshot the native launch path compares (cells, code objects and names that
        #: must stay unbound are compared by :meth:`changed`, on the Python path)
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
        return None
