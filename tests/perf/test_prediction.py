"""The one prediction API (``tilelab.perf.predict``): its parts and what they mean.

A Prediction names the roofline bound, the kernel body, the launch floor and the total;
the bound never exceeds the body, the total is floor + body, the verdict says in plain
words what the time is made of, and every input form (counted work, an interpreter trace,
a launch shape) gives the same answer for the same launch.
"""
from __future__ import annotations

import doctest
import itertools
from types import SimpleNamespace

import pytest

import tilelab.perf
import tilelab.perf.prediction as prediction_module
from tilelab.perf import Prediction, predict
from tilelab.perf.counting import Work, elementwise, gemm, gemv, softmax
from tilelab.perf.predict_model import CONSTANTS, GemmShape, LaunchShape, compulsory_gemm_bytes
from tilelab.perf.prediction import format_pair, gpu_for_arch, launch_shape
from tilelab.perf.specs import UnsupportedPrecisionError, lookup_gpu

FLOOR = CONSTANTS["launch_floor"].value


def test_one_function_one_name():
    import tilelab.perf.roofline as roofline

    assert tilelab.perf.predict is prediction_module.predict is roofline.predict
    assert tilelab.perf.Prediction is Prediction
    with pytest.raises(AttributeError):
        tilelab.perf.predict_launch      # noqa: B018 - the second path is gone


def _shapes():
    """Launch shapes across the model's regimes: tiny and huge grids, known and unknown
    resources, padding, GEMMs with row-major and grouped orders, tiles that fit L2 and
    tile traffic far above the compulsory bytes."""
    for blocks, flops, dram in itertools.product((None, 1, 133, 60 * 132),
                                                 (0.0, 1e6, 1e12), (1e4, 1e9)):
        for res in ({}, {"threads": 128, "registers": 255}):
            yield LaunchShape(blocks, flops, 1.5 * flops, dram, "fp32", **res)
    for n, tile, k_step in ((512, 64, 32), (4096, 128, 64), (8192, 16, 32)):
        g = GemmShape(n, n, n, tile, tile, tile_k=k_step)
        traffic = 2.0 * n * n * 2 * (n // tile) + 2.0 * n * n   # every panel re-read
        yield LaunchShape((n // tile) ** 2, 2.0 * n ** 3, 2.0 * n ** 3, traffic, "bf16",
                          256, 255, gemm=g)


@pytest.mark.parametrize("gpu", ["h200", "b200", "rtx5090", "a100"])
def test_the_parts_add_up_and_the_bound_is_never_above_the_body(gpu):
    for shape in _shapes():
        p = predict(shape, gpu)
        assert p.total_s == p.launch_s + p.kernel_s
        assert p.launch_s == FLOOR
        assert 0 < p.bound_s <= p.kernel_s * (1 + 1e-12), (shape, p.summary())
        assert p.total_s >= p.launch_s       # no time is ever below the launch floor
        assert p.limited_by in ("launch floor", "math", "DRAM", "block latency")
        assert p.launch_bound == (p.launch_s >= p.kernel_s)


def test_a_gemm_bound_prices_its_compulsory_bytes_not_its_tile_traffic():
    """The model lets L2 serve re-read panels, so a GEMM's body may move fewer bytes than
    its tiles ask for; its bound then prices A, B and C once (still a lower bound)."""
    n, tile = 512, 64
    g = GemmShape(n, n, n, tile, tile, tile_k=32)
    traffic = 2.0 * n * n * 2 * (n // tile) + 2.0 * n * n
    p = predict(LaunchShape((n // tile) ** 2, 2.0 * n ** 3, 2.0 * n ** 3, traffic, "bf16",
                            gemm=g), "h200")
    assert p.bytes == traffic and p.bound_bytes == compulsory_gemm_bytes(g) < traffic
    assert p.bound_s <= p.kernel_s


def test_every_input_form_gives_the_same_prediction_for_the_same_launch():
    trace = SimpleNamespace(kernel="add", num_blocks=16, flops=16384.0,
                            flops_executed=16384.0, bytes=196608.0, flops_mma=0,
                            flops_elementwise=16384, args={"x": SimpleNamespace(
                                dtype="float32")})
    work = elementwise(1 << 14, dtype="float32", name="add")
    from_trace = predict(trace, "h200")
    from_work = predict(work, "h200", blocks=16)
    from_shape = predict(LaunchShape(16, 16384.0, 16384.0, 196608.0, "fp32"), "h200",
                         name="add")
    assert from_trace.to_dict() == from_work.to_dict() == from_shape.to_dict()
    assert from_trace.name == "add" and from_trace.precision == "fp32"


def test_counted_work_without_a_grid_is_said_to_fill_whole_waves():
    p = predict(gemv(4096, 4096), "h200")
    assert not p.terms.grid_known and p.terms.wave_use == 1.0
    assert any("grid not given" in a for a in p.assumptions)
    assert "grid not given" in p.summary()
    assert launch_shape(gemv(8, 8)).blocks is None


@pytest.mark.parametrize("work, text", [
    (elementwise(1 << 14, dtype="float32"),
     "launch-bound: ~3.9 µs of launch, 0.043 µs of bytes"),
    (elementwise(1 << 26, dtype="float32"), "memory-bound: 176 µs of bytes, + 3.9 µs of launch"),
    (gemm(4096, 4096, 4096), "compute-bound: 200 µs of math, + 3.9 µs of launch"),
])
def test_the_verdict_says_what_the_time_is_made_of(work, text):
    assert predict(work, "h200").verdict == text


def test_a_verdict_keeps_each_time_in_its_own_unit_unless_they_compare():
    p = predict(LaunchShape(16384, 2.0 * 4096 ** 3, 2.0 * 4096 ** 3, 1e8, "bf16",
                            gemm=GemmShape(4096, 4096, 4096, 32, 32, tile_k=32)), "h200")
    assert p.verdict.startswith("compute-bound: 3") and p.verdict.endswith(
        " ms of math, + 3.9 µs of launch")


def test_a_latency_bound_verdict_names_the_waves():
    p = predict(LaunchShape(60 * 132, 1e6, 1e6, 1e7, "fp32", 256, 255), "h200")
    assert p.limited_by == "block latency"
    assert p.verdict.startswith("latency-bound: ") and "(60 waves)" in p.verdict


def test_summary_names_every_part_and_the_problem_it_was_predicted_at():
    p = predict(softmax(4096, 4096), "h200", at="rows=4096")
    text = p.summary()
    for part in ("launch floor", "kernel body", "roofline bound", "limited by",
                 "at rows=4096"):
        assert part in text, part
    assert p.to_dict()["at"] == "rows=4096" and p.point().describe().endswith(
        "(predicted for NVIDIA H200 SXM at rows=4096)")


def test_a_precision_the_gpu_lacks_is_refused():
    with pytest.raises(UnsupportedPrecisionError, match="fp8"):
        predict(gemm(1024, 1024, 1024, a_dtype="fp8"), "a100")
    with pytest.raises(TypeError, match="counted work"):
        predict(object(), "h200")


def test_constants_override_the_model():
    w = Work("copy", 0, 1 << 30, 1 << 30, "fp32")
    slow = predict(w, "h200", constants={"eff_memory": CONSTANTS["eff_memory"].__class__(
        "DRAM efficiency", 0.5, "fraction", "test")})
    assert slow.kernel_s == pytest.approx(2 * 2 ** 30 / (lookup_gpu("h200").bandwidth * 0.5))
    assert slow.bound_s == predict(w, "h200").bound_s      # the bound has no constants


def test_helpers():
    assert format_pair(3.92e-6, 1.2e-7) == ("3.9 µs", "0.12 µs")
    assert format_pair(2.5e-3, 3.9e-5) == ("2.5 ms", "0.039 ms")
    assert format_pair(3.92e-6, 1.8e-12) == ("3.9 µs", "1.8 ps")          # its own unit
    assert [gpu_for_arch(a) for a in ("sm_90", "sm_100", "sm_120", "sm_80", "sm_70")] == \
        ["h200", "b200", "rtx5090", "a100", "h200"]


def test_doctests():
    result = doctest.testmod(prediction_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 10
