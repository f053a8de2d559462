"""Source capture from real IPython cells, including cells re-run with edits."""
import re

import pytest

IPython = pytest.importorskip("IPython")
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

import tilelab as tl  # noqa: E402


@pytest.fixture(scope="module")
def shell():
    sh = InteractiveShell.instance()
    yield sh


def run(shell, code):
    res = shell.run_cell(code, store_history=True)
    return res


CELL = '''
import tilelab as tl
import cuda.tile as ct

@tl.kernel
def cell_kernel(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) {op} 1)
'''


@pytest.mark.toolchain
def test_kernel_defined_in_a_cell_compiles(shell):
    res = run(shell, CELL.format(op="+"))
    assert res.success, res.error_in_exec
    k = shell.user_ns["cell_kernel"]
    assert "+ 1" in k.definition.analysis.source.text
    x = tl.spec(4096, "float32")
    art = k.compile(x.partition(256), x, arch="sm_90")
    assert "addf" in art.tileir


@pytest.mark.toolchain
def test_rerun_with_edits_is_captured_anew(shell):
    run(shell, CELL.format(op="+"))
    first = shell.user_ns["cell_kernel"]
    run(shell, CELL.format(op="*"))
    second = shell.user_ns["cell_kernel"]
    assert first.definition.fingerprint != second.definition.fingerprint
    assert "* 1" in second.definition.analysis.source.text
    x = tl.spec(4096, "float32")
    art = second.compile(x.partition(256), x, arch="sm_90")
    assert "mulf" in art.tileir and "addf" not in art.tileir


def test_safety_error_points_at_the_cell_line(shell):
    res = run(shell, '''import tilelab as tl
import cuda.tile as ct

@tl.kernel
def bad_cell(z: tl.Out, x: tl.In):
    ct.store(x, index=(0,), tile=tl.load_like(x, z))
''')
    err = res.error_in_exec
    assert isinstance(err, tl.SafetyError)
    assert err.location.line == 6 and err.location.filename.startswith(("<ipython", "/"))
    assert "ct.store(x" in str(err)
    # the message names the cell as the user knows it, not its temporary file
    assert re.match(r"In\[\d+\]:6:5: ", str(err)), str(err)
