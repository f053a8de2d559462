"""The CPU prediction model moves the way the hardware does: launch floor for tiny grids,
the last wave's idle SMs, padding waste, and grouped schedules re-reading less DRAM."""
from __future__ import annotations

import doctest

import pytest

import tilelab.perf.predict as predict_module
from tilelab.compiler.device import grouped_tile_index
from tilelab.perf.predict import (CONSTANTS, GemmShape, LaunchShape, blocks_per_sm,
                                  gemm_dram_bytes, predict_launch)
from tilelab.perf.specs import lookup_gpu

H200 = lookup_gpu("h200")
SMS = int(H200.sm_count.value)


def shape(blocks, flops=1e9, executed=None, dram=1e8, **kw):
    return LaunchShape(blocks=blocks, useful_flops=flops, executed_flops=executed or flops,
                       dram_bytes=dram, precision="fp32", **kw)


def test_tiny_grids_are_dominated_by_the_launch_floor():
    p = predict_launch(shape(1, flops=1e3, dram=1e4), "h200")
    assert p.limiter == "launch floor"
    assert p.seconds == pytest.approx(CONSTANTS["launch_floor"].value, rel=0.2)
    assert p.seconds > 100 * p.bound_seconds          # the roofline bound says nothing here


def test_the_model_is_never_faster_than_the_roofline_bound():
    for blocks in (1, SMS, 10 * SMS + 7):
        for dram in (1e4, 1e9):
            p = predict_launch(shape(blocks, dram=dram), "h200")
            assert p.seconds >= p.bound_seconds


def test_last_wave_effect():
    full = predict_launch(shape(SMS), "h200")
    one_more = predict_launch(shape(SMS + 1), "h200")       # same work, one more block
    assert (full.waves, one_more.waves) == (1, 2)
    assert one_more.idle_sms_last_wave == SMS - 1
    assert one_more.seconds > 1.8 * full.seconds - CONSTANTS["launch_floor"].value
    many = predict_launch(shape(40 * SMS + 1), "h200")      # a long tail matters less
    assert many.wave_efficiency > 0.97


def test_blocks_per_sm_from_resources():
    assert blocks_per_sm("sm_90", 128, 255, None)[0] == 2        # 64K registers / (255·128)
    assert blocks_per_sm("sm_90", 256, 32, 100 * 1024)[0] == 2   # 228 KiB / 100 KiB
    bps, why = blocks_per_sm("sm_90", None, None, None)
    assert bps == 1 and "unknown" in why
    small = predict_launch(shape(2 * SMS, threads=128, registers=64), "h200")
    big = predict_launch(shape(2 * SMS, threads=128, registers=255), "h200")
    assert small.blocks_per_sm > big.blocks_per_sm
    assert small.waves == 1 and big.waves == 1
    assert any("registers" in a or "threads" in a or "block limit" in a
               for a in small.assumptions)


def test_padding_waste_costs_time():
    exact = predict_launch(shape(64 * SMS, flops=1e12, dram=1e6), "h200")
    padded = predict_launch(shape(64 * SMS, flops=1e12, executed=1.5e12, dram=1e6), "h200")
    assert padded.lane_efficiency == pytest.approx(1 / 1.5)
    assert padded.seconds > 1.4 * (exact.seconds - exact.launch_s)
    assert padded.bound_seconds == exact.bound_seconds       # the bound ignores padding


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
    t_rm = predict_launch(LaunchShape(g * g, 1e9, 1e9, 1e9, "bf16", gemm=_gemm()), "h200")
    t_gr = predict_launch(LaunchShape(g * g, 1e9, 1e9, 1e9, "bf16", gemm=_gemm(
        [grouped_tile_index(i, g, g, 8) for i in range(g * g)])), "h200")
    assert t_gr.dram_bytes < t_rm.dram_bytes and t_gr.seconds < t_rm.seconds


def test_what_fits_in_l2_is_read_once_and_bigger_tiles_reread_less():
    small = gemm_dram_bytes(GemmShape(1024, 1024, 1024, 64, 64), SMS, 50e6)
    assert small["fits_l2"] and small["a_reads"] == 1.0
    t64 = gemm_dram_bytes(_gemm(tile=64), SMS, 50e6)
    t256 = gemm_dram_bytes(_gemm(tile=256), SMS, 50e6)
    assert t256["bytes"] < t64["bytes"]


def test_assumptions_are_stated_and_labelled():
    p = predict_launch(shape(4), "h200")
    text = " ".join(p.assumptions)
    assert "launch floor" in text and "uncalibrated assumption" in text
    assert all(c.source and not c.calibrated for c in CONSTANTS.values())
    assert "launch" in p.summary() and "wave" in p.summary()


def test_a_real_gemm_launch_predicts_with_tile_reuse():
    import numpy as np

    import tilelab as tl
    from tilelab.kernels.examples import gemm
    from tilelab.lab.ownership import trace_launch
    from tilelab.lab.roofline_plot import gemm_shape_of, point_from_trace
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
    from tilelab.lab.ownership import trace_launch
    from tilelab.lab.roofline_plot import gemm_shape_of
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
    result = doctest.testmod(predict_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 10
