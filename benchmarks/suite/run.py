"""Running one case: correctness of every variant first, then timings, then figures.

Why this order: a time is only worth reporting for an output that is right, so each
variant (torch, the tilelab safe kernel, the raw cuTile kernel) runs once on fresh random
inputs into a NaN-poisoned output and is compared with a float32/float64 reference before
anything is timed; a wrong or failing variant gets its reason and no time. Timings are
:func:`tilelab.bench` medians (CUDA events on the GPU, warm-up first, L2 flushed before
every timed call), all variants in the same process on the same inputs.

Example:
    >>> from benchmarks.suite.cases import build_cases
    >>> from benchmarks.suite.data import make_arrays
    >>> from benchmarks.suite.kernels import Registry
    >>> case = build_cases("tiny", ["memory"])[0]
    >>> r = run_case(case, make_arrays("cpu", False), Registry(), RunOptions(rep=2))
    >>> r["status"], r["variants"]["tilelab"]["status"]       # doctest: +SKIP
    ('ok', 'ok')
"""
from __future__ import annotations

import math
import statistics
import time
import traceback
import zlib
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import tilelab as tl
from tilelab.perf.autotune import config_json
from tilelab.perf.bench import BenchResult

from ..common import Nominal, rel_err, rotated
from .cases import Case
from .data import Arrays
from .kernels import Impl, Registry, async_host_call, host_call_args

__all__ = ["RunOptions", "Nominal", "Variant", "run_case", "compile_variant"]


@dataclass
class RunOptions:
    """How hard to time: at most ``rep`` timed calls per variant (fewer for slow ones, so
    one variant takes about ``target_s``), up to ``warmup`` untimed calls first, and
    ``rounds`` interleaved rounds over the variants (the median of the round medians is
    reported; each round starts one variant later, so that none is always timed first
    while the clocks drift). ``seed`` varies the random inputs."""

    rep: int = 20
    warmup: int = 5
    target_s: float = 1.0
    rounds: int = 1
    flush_l2: bool = True
    seed: int = 0
    #: time torch.compile (Inductor) of the torch baseline in the memory cases (GPU)
    compile_baseline: bool = True


@dataclass
class Variant:
    """One implementation of a case, ready to call.

    ``args is None``: ``fn`` is a thunk (the torch baselines). Otherwise ``fn`` is a host
    function called with the suite's convention; ``read``, when set, is the array to read
    instead of the call's result (a GEMV run as a [1, N] GEMM reads the [N] vector).
    Calling the variant runs it synchronously (the correctness check); :meth:`timed` is
    what ``tl.bench`` calls: asynchronously where the function takes ``sync``."""

    name: str                    #: 'torch', 'compile', 'tilelab', 'tilelab_as_raw', 'raw', 'copy'
    impl: str                    #: what runs
    fn: Callable
    args: list | None = None
    kwargs: dict = field(default_factory=dict)
    out_arg: Any = None
    read: Any = None
    poison: Any = None           #: the output buffer filled with NaN before checking
    config: dict = field(default_factory=dict)   #: config keywords passed as they are
    #: checks a variant that does not compute the case (the copy ceiling): None when
    #: its own result is right, else why not
    verify: Callable[[], str | None] | None = None
    #: why this variant is reported but neither checked nor timed (None: it runs)
    skip: str | None = None
    #: the future of the last asynchronous timed call (waited for by :meth:`settle`)
    pending: Any = field(default=None, init=False, repr=False, compare=False)
    _timed: Any = field(default=None, init=False, repr=False, compare=False)

    @property
    def timed_async(self) -> bool:
        """Whether :meth:`timed` launches without waiting (the function takes ``sync``)."""
        return self._async_call() is not None

    def _async_call(self) -> Callable[[], Any] | None:
        if self._timed is None:      # worked out once: nothing of it inside the window
            call = None
            if self.args is not None:
                call = async_host_call(self.fn, self.args, self.kwargs, self.out_arg,
                                       self.config)
            self._timed = call or False
        return self._timed or None

    def timed(self) -> None:
        """One timed call: ``sync=False`` where the function takes it, so the timed
        window holds device work as it does for torch and ``ct.launch``; the future is
        kept for :meth:`settle` (``tl.bench`` releases the earlier ones)."""
        call = self._async_call()
        if call is None:
            self()
        else:
            self.pending = call()

    def settle(self) -> None:
        """Wait for the last asynchronous timed call (observing it observes the earlier
        ones of its stream, so no borrow outlives the timing)."""
        fut, self.pending = self.pending, None
        if fut is not None:
            fut.wait()

    def __call__(self) -> Any:
        if self.args is None:
            return self.fn()
        a, kw = host_call_args(self.fn, self.args, self.kwargs, self.out_arg)
        y = self.fn(*a, **kw, **self.config)
        if "out" in kw and (y is None or callable(getattr(y, "wait", None))):
            y = self.out_arg
        return self.read if self.read is not None else y

    def with_config(self, name: str, config: dict) -> "Variant":
        return replace(self, name=name, config=dict(config))


# --------------------------------------------------------------------------- inputs

def _inputs(case: Case, arrays: Arrays) -> dict:
    spec = case.spec
    inp = {}
    for name, shape in spec.shapes(case.params).items():
        if name == "out":
            inp[name] = arrays.empty(shape, case.dtype)
        else:
            inp[name] = arrays.randn(shape, case.dtype, spec.scale.get(name, 1.0))
    return inp


def _host_variant(name: str, impl: Impl, case: Case, arrays: Arrays, inp: dict,
                  via_gemm: bool, convert: Callable[[Any], Any]) -> Variant:
    """A variant calling ``impl`` on ``inp`` (converted for it: tl tensors or native)."""
    if via_gemm:   # y = W x as a GEMM: x[1, K] @ (W[N, K]).T -> out[1, N]; W^T is a view
        w, x, out = inp["w"], inp["x"], inp["out"]
        wt = w.t() if arrays.backend == "gpu" else w.T
        return Variant(name, impl.name, impl.fn, [convert(x.reshape(1, -1)), convert(wt)], {},
                       convert(out.reshape(1, -1)), read=out, poison=out)
    spec = case.spec
    return Variant(name, impl.name, impl.fn, [convert(inp[a]) for a in spec.args],
                   spec.kwargs(case.params), convert(inp["out"]), poison=inp["out"])


def _copy_variant(case: Case, arrays: Arrays) -> Variant:
    """The memory ceiling timed with a memory-bound case: torch copying half the case's
    minimal bytes into the other half (one read and one write of every byte). Reads
    and writes alone run faster, but mixed one to one they go no faster than a copy
    (``benchmarks/device/ceilings.py``), so a kernel that reads and writes the same bytes is
    bounded by this."""
    t = arrays.torch
    n = max(1, case.work.bytes // 4)               # bf16 elements: 2n bytes each way
    src = arrays.to_torch(arrays.randn((n,), "bfloat16"))
    dst = t.empty_like(src)
    return Variant("copy", "torch copy_ of the case's bytes (the copy ceiling)",
                   lambda: dst.copy_(src),
                   verify=lambda: None if t.equal(dst, src) else "copy differs from source")


def compile_variant(case: Case, arrays: Arrays, tinp: dict, enabled: bool = True) -> Variant:
    """torch.compile (Inductor, mode 'default', ``dynamic=False``, ``fullgraph=True``: one
    graph, no fallback to eager between its parts) of the case's pure torch function,
    compiled once per case: the correctness check's call compiles and warms it, outside
    every timing. Eager RoPE is six kernels; the compiled one is fused,
    so this is the baseline a fused kernel has to beat. On the CPU backend, or without
    torch.compile or triton, the variant is reported ``skipped`` with the reason.

    Example:
        >>> from benchmarks.suite.cases import build_cases
        >>> from benchmarks.suite.data import make_arrays
        >>> a = make_arrays("cpu")
        >>> case = build_cases("tiny", ["memory"])[2]
        >>> compile_variant(case, a, {}).skip                 # doctest: +ELLIPSIS
        'the torch.compile baseline runs on the GPU backend only...'
    """
    t = arrays.torch
    label, fn = case.spec.pure(t, case.params) if t is not None and case.spec.pure else \
        ("torch", None)
    impl = f"torch.compile (Inductor, mode default, dynamic=False, fullgraph) of {label}"
    why = _compile_unavailable(arrays, enabled)
    if why is None and fn is None:
        why = f"no pure torch function for {case.op!r} to compile"
    if why is not None:
        return Variant("compile", impl, lambda: None, skip=why)
    compiled = t.compile(fn, mode="default", dynamic=False, fullgraph=True)
    args = [tinp[a] for a in case.spec.args]
    return Variant("compile", impl, lambda: compiled(*args))


def _compile_unavailable(arrays: Arrays, enabled: bool) -> str | None:
    """Why the torch.compile baseline cannot run here (None: it can)."""
    import importlib.util

    if not enabled:
        return "the torch.compile baseline was turned off (--no-compile-baseline)"
    if arrays.backend != "gpu":
        return ("the torch.compile baseline runs on the GPU backend only (Inductor on the "
                "CPU would spend minutes compiling C++ and time nothing about a GPU)")
    if not callable(getattr(arrays.torch, "compile", None)):
        return "this torch has no torch.compile"
    if importlib.util.find_spec("triton") is None:
        return "triton is not installed: Inductor cannot generate GPU kernels"
    return None


def _variants(case: Case, arrays: Arrays, registry: Registry, inp: dict,
              safe: Impl, via_gemm: bool, notes: list, opts: RunOptions) -> list[Variant]:
    out: list[Variant] = []
    if arrays.torch is not None:
        tinp = {k: arrays.to_torch(v) for k, v in inp.items()}
        label, fn = case.spec.torch(arrays.torch, tinp, case.params)
        out.append(Variant("torch", label, fn, poison=tinp["out"]))
        if case.group == "memory":
            if case.spec.pure is not None:
                out.append(compile_variant(case, arrays, tinp, opts.compile_baseline))
            out.append(_copy_variant(case, arrays))
    else:
        notes.append("torch not installed: no torch baseline")
    out.append(_host_variant("tilelab", safe, case, arrays, inp, via_gemm, arrays.to_tl))
    raw = registry.raw("gemm" if via_gemm else case.op, safe.family)
    if raw is not None and raw.builtin and safe.mirror is None:
        notes.append(f"{raw.name} cannot be given {safe.name}'s config: no raw variant")
        raw = None
    if raw is not None:
        out.append(_host_variant("raw", raw, case, arrays, inp, via_gemm, lambda a: a))
    return out


def _tuning_info(v: Variant) -> tuple[dict, dict]:
    """(JSON description, winning config) of an autotuned host function for this
    variant's arguments."""
    fn = v.fn
    a, k = host_call_args(fn, v.args, v.kwargs, v.out_arg)
    best = fn.best_config(*a, **k)
    info: dict = {"config": config_json(best)}
    try:
        bucket = fn.key_of(*a, **k)
        for rec in fn.tuning_records():
            if (rec.get("parts") or {}).get("bucket") == bucket and \
                    rec.get("origin") in ("tuned", "disk", "untuned"):
                info["tuning"] = {
                    "origin": rec["origin"],
                    "results": [{"config": r.get("config"), "status": r.get("status"),
                                 "seconds": r.get("seconds"), "reason": r.get("reason", "")}
                                for r in rec.get("results", [])]}
                break
    except Exception:
        pass
    return info, best


# --------------------------------------------------------------------------- checking

def _check(case: Case, arrays: Arrays, v: Variant, ref: Any) -> dict:
    """Run once into a NaN-poisoned output; compare with the reference (or, for a
    variant with ``verify``, check its own result). A variant with ``skip`` only says
    why it did not run."""
    if v.skip is not None:
        return {"impl": v.impl, "status": "skipped", "reason": v.skip}
    if v.poison is not None:           # the copy ceiling has no output to poison
        arrays.poison(v.poison)
    t0 = time.perf_counter()
    try:
        y = v()
        arrays.sync()
        why = v.verify() if v.verify is not None else None
    except Exception as e:
        return {"impl": v.impl, "status": "error", "reason": f"{type(e).__name__}: {_line(e)}",
                "traceback": traceback.format_exc(limit=6)}
    first = time.perf_counter() - t0
    if v.verify is not None:
        return {"impl": v.impl, "first_call_s": first,
                **({"status": "wrong", "reason": why} if why else {"status": "ok"})}
    y = arrays.native(y if y is not None else v.poison)
    if case.spec.select is not None:
        y = case.spec.select(arrays.xp(), y, case.params)
    err, why = rel_err(arrays.snapshot(y), ref)
    res = {"impl": v.impl, "rel_err": err if math.isfinite(err) else None, "tol": case.tol,
           "first_call_s": first}
    if not err <= case.tol:
        res.update(status="wrong", reason=why or f"relative error {err:.3g} > {case.tol:g}")
    else:
        res["status"] = "ok"
    return res


def _line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:400] if text else ""


def _like_for_like(case: Case, arrays: Arrays, safe: Impl, variants: list[Variant],
                   checks: dict, ref: Any, notes: list) -> None:
    """Give the raw variant the safe kernel's tuned tiles and schedule; where the safe
    winner uses what the raw kernel cannot express (hints, split-K, a swizzle), also run
    the safe kernel at the raw kernel's config, so safe-vs-raw measures safety only."""
    raw = next((v for v in variants if v.name == "raw"), None)
    if raw is None:
        return
    tv = next(v for v in variants if v.name == "tilelab")
    best = tv.config or None
    if safe.mirror is None or best is None:
        # a raw host function of the kernel's author mirrors its kernel by construction
        checks["raw"]["like_for_like"] = safe.mirror is None
        return
    try:
        pair = safe.mirror(best, case)
    except Exception as e:
        pair, why = None, f"{type(e).__name__}: {_line(e)}"
    else:
        why = "the raw kernels have no twin of this config"
    if pair is None:
        variants.remove(raw)
        del checks["raw"]
        notes.append(f"no raw variant: {why}")
        return
    raw_cfg, safe_cfg = pair
    i = variants.index(raw)
    variants[i] = raw = raw.with_config("raw", raw_cfg)
    checks["raw"] = dict(_check(case, arrays, raw, ref), config=raw_cfg, like_for_like=True)
    if config_json(safe_cfg) != config_json(best):
        twin = tv.with_config("tilelab_as_raw", safe_cfg)
        variants.insert(i, twin)
        checks["tilelab_as_raw"] = dict(_check(case, arrays, twin, ref),
                                        config=config_json(safe_cfg))


# --------------------------------------------------------------------------- timing

def _time(v: Variant, arrays: Arrays, opts: RunOptions) -> BenchResult:
    """tl.bench of :meth:`Variant.timed` with as many reps as fit ``target_s`` (probed
    by one synced call)."""
    t0 = time.perf_counter()
    v()
    arrays.sync()
    probe = max(time.perf_counter() - t0, 1e-6)
    rep = max(3, min(opts.rep, int(opts.target_s / probe)))
    warmup = max(1, min(opts.warmup, rep // 4))
    try:
        return tl.bench(v.timed, warmup=warmup, rep=rep, flush_l2=opts.flush_l2,
                        name=f"{v.name} {v.impl}")
    finally:
        v.settle()


def _figures(case: Case, stats: dict, nominal: Nominal) -> dict:
    work = case.work
    med = stats["median_s"]
    fig = {"flop_per_s": work.flops / med, "byte_per_s": work.bytes / med}
    if case.metric == "flops":
        peak = nominal.peak(work.precision)
        fig["fraction_of_peak"] = fig["flop_per_s"] / peak if peak else None
    else:
        fig["fraction_of_bandwidth"] = fig["byte_per_s"] / nominal.bandwidth
    return fig


def _time_all(timed: list[Variant], checks: dict, case: Case, arrays: Arrays,
              opts: RunOptions, nominal: Nominal) -> None:
    medians: dict[str, list[float]] = {v.name: [] for v in timed}
    for r in range(max(1, opts.rounds)):
        # round r starts at variant r: the H200's clocks sag during a run (later calls
        # of a round ran up to 10% slower), so a fixed order favoured the first variant
        for v in rotated(timed, r):
            if checks[v.name]["status"] != "ok":
                continue
            try:
                r = _time(v, arrays, opts)
            except Exception as e:
                checks[v.name].update(status="error", reason=f"timing: {type(e).__name__}: "
                                      f"{_line(e)}")
                continue
            medians[v.name].append(r.median)
            d = r.as_dict()
            checks[v.name].update({k: d[k] for k in ("p10_s", "p90_s", "n", "host_median_s",
                                                     "flushed_l2", "device")})
            if "host_cover_flushes" in d:     # flushes that kept the device busy
                checks[v.name]["host_cover_flushes"] = d["host_cover_flushes"]
            # host time per call, apart from the device time: with sync=False it is the
            # library's planning and launching only
            checks[v.name]["timed_async"] = v.timed_async
    for name, meds in medians.items():
        if meds and checks[name]["status"] == "ok":
            checks[name]["median_s"] = statistics.median(meds)
            checks[name]["round_medians_s"] = meds
            checks[name].update(_figures(case, checks[name], nominal))


def _ratio(fast: dict, slow: dict) -> float | None:
    """slow's median / fast's median (None when either has no time)."""
    if fast.get("median_s") and slow.get("median_s"):
        return slow["median_s"] / fast["median_s"]
    return None


def _case_figures(checks: dict) -> dict:
    tlv = checks.get("tilelab", {})
    fig: dict = {}
    if "torch" in checks:
        fig["tilelab_vs_torch"] = _ratio(tlv, checks["torch"])
    if "raw" in checks:
        fig["safe_vs_raw"] = _ratio(checks.get("tilelab_as_raw", tlv), checks["raw"])
        fig["safe_vs_raw_like_for_like"] = bool(checks["raw"].get("like_for_like"))
    for key in ("fraction_of_peak", "fraction_of_bandwidth", "flop_per_s", "byte_per_s"):
        if tlv.get(key) is not None:
            fig[f"tilelab_{key}"] = tlv[key]
    if "compile" in checks:
        fig["tilelab_vs_compile"] = _ratio(tlv, checks["compile"])
    copy = checks.get("copy", {})
    if copy.get("byte_per_s") and tlv.get("byte_per_s"):
        fig["copy_byte_per_s"] = copy["byte_per_s"]
        fig["tilelab_fraction_of_copy"] = tlv["byte_per_s"] / copy["byte_per_s"]
        if checks.get("compile", {}).get("byte_per_s"):
            fig["compile_fraction_of_copy"] = checks["compile"]["byte_per_s"] / \
                copy["byte_per_s"]
    return fig


# --------------------------------------------------------------------------- the case

def run_case(case: Case, arrays: Arrays, registry: Registry, opts: RunOptions,
             nominal: Nominal | None = None) -> dict:
    """Check and time every variant of ``case``; never raises (errors go in the result).

    ``"fatal"`` in the result means the device did not survive the case (a sticky CUDA
    error): the caller should stop using this process.
    """
    nominal = nominal or Nominal("h200", 4.8e12, {})
    t0 = time.perf_counter()
    res: dict = {"id": case.id, "group": case.group, "op": case.op, "dtype": case.dtype,
                 "params": case.params, "tags": case.tags, "work": case.work.to_dict(),
                 "metric": case.metric, "status": "ok", "variants": {}, "figures": {},
                 "notes": []}
    try:
        _run(case, arrays, registry, opts, nominal, res)
    except Exception as e:
        res["status"] = "error"
        res["error"] = f"{type(e).__name__}: {_line(e)}"
        res["traceback"] = traceback.format_exc(limit=8)
    res["elapsed_s"] = time.perf_counter() - t0
    try:
        arrays.release()
    except Exception as e:
        res["fatal"] = f"the device is unusable after this case: {type(e).__name__}: {_line(e)}"
    return res


def _run(case: Case, arrays: Arrays, registry: Registry, opts: RunOptions, nominal: Nominal,
         res: dict) -> None:
    safe, via_gemm = registry.safe(case.op), False
    if safe is None and case.op == "gemv" and registry.safe("gemm") is not None:
        safe, via_gemm = registry.safe("gemm"), True
        res["notes"].append(f"no gemv kernel: y = W x runs as a GEMM with M = 1 ({safe.name})")
    if safe is None:
        res["status"] = "missing"
        res["variants"]["tilelab"] = {"status": "missing",
                                      "reason": f"no tilelab host function for {case.op!r}"}
        return
    arrays.seed(opts.seed + zlib.crc32(case.id.encode()) % 65536)
    inp = _inputs(case, arrays)
    ref = arrays.snapshot(case.spec.reference(
        arrays.xp(), {k: v for k, v in inp.items() if k != "out"}, case.params))
    variants = _variants(case, arrays, registry, inp, safe, via_gemm, res["notes"], opts)
    checks: dict = {}
    for v in variants:
        checks[v.name] = _check(case, arrays, v, ref)
        if v.name == "tilelab":
            if safe.note:
                checks[v.name]["note"] = safe.note
            if safe.tuned and checks[v.name]["status"] == "ok":
                info, best = _tuning_info(v)
                checks[v.name].update(info)
                # time the winner directly: the autotune wrapper's per-call key lookup
                # (a few microseconds) is not the kernel's cost
                variants[variants.index(v)] = v.with_config("tilelab", best)
    _like_for_like(case, arrays, safe, variants, checks, ref, res["notes"])
    res["variants"] = checks
    if checks["tilelab"]["status"] != "ok":
        res["status"] = checks["tilelab"]["status"]
        return
    _time_all([v for v in variants if checks[v.name]["status"] == "ok"], checks, case,
              arrays, opts, nominal)
    res["figures"] = _case_figures(checks)
    if "median_s" not in checks["tilelab"]:
        res["status"] = "error"
