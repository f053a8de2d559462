"""Call and name rules: the allowlist itself.

Every free name a function uses resolves, when the kernel is checked, to something the
tables of :mod:`tilelab.compiler.safety.optable` classify; every call resolves to a
classified cuTile op, ``tl.load_like``, an allowlisted builtin, a method of a tile, or
a plain Python helper (checked by the same rules). A name used as a call target is never
bound in the function. Writes exist only in unsafe kernels, into arrays traced back to
``tl.Raw`` parameters. Every read, write, view and raw op accepted here is recorded with
why it is safe, or that it is an opt-out (:mod:`tilelab.compiler.safety.accesses`).
"""
from __future__ import annotations

import ast
import types
from collections import defaultdict
from typing import Any

from tilelab.compiler import language
from tilelab.compiler.safety import bounds
from tilelab.compiler.safety.accesses import AccessKind, record_access
from tilelab.compiler.safety.combiners import check_combiner
from tilelab.compiler.safety.ct_objects import (ct_names, describe_object, is_ct_class,
                                                is_ct_module, unwrap_ct_function)
from tilelab.compiler.safety.kinds import OpKind, ParamKind, is_partition, read_only
from tilelab.compiler.safety.optable import (BUILTIN_CALLS, CT_OPS, DYNAMIC_BUILTINS,
                                             FUNC_ARGUMENT_OPS, RAW_METHODS, READ_METHODS,
                                             TILE_METHODS, VIEW_METHODS, WRITE_METHODS,
                                             builtin_name, is_allowed_value)
from tilelab.compiler.safety.scope import UNRESOLVED
from tilelab.compiler.safety.suggest import missing_attribute_message, missing_name_suffix
from tilelab.compiler.safety.views import check_input_view
from tilelab.errors import SafetyError

__all__ = ["CallRules"]

_RAW_CLASS_ATTRS = {"from_foreign": OpKind.RAW}


def is_tilelab_host_object(obj: Any) -> bool:
    """tilelab's host API (tensors, schedules, tl.kernel...): no meaning in a kernel.
    Plain functions of the kernel library and the device helpers are helpers."""
    if obj is language.load_like:
        return False
    if isinstance(obj, types.ModuleType):
        return False
    mod = getattr(obj, "__module__", None)
    if not isinstance(mod, str) or not (mod == "tilelab" or mod.startswith("tilelab.")):
        return False
    if isinstance(obj, types.FunctionType) and (
            mod.startswith("tilelab.kernels") or mod == "tilelab.compiler.tile_index"):
        return False
    return True


class CallRules:
    """Mixin of the function checker: free names, dotted names and calls."""

    # ---- resolving ---------------------------------------------------------------
    def chain(self, e: ast.AST) -> list[str] | None:
        """['a', 'b', 'c'] for a dotted name ``a.b.c`` rooted at a name, else None."""
        out = []
        while isinstance(e, ast.Attribute):
            out.append(e.attr)
            e = e.value
        if not isinstance(e, ast.Name):
            return None
        out.append(e.id)
        return out[::-1]

    def resolve(self, e: ast.AST) -> Any:
        """The object a free dotted name refers to (UNRESOLVED, or None when local)."""
        names = self.chain(e)
        if names is None or names[0] in self.bound:
            return None
        obj = self.scope.lookup(names[0])
        for i, attr in enumerate(names[1:], start=1):
            if obj is UNRESOLVED:
                return obj
            nxt = self.scope.attribute(obj, attr, names[0], tuple(names[1:i + 1]))
            if nxt is UNRESOLVED:
                if isinstance(obj, types.ModuleType) or is_ct_class(obj):  # a typo?
                    message, hint = missing_attribute_message(obj, ".".join(names[:i]),
                                                              attr)
                    self.fail("global-attribute", e, message, hint=hint)
                self.fail("global-attribute", e,
                          f"{'.'.join(names[:i + 1])}: {'.'.join(names[:i])} is "
                          f"{describe_object(obj)}, and dotted names in a kernel go through "
                          "modules only")
            obj = nxt
        return obj

    def ct_op_name(self, func: ast.AST) -> str | None:
        """The cuda.tile name a call target resolves to, if any."""
        if self.chain(func) is None:
            return None
        return ct_names().get(id(self.resolve(func)))

    def is_load_like(self, call: ast.Call) -> bool:
        names = self.chain(call.func)
        if names is None or names[0] in self.bound:
            return False
        try:
            return self.resolve(call.func) is language.load_like
        except SafetyError:   # a dotted name that does not resolve: judged as a call
            return False

    # ---- the pass ------------------------------------------------------------------
    def check_references(self) -> None:
        """Judge every call, then every free name used as a value."""
        calls = sorted((n for n in self.nodes if isinstance(n, ast.Call)),
                       key=lambda n: (n.lineno, n.col_offset))
        for call in calls:
            self.check_call(call)
        for node in self.nodes:
            if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)):
                continue
            if node.id in self.bound or node.id in self.partitions:
                continue
            top = node
            while isinstance(self.parents.get(top), ast.Attribute) and \
                    self.parents[top].value is top:
                top = self.parents[top]
            parent = self.parents.get(top)
            if isinstance(parent, ast.Call) and parent.func is top:
                continue  # judged as a call
            if id(top) in self.func_arguments:
                continue  # a function handed to ct.reduce / ct.scan: judged there
            obj = self.resolve(top)
            if obj is UNRESOLVED:
                self.unresolved(top)
                continue
            if obj is language.load_like or obj is language.wait_for_previous_kernel:
                self.fail("call-unknown", top, f"{self.text(top)} can only be called")
            if not is_allowed_value(obj) and id(top) in self.annotation_of:
                self.fail("global-value", top,
                          f"parameter {self.annotation_of[id(top)]!r} is annotated with "
                          f"{self.text(top)}, which is {describe_object(obj)} ({obj!r}): a "
                          "cuTile annotation of a kernel parameter is made of types a "
                          "kernel can take (int, float, bool, str, dtypes) and cuTile's "
                          "annotations, such as ct.Constant[int]",
                          hint="annotate with ct.Constant[int] (or a module-level alias "
                               "of it, ConstInt = ct.Constant[int]), with int or float "
                               "for a value passed at launch, or with tl.In, tl.Out or "
                               "tl.InOut for arrays")
            if not is_allowed_value(obj):
                self.fail("global-value", top,
                          f"{self.text(top)} is {describe_object(obj)}; a kernel reads only "
                          "numbers, strings, tuples, dtypes and cuTile constants from its "
                          "module" + (" (functions are called, never passed around)"
                                      if callable(obj) else ""))

    def unresolved(self, node: ast.AST) -> None:
        name = self.text(node)
        if self.allow_deferred:
            self.deferred.append((name, node))
            return
        self.fail("unresolved-name", node, f"NameError: name {name!r} is not defined"
                  + missing_name_suffix(name, self.bound, self.scope.globals))

    def check_call(self, call: ast.Call) -> None:
        f = call.func
        if self.is_load_like(call):
            if not self.partitions:
                self.fail("load-like-form", call, "tl.load_like(x, p) needs a partition "
                                                  "parameter p of the kernel itself")
            if not any(s.node is call for s in self.sites):
                self.check_load_like(call)
            return
        names = self.chain(f)
        if names is not None and names[0] in self.partitions:
            return  # p.store / p.load / p.tiles: the partition rules judged them
        if names is None:
            if isinstance(f, ast.Attribute):
                self.check_method(call, f)
                return
            self.fail("call-computed", call,
                      f"call of a computed callee {self.text(f)!r}: the checker cannot "
                      "tell what it calls (it could be ct.store)",
                      hint="call functions and cuTile ops by name, e.g. ct.load(...) or "
                           "my_helper(...)")
        if names[0] in self.bound:
            if len(names) == 1:
                self.fail("call-local", call,
                          f"call through {names[0]!r}, which this function binds (as a "
                          "variable, parameter, loop or comprehension variable): the "
                          "checker cannot see what it calls")
            self.check_method(call, f)
            return
        target = self.resolve(f)
        if target is UNRESOLVED:
            self.unresolved(f)
            return
        self.check_target(call, target)

    def check_target(self, call: ast.Call, target: Any) -> None:
        f = call.func
        callee = self.text(f)
        name = ct_names().get(id(target))
        if name is not None:
            self.check_ct_op(call, name, CT_OPS.get(name) or _RAW_CLASS_ATTRS[name])
            return
        mod = getattr(target, "__module__", None)
        if (isinstance(mod, str) and mod.startswith("cuda.tile")
                and not getattr(target, "_cutile_function_wrapper", False)) \
                or is_ct_module(target):
            self.fail("call-unknown", call, f"{callee} is not a classified cuTile op: "
                                            "only cuda.tile's public, classified API is "
                                            "allowed in kernels")
        b = builtin_name(target)
        if b is not None:
            if b in BUILTIN_CALLS:
                return
            if b in DYNAMIC_BUILTINS:
                self.fail("call-dynamic", call, f"{callee}() looks names up or runs code "
                                                "at run time, which the safety checker "
                                                "cannot follow")
            self.fail("call-unknown", call,
                      f"{callee}() is not a builtin kernels can call; allowed: "
                      f"{', '.join(sorted(BUILTIN_CALLS))}")
        if target is language.wait_for_previous_kernel:
            self.check_wait_marker(call)
            return
        if is_tilelab_host_object(target):
            self.fail("call-host", call, f"{callee}() is not available inside a kernel: "
                                         "kernels use cuda.tile ops, partitions and "
                                         "tl.load_like")
        fn = unwrap_ct_function(target)
        if isinstance(fn, types.FunctionType):
            self.check_helper_call(call, fn)
            return
        self.fail("call-unknown", call,
                  f"{callee} is {describe_object(target)}, which a kernel cannot call; a kernel "
                  "calls cuTile ops, tl.load_like, the builtins "
                  f"{', '.join(sorted(BUILTIN_CALLS))} and plain Python helper functions")

    # ---- cuTile ops and methods --------------------------------------------------
    def check_ct_op(self, call: ast.Call, name: str, kind: OpKind) -> None:
        callee = self.text(call.func)
        hidden = [a for a in call.args if isinstance(a, ast.Starred)] + \
            [k for k in call.keywords if k.arg is None]
        if hidden and kind in (OpKind.READ, OpKind.WRITE, OpKind.RAW):
            self.fail("call-star", hidden[0], f"{callee}() with *args or **kwargs: the "
                                              "checker must see every argument of a "
                                              "memory op")
        if kind == OpKind.READ:
            bounds.check_read_call(self, call, callee)
            self.record_read(call, name, callee)
        elif kind == OpKind.WRITE:
            self.check_write(call, _array_argument(call), f"{callee}()")
            self.record_unsafe(call, _array_argument(call), f"{callee}() writes",
                               writes=True)
        elif kind in (OpKind.RAW, OpKind.VIEW):
            if not self.unsafe:
                self.fail("raw-op", call, f"{callee}() reaches memory without bounds "
                                          "checks or through raw pointers, which only "
                                          "@tl.kernel(unsafe=True) kernels may do")
            self.record_unsafe(call, _array_argument(call),
                               f"{callee}() is a raw op (raw pointers, unchecked indexing "
                               "or an unchecked promise to the compiler) on")
        elif kind == OpKind.HOST:
            self.fail("call-host", call, f"{callee} is cuTile's host API; it has no "
                                         "meaning inside a kernel")
        elif kind == OpKind.VALUE:
            self.fail("call-unknown", call, f"{callee} is a cuTile type or constant, "
                                            "which a kernel does not call")
        elif kind == OpKind.ORDER and not self.unsafe:
            self.fail("wait-form", call,
                      f"{callee}() orders this kernel against the kernels before and after "
                      "it on its stream, which a safe kernel leaves to tilelab: the "
                      "lowering waits for the previous kernel before the first statement "
                      "(or at tl.wait_for_previous_kernel()) and only then lets the next "
                      "one start",
                      hint="write tl.wait_for_previous_kernel() as a statement of the "
                           "kernel body where it should wait (above it the kernel only "
                           "reads tl.In arrays); calling the grid-dependency ops directly "
                           "needs @tl.kernel(unsafe=True)")
        if name in FUNC_ARGUMENT_OPS:
            self.check_func_argument(call, name, FUNC_ARGUMENT_OPS[name])

    def check_func_argument(self, call: ast.Call, op: str, position: int) -> None:
        """The combining function of ``ct.reduce`` / ``ct.scan``
        (:mod:`tilelab.compiler.safety.combiners`)."""
        check_combiner(self, call, op, position)

    def check_method(self, call: ast.Call, f: ast.Attribute) -> None:
        """A method of a value the kernel computed (a tile, an array, a view)."""
        m = f.attr
        what = f".{m}()"
        if m in TILE_METHODS:
            return
        if m in WRITE_METHODS:
            self.check_write(call, f.value, what)
            self.record_unsafe(call, f.value, f"{self.text(f)}() writes", writes=True)
            return
        if not self.unsafe and check_input_view(self, call, f):
            return  # a tiled view of an input, read bounds-checked (safety.views)
        if m in VIEW_METHODS or m in READ_METHODS or m in RAW_METHODS:
            if not self.unsafe:
                rule = "view-op" if m in VIEW_METHODS or m == "load" else "raw-op"
                also = (" (a tiled view of a tl.In array, read with tv.load(index), is "
                        "bounds-checked and allowed)" if rule == "view-op" else "")
                self.fail(rule, call, f"{self.text(f)}() makes or reads a view whose "
                                      "bounds the checker cannot prove, or raw memory; "
                                      f"only @tl.kernel(unsafe=True) kernels may{also}")
            self.record_unsafe(call, f.value, f"{self.text(f)}() makes or reads a view "
                                              "whose bounds nothing proves, or raw memory, of")
            return
        self.fail("method-unknown", call,
                  f"method {what} is not allowed in a kernel: tiles offer "
                  f"{', '.join(sorted(TILE_METHODS))}")

    # ---- the records of accepted accesses (tilelab.compiler.safety.accesses) --------
    def record_read(self, call: ast.Call, name: str, callee: str) -> None:
        """The record of an accepted ``ct.load`` / ``ct.gather``: bounds-checked, a
        masked gather, or an opt-out (no bounds check, a ``tl.Raw`` array)."""
        arr = _array_argument(call)
        roots = self.expr_roots(arr) if arr is not None else set()
        shown = self.text(arr) if arr is not None else "?"
        arrays = roots or ({shown} if arr is not None else set())
        kw = next((k for k in call.keywords if k.arg == "check_bounds"), None)
        raw = sorted(r for r in roots if self.kinds.get(r) == ParamKind.RAW)
        if kw is not None and not (isinstance(kw.value, ast.Constant)
                                   and kw.value.value is True):
            record_access(self, call, AccessKind.UNSAFE, callee, arrays,
                          f"{callee}({shown}, ..., check_bounds={self.text(kw.value)}) "
                          "reads without bounds checks, which nothing proves: an opt-out "
                          "of @tl.kernel(unsafe=True)")
        elif raw:
            record_access(self, call, AccessKind.UNSAFE, callee, arrays,
                          f"{callee}() reads tl.Raw {raw[0]!r} (bounds-checked), which "
                          "blocks of this unsafe kernel may write: nothing orders those "
                          "accesses")
        elif name == "gather":
            pad = next((self.text(k.value) for k in call.keywords
                        if k.arg == "padding_value"), "0")
            record_access(self, call, AccessKind.MASKED_GATHER, callee, arrays,
                          f"{callee}({shown}, ...) masks every index against "
                          f"{shown}.shape: out-of-bounds lanes read the padding value "
                          f"({pad}), never memory outside {shown!r}")
        else:
            pad = next((self.text(k.value) for k in call.keywords
                        if k.arg == "padding_mode"), "cuTile's default padding")
            record_access(self, call, AccessKind.BOUNDS_CHECKED, callee, arrays,
                          f"{callee}({shown}, ...) keeps cuTile's bounds check: elements "
                          f"outside {shown!r} are padding ({pad}), never memory outside it")

    def record_unsafe(self, call: ast.Call, target: ast.expr | None, what: str, *,
                      writes: bool = False) -> None:
        """The record of a write, view or raw op an unsafe kernel may make."""
        roots = self.expr_roots(target) if target is not None else set()
        arrays = roots or ({self.text(target)} if target is not None else set())
        named = ", ".join(f"{r!r} (tl.{self.kinds[r]})" if r in self.kinds else repr(r)
                          for r in sorted(arrays)) or "memory it names"
        record_access(self, call, AccessKind.UNSAFE, self.text(call.func), arrays,
                      f"{what} {named}: an opt-out of @tl.kernel(unsafe=True); nothing "
                      "proves where it reaches or that blocks do not race",
                      writes=writes)

    # ---- writes --------------------------------------------------------------------
    def check_write(self, call: ast.Call, dest: ast.expr | None, what: str) -> None:
        if dest is None:
            self.fail("write-safe", call, f"{what} without a destination array")
        roots = self.expr_roots(dest)
        readonly = sorted(r for r in roots if read_only(self.kinds.get(r)))
        parts = sorted(r for r in roots if is_partition(self.kinds.get(r)))
        if parts:
            p = parts[0]
            self.fail("write-partition", call,
                      f"{what} writes partition {p!r} directly; a safe kernel writes a "
                      f"partition only with {p}.store(tile)", hint=f"write {p}.store(tile)")
        if readonly:
            x = readonly[0]
            label = "tl.In" if self.kinds[x] == ParamKind.IN else \
                "an input (unannotated arrays are tl.In)"
            self.fail("write-input", call, f"{what} writes to {x!r}, which is {label}: "
                                           "kernels may not write their inputs")
        if not self.unsafe:
            self.fail("write-safe", call, f"{what} writes memory directly; safe kernels "
                                          "write only through partitions")
        if not roots or any(self.kinds.get(r) != ParamKind.RAW for r in roots):
            self.fail("write-untraced", call,
                      f"{what} writes to {self.text(dest)!r}, which the checker cannot "
                      "trace back to a tl.Raw parameter")

    # ---- alias roots (which parameters a local may refer to) ---------------------
    def compute_roots(self) -> dict[str, set[str]]:
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

        for node in self.nodes:
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    assigns += [(n, node.value) for n in targets(t)]
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                assigns += [(n, node.value) for n in targets(node.target)]
            elif isinstance(node, ast.NamedExpr):
                assigns.append((node.target.id, node.value))
            elif isinstance(node, (ast.For, ast.comprehension)):
                assigns += [(n, node.iter) for n in targets(node.target)]
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

    def expr_roots(self, e: ast.AST | None, roots: dict[str, set[str]] | None = None
                   ) -> set[str]:
        """Parameters whose memory the value of ``e`` may refer to."""
        if e is None:
            return set()
        roots = self.roots if roots is None else roots
        if isinstance(e, ast.Name):
            return set(roots.get(e.id, ()))
        if isinstance(e, (ast.Tuple, ast.List, ast.Set)):
            return set().union(*(self.expr_roots(x, roots) for x in e.elts))
        if isinstance(e, (ast.Starred, ast.Subscript, ast.NamedExpr)):
            return self.expr_roots(e.value, roots)
        if isinstance(e, ast.IfExp):
            return self.expr_roots(e.body, roots) | self.expr_roots(e.orelse, roots)
        if isinstance(e, ast.BoolOp):
            return set().union(*(self.expr_roots(x, roots) for x in e.values))
        if isinstance(e, ast.Attribute):
            return self.expr_roots(e.value, roots)
        if isinstance(e, ast.Call):
            f = e.func
            if isinstance(f, ast.Attribute) and (f.attr in VIEW_METHODS
                                                 or f.attr in RAW_METHODS):
                return self.expr_roots(f.value, roots)
            out: set[str] = set()
            for a in list(e.args) + [k.value for k in e.keywords]:
                out |= self.expr_roots(a, roots)
            return out
        return set()

    # ---- helpers -------------------------------------------------------------------
    def check_helper_call(self, call: ast.Call | None, fn: types.FunctionType,
                          node: ast.AST | None = None) -> None:
        if (fn.__module__ or "").startswith("cuda.tile"):
            self.fail("call-unknown", call if call is not None else node,
                      f"{self.text(call.func if call is not None else node)} is cuTile's "
                      "internal code, not a classified op; only cuda.tile's public, "
                      "classified API is allowed in kernels")
        kinds = self.helper_kinds(call, fn) if call is not None else {}
        self.program.check_helper(fn, kinds, self, call if call is not None else node)

    def helper_kinds(self, call: ast.Call, fn: types.FunctionType) -> dict[str, str]:
        """Raw for helper parameters bound to Raw-rooted arguments (unsafe kernels)."""
        import inspect

        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            return {}
        exprs: dict[str, Any] = {}
        try:
            bound = sig.bind_partial(*call.args, **{k.arg: k.value for k in call.keywords
                                                    if k.arg})
            exprs = dict(bound.arguments)
        except TypeError:
            pass
        kinds = {}
        for pname in sig.parameters:
            e = exprs.get(pname)
            roots = self.expr_roots(e) if isinstance(e, ast.AST) else set()
            raw = bool(roots) and all(self.kinds.get(r) == ParamKind.RAW for r in roots)
            kinds[pname] = ParamKind.RAW if (self.unsafe and raw) else ParamKind.IN
        return kinds


def _array_argument(call: ast.Call) -> ast.expr | None:
    """The array argument of a cuTile memory op: what ``ct.load`` / ``ct.gather`` read,
    what ``ct.store`` / ``ct.scatter`` / the atomics write (``array=`` or the first)."""
    kw = next((k.value for k in call.keywords if k.arg == "array"), None)
    if kw is not None:
        return kw
    if call.args and not isinstance(call.args[0], ast.Starred):
        return call.args[0]
    return None
