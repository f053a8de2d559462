"""Partition rules: a block writes exactly its own tile of each tl.Out / tl.InOut.

A partition parameter is used only as ``p.store(tile)`` (or ``p.store(tile=tile)``, or
``p.store(sub_tile, offset=(o0, ...))``, a sub-tile of the own tile or nothing),
``p.load()`` (InOut), ``p.tile_shape``, ``p.tile_index``, ``p.shape``/``ndim``/``dtype``,
in ``tl.load_like(x, p)`` or, in persistent kernels, ``for t in p.tiles()`` with
``at=t`` and ``p.tile_index_of(t)``. Anything else (renaming it, passing it on, taking a
method as a value) would let code the checker cannot see choose the destination.
Stores and loads may carry constant performance hints (``latency=``, ``allow_tma=``,
``padding_mode=``, :mod:`tilelab.compiler.safety.hints`), which do not change what
they touch.
Each accepted construct becomes a :class:`Site` the lowering rewrites, and each store
or load the record of an own-tile access (:mod:`tilelab.compiler.safety.accesses`).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from tilelab.compiler.safety.accesses import AccessKind, record_access
from tilelab.compiler.safety.hints import LOAD_HINTS, STORE_HINTS, hint_keywords
from tilelab.compiler.safety.kinds import OpKind, ParamKind
from tilelab.compiler.safety.optable import CT_OPS

__all__ = ["Site", "PartitionRules", "PARTITION_ATTRS"]

PARTITION_ATTRS = ("store", "load", "tiles", "tile_shape", "tile_index", "tile_index_of",
                   "shape", "ndim", "dtype")


@dataclass(frozen=True)
class Site:
    """A safe construct that lowering rewrites into plain cuTile Python.

    ``kind``: ``store``, ``load``, ``load_like``, ``tile_shape``, ``tile_index``,
    ``tile_index_of`` (the coordinates of a minted tile) or ``tiles`` (the iterator of a
    persistent loop). ``node`` is the Call (or Attribute) to replace; ``value`` the
    stored tile / loaded array expression; ``at`` the persistent tile expression;
    ``offset`` the sub-tile of a ``store`` inside the block's own tile.
    """

    kind: str
    partition: str
    node: ast.AST = field(compare=False)
    value: ast.expr | None = field(default=None, compare=False)
    at: ast.expr | None = field(default=None, compare=False)
    #: the per-axis sub-tile numbers of ``p.store(tile, offset=(o0, ...))`` (the tuple
    #: literal's elements), None for a store of the whole tile
    offset: tuple[ast.expr, ...] | None = field(default=None, compare=False)
    #: (constant parameter, taken when truthy) of each enclosing ``if C:`` / ``if not C:``
    #: on a ct.Constant parameter: the launch knows whether the site runs at all
    guards: tuple[tuple[str, bool], ...] = field(default=(), compare=False)
    #: (keyword, value) of the performance hints passed on to ct.store / ct.load
    #: (:mod:`tilelab.compiler.safety.hints`)
    hints: tuple[tuple[str, ast.expr], ...] = field(default=(), compare=False)


class PartitionRules:
    """Mixin of the function checker: the partition uses of a kernel body."""

    def check_partition_uses(self) -> None:
        for node in self.body:
            if isinstance(node, ast.For) and self.is_tiles_call(node.iter):
                self.check_persistent_loop(node)
        uses = sorted((n for n in self.body
                       if isinstance(n, ast.Name) and n.id in self.partitions),
                      key=lambda n: (n.lineno, n.col_offset))
        for name in uses:
            self.check_partition_use(name)
        if self.persistent_loops:
            for site in self.sites:
                if site.kind in ("store", "load", "load_like") and site.at is None:
                    self.fail("missing-at", site.node,
                              f"{self.text(site.node)} has no tile: this kernel walks its "
                              "tiles with 'for t in p.tiles()', so each access names the "
                              "tile the loop minted",
                              hint="write it inside the loop with at=t, e.g. "
                                   "p.store(tile, at=t) or tl.load_like(x, p, at=t)")

    def is_tiles_call(self, e: ast.AST) -> bool:
        return (isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute)
                and e.func.attr == "tiles" and isinstance(e.func.value, ast.Name)
                and e.func.value.id in self.partitions)

    def check_persistent_loop(self, loop: ast.For) -> None:
        call = loop.iter
        p = call.func.value.id
        if call.args or call.keywords:
            self.fail("tiles-loop", call, f"{p}.tiles() takes no arguments: the schedule "
                                          "decides which tiles each block gets")
        if not isinstance(loop.target, ast.Name):
            self.fail("tiles-loop", loop.target, f"the loop over {p}.tiles() must bind "
                                                 "one name, e.g. 'for t in p.tiles():'")
        var = loop.target.id
        for outer in self.persistent_loops:
            if loop in ast.walk(outer):
                self.fail("tiles-loop", loop, "persistent tile loops cannot be nested: "
                                              "one 'for t in p.tiles()' hands each tile to "
                                              "exactly one block")
        stores = [n for n in self.body if isinstance(n, ast.Name) and n.id == var
                  and isinstance(n.ctx, (ast.Store, ast.Del)) and n is not loop.target]
        if stores:
            self.fail("tile-reassigned", stores[0],
                      f"the tile variable {var!r} minted by {p}.tiles() is reassigned "
                      "inside the loop; stores would no longer go to the tile this block "
                      "owns",
                      hint=f"use another name for the new value; keep {var!r} as the "
                           "loop gave it")
        self.persistent_loops[loop] = var
        self.sites.append(Site("tiles", p, call))

    def minted_at(self, node: ast.AST, at: ast.expr, what: str) -> None:
        """Check that at= (or tile_index_of's argument) is a minted tile variable."""
        index_of = what.endswith(".tile_index_of")
        p = what.split(".")[0]
        if not self.persistent_loops:
            if index_of:
                self.fail("at-not-persistent", at,
                          f"{what}() is only for persistent kernels, which loop over "
                          f"'for t in {p}.tiles()'; this kernel owns one tile",
                          hint=f"use {p}.tile_index for this block's tile coordinates")
            self.fail("at-not-persistent", at, f"at= is only for persistent kernels: "
                                               f"{what} already goes to this block's own "
                                               "tile")
        if isinstance(at, ast.Name):
            cur = self.parents.get(node)
            while cur is not None:
                if cur in self.persistent_loops and self.persistent_loops[cur] == at.id:
                    return
                cur = self.parents.get(cur)
        if index_of:
            self.fail("at-not-minted", at, f"{what}({self.text(at)}) needs a tile minted "
                                           f"by an enclosing 'for t in {p}.tiles()' loop",
                      hint=f"write {p}.tile_index_of(t) with the loop's own t")
        self.fail("at-not-minted", at,
                  f"at={self.text(at)} is not a tile minted by an enclosing "
                  "'for t in p.tiles()' loop; a persistent kernel may only store at "
                  "tiles the loop handed to this block")

    def check_partition_use(self, name: ast.Name) -> None:
        p = name.id
        kind = self.kinds[p]
        if isinstance(name.ctx, (ast.Store, ast.Del)):
            self.fail("partition-reassigned", name, f"partition parameter {p!r} is "
                                                    "reassigned",
                      hint=f"bind new values to another name; {p!r} must keep meaning "
                           "the partition")
        parent = self.parents.get(name)
        if isinstance(parent, ast.Attribute) and parent.value is name:
            self.check_partition_attribute(name, parent)
            return
        if isinstance(parent, ast.keyword):
            parent = self.parents.get(parent)
        if isinstance(parent, ast.Call) and name is not parent.func:
            self.check_partition_argument(name, parent)
            return
        load = f", {p}.load()" if kind == ParamKind.INOUT else ""
        self.fail("partition-escape", name,
                  f"partition {p!r} may only be used as {p}.store(tile){load}, "
                  f"{p}.tile_shape, {p}.tile_index, {p}.shape or in "
                  f"tl.load_like(x, {p}); renaming it, putting it in a tuple or "
                  "returning it would escape the ownership check",
                  hint=f"use {p} directly where you need it")

    def check_partition_attribute(self, name: ast.Name, attr: ast.Attribute) -> None:
        p, kind = name.id, self.kinds[name.id]
        call = self.parents.get(attr)
        called = isinstance(call, ast.Call) and call.func is attr
        a = attr.attr
        if a in ("shape", "ndim", "dtype"):
            return
        if a in ("tile_shape", "tile_index"):
            if called:
                self.fail("partition-attribute", call, f"{p}.{a} is a tuple, not a method")
            if a == "tile_index" and self.persistent_loops:
                self.fail("tile-index-persistent", attr,
                          f"{p}.tile_index is not defined in a persistent kernel: each "
                          "block owns many tiles",
                          hint=f"use {p}.tile_index_of(t) for the tile t of "
                               f"'for t in {p}.tiles()'")
            self.sites.append(Site(a, p, attr))
            return
        if a == "tile_index_of":
            if not called or len(call.args) != 1 or call.keywords:
                self.fail("partition-attribute", attr, f"{p}.tile_index_of(t) takes the "
                                                       f"tile t minted by 'for t in "
                                                       f"{p}.tiles()'")
            self.minted_at(call, call.args[0], f"{p}.tile_index_of")
            self.sites.append(Site("tile_index_of", p, call, at=call.args[0]))
            return
        if a in ("store", "load", "tiles"):
            if not called:
                self.fail("partition-method-value", attr,
                          f"{p}.{a} must be called directly; taking the method as a value "
                          "would let other code choose where it writes")
            if a == "tiles":
                loop = self.parents.get(call)
                if not (isinstance(loop, ast.For) and loop.iter is call):
                    self.fail("tiles-loop", call, f"{p}.tiles() can only be the iterable "
                                                  "of a for loop: 'for t in p.tiles():'")
                return
            if a == "store":
                self.check_store(p, call)
            else:
                self.check_load(p, kind, call)
            return
        self.fail("partition-attribute", attr,
                  f"partition {p!r} has no attribute {a!r}; in a kernel a partition "
                  f"offers {', '.join(PARTITION_ATTRS)}")

    def check_store(self, p: str, call: ast.Call) -> None:
        value = self.store_value(p, call)
        hints = hint_keywords(self, call, STORE_HINTS, f"{p}.store()")
        at = next((k.value for k in call.keywords if k.arg == "at"), None)
        if at is not None:
            self.minted_at(call, at, f"{p}.store")
        offset = next((k.value for k in call.keywords if k.arg == "offset"), None)
        elts = self.store_offset(p, offset) if offset is not None else None
        self.sites.append(Site("store", p, call, value=value, at=at, offset=elts,
                               hints=hints))
        tile = (f"the tile {self.text(at)} that {p}.tiles() handed to this block"
                if at is not None else "this block's own tile")
        what = (f"a sub-tile inside {tile} of {p} (offset= picks which; an offset outside "
                "the tile writes nothing)" if offset is not None else f"{tile} of {p}")
        record_access(self, call, AccessKind.OWN_STORE, self.text(call.func), (p,),
                      f"{p}.store() writes {what} (tl.{self.kinds[p]}): the partition fixes "
                      "the destination, so no two blocks write one element", writes=True)

    def store_value(self, p: str, call: ast.Call) -> ast.expr:
        """The stored tile of ``p.store(...)``: its one positional argument or ``tile=``
        (as ``ct.store`` names it), after refusing every keyword that is not ``tile``,
        ``offset``, ``at`` or a store hint."""
        allowed = ("tile", "at", "offset") + STORE_HINTS
        extra_kw = [k for k in call.keywords if k.arg not in allowed]
        tile_kw = next((k for k in call.keywords if k.arg == "tile"), None)
        star = next((a for a in call.args if isinstance(a, ast.Starred)), None)
        if len(call.args) > 1 or extra_kw or star is not None:
            bad = extra_kw[0] if extra_kw else call if star is not None else call.args[1]
            what = (f"{bad.arg}=" if isinstance(bad, ast.keyword) and bad.arg else
                    "**kwargs" if isinstance(bad, ast.keyword) else
                    "*args" if star is not None else "an index")
            self.fail("partition-store", bad,
                      f"{p}.store() takes the tile (positionally or as tile=), offset= of "
                      "a sub-tile inside this block's own tile, at=t in a persistent "
                      f"kernel and the hints {'= and '.join(STORE_HINTS)}=: the "
                      "destination of every safe store is fixed by the partition, so "
                      f"{what} cannot be chosen",
                      hint=f"write {p}.store(tile) or {p}.store(sub_tile, offset=(o0, "
                           "...)); to choose destinations yourself, use "
                           "@tl.kernel(unsafe=True) with a tl.Raw parameter")
        if call.args and tile_kw is not None:
            self.fail("partition-store", tile_kw,
                      f"{p}.store() is given the tile twice, as its argument and as tile=",
                      hint=f"write {p}.store(tile) or {p}.store(tile=tile)")
        if not call.args and tile_kw is None:
            self.fail("partition-store", call, f"{p}.store() has no tile to store",
                      hint=f"write {p}.store(tile) or {p}.store(tile=tile)")
        return call.args[0] if call.args else tile_kw.value

    def store_offset(self, p: str, offset: ast.expr) -> tuple[ast.expr, ...]:
        """The elements of ``offset=``: a tuple literal of one expression per axis (its
        length is checked against the partition's rank when the kernel is lowered)."""
        if not isinstance(offset, ast.Tuple):
            self.fail("offset-store", offset,
                      f"{p}.store(tile, offset=...) takes a tuple literal of one integer "
                      f"per axis, got {self.text(offset)!r}: the checker must see each "
                      "axis's offset where the store is written",
                      hint=f"write the tuple out, e.g. {p}.store(tile, offset=(0, pos, 0))")
        star = next((e for e in offset.elts if isinstance(e, ast.Starred)), None)
        if star is not None:
            self.fail("offset-store", star,
                      f"{p}.store(tile, offset=...) with a starred element: the checker "
                      "must see one offset per axis",
                      hint="write each axis's offset out")
        if not offset.elts:
            self.fail("offset-store", offset,
                      f"{p}.store(tile, offset=()) names no axis; the offset has one "
                      "integer per axis of the partition",
                      hint=f"write {p}.store(tile) to store the whole tile")
        return tuple(offset.elts)

    def check_load(self, p: str, kind: str, call: ast.Call) -> None:
        if kind == ParamKind.OUT:
            self.fail("partition-read-out", call,
                      f"{p} is tl.Out (write-only): a kernel may not read its outputs",
                      hint=f"declare it '{p}: tl.InOut' to read this block's tile with "
                           f"{p}.load()")
        extra = [k for k in call.keywords if k.arg not in ("at",) + LOAD_HINTS]
        if call.args or extra:
            self.fail("partition-load", call, f"{p}.load() reads this block's own tile "
                                              "and takes no index (only at=t in a "
                                              "persistent kernel and the hints "
                                              f"{'=, '.join(LOAD_HINTS)}=)",
                      hint=f"write {p}.load(); tl.In parameters can be read anywhere with "
                           "ct.load")
        hints = hint_keywords(self, call, LOAD_HINTS, f"{p}.load()")
        at = next((k.value for k in call.keywords if k.arg == "at"), None)
        if at is not None:
            self.minted_at(call, at, f"{p}.load")
        self.sites.append(Site("load", p, call, at=at, hints=hints))
        tile = (f"the tile {self.text(at)} that {p}.tiles() handed to this block"
                if at is not None else "this block's own tile")
        record_access(self, call, AccessKind.OWN_LOAD, self.text(call.func), (p,),
                      f"{p}.load() reads {tile} of {p} (tl.InOut), which no other block "
                      "writes")

    def check_partition_argument(self, name: ast.Name, call: ast.Call) -> None:
        p, kind = name.id, self.kinds[name.id]
        if self.is_load_like(call):
            if call.args and call.args[0] is name:
                if kind == ParamKind.OUT:
                    self.fail("partition-read-out", name,
                              f"{p} is tl.Out (write-only): tl.load_like({p}, ...) would "
                              "read an output",
                              hint=f"declare it '{p}: tl.InOut' and read with {p}.load()")
                self.fail("partition-other-tile", name,
                          f"tl.load_like({p}, ...) would read a tile of the partition {p} "
                          "other than this block's own")
            self.check_load_like(call)
            return
        callee = self.text(call.func)
        op = self.ct_op_name(call.func)
        kind_of = CT_OPS.get(op) if op else None
        if kind_of == OpKind.WRITE:
            self.fail("write-partition", call,
                      f"{callee}() writes partition {p!r} directly; a safe kernel writes a "
                      f"partition only with {p}.store(tile), whose destination the "
                      "partition fixes", hint=write_partition_hint(op, p))
        if kind_of == OpKind.READ:
            if kind == ParamKind.OUT:
                self.fail("partition-read-out", call,
                          f"{p} is tl.Out (write-only): {callee}() would read it",
                          hint=f"declare it '{p}: tl.InOut' and read its tile with "
                               f"{p}.load()")
            self.fail("partition-other-tile", call,
                      f"{callee}() on partition {p!r} could read tiles other blocks write")
        if op is not None:
            self.fail("partition-to-op", call,
                      f"partition {p!r} cannot be passed to {callee}(); inside a kernel it "
                      "is used only through its own methods",
                      hint=f"use {p}.shape, {p}.tile_shape or {p}.tile_index")
        self.fail("partition-escape", call,
                  f"passing partition {p!r} to {callee}() is not allowed: the callee could "
                  "write any tile of it",
                  hint=f"have {callee}() return a tile and write {p}.store(tile) in the "
                       "kernel")

    def check_load_like(self, call: ast.Call) -> None:
        extra = [k for k in call.keywords if k.arg not in ("at",) + LOAD_HINTS]
        if len(call.args) != 2 or extra or any(isinstance(a, ast.Starred) for a in call.args):
            self.fail("load-like-form", call,
                      "tl.load_like takes an array and a partition: tl.load_like(x, p) "
                      "(and at=t in persistent kernels, and the hints "
                      f"{'=, '.join(LOAD_HINTS)}=)",
                      hint="write tl.load_like(x, p), with x an array parameter and p a "
                           "partition parameter of the kernel")
        hints = hint_keywords(self, call, LOAD_HINTS, "tl.load_like()")
        part = call.args[1]
        src = call.args[0]
        if not (isinstance(src, ast.Name) and src.id in self.kinds
                and self.kinds[src.id] not in (ParamKind.CONSTANT,)
                and src.id not in self.partitions and src.id not in self.rebound):
            self.fail("load-like-form", src,
                      f"tl.load_like reads an array parameter of the kernel directly, got "
                      f"{self.text(src)!r}: the launch proves from its shape that every "
                      "block's tile meets the array",
                      hint="pass the array as a parameter and write tl.load_like(x, p)")
        if not (isinstance(part, ast.Name) and part.id in self.partitions):
            self.fail("load-like-form", part,
                      "the second argument of tl.load_like must be a partition parameter "
                      f"(tl.Out or tl.InOut), got {self.text(part)!r}")
        at = next((k.value for k in call.keywords if k.arg == "at"), None)
        if at is not None:
            self.minted_at(call, at, "tl.load_like")
        self.record_load_like(call, src.id, part.id)
        if any(s.node is call for s in self.sites):
            return
        self.sites.append(Site("load_like", part.id, call, value=call.args[0], at=at,
                               guards=self.constant_guards(call), hints=hints))

    def record_load_like(self, call: ast.Call, x: str, p: str) -> None:
        """The record of an accepted ``tl.load_like(x, p)``: launch-proven, unless x is
        a ``tl.Raw`` array that blocks of an unsafe kernel may write."""
        what = f"tl.load_like({x}, {p})"
        if self.kinds[x] == ParamKind.RAW:
            record_access(self, call, AccessKind.UNSAFE, self.text(call.func), (x,),
                          f"{what} reads tl.Raw {x!r}, which blocks of this unsafe kernel "
                          "may write: nothing orders those accesses")
            return
        record_access(self, call, AccessKind.LAUNCH_PROVEN, self.text(call.func), (x,),
                      f"{what} reads the tile of {x!r} at {p}'s position; every launch "
                      f"proves from the shapes that each block's tile meets {x!r} (zero "
                      "padding past its edge; under check_bounds=False, that the tile lies "
                      "wholly inside)")

    def constant_guards(self, node: ast.AST) -> tuple[tuple[str, bool], ...]:
        """The ``if C:`` tests on unrebound ct.Constant parameters around ``node``."""
        out = []
        child, cur = node, self.parents.get(node)
        while cur is not None and cur is not self.func:
            if isinstance(cur, ast.If) and child is not cur.test:
                test, taken = cur.test, child in cur.body
                if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                    test, taken = test.operand, not taken
                if isinstance(test, ast.Name) and test.id not in self.rebound and \
                        self.kinds.get(test.id) == ParamKind.CONSTANT:
                    out.append((test.id, taken))
            child, cur = cur, self.parents.get(cur)
        return tuple(out)


def write_partition_hint(op: str, p: str) -> str:
    """How to write what a cuTile write op ``ct.<op>`` into partition ``p`` meant, safely:
    the own tile with ``p.store``, or, for what ``p.store`` cannot express (elements at
    computed places, accumulation across blocks), the two-launch and opt-out ways."""
    raw = "@tl.kernel(unsafe=True) with a tl.Raw parameter"
    if op.startswith("atomic_"):
        return (f"an atomic accumulates across blocks, which {p}.store(tile) cannot: have "
                f"each block write its partial result into its own tile of a partials "
                f"tensor ({p}.store(partial)) and reduce the partials in a second launch; "
                f"or use {raw} for the atomics (and run it on the CPU interpreter to look "
                "for races)")
    if op == "store":
        return (f"write {p}.store(tile): the partition fixes the destination; a tile "
                f"smaller than the partition's goes inside the own tile with "
                f"{p}.store(sub_tile, offset=(o0, ...))")
    return (f"write {p}.store(tile) with the block's whole tile; to write elements at "
            f"places the kernel computes, use {raw}")
