"""The tilelab benchmark suite: every group of :data:`benchmarks.suite.groups.GROUPS`
(runtime, compile, memory, decode, gemm, attention), each case checked against a
reference and timed next to its baseline (torch: cuBLAS, SDPA; the raw cuTile twin) in
the same run, within a time budget, into one JSON file.

Run from the repository root::

    python -m benchmarks                         # on an H200: 8-9 minutes
    python -m benchmarks --quick --only gemm,decode
    python -m benchmarks --dry-run               # the CPU backend, tiny sizes: a smoke test
    python -m benchmarks --list                  # the groups and cases, without running

It writes ``benchmarks/results/suite_<gpu>_<date>.json`` (``--out``), a roofline PNG
beside it (``--png``) and prints a summary table last. See benchmarks/README.md.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from ..common import RESULTS, env_info, gpu_slug, nominal_for, write_json
from .engine import (FINISH_S, MIN_GROUP_S, WALL_S, build_group_cases, child_main,
                     context_of, deadline, plan, run_function, run_in_process, run_isolated,
                     wall_window)
from .groups import GROUPS, RUN_ORDER, case_groups
from .compare import compare, load_results, previous_figures

__all__ = ["main", "cli", "parse_args", "replot", "SCHEMA"]

SCHEMA = "tilelab-suite/2"


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks",
                                 description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=",".join(RUN_ORDER),
                    help="comma-separated groups: " + ",".join(RUN_ORDER))
    ap.add_argument("--quick", action="store_true", help="fewer and smaller cases")
    ap.add_argument("--dry-run", action="store_true",
                    help="the CPU backend, tiny sizes, in process: checks the whole "
                         "pipeline in a minute or two; the times say nothing")
    ap.add_argument("--backend", choices=("gpu", "cpu"), default=None,
                    help="force a backend (sets TILELAB_BACKEND; default: the GPU when usable)")
    ap.add_argument("--sizes", choices=("full", "quick", "tiny"), default=None,
                    help="size preset (default: full; quick with --quick; tiny on the CPU)")
    ap.add_argument("--out", default=None, help="result JSON (default: "
                    "benchmarks/results/suite_<gpu>_<date>.json)")
    ap.add_argument("--png", default=None, help="roofline PNG (default: beside --out)")
    ap.add_argument("--budget-s", type=float, default=300.0,
                    help="wall-clock budget of the cases (later cases are skipped)")
    ap.add_argument("--wall-s", type=float, default=WALL_S,
                    help=f"wall-clock limit of the whole run (default {WALL_S:.0f} s: one "
                         "device call of under 560 s); a group is given what is left less "
                         "half the planned time of the groups after it, a child that "
                         "overruns it is killed, and groups with no time left are skipped")
    ap.add_argument("--compare-with", action="append", default=None, metavar="PATH",
                    help="previous suite results to compare with (directories or files; "
                         "default benchmarks/results)")
    ap.add_argument("--no-compare", action="store_true",
                    help="no comparison with previous results")
    ap.add_argument("--no-compile-baseline", action="store_true",
                    help="memory group: no torch.compile (Inductor) baseline")
    ap.add_argument("--rep", type=int, default=20, help="max timed calls per variant")
    ap.add_argument("--warmup", type=int, default=5, help="max warm-up calls per variant")
    ap.add_argument("--target-s", type=float, default=None,
                    help="time to spend timing one variant (default 0.5 s; 0.3 quick)")
    ap.add_argument("--rounds", type=int, default=None,
                    help="interleaved timing rounds (default 3 on the GPU, 1 on the CPU)")
    ap.add_argument("--seed", type=int, default=0, help="varies the random inputs")
    ap.add_argument("--kernel", action="append", default=[], metavar="OP=MODULE:FUNCTION",
                    help="benchmark this host function for OP (repeatable)")
    ap.add_argument("--kernel-package", default="tilelab.kernels",
                    help="package holding the host functions the op table names")
    ap.add_argument("--no-torch", action="store_true",
                    help="no torch baselines (the CPU backend only)")
    ap.add_argument("--no-tour", action="store_true",
                    help="no tour-kernel stand-ins for ops the library lacks")
    ap.add_argument("--no-tune", action="store_true",
                    help="library defaults only: no config search (fewer compiles)")
    ap.add_argument("--ceilings", action="store_true",
                    help="memory group: also measure the device's bandwidth ceilings")
    ap.add_argument("--decode-attention", action="store_true",
                    help="decode group: also time split-KV decode attention vs SDPA")
    ap.add_argument("--decode-full", action="store_true",
                    help="decode group: benchmarks/decode/throughput.py's own defaults (4B "
                         "and 8B, the torch.compile baseline; several minutes more)")
    ap.add_argument("--compile-runs", type=int, default=0,
                    help="compile group: new-process runs per measurement (default 5; 3 quick)")
    ap.add_argument("--isolate", dest="isolate", action="store_true", default=None,
                    help="run each group in a child process (default on the GPU)")
    ap.add_argument("--no-isolate", dest="isolate", action="store_false")
    ap.add_argument("--targets", default=None, help="JSON file of targets (see README)")
    ap.add_argument("--list", action="store_true", help="print the groups and cases, run nothing")
    ap.add_argument("--replot", default=None, metavar="RESULT.json",
                    help="redraw the roofline PNG of a saved result (to --png) and exit")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return ap


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The suite's options (``python -m benchmarks --help`` lists them).

    Example:
        >>> parse_args(["--only", "gemm,runtime"]).groups
        ['runtime', 'gemm']
    """
    ap = _parser()
    ns = ap.parse_args(argv)
    ns.argv = list(sys.argv[1:] if argv is None else argv)
    ns.groups = [g.strip() for g in ns.only.split(",") if g.strip()]
    bad = [g for g in ns.groups if g not in GROUPS]
    if bad:
        ap.error(f"unknown group(s) {', '.join(bad)}; choose from {', '.join(RUN_ORDER)}")
    ns.groups = [g for g in RUN_ORDER if g in ns.groups]
    if ns.dry_run:
        ns.backend, ns.quick = "cpu", True
        if ns.isolate is None:
            ns.isolate = False
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


def replot(result: Path, png: Path) -> dict:
    """Redraw the roofline PNG of a saved suite result (``.json`` or ``.json.gz``).

    Example:
        >>> r = RESULTS / "suite_r3w_h200_2026-11-30.json"
        >>> replot(r, Path("r3w.png"))["path"]                  # doctest: +SKIP
        'r3w.png'
    """
    from .report import roofline_png

    data = Path(result).read_bytes()
    doc = json.loads(gzip.decompress(data) if Path(result).suffix == ".gz" else data)
    nominal, _ = nominal_for(doc["env"])
    done = [c for c in doc["cases"] if c.get("status") == "ok"]
    return roofline_png(done, doc["env"], nominal.gpu, png)


def _list(ns: argparse.Namespace, preset: str, backend: str) -> int:
    cases = build_group_cases(ns.groups, preset)
    for g in ns.groups:
        print(f"{g}: {GROUPS[g].description}")
        for c in cases[g]:
            w = c.work
            print(f"  {c.id:<48} {w.flops / 1e9:>12.3f} GFLOP {w.bytes / 1e6:>10.1f} MB")
    # the plan of a GPU run for the GPU presets (on this machine or not)
    env = {"backend": "gpu" if preset != "tiny" else backend, "gpu": "NVIDIA H200"} \
        if preset != "tiny" else env_info(backend, init_gpu=False)
    previous = previous_figures(load_results([RESULTS]), gpu_slug(env), gpu_slug)
    print(_plan_line(plan(ns, env["backend"], cases, previous)))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the suite with ``argv`` (the command line by default); 0 when it ran.

    Example:
        >>> main(["--dry-run", "--only", "compile", "--out", "/tmp/s.json"])  # doctest: +SKIP
        0
    """
    ns = parse_args(argv)
    if ns.replot:
        png = Path(ns.png) if ns.png else Path(ns.replot).with_suffix(".png")
        info = replot(Path(ns.replot), png)
        print(f"wrote {info['path']}" if "path" in info else
              f"no roofline: {info.get('error')}")
        return 0 if "path" in info else 1
    if ns.backend:
        os.environ["TILELAB_BACKEND"] = ns.backend
    from tilelab.runtime.device import backend as get_backend

    backend = get_backend()
    if ns.rounds is None:
        ns.rounds = 3 if backend == "gpu" else 1
    preset = _preset(ns, backend)
    if ns.list:
        return _list(ns, preset, backend)
    if ns.child:
        return child_main(ns, backend, preset)
    return _parent(ns, backend, preset)


def _new_doc(ns: argparse.Namespace, backend: str, preset: str, isolate: bool) -> dict:
    env = env_info(backend, init_gpu=not isolate)   # children own the GPU when isolated
    _, nominal_desc = nominal_for(env)
    return {
        "schema": SCHEMA, "env": env, "nominal": nominal_desc,
        "run": {"argv": ns.argv, "preset": preset, "groups": ns.groups,
                "budget_s": ns.budget_s, "isolated": isolate,
                "torch_baselines": not ns.no_torch, "tuning": not ns.no_tune,
                "timing": {"method": "tl.bench: CUDA events on tilelab's stream (host clock "
                                     "on the CPU), L2 flushed before every timed call, "
                                     "median of up to --rep calls after warm-up; library "
                                     "functions called with sync=False into a "
                                     "preallocated out=",
                           "max_rep": ns.rep, "max_warmup": ns.warmup, "rounds": ns.rounds,
                           "seed": ns.seed}},
        "groups": {}, "targets": {}, "summary": {}, "kernels": {}, "cases": []}


def _skip_group(name: str, cases: list, why: str) -> tuple[list[dict], dict | None]:
    from .engine import _skipped

    res = {"status": "skipped", "reason": why} if GROUPS[name].func is not None else None
    print(f"[{name}] skipped: {why}", flush=True)
    return [_skipped(c, why) for c in cases], res


def _run_group(ns, backend, preset, name, cases, doc, done, t0, isolate, flush) -> None:
    group = GROUPS[name]
    planned = doc["run"]["plan"]["groups"]
    now = time.monotonic()
    window = wall_window(ns.groups, name, now, t0 + ns.wall_s - FINISH_S, planned)
    if backend not in group.backends:
        results, result = _skip_group(name, cases, f"measures the {' or '.join(group.backends)} "
                                      f"backend only (this run: {backend})")
    elif window < MIN_GROUP_S:
        results, result = _skip_group(name, cases, f"wall-clock limit reached (--wall-s "
                                      f"{ns.wall_s:.0f}; {max(window, 0):.0f} s left for it)")
    else:
        # cases stop starting at their budget share, or early enough for the function
        case_end = now + max(0.0, window - (planned.get(name, 0.0) - _case_plan(doc, name)))
        stop_at = min(deadline(ns.groups, name, t0, ns.budget_s), case_end) if cases else now
        results, result = (_group_isolated if isolate else _group_here)(
            ns, backend, preset, name, cases, doc, stop_at, t0, window, flush)
    done.extend(results)
    counts: dict[str, int] = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    doc["groups"][name] = {"description": group.description, "cases": len(results),
                           "status_counts": counts, "result": result}
    flush()


def _case_plan(doc: dict, name: str) -> float:
    return doc["run"]["plan"].get("case_s", {}).get(name, 0.0)


def _group_isolated(ns, backend, preset, name, cases, doc, stop_at, t0, window, flush):
    share = max(0.0, stop_at - time.monotonic())
    left = max(0.0, t0 + ns.budget_s - time.monotonic())
    # the child stops starting cases at its share; past twice that it is killed, and
    # never later than the group's wall-clock window
    hard = min(left + 60.0, 2.0 * share + 90.0) if cases else 0.0
    if GROUPS[name].func is not None:
        hard += 420.0 if not ns.quick else 240.0
    results, child = run_isolated(ns, name, share, min(hard, window), cases, preset)
    if child.get("kernels"):
        doc["kernels"] = child["kernels"]
    if child.get("env"):   # the child saw the GPU through CUDA: fuller facts
        doc["env"].update(child["env"])
    return results, child.get("result")


def _group_here(ns, backend, preset, name, cases, doc, stop_at, t0, window, flush):
    def sink(results: list[dict], registry: Any) -> None:
        flush(results)
    results, registry = run_in_process(ns, backend, cases, stop_at, sink)
    if cases:
        doc["kernels"] = registry.report()
    result = run_function(name, context_of(ns, backend)) if GROUPS[name].func else None
    return results, result


def _parent(ns: argparse.Namespace, backend: str, preset: str) -> int:
    from .report import DEFAULT_TARGETS, check_targets, roofline_png, summarize, table

    t0 = time.monotonic()
    isolate = ns.isolate if ns.isolate is not None else backend == "gpu"
    doc = _new_doc(ns, backend, preset, isolate)
    date = doc["env"]["date"][:10]
    out = Path(ns.out) if ns.out else RESULTS / f"suite_{gpu_slug(doc['env'])}_{date}.json"
    png = Path(ns.png) if ns.png else out.with_name(out.stem + "_roofline.png")
    targets = json.loads(Path(ns.targets).read_text()) if ns.targets else DEFAULT_TARGETS
    previous = _previous(ns, doc["env"], out)
    cases = build_group_cases(ns.groups, preset)
    doc["run"]["plan"] = plan(ns, backend, cases, previous or {})
    doc["run"]["wall_s"] = ns.wall_s
    print(f"tilelab suite: {doc['env']['gpu']} ({backend}), preset {preset}, groups "
          f"{','.join(ns.groups)}, case budget {ns.budget_s:.0f}s, wall limit "
          f"{ns.wall_s:.0f}s, {'one process per group' if isolate else 'in process'}",
          flush=True)
    print(_plan_line(doc["run"]["plan"]), flush=True)
    if backend == "cpu":
        print("CPU backend: tiny sizes on the interpreter, configs untuned (library "
              "defaults); the times say nothing about a GPU", flush=True)
    done: list[dict] = []

    def flush(extra: list[dict] | None = None) -> None:
        doc["cases"] = done + (extra or [])
        write_json(out, doc)

    for name in ns.groups:
        _run_group(ns, backend, preset, name, cases[name], doc, done, t0, isolate, flush)
    if not doc["kernels"] and any(cases[g] for g in case_groups() if g in ns.groups):
        doc["kernels"] = _kernels_report(ns)
    nominal, doc["nominal"] = nominal_for(doc["env"])
    doc["summary"] = summarize(done)
    doc["targets"] = check_targets(doc["summary"], targets)
    if previous is not None:
        doc["comparison"] = compare(done, previous)
        for c in done:
            c["vs_previous"] = doc["comparison"]["per_case"].get(c["id"])
    doc["roofline"] = roofline_png(done, doc["env"], nominal.gpu, png) if done else \
        {"error": "no cases ran"}
    doc["run"]["elapsed_s"] = time.monotonic() - t0
    write_json(out, doc)
    print(f"\nwrote {out}" + (f" and {png}" if "path" in doc["roofline"] else
                             f" (no roofline: {doc['roofline'].get('error')})"))
    print()
    print(_groups_table(doc["groups"]))
    if done:
        print()
        # the table comes last
        print(table(done, doc["summary"], doc["targets"], doc.get("comparison")), flush=True)
    return 0


def _previous(ns: argparse.Namespace, env: dict, out: Path) -> dict | None:
    """Previous figures of this device per case (None with ``--no-compare``)."""
    if ns.no_compare:
        return None
    where = [Path(p) for p in ns.compare_with] if ns.compare_with else [RESULTS]
    return previous_figures(load_results(where, exclude=[out]), gpu_slug(env), gpu_slug)


def _plan_line(p: dict) -> str:
    parts = ", ".join(f"{g} ~{s:.0f}s" for g, s in p["groups"].items())
    return (f"plan: {parts}; ~{p['total_s']:.0f}s in all with the finish (case times from "
            f"previous results for {p['cases_with_previous_times']} of {p['cases']} cases)")


def _kernels_report(ns: argparse.Namespace) -> dict:
    try:
        from .kernels import Registry

        return Registry(ns.overrides, tour=not ns.no_tour, tune=not ns.no_tune,
                        kernel_package=ns.kernel_package).report()
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}


def _groups_table(groups: dict) -> str:
    lines = [f"{'group':<10} {'cases':>5}  {'case statuses':<28} function"]
    for name, g in groups.items():
        counts = ", ".join(f"{k} {v}" for k, v in sorted(g["status_counts"].items())) or "-"
        res = g.get("result")
        fn = "-" if res is None else res.get("status", "?")
        if res is not None and res.get("status") != "ok":
            fn += f" ({str(res.get('reason') or res.get('error') or '')[:70]})"
        lines.append(f"{name:<10} {g['cases']:>5}  {counts:<28} {fn}")
    return "\n".join(lines)


def cli() -> int:
    """The console entry (``python -m benchmarks``): :func:`main` on ``sys.argv``."""
    from tilelab.perf.autotune import AutotuneWarning

    # the JSON records each function's tuning origin ('untuned' on the CPU backend)
    warnings.simplefilter("ignore", AutotuneWarning)
    return main()

