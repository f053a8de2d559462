"""What the conformance tests of the interpreter ask of a refusal: the line of a kernel's
source it must point at, and the error a one-block launch raised.

Example:
    >>> def f():
    ...     x = 1
    ...     return x
    >>> source_line(f, "return") - source_line(f, "x = 1")
    1
"""
from __future__ import annotations

import inspect
from typing import Any, Callable

import pytest

from tilelab.errors import CompileError
from tilelab.interp import interpret

__all__ = ["source_line", "refusal"]


def source_line(fn: Callable[..., Any], text: str, *, anywhere: bool = False) -> int:
    """The file line of the first source line of ``fn`` that starts with ``text`` (that
    holds it anywhere, with ``anywhere``)."""
    lines, start = inspect.getsourcelines(fn)
    found = (lambda line: text in line) if anywhere else \
        (lambda line: line.strip().startswith(text))
    return start + next(i for i, line in enumerate(lines) if found(line))


def refusal(kernel: Callable[..., Any], *args: Any, cls: type = CompileError,
            foreign: type | None = None) -> CompileError:
    """The ``cls`` error (a CompileError by default) that a one-block ``interpret`` of
    ``kernel`` raises; with ``foreign``, it must also be an instance of that class (cuTile's)."""
    with pytest.raises(cls) as info:
        interpret(kernel, *args, grid=(1,))
    assert isinstance(info.value, CompileError)
    if foreign is not None:
        assert isinstance(info.value, foreign), type(info.value).__mro__
    return info.value
