"""The checks of the Tile IR validator: what a safe kernel's Tile IR may do with memory
(the rules are listed in :mod:`tilelab.compiler.tileir`), traced through the parsed
module to the kernel's parameters; and :func:`check_tileir`, the validator's entry
point.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from tilelab.compiler.calling_convention import Slot, arg_slots
from tilelab.compiler.locations import Mapper, location_mapper, locate_frames
from tilelab.compiler.safety.kinds import is_partition
from tilelab.compiler.tileir.ops import NON_MEMORY_OPS, REFUSED_OPS, WRITE_OPS
from tilelab.compiler.tileir.parser import (VALUE, Arg, Entry, Op, TileIRModule, base_value,
                                            before_types, split_loc, top_split)
from tilelab.compiler.tileir.report import (INTERNAL_HINT, CheckReport, InternalSafetyError,
                                            OpVerdict)

__all__ = ["Checker", "check_tileir", "sub_tile_store_line"]

_VIEW_OPERAND = re.compile(r"(%[\w$.-]+(?:#\d+)?)\s*\[")
_INBOUNDS = re.compile(r"\binbounds\s*=\s*\[([^\]]*)\]")
_PV_TILE = re.compile(r"partition_view<\s*tile=\(([\dx]*)\)")
_DIM_MAP = re.compile(r"dim_map\s*=\s*\[([^\]]*)\]")
_TOKEN_KW = re.compile(r"\btoken\s*=")
_I1_TYPE = re.compile(r"(?:^|x|<)i1>$")
_LESS_THAN = re.compile(r"\s*less_than\b")
_UNSIGNED = re.compile(r",\s*unsigned\b")
_TENSOR_VIEW = re.compile(r"\s*(%[\w$.#-]+)\s*,\s*shape\s*=\s*\[([^\]]*)\]\s*,\s*"
                          r"strides\s*=\s*\[([^\]]*)\]")


@dataclass
class _Violation:
    op: Op | None
    message: str


#: what a refused op was, by its name (the verdict's ``access``)
_REFUSED_ACCESS = {"store_view_tko": "store", "load_view_tko": "load",
                   "load_ptr_tko": "gather"}
_PADDING = re.compile(r"padding_value\s*=\s*([\w.+-]+)")


class Checker:
    """The rules over one parsed module, for one kernel's lowering and specialization:
    :meth:`check` decides every memory op (``decided``, for the report's verdicts) and
    collects the ``violations``; the tracing methods (:meth:`view_param`,
    :meth:`slot_of`) are what the grid-dependency analysis (:mod:`.pdl`) reads too."""

    def __init__(self, module: TileIRModule, lowered, spec, kernel_name: str):
        from tilelab.compiler.signature import PartitionSpec

        self.m = module
        self.lowered = lowered
        self.spec = spec
        self.kernel = kernel_name
        self.kinds = {name: kind for name, kind, _ in spec.specs}
        self.specs = {name: s for name, _, s in spec.specs}
        self.partitions = {n: s for n, s in self.specs.items() if isinstance(s, PartitionSpec)}
        self.store_params = frozenset(getattr(lowered, "store_params", frozenset()))
        self.unchecked = frozenset(getattr(lowered, "unchecked_params", frozenset()))
        self.offset_params = frozenset(getattr(lowered, "offset_store_params", frozenset()))
        plan = getattr(spec, "plan", None)
        self.bounds_proven = plan is not None and not getattr(plan, "check_bounds", True)
        self.slots = arg_slots(spec.layouts)
        self.violations: list[_Violation] = []
        self.report = CheckReport()
        #: (op, access, param, accepted, reason) of every memory op decided
        self.decided: list[tuple[Op, str, str | None, bool, str]] = []

    def contiguous_last(self, p: str) -> bool:
        """Whether the specialization promises p's last stride is 1."""
        from tilelab.compiler.signature import PartitionSpec, array_traits

        s = self.specs.get(p)
        a = s.array if isinstance(s, PartitionSpec) else s
        try:
            return bool(array_traits(a).contiguous_last)
        except Exception:  # noqa: BLE001 - not an array spec
            return False

    # ---- tracing --------------------------------------------------------------------
    def resolve(self, op: Op, value: str):
        return op.lookup(base_value(value))

    def strip(self, op: Op, value: str, through=("assume",)):
        """The definition of value, looking through the given pass-through ops."""
        d = self.resolve(op, value)
        for _ in range(64):
            if isinstance(d, Op) and d.name in through:
                vals = d.operands()
                if not vals:
                    return None
                d = d.lookup(vals[-1] if d.name == "assume" else vals[0])
            else:
                return d
        return None

    def slot_of(self, op: Op, value: str, through=("assume",)) -> Slot | None:
        d = self.strip(op, value, through)
        if isinstance(d, Arg) and op.entry is not None and d in op.entry.args:
            if d.index < len(self.slots):
                return self.slots[d.index]
        return None

    def tensor_view(self, op: Op, view_value: str):
        """(param, problem) of a tensor view that must be exactly one argument's:
        its pointer, shape and strides. problem is None when it is."""
        tv = self.resolve(op, view_value)
        if not isinstance(tv, Op) or tv.name != "make_tensor_view":
            return None, "a view that is not made directly from a kernel argument"
        m = _TENSOR_VIEW.match(tv.body)
        if not m:
            return None, "a tensor view the validator cannot read"
        ptr = self.slot_of(tv, m.group(1))
        if ptr is None or ptr.what != "ptr":
            moved = self.strip(tv, m.group(1))
            if isinstance(moved, Op) and moved.name == "offset" and moved.operands():
                base = self.slot_of(moved, moved.operands()[0])
                if base is not None and base.what == "ptr":
                    return None, (f"a view whose pointer is {base.param!r}'s moved by an "
                                  "offset (a slice or sub-view)")
            return None, "a view whose pointer is not a kernel argument's"
        p = ptr.param
        shape = [x.strip() for x in m.group(2).split(",") if x.strip()]
        strides = [x.strip() for x in m.group(3).split(",") if x.strip()]
        ndim = sum(1 for s in self.slots if s.param == p and s.what == "shape")
        if len(shape) != ndim or len(strides) != ndim:
            return p, f"a view of {p!r} with rank {len(shape)} (the array has {ndim})"
        for d, v in enumerate(shape):
            s = self.slot_of(tv, v) if v.startswith("%") else None
            if s != Slot(p, "shape", d):
                return p, f"a view of {p!r} whose shape[{d}] is not {p}.shape[{d}]"
        for d, v in enumerate(strides):
            if v.startswith("%"):
                if self.slot_of(tv, v) != Slot(p, "stride", d):
                    return p, f"a view of {p!r} whose stride[{d}] is not {p}'s"
            elif not (v == "1" and d == ndim - 1 and self.contiguous_last(p)):
                return p, (f"a view of {p!r} with a constant stride {v} in dimension {d} "
                           "the specialization does not promise")
        return p, None

    def view_param(self, op: Op, view_value: str, *, for_store: bool):
        """(param, partition view type, problem) of a partition view."""
        pv = self.resolve(op, view_value)
        if not isinstance(pv, Op) or pv.name != "make_partition_view":
            what = f"a view made by {pv.name}" if isinstance(pv, Op) else \
                "a view the validator cannot trace (a loop or region value)"
            return None, None, f"{what}, not a partition view of an argument"
        srcs = pv.operands()
        if not srcs:
            return None, None, "a partition view without a source"
        p, problem = self.tensor_view(pv, srcs[0])
        return p, pv.body, problem

    # ---- rules ----------------------------------------------------------------------
    def fail(self, op: Op | None, message: str) -> None:
        self.violations.append(_Violation(op, message))
        if op is not None:
            access = _REFUSED_ACCESS.get(op.name, "write" if op.name in WRITE_OPS else "op")
            self.decided.append((op, access, None, False, message))

    def accept(self, op: Op, access: str, param: str | None, reason: str) -> None:
        """Record that ``op`` passed, as what and why (the verdicts of the report)."""
        self.decided.append((op, access, param, True, reason))

    def check(self) -> None:
        for e in self.m.entries:
            self.report.entries += 1
            self.check_signature(e)
        for lineno, code in self.m.unknown_lines:
            self.fail(None, f"Tile IR line {lineno} is not an op the validator can read "
                            f"({code[:80]!r})")
        self.report.ops = self.m.count
        for op in self.m.all_ops():
            name = op.name
            if name in NON_MEMORY_OPS:
                continue
            if name == "store_view_tko":
                self.check_store(op)
            elif name == "load_view_tko":
                self.check_view_load(op)
            elif name == "load_ptr_tko":
                self.check_gather(op)
            elif name in WRITE_OPS:
                self.check_other_write(op)
            elif name in REFUSED_OPS:
                self.fail(op, f"contains {name}, an op no safe kernel lowers to")
            else:
                self.fail(op, f"contains the Tile IR op {name!r}, which the validator does "
                              "not know (it might write memory)")

    def check_signature(self, e: Entry) -> None:
        if len(e.args) != len(self.slots):
            self.fail(None, f"entry @{e.symbol} takes {len(e.args)} arguments but the "
                            f"calling convention of the parameters gives {len(self.slots)}")
            return
        for a, s in zip(e.args, self.slots):
            is_ptr = "ptr<" in a.type
            if is_ptr != (s.what == "ptr"):
                self.fail(None, f"argument {a.index} of entry @{e.symbol} has type {a.type} "
                                f"but should be {s.param}'s {s.what}")
                return

    def view_operand(self, op: Op) -> str | None:
        m = _VIEW_OPERAND.search(before_types(op.body))
        return m.group(1) if m else None

    @staticmethod
    def inbounds(op: Op) -> bool:
        m = _INBOUNDS.search(op.body)
        return bool(m) and "true" in m.group(1)

    def check_store(self, op: Op) -> None:
        view = self.view_operand(op)
        if view is None:
            self.fail(op, "stores through a view the validator cannot read")
            return
        p, pvtype, problem = self.view_param(op, view, for_store=True)
        if p is None:
            self.fail(op, f"stores through {problem}; a safe kernel stores only tiles of "
                          "its Out/InOut partitions")
            return
        if p not in self.store_params or not is_partition(self.kinds.get(p)) \
                or p not in self.partitions:
            kind = self.kinds.get(p, "?")
            allowed = ", ".join(sorted(self.store_params)) or "none"
            self.fail(op, f"stores into {p!r} (a tl.{kind} parameter), which is not a "
                          f"partition the lowering stores into (partitions stored: "
                          f"{allowed})")
            return
        if problem is not None:
            self.fail(op, f"stores into partition {p!r} through {problem}")
            return
        want = tuple(self.partitions[p].tile_shape)
        tm = _PV_TILE.search(pvtype or "")
        got = tuple(int(t) for t in tm.group(1).split("x")) if tm and tm.group(1) else None
        sub = got != want and self.is_sub_tile_store(op, p, got, want)
        if got != want and not sub:
            self.fail(op, f"stores tiles of shape {got} into partition {p!r}, whose tiles "
                          f"are {want}" + self.sub_tile_problem(op, p, got, want))
            return
        dm = _DIM_MAP.search(pvtype or "")
        if dm and [int(x) for x in dm.group(1).split(",")] != list(range(len(want))):
            self.fail(op, f"stores into partition {p!r} with its dimensions permuted "
                          f"(dim_map=[{dm.group(1)}])")
            return
        if self.inbounds(op) and not (self.bounds_proven or p in self.unchecked):
            self.fail(op, f"stores into partition {p!r} without bounds checks, but the "
                          "launch proves its tiles whole only under check_bounds=False")
            return
        self.report.partition_stores += 1
        self.report.sub_tile_stores += sub
        kind = f"tl.{self.kinds.get(p)}"
        what = (f"a sub-tile {got} of the block's tile {want}, from the guarded store of "
                "the sub_tile_store helper" if sub else f"tiles {want}, the partition's, "
                "dimensions in order")
        checks = ("without bounds checks: the launch proved every tile whole"
                  if self.inbounds(op) else "bounds-checked")
        self.accept(op, "sub-tile store" if sub else "partition store", p,
                    f"a store into partition {p!r} ({kind}, one the lowering stores into) "
                    f"through a view of exactly its pointer, shape and strides: {what}; "
                    f"{checks}")

    # ---- the guarded sub-tile store (p.store(tile, offset=...)) ---------------------
    def sub_tile_problem(self, op: Op, p: str, got, want) -> str:
        """Why a store of another tile shape is not the lowering's sub-tile store."""
        if p not in self.offset_params:
            return ""
        if got is None or len(got) != len(want) or any(
                g <= 0 or w % g for g, w in zip(got, want)):
            return " (a sub-tile store's shape must divide the partition's on every axis)"
        return (" (a sub-tile store comes only from the guarded store of tilelab's "
                "sub_tile_store helper, inside its 'if')")

    def is_sub_tile_store(self, op: Op, p: str, got, want) -> bool:
        """Whether op is the guarded store ``p.store(tile, offset=...)`` lowers to: a
        partition the lowering writes sub-tiles of, a tile shape dividing the
        partition's, inside a region (the helper's ``if``), located at the helper's one
        ``ct.store`` line and called from this kernel's lowered text."""
        if p not in self.offset_params or got is None or len(got) != len(want):
            return False
        if any(g <= 0 or w % g for g, w in zip(got, want)):
            return False
        if op.scope is None or op.scope.parent is None or op.entry is None:
            return False
        frames = self.m.frames(op)
        helper = sub_tile_store_line()
        return (len(frames) >= 2 and frames[0][:2] == helper
                and frames[1][0] == getattr(self.lowered, "filename", None))

    def check_view_load(self, op: Op) -> None:
        if not self.inbounds(op):  # bounds-checked by the view
            view = self.view_operand(op)
            p, pvtype, _problem = self.view_param(op, view, for_store=False) \
                if view is not None else (None, None, None)
            pad = _PADDING.search(pvtype or "")
            of = f" of {p!r}" if p is not None else ""
            self.accept(op, "bounds-checked load", p,
                        f"a bounds-checked tile load{of}: lanes outside the array are "
                        + (f"padding ({pad.group(1)})" if pad else "not read (their values "
                           "are unspecified)"))
            return
        self.report.unchecked_loads += 1
        view = self.view_operand(op)
        if view is None:
            self.fail(op, "loads without bounds checks through a view the validator "
                          "cannot read")
            return
        p, _pvtype, problem = self.view_param(op, view, for_store=False)
        if p is None:
            self.fail(op, f"loads without bounds checks through {problem}")
            return
        if p not in self.unchecked:
            proven = ", ".join(sorted(self.unchecked)) or "none"
            self.fail(op, f"loads {p!r} without bounds checks (inbounds), but the launch "
                          f"proves no load of {p!r} in bounds (proven: {proven})")
            return
        if problem is not None:
            self.fail(op, f"loads {p!r} without bounds checks through {problem}")
            return
        self.accept(op, "unchecked load", p,
                    f"a tile load of {p!r} without bounds checks (inbounds), through a view "
                    "of exactly its pointer, shape and strides: the launch proves this "
                    f"load of {p!r} in bounds (check_bounds=False)")

    def _load_ptr_operands(self, op: Op) -> tuple[str | None, str | None]:
        head = before_types(op.body)
        head = _TOKEN_KW.split(head)[0]
        vals = VALUE.findall(head)
        types_text = op.body[op.body.find(" : ") + 3:] if " : " in op.body else ""
        types_text = types_text.split(" -> ")[0]
        types = top_split(types_text)
        ptr = vals[0] if vals else None
        mask = None
        for v, t in zip(vals[1:], types[1:]):
            if _I1_TYPE.search(t.replace(" ", "")):
                mask = v
        return ptr, mask

    def check_gather(self, op: Op) -> None:
        self.report.gathers += 1
        ptr, mask = self._load_ptr_operands(op)
        if ptr is None:
            self.fail(op, "loads through pointers the validator cannot read")
            return
        base = self.strip(op, ptr, through=("assume", "broadcast", "reshape"))
        p = None
        if isinstance(base, Op) and base.name == "offset":
            srcs = base.operands()
            s = self.slot_of(base, srcs[0], through=("assume", "broadcast", "reshape")) \
                if srcs else None
            if s is not None and s.what == "ptr":
                p = s.param
        else:
            s = self.slot_of(op, ptr, through=("assume", "broadcast", "reshape"))
            if s is not None and s.what == "ptr":
                p = s.param
        if p is None:
            self.fail(op, "gathers through pointers that do not come from a kernel "
                          "argument")
            return
        if mask is None:
            self.fail(op, f"gathers from {p!r} without a bounds check (no mask)")
            return
        ndim = sum(1 for s in self.slots if s.param == p and s.what == "shape")
        covered = self.bounded_dims(op, mask, p)
        missing = [d for d in range(ndim) if d not in covered]
        if missing:
            self.fail(op, f"gathers from {p!r} with a mask that does not bound "
                          f"dimension{'s' if len(missing) > 1 else ''} "
                          f"{', '.join(map(str, missing))} by {p}.shape")
            return
        self.accept(op, "masked gather", p,
                    f"a pointer load (gather) from {p!r} whose mask bounds every dimension "
                    f"by {p}.shape (unsigned index < shape)")

    def bounded_dims(self, op: Op, mask: str, p: str) -> set[int]:
        """The dimensions d of p for which the mask is and-ed with an unsigned
        ``index < p.shape[d]``."""
        out: set[int] = set()
        todo, seen = [(op, mask)], set()
        while todo:
            where, v = todo.pop()
            d = self.resolve(where, v)
            if not isinstance(d, Op) or id(d) in seen:
                continue
            seen.add(id(d))
            vals = d.operands()
            if d.name in ("andi", "broadcast", "reshape"):
                todo += [(d, x) for x in vals]
            elif d.name == "cmpi" and _LESS_THAN.match(d.body) \
                    and _UNSIGNED.search(before_types(d.body)) and len(vals) == 2:
                s = self.slot_of(d, vals[1], through=("assume", "broadcast", "reshape",
                                                      "exti"))
                if s is not None and s.param == p and s.what == "shape":
                    out.add(s.dim)
        return out

    def check_other_write(self, op: Op) -> None:
        target = None
        if op.name in ("atomic_red_view_tko", "multimem_store_view_tko",
                       "multimem_reduce_view_tko"):
            view = self.view_operand(op)
            if view is not None:
                target, _t, _p = self.view_param(op, view, for_store=True)
        else:
            vals = VALUE.findall(before_types(op.body))
            if vals:
                base = self.strip(op, vals[0], through=("assume", "broadcast", "reshape"))
                if isinstance(base, Op) and base.name == "offset":
                    srcs = base.operands()
                    s = self.slot_of(base, srcs[0],
                                     through=("assume", "broadcast", "reshape")) if srcs else None
                else:
                    s = self.slot_of(op, vals[0], through=("assume", "broadcast", "reshape"))
                if s is not None and s.what == "ptr":
                    target = s.param
        what = {"store_ptr_tko": "a scatter (pointer store)",
                "atomic_rmw_tko": "an atomic read-modify-write",
                "atomic_cas_tko": "an atomic compare-and-swap",
                "atomic_red_view_tko": "an atomic reduction into a view"}.get(
                    op.name, "a multicast write")
        into = f" into {target!r}" if target else ""
        self.fail(op, f"contains {what} ({op.name}){into}; a safe kernel writes only "
                      "tiles of its Out/InOut partitions")


# ======================================================================================
# the entry point


def sub_tile_store_line() -> tuple[str, int]:
    """(synthetic file, line) of the one ``ct.store`` of the frozen
    ``sub_tile_store`` tile-index helper: the only place a sub-tile store may come from."""
    from tilelab.compiler.frozen import device_text, frozen_device

    code = frozen_device().sub_tile_store.__code__
    lines = device_text().splitlines()
    for ln in range(code.co_firstlineno, len(lines) + 1):
        if lines[ln - 1].strip().startswith("ct.store("):
            return code.co_filename, ln
    raise AssertionError("sub_tile_store has no ct.store line")  # pragma: no cover


def check_tileir(text: str, lowered, spec, *, kernel_name: str | None = None,
                 mapper: Mapper | None = None) -> CheckReport:
    """Check the Tile IR text of a safe kernel (the rules: :mod:`tilelab.compiler.tileir`).

    ``lowered`` gives ``store_params`` and ``unchecked_params``; ``spec`` (the
    Specialization) gives the parameters' kinds, specs and layouts. ``mapper`` maps
    (file, line, 0-based col) of compiler output to the user's source (default:
    ``locations.location_mapper(lowered)``). Raises :class:`InternalSafetyError` at the
    first violation; returns what was checked and how long it took.
    """
    t0 = time.perf_counter()
    name = kernel_name or getattr(lowered, "name", "?")
    if mapper is None and hasattr(lowered, "source_map"):
        mapper = location_mapper(lowered)
    module = TileIRModule(text)
    if not module.entries:
        raise InternalSafetyError(
            f"internal safety check failed: the Tile IR of kernel {name!r} has no entry "
            "the validator can read", hint=INTERNAL_HINT)
    checker = Checker(module, lowered, spec, name)
    checker.check()
    if checker.violations:
        v = checker.violations[0]
        where, chain = locate_frames(module.frames(v.op) if v.op is not None else (), mapper)
        msg = f"internal safety check failed: the Tile IR of kernel {name!r} {v.message}"
        if chain:
            msg += " (called from " + ", ".join(chain) + ")"
        more = len(checker.violations) - 1
        if more:
            msg += f"; and {more} more violation{'s' if more > 1 else ''}"
        raise InternalSafetyError(msg, location=where, hint=INTERNAL_HINT)
    checker.report.verdicts = _verdicts(text, module, checker.decided, mapper)
    checker.report.seconds = time.perf_counter() - t0
    return checker.report


def _verdicts(text: str, module: TileIRModule, decided, mapper: Mapper | None
              ) -> list[OpVerdict]:
    """The report's :class:`OpVerdict` s: each decided op with its text and the user's
    source position it maps to."""
    if not decided:
        return []
    lines = text.splitlines()
    out = []
    for op, access, param, accepted, reason in sorted(decided, key=lambda d: d[0].line):
        where, _chain = locate_frames(module.frames(op), mapper)
        raw = lines[op.line - 1].strip() if 0 < op.line <= len(lines) else op.name
        out.append(OpVerdict(op.line, op.name, access, param, accepted, reason,
                             split_loc(raw)[0], where))
    return out

