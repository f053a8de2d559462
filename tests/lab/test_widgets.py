"""The explorer panel, driven without a frontend: moving a slider re-runs and redraws."""
from __future__ import annotations

import doctest

import matplotlib
import numpy as np
import pytest

pytest.importorskip("ipywidgets", reason="the explorer is an ipywidgets panel")

import tilelab as tl  # noqa: E402
import tilelab.lab.views.widgets as widgets_module  # noqa: E402
from tilelab.kernels.examples import gemm, vector_add
from tilelab.lab.views.widgets import Explorer, explore
from tilelab.perf.counting import elementwise
from tilelab.runtime.device import gpu_available

matplotlib.use("Agg")   # tests draw off-screen (the lab itself never imports pyplot)


def add_args(tile, n):
    x = tl.tensor(np.arange(n, dtype=np.float32), device="cpu")
    return (tl.empty(n, device="cpu").partition(tile), x, x)


def gemm_args(tile, n):
    a = tl.tensor(np.ones((n, n), np.float32), device="cpu")
    return (tl.empty((n, n), device="cpu").partition((tile, tile)), a, a, 32)


@pytest.fixture
def add_panel():
    return explore(vector_add, add_args, tile_sizes=(128, 256), problem_sizes=(1024, 8192),
                   backend="cpu", theme="light")


def test_first_run_draws_both_figures(add_panel):
    ex = add_panel
    assert isinstance(ex, Explorer) and ex.runs == 1 and ex.error is None
    assert ex.point.name == "vector_add tile=128 n=1024"
    assert ex.point.flops == 1024 and not ex.point.measured
    assert "<svg" in ex.roofline_view.value and "var(--tl-" in ex.roofline_view.value
    assert "<svg" in ex.ownership_view.value
    assert ex.roofline_fig.tilelab["drawn"]["predicted"][0]["name"] == ex.point.name
    assert ex.ownership_fig.tilelab["sections"][0]["owners"].shape == (8,)
    assert "predicted" in ex.status.value


def test_moving_the_tile_slider_reruns_and_redraws(add_panel):
    ex = add_panel
    before_png, before_own = ex.ownership_view.value, ex.ownership_fig
    ex.tile_slider.value = 256
    assert ex.runs == 2
    assert ex.point.name == "vector_add tile=256 n=1024"
    assert ex.ownership_fig is not before_own
    assert ex.ownership_fig.tilelab["sections"][0]["owners"].shape == (4,)
    assert ex.ownership_view.value != before_png
    names = [p["name"] for p in ex.roofline_fig.tilelab["drawn"]["predicted"]]
    assert names == ["vector_add tile=128 n=1024", "vector_add tile=256 n=1024"]


def test_moving_the_size_slider_moves_the_point(add_panel):
    ex = add_panel
    ex.size_slider.value = 8192
    assert ex.point.flops == 8192 and ex.point.bytes == 12 * 8192
    assert ex.trace.num_blocks == 64
    assert ex.history[-1]["size"] == 8192
    drawn = {p["name"]: p for p in ex.roofline_fig.tilelab["drawn"]["predicted"]}
    assert drawn["vector_add tile=128 n=8192"]["y"] == pytest.approx(ex.point.achieved_flops)


def test_bigger_gemm_tiles_raise_the_intensity():
    ex = explore(gemm, gemm_args, tile_sizes=(16, 64), problem_sizes=(128,), backend="cpu",
                 sample_blocks=None, theme="light")
    small = ex.point.intensity
    ex.tile_slider.value = 64
    assert ex.point.intensity > 2 * small      # fewer re-reads of A and B per FLOP
    assert ex.point.flops == 2 * 128 ** 3
    assert [s["name"] for s in ex.ownership_fig.tilelab["sections"]] == ["c", "a", "b"]


def test_work_places_points_by_compulsory_bytes():
    ex = explore(vector_add, add_args, tile_sizes=(128,), problem_sizes=(1024,),
                 backend="cpu", theme="light",
                 work=lambda tile, n: elementwise(n, name="add"))
    assert ex.point.bytes == elementwise(1024).bytes


def test_sampling_and_the_block_picker():
    ex = explore(vector_add, add_args, tile_sizes=(128,), problem_sizes=(1 << 14,),
                 backend="cpu", sample_blocks=4, theme="light")
    assert ex.trace.sampled and len(ex.trace.execution_order) == 4
    options = [v for _, v in ex.block_picker.options]
    assert options == sorted(ex.trace.execution_order)
    ex.block_picker.value = options[2]
    assert ex.runs == 1                                  # no re-run, only a redraw
    assert ex.ownership_fig.tilelab["block"] == options[2]
    assert ex.point.flops == 1 << 14                      # extrapolated from the sample
    assert "counted on 4 of 128 blocks" in ex.status.value


def test_errors_go_to_the_status_line_and_keep_the_last_good_state(add_panel):
    ex = add_panel
    good = ex.point

    def broken(tile, n):
        raise ValueError("tile too large for this problem")

    ex.make_args = broken
    ex.size_slider.value = 8192
    assert ex.error == "ValueError: tile too large for this problem"
    assert "tile too large" in ex.status.value and ex.point is good and ex.runs == 1


def test_bad_backend():
    with pytest.raises(ValueError, match="backend must be"):
        explore(vector_add, add_args, backend="tpu")
    with pytest.raises(ValueError, match="at least one tile"):
        explore(vector_add, add_args, tile_sizes=(), backend="cpu")


@pytest.mark.skipif(gpu_available(), reason="checks the error without a GPU")
def test_gpu_backend_without_gpu_says_why():
    with pytest.raises(RuntimeError, match="needs a GPU"):
        explore(vector_add, add_args, backend="gpu")


@pytest.mark.skipif(not gpu_available(), reason="no usable GPU")
def test_gpu_backend_measures():
    def args(tile, n):
        x = tl.ones(n, device="cuda")
        return (tl.empty(n, device="cuda").partition(tile), x, x)

    ex = explore(vector_add, args, tile_sizes=(1024, 2048), problem_sizes=(1 << 22,),
                 backend="gpu", theme="light")
    assert ex.point.measured and ex.point.seconds > 0
    ex.tile_slider.value = 2048
    assert ex.runs == 2 and ex.roofline_fig.tilelab["drawn"]["measured"]


def test_doctests():
    result = doctest.testmod(widgets_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 5
