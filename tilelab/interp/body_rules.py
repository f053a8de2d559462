"""What a ``ct.reduce``/``ct.scan`` combiner may not do, checked while it runs.

Why: cuTile compiles a custom combiner into the body of one reduction (or scan)
operation, and refuses a body that branches on a run-time value, loops, touches memory
(loads, stores, atomics, ``print``, ``assert_``) or reduces again: "Branching inside
reduction body is not supported", "Loops inside scan body are not supported",
"Operations with memory effects are not supported inside reduction body", "Nested
scan/reduction is not supported". The interpreter calls the combiner as Python on half
tiles, where all of these would simply run. So while a combiner runs, the interpreter's
ops that cuTile forbids there refuse with cuTile's words (:data:`MESSAGES`) at the
combiner's line. An ``if`` on a compile-time constant is no branch (cuTile folds it);
one on a tile is.

Example:
    >>> with restricted("reduction"):
    ...     try:
    ...         refuse("loop")
    ...     except Exception as e:
    ...         print(e.message)
    Loops inside reduction body are not supported
"""
from __future__ import annotations

import contextlib
import functools
import threading
from typing import Any, Callable, Iterator

from tilelab.interp import _cutile
from tilelab.interp.context import compile_error

__all__ = ["MESSAGES", "restricted", "refuse", "combiner", "guarded", "current",
           "looping_range"]

#: cuTile's refusals by what the body did; ``{kind}`` is "reduction" or "scan"
MESSAGES = {
    "branch": "Branching inside {kind} body is not supported. "
              "Consider ct.where() as a workaround.",
    "loop": "Loops inside {kind} body are not supported",
    "memory": "Operations with memory effects are not supported inside {kind} body",
    "nested": "Nested scan/reduction is not supported",
}

_HINTS = {
    "branch": "choose between values with ct.where(cond, a, b)",
    "loop": "a combiner combines two values once: move the loop out of it",
    "memory": "load or print outside the combiner and pass values in through the tile",
    "nested": "reduce in two steps: reduce once, then reduce the result",
}

_state = threading.local()


def current() -> str | None:
    """The kind of body running now ("reduction", "scan"), or None outside one."""
    return getattr(_state, "kind", None)


@contextlib.contextmanager
def restricted(kind: str) -> Iterator[None]:
    """Run the enclosed code as the body of a ``kind`` operation."""
    previous = current()
    _state.kind = kind
    try:
        yield
    finally:
        _state.kind = previous


def refuse(what: str) -> None:
    """Refuse ``what`` ("branch", "loop", "memory", "nested") if a combiner is running."""
    kind = current()
    if kind is not None:
        raise compile_error(MESSAGES[what].format(kind=kind), hint=_HINTS[what],
                            foreign=_cutile.exception_classes()["TileSyntaxError"])


def combiner(func: Callable[..., Any], kind: str) -> Callable[..., Any]:
    """``func`` (a combiner given to ``ct.reduce``/``ct.scan``) run as a ``kind`` body."""
    @functools.wraps(func)
    def body(*args: Any, **kwargs: Any) -> Any:
        with restricted(kind):
            return func(*args, **kwargs)
    return body


def guarded(impl: Callable[..., Any], what: str) -> Callable[..., Any]:
    """``impl`` (an op) refusing to run inside a combiner as ``what``."""
    @functools.wraps(impl)
    def op(*args: Any, **kwargs: Any) -> Any:
        if getattr(_state, "kind", None) is not None:
            refuse(what)
        return impl(*args, **kwargs)
    return op


def looping_range(base: type) -> type:
    """``base`` (the kernel's ``range``) whose iteration, a loop, refuses to start inside
    a combiner (making a range there is no loop; ``static_iter`` unrolls it)."""
    class KernelRange(base):   # type: ignore[misc, valid-type]
        def __iter__(self) -> Any:
            if getattr(_state, "kind", None) is not None:
                refuse("loop")
            return super().__iter__()

    KernelRange.__name__ = KernelRange.__qualname__ = base.__name__
    KernelRange.__doc__ = base.__doc__
    KernelRange.__module__ = base.__module__
    return KernelRange
