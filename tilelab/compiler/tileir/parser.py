"""The parser of ``tileirdisasm`` text: entries, ops, the values each op defines (scoped
by region) and the ``loc(...)`` aliases that map an op to its source frames.

It reads only what the checks need: the ops of :data:`~.ops.PARSED_OPS` in full, every
other op by name, and a line it cannot read at all is kept in
:attr:`TileIRModule.unknown_lines` (the checks refuse a module that has one).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from tilelab.compiler.tileir.ops import LIGHT_OPS, PARSED_OPS

__all__ = ["TileIRModule", "Op", "Arg", "Entry", "op_names", "VALUE", "base_value",
           "before_types", "split_loc", "top_split"]


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
#: a value name (``%x``, ``%x#1`` for the second result of a multi-result op)
VALUE = re.compile(r"%[\w$.-]+(?:#\d+)?")
_OPLINE = re.compile(r"(?:(%[\w$.-]+(?::\d+)?(?:\s*,\s*%[\w$.-]+(?::\d+)?)*)\s*=\s*)?"
                     r"(?:([A-Za-z_][\w.]*)|(?=\"))(.*)$")
_ENTRY = re.compile(r"entry\s+@([\w$.-]+)\s*\(([^)]*)\)")
_ENTRY_ARG = re.compile(r"(%[\w$.-]+)\s*:\s*([^,]+)")
_ALIAS = re.compile(r"^(#[\w$.-]+)\s*=\s*(.*)$")
_DI_LOC = re.compile(r"#cuda_tile\.di_loc<\s*(#[\w$.-]+|loc\(.*?\))\s+in\b")
_ALIAS_REF = re.compile(r"#[\w$.-]+")
_BRACKETS = re.compile(r"\[(.*)\]")
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
        body, self._loc = split_loc(self._raw)
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
        return [base_value(v) for v in VALUE.findall(before_types(self.body))]

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


def base_value(v: str) -> str:
    """The value a result name refers to (``%x#1`` -> ``%x``: the op defining it)."""
    return v.split("#", 1)[0]


def before_types(body: str) -> str:
    """An op's text before the `` : `` that starts its types (its operands)."""
    i = body.find(" : ")
    return body if i < 0 else body[:i]


def split_loc(line: str) -> tuple[str, str | None]:
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


def top_split(text: str, sep: str = ",") -> list[str]:
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
                   frozenset() if full else LIGHT_OPS, counting=True)

    def _scan(self, lines, light: frozenset, counting: bool) -> None:
        scope: _Scope | None = None
        entry: Entry | None = None
        parse = PARSED_OPS
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
                    entry = self._entry(split_loc(s)[0], lineno)
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
            self.unknown_lines.append((lineno, split_loc(line)[0]))
            return None
        res, name, raw = m.group(1), m.group(2), m.group(3)
        if name is None:  # generic form: "dialect.op"(...)
            sm = _STRING.match(raw)
            if sm is None:
                self.unknown_lines.append((lineno, split_loc(line)[0]))
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
                for part in top_split(m.group(1)):
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

