"""Which of cuTile's exception classes a refusal of the interpreter stands for.

A kernel ported from cuTile catches cuTile's classes (``except ct.TileTypeError``,
``pytest.raises(TileSyntaxError, match=...)``). The interpreter's refusals are tilelab
errors (``CompileError``, ``LaunchError``) with tilelab's location and hint; when one
leaves ``interpret()`` it is made also an instance of the class cuTile raises for the same
refusal (:func:`tilelab.errors.with_foreign_class`), so both ``except CompileError`` and
``except TileTypeError`` catch it. The class is found, first match wins:

1. the raise site said it (``CompileError(..., foreign=ct.TileSyntaxError)``);
2. the error was caused by a cuTile exception (the interpreter asked cuTile itself, e.g.
   its MMA dtype rules): that exception's class;
3. the message: the interpreter words refusals as cuTile does, so the message is matched
   against every ``raise <cuTile class>(<message>)`` in cuTile's Python sources, read once
   (an f-string's literal parts, its fields as wildcards; the longest literal text wins),
   then against :data:`_WORDED_HERE`, two messages cuTile builds without a ``raise``
   that spells them;
4. a ``CompileError`` matched by none of these is a ``TileTypeError`` (cuTile's class for
   a kernel whose types it rejects, the refusal the interpreter makes most; the message
   keeps tilelab's words). A ``LaunchError`` of undefined behaviour (a tile outside its
   array, a failed ``ct.assert_``) has no cuTile class: cuTile does not check those.
"""
from __future__ import annotations

import ast
import functools
import re
from typing import Any

from tilelab.errors import CompileError, TilelabError, with_foreign_class
from tilelab.interp import _cutile

__all__ = ["cutile_class", "as_cutile"]

#: literal characters a cuTile message template needs to be matched at all (a template
#: like f"{a}: {b}" says nothing about which refusal it is)
_MIN_LITERAL = 12

#: (regex, cuTile class name) for cuTile's messages that no ``raise`` spells out: the
#: prefix StaticAssertionError's constructor adds, and the message of cuTile's
#: ``unsupported_syntax()`` helper, which returns its error rather than raising it
_WORDED_HERE: tuple[tuple[str, str], ...] = (
    (r"Static assertion failed", "TileStaticAssertionError"),
    (r"^Unsupported syntax", "TileSyntaxError"),
)


def cutile_class(error: TilelabError) -> type | None:
    """The cuTile exception class ``error`` stands for (see the module docstring), or
    None when cuTile raises nothing for it."""
    explicit = getattr(error, "foreign", None)
    if explicit is not None:
        return explicit
    classes = _cutile.exception_classes()
    base = classes["TileError"]
    seen: set[int] = set()
    cause = error.__cause__ or error.__context__
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, base):
            return type(cause)
        cause = cause.__cause__ or cause.__context__
    if not isinstance(error, CompileError):
        return None
    found = _by_message(error.message)
    return found if found is not None else classes["TileTypeError"]


def as_cutile(error: TilelabError) -> TilelabError:
    """``error`` (the same object), made also an instance of its cuTile class, with the
    ``loc`` attribute cuTile's exceptions carry; unchanged when there is no class."""
    cls = cutile_class(error)
    if cls is None:
        return error
    with_foreign_class(error, cls)
    if isinstance(error, _cutile.exception_classes()["TileError"]) and \
            "loc" not in vars(error):
        error.loc = _cutile.location(error.location)  # type: ignore[attr-defined]
    return error


def _by_message(message: str) -> type | None:
    """The class of the cuTile raise site whose message ``message`` matches (the one with
    the longest literal text), else of a :data:`_WORDED_HERE` entry; None if none."""
    for pattern, _literal, cls in _templates():   # (longest literal first)
        if pattern.search(message):
            return cls
    classes = _cutile.exception_classes()
    for pattern_text, name in _WORDED_HERE:
        if re.search(pattern_text, message):
            return classes[name]
    return None


@functools.lru_cache(maxsize=1)
def _templates() -> tuple[tuple[re.Pattern, int, type], ...]:
    """cuTile's raise sites as (regex, literal length, class), longest literal first."""
    out = []
    for node, cls in _cutile.raise_sites():
        parts = _parts(node)
        if parts is None:
            continue
        literal = sum(len(p) for p in parts if p is not None)
        if literal < _MIN_LITERAL:
            continue
        regex = "".join(".*?" if p is None else re.escape(p) for p in parts)
        out.append((re.compile(regex, re.DOTALL), literal, cls))
    out.sort(key=lambda t: -t[1])
    return tuple(out)


def _parts(node: Any) -> list[str | None] | None:
    """A message expression as literal strings and wildcards (None); None when it is
    not built from literals (a variable, a call)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        out: list[str | None] = []
        for v in node.values:
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                out.append(v.value)
            else:
                out.append(None)
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _parts(node.left), _parts(node.right)
        if left is None and right is None:
            return None
        return (left or [None]) + (right or [None])
    return None
