"""cuTile's refusal for a Python error that a kernel's own code raised while it ran.

Why: the interpreter runs a kernel's body as Python, so what cuTile's compiler refuses
while inlining it (unpacking a tuple of the wrong length, a missing dictionary key,
calling what is not callable, an exception inside ``ct.static_eval``) surfaces as a plain
Python error. cuTile reports each with a message and an exception class of its own, and a
port from cuTile catches those (``pytest.raises(TileValueError, match="Too few values
to unpack")``). :func:`cutile_refusal` recognises those errors by class, message and
place (the instruction or library function that raised them) and says them as cuTile
does; any other error stays Python's, as before.

Example:
    >>> _unpack_message(ValueError("not enough values to unpack (expected 3, got 2)"))
    'Too few values to unpack (expected 3, got 2)'
"""
from __future__ import annotations

import ast
import dis
import re
from types import FrameType, TracebackType
from typing import Callable

from tilelab.errors import CompileError, SourceLocation
from tilelab.interp import _cutile
from tilelab.interp.context import function_source, location_at, location_of_frame

__all__ = ["cutile_refusal"]

#: the static helpers whose argument cuTile evaluates as Python at compile time, by the
#: argument's place: how cuTile names it in "Exception was raised inside ..."
_STATIC_ARGS = {
    ("static_eval", 0): "static_eval()",
    ("static_assert", 0): "static_assert() condition",
    ("static_assert", 1): "static_assert() message",
    ("static_iter", 0): "static_iter() iterable",
}

_FEW = re.compile(r"not enough values to unpack \(expected (\d+), got (\d+)\)")
_MANY = re.compile(r"too many values to unpack \(expected (\d+)(?:, got (\d+))?\)")
_NOT_CALLABLE = re.compile(r"'(\w+)' object is not callable")
_NO_FIELD = re.compile(r"(\w+)\.__init__\(\) got an unexpected keyword argument '(\w+)'")
_SUBSCRIPT = {dis.opmap[n] for n in ("BINARY_SUBSCR",) if n in dis.opmap}


def cutile_refusal(exc: BaseException, tb: TracebackType | None,
                   is_tile_code: Callable[[FrameType], bool]) -> CompileError | None:
    """cuTile's refusal of the Python error ``exc`` raised while a block ran (``tb`` its
    traceback; ``is_tile_code`` tells the kernel's and its helpers' frames), at the place
    cuTile names; None when cuTile says nothing of its own about it."""
    steps = []
    while tb is not None:
        steps.append((tb.tb_frame, tb.tb_lasti))
        tb = tb.tb_next
    tile_steps = [(f, i) for f, i in steps if is_tile_code(f)]
    if not tile_steps:
        return None
    classes = _cutile.exception_classes()
    static = _inside_static_argument(tile_steps)
    if static is not None:
        where, location = static
        text = str(exc)
        return CompileError(f"Exception was raised inside {where} ({type(exc).__name__}"
                            f"{': ' + text if text else ''})", location=location,
                            foreign=classes["TileStaticEvalError"],
                            hint="the expression runs as Python when cuTile compiles the "
                                 "kernel: make it valid for these arguments")
    frame, lasti = tile_steps[-1]
    here = location_of_frame(frame, lasti)
    raised_here = steps[-1][0] is frame    # by the kernel's own instruction, not a callee
    if isinstance(exc, ValueError) and raised_here:
        message = _unpack_message(exc)
        if message is not None:
            return CompileError(message, location=here, foreign=classes["TileValueError"])
    if isinstance(exc, KeyError) and raised_here and exc.args and \
            frame.f_code.co_code[lasti] in _SUBSCRIPT:
        return CompileError(f"Key '{exc.args[0]}' not found in dictionary", location=here,
                            foreign=classes["TileTypeError"])
    if isinstance(exc, TypeError):
        found = _NOT_CALLABLE.fullmatch(str(exc))
        if found is not None and raised_here:
            return CompileError(f"Cannot call an object of type {found.group(1)}",
                                location=here, foreign=classes["TileTypeError"])
        innermost = steps[-1][0].f_code
        found = _NO_FIELD.fullmatch(str(exc))
        if found is not None and innermost.co_name == "replace" and \
                innermost.co_filename.endswith("dataclasses.py"):
            return CompileError(f"Dataclass '{found.group(1)}' has no such field "
                                f"'{found.group(2)}'", location=here,
                                foreign=classes["TileTypeError"])
    return None


def _unpack_message(exc: ValueError) -> str | None:
    """cuTile's words for Python's unpacking errors (Python 3.11 gives no count of the
    values for too many)."""
    text = str(exc)
    found = _FEW.fullmatch(text)
    if found is not None:
        return f"Too few values to unpack (expected {found[1]}, got {found[2]})"
    found = _MANY.fullmatch(text)
    if found is not None:
        got = f", got {found[2]}" if found[2] else ""
        return f"Too many values to unpack (expected {found[1]}{got})"
    return None


def _inside_static_argument(tile_steps: list[tuple[FrameType, int]]
                            ) -> tuple[str, SourceLocation] | None:
    """How cuTile names the static argument (``static_eval()``) that the outermost of
    these frames was evaluating when the error rose, with the static call's place; None
    when none was."""
    for frame, lasti in tile_steps:
        found = _static_call_around(frame, lasti)
        if found is not None:
            return found
    return None


def _static_call_around(frame: FrameType, lasti: int
                        ) -> tuple[str, SourceLocation] | None:
    code = frame.f_code
    where = location_of_frame(frame, lasti)
    if where.filename != code.co_filename:
        return None                     # (a generated file's map: no source positions)
    source = function_source(code)
    if source is None or source[0].name != code.co_name:
        return None
    func, line0, indent = source
    line, col = where.line - line0, where.col - 1 - indent
    for node in ast.walk(func):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else \
            node.func.id if isinstance(node.func, ast.Name) else None
        for index, arg in enumerate(node.args):
            label = _STATIC_ARGS.get((name or "", index))
            if label is not None and _contains(arg, line, col):
                return label, location_at(code.co_filename, line0 + node.lineno,
                                          node.col_offset + indent)
    return None


def _contains(node: ast.expr, line: int, col: int) -> bool:
    """Whether (``line``, 0-based ``col``) of the function's source lies in ``node``."""
    end_line = node.end_lineno or node.lineno
    end_col = node.end_col_offset if node.end_col_offset is not None else 1 << 30
    return (node.lineno, node.col_offset) <= (line, col) < (end_line, end_col)
