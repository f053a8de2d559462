"""Roofline figures: the lines, ridges, points and legend drawn match the perf model."""
from __future__ import annotations

import doctest

import numpy as np
import pytest

import tilelab as tl
import tilelab.lab.figures.roofline_layout as layout_module
import tilelab.lab.figures.roofline_plot as plot_module
import tilelab.lab.figures.roofline_svg as svg_module
import tilelab.lab.figures.theme as theme_module
from tilelab import config
from tilelab.kernels.examples import gemm, vector_add
from tilelab.lab.figures.roofline_plot import (infer_precision, point_from_trace,
                                               roofline_figure, save_png)
from tilelab.lab.figures.roofline_svg import ceiling_label, short_gpu_name
from tilelab.lab.figures.svg import color
from tilelab.lab.figures.theme import DARK, detect_theme, get_theme
from tilelab.perf.ceilings import MeasuredCeilings
from tilelab.perf.counting import elementwise, gemm as gemm_work, softmax
from tilelab.perf.roofline import (RooflinePoint, attainable, predict, project,
                                   ridge_point)
from tilelab.perf.specs import lookup_gpu

GPUS = ("b200", "rtx5090", "h200")


def by_gid(fig, gid):
    found = [r for r in fig.records if r.gid == gid]
    assert len(found) == 1, (gid, len(found))
    return found[0]


def xy(rec):
    """Data coordinates of a record: a ceiling's polyline or a marker's point."""
    if "points" in rec.data:
        line = rec["points"]
        return list(map(float, line["intensity"])), list(map(float, line["performance"]))
    return [float(rec["x"])], [float(rec["y"])]


@pytest.fixture(scope="module")
def tour():
    measured = RooflinePoint.from_work(gemm_work(8192, 8192, 8192), seconds=1.8e-3,
                                       device="NVIDIA H200", name="gemm")
    predicted = predict(softmax(4096, 1000), "h200", name="softmax")
    fig = roofline_figure([measured, predicted], GPUS, projections=True, theme="light")
    return fig, measured, predicted


def test_one_ceiling_per_gpu_and_precision_with_ridges(tour):
    fig, _, _ = tour
    for key in GPUS:
        spec = lookup_gpu(key)
        for prec in ("fp32", "bf16"):
            line = by_gid(fig, f"ceiling:{key}:{prec}")
            xs, ys = xy(line)
            ridge = ridge_point(spec, prec)
            assert ridge in xs
            for x, y in zip(xs, ys):
                assert y == pytest.approx(attainable(spec, x, prec))
            (rx,), (ry,) = xy(by_gid(fig, f"ridge:{key}:{prec}"))
            assert rx == pytest.approx(ridge) and ry == pytest.approx(spec.peak(prec))
            assert line["color"] == color(f"gpu:{key}")
    # H200 bf16: 989.5 TFLOP/s over 4.8 TB/s
    (rx,), _ = xy(by_gid(fig, "ridge:h200:bf16"))
    assert rx == pytest.approx(989.5e12 / 4.8e12)
    titles = [i["s"] for i in fig.items_of("axis-title")]
    assert titles == ["arithmetic intensity (FLOP/B, log scale)",
                      "performance (FLOP/s, log scale)"]


def test_legend_states_dense_and_accumulator(tour):
    fig, _, _ = tour
    texts = fig.tilelab["legend"]
    drawn = " ".join(i["s"] for i in fig.items_of("legend") if i["kind"] == "text")
    assert all(t.split()[0] in drawn for t in texts)
    # the legend's line samples are drawn exactly as the plot's lines
    samples = [(i["stroke"], i["sw"], i["dash"]) for i in fig.items_of("legend-sample")
               if i["kind"] == "line"]
    for rec in fig.find("ceiling:"):
        assert (rec["color"], rec["width"], rec["dash"]) in samples
    for want in ("H200 bf16 (fp32 acc, dense)", "B200 bf16 (fp32 acc, dense)",
                 "RTX 5090 bf16 (fp32 acc, dense)", "H200 fp32 (CUDA cores, dense)",
                 "H200 memory 4.8 TB/s", "B200 memory 8 TB/s", "measured on a GPU",
                 "predicted: launch floor + kernel body (the table says which dominates)",
                 "roofline bound of a predicted point: max(FLOPs / peak, bytes / "
                 "bandwidth), where no real kernel gets",
                 "roofline bound of the same work on another GPU, in its colour"):
        assert want in texts
    ceilings = [t for t in texts if "(" in t and "acc" in t or "CUDA cores" in t]
    assert len(ceilings) == 6 and all("dense" in t for t in ceilings)


def test_points_filled_when_measured_hollow_when_predicted(tour):
    fig, measured, predicted = tour
    m = by_gid(fig, "point:gemm")
    p = by_gid(fig, "point:softmax")
    (mx,), (my,) = xy(m)
    assert mx == pytest.approx(measured.intensity) and my == pytest.approx(measured.achieved_flops)
    assert m["filled"] and not p["filled"]
    assert m["color"] != p["color"] and m["marker"] != p["marker"]   # told apart
    (px,), (py,) = xy(p)
    assert py == pytest.approx(predicted.flops / predicted.total_s)     # the prediction
    (bound,) = fig.tilelab["drawn"]["bounds"]                           # and its bound
    assert bound["name"] == "softmax" and bound["y"] == pytest.approx(
        attainable("h200", px, "fp32"))
    bar = [i["kind"] for i in fig.items_of("bound:softmax")]
    marker = [i["kind"] for i in fig.items_of("point:softmax")]
    assert bar == ["line"] and marker and "line" not in marker        # another marker
    labels = {d["text"] for d in fig.tilelab["labels"] if d["kind"] == "point-label"}
    assert labels == {"#1 gemm", "#2 softmax"}


def test_projections_onto_the_other_gpus(tour):
    fig, measured, predicted = tour
    for name, point in (("gemm", measured), ("softmax", predicted)):
        for key in ("b200", "rtx5090"):
            (x,), (y,) = xy(by_gid(fig, f"projection:{name}:{key}"))
            assert x == pytest.approx(point.intensity)
            assert y == pytest.approx(project(point, key).attainable_flops)
            assert by_gid(fig, f"projection:{name}:{key}")["opacity"] >= 0.8   # not faint
        assert not fig.find(f"projection:{name}:h200")


def test_one_gpu_by_default_the_one_the_times_are_for():
    """Without ``gpus`` the figure draws the GPU each point's time is for (the H200 when
    no point has one), and never projections unless asked."""
    def drawn(points, **kw):
        fig = roofline_figure(points, theme="light", **kw)
        return fig.tilelab["gpus"], fig.tilelab["drawn"]["projections"]

    assert drawn([predict(softmax(1024, 1024), "b200")]) == (["b200"], [])
    measured = RooflinePoint.from_work(gemm_work(1024, 1024, 1024), seconds=1e-5,
                                       device="NVIDIA H100 80GB HBM3")
    assert drawn([measured]) == (["h100"], [])
    assert drawn([softmax(1024, 1024)]) == (["h200"], [])
    gpus, projections = drawn([predict(softmax(1024, 1024), "h200")], gpus=GPUS)
    assert gpus == list(GPUS) and projections == []
    fig = roofline_figure([predict(softmax(1024, 1024), "h200")], theme="light")
    legend = fig.tilelab["legend"]
    assert sum("memory" in t and "TB/s" in t for t in legend) == 1
    assert len([lbl for lbl in fig.tilelab["labels"] if lbl["kind"] == "ridge-label"]) == 1


def test_each_point_has_a_one_line_verdict_and_no_assumption_wall():
    tiny = predict(elementwise(1 << 14, name="add"), "h200")
    big = predict(elementwise(1 << 26, name="add big"), "h200", at="n=67108864")
    measured = RooflinePoint.from_work(gemm_work(4096, 4096, 4096), seconds=2e-4,
                                       device="NVIDIA H200", name="gemm")
    fig = roofline_figure([tiny, big, measured], theme="light")
    assert fig.tilelab["verdicts"] == [
        "launch-bound: ~3.9 µs of launch, 0.043 µs of bytes",
        "memory-bound: 176 µs of bytes, + 3.9 µs of launch (at n=67108864)",
        "measured: 69% of H200's compute roof"]
    shown = " ".join(i["s"] for i in fig.items_of("table-verdict"))
    assert all(v.split(":")[0] in shown for v in fig.tilelab["verdicts"])
    times = [i["s"] for i in fig.items_of("table-cell") if "µs" in i["s"]]
    assert times == ["3.96 µs predicted", "180 µs predicted", "200 µs measured"]
    assert not fig.items_of("assumption") and not fig.items_of("table-model")
    assert fig.tilelab["predictions"][:2] == [tiny, big]     # for a view to fold


def test_current_device_measured_ceilings():
    cur = MeasuredCeilings(4.2e12, 6.0e14, gpu_name="NVIDIA H200", method="test")
    fig = roofline_figure([elementwise(1 << 20)], GPUS, current=cur, precisions=["bf16"],
                          theme="light")
    line = by_gid(fig, "ceiling:current:bf16")
    assert max(xy(line)[1]) == pytest.approx(6.0e14)
    assert line["width"] > by_gid(fig, "ceiling:h200:bf16")["width"]
    (rx,), _ = xy(by_gid(fig, "ridge:current:bf16"))
    assert rx == pytest.approx(6.0e14 / 4.2e12)
    legend = fig.tilelab["legend"]
    assert "H200 measured bf16 (fp32 acc, dense)" in legend
    assert "H200 measured memory 4.2 TB/s" in legend
    # a measured spec passes too
    fig2 = roofline_figure([], GPUS, current=cur.spec(), theme="light")
    assert "H200 measured bf16 (fp32 acc, dense)" in fig2.tilelab["legend"]


def test_a_point_measured_on_the_current_device_projects_onto_the_datasheets():
    cur = MeasuredCeilings(4.2e12, 6.0e14, gpu_name="NVIDIA H200")
    p = RooflinePoint.from_work(gemm_work(4096, 4096, 4096), seconds=3e-4, device="NVIDIA H200")
    fig = roofline_figure([p], GPUS, current=cur, projections=True, theme="light")
    drawn = fig.tilelab["drawn"]
    assert drawn["measured"][0]["home"] == "current"
    assert {d["gpu"] for d in drawn["projections"]} == {"b200", "rtx5090", "h200"}


def test_sparse_and_labels():
    assert ceiling_label("h200", "fp8", "sparse") == "H200 fp8 (fp32 acc, 2:4 sparse)"
    assert ceiling_label("b200", "int8") == "B200 int8 (int32 acc, dense)"
    assert ceiling_label("h200", "fp64_tc") == "H200 fp64 tensor (fp64 acc, dense)"
    assert short_gpu_name(lookup_gpu("a100")) == "A100"
    fig = roofline_figure([], ("h200",), precisions=["bf16"], density="sparse", theme="light")
    assert fig.tilelab["legend"][0] == "H200 bf16 (fp32 acc, 2:4 sparse)"
    assert max(xy(by_gid(fig, "ceiling:h200:bf16"))[1]) == pytest.approx(1979e12)


def test_themes(monkeypatch, tmp_path):
    light = roofline_figure([], ("h200",), theme="light")
    dark = roofline_figure([], ("h200",), theme="dark")
    assert light.to_svg().count("var(--tl-") > 5      # follows the page's theme
    assert DARK.foreground in dark.svg_for() and "var(--tl-" not in dark.svg_for()
    with config.override(theme="dark"):
        assert detect_theme() == "dark" and get_theme(None) is DARK
    with config.override(theme=config.DEFAULT):     # auto: JupyterLab's saved theme
        settings = tmp_path / "@jupyterlab" / "apputils-extension"
        settings.mkdir(parents=True)
        (settings / "themes.jupyterlab-settings").write_text(
            '{\n  // the theme\n  "theme": "JupyterLab Dark"\n}')
        monkeypatch.setenv("JUPYTERLAB_SETTINGS_DIR", str(tmp_path))
        assert detect_theme() == "dark"
        (settings / "themes.jupyterlab-settings").write_text('{"theme": "JupyterLab Light"}')
        assert detect_theme() == "light"
    with pytest.raises(ValueError, match="unknown theme"):
        get_theme("sepia")


def test_save_png(tmp_path):
    fig = roofline_figure([softmax(1024, 1024)], GPUS, theme="dark")
    path = save_png(fig, tmp_path / "sub" / "roofline.png", dpi=50)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width = int.from_bytes(data[16:20], "big")
    assert width == 500


def test_point_from_a_real_trace():
    n = 4096
    x = tl.tensor(np.ones(n, np.float32), device="cpu")
    z = tl.empty(n, device="cpu")
    trace = tl.interpret(vector_add, z.partition(1024), x, x)
    p = point_from_trace(trace)
    assert (p.name, p.flops, p.bytes, p.precision) == ("vector_add", n, 12 * n, "fp32")
    # the model's time, above the roofline bound (which the point keeps)
    assert not p.measured and p.prediction.bound_s == pytest.approx(12 * n / 4.8e12)
    assert p.seconds == p.prediction.total_s > p.prediction.bound_s
    assert p.prediction.terms.blocks == 4                  # the trace's grid
    w = elementwise(n, name="add")
    assert point_from_trace(trace, work=w, predict_on="b200").prediction.bound_s == \
        pytest.approx(w.bytes / 8e12)
    m = point_from_trace(trace, seconds=1e-6, device="NVIDIA H200")
    assert m.measured and m.achieved_flops == pytest.approx(n / 1e-6)
    assert point_from_trace(trace, predict_on=None).seconds is None


def test_infer_precision_of_a_bf16_gemm_trace():
    import ml_dtypes

    a = tl.tensor(np.ones((128, 64), ml_dtypes.bfloat16), device="cpu")
    b = tl.tensor(np.ones((64, 128), ml_dtypes.bfloat16), device="cpu")
    c = tl.empty((128, 128), dtype="float32", device="cpu")
    trace = tl.interpret(gemm, c.partition((64, 64)), a, b, 32)
    assert infer_precision(trace) == "bf16"
    p = point_from_trace(trace)
    assert p.precision == "bf16" and p.flops == 2 * 128 * 128 * 64


def test_bad_points_are_refused():
    with pytest.raises(TypeError, match="RooflinePoint, Prediction or Work"):
        roofline_figure(["gemm"], GPUS)


def test_doctests():
    for mod in (plot_module, svg_module, layout_module, theme_module):
        result = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0 and result.attempted > 4, mod.__name__
