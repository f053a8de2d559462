"""Entry points of the checker: analyze a kernel at definition, re-check it before a
compile when names it resolved have changed.
"""
from __future__ import annotations

import ast
import inspect
import types
import typing
from dataclasses import dataclass, field
from typing import Any

from tilelab.compiler import language
from tilelab.compiler.capture import CapturedSource
from tilelab.compiler.safety.checker import FunctionChecker
from tilelab.compiler.safety.kinds import ParamKind
from tilelab.compiler.safety.partitions import Site
from tilelab.compiler.safety.program import Program, captured
from tilelab.compiler.safety.rules import raise_rule

__all__ = ["ParamInfo", "KernelAnalysis", "analyze_kernel", "recheck"]

_ANNOTATIONS = {language.In: ParamKind.IN, language.Out: ParamKind.OUT,
                language.InOut: ParamKind.INOUT, language.Raw: ParamKind.RAW}


@dataclass(frozen=True)
class ParamInfo:
    """A kernel parameter and its access kind (see :class:`ParamKind`).

    ``keep_annotation`` says whether the lowered cuTile source keeps the annotation text
    (cuTile's own annotations, such as ``ct.Constant[int]``).
    """

    name: str
    kind: ParamKind
    node: ast.arg = field(compare=False, repr=False)
    keep_annotation: bool = False

    @property
    def is_partition(self) -> bool:
        return self.kind.is_partition


@dataclass
class KernelAnalysis:
    """What the checker learned about a kernel; the lowering's input."""

    source: CapturedSource
    params: list[ParamInfo]
    unsafe: bool
    persistent: bool
    sites: list[Site]
    #: names that could not be resolved at definition time: (text, node)
    deferred_calls: list[tuple[str, ast.AST]]
    #: the checked program: helpers, resolved names, snapshot
    program: Program
    #: every name the kernel binds or reads
    used_names: set[str] = field(default_factory=set)

    @property
    def accesses(self) -> tuple:
        """Every memory access the check accepted (kernel and helpers), with why it is
        safe: :class:`~tilelab.compiler.safety.accesses.AccessRecord` s in source order,
        from the latest check."""
        return self.program.accesses

    @property
    def partitions(self) -> list[str]:
        return [p.name for p in self.params if p.is_partition]

    def param(self, name: str) -> ParamInfo:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)


def _annotation_kind(annotation: Any) -> tuple[ParamKind, bool]:
    """(kind, keep_annotation_text) for a parameter's evaluated annotation."""
    if annotation is inspect.Parameter.empty:
        return ParamKind.AUTO, False
    kind = _ANNOTATIONS.get(annotation) if isinstance(annotation, type) else None
    if kind is not None:
        return kind, False
    if isinstance(annotation, type) and issubclass(annotation, language.ParamKind):
        return None, False  # a subclass: refused by the caller
    if typing.get_origin(annotation) is typing.Annotated:
        import cuda.tile as ct

        meta = getattr(annotation, "__metadata__", ())
        if any(isinstance(m, ct.ConstantAnnotation) for m in meta):
            return ParamKind.CONSTANT, True
        if any(type(m).__module__.startswith("cuda.tile") for m in meta):
            return ParamKind.AUTO, True
    return ParamKind.AUTO, False


def _params(fn: types.FunctionType, src: CapturedSource, unsafe: bool,
            context: str) -> list[ParamInfo]:
    a = src.tree.args
    for bad, what in ((a.vararg, "*args"), (a.kwarg, "**kwargs")):
        if bad is not None:
            raise_rule("param-form", f"kernel parameters cannot be {what}: the checker "
                                     "and the launch need every parameter by name and "
                                     "kind",
                       location=src.location(bad), context=context,
                       hint="list each parameter by name, with its annotation")
    if a.kwonlyargs:
        kw = a.kwonlyargs[0]
        ann = f": {ast.unparse(kw.annotation)}" if kw.annotation is not None else ""
        raise_rule("param-form", f"kernel parameters cannot be keyword-only ({kw.arg!r} "
                                 "follows '*'): a launch passes every argument by "
                                 "position, as cuTile's does",
                   location=src.location(kw), context=context,
                   hint=f"make it a positional parameter: remove the '*' (write "
                        f"'{kw.arg}{ann}' among the others) and pass its value in its "
                        "place at launch")
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:  # unresolvable string annotations: fall back to raw ones
        hints = dict(getattr(fn, "__annotations__", {}))
    params = []
    for arg in a.posonlyargs + a.args:
        ann = hints.get(arg.arg, inspect.Parameter.empty)
        kind, keep = _annotation_kind(ann)
        if kind is None:
            raise_rule("param-form", f"parameter {arg.arg!r} is annotated with "
                                     f"{getattr(ann, '__qualname__', ann)}, a subclass of a "
                                     "tilelab parameter kind; kernels use tl.In, tl.Out, "
                                     "tl.InOut and tl.Raw themselves",
                       location=src.location(arg), context=context)
        if kind == ParamKind.RAW and not unsafe:
            raise_rule("raw-param", f"parameter {arg.arg!r} is tl.Raw, which only unsafe "
                                    "kernels may have",
                       location=src.location(arg), context=context)
        params.append(ParamInfo(arg.arg, kind, arg, keep))
    return params


def _check(fn: types.FunctionType, src: CapturedSource, params: list[ParamInfo],
           unsafe: bool, allow_deferred: bool) -> tuple[FunctionChecker, Program]:
    context = f"kernel {fn.__name__!r}"
    program = Program(fn.__name__, unsafe, allow_deferred)
    kinds = {p.name: p.kind for p in params}
    kept = [p.node.annotation for p in params if p.keep_annotation]
    checker = FunctionChecker(fn, src, kinds, unsafe=unsafe, context=context,
                              program=program, allow_deferred=allow_deferred,
                              kept_annotations=kept, is_kernel=True)
    checker.run()
    program.add(fn, src, checker.scope.resolved, is_kernel=True,
                defaults=checker.defaults)
    program.deferred = checker.deferred + program.deferred
    program.accesses = (*checker.accesses, *program.accesses)
    program.seal()
    return checker, program


def analyze_kernel(fn: types.FunctionType, *, unsafe: bool = False) -> KernelAnalysis:
    """Capture and check a kernel; returns the analysis or raises SafetyError.

    Names not defined yet (a helper defined further down a notebook) are deferred: the
    kernel is checked again, with every name required, before it is compiled.

    Example:
        >>> import tilelab as tl
        >>> def add(z: tl.Out, x: tl.In, y: tl.In):
        ...     z.store(tl.load_like(x, z) + tl.load_like(y, z))
        >>> [s.kind for s in analyze_kernel(add).sites]
        ['store', 'load_like', 'load_like']
    """
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"@tl.kernel needs a Python function, got {type(fn).__name__}")
    src = captured(fn)
    params = _params(fn, src, unsafe, f"kernel {fn.__name__!r}")
    checker, program = _check(fn, src, params, unsafe, allow_deferred=True)
    used = {n.id for n in ast.walk(src.tree) if isinstance(n, ast.Name)} | \
        {p.name for p in params} | checker.bound
    return KernelAnalysis(src, params, unsafe, bool(checker.persistent_loops),
                          checker.sites, list(program.deferred), program, used)


def recheck(fn: types.FunctionType, analysis: KernelAnalysis) -> None:
    """Check the kernel again from its captured source, resolving names as they are now.

    Runs before a kernel is compiled or launched when something it resolved changed (or
    was not defined at definition): helpers defined or redefined since are checked
    before any code is built from them. A name that still cannot be resolved is an
    error here.
    """
    checker, program = _check(fn, analysis.source, analysis.params, analysis.unsafe,
                              allow_deferred=False)
    analysis.sites = checker.sites
    analysis.persistent = bool(checker.persistent_loops)
    analysis.deferred_calls = []
    analysis.program = program

