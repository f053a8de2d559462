"""What cuTile checks in tilelab's device helpers on the paths a run does not take.

Why: cuTile compiles (and type-checks) both branches of an ``if`` whose condition is
known only at run time; the interpreter runs the branch taken. The guarded store that
``p.store(tile, offset=...)`` lowers to (``sub_tile_store`` of
:mod:`tilelab.compiler.tile_index`) stores only when its guard holds, so an offset cuTile
refuses (a float) would be refused on the CPU only when the guard held, and run
silently when it failed. Before such a helper runs, the interpreter checks here what
cuTile checks in its untaken branch, with the message of the op itself, at the user's
line that called the helper.

The helpers are recognized by module and name, as the lowering calls them (the frozen
copy keeps the module name); the interpreter does not import the compiler (docs/architecture.md, "Layers").

Example:
    >>> device_check(len) is None
    True
"""
from __future__ import annotations

import functools
import types
from typing import Any, Callable

from tilelab.interp.ops.memory_args import check_hints, check_index_types

__all__ = ["device_check", "with_device_check"]

#: the module whose helpers lowered kernels call (by name; never imported here)
DEVICE_MODULE = "tilelab.compiler.tile_index"


def _sub_tile_store(array: Any, tile_index: Any, tile_shape: Any, tile: Any,
                    offset: Any, latency: Any = None, allow_tma: Any = None) -> None:
    """The index the helper's guarded ``ct.store`` receives is
    ``tile_index[d] * per + offset[d]`` (``per`` a Python int): its items have the types
    of ``tile_index[d] * 1 + offset[d]``, which ``ct.store`` requires to be signed
    integer scalars whatever the guard says; its hints (``latency``, ``allow_tma``) are
    checked as cuTile checks them. (Ranks and shapes are the helper's own static
    checks, which run on every call.)"""
    check_hints(latency, allow_tma)
    if not (isinstance(tile_index, tuple) and isinstance(offset, tuple)
            and len(tile_index) == len(offset)):
        return
    check_index_types(tuple(t * 1 + o for t, o in zip(tile_index, offset)), "store")


_CHECKS: dict[str, Callable[..., None]] = {"sub_tile_store": _sub_tile_store}


def device_check(fn: Any) -> Callable[..., None] | None:
    """The check to run before device helper ``fn`` (None: ``fn`` is no such helper)."""
    if not isinstance(fn, types.FunctionType) or fn.__module__ != DEVICE_MODULE:
        return None
    return _CHECKS.get(fn.__name__)


def with_device_check(rebuilt: types.FunctionType,
                      check: Callable[..., None]) -> Callable[..., Any]:
    """``rebuilt`` (a device helper rebuilt for the interpreter) running ``check`` on
    its arguments first."""
    @functools.wraps(rebuilt)
    def checked(*args: Any, **kwargs: Any) -> Any:
        check(*args, **kwargs)
        return rebuilt(*args, **kwargs)
    return checked
