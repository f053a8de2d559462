"""cuTile's limit on nested calls of tile functions, kept by the interpreter.

Why: cuTile compiles a helper call by inlining the helper's body, and refuses a call
nested 1000 deep or more (the kernel counts as depth 1, each call adds one: a
``TileRecursionError``, "Maximum recursion depth (1000) reached while inlining a function
call", at the call that goes too deep). The interpreter runs helpers as Python calls, each
a few Python frames deep, so without its own count Python's recursion limit (1000 frames)
ends a kernel after about 300 nested helpers, where cuTile accepts up to 999, and reports a
runaway recursion as a Python ``RecursionError``. Here every call of a tile function
counts its depth in the running launch: the call that would be the 1000th nested one is
refused with cuTile's words and class, and while a kernel runs Python's recursion limit
is raised far enough that 999 nested helpers fit.

Example:
    >>> MAX_INLINE_DEPTH
    1000
"""
from __future__ import annotations

import functools
import sys
import threading
from typing import Any, Callable

from tilelab.interp import _cutile
from tilelab.interp.context import compile_error

__all__ = ["MAX_INLINE_DEPTH", "depth_counted"]

#: cuTile's ``MAX_RECURSION_DEPTH``: a call whose depth (kernel = 1) would pass it is refused
MAX_INLINE_DEPTH = 1000

#: Python frames one tile-function call may take in the interpreter (the rebuilt
#: function and its wrappers), with room for the ops at the innermost call
_FRAMES_PER_CALL = 8
_FRAMES_SPARE = 2000

_local = threading.local()


def depth_counted(run: Callable[..., Any]) -> Callable[..., Any]:
    """``run`` (a tile function rebuilt for the interpreter) counting its call depth:
    refused with cuTile's TileRecursionError where cuTile's inlining would go past
    :data:`MAX_INLINE_DEPTH`; the outermost call raises Python's recursion limit for the
    calls it makes (and restores it when it returns)."""

    @functools.wraps(run)
    def counted(*args: Any, **kwargs: Any) -> Any:
        depth = getattr(_local, "depth", 0) + 1
        if depth > MAX_INLINE_DEPTH:
            raise compile_error(
                f"Maximum recursion depth ({MAX_INLINE_DEPTH}) reached while inlining a "
                f"function call",
                hint="cuTile inlines every helper call: end the recursion sooner (a "
                     "constant argument that decreases), or write it as a loop",
                foreign=_cutile.exception_classes()["TileRecursionError"])
        _local.depth = depth
        old_limit = None
        if depth == 1:
            old_limit = sys.getrecursionlimit()
            needed = _stack_depth() + MAX_INLINE_DEPTH * _FRAMES_PER_CALL + _FRAMES_SPARE
            if needed > old_limit:
                sys.setrecursionlimit(needed)
        try:
            return run(*args, **kwargs)
        finally:
            _local.depth = depth - 1
            if old_limit is not None:
                sys.setrecursionlimit(old_limit)
    return counted


def _stack_depth() -> int:
    """How many Python frames are on the stack now."""
    n, frame = 0, sys._getframe(1)
    while frame is not None:
        n, frame = n + 1, frame.f_back
    return n
