"""benchmarks/lab/notebooks.py runs a course notebook without IPython.

The runner is started in a child process in which ``import IPython`` (and ipykernel,
nbformat, nbclient, ipywidgets) fails, as on the GPU machine; it runs notebook 01 on the
CPU backend and its JSON must say every cell ran, with the ``%%tile`` cell's launch on
the roofline (predicted for the H200 on the CPU). The pieces it is built from (the cell
splitter, the ``%%tile`` line parser, the notebook selection) are checked here with the
messages a user reads.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.lab.notebooks import SCHEMA, notebook_paths, prepare_cell
from tilelab.lab.cell.run import options_from_line, run_cell
from tilelab.lab.report.options import OptionError

ROOT = Path(__file__).resolve().parents[2]
BLOCKED = ("IPython", "ipykernel", "nbformat", "nbclient", "ipywidgets")
#: runs the module as ``python -m`` would, after making the blocked imports fail
WRAPPER = (f"import runpy, sys\nfor name in {BLOCKED!r}:\n    sys.modules[name] = None\n"
           "sys.argv[0] = 'notebooks_gpu'\n"
           "runpy.run_module('benchmarks.lab.notebooks', run_name='__main__', "
           "alter_sys=True)\n")


def _run_without_ipython(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TILELAB_BACKEND": "cpu"}
    return subprocess.run([sys.executable, "-c", WRAPPER, *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.subprocess
def test_notebook_01_runs_without_ipython(tmp_path):
    out = tmp_path / "nb.json"
    proc = _run_without_ipython("--backend", "cpu", "--only", "01", "--out", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["schema"] == SCHEMA
    assert doc["env"]["backend"] == "cpu" and doc["env"]["versions"]["tilelab"]
    assert doc["run"]["ipython_loaded"] is False
    [nb] = doc["notebooks"]
    assert nb["notebook"] == "01_hello_tiles"
    bad = [(c["index"], c.get("error")) for c in nb["cells"] if c["status"] != "ok"]
    assert not bad, bad
    # code cell 0 is the set-up cell (a no-op where tilelab imports), cell 1 loads the lab
    assert nb["cells"][0]["notes"] == []
    assert "skipped %load_ext tilelab (IPython line magic)" in nb["cells"][1]["notes"]
    [tile] = [c for c in nb["cells"] if c["kind"] == "tile"]
    [launch] = tile["tile"]["launches"]
    point = tile["points"][launch["point"]]
    assert (launch["kernel"], launch["ran_on"], point["source"]) == ("add", "cpu", "%%tile")
    assert point["time_kind"] == "predicted" and point["device"] == "NVIDIA H200 SXM"
    assert point["bytes"] == 3 * 4 * (1 << 14) and point["flops"] == 1 << 14
    assert point["seconds"] > 0 and 0 < point["roof_fraction"] <= 1
    assert point["roof_bound"] == "memory"
    assert "== Timings ==" in tile["tile"]["view"]
    assert doc["summary"]["cells"] == {"ok": len(nb["cells"])}
    assert "01_hello_tiles" in proc.stdout and "predicted" in proc.stdout


def test_prepare_cell_skips_magics_and_keeps_line_numbers():
    c = prepare_cell("%matplotlib inline\nif True:\n    !ls\nx = 1 % 2\ny = (3\n% 2)")
    assert c.kind == "python"
    assert c.code.splitlines() == ["pass  # %matplotlib inline", "if True:",
                                   "    pass  # !ls", "x = 1 % 2", "y = (3", "% 2)"]
    assert c.notes == ["skipped %matplotlib inline (IPython line magic)",
                       "skipped !ls (shell command)"]
    tile = prepare_cell("%%tile --bench --show timings\nadd(z, x)")
    assert (tile.kind, tile.line, tile.code) == ("tile", "--bench --show timings", "add(z, x)")
    other = prepare_cell("%%timeit\nx = 1")
    assert other.kind == "magic" and other.notes == ["skipped: cell magic %%timeit needs "
                                                     "IPython"]


def test_tile_line_parses_like_the_magic():
    o = options_from_line("--backend cpu --no-run --occupancy 2 --show +ptx")
    assert (o.backend, o.run, o.kernel_options) == ("cpu", False, {"occupancy": 2})
    assert "ptx" in o.views
    with pytest.raises(OptionError, match=r"unknown option '--fast'; the options are "
                                          r"--arch, --backend, --show, --bench"):
        options_from_line("--backend cpu --fast")
    with pytest.raises(OptionError, match=r"--occupancy: invalid int value: 'many'"):
        options_from_line("--occupancy many")
    with pytest.raises(OptionError, match=r"--show: unknown view 'tile_ir'"):
        options_from_line("--show tile_ir")


def test_run_cell_raises_the_cells_own_error():
    with pytest.raises(ZeroDivisionError):
        run_cell("--backend cpu", "x = 1 / 0", {}, name="<zero>")


RACY = """import cuda.tile as ct
def clash(x: tl.Raw):
    ct.store(x, index=(0,), tile=ct.full((8,), ct.bid(0), dtype=ct.float32))
x = tl.zeros(8, device="cpu")
clash(x, grid=(2,))
"""


@pytest.mark.toolchain
def test_a_race_propagates_from_run_cell_and_is_kept_for_the_magic():
    import linecache
    import time

    import tilelab as tl
    from tilelab.lab.cell.run import run_parsed_cell

    with pytest.raises(tl.LaunchError, match=r"<race>:4:5: 1 race\(s\) in kernel 'clash'"):
        run_cell("--backend cpu --unsafe", RACY, {"tl": tl}, name="<race>")
    # the magic's way: the race is kept, its launch recorded, its trace on the report
    linecache.cache["<kept>"] = (len(RACY), None, RACY.splitlines(True), "<kept>")
    run = run_parsed_cell(ast.parse(RACY), options_from_line("--backend cpu --unsafe"),
                          {"tl": tl}, cell_name="<kept>", started=time.perf_counter(),
                          keep_race=True)
    assert isinstance(run.raced, tl.LaunchError) and "write-write race" in str(run.raced)
    assert run.plan.kernels == ("clash",)
    assert [launch.count for launch in run.report.launches] == [1]
    assert run.report.race_trace is not None and run.report.race_trace.races


def test_only_names_the_notebooks_it_knows():
    assert [p.stem[:2] for p in notebook_paths("08,01")] == ["01", "08"]
    with pytest.raises(SystemExit, match=r"--only: no notebook starts with 99 \(the "
                                         r"notebooks: 01_hello_tiles, "):
        notebook_paths("99")
