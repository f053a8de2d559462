"""The views' page side: static outputs beside widgets, themes, widths, the Timings and
Race tabs, specialization pickers, cell-named locations, and the magic's help text."""
from __future__ import annotations

import re

import numpy as np
import pytest

IPython = pytest.importorskip("IPython")
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from IPython.utils.capture import capture_output  # noqa: E402

import tilelab as tl  # noqa: E402
import tilelab.lab as lab  # noqa: E402
from tilelab.lab.figures.images import Image  # noqa: E402
from tilelab.lab.figures.theme import (DARK, LIGHT, css_var, css_variables,  # noqa: E402
                                       theme_css)
from tilelab.lab.views.panels import Panel, figure_html  # noqa: E402
from tilelab.lab.views.tabs import CSS, TileView  # noqa: E402
from support.backends import cpu_backend  # noqa: F401 (autouse fixture)

WIDGET = "application/vnd.jupyter.widget-view+json"
HEAD = "import tilelab as tl\nimport cuda.tile as ct\n"
ADD = HEAD + '''
def add(z: tl.Out, x: tl.In, y: tl.In):
    z.store(tl.load_like(x, z) + tl.load_like(y, z))

x = tl.arange(4096, dtype="float32"); y = tl.ones(4096, dtype="float32")
z = tl.empty(4096, dtype="float32")
'''
RACY = HEAD + '''
@tl.kernel(unsafe=True)
def permute_raw(out: tl.Raw, x: tl.In, BS: ct.Constant[int], D: ct.Constant[int]):
    b, h, s = ct.bid(0), ct.bid(1), ct.bid(2)
    t = ct.load(x, index=(b, h, s, 0), shape=(1, 1, BS, D))
    ct.store(out, index=(b, s, b, 0), tile=ct.permute(t, (0, 2, 1, 3)))
'''


@pytest.fixture(scope="module")
def shell():
    sh = InteractiveShell.instance()
    lab.load_ipython_extension(sh)
    yield sh
    lab.unload_ipython_extension(sh)


def run(shell, cell):
    with capture_output() as cap:
        res = shell.run_cell(cell)
    return res, cap


# ------------------------------------------------------------------ 1: static output

def test_a_widget_view_publishes_the_static_page_as_an_output_of_its_own():
    view = TileView([Panel("ptx", "PTX", "<pre>x</pre>", "x")], "h", mode="widget")
    static, widget = view.bundles()
    assert WIDGET not in static and 'type="radio"' in static["text/html"]
    assert "tilelab-static" in static["text/html"] and WIDGET in widget
    assert "text/html" not in widget          # nbconvert cannot pick the widget over it
    assert [sorted(b) for b in TileView([], "h", mode="html").bundles()] == [
        ["text/html", "text/plain"]]


def test_the_static_copy_hides_only_where_the_widget_rendered():
    rule = re.search(r"\.jp-OutputArea-child:has\(\.tilelab-static\):has\(\+ "
                     r"\.jp-OutputArea-child \.tilelab-view\) \{\s*display: none", CSS)
    assert rule, "the static copy must hide beside a rendered widget (and only there)"


@pytest.mark.toolchain
def test_the_static_page_has_no_script_and_no_network(shell):
    res, cap = run(shell, "%%tile --view widget --show all\n" + ADD + "add(z.partition(256), x, y)")
    assert res.success, res.error_in_exec
    pages = [o.data["text/html"] for o in cap.outputs if "tilelab-static" in
             o.data.get("text/html", "")]
    assert len(pages) == 1 and any(WIDGET in o.data for o in cap.outputs)
    page = pages[0].replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert "<svg" in page                 # the figures are inline


# ------------------------------------------------------------------ 9: themes

def test_css_variables_carry_both_looks_and_follow_jupyterlab_first():
    assert css_variables("light")["--tl-race"] == LIGHT.race
    assert css_variables("dark")["--tl-c3"] == DARK.palette[3]
    assert css_var("gpu:h200") == f"var(--tl-gpu-h200, {LIGHT.gpu_colors['h200']})"
    with pytest.raises(ValueError, match="palette:N"):
        css_var("colour")
    css = theme_css()
    light, dark = css.split("\n")[:2]
    assert light.startswith('.tilelab-view, [data-jp-theme-light="true"] .tilelab-view {')
    assert dark.startswith('[data-jp-theme-light="false"] .tilelab-view {')
    assert f"--tl-race: {DARK.race};" in dark and f"--tl-race: {LIGHT.race};" in light
    assert "--tl-fg: var(--jp-content-font-color1, #e6e6e6)" in dark
    media = css[css.index("@media (prefers-color-scheme: dark)"):]
    assert "body:not([data-jp-theme-light]) .tilelab-view {" in media
    assert f"--tl-race: {DARK.race};" in media
    assert theme_css() in TileView([], "h").to_html()


def test_figures_embed_as_svg_or_as_a_light_and_a_dark_png():
    svg = Image(b"", "roofline")
    object.__setattr__(svg, "svg", '<?xml version="1.0"?>\n<svg width="10"><rect '
                                   'fill="var(--tl-fg, #1a1a1a)"/></svg>')
    page = figure_html(svg)
    assert page.startswith('<figure class="tl-figure tl-svg"><svg width="10">')
    assert "<?xml" not in page and "img" not in page
    both = Image(b"\x89PNG light", "own")
    object.__setattr__(both, "png_dark", b"\x89PNG dark")
    page = figure_html(both)
    assert page.count("<img") == 2
    assert 'class="tl-only-light"' in page and 'class="tl-only-dark"' in page
    assert ".tilelab-view .tl-only-dark { display: none; }" in theme_css()


# ------------------------------------------------------------------ 4, 5: timings, widths

@pytest.mark.toolchain
def test_timings_show_seven_columns_and_the_rest_in_a_details_row(shell):
    res, _ = run(shell, "%%tile --view html --show timings\n" + ADD + "add(z.partition(256), x, y)")
    assert res.success, res.error_in_exec
    p = lab.last_view().panel("timings")
    heads = re.findall(r"<th>(.*?)</th>", p.html)
    assert heads == ["kernel", "launch", "grid", "time", "GB/s", "TFLOP/s", "% of roof"]
    rows = re.findall(r"<tr>(.*?)</tr>", p.html.split("<tbody>")[1])
    assert len(rows) == 1 and rows[0].count("<td") == 7
    more = re.search(r'<tr class="tl-more"><td colspan="7"><details>(.*?)</details>', p.html)
    assert more and "frontend (ms)" in more.group(1) and "tileiras (ms)" in more.group(1)
    assert "<summary>compile: " in more.group(1)
    assert re.search(r"\d+(\.\d+)?%", rows[0]), rows[0]           # % of roof is a number
    assert p.text.splitlines()[0].split() == ["kernel", "launch", "grid", "time", "GB/s",
                                              "TFLOP/s", "%", "of", "roof"]


def test_layout_css_fits_narrow_outputs():
    assert "white-space: pre;" in CSS.split("pre.tl-code, .tilelab-view pre.tl-error {")[1]
    # source and listing side by side from 780 px (the source as wide as its code, at most
    # half), stacked below: a container query on the pair's box
    assert ".tilelab-view .tl-pair-box { container-type: inline-size; }" in CSS
    assert re.search(r"@container \(max-width: 779px\) \{\s*\.tilelab-view \.tl-pair "
                     r"\{ flex-direction: column;", CSS)
    tabs = CSS.split(".tilelab-view .tl-tabs {")[1].split("}")[0]
    assert "flex-wrap: wrap" in tabs
    assert ".tilelab-widget-tabs .lm-TabBar-content { flex-wrap: wrap; }" in CSS
    w = TileView([Panel("ptx", "PTX", "x", "x")], "h", mode="widget").to_widget()
    assert "tilelab-widget-tabs" in w.children[1]._dom_classes


def test_the_explorer_wraps_and_scales_its_figures():
    from tilelab.kernels.examples import vector_add
    from tilelab.lab.views.widgets import explore

    def make_args(tile, n):
        x = tl.ones(n, device="cpu")
        return (tl.empty(n, device="cpu").partition(tile), x, x)

    ex = explore(vector_add, make_args, tile_sizes=(64,), problem_sizes=(1024,),
                 backend="cpu", theme="light")
    rows = [c for c in ex.children if hasattr(c, "children")]
    assert all(r.layout.flex_flow == "row wrap" and r.layout.max_width == "100%" for r in rows)
    assert ex.roofline_view.layout.max_width == "100%"
    assert "<svg" in ex.roofline_view.value and "--tl-race" in ex.roofline_view.value


# ------------------------------------------------------------------ 8: races

@pytest.mark.toolchain
def test_a_race_shows_the_tabs_with_a_race_tab_and_names_cells(shell):
    res, _ = run(shell, RACY)
    assert res.success, res.error_in_exec
    res, cap = run(shell, '''%%tile --view html --show lowered
out = tl.zeros((2, 8, 4, 8), dtype="float32")
x = tl.randn(2, 4, 8, 8, dtype="float32")
permute_raw(out, x, 8, 8, grid=(2, 4, 1))
''')
    assert isinstance(res.error_in_exec, tl.LaunchError)
    v = lab.last_view()
    assert [p.title for p in v.panels] == ["Race", "Lowered"]
    assert any("tilelab-static" in o.data.get("text/html", "") for o in cap.outputs)
    race = v.panel("race")
    assert re.search(r"write at In\[\d+\], line 8", race.html), race.text
    assert "<ipython-input" not in race.html
    svg = race.html[race.html.index("<svg"):race.html.index("</svg>")]
    labels = re.findall(r"out\[(\d), (\d), :, :\]", svg)
    assert labels == [(str(b), str(s)) for b in range(2) for s in range(8)]   # no slice skipped
    assert "var(--tl-race, " in svg
    assert "def permute_raw" in v.panel("lowered").text
    assert "1 launch" in v.header
    shown = "".join(res.error_in_exec._render_traceback_())
    assert re.search(r"write at In\[\d+\], line 8", shown) and "<ipython-input" not in shown


def test_categories_svg_pools_large_arrays_and_draws_every_slice():
    from tilelab.lab.views.race_view import MAX_SLICES, categories_svg

    big = np.zeros((1000, 1000), np.int8)
    big[5, 5] = 3
    svg = categories_svg(big, "a")
    assert "1 cell = 11×11 elements" in svg and "var(--tl-race" in svg
    many = categories_svg(np.zeros((MAX_SLICES + 4, 2, 2), np.int8), "b")
    assert f"showing the first {MAX_SLICES} of {MAX_SLICES + 4} slices" in many


# ------------------------------------------------------------------ 10: small things

def test_magic_help_is_plain_text():
    from tilelab.lab.magic import TileMagics

    doc = TileMagics.tile.__doc__
    assert doc.startswith("Usage:\n\n  %%tile [--arch SM]")
    assert "``" not in doc and "::" not in doc


@pytest.mark.toolchain
def test_resources_say_each_fact_once(shell):
    res, _ = run(shell, "%%tile --view html --show resources\n" + ADD + "add(z.partition(256), x, y)")
    assert res.success, res.error_in_exec
    page = lab.last_view().panel("resources").html
    # the compiler's summary once; the one table is the occupancy's (a count per limit)
    assert page.count('<pre class="tl-code">') == 1
    assert page.count("<table") == 1 and '<table class="tl-table tl-occupancy">' in page
    assert "blocks/SM that fit:" in page and page.count("min blocks/SM") <= 1


@pytest.mark.toolchain
def test_two_specializations_share_one_view_with_a_picker(shell):
    cell = ADD + "for t in (256, 1024):\n    add(z.partition(t), x, y)\n"
    res, _ = run(shell, "%%tile --view html --bench --show tileir,lowered\n" + cell)
    assert res.success, res.error_in_exec
    v = lab.last_view()
    assert len(v.report.kernels) == 2
    ir = v.panel("tileir").html
    assert ir.count('class="tl-picker"') == 1 and ir.count('class="tl-pick"') == 2
    assert ir.count('type="radio"') == 2 and ir.count(" checked") == 1
    assert "tiles 256" in ir and "tiles 1024" in ir


@pytest.mark.toolchain
def test_astype_is_attributed_to_the_users_line(shell):
    res, _ = run(shell, '''%%tile --view html --show tileir
import tilelab as tl
def conv(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    z.store(t.astype(z.dtype))
x = tl.arange(1024, dtype="float32"); z = tl.empty(1024, dtype="float16")
conv(z.partition(256), x)
''')
    assert res.success, res.error_in_exec
    k = lab.last_view().report.kernels[0]
    if k.ir_problem:
        pytest.skip(k.ir_problem)
    [ftof] = [l for l in k.ir_lines if " ftof " in l.text]
    assert ftof.filename == k.source_file and ftof.line == 5, ftof
    assert "_stub.py" not in lab.last_view().panel("tileir").html


def test_rename_cells_turns_cell_files_into_in_n(shell):
    from tilelab.lab.cell.shell import cell_files, display_name, rename_cells

    run(shell, "pass")
    name = cell_files(shell)[-1]
    cell = display_name(shell, name)
    assert re.fullmatch(r"In\[\d+\]", cell), cell
    shown = rename_cells(f"race; write at {name}:6, write at {name}:7 ({name}:3:5)", shell)
    assert shown == f"race; write at {cell}, line 6, write at {cell}, line 7 ({cell}:3:5)"
    assert rename_cells("write at kernels.py:6", shell) == "write at kernels.py:6"


@pytest.mark.parametrize("module", ["views.race_view", "views.timings_table", "figures.theme",
                                    "views.widgets", "report.record", "cell.shell",
                                    "cell.save"])
def test_doctests_of_the_page_modules(module):
    import doctest
    import importlib

    mod = importlib.import_module(f"tilelab.lab.{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
