"""The roofline SVG: labels placed free of each other and of the lines, one marker and a
number per point (shared spots say so, near ones are moved apart), units on every number,
ridges explained."""
from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import pytest

from tilelab.lab.figures.roofline_plot import point_from_trace, roofline_figure
from tilelab.lab.figures.roofline_svg import place_labels, rect_hits_segment, spread_markers
from tilelab.perf.counting import elementwise, gemm, softmax
from tilelab.perf.roofline import RooflinePoint, predict

GPUS = ("b200", "rtx5090", "h200")


def _trace(n, blocks, name="add"):
    from types import SimpleNamespace as NS

    return NS(kernel=name, flops=n, bytes=12 * n, flops_mma=0, flops_elementwise=n,
              flops_executed=n, num_blocks=blocks, args={"x": NS(dtype="float32")})


@pytest.fixture(scope="module")
def crowded():
    pts = [point_from_trace(_trace(4096, 4), name="add tile=1024"),
           point_from_trace(_trace(4096, 4), name="add tile=1024 again"),
           point_from_trace(_trace(1 << 24, 1 << 14), name="add big"),
           RooflinePoint.from_work(gemm(4096, 4096, 4096), seconds=3e-4, device="NVIDIA H200"),
           RooflinePoint.from_work(gemm(4096, 4096, 4096), seconds=4e-4, device="NVIDIA H200",
                                   name="gemm slower"),
           predict(softmax(4096, 4096), "h200"), predict(elementwise(1 << 20), "h200"),
           predict(gemm(8192, 8192, 8192, name="gemm 8192"), "b200")]
    return roofline_figure(pts, GPUS, projections=True, theme="light")


def _overlap(a, b):
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def test_no_label_overlaps_another_label_or_a_line(crowded):
    labels = crowded.tilelab["labels"]
    assert len(labels) >= 8
    rects = [d["rect"] for d in labels]
    for i in range(len(rects)):
        for j in range(i + 1, len(rects)):
            assert not _overlap(rects[i], rects[j]), (labels[i]["text"], labels[j]["text"])
        for p, q in crowded.tilelab["segments"]:
            assert not rect_hits_segment(rects[i], p, q), labels[i]["text"]


def test_labels_sit_beside_their_own_point_or_point_to_it(crowded):
    for d in crowded.tilelab["labels"]:
        (x0, y0, x1, y1), (ax, ay) = d["rect"], d["anchor"]
        dist = max(x0 - ax, ax - x1, y0 - ay, ay - y1, 0)
        assert dist <= 16 or d["moved"]           # moved labels get a leader line
    assert len(crowded.items_of("leader")) == sum(d["moved"] for d in crowded.tilelab["labels"])


def test_each_point_has_its_own_colour_marker_and_number(crowded):
    recs = crowded.find("point:")
    pairs = [(r["color"], r["marker"]) for r in recs]
    assert len(set(pairs)) == len(pairs)
    numbers = sorted(n for r in recs for n in r["group"])
    assert numbers == list(range(1, 9))           # every point is in the table, once
    same = [r for r in recs if len(r["group"]) > 1]
    assert same and any("(same spot)" in d["text"] and "#1, #2" in d["text"]
                        for d in crowded.tilelab["labels"])
    rows = [i["s"] for i in crowded.items_of("table-cell")]
    assert "add tile=1024" in rows and "add tile=1024 again" in rows


def test_every_number_has_a_unit_and_ridges_are_explained(crowded):
    ticks = [i["s"] for i in crowded.items_of("tick")]
    y_ticks = [t for t in ticks if "FLOP/s" in t]
    assert y_ticks and all(re.fullmatch(r"[\d.]+ [kMGTPE]?FLOP/s", t) for t in y_ticks)
    ridges = [d["text"] for d in crowded.tilelab["labels"] if d["kind"] == "ridge-label"]
    assert ridges and all(re.fullmatch(r"ridge [\d.]+ FLOP/B", t) for t in ridges)
    assert any("ridge point: peak ÷ bandwidth (FLOP/B)" in t for t in crowded.tilelab["legend"])
    titles = [i["s"] for i in crowded.items_of("axis-title")]
    assert "FLOP/B" in titles[0] and "FLOP/s" in titles[1]


def test_predicted_points_show_their_bound_and_a_verdict_the_model_is_folded(crowded):
    predicted = {d["name"] for d in crowded.tilelab["drawn"]["predicted"]}
    shared = {"add tile=1024 again"}                  # same spot: one marker, one bound
    assert {b["name"] for b in crowded.tilelab["drawn"]["bounds"]} == predicted - shared
    verdicts = " ".join(i["s"] for i in crowded.items_of("table-verdict"))
    assert "launch-bound: ~3.9 µs of launch" in verdicts and "of H200's" in verdicts
    assert not crowded.items_of("assumption") and not crowded.items_of("table-model")
    folded = [p for p in crowded.tilelab["predictions"] if p is not None]
    assert len(folded) == 6 and all(p.assumptions for p in folded)


def test_projections_are_not_faint(crowded):
    for item in crowded.items_of("projection:"):
        assert item["opacity"] >= 0.8


def test_svg_is_well_formed_and_themed(crowded):
    root = ET.fromstring(crowded.to_svg())
    assert float(root.get("width")) <= 1000
    assert "var(--tl-gpu-h200, " in crowded.to_svg()


def test_place_labels_avoids_a_line_through_the_anchor():
    (rect, moved), = place_labels([(50, 50, 40, 12, 4)], [], [((0, 40), (200, 40)),
                                                              ((0, 60), (200, 60))],
                                  (0, 0, 200, 200))
    assert not rect_hits_segment(rect, (0, 40), (200, 40))
    assert not rect_hits_segment(rect, (0, 60), (200, 60))


def _marker_centres(svg: str) -> dict[str, tuple[float, float]]:
    """gid -> centre of every point marker in the SVG text (circles and polygons)."""
    out = {}
    for el in ET.fromstring(svg).iter():
        gid = el.get("data-gid") or ""
        if not gid.startswith("point:"):
            continue
        if el.tag.endswith("circle"):
            out[gid] = (float(el.get("cx")), float(el.get("cy")))
        elif el.tag.endswith("polygon"):
            pts = [tuple(map(float, p.split(","))) for p in el.get("points").split()]
            out[gid] = (sum(p[0] for p in pts) / len(pts), sum(p[1] for p in pts) / len(pts))
    return out


def test_markers_of_nearly_coincident_points_do_not_hide_each_other():
    work = gemm(1024, 1024, 1024)
    pts = [RooflinePoint.from_work(work, seconds=1.00e-4, device="NVIDIA H200", name="run a"),
           RooflinePoint.from_work(work, seconds=1.01e-4, device="NVIDIA H200", name="run b")]
    fig = roofline_figure(pts, ("h200",), theme="light")
    centres = _marker_centres(fig.to_svg())
    (ax, ay), (bx, by) = centres["point:run a"], centres["point:run b"]
    assert math.dist((ax, ay), (bx, by)) >= 6.5            # at least a marker radius apart
    # the moved marker is tied to its true spot, and the table still tells them apart
    moved = [r for r in fig.find("point:") if r["offset"] != (0, 0)]
    assert [r.gid for r in moved] == ["point:run b"]
    assert fig.items_of("offset:run b") and not fig.items_of("offset:run a")
    rows = [i["s"] for i in fig.items_of("table-cell")]
    assert "run a" in rows and "run b" in rows
    marks = {(d["marker"], d["color"]) for d in fig.tilelab["drawn"]["measured"]}
    assert len(marks) == 2


def test_points_at_the_same_spot_still_share_one_marker():
    work = gemm(1024, 1024, 1024)
    pts = [RooflinePoint.from_work(work, seconds=1e-4, device="NVIDIA H200", name=n)
           for n in ("tile 64", "tile 128")]
    fig = roofline_figure(pts, ("h200",), theme="light")
    assert list(_marker_centres(fig.to_svg())) == ["point:tile 64"]
    assert any("#1, #2" in d["text"] and "(same spot)" in d["text"]
               for d in fig.tilelab["labels"])


def test_spread_markers_is_deterministic_and_keeps_clear_markers_in_place():
    centres = [(50.0, 50.0), (52.0, 51.0), (50.5, 49.0), (200.0, 80.0)]
    got = spread_markers(centres, 14)
    assert got == spread_markers(centres, 14)
    assert got[0] == centres[0] and got[3] == centres[3]
    for i in range(len(got)):
        for j in range(i + 1, len(got)):
            assert math.dist(got[i], got[j]) >= 14 - 1e-6
