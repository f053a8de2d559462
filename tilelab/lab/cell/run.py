"""Which functions of a ``%%tile`` cell become kernels, and the cell's rewritten AST.

Why: inside ``%%tile`` no ``@tl.kernel`` is needed, yet a cell also holds helpers (called
from kernels, checked by the same rules) and host functions. The rule, applied to the
cell's *top-level* ``def`` statements only:

1. A decorated function stays exactly as written (``@tl.kernel(...)``, ``@ct.kernel``,
   ``@functools.cache``, ...).
2. A function called by name from the body of one of the cell's kernels is a *helper* and
   stays a plain function (kernels cannot launch kernels).
3. Otherwise it becomes a kernel (``tl.kernel`` with the magic's options) when one of its
   parameters is annotated ``tl.In``/``tl.Out``/``tl.InOut``/``tl.Raw`` (or the bare
   names), or when the cell launches it: calls it with a ``.partition(...)`` argument or a
   ``grid=`` keyword, calls its ``.launch_async``/``.compile``/``.lowered_source``, or
   passes it to ``tl.interpret``.
4. Every other function stays a plain Python function.

The decorator is added to the AST with the ``def``'s own line number, so the cell's text,
its line numbers and tilelab's source capture are untouched.

:func:`run_parsed_cell` holds the steps of a cell once it is registered and parsed
(make its kernels, run it with its launches recorded under the chosen backend, collect
the report); the magic and :func:`run_cell` both run a cell through it. :func:`run_cell`
runs a ``%%tile`` cell without IPython (scripts, the notebook runner
``benchmarks/lab/notebooks.py``) on a plain namespace, returning the
:class:`~tilelab.lab.report.cell_report.CellReport` the magic's tabs are built from.

Example:
    >>> import ast
    >>> plan = classify_functions(ast.parse('''
    ... def scale(t): return t * 2
    ... def add(z: tl.Out, x: tl.In):
    ...     z.store(scale(tl.load_like(x, z)))
    ... '''))
    >>> plan.kernels, plan.helpers
    (('add',), ('scale',))
"""
from __future__ import annotations

import ast
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from tilelab.lab.report.cell_report import CellReport
    from tilelab.lab.report.options import TileOptions

__all__ = ["ACCESS_ANNOTATIONS", "CellPlan", "CellRun", "classify_functions",
           "cell_kernel_names", "decorate_kernels", "definitions_only", "options_from_line",
           "run_parsed_cell", "run_cell"]

#: parameter annotations that make an undecorated function a kernel
ACCESS_ANNOTATIONS = frozenset({"In", "Out", "InOut", "Raw"})
_LAUNCH_METHODS = frozenset({"launch_async", "compile", "lowered_source"})
_DEF = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class CellPlan:
    """The verdict on each top-level function of a cell, with the reason for it.

    Example:
        >>> CellPlan(("add",), (), (), {"add": "parameter 'z' is tl.Out"}).explain()
        "add: kernel (parameter 'z' is tl.Out)"
    """

    kernels: tuple[str, ...]
    helpers: tuple[str, ...]
    decorated: tuple[str, ...]
    reasons: dict[str, str] = field(default_factory=dict)

    def explain(self) -> str:
        """One line per function: what it became and why.

        Example:
            >>> print(CellPlan(("k",), ("h",), (), {"k": "launched", "h": "helper"}).explain())
            k: kernel (launched)
            h: plain function (helper)
        """
        rows = [f"{n}: kernel ({self.reasons.get(n, '')})" for n in self.kernels]
        rows += [f"{n}: plain function ({self.reasons.get(n, '')})" for n in self.helpers]
        rows += [f"{n}: as decorated" for n in self.decorated]
        return "\n".join(rows)


def _annotation_kind(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Attribute) and node.attr in ACCESS_ANNOTATIONS:
        return node.attr
    if isinstance(node, ast.Name) and node.id in ACCESS_ANNOTATIONS:
        return node.id
    return None


def _annotated_param(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    a = fn.args
    for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
        kind = _annotation_kind(arg.annotation)
        if kind:
            return f"parameter {arg.arg!r} is tl.{kind}"
    return None


def _is_partition_call(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "partition")


def _launches(tree: ast.AST) -> dict[str, str]:
    """Names the code launches (or compiles), with where: name -> reason."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        where = f"line {node.lineno}"
        if isinstance(f, ast.Name):
            values = [*node.args, *(k.value for k in node.keywords)]
            if any(_is_partition_call(v) for v in values):
                found.setdefault(f.id, f"launched with a partition at {where}")
            elif any(k.arg == "grid" for k in node.keywords):
                found.setdefault(f.id, f"launched with grid= at {where}")
            elif f.id == "interpret" and node.args and isinstance(node.args[0], ast.Name):
                found.setdefault(node.args[0].id, f"passed to tl.interpret at {where}")
        elif isinstance(f, ast.Attribute):
            if f.attr in _LAUNCH_METHODS and isinstance(f.value, ast.Name):
                found.setdefault(f.value.id, f"uses .{f.attr}() at {where}")
            elif f.attr == "interpret" and node.args and isinstance(node.args[0], ast.Name):
                found.setdefault(node.args[0].id, f"passed to tl.interpret at {where}")
    return found


def _called_names(fn: ast.AST) -> dict[str, int]:
    out: dict[str, int] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            out.setdefault(node.func.id, node.lineno)
    return out


def classify_functions(tree: ast.Module) -> CellPlan:
    """Apply the module's rule (see the module docstring) to a parsed cell.

    Example:
        >>> import ast
        >>> classify_functions(ast.parse("def k(x):\\n    pass\\nk(z.partition(64))")).kernels
        ('k',)
    """
    defs = {n.name: n for n in tree.body if isinstance(n, _DEF)}
    decorated = tuple(n for n, d in defs.items() if d.decorator_list)
    plain = {n: d for n, d in defs.items() if not d.decorator_list}
    launched = _launches(tree)
    reasons: dict[str, str] = {}
    candidates = set()
    for name, d in plain.items():
        if isinstance(d, ast.AsyncFunctionDef):  # kernels are never coroutines
            continue
        why = _annotated_param(d) or launched.get(name)
        if why:
            candidates.add(name)
            reasons[name] = why
    # helpers: functions a kernel calls (decorated kernels included) are never kernels
    changed = True
    while changed:
        changed = False
        callers = [(k, defs[k]) for k in sorted(candidates)] + [
            (k, defs[k]) for k in decorated if _is_kernel_decorated(defs[k])]
        for caller, node in callers:
            for callee, line in _called_names(node).items():
                if callee in candidates and callee != caller:
                    candidates.discard(callee)
                    reasons[callee] = f"called from kernel {caller!r} at line {line}: a helper"
                    changed = True
                elif callee in plain and callee not in candidates:
                    reasons.setdefault(callee, f"called from kernel {caller!r} at line {line}:"
                                               " a helper")
    for name in plain:
        reasons.setdefault(name, "no tl.In/Out/InOut/Raw parameter and not launched in the "
                                 "cell")
    kernels = tuple(n for n in plain if n in candidates)
    helpers = tuple(n for n in plain if n not in candidates)
    return CellPlan(kernels, helpers, decorated, reasons)


def _is_kernel_decorated(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if isinstance(target, ast.Attribute) and target.attr == "kernel":
            return True
        if isinstance(target, ast.Name) and target.id == "kernel":
            return True
    return False


def cell_kernel_names(tree: ast.Module, plan: CellPlan) -> set[str]:
    """Every name the cell defines as a kernel: chosen by the rule or decorated as one.

    Example:
        >>> import ast
        >>> t = ast.parse("@tl.kernel\\ndef a(z): pass\\ndef b(z: tl.Out): pass")
        >>> sorted(cell_kernel_names(t, classify_functions(t)))
        ['a', 'b']
    """
    defs = {n.name: n for n in tree.body if isinstance(n, _DEF)}
    return set(plan.kernels) | {n for n in plan.decorated if _is_kernel_decorated(defs[n])}


def decorate_kernels(tree: ast.Module, names: tuple[str, ...] | list[str],
                     options: dict[str, Any]) -> ast.Module:
    """Add ``tl.kernel(**options)`` as the decorator of the top-level ``def`` s in ``names``.

    The decorator is ``__import__("tilelab").kernel(...)`` (no name enters the user's
    namespace) and carries the ``def``'s line number, so ``inspect`` still finds the
    ``def`` line and tracebacks point at it.

    Example:
        >>> import ast
        >>> t = decorate_kernels(ast.parse("def k(z): pass"), ["k"], {"unsafe": True})
        >>> ast.unparse(t.body[0].decorator_list[0])
        "__import__('tilelab').kernel(unsafe=True)"
    """
    wanted = set(names)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in wanted:
            call = ast.Call(
                func=ast.Attribute(value=ast.Call(func=ast.Name("__import__", ast.Load()),
                                                  args=[ast.Constant("tilelab")],
                                                  keywords=[]),
                                   attr="kernel", ctx=ast.Load()),
                args=[], keywords=[ast.keyword(k, ast.Constant(v))
                                   for k, v in options.items()])
            for sub in ast.walk(call):
                sub.lineno = sub.end_lineno = node.lineno
                sub.col_offset = sub.end_col_offset = node.col_offset
            node.decorator_list.insert(0, call)
    return tree


_KEEP = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
         ast.Assign, ast.AnnAssign, ast.AugAssign)


def definitions_only(tree: ast.Module, kernels: set[str]) -> tuple[ast.Module, list[int]]:
    """The cell for ``--no-run``: imports, definitions and assignments that launch none of
    ``kernels``; returns the module and the line numbers of the statements left out.

    Example:
        >>> import ast
        >>> m, skipped = definitions_only(ast.parse("import x\\nk(z)\\ny = 1"), {"k"})
        >>> [type(s).__name__ for s in m.body], skipped
        (['Import', 'Assign'], [2])
    """
    kept, skipped = [], []
    for stmt in tree.body:
        calls = {n.func.id for n in ast.walk(stmt) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Name)} if not isinstance(stmt, _DEF) else set()
        methods = {n.func.value.id for n in ast.walk(stmt) if isinstance(n, ast.Call)
                   and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
                   and n.func.attr == "launch_async"} if not isinstance(stmt, _DEF) else set()
        if isinstance(stmt, _KEEP) and not ((calls | methods) & kernels):
            kept.append(stmt)
        else:
            skipped.append(stmt.lineno)
    return ast.Module(body=kept, type_ignores=tree.type_ignores), skipped


def options_from_line(line: str) -> TileOptions:
    """The :class:`~tilelab.lab.report.options.TileOptions` of a ``%%tile`` line, parsed
    without IPython: every keyword of ``TileOptions.from_args`` is an option (``no_run`` is
    ``--no-run``; a ``False`` default makes a flag). Raises
    :class:`~tilelab.lab.report.options.OptionError` naming what is wrong.

    Example:
        >>> o = options_from_line("--backend cpu --bench --show timings,roofline")
        >>> o.backend, o.bench, o.views
        ('cpu', True, ('roofline', 'timings'))
    """
    import argparse
    import inspect
    import shlex

    from tilelab.lab.report.options import OptionError, TileOptions

    parser = argparse.ArgumentParser(prog="%%tile", add_help=False, exit_on_error=False)
    flags = []
    for p in inspect.signature(TileOptions.from_args).parameters.values():
        if p.kind is not p.KEYWORD_ONLY:
            continue
        flag = "--" + p.name.replace("_", "-")
        flags.append(flag)
        if p.default is False:
            parser.add_argument(flag, dest=p.name, action="store_true")
        else:
            parser.add_argument(flag, dest=p.name,
                                type=int if "int" in str(p.annotation) else str)
    try:
        args, extra = parser.parse_known_args(shlex.split(line))
    except (argparse.ArgumentError, ValueError) as e:
        raise OptionError(f"%%tile {line.strip()}: {e}") from None
    if extra:
        raise OptionError(f"%%tile: unknown option {' '.join(extra)!r}; the options are "
                          f"{', '.join(flags)}")
    return TileOptions.from_args(**vars(args))


@dataclass
class CellRun:
    """What :func:`run_parsed_cell` produced: the cell's report, the verdict on its
    functions, and the race error it kept (``keep_race``) to raise once the tabs are shown.

    Example:
        >>> from tilelab.lab.report.cell_report import CellReport
        >>> CellRun(CellReport(cell_name="<c>"), CellPlan((), (), ())).raced is None
        True
    """

    report: CellReport
    plan: CellPlan
    raced: BaseException | None = None


def _exec_in(namespace: dict, name: str) -> Callable[[ast.Module], None]:
    """Run a cell module in ``namespace`` (its globals), compiled under ``name``."""
    return lambda tree: exec(compile(tree, name, "exec"), namespace)


def run_parsed_cell(tree: ast.Module, opts: TileOptions, namespace: dict, *,
                    cell_name: str, started: float,
                    execute: Callable[[ast.Module], None] | None = None,
                    rename: Callable[[str], str] | None = None,
                    active_backend: Callable[[], str] | None = None,
                    keep_race: bool = False) -> CellRun:
    """The steps of a ``%%tile`` cell once its body is registered in ``linecache`` and
    parsed: shared by the magic and :func:`run_cell`.

    Its functions are made kernels by this module's rule (``--no-run`` leaves out the
    statements that launch them, a note says which), the body runs under ``opts``'
    backend with its launches recorded, then the launches and the ``namespace``'s
    kernels are compiled, counted and timed by :func:`tilelab.lab.cell.collect.collect_report`
    (``report.seconds`` counts from ``started``, a ``time.perf_counter()``).

    The body runs with ``opts.arch`` as the target a CPU launch stands for (the
    interpreter refuses what cuTile refuses for it, e.g. float4 before sm_100).

    The caller's parts: ``cell_name`` names the cell in the report; ``execute`` runs the
    module (default: ``exec`` in ``namespace``, compiled under ``cell_name``, which is
    then the name registered in ``linecache``; the magic's goes through the shell);
    ``rename`` names files in the report (the magic's: ``In[n]``); ``active_backend``
    names the backend in use (default :func:`tilelab.runtime.device.backend`; the
    magic's makes an unusable one a UsageError).

    An error of the body propagates, except a race the CPU interpreter found when
    ``keep_race``: it is returned in ``raced`` (to raise once the tabs are shown). A
    launch a race stopped is recorded either way, also when the cell caught its error
    itself (``expect(tl.LaunchError, ...)`` hands it to
    :func:`~tilelab.lab.report.record.record_failure`): the first one's trace is the
    report's ``race_trace`` (the Race tab) and its error the ``race_message``. A kernel
    that does not compile is in ``report.compile_errors``, not raised.

    Example:
        >>> import linecache, time
        >>> code = "def k(z: tl.Out): pass\\nTILELAB_EXAMPLES = {}\\n"
        >>> linecache.cache["<parsed>"] = (len(code), None, code.splitlines(True), "<parsed>")
        >>> ns = {"tl": __import__("tilelab")}
        >>> run = run_parsed_cell(ast.parse(code), options_from_line("--backend cpu"), ns,
        ...                       cell_name="<parsed>", started=time.perf_counter())
        >>> run.plan.kernels, type(ns["k"]).__name__, run.report.launches
        (('k',), 'Kernel', [])
    """
    from tilelab import config
    from tilelab.lab.cell.collect import collect_report
    from tilelab.lab.report.record import LaunchRecorder, record_failure
    from tilelab.runtime.device import backend
    from tilelab.runtime.kernel import Kernel

    plan = classify_functions(tree)
    kernel_names = cell_kernel_names(tree, plan)
    decorate_kernels(tree, plan.kernels, opts.kernel_options)
    notes = []
    if not opts.run:
        tree, skipped = definitions_only(tree, kernel_names)
        if skipped:
            notes.append("--no-run: skipped the statements at line"
                         f"{'s' * (len(skipped) > 1)} {', '.join(map(str, skipped))}")
    raced = None
    # the cell's --arch is the GPU a CPU run stands for (what the interpreter refuses)
    with config.override(backend=opts.backend, arch=opts.arch):
        active = (active_backend or backend)()
        with LaunchRecorder() as rec:
            try:
                (execute or _exec_in(namespace, cell_name))(tree)
            except BaseException as e:
                if record_failure(e) is None or not keep_race:
                    raise
                raced = e  # a race: shown (the Race tab first), then raised
        kernels = {n: namespace[n] for n in sorted(kernel_names)
                   if isinstance(namespace.get(n), Kernel)}
        report = collect_report(rec, kernels, namespace.get("TILELAB_EXAMPLES"), opts,
                                cell_name=cell_name, rename=rename or (lambda f: f),
                                kernel_rule=plan.explain(), backend=active,
                                namespace=namespace)
    report.notes[:0] = notes
    report.seconds = time.perf_counter() - started
    if rec.failures:
        event, error = rec.failures[0]
        report.race_trace = event.trace
        report.race_message = str(error)
    return CellRun(report, plan, raced)


def run_cell(line: str, body: str, namespace: dict, *, name: str = "") -> CellReport:
    """Run a ``%%tile`` cell without IPython and return its
    :class:`~tilelab.lab.report.cell_report.CellReport` (compiled kernels, launches with their
    measured or predicted roofline points, notes).

    The steps of the magic: ``line`` parsed by :func:`options_from_line`; the body (the
    ``%%tile`` line kept as a comment, so line numbers are the cell's) registered in
    ``linecache`` under ``name``, then run by :func:`run_parsed_cell` in ``namespace``
    (globals, as a notebook's). Line magics in the body are not expanded. An error of
    the body (a race the interpreter found included) propagates; a kernel that does not
    compile is raised once the report is built, as the magic raises it. ``name``
    defaults to a fresh ``<%%tile cell N>``.

    Example:
        >>> ns = {"tl": __import__("tilelab")}
        >>> r = run_cell("--backend cpu --show timings", '''
        ... def add(z: tl.Out, x: tl.In):
        ...     z.store(tl.load_like(x, z) + 1)
        ... x = tl.zeros(256, device="cpu"); z = tl.empty(256, device="cpu")
        ... add(z.partition(64), x)''', ns, name="<demo>")
        >>> r.summary_line().split(" · ")[0], r.launches[0].measurement.time_kind
        ('<demo>: 1 kernel, 1 launch', 'predicted')
    """
    import linecache

    opts = options_from_line(line)
    t0 = time.perf_counter()
    code = f"# %%tile {line}".rstrip() + "\n" + body
    name = name or f"<%%tile cell {time.perf_counter_ns()}>"
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    report = run_parsed_cell(ast.parse(code, name), opts, namespace, cell_name=name,
                             started=t0).report
    if report.compile_errors:
        raise report.compile_errors[0]
    return report
