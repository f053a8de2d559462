"""Tests of the GPU spec table: sources, dense/sparse consistency, sanity bounds, lookups."""
from __future__ import annotations

import dataclasses
import doctest
import math
from pathlib import Path

import pytest

import tilelab.perf.specs as specs_module
from tilelab.errors import TilelabError
from tilelab.perf.specs import (GPUS, PRECISIONS, ROOFLINE_GPUS, SOURCE_KINDS, Density, GiB,
                                MiB, Peak, Source, UnknownGPUError, UnknownPrecisionError,
                                UnsupportedPrecisionError, check_precision, lookup_gpu,
                                measured_spec, spec_for_device)

ALL = list(GPUS.values())
IDS = [s.key for s in ALL]


def rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


# ---------------------------------------------------------------- the table itself

def test_table_holds_the_seven_gpus_with_their_arch():
    assert {k: s.arch for k, s in GPUS.items()} == {
        "b200": "sm_100", "rtx5090": "sm_120", "h200": "sm_90", "h100": "sm_90",
        "a100": "sm_80", "l40s": "sm_89", "rtx4090": "sm_89"}
    for s in ALL:
        assert s.arch == "sm_%d%d" % s.compute_capability
        assert not s.measured
    assert ROOFLINE_GPUS == ("b200", "rtx5090", "h200")


@pytest.mark.parametrize("spec", ALL, ids=IDS)
def test_every_number_has_a_source(spec):
    figures = spec.figures()
    # all five scalar figures are present for table entries, plus two per tensor rate
    for name in ("memory_bandwidth", "memory_size", "sm_count", "l2_size", "boost_clock"):
        assert name in figures, f"{spec.key} lacks {name}"
    for name, fig in figures.items():
        src = fig.source
        assert isinstance(src, Source)
        assert src.title.strip(), (spec.key, name)
        assert src.url.startswith("https://"), (spec.key, name, src.url)
        assert src.kind in SOURCE_KINDS and src.kind != "measured"
        if src.kind in ("derived", "third-party"):
            assert src.note, f"{spec.key}.{name}: a {src.kind} number must say how"
        assert fig.value > 0 and math.isfinite(fig.value)
    assert spec.arch_source.url.startswith("https://")


@pytest.mark.parametrize("spec", ALL, ids=IDS)
def test_sparse_is_twice_dense_and_only_for_tensor_precisions(spec):
    for p in spec.rates:
        assert p.precision in PRECISIONS
        if p.sparse is None:
            continue
        assert PRECISIONS[p.precision].tensor, f"{spec.key} {p.precision} has a sparse rate"
        # vendors round (RTX 5090 TF32 prints 104.8 / 209.5): 0.1 % slack, no more
        assert rel(p.sparse, 2 * p.dense) < 1e-3, (spec.key, p.precision, p.dense, p.sparse)
        if p.listed == "sparse":
            assert "dense = half" in p.source.note
    for key in ("fp32", "fp64"):
        assert spec.peaks[key].sparse is None
        with pytest.raises(UnsupportedPrecisionError):
            spec.peak(key, "sparse")


def test_density_is_explicit_in_every_lookup():
    h = lookup_gpu("h200")
    assert h.peak("bf16") == h.peak("bf16", Density.DENSE) == h.peak("bf16", "dense")
    assert h.peak("bf16", "sparse") == 2 * h.peak("bf16")
    with pytest.raises(ValueError, match="dense' or 'sparse"):
        h.peak("bf16", "half")


# ---------------------------------------------------------------- sanity bounds

def test_hopper_numbers():
    h200, h100 = lookup_gpu("h200"), lookup_gpu("h100")
    assert h200.bandwidth == 4.8e12
    assert h100.bandwidth == 3.35e12
    for s in (h200, h100):
        assert rel(s.peak("bf16"), 989e12) < 2e-3
        assert rel(s.peak("fp16"), 989e12) < 2e-3
        assert s.peak("bf16", "sparse") == 1979e12
        assert rel(s.peak("fp8"), 1979e12) < 1e-3
        assert rel(s.peak("tf32"), 494.5e12) < 1e-3
        assert s.peak("fp64_tc") == 67e12 and s.peak("fp64") == 34e12
        assert s.sm_count.value == 132 and s.l2_size.value == 50 * MiB
    assert h200.memory_size.value == 141 * GiB and h100.memory_size.value == 80 * GiB


def test_blackwell_numbers():
    b200, r5090 = lookup_gpu("b200"), lookup_gpu("rtx5090")
    assert b200.bandwidth == 8e12
    assert b200.peak("bf16") == 2.25e15 and b200.peak("fp8") == 4.5e15
    assert b200.peak("fp4") == 9e15 and b200.peak("fp4", "sparse") == 18e15
    assert b200.sm_count.value == 148
    assert r5090.bandwidth == 1792e9 and r5090.sm_count.value == 170
    assert r5090.peak("fp4") == 1676e12 and r5090.peak("fp4", "sparse") == 3352e12


@pytest.mark.parametrize("key", ["rtx5090", "rtx4090"])
def test_geforce_halves_fp32_accumulation(key):
    s = lookup_gpu(key)
    assert rel(s.peak("fp16"), s.peak("fp16_acc16") / 2) < 1e-3
    assert rel(s.peak("bf16"), s.peak("fp16_acc16") / 2) < 1e-3
    assert rel(s.peak("fp8"), s.peak("fp8_acc16") / 2) < 1e-3


@pytest.mark.parametrize("key", ["b200", "h200", "h100", "a100", "l40s"])
def test_data_center_parts_do_not_halve_fp32_accumulation(key):
    s = lookup_gpu(key)
    assert s.peak("fp16") == s.peak("fp16_acc16") == s.peak("bf16")
    if s.supports("fp8"):
        assert s.peak("fp8") == s.peak("fp8_acc16")


def test_which_parts_have_which_units():
    assert [k for k, s in GPUS.items() if s.supports("fp4")] == ["b200", "rtx5090"]
    assert [k for k, s in GPUS.items() if not s.supports("fp8")] == ["a100"]
    assert [k for k, s in GPUS.items() if s.supports("fp64_tc")] == ["b200", "h200", "h100",
                                                                     "a100"]


@pytest.mark.parametrize("spec", ALL, ids=IDS)
def test_rates_are_ordered_and_in_range(spec):
    p = spec.peak
    assert 1e12 < p("fp32") < 2e14
    assert p("tf32") >= p("fp32") * 0.99
    assert p("bf16") > p("tf32") * 1.9
    assert p("fp16_acc16") >= p("fp16")
    if spec.supports("fp8"):
        assert p("fp8") >= p("bf16") * 1.9
    if spec.supports("fp4"):
        assert p("fp4") >= p("fp8") * 1.9
    assert p("int8") >= p("bf16") * 1.9
    assert 1 < spec.ridge("bf16") < 1000
    assert 0.5e12 < spec.bandwidth < 1e13
    assert 24 * GiB <= spec.memory_size.value <= 192 * GiB
    assert 40 * MiB <= spec.l2_size.value <= 128 * MiB


@pytest.mark.parametrize("spec", ALL, ids=IDS)
def test_fp32_rate_matches_sm_count_and_clock(spec):
    """FP32 = SMs x FP32 lanes x 2 FLOP x clock: catches a typo in any of the four."""
    lanes = 64 if spec.arch == "sm_80" else 128
    predicted = spec.sm_count.value * lanes * 2 * spec.boost_clock.value
    assert rel(predicted, spec.peak("fp32")) < 0.03, (spec.key, predicted)


def test_fp64_of_geforce_class_parts_is_derived_one_sixty_fourth():
    for key in ("rtx5090", "rtx4090", "l40s"):
        s = lookup_gpu(key)
        assert s.peak("fp64") == pytest.approx(s.peak("fp32") / 64)
        assert s.peaks["fp64"].source.kind == "derived"


# ---------------------------------------------------------------- immutability

def test_table_is_immutable():
    s = lookup_gpu("h200")
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        GPUS["x"] = s  # type: ignore[index]
    with pytest.raises(TypeError):
        s.peaks["bf16"] = s.peaks["fp16"]  # type: ignore[index]
    with pytest.raises(TypeError):
        PRECISIONS["x"] = PRECISIONS["fp32"]  # type: ignore[index]


def test_peak_validates_itself():
    src = Source("t", "https://x")
    with pytest.raises(ValueError, match="no sparse rate"):
        Peak("fp32", 1e12, 2e12, "both", src)
    with pytest.raises(ValueError, match="positive"):
        Peak("bf16", 0.0, None, "dense", src)
    with pytest.raises(UnknownPrecisionError):
        Peak("bf61", 1.0, None, "dense", src)
    with pytest.raises(ValueError, match="listed"):
        Peak("bf16", 1.0, None, "guessed", src)
    with pytest.raises(ValueError, match="kind"):
        Source("t", "u", kind="rumour")


# ---------------------------------------------------------------- lookups

@pytest.mark.parametrize("name,key", [
    ("b200", "b200"), ("B200", "b200"), ("NVIDIA B200", "b200"), ("HGX B200", "b200"),
    ("rtx5090", "rtx5090"), ("5090", "rtx5090"), ("RTX 5090", "rtx5090"),
    ("NVIDIA GeForce RTX 5090", "rtx5090"), ("geforce-rtx-5090", "rtx5090"),
    ("h200", "h200"), ("H200 SXM", "h200"), ("h200-sxm", "h200"), ("NVIDIA H200", "h200"),
    ("H100", "h100"), ("h100 sxm5", "h100"), ("NVIDIA H100 80GB HBM3", "h100"),
    ("A100", "a100"), ("a100-sxm4-80gb", "a100"), ("NVIDIA A100-SXM4-80GB", "a100"),
    ("L40S", "l40s"), ("4090", "rtx4090"), ("NVIDIA GeForce RTX 4090", "rtx4090"),
])
def test_lookup_aliases(name, key):
    assert lookup_gpu(name).key == key


def test_lookup_passes_specs_through():
    s = lookup_gpu("h200")
    assert lookup_gpu(s) is s


@pytest.mark.parametrize("name", ["rtx 9090", "", "H100 PCIe", "NVIDIA H200 NVL", "T4"])
def test_lookup_errors_list_the_known_gpus(name):
    with pytest.raises(UnknownGPUError) as info:
        lookup_gpu(name)
    err = info.value
    assert isinstance(err, KeyError) and isinstance(err, TilelabError)
    text = str(err)
    assert text.startswith(f"unknown GPU {name!r}")
    for spec in ALL:
        assert spec.key in text and spec.name in text
    assert "measured_spec" in text  # the hint says what to do instead


@pytest.mark.parametrize("device,key", [
    ("NVIDIA B200", "b200"), ("NVIDIA GeForce RTX 5090", "rtx5090"), ("NVIDIA H200", "h200"),
    ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA A100-SXM4-80GB", "a100"),
    ("NVIDIA L40S", "l40s"), ("NVIDIA GeForce RTX 4090", "rtx4090"),
])
def test_spec_for_device_maps_cuda_names(device, key):
    assert spec_for_device(device).key == key


@pytest.mark.parametrize("device", [
    "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200 NVL", "NVIDIA A100-SXM4-40GB",
    "NVIDIA A100 80GB PCIe", "NVIDIA L40", "NVIDIA GeForce RTX 4090 D",
    "NVIDIA GeForce RTX 5080", "Tesla T4", "", "cpu",
])
def test_spec_for_device_returns_none_for_other_devices(device):
    assert spec_for_device(device) is None


def test_precision_errors():
    with pytest.raises(UnknownPrecisionError) as info:
        check_precision("bf61")
    assert isinstance(info.value, ValueError)
    assert "bf16" in str(info.value) and "fp16_acc16" in str(info.value)
    with pytest.raises(UnsupportedPrecisionError) as info:
        lookup_gpu("a100").peak("fp8")
    assert isinstance(info.value, KeyError)
    assert str(info.value).startswith("NVIDIA A100 80GB SXM has no fp8 rate")
    assert "tf32" in str(info.value)  # lists what the part does have
    with pytest.raises(UnknownPrecisionError):
        lookup_gpu("h200").peak("fp7")
    assert lookup_gpu("h200").supports("fp8") and not lookup_gpu("h200").supports("fp4")


# ---------------------------------------------------------------- measured specs

def test_measured_spec_of_a_known_device():
    s = measured_spec("NVIDIA H200", copy_bandwidth=4.1e12,
                      gemm_flops={"bf16": 7.3e14, "fp8": 1.3e15}, method="cuBLAS 8192^3")
    assert s.measured and s.key == "current" and s.name == "NVIDIA H200 (measured)"
    assert s.bandwidth == 4.1e12
    assert s.precisions == ("bf16", "fp8")           # only what was measured
    assert s.peak("bf16") == 7.3e14
    assert s.peaks["bf16"].sparse is None
    assert s.memory_bandwidth.source.kind == "measured"
    assert s.peaks["fp8"].source.kind == "measured" and "cuBLAS" in s.peaks["fp8"].source.note
    # static figures come from the table, with their own sources
    assert s.sm_count == lookup_gpu("h200").sm_count and s.arch == "sm_90"
    assert s.matches("NVIDIA H200") and s.matches("current")
    assert lookup_gpu(s) is s


def test_measured_spec_of_an_unknown_device():
    with pytest.raises(ValueError, match="compute_capability"):
        measured_spec("NVIDIA RTX A6000", copy_bandwidth=7e11, gemm_flops=1.5e14)
    s = measured_spec("NVIDIA RTX A6000", copy_bandwidth=7e11, gemm_flops=1.5e14,
                      precision="fp16", compute_capability=(8, 6))
    assert s.arch == "sm_86" and s.precisions == ("fp16",) and s.sm_count is None


@pytest.mark.parametrize("kwargs", [
    {"copy_bandwidth": 0.0, "gemm_flops": 1e14},
    {"copy_bandwidth": 1e12, "gemm_flops": -1.0},
    {"copy_bandwidth": 1e12, "gemm_flops": {}},
    {"copy_bandwidth": float("nan"), "gemm_flops": 1e14},
    {"copy_bandwidth": 1e12, "gemm_flops": {"bf61": 1e14}},
])
def test_measured_spec_rejects_bad_numbers(kwargs):
    with pytest.raises(ValueError):
        measured_spec("NVIDIA H200", **kwargs)


def _tera(value: float) -> str:
    return f"{round(value / 1e12, 3):g}"


@pytest.mark.parametrize("spec", ALL, ids=IDS)
def test_docs_page_agrees_with_the_table(spec):
    doc = (Path(__file__).resolve().parents[2] / "docs" / "gpu-specs.md").read_text()
    section = doc.split(f"#### {spec.name}\n", 1)[1].split("####", 1)[0]
    assert f"| memory_bandwidth | {spec.bandwidth / 1e12:g} TB/s |" in section
    assert f"| sm_count | {spec.sm_count.value} |" in section
    for p in spec.rates:
        value = _tera(p.dense) + (f" / {_tera(p.sparse)}" if p.sparse is not None else "")
        assert f"| `{p.precision}` | {value} " in section, (spec.key, p.precision, value)
        assert p.source.url in section


def test_doctests():
    result = doctest.testmod(specs_module)
    assert result.attempted > 20 and result.failed == 0
