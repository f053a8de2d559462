"""Fitting the prediction model's constants: launches timed under known constants give
those constants back; constants the data do not reach stay as they were and are named."""
from __future__ import annotations

import doctest
import json
import math

import numpy as np
import pytest

import tilelab.perf.predict_fit as fit_module
from tilelab.perf.predict import CONSTANTS, Constant, GemmShape, LaunchShape, predict_launch
from tilelab.perf.predict_fit import (BOUNDS, FitError, FitRow, constant_lines, fit_constants,
                                      load_fit)

TRUE = {"launch_floor": 2.5e-6, "eff_memory": 0.88, "eff_tensor": 0.62, "eff_cuda": 0.45}
SMS = 132


def _truth(values=TRUE):
    return {k: Constant(CONSTANTS[k].name, v, CONSTANTS[k].unit, "truth")
            for k, v in values.items()}


def _shape(blocks, flops, dram, precision="fp32", executed=None, **kw):
    return LaunchShape(blocks=blocks, useful_flops=flops, executed_flops=executed or flops,
                       dram_bytes=dram, precision=precision, **kw)


def _shapes():
    """Launches of every regime: tiny, streaming, tensor-core GEMMs, FP32 math, a GEMM
    with tile reuse, partial waves and padding."""
    out = []
    for i, blocks in enumerate((1, 4, 16)):
        out.append((f"tiny{i}", _shape(blocks, 1e3, 10 ** (3 + i))))
    for i, dram in enumerate((1e8, 5e8, 2e9, 8e9)):
        out.append((f"stream{i}", _shape(SMS * (4 + i) + i, dram / 12, dram)))
    for i, flops in enumerate((2e11, 1e12, 8e12)):
        out.append((f"mma{i}", _shape(SMS * 16, flops, 1e8, "bf16", executed=flops * 1.1)))
    for i, flops in enumerate((5e10, 4e11)):
        out.append((f"fp32_{i}", _shape(SMS * 8 + 3, flops, 1e7)))
    g = GemmShape(4096, 4096, 4096, 128, 128)
    out.append(("gemm_reuse", _shape(32 * 32, 2 * 4096 ** 3, 3 * 4096 * 4096 * 2, "bf16",
                                     gemm=g)))
    out.append(("occupancy", _shape(SMS * 3, 1e9, 1e9, threads=128, registers=64)))
    return out


def _rows(values=TRUE, noise=0.0, seed=0, names=None):
    rng = np.random.default_rng(seed)
    rows = []
    for name, s in _shapes():
        if names is not None and not any(name.startswith(n) for n in names):
            continue
        t = predict_launch(s, "h200", constants=_truth(values)).seconds
        rows.append(FitRow(name, s, t * math.exp(noise * rng.standard_normal())))
    return rows


def test_exact_times_give_the_true_constants_back():
    fit = fit_constants(_rows(), source="synthetic")
    assert fit.fitted == ("launch_floor", "eff_memory", "eff_tensor", "eff_cuda")
    assert fit.unconstrained == () and fit.at_bound == ()
    for key, true in TRUE.items():
        c = fit.constants[key]
        assert c.value == pytest.approx(true, rel=0.01), key
        assert c.calibrated and c.source == "synthetic"
    assert fit.after.max_abs_log < 0.01
    assert fit.before.median_abs_log > 10 * fit.after.median_abs_log


def test_noisy_times_give_constants_within_the_noise():
    fit = fit_constants(_rows(noise=0.05, seed=3), source="noisy")
    for key, true in TRUE.items():
        assert fit.constants[key].value == pytest.approx(true, rel=0.08), key
    assert fit.after.median_abs_log < 0.08
    assert fit.after.median_abs_log < fit.before.median_abs_log


def test_row_predictions_are_the_models_own_with_the_fitted_constants():
    rows = _rows(noise=0.02, seed=1)
    fit = fit_constants(rows, source="s")
    for r, rep in zip(rows, fit.rows):
        after = predict_launch(r.shape, r.gpu, constants=fit.constants)
        before = predict_launch(r.shape, r.gpu)
        assert rep["name"] == r.name and rep["measured_s"] == r.measured_s
        assert rep["after_s"] == after.seconds and rep["before_s"] == before.seconds
        assert rep["log_ratio_after"] == pytest.approx(math.log(after.seconds / r.measured_s))
        assert rep["limiter_after"] == after.limiter
    worst = max(fit.rows, key=lambda r: abs(r["log_ratio_before"]))
    assert fit.before.worst == worst["name"]
    assert fit.before.max_abs_log == pytest.approx(abs(worst["log_ratio_before"]))


def test_constants_the_rows_do_not_reach_keep_their_values():
    fit = fit_constants(_rows(names=("tiny", "stream")), source="memory only")
    assert fit.fitted == ("launch_floor", "eff_memory")
    assert set(fit.unconstrained) == {"eff_tensor", "eff_cuda"}
    for key in fit.unconstrained:
        assert fit.constants[key] == CONSTANTS[key]           # value, source, uncalibrated
        assert fit.dominates[key] == 0
    assert fit.constants["eff_memory"].value == pytest.approx(TRUE["eff_memory"], rel=0.01)


def test_a_constant_pushed_past_its_bound_is_reported():
    faster = dict(TRUE, eff_memory=1.6)                     # faster than the datasheet
    fit = fit_constants(_rows(faster, names=("tiny", "stream")), source="s")
    assert fit.constants["eff_memory"].value == BOUNDS["eff_memory"][1]
    assert fit.at_bound == ("eff_memory",)
    assert any("eff_memory ended at its bound" in n for n in fit.notes)


def test_start_values_are_taken_from_the_given_constants():
    start = dict(CONSTANTS, eff_cuda=Constant("CUDA-core efficiency", 0.3, "fraction", "x"))
    fit = fit_constants(_rows(names=("tiny",)), source="s", constants=start)
    assert fit.constants["eff_cuda"].value == 0.3
    assert fit.rows[0]["before_s"] == predict_launch(_shapes()[0][1], "h200",
                                                     constants=start).seconds


def test_rows_that_cannot_be_fitted_are_refused_by_name():
    with pytest.raises(FitError, match="no rows to fit") as e:
        fit_constants([], source="s")
    assert "FitRow(" in e.value.hint
    s = _shapes()[0][1]
    for bad in (0.0, -1e-6, float("nan"), None):
        with pytest.raises(FitError, match="row 'broken': measured time") as e:
            fit_constants([FitRow("ok", s, 1e-5), FitRow("broken", s, bad)], source="s")
        assert "leave out launches" in e.value.hint
    assert isinstance(FitError("x"), ValueError)


def test_a_fit_round_trips_through_json_and_its_pasted_lines(tmp_path):
    fit = fit_constants(_rows(noise=0.03, seed=2), source="results/x.json (H200, today)")
    path = tmp_path / "fit.json"
    path.write_text(json.dumps({"fit": fit.to_dict()}))
    assert load_fit(path) == fit.constants
    assert load_fit(json.loads(path.read_text())["fit"]) == fit.constants
    namespace = {"Constant": Constant}
    exec("CONSTANTS = {\n" + fit.constant_lines() + "\n}", namespace)
    assert namespace["CONSTANTS"] == fit.constants       # values have three figures
    assert fit.to_dict()["constant_lines"] == constant_lines(fit.constants)


def test_loading_something_else_says_what_to_pass(tmp_path):
    with pytest.raises(FitError, match="has no fitted constants") as e:
        load_fit({"rows": []})
    assert "predict_fit.py" in e.value.hint
    with pytest.raises(FitError, match="unknown model constant 'eff_l2'"):
        load_fit({"constants": {"eff_l2": {"name": "x", "value": 1, "unit": "s",
                                           "source": "s"}}})


def test_error_stats_describe_factors_and_bias():
    s = fit_module.ErrorStats.of([math.log(2), -math.log(1.5), 0.0], ["a", "b", "c"])
    assert (s.n, s.worst) == (3, "a")
    assert s.max_factor == pytest.approx(2.0) and s.median_factor == pytest.approx(1.5)
    assert s.describe().startswith("median ×1.5, worst ×2 (a), bias ×1.1")


def test_doctests():
    assert doctest.testmod(fit_module).failed == 0
