"""One pass of the checker over one function (a kernel or a helper it reaches).

The rules live in mixins, one module each: :mod:`structure` (what code may contain),
:mod:`partitions` (how partitions are used), :mod:`calls` (the allowlist of calls and
names) and :mod:`bounds` (reads without bounds checks). A check records what it
resolved in the program's snapshot, collects the sites the lowering rewrites and records
each memory access it accepted (:mod:`accesses`).
"""
from __future__ import annotations

import ast
import types
from typing import Any, NoReturn

from tilelab.compiler.capture import CapturedSource
from tilelab.compiler.safety.accesses import AccessRecord
from tilelab.compiler.safety.calls import CallRules
from tilelab.compiler.safety.defaults import DefaultRules, Defaults
from tilelab.compiler.safety.kinds import ParamKind, is_partition
from tilelab.compiler.safety.partitions import PartitionRules, Site
from tilelab.compiler.safety.rules import raise_rule
from tilelab.compiler.safety.scope import Scope, bound_names
from tilelab.compiler.safety.structure import StructureRules
from tilelab.compiler.safety.waits import WaitRules

__all__ = ["FunctionChecker", "checked_nodes"]


def checked_nodes(func: ast.FunctionDef, kept_annotations: list[ast.expr]) -> list[ast.AST]:
    """Every node that becomes code: the body, default values and the annotations the
    lowering keeps (decorators and dropped annotations are never evaluated)."""
    roots: list[ast.AST] = list(func.body)
    roots += [d for d in func.args.defaults + func.args.kw_defaults if d is not None]
    roots += kept_annotations
    return [n for r in roots for n in ast.walk(r)]


def _body_only(func: ast.FunctionDef) -> ast.FunctionDef:
    """The function without its parameters (for the names its body binds)."""
    return ast.FunctionDef(name=func.name, args=ast.arguments(
        posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
        defaults=[]), body=func.body, decorator_list=[], returns=None, type_params=[])


class FunctionChecker(StructureRules, PartitionRules, CallRules, WaitRules, DefaultRules):
    """Checks one function; raises the first SafetyError or leaves ``sites`` filled.
    ``is_kernel``: the function is the kernel itself, not a helper it calls."""

    def __init__(self, fn: types.FunctionType, source: CapturedSource,
                 kinds: dict[str, ParamKind], *, unsafe: bool, context: str,
                 program: Any, allow_deferred: bool,
                 kept_annotations: list[ast.expr] | None = None, is_kernel: bool = False):
        self.fn = fn
        self.is_kernel = is_kernel
        self.src = source
        self.func = source.tree
        self.kinds = kinds
        self.unsafe = unsafe
        self.context = context
        self.program = program
        self.allow_deferred = allow_deferred
        self.bound = bound_names(self.func)
        params = {x.arg for x in self.func.args.posonlyargs + self.func.args.args
                  + self.func.args.kwonlyargs}
        #: parameters the body rebinds (they no longer name the argument everywhere)
        self.rebound = self.bound & params & bound_names(_body_only(self.func))
        self.scope = Scope(fn, self.bound, program.snapshot)
        self.nodes = checked_nodes(self.func, kept_annotations or [])
        #: id of each node of a kept annotation -> the parameter it annotates
        kept = {id(k) for k in kept_annotations or []}
        self.annotation_of: dict[int, str] = {
            id(n): arg.arg for arg in self.func.args.posonlyargs + self.func.args.args
            if id(arg.annotation) in kept for n in ast.walk(arg.annotation)}
        self.body = [n for stmt in self.func.body for n in ast.walk(stmt)]
        self.parents: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(self.func):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
        self.partitions = {n for n, k in kinds.items() if is_partition(k)}
        self.sites: list[Site] = []
        #: the memory accesses the rules accepted, with why each is safe
        #: (:mod:`tilelab.compiler.safety.accesses`)
        self.accesses: list[AccessRecord] = []
        self.deferred: list[tuple[str, ast.AST]] = []
        self.persistent_loops: dict[ast.For, str] = {}
        self.func_arguments: set[int] = set()
        #: ids of the lambdas accepted as combining functions of ct.reduce / ct.scan
        self.accepted_lambdas: set[int] = set()
        self.roots = {}
        #: the default values the check accepted (set by :meth:`run`)
        self.defaults = Defaults(None, None)

    def fail(self, rule: str, node: ast.AST | None, message: str,
             hint: str | None = None) -> NoReturn:
        raise_rule(rule, message, location=self.src.location(node) if node is not None
                   else None, context=self.context, hint=hint)

    def text(self, node: ast.AST) -> str:
        return self.src.segment(node) or ast.unparse(node)

    def run(self) -> None:
        self.check_structure()
        self.roots = self.compute_roots()
        if self.partitions:
            self.check_partition_uses()
        self.check_references()
        self.check_lambdas_placed()
        self.check_before_wait()
        self.defaults = self.check_defaults()
