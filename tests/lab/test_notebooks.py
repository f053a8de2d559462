"""The tour notebooks (notebooks/*.ipynb) run top to bottom on the CPU backend.

Each notebook is executed with nbclient in a fresh kernel whose environment forces
``TILELAB_BACKEND=cpu`` and a private ``TILELAB_CACHE_DIR``. No cell may fail, and no cell
is tagged ``raises-exception`` (editors other than JupyterLab stop there): the errors a
notebook teaches are shown through ``tilelab.lab.course.expect``. Then the outputs a reader
relies on are checked: the tabbed ``%%tile`` views with their Tile IR, the figures (PNG), the
SafetyError / AliasError / LaunchError / BorrowError messages, the race report, the
exercises' verdicts on their stubs and the checks each notebook prints.

The notebooks are committed without outputs; ``test_committed_without_outputs`` says
which cell to clear when one slips in.
"""
from __future__ import annotations

import html
import os
import re
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
NAMES = ["01_hello_tiles", "02_vector_add_and_ownership", "03_gemm_schedules_roofline",
         "04_softmax_reductions_fusion", "05_unsafe_kernels_and_races",
         "06_async_and_graphs", "07_decode_on_the_roofline",
         "08_flash_attention"]
CELL_TIMEOUT_S = 300     # a whole notebook takes well under a minute on 2 cores
WIDGET = "application/vnd.jupyter.widget-view+json"

#: the cells tagged raises-exception, by a line of their source, and the error each shows.
#: None: expected errors are shown through tilelab.lab.course.expect, so Run All never stops.
EXPECTED_ERRORS: dict[str, list[tuple[str, str, str]]] = {}


def _read(name: str):
    return nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)


# ------------------------------------------------------------------ static checks

def test_every_notebook_is_listed():
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == NAMES
    readme = (NOTEBOOKS / "README.md").read_text()
    for name in NAMES:
        assert f"{name}.ipynb" in readme, f"notebooks/README.md does not list {name}"


@pytest.mark.parametrize("name", NAMES)
def test_committed_without_outputs(name):
    nb = _read(name)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert "widgets" not in nb.metadata, "saved widget state: clear the outputs"
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, (
                f"{name}: cell {i} was committed with outputs; clear them "
                f"(jupyter nbconvert --clear-output --inplace notebooks/{name}.ipynb)")
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "%load_ext tilelab" in code and "GPU = tl.backend() == \"gpu\"" in code
    prose = [c for c in nb.cells if c.cell_type == "markdown"]
    assert len(prose) >= 6, f"{name}: a notebook teaches in prose, found {len(prose)} cells"
    tagged = [c.source for c in nb.cells if "raises-exception" in c.metadata.get("tags", [])]
    expected = EXPECTED_ERRORS.get(name, [])
    assert len(tagged) == len(expected), f"{name}: tagged cells {tagged}"
    for marker, _, _ in expected:
        assert sum(marker in src for src in tagged) == 1, f"{name}: {marker!r}"


# ------------------------------------------------------------------ execution

class Run:
    """An executed notebook, with helpers to find a cell's outputs by its source."""

    def __init__(self, nb, seconds: float):
        self.nb, self.seconds = nb, seconds

    def cell(self, marker: str):
        found = [c for c in self.nb.cells if c.cell_type == "code" and marker in c.source]
        assert len(found) == 1, f"{len(found)} code cells contain {marker!r}"
        return found[0]

    def text(self, marker: str) -> str:
        """Everything a cell printed or returned as text (streams, text/plain, errors)."""
        parts = []
        stream = False        # (a cell's prints may arrive as several stream outputs)
        for o in self.cell(marker).outputs:
            if o.output_type == "stream" and stream:
                parts[-1] += o.text
            elif o.output_type == "stream":
                parts.append(o.text)
            elif o.output_type == "error":
                parts.append("\n".join(o.traceback))
            else:
                parts.append(o.get("data", {}).get("text/plain", ""))
            stream = o.output_type == "stream"
        return "\n".join(parts)

    def data(self, marker: str, mime: str) -> list[str]:
        return [o.data[mime] for o in self.cell(marker).outputs
                if o.output_type in ("display_data", "execute_result") and mime in o.data]

    def view(self, marker: str) -> str:
        """The static HTML of the %%tile view a cell published (there is one)."""
        pages = [h for h in self.data(marker, "text/html") if "tilelab-view" in h]
        assert len(pages) == 1, f"{len(pages)} %%tile views in the cell {marker!r}"
        return pages[0]

    def figures(self, marker: str) -> list[str]:
        """The figures a cell showed: themed figure outputs (inline SVG that follows the
        page's theme, ``div.tilelab-figure``) and any PNG."""
        return [h for h in self.data(marker, "text/html") if 'class="tilelab-figure"' in h] + \
            self.data(marker, "image/png")

    def pngs(self) -> int:
        """Figures shown: figure outputs (themed inline SVG or PNG) and the figures inside
        %%tile views (inline SVG or PNG)."""
        count = 0
        for c in self.nb.cells:
            for o in c.get("outputs", []):
                data = o.get("data", {})
                count += "image/png" in data
                count += data.get("text/html", "").count('<div class="tilelab-figure">')
                count += data.get("text/html", "").count('src="data:image/png;base64,')
                count += data.get("text/html", "").count('<figure class="tl-figure tl-svg"')
        return count


_runs: dict[str, Run] = {}


def _execute(tmp_path_factory, name: str, backend: str) -> Run:
    """Run a notebook in a fresh kernel on ``backend`` with a private compile cache."""
    work = tmp_path_factory.mktemp(f"{name}-{backend}")
    env = dict(os.environ, TILELAB_BACKEND=backend,
               TILELAB_CACHE_DIR=str(work / "tilelab-cache"), TILELAB_THEME="light")
    nb = _read(name)
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                                     allow_errors=False,
                                     resources={"metadata": {"path": str(work)}})
    start = time.monotonic()
    try:
        client.execute(env=env)
    except Exception as e:
        if type(e).__name__ == "NoSuchKernel":
            pytest.skip(f"no python3 Jupyter kernel: {e}")
        raise
    seconds = time.monotonic() - start
    print(f"{name}: ran in {seconds:.1f} s on the {backend.upper()} backend")
    return Run(nb, seconds)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Execute a notebook once per test session (CPU backend, private cache)."""
    def execute(name: str) -> Run:
        if name not in _runs:
            _runs[name] = _execute(tmp_path_factory, name, "cpu")
        return _runs[name]
    return execute


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.subprocess
def test_runs_top_to_bottom_on_the_cpu(run, name):
    r = run(name)
    expected = {marker: (ename, text) for marker, ename, text in EXPECTED_ERRORS.get(name, [])}
    for i, cell in enumerate(r.nb.cells):
        if cell.cell_type != "code":
            continue
        assert cell.execution_count is not None, f"{name}: cell {i} did not run"
        errors = [o for o in cell.outputs if o.output_type == "error"]
        marker = next((m for m in expected if m in cell.source), None)
        if marker is None:
            assert not errors, f"{name}: cell {i} failed: {errors[0].ename}: {errors[0].evalue}"
            continue
        ename, text = expected[marker]
        assert len(errors) == 1 and errors[0].ename == ename, (
            f"{name}: cell {i} should show a {ename}, got {[e.ename for e in errors]}")
        shown = "\n".join(errors[0].traceback)
        assert shown.startswith(f"{ename}: ") and text in shown, shown[:1000]
        # tilelab's errors in %%tile cells are one located message, no traceback
        assert "Traceback" not in shown and not re.search(r"tilelab/\w+/\w+\.py", shown)
    assert r.pngs() >= 2, f"{name}: a notebook teaches with pictures, found {r.pngs()}"


#: on a GPU, unsafe launches are not race-checked: that cell (expect(..., when=not GPU))
#: runs and reports the damage
GPU_RUNS_WITHOUT_ERROR = {"head_permute_raw(out, xd"}


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.subprocess
def test_runs_top_to_bottom_on_the_gpu(tmp_path_factory, name):
    """The same notebooks at their GPU sizes: every cell runs, measured points included."""
    from tilelab.runtime.device import gpu_unavailable_reason

    reason = gpu_unavailable_reason()
    if reason:
        pytest.skip(f"no usable GPU: {reason}")
    r = _execute(tmp_path_factory, name, "gpu")
    expected = {m: ename for m, ename, _ in EXPECTED_ERRORS.get(name, [])}
    for i, cell in enumerate(r.nb.cells):
        if cell.cell_type != "code":
            continue
        errors = [o.ename for o in cell.outputs if o.output_type == "error"]
        marker = next((m for m in expected if m in cell.source), None)
        gpu_only = next((m for m in GPU_RUNS_WITHOUT_ERROR if m in cell.source), None)
        if gpu_only is not None:
            assert not errors and "elements are wrong" in r.text(gpu_only), errors
        elif marker is not None:
            assert errors == [expected[marker]], f"{name}: cell {i}: {errors}"
        else:
            assert not errors, f"{name}: cell {i} failed on the GPU: {errors}"
    assert "kernels run on the GPU" in r.text("%load_ext tilelab")


def _text(page: str) -> str:
    """What a reader sees of an HTML view: tags removed, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def _tabs(page: str, *titles: str) -> None:
    assert 'type="radio"' in page, "the static view has radio-button tabs"
    for title in titles:
        assert f">{title}<" in page, f"tab {title!r} missing"


@pytest.mark.slow
@pytest.mark.subprocess
def test_01_hello_tiles_outputs(run):
    r = run("01_hello_tiles")
    page = r.view("def add(z: tl.Out")
    _tabs(page, "Source ↔ Tile IR", "Lowered", "Resources", "Remarks", "Ownership",
          "Roofline", "Timings")
    assert "load_view_tko" in page and "addf" in page and "store_view_tko" in page
    assert "array([1., 2., 3., 4.], dtype=float32)" in r.text("def add(z: tl.Out")
    lowered = r.text("art = add.compile(")
    assert "for sm_90" in lowered and "__tl_ct.store(z, index=(__tl_ct.bid(0),)" in lowered
    ops = r.text("the heart of the Tile IR")
    assert ops.count("load_view_tko") == 2 and "addf" in ops and "store_view_tko" in ops
    assert r.figures("ownership_figure(p")
    assert "after double: [2. 4. 6. 8.]" in r.text("def double(z: tl.InOut)")
    shown = r.text("def add_into_x(")
    assert re.match(r"SafetyError \(expected\): In\[\d+\]:2:5: ct\.store\(\) writes to 'x'",
                    shown), shown
    assert "hint:" in shown
    assert "AliasError (expected): " in r.text("expect(tl.AliasError, add")
    assert "blocks per SM (limited by" in r.text("blocks_per_sm(\"sm_90\"")
    assert r.text('check("fix_refused"').startswith("FAIL fix_refused: the safety checker")
    assert "z = [4. 5. 6. 7. 8. 9. 0. 0.]" in r.text("def next_tile(")     # index= in tiles
    assert "[ 8.,  9., 10., 11.]" in r.text("def as_rows(")
    shown = r.text('check("pair_sum"')
    assert shown.startswith("FAIL pair_sum: on the notebook's size") and "notebook 01" in shown


@pytest.mark.slow
@pytest.mark.subprocess
def test_02_vector_add_outputs(run):
    r = run("02_vector_add_and_ownership")
    view = r.cell("def add(z: tl.Out")
    assert any(WIDGET in o.get("data", {}) for o in view.outputs), "no widget Tab published"
    page = r.view("def add(z: tl.Out")
    _tabs(page, "Source ↔ Tile IR", "Lowered", "Ownership", "Roofline", "Timings")
    shown = _text(page)
    assert "entry @add_" in shown and "load_view_tko" in shown     # the Tile IR text
    images = re.findall(r'<figure class="tl-figure[^"]*">.*?<figcaption>([^<]*)</figcaption>',
                        page, re.S)                                   # the figures' captions
    assert any("owns tile" in alt for alt in images), images      # ownership picture
    assert any("FLOP/B" in alt for alt in images), images         # roofline picture
    assert "16 tiles of 1024 -> 16 blocks" in r.text("def add(z: tl.Out")
    occupancy = r.text("per_sm = {}")
    assert re.search(r"tile  1024: 128 threads x  32 registers -> 16 blocks per SM", occupancy)
    assert re.search(r"tile  8192: 128 threads x 108 registers ->  4 blocks per SM", occupancy)
    assert r.text('check("saxpy_edge"').startswith("FAIL saxpy_edge: ")
    assert r.text('check("broadcast_2d"').startswith("FAIL broadcast_2d: ")
    assert "[0., 1., 2., 3., 4., 5.]" in r.text("def add_row(")
    machine = r.text("SM_LIMITS[g.arch]")
    for gpu in ("NVIDIA H200 SXM", "NVIDIA B200", "NVIDIA GeForce RTX 5090"):
        assert gpu in machine, machine
    assert "ridge point, bf16 (FLOP/B)" in machine and "tensor cores ÷ CUDA cores" in machine
    sectors = r.text("SECTOR, WARP = 32, 32")
    assert " 4 sectors,   128 bytes moved" in sectors and "32 sectors, 1,024 bytes" in sectors
    shown = r.text('recorded("memory/add/")')
    assert "recorded: NVIDIA H200, 20" in shown or "no recorded GPU measurements" in shown
    assert "block 5 owns tile [(5,)] = elements (slice(1280, 1536, None),)" in r.text(
        "z8 = tl.empty(2048")
    assert "z[995:] = [ 996.  997.  998.  999. 1000.]" in r.text("x1k = tl.arange(1000")
    for marker in ("ownership_figure(p, name", "ownership_figure(p1k", "(300, 240)",
                   "grid = pd.DataFrame(", "roofline_figure(points"):
        assert r.figures(marker), f"no figure from the cell {marker!r}"
    assert "add f32: 0.083 FLOP/B" in r.text("roofline_figure(points")
    bench = r.view("%%tile --bench")
    _tabs(bench, "Timings", "Roofline")
    assert "interpreter (ms)" in bench


@pytest.mark.slow
@pytest.mark.subprocess
def test_03_gemm_outputs(run):
    r = run("03_gemm_schedules_roofline")
    page = r.view("def gemm(c: tl.Out")
    _tabs(page, "Source ↔ Tile IR", "Ownership", "Roofline")
    assert "mma" in page                                            # the MMA in the Tile IR
    assert "max relative error" in r.text("def gemm(c: tl.Out")
    reads = r.text("trace = tl.interpret(gemm")
    assert re.search(r"block 21 read 128 KiB in 16 tiles of A and 16 tiles of B", reads), reads
    assert r.figures("trace = tl.interpret(gemm")
    traffic = r.text("compulsory = gemm_work(")
    assert "compulsory bytes (each matrix once):   1.50 MiB" in traffic
    assert "FLOPs: 268,435,456" in traffic
    assert "DRAM intensity   171 FLOP/B" in traffic and "L2 intensity    30 FLOP/B" in traffic
    hw = r.text("big_spec = tl.spec(")
    assert "255 registers x 256 threads" in hw and "1 block per SM" in hw and "TMA" in hw
    assert "def persistent_gemm(" in r.text("inspect.getsource(persistent_gemm")
    assert "H200 L2: 50 MiB" in r.text('lookup_gpu("h200").l2_size')
    shown = r.text('recorded("gemm/bfloat16/square")')
    assert re.search(r"recorded: NVIDIA H200, 20\d\d-\d\d-\d\d, benchmarks/results/suite_", shown) \
        or "no recorded GPU measurements" in shown
    for name in ("gemm_traffic", "grouped_owner", "roofline", "linear", "grouped_linear",
                 "persistent_linear"):
        assert r.text(f'check("{name}"').startswith(f"FAIL {name}: "), name
    assert "8.0x the compulsory reads of A and B" in traffic       # the loads, not C's store
    assert "plus the store of C:                   0.50 MiB" in traffic
    assert len(r.figures("schedules = {")) == 2
    waves = r.text("wave = 132")
    assert re.search(r"row-major\s+5\s+32", waves) and re.search(r"grouped\(8\)\s+8\s+17", waves)
    assert "persistent == row-major: True" in r.text("persistent_gemm(c_p")
    assert r.figures("roofline_figure(points")
    assert r.data("explorer = explore(", WIDGET), "the explorer is a widget"
    assert "gemm tile=128 n=512" in r.text("explorer.size_slider")
    assert r.figures("explorer.size_slider")


@pytest.mark.slow
@pytest.mark.subprocess
def test_04_softmax_fusion_outputs(run):
    r = run("04_softmax_reductions_fusion")
    page = r.view("def softmax_rows(")
    _tabs(page, "Source ↔ Tile IR", "Ownership", "Roofline")
    first = r.text("def softmax_rows(")
    assert re.search(r"64x1000: max error \d\.\de-0[6-9]", first), first
    assert r.text("row_argmax(x)").count("ok: True") == 3
    online = r.view("y_long = softmax(x_long")
    assert "softmax_online_kernel" in online and "Persistent" in online
    assert re.search(r"online softmax of 8x16384: max error \d\.\de-(0[7-9]|1\d)",
                     r.text("xl = x_long.numpy()"))
    assert "h identical: True\ny largest difference: 0.0" in r.text("h_unfused = add(xr, res)")
    table = r.text("count_traffic({")
    assert re.search(r"unfused\s+binary_kernel\s+1024\.0\s+512\.0", table), table
    assert re.search(r"fused\s+add_norm_rows_kernel\s+1032\.0\s+1024\.0", table), table
    assert r.figures("count_traffic({")
    assert re.search(r"16384x4096 bf16, predicted on an H200: unfused [\d.]+ µs, fused",
                     r.text("FULL = 16384"))
    assert r.figures("FULL = 16384")
    assert "h identical to the library: True" in r.text("def add_rms_norm_rows(")
    for name in ("row_sum_squares", "online_logsumexp", "row_logsumexp", "fused_bias_gelu"):
        assert r.text(f'check("{name}"').startswith(f"FAIL {name}: "), name


@pytest.mark.slow
@pytest.mark.subprocess
def test_05_races_outputs(run):
    r = run("05_unsafe_kernels_and_races")
    report = r.text("trace = tl.interpret(head_permute_raw")
    assert report.startswith("6 race(s) in kernel 'head_permute_raw':")
    assert ("write-write race on 'out': blocks (0, 0, 0) and (0, 1, 0) both write 64 "
            "elements") in report
    assert "blocks (1, 0, 0) and (1, 3, 0)" in report
    assert r.figures('race_figure(trace, "out")')
    assert "correct elements: 0 of 512" in r.text("got = out.numpy()")
    safe = r.text("def head_permute(out: tl.Out")
    assert "no inter-block races found" in safe and "correct: True" in safe
    assert r.figures("ownership_figure(part, trace=trace")
    assert "correct: True" in r.text("Bb, Hh, Ss, Dd, BSs")
    assert r.text("def head_permute_bad(").startswith("SafetyError (expected): ")
    assert re.search(r"LaunchError \(expected\): In\[\d+\]:\d+:\d+: 6 race\(s\) in kernel "
                     "'head_permute_raw'", r.text("head_permute_raw(out, xd"))
    # the racy launch raised inside expect(...), yet the %%tile view shows it and its races
    raced = r.view("head_permute_raw(out, xd")
    assert "1 kernel, 1 launch" in raced and "no kernels, no launches" not in raced
    labels = re.findall(r"<label for=[^>]*>([^<]*)</label>", raced)
    assert labels[0] == "Race" and "Lowered" in labels, labels
    assert "Race tab below" in r.text("head_permute_raw(out, xd")
    assert "read-write race on 'x'" in r.text("def smooth_in_place(")
    # a kernel defined in a plain cell is located in that cell, not in ipykernel's file
    rw = r.text("def smooth_in_place(")
    assert "ipykernel" not in rw and re.search(r"In\[\d+\], line \d+", rw), rw
    aliased = r.text("def add(z: tl.Out")
    assert "AliasError (expected): " in aliased and "[1. 2. 3. 4. 5. 6. 7. 8.]" in aliased
    hunt = r.text('check("race_hunt"')
    assert hunt.startswith("FAIL race_hunt: on the notebook's size") and "15 race(s)" in hunt
    assert 'see notebook 05, "Exercise: a race hunt"' in hunt
    assert r.text('check("smooth_shift"').startswith("FAIL smooth_shift: ")
    printed = r.text("def tile_max(")
    assert "[block (2, 0, 0)] block 2 loaded [-17.000000, -18.000000, -19.000000, " \
           "-20.000000, 0.000000" in printed and "tile maxima: [-1. -9.  0.]" in printed
    race = r.text("racy = tl.interpret(")
    assert "kind 'write-write', tensor 'out', blocks ((0, 0, 0), (0, 1, 0)), 64 elements" in race
    _tabs(r.view("def tile_max_fixed("), "Resources", "Remarks", "Roofline")
    profile = r.text("report = last_view().report")
    assert re.search(r"T=1024\n    latency-bound: .* block latency", profile), profile
    assert re.search(r"T=16384\n    memory-bound: .* of bytes", profile), profile
    assert "TMA only supports zero padding" in profile
    split = r.text("plan_matmul(a, bm")
    assert "splitk_atomic_kernel   unsafe=True" in split and "unsafe=True" not in split.split(
        "atomic")[0]


@pytest.mark.slow
@pytest.mark.subprocess
def test_06_async_graphs_outputs(run):
    r = run("06_async_and_graphs")
    assert "(pending)" in r.text("fut = add.launch_async(z.partition(T), x, y)\nprint(fut)")
    shown = r.text("z.numpy()   ")
    assert "reading the input x while add is pending: [0. 1. 2. 3.]" in shown
    assert re.search(r"BorrowError \(expected\): In\[\d+\]:\d+:\d+: Tensor\.numpy\(\) touches memory "
                     r"that the pending kernel 'add'", shown), shown
    assert "w = 2 (x + y): [2. 4. 6. 8.]" in r.text(".then(scale, w.partition(T), z)")
    deps = r.text("deps = g.dependencies()")
    for line in ("launch 0 waits for []", "launch 1 waits for [0]", "launch 2 waits for []",
                 "launch 3 waits for [1, 2]"):
        assert line in deps
    assert r.figures("def depth(i)") and r.figures("rows = []")
    assert "v = 2(x + y) + 2x: [ 2.  6. 10. 14.]" in r.text("replay = g.replay()")
    timed = r.text("with tl.graph() as chain")
    assert "20 launches and 1 replay agree: True" in timed
    assert re.search(r"20 launch_async calls [\d.]+ ms, 1 graph replay [\d.]+ ms", timed)
    held = r.text("snapshots = []")
    assert "after fut.wait()        : []" in held and "('scale', 'w', True)" in held
    assert "LaunchError (expected): " in r.text("with tl.graph() as g_bad")
    assert r.text('check("graph_deps"').startswith(
        "FAIL graph_deps: launch 2: you listed [1], and it does not wait for all of those")


@pytest.mark.slow
@pytest.mark.subprocess
def test_07_decode_outputs(run):
    r = run("07_decode_on_the_roofline")
    tokens = r.text("greedy = model.generate(prompt")
    assert "(same)" in tokens and "same seed, same tokens : True" in tokens
    assert "unsafe: none" in r.text("step = model.decode_step()")
    assert r.figures("roofline_figure(points")
    sweep = r.text("contexts = (128")                  # counted from the configs
    assert ("4B: 8.1 GB per step at 128 positions, 12.9 GB at 32768 (37% of it KV cache)"
            in sweep), sweep
    assert "8B: 15.2 GB per step at 128 positions, 20.0 GB at 32768" in sweep, sweep
    recorded = r.text('glob("decode_*.json")')         # labelled with GPU, date and file
    for label, gpu in (("4B", "NVIDIA H100"), ("8B", "NVIDIA H100"), ("4B", "NVIDIA H200")):
        assert re.search(rf"{label} on {gpu}[^\n]*\(20\d\d-\d\d-\d\d, benchmarks/results/"
                         rf"decode_[\w-]+\.json\): \d+ µs per step at a mean context of 256, "
                         rf"\d+% of the roof", recorded), recorded
    shares = [int(p) for p in re.findall(r"(\d+)% of the roof", recorded)]
    assert shares and all(0 < p <= 100 for p in shares), recorded   # never above the roof
    assert r.figures("sweep.loc[label]") and r.figures("roofline_figure(step_points")
    for name in ("gemv", "rms_norm", "rope", "capstone_norm_gemv"):
        shown = r.text(f'check("{name}"')
        assert shown.startswith(f"FAIL {name}: on the notebook's size"), shown
        assert 'see notebook 07, "' in shown
    plugged = r.text('kernels={"norm_qkv_gemv": norm_gemv}')
    assert re.search(r"your kernel : \[[\d, ]+\]\nbuilt-in    : \[[\d, ]+\] \(different\)",
                     plugged), plugged
    assert "the step's first launches: ['embed', 'norm_qkv_gemv'" in plugged


@pytest.mark.slow
@pytest.mark.subprocess
def test_08_flash_attention_outputs(run):
    r = run("08_flash_attention")
    assert re.search(r"tiled == direct: True .* 16 tile pairs computed",
                     r.text("flash_attention_numpy(qn, kn, vn, 64, 64)"))
    assert re.search(r"head \(0, 0\) largest error \d\.\de-0[2-9]", r.text("def reference("))
    assert "block(s) per SM" in r.text("compile_attention(8, 32")
    assert r.text('check("causal_mask"').startswith("FAIL causal_mask: ")
    for name in ("flash_attention", "combine_splits"):
        shown = r.text(f'check("{name}"')
        assert shown.startswith(f"FAIL {name}: on the notebook's size"), shown
        assert 'see notebook 08, "' in shown
    decode = r.text("plan_decode_attention(qd, kc, vc)")
    assert "decode_split_kernel" in decode and "decode_combine_kernel" in decode
    assert decode.count("no inter-block races found") == 2
    timing = r.text('recorded("attention/bfloat16/")')
    assert "no GPU here" in timing

