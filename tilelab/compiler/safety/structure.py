"""Structure rules: the statements and names a kernel or helper may contain at all.

Kernel code is straight tile code. Constructs that run code the checker does not see
(imports, classes, nested functions, ``with`` blocks, ``try``, generators, async code),
or that could write memory without a call (item and attribute assignment, ``del``),
are refused wherever they appear, before any call is judged. A lambda is accepted in
one place only, as the combining function written in a ``ct.reduce`` / ``ct.scan``
call, where its body is checked with the function it is written in (see
:meth:`~tilelab.compiler.safety.calls.CallRules.check_func_argument`); any other lambda
is refused once the calls are judged (:meth:`StructureRules.check_lambdas_placed`).

``assert cond, "message"`` is allowed: the lowering runs it as ``ct.assert_(cond,
"message")``, cuTile's assert, so its message must be a string literal (rule
``assert-form``).
"""
from __future__ import annotations

import ast

from tilelab.compiler.safety.combiners import check_lambda_signature

__all__ = ["StructureRules", "RESERVED_PREFIX"]

#: names beginning with this are the generated code's (see tilelab.compiler.lower)
RESERVED_PREFIX = "__tl"
#: attributes of arrays that reach raw memory (refused in safe kernels even unread)
RAW_ATTRIBUTES = frozenset({"foreign_pointer", "get_raw_memory", "from_foreign"})

_REFUSED: dict[type, str] = {
    ast.Import: "import statements", ast.ImportFrom: "import statements",
    ast.Global: "global statements", ast.Nonlocal: "nonlocal statements",
    ast.ClassDef: "class definitions", ast.FunctionDef: "nested functions",
    ast.AsyncFunctionDef: "nested functions", ast.Lambda: "lambdas",
    ast.With: "with blocks", ast.AsyncWith: "with blocks", ast.AsyncFor: "async loops",
    ast.Try: "try statements", ast.Delete: "del statements",
    ast.Yield: "yield", ast.YieldFrom: "yield", ast.Await: "await",
}
for _name, _what in (("TryStar", "try statements"), ("Match", "match statements")):
    if hasattr(ast, _name):
        _REFUSED[getattr(ast, _name)] = _what

_HINTS = {
    "import statements": "import at module level (e.g. 'import cuda.tile as ct')",
    "nested functions": "define helpers with 'def' at module level and call them by name",
    "lambdas": "define helpers with 'def' at module level and call them by name",
}


class StructureRules:
    """Mixin of the function checker: refuse constructs, reserved and private names."""

    def check_structure(self) -> None:
        a = self.func.args
        for arg in a.posonlyargs + a.args + a.kwonlyargs + [
                x for x in (a.vararg, a.kwarg) if x is not None]:
            if arg.arg.startswith(RESERVED_PREFIX):
                self.fail("reserved-name", arg, f"parameter {arg.arg!r} has a reserved name: "
                                                f"names beginning with {RESERVED_PREFIX!r} "
                                                "belong to the code tilelab generates")
        for node in self.nodes:
            what = _REFUSED.get(type(node))
            if isinstance(node, ast.Lambda) and self.in_combiner_place(node):
                check_lambda_signature(self, node)
                what = None  # the body is judged with the call it is written in
            if what is not None:
                self.fail("statement", node,
                          f"{what} are not allowed inside a kernel or its helpers: the "
                          "checker proves what tile code does from straight code only",
                          hint=self.combiner_hint(node) or _HINTS.get(what))
            if isinstance(node, ast.Assert):
                self.check_assert(node)
            if isinstance(node, ast.Name) and node.id.startswith(RESERVED_PREFIX):
                self.fail("reserved-name", node, f"{node.id!r} is a reserved name: names "
                                                 f"beginning with {RESERVED_PREFIX!r} "
                                                 "belong to the code tilelab generates")
            elif isinstance(node, ast.arg) and node.arg.startswith(RESERVED_PREFIX):
                self.fail("reserved-name", node, f"{node.arg!r} is a reserved name: names "
                                                 f"beginning with {RESERVED_PREFIX!r} "
                                                 "belong to the code tilelab generates")
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                self.fail("private-attribute", node,
                          f"attribute {node.attr!r} of {self.text(node.value)} is private: "
                          "kernels use public attributes only")
            elif isinstance(node, ast.Attribute) and node.attr in RAW_ATTRIBUTES \
                    and not self.unsafe:
                self.fail("raw-op", node, f"{self.text(node)} reaches raw memory or "
                                          "pointers, which only @tl.kernel(unsafe=True) "
                                          "kernels may")
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    self.check_assign_target(t)
            elif isinstance(node, (ast.For, ast.comprehension)):
                self.check_assign_target(node.target)

    @staticmethod
    def combiner_place(call: ast.Call) -> ast.expr | None:
        """The expression in the place of a ``ct.reduce`` / ``ct.scan`` combining
        function of ``call`` (``func=`` or its third positional argument)."""
        kw = next((k.value for k in call.keywords if k.arg == "func"), None)
        if kw is not None:
            return kw
        if len(call.args) > 2 and not any(isinstance(a, ast.Starred) for a in call.args[:3]):
            return call.args[2]
        return None

    def in_combiner_place(self, node: ast.Lambda) -> bool:
        parent = self.parents.get(node)
        if isinstance(parent, ast.keyword):
            parent = self.parents.get(parent)
        return isinstance(parent, ast.Call) and self.combiner_place(parent) is node

    def combiner_hint(self, node: ast.AST) -> str | None:
        """The advice for a nested ``def`` handed to ``ct.reduce`` / ``ct.scan``, or for
        a lambda written anywhere but in such a call."""
        if isinstance(node, ast.Lambda):
            return ("write the function as a module-level def and call it by name; a "
                    "combiner of ct.reduce / ct.scan may be a lambda written in the call "
                    "itself")
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
        for call in self.nodes:
            place = self.combiner_place(call) if isinstance(call, ast.Call) else None
            if isinstance(place, ast.Name) and place.id == node.name:
                return (f"write the combiner as a module-level def (def {node.name}(a, b): "
                        f"... above the kernel) and pass it by name, or write it as a lambda "
                        "in the call; define helpers with 'def' at module level")
        return None

    def check_lambdas_placed(self) -> None:
        """Refuse every lambda the call rules did not accept as a combining function
        (one in a combiner's place of a call that is not ``ct.reduce`` / ``ct.scan``)."""
        for node in self.nodes:
            if isinstance(node, ast.Lambda) and id(node) not in self.accepted_lambdas:
                self.fail("statement", node,
                          "lambdas are not allowed inside a kernel or its helpers, except "
                          "as the combining function written in a ct.reduce / ct.scan "
                          "call: the checker proves what tile code does from straight "
                          "code only", hint=self.combiner_hint(node))

    def check_assert(self, node: ast.Assert) -> None:
        msg = node.msg
        if msg is None or (isinstance(msg, ast.Constant) and isinstance(msg.value, str)):
            return
        self.fail("assert-form", msg,
                  f"the message of this assert is {self.text(msg)!r}, not a string "
                  "literal: a kernel's assert runs as cuTile's ct.assert_(cond, message), "
                  "which takes a constant string and would evaluate the message even when "
                  "the condition holds")

    def check_assign_target(self, t: ast.AST) -> None:
        if isinstance(t, ast.Name):
            return
        if isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                self.check_assign_target(e)
            return
        if isinstance(t, ast.Starred):
            self.check_assign_target(t.value)
            return
        self.fail("assign-target", t,
                  f"assignment to {self.text(t)} is not allowed in a kernel: kernels "
                  "assign names only (item or attribute assignment could write memory)",
                  hint="bind the value to a name; write arrays through partitions "
                       "(p.store(tile))")
