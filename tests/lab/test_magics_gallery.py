"""magics/: every gallery file runs with the real ``ipython`` on the CPU backend.

Each ``magics/NAME.ipy`` shows one feature of ``%%tile``; this runs it as a user would
(``TILELAB_BACKEND=cpu ipython magics/NAME.ipy``), in a subprocess of this interpreter
(``python -m IPython``, so the IPython of this environment) with its own cache
directory, and checks that it exits 0, prints what its header says it shows, and prints
no traceback.
"""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GALLERY = ROOT / "magics"

#: what each file must print (regular expressions, in order)
EXPECTED = {
    "options": [r"tabs: \['Source ↔ Tile IR', 'Safety', 'Lowered', 'PTX', 'Resources', "
                r"'Ownership'",
                r"PTX target: \['\.target sm_80'\]",
                r"not run \(--no-run\).*made kernels: scale",
                r"compiled: \['scale\(z: float32\[1024\] / tiles 128",
                r"options of add: 2 2",
                r"UsageError: %%tile: --show: unknown view 'tile_ir'"],
    "views": [r"tabs: Source ↔ Tile IR \| Safety \| Lowered \| PTX \| SASS \| Resources \| "
              r"Remarks \| Ownership \| Roofline \| Timings",
              r"Tile IR lines linked to a source line: [1-9]\d*",
              r"static page: radio tabs \d+ KiB, no script: True",
              r"artifacts of add\(.*\) for sm_90 : tileir",
              r"%%tile: wrote \d+ files to "],
    "errors": [r"SafetyError: In\[\d+\]:\d+:\d+: ct\.store\(\) writes to 'x', which is tl\.In",
               r"hint: ",
               r"ZeroDivisionError: division by zero"],
    "races": [r"== Race ==",
              r"LaunchError: In\[\d+\]:9:5: 6 race\(s\) in kernel 'permute_raw'",
              r"tabs: Race \| Lowered",
              r"128 elements of 'out' written by more than one block",
              r"write-write on out: blocks \(0, 0, 0\) and \(0, 1, 0\), 64 elements "
              r"\(write at In\[\d+\], line 9; write at In\[\d+\], line 9\)"],
    "bench": [r"kernel\s+launch\s+grid\s+time\s+GB/s\s+TFLOP/s\s+% of roof",
              r"specializations: 2 \| pickers in the Tile IR tab: 1",
              r"tiles 256.*: interpreter [\d.]+ ms per launch"],
    "explore": [r"tile\s+64, n\s+1024: vector_add tile=64 n=1024",
                r"tile\s+256, n\s+4096: vector_add tile=256 n=4096",
                r"figures: roofline and ownership \| runs: 3"],
}


def test_every_gallery_file_is_checked_and_says_what_it_shows():
    files = sorted(p.stem for p in GALLERY.glob("*.ipy"))
    assert files == sorted(EXPECTED), files
    for name in files:
        head = (GALLERY / f"{name}.ipy").read_text().splitlines()
        assert head[0].startswith(f"# magics/{name}.ipy — "), head[0]
        comment = "\n".join(l for l in head if l.startswith("#"))
        assert "Shows:" in comment and f"ipython magics/{name}.ipy" in comment
    for doc in (ROOT / "README.md", ROOT / "docs" / "lab.md"):
        text = doc.read_text()
        prefix = "magics/" if doc.name == "README.md" else "../magics/"
        for name in files:
            assert f"]({prefix}{name}.ipy)" in text, f"{doc.name} does not link {name}.ipy"


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_gallery_file_runs_in_ipython(name, tmp_path):
    # this interpreter's IPython (python -m IPython), never an ipython command of another
    # environment that happens to come first on PATH
    if importlib.util.find_spec("IPython") is None:
        pytest.skip("IPython is not installed")
    env = dict(os.environ, TILELAB_BACKEND="cpu", TILELAB_CACHE_DIR=str(tmp_path / "cache"),
               IPYTHONDIR=str(tmp_path / "ipython"), MPLBACKEND="Agg")
    for var in ("TILELAB_LAB_VIEW", "TILELAB_THEME"):
        env.pop(var, None)
    r = subprocess.run([sys.executable, "-m", "IPython", "--no-banner", "--colors=NoColor",
                        f"magics/{name}.ipy"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert "Traceback" not in out, out[-4000:]
    pos = 0
    for pattern in EXPECTED[name]:
        m = re.compile(pattern).search(out, pos)
        assert m, f"{name}: {pattern!r} not printed (after position {pos}):\n{out[-4000:]}"
        pos = m.end()
