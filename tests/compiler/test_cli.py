"""The tilelab command: compile, emit, and the messages for bad input."""
import subprocess
import sys
import textwrap

import pytest


@pytest.fixture
def kernel_file(tmp_path):
    f = tmp_path / "mykernels.py"
    f.write_text(textwrap.dedent('''
        import tilelab as tl
        import cuda.tile as ct

        @tl.kernel
        def add(z: tl.Out, x: tl.In, y: tl.In):
            z.store(tl.load_like(x, z) + tl.load_like(y, z))

        X = tl.spec(4096, "float32")
        TILELAB_EXAMPLES = {"add": (X.partition(256), X, X)}
        '''))
    return f


def tilelab(*args):
    return subprocess.run([sys.executable, "-m", "tilelab", *args], capture_output=True,
                          text=True, timeout=300)


def test_compile_emits_requested_artifacts(kernel_file):
    r = tilelab("compile", f"{kernel_file}::add", "--arch", "sm_90",
                "--emit", "tileir,ptx,resources,lowered,timings")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "add -> add_" in out and "for sm_90" in out
    assert "===== tileir =====" in out and "entry @add_" in out
    assert "===== ptx =====" in out and ".target sm_90" in out
    assert "===== resources =====" in out
    assert "===== lowered =====" in out and "ct.store(z, index=" in out


def test_compile_with_args_expression(kernel_file):
    r = tilelab("compile", f"{kernel_file}::add", "--arch", "sm_120", "--emit", "tileir",
                "--args", "X.partition(512), X, X")
    assert r.returncode == 0, r.stderr
    assert "for sm_120" in r.stdout


def test_compile_unknown_kernel_lists_kernels(kernel_file):
    r = tilelab("compile", f"{kernel_file}::nope")
    assert r.returncode != 0 and "no @tl.kernel named 'nope'" in r.stderr
    assert "kernels there: add" in r.stderr


def test_compile_bad_emit(kernel_file):
    r = tilelab("compile", f"{kernel_file}::add", "--emit", "tileir,bogus")
    assert r.returncode != 0 and "unknown --emit ['bogus']" in r.stderr


def test_compile_error_is_reported_not_raised(tmp_path):
    f = tmp_path / "bad.py"
    f.write_text(textwrap.dedent('''
        import tilelab as tl
        import cuda.tile as ct

        @tl.kernel
        def k(z: tl.Out, x: tl.In):
            z.store(ct.load(x, index=(0,), shape=(64,)))

        X = tl.spec(4096, "float32")
        TILELAB_EXAMPLES = {"k": (X.partition(256), X)}
        '''))
    r = tilelab("compile", f"{f}::k", "--arch", "sm_90")
    assert r.returncode == 1
    assert "bad.py:7" in r.stderr and "not broadcastable" in r.stderr
    assert "Traceback" not in r.stderr


def test_compile_needs_example_args(tmp_path):
    f = tmp_path / "noargs.py"
    f.write_text("import tilelab as tl\n@tl.kernel\ndef k(z: tl.Out):\n    pass\n")
    r = tilelab("compile", f"{f}::k")
    assert r.returncode != 0 and "needs example arguments" in r.stderr
