"""The first cell of every tour notebook installs tilelab where it is missing (Colab, a
fresh venv) and does nothing where it imports (CI runs the notebooks).

The cell is run here with ``exec``: with everything importable it must not call pip;
with tilelab made to look missing it installs the clone it sits in, editable
(``-e <clone>[lab]``, as a developer would), or ``$TILELAB_SOURCE``; outside any clone
without that variable it stops with a message that says what to do; with tilelab
present and an extra missing it installs only the extra, never tilelab over itself.
pip itself is replaced by a recorder (no network)."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _setup_cell(path: Path) -> str:
    return nbformat.read(path, as_version=4).cells[0].source


def test_every_notebook_opens_with_the_same_set_up_cell():
    assert len(NOTEBOOKS) >= 8
    first = [nbformat.read(p, as_version=4).cells[0] for p in NOTEBOOKS]
    assert all(c.cell_type == "code" for c in first)
    assert len({c.source for c in first}) == 1, "the set-up cells differ"
    assert first[0].source.startswith("# Set-up: installs what this kernel lacks")


@pytest.fixture
def run_cell(monkeypatch):
    """Run the set-up cell in a directory, with some modules made to look missing;
    returns the pip commands it ran."""
    calls: list[list[str]] = []
    monkeypatch.setattr(subprocess, "check_call", lambda cmd, *a, **k: calls.append(cmd))
    real = importlib.util.find_spec

    def run(cwd: Path, missing: tuple[str, ...] = ()) -> list[list[str]]:
        monkeypatch.chdir(cwd)
        monkeypatch.setattr(importlib.util, "find_spec",
                            lambda name, *a: None if name in missing else real(name, *a))
        exec(compile(_setup_cell(NOTEBOOKS[0]), "setup-cell", "exec"), {})
        return calls
    return run


def test_a_no_op_where_tilelab_imports(run_cell, tmp_path):
    pytest.importorskip("ipywidgets")
    assert run_cell(tmp_path) == []


@pytest.mark.subprocess
def test_installs_the_clone_it_sits_in(run_cell, monkeypatch):
    monkeypatch.delenv("TILELAB_SOURCE", raising=False)
    calls = run_cell(ROOT / "notebooks", missing=("tilelab",))
    assert calls == [[sys.executable, "-m", "pip", "install", "-q", "-e", f"{ROOT}[lab]"]]
    assert sys.path[0] == str(ROOT)          # importable now, before a restart
    sys.path.remove(str(ROOT))


@pytest.mark.subprocess
def test_installs_what_tilelab_source_names(run_cell, monkeypatch, tmp_path):
    monkeypatch.setenv("TILELAB_SOURCE", "tilelab[lab] @ file:///somewhere/tilelab")
    calls = run_cell(tmp_path, missing=("tilelab", "pandas"))
    assert calls == [[sys.executable, "-m", "pip", "install", "-q",
                      "tilelab[lab] @ file:///somewhere/tilelab"]]


@pytest.mark.subprocess
def test_an_installed_tilelab_is_never_replaced(run_cell, monkeypatch):
    """In a clone, with tilelab importing and an extra missing, only the extra is
    installed (a copy of the clone over an editable install would shadow the clone)."""
    monkeypatch.delenv("TILELAB_SOURCE", raising=False)
    calls = run_cell(ROOT / "notebooks", missing=("ipywidgets",))
    assert calls == [[sys.executable, "-m", "pip", "install", "-q", "ipywidgets"]]


def test_outside_a_clone_it_says_what_to_do(run_cell, monkeypatch, tmp_path):
    monkeypatch.delenv("TILELAB_SOURCE", raising=False)
    with pytest.raises(ModuleNotFoundError) as e:
        run_cell(tmp_path, missing=("tilelab", "ipywidgets"))
    text = str(e.value)
    assert text.startswith("this notebook needs tilelab. Open it from the notebooks/ "
                           "folder of a clone of the tilelab repository")
    assert "pip install -e '.[lab]'" in text and "TILELAB_SOURCE" in text
