"""Everything the lab draws follows the page's theme: plain-cell figures (the lab's SVG
figures and themed matplotlib charts) are published as inline SVG coloured by the page's
``--tl-*`` variables with the CSS that gives them light and dark values; no colour of a
look is baked in, no PNG is stored beside them; the explorer has a static snapshot for
pages without widgets; the view's CSS is not stored twice. (The browser tests check the
same in JupyterLab and in exported pages, light and dark.)"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

IPython = pytest.importorskip("IPython")
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from IPython.utils.capture import capture_output  # noqa: E402

import tilelab as tl  # noqa: E402
from tilelab.lab.figures.looks import (DARK, LIGHT, colour_variables, css_variables,  # noqa: E402
                                       theme_css)
from tilelab.lab.figures.mpl_svg import ThemedFigure, themed_svg  # noqa: E402
from tilelab.lab.figures.output import figure_html, used_variables  # noqa: E402
from tilelab.lab.figures.ownership import ownership_figure  # noqa: E402
from tilelab.lab.figures.roofline_plot import roofline_figure  # noqa: E402
from tilelab.lab.figures.theme import new_figure, themed  # noqa: E402
from tilelab.perf.roofline import RooflinePoint  # noqa: E402

WIDGET = "application/vnd.jupyter.widget-view+json"
HEX = re.compile(r"#[0-9a-fA-F]{6}\b")


@pytest.fixture(scope="module")
def shell():
    return InteractiveShell.instance()


def shown(shell, code: str) -> list[dict]:
    """The MIME bundles a cell displayed (its last expression included)."""
    with capture_output() as cap:
        res = shell.run_cell(code)
    assert res.success, res.error_in_exec or res.error_before_exec
    return [o.data for o in cap.outputs]


def baked(svg: str) -> set[str]:
    """Concrete colours outside a ``var(--tl-x, fallback)``: what a theme switch cannot
    reach."""
    return set(HEX.findall(re.sub(r"var\(--tl-[a-z0-9-]+, #[0-9a-fA-F]{6}\)", "", svg)))


def chart(theme: str) -> ThemedFigure:
    with themed(theme) as t:
        fig = new_figure(t, figsize=(4, 2))
        ax = fig.add_subplot()
        ax.plot([1, 2, 4], [1, 3, 2], "o-", label="blocks")
        ax.axhline(2, color=t.muted, ls="--")
        ax.barh([0, 1], [1, 2], color=t.palette[2], hatch="//")
        ax.text(1, 2.5, "a note", color=t.muted, bbox=dict(fc=t.panel))
        ax.set_title("chart")
        ax.legend()
    return fig


# ------------------------------------------------------------------ the page's CSS

def test_dark_rules_carry_only_the_colours_that_change():
    css = theme_css()
    light, dark = css.split("\n")[:2]
    assert "--tl-c0:" in light and "--tl-c0:" not in dark        # the palette is shared
    for name, value in css_variables(DARK).items():
        if value != css_variables(LIGHT)[name]:
            assert f"{name}: " in dark, name
    media = css[css.index("@media"):]
    assert "--tl-race: #ff4d4d;" in media and "--tl-c0:" not in media


def test_one_figure_gets_the_css_of_the_variables_it_uses():
    svg = '<svg><rect fill="var(--tl-c1, #ff7f0e)"/><text fill="var(--tl-fg, #1a1a1a)"/></svg>'
    assert used_variables(svg) == ["--tl-c1", "--tl-fg"]
    html = figure_html(svg)
    assert html.startswith('<div class="tilelab-figure"><style>')
    style = html[:html.index("</style>")]
    assert set(re.findall(r"(--tl-[a-z0-9-]+):", style)) == {"--tl-c1", "--tl-fg", "--tl-bg"}
    assert '[data-jp-theme-light="false"] .tilelab-figure { --tl-fg:' in style
    assert "prefers-color-scheme: dark" in style and html.endswith(svg + "</div>")


def test_colour_variables_turn_each_look_into_the_same_variables():
    assert colour_variables("light")[LIGHT.foreground] == "var(--tl-fg, #1a1a1a)"
    assert colour_variables("dark")[DARK.foreground] == "var(--tl-fg, #1a1a1a)"
    # one colour, two roles: the first wins (white is the light look's background)
    assert colour_variables("light")["#ffffff"] == "var(--tl-bg, #ffffff)"
    assert colour_variables("dark")[DARK.panel] == "var(--tl-panel, #ffffff)"
    # black is the light look's highlight: matplotlib's black defaults turn white in dark
    assert colour_variables("light")["#000000"] == "var(--tl-highlight, #000000)"
    assert colour_variables("dark")[DARK.race] == f"var(--tl-race, {LIGHT.race})"


# ------------------------------------------------------------------ plain-cell figures

def test_an_svg_figure_in_a_plain_cell_is_one_themed_html_output(shell):
    shell.user_ns.update(tl=tl, ownership_figure=ownership_figure)
    out = shown(shell, 'ownership_figure(tl.zeros((64, 96), device="cpu")'
                       '.partition((32, 32)), name="z")')
    assert len(out) == 1 and sorted(out[0]) == ["text/html", "text/plain"]   # no PNG, no SVG
    html = out[0]["text/html"]
    assert html.startswith('<div class="tilelab-figure"><style>') and "<svg" in html
    svg = html[html.index("<svg"):-len("</div>")]
    assert not baked(svg), baked(svg)
    ET.fromstring(svg)                                        # well formed
    for name in used_variables(svg):                          # each has light and dark CSS
        assert f"{name}:" in html[:html.index("</style>")], name
    assert out[0]["text/plain"] == "<figure: which block owns which tile of z>"
    # a view's figure and the themed output are the same SVG
    assert len(html) < 20_000


def test_a_roofline_figure_displays_themed_too(shell):
    shell.user_ns.update(fig=roofline_figure([RooflinePoint("k", 1e6, 1e6, "fp32")],
                                             ("h200",), theme="dark"))
    out = shown(shell, "fig")
    assert sorted(out[0]) == ["text/html", "text/plain"]
    svg = out[0]["text/html"].split("</style>", 1)[1]
    assert not baked(svg) and "var(--tl-gpu-h200, " in svg
    assert DARK.foreground not in svg               # drawn "dark", shown in the page's look


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_a_themed_matplotlib_chart_follows_the_page(shell, theme):
    fig = chart(theme)
    shell.user_ns["fig"] = fig
    out = shown(shell, "fig")
    assert len(out) == 1 and sorted(out[0]) == ["text/html", "text/plain"]    # no PNG
    html = out[0]["text/html"]
    svg = html[html.index("<svg"):-len("</div>")]
    assert svg.startswith('<svg class="tl-svg tl-mpl"')
    # every colour of the look it was drawn in is a variable now (with the light fallback)
    assert not baked(svg), baked(svg)
    for var in ("--tl-fg", "--tl-bg", "--tl-muted", "--tl-c0", "--tl-c2", "--tl-highlight"):
        assert f"var({var}, " in svg, var
    root = ET.fromstring(svg)
    assert root.get("fill") == "var(--tl-highlight, #000000)"   # implicit black: highlight
    texts = [t for t in root.iter() if t.tag.endswith("text")]
    assert {"chart", "a note", "blocks"} <= {t.text for t in texts}          # text stays text
    assert "*{" not in svg and "<metadata" not in svg and "<?xml" not in svg
    assert out[0]["text/plain"] == "<Figure 4x2 in: chart>"


def test_two_charts_in_one_page_never_share_an_id():
    a, b = themed_svg(chart("light")), themed_svg(chart("light"))
    ids_a = set(re.findall(r' id="([^"]+)"', a))
    ids_b = set(re.findall(r' id="([^"]+)"', b))
    assert ids_a and not ids_a & ids_b
    for svg, ids in ((a, ids_a), (b, ids_b)):           # every reference has its target
        refs = set(re.findall(r'(?:url\(#|href="#)([^)"]+)', svg))
        assert refs and refs <= ids, refs - ids
        assert len(svg) < 40_000


def test_axes_take_the_figure_look_outside_themed():
    fig = new_figure("dark", (3, 2))                # no themed(): axes still dark
    ax = fig.add_subplot()
    ax.set_title("t")
    svg = themed_svg(fig)
    assert "fill: var(--tl-panel, #ffffff)" in svg           # the plot area, not white
    assert not baked(svg), baked(svg)


def test_colours_of_no_look_stay_as_drawn():
    fig = ThemedFigure(figsize=(2, 1))
    fig.add_subplot().plot([0, 1], [0, 1], color="#123456")
    svg = themed_svg(fig, "light")
    assert "#123456" in baked(svg)


# ------------------------------------------------------------------ the explorer

def test_the_explorer_publishes_a_static_snapshot_before_its_widget(shell):
    pytest.importorskip("ipywidgets")
    from tilelab.kernels.examples import vector_add
    from tilelab.lab.views.tabs import HIDE_STATIC
    from tilelab.lab.views.widgets import explore

    def make_args(tile, n):
        x = tl.tensor(np.arange(n, dtype=np.float32), device="cpu")
        return (tl.empty(n, device="cpu").partition(tile), x, x)

    ex = explore(vector_add, make_args, tile_sizes=(64, 128), problem_sizes=(1024,),
                 backend="cpu")
    ex.tile_slider.value = 128
    shell.user_ns["ex"] = ex
    static, widget = shown(shell, "ex")
    assert sorted(widget) == [WIDGET]                  # nbconvert cannot pick it over the page
    page = static["text/html"]
    assert "tilelab-static" in page and HIDE_STATIC in page
    assert "a snapshot at tile 128, problem size 1024" in page
    assert page.count("<svg") == 2 and "vector_add tile=128 n=1024" in page
    assert "<script" not in page and "data:image/png" not in page
    svg = page.split("</style>", 1)[1]
    assert not baked(svg.replace("hsl(", "")), baked(svg)
    assert static["text/plain"].startswith("explore(vector_add): vector_add tile=128 n=1024")


def test_explorer_figures_of_matplotlib_follow_the_theme_too():
    pytest.importorskip("ipywidgets")
    from tilelab.lab.views.widgets import figure_html as explorer_figure

    html = explorer_figure(chart("light"))
    assert "base64" not in html and "tl-mpl" in html and "var(--tl-fg, " in html


# ------------------------------------------------------------------ the view's size

def test_the_widget_does_not_store_the_view_css_a_second_time():
    pytest.importorskip("ipywidgets")
    from tilelab.lab.views.panels import Panel
    from tilelab.lab.views.tabs import TileView

    view = TileView([Panel("ptx", "PTX", "<pre>x</pre>", "x")], "h", mode="widget")
    static, widget = view.bundles()
    assert "<style>" in static["text/html"] and theme_css() in static["text/html"]
    head = view.to_widget(styled=False).children[0].value
    assert "<style>" not in head and "tl-head" in head
    assert "<style>" in view.to_widget().children[0].value     # displayed on its own: styled


def test_svg_text_leaves_defaults_to_the_root():
    fig = ownership_figure(tl.zeros((64, 96), device="cpu").partition((32, 32)), name="z")
    svg = fig.to_svg()
    root = ET.fromstring(svg)
    assert root.get("fill") == "var(--tl-fg, #1a1a1a)"
    assert 'text-anchor="start"' not in svg and 'stroke-width="1"' not in svg
    texts = [t for t in root.iter() if t.tag.endswith("text")]
    assert any(t.get("fill") is None for t in texts)          # the root's foreground
    assert any(t.get("fill") == "var(--tl-muted, #6b6b6b)" for t in texts)
