"""Tile IR's limit on elements per tile (:data:`~tilelab.limits.MAX_TILE_ELEMENTS`),
refused with a located error before anything is compiled (a partition's tiles) and before
tileiras runs (a tile inside the kernel): tileiras either rejects such bytecode without a
location or, at the limit, spends minutes and fails.

The limit and its messages live in :mod:`tilelab.limits`: the CPU interpreter enforces
them too.
"""
from __future__ import annotations

import re

from tilelab.compiler.locations import Mapper, locate_frames
from tilelab.compiler.tileir.bytecode import bytecode_tile_shapes
from tilelab.compiler.tileir.parser import TileIRModule
from tilelab.errors import CompileError, SourceLocation
from tilelab.limits import (MAX_TILE_ELEMENTS, partition_limit_message, tile_elements,
                            tile_limit_hint, tile_limit_message)

__all__ = ["check_partition_tiles", "check_bytecode_tiles"]


def check_partition_tiles(lowered, spec) -> None:
    """Refuse a partition whose tiles exceed :data:`MAX_TILE_ELEMENTS`, at the user's
    line of its first store (or the kernel's ``def``), before anything is compiled.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> from tilelab.compiler.signature import spec as S
        >>> sp = NS(specs=(("z", "Out", S(1 << 26, "float32").partition(1 << 25)),))
        >>> lk = NS(name="k", store_spans=(), source_map=NS(filename="k.py", first_line=1,
        ...         orig_text="def k(z):\\n"))
        >>> check_partition_tiles(lk, sp)
        Traceback (most recent call last):
        ...
        tilelab.errors.CompileError: k.py:1:7: partition 'z' of kernel 'k' has tiles of shape (33554432,), 33554432 elements: more than Tile IR's limit of 16777216 elements per tile
        hint: Tile IR tiles hold at most 16777216 elements (2**24); use smaller tiles and loop over the rest (e.g. a ct.Constant block size and a for loop)
    """
    from tilelab.compiler.signature import PartitionSpec

    for name, _kind, s in spec.specs:
        if not isinstance(s, PartitionSpec):
            continue
        if tile_elements(s.tile_shape) <= MAX_TILE_ELEMENTS:
            continue
        raise CompileError(partition_limit_message(name, lowered.name, s.tile_shape),
                           location=_partition_location(lowered, name),
                           hint=tile_limit_hint())


def _partition_location(lowered, name: str) -> SourceLocation | None:
    smap = getattr(lowered, "source_map", None)
    if smap is None:
        return None
    offsets = [s for s, _e, p in getattr(lowered, "store_spans", ()) if p == name]
    text = smap.orig_text
    if offsets:
        o = min(offsets)
    else:  # the parameter in the def line
        m = re.search(r"\bdef\b[^(]*\([^)]*?\b" + re.escape(name) + r"\b", text)
        o = m.end() - len(name) if m else 0
    before = text[:o]
    line = smap.first_line + before.count("\n")
    col = len(before) - (before.rfind("\n") + 1) + 1
    return SourceLocation(smap.filename, line, col)


def check_bytecode_tiles(bytecode: bytes, kernel_name: str, *, disassemble=None,
                         mapper: Mapper | None = None) -> None:
    """Refuse bytecode with a tile past :data:`MAX_TILE_ELEMENTS` before tileiras sees
    it, at the user's line of the first op that makes such a tile.

    ``disassemble(bytecode) -> text or None`` runs ``tileirdisasm -g``; to find the op,
    the oversized shapes are replaced in a copy of the bytecode by small marker shapes
    of the same rank (tileirdisasm refuses the original), and the first op whose text
    has a marker type is the one reported. Costs one pass over the type table when no
    tile is too large.
    """
    shapes = bytecode_tile_shapes(bytecode)
    big = [(tid, kind, dims, off) for tid, kind, dims, off in shapes
           if tile_elements(dims) > MAX_TILE_ELEMENTS]
    if not big:
        return
    first = big[0][2]
    where, chain = None, []
    if disassemble is not None:
        try:
            where, chain = _locate_big(bytecode, shapes, big, disassemble, mapper)
        except Exception:  # noqa: BLE001 - locating is best effort; the error stands
            where, chain = None, []
    msg = tile_limit_message(kernel_name, first)
    if chain:
        msg += " (called from " + ", ".join(chain) + ")"
    raise CompileError(msg, location=where, hint=tile_limit_hint())


def _locate_big(bytecode, shapes, big, disassemble, mapper):
    used = {dims for _t, kind, dims, _o in shapes if kind == "tile"}
    used_views = {dims for _t, kind, dims, _o in shapes if kind != "tile"}
    markers: dict[tuple[int, ...], tuple[int, ...]] = {}
    patched = bytearray(bytecode)
    p = 1 << 20
    for _tid, kind, dims, off in big:
        if dims not in markers:
            while True:
                m = (p,) + (1,) * (len(dims) - 1)
                p >>= 1
                if m not in used and m not in used_views and m not in markers.values():
                    markers[dims] = m
                    break
                if p < 2:
                    return None, []
        width = 8 if kind == "tile" else 4
        for k, d in enumerate(markers[dims]):
            patched[off + width * k:off + width * (k + 1)] = d.to_bytes(width, "little",
                                                                        signed=True)
    text = disassemble(bytes(patched))
    if not text:
        return None, []
    module = TileIRModule(text, full=True)
    needles = ["tile<" + "x".join(map(str, m)) + "x" for m in markers.values()]
    needles += ["tile=(" + "x".join(map(str, m)) + ")" for m in markers.values()]
    for op in module.all_ops():
        if any(n in op.body for n in needles):
            where, chain = locate_frames(module.frames(op), mapper)
            if where is not None:
                return where, chain
    return None, []
