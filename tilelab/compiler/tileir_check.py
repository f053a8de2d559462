"""Defence in depth: the Tile IR of a safe kernel is checked before its cubin is cached
or loaded (DESIGN §2, "How safety is enforced").

The safety checker proves a kernel's source safe and the lowering turns it into plain
cuTile Python; this module checks what cuTile actually emitted, so that a bug in the
lowering (or in cuTile) cannot turn a safe kernel into one that writes where it should
not. It reads the text ``tileirdisasm -g`` prints and checks, for every entry:

* **writes**: the only memory writes are tile stores (``store_view_tko``) through a
  partition view of a tensor view made from exactly one argument's pointer, shape and
  strides, where that argument is a partition in ``lowered.store_params`` with kind
  ``Out`` or ``InOut``, the view's tile shape is the partition's, and the view keeps the
  array's dimension order. A smaller tile shape is accepted only for the guarded sub-tile
  store ``p.store(tile, offset=...)`` lowers to (:meth:`_Checker.is_sub_tile_store`): a
  partition in ``lowered.offset_store_params``, a shape dividing the partition's, inside
  a region, located at the one ``ct.store`` of the frozen ``sub_tile_store`` helper and
  called from the kernel's lowered text. Pointer stores (``store_ptr_tko``: scatters), atomics
  (``atomic_rmw_tko``, ``atomic_cas_tko``, ``atomic_red_view_tko``) and the multicast
  ops are refused.
* **unchecked accesses**: a view load marked ``inbounds`` (what ``check_bounds=False``
  becomes) must read an argument in ``lowered.unchecked_params`` through a view of that
  argument itself; an ``inbounds`` store needs a plan whose partitions the launch proved
  whole (``check_bounds=False``); a pointer load (``load_ptr_tko``: a gather) must carry a
  mask that bounds it by every dimension of the argument its pointers come from.
* **unknown ops**: the op names are an allowlist (:data:`NON_MEMORY_OPS`,
  :data:`READ_OPS`, :data:`WRITE_OPS`); any other op is refused, since it might write.

The returned :class:`CheckReport` keeps the verdict on every memory op
(:class:`OpVerdict`: what the op was taken for, the parameter it was traced to, why it
passed, and the user's source position it maps to); the lab's Safety view shows them.

Arguments are matched to parameters by the ``cutile_python_v1`` calling convention
(per array: pointer, ``shape[0..n)``, ``stride[0..n)``; scalars; constants omitted), from
``spec.layouts``. A violation raises :class:`InternalSafetyError` (a ``CompileError``
whose message starts "internal safety check failed") at the user's source line of the
offending op. It also reads the tile types of Tile IR bytecode, to refuse a tile past
Tile IR's element limit with a located error before tileiras runs (tileiras either
rejects such bytecode without a location or, at the limit, spends minutes and fails).
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from tilelab.errors import CompileError, SourceLocation
from tilelab.limits import (MAX_TILE_ELEMENTS, partition_limit_message, tile_elements,
                            tile_limit_hint, tile_limit_message)

__all__ = ["MAX_TILE_ELEMENTS", "NON_MEMORY_OPS", "READ_OPS", "WRITE_OPS", "REFUSED_OPS",
           "KNOWN_OPS", "waits_before_memory", "reads_before_wait", "triggers_after_wait",
           "InternalSafetyError", "CheckReport", "OpVerdict",
           "TileIRModule",
           "check_tileir", "op_names", "arg_slots", "bytecode_tile_shapes",
           "check_partition_tiles", "check_bytecode_tiles"]


#: ops that write memory; only ``store_view_tko`` through a partition is accepted
WRITE_OPS = frozenset({"store_view_tko", "store_ptr_tko", "atomic_rmw_tko", "atomic_cas_tko",
                       "atomic_red_view_tko", "multimem_store_view_tko",
                       "multimem_reduce_view_tko"})
#: ops that read memory: view loads (bounds-checked unless marked ``inbounds``) and
#: pointer loads (gathers, bounded by their mask)
READ_OPS = frozenset({"load_view_tko", "load_ptr_tko"})
#: ops no safe lowering emits and the validator does not analyse (refused)
REFUSED_OPS = frozenset({"multimem_load_reduce_view_tko", "preview_call"})
#: every other op of the Tile IR dialect (13.4): arithmetic, control flow, views, pointer
#: arithmetic, tokens, printing, asserts and the grid-dependency synchronisation of
#: programmatic dependent launch (``gdc_*``); none of them writes memory. A pointer made
#: by one of them (``offset``, ``int_to_ptr``, ``get_global``, ``alloca``) can only be
#: written through a write op, and those are checked.
NON_MEMORY_OPS = frozenset("""
    absf absi addf addi alloca andi assert assume atan2 bitcast break broadcast cat ceil
    cmpf cmpi constant continue cos cosh divf divi entry exp exp2 exti extract floor fma
    for fpowf fpowi ftof ftoi gdc_launch_dependents_tko gdc_wait_tko get_global
    get_index_space_shape get_num_tile_blocks get_tensor_shape get_tile_block_id global
    if insert int_to_ptr iota itof join_tokens log log2 loop make_gather_scatter_view
    make_partition_view make_strided_view make_tensor_view make_token maxf maxi
    memory_fence_alias_tko minf mini mmaf mmaf_scaled mmai module mulf mulhii muli negf
    negi offset ori pack permute print_tko ptr_to_int ptr_to_ptr reduce remf remi reshape
    return rsqrt scan select shli shri sin sinh sqrt subf subi tan tanh trunci unpack xori
    yield
""".split())
KNOWN_OPS = NON_MEMORY_OPS | READ_OPS | WRITE_OPS | REFUSED_OPS
#: the ops the checks trace through (parsed in full; other non-memory ops are only named)
_TRACED_OPS = frozenset({"assume", "make_tensor_view", "make_partition_view", "offset",
                         "broadcast", "reshape", "exti", "andi", "cmpi"})
#: the wait for the previous kernel of the stream (``gdc_wait_tko``): parsed, so that
#: its region is known (only a wait at an entry's top level orders what follows it)
_WAIT_OP = "gdc_wait_tko"
#: the op that lets the next kernel of the stream start (``gdc_launch_dependents_tko``)
_TRIGGER_OP = "gdc_launch_dependents_tko"
_PARSED_OPS = _TRACED_OPS | READ_OPS | WRITE_OPS | {_WAIT_OP, _TRIGGER_OP}
_LIGHT_OPS = NON_MEMORY_OPS - _PARSED_OPS

_PARTITION_KINDS = ("Out", "InOut")
_MEMORY_OPS = READ_OPS | WRITE_OPS | REFUSED_OPS


def _up_to_wait(e: "Entry", names: frozenset) -> tuple[list[Op], bool]:
    """The ops named in ``names`` that come before the entry's first wait at its top
    level (program order: control flow is structured, so an op written later cannot
    run earlier, and a wait inside a branch or loop may not run at all), and whether
    there is such a wait (without one: every such op of the entry)."""
    found = []
    for op in e.ops:
        if op.name == _WAIT_OP and op.scope is not None and op.scope.parent is None:
            return found, True
        if op.name in names:
            found.append(op)
    return found, False


def _before_wait(module: "TileIRModule") -> list[list[Op]] | None:
    """Per entry, the memory ops before its top-level wait (:func:`_up_to_wait`); None
    when an entry has no such wait or the text has lines the validator cannot read."""
    if not module.entries or module.unknown_lines:
        return None
    out = []
    for e in module.entries:
        early, waits = _up_to_wait(e, _MEMORY_OPS)
        if not waits:
            return None
        out.append(early)
    return out


def triggers_after_wait(tileir: str | None) -> bool:
    r"""Whether the kernel lets the next kernel of its stream start only after its own
    wait for the previous one: no ``gdc_launch_dependents_tko`` before the first wait at
    an entry's top level (none at all in an entry without such a wait; a kernel that
    never triggers lets the next one start when it exits). A kernel that reads before
    its wait may be started early only after such a kernel: every kernel before that
    one has then finished.

    Example:
        >>> e = "entry @k(%arg0: tile<i32>) {{\n  {}\n  {}\n  return\n}}"
        >>> wait = "%1 = gdc_wait_tko token = %0 -> token"
        >>> trigger = "gdc_launch_dependents_tko"
        >>> triggers_after_wait(e.format(wait, trigger)), triggers_after_wait(
        ...     e.format(trigger, wait))
        (True, False)
    """
    if not tileir or _TRIGGER_OP not in tileir:
        return True
    module = TileIRModule(tileir)
    if not module.entries or module.unknown_lines:
        return False
    return not any(_up_to_wait(e, frozenset({_TRIGGER_OP}))[0] for e in module.entries)


def waits_before_memory(tileir: str | None) -> bool:
    r"""Whether every entry of the Tile IR text waits for the previous kernel of the
    stream (``gdc_wait_tko`` at the entry's top level) before its first memory op.
    Launching the kernel with programmatic dependent launch is then sound: nothing it
    reads or writes is touched before the previous kernel of the stream is done. False
    without Tile IR text or without such a wait.

    Example:
        >>> def entry(body):
        ...     return "entry @k(%arg0: tile<i32>) {\n" + body + "\n  return\n}"
        >>> load = "  %t, %u = load_view_tko weak %v[%arg0] token = %0 : a -> b"
        >>> waits_before_memory(entry("  %1 = gdc_wait_tko token = %0 -> token\n" + load))
        True
        >>> waits_before_memory(entry(load + "\n  %1 = gdc_wait_tko token = %0 -> token"))
        False
        >>> waits_before_memory(entry("  if %c {\n  %1 = gdc_wait_tko token = %0 -> token"
        ...                           "\n  } else {\n" + load + "\n  }"))
        False
    """
    if not tileir or _WAIT_OP not in tileir:
        return False
    early = _before_wait(TileIRModule(tileir))
    return early is not None and not any(early)


def reads_before_wait(tileir: str | None, lowered: Any, spec: Any) -> frozenset[str] | None:
    """The parameters a kernel reads before it waits for the previous kernel of the
    stream (``tl.wait_for_previous_kernel()``), when everything it does before the wait
    is a bounds-checked tile load of a ``tl.In`` array argument (traced to the
    argument's own pointer, shape and strides); None otherwise (no top-level wait, a
    write, a gather, a partition's or an untraceable read before it).

    A graph may then start the kernel while its one predecessor still runs, if that
    predecessor writes none of these parameters' memory (``tilelab.runtime.graph``);
    an empty set means the kernel waits before any memory access
    (:func:`waits_before_memory`).

    Example (a kernel that loads ``w`` above its wait)::

        >>> reads_before_wait(art.tileir, lowered, spec)          # doctest: +SKIP
        frozenset({'w'})
    """
    if not tileir or _WAIT_OP not in tileir:
        return None
    module = TileIRModule(tileir)
    early = _before_wait(module)
    if early is None:
        return None
    checker = _Checker(module, lowered, spec, getattr(lowered, "name", "?"))
    params = set()
    for op in (op for ops in early for op in ops):
        if op.name != "load_view_tko" or checker._inbounds(op):
            return None
        view = checker._view_operand(op)
        p, _pvtype, problem = checker.view_param(op, view, for_store=False) \
            if view is not None else (None, None, "no view")
        if p is None or problem is not None or checker.kinds.get(p) not in ("In", "auto"):
            return None
        params.add(p)
    return frozenset(params)


class InternalSafetyError(CompileError):
    """The Tile IR of a kernel the safety checker accepted breaks the safety rules.

    That is a bug in tilelab's lowering (or in cuTile), not in the kernel: the message
    starts "internal safety check failed" and the location is the user's source line of
    the offending op. ``internal_safety`` is True on these errors.

    Example:
        >>> e = InternalSafetyError("internal safety check failed: ...")
        >>> isinstance(e, CompileError), e.internal_safety
        (True, True)
    """

    internal_safety = True


# ======================================================================================
# parsing tileirdisasm output


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_VALUE = re.compile(r"%[\w$.-]+(?:#\d+)?")
_OPLINE = re.compile(r"(?:(%[\w$.-]+(?::\d+)?(?:\s*,\s*%[\w$.-]+(?::\d+)?)*)\s*=\s*)?"
                     r"(?:([A-Za-z_][\w.]*)|(?=\"))(.*)$")
_ENTRY = re.compile(r"entry\s+@([\w$.-]+)\s*\(([^)]*)\)")
_ENTRY_ARG = re.compile(r"(%[\w$.-]+)\s*:\s*([^,]+)")
_ALIAS = re.compile(r"^(#[\w$.-]+)\s*=\s*(.*)$")
_DI_LOC = re.compile(r"#cuda_tile\.di_loc<\s*(#[\w$.-]+|loc\(.*?\))\s+in\b")
_ALIAS_REF = re.compile(r"#[\w$.-]+")
_BRACKETS = re.compile(r"\[(.*)\]")
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
_FILE_LOC = re.compile(r'^"((?:[^"\\]|\\.)*)":(\d+):(\d+)')


class _Scope(dict):
    """The values a region defines; ``parent`` is the enclosing region's."""

    __slots__ = ("parent",)

    def __init__(self, parent: "_Scope | None" = None, items=()):
        super().__init__(items)
        self.parent = parent


class Op:
    """One op line: its name, the text after the name (``body``: strings blanked, loc
    removed; both worked out on first use), the values it defines, its loc expression
    and the scope its operands resolve in."""

    __slots__ = ("name", "_raw", "_body", "_loc", "results", "line", "scope", "entry")

    def __init__(self, name: str, raw: str, results: tuple[str, ...], line: int,
                 scope: "_Scope | None", entry: "Entry | None"):
        self.name, self._raw, self.results, self.line = name, raw, results, line
        self.scope, self.entry = scope, entry
        self._body: str | None = None
        self._loc: str | None = None

    def _split(self) -> None:
        body, self._loc = _split_loc(self._raw)
        self._body = _STRING.sub('""', body) if '"' in body else body

    @property
    def body(self) -> str:
        if self._body is None:
            self._split()
        return self._body

    @property
    def loc(self) -> str | None:
        if self._body is None:
            self._split()
        return self._loc

    def __repr__(self) -> str:
        return f"Op({self.name!r}, line {self.line})"

    def operands(self) -> list[str]:
        """The values used (before the ' : ' that starts the types), in order."""
        return [_base(v) for v in _VALUE.findall(_before_types(self.body))]

    def lookup(self, name: str) -> Any:
        scope = self.scope
        while scope is not None:
            d = scope.get(name)
            if d is not None:
                return d
            scope = scope.parent
        return None


@dataclass(eq=False)
class Arg:
    """An argument of an entry: position and type text."""

    index: int
    type: str


@dataclass(eq=False)
class Entry:
    symbol: str
    args: list[Arg]
    line: int
    ops: list[Op] = field(default_factory=list)
    #: (printed name, argument) pairs, for the entry's scope
    names: list[tuple[str, Arg]] = field(default_factory=list, repr=False)


def _base(v: str) -> str:
    return v.split("#", 1)[0]


def _before_types(body: str) -> str:
    i = body.find(" : ")
    return body if i < 0 else body[:i]


def _split_loc(line: str) -> tuple[str, str | None]:
    """(line without its trailing ``loc(...)``, the loc expression or None)."""
    s = line.rstrip()
    if not s.endswith(")"):
        return s, None
    i = s.rfind(" loc(")
    if i >= 0 and s[i + 5:i + 6] == "#" and ")" not in s[i + 5:-1]:  # loc(#locN)
        return s[:i].rstrip(), s[i + 1:]
    while i >= 0:
        depth, ok = 0, True
        for j in range(i + 4, len(s)):
            c = s[j]
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0 and j != len(s) - 1:
                    ok = False
                    break
        if ok and depth == 0:
            return s[:i].rstrip(), s[i + 1:]
        i = s.rfind(" loc(", 0, i)
    return s, None


def _top_split(text: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` outside <>, (), [] and {}."""
    out, depth, cur = [], 0, []
    for c in text:
        if c in "<([{":
            depth += 1
        elif c in ">)]}":
            depth -= 1
        if c == sep and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    if cur and "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


class TileIRModule:
    """The entries and ops of ``tileirdisasm`` text (with or without ``-g``), with a
    scoped table of the values each op defines and the loc aliases.

    Only the ops the checks read are parsed in full (:data:`READ_OPS`,
    :data:`WRITE_OPS` and the view, pointer and mask ops they trace through); of the
    others only the name is read, so a trace that reaches one stops there (and fails).

    Example:
        >>> m = TileIRModule('''entry @k(%arg0: tile<i32>) {
        ...   %0 = assume bounded<0, ?>, %arg0 : tile<i32> loc(#loc1)
        ...   %1 = addi %0, %0 : tile<i32> loc(#loc1)
        ...   return
        ... }
        ... #loc1 = loc("k.py":3:4)''')
        >>> [(o.name, o.operands()) for o in m.entries[0].ops], sorted(m.names)
        ([('assume', ['%arg0'])], ['addi', 'assume', 'return'])
        >>> m.frames(m.entries[0].ops[0])
        [('k.py', 3, 4)]
    """

    def __init__(self, text: str, *, full: bool = False):
        self.entries: list[Entry] = []
        self.unknown_lines: list[tuple[int, str]] = []
        #: ops outside any entry (globals)
        self.module_ops: list[Op] = []
        #: the name of every op, and how many ops there are (parsed or not)
        self.names: set[str] = set()
        self.count = 0
        self._alias_text = ""
        self._aliases: dict[str, str] | None = None
        self._frames_cache: dict[str, list] = {}
        # the '#...' definitions (locations) follow the ops: kept raw, parsed on demand
        cut = text.find("\n#")
        body = text if cut < 0 else text[:cut + 1]
        self._alias_text = "" if cut < 0 else text[cut:]
        self._scan(((i, ln.strip()) for i, ln in enumerate(body.splitlines(), start=1)),
                   frozenset() if full else _LIGHT_OPS, counting=True)

    def _scan(self, lines, light: frozenset, counting: bool) -> None:
        scope: _Scope | None = None
        entry: Entry | None = None
        parse = _PARSED_OPS
        names, count = self.names, 0
        for lineno, s in lines:
            if not s:
                continue
            c0 = s[0]
            if c0 == "#":
                self._alias_text += "\n" + s
                continue
            if c0 == "}":
                if scope is not None:
                    scope = scope.parent
                if scope is None:
                    entry = None
                s = s[1:].lstrip()
                if not s or s.startswith("loc("):
                    continue
                c0 = s[0]
            opens = (_STRING.sub('""', s) if '"' in s else s)[-1] == "{"
            if entry is None:
                if s.startswith("entry "):
                    entry = self._entry(_split_loc(s)[0], lineno)
                    scope = _Scope(None, entry.names)
                    continue
            elif opens and (c0 == "(" or s.startswith("else")):
                # a region's arguments (reduce, scan) or an else branch: a new scope,
                # whose values no check traces through
                scope = _Scope(scope)
                continue
            # the op's name, without parsing the line unless a check needs it
            eq = s.find(" = ") if c0 == "%" else -1
            rest = s[eq + 3:] if eq > 0 else s
            sp = rest.find(" ")
            name = rest if sp < 0 else rest[:sp]
            if name in light and entry is not None:
                if counting:
                    names.add(name)
                    count += 1
            elif name in parse and entry is not None and (c0 != "%" or eq > 0):
                results = tuple(r.split(":", 1)[0].strip() for r in s[:eq].split(",")) \
                    if eq > 0 else ()
                op = Op(name, "" if sp < 0 else rest[sp:], results, lineno, scope, entry)
                for r in results:
                    scope[r] = op
                entry.ops.append(op)
                if counting:
                    names.add(name)
                    count += 1
            else:
                op = self._op_line(s, lineno, scope, entry)
                if op is not None and counting:
                    names.add(op.name)
                    count += 1
            if opens:
                scope = _Scope(scope)
        if counting:
            self.count = count

    @property
    def aliases(self) -> dict[str, str]:
        """The ``#name = ...`` definitions (locations, debug info), parsed on first use."""
        if self._aliases is None:
            self._aliases = {}
            for line in self._alias_text.splitlines():
                m = _ALIAS.match(line.strip())
                if m:
                    self._aliases[m.group(1)] = m.group(2)
        return self._aliases

    # ---- lines ----------------------------------------------------------------------
    def _entry(self, code: str, lineno: int) -> Entry:
        m = _ENTRY.match(code)
        if not m:
            self.unknown_lines.append((lineno, code))
            return Entry("?", [], lineno)
        # entry arguments are tiles of scalars and pointers: no ',' or ')' in a type
        args, names = [], []
        for name, ty in _ENTRY_ARG.findall(m.group(2)):
            a = Arg(len(args), ty.strip())
            args.append(a)
            names.append((name, a))
        e = Entry(m.group(1), args, lineno, names=names)
        self.entries.append(e)
        return e

    def _op_line(self, line: str, lineno: int, scope: _Scope | None,
                 entry: Entry | None) -> Op | None:
        m = _OPLINE.match(line)
        if m is None:
            self.unknown_lines.append((lineno, _split_loc(line)[0]))
            return None
        res, name, raw = m.group(1), m.group(2), m.group(3)
        if name is None:  # generic form: "dialect.op"(...)
            sm = _STRING.match(raw)
            if sm is None:
                self.unknown_lines.append((lineno, _split_loc(line)[0]))
                return None
            name, raw = sm.group(0)[1:-1], raw[sm.end():]
        if name.startswith("cuda_tile."):
            name = name[len("cuda_tile."):]
        results = tuple(r.split(":", 1)[0].strip() for r in res.split(",")) if res else ()
        op = Op(name, raw, results, lineno, scope, entry)
        if scope is not None:
            for r in results:
                scope[r] = op
        if entry is not None:
            entry.ops.append(op)
        else:
            self.module_ops.append(op)
        return op

    def all_ops(self) -> Iterable[Op]:
        yield from self.module_ops
        for e in self.entries:
            yield from e.ops

    # ---- locations ------------------------------------------------------------------
    def frames(self, op: Op) -> list[tuple[str, int, int]]:
        """(file, line, 0-based col) of the op, innermost call first."""
        if op.loc is None:
            return []
        return self._frames(op.loc, 0)

    def _frames(self, expr: str, depth: int) -> list[tuple[str, int, int]]:
        expr = expr.strip()
        if depth > 64:
            return []
        cached = self._frames_cache.get(expr)
        if cached is not None:
            return cached
        out: list[tuple[str, int, int]] = []
        if expr.startswith("#cuda_tile.di_loc<"):
            m = _DI_LOC.match(expr)
            if m:
                out = self._frames(m.group(1), depth + 1)
        elif expr.startswith("#"):
            ref = _ALIAS_REF.match(expr).group(0)
            target = self.aliases.get(ref)
            out = self._frames(target, depth + 1) if target else []
        elif expr.startswith("loc(") and expr.endswith(")"):
            out = self._frames(expr[4:-1], depth + 1)
        elif expr.startswith("callsite(") and expr.endswith(")"):
            inner = expr[len("callsite("):-1]
            parts = _split_at(inner, " at ")
            if len(parts) == 2:
                out = self._frames(parts[0], depth + 1) + self._frames(parts[1], depth + 1)
        elif expr.startswith("fused"):
            m = _BRACKETS.search(expr)
            if m:
                for part in _top_split(m.group(1)):
                    out = self._frames(part, depth + 1)
                    if out:
                        break
        else:
            fm = _FILE_LOC.match(expr)
            if fm:
                out = [(fm.group(1), int(fm.group(2)), int(fm.group(3)))]
        self._frames_cache[expr] = out
        return out


def _split_at(text: str, sep: str) -> list[str]:
    depth = 0
    i = 0
    while i < len(text):
        c = text[i]
        if c in "<([{":
            depth += 1
        elif c in ">)]}":
            depth -= 1
        elif c == '"':
            j = text.find('"', i + 1)
            while j > 0 and text[j - 1] == "\\":
                j = text.find('"', j + 1)
            i = j if j > 0 else len(text)
        elif depth == 0 and text.startswith(sep, i):
            return [text[:i], text[i + len(sep):]]
        i += 1
    return [text]


def op_names(text: str) -> set[str]:
    """The names of the ops in Tile IR text.

    Example:
        >>> sorted(op_names("entry @k() {\\n  %0 = make_token : token\\n  return\\n}"))
        ['make_token', 'return']
    """
    return set(TileIRModule(text).names)


# ======================================================================================
# the calling convention


@dataclass(frozen=True)
class Slot:
    """What one entry argument is: ``ptr``, ``shape``, ``stride`` (with ``dim``) of an
    array parameter, or a ``scalar``."""

    param: str
    what: str
    dim: int = 0


def arg_slots(layouts) -> list[Slot]:
    """The entry arguments of ``cutile_python_v1`` for these parameter layouts.

    Example:
        >>> from tilelab.compiler.artifacts import ParamLayout
        >>> [(s.param, s.what, s.dim) for s in arg_slots(
        ...     [ParamLayout("z", "array", "float32", 1), ParamLayout("a", "scalar", "float32"),
        ...      ParamLayout("T", "constant")])]
        [('z', 'ptr', 0), ('z', 'shape', 0), ('z', 'stride', 0), ('a', 'scalar', 0)]
    """
    out: list[Slot] = []
    for lay in layouts:
        if lay.kind == "array":
            out.append(Slot(lay.name, "ptr"))
            out += [Slot(lay.name, "shape", d) for d in range(lay.ndim)]
            out += [Slot(lay.name, "stride", d) for d in range(lay.ndim)]
        elif lay.kind == "scalar":
            out.append(Slot(lay.name, "scalar"))
    return out


# ======================================================================================
# the checks


@dataclass(frozen=True)
class OpVerdict:
    """The validator's verdict on one memory op of the Tile IR, as it decided it.

    ``line`` is the op's line in the ``tileirdisasm -g`` text (1-based; the Tile IR tab
    numbers its lines the same way), ``text`` the op without its ``loc(...)``,
    ``access`` what the validator took the op for (``partition store``, ``sub-tile
    store``, ``bounds-checked load``, ``unchecked load``, ``masked gather``; for a
    refused op ``store``, ``load``, ``gather``, ``write`` or ``op``), ``param`` the
    kernel parameter it traced the op to (None where it did not), ``location`` the
    user's source position the op maps to.

    Example:
        >>> OpVerdict(12, "load_view_tko", "bounds-checked load", "x", True, "...").verdict
        'accepted'
    """

    line: int
    op: str
    access: str
    param: str | None
    accepted: bool
    reason: str
    text: str = ""
    location: SourceLocation | None = None

    @property
    def verdict(self) -> str:
        return "accepted" if self.accepted else "refused"

    @property
    def writes(self) -> bool:
        return self.op in WRITE_OPS


@dataclass
class CheckReport:
    """What :func:`check_tileir` looked at, its verdict on each memory op, and how long
    it took."""

    entries: int = 0
    ops: int = 0
    partition_stores: int = 0
    #: of the partition stores, the guarded sub-tile stores of p.store(tile, offset=...)
    sub_tile_stores: int = 0
    unchecked_loads: int = 0
    gathers: int = 0
    seconds: float = 0.0
    #: the verdict on every memory op (reads and writes), in the order of the text
    verdicts: list[OpVerdict] = field(default_factory=list)

    def __str__(self) -> str:
        return (f"{self.ops} ops in {self.entries} entries: {self.partition_stores} "
                f"partition stores, {self.unchecked_loads} unchecked loads, "
                f"{self.gathers} gathers ({self.seconds * 1e3:.2f} ms)")


@dataclass
class _Violation:
    op: Op | None
    message: str


#: what a refused op was, by its name (the verdict's ``access``)
_REFUSED_ACCESS = {"store_view_tko": "store", "load_view_tko": "load",
                   "load_ptr_tko": "gather"}
_PADDING = re.compile(r"padding_value\s*=\s*([\w.+-]+)")


class _Checker:
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
        return op.lookup(_base(value))

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

    def _view_operand(self, op: Op) -> str | None:
        m = _VIEW_OPERAND.search(_before_types(op.body))
        return m.group(1) if m else None

    @staticmethod
    def _inbounds(op: Op) -> bool:
        m = _INBOUNDS.search(op.body)
        return bool(m) and "true" in m.group(1)

    def check_store(self, op: Op) -> None:
        view = self._view_operand(op)
        if view is None:
            self.fail(op, "stores through a view the validator cannot read")
            return
        p, pvtype, problem = self.view_param(op, view, for_store=True)
        if p is None:
            self.fail(op, f"stores through {problem}; a safe kernel stores only tiles of "
                          "its Out/InOut partitions")
            return
        if p not in self.store_params or self.kinds.get(p) not in _PARTITION_KINDS \
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
        if self._inbounds(op) and not (self.bounds_proven or p in self.unchecked):
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
                  if self._inbounds(op) else "bounds-checked")
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
        if not self._inbounds(op):  # bounds-checked by the view
            view = self._view_operand(op)
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
        view = self._view_operand(op)
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
        head = _before_types(op.body)
        head = _TOKEN_KW.split(head)[0]
        vals = _VALUE.findall(head)
        types_text = op.body[op.body.find(" : ") + 3:] if " : " in op.body else ""
        types_text = types_text.split(" -> ")[0]
        types = _top_split(types_text)
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
                    and _UNSIGNED.search(_before_types(d.body)) and len(vals) == 2:
                s = self.slot_of(d, vals[1], through=("assume", "broadcast", "reshape",
                                                      "exti"))
                if s is not None and s.param == p and s.what == "shape":
                    out.add(s.dim)
        return out

    def check_other_write(self, op: Op) -> None:
        target = None
        if op.name in ("atomic_red_view_tko", "multimem_store_view_tko",
                       "multimem_reduce_view_tko"):
            view = self._view_operand(op)
            if view is not None:
                target, _t, _p = self.view_param(op, view, for_store=True)
        else:
            vals = _VALUE.findall(_before_types(op.body))
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


def _location(module: TileIRModule, op: Op | None,
              mapper: Callable | None) -> tuple[SourceLocation | None, list[str]]:
    if op is None:
        return None, []
    frames = module.frames(op)
    mapped = []
    for f, ln, col in frames:
        if mapper is not None:
            uf, ul, uc = mapper(f, ln, col)
        else:
            uf, ul, uc = f, ln, col + 1
        mapped.append(SourceLocation(uf, ul, uc))
    if not mapped:
        return None, []
    # prefer a frame in the user's code over cuTile's own sources and tilelab's helpers
    def internal(loc: SourceLocation) -> bool:
        fn = loc.filename.replace("\\", "/")
        return "/cuda/tile/" in fn or "/tilelab/compiler/" in fn or \
            fn.startswith("<tilelab-device ")
    user = [m for m in mapped if not internal(m)] or mapped
    where = user[0]
    chain = [str(m) for m in user[1:]]
    return where, chain


def sub_tile_store_line() -> tuple[str, int]:
    """(synthetic file, line) of the one ``ct.store`` of the frozen
    ``sub_tile_store`` device helper: the only place a sub-tile store may come from."""
    from tilelab.compiler.frozen import device_text, frozen_device

    code = frozen_device().sub_tile_store.__code__
    lines = device_text().splitlines()
    for ln in range(code.co_firstlineno, len(lines) + 1):
        if lines[ln - 1].strip().startswith("ct.store("):
            return code.co_filename, ln
    raise AssertionError("sub_tile_store has no ct.store line")  # pragma: no cover


def check_tileir(text: str, lowered, spec, *, kernel_name: str | None = None,
                 mapper: Callable | None = None) -> CheckReport:
    """Check the Tile IR text of a safe kernel (see the module docstring).

    ``lowered`` gives ``store_params`` and ``unchecked_params``; ``spec`` (the
    Specialization) gives the parameters' kinds, specs and layouts. ``mapper`` maps
    (file, line, 0-based col) of compiler output to the user's source (default:
    ``export.location_mapper(lowered)``). Raises :class:`InternalSafetyError` at the
    first violation; returns what was checked and how long it took.
    """
    t0 = time.perf_counter()
    name = kernel_name or getattr(lowered, "name", "?")
    if mapper is None and hasattr(lowered, "source_map"):
        from tilelab.compiler.export import location_mapper

        mapper = location_mapper(lowered)
    module = TileIRModule(text)
    if not module.entries:
        raise InternalSafetyError(
            f"internal safety check failed: the Tile IR of kernel {name!r} has no entry "
            "the validator can read", hint=_HINT)
    checker = _Checker(module, lowered, spec, name)
    checker.check()
    if checker.violations:
        v = checker.violations[0]
        where, chain = _location(module, v.op, mapper)
        msg = f"internal safety check failed: the Tile IR of kernel {name!r} {v.message}"
        if chain:
            msg += " (called from " + ", ".join(chain) + ")"
        more = len(checker.violations) - 1
        if more:
            msg += f"; and {more} more violation{'s' if more > 1 else ''}"
        raise InternalSafetyError(msg, location=where, hint=_HINT)
    checker.report.verdicts = _verdicts(text, module, checker.decided, mapper)
    checker.report.seconds = time.perf_counter() - t0
    return checker.report


def _verdicts(text: str, module: TileIRModule, decided, mapper: Callable | None
              ) -> list[OpVerdict]:
    """The report's :class:`OpVerdict` s: each decided op with its text and the user's
    source position it maps to."""
    if not decided:
        return []
    lines = text.splitlines()
    out = []
    for op, access, param, accepted, reason in sorted(decided, key=lambda d: d[0].line):
        where, _chain = _location(module, op, mapper)
        raw = lines[op.line - 1].strip() if 0 < op.line <= len(lines) else op.name
        out.append(OpVerdict(op.line, op.name, access, param, accepted, reason,
                             _split_loc(raw)[0], where))
    return out


_HINT = ("the kernel passed tilelab's safety checker, so this is a bug in tilelab's "
         "lowering or in cuTile: please report it with the kernel; the cubin was not "
         "cached or loaded (@tl.kernel(unsafe=True) compiles without this check)")


# ======================================================================================
# tile sizes


# (the limit and its messages live in tilelab.limits: the CPU interpreter enforces them too)


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


def bytecode_tile_shapes(bytecode: bytes) -> list[tuple[int, str, tuple[int, ...], int]]:
    """The tile shapes in Tile IR bytecode's type table: (type id, kind, shape, offset of
    the first dimension's bytes). ``kind`` is ``tile`` or the view kind (whose tile shape
    it is). Returns [] for bytecode this reader does not understand.

    Example:
        >>> bytecode_tile_shapes(b"not bytecode")
        []
    """
    try:
        return _type_table(bytes(bytecode))
    except (IndexError, ValueError):
        return []


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    x, shift = 0, 0
    while True:
        b = buf[i]
        i += 1
        x |= (b & 0x7F) << shift
        if not b & 0x80:
            return x, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _type_table(buf: bytes) -> list[tuple[int, str, tuple[int, ...], int]]:
    if not buf.startswith(b"\x7fTileIR\x00") or len(buf) < 12:
        return []
    version = (buf[8], buf[9])
    i = 12
    while i < len(buf):
        sid = buf[i]
        i += 1
        if sid == 0:
            break
        length, i = _varint(buf, i)
        if sid & 0x80:
            align, i = _varint(buf, i)
            while align > 1 and i % align:
                i += 1
        start, end = i, i + length
        if sid & 0x7F == 0x05:
            return _types(buf, start, end, version)
        i = end
    return []


def _types(buf: bytes, start: int, end: int, version) -> list:
    count, i = _varint(buf, start)
    while (i - start) % 4:
        i += 1
    offsets = [int.from_bytes(buf[i + 4 * k:i + 4 * k + 4], "little") for k in range(count)]
    data = i + 4 * count
    out = []
    unified = version >= (13, 3)
    for tid, off in enumerate(offsets):
        j = data + off
        if j >= end:
            raise ValueError("type offset out of range")
        tag = buf[j]
        j += 1
        if tag == 0x0D:  # tile: element type, int list of 8-byte dims
            _elem, j = _varint(buf, j)
            rank, j = _varint(buf, j)
            dims = tuple(int.from_bytes(buf[j + 8 * k:j + 8 * k + 8], "little", signed=True)
                         for k in range(rank))
            out.append((tid, "tile", dims, j))
        elif tag in (0x0F, 0x14, 0x15):  # partition / gather-scatter / strided view
            if unified or tag != 0x0F:
                _flags, j = _varint(buf, j)
            rank, j = _varint(buf, j)
            dims = tuple(int.from_bytes(buf[j + 4 * k:j + 4 * k + 4], "little", signed=True)
                         for k in range(rank))
            kind = {0x0F: "partition_view", 0x14: "gather_scatter_view",
                    0x15: "strided_view"}[tag]
            out.append((tid, kind, dims, j))
    return out


def check_bytecode_tiles(bytecode: bytes, kernel_name: str, *, disassemble=None,
                         mapper: Callable | None = None) -> None:
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
            where, chain = _location(module, op, mapper)
            if where is not None:
                return where, chain
    return None, []
