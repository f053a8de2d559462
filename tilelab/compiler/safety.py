"""The safety checker: prove, from the source, that a kernel cannot race.

It runs when ``@tl.kernel`` runs. Its rules (DESIGN §2):

* arrays the kernel did not declare writable (``tl.In``, unannotated) are never written;
* partitions (``tl.Out``/``tl.InOut``) are written only with ``p.store(tile)``, whose
  destination the partition fixes; ``tl.Out`` is never read; a partition is never passed
  on, renamed, put in a tuple or captured by a closure (any of those would let code the
  checker cannot see pick the destination);
* persistent kernels store only at tiles minted by ``for t in p.tiles()``;
* ``tl.Raw`` exists only in ``@tl.kernel(unsafe=True)``, and there only ``tl.Raw``
  arrays are written through cuTile's raw ops;
* helper functions that receive arrays are checked by the same rules.

The checker is deliberately conservative: a write whose target it cannot trace back to
a ``tl.Raw`` parameter is rejected, and the message says what to write instead.
"""
from __future__ import annotations

import ast
import builtins
import inspect
import sys
import types
import typing
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from tilelab.compiler import language
from tilelab.compiler.capture import CapturedSource, capture_source
from tilelab.errors import SafetyError

__all__ = ["ParamInfo", "Site", "KernelAnalysis", "HelperRegistry", "analyze_kernel",
           "recheck_calls"]

WRITE_FUNCS = frozenset({
    "store", "store_advanced_indexing", "scatter", "atomic_add", "atomic_and", "atomic_cas",
    "atomic_max", "atomic_min", "atomic_or", "atomic_xchg", "atomic_xor"})
READ_FUNCS = frozenset({"load", "gather", "load_advanced_indexing"})
WRITE_METHODS = frozenset({
    "store", "store_offset", "atomic_store_add", "atomic_store_max", "atomic_store_min",
    "atomic_store_and", "atomic_store_or", "atomic_store_xor", "atomic_cas_offset",
    "atomic_xchg_offset", "atomic_add_offset", "atomic_max_offset", "atomic_min_offset",
    "atomic_and_offset", "atomic_or_offset", "atomic_xor_offset"})
VIEW_METHODS = frozenset({"slice", "tiled_view", "get_raw_memory"})
POINTER_NAMES = frozenset({"from_foreign", "foreign_pointer"})
DYNAMIC_BUILTINS = frozenset({"getattr", "setattr", "delattr", "eval", "exec", "globals",
                              "locals", "vars", "__import__", "compile"})
PARTITION_ATTRS = ("store", "load", "tiles", "tile_shape", "tile_index", "tile_index_of",
                   "shape", "ndim", "dtype")

_UNRESOLVED = object()
_LOCAL = object()


@dataclass(frozen=True)
class ParamInfo:
    """A kernel parameter and its access kind.

    ``kind`` is one of ``"In"``, ``"Out"``, ``"InOut"``, ``"Raw"``, ``"auto"`` (no
    tilelab annotation: an array passed here is read-only, a scalar is a scalar) and
    ``"constant"`` (``ct.Constant[...]``). ``keep_annotation`` says whether the lowered
    cuTile source keeps the annotation text (cuTile's own annotations).
    """

    name: str
    kind: str
    node: ast.arg = field(compare=False, repr=False)
    keep_annotation: bool = False

    @property
    def is_partition(self) -> bool:
        return self.kind in ("Out", "InOut")


@dataclass(frozen=True)
class Site:
    """A safe construct that lowering rewrites into plain cuTile Python.

    ``kind``: ``store``, ``load``, ``load_like``, ``tile_shape``, ``tile_index``,
    ``tile_index_of`` (the coordinates of a minted tile) or ``tiles`` (the iterator of a
    persistent loop). ``node`` is the Call (or Attribute)
    to replace; ``value`` the stored tile / loaded array expression; ``at`` the
    persistent tile expression.
    """

    kind: str
    partition: str
    node: ast.AST = field(compare=False)
    value: ast.expr | None = field(default=None, compare=False)
    at: ast.expr | None = field(default=None, compare=False)


@dataclass
class HelperRegistry:
    """The helper functions a kernel's check resolved, to notice when they change.

    A notebook may redefine a helper after the kernel was defined; the kernel is then
    re-checked (and recompiled) against the new helper, never run with an unchecked one.
    """

    memo: dict = field(default_factory=dict)
    #: (namespace dict, name, object) of every helper resolved through a global name
    bindings: list = field(default_factory=list)
    #: (qualified name, source fingerprint) of every checked helper
    sources: list = field(default_factory=list)

    def changed(self) -> bool:
        """Whether any resolved helper name now refers to another object."""
        return any(ns.get(name, _UNRESOLVED) is not obj for ns, name, obj in self.bindings)

    def fingerprint(self) -> str:
        return ";".join(f"{q}={h}" for q, h in sorted(set(self.sources)))


@dataclass
class KernelAnalysis:
    """What the checker learned about a kernel; the lowering's input."""

    source: CapturedSource
    params: list[ParamInfo]
    unsafe: bool
    persistent: bool
    sites: list[Site]
    #: calls whose target could not be resolved at definition time: (name, node)
    deferred_calls: list[tuple[str, ast.Call]]
    #: names (in the kernel's globals) bound to the cuda.tile module
    ct_aliases: list[str]
    #: every name the kernel body binds or reads (to pick fresh names when lowering)
    used_names: set[str]
    #: helpers the check resolved (see HelperRegistry)
    helpers: HelperRegistry = field(default_factory=HelperRegistry)

    @property
    def partitions(self) -> list[str]:
        return [p.name for p in self.params if p.is_partition]

    def param(self, name: str) -> ParamInfo:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)


def _cuda_tile():
    import cuda.tile as ct  # deferred: importing cuTile costs ~0.1 s

    return ct


class _Scope:
    """Resolves names of a function statically: locals, closure, globals, builtins."""

    def __init__(self, fn: types.FunctionType, local_names: set[str]):
        self.fn = fn
        self.globals = fn.__globals__
        self.closure: dict[str, Any] = {}
        if fn.__closure__:
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    self.closure[name] = cell.cell_contents
                except ValueError:  # empty cell: defined later in the enclosing function
                    pass
        self.local_names = local_names

    def resolve(self, expr: ast.AST) -> Any:
        if isinstance(expr, ast.Name):
            if expr.id in self.local_names:
                return _LOCAL
            if expr.id in self.closure:
                return self.closure[expr.id]
            if expr.id in self.globals:
                return self.globals[expr.id]
            if hasattr(builtins, expr.id):
                return getattr(builtins, expr.id)
            return _UNRESOLVED
        if isinstance(expr, ast.Attribute):
            base = self.resolve(expr.value)
            if base is _UNRESOLVED or base is _LOCAL:
                return base
            if isinstance(base, (types.ModuleType, type)):
                try:
                    return getattr(base, expr.attr)
                except AttributeError:
                    if isinstance(base, types.ModuleType):
                        # a submodule not imported yet, e.g. cuda.tile without import
                        return sys.modules.get(f"{base.__name__}.{expr.attr}", _UNRESOLVED)
                    return _UNRESOLVED
            return _UNRESOLVED
        return _UNRESOLVED


def _local_names(func: ast.FunctionDef) -> set[str]:
    """Names bound inside the function body (parameters included), not in nested defs."""
    names = {a.arg for a in func.args.args + func.args.posonlyargs + func.args.kwonlyargs}
    if func.args.vararg:
        names.add(func.args.vararg.arg)
    if func.args.kwarg:
        names.add(func.args.kwarg.arg)

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            return
        if isinstance(node, ast.Lambda):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        for child in ast.iter_child_nodes(node):
            visit(child)

    for stmt in func.body:
        visit(stmt)
    return names


def _is_dotted_name(e: ast.AST) -> bool:
    """Whether e is ``a`` or ``a.b.c`` (a name the checker can resolve statically)."""
    while isinstance(e, ast.Attribute):
        e = e.value
    return isinstance(e, ast.Name)


def _body_nodes(func: ast.FunctionDef) -> list[ast.AST]:
    """Every node of the function body (not its decorators or annotations)."""
    return [n for stmt in func.body for n in ast.walk(stmt)]


def _annotation_kind(annotation: Any) -> tuple[str, bool]:
    """(kind, keep_annotation_text) for a parameter's evaluated annotation."""
    if annotation is inspect.Parameter.empty:
        return "auto", False
    if isinstance(annotation, type) and issubclass(annotation, language.ParamKind) \
            and annotation is not language.ParamKind:
        return annotation.kind, False
    if typing.get_origin(annotation) is typing.Annotated:
        ct = _cuda_tile()
        meta = getattr(annotation, "__metadata__", ())
        if any(isinstance(m, ct.ConstantAnnotation) for m in meta):
            return "constant", True
        if any(type(m).__module__.startswith("cuda.tile") for m in meta):
            return "auto", True
    return "auto", False


class _Checker:
    """One pass over a function body; collects sites or raises the first SafetyError."""

    def __init__(self, fn: types.FunctionType, source: CapturedSource,
                 param_kinds: dict[str, str], unsafe: bool, context: str,
                 registry: HelperRegistry):
        self.fn = fn
        self.src = source
        self.func = source.tree
        self.kinds = param_kinds
        self.unsafe = unsafe
        self.context = context  # "kernel 'add'" or "helper 'f' (called from kernel 'add')"
        self.locals = _local_names(self.func)
        self.scope = _Scope(fn, self.locals)
        self.body = _body_nodes(self.func)
        self.parents: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(self.func):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
        self.partitions = {n for n, k in param_kinds.items() if k in ("Out", "InOut")}
        self.sites: list[Site] = []
        self.deferred: list[tuple[str, ast.Call]] = []
        self.persistent_loops: dict[ast.For, str] = {}  # loop -> minted variable
        self.registry = registry
        self.ct = _cuda_tile()
        self.roots = self._compute_roots()

    # ---- errors -------------------------------------------------------------------
    def fail(self, node: ast.AST, message: str, hint: str | None = None):
        raise SafetyError(f"{message} (in {self.context})", location=self.src.location(node),
                          hint=hint)

    def text(self, node: ast.AST) -> str:
        return self.src.segment(node) or ast.unparse(node)

    # ---- classification -----------------------------------------------------------
    def ct_name(self, obj: Any) -> str | None:
        """The public cuda.tile name of obj, if obj is a cuda.tile function."""
        if obj is _UNRESOLVED or obj is _LOCAL:
            return None
        mod = getattr(obj, "__module__", "") or ""
        if not mod.startswith("cuda.tile"):
            return None
        name = getattr(obj, "__name__", None)
        if name and getattr(self.ct, name, None) is obj:
            return name
        if obj is getattr(self.ct.Array, "from_foreign", None):
            return "from_foreign"
        return name

    def callee_name(self, call: ast.Call) -> str:
        f = call.func
        if isinstance(f, ast.Attribute):
            return f.attr
        if isinstance(f, ast.Name):
            return f.id
        return ""

    def is_load_like(self, call: ast.Call) -> bool:
        target = self.scope.resolve(call.func)
        if target is language.load_like:
            return True
        return target is _UNRESOLVED and self.callee_name(call) == "load_like"

    def is_tilelab_object(self, obj: Any) -> bool:
        """Whether obj is part of tilelab's host API (tensors, schedules, tl.kernel...),
        which has no meaning inside a kernel. Plain functions of the kernel library
        (``tilelab.kernels.*``) are ordinary helpers, checked like the user's own."""
        if obj is _UNRESOLVED or obj is _LOCAL or obj is language.load_like:
            return False
        if isinstance(obj, types.ModuleType):
            name = obj.__name__
            return (name == "tilelab" or name.startswith("tilelab.")) and \
                not name.startswith("tilelab.kernels")
        mod = getattr(obj, "__module__", None)
        if not isinstance(mod, str) or not (mod == "tilelab" or mod.startswith("tilelab.")):
            return False
        return not (mod.startswith("tilelab.kernels") and isinstance(obj, types.FunctionType))

    def enclosing_nested_function(self, node: ast.AST) -> ast.AST | None:
        cur = self.parents.get(node)
        while cur is not None and cur is not self.func:
            if isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                return cur
            cur = self.parents.get(cur)
        return None

    # ---- alias roots --------------------------------------------------------------
    def _compute_roots(self) -> dict[str, set[str]]:
        """Which parameters each local name may alias (flow-insensitive, to a fixpoint)."""
        assigns: list[tuple[str, ast.expr]] = []

        def targets(t: ast.AST):
            if isinstance(t, ast.Name):
                yield t.id
            elif isinstance(t, (ast.Tuple, ast.List)):
                for e in t.elts:
                    yield from targets(e)
            elif isinstance(t, ast.Starred):
                yield from targets(t.value)

        for node in self.body:
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    assigns += [(n, node.value) for n in targets(t)]
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                assigns += [(n, node.value) for n in targets(node.target)]
            elif isinstance(node, ast.NamedExpr):
                assigns.append((node.target.id, node.value))
            elif isinstance(node, (ast.For, ast.comprehension)):
                assigns += [(n, node.iter) for n in targets(node.target)]
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                assigns += [(n, node.context_expr) for n in targets(node.optional_vars)]
        roots: dict[str, set[str]] = defaultdict(set)
        for name in self.kinds:
            roots[name].add(name)
        changed = True
        while changed:
            changed = False
            for name, value in assigns:
                new = self.expr_roots(value, roots)
                if not new <= roots[name]:
                    roots[name] |= new
                    changed = True
        return roots

    def expr_roots(self, e: ast.AST, roots: dict[str, set[str]] | None = None) -> set[str]:
        """Parameters whose memory the value of ``e`` may refer to."""
        roots = self.roots if roots is None else roots
        if isinstance(e, ast.Name):
            return set(roots.get(e.id, ()))
        if isinstance(e, (ast.Tuple, ast.List, ast.Set)):
            return set().union(*(self.expr_roots(x, roots) for x in e.elts)) if e.elts else set()
        if isinstance(e, ast.Starred):
            return self.expr_roots(e.value, roots)
        if isinstance(e, ast.Subscript):
            return self.expr_roots(e.value, roots)
        if isinstance(e, ast.IfExp):
            return self.expr_roots(e.body, roots) | self.expr_roots(e.orelse, roots)
        if isinstance(e, ast.BoolOp):
            return set().union(*(self.expr_roots(x, roots) for x in e.values))
        if isinstance(e, ast.NamedExpr):
            return self.expr_roots(e.value, roots)
        if isinstance(e, ast.Call):
            f = e.func
            if self.is_load_like(e):
                return set()  # a loaded tile, not memory
            if isinstance(f, ast.Attribute) and f.attr in VIEW_METHODS:
                return self.expr_roots(f.value, roots)
            target = self.scope.resolve(f)
            if self.ct_name(target) is not None:
                return set()  # cuTile ops return tiles, never arrays
            if isinstance(f, ast.Attribute) and self.scope.resolve(f.value) is _LOCAL:
                return set()  # a method of a tile (astype, reshape, ...)
            out: set[str] = set()
            for a in list(e.args) + [k.value for k in e.keywords]:
                out |= self.expr_roots(a, roots)
            return out
        return set()

    # ---- the checks ---------------------------------------------------------------
    def run(self) -> None:
        self.check_partition_uses()
        self.check_calls()

    def check_partition_uses(self) -> None:
        # Persistent loops first: they define which names are minted tiles.
        for node in self.body:
            if isinstance(node, (ast.For, ast.AsyncFor)) and self.is_tiles_call(node.iter):
                self.check_persistent_loop(node)
        uses = sorted((n for n in self.body
                       if isinstance(n, ast.Name) and n.id in self.partitions),
                      key=lambda n: (n.lineno, n.col_offset))
        for name in uses:
            self.check_partition_use(name)
        if self.persistent_loops:
            for site in self.sites:
                if site.kind in ("store", "load", "load_like") and site.at is None:
                    self.fail(site.node,
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
            self.fail(call, f"{p}.tiles() takes no arguments: the schedule decides which "
                            "tiles each block gets")
        if not isinstance(loop.target, ast.Name):
            self.fail(loop.target, f"the loop over {p}.tiles() must bind one name, "
                                   "e.g. 'for t in p.tiles():'")
        var = loop.target.id
        for outer in self.persistent_loops:
            if loop in ast.walk(outer):
                self.fail(loop, "persistent tile loops cannot be nested: one "
                                "'for t in p.tiles()' hands each tile to exactly one block")
        for node in ast.walk(ast.Module(body=loop.body + loop.orelse, type_ignores=[])):
            if isinstance(node, ast.Name) and node.id == var and \
                    isinstance(node.ctx, (ast.Store, ast.Del)):
                self.fail(node, f"the tile variable {var!r} minted by {p}.tiles() is "
                                "reassigned inside the loop; stores would no longer go to "
                                "the tile this block owns",
                          hint=f"use another name for the new value; keep {var!r} as the "
                               "loop gave it")
        self.persistent_loops[loop] = var
        self.sites.append(Site("tiles", p, call))

    def minted_at(self, node: ast.AST, at: ast.expr, what: str) -> None:
        """Check that at= (or tile_index_of's argument) is a minted tile variable."""
        index_of = what.endswith(".tile_index_of")
        if not self.persistent_loops:
            if index_of:
                p = what.split(".")[0]
                self.fail(at, f"{what}() is only for persistent kernels, which loop over "
                                f"'for t in {p}.tiles()'; this kernel owns one tile",
                          hint=f"use {p}.tile_index for this block's tile coordinates")
            self.fail(at, f"at= is only for persistent kernels: {what} already goes to "
                          "this block's own tile",
                      hint="remove at=, or walk tiles with 'for t in p.tiles():' and "
                           "launch with schedule=tl.persistent()")
        if isinstance(at, ast.Name):
            cur = self.parents.get(node)
            while cur is not None:
                if cur in self.persistent_loops and self.persistent_loops[cur] == at.id:
                    return
                cur = self.parents.get(cur)
        if index_of:
            p = what.split(".")[0]
            self.fail(at, f"{what}({self.text(at)}) needs a tile minted by an enclosing "
                          f"'for t in {p}.tiles()' loop",
                      hint=f"write {p}.tile_index_of(t) with the loop's own t")
        self.fail(at, f"at={self.text(at)} is not a tile minted by an enclosing "
                      "'for t in p.tiles()' loop; a persistent kernel may only store at "
                      "tiles the loop handed to this block",
                  hint="write p.store(tile, at=t) inside 'for t in p.tiles():'")

    def check_partition_use(self, name: ast.Name) -> None:
        p = name.id
        kind = self.kinds[p]
        if isinstance(name.ctx, (ast.Store, ast.Del)):
            self.fail(name, f"partition parameter {p!r} is reassigned",
                      hint=f"bind new values to another name; {p!r} must keep meaning "
                           "the partition")
        nested = self.enclosing_nested_function(name)
        if nested is not None:
            self.fail(name, f"a nested function or lambda captures partition {p!r}; "
                            "closures could store to it where the checker cannot see",
                      hint=f"compute a tile in the helper, return it, and write "
                           f"{p}.store(tile) in the kernel body")
        parent = self.parents.get(name)
        if isinstance(parent, ast.Attribute) and parent.value is name:
            self.check_partition_attribute(name, parent)
            return
        if isinstance(parent, ast.keyword):
            parent = self.parents.get(parent)
        if isinstance(parent, ast.Call) and name is not parent.func:
            self.check_partition_argument(name, parent)
            return
        self.fail(name, f"partition {p!r} may only be used as {p}.store(tile)"
                        f"{', ' + p + '.load()' if kind == 'InOut' else ''}, "
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
        if a == "tile_shape":
            if called:
                self.fail(call, f"{p}.tile_shape is a tuple, not a method")
            self.sites.append(Site("tile_shape", p, attr))
            return
        if a == "tile_index":
            if called:
                self.fail(call, f"{p}.tile_index is a tuple, not a method")
            if self.persistent_loops:
                self.fail(attr, f"{p}.tile_index is not defined in a persistent kernel: "
                                "each block owns many tiles",
                          hint=f"use {p}.tile_index_of(t) for the tile t of "
                               f"'for t in {p}.tiles()'")
            self.sites.append(Site("tile_index", p, attr))
            return
        if a == "tile_index_of":
            if not called or len(call.args) != 1 or call.keywords:
                self.fail(attr, f"{p}.tile_index_of(t) takes the tile t minted by "
                                f"'for t in {p}.tiles()'")
            self.minted_at(call, call.args[0], f"{p}.tile_index_of")
            self.sites.append(Site("tile_index_of", p, call, at=call.args[0]))
            return
        if a in ("store", "load", "tiles"):
            if not called:
                self.fail(attr, f"{p}.{a} must be called directly; taking the method as a "
                                "value would let other code choose where it writes")
            if a == "tiles":
                loop = self.parents.get(call)
                if not (isinstance(loop, ast.For) and loop.iter is call):
                    self.fail(call, f"{p}.tiles() can only be the iterable of a for "
                                    "loop: 'for t in p.tiles():'")
                return
            if a == "store":
                self.check_store(p, call)
            else:
                self.check_load(p, kind, call)
            return
        self.fail(attr, f"partition {p!r} has no attribute {a!r}; in a kernel a "
                        f"partition offers {', '.join(PARTITION_ATTRS)}")

    def check_store(self, p: str, call: ast.Call) -> None:
        extra_kw = [k for k in call.keywords if k.arg != "at"]
        if len(call.args) != 1 or extra_kw or any(isinstance(a, ast.Starred)
                                                  for a in call.args):
            bad = extra_kw[0] if extra_kw else (call.args[1] if len(call.args) > 1
                                                else call)
            what = f"{bad.arg}=" if isinstance(bad, ast.keyword) and bad.arg else "an index"
            self.fail(bad, f"{p}.store() takes only the tile: the destination of every "
                           f"safe store is fixed by the partition, so {what} cannot be "
                           "chosen",
                      hint=f"write {p}.store(tile); to choose destinations yourself, use "
                           "@tl.kernel(unsafe=True) with a tl.Raw parameter")
        at = next((k.value for k in call.keywords if k.arg == "at"), None)
        if at is not None:
            self.minted_at(call, at, f"{p}.store")
        self.sites.append(Site("store", p, call, value=call.args[0], at=at))

    def check_load(self, p: str, kind: str, call: ast.Call) -> None:
        if kind == "Out":
            self.fail(call, f"{p} is tl.Out (write-only): a kernel may not read its "
                            "outputs",
                      hint=f"declare it '{p}: tl.InOut' to read this block's tile with "
                           f"{p}.load()")
        extra = [k for k in call.keywords if k.arg != "at"]
        if call.args or extra:
            self.fail(call, f"{p}.load() reads this block's own tile and takes no index",
                      hint=f"write {p}.load(); tl.In parameters can be read anywhere with "
                           "ct.load")
        at = next((k.value for k in call.keywords if k.arg == "at"), None)
        if at is not None:
            self.minted_at(call, at, f"{p}.load")
        self.sites.append(Site("load", p, call, at=at))

    def check_partition_argument(self, name: ast.Name, call: ast.Call) -> None:
        p, kind = name.id, self.kinds[name.id]
        if self.is_load_like(call):
            if call.args and call.args[0] is name:
                if kind == "Out":
                    self.fail(name, f"{p} is tl.Out (write-only): tl.load_like({p}, ...) "
                                    "would read an output",
                              hint=f"declare it '{p}: tl.InOut' and read with {p}.load()")
                self.fail(name, f"tl.load_like({p}, ...) would read a tile of the "
                                f"partition {p} other than this block's own",
                          hint=f"read this block's tile with {p}.load()")
            self.check_load_like(call)
            return
        target = self.scope.resolve(call.func)
        ctname = self.ct_name(target)
        callee = self.text(call.func)
        if ctname in WRITE_FUNCS or (target is _UNRESOLVED
                                     and self.callee_name(call) in WRITE_FUNCS):
            self.fail(call, f"{callee}() writes partition {p!r} directly; a safe kernel "
                            f"writes a partition only with {p}.store(tile), whose "
                            "destination the partition fixes",
                      hint=f"write {p}.store(tile)")
        if ctname in READ_FUNCS:
            if kind == "Out":
                self.fail(call, f"{p} is tl.Out (write-only): {callee}() would read it",
                          hint=f"declare it '{p}: tl.InOut' and read its tile with "
                               f"{p}.load()")
            self.fail(call, f"{callee}() on partition {p!r} could read tiles other blocks "
                            "write",
                      hint=f"read this block's tile with {p}.load()")
        if ctname is not None:
            self.fail(call, f"partition {p!r} cannot be passed to {callee}(); inside a "
                            "kernel it is used only through its own methods",
                      hint=f"use {p}.shape, {p}.tile_shape or {p}.tile_index")
        self.fail(call, f"passing partition {p!r} to {callee}() is not allowed: the "
                        "callee could write any tile of it",
                  hint=f"have {callee}() return a tile and write {p}.store(tile) in the "
                       "kernel")

    def check_load_like(self, call: ast.Call) -> None:
        extra = [k for k in call.keywords if k.arg != "at"]
        if len(call.args) != 2 or extra or any(isinstance(a, ast.Starred) for a in call.args):
            self.fail(call, "tl.load_like takes an array and a partition: "
                            "tl.load_like(x, p) (and at=t in persistent kernels)")
        part = call.args[1]
        if not (isinstance(part, ast.Name) and part.id in self.partitions):
            self.fail(part, f"the second argument of tl.load_like must be a partition "
                            f"parameter (tl.Out or tl.InOut), got {self.text(part)!r}")
        at = next((k.value for k in call.keywords if k.arg == "at"), None)
        if at is not None:
            self.minted_at(call, at, "tl.load_like")
        if any(s.node is call for s in self.sites):
            return
        self.sites.append(Site("load_like", part.id, call, value=call.args[0], at=at))

    def check_calls(self) -> None:
        for node in self.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.fail(node, "import statements are not allowed inside a kernel: the "
                                "checker resolves names from the module",
                          hint="import at module level (e.g. 'import cuda.tile as ct')")
            if isinstance(node, (ast.Global, ast.Nonlocal)):
                self.fail(node, "global/nonlocal statements are not allowed inside a kernel")
            if isinstance(node, ast.Attribute) and node.attr in POINTER_NAMES \
                    and not self.unsafe:
                self.fail(node, f"{self.text(node)} makes raw pointers, which only "
                                "@tl.kernel(unsafe=True) kernels may use",
                          hint="read arrays with ct.load / tl.load_like instead")
        calls = sorted((n for n in self.body if isinstance(n, ast.Call)),
                       key=lambda n: (n.lineno, n.col_offset))
        for call in calls:
            self.check_call(call)
        for node in self.body:
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(
                    getattr(node, "ctx", None), ast.Load):
                parent = self.parents.get(node)
                if isinstance(parent, ast.Attribute):
                    continue  # judge the whole dotted name
                obj = self.scope.resolve(node)
                if self.is_tilelab_object(obj):
                    self.fail(node, f"{self.text(node)} is not available inside a kernel: "
                                    "kernels use cuda.tile ops, partitions and "
                                    "tl.load_like")

    def check_call(self, call: ast.Call) -> None:
        f = call.func
        if self.is_load_like(call):
            if not any(s.node is call for s in self.sites):
                self.check_load_like(call)
            return
        # p.store / p.load on partitions were handled by check_partition_uses
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                and f.value.id in self.partitions:
            return
        if not isinstance(f, (ast.Name, ast.Attribute)):
            self.fail(call, f"call of a computed callee {self.text(f)!r}: the checker "
                            "cannot tell what it calls (it could be ct.store)",
                      hint="call functions and cuTile ops by name, e.g. ct.load(...) or "
                           "my_helper(...)")
        target = self.scope.resolve(f)
        if isinstance(f, ast.Name) and f.id in self.locals:
            if any(isinstance(n, ast.FunctionDef) and n.name == f.id for n in self.body):
                return  # a function nested in the body: checked as part of the body
            self.fail(call, f"call through the local variable {f.id!r}: the checker cannot "
                            "see what it calls",
                      hint="call functions by their global name")
        if self.is_tilelab_object(target):
            self.fail(call, f"{self.text(f)}() is not available inside a kernel: kernels "
                            "use cuda.tile ops, partitions and tl.load_like",
                      hint="schedules and tensors are chosen on the host, at launch")
        if not self.unsafe and any(target is getattr(builtins, b) for b in DYNAMIC_BUILTINS):
            self.fail(call, f"{self.text(f)}() looks names up at run time, which the "
                            "safety checker cannot follow",
                      hint="refer to functions, ops and constants by their names; for "
                           "compile-time computation use ct.static_eval")
        ctname = self.ct_name(target)
        name = self.callee_name(call)
        if ctname in POINTER_NAMES or (isinstance(f, ast.Attribute)
                                       and f.attr in POINTER_NAMES):
            if not self.unsafe:
                self.fail(call, f"{self.text(f)}() makes raw pointers, which only "
                                "@tl.kernel(unsafe=True) kernels may use")
            return
        if ctname in WRITE_FUNCS:
            self.check_write(call, self.write_destination(call), f"{self.text(f)}()")
            return
        if isinstance(f, ast.Attribute) and f.attr in WRITE_METHODS and ctname is None:
            # a method of an array view (TiledView.store, RawArrayMemory.store_offset)
            self.check_write(call, f.value, f".{f.attr}()")
            return
        if target is _UNRESOLVED and name in WRITE_FUNCS:
            # not resolvable yet, but named like a cuTile write: judge it as one
            self.check_write(call, self.write_destination(call), f"{self.text(f)}()")
            return
        if ctname is not None or target is _LOCAL:
            return
        if isinstance(f, ast.Attribute) and not _is_dotted_name(f.value):
            return  # a method of a computed value (a tile's .astype(), .reshape(), ...)
        if target is _UNRESOLVED:
            self.deferred.append((self.text(f), call))
            return
        self.check_helper_call(call, target)

    @staticmethod
    def write_destination(call: ast.Call) -> ast.expr | None:
        if call.args and not isinstance(call.args[0], ast.Starred):
            return call.args[0]
        kw = next((k.value for k in call.keywords if k.arg == "array"), None)
        if kw is not None:
            return kw
        return call.args[0].value if call.args else None

    def check_write(self, call: ast.Call, dest: ast.expr | None, what: str) -> None:
        if dest is None:
            self.fail(call, f"{what} without a destination array")
        roots = self.expr_roots(dest)
        d = self.text(dest)
        readonly = sorted(r for r in roots if self.kinds.get(r) in ("In", "auto"))
        parts = sorted(r for r in roots if self.kinds.get(r) in ("Out", "InOut"))
        raws = {r for r in roots if self.kinds.get(r) == "Raw"}
        if parts:
            p = parts[0]
            self.fail(call, f"{what} writes partition {p!r} directly; a safe kernel "
                            f"writes a partition only with {p}.store(tile)",
                      hint=f"write {p}.store(tile)")
        if readonly:
            x = readonly[0]
            label = "tl.In" if self.kinds[x] == "In" else "an input (unannotated arrays are tl.In)"
            self.fail(call, f"{what} writes to {x!r}, which is {label}: kernels may not "
                            "write their inputs",
                      hint="declare an output parameter 'z: tl.Out', launch with "
                           "z.partition(tile_shape) and write z.store(tile); for "
                           "cross-block writes (atomics, scatter) use "
                           "@tl.kernel(unsafe=True) and 'x: tl.Raw'")
        if not self.unsafe:
            self.fail(call, f"{what} writes memory directly; safe kernels write only "
                            "through partitions",
                      hint="write p.store(tile) on a tl.Out/tl.InOut partition, or opt "
                           "out with @tl.kernel(unsafe=True) and a tl.Raw parameter")
        if not raws:
            self.fail(call, f"{what} writes to {d!r}, which the checker cannot trace back "
                            "to a tl.Raw parameter",
                      hint="write through the tl.Raw parameter itself, e.g. "
                           "ct.store(raw, index=..., tile=...)")

    def check_helper_call(self, call: ast.Call, target: Any) -> None:
        fn = target
        while hasattr(fn, "__wrapped__") and getattr(fn, "_cutile_function_wrapper", False):
            fn = fn.__wrapped__
        if not isinstance(fn, types.FunctionType):
            return  # builtins (min, range, ...) and classes
        mod = getattr(fn, "__module__", "") or ""
        if mod.startswith("cuda.tile") or mod == "tilelab.compiler.device":
            return
        self.record_binding(call.func, target)
        # Kinds for the helper's parameters: Raw where the argument is Raw-rooted.
        arg_exprs: dict[str, ast.expr] = {}
        try:
            sig = inspect.signature(fn)
            bound = sig.bind_partial(*call.args, **{k.arg: k.value for k in call.keywords
                                                    if k.arg})
            arg_exprs = dict(bound.arguments)
        except (TypeError, ValueError):
            pass
        kinds: dict[str, str] = {}
        for pname in inspect.signature(fn).parameters:
            e = arg_exprs.get(pname)
            roots = self.expr_roots(e) if isinstance(e, ast.AST) else set()
            is_raw = bool(roots) and all(self.kinds.get(r) == "Raw" for r in roots)
            kinds[pname] = "Raw" if (self.unsafe and is_raw) else "In"
        check_helper(fn, kinds, self.unsafe, self.context, self.registry, call, self.src)

    def record_binding(self, func: ast.expr, obj: Any) -> None:
        """Remember which namespace entry a helper came from (to notice rebinding)."""
        if isinstance(func, ast.Name):
            if func.id in self.scope.closure:
                return  # closure cells of a finished function do not change
            if func.id in self.scope.globals:
                self.registry.bindings.append((self.scope.globals, func.id, obj))
        elif isinstance(func, ast.Attribute):
            base = self.scope.resolve(func.value)
            if isinstance(base, types.ModuleType):
                self.registry.bindings.append((vars(base), func.attr, obj))


def check_helper(fn: types.FunctionType, kinds: dict[str, str], unsafe: bool,
                 caller_context: str, registry: HelperRegistry, call: ast.Call | None = None,
                 caller_src: CapturedSource | None = None) -> None:
    """Check a helper function called from a kernel with the given parameter kinds."""
    key = (fn, tuple(sorted(kinds.items())), unsafe)
    if key in registry.memo:
        return
    registry.memo[key] = True
    loc = caller_src.location(call) if (call is not None and caller_src) else None
    if fn.__name__ == "<lambda>":
        callee = caller_src.segment(call.func) if (call is not None and caller_src) else ""
        raise SafetyError(f"{callee or 'this helper'} is a lambda, which cannot be called "
                          "as a kernel helper: helpers are checked from their source, one "
                          f"'def' at a time (in {caller_context})",
                          location=loc, hint="define the helper with 'def'")
    try:
        src = capture_source(fn)
    except SafetyError:
        raise SafetyError(f"cannot check helper {fn.__name__!r}: its source is not "
                          "available, so whether it writes its arguments is unknown",
                          location=loc,
                          hint="define helpers in a .py file or notebook cell") from None
    registry.sources.append((f"{fn.__module__}.{fn.__qualname__}", src.fingerprint))
    kernel_name = caller_context.split("kernel ", 1)[-1].split(")")[0]
    context = f"helper {fn.__name__!r}, called from kernel {kernel_name}"
    checker = _Checker(fn, src, kinds, unsafe, context, registry)
    checker.run()
    if checker.deferred:
        name, node = checker.deferred[0]
        raise SafetyError(f"helper {fn.__name__!r} calls {name}(), which is not defined "
                          f"(in {context})", location=src.location(node),
                          hint="define it before the kernel is compiled")


def analyze_kernel(fn: types.FunctionType, *, unsafe: bool = False) -> KernelAnalysis:
    """Capture and check a kernel; returns the analysis or raises SafetyError.

    Example:
        >>> import tilelab as tl
        >>> def add(z: tl.Out, x: tl.In, y: tl.In):
        ...     z.store(tl.load_like(x, z) + tl.load_like(y, z))
        >>> [s.kind for s in analyze_kernel(add).sites]
        ['store', 'load_like', 'load_like']
    """
    src = capture_source(fn)
    func = src.tree
    context = f"kernel {fn.__name__!r}"
    a = func.args
    for bad, what in ((a.vararg, "*args"), (a.kwarg, "**kwargs")):
        if bad is not None:
            raise SafetyError(f"kernel parameters cannot be {what} (in {context})",
                              location=src.location(bad))
    if a.kwonlyargs:
        raise SafetyError(f"kernel parameters cannot be keyword-only (in {context})",
                          location=src.location(a.kwonlyargs[0]))
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:  # unresolvable string annotations: fall back to raw ones
        hints = dict(getattr(fn, "__annotations__", {}))
    params: list[ParamInfo] = []
    for arg in a.posonlyargs + a.args:
        kind, keep = _annotation_kind(hints.get(arg.arg, inspect.Parameter.empty))
        if kind == "Raw" and not unsafe:
            raise SafetyError(
                f"parameter {arg.arg!r} is tl.Raw, which only unsafe kernels may have "
                f"(in {context})", location=src.location(arg),
                hint="decorate with @tl.kernel(unsafe=True) to opt out locally, or use "
                     "tl.Out/tl.InOut partitions")
        params.append(ParamInfo(arg.arg, kind, arg, keep))
    kinds = {p.name: p.kind for p in params}
    registry = HelperRegistry()
    checker = _Checker(fn, src, kinds, unsafe, context, registry)
    checker.run()
    persistent = bool(checker.persistent_loops)
    ct_aliases = [n for n, v in fn.__globals__.items()
                  if isinstance(v, types.ModuleType) and v.__name__ == "cuda.tile"]
    used = {n.id for n in ast.walk(func) if isinstance(n, ast.Name)} | set(kinds) \
        | checker.locals
    return KernelAnalysis(src, params, unsafe, persistent, checker.sites,
                          checker.deferred, ct_aliases, used, registry)


def recheck_calls(fn: types.FunctionType, analysis: KernelAnalysis) -> None:
    """Check every call of the kernel again, resolving names as they are now.

    Runs before a kernel is compiled: helpers defined after the kernel (or redefined in
    a notebook since) are checked before any code is built from them. A call target
    that still cannot be found is an error here.
    """
    kinds = {p.name: p.kind for p in analysis.params}
    registry = HelperRegistry()
    checker = _Checker(fn, analysis.source, kinds, analysis.unsafe,
                       f"kernel {fn.__name__!r}", registry)
    checker.run()
    if checker.deferred:
        name, node = checker.deferred[0]
        raise SafetyError(f"kernel {fn.__name__!r} calls {name}(), which is not defined",
                          location=analysis.source.location(node),
                          hint="define it (at module level) before compiling the kernel")
    analysis.deferred_calls = []
    analysis.helpers = registry
