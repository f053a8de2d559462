"""What ``import tilelab`` and a warm ``tilelab compile`` import (their structure, not
their wall time): the public names resolve on first use, and a warm compile answered
from the cache's shortcut loads neither cuTile, numpy nor the compiler's export chain."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

import tilelab

#: what a warm ``tilelab compile`` must not import (the cost of the full path)
HEAVY = ("cuda.tile", "numpy", "ml_dtypes", "torch", "tilelab.compiler.export",
         "tilelab.compiler.frozen", "tilelab.compiler.tile_index", "tilelab.compiler.lower",
         "tilelab.compiler.definition", "tilelab.runtime")

_PROBE = ("import json, sys\n"
          "from tilelab.cli import main\n"
          "code = main(sys.argv[1:])\n"
          "print('MODULES=' + json.dumps(sorted(sys.modules)))\n"
          "sys.exit(code)\n")


def run_probe(*args: str, env: dict | None = None) -> tuple[str, set[str]]:
    """Run ``tilelab ARGS`` in a new process: (its output, the modules it imported)."""
    p = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True,
                       text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    out, _, mods = p.stdout.rpartition("MODULES=")
    return out, set(json.loads(mods))


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


@pytest.mark.subprocess
def test_import_tilelab_loads_only_the_errors_and_the_language():
    code = "import sys, tilelab; print(sorted(m for m in sys.modules if m.split('.')[0] in " \
           "('tilelab', 'numpy', 'cuda', 'torch', 'ml_dtypes')))"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert eval(p.stdout) == ["tilelab", "tilelab.compiler", "tilelab.compiler.language",
                              "tilelab.errors"]


@pytest.mark.parametrize("name", tilelab.__all__)
def test_every_public_name_resolves_with_its_docstring(name):
    value = getattr(tilelab, name)
    assert value.__doc__ and value.__doc__.strip(), f"tl.{name} has no docstring"
    assert name in dir(tilelab)


@pytest.mark.subprocess
def test_star_import_and_submodules_and_unknown_names():
    ns: dict = {}
    exec("from tilelab import *", ns)
    assert set(tilelab.__all__) <= set(ns)
    assert tilelab.stream is sys.modules["tilelab.runtime.streams"].new_stream
    # the submodules the package once imported eagerly are still its attributes
    code = ("import tilelab as tl\n"
            "print(tl.runtime.__name__, tl.config.__name__, tl.grid.__name__)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert p.stdout.split() == ["tilelab.runtime", "tilelab.config", "tilelab.grid"], p.stderr
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        tilelab.no_such_name  # noqa: B018


@pytest.mark.subprocess
def test_warm_compile_imports_no_compiler_chain(kernel_file):
    args = ("compile", f"{kernel_file}::add", "--arch", "sm_90", "--emit", "tileir,resources")
    full, full_mods = run_probe(*args)
    assert "cuda.tile" in full_mods       # the first run loads the file and compiles
    warm, warm_mods = run_probe(*args)
    assert "(disk cache hit)" in warm
    assert heavy_in(warm_mods) == [], heavy_in(warm_mods)
    assert warm.split("===== tileir =====")[1] == full.split("===== tileir =====")[1]


@pytest.mark.subprocess
def test_warm_compile_asking_for_remarks_takes_the_full_path(kernel_file):
    """Remarks are located through the lowered kernel's source map: no shortcut."""
    args = ("compile", f"{kernel_file}::add", "--emit", "remarks")
    run_probe(*args)
    out, mods = run_probe(*args)
    assert "===== remarks =====" in out and "cuda.tile" in mods


@pytest.mark.subprocess
def test_a_lazy_name_in_a_kernel_gets_the_host_object_message(tmp_path):
    """The safety check looks names up in the package's namespace: a public name not
    used yet (``tl.zeros`` in a fresh process) is still recognized as tilelab's host API."""
    f = tmp_path / "host_in_kernel.py"
    f.write_text(textwrap.dedent('''
        import tilelab as tl

        @tl.kernel
        def k(z: tl.Out, x: tl.In):
            y = tl.zeros(4)
            z.store(tl.load_like(x, z))
        '''))
    p = subprocess.run([sys.executable, str(f)], capture_output=True, text=True, timeout=300)
    assert p.returncode != 0
    assert "tl.zeros() is not available inside a kernel" in p.stderr, p.stderr[-2000:]
