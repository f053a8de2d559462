"""The suite's registry, its shared helpers and its CPU dry run: every group is listed
in one table and runs (or says why not) through the one entry point."""
from __future__ import annotations

import doctest
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from benchmarks import common
from benchmarks.suite import cli as suite
from benchmarks.suite import engine, groups
from benchmarks.common import Context, rel_err, rotated, time_rounds, write_json
from benchmarks.suite.groups import GROUPS, RUN_ORDER, Group, run_decode_script
from support.backends import cpu_backend_private_cache  # noqa: F401 (autouse fixture)

ROOT = Path(suite.__file__).resolve().parents[2]

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def test_the_table_names_the_eight_groups_in_run_order():
    assert RUN_ORDER == ("runtime", "compile", "lab", "torch", "memory", "decode", "gemm",
                         "attention")
    for name, g in GROUPS.items():
        assert isinstance(g, Group) and g.name == name and len(g.description) > 20
        assert g.cases is not None or g.func is not None, name
    assert [n for n in RUN_ORDER if GROUPS[n].cases] == ["memory", "decode", "gemm",
                                                        "attention"]
    assert {n for n in RUN_ORDER if GROUPS[n].func} == {"runtime", "compile", "lab",
                                                       "torch", "memory", "decode"}


def test_unknown_groups_are_refused_with_the_choices(capsys):
    with pytest.raises(SystemExit):
        suite.parse_args(["--only", "gemm,speed"])
    err = capsys.readouterr().err
    assert "unknown group(s) speed" in err and "runtime, compile, lab, torch, memory" in err


def test_dry_run_means_the_cpu_backend_quick_and_in_process():
    ns = suite.parse_args(["--dry-run"])
    assert (ns.backend, ns.quick, ns.isolate) == ("cpu", True, False)
    assert ns.groups == list(RUN_ORDER)


def test_gpu_only_groups_say_so_on_the_cpu():
    ctx = Context(backend="cpu", quick=True, options={"ceilings": True,
                                                      "decode_attention": True})
    assert engine.run_function("runtime", ctx)["reason"].startswith("needs the GPU backend")
    assert engine.run_function("memory", ctx)["status"] == "skipped"
    off = engine.run_function("memory", Context(backend="cpu"))
    assert "--ceilings" in off["reason"]


def test_a_group_that_raises_is_reported_not_raised(monkeypatch):
    def boom(ctx):
        raise RuntimeError("device lost")
    monkeypatch.setitem(GROUPS, "runtime", Group("runtime", "a broken group", func=boom))
    res = engine.run_function("runtime", Context(backend="cpu"))
    assert res["status"] == "error" and res["error"] == "RuntimeError: device lost"
    assert "boom" in res["traceback"]


def test_decode_script_missing_failing_and_present(tmp_path, monkeypatch):
    ctx = Context(backend="cpu", quick=True, rounds=1, rep=2)
    missing = run_decode_script(ctx, module="benchmarks_fake_absent.decode")
    assert missing["status"] == "missing" and "does not exist" in missing["reason"]
    pkg = tmp_path / "fakebench"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "broken.py").write_text("import no_such_module_here\n")
    (pkg / "good.py").write_text(textwrap.dedent("""
        def run(quick=False, backend="gpu", other=None):
            return {"quick": quick, "backend": backend, "tokens_per_s": 12.5}
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    broken = run_decode_script(ctx, module="fakebench.broken")
    assert broken["status"] == "error" and "no_such_module_here" in broken["error"]
    good = run_decode_script(ctx, module="fakebench.good")
    assert good == {"quick": True, "backend": "cpu", "tokens_per_s": 12.5, "status": "ok",
                    "suite_keywords": ["backend", "quick"]}
    (pkg / "failing.py").write_text(
        "def run(dry_run=False):\n    return {'models': [{'check': {'passed': False}}]}\n")
    assert run_decode_script(ctx, module="fakebench.failing")["status"] == "wrong"


def test_decode_script_keywords_fit_the_backend_and_preset():
    from benchmarks.suite.groups import _decode_keywords

    cpu = _decode_keywords(Context(backend="cpu"))
    assert cpu["dry_run"] is True and cpu["tokens"] <= 8
    quick = _decode_keywords(Context(backend="gpu", quick=True))
    assert quick["models"] == ("8b",) and quick["compile_hf"] is False and quick["runs"] == 1
    full = _decode_keywords(Context(backend="gpu", options={"decode_full": True}))
    assert "models" not in full and "dry_run" not in full


def test_dry_run_writes_every_selected_group(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(groups, "run_decode_script",
                        lambda ctx: {"status": "missing", "reason": "no script (test)"})
    out = tmp_path / "dry.json"
    assert suite.main(["--dry-run", "--only", "runtime,memory,decode", "--no-torch",
                       "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["schema"] == suite.SCHEMA and doc["env"]["backend"] == "cpu"
    assert list(doc["groups"]) == ["runtime", "memory", "decode"]
    assert doc["groups"]["runtime"]["result"]["status"] == "skipped"
    assert doc["groups"]["memory"]["status_counts"] == {"ok": 5}
    dec = doc["groups"]["decode"]
    assert dec["status_counts"] == {"ok": 1}
    assert dec["result"]["status"] == "missing" and dec["result"]["reason"] == "no script (test)"
    printed = capsys.readouterr().out
    assert "runtime        0  -" in printed and "skipped (needs the GPU backend" in printed


@pytest.mark.slow
def test_compile_group_times_the_warm_cli_against_python_start():
    res = engine.run_function("compile", Context(backend="cpu", quick=True,
                                                 options={"compile_runs": 1}))
    assert res["status"] == "ok", res
    assert res["archs"] == ["sm_90"] and len(res["cold"]) == 4
    assert all(c["cubin_bytes"] > 0 and not c["cache_hit"] for c in res["cold"].values())
    assert res["warm_new_process"]["status"] == "ok"
    cli = res["cli"]
    assert cli["status"] == "ok" and cli["target_s"] == 0.2
    assert cli["median_s"] > cli["python_start_median_s"] > 0
    assert cli["target_met"] == (cli["median_s"] < 0.2)
    assert "compile" in cli["command"] and "::add" in cli["command"]


@pytest.mark.subprocess
def test_the_entry_point_runs_as_a_module(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "--list", "--only", "memory"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("memory: ") and "memory/softmax" in proc.stdout


def test_rounds_rotate_and_give_one_median_per_round():
    seen: list[str] = []
    calls = {n: (lambda n=n: seen.append(n)) for n in ("torch", "library", "raw")}
    times = time_rounds(calls, rounds=3, rep=2, warmup=1)
    assert {n: len(t) for n, t in times.items()} == {"torch": 3, "library": 3, "raw": 3}
    order = [n for i, n in enumerate(seen) if i == 0 or seen[i - 1] != n]
    assert order == ["torch", "library", "raw", "library", "raw", "torch",
                     "raw", "torch", "library"]
    assert rotated([], 3) == []


def test_rel_err_gates_unwritten_and_misshapen_outputs():
    import numpy as np

    assert rel_err(np.ones(4), np.ones(4)) == (0.0, "")
    err, why = rel_err(np.full(4, np.nan), np.ones(4))
    assert err == float("inf") and "unwritten" in why
    assert rel_err(np.ones(3), np.ones(4))[1] == "output shape (3,), expected (4,)"
    assert rel_err(np.array([1.0, 2.0]), np.array([1.0, 2.1]))[0] == pytest.approx(
        0.1 / np.linalg.norm([1.0, 2.1]))


def test_json_is_written_atomically_without_nan(tmp_path):
    path = tmp_path / "deep" / "r.json"
    write_json(path, {"x": float("inf"), "y": [1, (2, 3)], "z": object})
    doc = json.loads(path.read_text())
    assert doc["x"] is None and doc["y"] == [1, [2, 3]] and "object" in doc["z"]
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]


def test_env_names_the_machine_and_versions():
    env = common.env_info("cpu")
    assert env["backend"] == "cpu" and env["date"].endswith("+00:00")
    assert {"tilelab", "cuda-tile", "numpy"} <= set(env["versions"])
    assert env["python"] and env["cpus"] and "version" in env["toolchain"]


@pytest.mark.parametrize("module", [common, groups, engine, suite])
def test_docstring_examples_run(module):
    res = doctest.testmod(module)
    assert res.attempted > 0 and res.failed == 0


def test_the_torch_group_skips_off_the_gpu_with_its_reason():
    from benchmarks.host import torch_calls
    from benchmarks.common import Context

    out = torch_calls.run(Context(backend="cpu"))
    assert out == {"status": "skipped", "reason": "needs the GPU backend and torch with CUDA"}
    assert torch_calls.summary(out).startswith("torch: skipped")


def test_per_call_s_counts_every_call_and_syncs_each_round():
    from benchmarks.host.torch_calls import per_call_s

    calls, syncs = [], []
    s = per_call_s(lambda: calls.append(1), lambda: syncs.append(1), calls=10, rounds=3)
    assert len(calls) == 30 and len(syncs) == 6 and s > 0
    syncs.clear()
    per_call_s(lambda: None, lambda: syncs.append(1), calls=10, rounds=3, until_done=True)
    assert len(syncs) == 9          # and once more inside each timed window


def test_the_torch_groups_breakdown_splits_the_call_into_its_layers():
    from benchmarks.host.torch_calls import _breakdown

    us = {"driver_launch": 2.5, "launch_async_tilelab_tensors": 4.0,
          "launch_async_torch_tensors": 4.0, "tilelab_tensors": 6.0,
          "tilelab_torch_tensors": 7.0}
    assert _breakdown(us) == {"driver_launch": 2.5, "launch_async": 1.5,
                              "library_call": 2.0, "torch_tensors_extra": 1.0}
    assert _breakdown({"tilelab_tensors": 6.0}) is None


def test_the_torch_groups_layers_are_the_calls_own_launches():
    """On the CPU backend the layers are the two calls' launches (no driver launch: that
    needs the GPU's native module); each runs and writes the call's output."""
    torch = pytest.importorskip("torch")
    import tilelab as tl
    from benchmarks.host.torch_calls import _layers
    from tilelab.kernels import _host, add
    from tilelab.kernels.elementwise import _BINARY
    from tilelab.runtime.launch.driver import DRIVER

    _host.clear_caches()
    x, y, out = torch.ones(256), torch.full((256,), 2.0), torch.empty(256)
    tx, ty = tl.ones(256, device="cpu"), tl.full(256, 3.0, device="cpu")
    tout = tl.empty(256, device="cpu")
    for _ in range(2):
        add(x, y, out=out)
        add(tx, ty, out=tout)
    layers = _layers(_BINARY, DRIVER)
    assert sorted(layers) == ["launch_async_tilelab_tensors", "launch_async_torch_tensors"]
    out.zero_()
    layers["launch_async_torch_tensors"]().wait()
    layers["launch_async_tilelab_tensors"]().wait()
    assert (out == 3).all() and (tout.numpy() == 4).all()
    _host.clear_caches()


@pytest.mark.toolchain
def test_the_lab_group_times_warm_cells_against_its_target():
    """The lab group through the engine: both cells ran cold then warm in a real IPython
    shell, and each reports its warm median against the 0.5 s target."""
    pytest.importorskip("IPython")
    r = engine.run_function("lab", Context(backend="cpu", quick=True))
    assert r["status"] == "ok" and set(r["cells"]) == {"vector_add", "gemm"}, r
    for cell in r["cells"].values():
        assert len(cell["warm_s"]) == 3 and cell["cold_s"] > 0
        assert cell["target_met"] == (cell["warm_median_s"] < 0.5)


def test_a_group_of_other_backends_is_neither_planned_nor_started():
    """The lab group measures the CPU backend: a GPU run plans no time for it (not even a
    child's start) and skips it."""
    import argparse

    ns = argparse.Namespace(groups=["lab"], ceilings=False, isolate=None,
                            decode_attention=False, decode_full=False, no_torch=False,
                            no_compile_baseline=False)
    assert GROUPS["lab"].backends == ("cpu",)
    assert engine.plan(ns, "gpu", {"lab": []}, {})["groups"] == {"lab": 0.0}
    assert engine.plan(ns, "cpu", {"lab": []}, {})["groups"] == {"lab": 0.0 + 0}
