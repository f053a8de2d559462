"""Structure rules: the statements and names a kernel or helper may contain at all.

Kernel code is straight tile code. Constructs that run code the checker does not see
(imports, classes, nested functions and lambdas, ``with`` blocks, ``try``, generators,
async code), or that could write memory without a call (item and attribute
assignment, ``del``), are refused wherever they appear, before any call is judged.
"""
from __future__ import annotations

import ast

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
            if what is not None:
                self.fail("statement", node,
                          f"{what} are not allowed inside a kernel or its helpers: the "
                          "checker proves what tile code does from straight code only",
                          hint=_HINTS.get(what))
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
