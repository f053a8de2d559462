"""The ``%%tile`` Roofline and Timings tabs use the one prediction (``tilelab.perf.predict``)
and teach on the CPU: one GPU by default, a one-line verdict per launch, the model folded,
the kernel body and the launch floor apart, and ``--predict-at`` predicting a launch at the
GPU-sized problem so that moving a tile moves the point the way a GPU would."""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

import tilelab as tl
from tilelab.lab.cell.run import options_from_line, run_cell
from tilelab.lab.report.options import OptionError
from tilelab.lab.views.panels import build_panels
from tilelab.perf import predict

ADD = '''
def add(z: tl.Out, x: tl.In, y: tl.In):
    z.store(tl.load_like(x, z) + tl.load_like(y, z))
n = 1 << 14
x = tl.ones(n, device="cpu"); y = tl.ones(n, device="cpu"); z = tl.empty(n, device="cpu")
add(z.partition(1024), x, y)
add(z.partition(4096), x, y)
'''

GEMM = '''
from tilelab.kernels.examples import gemm
S = 128
a = tl.randn(S, S, dtype="bfloat16", device="cpu")
b = tl.randn(S, S, dtype="bfloat16", device="cpu")
for t in TILES:
    gemm(tl.empty((S, S), dtype="bfloat16", device="cpu").partition((t, t)), a, b, 32)
'''

RESULT = Path(__file__).resolve().parents[2] / "benchmarks/results/predict_fit_h200_2026-12-02.json"


def cell(line: str, body: str, **ns):
    return run_cell(f"--backend cpu --show roofline,timings {line}", body, {"tl": tl, **ns},
                    name=f"<roofline tab {time.perf_counter_ns()}>")


def panels(report):
    return {p.key: p for p in build_panels(report)}


@pytest.fixture(scope="module")
def as_run():
    return cell("", ADD)


@pytest.fixture(scope="module")
def at_gpu_size():
    return cell("--predict-at n=2**26", ADD)


@pytest.mark.toolchain
def test_the_tab_predicts_what_a_plain_cell_predicts_for_the_same_launch(as_run):
    """Notebook 02's plain cell calls ``predict(trace, "h200")`` on the same launch."""
    from tilelab.kernels.examples import vector_add

    x = tl.ones(1 << 14, device="cpu")
    trace = tl.interpret(vector_add, tl.empty(1 << 14, device="cpu").partition(1024), x, x)
    plain = predict(trace, "h200")
    tab = as_run.launches[0].measurement.prediction
    for part in ("bound_s", "kernel_s", "launch_s", "total_s", "limited_by", "verdict"):
        assert getattr(tab, part) == pytest.approx(getattr(plain, part)) if part.endswith(
            "_s") else getattr(tab, part) == getattr(plain, part), part
    assert as_run.launches[0].measurement.seconds == tab.total_s


@pytest.mark.toolchain
def test_launch_bound_launches_say_so_and_show_body_and_floor_apart(as_run):
    tabs = panels(as_run)
    m = as_run.launches[0].measurement
    assert m.prediction.verdict == "launch-bound: ~3.9 µs of launch, 0.12 µs of bytes"
    assert "predicted for NVIDIA H200 SXM: launch-bound: ~3.9 µs of launch" in \
        m.describe_time()
    roof = tabs["roofline"].html
    assert "launch-bound: ~3.9 µs of launch, 0.12 µs of bytes" in roof
    assert "--predict-at NAME=N" in roof                  # how to see the kernel instead
    timings = tabs["timings"].html
    for part in ("kernel body (µs)", "launch floor (µs)", "roofline bound (µs)"):
        assert part in timings, part
    assert "4.037 µs (predicted)" in tabs["timings"].text


def test_the_model_is_folded_and_the_figure_draws_one_gpu(as_run):
    roof = panels(as_run)["roofline"].html
    assert roof.count("<details") == 1 and "The model and its assumptions" in roof
    folded = roof.split("<details", 1)[1]
    assert "launch floor 3.92 µs (calibrated" in folded and "kernel body = max(" in folded
    before = roof.split("<details", 1)[0]
    assert "uncalibrated assumption" not in before        # no assumption wall on top
    assert as_run.roofline_gpus == ("h200",)
    fig = as_run.roofline.figure
    assert fig.tilelab["gpus"] == ["h200"] and not fig.tilelab["drawn"]["projections"]
    assert len(fig.tilelab["drawn"]["bounds"]) == 2       # a bar per prediction


@pytest.mark.toolchain
def test_roofline_all_compares_gpus_with_projections():
    r = cell("--roofline all", ADD)
    fig = r.roofline.figure
    assert set(fig.tilelab["gpus"]) == {"h200", "b200", "rtx5090"}
    assert {d["gpu"] for d in fig.tilelab["drawn"]["projections"]} == {"b200", "rtx5090"}
    assert options_from_line("--roofline all").roofline_gpus == ("b200", "rtx5090", "h200")
    assert options_from_line("").roofline_gpus == ()


@pytest.mark.toolchain
def test_predict_at_counts_the_launch_at_the_gpu_size(at_gpu_size):
    """The rescaled launch is predicted exactly as a launch of that size would be."""
    m = at_gpu_size.launches[0].measurement
    p = m.prediction
    assert p.at == "n=67108864" and p.limited_by == "DRAM"
    assert (p.flops, p.bytes) == (1 << 26, 12 << 26) == (m.flops, m.bytes)
    assert p.terms.blocks == (1 << 26) // 1024
    direct = predict(tl.interpret(_vector_add(), tl.empty(1 << 16, device="cpu").partition(
        1024), tl.ones(1 << 16, device="cpu"), tl.ones(1 << 16, device="cpu")), "h200")
    ratio = (1 << 26) // (1 << 16)
    assert p.bound_s == pytest.approx(direct.bound_s * ratio)
    assert m.describe_time().startswith("predicted for NVIDIA H200 SXM at n=67108864: "
                                        "memory-bound: 176 µs of bytes")
    tabs = panels(at_gpu_size)
    assert "180.2 µs (predicted at n=67108864)" in tabs["timings"].text
    assert "--predict-at NAME=N" not in tabs["roofline"].html
    assert "(predicted for NVIDIA H200 SXM at n=67108864)" in tabs["roofline"].text


def _vector_add():
    from tilelab.kernels.examples import vector_add

    return vector_add


def _measured_gemm_times(tiles):
    """The H200's times of the explorer GEMM (bf16 4096³, row-major, K-step 32)."""
    cases = json.loads(RESULT.read_text())["cases"]
    times = {}
    for c in cases:
        prm = c["params"]
        if (c["kernel"] == "gemm" and prm.get("m") == 4096 and prm.get("k_tile") == 32
                and prm.get("schedule") == "row-major" and prm["tile"][0] in tiles):
            times[prm["tile"][0]] = c["measured_s"]
    assert sorted(times) == sorted(tiles)
    return [times[t] for t in tiles]


@pytest.mark.toolchain
def test_moving_a_tile_moves_the_kernel_body_the_way_the_gpu_does():
    """At the CPU's 128² GEMM every tile is launch-bound (the issue's complaint); predicted
    at 4096³ the kernel body orders the tiles as the H200 measured them, and by about the
    same factors."""
    tiles = (16, 32, 64, 128)
    small = cell("", GEMM, TILES=tiles)
    assert all(l.measurement.prediction.launch_bound for l in small.launches)
    big = cell("--predict-at S=4096", GEMM, TILES=tiles)
    body = [l.measurement.prediction.kernel_s for l in big.launches]
    gpu = _measured_gemm_times(tiles)
    assert np.argsort(body).tolist() == np.argsort(gpu).tolist()
    for mine, theirs in zip(body, gpu):
        assert 0.5 < mine / theirs < 2, (mine, theirs)
    assert all(l.measurement.prediction.at == "S=4096" and
               l.measurement.prediction.limited_by == "math" for l in big.launches)


@pytest.mark.toolchain
def test_predict_at_says_why_it_cannot_apply():
    r = cell("--predict-at m=4096", ADD)
    assert any("the cell has no positive integer variable 'm'" in n for n in r.notes)
    assert r.launches[0].measurement.prediction.at is None
    raw = '''
import cuda.tile as ct
def fill(out: tl.Raw):
    ct.store(out, index=(ct.bid(0),), tile=ct.full((16,), 1.0, dtype=ct.float32))
n = 64
o = tl.zeros(n, device="cpu")
fill(o, grid=(4, 1, 1))
'''
    r = run_cell("--backend cpu --unsafe --show roofline --predict-at n=1024", raw, {"tl": tl},
                 name=f"<roofline tab {time.perf_counter_ns()}>")
    assert any("not predicted at n=1024" in n and "grid=" in n for n in r.notes), r.notes


@pytest.mark.parametrize("value, message", [
    ("n", "--predict-at: 'n' is not NAME=VALUE"),
    ("n=0", "--predict-at: n must be at least 1"),
    ("n=2**x", "is not NAME=VALUE (a whole number, 2**k or 1<<k)"),
])
def test_bad_predict_at_values_are_refused_before_the_cell_runs(value, message):
    with pytest.raises(OptionError, match=message.replace("*", r"\*").replace("(", r"\(")
                       .replace(")", r"\)")):
        options_from_line(f"--predict-at {value}")
    assert options_from_line("--predict-at n=1<<20,k=64").predict_at == (("n", 1 << 20),
                                                                         ("k", 64))
