"""How an op module gives a value its methods: ``@method(Tile, "reshape")`` beside the op.

Why: many methods of a kernel's values are ops (``t.reshape(...)``, ``t + 1``,
``t.astype(...)``, ``view.load(...)``, ``raw.atomic_add_offset(...)``, ``ct.int16(2)``),
and the op modules that implement them import the values. Were the value classes to
import the op modules for those methods, values and ops would import each other and
neither could be read, tested or moved alone. So a value's module says what the value
is (its data, its Python protocol, its printing) and imports no op; each op module
attaches the methods that are its ops where it defines them, when it is imported
(Triton's member-function pattern). :mod:`tilelab.interp.ops` imports every op module and
:mod:`tilelab.interp` imports it, so the methods exist before any kernel runs.

Example:
    >>> class Box:
    ...     pass
    >>> @method(Box, "twice")
    ... def _box_twice(self, n):
    ...     return 2 * n
    >>> Box().twice(4), Box.twice.__qualname__
    (8, 'Box.twice')
"""
from __future__ import annotations

from typing import Any, Callable, TypeVar

__all__ = ["method"]

F = TypeVar("F", bound=Callable[..., Any])


def method(cls: type, name: str) -> Callable[[F], F]:
    """A decorator that attaches the function to ``cls`` as its method ``name`` (named
    ``cls.name`` in tracebacks and ``help``) and returns it unchanged.

    One module owns each method: attaching a name that ``cls`` defines itself, or that
    another module attached, is a TypeError (two ops claiming one method is a mistake,
    not an override); the same module attaching it again (a reload) replaces it.
    """
    def attach(func: F) -> F:
        existing = cls.__dict__.get(name)
        if existing is not None and getattr(existing, "__module__", None) != func.__module__:
            owner = getattr(existing, "__module__", None) or cls.__module__
            raise TypeError(f"{cls.__name__}.{name} is already defined (by {owner}); "
                            f"{func.__module__} cannot attach it too")
        func.__name__ = name
        func.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, func)
        return func
    return attach
