"""Performance hints of the safe memory constructs: ``latency=``, ``allow_tma=`` and
``padding_mode=``.

``p.store(tile, latency=3, allow_tma=False)``, ``p.load(latency=2)`` and
``tl.load_like(x, p, padding_mode=ct.PaddingMode.NEG_INF)`` pass these keywords on to
the ``ct.store`` / ``ct.load`` they lower to. A hint changes how cuTile moves a tile,
never which elements: the destination of a store stays the partition's, the source of a
load the partition's position, and every load keeps its bounds check (``padding_mode``
only chooses the value of the lanes outside the array). So they cannot break a promise.

What the checker does insist on is that a hint is a constant it sees, so that a hint can
never carry anything else into the lowered code: a literal of the hint's type, a
``ct.Constant`` parameter of the kernel, a module-level constant of the hint's type
(snapshotted like every name the check resolves), or a local name bound only to such
values. A call, a computed value or a partition is refused (rule ``hint-value``).
"""
from __future__ import annotations

import ast
from typing import Any

from tilelab.compiler.safety.kinds import ParamKind
from tilelab.compiler.safety.scope import UNRESOLVED

__all__ = ["STORE_HINTS", "LOAD_HINTS", "hint_keywords"]

#: the hints ``p.store`` takes (those of ``ct.store`` that leave the destination alone)
STORE_HINTS = ("latency", "allow_tma")
#: the hints ``p.load()`` and ``tl.load_like`` take (those of ``ct.load`` that leave the
#: source and the bounds check alone)
LOAD_HINTS = ("latency", "allow_tma", "padding_mode")

#: what each hint's value must be, in words (for messages)
_WANTS = {"latency": "an int from 1 to 10", "allow_tma": "a bool",
          "padding_mode": "a member of ct.PaddingMode"}
_EXAMPLE = {"latency": "latency=3", "allow_tma": "allow_tma=False",
            "padding_mode": "padding_mode=ct.PaddingMode.ZERO"}


def hint_keywords(checker: Any, call: ast.Call, allowed: tuple[str, ...],
                  what: str) -> tuple[tuple[str, ast.expr], ...]:
    """The hints among ``call``'s keywords (those named in ``allowed``), each checked
    to be a constant of its kind; ``what`` names the construct in messages."""
    out = []
    for kw in call.keywords:
        if kw.arg in allowed:
            _check_value(checker, kw.arg, kw.value, what, set())
            out.append((kw.arg, kw.value))
    return tuple(out)


def _fits(name: str, value: Any) -> bool:
    """Whether a Python value is a valid value of hint ``name`` (None: cuTile's
    default)."""
    if value is None:
        return True
    if name == "latency":
        return type(value) is int and 1 <= value <= 10
    if name == "allow_tma":
        return type(value) is bool
    import cuda.tile as ct

    return type(value) is ct.PaddingMode


def _check_value(checker: Any, name: str, e: ast.expr, what: str, seen: set) -> None:
    why = _why_not(checker, name, e, seen)
    if why is not None:
        checker.fail("hint-value", e,
                     f"{what}: {name}={checker.text(e)} is not a constant hint ({why}): "
                     f"{name}= takes {_WANTS[name]}, written as a literal, a ct.Constant "
                     "parameter or a module-level constant, so that a hint changes only how "
                     "the tile moves",
                     hint=f"write {_EXAMPLE[name]}, or pass the value as a ct.Constant "
                          "parameter")


def _why_not(checker: Any, name: str, e: ast.expr, seen: set) -> str | None:
    """Why ``e`` is not a constant value of hint ``name`` (None: it is one)."""
    if isinstance(e, ast.Constant):
        return None if _fits(name, e.value) else f"{checker.text(e)} is not {_WANTS[name]}"
    chain = checker.chain(e)
    if chain is None:
        return f"{checker.text(e)} is computed"
    if chain[0] in checker.bound:
        if len(chain) == 1:
            return _why_not_local(checker, name, e.id, seen)
        return f"{checker.text(e)} is an attribute of a local value"
    obj = checker.resolve(e)
    if obj is UNRESOLVED:
        checker.unresolved(e)   # deferred: judged again when the kernel is compiled
        return None
    return None if _fits(name, obj) else f"{checker.text(e)} is {obj!r}, not {_WANTS[name]}"


def _why_not_local(checker: Any, name: str, n: str, seen: set) -> str | None:
    """A name the function binds: a ``ct.Constant`` parameter it never rebinds, or a
    local whose every binding is ``n = <constant hint value>``."""
    if checker.kinds.get(n) == ParamKind.CONSTANT:
        return f"ct.Constant parameter {n!r} is reassigned" if n in checker.rebound else None
    if n in checker.kinds:
        return f"{n!r} is a parameter that is not a ct.Constant"
    if n in seen:
        return f"{n!r} is defined in terms of itself"
    values = _local_values(checker, n)
    if values is None:
        return (f"{n!r} is bound by something other than 'name = value' (a loop, an "
                "unpacking, an augmented assignment, a walrus or a lambda)")
    for v in values:
        why = _why_not(checker, name, v, seen | {n})
        if why is not None:
            return f"{n!r} is bound to {checker.text(v)}, and {why}"
    return None


def _local_values(checker: Any, n: str) -> list[ast.expr] | None:
    """The values of every ``n = value`` in the function, or None when ``n`` is also
    bound any other way."""
    values, plain = [], set()
    for node in checker.nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name) and node.targets[0].id == n:
            values.append(node.value)
            plain.add(id(node.targets[0]))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and \
                node.target.id == n and node.value is not None:
            values.append(node.value)
            plain.add(id(node.target))
    for node in checker.nodes:
        if isinstance(node, ast.Name) and node.id == n and \
                isinstance(node.ctx, (ast.Store, ast.Del)) and id(node) not in plain:
            return None
        if isinstance(node, ast.arg) and node.arg == n:
            return None
    return values


