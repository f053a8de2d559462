"""Lowering: rewrite a checked kernel into plain cuTile Python, span by span.

Each safe construct is replaced in place by the cuTile code it means, so the lowered
source has the user's line numbers (only columns move on rewritten lines) and teaches
what a partition is:

    z.store(tl.load_like(x, z) + 1)
    ->  __tl_ct.store(z, index=(__tl_ct.bid(0),), tile=__tl_ct.broadcast_to(
            __tl_ct.load(x, index=(__tl_ct.bid(0),), shape=(__tl_z_t0,),
            padding_mode=__tl_ct.PaddingMode.ZERO) + 1, (__tl_z_t0,)))

The kernel's first statement is prefixed with ``__tl_dev.grid_dependency_prologue();``
(wait for the previous kernel of the stream, then let the next be scheduled), which is
what lets the launcher use programmatic dependent launch for it (``LoweredKernel.pdl``);
a body that opens with a compound statement (``for``, ``if``, ...) and a kernel of the
``persistent`` schedule get no prologue and are launched normally. A kernel that writes
``tl.wait_for_previous_kernel()`` gets the prologue there instead.

A sub-tile store ``p.store(t, offset=(o0, ...))`` becomes a call of the guarded
``__tl_dev.sub_tile_store(p, <tile index>, <tile shape>, t, (o0, ...))``, which writes
sub-tile ``o`` of the block's own tile or nothing (docs/safety.md, "Sub-tile stores").

The lowering is hygienic: generated code reaches cuTile, the device index helpers and
``range`` only through reserved names (``__tl_ct``, ``__tl_dev``, ``__tl_range``,
``__tl_<p>_t<d>``), which user code may not bind or read (the checker's
``reserved-name`` rule); the namespace they are bound in is built by
:mod:`tilelab.compiler.frozen` from the checked program alone.

Tile shapes become ``ct.Constant`` parameters appended to the signature (the kernel's
own parameters lose their defaults, which a launch never uses); the schedule decides
the index expression. A :class:`~tilelab.compiler.source_map.SourceMap` maps positions
in the lowered text back to the user's file or cell.
"""
from __future__ import annotations

import ast
import hashlib
import linecache
import os
from dataclasses import dataclass, field

from tilelab.compiler.safety import KernelAnalysis, Site
from tilelab.compiler.safety.bounds import load_keywords, store_keywords
from tilelab.compiler.source_map import SourceMap

__all__ = ["LoweringPlan", "LoweredKernel", "lower_kernel"]

#: statements a ``prologue(); `` prefix cannot precede on their line
_COMPOUND = tuple(getattr(ast, n) for n in (
    "If", "For", "AsyncFor", "While", "With", "AsyncWith", "Try", "TryStar", "Match",
    "FunctionDef", "AsyncFunctionDef", "ClassDef") if hasattr(ast, n))


@dataclass(frozen=True)
class LoweringPlan:
    """What the lowered text depends on besides the source.

    ``ranks`` gives each partition's rank; ``schedule`` is ``row_major``, ``grouped`` or
    ``persistent``; ``grouped`` says whether a ``group_m`` constant orders the tiles.

    Example:
        >>> LoweringPlan("row_major", False, (("z", 1),)).grid_rank
        1
    """

    schedule: str
    grouped: bool
    ranks: tuple[tuple[str, int], ...]
    check_bounds: bool = True

    @property
    def grid_rank(self) -> int:
        return max((r for _, r in self.ranks), default=0)


@dataclass
class _Piece:
    text: str
    orig: int          # original offset of the first character (verbatim) or anchor
    verbatim: bool


@dataclass
class LoweredKernel:
    """A kernel lowered for one plan: cuTile source registered in linecache.

    ``text`` is the whole synthetic file (blank lines before the kernel keep line
    numbers); ``source`` is just the kernel, as shown to users.
    """

    name: str
    filename: str
    text: str
    first_line: int
    ct_alias: str
    dev_alias: str
    #: partition name -> names of its tile-shape constant parameters
    tile_params: dict[str, tuple[str, ...]]
    group_param: str | None
    extra_params: tuple[str, ...]
    source_map: SourceMap = field(repr=False)
    #: original-text character ranges of the safe stores, to explain shape errors
    store_spans: tuple[tuple[int, int, str], ...] = ()
    #: partition parameters the lowering stores into (the only writes of a safe kernel)
    store_params: frozenset = frozenset()
    #: array parameters whose tile loads the lowering emits with check_bounds=False
    #: because the launch proves them in bounds (empty unless check_bounds=False)
    unchecked_params: frozenset = frozenset()
    #: the checked program the function is built from (frozen namespaces)
    program: object = field(default=None, repr=False, compare=False)
    kernel_fn: object = field(default=None, repr=False, compare=False)
    _function: object = field(default=None, repr=False, compare=False)
    #: synthetic filename of each frozen helper -> the user's file (same lines, columns)
    helper_files: dict = field(default_factory=dict, repr=False, compare=False)
    #: partitions the lowering writes sub-tiles of (``p.store(tile, offset=...)``,
    #: through the guarded ``sub_tile_store`` of the device helpers)
    offset_store_params: frozenset = frozenset()
    #: whether the kernel has the grid-dependency prologue: its first statement (see the
    #: module docstring), or where ``tl.wait_for_previous_kernel()`` stands
    pdl: bool = False

    def function(self):
        """The lowered kernel as a Python function built from the checked text only
        (made once per lowering; cuTile compiles it, the interpreter runs it)."""
        if self._function is None:
            from tilelab.compiler.frozen import build_kernel_function

            self._function, self.helper_files = build_kernel_function(
                self, self.program, self.kernel_fn)
        return self._function

    def store_at(self, line: int, col: int | None) -> str | None:
        """The partition whose safe store covers lowered (line, byte col), if any."""
        off = self.source_map.orig_offset(line, col)
        for s, e, p in self.store_spans:
            if off is not None and s <= off < e:
                return p
        return None

    @property
    def source(self) -> str:
        return "".join(self.text.splitlines(True)[self.first_line - 1:])


class _Lowerer:
    def __init__(self, analysis: KernelAnalysis, plan: LoweringPlan):
        self.a = analysis
        self.plan = plan
        src = analysis.source
        self.src = src
        self.orig = src.text
        self.line_starts = [0]
        for ln in src.lines:
            self.line_starts.append(self.line_starts[-1] + len(ln))
        self.ct = "__tl_ct"
        self.dev = "__tl_dev"
        self.range = "__tl_range"
        ranks = dict(plan.ranks)
        self.ranks = ranks
        self.tile_params = {p: tuple(f"__tl_{p}_t{d}" for d in range(r))
                            for p, r in ranks.items()}
        self.group_param = "__tl_group_m" if plan.grouped else None
        # The partition whose shape defines the grid: the first of the largest rank.
        self.grid_part = next((p for p, r in plan.ranks if r == plan.grid_rank), None)
        self.edits: list[tuple[int, int, object]] = []
        self.store_spans: list[tuple[int, int, str]] = []
        self.offset_stores: set[str] = set()

    # ---- positions ------------------------------------------------------------
    def offset(self, line: int, byte_col: int) -> int:
        idx = line - self.src.first_line
        text = self.src.lines[idx]
        return self.line_starts[idx] + len(text.encode()[:byte_col].decode(errors="ignore"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.offset(node.lineno, node.col_offset),
                self.offset(node.end_lineno, node.end_col_offset))

    # ---- rendering ------------------------------------------------------------
    def render(self, start: int, end: int) -> list[_Piece]:
        pieces: list[_Piece] = []
        cur = start
        for es, ee, fn in sorted(self.edits, key=lambda e: (e[0], e[1])):
            if es < cur or ee > end or es < start:
                continue
            if es > cur:
                pieces.append(_Piece(self.orig[cur:es], cur, True))
            out = fn()
            want = self.orig[es:ee].count("\n")
            have = sum(p.text.count("\n") for p in out)
            if have < want:  # keep the line count: pad inside the closing bracket
                last = out.pop()
                out += [_Piece("\n" * (want - have), es, False), last]
            elif have > want:  # arguments taken out of order: drop generated blank lines
                out = _drop_newlines(out, have - want)
            pieces += out
            cur = ee
        if cur < end:
            pieces.append(_Piece(self.orig[cur:end], cur, True))
        return pieces

    def gen(self, text: str, anchor: int) -> _Piece:
        return _Piece(text, anchor, False)

    # ---- index expressions ----------------------------------------------------
    def tshape(self, p: str) -> str:
        names = self.tile_params[p]
        return "(" + ", ".join(names) + ("," if len(names) == 1 else "") + ")"

    def grid_dims(self) -> list[str]:
        g = self.grid_part
        return [f"{self.ct}.cdiv({g}.shape[{d}], {self.tile_params[g][d]})"
                for d in range(self.ranks[g])]

    def index(self, p: str, at: ast.expr | None, anchor: int) -> list[_Piece]:
        """The tile index of partition p for this block (or for tile ``at``)."""
        ct, dev, r, R = self.ct, self.dev, self.ranks[p], self.plan.grid_rank
        G = self.grid_dims()
        gm = self.group_param
        if R >= 4:  # the tile grid is linearised onto a 1-D launch grid
            src = self.render(*self.span(at)) if at is not None else \
                [self.gen(f"{ct}.bid(0)", anchor)]
            helper = f"grouped_tile_index_{R}d" if gm else f"unravel_{R}d"
            tail = ", ".join(G[1:]) + (f", {gm}" if gm else "")
            full = [self.gen(f"{dev}.{helper}(", anchor), *src,
                    self.gen(f", {tail})", anchor)]
        elif at is not None:
            t = self.render(*self.span(at))
            if R == 1:
                full = [self.gen("(", anchor), *t, self.gen(",)", anchor)]
            elif R == 2 and gm:
                full = [self.gen(f"{dev}.grouped_tile_index(", anchor), *t,
                        self.gen(f", {G[0]}, {G[1]}, {gm})", anchor)]
            elif R == 2:
                full = [self.gen(f"{dev}.unravel_2d(", anchor), *t,
                        self.gen(f", {G[1]})", anchor)]
            elif gm:
                per = f"({G[1]} * {G[2]})"
                full = [self.gen(f"{dev}.grouped_tile_index_3d((", anchor), *t,
                        self.gen(f") // {per}, (", anchor), *t,
                        self.gen(f") % {per}, {G[1]}, {G[2]}, {gm})", anchor)]
            else:
                full = [self.gen(f"{dev}.unravel_3d(", anchor), *t,
                        self.gen(f", {G[1]}, {G[2]})", anchor)]
        elif self.plan.schedule == "grouped" and R >= 2:
            if R == 2:
                expr = f"{dev}.grouped_tile_index({ct}.bid(0), {G[0]}, {G[1]}, {gm})"
            else:
                expr = (f"{dev}.grouped_tile_index_3d({ct}.bid(1), {ct}.bid(0), "
                        f"{G[1]}, {G[2]}, {gm})")
            full = [self.gen(expr, anchor)]
        else:
            comps = [f"{ct}.bid({R - 1 - d})" for d in range(R)]
            full = [self.gen("(" + ", ".join(comps) + ("," if R == 1 else "") + ")", anchor)]
        if r == R:
            return full
        # A lower-rank partition takes the leading tile coordinates of the grid.
        if self.plan.schedule == "row_major" and at is None and R <= 3:
            comps = [f"{ct}.bid({R - 1 - d})" for d in range(r)]
            return [self.gen("(" + ", ".join(comps) + ("," if r == 1 else "") + ")", anchor)]
        out = [self.gen("(", anchor)]
        for i in range(r):
            out += [self.gen("(", anchor), *full, self.gen(f")[{i}], ", anchor)]
        out[-1] = self.gen(out[-1].text.rstrip(", ") + ("," if r == 1 else "") + ")", anchor)
        return out

    def cb(self) -> str:
        return store_keywords(self.plan.check_bounds)

    def padding(self) -> str:
        """Keyword arguments of a safe tile load (see tilelab.compiler.safety.bounds)."""
        return load_keywords(self.ct, self.plan.check_bounds)

    def load_tail(self, site: Site, anchor: int) -> list[_Piece]:
        """``, shape=<tile shape>`` and the keywords of a safe tile load: the bounds
        keywords, with the user's ``padding_mode=`` in place of zero padding, and the
        user's other hints. Under ``check_bounds=False`` the launch proves every lane in
        bounds, so no padding applies and none is emitted (tileiras refuses a padding
        value on a load marked in bounds)."""
        hints = dict(site.hints)
        pad = hints.pop("padding_mode", None)
        out = [self.gen(f", shape={self.tshape(site.partition)}", anchor)]
        if pad is None or not self.plan.check_bounds:
            out.append(self.gen(self.padding(), anchor))
        else:
            out += [self.gen(", padding_mode=", anchor), *self.render(*self.span(pad))]
        return out + self.hint_pieces(tuple(hints.items()), anchor)

    def hint_pieces(self, hints, anchor: int) -> list[_Piece]:
        """``, name=<value>`` of each hint, the value's text verbatim (a constant the
        checker accepted, :mod:`tilelab.compiler.safety.hints`)."""
        out: list[_Piece] = []
        for name, value in hints:
            out += [self.gen(f", {name}=", anchor), *self.render(*self.span(value))]
        return out

    def head(self, call: ast.Call, value_start: int) -> tuple[int, list[_Piece]]:
        """(offset after the call's '(', verbatim text from there to the first argument).

        Keeping that text keeps a first argument written on the next line on its line.
        """
        fe = self.span(call.func)[1]
        open_paren = self.orig.index("(", fe) + 1
        gap = self.orig[open_paren:value_start]
        if gap.strip():  # keywords before the value (tile=x, at=t, ...): their lines
            n = gap.count("\n")
            return open_paren, ([self.gen("\n" * n, open_paren)] if n else [])
        return open_paren, ([_Piece(gap, open_paren, True)] if gap else [])

    def tail(self, value_end: int, call_end: int) -> list[_Piece]:
        """The closing ')' with the newlines of the replaced arguments kept before it."""
        n = self.orig[value_end:call_end].count("\n")
        return [self.gen("\n" * n, value_end)] * bool(n) + [self.gen(")", call_end - 1)]

    # ---- edits ----------------------------------------------------------------
    def add(self, start: int, end: int, fn) -> None:
        self.edits.append((start, end, fn))

    def site_edit(self, site: Site) -> None:
        ct, p = self.ct, site.partition
        s, e = self.span(site.node)
        if site.kind == "store" and site.offset is not None:
            self.check_offset_rank(site)

            def fn(site=site, s=s, e=e):
                return self.sub_tile_store(site, s, e)
            self.store_spans.append((s, e, p))
            self.offset_stores.add(p)
        elif site.kind == "store":
            def fn(site=site, s=s, e=e):
                vs, ve = self.span(site.value)
                head, gap = self.head(site.node, vs)
                return [self.gen(f"{ct}.store({p}, index=", s), *self.index(p, site.at, s),
                        self.gen(f", tile={ct}.broadcast_to(", s), *gap,
                        *self.render(vs, ve),
                        self.gen(f", {self.tshape(p)}){self.cb()}", ve),
                        *self.hint_pieces(site.hints, ve), *self.tail(ve, e)]
            self.store_spans.append((s, e, p))
        elif site.kind == "load":
            def fn(site=site, s=s, e=e):
                return [self.gen(f"{ct}.load({p}, index=", s), *self.index(p, site.at, s),
                        *self.load_tail(site, s), self.gen(")", e - 1)]
        elif site.kind == "load_like":
            def fn(site=site, s=s, e=e):
                vs, ve = self.span(site.value)
                head, gap = self.head(site.node, vs)
                return [self.gen(f"{ct}.load(", s), *gap, *self.render(vs, ve),
                        self.gen(", index=", ve), *self.index(p, site.at, ve),
                        *self.load_tail(site, ve), *self.tail(ve, e)]
        elif site.kind == "tile_shape":
            def fn(s=s):
                return [self.gen(self.tshape(p), s)]
        elif site.kind == "tile_index":
            def fn(s=s):
                return self.index(p, None, s)
        elif site.kind == "tile_index_of":
            def fn(site=site, s=s):
                return self.index(p, site.at, s)
        elif site.kind == "tiles":
            def fn(s=s):
                total = " * ".join(self.grid_dims())
                return [self.gen(f"{self.range}({ct}.bid(0), {total}, "
                                 f"{ct}.num_blocks(0))", s)]
        elif site.kind == "wait":
            # tl.wait_for_previous_kernel(): the prologue goes here instead of first
            def fn(s=s):
                return [self.gen(f"{self.dev}.grid_dependency_prologue()", s)]
        else:  # pragma: no cover - the checker produces no other kinds
            raise AssertionError(site.kind)
        self.add(s, e, fn)

    def check_offset_rank(self, site: Site) -> None:
        from tilelab.compiler.safety.rules import raise_rule

        p, n, r = site.partition, len(site.offset), self.ranks[site.partition]
        if n != r:
            where = site.offset[r] if n > r else site.offset[-1]
            raise_rule("offset-store",
                       f"{p}.store(tile, offset=...) gives {n} offset"
                       f"{'s' if n != 1 else ''} for partition {p!r} of rank {r}: the "
                       "offset has one integer per axis",
                       location=self.src.location(where),
                       hint=f"write {r} entries, one per axis of {p}")

    def sub_tile_store(self, site: Site, s: int, e: int) -> list[_Piece]:
        """``p.store(tile, offset=o)`` -> the guarded store of the frozen device helper:
        sub-tile ``o`` of this block's tile (or of ``at``), or nothing."""
        p, dev = site.partition, self.dev
        vs, ve = self.span(site.value)
        first, last = site.offset[0], site.offset[-1]
        os_, oe = self.span(first)[0], self.span(last)[1]
        head, gap = self.head(site.node, vs)

        def newlines(a: int, b: int) -> list[_Piece]:
            n = self.orig[a:b].count("\n") if b > a else 0
            return [self.gen("\n" * n, a)] if n else []
        body = []
        for i, elt in enumerate(site.offset):
            if i:
                es = self.span(elt)[0]
                body += [self.gen(", ", es), *newlines(self.span(site.offset[i - 1])[1], es)]
            body += self.render(*self.span(elt))
        comma = "," if len(site.offset) == 1 else ""
        return [self.gen(f"{dev}.sub_tile_store({p}, ", s), *self.index(p, site.at, s),
                self.gen(f", {self.tshape(p)}, ", s), *gap, *self.render(vs, ve),
                self.gen(", (", ve), *newlines(ve, os_), *body,
                self.gen(f"{comma})", oe), *self.hint_pieces(site.hints, oe),
                self.gen(")", oe), *newlines(oe, e)]

    def signature_edits(self) -> list[str]:
        func = self.src.tree
        # decorators: blank their lines (the lowered function is built without them)
        def_line = func.lineno
        if def_line > self.src.first_line:
            s = 0
            e = self.line_starts[def_line - self.src.first_line]
            n = self.orig[s:e].count("\n")
            self.add(s, e, lambda s=s, n=n: [self.gen("\n" * n, s)])
        for info in self.a.params:
            arg = info.node
            if arg.annotation is not None and not info.keep_annotation:
                s, e = self.span(arg)
                self.add(s, e, lambda s=s, name=arg.arg: [_Piece(name, s, True)])
        self.drop_defaults()
        extra = []
        for p, names in self.tile_params.items():
            extra += names
        if self.group_param:
            extra.append(self.group_param)
        if extra:
            args = func.args.posonlyargs + func.args.args
            pos = self.span(args[-1])[1]
            text = "".join(f", {n}: {self.ct}.Constant[int]" for n in extra)
            self.add(pos, pos, lambda pos=pos, text=text: [self.gen(text, pos)])
        return extra

    def drop_defaults(self) -> None:
        """Remove ``= default`` from the kernel's parameters: a launch passes every
        argument, so a kernel's defaults are never used, and the tile-shape constants
        appended after the last parameter could not follow a default (the default would
        pass to the constant)."""
        a = self.src.tree.args
        params = a.posonlyargs + a.args
        for arg, default in zip(params[len(params) - len(a.defaults):], a.defaults):
            s, (ds, e) = self.span(arg)[1], self.span(default)
            e = _past_parentheses(self.orig, e, _code(self.orig[s:ds]).count("("))
            n = self.orig[s:e].count("\n")
            self.add(s, e, lambda s=s, n=n: [self.gen("\n" * n, s)] if n else [])

    def prologue_edit(self) -> bool:
        """Prefix the first statement with the grid-dependency prologue, when it is a
        simple statement (``a; b`` cannot start a compound one) and the kernel does not
        place it itself (``tl.wait_for_previous_kernel()``, a site)."""
        if any(site.kind == "wait" for site in self.a.sites):
            return True
        first = self.src.tree.body[0]
        # a persistent kernel is one long wave, so starting it early gains nothing, and
        # the prologue costs the persistent GEMM registers (116 bytes of spills on sm_90)
        if isinstance(first, _COMPOUND) or self.plan.schedule == "persistent":
            return False
        s = self.span(first)[0]
        text = f"{self.dev}.grid_dependency_prologue(); "
        self.add(s, s, lambda s=s, text=text: [self.gen(text, s)])
        return True

    def assert_edits(self) -> None:
        """``assert cond, "message"`` -> ``__tla( cond, "message")``, cuTile's
        ``ct.assert_`` under a reserved name (cuTile compiles no ``assert`` statement):
        the keyword's 6 letters become ``__tla(`` and a ``)`` closes the statement, so
        the condition and the message keep their columns (the checker allows only a
        string literal as the message, rule ``assert-form``)."""
        from tilelab.compiler.frozen import ASSERT_NAME

        for node in ast.walk(self.src.tree):
            if isinstance(node, ast.Assert):
                s, e = self.span(node)
                self.add(s, s + 6, lambda s=s: [self.gen(f"{ASSERT_NAME}(", s)])
                self.add(e, e, lambda e=e: [self.gen(")", e - 1)])

    def lower(self) -> LoweredKernel:
        extra = self.signature_edits()
        pdl = self.prologue_edit()
        self.assert_edits()
        for site in self.a.sites:
            self.site_edit(site)
        pieces = self.render(0, len(self.orig))
        first = self.src.first_line
        func = self.src.tree
        indented = func.col_offset > 0
        prefix_lines = ["\n"] * (first - 1)
        if indented:
            if first < 2:  # pragma: no cover - an indented def cannot start a file
                raise AssertionError("indented kernel on line 1")
            prefix_lines[-1] = "if True:\n"
        prefix = "".join(prefix_lines)
        body = "".join(p.text for p in pieces)
        text = prefix + body
        digest = hashlib.sha256(text.encode()).hexdigest()[:10]
        base = os.path.basename(self.src.filename) or self.src.filename
        filename = f"<tilelab-lowered {func.name} {base}:{func.lineno} {digest}>"
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        smap = SourceMap.build(self.src.filename, first, self.orig, text, len(prefix),
                               pieces)
        return LoweredKernel(func.name, filename, text, first, self.ct, self.dev,
                             dict(self.tile_params), self.group_param, tuple(extra), smap,
                             tuple(self.store_spans),
                             frozenset(p for _, _, p in self.store_spans),
                             self.unchecked_params(), self.a.program, self.kernel_fn,
                             offset_store_params=frozenset(self.offset_stores), pdl=pdl)

    def unchecked_params(self) -> frozenset:
        if self.plan.check_bounds:
            return frozenset()
        out = set()
        for site in self.a.sites:
            if site.kind == "load":
                out.add(site.partition)
            elif site.kind == "load_like" and isinstance(site.value, ast.Name):
                out.add(site.value.id)
        return frozenset(out)


def _drop_newlines(pieces: list[_Piece], n: int) -> list[_Piece]:
    """``pieces`` with ``n`` newlines fewer, taken from generated pieces that hold only
    newlines (last first): a rewrite whose arguments come in another order than the
    source's must not add lines."""
    out = list(pieces)
    for i in range(len(out) - 1, -1, -1):
        p = out[i]
        if n and not p.verbatim and p.text and not p.text.strip("\n"):
            k = min(n, len(p.text))
            out[i] = _Piece(p.text[k:], p.orig, False)
            n -= k
    if n:  # pragma: no cover - generated text never holds more lines than it replaces
        raise AssertionError("a rewrite added lines to the kernel")
    return out


def _code(text: str) -> str:
    """``text`` without its comments (for text holding no strings: '= (' and blanks)."""
    return "".join(line.split("#", 1)[0] for line in text.splitlines(True))


def _past_parentheses(text: str, pos: int, count: int) -> int:
    """The offset after the ``count`` closing parentheses that follow ``pos`` (across
    blanks and comments): those of a parenthesized default, ``n=(\n 3)``."""
    i = pos
    while count and i < len(text):
        c = text[i]
        if c == ")":
            count -= 1
            pos = i + 1
        elif c == "#":
            nl = text.find("\n", i)
            i = len(text) if nl < 0 else nl
            continue
        elif not c.isspace():
            break
        i += 1
    return pos


def lower_kernel(analysis: KernelAnalysis, plan: LoweringPlan,
                 kernel_fn=None) -> LoweredKernel:
    """Lower a checked kernel for one plan (schedule and partition ranks).

    Example:
        >>> import tilelab as tl
        >>> from tilelab.compiler.safety import analyze_kernel
        >>> def add(z: tl.Out, x: tl.In):
        ...     z.store(tl.load_like(x, z) * 2)
        >>> lk = lower_kernel(analyze_kernel(add), LoweringPlan("row_major", False, (("z", 1),)))
        >>> print(lk.source.strip().splitlines()[-1].strip()[:44])
        __tl_ct.store(z, index=(__tl_ct.bid(0),), ti
    """
    names = {p.name for p in analysis.params}
    missing = [p for p in analysis.partitions if p not in dict(plan.ranks)]
    if missing or set(dict(plan.ranks)) - names:
        raise ValueError(f"plan ranks {plan.ranks} do not match the partitions "
                         f"{analysis.partitions}")
    lowerer = _Lowerer(analysis, plan)
    lowerer.kernel_fn = kernel_fn
    return lowerer.lower()
