"""The notebooks' matplotlib charts: each is made with ``themed()``/``new_figure`` (so it
follows the page's theme), and notebook 08's recorded chart plots what the comparison
means, tilelab's speed relative to SDPA's, not two lines of absolute times."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

IPython = pytest.importorskip("IPython")
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from IPython.utils.capture import capture_output  # noqa: E402

import tilelab.lab.course.gpu_results as recorded_module  # noqa: E402
from tilelab.lab.figures.mpl_svg import ThemedFigure  # noqa: E402

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
#: suite medians in µs: (keys, tilelab, torch SDPA)
TIMES = [(1024, 254.3, 238.4), (2048, 945.9, 894.8), (4096, 3691.6, 3582.7),
         (8192, 14709.9, 14561.0), (16384, 56719.4, 57651.2)]


def _cells(name: str) -> list[str]:
    nb = json.loads((NOTEBOOKS / name).read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def test_every_matplotlib_chart_of_the_notebooks_is_themed():
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        for src in _cells(path.name):
            if "add_subplot" in src or "plt." in src:
                assert "new_figure(" in src, f"{path.name}: a chart not made with new_figure"
                assert "plt." not in src, f"{path.name}: pyplot bakes the theme in"


@pytest.fixture
def recorded_rows(monkeypatch):
    rows = [{"case": f"attention/bfloat16/b8h32s{s}d128", "variant": v, "impl": "",
             "median_us": t, "flops": None, "bytes": None}
            for s, ours, sdpa in TIMES for v, t in (("tilelab", ours), ("torch", sdpa),
                                                    ("raw", ours * 1.01))]
    rec = recorded_module.Recorded("NVIDIA H200", "2026-12-02", "benchmarks/results/x.json",
                                   rows)
    monkeypatch.setattr(recorded_module, "recorded", lambda prefix, **kw: rec)
    return rec


def test_notebook_08_charts_the_ratio_to_sdpa(recorded_rows):
    chart = [c for c in _cells("08_flash_attention.ipynb") if 'recorded("attention/' in c]
    assert len(chart) == 1
    shell = InteractiveShell.instance()
    assert shell.run_cell("import tilelab as tl\nfrom tilelab.lab.figures.theme import "
                          "new_figure, themed\nGPU = False").success
    with capture_output() as cap:
        res = shell.run_cell(chart[0])
    assert res.success, res.error_in_exec
    fig = shell.user_ns["fig"]
    assert isinstance(fig, ThemedFigure)
    (ax,) = fig.axes
    lines = [ln for ln in ax.get_lines() if len(ln.get_ydata()) == len(TIMES)]
    assert len(lines) == 1, "one line: the ratio, not one line per implementation"
    want = [sdpa / ours for _, ours, sdpa in TIMES]
    assert list(lines[0].get_ydata()) == pytest.approx(want)
    assert any(list(ln.get_ydata()) == [1.0, 1.0] for ln in ax.get_lines())   # as fast
    assert ax.get_yscale() == "linear" and "SDPA" in ax.get_ylabel()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1K", "2K", "4K", "8K", "16K"]
    assert {f"{r:.2f}x" for r in want} <= {t.get_text() for t in ax.texts}
    assert recorded_rows.label in ax.get_title()
    shown = [o.data for o in cap.outputs]
    assert "x SDPA's speed" in shown[0]["text/plain"]                      # the table
    assert '<div class="tilelab-figure">' in shown[-1]["text/html"]        # themed, no PNG
    assert "image/png" not in shown[-1]
