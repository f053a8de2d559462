"""Notebook helpers: launches recorded, bytes counted once per element, teaching charts."""
from __future__ import annotations

import doctest

import numpy as np

import tilelab as tl
import tilelab.lab.course.traffic as traffic_module
from tilelab.kernels import add, add_rms_norm, rms_norm
from tilelab.lab.course.traffic import count_traffic, record_launches, running_figure


def test_fusion_saves_the_reread_of_h():
    d = 256
    x, r = tl.randn(8, d, dtype="bfloat16", device="cpu"), tl.randn(8, d, dtype="bfloat16",
                                                                    device="cpu")
    w = tl.randn(d, dtype="bfloat16", device="cpu")
    t = count_traffic({"unfused": lambda: rms_norm(add(x, r), w),
                       "fused": lambda: add_rms_norm(x, r, w)})
    assert [(row["version"], row["kernel"]) for row in t.rows] == [
        ("unfused", "binary_kernel"), ("unfused", "norm_rows_kernel"),
        ("fused", "add_norm_rows_kernel")]
    h = 8 * d * 2 / 1024                             # KiB of h (bf16)
    assert t.kib("unfused") - t.kib("fused") == h     # the pair reads h back; fused does not
    assert 0 < t.saved < 1
    fig = t.figure()
    bars = {r.gid: r["kib"] for r in fig.find("bar:")}
    assert bars["bar:fused:add_norm_rows_kernel"] == t.kib("fused")
    assert fig._repr_png_()[:4] == b"\x89PNG"
    assert list(t.table().columns) == ["version", "kernel", "KiB read", "KiB written"]


def test_record_launches_unsubscribes_even_when_fn_raises():
    def boom():
        add(tl.ones(8, device="cpu"), tl.ones(8, device="cpu"))
        raise RuntimeError("after one launch")

    try:
        record_launches(boom)
    except RuntimeError:
        pass
    assert record_launches(lambda: None) == []


def test_running_figure_draws_one_chart_per_running_value():
    row = np.arange(16, dtype=np.float32)
    fig = running_figure(row, 4, {"m": [3, 7, 11, 15], "s": [1, 2, 3, 4]}, mark=2, log=["s"])
    titles = [i["s"] for i in fig.items_of("chart-title")]
    assert titles == ["one row, read in 4 chunks of 4", "m", "s"]
    assert len(fig.items_of("series-dot")) == 8
    assert fig.width <= 1000


def test_doctests():
    result = doctest.testmod(traffic_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted >= 8
