"""benchmarks/device/predict_fit.py: the cases it measures, the model input it builds from a
counted launch, and its CPU dry run end to end (JSON, fit, the lines to paste)."""
from __future__ import annotations

import dataclasses
import doctest
import json

import numpy as np
import pytest

from benchmarks.device import predict_fit as pf
from benchmarks.common import RESULTS
from tilelab.perf.predict_model import CONSTANTS
from tilelab.perf.predict_fit import load_fit
from support.backends import cpu_backend_private_cache  # noqa: F401 (autouse fixture)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

QUICK = {"rounds": 1, "rep": 1, "warmup": 0}


def test_the_gpu_cases_are_the_tour_and_the_explorers_grids():
    cs = pf.cases("gpu")
    names = [c.name for c in cs]
    assert len(names) == len(set(names)) == 39
    tour = [c for c in cs if c.group == "tour"]
    assert {c.kernel.name for c in tour} == {"vector_add", "gemm", "softmax",
                                            "persistent_gemm"}
    assert "tour GEMM bf16 8192³ 128×128×64 grouped" in names            # the demo's GEMM
    assert "tour vector add n=67108864 tile=1024" in names
    assert {c.params["dtype"] for c in tour if c.gemm} == {"bfloat16", "float32"}
    grid = {(c.params["tile"][0], c.params["m"]) for c in cs
            if c.group == "explorer" and c.gemm}                          # notebook 03
    assert grid == {(t, s) for t in (16, 32, 64, 128) for s in (1024, 2048, 4096)}
    vec = {(c.params["tile"], c.params["n"]) for c in cs
           if c.group == "explorer" and not c.gemm}                       # explore() defaults
    assert vec == {(t, n) for t in (64, 128, 256, 512) for n in (1 << 12, 1 << 14, 1 << 16)}
    # big GEMMs check a band of rows; the explorer's points use tile traffic
    assert all(c.check_rows == 64 for c in cs if c.gemm and c.params["m"] > 1024)
    assert all(c.work is None for c in cs if c.group == "explorer")


def test_a_square_gemm_gets_its_tile_reuse_shape():
    case = next(c for c in pf.cases("cpu") if c.name.startswith("explorer GEMM"))
    row, shape = pf.run_case(case, "cpu", timing=QUICK, resources=False, seed=0)
    assert row["status"] == "ok", row
    m, tile = case.params["m"], case.params["tile"][0]
    g = shape.gemm
    assert (g.m, g.n, g.k, g.tile_m, g.tile_n) == (m, m, m, tile, tile)
    assert (g.a_size, g.b_size, g.c_size) == (2, 2, 2) and len(g.order) == (m // tile) ** 2
    assert g.tile_k == case.params["k_tile"] == row["shape"]["gemm"]["tile_k"]
    assert shape.blocks == (m // tile) ** 2 and shape.precision == "bf16"
    assert shape.useful_flops == 2 * m ** 3
    assert row["shape"]["gemm"]["order"] == "row-major"
    assert row["shape"]["lab_finds_gemm"] is True      # the lab's detection agrees
    assert row["shape"]["bytes_from"] == "tile traffic (interpreter)"
    assert row["rel_err"] <= case.tolerance and row["measured_s"] > 0


@pytest.mark.toolchain
def test_resources_of_the_compiled_kernel_reach_the_model():
    case = pf.cases("cpu")[0]
    row, shape = pf.run_case(case, "cpu", timing=QUICK, resources=True, seed=0)
    assert row["status"] == "ok", row
    assert shape.threads and shape.threads > 0 and shape.registers > 0
    assert row["shape"]["threads"] == shape.threads
    assert row["shape"]["bytes_from"].startswith("compulsory")
    assert shape.dram_bytes == 3 * 4 * case.params["n"]


def test_a_wrong_result_is_not_timed_and_a_failure_is_reported():
    case = pf.cases("cpu")[0]
    off = dataclasses.replace(case, reference=lambda x, y, sel=slice(None): x + y + 1.0)
    row, shape = pf.run_case(off, "cpu", timing=QUICK, resources=False, seed=0)
    assert row["status"] == "wrong" and shape is None and "measured_s" not in row
    assert "rel_err" in row["reason"]

    def broken(device, rng):
        raise RuntimeError("no memory left")
    row, shape = pf.run_case(dataclasses.replace(case, build=broken), "cpu", timing=QUICK,
                             resources=False, seed=0)
    assert row["status"] == "error" and shape is None
    assert row["error"] == "RuntimeError: no memory left" and "broken" in row["traceback"]


def test_the_dry_run_writes_the_fit_and_prints_lines_marked_not_to_paste(tmp_path, capsys):
    out = tmp_path / "pf.json"
    assert pf.main(["--backend", "cpu", "--out", str(out), "--no-resources"]) == 0
    data = json.loads(out.read_text())
    assert data["schema"] == pf.SCHEMA and data["dry_run"] is True
    assert data["env"]["backend"] == "cpu" and data["model"]["gpu"] == "h200"
    assert [c["status"] for c in data["cases"]] == ["ok"] * len(pf.cases("cpu"))
    fit = data["fit"]
    assert len(fit["rows"]) == len(data["cases"])
    assert fit["source"].startswith("DRY RUN") and "pf.json" in fit["source"]
    assert "launch_floor" in fit["fitted"]
    for when in ("before", "after"):
        assert fit[when]["n"] == len(fit["rows"]) and fit[when]["max_abs_log"] >= 0
    assert fit["after"]["median_abs_log"] <= fit["before"]["median_abs_log"]
    for r in fit["rows"]:
        assert np.isclose(np.log(r["after_s"] / r["measured_s"]), r["log_ratio_after"])
    assert load_fit(out)["launch_floor"].calibrated
    printed = capsys.readouterr().out
    assert "# DRY RUN: fitted to the CPU interpreter's host time; do not paste" in printed
    assert fit["constant_lines"] in printed and f"written to {out}" in printed
    assert all("model_after" in c for c in data["cases"])


def test_cases_past_the_budget_are_skipped_and_nothing_is_fitted(tmp_path, capsys):
    out = tmp_path / "skip.json"
    assert pf.main(["--backend", "cpu", "--out", str(out), "--budget-s", "-1",
                    "--only", "softmax"]) == 1
    data = json.loads(out.read_text())
    assert [c["status"] for c in data["cases"]] == ["skipped"]
    assert "budget" in data["cases"][0]["reason"] and data["fit"] is None
    assert "nothing was fitted" in capsys.readouterr().out


def test_a_grouped_gemm_records_its_group_so_a_refit_can_rebuild_its_order():
    from tilelab.perf.predict_fit import shape_from_dict

    case = next(c for c in pf.cases("cpu") if c.params.get("schedule") == "grouped")
    row, shape = pf.run_case(case, "cpu", timing=QUICK, resources=False, seed=0)
    assert row["status"] == "ok", row
    assert row["shape"]["gemm"]["order"] == "grouped" and row["shape"]["gemm"]["group_m"] == 8
    rebuilt = shape_from_dict(json.loads(json.dumps(row["shape"])), row["params"])
    assert rebuilt == shape


def test_refit_of_the_committed_h200_run_needs_no_gpu(tmp_path, capsys):
    result = RESULTS / "predict_fit_h200_2026-12-02.json"
    out = tmp_path / "refit.json"
    assert pf.main(["--refit", str(result), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "the model of the run, with its constants: median ×1.56, worst ×237" in printed
    assert "eff_cuda held at its start value" in printed
    assert "# paste into CONSTANTS in tilelab/perf/predict_model.py:" in printed
    data = json.loads(out.read_text())
    fit = data["fit"]
    assert data["fit_at_run"]["before"]["max_abs_log"] > 5 and len(fit["rows"]) == 39
    assert fit["source"] == ("fitted to benchmarks/results/predict_fit_h200_2026-12-02.json "
                             "(NVIDIA H200, 2026-12-02, 39 launches)")
    assert fit["after"]["median_abs_log"] < 0.1 and fit["after"]["max_abs_log"] < 0.47
    # the committed constants are this refit's (three figures)
    for key in fit["fitted"]:
        assert CONSTANTS[key].calibrated and CONSTANTS[key].source == fit["source"]
        assert fit["constants"][key]["value"] == pytest.approx(CONSTANTS[key].value,
                                                               rel=0.01), key
    assert fit["held"] == list(pf.HOLD) and fit["unconstrained"] == ["dram_sm_share"]


def test_doctests():
    assert doctest.testmod(pf).failed == 0
