"""Finding the implementations to benchmark: one table says where each op's come from.

:data:`SOURCES` has one line per op of :data:`~benchmarks.suite.cases.OPS`: the name of
the library's host function, the tour kernel that stands in where the library lacks it,
and the raw cuTile twins of :mod:`benchmarks.baselines`. Adding an op to the suite is a
line there (and its :class:`~benchmarks.suite.cases.Op`); nothing is found by guessing
names. ``--kernel op=module:function`` wins over the table.

Why the lookups are still defensive: the library's kernels (``tilelab/kernels/``) change
while the suite runs against them. The library function is looked up in the kernel
package (its attribute, else the first of its modules that defines it); a module that
fails to import is reported, not fatal; an op with no host function makes its cases
report ``"status": "missing"``.

Only *host functions* count: plain functions (or ``tl.autotune`` wrappers) taking arrays
in the order of :mod:`~benchmarks.suite.cases`' conventions, with no other required
positional argument. ``@tl.kernel``/``@ct.kernel`` objects need partitions and grids only
their authors know. Library functions with tile keywords are tuned by
:mod:`~benchmarks.suite.tuning`. The tour stand-ins run through adapters tuned here.

Raw versions, from the baselines modules: a host function named ``raw_<op>`` (the
suite's calling convention) if a module defines one; else the twin the table names: the
launch helper of ``baselines/raw_matmul_attention.py`` that mirrors the library function
(``raw_library``), or the kernel of ``baselines/raw_kernels.py`` that mirrors the tour
kernel (``raw_tour``). A raw twin is only paired with the safe implementation it mirrors
(same *family*).

Example:
    >>> reg = Registry()
    >>> reg.safe("gemm").kind
    'safe'
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import math
import pkgutil
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import tilelab as tl
from tilelab.perf.autotune import Autotuned, autotune

from .cases import OPS
from .tuning import raw_library_adapter, tune_impl

__all__ = ["Impl", "Registry", "Sources", "SOURCES", "call_host", "host_call_args", "is_host_function",
           "async_host_call"]

RAW_MODULES = ("benchmarks.baselines.raw_kernels", "benchmarks.baselines.raw_matmul_attention")

@dataclass(frozen=True)
class Sources:
    """Where the suite takes one op's implementations from (a line of :data:`SOURCES`).

    ``library``: the name of the host function in the kernel package (``tilelab.kernels``
    or ``--kernel-package``); ``tour``: the kernel of ``tilelab.kernels.examples`` that
    stands in when the package has no such function (None: nothing does);
    ``raw_library``: the launch helper of a baselines module that twins the library
    function; ``raw_tour``: the ``ct`` kernel of a baselines module that twins the tour
    kernel.

    Example:
        >>> SOURCES["gemm"].library, SOURCES["gemm"].tour, SOURCES["rope"].raw_library
        ('matmul', 'gemm', None)
    """

    library: str
    tour: str | None = None
    raw_library: str | None = None
    raw_tour: str | None = None


#: op -> where its implementations come from, one line per op of ``cases.OPS``
SOURCES: dict[str, Sources] = {
    "gemm": Sources("matmul", tour="gemm", raw_library="matmul_launch", raw_tour="raw_gemm"),
    "gemv": Sources("gemv", raw_library="gemv_rows_launch"),
    "attention": Sources("attention", raw_library="flash_attention_launch"),
    "add": Sources("add", tour="vector_add", raw_tour="raw_add"),
    "softmax": Sources("softmax", tour="softmax"),
    "rmsnorm": Sources("rms_norm"),
    "rope": Sources("apply_rope"),
}


@dataclass
class Impl:
    """One implementation of an op: ``fn`` follows the suite's host convention.

    ``family`` pairs safe and raw twins: 'tour' (the tour kernels and raw_kernels.py),
    'library' (tilelab.kernels and raw_matmul_attention.py), '' (a raw host function,
    assumed to mirror whatever it is compared with). ``mirror(best_config, case)`` maps
    the safe winner to (raw keyword arguments, the safe config with the same tiles)."""

    name: str
    fn: Callable
    kind: str                     #: 'safe' or 'raw'
    note: str = ""
    mirror: Callable[[dict, Any], tuple[dict, dict] | None] | None = None
    family: str = ""
    builtin: bool = False         #: a raw adapter of this suite around ct kernels

    @property
    def tuned(self) -> bool:
        return isinstance(self.fn, Autotuned) or hasattr(self.fn, "best_config")


def is_host_function(obj: Any) -> bool:
    """A plain function or an autotuned wrapper — not a tl.kernel or ct.kernel object."""
    if isinstance(obj, Autotuned) or hasattr(obj, "best_config"):
        return True
    return inspect.isfunction(obj) and not hasattr(obj, "definition")


def _takes(fn: Callable, n_args: int) -> bool:
    """Whether ``fn(*n_args arrays, out=...)`` binds (no other required argument)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in params if p.default is p.empty and p.name != "out"
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    star = any(p.kind is p.VAR_POSITIONAL for p in params)
    return len(required) <= n_args and (len(pos) >= n_args or star)


def _accepts(fn: Callable, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def host_call_args(fn: Callable, args: list, kwargs: dict, out: Any) -> tuple[list, dict]:
    """(args, keyword args) of a call with the suite's convention: ``out=`` and the op's
    keyword arguments (``eps``, ``causal``, ``scale`` and its aliases) only where the
    function has such a parameter."""
    kw = {k: v for k, v in kwargs.items() if _accepts(fn, k)}
    if "scale" in kwargs and not _accepts(fn, "scale"):
        for alias in ("sm_scale", "softmax_scale"):
            if _accepts(fn, alias):
                kw[alias] = kwargs["scale"]
    if "causal" in kwargs and not _accepts(fn, "causal") and _accepts(fn, "is_causal"):
        kw["is_causal"] = kwargs["causal"]
    if out is not None and _accepts(fn, "out"):
        kw["out"] = out
    return list(args), kw


def call_host(fn: Callable, args: list, kwargs: dict, out: Any) -> Any:
    """Call a host function with the suite's convention; returns its output array (the
    return value, or ``out`` when it returns None or a tl.Future)."""
    a, kw = host_call_args(fn, args, kwargs, out)
    result = fn(*a, **kw)
    if "out" in kw and (result is None or _is_future(result)):
        return out
    return result


def async_host_call(fn: Callable, args: list, kwargs: dict, out: Any,
                    config: dict) -> Callable[[], Any] | None:
    """A zero-argument call of ``fn`` (suite convention, plus ``config``) that launches
    with ``sync=False`` and returns the call's future, or None when ``fn`` takes no
    ``sync`` (it then runs as it is).

    Why: ``tl.bench`` brackets each call with CUDA events; a call that waits for its
    kernels puts the host's wake-up (and, with the GPU idle meanwhile, the host's whole
    planning) into the window, which torch and ``ct.launch`` do not. Everything the
    suite can settle before the window is settled here, once: the keyword arguments
    (``inspect.signature`` is slow) and, for a ``tl.autotune`` wrapper given a config,
    the wrapper itself (it passes such a call straight to its function). An autotune
    wrapper without a config is not called asynchronously: it would tune on the call.

    Example:
        >>> def f(x, *, out=None, sync=True):
        ...     return (out, "future") if not sync else out
        >>> async_host_call(f, [1], {}, "o", {})()
        'future'
    """
    if not _accepts(fn, "sync"):
        return None
    target = fn
    if isinstance(fn, Autotuned) or hasattr(fn, "best_config"):
        if not config:
            return None
        target = getattr(fn, "fn", fn)
    a, kw = host_call_args(fn, args, kwargs, out)
    kw = dict(kw, **config, sync=False)

    def call() -> Any:
        return target(*a, **kw)[1]
    return call


def _is_future(x: Any) -> bool:
    return callable(getattr(x, "wait", None)) and callable(getattr(x, "done", None))


# --------------------------------------------------------------------------- tour adapters

GEMM_CONFIGS = [
    {"tm": 128, "tn": 128, "tk": 64, "group": 8},   # the tour's tiles: the reference
    {"tm": 128, "tn": 256, "tk": 64, "group": 8},
    {"tm": 256, "tn": 128, "tk": 64, "group": 8},
    {"tm": 64, "tn": 128, "tk": 64, "group": 8},
]


def _prune_gemm(configs: list[dict], args: dict) -> list[dict]:
    """64-row tiles below M = 128, larger ones from M = 128 (the first always stays)."""
    m = args["a"].shape[0]
    return [configs[0]] + [c for c in configs[1:] if (c["tm"] <= 64) == (m < 128)]


def _tour_gemm() -> Impl:
    from tilelab.kernels.examples import gemm

    @autotune(configs=GEMM_CONFIGS, key=["a", "b"], prune=_prune_gemm, warmup=3, rep=10,
              outputs=["out"])
    def tour_matmul(a, b, *, out=None, tm=128, tn=128, tk=64, group=8):
        """c = a @ b with the tour's safe GEMM kernel (tiles and schedule tuned)."""
        if out is None:
            out = tl.empty((a.shape[0], b.shape[1]), a.dtype, a.device)
        sched = tl.grouped(group) if group else tl.row_major
        gemm.launch_async(out.partition((tm, tn), schedule=sched), a, b, tk)
        return out

    def mirror(best: dict, case: Any) -> tuple[dict, dict]:
        # raw_gemm walks the tiles row-major: compare it with the safe kernel doing so
        return {"tm": best["tm"], "tn": best["tn"], "tk": best["tk"]}, dict(best, group=0)

    return Impl("tour:tilelab.kernels.examples.gemm", tour_matmul, "safe",
                "the tour's GEMM (no library matmul found)", mirror, "tour")


def _next_pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def _prune_rows(configs: list[dict], args: dict) -> list[dict]:
    cols = _next_pow2(args["x"].shape[-1])
    return [configs[0]] + [c for c in configs[1:] if c["rows"] * cols <= 16384
                           and c["rows"] <= args["x"].shape[0]]


def _tour_softmax() -> Impl:
    from tilelab.kernels.examples import softmax

    @autotune(configs=[{"rows": 1}, {"rows": 2}, {"rows": 4}, {"rows": 8}], key=["x"],
              prune=_prune_rows, warmup=3, rep=10, outputs=["out"])
    def tour_softmax(x, *, out=None, rows=1):
        """Row softmax with the tour's safe kernel (rows per block tuned)."""
        if out is None:
            out = tl.empty(x.shape, x.dtype, x.device)
        softmax.launch_async(out.partition((rows, _next_pow2(x.shape[1]))), x)
        return out

    return Impl("tour:tilelab.kernels.examples.softmax", tour_softmax, "safe",
                "the tour's softmax (no library softmax found)", family="tour")


def _tour_add() -> Impl:
    from tilelab.kernels.examples import vector_add

    @autotune(configs=[{"tile": t} for t in (1024, 2048, 4096, 8192)], key=["x"], warmup=3,
              rep=10, outputs=["out"])
    def tour_add(x, y, *, out=None, tile=1024):
        """z = x + y with the tour's safe vector add (tile tuned)."""
        if out is None:
            out = tl.empty(x.shape, x.dtype, x.device)
        vector_add.launch_async(out.partition(tile), x, y)
        return out

    return Impl("tour:tilelab.kernels.examples.vector_add", tour_add, "safe",
                "the tour's vector add (no library add found)",
                lambda best, case: ({"tile": best["tile"]}, dict(best)), "tour")


#: tour kernel (``Sources.tour``) -> its stand-in
_TOUR = {"gemm": _tour_gemm, "softmax": _tour_softmax, "vector_add": _tour_add}


# --------------------------------------------------------------------------- raw adapters

def _launch_raw(kernel: Any, grid: tuple, args: tuple) -> None:
    """ct.launch on torch's current stream (tilelab's), or the interpreter on the CPU."""
    from tilelab.runtime.device import backend

    if backend() == "cpu":
        tl.interpret(kernel, *args, grid=grid, trace=False)
        return
    import cuda.tile as ct
    import torch

    ct.launch(torch.cuda.current_stream(), grid, kernel, args)


def _raw_tour(op: str, module: Any) -> Callable | None:
    """A host adapter (suite convention) for the ``ct`` kernel that twins ``op``'s tour
    kernel (``SOURCES[op].raw_tour``), or None when ``module`` lacks it."""
    name = SOURCES[op].raw_tour
    if name is None or not hasattr(module, name):
        return None
    k = getattr(module, name)
    if op == "add":
        def raw_add(x, y, *, out, tile=1024):
            _launch_raw(k, (math.ceil(x.shape[0] / tile), 1, 1), (out, x, y, tile))
            return out
        return raw_add
    if op == "gemm":
        def raw_gemm(a, b, *, out, tm=128, tn=128, tk=64):
            grid = (math.ceil(b.shape[1] / tn), math.ceil(a.shape[0] / tm), 1)
            _launch_raw(k, grid, (out, a, b, tm, tn, tk))
            return out
        return raw_gemm
    return None


# --------------------------------------------------------------------------- registry

def _file(module: str) -> str:
    """'benchmarks/baselines/raw_kernels.py' for 'benchmarks.baselines.raw_kernels': the
    file a result names (its path from the repository root)."""
    return module.replace(".", "/") + ".py"


class Registry:
    """Looks up the safe and raw implementations of each op, once per process.

    ``overrides``: op -> 'module:function' (from ``--kernel``); ``tour=False`` drops the
    tour stand-ins; ``tune=False`` runs library defaults without searching.
    :meth:`report` says what was found where and what failed to import.
    """

    def __init__(self, overrides: dict[str, str] | None = None, *, tour: bool = True,
                 tune: bool = True, kernel_package: str = "tilelab.kernels",
                 raw_modules: tuple[str, ...] = RAW_MODULES) -> None:
        self.overrides = dict(overrides or {})
        self.tour, self.tune = tour, tune
        self.kernel_package = kernel_package
        self.raw_module_names = tuple(raw_modules)
        self.import_errors: dict[str, str] = {}
        self._modules: list[tuple[str, Any]] | None = None
        self._raw: list[tuple[str, Any]] | None = None
        self._safe: dict[str, Impl | None] = {}
        self._raw_found: dict[tuple[str, str], Impl | None] = {}

    # -- modules
    def _import(self, name: str) -> Any:
        try:
            return importlib.import_module(name)
        except Exception as e:  # a SyntaxError mid-edit, a missing dependency, SafetyError
            self.import_errors[name] = "".join(
                traceback.format_exception_only(type(e), e)).strip()
            return None

    def kernel_modules(self) -> list[tuple[str, Any]]:
        if self._modules is None:
            self._modules = []
            pkg = self._import(self.kernel_package)
            if pkg is not None:
                self._modules.append((self.kernel_package, pkg))
                for info in sorted(pkgutil.iter_modules(getattr(pkg, "__path__", [])),
                                   key=lambda i: i.name):
                    if info.name == "examples" or info.name.startswith(("_", "reference")):
                        continue
                    name = f"{self.kernel_package}.{info.name}"
                    mod = self._import(name)
                    if mod is not None:
                        self._modules.append((name, mod))
        return self._modules

    def raw_modules(self) -> list[tuple[str, Any]]:
        if self._raw is None:
            self._raw = []
            for name in self.raw_module_names:
                try:
                    found = importlib.util.find_spec(name) is not None
                except (ImportError, ValueError):
                    found = False
                if not found:   # not written yet: no raw versions from it
                    continue
                mod = self._import(name)
                if mod is not None:
                    self._raw.append((name, mod))
        return self._raw

    # -- lookups
    def safe(self, op: str) -> Impl | None:
        """The library's host function for ``op`` (tuned where the suite knows its
        tiles), else a tour stand-in, else None."""
        if op not in self._safe:
            self._safe[op] = self._find_safe(op)
        return self._safe[op]

    def raw(self, op: str, family: str = "") -> Impl | None:
        """The raw cuTile twin of ``op`` for a safe implementation of ``family``."""
        if (op, family) not in self._raw_found:
            self._raw_found[(op, family)] = self._find_raw(op, family)
        return self._raw_found[(op, family)]

    def _find_safe(self, op: str) -> Impl | None:
        n_args = len(OPS[op].args) if op in OPS else 1
        if op in self.overrides:
            return tune_impl(op, self._explicit(op, self.overrides[op]), n_args, self.tune)
        src = SOURCES[op]
        root = self.kernel_package.split(".")[0]   # not numpy's add re-exported, say
        for _mod_name, mod in self.kernel_modules():     # the package first
            obj = getattr(mod, src.library, None)
            if obj is not None and is_host_function(obj) and _takes(obj, n_args) \
                    and str(getattr(obj, "__module__", "")).startswith(root):
                impl = Impl(f"{obj.__module__}:{src.library}", obj, "safe", family="library")
                return tune_impl(op, impl, n_args, self.tune)
        if self.tour and src.tour in _TOUR:
            try:
                return _TOUR[src.tour]()
            except Exception as e:
                self.import_errors[f"tour:{op}"] = f"{type(e).__name__}: {e}"
        return None

    def _explicit(self, op: str, target: str) -> Impl:
        mod_name, _, fn_name = target.partition(":")
        if not fn_name:
            raise ValueError(f"--kernel {op}={target}: write module:function")
        obj = getattr(importlib.import_module(mod_name), fn_name)
        if not is_host_function(obj):
            raise TypeError(f"--kernel {op}={target} is a {type(obj).__name__}, not a host "
                            "function taking arrays (see benchmarks/README.md)")
        return Impl(target, obj, "safe", "chosen with --kernel", family="library")

    def _find_raw(self, op: str, family: str) -> Impl | None:
        n_args = len(OPS[op].args) if op in OPS else 1
        src, name = SOURCES[op], f"raw_{op}"
        for mod_name, mod in self.raw_modules():
            obj = getattr(mod, name, None)
            if obj is not None and is_host_function(obj) and \
                    getattr(obj, "__module__", "") == mod.__name__ and _takes(obj, n_args):
                return Impl(f"{_file(mod_name)}:{name}", obj, "raw")
        for mod_name, mod in self.raw_modules():
            if family == "tour":
                fn = _raw_tour(op, mod)
            elif family == "library" and src.raw_library and hasattr(mod, src.raw_library):
                fn = raw_library_adapter(op, mod)
            else:
                fn = None
            if fn is not None:
                return Impl(f"{_file(mod_name)} ({fn.__name__} adapter)", fn, "raw",
                            family=family, builtin=True)
        return None

    def report(self) -> dict:
        """JSON-able: where each op's implementations came from, and import failures."""
        ops = {}
        for op in SOURCES:
            s = self.safe(op)
            r = self.raw(op, s.family) if s else None
            ops[op] = {"tilelab": s.name if s else None, "tuned": bool(s and s.tuned),
                       "note": s.note if s else "", "raw": r.name if r else None}
        return {"ops": ops, "kernel_modules": [m for m, _ in self.kernel_modules()],
                "raw_modules": [m for m, _ in self.raw_modules()],
                "import_errors": dict(self.import_errors)}
