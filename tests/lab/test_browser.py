"""Notebook 02 in a real JupyterLab, driven by headless Chromium through playwright.

What a user sees: JupyterLab opens ``02_vector_add_and_ownership.ipynb``, "Run All Cells"
from the Run menu executes it on the CPU backend, and the ``%%tile`` view renders its tabs
(the ipywidgets Tab, or the static HTML tabs), the Tile IR text, the Safety tab's marked
accesses and the roofline image.
A screenshot of the rendered view is saved (its path is printed; also under
``$TILELAB_SCREENSHOT_DIR`` when set).

Needs ``jupyterlab`` and ``playwright`` (python) and Debian's ``chromium`` at
``/usr/bin/chromium`` (or ``$TILELAB_CHROMIUM``); playwright never downloads a browser
here. Without them the test skips and says what is missing, unless
``TILELAB_REQUIRE_BROWSER=1`` (set by ``.ci/run``), which turns the skip into a failure.
"""
from __future__ import annotations

import json
import re
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from tilelab import config

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "02_vector_add_and_ownership.ipynb"
CHROMIUM = str(config.chromium())
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
RUN_TIMEOUT_S = 300            # notebook 02 runs in well under a minute on 2 cores

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]   # a Jupyter server and its kernels


def _missing() -> list[str]:
    missing = []
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        missing.append(f"chromium ({CHROMIUM}; apt-get install chromium)")
    for module, pip in (("jupyterlab", "jupyterlab"), ("playwright.sync_api", "playwright")):
        try:
            __import__(module)
        except ImportError:
            missing.append(f"{pip} (pip install {pip})")
    return missing


def _require_browser() -> None:
    missing = _missing()
    if not missing:
        return
    reason = "the browser test needs " + ", ".join(missing)
    if config.require_browser():
        pytest.fail(reason + " (TILELAB_REQUIRE_BROWSER=1)")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_settings(settings: Path) -> None:
    """User settings for a quiet, deterministic JupyterLab: no news or update checks,
    every cell rendered (no windowing), light theme."""
    files = {
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
            {"fetchNews": "false", "checkForUpdates": False},
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings":
            {"windowingMode": "none"},
        "@jupyterlab/apputils-extension/themes.jupyterlab-settings":
            {"theme": "JupyterLab Light"},
    }
    for name, value in files.items():
        path = settings / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))


class JupyterLab:
    """A JupyterLab server on localhost with token auth, in its own process group."""

    def __init__(self, root: Path, home: Path):
        self.root, self.home = root, home
        self.port = _free_port()
        self.token = uuid.uuid4().hex
        self.log_path = home / "jupyterlab.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        settings = self.home / "lab-settings"
        _write_settings(settings)
        env = dict(os.environ)
        env.update({
            "TILELAB_BACKEND": "cpu",
            "TILELAB_CACHE_DIR": str(self.home / "tilelab-cache"),
            "JUPYTERLAB_SETTINGS_DIR": str(settings),
            "JUPYTERLAB_WORKSPACES_DIR": str(self.home / "workspaces"),
            "JUPYTER_CONFIG_DIR": str(self.home / "jupyter-config"),
            "JUPYTER_RUNTIME_DIR": str(self.home / "jupyter-runtime"),
            "JUPYTER_PLATFORM_DIRS": "1",
            "IPYTHONDIR": str(self.home / "ipython"),
        })
        env.pop("TILELAB_THEME", None)
        cmd = [sys.executable, "-m", "jupyterlab", "--no-browser",
               "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}",
               "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
               f"--ServerApp.root_dir={self.root}", "--ServerApp.open_browser=False",
               # no network: no news feed, no update check, no PyPI extension manager
               "--LabApp.news_url=", "--LabApp.extension_manager=readonly",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
               "--ServerApp.log_level=WARN"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, cwd=self.root, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.proc.returncode}:\n"
                                   + self.log_text())
            try:
                with urllib.request.urlopen(f"{self.url}/api/status?token={self.token}",
                                            timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError("JupyterLab did not answer within 90 s:\n" + self.log_text())

    def log_text(self) -> str:
        try:
            return self.log_path.read_text()[-4000:]
        except OSError:
            return ""

    def shutdown(self) -> int:
        """Ask the server to shut down (kernels included); kill only if it will not."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        try:
            req = urllib.request.Request(f"{self.url}/api/shutdown?token={self.token}",
                                         method="POST", data=b"")
            urllib.request.urlopen(req, timeout=10).close()
        except OSError:
            pass
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                code = self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                code = self.proc.wait()
        self.log.close()
        return code


@pytest.fixture
def lab(tmp_path):
    _require_browser()
    root = tmp_path / "notebooks"
    root.mkdir()
    shutil.copy(ROOT / "notebooks" / NOTEBOOK, root / NOTEBOOK)
    server = JupyterLab(root, tmp_path)
    server.start()
    try:
        yield server
    finally:
        code = server.shutdown()
        assert code == 0, f"JupyterLab did not shut down cleanly ({code}):\n{server.log_text()}"


def _screenshot_paths(tmp_path: Path, name: str) -> list[Path]:
    paths = [tmp_path / name]
    extra = config.screenshot_dir()
    if extra:
        Path(extra).mkdir(parents=True, exist_ok=True)
        paths.append(Path(extra) / name)
    return paths


def _save(page, target, tmp_path: Path, name: str) -> None:
    target.scroll_into_view_if_needed()
    paths = _screenshot_paths(tmp_path, name)
    page.screenshot(path=str(paths[0]))
    for p in paths[1:]:
        shutil.copy(paths[0], p)
    print(f"screenshot: {', '.join(map(str, paths))}")


def _prompts(page) -> list[str]:
    return page.eval_on_selector_all(
        ".jp-Notebook .jp-CodeCell .jp-InputArea-prompt",
        "els => els.map(e => e.textContent.trim())")


def _ran(prompt: str) -> bool:
    """'[12]:' (ran) rather than '[ ]:' (not run) or '[*]:' (queued or running)."""
    return re.fullmatch(r"\[\d+\]:", prompt) is not None


def test_notebook_02_runs_in_jupyterlab_and_renders_the_view(lab, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        # a fresh profile (--user-data-dir) for every run: playwright passes it itself
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1400, "height": 1000})
        try:
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{lab.url}/lab/tree/{NOTEBOOK}?token={lab.token}&reset",
                      wait_until="domcontentloaded", timeout=120_000)
            notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook")
            expect(notebook).to_be_visible(timeout=120_000)
            # the kernel must be up before "Run All": the status bar says "... | Idle"
            expect(page.locator("#jp-main-statusbar")).to_contain_text("Idle",
                                                                      timeout=120_000)
            page.keyboard.press("Control+b")            # hide the file browser
            code_cells = len(_prompts(page))
            assert code_cells >= 8, f"notebook 02 should have code cells, saw {code_cells}"

            # Run > Run All Cells, as a user would
            page.locator(".lm-MenuBar-item", has_text="Run").first.click()
            page.locator(".lm-Menu-item .lm-Menu-itemLabel").filter(
                has_text=re.compile(r"^Run All Cells$")).click()

            deadline = time.monotonic() + RUN_TIMEOUT_S
            stalled = 0
            while True:
                prompts = _prompts(page)
                if prompts and all(_ran(p) for p in prompts):
                    break
                # Run All stops at a failing cell: the rest stay "[ ]" and nothing is busy
                stalled = stalled + 1 if "[*]:" not in prompts else 0
                if stalled >= 6 or time.monotonic() > deadline:
                    _save(page, notebook, tmp_path, "notebook02-failed.png")
                    shown = page.locator(".jp-RenderedText[data-mime-type="
                                         "'application/vnd.jupyter.stderr']").all_inner_texts()
                    how = "stopped at an error" if stalled >= 6 else "timed out"
                    pytest.fail(f"Run All {how}: prompts {prompts}\n"
                                f"stderr/errors shown: {shown}\n{lab.log_text()}")
                page.wait_for_timeout(500)
            counts = [int(p[1:-2]) for p in prompts]
            assert counts == sorted(counts) and len(set(counts)) == len(counts), prompts

            tracebacks = page.locator(".jp-RenderedText[data-mime-type="
                                      "'application/vnd.jupyter.stderr']",
                                      has_text=re.compile(r"Traceback|Error:"))
            assert tracebacks.count() == 0, tracebacks.first.inner_text()[:2000]

            # the first %%tile view: a widget Tab (or, without widgets, the static tabs)
            # (the static copy beside a rendered widget is hidden: take the visible one)
            view = page.locator(".jp-OutputArea-output").filter(
                has=page.locator(".tilelab-view")).locator("visible=true").first
            expect(view).to_be_visible(timeout=30_000)
            widget_tabs = view.locator(".lm-TabBar-tab")
            if widget_tabs.count():
                labels = [t.strip() for t in widget_tabs.all_inner_texts()]
                roofline_tab = widget_tabs.filter(has_text="Roofline").first
                safety_tab = widget_tabs.filter(has_text="Safety").first
            else:
                labels = [t.strip() for t in
                          view.locator(".tl-tabs > label").all_inner_texts()]
                roofline_tab = view.locator(".tl-tabs > label", has_text="Roofline").first
                safety_tab = view.locator(".tl-tabs > label", has_text="Safety").first
            for title in ("Source ↔ Tile IR", "Safety", "Lowered", "Ownership", "Roofline",
                          "Timings"):
                assert title in labels, f"tab {title!r} missing from {labels}"

            # the Tile IR text is on screen in the first tab
            tileir = view.locator(".tilelab-view", has_text="load_view_tko").locator(
                "text=/entry @add_/").first
            expect(tileir).to_be_visible(timeout=30_000)
            _save(page, view, tmp_path, "notebook02-tileir.png")

            # the Safety tab marks the add's store and its two loads, with the validator's
            # verdicts beside them
            safety_tab.click()
            marks = view.locator(".tl-safety-pair .tl-acc").locator("visible=true")
            expect(marks.first).to_be_visible(timeout=30_000)
            assert marks.count() == 3, marks.all_inner_texts()
            assert marks.first.inner_text().startswith("z.store(")
            panel = view.locator(".tl-safety-legend").locator("visible=true").first
            assert "own-tile store 1" in " ".join(panel.inner_text().split())
            expect(view.locator("text=/partition store of z/").first).to_be_visible()
            _save(page, view, tmp_path, "notebook02-safety.png")

            # the roofline tab shows its figure (inline SVG, or a loaded PNG)
            roofline_tab.click()
            img = view.locator("figure svg, img[alt*='FLOP/B']").locator("visible=true").first
            expect(img).to_be_visible(timeout=30_000)
            box = img.bounding_box()
            assert box and box["width"] > 200 and box["height"] > 100, box
            _save(page, img, tmp_path, "notebook02-roofline.png")

            # at 1100 px every view fits: no output scrolls sideways, no tab label is cut
            page.set_viewport_size({"width": 1100, "height": 1000})
            page.keyboard.press("Control+b")            # the file browser open again
            page.wait_for_timeout(1000)
            fit = page.evaluate("""() => {
              const wide = [...document.querySelectorAll('.jp-OutputArea-output')]
                .filter(o => o.querySelector('.tilelab-view') && o.offsetParent !== null
                        && o.scrollWidth > o.clientWidth + 1).map(o => o.scrollWidth);
              const cut = [...document.querySelectorAll(
                  '.tilelab-widget-tabs .lm-TabBar-tab, .tilelab-static .tl-tabs > label')]
                .filter(t => t.offsetParent !== null && t.scrollWidth > t.clientWidth + 1)
                .map(t => t.textContent);
              return [wide, cut];
            }""")
            assert fit == [[], []], fit
            _save(page, view, tmp_path, "notebook02-1100px.png")

            # the notebook's own figures (ownership, grid, roofline): themed inline SVG
            # (tilelab.lab.figures.output), or images
            pngs = page.locator(".jp-RenderedHTMLCommon .tilelab-figure > svg, "
                                ".jp-RenderedImage img, .jp-RenderedSVG img, "
                                ".jp-RenderedSVG svg")
            assert pngs.count() >= 4, pngs.count()
            widths = pngs.evaluate_all("els => els.map(e => e.naturalWidth ?? "
                                       "e.getBoundingClientRect().width)")
            assert all(w > 0 for w in widths), widths
            assert not errors, errors
        finally:
            context.close()
