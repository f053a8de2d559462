"""tests/support: the helpers several test folders share, and the report of tests whose
markers miss a process they start."""
from __future__ import annotations

import doctest
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from support import data, spawns

TESTS = Path(__file__).resolve().parent


@pytest.mark.parametrize("module", [data, spawns])
def test_docstring_examples_run(module):
    res = doctest.testmod(module)
    assert res.attempted > 0 and res.failed == 0


def test_seeded_inputs_are_the_same_numbers_every_time():
    a = data.randn((3, 4), seed=7, scale=2.0)
    want = (np.random.default_rng(7).standard_normal((3, 4)) * 2.0).astype(np.float32)
    assert a.dtype == np.float32 and np.array_equal(a, want)
    t = data.rand_tensor((3, 4), "float32", seed=7, scale=2.0)
    assert t.device == "cpu" and np.array_equal(t.numpy(), want)


@pytest.mark.parametrize("argv, kind", [
    (["/opt/cuda/bin/tileiras", "--gpu-name", "sm_90"], "toolchain"),
    (["ptxas", "-v"], "toolchain"),
    ([sys.executable, "-c", "pass"], "subprocess"),
    (["python3.11", "-m", "IPython"], "subprocess"),
    (["/usr/bin/jupyter", "lab"], "subprocess"),
    ("tilelab compile k.py::add", "subprocess"),
    (["cc", "-shared", "-o", "x.so"], None),
    (["git", "status"], None),
])
def test_each_program_calls_for_its_marker(argv, kind):
    assert spawns.kind_of(argv) == kind


@pytest.mark.subprocess
def test_a_run_names_the_tests_whose_markers_miss_a_process(tmp_path):
    """A probe session with the plugin: the unmarked test that starts Python is listed,
    the marked one and the one that starts nothing are not, and the run still passes."""
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["support.spawns"]\n')
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nmarkers =\n    subprocess: starts a process\n    toolchain: runs tileiras\n")
    (tmp_path / "test_probe.py").write_text(textwrap.dedent("""
        import subprocess, sys
        import pytest

        def test_unmarked():
            subprocess.run([sys.executable, "-c", "pass"], check=True)

        @pytest.mark.subprocess
        def test_marked():
            subprocess.run([sys.executable, "-c", "pass"], check=True)

        def test_quiet():
            assert True
        """))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), str(tmp_path / "test_probe.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("spawns: ")]
    assert lines == ["spawns: test_probe.py::test_unmarked: needs @pytest.mark.subprocess "
                     f"(started {Path(sys.executable).name})"], proc.stdout
