"""Measured ceilings: the pure arithmetic and caching everywhere, the measurement on a GPU."""
from __future__ import annotations

import doctest

import numpy as np
import pytest

import tilelab as tl
import tilelab.perf.ceilings as ceilings
from tilelab.perf.ceilings import (CeilingsUnavailable, MeasuredCeilings, copy_kernel,
                                   copy_rate, current_ceilings, gemm_rate, measure_ceilings)
from tilelab.perf.roofline import Roofline
from tilelab.runtime.device import gpu_available


def test_rates():
    assert copy_rate(1 << 30, 1e-3) == pytest.approx(2 * 2**30 / 1e-3)
    assert gemm_rate(8192, 8192, 8192, 1.0) == 2 * 8192 ** 3
    with pytest.raises(ValueError):
        copy_rate(0, 1.0)
    with pytest.raises(ValueError):
        gemm_rate(8, 8, 8, 0.0)


def test_measured_ceilings_feed_measured_spec():
    m = MeasuredCeilings(4.2e12, 6.0e14, gpu_name="NVIDIA H200", method="tilelab copy+gemm",
                         date="2026-12-01")
    spec = m.spec()
    assert spec.measured and spec.key == "current"
    assert spec.bandwidth == 4.2e12 and spec.peak("bf16") == 6.0e14
    assert spec.arch == "sm_90" and spec.sm_count.value == 132   # sizes from the datasheet
    assert "tilelab copy+gemm" in spec.memory_bandwidth.source.note
    assert m.ridge() == pytest.approx(6.0e14 / 4.2e12)
    r = Roofline(["h200"])
    r.add_gpu(spec)
    assert [g.key for g in r.gpus] == ["h200", "current"]
    assert m.to_dict()["gpu_name"] == "NVIDIA H200"
    assert "copy 4.2 TB/s" in str(m) and "600 TFLOP/s" in str(m)


def test_unknown_gpu_uses_its_compute_capability():
    m = MeasuredCeilings(1e12, 1e14, gpu_name="NVIDIA Future GPU", compute_capability=(12, 1))
    assert m.spec().arch == "sm_121"


def test_invalid_numbers_are_refused():
    with pytest.raises(ValueError, match="copy_bytes_per_s must be a positive"):
        MeasuredCeilings(0.0, 1e14)
    with pytest.raises(ValueError, match="gemm_flops_per_s"):
        MeasuredCeilings(1e12, float("nan"))


def test_copy_kernel_is_a_safe_copy():
    k = copy_kernel()
    assert repr(k) == "<tl.kernel copy(z: Out, x: In)>"
    x = tl.arange(1000, dtype="float32", device="cpu")
    z = tl.zeros(1000, device="cpu")
    k(z.partition(256), x)
    assert np.array_equal(z.numpy(), x.numpy())
    assert copy_kernel() is k


def test_cache_and_refresh(monkeypatch):
    calls = []

    class FakeGPU:
        name = "NVIDIA H200"
        compute_capability = (9, 0)

    monkeypatch.setattr(ceilings, "_require_gpu", lambda device: FakeGPU())
    monkeypatch.setattr(ceilings, "_measure_copy",
                        lambda nbytes, tiles, rep, warmup: (calls.append("copy") or 4.1e12,
                                                            tiles[0]))
    monkeypatch.setattr(ceilings, "_measure_gemm",
                        lambda size, rep, warmup: calls.append("gemm") or 6.1e14)
    ceilings.clear_cache()
    try:
        a = measure_ceilings()
        b = measure_ceilings()
        assert a is b and calls == ["copy", "gemm"]
        assert a.gpu_name == "NVIDIA H200" and a.precision == "bf16"
        assert "8192^3" in a.method and "tile 1024" in a.method and a.date
        c = measure_ceilings(refresh=True)
        assert c is not a and calls == ["copy", "gemm"] * 2
        assert current_ceilings() is c
    finally:
        ceilings.clear_cache()


@pytest.mark.skipif(gpu_available(), reason="checks the error without a GPU")
def test_without_a_gpu_the_error_says_why():
    with pytest.raises(CeilingsUnavailable, match="no usable GPU") as info:
        measure_ceilings()
    assert "datasheet ceilings" in str(info.value)
    assert current_ceilings() is None


def test_only_gpus_are_measured():
    with pytest.raises(ValueError, match="device must be 'cuda'"):
        measure_ceilings("cpu")


@pytest.mark.skipif(not gpu_available(), reason="no usable GPU")
def test_measure_on_the_gpu():
    ceilings.clear_cache()
    m = measure_ceilings(copy_bytes=256 << 20, copy_tiles=(1024,), gemm_size=4096, rep=5,
                         warmup=2)
    assert 1e11 < m.copy_bytes_per_s < 2e13          # 100 GB/s .. 20 TB/s
    assert 1e13 < m.gemm_flops_per_s < 5e15          # 10 TFLOP/s .. 5 PFLOP/s
    assert measure_ceilings(copy_bytes=256 << 20, copy_tiles=(1024,), gemm_size=4096,
                            rep=5, warmup=2) is m
    assert m.spec().measured


def test_doctests():
    result = doctest.testmod(ceilings, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 10
