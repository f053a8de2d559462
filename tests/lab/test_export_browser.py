"""The exported notebook, offline, in headless Chromium: every %%tile view is there.

A small notebook (a vector add shown with ``--show all``, a kernel with a race shown with
``--show lowered,safety``) is executed with nbclient in a real kernel (so the view
publishes its widget too, with the widget state saved) and exported with nbconvert's lab
template, light and dark. Chromium opens the page with the network blocked and checks
what a reader sees:

- every tab of every view shows its content when its label is clicked (and only it);
- the Safety tab marks each access of the source by kind, counts them, shows the Tile IR
  validator's verdicts and links them to their source lines, in both themes;
- no request comes from the views (the only requests are the template's own CDN scripts:
  MathJax, require.js and the widget manager, which fail offline without hiding anything);
- at 1100 px the output area has no horizontal overflow and no tab label is clipped;
- the figures and the view follow the page's theme: nbconvert's dark template, JupyterLab's
  ``data-jp-theme-light`` attribute, and ``prefers-color-scheme`` on a plain page.

Screenshots are written under the test's tmp dir and ``$TILELAB_SCREENSHOT_DIR``.
Needs nbclient, nbconvert, ipykernel, playwright and Chromium (``/usr/bin/chromium`` or
``$TILELAB_CHROMIUM``; ``.ci/install-browser`` installs it); otherwise skips, unless
``TILELAB_REQUIRE_BROWSER=1``.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from tilelab import config
from test_browser import CHROMIUM, CHROMIUM_ARGS, _require_browser  # same directory

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
nbconvert = pytest.importorskip("nbconvert")

pytestmark = pytest.mark.slow

ADD = '''%%tile --show all
def add(z: tl.Out, x: tl.In, y: tl.In):
    z.store(tl.load_like(x, z) + tl.load_like(y, z))

x = tl.arange(4096, dtype="float32"); y = tl.ones(4096, dtype="float32")
z = tl.empty(4096, dtype="float32")
add(z.partition(256), x, y)
'''
RACY = '''@tl.kernel(unsafe=True)
def permute_raw(out: tl.Raw, x: tl.In, BS: ct.Constant[int], D: ct.Constant[int]):
    b, h, s = ct.bid(0), ct.bid(1), ct.bid(2)
    t = ct.load(x, index=(b, h, s, 0), shape=(1, 1, BS, D))
    ct.store(out, index=(b, s, b, 0), tile=ct.permute(t, (0, 2, 1, 3)))   # b, not h!
'''
RACE_CELL = '''%%tile --show lowered,safety
out = tl.zeros((2, 8, 4, 8), dtype="float32")
x = tl.randn(2, 4, 8, 8, dtype="float32")
permute_raw(out, x, 8, 8, grid=(2, 4, 1))
'''
#: what the nbconvert lab template itself loads from the network (never the views)
TEMPLATE_HOSTS = ("cdnjs.cloudflare.com", "unpkg.com", "cdn.jsdelivr.net")
LIGHT_RACE, DARK_RACE = "rgb(214, 39, 40)", "rgb(255, 77, 77)"   # theme.LIGHT/DARK.race


def _shots(tmp: Path, name: str) -> list[Path]:
    paths = [tmp / name]
    extra = config.screenshot_dir()
    if extra:
        Path(extra).mkdir(parents=True, exist_ok=True)
        paths.append(Path(extra) / name)
    return paths


def _screenshot(page, tmp: Path, name: str, **kw) -> None:
    paths = _shots(tmp, name)
    page.screenshot(path=str(paths[0]), **kw)
    for p in paths[1:]:
        shutil.copy(paths[0], p)
    print(f"screenshot: {', '.join(map(str, paths))}")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """{'light': path, 'dark': path, 'plain': path, 'nb': notebook} of the exported pages."""
    _require_browser()
    tmp = tmp_path_factory.mktemp("export")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("%load_ext tilelab\nimport tilelab as tl\n"
                                          "import cuda.tile as ct"),
                nbformat.v4.new_code_cell(ADD), nbformat.v4.new_code_cell(RACY),
                nbformat.v4.new_code_cell(RACE_CELL)]
    env = {"TILELAB_BACKEND": "cpu", "TILELAB_CACHE_DIR": str(tmp / "cache")}
    old = {k: os.environ.get(k) for k in [*env, "TILELAB_LAB_VIEW", "TILELAB_THEME"]}
    os.environ.update(env)
    for k in ("TILELAB_LAB_VIEW", "TILELAB_THEME"):
        os.environ.pop(k, None)
    try:
        client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                         allow_errors=True)
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

    pages = {"nb": nb}
    for theme in ("light", "dark"):
        body, _ = HTMLExporter(template_name="lab", theme=theme).from_notebook_node(nb)
        pages[theme] = tmp / f"export-{theme}.html"
        pages[theme].write_text(body, encoding="utf-8")
    # a plain page (what --save writes as view.html): no JupyterLab attribute, no --jp-*
    static = [o.data["text/html"] for o in nb.cells[1].outputs
              if "tilelab-static" in o.get("data", {}).get("text/html", "")]
    pages["plain"] = tmp / "plain.html"
    pages["plain"].write_text("<!doctype html><meta charset='utf-8'><body>" + static[0],
                              encoding="utf-8")
    pages["tmp"] = tmp
    return pages


def _browser(pw, width: int = 1100, scheme: str = "light"):
    browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
    context = browser.new_context(viewport={"width": width, "height": 1000},
                                  color_scheme=scheme)
    requests: list[str] = []

    def block(route):
        url = route.request.url
        if not url.startswith(("file:", "data:", "about:")):
            requests.append(url)
            route.abort()
        else:
            route.continue_()

    context.route("**/*", block)
    return browser, context, requests


@pytest.mark.subprocess
def test_the_notebook_keeps_a_static_view_next_to_the_widget(exported):
    outputs = exported["nb"].cells[1].outputs
    static = [o for o in outputs if "tilelab-static" in o.get("data", {}).get("text/html", "")]
    widget = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert len(static) == 1 and len(widget) == 1, [list(o.get("data", {})) for o in outputs]
    assert "application/vnd.jupyter.widget-view+json" not in static[0].data
    assert "widgets" in exported["nb"].metadata   # the state nbconvert renders widgets from
    race = exported["nb"].cells[3].outputs
    assert race[-1].output_type == "error" and race[-1].ename == "LaunchError"
    assert any("tilelab-static" in o.get("data", {}).get("text/html", "") for o in race)


def _check_tabs(page, view) -> list[str]:
    labels = view.locator(":scope > .tl-tabs > label")
    panels = view.locator(":scope > .tl-tabs > .tl-panel")
    titles = [t.strip() for t in labels.all_inner_texts()]
    assert titles and panels.count() == len(titles)
    for i, title in enumerate(titles):
        labels.nth(i).click()
        shown = [panels.nth(j).is_visible() for j in range(panels.count())]
        assert shown == [j == i for j in range(len(titles))], (title, shown)
        text = panels.nth(i).inner_text().strip()
        assert len(text) > 20, (title, text)
    return titles


@pytest.mark.subprocess
def test_every_tab_shows_offline_and_nothing_is_fetched_by_the_views(exported):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser, context, requests = _browser(pw)
        try:
            page = context.new_page()
            errors: list[str] = []
            page.goto(exported["light"].as_uri(), wait_until="load")
            views = page.locator(".tilelab-static")
            assert views.count() == 2
            add, race = views.nth(0), views.nth(1)
            titles = _check_tabs(page, add)
            assert titles == ["Source ↔ Tile IR", "Safety", "Lowered", "PTX", "SASS",
                              "Resources", "Remarks", "Ownership", "Roofline", "Timings"]
            add.locator("label", has_text="Source ↔ Tile IR").click()
            assert "entry @add" in add.inner_text() and "def add(" in add.inner_text()
            add.scroll_into_view_if_needed()
            _screenshot(page, exported["tmp"], "export-light-tileir.png")
            for tab in ("Ownership", "Roofline"):
                add.locator("label", has_text=tab).click()
                panel = add.locator(".tl-panel", has=page.locator("figure")).locator(
                    "visible=true").first
                fig = panel.locator("figure svg, figure img").first
                box = fig.bounding_box()
                assert box and box["width"] > 200 and box["height"] > 80, (tab, box)
                _screenshot(page, exported["tmp"], f"export-light-{tab.lower()}.png")
            add.locator("label", has_text="Timings").click()
            timings = add.locator(".tl-panel[data-view='timings']")
            assert timings.locator("thead th").count() == 7
            details = timings.locator("details").first
            assert not details.locator("dl").is_visible()
            details.locator("summary").click()
            assert details.locator("dl").is_visible()
            assert "frontend (ms)" in details.inner_text()
            _screenshot(page, exported["tmp"], "export-light-timings.png")

            _check_safety(page, add, exported["tmp"], "light")

            titles = _check_tabs(page, race)
            assert titles == ["Race", "Safety", "Lowered"]
            race.locator("label", has_text="Safety").click()
            unsafe = race.locator(".tl-panel[data-view='safety']")
            assert unsafe.locator(".tl-acc-unsafe.tl-acc").inner_text().startswith(
                "ct.store(out, ")
            legend = " ".join(unsafe.locator(".tl-safety-legend").inner_text().split())
            assert "unsafe opt-out 1" in legend and "bounds-checked read 1" in legend
            assert "Tile IR validator: not run" in unsafe.inner_text()
            race.scroll_into_view_if_needed()
            _screenshot(page, exported["tmp"], "export-light-safety-unsafe.png")
            race.locator("label", has_text="Race").click()
            svg = race.locator(".tl-panel[data-view='race'] svg")
            assert svg.count() == 1 and svg.locator("rect").count() > 16
            assert "out[1, 7, :, :]" in svg.inner_html()         # every slice drawn
            shown = race.inner_text()
            assert "line 5" in shown and "ipykernel" not in shown and "/tmp/" not in shown
            race.scroll_into_view_if_needed()
            _screenshot(page, exported["tmp"], "export-light-race.png")
            assert not errors, errors
        finally:
            context.close()
            browser.close()
    # the only requests are the template's CDN scripts (which fail: offline)
    assert all(any(h in u for h in TEMPLATE_HOSTS) for u in requests), requests
    # and the views themselves reference nothing outside the page
    for cell in (1, 3):
        for o in exported["nb"].cells[cell].outputs:
            page = o.get("data", {}).get("text/html", "")
            if "tilelab-static" not in page:
                continue
            page = page.replace('xmlns="http://www.w3.org/2000/svg"', "")
            for ref in ("http://", "https://", "<script", "<link", "@import"):
                assert ref not in page, (cell, ref)
            assert not re.search(r"url\((?!#)", page), cell   # url(#id) stays in the page


def _check_safety(page, view, tmp: Path, theme: str) -> None:
    """The Safety tab: each access of the add marked by kind, the legend's counts, the
    validator's verdicts beside the source; hovering a line lights up its ops."""
    view.locator("label", has_text="Safety").click()
    panel = view.locator(".tl-panel[data-view='safety']")
    marks = panel.locator(".tl-safety-pair .tl-acc")
    assert [marks.nth(i).inner_text() for i in range(marks.count())] == [
        "z.store(tl.load_like(x, z) + tl.load_like(y, z))", "tl.load_like(x, z)",
        "tl.load_like(y, z)"]
    assert "own-tile store" in marks.first.get_attribute("title")
    legend = " ".join(panel.locator(".tl-safety-legend").inner_text().split())
    assert "own-tile store 1" in legend and "launch-proven read 2" in legend
    assert "unsafe opt-out 0" in legend
    shown = panel.inner_text()
    assert "Tile IR validator: 3 memory ops, 3 accepted" in shown
    assert shown.count("store_view_tko") >= 2 and "partition store of z" in shown
    # marks keep the theme's text colour over a translucent tint
    look = marks.first.evaluate("""e => [getComputedStyle(e).color,
        getComputedStyle(e.closest('.tilelab-view')).color,
        getComputedStyle(e).backgroundColor]""")
    assert look[0] == look[1] and look[2].startswith("rgba(") and float(
        look[2].rstrip(")").split(",")[-1]) <= 0.25, look
    ir_row = panel.locator(".tl-safety-pair .tl-col").nth(1).locator(".tl-row").last
    ir_row.hover()
    lit = panel.locator(".tl-safety-pair .tl-col").first.locator(".tl-row").evaluate_all(
        "rows => rows.filter(r => getComputedStyle(r).backgroundColor !== "
        "'rgba(0, 0, 0, 0)').length")
    assert lit == 1, lit                       # the op's source line, and only it
    panel.scroll_into_view_if_needed()
    _screenshot(page, tmp, f"export-{theme}-safety.png")


@pytest.mark.subprocess
def test_views_fit_1100px_without_clipping(exported):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser, context, _ = _browser(pw, width=1100)
        try:
            page = context.new_page()
            page.goto(exported["light"].as_uri(), wait_until="load")
            views = page.locator(".tilelab-static")
            for v in range(views.count()):
                view = views.nth(v)
                labels = view.locator(":scope > .tl-tabs > label")
                for i in range(labels.count()):
                    labels.nth(i).click()
                    fit = page.evaluate("""() => {
                      const bad = [];
                      for (const o of document.querySelectorAll('.jp-OutputArea-output')) {
                        if (o.scrollWidth > o.clientWidth + 1) bad.push(o.scrollWidth);
                      }
                      return [bad, document.documentElement.scrollWidth, innerWidth];
                    }""")
                    assert not fit[0] and fit[1] <= fit[2], (i, fit)
                clipped = labels.evaluate_all(
                    "els => els.filter(e => e.scrollWidth > e.clientWidth + 1 || "
                    "e.getBoundingClientRect().right > e.closest('.tilelab-view')"
                    ".getBoundingClientRect().right + 1).map(e => e.textContent)")
                assert not clipped, clipped
            pre = page.locator(".tilelab-static pre.tl-code").first
            assert pre.evaluate("e => getComputedStyle(e).whiteSpace") == "pre"
            views.nth(0).locator("label", has_text="Source ↔ Tile IR").click()
            views.nth(0).scroll_into_view_if_needed()
            _screenshot(page, exported["tmp"], "export-1100px-tileir.png")
            views.nth(0).locator("label", has_text="PTX").click()
            _screenshot(page, exported["tmp"], "export-1100px-ptx.png")
        finally:
            context.close()
            browser.close()


def _race_fill(page) -> str:
    return page.evaluate("""() => {
      const r = [...document.querySelectorAll('.tl-race-svg rect')]
        .find(e => (e.getAttribute('fill') || '').includes('--tl-race,'));
      return r ? getComputedStyle(r).fill : null;
    }""")


def _view_colors(page) -> list[str]:
    return page.evaluate("""() => {
      const v = document.querySelector('.tilelab-static');
      const s = getComputedStyle(v);
      return [s.backgroundColor, s.color, s.getPropertyValue('--tl-race').trim()];
    }""")


@pytest.mark.subprocess
def test_figures_follow_the_theme_without_a_rerun(exported):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        for theme in ("light", "dark"):
            browser, context, _ = _browser(pw)
            try:
                page = context.new_page()
                page.goto(exported[theme].as_uri(), wait_until="load")
                race = page.locator(".tilelab-static").nth(1)
                race.locator("label", has_text="Race").click()
                assert _race_fill(page) == (LIGHT_RACE if theme == "light" else DARK_RACE)
                bg, fg, _ = _view_colors(page)
                if theme == "dark":
                    assert bg != "rgb(255, 255, 255)" and fg != "rgb(0, 0, 0)"
                race.scroll_into_view_if_needed()
                _screenshot(page, exported["tmp"], f"export-{theme}-theme-race.png")
                add = page.locator(".tilelab-static").nth(0)
                if theme == "dark":
                    _check_safety(page, add, exported["tmp"], "dark")
                add.locator("label", has_text="Ownership").click()
                add.scroll_into_view_if_needed()
                _screenshot(page, exported["tmp"], f"export-{theme}-theme-ownership.png")
                if theme == "light":   # JupyterLab switches themes by this attribute
                    page.evaluate("document.body.setAttribute('data-jp-theme-light', 'false')")
                    assert _race_fill(page) == DARK_RACE
            finally:
                context.close()
                browser.close()
        for scheme, want in (("light", LIGHT_RACE), ("dark", DARK_RACE)):
            browser, context, _ = _browser(pw, scheme=scheme)
            try:
                page = context.new_page()
                page.goto(exported["plain"].as_uri(), wait_until="load")
                page.locator(".tilelab-static label", has_text="Ownership").click()
                bg = _view_colors(page)[0]
                assert (bg == "rgb(255, 255, 255)") == (scheme == "light"), bg
                got = page.evaluate("getComputedStyle(document.querySelector('.tilelab-view'))"
                                    ".getPropertyValue('--tl-race').trim()")
                assert got == ("#d62728" if want == LIGHT_RACE else "#ff4d4d"), got
                _screenshot(page, exported["tmp"], f"plain-{scheme}-scheme-ownership.png",
                            full_page=True)
            finally:
                context.close()
                browser.close()
