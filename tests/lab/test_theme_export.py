"""Plain-cell figures and the explorer in an exported notebook, offline, light and dark.

A small notebook — the lab's two SVG figures (``ownership_figure``, ``roofline_figure``)
and a matplotlib chart made with ``themed()``/``new_figure``, shown by a plain cell, then
an ``explore(...)`` panel — is executed with nbclient in a real kernel (the widget state
saved, as for the ``%%tile`` views) and exported with nbconvert's lab template, light and
dark. Headless Chromium opens the pages with the network blocked:

- each figure's background and text follow the page's theme (the light and the dark
  template; the outputs alone on a plain page follow ``prefers-color-scheme``), and its
  text stays readable on its background (the switch inside JupyterLab, with no re-run, is
  ``test_jupyterlab_browser.py``'s);
- the explorer, whose widget needs JavaScript from a CDN, shows its static snapshot: both
  figures and the status line;
- at 1100 px nothing overflows sideways, and no request comes from the outputs.

Screenshots go under the test's tmp dir and ``$TILELAB_SCREENSHOT_DIR``. Needs nbclient,
nbconvert, ipykernel, playwright and Chromium; skips without them unless
``TILELAB_REQUIRE_BROWSER=1``.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tilelab import config
from test_browser import CHROMIUM, CHROMIUM_ARGS, _require_browser  # same directory

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("nbconvert")

pytestmark = pytest.mark.slow

SETUP = "%load_ext tilelab\nimport tilelab as tl"
FIGURES = '''from tilelab.lab.figures.ownership import ownership_figure
from tilelab.lab.figures.roofline_plot import roofline_figure
from tilelab.lab.figures.theme import new_figure, themed
from tilelab.perf import predict
from tilelab.perf.counting import elementwise

display(ownership_figure(tl.empty((256, 384), dtype="float32").partition((64, 128)), name="z"))
display(roofline_figure([predict(elementwise(1 << 26, name="add"), "h200").point()]))
with themed() as theme:
    fig = new_figure(theme, figsize=(5, 2.2))
    ax = fig.add_subplot()
    ax.plot([1, 2, 4, 8], [1, 3, 2, 4], "o-", label="blocks")
    ax.axhline(2, color=theme.muted, ls="--", lw=1)
    ax.set_title("a themed chart")
    ax.legend()
fig
'''
EXPLORE = '''from tilelab.kernels.examples import vector_add
from tilelab.lab.views.widgets import explore

def make_args(tile, n):
    x = tl.ones(n, device="cpu")
    return (tl.empty(n, device="cpu").partition(tile), x, x)

explorer = explore(vector_add, make_args, tile_sizes=(64, 128), problem_sizes=(1024, 4096))
explorer.tile_slider.value = 128
explorer
'''
TEMPLATE_HOSTS = ("cdnjs.cloudflare.com", "unpkg.com", "cdn.jsdelivr.net")

# each figure: its background, its text's colours and the worst contrast (WCAG)
_JS_FIGURES = """() => {
  const rgb = s => { const m = (s || '').match(/rgba?\\(([^)]+)\\)/);
    return m ? m[1].split(/[ ,\\/]+/).filter(Boolean).slice(0, 3).map(Number) : null; };
  const lum = c => { const f = x => { x /= 255;
    return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const contrast = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
    return (x + 0.05) / (y + 0.05); };
  const behind = e => { for (; e; e = e.parentElement) {
    const c = getComputedStyle(e).backgroundColor;
    if (c && !/rgba\\(.*,\\s*0\\)$/.test(c)) return rgb(c); } return [255, 255, 255]; };
  const fillOf = e => e.getAttribute('fill') ||
    ((e.getAttribute('style') || '').match(/fill:\\s*([^;]+)/) || [, ''])[1];
  return [...document.querySelectorAll('.tilelab-figure > svg')].map(svg => {
    const ground = [...svg.querySelectorAll('rect, path')].find(e =>
      /--tl-(bg|panel)\\b/.test(fillOf(e)));
    const bg = ground ? rgb(getComputedStyle(ground).fill) : behind(svg);   // or the page's
    const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim()
      && !t.getAttribute('stroke') && (!fillOf(t) || /--tl-(fg|muted)\\b/.test(fillOf(t))));
    const fills = texts.map(t => rgb(getComputedStyle(t).fill));
    return {chart: svg.classList.contains('tl-mpl'), bg, lumBg: lum(bg), texts: texts.length,
            textFill: fills[0], worst: Math.min(...fills.map(f => contrast(f, bg))),
            width: svg.getBoundingClientRect().width};
  });
}"""


def _shot(page, tmp: Path, name: str, target=None) -> None:
    paths = [tmp / name]
    extra = config.screenshot_dir()
    if extra:
        Path(extra).mkdir(parents=True, exist_ok=True)
        paths.append(Path(extra) / name)
    (target or page).screenshot(path=str(paths[0]))
    for p in paths[1:]:
        shutil.copy(paths[0], p)
    print(f"screenshot: {', '.join(map(str, paths))}")


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """{'light': path, 'dark': path, 'nb': notebook, 'tmp': dir} of the exported pages."""
    _require_browser()
    tmp = tmp_path_factory.mktemp("theme-export")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in (SETUP, FIGURES, EXPLORE)]
    env = {"TILELAB_BACKEND": "cpu", "TILELAB_CACHE_DIR": str(tmp / "cache")}
    old = {k: os.environ.get(k) for k in [*env, "TILELAB_THEME", "TILELAB_LAB_VIEW"]}
    os.environ.update(env)
    os.environ.pop("TILELAB_THEME", None)
    os.environ.pop("TILELAB_LAB_VIEW", None)
    try:
        client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3")
        try:
            client.execute()
        except Exception as e:  # no kernel spec on this machine
            if type(e).__name__ == "NoSuchKernel":
                pytest.skip(f"no python3 kernel: {e}")
            raise
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    from nbconvert import HTMLExporter

    out = {"nb": nb, "tmp": tmp}
    for theme in ("light", "dark"):
        body, _ = HTMLExporter(template_name="lab", theme=theme).from_notebook_node(nb)
        out[theme] = tmp / f"figures-{theme}.html"
        out[theme].write_text(body, encoding="utf-8")
    figures = "".join(o.data["text/html"] for o in nb.cells[1].outputs)
    out["plain"] = tmp / "figures-plain.html"
    out["plain"].write_text(f"<!doctype html><meta charset='utf-8'><body>{figures}",
                            encoding="utf-8")
    return out


def _open(pw, path: Path, width: int = 1100, scheme: str = "light"):
    browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
    context = browser.new_context(viewport={"width": width, "height": 1000},
                                  color_scheme=scheme)
    requests: list[str] = []

    def block(route):
        if route.request.url.startswith(("file:", "data:", "about:")):
            route.continue_()
        else:
            requests.append(route.request.url)
            route.abort()

    context.route("**/*", block)
    page = context.new_page()
    page.goto(path.as_uri(), wait_until="load")
    return browser, page, requests


@pytest.mark.subprocess
def test_the_outputs_are_themed_html_with_no_png(pages):
    figures = pages["nb"].cells[1].outputs
    assert [sorted(o.get("data", {})) for o in figures] == [["text/html", "text/plain"]] * 3
    assert all('<div class="tilelab-figure">' in o.data["text/html"] for o in figures)
    explorer = pages["nb"].cells[2].outputs
    kinds = [sorted(o.get("data", {})) for o in explorer]
    assert kinds == [["text/html", "text/plain"], ["application/vnd.jupyter.widget-view+json"]]
    assert "tl-explorer-static" in explorer[0].data["text/html"]


def _check(looks: list[dict], dark: bool, where: str) -> None:
    assert [f["chart"] for f in looks] == [False, False, True], (where, looks)
    for f in looks:
        assert f["texts"] > 0 and f["worst"] >= 3.0, (where, f)
        assert (f["lumBg"] < 0.1) if dark else (f["lumBg"] > 0.8), (where, f)
        assert f["width"] <= 1100, (where, f)


@pytest.mark.subprocess
def test_plain_cell_figures_follow_the_page_theme_without_a_rerun(pages):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser, page, requests = _open(pw, pages["light"])
        try:
            light = page.evaluate(_JS_FIGURES)
            _check(light, False, "light page")
            page.locator(".tilelab-figure").first.scroll_into_view_if_needed()
            _shot(page, pages["tmp"], "export-light-plain-figures.png")
        finally:
            browser.close()
        browser, page, _ = _open(pw, pages["dark"])
        try:
            dark = page.evaluate(_JS_FIGURES)
            _check(dark, True, "dark page")
            assert all(a["textFill"] != b["textFill"] for a, b in zip(light, dark))
            page.locator(".tilelab-figure").first.scroll_into_view_if_needed()
            _shot(page, pages["tmp"], "export-dark-plain-figures.png")
        finally:
            browser.close()
        # the outputs alone on a page that knows no theme: the browser's preference rules
        for scheme in ("light", "dark"):
            browser, page, _ = _open(pw, pages["plain"], scheme=scheme)
            try:
                _check(page.evaluate(_JS_FIGURES), scheme == "dark", f"plain page, {scheme}")
                _shot(page, pages["tmp"], f"plain-{scheme}-plain-figures.png")
            finally:
                browser.close()
    assert all(any(h in u for h in TEMPLATE_HOSTS) for u in requests), requests


@pytest.mark.subprocess
def test_the_explorer_shows_its_snapshot_offline_at_1100px(pages):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        for theme in ("light", "dark"):
            browser, page, _ = _open(pw, pages[theme])
            try:
                snap = page.locator(".tl-explorer-static")
                assert snap.count() == 1 and snap.is_visible()
                text = snap.inner_text()
                assert "a snapshot at tile 128, problem size 1024" in text, text
                assert "vector_add tile=128 n=1024" in text and "predicted" in text
                svgs = snap.locator("svg")
                assert svgs.count() == 2
                for i in range(2):
                    box = svgs.nth(i).bounding_box()
                    assert box and box["width"] > 200 and box["height"] > 100, box
                fit = page.evaluate("""() => [...document.querySelectorAll(
                    '.jp-OutputArea-output')].filter(o => o.scrollWidth > o.clientWidth + 1)
                    .map(o => o.scrollWidth)""")
                assert not fit and page.evaluate(
                    "document.documentElement.scrollWidth <= innerWidth"), fit
                snap.scroll_into_view_if_needed()
                _shot(page, pages["tmp"], f"export-{theme}-explorer.png", target=snap)
            finally:
                browser.close()
