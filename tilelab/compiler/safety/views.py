"""Tiled views of inputs: ``x.tiled_view(tile_shape)`` of a ``tl.In`` array, read with
``tv.load(index)``.

A tiled view is built from the array's own pointer, shape and strides; its tile shape,
padding mode and traversal steps choose how the array is cut into tiles, never its
extent. A load through it keeps cuTile's bounds check (``check_bounds`` absent or the
literal ``True``, the bounds rule of :mod:`tilelab.compiler.safety.bounds`): lanes
outside the array are padding, exactly as for ``ct.load(x, index, shape)``, and the
Tile IR of both is the same bounds-checked ``load_view_tko`` of a view of ``x``, which
the Tile IR validator accepts as such. So a safe kernel may make tiled views of arrays
it only reads and load through them. Writing through one stays refused (the write rules
trace the view back to its array: ``write-input``), as do views of partitions (which
are used only through their own methods) and ``x.slice(...)``, whose bounds are the
kernel's arithmetic.
"""
from __future__ import annotations

import ast
from typing import Any

from tilelab.compiler.safety import bounds
from tilelab.compiler.safety.accesses import AccessKind, record_access
from tilelab.compiler.safety.kinds import read_only

__all__ = ["check_input_view"]

#: methods a safe kernel may call on a tiled view of an input (or make one with)
_VIEW_READS = frozenset({"tiled_view", "load", "num_tiles"})


def check_input_view(checker: Any, call: ast.Call, f: ast.Attribute) -> bool:
    """Judge ``<value>.<method>(...)`` when ``value`` can only be a read-only array
    parameter or a view of one: True when accepted (a tiled view, a bounds-checked load
    through it, its tile count); False leaves the call to the other rules."""
    if f.attr not in _VIEW_READS:
        return False
    roots = checker.expr_roots(f.value)
    if not roots or any(not read_only(checker.kinds.get(r)) for r in roots):
        return False
    if f.attr != "load":
        return True
    what = f"{checker.text(f)}"
    hidden = [a for a in call.args if isinstance(a, ast.Starred)] + \
        [k for k in call.keywords if k.arg is None]
    if hidden:
        checker.fail("call-star", hidden[0], f"{what}() with *args or **kwargs: the "
                                             "checker must see every argument of a "
                                             "memory op")
    bounds.check_read_call(checker, call, what)
    arrays = sorted(roots)
    record_access(checker, call, AccessKind.BOUNDS_CHECKED, what, arrays,
                  f"{what}(...) loads a tile of a tiled view of {', '.join(map(repr, arrays))}"
                  " and keeps cuTile's bounds check: elements outside the array are "
                  "padding, never memory outside it")
    return True
