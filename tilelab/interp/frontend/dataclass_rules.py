"""Which dataclasses a kernel may create, as cuTile decides.

Why: cuTile builds a dataclass instance in a kernel from its fields through the
generated ``__init__``, so it refuses classes where that is not the whole story: not
frozen ("Only frozen dataclasses are supported"), a custom ``__new__``,
``default_factory`` or ``init=False`` fields, a plain subclass of a dataclass, a
hand-written ``__init__``. Python creates all of them. So a dataclass that kernel code
reaches (a global, a closure variable, a default) is replaced, for the kernel only, by a
stand-in that refuses to create an instance with cuTile's words and class, at the line
that tries; every other use of the class (``isinstance``, attributes) is the class's
own. A dataclass cuTile accepts is left as it is.

Example:
    >>> import dataclasses
    >>> @dataclasses.dataclass
    ... class Thawed:
    ...     foo: int
    >>> checked(Thawed).__class__.__name__
    'RefusedDataclass'
"""
from __future__ import annotations

import dataclasses
from typing import Any

from tilelab.interp import _cutile
from tilelab.interp.context import compile_error

__all__ = ["checked", "RefusedDataclass"]


class RefusedDataclass:
    """A dataclass cuTile refuses to create, as kernel code sees it."""

    def __init__(self, cls: type, refusal: BaseException):
        self._cls = cls
        self._refusal = refusal

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise compile_error(getattr(self._refusal, "message", str(self._refusal)),
                            foreign=type(self._refusal),
                            hint="kernels create frozen dataclasses with the generated "
                                 "__init__ (@dataclass(frozen=True), plain fields)")

    def __instancecheck__(self, obj: Any) -> bool:
        return isinstance(obj, self._cls)

    def __subclasscheck__(self, sub: type) -> bool:
        return issubclass(sub, self._cls)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cls, name)

    def __repr__(self) -> str:
        return repr(self._cls)


def checked(cls: type) -> Any:
    """``cls`` as kernel code should see it: itself when cuTile creates its instances,
    else a :class:`RefusedDataclass`."""
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        return cls
    refusal = _cutile.dataclass_refusal(cls)
    return cls if refusal is None else RefusedDataclass(cls, refusal)
