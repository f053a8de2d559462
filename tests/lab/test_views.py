"""The views of a %%tile cell: static HTML tabs, widget tabs, highlighting, Tile IR lines."""
from __future__ import annotations

import doctest
import importlib
import re
from html.parser import HTMLParser

import pytest

import tilelab as tl
from tilelab.lab.report.cell_report import (CellReport, KernelReport, build_kernel_report,
                                            timings_frame)
from tilelab.lab.report.debuginfo import IRLine, annotate_tileir, parse_debug_tileir
from tilelab.lab.views.highlight import highlight_lines
from tilelab.lab.report.options import VIEWS
from tilelab.lab.views.panels import Panel, build_panels
from tilelab.lab.views.tabs import TileView


@tl.kernel
def scale(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) * 3)


SPEC = tl.spec(1024, "float32")


@pytest.fixture(scope="module")
def kernel_report() -> KernelReport:
    return build_kernel_report(scale, (SPEC.partition(128), SPEC), arch="sm_90", force=False,
                               launches=0, signature="z, x", views=VIEWS)


class Page(HTMLParser):
    """Radios, labels and panels of a static view, plus every tag's attributes."""

    def __init__(self, text: str):
        super().__init__()
        self.radios, self.labels, self.panels, self.titles = [], [], [], []
        self.styles: list[str] = []          # <style> blocks
        self.inline: list[str] = []          # style="..." attributes
        self._in = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = (a.get("class") or "").split()
        if tag == "input":
            self.radios.append(a)
        elif tag == "label":
            self._in = "label"
            self.labels.append(a.get("for"))
        elif tag == "div" and "tl-panel" in cls:
            self.panels.append(a.get("data-view"))
        elif tag == "h3" and "tl-panel-title" in cls:
            self._in = "title"
        elif tag == "style":
            self._in = "style"
        if "style" in a:
            self.inline.append(a["style"])

    def handle_endtag(self, tag):
        self._in = None

    def handle_data(self, data):
        if self._in == "title":
            self.titles.append(data)
        elif self._in == "style":
            self.styles.append(data)


@pytest.mark.toolchain
def test_static_html_tabs_are_radio_buttons_with_one_panel_each(kernel_report):
    report = CellReport(cell_name="In[7]", views=VIEWS, kernels=[kernel_report])
    view = TileView(build_panels(report), report.summary_line(), ["a note"])
    page = Page(view.to_html())
    assert page.panels == list(VIEWS)
    assert page.titles == ["Source ↔ Tile IR", "Safety", "Lowered", "PTX", "SASS",
                           "Resources", "Remarks", "Ownership", "Roofline", "Timings"]
    assert len(page.radios) == len(page.labels) == len(VIEWS)
    assert [r.get("type") for r in page.radios] == ["radio"] * len(VIEWS)
    assert len({r["name"] for r in page.radios}) == 1             # one group per view
    assert "checked" in page.radios[0] and all("checked" not in r for r in page.radios[1:])
    assert page.labels == [r["id"] for r in page.radios]
    html = view.to_html()
    assert "<script" not in html                                  # pure HTML and CSS
    assert "In[7]: 1 kernel" in html and "a note" in html
    text = re.sub(r"<[^>]+>", "", html)
    assert "mulf" in text and "ct.store(z" in text and ".target sm_90" in text


@pytest.mark.toolchain
def test_two_views_on_one_page_do_not_share_ids(kernel_report):
    report = CellReport(views=("tileir",), kernels=[kernel_report])
    a, b = (TileView(build_panels(report), "h").to_html() for _ in range(2))
    ids_a = set(re.findall(r'id="([^"]+)"', a))
    ids_b = set(re.findall(r'id="([^"]+)"', b))
    assert ids_a and not ids_a & ids_b


@pytest.mark.toolchain
def test_css_follows_the_jupyterlab_theme(kernel_report):
    report = CellReport(views=VIEWS, kernels=[kernel_report])
    page = Page(TileView(build_panels(report), "h").to_html())
    css = " ".join(page.styles)
    for var in ("--jp-layout-color0", "--jp-content-font-color1", "--jp-border-color2",
                "--jp-code-font-family", "--jp-mirror-editor-keyword-color"):
        assert var in css
    assert "prefers-color-scheme: dark" in css
    # no hard-coded light backgrounds anywhere (figures carry their own theme)
    assert not re.search(r"background(-color)?:\s*(#fff\b|#ffffff|white)", css, re.I)
    assert page.inline and all(s.startswith(("border-left-color: hsl(", "text-align:",
                                             "--tl-src-ch:"))
                               for s in page.inline)          # no inline colours or fills


def test_widget_tabs_hold_the_same_panels(kernel_report):
    report = CellReport(views=("tileir", "lowered", "timings"), kernels=[kernel_report])
    panels = build_panels(report)
    view = TileView(panels, "h", mode="widget")
    box = view.to_widget()
    head, tab = box.children
    assert tab.titles == tuple(p.title for p in panels)
    for child, panel in zip(tab.children, panels):
        assert panel.html in child.value
    assert "tilelab-view" in head.value and ".tl-tabs" in head.value
    bundle = view._repr_mimebundle_()
    assert {"text/plain", "text/html", "application/vnd.jupyter.widget-view+json"} <= set(bundle)
    static = TileView(panels, "h", mode="html")._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" not in static


def test_auto_mode_publishes_widgets_only_in_a_kernel():
    view = TileView([Panel("ptx", "PTX", "<b>x</b>", "x")], "h", mode="auto", shell=None)
    assert not view.use_widget()
    with pytest.raises(ValueError, match="view mode"):
        TileView([], "h", mode="tabs")


def test_source_tile_ir_panel_links_every_located_op(kernel_report):
    html = build_panels(CellReport(views=("tileir",), kernels=[kernel_report]))[0].html
    anchors = set(re.findall(r'id="(tl[0-9a-f]+-L\d+)"', html))
    links = re.findall(r'href="#(tl[0-9a-f]+-L\d+)"', html)
    assert links and set(links) <= anchors
    located = [l for l in kernel_report.ir_lines if l.located]
    assert len(links) == len(located) > 5
    body_line = scale.definition.analysis.source.first_line + 2   # decorator, def, body
    mulf = next(l for l in kernel_report.ir_lines if "mulf" in l.text)
    assert mulf.line == body_line and mulf.filename == __file__
    # hovering a line highlights its partner rows (generated :has() rules)
    assert f":has(.tl-l{body_line}:hover)" in html


def test_text_summary_and_timings_frame(kernel_report):
    report = CellReport(cell_name="In[2]", views=("timings", "ptx"), kernels=[kernel_report])
    view = TileView(build_panels(report), report.summary_line())
    text = view.to_text()
    assert text.startswith("In[2]: 1 kernel, no launches") and "== Timings ==" in text
    assert ".version" not in text                          # listings stay in their tabs
    frame = timings_frame(report)
    assert frame.loc[0, "kernel"] == "scale" and frame.loc[0, "compile"] in (
        "compiled", "cache hit")
    assert view.panel("ptx").title == "PTX"
    with pytest.raises(KeyError, match="no 'sass' tab"):
        view.panel("sass")


def test_compile_failure_shows_the_located_error_in_the_tabs():
    k = KernelReport("k", "z", "sm_90", error="cell:3:5: cuTile rejected kernel 'k'",
                     source_file="cell", source_lines=("def k(z):\n", "    pass\n"))
    report = CellReport(views=VIEWS, kernels=[k])
    for p in build_panels(report)[:6]:
        assert "cuTile rejected kernel" in p.html, p.key
    assert "tl-error" in build_panels(report)[0].html


def test_highlight_keeps_one_entry_per_line():
    text = "entry @k(%a: tile<ptr<f32>>) {\n\n  %0 = addf %a, %a : tile<128x64xf32>\n}"
    lines = highlight_lines(text, "tileir")
    assert len(lines) == 4 and lines[1] == ""
    assert '<span class="tl-k">addf</span>' in lines[2]
    assert '<span class="tl-t">128x64xf32</span>' in lines[2]
    assert '<span class="tl-f">@k</span>' in lines[0]
    py = highlight_lines('s = """a\nb"""\nx = 1', "python")
    assert len(py) == 3 and all(l.count("<span") == l.count("</span>") for l in py)
    sass = highlight_lines("        /*0010*/  @P0 IMAD.MOV R5, RZ, RZ, -R0 ;", "sass")[0]
    assert 'class="tl-k">IMAD.MOV<' in sass and 'class="tl-v">R5<' in sass
    assert highlight_lines("<b>&", "unknown") == ["&lt;b&gt;&amp;"]


def test_debug_info_resolves_aliases_and_call_sites():
    text = '''entry @k() {
  %0 = make_token : token loc(#loc3)
  %1 = addf %a, %b : tile<4xf32> loc(callsite(#loc4 at #loc3))
  return loc(#loc5)
} loc(#loc3)
#loc1 = loc("low":5:0)
#loc2 = loc("low":9:8)
#loc3 = #cuda_tile.di_loc<#loc1 in #di_subprogram>
#loc4 = #cuda_tile.di_loc<#loc2 in #di_subprogram>
#loc5 = loc(unknown)
#di_file = #cuda_tile.di_file<"low" in "">
'''
    lines = parse_debug_tileir(text, lambda f, l, c: ("cell", l + 1, c + 1))
    assert [l.text for l in lines] == ["entry @k() {", "  %0 = make_token : token",
                                       "  %1 = addf %a, %b : tile<4xf32>", "  return", "}"]
    assert [l.line for l in lines] == [None, 6, 10, None, 6]
    assert lines[2] == IRLine("  %1 = addf %a, %b : tile<4xf32>", "cell", 10, 9)


def test_annotate_tileir_falls_back_to_plain_text_without_the_disassembler(monkeypatch,
                                                                           kernel_report):
    import tilelab.compiler.toolchain as toolchain

    real = toolchain.find_toolchain()
    monkeypatch.setattr(toolchain, "find_toolchain",
                        lambda: type(real)(real.tileiras, None, real.version, real.source))
    lines, problem = annotate_tileir(kernel_report.artifacts)
    assert "tileirdisasm is not beside tileiras" in problem
    assert lines and not any(l.located for l in lines)


@pytest.mark.parametrize("module", ["views.highlight", "report.debuginfo", "report.record",
                                    "cell.run", "report.options", "views.panels", "views.tabs",
                                    "report.cell_report", "figures.images", "cell.save",
                                    "report.measure", "cell.collect", "cell.shell", "magic"])
@pytest.mark.toolchain
def test_doctests(module):
    mod = importlib.import_module(f"tilelab.lab.{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
