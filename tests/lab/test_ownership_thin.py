"""Ownership of thin tiles (lab issue #38, item 9): a 1×2048 partition (notebook 04's
online softmax) is readable — every label on its own row, legible, clear of its
neighbours and of the ticks — and the legend names tiles as the partition's rank does."""
from __future__ import annotations

import doctest

import pytest

import tilelab as tl
import tilelab.lab.figures.ownership_labels as labels_module
from tilelab.lab.figures.ownership import ownership_figure
from tilelab.lab.figures.ownership_labels import LABEL_ROW_PX, MIN_FONT
from tilelab.lab.figures.ownership_svg import NAMING, naming
from tilelab.lab.figures.svg import text_width


def _panel_rect(fig, name="y"):
    """The panel's tile rectangles' bounding box, px."""
    rects = fig.items_of(f"tiles:{name}")
    return (min(r["x"] for r in rects), min(r["y"] for r in rects),
            max(r["x"] + r["w"] for r in rects), max(r["y"] + r["h"] for r in rects))


def _box(t):
    """A label's box, px (baseline y; the glyphs reach about 0.8 em above it)."""
    w = text_width(t["s"], t["size"])
    return (t["x"] - w / 2, t["y"] - 0.8 * t["size"], t["x"] + w / 2, t["y"] + 0.2 * t["size"])


def _overlap(a, b):
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def notebook_04():
    """The output partition of notebook 04's long-row softmax (block_n=2048) on the CPU."""
    y = tl.empty((8, 16384), dtype="float32", device="cpu")
    return y.partition((1, 2048), schedule=tl.persistent(num_blocks=8, group_m=8))


def test_every_thin_tile_is_labelled_on_one_line_inside_its_row():
    fig = ownership_figure(notebook_04(), name="y", block=0)
    panel = fig.tilelab["sections"][0]["panels"][0]
    assert len(panel["labelled"]) == 64                     # no sampling needed
    labels = fig.items_of("tile-label")
    assert len(labels) == 64 and all(" #" in t["s"] for t in labels)   # "b3 #2", one line
    assert min(t["size"] for t in labels) >= MIN_FONT
    rects = {(round(r["x"], 3), round(r["y"], 3)): r for r in fig.items_of("tiles:y")}
    row_h = {round(r["h"], 3) for r in rects.values()}
    assert min(row_h) >= LABEL_ROW_PX - 1e-6                # rows tall enough for a label
    for t in labels:                                         # each label inside one tile
        x0, y0, x1, y1 = _box(t)
        inside = [r for r in rects.values() if r["x"] <= x0 and x1 <= r["x"] + r["w"]
                  and r["y"] <= y0 and y1 <= r["y"] + r["h"]]
        assert len(inside) == 1, t
    boxes = [_box(t) for t in labels]
    assert not any(_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def test_labels_of_thin_rows_stay_clear_of_the_ticks_and_inside_the_panel():
    for p in (notebook_04(), tl.empty((64, 2048), device="cpu").partition((1, 2048)),
              tl.empty((32, 1000), device="cpu").partition((4, 1024))):
        fig = ownership_figure(p, name="y")
        x0, top, x1, bottom = _panel_rect(fig)
        ticks = [_box(t) for t in fig.items_of("tick") if t["anchor"] == "middle"]
        for t in fig.items_of("tile-label"):
            b = _box(t)
            assert top - 0.5 <= b[1] and b[3] <= bottom + 0.5, (t, top, bottom)
            assert not any(_overlap(b, k) for k in ticks)


def test_thin_rows_are_stretched_only_as_far_as_the_panel_allows():
    fig = ownership_figure(tl.empty((64, 2048), device="cpu").partition((1, 2048)), name="y")
    x0, top, x1, bottom = _panel_rect(fig)
    assert bottom - top <= 440                              # the tallest panel
    assert bottom - top > 64 * 4                            # much taller than to scale (~16 px)
    # square tiles keep their scale
    fig = ownership_figure(tl.zeros((256, 256), device="cpu").partition((64, 64)), name="y")
    r = fig.items_of("tiles:y")[0]
    assert abs(r["w"] - r["h"]) < 1e-6


def test_square_persistent_tiles_keep_two_line_labels():
    p = tl.zeros((384, 256), device="cpu").partition((128, 128),
                                                     schedule=tl.persistent(num_blocks=4))
    texts = {t["s"] for t in ownership_figure(p, name="c").items_of("tile-label")}
    assert "b1" in texts and "#2" in texts and not any(" " in s for s in texts)


@pytest.mark.parametrize("shape, tile, names, never", [
    (1000, 256, "tiles are named [i], their index along the tensor", "[row, col]"),
    ((128, 128), (64, 64), "tiles are named [row, col] in the tile grid", "[i]"),
    ((4, 64, 64), (1, 32, 32), "tiles are named [i, row, col] in the tile grid: i picks the "
     "small grid", "named [row, col]"),
    ((2, 2, 64, 64), (1, 1, 32, 32), "tiles are named [i, j, row, col]", "named [row, col]"),
])
def test_the_legend_names_tiles_as_the_partitions_rank_does(shape, tile, names, never):
    fig = ownership_figure(tl.zeros(shape, device="cpu").partition(tile), name="y")
    legend = " ".join(i["s"] for i in fig.items_of("legend"))
    assert names in legend and never not in legend
    assert legend.startswith("bN = block N") and "hatched" in legend
    assert NAMING == naming(2)


def test_doctests():
    assert doctest.testmod(labels_module).failed == 0
