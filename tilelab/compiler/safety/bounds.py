"""The bounds rule, in one place: where a read may skip its bounds check, how the
launch proves it, and what the lowering emits.

The ladder of proofs (cheapest first):

1. A read keeps cuTile's bounds check (``check_bounds`` absent or the literal
   ``True``): out-of-bounds elements of a tile are padding, never memory outside the
   array. cuTile leaves one case undefined, a tile entirely outside its array; for
   ``tl.load_like`` the launch proves from the shapes that every block's tile meets the
   array (:func:`prove_launch`), for the user's own ``ct.load`` indices it cannot (the
   trusted base, docs/safety.md).
2. ``@tl.kernel(check_bounds=False)``: the lowering emits partition stores, ``p.load()``
   and ``tl.load_like(x, p)`` without bounds checks. That is sound only when every tile
   of every partition lies inside its tensor and every ``tl.load_like`` array covers the
   partition's whole tile grid; :func:`prove_launch` checks exactly that from the shapes,
   at every launch (``tl.load_like`` reads a parameter directly, so the launch knows
   which array it reads).
3. Anything else that turns a bounds check off (``check_bounds=False`` on ``ct.load`` /
   ``ct.gather`` written by the user, a non-literal value, a hidden ``**kwargs``) cannot
   be proven here: it needs ``@tl.kernel(unsafe=True)``.
"""
from __future__ import annotations

import ast
from typing import Any

from tilelab.errors import LaunchError

__all__ = ["check_read_call", "prove_launch", "load_keywords", "store_keywords"]


def check_read_call(checker: Any, call: ast.Call, callee: str) -> None:
    """Rule 3: a user's read keeps its bounds check unless the kernel is unsafe."""
    kw = next((k for k in call.keywords if k.arg == "check_bounds"), None)
    if kw is None or checker.unsafe:
        return
    if isinstance(kw.value, ast.Constant) and kw.value.value is True:
        return
    checker.fail("unchecked-read", kw,
                 f"{callee}(..., check_bounds={checker.text(kw.value)}) reads without "
                 "bounds checks, which only a read the launch proves in bounds may do in "
                 "a safe kernel; this one it cannot prove")


def prove_launch(kernel_name: str, analysis: Any, specs, partitions,
                 check_bounds: bool) -> None:
    """The launch's proofs: every tl.load_like tile meets its array (rule 1's one
    assumption about cuTile, see docs/safety.md), and, for check_bounds=False kernels,
    no tile crosses an edge (rule 2)."""
    from tilelab.compiler.signature import ArraySpec

    if not check_bounds:
        for n, s in partitions:
            for dim, (size, tile) in enumerate(zip(s.array.shape, s.tile_shape)):
                if size % tile:
                    raise LaunchError(
                        f"{kernel_name}() is compiled with check_bounds=False, but partition "
                        f"{n!r} ({s.array.shape} in tiles {s.tile_shape}) has a partial "
                        f"tile in dimension {dim}; its stores would write out of bounds",
                        hint="use a tile shape that divides the tensor, or "
                             "check_bounds=True")
    by_name = {name: s for name, _, s in specs}
    parts = dict(partitions)
    for site in analysis.sites:
        if site.kind != "load_like" or not isinstance(site.value, ast.Name):
            continue
        if any(bool(getattr(by_name.get(c), "value", True)) != taken
               for c, taken in site.guards):
            continue  # under an 'if C:' this launch's constants never take
        arr = by_name.get(site.value.id)
        part = parts[site.partition]
        if not isinstance(arr, ArraySpec):
            continue
        what = f"tl.load_like({site.value.id}, {site.partition})"
        if arr.ndim != len(part.grid):
            raise LaunchError(f"{kernel_name}(): {what} reads tiles of rank "
                              f"{len(part.grid)} from {site.value.id!r} of rank {arr.ndim}",
                              hint=f"pass {site.value.id} with the partition's rank")
        if check_bounds:
            reach = tuple(-(-a // t) for a, t in zip(arr.shape, part.tile_shape))
            if any(r < g for r, g in zip(reach, part.grid)):
                raise LaunchError(
                    f"{kernel_name}(): {what}: {site.value.id!r} of shape {arr.shape} has "
                    f"tiles {reach} of {site.partition}'s tile shape {part.tile_shape}, "
                    f"fewer than the partition's grid {part.grid}, so some blocks' tiles "
                    "would lie entirely outside it",
                    hint=f"pass {site.value.id} at least as large as the partition, minus "
                         "its last partial tile")
        else:
            need = tuple(g * t for g, t in zip(part.grid, part.tile_shape))
            if any(a < b for a, b in zip(arr.shape, need)):
                raise LaunchError(
                    f"{kernel_name}() is compiled with check_bounds=False, but {what} "
                    f"would read tiles covering {need} from an array of shape {arr.shape}",
                    hint="pass arrays at least as large as the partition, or "
                         "check_bounds=True")


def load_keywords(ct: str, check_bounds: bool) -> str:
    """Keyword arguments of a lowered tile load: zero padding, or (proven) no checks."""
    if check_bounds:
        return f", padding_mode={ct}.PaddingMode.ZERO"
    return ", check_bounds=False"


def store_keywords(check_bounds: bool) -> str:
    """Keyword arguments of a lowered partition store."""
    return "" if check_bounds else ", check_bounds=False"
