"""``ct.static_assert`` conditions evaluated as plain Python, as cuTile evaluates them.

Why: cuTile evaluates the condition of ``static_assert`` at compile time with Python's
own semantics: a helper it calls runs as ordinary Python, so ``factorial(n)`` with a
loop over ``range(1, n + 1)`` folds to a constant. The interpreter runs the kernel line
first, with kernel semantics, where ``range`` yields run-time int32 scalars (cuTile's
loop variables), so the helper's result is a run-time value that ``static_assert`` would
refuse. When that happens, the condition is evaluated once more from the call's source
text, with Python's builtins and the helpers as their module defines them (not the
interpreter's rebuilds), and with the caller's local values; the kernel's own locals
must all be compile-time constants (a run-time value makes the condition run-time in
cuTile too, and the refusal stands).

Example:
    >>> static_condition_source is not None
    True
"""
from __future__ import annotations

import ast
import builtins
import linecache
import sys
from types import FrameType
from typing import Any

from tilelab.interp.context import active, user_frame
from tilelab.interp.values.tile import Tile

__all__ = ["static_condition_source", "reevaluate_static_argument"]

_TREES: dict[tuple[str, int], ast.Module | None] = {}


def _tree(filename: str) -> ast.Module | None:
    """The parsed source of a file (or a notebook cell, through ``linecache``)."""
    lines = linecache.getlines(filename)
    key = (filename, hash(tuple(lines)))
    if key not in _TREES:
        try:
            _TREES[key] = ast.parse("".join(lines)) if lines else None
        except SyntaxError:
            _TREES[key] = None
    return _TREES[key]


def static_condition_source(frame: FrameType, argument: int = 0) -> ast.expr | None:
    """The expression of positional ``argument`` of the call that ``frame`` is making
    (found by the call's position in its file), or None when it cannot be read."""
    code = frame.f_code
    positions = list(code.co_positions())
    index = frame.f_lasti // 2
    if not 0 <= index < len(positions):
        return None
    line, end_line, col, end_col = positions[index]
    tree = _tree(code.co_filename)
    if tree is None or line is None:
        return None
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and node.lineno == line and node.col_offset == col
                and node.end_lineno == end_line and node.end_col_offset == end_col):
            return node.args[argument] if len(node.args) > argument else None
    return None


def _is_constant(value: Any) -> bool:
    return not isinstance(value, Tile) or (value.is_constant and value.ndim == 0)


def reevaluate_static_argument(argument: int = 0) -> tuple[bool, Any]:
    """(True, value) of positional ``argument`` of the ``static_assert`` call running now,
    evaluated as plain Python (see the module's docstring); (False, None) when it cannot
    be: no readable source, a local run-time value, or an exception."""
    frame = user_frame(sys._getframe(1))
    if frame is None:
        return False, None
    expr = static_condition_source(frame, argument)
    if expr is None:
        return False, None
    local_values = frame.f_locals
    used = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}
    if any(name in local_values and not _is_constant(local_values[name]) for name in used):
        return False, None
    module = sys.modules.get(frame.f_globals.get("__name__", ""))
    source_globals = dict(module.__dict__ if module is not None else frame.f_globals)
    source_globals["__builtins__"] = builtins
    state = active()
    state.static_python = True   # (a run-time tile may not become an int or a bool)
    try:
        compiled = compile(ast.Expression(expr), frame.f_code.co_filename, "eval")
        return True, eval(compiled, source_globals, dict(local_values))
    except Exception:   # (the kernel-semantics value and its refusal stand)
        return False, None
    finally:
        state.static_python = False
