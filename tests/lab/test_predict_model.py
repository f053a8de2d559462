"""The CPU prediction model moves the way the hardware does: launch floor for tiny grids,
the last wave's idle SMs, padding waste, grouped schedules re-reading less DRAM, small
tiles reaching less of the MMA peak, partial waves still streaming at full bandwidth, and
many waves of few resident blocks bound by the block latency."""
from __future__ import annotations

import doctest
from pathlib import Path

import pytest

import tilelab.perf.predict_model as predict_module
from tilelab.compiler.tile_index import grouped_tile_index
from tilelab.perf import predict
from tilelab.perf.predict_model import (CONSTANTS, DEFAULT_TILE_K, GemmShape, LaunchShape,
                                        blocks_per_sm, gemm_dram_bytes, tile_efficiency)
from tilelab.perf.specs import lookup_gpu

H200 = lookup_gpu("h200")
SMS = int(H200.sm_count.value)


def shape(blocks, flops=1e9, executed=None, dram=1e8, **kw):
    return LaunchShape(blocks=blocks, useful_flops=flops, executed_flops=executed or flops,
                       dram_bytes=dram, precision="fp32", **kw)


def test_tiny_grids_are_dominated_by_the_launch_floor():
    p = predict(shape(1, flops=1e3, dram=1e4), "h200")
    assert p.limited_by == "launch floor"
    assert p.total_s == pytest.approx(CONSTANTS["launch_floor"].value, rel=0.2)
    assert p.total_s > 100 * p.bound_s          # the roofline bound says nothing here


def test_the_model_is_never_faster_than_the_roofline_bound():
    for blocks in (1, SMS, 10 * SMS + 7):
        for dram in (1e4, 1e9):
            p = predict(shape(blocks, dram=dram), "h200")
            assert p.kernel_s >= p.bound_s and p.total_s == p.launch_s + p.kernel_s


def test_last_wave_effect():
    full = predict(shape(SMS), "h200")
    one_more = predict(shape(SMS + 1), "h200")       # same work, one more block
    assert (full.terms.waves, one_more.terms.waves) == (1, 2)
    assert one_more.terms.idle_sms_last_wave == SMS - 1
    assert one_more.total_s > 1.8 * full.total_s - CONSTANTS["launch_floor"].value
    many = predict(shape(40 * SMS + 1), "h200")      # a long tail matters less
    assert many.terms.wave_use > 0.97


def test_blocks_per_sm_from_resources():
    assert blocks_per_sm("sm_90", 128, 255, None)[0] == 2        # 64K registers / (255·128)
    assert blocks_per_sm("sm_90", 256, 32, 100 * 1024)[0] == 2   # 228 KiB / 100 KiB
    bps, why = blocks_per_sm("sm_90", None, None, None)
    assert bps == 1 and "unknown" in why
    small = predict(shape(2 * SMS, threads=128, registers=64), "h200")
    big = predict(shape(2 * SMS, threads=128, registers=255), "h200")
    assert small.terms.blocks_per_sm > big.terms.blocks_per_sm
    assert small.terms.waves == 1 and big.terms.waves == 1
    assert any("registers" in a or "threads" in a or "block limit" in a
               for a in small.assumptions)


def test_padding_waste_costs_time():
    exact = predict(shape(64 * SMS, flops=1e12, dram=1e6), "h200")
    padded = predict(shape(64 * SMS, flops=1e12, executed=1.5e12, dram=1e6), "h200")
    assert padded.terms.lane_efficiency == pytest.approx(1 / 1.5)
    assert padded.total_s > 1.4 * (exact.total_s - exact.launch_s)
    assert padded.bound_s == exact.bound_s       # the bound ignores padding


def _gemm(order=None, n=8192, tile=128):
    return GemmShape(n, n, n, tile, tile, order=order)


def test_grouped_schedule_reads_less_dram_than_row_major():
    g = 8192 // 128
    row_major = gemm_dram_bytes(_gemm(), SMS, 50e6)
    grouped = gemm_dram_bytes(_gemm([grouped_tile_index(i, g, g, 8) for i in range(g * g)]),
                              SMS, 50e6)
    assert grouped["bytes"] < 0.6 * row_major["bytes"]
    assert row_major["b_reads"] > grouped["b_reads"]
    # and the time follows when DRAM limits
    t_rm = predict(LaunchShape(g * g, 1e9, 1e9, 1e9, "bf16", gemm=_gemm()), "h200")
    t_gr = predict(LaunchShape(g * g, 1e9, 1e9, 1e9, "bf16", gemm=_gemm(
        [grouped_tile_index(i, g, g, 8) for i in range(g * g)])), "h200")
    assert t_gr.terms.dram_bytes < t_rm.terms.dram_bytes and t_gr.total_s < t_rm.total_s


def test_what_fits_in_l2_is_read_once_and_bigger_tiles_reread_less():
    small = gemm_dram_bytes(GemmShape(1024, 1024, 1024, 64, 64), SMS, 50e6)
    assert small["fits_l2"] and small["a_reads"] == 1.0
    t64 = gemm_dram_bytes(_gemm(tile=64), SMS, 50e6)
    t256 = gemm_dram_bytes(_gemm(tile=256), SMS, 50e6)
    assert t256["bytes"] < t64["bytes"]


def test_assumptions_are_stated_and_labelled():
    p = predict(shape(4), "h200")
    text = " ".join(p.assumptions)
    assert "launch floor" in text and "(calibrated: fitted to benchmarks/results/" in text
    assert "CUDA-core efficiency 60% (uncalibrated assumption" in text
    assert all(c.source for c in CONSTANTS.values())
    calibrated = [c for c in CONSTANTS.values() if c.calibrated]
    result = "benchmarks/results/predict_fit_h200_2026-12-02.json"
    assert len(calibrated) >= 5 and all(result in c.source for c in calibrated)
    assert (Path(__file__).resolve().parents[2] / result).is_file()
    assert {k for k, c in CONSTANTS.items() if not c.calibrated} == {"eff_cuda",
                                                                      "dram_sm_share"}
    assert "launch" in p.summary() and "wave" in p.summary()


def _tiled(tile, n=2048, tile_k=32, precision="bf16"):
    return GemmShape(n, n, n, tile, tile, tile_k=tile_k) if precision == "bf16" else \
        GemmShape(n, n, n, tile, tile, 4, 4, 4, tile_k=tile_k)


def test_tile_efficiency_grows_with_the_mma_and_saturates():
    effs = [tile_efficiency(_tiled(t), "bf16", "h200") for t in (8, 16, 32, 64, 128, 256)]
    assert all(a < b for a, b in zip(effs, effs[1:]))                 # monotonic
    assert 0 < effs[0] and 0.9 < effs[-1] < 1                         # saturating at 1
    gains = [b / a for a, b in zip(effs, effs[1:])]                   # each doubling of
    assert all(a > b for a, b in zip(gains, gains[1:])) and gains[-1] < 1.3   # ...less
    deep = tile_efficiency(_tiled(128, tile_k=64), "bf16", "h200")
    assert deep > effs[4]                                             # the K-step counts
    assert tile_efficiency(_tiled(128, tile_k=4096), "bf16", "h200") > 0.99
    # CUDA-core MMA takes far longer per step, so the step latency hardly matters there
    assert tile_efficiency(_tiled(64, precision="fp32"), "fp32", "h200") > 0.95 > effs[3]


def test_small_tiles_make_the_same_gemm_slower():
    n = 2048
    times = [predict(LaunchShape((n // t) ** 2, 2.0 * n ** 3, 2.0 * n ** 3,
                                        6.0 * n * n, "bf16", 256, 255, None, _tiled(t)),
                            "h200") for t in (16, 32, 64, 128)]
    assert all(a.total_s > b.total_s for a, b in zip(times, times[1:]))
    assert times[0].total_s > 20 * times[-1].total_s
    assert all(p.limited_by == "math" for p in times)
    assert times[0].terms.tile_efficiency < 0.05 and "tile MMA at" in times[0].summary()
    assert any("K-step latency" in a for a in times[0].assumptions)
    unknown = predict(LaunchShape(256, 1.0, 1.0, 1.0, "bf16",
                                         gemm=GemmShape(n, n, n, 128, 128)), "h200")
    assert any(f"K-step not given: {DEFAULT_TILE_K} assumed" in a
               for a in unknown.assumptions)


def test_a_partial_wave_streams_at_full_bandwidth():
    """A memory-bound grid that fills only some SMs is not slowed in proportion: a share
    of the SMs saturates DRAM (dram_sm_share), only very few blocks stream slower."""
    dram = 1e9
    full, half, few = (predict(shape(b, flops=1.0, dram=dram), "h200")
                       for b in (SMS, SMS // 2, 4))
    assert full.limited_by == half.limited_by == few.limited_by == "DRAM"
    assert half.terms.dram_s == pytest.approx(full.terms.dram_s)
    share = CONSTANTS["dram_sm_share"].value
    assert few.terms.dram_s == pytest.approx(full.terms.dram_s * share * SMS / 4)
    streamed = dram / (H200.bandwidth * CONSTANTS["eff_memory"].value)
    assert full.terms.dram_s == pytest.approx(streamed)
    sizes = [predict(shape(b, flops=1.0, dram=dram), "h200").total_s
             for b in (1, 2, 8, 32, 64, SMS)]
    assert all(a >= b for a, b in zip(sizes, sizes[1:]))


def test_many_waves_of_few_resident_blocks_wait_on_the_block_latency():
    blocks = 60 * SMS                                   # 255 registers: 1 block per SM
    known = predict(shape(blocks, flops=1e6, dram=1e7, threads=256, registers=255),
                           "h200")
    assert known.terms.waves == 60 and known.limited_by == "block latency"
    assert known.terms.latency_s == pytest.approx(59 * CONSTANTS["block_latency"].value)
    dense = predict(shape(blocks, flops=1e6, dram=1e7, threads=128, registers=16),
                           "h200")                      # 16 resident blocks: 4 waves
    assert dense.terms.waves == 4 and dense.total_s < known.total_s / 5
    unknown = predict(shape(blocks, flops=1e6, dram=1e7), "h200")
    assert unknown.terms.latency_s == 0 and unknown.limited_by != "block latency"
    assert any("block latency not applied" in a for a in unknown.assumptions)


def test_a_real_gemm_launch_predicts_with_tile_reuse():
    import numpy as np

    import tilelab as tl
    from tilelab.kernels.examples import gemm
    from tilelab.lab.figures.ownership import trace_launch
    from tilelab.lab.figures.roofline_plot import gemm_shape_of, point_from_trace
    from tilelab.runtime.events import subscribe

    a = tl.tensor(np.ones((256, 128), np.float32), device="cpu")
    b = tl.tensor(np.ones((128, 256), np.float32), device="cpu")
    seen = []
    for sched in (None, tl.grouped(2)):
        c = tl.empty((256, 256), device="cpu")
        stop = subscribe(seen.append)
        try:
            part = c.partition((64, 64), schedule=sched) if sched else c.partition((64, 64))
            gemm(part, a, b, 32)
        finally:
            stop()
    g = gemm_shape_of(seen[0], trace_launch(seen[0]))
    assert (g.m, g.n, g.k, g.tile_m, g.tile_n) == (256, 256, 128, 64, 64)
    p = point_from_trace(trace_launch(seen[1]), event=seen[1])
    assert p.prediction is not None and any("L2" in a for a in p.prediction.assumptions)


def test_a_square_gemm_is_recognised_and_a_square_elementwise_launch_is_not():
    import numpy as np

    import tilelab as tl
    from tilelab.kernels.examples import gemm, vector_add
    from tilelab.lab.figures.ownership import trace_launch
    from tilelab.lab.figures.roofline_plot import gemm_shape_of
    from tilelab.runtime.events import subscribe

    a = tl.tensor(np.ones((128, 128), np.float32), device="cpu")
    b = tl.tensor(np.ones((128, 128), np.float32), device="cpu")
    seen = []
    stop = subscribe(seen.append)
    try:
        gemm(tl.empty((128, 128), device="cpu").partition((64, 64)), a, b, 32)
        x = tl.tensor(np.ones(128 * 128, np.float32), device="cpu")
        vector_add(tl.empty(128 * 128, device="cpu").partition(1024), x, x)
    finally:
        stop()
    g = gemm_shape_of(seen[0], trace_launch(seen[0]))
    assert g is not None and (g.m, g.n, g.k, g.tile_m, g.tile_n) == (128, 128, 128, 64, 64)
    assert gemm_shape_of(seen[1], trace_launch(seen[1])) is None


def test_doctests():
    import tilelab.perf.predict_shapes

    result = doctest.testmod(predict_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 10
    shapes = doctest.testmod(tilelab.perf.predict_shapes,
                             optionflags=doctest.NORMALIZE_WHITESPACE)
    assert shapes.failed == 0 and shapes.attempted > 10
