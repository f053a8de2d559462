"""The suite against its previous results (per-case regressions over 2%), the
torch.compile baseline of the memory cases, and the wall-clock plan of a run."""
from __future__ import annotations

import argparse
import doctest
import gzip
import json
from pathlib import Path

import pytest

from benchmarks.suite import cli as suite
from benchmarks.suite import compare as suite_compare
from benchmarks.suite import engine
from benchmarks.suite import report as suite_report
from benchmarks.suite import run as suite_run
from benchmarks.common import gpu_slug
from benchmarks.suite.cases import OPS, build_cases
from benchmarks.suite.compare import (compare, describe_change, load_results,
                                      previous_figures)
from benchmarks.suite.data import make_arrays
from benchmarks.suite.kernels import Registry
from benchmarks.suite.report import check_targets, summarize, table
from benchmarks.suite.run import RunOptions, compile_variant, run_case
from support.backends import cpu_backend_private_cache  # noqa: F401 (autouse fixture)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def result_doc(date: str, medians: dict[str, dict[str, float]], gpu: str = "NVIDIA H200",
               elapsed: float = 1.5) -> dict:
    """A suite result document with the given tilelab/torch medians per case id."""
    return {"schema": "tilelab-suite/2", "env": {"backend": "gpu", "gpu": gpu, "date": date},
            "cases": [{"id": cid, "status": "ok", "elapsed_s": elapsed,
                       "variants": {n: {"median_s": s} for n, s in meds.items()}}
                      for cid, meds in medians.items()]}


def write(path: Path, doc: dict) -> Path:
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


# --------------------------------------------------------------------------- comparison

def test_the_newest_file_per_case_of_the_same_device_is_the_previous_figure(tmp_path):
    write(tmp_path / "suite_full_h200.json", result_doc(
        "2026-11-30T19:38:02+00:00", {"memory/a": {"tilelab": 1.0}, "gemm/b": {"tilelab": 2.0}}))
    write(tmp_path / "suite_memory_h200.json.gz", result_doc(
        "2026-11-30T19:47:50+00:00", {"memory/a": {"tilelab": 1.1, "torch": 3.0}}))
    write(tmp_path / "suite_b200.json", result_doc(
        "2026-12-01T00:00:00+00:00", {"gemm/b": {"tilelab": 0.5}}, gpu="NVIDIA B200"))
    (tmp_path / "suite_broken.json").write_text("{not json")
    (tmp_path / "suite_other.json").write_text(json.dumps({"schema": "something-else"}))
    own = write(tmp_path / "suite_this_run.json", result_doc(
        "2026-12-02T00:00:00+00:00", {"memory/a": {"tilelab": 9.0}}))
    docs = load_results([tmp_path], exclude=[own])
    assert [p.name for p, _ in docs] == ["suite_full_h200.json", "suite_memory_h200.json.gz",
                                         "suite_b200.json"]
    prev = previous_figures(docs, "h200", gpu_slug)
    assert prev["memory/a"]["file"] == "suite_memory_h200.json.gz"
    assert prev["memory/a"]["medians"] == {"tilelab": 1.1, "torch": 3.0}
    assert prev["gemm/b"]["medians"]["tilelab"] == 2.0        # not the B200's figure
    assert prev["gemm/b"]["elapsed_s"] == 1.5


def test_regressions_over_two_percent_are_flagged_and_missing_figures_are_new():
    prev = {cid: {"file": "old.json", "date": "d", "medians": {"tilelab": 100e-6,
                                                                "torch": 200e-6}}
            for cid in ("slow", "edge", "fast", "same", "unmeasured")}
    new = {"slow": 103e-6, "edge": 101.9e-6, "fast": 97e-6, "same": 99e-6, "fresh": 5e-6}
    cases = [{"id": cid, "variants": {"tilelab": {"median_s": s}, "torch": {"median_s": 210e-6}}}
             for cid, s in new.items()]
    cases.append({"id": "unmeasured", "variants": {"tilelab": {"status": "wrong"}}})
    cmp = compare(cases, prev)
    per = cmp["per_case"]
    assert {k: e["status"] for k, e in per.items()} == {
        "slow": "regression", "edge": "same", "fast": "faster", "same": "same",
        "fresh": "new", "unmeasured": "not measured"}
    assert per["slow"]["change"] == pytest.approx(0.03)
    assert per["slow"]["old_s"] == 100e-6 and per["slow"]["new_s"] == 103e-6
    assert per["slow"]["baselines"] == {"torch": pytest.approx(0.05)}
    assert cmp["regressions"] == ["slow"] and cmp["files"] == ["old.json"]
    assert cmp["counts"] == {"regression": 1, "same": 2, "faster": 1, "new": 1,
                             "not measured": 1}
    assert describe_change(per["slow"]) == "+3.0% !"
    assert describe_change(per["fast"]) == "-3.0%"
    assert describe_change(per["fresh"]) == "new"
    assert describe_change(per["unmeasured"]) == "-"


def test_the_printed_table_shows_the_change_and_names_each_regression():
    prev = {"memory/add/x": {"file": "old.json", "date": "d",
                             "medians": {"tilelab": 100e-6, "torch": 100e-6}}}
    case = {"id": "memory/add/x", "group": "memory", "op": "add", "status": "ok",
            "metric": "bandwidth",
            "variants": {"tilelab": {"median_s": 110e-6}, "torch": {"median_s": 101e-6}},
            "figures": {"tilelab_vs_torch": 101 / 110, "tilelab_vs_compile": 1.25,
                        "tilelab_byte_per_s": 4e12, "tilelab_fraction_of_bandwidth": 0.83,
                        "tilelab_fraction_of_copy": 0.951}}
    cmp = compare([case], prev)
    text = table([case], summarize([case]), check_targets(summarize([case])), cmp)
    row = next(line for line in text.splitlines() if line.startswith("memory/add/x"))
    assert "+10.0% !" in row and " 1.25 " in row and "95.1% of copy" in row
    assert "REGRESSION memory/add/x: 100.0 -> 110.0 us (+10.0%; baselines in the same " \
           "run: torch +1.0%)" in text
    assert "against the previous results (old.json): regression 1" in text


# --------------------------------------------------------------------------- torch.compile

def test_memory_ops_compile_a_pure_function_that_matches_the_reference():
    torch = pytest.importorskip("torch")
    from benchmarks.suite.data import XP

    for case in build_cases("tiny", ["memory"]):
        spec = OPS[case.op]
        label, fn = spec.pure(torch, case.params)
        shapes = spec.shapes(case.params)
        gen = torch.Generator().manual_seed(0)
        inp = {a: torch.randn(shapes[a], generator=gen, dtype=torch.float32)
               for a in spec.args}
        ref = spec.reference(XP(torch), inp, case.params)
        assert torch.allclose(fn(*inp.values()), ref, atol=1e-5), (case.id, label)
    assert {op for op, s in OPS.items() if s.pure} == {"add", "softmax", "rmsnorm", "rope"}


def test_compile_baseline_is_skipped_on_the_cpu_with_the_reason(tmp_path):
    pytest.importorskip("torch")
    case = build_cases("tiny", ["memory"])[3]
    res = run_case(case, make_arrays("cpu"), Registry(), RunOptions(rep=2))
    assert res["status"] == "ok"
    comp = res["variants"]["compile"]
    assert comp["status"] == "skipped" and "GPU backend only" in comp["reason"]
    assert "median_s" not in comp and res["figures"]["tilelab_vs_compile"] is None
    why = summarize([res])["memory"]["compile_not_timed"]
    assert len(why) == 1 and why[0].startswith("skipped: the torch.compile baseline runs")
    off = compile_variant(case, make_arrays("cpu"), {}, enabled=False)
    assert "--no-compile-baseline" in off.skip


def test_compile_baseline_is_compiled_once_checked_and_timed(monkeypatch):
    """The wiring on the CPU: torch.compile is replaced by a recorder, the backend check
    passes, and the variant goes through the same check and rounds as the others."""
    torch = pytest.importorskip("torch")
    calls = []

    def fake_compile(fn, **kw):
        calls.append(kw)
        return fn
    monkeypatch.setattr(torch, "compile", fake_compile)
    monkeypatch.setattr(suite_run, "_compile_unavailable", lambda arrays, enabled: None)
    case = next(c for c in build_cases("tiny", ["memory"]) if c.op == "rope")
    res = run_case(case, make_arrays("cpu"), Registry(), RunOptions(rep=2, rounds=2))
    assert calls == [{"mode": "default", "dynamic": False, "fullgraph": True}]
    comp = res["variants"]["compile"]
    assert comp["status"] == "ok" and comp["rel_err"] < case.tol
    assert len(comp["round_medians_s"]) == 2 and comp["median_s"] > 0
    assert "torch.compile (Inductor" in comp["impl"] and "eager rope" in comp["impl"]
    fig = res["figures"]
    assert fig["tilelab_vs_compile"] == pytest.approx(
        comp["median_s"] / res["variants"]["tilelab"]["median_s"])
    assert fig["compile_fraction_of_copy"] == pytest.approx(
        comp["byte_per_s"] / fig["copy_byte_per_s"])
    s = summarize([res])["memory"]
    assert s["min_vs_compile"] == pytest.approx(fig["tilelab_vs_compile"])
    assert s["per_case"][case.id]["vs_compile"] == pytest.approx(fig["tilelab_vs_compile"])


def test_a_compile_baseline_that_computes_wrong_is_not_timed(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: (lambda *a: fn(*a) * 2))
    monkeypatch.setattr(suite_run, "_compile_unavailable", lambda arrays, enabled: None)
    case = next(c for c in build_cases("tiny", ["memory"]) if c.op == "softmax")
    res = run_case(case, make_arrays("cpu"), Registry(), RunOptions(rep=2))
    comp = res["variants"]["compile"]
    assert comp["status"] == "wrong" and "relative error" in comp["reason"]
    assert "median_s" not in comp and res["status"] == "ok"


def test_the_new_targets_read_the_compile_and_copy_figures():
    t = check_targets({"memory": {"min_vs_compile": 0.98, "min_fraction_of_copy": 0.96}})
    assert t["memory_min_vs_compile"]["met"] is False
    assert t["memory_min_fraction_of_copy"]["met"] is True
    assert t["memory_min_fraction_of_copy"]["target_min"] == 0.95


# --------------------------------------------------------------------------- wall clock

def gpu_ns(**kw) -> argparse.Namespace:
    ns = suite.parse_args(["--rounds", "3"] + [a for k, v in kw.items()
                                                for a in (f"--{k.replace('_', '-')}", v)])
    ns.isolate = True
    return ns


def test_the_full_gpu_plan_fits_one_device_call():
    ns = gpu_ns()
    assert ns.wall_s == engine.WALL_S <= 540
    cases = engine.build_group_cases(ns.groups, "full")
    prev = previous_figures(load_results([suite.RESULTS]), "h200", gpu_slug)
    p = engine.plan(ns, "gpu", cases, prev)
    assert set(p["groups"]) == set(ns.groups)
    assert p["cases"] == 44 and p["total_s"] < ns.wall_s
    # the memory cases carry their torch.compile baselines
    assert p["case_s"]["memory"] >= 5 * engine.COMPILE_BASELINE_S


def test_wall_window_leaves_later_groups_half_their_plan():
    planned = {"a": 100.0, "b": 60.0, "c": 40.0}
    assert engine.wall_window(["a", "b", "c"], "a", 0.0, 300.0, planned) == 250.0
    assert engine.wall_window(["a", "b", "c"], "c", 280.0, 300.0, planned) == 20.0


def test_groups_past_the_wall_clock_limit_are_skipped_not_run(tmp_path, monkeypatch):
    from benchmarks.suite import groups

    monkeypatch.setattr(groups, "run_decode_script",
                        lambda ctx: {"status": "skipped", "reason": "stubbed"})
    out = tmp_path / "s.json"
    assert suite.main(["--dry-run", "--only", "memory,decode", "--no-torch", "--wall-s",
                       "1", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["run"]["wall_s"] == 1.0
    for g in ("memory", "decode"):
        assert doc["groups"][g]["status_counts"] == {"skipped": len(
            [c for c in doc["cases"] if c["group"] == g])}
    assert all("wall-clock limit reached (--wall-s 1" in c["reason"] for c in doc["cases"])
    assert doc["groups"]["decode"]["result"]["status"] == "skipped"


def test_dry_run_compares_with_given_results(tmp_path):
    old = write(tmp_path / "suite_cpu_old.json", {
        **result_doc("2026-11-01T00:00:00+00:00",
                     {"memory/add/float32/n4096": {"tilelab": 1e-9}}),
        "env": {"backend": "cpu", "gpu": "cpu (interpreter)", "date": "2026-11-01"}})
    out = tmp_path / "new.json"
    assert suite.main(["--dry-run", "--only", "memory", "--no-torch", "--compare-with",
                       str(old), "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    cmp = doc["comparison"]
    assert cmp["files"] == ["suite_cpu_old.json"] and cmp["threshold"] == 0.02
    assert cmp["per_case"]["memory/add/float32/n4096"]["status"] == "regression"
    assert cmp["counts"]["new"] == 4
    case = next(c for c in doc["cases"] if c["id"] == "memory/add/float32/n4096")
    assert case["vs_previous"]["old_s"] == 1e-9
    assert suite.main(["--dry-run", "--only", "memory", "--no-torch", "--no-compare",
                       "--out", str(out)]) == 0
    assert "comparison" not in json.loads(out.read_text())



@pytest.mark.parametrize("module,name", [(suite_compare, None), (suite_run, "compile_variant"),
                                         (suite_report, "table"), (engine, "plan"),
                                         (engine, "wall_window")])
def test_docstring_examples_run(module, name):
    obj = module if name is None else getattr(module, name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for t in doctest.DocTestFinder(recurse=name is None).find(obj, module=module,
                                                              globs=vars(module)):
        runner.run(t)
    res = runner.summarize(verbose=False)
    assert res.attempted > 0 and res.failed == 0


@pytest.mark.subprocess
def test_an_overrunning_child_is_killed_with_what_it_started(tmp_path):
    import os
    import sys
    import time

    pid_file = tmp_path / "grandchild.pid"
    script = ("import subprocess, sys, time\n"
              "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
              f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
              "sys.stderr.write('working\\n'); sys.stderr.flush()\n"
              "time.sleep(120)\n")
    t0 = time.monotonic()
    code, err = engine._run_child([sys.executable, "-c", script], dict(os.environ), 3.0)
    assert code is None and time.monotonic() - t0 < 30
    assert "working" in err
    grandchild = int(pid_file.read_text())
    stat = Path(f"/proc/{grandchild}/stat")
    for _ in range(50):                       # gone, or a zombie no one has reaped yet
        try:
            if stat.read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                break
        except (FileNotFoundError, ProcessLookupError):
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"process {grandchild} started by the child is still running")
    assert engine._run_child([sys.executable, "-c", "import sys; sys.exit(3)"],
                             dict(os.environ), 30.0) == (3, "")
