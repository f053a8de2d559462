"""The tilelab benchmark suite: GEMM, attention, memory-bound kernels and decode GEMV,
each checked against a reference and timed next to torch (cuBLAS, SDPA) and the raw
cuTile version, in one run, within a time budget.

Run on a GPU machine (about 8 minutes on an H200)::

    python benchmarks/suite.py                    # full sizes, all groups
    python benchmarks/suite.py --quick --only gemm,decode
    python benchmarks/suite.py --list             # the cases, without running them

It writes ``benchmarks/results/suite_<gpu>_<date>.json`` (``--out``), a roofline PNG
beside it (``--png``) and prints a summary table last. On the CPU backend it runs tiny
sizes on the interpreter (a smoke test of the whole pipeline; the times mean nothing).
See benchmarks/README.md for the methodology and every figure.
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from suite_cases import GROUPS, Case, build_cases  # noqa: E402

SCHEMA = "tilelab-suite/1"
RUN_ORDER = ("memory", "decode", "gemm", "attention")
#: share of the time budget per group (unused time rolls over to the next group)
WEIGHTS = {"memory": 1.0, "decode": 1.0, "gemm": 4.0, "attention": 3.0}


# --------------------------------------------------------------------------- arguments

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer and smaller cases")
    ap.add_argument("--only", default=",".join(RUN_ORDER),
                    help="comma-separated groups: gemm,attention,memory,decode")
    ap.add_argument("--sizes", choices=("full", "quick", "tiny"), default=None,
                    help="size preset (default: full; quick with --quick; tiny on the CPU)")
    ap.add_argument("--out", default=None, help="result JSON (default: "
                    "benchmarks/results/suite_<gpu>_<date>.json)")
    ap.add_argument("--png", default=None, help="roofline PNG (default: beside --out)")
    ap.add_argument("--budget-s", type=float, default=400.0,
                    help="wall-clock budget of the cases; later cases are skipped")
    ap.add_argument("--rep", type=int, default=20, help="max timed calls per variant")
    ap.add_argument("--warmup", type=int, default=5, help="max warm-up calls per variant")
    ap.add_argument("--target-s", type=float, default=None,
                    help="time to spend timing one variant (default 0.5 s; 0.3 quick)")
    ap.add_argument("--rounds", type=int, default=None,
                    help="interleaved timing rounds (default 3 on the GPU, whose clocks "
                         "drift within a run; 1 on the CPU)")
    ap.add_argument("--seed", type=int, default=0, help="varies the random inputs")
    ap.add_argument("--kernel", action="append", default=[], metavar="OP=MODULE:FUNCTION",
                    help="benchmark this host function for OP (repeatable)")
    ap.add_argument("--no-torch", action="store_true",
                    help="no torch baselines (the CPU backend only)")
    ap.add_argument("--kernel-package", default="tilelab.kernels",
                    help="package whose modules hold the host functions")
    ap.add_argument("--no-tour", action="store_true",
                    help="no tour-kernel stand-ins for ops the library lacks")
    ap.add_argument("--no-tune", action="store_true",
                    help="library defaults only: no config search (fewer compiles)")
    ap.add_argument("--isolate", dest="isolate", action="store_true", default=None,
                    help="run each group in a child process (default on the GPU)")
    ap.add_argument("--no-isolate", dest="isolate", action="store_false")
    ap.add_argument("--targets", default=None, help="JSON file of targets (see README)")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    ap.add_argument("--replot", default=None, metavar="RESULT.json",
                    help="redraw the roofline PNG of a saved result (to --png) and exit")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ns = ap.parse_args(argv)
    ns.argv = list(sys.argv[1:] if argv is None else argv)
    ns.groups = [g.strip() for g in ns.only.split(",") if g.strip()]
    bad = [g for g in ns.groups if g not in GROUPS]
    if bad:
        ap.error(f"unknown group(s) {', '.join(bad)}; choose from {', '.join(GROUPS)}")
    ns.groups = [g for g in RUN_ORDER if g in ns.groups]
    ns.overrides = {}
    for item in ns.kernel:
        op, sep, target = item.partition("=")
        if not sep or ":" not in target:
            ap.error(f"--kernel {item!r}: write OP=module:function")
        ns.overrides[op.strip()] = target.strip()
    return ns


def _preset(ns: argparse.Namespace, backend: str) -> str:
    if ns.sizes:
        return ns.sizes
    if backend == "cpu":
        return "tiny"
    return "quick" if ns.quick else "full"


def _ordered(cases: list[Case]) -> list[Case]:
    """Largest problems last, so a tight budget drops them first."""
    return sorted(cases, key=lambda c: c.priority)


# --------------------------------------------------------------------------- JSON

def _clean(obj: Any) -> Any:
    """JSON-safe: non-finite floats become null, unknown objects their repr."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    return repr(obj)


def write_json(path: Path, data: dict) -> None:
    """Write atomically (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".suite-", suffix=".json", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(_clean(data), f, indent=1, allow_nan=False)
    os.replace(tmp, path)


# --------------------------------------------------------------------------- running

def _skipped(case: Case, why: str) -> dict:
    return {"id": case.id, "group": case.group, "op": case.op, "dtype": case.dtype,
            "params": case.params, "tags": case.tags, "work": case.work.to_dict(),
            "metric": case.metric, "status": "skipped", "reason": why, "variants": {},
            "figures": {}, "notes": []}


def _progress(i: int, n: int, res: dict) -> None:
    v = res.get("variants", {})

    def t(name: str) -> str:
        s = (v.get(name) or {}).get("median_s")
        return f"{name} {s * 1e3:.3f}ms" if s else ""
    extra = "  ".join(x for x in (t("tilelab"), t("torch"), t("raw")) if x)
    why = res.get("error") or res.get("reason") or (v.get("tilelab") or {}).get("reason", "")
    print(f"[{i:>3}/{n}] {res['id']:<46} {res['status']:<8} {extra or why[:80]} "
          f"({res.get('elapsed_s', 0):.1f}s)", flush=True)


def run_in_process(ns: argparse.Namespace, backend: str, cases: list[Case],
                   budgets: dict[str, float], sink: Any) -> tuple[list[dict], Any]:
    """Run ``cases`` here; ``budgets`` is a deadline (time.monotonic) per group; ``sink``
    is called with the results so far after every case. Returns (results, registry)."""
    from suite_data import make_arrays
    from suite_env import env_info, nominal_for
    from suite_kernels import Registry
    from suite_run import RunOptions, run_case

    registry = Registry(ns.overrides, tour=not ns.no_tour, tune=not ns.no_tune,
                        kernel_package=ns.kernel_package)
    target = ns.target_s if ns.target_s is not None else (0.3 if ns.quick else 0.5)
    if backend == "cpu":
        target = min(target, 0.05)
    opts = RunOptions(rep=ns.rep if backend == "gpu" else min(ns.rep, 3),
                      warmup=ns.warmup if backend == "gpu" else 1, target_s=target,
                      rounds=ns.rounds or (3 if backend == "gpu" else 1), seed=ns.seed)
    results: list[dict] = []
    fatal = None
    try:
        arrays = make_arrays(backend, use_torch=not ns.no_torch)
        nominal, _ = nominal_for(env_info(backend))
    except Exception as e:   # no torch on the GPU, a broken driver: say so per case
        fatal = f"{type(e).__name__}: {e}"
    for i, case in enumerate(cases, 1):
        if fatal:
            res = dict(_skipped(case, f"not run: {fatal}"), status="error")
        elif time.monotonic() > budgets[case.group]:
            res = _skipped(case, "time budget spent (--budget-s)")
        else:
            res = run_case(case, arrays, registry, opts, nominal)
            fatal = res.get("fatal")
        results.append(res)
        _progress(i, len(cases), res)
        sink(results, registry)
    return results, registry


def run_isolated(ns: argparse.Namespace, group: str, seconds: float, hard_s: float,
                 cases: list[Case], preset: str) -> tuple[list[dict], dict]:
    """Run one group in a child process (a sticky CUDA error or a hang there cannot
    take the other groups down); returns its results, filling in cases it never ran,
    and what else the child reported (``kernels``, ``env``)."""
    with tempfile.TemporaryDirectory(prefix="tilelab-suite-") as tmp:
        out = Path(tmp) / f"{group}.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--only", group,
               "--sizes", preset, "--budget-s", f"{max(seconds, 1.0):.1f}", "--out", str(out),
               "--rep", str(ns.rep), "--warmup", str(ns.warmup), "--rounds", str(ns.rounds),
               "--seed", str(ns.seed)]
        if ns.target_s is not None:
            cmd += ["--target-s", str(ns.target_s)]
        if ns.quick:
            cmd.append("--quick")
        for item in ns.kernel:
            cmd += ["--kernel", item]
        cmd += ["--kernel-package", ns.kernel_package]
        for flag in ("no_torch", "no_tour", "no_tune"):
            if getattr(ns, flag):
                cmd.append("--" + flag.replace("_", "-"))
        why = None
        try:
            proc = subprocess.run(cmd, timeout=hard_s, stderr=subprocess.PIPE, text=True)
            if proc.returncode != 0:
                why = f"child process exited with {proc.returncode}: " \
                      f"{(proc.stderr or '').strip()[-600:]}"
            elif proc.stderr:
                sys.stderr.write(proc.stderr[-4000:])
        except subprocess.TimeoutExpired:
            why = f"child process killed after {hard_s:.0f}s (time budget)"
        data = None
        try:
            data = json.loads(out.read_text())
        except (OSError, ValueError):
            pass
    got = {c["id"]: c for c in (data or {}).get("cases", [])}
    results = []
    for case in cases:
        res = got.get(case.id)
        if res is None or (why and res.get("status") == "skipped"):
            res = _skipped(case, why or "not run by the child process")
            res["status"] = "error" if why else "skipped"
        results.append(res)
    return results, {k: v for k, v in (data or {}).items() if k != "cases"}


def _deadline(groups: list[str], group: str, start: float, total: float) -> float:
    """When ``group`` must stop starting cases: its weight's share of the time left."""
    now = time.monotonic()
    left = start + total - now
    todo = groups[groups.index(group):]
    share = WEIGHTS[group] / sum(WEIGHTS[g] for g in todo)
    return now + max(0.0, left * share)


# --------------------------------------------------------------------------- main

def replot(result: Path, png: Path) -> dict:
    """Redraw the roofline PNG of a saved suite result (the tree keeps only the latest
    run's PNG; every figure is in the JSON; superseded runs are kept as ``.json.gz``).

    Example:
        >>> r = Path("results/suite_r3g_h200_2026-11-30.json.gz")
        >>> replot(r, Path("r3g.png"))["path"]        # doctest: +SKIP
        'r3g.png'
    """
    from suite_env import nominal_for
    from suite_report import roofline_png

    data = Path(result).read_bytes()
    doc = json.loads(gzip.decompress(data) if Path(result).suffix == ".gz" else data)
    nominal, _ = nominal_for(doc["env"])
    done = [c for c in doc["cases"] if c.get("status") == "ok"]
    return roofline_png(done, doc["env"], nominal.gpu, png)


def main(argv: list[str] | None = None) -> int:
    ns = parse_args(argv)
    if ns.replot:
        png = Path(ns.png) if ns.png else Path(ns.replot).with_suffix(".png")
        info = replot(Path(ns.replot), png)
        print(f"wrote {info['path']}" if "path" in info else
              f"no roofline: {info.get('error')}")
        return 0 if "path" in info else 1
    from tilelab.runtime.device import backend as get_backend

    backend = get_backend()
    if ns.rounds is None:
        ns.rounds = 3 if backend == "gpu" else 1
    preset = _preset(ns, backend)
    cases_by_group = {g: _ordered(build_cases(preset, [g])) for g in ns.groups}
    if ns.list:
        for g, cs in cases_by_group.items():
            for c in cs:
                w = c.work
                print(f"{c.id:<48} {w.flops / 1e9:>12.3f} GFLOP {w.bytes / 1e6:>10.1f} MB")
        return 0
    if ns.child:
        return _child(ns, backend, cases_by_group)
    return _parent(ns, backend, preset, cases_by_group)


def _child(ns: argparse.Namespace, backend: str, cases_by_group: dict) -> int:
    out = Path(ns.out)
    start = time.monotonic()
    cases = [c for cs in cases_by_group.values() for c in cs]
    budgets = {g: start + ns.budget_s for g in cases_by_group}

    def sink(results: list[dict], registry: Any) -> None:
        write_json(out, {"cases": results})
    results, registry = run_in_process(ns, backend, cases, budgets, sink)
    from suite_env import env_info

    write_json(out, {"cases": results, "kernels": registry.report(), "env": env_info(backend)})
    return 0


def _parent(ns: argparse.Namespace, backend: str, preset: str, cases_by_group: dict) -> int:
    from suite_env import env_info, gpu_slug, nominal_for
    from suite_report import DEFAULT_TARGETS, check_targets, roofline_png, summarize, table

    t0 = time.monotonic()
    isolate = ns.isolate if ns.isolate is not None else backend == "gpu"
    env = env_info(backend, init_gpu=not isolate)   # children own the GPU when isolated
    nominal, nominal_desc = nominal_for(env)
    date = env["date"][:10]
    out = Path(ns.out) if ns.out else HERE / "results" / f"suite_{gpu_slug(env)}_{date}.json"
    png = Path(ns.png) if ns.png else out.with_name(out.stem + "_roofline.png")
    targets = DEFAULT_TARGETS
    if ns.targets:
        targets = json.loads(Path(ns.targets).read_text())
    doc: dict[str, Any] = {
        "schema": SCHEMA, "env": env, "nominal": nominal_desc,
        "run": {"argv": ns.argv, "preset": preset,
                "groups": ns.groups, "budget_s": ns.budget_s, "isolated": isolate,
                "torch_baselines": not ns.no_torch, "tuning": not ns.no_tune,
                "timing": {"method": "tl.bench: CUDA events on tilelab's stream (host clock "
                                     "on the CPU), L2 flushed before every timed call, "
                                     "median of up to --rep calls after warm-up; library "
                                     "functions called with sync=False into a "
                                     "preallocated out=",
                           "max_rep": ns.rep, "max_warmup": ns.warmup, "rounds": ns.rounds,
                           "seed": ns.seed}},
        "targets": {}, "summary": {}, "kernels": {}, "cases": []}
    print(f"tilelab suite: {env['gpu']} ({backend}), preset {preset}, groups "
          f"{','.join(ns.groups)}, budget {ns.budget_s:.0f}s, "
          f"{'one process per group' if isolate else 'in process'}", flush=True)
    if backend == "cpu":
        print("CPU backend: tiny sizes on the interpreter, configs untuned (library "
              "defaults); the times say nothing about a GPU", flush=True)
    done: list[dict] = []

    def flush(extra: list[dict] | None = None) -> None:
        doc["cases"] = done + (extra or [])
        write_json(out, doc)

    for group in ns.groups:
        cases = cases_by_group[group]
        deadline = _deadline(ns.groups, group, t0, ns.budget_s)
        if isolate:
            share = max(0.0, deadline - time.monotonic())
            left = max(0.0, t0 + ns.budget_s - time.monotonic())
            # the child stops starting cases at its share; past twice that it is killed
            hard = min(left + 60.0, 2.0 * share + 90.0)
            if share <= 0:
                results = [_skipped(c, "time budget spent (--budget-s)") for c in cases]
            else:
                results, child = run_isolated(ns, group, share, hard, cases, preset)
                if child.get("kernels"):
                    doc["kernels"] = child["kernels"]
                if child.get("env"):   # the child saw the GPU through CUDA: fuller facts
                    doc["env"].update(child["env"])
            for i, r in enumerate(results, 1):
                if r.get("status") in ("skipped", "error") and "elapsed_s" not in r:
                    _progress(i, len(results), r)
        else:
            def sink(results: list[dict], registry: Any) -> None:
                flush(results)
            results, registry = run_in_process(ns, backend, cases, {group: deadline}, sink)
            doc["kernels"] = registry.report()
        done.extend(results)
        flush()
    if not doc["kernels"]:
        try:
            from suite_kernels import Registry

            doc["kernels"] = Registry(ns.overrides, tour=not ns.no_tour, tune=not ns.no_tune,
                                      kernel_package=ns.kernel_package).report()
        except Exception as e:
            doc["kernels"] = {"error": f"{type(e).__name__}: {e}"}
    nominal, doc["nominal"] = nominal_for(doc["env"])
    doc["summary"] = summarize(done)
    doc["targets"] = check_targets(doc["summary"], targets)
    doc["roofline"] = roofline_png(done, env, nominal.gpu, png)
    doc["run"]["elapsed_s"] = time.monotonic() - t0
    write_json(out, doc)
    print(f"\nwrote {out}" + (f" and {png}" if "path" in doc["roofline"] else
                             f" (no roofline: {doc['roofline'].get('error')})"))
    print()
    print(table(done, doc["summary"], doc["targets"]), flush=True)   # the table comes last
    return 0


if __name__ == "__main__":
    from tilelab.perf.autotune import AutotuneWarning

    # the JSON records each function's tuning origin ('untuned' on the CPU backend)
    warnings.simplefilter("ignore", AutotuneWarning)
    sys.exit(main())
