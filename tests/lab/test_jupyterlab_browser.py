"""A ``%%tile`` view inside JupyterLab, in its light theme and then its dark theme.

JupyterLab (a temporary root, its own settings, a free port, no browser of its own) opens
a two-cell notebook (``%load_ext tilelab``, then a vector add under ``%%tile``), runs it on
the CPU backend, and headless Chromium (through playwright) checks the view:

- its tabs are there and readable (text contrast against what is behind them, no label cut);
- its Safety tab marks the add's three accesses by kind, in the theme's text colour over a
  translucent tint, in both themes;
- switching the theme through JupyterLab's Settings > Theme menu, with no re-run, changes
  the view's colours and those of its SVG figures (ownership and roofline): dark
  backgrounds, light text, text readable on the figure's own background; switching back
  restores the light colours;
- in an 1100 px wide output no tab makes the output scroll sideways and no figure is wider
  than its panel;
- the figures of a plain cell (``ownership_figure``, ``roofline_figure`` and a matplotlib
  chart made with ``themed()``/``new_figure``) follow the same switch: their backgrounds
  turn dark and their text light, readable both ways, and they fit the 1100 px output.

Screenshots go to the test's tmp dir and, when set, ``$TILELAB_SCREENSHOT_DIR``. Needs
``jupyterlab``, ``playwright`` and Chromium (``/usr/bin/chromium`` or
``$TILELAB_CHROMIUM``); without them the test skips and says what is missing, unless
``TILELAB_REQUIRE_BROWSER=1``, which makes it fail.
"""
from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest
from test_browser import (  # same dir
    CHROMIUM,
    CHROMIUM_ARGS,
    JupyterLab,
    _prompts,
    _ran,
    _require_browser,
)

from tilelab import config

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]   # a Jupyter server and its kernels

NOTEBOOK = "tile_view_themes.ipynb"
SETUP = "%load_ext tilelab\nimport tilelab as tl"
ADD = '''%%tile
def add(z: tl.Out, x: tl.In, y: tl.In):
    z.store(tl.load_like(x, z) + tl.load_like(y, z))

x = tl.arange(4096, dtype="float32"); y = tl.ones(4096, dtype="float32")
z = tl.empty(4096, dtype="float32")
add(z.partition(256), x, y)
'''
# figures shown by a plain cell: two SVG figures of the lab and a themed matplotlib chart
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
    ax.set_xlabel("tile")
    ax.legend()
fig
'''
TABS = ("Source ↔ Tile IR", "Safety", "Lowered", "Ownership", "Roofline", "Timings")
FIGURE_TABS = ("Ownership", "Roofline")
OUTPUT_WIDTH = 1100
RUN_TIMEOUT_S = 120
WAIT_MS = 60_000

# colours as the browser computes them, with WCAG's relative luminance and contrast
_JS_COLOURS = """
const rgb = s => { const m = (s || '').match(/rgba?\\(([^)]+)\\)/);
  if (!m) return null; const v = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number);
  return v.length > 3 && v[3] === 0 ? null : v.slice(0, 3); };
const lum = c => { const f = x => { x /= 255;
  return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4; };
  return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
const contrast = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
  return (x + 0.05) / (y + 0.05); };
const behind = e => { for (; e; e = e.parentElement) {
  const c = rgb(getComputedStyle(e).backgroundColor); if (c) return c; }
  return [255, 255, 255]; };
"""

# the view's and its visible figure's colours: what a theme switch must change
_JS_LOOK = """(out) => {""" + _JS_COLOURS + """
  const view = [...out.querySelectorAll('.tilelab-view')].find(v => v.offsetParent !== null
    && v.querySelector('.tl-widget-panel, .tl-tabs'));
  const s = getComputedStyle(view);
  const look = {fg: rgb(s.color), bg: behind(view),
                vars: ['--tl-fg', '--tl-bg', '--tl-race'].map(k => s.getPropertyValue(k).trim())};
  const svg = [...out.querySelectorAll('figure svg')].find(e => e.getBoundingClientRect().width > 0);
  if (svg) {
    const bgRect = [...svg.querySelectorAll('rect')].find(r =>
      /--tl-(bg|panel)\\b/.test(r.getAttribute('fill') || ''));
    const ground = bgRect ? rgb(getComputedStyle(bgRect).fill) : behind(svg);
    // text in the theme's text colours: a fill of --tl-fg/--tl-muted, or none (the
    // figure's root fill, --tl-fg)
    const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim() &&
      (!t.getAttribute('fill') || /--tl-(fg|muted)\\b/.test(t.getAttribute('fill'))));
    const fills = texts.map(t => rgb(getComputedStyle(t).fill));
    look.figure = {ground, bgRect: !!bgRect, texts: texts.length,
                   textFill: fills[0] || null,
                   worst: fills.length ? Math.min(...fills.map(f => contrast(f, ground))) : null,
                   lowest: texts.map((t, i) => [contrast(fills[i], ground), t.textContent])
                     .sort((a, b) => a[0] - b[0]).slice(0, 3)};
  }
  look.lumFg = lum(look.fg); look.lumBg = lum(look.bg);
  look.contrast = contrast(look.fg, look.bg);
  return look;
}
"""

# a plain cell's figure outputs: each one's background and text colours, and its fit
_JS_PLAIN = """(cell) => {""" + _JS_COLOURS + """
  const fillOf = e => e.getAttribute('fill') ||
    ((e.getAttribute('style') || '').match(/fill:\\s*([^;]+)/) || [, ''])[1];
  const out = cell.querySelector('.jp-OutputArea');
  return [...cell.querySelectorAll('.tilelab-figure > svg')].map(svg => {
    const ground = [...svg.querySelectorAll('rect, path')].find(e =>
      /--tl-(bg|panel)\\b/.test(fillOf(e)));
    // the figure's own background, else its wrapper's (the theme's, --tl-bg)
    const bg = ground ? rgb(getComputedStyle(ground).fill) : behind(svg);
    // text in the theme's text colours, not labels over owner colours (those have halos)
    const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim()
      && !t.getAttribute('stroke') && (/--tl-(fg|muted)\\b/.test(fillOf(t)) || !fillOf(t)));
    const fills = texts.map(t => rgb(getComputedStyle(t).fill));
    const worst = fills.map((f, i) => [contrast(f, bg), texts[i].textContent])
      .sort((a, b) => a[0] - b[0]);
    return {chart: svg.classList.contains('tl-mpl'), ground: bg,
            texts: texts.length, textFill: fills[0] || null,
            worst: worst.length ? worst[0][0] : null, lowest: worst.slice(0, 3),
            width: svg.getBoundingClientRect().width, room: out.clientWidth};
  });
}
"""

# every tab label: its text, contrast against what is behind it, and whether it is cut
_JS_TABS = """(out) => {""" + _JS_COLOURS + """
  return [...out.querySelectorAll(
    '.tilelab-widget-tabs .lm-TabBar-tab, .tilelab-static .tl-tabs > label')]
  .filter(t => t.offsetParent !== null).map(t => {
    const label = t.querySelector('.lm-TabBar-tabLabel') || t;
    const r = label.getBoundingClientRect(), o = out.getBoundingClientRect();
    return {text: label.textContent.trim(),
            contrast: contrast(rgb(getComputedStyle(label).color), behind(label)),
            cut: label.scrollWidth > label.clientWidth + 1 || r.right > o.right + 1,
            height: r.height};
  }); }
"""

# sideways overflow of the output, and figures wider than their panel
_JS_FIT = """
(out) => {
  const panel = [...out.querySelectorAll('.tl-widget-panel, .tl-panel')]
    .find(p => p.offsetParent !== null);
  const figs = panel ? [...panel.querySelectorAll('figure svg, figure img')]
    .filter(f => f.getBoundingClientRect().width > panel.clientWidth + 1)
    .map(f => f.getBoundingClientRect().width) : [];
  return {width: out.clientWidth, scroll: out.scrollWidth,
          right: Math.max(...[...out.querySelectorAll('.tilelab-view')]
            .filter(v => v.offsetParent !== null).map(v => v.getBoundingClientRect().right))
            - out.getBoundingClientRect().right, panel: panel ? panel.clientWidth : null,
          wideFigures: figs,
          // only code panes scroll sideways, never a tab's whole contents
          scrollers: [...out.querySelectorAll('*')].filter(e => e.tagName !== 'PRE'
            && e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1
            && /auto|scroll/.test(getComputedStyle(e).overflowX))
            .map(e => `${e.tagName}.${e.className} ${e.scrollWidth}>${e.clientWidth}`)};
}
"""


def _notebook() -> dict:
    def cell(source: str) -> dict:
        return {"cell_type": "code", "execution_count": None, "id": f"c{abs(hash(source))}",
                "metadata": {}, "outputs": [], "source": source}

    return {"cells": [cell(SETUP), cell(ADD), cell(FIGURES)], "nbformat": 4,
            "nbformat_minor": 5,
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                        "language": "python"}}}


@pytest.fixture
def lab(tmp_path):
    """JupyterLab serving a directory holding only the test notebook; shut down (killed
    if it will not stop) at the end, also when starting it or the test failed."""
    _require_browser()
    root = tmp_path / "notebooks"
    root.mkdir()
    (root / NOTEBOOK).write_text(json.dumps(_notebook()), encoding="utf-8")
    server = JupyterLab(root, tmp_path)
    try:
        server.start()
        yield server
    finally:
        code = server.shutdown()
    assert code == 0, f"JupyterLab did not shut down cleanly ({code}):\n{server.log_text()}"


def _save(page, target, tmp_path: Path, name: str) -> None:
    target.scroll_into_view_if_needed()
    first = tmp_path / name
    target.screenshot(path=str(first))
    paths = [first]
    extra = config.screenshot_dir()
    if extra:
        extra.mkdir(parents=True, exist_ok=True)
        paths.append(Path(shutil.copy(first, extra / name)))
    print(f"screenshot: {', '.join(map(str, paths))}")


def _run_all(page, lab, tmp_path: Path) -> list[str]:
    """Run > Run All Cells, then wait until every cell ran; the prompts it left."""
    page.locator(".lm-MenuBar-item", has_text="Run").first.click()
    page.locator(".lm-Menu-item .lm-Menu-itemLabel").filter(
        has_text=re.compile(r"^Run All Cells$")).click()
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while True:
        prompts = _prompts(page)
        if len(prompts) == 3 and all(_ran(p) for p in prompts):
            return prompts
        if time.monotonic() > deadline:
            _save(page, page.locator(".jp-Notebook"), tmp_path, "jupyterlab-failed.png")
            pytest.fail(f"the notebook did not run in {RUN_TIMEOUT_S} s: prompts {prompts}\n"
                        f"{lab.log_text()}")
        page.wait_for_timeout(300)


def _tab(view, title: str):
    """The clickable label of a tab (widget Tab, or the static radio tabs)."""
    widget = view.locator(".tilelab-widget-tabs .lm-TabBar-tab", has_text=title)
    if widget.count():
        return widget.first
    return view.locator(".tilelab-static .tl-tabs > label", has_text=title).first


def _set_theme(page, name: str, light: bool) -> None:
    """Settings > Theme > ``name``, as a user switches; wait until JupyterLab applied it."""
    page.locator(".lm-MenuBar-item", has_text="Settings").first.click()
    page.locator(".lm-Menu-item .lm-Menu-itemLabel").filter(
        has_text=re.compile(r"^Theme$")).first.hover()
    page.locator(".lm-Menu-item .lm-Menu-itemLabel").filter(
        has_text=re.compile(f"^{re.escape(name)}$")).first.click()
    page.wait_for_selector(f"body[data-jp-theme-name='{name}']"
                           f"[data-jp-theme-light='{str(light).lower()}']",
                           state="attached", timeout=WAIT_MS)
    # the theme's stylesheet arrives after the attribute: wait for its layout colour
    want = "< 0.35" if not light else "> 0.65"
    page.wait_for_function("() => {" + _JS_COLOURS + f"""
        return lum(behind(document.querySelector('.jp-Notebook'))) {want}; }}""",
                           timeout=WAIT_MS)
    page.wait_for_timeout(300)


def _look(out, view, tab: str) -> dict:
    _tab(view, tab).click()
    return out.evaluate(_JS_LOOK)


def _check_tabs(out, theme: str) -> None:
    tabs = out.evaluate(_JS_TABS)
    titles = [t["text"] for t in tabs]
    for title in TABS:
        assert title in titles, f"{theme}: tab {title!r} missing from {titles}"
    bad = [t for t in tabs if t["contrast"] < 3.0 or t["cut"] or t["height"] < 8]
    assert not bad, f"{theme}: tab labels not readable: {bad}"


def _check_fit(page, out, view, theme: str) -> None:
    for title in out.evaluate(_JS_TABS):
        _tab(view, title["text"]).click()
        page.wait_for_timeout(50)
        fit = out.evaluate(_JS_FIT)
        assert abs(fit["width"] - OUTPUT_WIDTH) <= 40, fit
        assert fit["scroll"] <= fit["width"] + 1 and fit["right"] <= 1, \
            f"{theme}: tab {title['text']!r} overflows the output sideways: {fit}"
        assert not fit["wideFigures"] and not fit["scrollers"], \
            f"{theme}: tab {title['text']!r} is wider than the output: {fit}"


# the Safety tab's marks: their text, kind, colour (the view's own) and tint
_JS_SAFETY = """(out) => {
  const panel = [...out.querySelectorAll('.tl-widget-panel, .tl-panel')]
    .find(p => p.offsetParent !== null);
  const view = panel.closest('.tilelab-view');
  return {fg: getComputedStyle(view).color,
          legend: panel.querySelector('.tl-safety-legend').textContent.replace(/\\s+/g, ' '),
          marks: [...panel.querySelectorAll('.tl-safety-pair .tl-acc')].map(m => {
            const s = getComputedStyle(m);
            return {text: m.textContent, cls: m.className, color: s.color,
                    tint: s.backgroundColor, line: s.borderBottomColor}; })};
}
"""


def _check_safety(out, view, theme: str) -> dict:
    """The Safety tab in a theme: the add's three accesses marked by kind, counted in the
    legend, their text in the theme's colour over a translucent tint."""
    _tab(view, "Safety").click()
    got = out.evaluate(_JS_SAFETY)
    assert [(m["text"], m["cls"].split()[-1]) for m in got["marks"]] == [
        ("z.store(tl.load_like(x, z) + tl.load_like(y, z))", "tl-acc-own-store"),
        ("tl.load_like(x, z)", "tl-acc-launch-proven"),
        ("tl.load_like(y, z)", "tl-acc-launch-proven")], f"{theme}: {got}"
    assert "own-tile store 1" in got["legend"] and "launch-proven read 2" in got["legend"]
    for m in got["marks"]:
        assert m["color"] == got["fg"], f"{theme}: a mark lost the theme's text colour: {got}"
        assert m["tint"].startswith("rgba(") and m["line"] != m["tint"], (theme, m)
    return got


def _check_dark(look: dict, light: dict, tab: str) -> None:
    assert look["lumBg"] < 0.1 and look["lumFg"] > 0.5, f"dark {tab}: view stays light: {look}"
    assert look["contrast"] >= 7, f"dark {tab}: view text hard to read: {look}"
    assert look["vars"] != light["vars"], f"dark {tab}: --tl-* colours unchanged: {look}"
    fig, was = look["figure"], light["figure"]
    assert fig["texts"] > 0, f"{tab}: no figure text drawn in theme colours: {fig}"
    assert fig["ground"] != was["ground"] and fig["textFill"] != was["textFill"], \
        f"dark {tab}: the figure kept its light colours: {fig} (light: {was})"
    ground = fig["ground"]
    assert 0.2126 * ground[0] + 0.7152 * ground[1] + 0.0722 * ground[2] < 90, \
        f"dark {tab}: the figure's background stays light: {fig}"
    assert fig["worst"] >= 3.0, f"dark {tab}: figure text hard to read: {fig}"


def _plain_figures(page, theme: str, tmp_path: Path) -> list[dict]:
    """The plain cell's three figures in a theme: present, readable, within the output."""
    cell = page.locator(".jp-Cell").nth(2)
    looks = cell.evaluate(_JS_PLAIN)
    assert [f["chart"] for f in looks] == [False, False, True], f"{theme}: {looks}"
    for f in looks:
        assert f["texts"] > 0, f"{theme}: no figure text in theme colours: {f}"
        assert f["worst"] >= 3.0, f"{theme}: figure text hard to read: {f}"
        assert f["width"] <= f["room"] + 1, f"{theme}: a figure is wider than the output: {f}"
    figures = cell.locator(".tilelab-figure")
    for i, name in enumerate(("ownership", "roofline", "chart")):
        _save(page, figures.nth(i), tmp_path, f"jupyterlab-{theme}-plain-{name}.png")
    return looks


def _check_plain_dark(dark: list[dict], light: list[dict]) -> None:
    for d, lt in zip(dark, light):
        lum = 0.2126 * d["ground"][0] + 0.7152 * d["ground"][1] + 0.0722 * d["ground"][2]
        assert lum < 90 and d["ground"] != lt["ground"], \
            f"dark: a plain-cell figure kept its light background: {d} (light: {lt})"
        assert d["textFill"] != lt["textFill"], f"dark: figure text kept its colour: {d}"


def _open_and_run(page, lab, tmp_path: Path):
    """Open the notebook, run it, and return (prompts, the view's output child, its
    output area) once the kernel is idle and the view shows its first tab."""
    from playwright.sync_api import expect

    page.goto(f"{lab.url}/lab/tree/{NOTEBOOK}?token={lab.token}&reset",
              wait_until="domcontentloaded", timeout=120_000)
    expect(page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook")
           ).to_be_visible(timeout=120_000)
    status = page.locator("#jp-main-statusbar")
    expect(status).to_contain_text("Idle", timeout=120_000)   # the kernel is up
    assert page.locator("body").get_attribute("data-jp-theme-light") == "true"
    prompts = _run_all(page, lab, tmp_path)
    expect(status).to_contain_text("Idle", timeout=WAIT_MS)
    tracebacks = page.locator(".jp-RenderedText[data-mime-type="
                              "'application/vnd.jupyter.stderr']",
                              has_text=re.compile(r"Traceback|Error:"))
    assert tracebacks.count() == 0, tracebacks.first.inner_text()[:2000]
    # the cell's view: the widget Tab (or the static tabs without widgets); the static
    # copy beside a rendered widget is hidden, so take the visible one
    page.wait_for_selector(".jp-OutputArea-output .tilelab-view >> visible=true",
                           timeout=WAIT_MS)
    view = page.locator(".jp-Cell").nth(1).locator(".jp-OutputArea-child").filter(
        has=page.locator(".tilelab-view")).locator("visible=true").last
    _tab(view, TABS[0]).click()
    expect(view.locator("text=/entry @add/").first).to_be_visible()
    return prompts, view, view.locator(".jp-OutputArea-output").first


def test_the_view_follows_jupyterlab_light_and_dark_themes(lab, tmp_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=str(CHROMIUM),
            headless=True, args=CHROMIUM_ARGS, viewport={"width": 1400, "height": 1000})
        context.set_default_timeout(WAIT_MS)
        try:
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            prompts, view, out = _open_and_run(page, lab, tmp_path)

            # make the output exactly 1100 px wide (the file browser stays closed)
            width = out.evaluate("o => o.clientWidth")
            page.set_viewport_size({"width": 1400 + OUTPUT_WIDTH - width, "height": 1000})
            page.wait_for_function(f"o => Math.abs(o.clientWidth - {OUTPUT_WIDTH}) <= 2",
                                   arg=out.element_handle())

            _check_tabs(out, "light")
            light = {tab: _look(out, view, tab) for tab in FIGURE_TABS}
            for tab, look in light.items():
                assert look["lumBg"] > 0.8 and look["contrast"] >= 7, (tab, look)
                assert look["figure"]["worst"] >= 3.0, (tab, look)
                _tab(view, tab).click()
                _save(page, view, tmp_path, f"jupyterlab-light-{tab.lower()}.png")
            plain = _plain_figures(page, "light", tmp_path)
            safety = _check_safety(out, view, "light")
            _save(page, view, tmp_path, "jupyterlab-light-safety.png")
            _check_fit(page, out, view, "light")

            _set_theme(page, "JupyterLab Dark", light=False)
            assert _prompts(page) == prompts, "switching the theme re-ran a cell"
            _check_tabs(out, "dark")
            for tab in FIGURE_TABS:
                look = _look(out, view, tab)
                _save(page, view, tmp_path, f"jupyterlab-dark-{tab.lower()}.png")
                _check_dark(look, light[tab], tab)
            _check_plain_dark(_plain_figures(page, "dark", tmp_path), plain)
            dark = _check_safety(out, view, "dark")
            assert dark["fg"] != safety["fg"], "the Safety tab kept its light text colour"
            for tab in ("Source ↔ Tile IR", "Safety", "Lowered"):
                _tab(view, tab).click()
                _save(page, view, tmp_path, f"jupyterlab-dark-{tab.split()[0].lower()}.png")
            _check_fit(page, out, view, "dark")

            _set_theme(page, "JupyterLab Light", light=True)
            assert _plain_figures(page, "light-again", tmp_path) == plain
            back = _look(out, view, "Ownership")
            assert (back["figure"]["ground"], back["vars"]) == (
                light["Ownership"]["figure"]["ground"], light["Ownership"]["vars"]), back
            assert _prompts(page) == prompts, "switching the theme re-ran a cell"
            assert not errors, errors
        finally:
            context.close()
