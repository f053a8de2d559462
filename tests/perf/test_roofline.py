"""Tests of the roofline model: ridges, attainable, points, projections, plot data, formats."""
from __future__ import annotations

import doctest
import json
import math

import pytest
from hypothesis import given, strategies as st

import tilelab.perf.roofline as roofline_module
from tilelab.perf.counting import elementwise, gemm, softmax
from tilelab.perf.roofline import (Roofline, RooflinePoint, attainable, compute_ceiling,
                                   format_bandwidth, format_bytes, format_flops,
                                   format_intensity, format_seconds, memory_ceiling, predict,
                                   project, ridge_point)
from tilelab.perf.specs import (GPUS, Density, UnknownPrecisionError,
                                UnsupportedPrecisionError, lookup_gpu, measured_spec)

H200 = lookup_gpu("h200")


# ---------------------------------------------------------------- ridge and attainable

def test_ridge_point_arithmetic():
    assert ridge_point("h200", "bf16") == pytest.approx(989.5e12 / 4.8e12)
    assert ridge_point("h200", "bf16", "sparse") == pytest.approx(2 * 989.5e12 / 4.8e12)
    assert ridge_point("b200", "fp4") == pytest.approx(9e15 / 8e12)
    assert ridge_point("rtx5090", "fp32") == pytest.approx(104.8e12 / 1792e9)
    for spec in GPUS.values():
        for prec in spec.precisions:
            assert ridge_point(spec, prec) == pytest.approx(spec.ridge(prec))


def test_attainable_on_both_sides_of_the_ridge():
    ridge = ridge_point("h200", "bf16")
    assert attainable("h200", ridge / 4, "bf16") == pytest.approx(ridge / 4 * 4.8e12)
    assert attainable("h200", ridge * 4, "bf16") == 989.5e12
    assert attainable("h200", ridge, "bf16") == pytest.approx(989.5e12)
    assert attainable("h200", 0.0, "bf16") == 0.0
    # sparse lifts the roof, not the slope
    assert attainable("h200", 1.0, "bf16", "sparse") == attainable("h200", 1.0, "bf16")
    assert attainable("h200", 1e4, "bf16", "sparse") == 1979e12
    with pytest.raises(ValueError, match="intensity"):
        attainable("h200", -1.0, "bf16")


@given(st.sampled_from(sorted(GPUS)), st.floats(1e-3, 1e5), st.floats(1.0001, 50.0))
def test_attainable_is_monotone_and_under_both_ceilings(key, x, factor):
    spec = GPUS[key]
    y = attainable(spec, x, "fp32")
    assert y <= spec.peak("fp32") and y <= x * spec.bandwidth * (1 + 1e-12)
    assert attainable(spec, x * factor, "fp32") >= y


def test_ceilings_and_their_labels():
    c = compute_ceiling("rtx4090", "fp16")
    assert c.kind == "compute" and c.value == 165.2e12 and c.density is Density.DENSE
    assert "FP16 tensor, FP32 accumulate" in c.label and "dense" in c.label
    sparse = compute_ceiling("rtx4090", "fp16_acc16", "sparse")
    assert sparse.value == 660.6e12 and "sparse" in sparse.label
    cuda_cores = compute_ceiling("h200", "fp32", "sparse")        # no sparse rate: stays dense
    assert cuda_cores.density is Density.DENSE and cuda_cores.value == 67e12
    fallback = compute_ceiling("rtx5090", "fp64_tc")
    assert fallback.hardware_precision == "fp64" and "fp64 used" in fallback.label
    assert fallback.value == pytest.approx(104.8e12 / 64)
    m = memory_ceiling("h200")
    assert (m.kind, m.value, m.unit) == ("memory", 4.8e12, "B/s")
    assert m.source.url.startswith("https://")
    with pytest.raises(UnsupportedPrecisionError, match="no fp4 rate"):
        compute_ceiling("h200", "fp4")
    with pytest.raises(UnsupportedPrecisionError):
        compute_ceiling("a100", "fp8")


# ---------------------------------------------------------------- points

def test_point_validation():
    with pytest.raises(ValueError, match="bytes must be positive"):
        RooflinePoint("k", 1.0, 0.0, "fp32")
    with pytest.raises(ValueError, match="flops"):
        RooflinePoint("k", -1.0, 1.0, "fp32")
    with pytest.raises(ValueError, match="seconds"):
        RooflinePoint("k", 1.0, 1.0, "fp32", seconds=0.0)
    with pytest.raises(ValueError, match="measured point needs"):
        RooflinePoint("k", 1.0, 1.0, "fp32", measured=True)
    with pytest.raises(UnknownPrecisionError):
        RooflinePoint("k", 1.0, 1.0, "bf61")


def test_achieved_numbers_and_fraction_of_the_relevant_ceiling():
    # compute-bound: 8192^3 bf16 GEMM in 1.6 ms on an H200
    w = gemm(8192, 8192, 8192)
    p = RooflinePoint.from_work(w, seconds=1.6e-3, device="NVIDIA H200")
    assert p.measured and p.name == w.name
    assert p.achieved_flops == pytest.approx(w.flops / 1.6e-3)
    assert p.achieved_bandwidth == pytest.approx(w.bytes / 1.6e-3)
    assert p.bound_on("h200") == "compute"
    assert p.fraction_of_ceiling("h200") == pytest.approx(w.flops / 1.6e-3 / 989.5e12)
    # memory-bound: an add at 2.4 TB/s is half of the H200 slope
    add = elementwise(1 << 28, dtype="float32")
    q = RooflinePoint.from_work(add, seconds=add.bytes / 2.4e12)
    assert q.bound_on("h200") == "memory"
    assert q.fraction_of_ceiling("h200") == pytest.approx(0.5)
    # no FLOPs (a copy): fraction of the bandwidth
    copy = RooflinePoint("copy", 0.0, 4.8e9, "fp32", seconds=2e-3, measured=True)
    assert copy.fraction_of_ceiling("h200") == pytest.approx(0.5)
    # no time: nothing achieved
    r = RooflinePoint.from_work(w)
    assert not r.measured and r.achieved_flops is None and r.fraction_of_ceiling("h200") is None
    assert "counted" in r.describe()


# ---------------------------------------------------------------- projections

def test_projection_hand_computed():
    w = gemm(8192, 8192, 8192)                              # bf16, compute-bound
    pr = project(w, "h200")
    assert pr.compute_seconds == pytest.approx(2 * 8192 ** 3 / 989.5e12)
    assert pr.memory_seconds == pytest.approx(3 * 8192 * 8192 * 2 / 4.8e12)
    assert pr.seconds == pr.compute_seconds and pr.bound == "compute"
    assert pr.lower_bound is True and pr.peak == 989.5e12 and pr.bandwidth == 4.8e12
    add = elementwise(1 << 28, dtype="float32")             # memory-bound
    pa = project(add, "b200")
    assert pa.seconds == pytest.approx(3 * 4 * (1 << 28) / 8e12) and pa.bound == "memory"
    assert pa.attainable_flops == pytest.approx(add.intensity * 8e12)
    sparse = project(w, "h200", "sparse")
    assert sparse.compute_seconds == pytest.approx(pr.compute_seconds / 2)


def test_projection_is_a_lower_bound_for_any_time_under_the_roof():
    """A measured time that reaches at most 100 % of the ceiling is >= the projection."""
    w = softmax(8192, 8192)
    best = project(w, "h200").seconds
    for fraction in (1.0, 0.9, 0.3):
        t = best / fraction
        p = RooflinePoint.from_work(w, seconds=t, device="NVIDIA H200")
        assert p.fraction_of_ceiling("h200") == pytest.approx(fraction)
        assert t >= best * (1 - 1e-12)


@given(st.floats(0, 1e15), st.floats(1, 1e12), st.sampled_from(["b200", "rtx5090", "h200"]))
def test_projection_properties(flops, nbytes, key):
    p = RooflinePoint("k", flops, nbytes, "bf16")
    pr = project(p, key)
    assert pr.seconds >= pr.compute_seconds and pr.seconds >= pr.memory_seconds
    assert pr.attainable_flops == pytest.approx(attainable(key, p.intensity, "bf16"), rel=1e-9,
                                                abs=1e-6)


def test_projection_to_a_gpu_without_the_units():
    w = gemm(1024, 1024, 1024, a_dtype="fp4")
    with pytest.raises(UnsupportedPrecisionError) as info:
        project(w, "h200")
    assert isinstance(info.value, KeyError) and "fp4" in str(info.value)
    assert project(w, "b200").seconds > 0


def test_predict_here_is_the_one_prediction_and_its_point_carries_it():
    """``tilelab.perf.roofline.predict`` is ``tilelab.perf.predict``: a Prediction whose
    bound is the projection and whose point's time is the predicted total."""
    import tilelab.perf
    from tilelab.perf.prediction import Prediction

    assert predict is tilelab.perf.predict
    w = gemm(4096, 4096, 4096)
    pr = predict(w, "rtx5090")
    assert isinstance(pr, Prediction) and pr.gpu == "NVIDIA GeForce RTX 5090"
    assert pr.bound_s == project(w, "rtx5090").seconds
    p = pr.point()
    assert not p.measured and p.device == "NVIDIA GeForce RTX 5090"
    assert p.seconds == pr.total_s > pr.bound_s and p.prediction is pr
    assert p.fraction_of_ceiling("rtx5090") < 1.0
    assert "predicted for NVIDIA GeForce RTX 5090" in p.describe()


# ---------------------------------------------------------------- the model and its data

def test_roofline_collects_gpus_and_points():
    r = Roofline()
    assert [g.key for g in r.gpus] == ["b200", "rtx5090", "h200"]
    current = measured_spec("NVIDIA H200", copy_bandwidth=4.2e12, gemm_flops=7.5e14)
    r.add_gpu(current)
    r.add_gpu("h200")                                       # same key replaces, moves last
    assert [g.key for g in r.gpus] == ["b200", "rtx5090", "current", "h200"]
    p = r.add_work(gemm(4096, 4096, 4096), seconds=2e-4, device="NVIDIA H200")
    assert r.gpu_of(p) is current                           # measured ceilings win
    with pytest.raises(TypeError):
        r.add_point(gemm(2, 2, 2))                          # a Work is not a point
    assert [g.key for g in Roofline("5090").gpus] == ["rtx5090"]   # one name, not its letters


def test_series_structure_for_the_plotter():
    r = Roofline(["h200", "b200"])
    measured = r.add_work(gemm(8192, 8192, 8192), seconds=1.6e-3, device="NVIDIA H200")
    r.add_work(gemm(2048, 2048, 2048, a_dtype="fp4"))
    d = r.series()
    assert d["units"]["intensity"] == "FLOP/B" and d["units"]["performance"] == "FLOP/s"
    assert d["density"] == "dense"
    lo, hi = d["intensity_range"]
    assert math.log2(lo).is_integer() and math.log2(hi).is_integer()
    assert all(lo <= pt["intensity"] <= hi for pt in d["points"])
    h200, b200 = d["gpus"]
    assert h200["memory"]["value"] == 4.8e12
    assert [c["precision"] for c in h200["ceilings"]] == ["fp32", "bf16"]
    assert h200["unsupported"][0]["precision"] == "fp4"
    assert "no fp4 rate" in h200["unsupported"][0]["reason"]
    assert [c["precision"] for c in b200["ceilings"]] == ["fp32", "bf16", "fp4"]
    bf16 = h200["ceilings"][1]
    ridge = 989.5e12 / 4.8e12
    assert bf16["ridge"]["intensity"] == pytest.approx(ridge)
    assert bf16["polyline"]["intensity"] == [lo, pytest.approx(ridge), hi]
    assert bf16["polyline"]["performance"] == [pytest.approx(lo * 4.8e12), 989.5e12, 989.5e12]
    assert bf16["polyline"]["log10_intensity"][0] == pytest.approx(math.log10(lo))
    assert bf16["source"]["url"].startswith("https://")
    pm, pp = d["points"]
    assert pm["measured"] and pm["measured_on"] == "h200"
    assert pm["performance"] == pytest.approx(measured.achieved_flops)
    assert pm["on"]["h200"]["fraction_of_ceiling"] == pytest.approx(
        measured.fraction_of_ceiling("h200"))
    assert "fraction_of_ceiling" not in pm["on"]["b200"]
    assert pm["on"]["b200"]["bound_seconds"] == pytest.approx(project(measured, "b200").seconds)
    assert pp["performance"] is None and not pp["measured"]
    assert pp["on"]["h200"] == {"supported": False, "reason": pp["on"]["h200"]["reason"]}
    json.dumps(d)                                           # plain data, all the way down


def test_series_clips_the_polyline_to_the_range():
    r = Roofline(["h200"])
    below = r.series((1000.0, 4000.0), ["bf16"])["gpus"][0]["ceilings"][0]["polyline"]
    assert below["intensity"] == [1000.0, 4000.0] and below["performance"] == [989.5e12] * 2
    above = r.series((0.5, 2.0), ["bf16"])["gpus"][0]["ceilings"][0]["polyline"]
    assert above["performance"] == [0.5 * 4.8e12, 2.0 * 4.8e12]
    with pytest.raises(ValueError, match="0 < lo < hi"):
        r.series((4.0, 2.0))
    with pytest.raises(UnknownPrecisionError):
        r.series(precisions=["bf61"])


def test_sparse_roofline_and_projections():
    r = Roofline(["h200", "b200"], density="sparse")
    r.add_work(gemm(4096, 4096, 4096))
    bf16 = r.series(precisions=["bf16"])["gpus"][0]["ceilings"][0]
    assert bf16["value"] == 1979e12 and bf16["density"] == "sparse"
    assert len(r.projections()) == 2
    assert Roofline().default_precisions() == ("fp32", "bf16", "fp8")


# ---------------------------------------------------------------- formatting

@pytest.mark.parametrize("value,text", [
    (7.3e14, "730 TFLOP/s"), (989.5e12, "989.5 TFLOP/s"), (2.25e15, "2.25 PFLOP/s"),
    (999.99e12, "1 PFLOP/s"), (67e12, "67 TFLOP/s"), (1.5e9, "1.5 GFLOP/s"), (0.0, "0 FLOP/s"),
    (12.0, "12 FLOP/s"), (-3e12, "-3 TFLOP/s"), (None, "n/a"),
])
def test_format_flops(value, text):
    assert format_flops(value) == text


def test_other_formats():
    assert format_flops(660.6e12, unit="OP/s") == "660.6 TOP/s"
    assert format_flops(7.345678e14, digits=3) == "735 TFLOP/s"
    assert format_bandwidth(4.8e12) == "4.8 TB/s" and format_bandwidth(2039e9) == "2.039 TB/s"
    assert format_bytes(1_000) == "1 kB" and format_bytes(50 * 2 ** 20, binary=True) == "50 MiB"
    assert format_intensity(206.14583) == "206.1 FLOP/B"
    assert format_intensity(None) == "n/a"


@pytest.mark.parametrize("value,text", [
    (2.5, "2.5 s"), (125.0, "125 s"), (0.0123, "12.3 ms"), (1.5e-6, "1.5 µs"),
    (30.54e-6, "30.54 µs"), (7e-9, "7 ns"), (3e-13, "0.3 ps"), (0.99999999, "1 s"),
    (999.99999e-6, "1 ms"), (1e-3, "1 ms"), (None, "n/a"),
])
def test_format_seconds(value, text):
    assert format_seconds(value) == text


def test_doctests():
    """The roofline's examples, in the modules it re-exports too."""
    import tilelab.perf.roofline_point
    import tilelab.perf.roofs
    import tilelab.perf.units

    results = [doctest.testmod(m) for m in (roofline_module, tilelab.perf.roofline_point,
                                            tilelab.perf.roofs, tilelab.perf.units)]
    assert sum(r.attempted for r in results) > 40
    assert [r.failed for r in results] == [0, 0, 0, 0]
