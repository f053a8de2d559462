"""The ownership SVG itself: full width and 1:1, legible labels, hatched padding, one
naming convention, theme variables, and no matplotlib in the drawing."""
from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET

import tilelab as tl
from tilelab.lab.figures.ownership import ownership_figure
from tilelab.lab.figures.ownership_svg import NAMING
from tilelab.lab.figures.svg import color, resolve


def _svg(fig):
    root = ET.fromstring(fig.to_svg())          # well-formed XML
    assert root.tag.endswith("svg")
    return root


def test_svg_is_natural_size_and_fits_an_1100px_output():
    fig = ownership_figure(tl.zeros((512, 512), device="cpu").partition((64, 64)), name="c")
    root = _svg(fig)
    w, h = float(root.get("width")), float(root.get("height"))
    assert root.get("viewBox") == f"0 0 {root.get('width')} {root.get('height')}"
    assert 600 <= w <= 1000 and h > 300


def test_labels_are_legible_and_sampled_when_tiles_are_small():
    fig = ownership_figure(tl.zeros((4096, 4096), device="cpu").partition((64, 64)), name="c")
    sizes = [i["size"] for i in fig.items_of("tile-label")]
    assert sizes and min(sizes) >= 8               # px: readable at 1:1
    panel = fig.tilelab["sections"][0]["panels"][0]
    assert 0 < len(panel["labelled"]) < 64 * 64
    assert "tiles labelled" in panel["title"]
    # labels never overlap each other
    boxes = [(i["x"] - len(i["s"]) * i["size"] * 0.3, i["y"] - i["size"],
              i["x"] + len(i["s"]) * i["size"] * 0.3, i["y"]) for i in fig.items_of("tile-label")]
    for a in range(len(boxes)):
        for b in range(a + 1, len(boxes)):
            A, B = boxes[a], boxes[b]
            assert not (A[0] < B[2] and B[0] < A[2] and A[1] < B[3] and B[1] < A[3])


def test_padding_of_edge_tiles_is_hatched_and_exact_multiples_have_none():
    fig = ownership_figure(tl.zeros(1000, device="cpu").partition(256), name="z")
    (pad,) = fig.find("padding:z")
    assert pad["boxes"] == [((0, 1), (1000, 1024))]
    assert 'fill="url(#' in fig.to_svg()           # the hatch pattern is used
    fig = ownership_figure(tl.zeros((128, 128), device="cpu").partition((64, 64)), name="y")
    assert fig.find("padding:y")[0]["boxes"] == []


def test_one_naming_convention_explained_in_the_legend_line():
    fig = ownership_figure(tl.zeros((128, 128), device="cpu").partition((64, 64)), name="c",
                           block=1)
    legend = " ".join(i["s"] for i in fig.items_of("legend"))
    assert "bN = block N" in legend and "[row, col]" in legend and "hatched" in legend
    assert NAMING.split(";")[0] in legend.replace("\n", " ")


def test_colours_are_theme_variables_with_light_fallbacks():
    fig = ownership_figure(tl.zeros((128, 128), device="cpu").partition((64, 64)))
    svg = fig.to_svg()
    fills = set(re.findall(r'fill="([^"]+)"', svg))
    assert all(f.startswith(("var(--tl-", "url(#", "none")) for f in fills), fills
    assert color("palette:0") in fills
    assert resolve(color("foreground"), "dark") != resolve(color("foreground"), "light")
    ids = re.findall(r'\sid="([^"]+)"', svg)
    assert all(i.startswith(fig.prefix) for i in ids)       # unique per figure


def test_drawing_does_not_import_matplotlib():
    sys.modules.pop("matplotlib.figure", None)
    before = "matplotlib.figure" in sys.modules
    fig = ownership_figure(tl.zeros((256, 256), device="cpu").partition((64, 64)))
    fig.to_svg()
    assert not before and "matplotlib.figure" not in sys.modules
