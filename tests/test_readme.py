"""The README's python blocks run as written: pasted in order into one IPython session
(the ``%%tile`` blocks are IPython cells) on the CPU backend, none raises — the lab's
blocks come first, so its ``%%tile`` cell runs on its own. The quick start installs, runs
the demo and opens notebook 01 (with a picture of its view), and ``.ci/run`` runs the same
commands."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

# Runs in a fresh process: each block is one IPython cell; stops at the first failure.
_RUNNER = textwrap.dedent("""
    import json, sys
    from IPython.core.interactiveshell import InteractiveShell

    blocks = json.loads(sys.stdin.read())
    shell = InteractiveShell.instance()
    for i, code in enumerate(blocks):
        result = shell.run_cell(code, silent=False, store_history=True)
        if not result.success:
            err = result.error_in_exec or result.error_before_exec
            print(f"README python block {i + 1} failed: {type(err).__name__}: {err}")
            sys.exit(1)
    print(f"README: {len(blocks)} python blocks ran")
""")


def python_blocks(text: str) -> list[str]:
    """The bodies of the ```python fenced blocks of ``text``, in order.

    Example:
        >>> python_blocks("a\\n```python\\nx = 1\\n```\\n```bash\\nls\\n```\\n")
        ['x = 1\\n']
    """
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def test_readme_has_the_blocks_a_newcomer_pastes():
    blocks = python_blocks(README.read_text())
    assert len(blocks) >= 5
    joined = "\n".join(blocks)
    assert "import tilelab as tl" in blocks[0]
    assert "tl.BorrowError" in joined and "gemm.compile" in joined


def _section(text: str, title: str) -> str:
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_quick_start_leads_into_the_lab():
    """Install, demo, open notebook 01 (with a picture of its view); the lab's section
    comes next, before the safety and runtime detail, and lists every notebook."""
    text = README.read_text()
    heads = re.findall(r"^## (.+)$", text, re.M)
    assert heads[:3] == ["Quick start", "The lab: `%%tile` in Jupyter", "A safe kernel"], heads
    quick = _section(text, "Quick start")
    steps = re.findall(r"^```bash\n(.*?)^```", quick, re.S | re.M)[0].splitlines()
    assert steps == ["python3 -m venv .venv && . .venv/bin/activate", 'pip install -e ".[lab]"',
                     "tilelab demo", "jupyter lab notebooks/01_hello_tiles.ipynb"], steps
    assert (ROOT / "notebooks" / "01_hello_tiles.ipynb").is_file()
    image = re.search(r"!\[[^\]]+\]\((docs/images/[\w.-]+\.png)\)", quick)
    assert image, "the quick start shows the %%tile view"
    png = (ROOT / image.group(1)).read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) < 200_000, len(png)
    lab = _section(text, "The lab: `%%tile` in Jupyter")
    for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        assert f"| {nb.name[:2]} " in lab, f"notebook {nb.name} is not listed"
    dev = _section(text, "Development")
    assert 'pip install -e ".[test]"' in dev and "python -m pytest" in dev


def test_ci_runs_the_quick_start_as_written_and_the_lab_extra_has_jupyterlab():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    order = ['pip install -e ".[lab]"', 'tilelab demo --out "$work/demo"',
             "jupyter lab --version", 'pip install -e ".[test]"', "python -m pytest"]
    assert all(line in ci for line in order), [line for line in order if line not in ci]
    assert [ci.index(line) for line in order] == sorted(ci.index(line) for line in order)
    extras = (ROOT / "pyproject.toml").read_text().split("[project.optional-dependencies]")[1]
    lab = re.search(r"^lab = \[(.*?)^\]", extras, re.S | re.M).group(1)
    assert re.search(r'"jupyterlab>=', lab), "the README says `jupyter lab`: [lab] installs it"
    test = re.search(r"^test = \[(.*?)^\]", extras, re.S | re.M).group(1)
    assert '"tilelab[lab]"' in test          # the Development install has the lab too


def test_readme_links_stay_inside_the_repository():
    text = README.read_text()
    assert "../" not in text
    for target in re.findall(r"`((?:docs|benchmarks|notebooks|tests)/[\w./-]+\.(?:md|py))`",
                             text):
        assert (README.parent / target).exists(), target


@pytest.mark.slow
@pytest.mark.subprocess
def test_readme_python_blocks_run_in_order_on_the_cpu_backend(tmp_path):
    blocks = python_blocks(README.read_text())
    env = dict(os.environ, TILELAB_BACKEND="cpu", MPLBACKEND="Agg",
               TILELAB_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-c", _RUNNER], input=json.dumps(blocks),
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    tail = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 0, tail
    assert f"README: {len(blocks)} python blocks ran" in proc.stdout, tail
    # the expected BorrowError is caught and printed, naming the pending launch
    assert "the pending kernel 'add'" in proc.stdout, tail
