"""Running groups: a group's cases through the case engine and its function, in this
process or in a child process per group, within a time budget.

Why a child per group on the GPU: a sticky CUDA error or a hang in one group cannot take
the others down; a child that dies or overruns is killed and its finished cases kept.

Example:
    >>> from benchmarks.suite.cases import build_cases
    >>> _skipped(build_cases("tiny", ["memory"])[0], "why")["status"]
    'skipped'
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from ..common import REPO, Context, write_json
from .groups import GROUPS, case_groups
from .cases import Case

__all__ = ["context_of", "run_in_process", "run_isolated", "run_function", "deadline",
           "child_main", "build_group_cases", "plan", "wall_window", "WALL_S", "FINISH_S"]

#: the default wall-clock limit of a whole run on the GPU: one device call of under
#: ten minutes (560 s) with the interpreter's start and the copy of the results around it
WALL_S = 540.0
#: what the run keeps after its last group: the summary, the comparison, the roofline
#: PNG and the printed tables
FINISH_S = 20.0
#: a child process's start (python, torch, a CUDA context) and its results' read-back
CHILD_START_S = 8.0
#: a case without a previous time (its first run on the device)
DEFAULT_CASE_S = 3.0
#: the torch.compile baseline of one memory case: Inductor's compile (its first one in a
#: process also imports the compiler) and its timing
COMPILE_BASELINE_S = 12.0
#: what the group options add to a group's function on an H200: option -> (group, seconds)
OPTION_S = {"ceilings": ("memory", 60.0), "decode_attention": ("decode", 60.0),
            "decode_full": ("decode", 300.0)}
#: the least time a group is started with; below it the group is reported skipped
MIN_GROUP_S = 10.0


def context_of(ns: argparse.Namespace, backend: str) -> Context:
    """The :class:`Context` a group function gets from the parsed options."""
    return Context(backend=backend, quick=bool(ns.quick), rounds=ns.rounds,
                   rep=ns.rep if backend == "gpu" else min(ns.rep, 3),
                   options={"ceilings": ns.ceilings, "decode_attention": ns.decode_attention,
                            "decode_full": ns.decode_full, "compile_runs": ns.compile_runs})


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


def run_function(name: str, ctx: Context) -> dict[str, Any]:
    """The group's function, its failure turned into ``status: error`` (with where)."""
    t0 = time.monotonic()
    try:
        res = GROUPS[name].func(ctx)
    except Exception as e:
        res = {"status": "error", "error": f"{type(e).__name__}: {e}",
               "traceback": traceback.format_exc()[-3000:]}
    res = dict(res, elapsed_s=time.monotonic() - t0)
    print(f"[{name}] {res['status']} ({res['elapsed_s']:.1f}s)"
          + (f": {res.get('reason') or res.get('error')}" if res["status"] != "ok" else ""),
          flush=True)
    return res


def run_in_process(ns: argparse.Namespace, backend: str, cases: list[Case],
                   stop_at: float, sink: Any) -> tuple[list[dict], Any]:
    """Run ``cases`` here until ``stop_at`` (time.monotonic); ``sink(results, registry)``
    is called after every case. Returns (results, registry)."""
    from ..common import env_info, nominal_for
    from .data import make_arrays
    from .kernels import Registry
    from .run import RunOptions, run_case

    registry = Registry(ns.overrides, tour=not ns.no_tour, tune=not ns.no_tune,
                        kernel_package=ns.kernel_package)
    target = ns.target_s if ns.target_s is not None else (0.3 if ns.quick else 0.5)
    if backend == "cpu":
        target = min(target, 0.05)
    opts = RunOptions(rep=ns.rep if backend == "gpu" else min(ns.rep, 3),
                      warmup=ns.warmup if backend == "gpu" else 1, target_s=target,
                      rounds=ns.rounds, seed=ns.seed,
                      compile_baseline=not ns.no_compile_baseline)
    results: list[dict] = []
    fatal = None
    if cases:
        try:
            arrays = make_arrays(backend, use_torch=not ns.no_torch)
            nominal, _ = nominal_for(env_info(backend))
        except Exception as e:   # no torch on the GPU, a broken driver: say so per case
            fatal = f"{type(e).__name__}: {e}"
    for i, case in enumerate(cases, 1):
        if fatal:
            res = dict(_skipped(case, f"not run: {fatal}"), status="error")
        elif time.monotonic() > stop_at:
            res = _skipped(case, "time budget spent (--budget-s)")
        else:
            res = run_case(case, arrays, registry, opts, nominal)
            fatal = res.get("fatal")
        results.append(res)
        _progress(i, len(cases), res)
        sink(results, registry)
    return results, registry


def _child_command(ns: argparse.Namespace, group: str, seconds: float, out: Path,
                   preset: str) -> list[str]:
    cmd = [sys.executable, "-m", "benchmarks", "--child", "--only", group,
           "--sizes", preset, "--budget-s", f"{max(seconds, 1.0):.1f}", "--out", str(out),
           "--rep", str(ns.rep), "--warmup", str(ns.warmup), "--rounds", str(ns.rounds),
           "--seed", str(ns.seed), "--kernel-package", ns.kernel_package]
    if ns.target_s is not None:
        cmd += ["--target-s", str(ns.target_s)]
    if ns.compile_runs:
        cmd += ["--compile-runs", str(ns.compile_runs)]
    for item in ns.kernel:
        cmd += ["--kernel", item]
    for flag in ("quick", "no_torch", "no_tour", "no_tune", "ceilings", "decode_attention",
                 "decode_full", "no_compile_baseline"):
        if getattr(ns, flag):
            cmd.append("--" + flag.replace("_", "-"))
    return cmd


def _run_child(cmd: list[str], env: dict, hard_s: float) -> tuple[int | None, str]:
    """Run the child in its own process group; past ``hard_s`` the whole group (the
    child and what it started: compile workers, timed CLI runs) is killed, so nothing of
    it outlives the run. Returns (exit status or None when killed, its stderr)."""
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env,
                            start_new_session=True)
    try:
        _, err = proc.communicate(timeout=max(hard_s, 1.0))
        return proc.returncode, err or ""
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:      # a process of its own session may still hold the pipe: stop reading
            _, err = proc.communicate(timeout=10.0)
        except subprocess.TimeoutExpired:
            err = ""
        return None, err or ""


def run_isolated(ns: argparse.Namespace, group: str, seconds: float, hard_s: float,
                 cases: list[Case], preset: str) -> tuple[list[dict], dict]:
    """Run one group in a child process; returns its case results (filling in cases it
    never ran) and what else the child reported (``kernels``, ``env``, ``result``)."""
    with tempfile.TemporaryDirectory(prefix="tilelab-suite-") as tmp:
        out = Path(tmp) / f"{group}.json"
        cmd = _child_command(ns, group, seconds, out, preset)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in
                                            env.get("PYTHONPATH", "").split(os.pathsep) if p])
        why = None
        returncode, stderr = _run_child(cmd, env, hard_s)
        if returncode is None:
            why = f"child process killed after {hard_s:.0f}s (time budget)"
        elif returncode != 0:
            why = f"child process exited with {returncode}: {stderr.strip()[-600:]}"
        elif stderr:
            sys.stderr.write(stderr[-4000:])
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
    extra = {k: v for k, v in (data or {}).items() if k != "cases"}
    if GROUPS[group].func is not None and "result" not in extra:
        extra["result"] = {"status": "error", "error": why or "the child reported nothing"}
    return results, extra


def deadline(groups: list[str], group: str, start: float, total: float) -> float:
    """When ``group`` must stop starting cases: its weight's share of the time left to
    the case groups still to run."""
    now = time.monotonic()
    left = start + total - now
    todo = [g for g in groups[groups.index(group):] if g in case_groups()]
    share = GROUPS[group].weight / sum(GROUPS[g].weight for g in todo) if todo else 1.0
    return now + max(0.0, left * share)


def plan(ns: argparse.Namespace, backend: str, cases: dict[str, list[Case]],
         previous: dict[str, dict]) -> dict[str, Any]:
    """The expected seconds of each group of the run: its cases' times in the previous
    results (``previous``: :func:`benchmarks.suite.compare.previous_figures`;
    :data:`DEFAULT_CASE_S` for a case never timed), the torch.compile baselines of the
    memory cases, the group function's ``func_s`` and what its options add, and a child
    process's start when isolated. On the CPU backend the functions' GPU figures do not
    apply and only the cases' previous times count.

    Example:
        >>> import argparse
        >>> ns = argparse.Namespace(groups=["runtime"], ceilings=False, isolate=False,
        ...                         decode_attention=False, decode_full=False,
        ...                         no_torch=False, no_compile_baseline=False)
        >>> plan(ns, "gpu", {"runtime": []}, {})["groups"]
        {'runtime': 60.0}
    """
    isolated = ns.isolate if ns.isolate is not None else backend == "gpu"
    out: dict[str, float] = {}
    case_s: dict[str, float] = {}
    known = 0
    for g in ns.groups:
        group, cs = GROUPS[g], cases.get(g, [])
        if backend not in group.backends:       # skipped without being started
            out[g] = case_s[g] = 0.0
            continue
        t = sum((previous.get(c.id) or {}).get("elapsed_s") or DEFAULT_CASE_S for c in cs)
        known += sum(1 for c in cs if (previous.get(c.id) or {}).get("elapsed_s"))
        if backend == "gpu" and g == "memory" and not ns.no_torch \
                and not ns.no_compile_baseline:
            t += COMPILE_BASELINE_S * len(cs)
        case_s[g] = round(t, 1)
        if backend == "gpu":
            if group.func is not None:
                t += group.func_s + sum(s for o, (og, s) in OPTION_S.items()
                                        if og == g and getattr(ns, o, False))
            if isolated:
                t += CHILD_START_S
        out[g] = round(t, 1)
    total = sum(out.values()) + FINISH_S
    return {"groups": out, "case_s": case_s, "total_s": round(total, 1),
            "cases_with_previous_times": known,
            "cases": sum(len(cases.get(g, [])) for g in ns.groups)}


def wall_window(groups: list[str], group: str, now: float, end: float,
                planned: dict[str, float]) -> float:
    """The seconds ``group`` may run before the run's wall-clock ``end`` (its finish
    already taken off): all that is left, less half the planned time of every group
    after it, so an overrunning group still leaves the later ones a start.

    Example:
        >>> wall_window(["a", "b"], "a", now=0.0, end=100.0, planned={"a": 30, "b": 40})
        80.0
    """
    later = groups[groups.index(group) + 1:]
    return end - now - sum(0.5 * planned.get(g, 0.0) for g in later)


def child_main(ns: argparse.Namespace, backend: str, preset: str) -> int:
    """``--child``: run one group here and write its results to ``--out``."""
    from ..common import env_info

    out = Path(ns.out)
    (name,) = ns.groups
    group = GROUPS[name]
    cases = sorted(group.cases(preset), key=lambda c: c.priority) if group.cases else []
    stop_at = time.monotonic() + ns.budget_s
    doc: dict[str, Any] = {"cases": []}

    def sink(results: list[dict], registry: Any) -> None:
        doc["cases"] = results
        write_json(out, doc)
    results, registry = run_in_process(ns, backend, cases, stop_at, sink)
    doc["cases"] = results
    if cases:
        doc["kernels"] = registry.report()
    if group.func is not None:
        doc["result"] = run_function(name, context_of(ns, backend))
    doc["env"] = env_info(backend)
    write_json(out, doc)
    return 0


def build_group_cases(groups: list[str], preset: str) -> dict[str, list[Case]]:
    """group -> its cases, largest problems last (a tight budget drops them first)."""
    return {g: sorted(GROUPS[g].cases(preset), key=lambda c: c.priority)
            if GROUPS[g].cases else [] for g in groups}
