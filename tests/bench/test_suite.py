"""The benchmark suite on the CPU backend: it runs, writes valid JSON with the schema,
reports missing and wrong kernels instead of crashing, and keeps to its budget."""
from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import pytest

from benchmarks.suite import cli as suite
from benchmarks.suite.cases import build_cases
from benchmarks.suite.data import make_arrays
from benchmarks.suite.kernels import Registry
from benchmarks.suite.report import check_targets, summarize
from benchmarks.suite.run import RunOptions, run_case
from support.backends import cpu_backend_private_cache  # noqa: F401 (autouse fixture)

BENCH = Path(suite.__file__).resolve().parents[1]
#: the groups with checked-and-timed cases (runtime and compile have their own tests)
CASE_GROUPS = "memory,decode,gemm,attention"

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(autouse=True)
def decode_script_stubbed(monkeypatch):
    # the decode group's script has its own tests; here the case engine is under test
    from benchmarks.suite import groups

    monkeypatch.setattr(groups, "run_decode_script",
                        lambda ctx: {"status": "skipped", "reason": "stubbed in the tests"})


def load(path: Path) -> dict:
    def no_nan(name):
        raise ValueError(f"{name} in JSON")
    return json.loads(path.read_text(), parse_constant=no_nan)


def run_suite(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "out" / "suite.json"
    only = [] if "--only" in args else ["--only", CASE_GROUPS]
    assert suite.main(["--quick", "--out", str(out), *only, *args]) == 0
    return load(out)


CASE_KEYS = {"id", "group", "op", "dtype", "params", "work", "metric", "status", "variants",
             "figures", "notes"}


def test_quick_cpu_run_writes_the_schema(tmp_path, capsys):
    try:
        import torch  # noqa: F401
        has_torch = True
    except ImportError:   # CI installs no torch: the suite then runs without baselines
        has_torch = False
    doc = run_suite(tmp_path, *([] if has_torch else ["--no-torch"]))
    assert doc["schema"] == "tilelab-suite/2"
    assert {"env", "nominal", "run", "groups", "targets", "summary", "kernels", "cases",
            "roofline"} <= set(doc)
    assert list(doc["groups"]) == ["memory", "decode", "gemm", "attention"]
    env = doc["env"]
    assert env["backend"] == "cpu" and env["date"]
    assert {"tilelab", "cuda-tile"} <= set(env["versions"])
    assert ("torch" in env["versions"]) or not has_torch
    assert "version" in env["toolchain"]
    assert doc["nominal"]["memory_bandwidth_Bps"] == 4.8e12
    assert {c["group"] for c in doc["cases"]} == {"gemm", "attention", "memory", "decode"}
    for case in doc["cases"]:
        assert CASE_KEYS <= set(case), case["id"]
        assert case["status"] in ("ok", "missing", "wrong", "error", "skipped")
        assert case["work"]["bytes"] > 0
    ok = [c for c in doc["cases"] if c["status"] == "ok"]
    assert ok, [(c["id"], c.get("error"), c["variants"]) for c in doc["cases"]]
    decode = [c for c in ok if c["group"] == "decode" and "safe_vs_raw" in c["figures"]]
    assert decode and all(c["figures"]["safe_vs_raw_like_for_like"] for c in decode)
    for case in ok:
        tlv = case["variants"]["tilelab"]
        assert tlv["median_s"] > 0 and tlv["rel_err"] <= tlv["tol"]
        if has_torch:
            assert "torch" in case["variants"] and case["figures"]["tilelab_vs_torch"] > 0
            assert case["variants"]["torch"]["timed_async"] is False
            # memory cases time a copy of their bytes with them: the copy ceiling
            assert ("copy" in case["variants"]) == (case["group"] == "memory")
            if case["group"] == "memory":
                assert case["variants"]["copy"]["status"] == "ok"
                assert case["figures"]["tilelab_fraction_of_copy"] > 0
                assert doc["summary"]["memory"]["per_case"][case["id"]]["fraction_of_copy"]
        # library functions are timed asynchronously, their host time reported apart
        assert tlv["timed_async"] is True and tlv["host_median_s"] > 0, case["id"]
    assert all(set(t) >= {"target_min", "achieved", "met", "what"}
               for t in doc["targets"].values())
    assert Path(doc["roofline"]["path"]).read_bytes()[:4] == b"\x89PNG"
    printed = capsys.readouterr().out
    tail = printed[printed.index("wrote "):].splitlines()
    assert tail[2].startswith("group ") and tail[3].startswith("memory ")   # per group
    head = next(i for i, line in enumerate(tail) if line.startswith("case "))
    assert "tl/torch" in tail[head] and "tl host" in tail[head]   # the case table is last
    assert "safe_vs_raw_geomean" in tail[-1]


def test_without_torch_there_are_no_baselines(tmp_path):
    doc = run_suite(tmp_path, "--only", "memory", "--no-torch")
    ok = [c for c in doc["cases"] if c["status"] == "ok"]
    assert ok and all("torch" not in c["variants"] for c in ok)
    assert all("copy" not in c["variants"] for c in ok)
    assert doc["summary"]["memory"]["min_fraction_of_copy"] is None
    assert all(any("torch" in n for n in c["notes"]) for c in ok)
    assert doc["run"]["torch_baselines"] is False


def test_a_copy_that_does_not_copy_is_reported_wrong():
    """The copy ceiling is checked like any variant, against its own source."""
    from benchmarks.suite.run import Variant, _check

    case = build_cases("tiny", ["memory"])[0]
    arrays = make_arrays("cpu", False)

    def poison(x):      # as on the GPU, where poisoning None failed in run r3x's first try
        assert x is not None, "a variant without an output was poisoned"

    arrays.poison = poison
    bad = Variant("copy", "a copy that drops bytes", lambda: None,
                  verify=lambda: "copy differs from source")
    res = _check(case, arrays, bad, None)
    assert res["status"] == "wrong" and res["reason"] == "copy differs from source"
    good = Variant("copy", "a copy", lambda: None, verify=lambda: None)
    assert _check(case, arrays, good, None)["status"] == "ok"


FAKE = '''
import numpy as np

def softmax(x, *, out=None):
    """A host function in numpy: right."""
    a = np.asarray(x.numpy(), np.float32)
    e = np.exp(a - a.max(-1, keepdims=True))
    out[...] = e / e.sum(-1, keepdims=True)
    return out

def add(x, y, *, out=None):
    """Wrong on purpose: subtracts."""
    out[...] = np.asarray(x.numpy(), np.float32) - np.asarray(y.numpy(), np.float32)
    return out

def rms_norm(x, w, *, out=None):
    raise RuntimeError("kernel failed to compile")
'''


def fake_package(tmp_path: Path, monkeypatch) -> str:
    pkg = tmp_path / "fakekernels"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ops.py").write_text(textwrap.dedent(FAKE))
    (pkg / "broken.py").write_text("def oops(:\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return "fakekernels"


def test_missing_wrong_and_failing_kernels_are_reported(tmp_path, monkeypatch):
    pkg = fake_package(tmp_path, monkeypatch)
    doc = run_suite(tmp_path, "--kernel-package", pkg, "--no-tour")
    status = {c["id"]: c["status"] for c in doc["cases"]}
    by_op = {}
    for c in doc["cases"]:
        by_op.setdefault(c["op"], set()).add(c["status"])
    assert by_op["softmax"] == {"ok"}
    assert by_op["add"] == {"wrong"}
    assert by_op["rmsnorm"] == {"error"}
    for op in ("gemm", "attention", "rope", "gemv"):
        assert by_op[op] == {"missing"}, (op, status)
    wrong = next(c for c in doc["cases"] if c["op"] == "add")
    assert "relative error" in wrong["variants"]["tilelab"]["reason"]
    failed = next(c for c in doc["cases"] if c["op"] == "rmsnorm")
    assert "kernel failed to compile" in failed["variants"]["tilelab"]["reason"]
    assert "fakekernels.broken" in doc["kernels"]["import_errors"]
    assert doc["kernels"]["ops"]["softmax"]["tilelab"] == "fakekernels.ops:softmax"
    assert doc["summary"]["status_counts"]["missing"] >= 4


def test_budget_skips_cases_but_still_writes_json(tmp_path):
    doc = run_suite(tmp_path, "--only", "memory,decode", "--budget-s", "0")
    assert {c["status"] for c in doc["cases"]} == {"skipped"}
    assert all("budget" in c["reason"] for c in doc["cases"])
    assert doc["summary"]["status_counts"] == {"skipped": len(doc["cases"])}


@pytest.mark.subprocess
def test_isolated_groups_run_in_child_processes(tmp_path):
    doc = run_suite(tmp_path, "--only", "memory", "--isolate")
    assert doc["run"]["isolated"] is True
    assert doc["cases"] and all(c["status"] == "ok" for c in doc["cases"])
    assert doc["kernels"]["ops"]["softmax"]["tilelab"]


def test_replot_redraws_a_saved_result(tmp_path, capsys):
    """Only the latest suite PNG stays in the tree: any saved result can be redrawn."""
    result = sorted((BENCH / "results").glob("suite_*h200_*.json"))[-1]
    png = tmp_path / "again.png"
    assert suite.main(["--replot", str(result), "--png", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert f"wrote {png}" in capsys.readouterr().out
    # a gzipped result redraws too
    import gzip

    old = tmp_path / "old.json.gz"
    old.write_bytes(gzip.compress(result.read_bytes()))
    png.unlink()
    assert suite.main(["--replot", str(old), "--png", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_gemm_pairs_drop_the_hints_raw_kernels_cannot_take():
    """Safe/raw pairs run the same tiles, schedule and worker warps: a tuned winner's
    other cuTile hints (latency, occupancy) are dropped from the safe side of the pair.
    The big-problem default keeps its 8 worker warps on both sides (128x256 tiles spill
    without them)."""
    from benchmarks.suite.tuning import _mirror_gemm
    from tilelab.kernels.matmul import MatmulConfig

    best = {"config": MatmulConfig(tm=128, tn=256, tk=64, num_worker_warps=8, latency=4)}
    raw, safe = _mirror_gemm(best, None)
    assert raw == {"schedule": "grouped", "tm": 128, "tn": 256, "tk": 64, "group_m": 8,
                   "num_blocks": None, "num_worker_warps": 8}
    assert safe == {"config": MatmulConfig(tm=128, tn=256, tk=64, num_worker_warps=8)}
    big = next(c for c in build_cases("full", ["gemm"]) if c.params["M"] == 16384)
    raw, safe = _mirror_gemm({"config": None}, big)
    assert (raw["schedule"], raw["tn"], raw["num_worker_warps"]) == ("persistent", 256, 8)
    assert safe == {"config": None}


def test_gemm_pairs_keep_swapped_tiles():
    """A swapped-tile winner (swap_ab) pairs with the raw swapped kernel; the persistent
    raw twin has no swapped form, so that pair runs unswapped tiles on both sides."""
    from benchmarks.suite.tuning import _mirror_gemm
    from tilelab.kernels.matmul import MatmulConfig

    best = {"config": MatmulConfig(tm=16, tn=64, tk=256, latency=4, swap_ab=True)}
    raw, safe = _mirror_gemm(best, None)
    assert raw == {"schedule": "grouped", "tm": 16, "tn": 64, "tk": 256, "group_m": 8,
                   "num_blocks": None, "swap_ab": True}
    assert safe == {"config": MatmulConfig(tm=16, tn=64, tk=256, swap_ab=True)}
    best = {"config": MatmulConfig(tm=16, tn=64, schedule="persistent", swap_ab=True)}
    raw, safe = _mirror_gemm(best, None)
    assert "swap_ab" not in raw and safe == {"config": MatmulConfig(
        tm=16, tn=64, schedule="persistent")}


def test_decode_pairs_mirror_the_weight_rows_default():
    """Decode's gemv(w, x) reads the (N, K) weight through its transposed view: an
    untuned decode case mirrors the rows GEMV default (M = 1 GEMMs on a row-major B of
    the same width now take swapped tiles, which the raw GEMV cannot run)."""
    from benchmarks.suite.tuning import _mirror_gemm
    from tilelab.kernels.matmul import default_config

    for case in build_cases("full", ["decode"]):
        raw, safe = _mirror_gemm({"config": None}, case)
        want = default_config(1, case.params["N"], case.params["K"], b_transposed=True)
        assert raw == {"schedule": "gemv", "tn": want.tn, "tk": want.tk}, case.id
        assert safe == {"config": want.with_(occupancy=None)}, case.id


def test_attention_pairs_keep_the_schedule_and_hints():
    """Attention pairs run the same tiles, schedule (persistent or not) and cuTile hints
    on both sides; only the load-latency hints, which the raw kernel lacks, are dropped.
    The untuned default at 8192 keys is the persistent warp-specialized kernel."""
    from benchmarks.suite.tuning import _mirror_attention
    from tilelab.kernels.attention import AttentionConfig

    case = next(c for c in build_cases("full", ["attention"]) if c.params["S"] == 8192)
    raw, safe = _mirror_attention({"config": None}, case)
    assert raw == {"bm": 128, "bn": 256, "sum_mma": True, "persistent": True,
                   "occupancy": None, "num_worker_warps": 8}
    assert safe == {"config": None}
    best = {"config": AttentionConfig(64, 128, latency_k=4, latency_v=4, occupancy=2)}
    raw, safe = _mirror_attention(best, case)
    assert raw == {"bm": 64, "bn": 128, "sum_mma": False, "persistent": False,
                   "occupancy": 2, "num_worker_warps": None}
    assert safe == {"config": AttentionConfig(64, 128, occupancy=2)}


def test_list_prints_cases(capsys):
    assert suite.main(["--list", "--sizes", "full", "--only", "gemm"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("gemm: ")           # the group and what it measures
    assert len(lines) == 32 and any("qwen3_down_proj_M8192" in line for line in lines)
    # last, the plan of a GPU run of these groups, from the previous results' case times
    assert lines[-1].startswith("plan: gemm ~") and "for 30 of 30 cases" in lines[-1]


def test_full_preset_has_the_issue_sizes():
    cases = build_cases("full", ["gemm", "attention", "memory", "decode"])
    squares = {c.params["M"] for c in cases if c.tags.get("family", "").startswith("square")}
    assert squares == {1024, 2048, 4096, 8192, 16384}
    proj = {(c.params["N"], c.params["K"]) for c in cases if c.tags.get("family") == "qwen3"}
    assert proj == {(4096, 4096), (1024, 4096), (12288, 4096), (4096, 12288)}
    assert {c.params["M"] for c in cases if c.tags.get("family") == "qwen3"} == \
        {1, 16, 128, 2048, 8192}
    att = [c for c in cases if c.group == "attention"]
    assert {c.params["S"] for c in att} == {1024, 2048, 4096, 8192, 16384}
    assert all((c.params["B"], c.params["H"], c.params["D"]) == (8, 32, 128) for c in att)
    assert {c.op for c in cases if c.group == "memory"} == {"add", "softmax", "rmsnorm", "rope"}
    assert len([c for c in cases if c.group == "decode"]) == 4


def test_run_case_missing_without_any_kernel():
    case = build_cases("tiny", ["memory"])[0]
    reg = Registry(kernel_package="no_such_kernels_pkg", tour=False)
    res = run_case(case, make_arrays("cpu", False), reg, RunOptions(rep=2))
    assert res["status"] == "missing" and "no_such_kernels_pkg" in reg.import_errors


def test_summary_geomeans_and_targets():
    def case(group, op, ratio, frac=None, raw=None, tags=None):
        fig = {"tilelab_vs_torch": ratio}
        if frac is not None:
            fig["tilelab_fraction_of_bandwidth"] = frac
        if raw is not None:
            fig.update(safe_vs_raw=raw, safe_vs_raw_like_for_like=True)
        return {"id": f"{group}/{op}/{ratio}", "group": group, "op": op, "status": "ok",
                "figures": fig, "tags": tags or {}, "params": {"S": 1024}}
    cases = [case("gemm", "gemm", 0.5, raw=1.0, tags={"family": "qwen3", "M": 1}),
             case("gemm", "gemm", 2.0, raw=0.9, tags={"family": "square_bfloat16"}),
             case("memory", "add", 1.0, frac=0.9), case("memory", "softmax", 0.9, frac=0.7),
             {"id": "x", "group": "attention", "op": "attention", "status": "missing"}]
    s = summarize(cases)
    assert s["gemm"]["geomean_vs_cublas"]["all"] == pytest.approx(1.0)
    assert s["gemm"]["geomean_vs_cublas"]["qwen3_M1"] == pytest.approx(0.5)
    assert s["memory"]["min_fraction_of_bandwidth"] == pytest.approx(0.7)
    assert s["safe_vs_raw"]["geomean"] == pytest.approx(math.sqrt(0.9))
    assert s["status_counts"] == {"ok": 4, "missing": 1}
    t = check_targets(s)
    assert t["gemm_geomean_vs_cublas"]["met"] is True
    assert t["memory_min_fraction_of_bandwidth"]["met"] is False
    assert t["attention_geomean_vs_sdpa"]["met"] is None


RAW = '''
import numpy as np

def raw_softmax(x, *, out):
    """A raw twin (numpy here): found by name in a raw module."""
    a = np.asarray(x, np.float32)
    e = np.exp(a - a.max(-1, keepdims=True))
    out[...] = e / e.sum(-1, keepdims=True)
    return out
'''


def test_raw_host_function_is_found_and_paired(tmp_path, monkeypatch):
    pkg = fake_package(tmp_path, monkeypatch)
    (tmp_path / "fakeraw.py").write_text(textwrap.dedent(RAW))
    reg = Registry(kernel_package=pkg, tour=False, raw_modules=("fakeraw", "not_written"))
    case = next(c for c in build_cases("tiny", ["memory"]) if c.op == "softmax")
    res = run_case(case, make_arrays("cpu", False), reg, RunOptions(rep=2, target_s=0.01))
    assert res["status"] == "ok", res
    assert res["variants"]["raw"]["impl"] == "fakeraw.py:raw_softmax"
    assert res["figures"]["safe_vs_raw"] > 0 and res["figures"]["safe_vs_raw_like_for_like"]


def test_tour_stand_in_is_compared_like_for_like_with_raw_kernels(tmp_path, monkeypatch):
    pkg = fake_package(tmp_path, monkeypatch)      # it has no matmul: the tour GEMM runs
    reg = Registry(kernel_package=pkg)
    case = build_cases("tiny", ["gemm"])[0]
    res = run_case(case, make_arrays("cpu", False), reg, RunOptions(rep=2, target_s=0.01))
    v = res["variants"]
    assert res["status"] == "ok" and v["tilelab"]["impl"].startswith("tour:")
    assert v["raw"]["impl"].startswith("benchmarks/baselines/raw_kernels.py")
    # the tuned tour config walks tiles grouped; raw_gemm walks them row-major, so the
    # safe kernel is also timed row-major and that time is the one compared
    assert v["tilelab"]["config"]["group"] == 8 and v["tilelab_as_raw"]["config"]["group"] == 0
    assert v["raw"]["config"] == {"tm": 128, "tn": 128, "tk": 64}
    assert all(v[k]["status"] == "ok" for k in ("tilelab", "tilelab_as_raw", "raw"))
    assert res["figures"]["safe_vs_raw_like_for_like"] is True


def test_timing_launches_library_calls_without_waiting_and_releases_them():
    """The timed call is sync=False (its future kept and waited for afterwards); the
    correctness check before it is a plain synchronous call."""
    import tilelab as tl
    from tilelab.runtime.ledger import LEDGER
    from benchmarks.suite.run import Variant, _time

    tl.synchronize()                                        # start from a clear ledger
    arrays = make_arrays("cpu", False)
    fn = Registry().safe("softmax").fn
    x = arrays.to_tl(arrays.randn((8, 128), "float32"))
    out = arrays.to_tl(arrays.empty((8, 128), "float32"))
    v = Variant("tilelab", "softmax", fn, [x], {}, out, config={"block_m": None,
                                                                "block_n": None})
    assert v.timed_async
    v.timed()
    assert isinstance(v.pending, tl.Future) and LEDGER.pending_count == 1
    with pytest.raises(tl.BorrowError):
        out.numpy()
    v.settle()
    assert LEDGER.pending_count == 0
    r = _time(v, arrays, RunOptions(rep=3, warmup=1, target_s=0.01))
    assert r.median > 0 and r.host_samples and LEDGER.pending_count == 0
    assert v() is out and not LEDGER.pending_count        # the check: synchronous
    untuned = Variant("tilelab", "softmax", fn, [x], {}, out)   # autotune, no config
    assert not untuned.timed_async


def test_rounds_rotate_which_variant_is_timed_first(monkeypatch):
    """Round r starts at variant r (torch, tilelab, raw; tilelab, raw, torch; raw, torch,
    tilelab): with the clocks sagging through a run, a fixed order favoured the first."""
    from benchmarks.suite import run as suite_run
    from benchmarks.suite.run import Variant, _time_all
    from tilelab.perf.bench import BenchResult

    order: list[str] = []

    def fake_time(v, arrays, opts):
        order.append(v.name)
        return BenchResult(v.name, [1e-3], [1e-6], "cpu")

    monkeypatch.setattr(suite_run, "_time", fake_time)
    variants = [Variant(n, n, lambda: None) for n in ("torch", "tilelab", "raw")]
    checks = {v.name: {"status": "ok"} for v in variants}
    monkeypatch.setattr(suite_run, "_figures", lambda case, stats, nominal: {})
    _time_all(variants, checks, build_cases("tiny", ["memory"])[0], None,
              RunOptions(rounds=3), None)
    assert order == ["torch", "tilelab", "raw", "tilelab", "raw", "torch",
                     "raw", "torch", "tilelab"]
    assert all(checks[n]["round_medians_s"] == [1e-3] * 3 for n in checks)
