"""The errors a newcomer meets first, read as they appear in a real IPython shell.

Each case runs cells through ``InteractiveShell.run_cell`` with the extension loaded and
checks the text the user sees: one located line (the cell as ``In[n]``, line and column),
the source line with carets, and a hint that says what to write; no traceback through
tilelab's internals. The same refusals by the compile path (``kernel.compile`` for sm_90,
no GPU needed) and by the CPU interpreter are checked to say the same thing.
"""
from __future__ import annotations

import html
import re

import pytest

IPython = pytest.importorskip("IPython")
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from IPython.utils.capture import capture_output  # noqa: E402

import tilelab as tl  # noqa: E402
import tilelab.lab as lab  # noqa: E402
from tilelab.errors import TilelabError  # noqa: E402
from support.backends import cpu_backend  # noqa: F401 (autouse fixture)

HEAD = "import tilelab as tl\nimport cuda.tile as ct\n"
CELL = r"In\[\d+\]"


@pytest.fixture(scope="module")
def shell():
    sh = InteractiveShell.instance()
    lab.load_ipython_extension(sh)
    sh.run_cell(HEAD, store_history=True)
    yield sh
    lab.unload_ipython_extension(sh)


def run(shell, cell: str):
    """(error, what the cell printed, its display outputs) of one cell."""
    with capture_output() as cap:
        res = shell.run_cell(cell, store_history=True)
    return res.error_in_exec, re.sub(r"\x1b\[[0-9;]*m", "", cap.stdout), cap.outputs


def one_located_message(out: str, kind: str) -> list[str]:
    """The lines of a located tilelab error as printed: ``Kind: In[n]:L:C: ...``, the
    source line, carets, ``hint: ...``; no traceback, no path into tilelab."""
    assert "Traceback" not in out and "tilelab/" not in out, out
    lines = out.strip().splitlines()
    assert re.match(rf"{kind}: {CELL}:\d+:\d+: ", lines[0]), out
    assert lines[-1].startswith("hint: "), out
    return lines


# ------------------------------------------------------------------ partition(100)

PARTITION_100 = '''
def add(z: tl.Out, x: tl.In, y: tl.In):
    z.store(tl.load_like(x, z) + tl.load_like(y, z))
x = tl.arange(4096, dtype="float32"); y = tl.ones(4096, dtype="float32")
z = tl.empty(4096, dtype="float32")
add(z.partition(100), x, y)
'''


@pytest.mark.parametrize("magic", ["%%tile\n", ""])
def test_partition_of_100_is_one_located_line_with_the_nearest_sizes(shell, magic):
    err, out, _ = run(shell, magic + (HEAD if not magic else "") + PARTITION_100)
    assert isinstance(err, tl.LaunchError) and isinstance(err, ValueError)
    lines = one_located_message(out, "TileShapeError")
    line = 7 if magic else 8
    assert re.fullmatch(
        rf"TileShapeError: {CELL}:{line}:5: tile size 100 is not a power of two: cuTile's "
        r"tiles are powers of two in every dimension \(the nearest are 64 and 128\)",
        lines[0]), out
    assert lines[1:3] == ["    add(z.partition(100), x, y)", "        ^^^^^^^^^^^^^^^^"]
    assert lines[3] == ("hint: write partition(128) or partition(64); edge tiles may be "
                        "partial, so the tensor's shape (4096,) need not be a multiple of "
                        "the tile")
    assert len(lines) == 4


@pytest.mark.parametrize("tile, message, hint", [
    ((100, 48), "tile dimension 0 is 100", None),
    ((64, 48), "tile dimension 1 48 is not a power of two", "write partition((64, 64)) or "
                                                            "partition((64, 32))"),
    ((0, 64), "tile dimension 0 0 is not a power of two: tile sizes are positive",
     "write e.g. partition((1, 64))"),
    ((100, 0), "tile dimension 1 0 is not a power of two: tile sizes are positive",
     "write e.g. partition((100, 1))"),
    ((64,), "tile shape (64,) has 1 dims but the tensor has 2 (shape (300, 200))",
     "give one tile size per dimension of the tensor: 2 sizes, e.g. partition((64, 64))"),
])
@pytest.mark.parametrize("maker", [lambda: tl.zeros((300, 200), device="cpu"),
                                   lambda: tl.spec((300, 200), "f32")],
                         ids=["tensor", "spec"])
def test_other_bad_tile_shapes_say_what_to_write(maker, tile, message, hint):
    array = maker()
    with pytest.raises(tl.LaunchError) as info:
        array.partition(tile)
    e = info.value
    assert isinstance(e, ValueError) and type(e).__name__ == "TileShapeError"
    assert e.location is not None and e.location.filename == __file__
    if message == "tile dimension 0 is 100":   # both dimensions wrong: both rounded
        assert e.message.startswith("tile dimension 0 100 is not a power of two")
        assert e.hint.startswith("write partition((128, 64)) or partition((64, 32))")
        return
    assert e.message.startswith(message), e.message
    assert e.hint.startswith(hint), e.hint


def test_a_spec_refuses_partition_100_as_a_tensor_does(shell):
    """``tl.spec(...).partition(100)`` (compiling without memory) gives the located
    TileShapeError of ``tensor.partition(100)``: the same message and hint."""
    err, out, _ = run(shell, "s = tl.spec((4096,), 'f32')\np = s.partition(100)\n")
    lines = one_located_message(out, "TileShapeError")
    assert re.fullmatch(
        rf"TileShapeError: {CELL}:2:5: tile size 100 is not a power of two: cuTile's "
        r"tiles are powers of two in every dimension \(the nearest are 64 and 128\)",
        lines[0]), out
    assert lines[1:3] == ["    p = s.partition(100)", "        ^^^^^^^^^^^^^^^^"]
    assert lines[3] == ("hint: write partition(128) or partition(64); edge tiles may be "
                        "partial, so the tensor's shape (4096,) need not be a multiple of "
                        "the tile")
    _, tensor_out, _ = run(shell, "s = tl.zeros(4096, device='cpu')\np = s.partition(100)\n")
    assert tensor_out.splitlines()[1:] == out.splitlines()[1:]
    assert tensor_out.splitlines()[0].split(":", 3)[3] == lines[0].split(":", 3)[3]


# ------------------------------------------------------------------ typos

@pytest.mark.parametrize("typo, message, hint", [
    ("ct.lg(tl.load_like(x, z))",
     "no op `ct.lg` in cuda.tile; did you mean `ct.log`?", "hint: write ct.log"),
    ("tl.load_lik(x, z)",
     "no `tl.load_lik` in module 'tilelab'; did you mean `tl.load_like`?",
     "hint: write tl.load_like"),
    ("ct.load(x, index=(0,), shape=(16,), padding_mode=ct.PaddingMode.ZEROS)",
     "no member `ct.PaddingMode.ZEROS` in ct.PaddingMode; did you mean "
     "`ct.PaddingMode.ZERO`?", "hint: write ct.PaddingMode.ZERO"),
    ("ct.frobnicate(x)", "no op `ct.frobnicate` in cuda.tile",
     "hint: check the spelling: dir(ct) lists the names of cuda.tile"),
])
def test_a_typo_names_the_op_that_was_meant(shell, typo, message, hint):
    err, out, _ = run(shell, "%%tile\n" + HEAD + f'''
def k(z: tl.Out, x: tl.In):
    z.store({typo})
''')
    assert isinstance(err, tl.SafetyError) and err.rule == "global-attribute"
    lines = one_located_message(out, "SafetyError")
    assert re.search(rf":6:\d+: {re.escape(message)} \(in kernel 'k'\)$", lines[0]), out
    assert lines[-1] == hint
    assert "import the value at module level" not in out


def test_an_undefined_name_suggests_the_one_in_scope(shell):
    run(shell, "SCALE = 2.0")
    err, out, _ = run(shell, '''
@tl.kernel
def k(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) * SCAEL)
x = tl.ones(64); z = tl.empty(64)
k(z.partition(16), x)
''')
    assert isinstance(err, tl.SafetyError) and err.rule == "unresolved-name"
    assert "NameError: name 'SCAEL' is not defined; did you mean 'SCALE'?" in out, out
    assert "Traceback" not in out


# ------------------------------------------------------------------ shapes: mma's K, a store

MMA = '''
def mm(c: tl.Out, a: tl.In, b: tl.In):
    i, j = c.tile_index
    ta = ct.load(a, index=(i, 0), shape=(16, 32))
    tb = ct.load(b, index=(0, j), shape=(16, 16))
    acc = ct.zeros((16, 16), dtype=ct.float32)
    c.store(ct.mma(ta, tb, acc))
'''
MMA_MESSAGE = ("ct.mma: K differs: x is (16, 32), so K = 32, but y is (16, 16), so K = 16 "
               "(x @ y multiplies (M, K) by (K, N))")
MMA_HINT = ("hint: load x and y with one K tile size: y as (32, 16) for K = 32, or x as "
            "(16, 16) for K = 16")

STORE = '''
def st(z: tl.Out, x: tl.In):
    t = ct.load(x, index=(z.tile_index[0],), shape=(128,))
    z.store(t)
'''
STORE_MESSAGE = ("z.store(tile): the tile is (128,), but z is partitioned into tiles of "
                 "(256,): a store writes one whole tile of z")
STORE_HINT = ("hint: store a tile of shape (256,) (z.tile_shape): load it with "
              "tl.load_like(x, z), or with shape=z.tile_shape; a tile that divides it is "
              "stored as a part of the block's own tile with z.store(tile, offset=...)")


def test_mma_with_mismatched_k_says_k_on_the_cpu(shell):
    err, out, _ = run(shell, "%%tile\n" + HEAD + MMA + '''
a = tl.ones((32, 32)); b = tl.ones((32, 32)); c = tl.empty((32, 32))
mm(c.partition((16, 16)), a, b)
''')
    assert isinstance(err, tl.CompileError)
    lines = one_located_message(out, "CompileError")
    assert lines[0].endswith(f":10:13: {MMA_MESSAGE}"), out
    assert lines[1] == "    c.store(ct.mma(ta, tb, acc))" and lines[-1] == MMA_HINT


def test_store_of_a_smaller_tile_names_the_partition_tile_on_the_cpu(shell):
    err, out, _ = run(shell, "%%tile\n" + HEAD + STORE + '''
x = tl.ones(1024); z = tl.empty(1024)
st(z.partition(256), x)
''')
    assert isinstance(err, tl.CompileError)
    lines = one_located_message(out, "CompileError")
    assert lines[0].endswith(f":7:5: {STORE_MESSAGE}"), out
    assert lines[1] == "    z.store(t)" and lines[-1] == STORE_HINT
    assert "not broadcastable" not in out


@pytest.mark.toolchain
def test_the_compile_path_says_the_same(shell):
    run(shell, "%%tile --no-run\n" + HEAD + MMA + STORE)
    mm, st = shell.user_ns["mm"], shell.user_ns["st"]
    m32, v = tl.spec((32, 32), "float32"), tl.spec(1024, "float32")
    with pytest.raises(tl.CompileError) as info:
        mm.compile(m32.partition((16, 16)), m32, m32, arch="sm_90")
    e = info.value
    assert e.message == f"cuTile rejected kernel 'mm': {MMA_MESSAGE}"
    assert f"hint: {e.hint}" == MMA_HINT     # not the store hint of the line's c.store
    with pytest.raises(tl.CompileError) as info:
        st.compile(v.partition(256), v, arch="sm_90")
    e = info.value
    assert e.message == f"cuTile rejected kernel 'st': {STORE_MESSAGE}"
    assert f"hint: {e.hint}" == STORE_HINT


def test_mma_accumulator_of_the_wrong_shape():
    from tilelab.interp import interpret

    import cuda.tile as ct
    import numpy as np

    @ct.kernel
    def k(a, c):
        t = ct.load(a, index=(0, 0), shape=(16, 16))
        c_t = ct.mma(t, t, ct.zeros((16, 32), dtype=ct.float32))
        ct.store(c, index=(0, 0), tile=c_t)

    with pytest.raises(tl.CompileError) as info:
        interpret(k, np.ones((16, 16), np.float32), np.zeros((16, 32), np.float32),
                  grid=(1,))
    assert info.value.message == ("ct.mma: acc is (16, 32), but x @ y is (16, 16) (M rows "
                                  "of x by N columns of y)")
    assert info.value.hint == ("make the accumulator of shape (16, 16), e.g. "
                               "ct.zeros((16, 16), dtype=ct.float32)")


# ------------------------------------------------------------------ races

RACY = '''
@tl.kernel(unsafe=True)
def total(out: tl.Raw, x: tl.In, T: ct.Constant[int]):
    t = ct.load(x, index=(ct.bid(0),), shape=(T,))
    ct.store(out, index=(0,), tile=ct.reshape(ct.sum(t), (1,)))
x = tl.ones(1024); out = tl.zeros(1)
'''
FIRST_RACE = ("  - write-write race on 'out': blocks (0, 0, 0) and (1, 0, 0) both write 1 "
              "element, e.g. out[0]; both by the write at {cell}, line 8")


@pytest.mark.toolchain
def test_a_race_is_printed_once_and_its_hint_is_a_partition(shell):
    err, out, outputs = run(shell, "%%tile --show timings\n" + HEAD + RACY
                            + "total(out, x, 256, grid=(4,))\n")
    assert isinstance(err, tl.LaunchError)
    cell = re.match(rf"LaunchError: ({CELL})", out).group(1)
    lines = one_located_message(out, "LaunchError")
    assert lines[0] == (f"LaunchError: {cell}:8:5: 3 race(s) in kernel 'total' (each drawn "
                        "and listed in the Race tab above); the first:")
    assert lines[1] == FIRST_RACE.format(cell=cell)
    assert lines[2] == "    ct.store(out, index=(0,), tile=ct.reshape(ct.sum(t), (1,)))"
    assert lines[-1] == ("hint: make 'out' a partition: declare it 'out: tl.Out', launch "
                         "with out.partition(tile_shape) and store with out.store(tile): "
                         "each block then writes only its own tile, and the kernel needs no "
                         "unsafe=True. A value the blocks share on purpose (a sum, a "
                         "histogram) takes ct.atomic_add instead")
    assert "ct.bid" not in lines[-1]
    assert out.count("blocks (0, 0, 0) and (2, 0, 0)") == 0      # the error names one race
    view = lab.last_view()
    assert [p.title for p in view.panels] == ["Race", "Timings"]
    race = view.panel("race").text
    assert race.count("blocks (0, 0, 0) and (2, 0, 0)") == 1     # the tab lists each once
    assert "hint: make 'out' a partition" in html.unescape(view.panel("race").html)


def test_a_read_write_race_hints_a_separate_output():
    from tilelab.interp.races import Race, race_hint

    r = Race("x", "read-write", ((0, 0, 0), (1, 0, 0)), ("read", "write"), (None, None), 1)
    assert race_hint([r]) == ("read 'x' as tl.In and write the result to a separate output, "
                              "a tl.Out partition stored with out.store(tile): then no block "
                              "writes what another reads, and the kernel needs no unsafe=True")


@pytest.mark.toolchain
def test_a_race_caught_by_expect_still_shows_its_launch_and_race_tab(shell):
    run(shell, "from tilelab.lab import expect")
    err, out, outputs = run(shell, "%%tile --show timings\n" + RACY + '''
with expect(tl.LaunchError):
    total(out, x, 256, grid=(4,))
''')
    assert err is None
    shown = [o.data["text/plain"] for o in outputs if "(expected)" in
             o.data.get("text/plain", "")]
    assert len(shown) == 1
    head = shown[0].splitlines()[0]
    assert re.fullmatch(rf"LaunchError \(expected\): {CELL}:6:5: 3 race\(s\) in kernel "
                        r"'total' \(each drawn and listed in the Race tab below\); the "
                        "first:", head), shown[0]
    view = lab.last_view()
    assert [p.title for p in view.panels] == ["Race", "Timings"]
    assert "1 kernel, 1 launch" in view.header
    assert "total" in view.panel("timings").text
    assert view.panel("race").text.count("write-write on out") == 3


@pytest.mark.toolchain
def test_a_race_caught_by_the_users_own_try_still_shows_its_launch_and_race_tab(shell):
    err, out, _ = run(shell, "%%tile --show timings\n" + RACY + '''
try:
    total(out, x, 256, grid=(4,))
except tl.LaunchError as e:
    print("caught:", str(e).splitlines()[0])
''')
    assert err is None
    assert re.match(rf"caught: {CELL}:6:5: 3 race\(s\) in kernel 'total'", out), out
    view = lab.last_view()
    assert [p.title for p in view.panels] == ["Race", "Timings"]
    assert "1 kernel, 1 launch" in view.header
    assert view.panel("race").text.count("write-write on out") == 3


def test_a_caught_race_is_recorded_once_beside_a_clean_launch(shell):
    """Any recorder sees the stopped launch (the launcher emits it with its error), once,
    and ``record_failure`` hands back that same event; a launch that ran clean is no
    failure."""
    from tilelab.lab.report.record import LaunchRecorder, record_failure

    run(shell, RACY)
    ns = shell.user_ns
    with LaunchRecorder() as rec:
        ns["total"](ns["out"], ns["x"], 1024, grid=(1,))       # one block: no race
        with pytest.raises(tl.LaunchError) as caught:
            ns["total"](ns["out"], ns["x"], 256, grid=(4,))
        assert record_failure(caught.value) is rec.failures[0][0]
        assert record_failure(ValueError("not a launch")) is None
    assert rec.launch_count == 2 and len(rec.failures) == 1
    event, error = rec.failures[0]
    assert error is caught.value and event.error is error and event.grid == (4, 1, 1)
    assert len(event.trace.races) == 3
    assert record_failure(caught.value) is None                 # no recorder active now


# ------------------------------------------------------------------ a pending launch

def test_a_pending_launch_is_located_in_its_cell(shell):
    run(shell, '''
@tl.kernel
def add1(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) + 1)
x = tl.ones(1024); z = tl.empty(1024)
''')
    err, out, _ = run(shell, "f = add1.launch_async(z.partition(256), x)\nz.numpy()")
    assert isinstance(err, tl.BorrowError)
    lines = one_located_message(out, "BorrowError")
    cell = re.match(rf"BorrowError: ({CELL})", lines[0]).group(1)
    assert lines[0] == (f"BorrowError: {cell}:2:1: Tensor.numpy() touches memory that the "
                        f"pending kernel 'add1' launched at {cell}, line 1 writes (as 'z')")
    assert "<ipython-input" not in out
    shell.user_ns["f"].wait()
    assert repr(shell.user_ns["f"]).endswith(f"launched at {cell}, line 1>")


def test_place_names_files_as_paths():
    from tilelab.runtime.ledger import place

    assert place("/tmp/kernels.py", 12) == "/tmp/kernels.py:12"


# ------------------------------------------------------------------ a cell without a kernel

def test_a_cell_without_a_kernel_shows_a_note_and_no_empty_tabs(shell):
    err, out, outputs = run(shell, "%%tile\nn = 1 + 1\nprint(n)\n")
    assert err is None and out.startswith("2\n")
    view = lab.last_view()
    assert view.panels == []
    assert "no kernels, no launches" in view.header
    [note] = view.notes
    assert note.startswith("this cell defined no kernel and launched none, so there are "
                           "no tabs to show")
    page = view.to_html()
    assert 'class="tl-panel' not in page and "this cell defined no kernel" in page


def test_a_cell_without_a_kernel_publishes_no_empty_widget_tab(shell):
    """In a widget frontend (a kernel with ipywidgets) the no-kernel view is its static
    page alone: a widget would be an empty ``Tab`` strip under the note."""
    pytest.importorskip("ipywidgets")
    from tilelab.lab.views.panels import Panel
    from tilelab.lab.views.tabs import TileView, widget_frontend

    class ZMQInteractiveShell:          # what widget_frontend takes for a Jupyter kernel
        kernel = object()

    run(shell, "%%tile\nn = 1 + 1\n")
    view = lab.last_view()
    view.shell, view.mode = ZMQInteractiveShell(), "auto"
    assert widget_frontend(view.shell) and view.panels == []
    [static] = view.bundles()
    assert sorted(static) == ["text/html", "text/plain"]
    assert "this cell defined no kernel" in static["text/html"]
    view.mode = "widget"                                       # even when asked for
    assert len(view.bundles()) == 1
    assert view.to_widget().children[0].value.count("this cell defined no kernel") == 1
    assert len(view.to_widget().children) == 1                 # the header, no Tab
    with_panel = TileView([Panel("ptx", "PTX", "x", "x")], "h",
                          shell=ZMQInteractiveShell())
    assert len(with_panel.bundles()) == 2                      # a view with tabs has its widget


# ------------------------------------------------------------------ the error display

def test_errors_other_than_tilelab_keep_their_traceback(shell):
    err, out, _ = run(shell, "1 / 0")
    assert isinstance(err, ZeroDivisionError) and "Traceback" in out


def test_the_error_display_leaves_a_users_handler_alone_and_unloads():
    sh = InteractiveShell.instance()
    lab.unload_ipython_extension(sh)
    assert sh.custom_exceptions == ()

    def mine(shell, etype, value, tb, tb_offset=None):
        return ["mine"]
    sh.set_custom_exc((KeyError,), mine)
    try:
        lab.load_ipython_extension(sh)
        assert sh.custom_exceptions == (KeyError,)
        lab.unload_ipython_extension(sh)
        assert sh.custom_exceptions == (KeyError,)
    finally:
        sh.set_custom_exc((), None)
        lab.load_ipython_extension(sh)   # the module's shell is loaded again
    assert sh.custom_exceptions == (TilelabError,)


# ------------------------------------------------------------------ in a Jupyter kernel

@pytest.mark.subprocess
def test_in_a_jupyter_kernel_cells_are_named_as_the_user_sees_them():
    """ipykernel runs each cell from a temporary file (/tmp/ipykernel_*/*.py): every
    message names the cell In[n] instead, and a plain cell's tilelab error is one located
    message too."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in [
        "import os\nos.environ['TILELAB_BACKEND'] = 'cpu'\n%load_ext tilelab\n" + HEAD,
        '''@tl.kernel
def add1(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) + 1)
x = tl.ones(1024); z = tl.empty(1024)''',
        "f = add1.launch_async(z.partition(256), x)\nz.numpy()",
        "f.wait()\nz.partition(100)",
    ]]
    client = nbclient.NotebookClient(nb, timeout=180, kernel_name="python3",
                                     allow_errors=True)
    try:
        client.execute()
    except Exception as e:  # no kernel spec on this machine
        if type(e).__name__ == "NoSuchKernel":
            pytest.skip(f"no python3 kernel: {e}")
        raise
    [borrow] = nb.cells[2].outputs
    assert borrow.output_type == "error" and borrow.ename == "BorrowError"
    shown = "\n".join(borrow.traceback)
    assert shown.startswith("BorrowError: In[3]:2:1: Tensor.numpy() touches memory that the "
                            "pending kernel 'add1' launched at In[3], line 1 writes (as 'z')")
    assert "ipykernel" not in shown and "Traceback" not in shown
    [shape] = nb.cells[3].outputs
    assert shape.output_type == "error" and shape.ename == "TileShapeError"
    shown = "\n".join(shape.traceback)
    assert shown.startswith("TileShapeError: In[4]:2:1: tile size 100 is not a power of two")
    assert shown.endswith("hint: write partition(128) or partition(64); edge tiles may be "
                          "partial, so the tensor's shape (1024,) need not be a multiple of "
                          "the tile")
