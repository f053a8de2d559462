"""%%tile in a real IPython shell on the CPU backend: loading, running, options, errors."""
from __future__ import annotations

import html
import re
from html.parser import HTMLParser

import pytest

IPython = pytest.importorskip("IPython")
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from IPython.utils.capture import capture_output  # noqa: E402

import tilelab as tl  # noqa: E402
import tilelab.lab as lab  # noqa: E402
from tilelab import config  # noqa: E402
from support.backends import cpu_backend  # noqa: F401 (autouse fixture)

HEAD = "import tilelab as tl\nimport cuda.tile as ct\n"

ADD = HEAD + '''
def add(z: tl.Out, x: tl.In, y: tl.In):
    z.store(tl.load_like(x, z) + tl.load_like(y, z))

x = tl.arange(4096, dtype="float32"); y = tl.ones(4096, dtype="float32")
z = tl.empty(4096, dtype="float32")
add(z.partition(256), x, y)
z.numpy()[:4]
'''


@pytest.fixture(scope="module")
def shell():
    sh = InteractiveShell.instance()
    lab.load_ipython_extension(sh)
    yield sh
    lab.unload_ipython_extension(sh)


class Tabs(HTMLParser):
    """The static view, parsed: tab labels, which radio is checked, and per panel (by view
    key) its text, images and tables."""

    def __init__(self, page: str):
        super().__init__()
        self.labels: list[str] = []
        self.radios: list[dict] = []
        self.panels: dict[str, dict] = {}
        self._label = False
        self._panel: str | None = None
        self._depth = 0
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "input" and a.get("type") == "radio":
            self.radios.append(a)
        elif tag == "label":
            self._label = True
            self.labels.append("")
        elif tag == "div" and "tl-panel" in (a.get("class") or "").split():
            self._panel = a["data-view"]
            self._depth = 1
            self.panels[self._panel] = {"text": "", "img": 0, "table": 0}
        elif self._panel is not None:
            if tag == "div":
                self._depth += 1
            elif tag in ("img", "svg", "table"):  # a figure is a PNG <img> or inline <svg>
                self.panels[self._panel]["img" if tag == "svg" else tag] += 1

    def handle_endtag(self, tag):
        if tag == "label":
            self._label = False
        elif tag == "div" and self._panel is not None:
            self._depth -= 1
            if self._depth == 0:
                self._panel = None

    def handle_data(self, data):
        if self._label:
            self.labels[-1] += data
        elif self._panel is not None:
            self.panels[self._panel]["text"] += data

    def text(self, key: str) -> str:
        return self.panels[key]["text"]


def run(shell, cell: str):
    with capture_output() as cap:
        res = shell.run_cell(cell, store_history=True)
    return res, cap


def view_of(cap):
    """The %%tile view among the cell's display outputs (its MIME bundle)."""
    views = [o.data for o in cap.outputs if "tilelab-view" in o.data.get("text/html", "")]
    assert len(views) == 1, [list(o.data) for o in cap.outputs]
    return views[0]


def tabs_of(cap) -> Tabs:
    return Tabs(view_of(cap)["text/html"])


# ------------------------------------------------------------------ loading

def test_load_unload_reload_registers_once(shell):
    lab.load_ipython_extension(shell)
    lab.load_ipython_extension(shell)          # a second load replaces, never duplicates
    magics = [m for m in shell.magics_manager.registry.values()
              if type(m).__name__ == "TileMagics"]
    assert len(magics) == 1
    assert "tile" in shell.magics_manager.magics["cell"]
    lab.unload_ipython_extension(shell)
    assert "tile" not in shell.magics_manager.magics["cell"]
    assert not [m for m in shell.magics_manager.registry.values()
                if type(m).__name__ == "TileMagics"]
    res, cap = run(shell, "%%tile\npass")
    assert not res.success                       # the magic is really gone
    lab.load_ipython_extension(shell)
    assert "tile" in shell.magics_manager.magics["cell"]


def test_load_ext_by_package_name(shell):
    if not hasattr(tl, "load_ipython_extension"):
        pytest.skip("tilelab/__init__.py does not export load_ipython_extension yet")
    shell.run_line_magic("reload_ext", "tilelab")
    assert "tile" in shell.magics_manager.magics["cell"]
    shell.run_line_magic("unload_ext", "tilelab")
    assert "tile" not in shell.magics_manager.magics["cell"]
    shell.run_line_magic("load_ext", "tilelab")
    assert "tile" in shell.magics_manager.magics["cell"]


# ------------------------------------------------------------------ the main path

@pytest.mark.toolchain
def test_vector_add_without_decorator_shows_tabs(shell):
    res, cap = run(shell, "%%tile\n" + ADD)
    assert res.success, res.error_in_exec
    assert isinstance(shell.user_ns["add"], tl.Kernel)         # made a kernel by the magic
    assert shell.user_ns["z"].numpy()[:4].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert "Out[" in cap.stdout and "array([1., 2., 3., 4.]" in cap.stdout  # last expr shown
    t = tabs_of(cap)
    assert t.labels == ["Source ↔ Tile IR", "Safety", "Lowered", "Resources", "Remarks",
                        "Ownership", "Roofline", "Timings"]
    ir = t.text("tileir")
    assert "addf" in ir and "load_view_tko" in ir and "entry @add" in ir
    assert "def add(z: tl.Out, x: tl.In, y: tl.In):" in ir     # the source beside it
    assert "ct.store(z" in t.text("lowered") and "ct.load(x" in t.text("lowered")
    timings = t.panels["timings"]
    assert timings["table"] == 1 and "add" in timings["text"]
    assert "predicted for NVIDIA H200 SXM" in timings["text"]
    assert t.panels["ownership"]["img"] >= 1
    assert "registers" in t.text("resources")
    head = view_of(cap)["text/plain"].splitlines()[0]
    assert "1 kernel, 1 launch" in head and "backend cpu" in head and "arch sm_90" in head


@pytest.mark.toolchain
def test_tile_ir_ops_link_to_cell_lines(shell):
    res, cap = run(shell, "%%tile --show tileir\n" + ADD)
    assert res.success
    page = view_of(cap)["text/html"]
    # line 1 is %%tile, so the kernel's body is line 6 of the cell, as the user sees it
    ids = set(re.findall(r'id="(tl[0-9a-f]+-L\d+)"', page))
    links = set(re.findall(r'href="#(tl[0-9a-f]+-L\d+)"', page))
    assert any(i.endswith("-L6") for i in ids) and links and links <= ids
    # (a word match: the view's random hex id can contain "addf" too)
    row = next(r for r in page.split("\n") if re.search(r"\baddf\b", r) and "tl-row" in r)
    assert re.search(r'href="#tl[0-9a-f]+-L6"', row)            # the add is on line 6


@pytest.mark.toolchain
def test_helpers_and_decorated_kernels_follow_the_rule(shell):
    res, _ = run(shell, "%%tile --show timings\n" + HEAD + '''
def twice(t):
    return t * 2

@tl.kernel(occupancy=2)
def dbl(z: tl.Out, x: tl.In):
    z.store(twice(tl.load_like(x, z)))

def probe(x):
    t = ct.load(x, index=(0,), shape=(64,))

def host_helper(n):
    return tl.arange(n, dtype="float32")

x = host_helper(256); z = tl.empty(256)
dbl(z.partition(64), x)
probe(x, grid=(1,))
''')
    assert res.success, res.error_in_exec
    ns = shell.user_ns
    assert isinstance(ns["dbl"], tl.Kernel) and ns["dbl"].options.occupancy == 2
    assert isinstance(ns["probe"], tl.Kernel)              # launched with grid=
    assert not isinstance(ns["twice"], tl.Kernel)          # called from a kernel: helper
    assert not isinstance(ns["host_helper"], tl.Kernel)    # plain host code


@pytest.mark.toolchain
def test_repeated_and_respecialized_launches_are_grouped(shell):
    res, cap = run(shell, "%%tile --show timings\n" + HEAD + '''
def cp(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z))
x = tl.arange(512, dtype="float32"); z = tl.empty(512)
for _ in range(3):
    cp(z.partition(64), x)
cp(z.partition(128), x)
''')
    assert res.success
    report = lab.last_view().report
    assert len(report.kernels) == 2                        # two tile shapes, two compiles
    assert [l.count for l in report.launches] == [3, 1]
    assert "1 kernel (2 specializations), 4 launches" in view_of(cap)["text/plain"]


# ------------------------------------------------------------------ options

@pytest.mark.toolchain
def test_arch_and_show(shell):
    res, cap = run(shell, "%%tile --arch sm_80 --show tileir,ptx,timings\n" + ADD)
    assert res.success, res.error_in_exec
    t = tabs_of(cap)
    assert t.labels == ["Source ↔ Tile IR", "PTX", "Timings"]
    assert ".target sm_80" in t.text("ptx")
    assert lab.last_view().report.kernels[0].artifacts.arch == "sm_80"
    assert "arch sm_80" in view_of(cap)["text/plain"]


@pytest.mark.toolchain
def test_show_modifiers_and_sass(shell):
    res, cap = run(shell, "%%tile --show +sass,-roofline,-ownership,-remarks\n" + ADD)
    assert res.success
    t = tabs_of(cap)
    assert "SASS" in t.labels and "Roofline" not in t.labels and "Remarks" not in t.labels
    sass = t.text("sass")
    assert "EXIT" in sass or "No SASS" in sass


@pytest.mark.toolchain
def test_bench_times_the_interpreter(shell):
    res, cap = run(shell, "%%tile --bench --show timings\n" + ADD)
    assert res.success
    frame = lab.last_view().report
    from tilelab.lab.report.cell_report import timings_frame

    df = timings_frame(frame)
    assert "interpreter (ms)" in df.columns and df["interpreter (ms)"].iloc[0] > 0
    assert "interpreter (ms)" in tabs_of(cap).text("timings")


@pytest.mark.toolchain
def test_save_writes_artifacts(shell, tmp_path):
    out = tmp_path / "art"
    res, cap = run(shell, f"%%tile --save {out} --show timings\n" + ADD)  # saves all anyway
    assert res.success, res.error_in_exec
    names = {p.name for p in out.iterdir()}
    for suffix in (".tileir", ".tileirbc", ".ptx", ".sass", ".cubin", ".lowered.py",
                   ".resources.txt", ".remarks.txt"):
        assert f"add.sm_90{suffix}" in names, (suffix, names)
    assert {"timings.csv", "view.html"} <= names and names & {"roofline.png", "roofline.svg"}
    assert any(n.startswith("ownership-add") and n.endswith((".png", ".svg")) for n in names)
    assert (out / "add.sm_90.cubin").read_bytes()[:4] == b"\x7fELF"
    assert "tilelab-view" in (out / "view.html").read_text()
    assert f"wrote {len(names)} files" in cap.stdout


@pytest.mark.toolchain
def test_force_recompiles_and_line_magics_work_inside(shell):
    run(shell, "%%tile --show timings\n" + ADD)
    res, cap = run(shell, "%%tile --force --show timings\n" + ADD + "\n%time w = 6 * 7\n")
    assert res.success, res.error_in_exec
    assert shell.user_ns["w"] == 42 and "Wall time" in cap.stdout
    art = lab.last_view().report.kernels[0].artifacts
    assert not art.cache_hit and "tileiras" in art.timings
    assert "compiled" in tabs_of(cap).text("timings")


@pytest.mark.toolchain
def test_no_run_compiles_examples_only(shell):
    shell.user_ns.pop("TILELAB_EXAMPLES", None)
    res, cap = run(shell, "%%tile --no-run --show lowered,timings\n" + HEAD + '''
def neg(z: tl.Out, x: tl.In):
    z.store(-tl.load_like(x, z))

def other(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z))

s = tl.spec(1024, "float32")
TILELAB_EXAMPLES = {"neg": (s.partition(128), s)}
marker = tl.zeros(1024)
neg(marker.partition(128), tl.ones(1024))
print("cell body ran")
''')
    assert res.success, res.error_in_exec
    assert "cell body ran" not in cap.stdout
    assert shell.user_ns["marker"].numpy().sum() == 0        # the launch was skipped
    report = lab.last_view().report
    assert [k.name for k in report.kernels] == ["neg"] and report.kernels[0].artifacts
    assert report.launches == []
    text = view_of(cap)["text/plain"]
    assert "not run (--no-run)" in text and "lines 14, 15" in text
    assert "other was defined but not compiled" in text
    assert "-__tl_ct.load" in tabs_of(cap).text("lowered").replace(" ", "")


@pytest.mark.toolchain
def test_kernel_options_reach_the_kernels(shell):
    res, _ = run(shell, "%%tile --unsafe --opt-level 2 --occupancy 4 --show timings\n" + HEAD + '''
def bump(x: tl.Raw):
    ct.store(x, index=(ct.bid(0),), tile=ct.load(x, index=(ct.bid(0),), shape=(64,)) + 1)

x = tl.zeros(256)
bump(x, grid=(4,))
''')
    assert res.success, res.error_in_exec
    k = shell.user_ns["bump"]
    assert k.options.unsafe and k.options.opt_level == 2 and k.options.occupancy == 4
    assert shell.user_ns["x"].numpy().tolist() == [1.0] * 256
    assert lab.last_view().report.kernels[0].artifacts is not None


@pytest.mark.toolchain
def test_widget_view_carries_the_static_fallback(shell):
    res, cap = run(shell, "%%tile --view widget --show lowered,timings\n" + ADD)
    assert res.success
    bundle = view_of(cap)          # the static page is an output of its own (nbconvert)
    assert any("application/vnd.jupyter.widget-view+json" in o.data for o in cap.outputs)
    assert 'type="radio"' in bundle["text/html"]
    tab = lab.last_view().to_widget().children[1]
    assert tab.titles == ("Lowered", "Timings")


@pytest.mark.toolchain
def test_roofline_tab_draws_the_launch(shell):
    res, cap = run(shell, "%%tile --show roofline --roofline h200,b200\n" + ADD)
    assert res.success
    t = tabs_of(cap)
    assert t.panels["roofline"]["img"] == 1
    assert "predicted for NVIDIA H200 SXM" in t.text("roofline")
    point = lab.last_view().report.points[0]
    assert not point.measured and point.bytes == 3 * 4096 * 4 and point.flops == 4096


# ------------------------------------------------------------------ errors

def test_safety_error_is_one_located_message(shell):
    res, cap = run(shell, "%%tile\n" + HEAD + '''
def bad(z: tl.Out, x: tl.In):
    ct.store(x, index=(0,), tile=tl.load_like(x, z))
''')
    assert isinstance(res.error_in_exec, tl.SafetyError)
    out = cap.stdout
    assert re.search(r"SafetyError: In\[\d+\]:6:5: ct\.store\(\) writes to 'x', which is tl\.In",
                     out), out
    assert "hint:" in out and "^^^" in out
    assert "Traceback" not in out and "tilelab/" not in out and "magic.py" not in out
    assert not cap.outputs                                  # no view for a failed cell


def test_launch_error_is_one_located_message(shell):
    res, cap = run(shell, "%%tile\n" + HEAD + '''
def add(z: tl.Out, x: tl.In, y: tl.In):
    z.store(tl.load_like(x, z) + tl.load_like(y, z))
x = tl.ones(256)
add(x.partition(64), x, x)
''')
    assert isinstance(res.error_in_exec, tl.AliasError)
    assert re.match(r"AliasError: In\[\d+\]:\d+:\d+: add\(\): 'z' \(tl.Out\) overlaps 'x'",
                    cap.stdout), cap.stdout
    assert "Traceback" not in cap.stdout and "tilelab/" not in cap.stdout


def test_a_kernel_cutile_rejects_fails_the_cell_at_its_line(shell):
    res, cap = run(shell, "%%tile --show tileir\n" + HEAD + '''
def k(z: tl.Out, x: tl.In):
    vals = [2.0 for _ in range(2)]
    z.store(tl.load_like(x, z) * vals[0])
x = tl.ones(64); z = tl.empty(64)
k(z.partition(16), x)
''')
    assert isinstance(res.error_in_exec, tl.CompileError)
    # the CPU launch refuses what cuTile's front end refuses, at the same place
    assert re.search(r"CompileError: In\[\d+\]:6:12: Unsupported syntax", cap.stdout), cap.stdout
    # the launch failed the cell before it ran: no view, nothing written
    assert not [o for o in cap.outputs if "tilelab-view" in o.data.get("text/html", "")]
    assert shell.user_ns["z"].numpy().tolist() != [2.0] * 64


def test_other_errors_keep_the_python_traceback(shell):
    res, cap = run(shell, "%%tile\nx = 1\n1 / 0\n")
    assert isinstance(res.error_in_exec, ZeroDivisionError)
    out = re.sub(r"\x1b\[[0-9;]*m", "", cap.stdout)
    assert "Traceback" in out and "ZeroDivisionError" in out and "1 / 0" in out
    assert "magic.py" not in out and "runner.py" not in out


def test_syntax_error_points_at_the_cell(shell):
    res, cap = run(shell, "%%tile\nx = (1,\n")
    assert isinstance(res.error_in_exec, SyntaxError)


@pytest.mark.parametrize("line, message", [
    ("--show bogus", "--show: unknown view 'bogus'"),
    ("--arch sm_70", "--arch: unsupported target 'sm_70'"),
    ("--roofline rtx9090", "--roofline: unknown GPU 'rtx9090'"),
    ("--occupancy 99", "--occupancy: occupancy must be in [1, 32]"),
    ("--backend tpu", "invalid choice: 'tpu'"),
])
def test_bad_options_are_usage_errors(shell, line, message):
    res, cap = run(shell, f"%%tile {line}\npass")
    assert not res.success
    assert message in cap.stderr, cap.stderr


@pytest.mark.toolchain
def test_unusable_backend_and_unwritable_save_dir_are_usage_errors(shell, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    res, cap = run(shell, f"%%tile --save {blocker}/out --show timings\n" + ADD)
    assert not res.success and "UsageError: %%tile --save" in cap.stderr
    assert "cannot write there" in cap.stderr
    if tl.gpu_available():
        return
    with config.override(backend="gpu"):
        res, cap = run(shell, "%%tile\nx = 1\n")
    assert not res.success and "UsageError: %%tile:" in cap.stderr and "GPU" in cap.stderr
    res, cap = run(shell, "%%tile --backend gpu\nx = 1\n")
    assert not res.success and "--backend gpu:" in cap.stderr


def test_help_documents_the_options(shell):
    res, cap = run(shell, "%%tile?")
    assert res.success
    text = re.sub(r"\x1b\[[0-9;]*m", "", cap.stdout)
    for flag in ("--arch", "--backend", "--show", "--bench", "--no-run", "--roofline",
                 "--save", "--force", "--unsafe", "--no-check-bounds", "--occupancy",
                 "--num-ctas", "--opt-level", "--view"):
        assert flag in text, flag
    assert "%%tile [--arch SM]" in text and "No decorator is needed" in text
    assert html.escape("Source ↔ Tile IR") in html.escape(text)
