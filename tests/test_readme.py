"""The README's python blocks run as written: pasted in order into one IPython session
(the ``%%tile`` blocks are IPython cells) on the CPU backend, none raises."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"

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


def test_readme_links_stay_inside_the_repository():
    text = README.read_text()
    assert "../" not in text
    for target in re.findall(r"`((?:docs|benchmarks|notebooks|tests)/[\w./-]+\.(?:md|py))`",
                             text):
        assert (README.parent / target).exists(), target


@pytest.mark.slow
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
