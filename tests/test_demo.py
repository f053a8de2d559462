"""``tilelab demo``: compiles, runs, checks, counts, predicts and writes its outputs."""
from __future__ import annotations

import csv
import math
import time

import matplotlib
import pytest

import tilelab.demo as demo
from tilelab.perf.counting import elementwise, gemm, softmax
from tilelab.perf.specs import lookup_gpu
from tilelab.runtime.device import gpu_available

matplotlib.use("Agg")   # tests draw off-screen (the lab itself never imports pyplot)

H200 = lookup_gpu("h200")


@pytest.fixture(scope="module")
def cpu_demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    import contextlib
    import io

    buf = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(buf):
        code = demo.run_demo(out_dir=str(out), backend="cpu")
    return code, out, buf.getvalue(), time.perf_counter() - t0


def rows_of(out):
    with open(out / "summary.csv", newline="") as f:
        return {r["kernel"]: r for r in csv.DictReader(f)}


@pytest.mark.toolchain
def test_cpu_demo_succeeds_quickly_and_keeps_the_compile_table(cpu_demo):
    code, out, text, seconds = cpu_demo
    assert code == 0, text
    assert "compiling the tour for" in text and "Tile IR" in text and "toolchain:" in text
    assert "running the tour on the CPU interpreter" in text
    assert "GB/s" in text and "TFLOP/s" in text and "of ceiling" in text
    assert seconds < 45
    assert (out / "roofline.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "gemm.lowered.py").exists()


@pytest.mark.toolchain
def test_summary_csv_has_the_four_kernels_with_correct_values(cpu_demo):
    _, out, _, _ = cpu_demo
    rows = rows_of(out)
    assert list(rows) == ["vector add", "GEMM", "softmax", "persistent GEMM"]
    works = {
        "vector add": elementwise(1 << 16, dtype="float32"),
        "GEMM": gemm(256, 384, 320, a_dtype="bfloat16"),
        "softmax": softmax(256, 1000, dtype="float32"),
        "persistent GEMM": gemm(384, 256, 256, a_dtype="bfloat16"),
    }
    flops = {"vector add": 1 << 16, "GEMM": 2 * 256 * 384 * 320,
             # the interpreter counts useful (in-bounds) work only, a reduction of k
             # elements as k - 1 combines (max and sum: 2 per row fewer), and the
             # reciprocal of each row's sum as one more
             "softmax": 5 * 256 * 1000 - 2 * 256 + 256,
             "persistent GEMM": 2 * 384 * 256 * 256}
    for name, r in rows.items():
        w = works[name]
        assert r["check"] == "ok" and float(r["max_rel_err"]) < 1e-2
        assert r["timing"] == "predicted" and r["ran_on"] == "cpu"
        assert r["device"] == H200.name
        assert float(r["flops"]) == flops[name]
        assert float(r["bytes"]) == w.bytes
        assert r["precision"] == w.precision
        seconds = float(r["seconds"])
        bound = max(flops[name] / H200.peak(w.precision), w.bytes / H200.bandwidth)
        assert seconds > bound                 # the model's time, never the roofline bound
        assert float(r["gb_per_s"]) == pytest.approx(w.bytes / seconds / 1e9)
        assert float(r["tflop_per_s"]) == pytest.approx(flops[name] / seconds / 1e12)
        assert float(r["fraction_of_ceiling"]) == pytest.approx(bound / seconds)  # below it
        assert int(r["blocks_counted"]) == int(r["blocks"]) > 0
    # the GEMM's tiles re-read A and B: the interpreter's traffic exceeds the compulsory bytes
    assert float(rows["GEMM"]["traffic_bytes"]) > float(rows["GEMM"]["bytes"])
    assert float(rows["vector add"]["traffic_bytes"]) == float(rows["vector add"]["bytes"])
    assert rows["persistent GEMM"]["blocks"] == "4"            # CPU persistent blocks


def test_a_failing_kernel_fails_the_demo(tmp_path, monkeypatch, capsys):
    cases = demo.tour_cases("cpu")

    def wrong(*inputs, sel=slice(None)):
        return cases[0].reference(*inputs, sel=sel) + 1.0

    cases[0].reference = wrong
    monkeypatch.setattr(demo, "tour_cases", lambda device: cases[:1])
    code = demo.run_demo(out_dir=str(tmp_path), backend="cpu", compile=False)
    assert code == 1
    assert "FAILED" in capsys.readouterr().out
    assert rows_of(tmp_path)["vector add"]["check"] == "FAILED"


def test_a_crashing_kernel_is_reported_and_the_tour_goes_on(tmp_path, monkeypatch, capsys):
    cases = demo.tour_cases("cpu")

    def boom(device):
        raise ValueError("cannot build")

    cases[1].build = boom
    monkeypatch.setattr(demo, "tour_cases", lambda device: cases[:2])
    results = demo.run_tour("cpu")
    assert [r.ok for r in results] == [True, False]
    assert math.isinf(results[1].rel_err) and "cannot build" in capsys.readouterr().out


@pytest.mark.skipif(not gpu_available(), reason="no usable GPU")
@pytest.mark.slow
def test_gpu_tour_measures(tmp_path):
    code = demo.run_demo(out_dir=str(tmp_path), backend="gpu", compile=False)
    rows = rows_of(tmp_path)
    assert code == 0
    for r in rows.values():
        assert r["timing"] == "measured" and r["check"] == "ok"
        assert 0 < float(r["fraction_of_ceiling"]) <= 1.05
        assert int(r["blocks_counted"]) < int(r["blocks"])       # counted on a sample
    assert (tmp_path / "roofline.png").exists()


def test_doctests():
    import doctest

    result = doctest.testmod(demo, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 8


def test_summary_csv_gives_the_parts_of_the_one_prediction(cpu_demo):
    """Each predicted row's time is tilelab.perf.predict's total, with its parts: the
    kernel body and the launch floor apart, the roofline bound, and the verdict."""
    _, out, text, _ = cpu_demo
    for name, r in rows_of(out).items():
        total, body, floor, bound = (float(r[k]) for k in (
            "predicted_seconds", "kernel_seconds", "launch_seconds", "bound_seconds"))
        assert float(r["seconds"]) == total == pytest.approx(body + floor)
        assert bound <= body and r["verdict"].split(":")[0] in (
            "launch-bound", "memory-bound", "compute-bound", "latency-bound")
        assert f"{name:<17}predicted: {r['verdict']}" in text
