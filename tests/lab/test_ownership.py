"""Ownership diagrams: the data drawn matches the partition, the device's tile order and
the interpreter's trace."""
from __future__ import annotations

import doctest
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import cuda.tile as ct
import tilelab as tl
import tilelab.compiler.tile_index as device
import tilelab.lab.figures.ownership as ownership_module
import tilelab.lab.figures.ownership_data as ownership_data_module
import tilelab.lab.figures.ownership_launch as ownership_launch_module
import tilelab.lab.figures.ownership_race as ownership_race_module
import tilelab.lab.figures.ownership_svg as ownership_svg_module
from tilelab.kernels.examples import gemm, persistent_gemm, vector_add
from tilelab.lab.figures.ownership import (ownership_data, ownership_figure, ownership_figures,
                                           race_data, race_figure, trace_args, trace_launch)
from tilelab.lab.figures.svg import color, owner_fill
from tilelab.runtime.events import subscribe


# ---------------------------------------------------------------- helpers

def artists(fig, prefix):
    """Every record of the figure whose gid starts with ``prefix`` (what it drew)."""
    return fig.find(prefix)


def mesh_values(mesh):
    """The 2-D array a tile grid or element panel draws (rows, cols)."""
    return np.asarray(mesh["owners"] if "owners" in mesh.data else mesh["values"])


def mesh_edges(mesh):
    return list(mesh["row_edges"]), list(mesh["col_edges"])


def labels_at(fig):
    """{(x, y): text} of the tile labels, in element coordinates."""
    out = {}
    for rec in artists(fig, "tile-labels"):
        out.update(rec["labels"])
    return out


def cpu(shape, dtype="float32", seed=0):
    rng = np.random.default_rng(seed)
    return tl.tensor(rng.standard_normal(shape).astype(dtype), device="cpu")


# ---------------------------------------------------------------- partitions

def test_row_major_grid_colored_by_owner_with_partial_edge_tiles_at_real_size():
    p = tl.zeros((300, 200), device="cpu").partition((128, 64))
    fig = ownership_figure(p, name="c", theme="light")
    (mesh,) = artists(fig, "tiles:c")
    assert mesh_values(mesh).tolist() == p.owners().tolist()
    rows, cols = mesh_edges(mesh)
    assert rows == [0, 128, 256, 300] and cols == [0, 64, 128, 192, 200]
    for k, owner in enumerate(p.owners().ravel()):
        assert mesh["fills"][k] == owner_fill(owner, p.num_tiles)
    labels = labels_at(fig)
    assert len(labels) == 12
    # the 8x44 corner tile is too thin for its label: it sits on the whole (padded) tile
    assert labels[(224.0, 320.0)] == "b11"
    assert labels[(32.0, 64.0)] == "b0"
    assert fig.tilelab["sections"][0]["schedule"] == "row-major"
    # the padding of the edge tiles is hatched: beyond column 200 and below row 300
    (pad,) = artists(fig, "padding:c")
    assert pad["boxes"] == [((0, 384), (200, 256)), ((300, 384), (0, 200))]
    assert all(i["hatch"] for i in fig.items_of("padding:c"))
    caption = fig.tilelab["sections"][0]["caption"]
    assert caption == "c: 300×200 in tiles of 128×64 → 12 tiles, 12 blocks, row-major (one " \
                      "tile per block)"


@pytest.mark.parametrize("grid,group_m", [((8, 4), 3), ((5, 7), 2), ((4, 4), 8)])
def test_grouped_labels_follow_the_device_swizzle(grid, group_m):
    gm, gn = grid
    p = tl.zeros((gm * 16, gn * 16), device="cpu").partition((16, 16),
                                                             schedule=tl.grouped(group_m))
    fig = ownership_figure(p, name="c", theme="light")
    (mesh,) = artists(fig, "tiles:c")
    owners = mesh_values(mesh)
    labels = labels_at(fig)
    centres = []
    for pid in range(gm * gn):
        m, n = device.grouped_tile_index(pid, gm, gn, group_m)
        assert owners[m, n] == pid
        centre = (n * 16 + 8.0, m * 16 + 8.0)
        assert labels[centre] == f"b{pid}"
        centres.append(centre)
    (path,) = artists(fig, "order-path")
    assert path["points"] == centres     # the path walks the schedule's order


def test_persistent_block_owns_several_tiles_and_labels_say_which():
    sched = tl.persistent(num_blocks=4, group_m=2)
    p = tl.zeros((384, 256), device="cpu").partition((128, 128), schedule=sched)
    d = ownership_data(p)
    assert d.num_blocks == 4 and d.persistent
    order = p.order()
    for k, t in enumerate(order):
        assert d.owners[t] == k % 4 and d.step[t] == k // 4
    assert d.tiles_of(1) == [order[1], order[5]]
    fig = ownership_figure(p, name="c", block=1, theme="light")
    labels = labels_at(fig)
    m, n = order[5]
    assert labels[(n * 128 + 64.0, m * 128 + 64.0)] == "b1\n#2"
    boxes = artists(fig, "block-tiles")
    got = sorted((int(b["y"]) // 128, int(b["x"]) // 128) for b in boxes)
    assert got == sorted(d.tiles_of(1))
    caption = fig.tilelab["sections"][0]["caption"]
    assert "tl.persistent(num_blocks=4, group_m=2)" in caption
    assert "block b owns tiles b, b+4, b+8" in caption
    assert fig.tilelab["sections"][0]["block_tiles"] == d.tiles_of(1)


def test_persistent_outlines_are_the_tiles_the_block_wrote():
    a, b = cpu((384, 64)), cpu((64, 256), seed=1)
    c = tl.empty((384, 256), device="cpu")
    p = c.partition((128, 128), schedule=tl.persistent(num_blocks=4, group_m=2))
    trace = tl.interpret(persistent_gemm, p, a, b, 32)
    fig = ownership_figure(p, trace=trace, block=1, kernel=persistent_gemm, theme="light")
    written = trace.footprint("c", block=1, kind="write")
    outlined = np.zeros_like(written)
    for t in fig.tilelab["sections"][0]["block_tiles"]:
        outlined[t[0] * 128:(t[0] + 1) * 128, t[1] * 128:(t[1] + 1) * 128] = True
    assert np.array_equal(written, outlined)
    assert fig.tilelab["inputs"] == ["a", "b"]


def test_gemm_story_block_reads_row_panel_of_a_and_column_panel_of_b():
    a, b = cpu((300, 192)), cpu((192, 200), seed=1)
    c = tl.empty((300, 200), device="cpu")
    p = c.partition((64, 64), schedule=tl.grouped(2))
    trace = tl.interpret(gemm, p, a, b, 32)
    fig = ownership_figure(p, trace=trace, block=5, kernel=gemm, theme="light")
    m, n = device.grouped_tile_index(5, 5, 4, 2)
    sec = {s["name"]: s for s in fig.tilelab["sections"]}
    assert set(sec) == {"c", "a", "b"}
    assert sec["a"]["description"] == f"a[{m * 64}:{m * 64 + 64}, 0:192]"
    assert sec["b"]["description"] == f"b[0:192, {n * 64}:{min(n * 64 + 64, 200)}]"
    fill = owner_fill(5, p.num_tiles)
    for arg in ("a", "b"):
        (mesh,) = artists(fig, f"reads:{arg}")
        drawn = mesh_values(mesh) == 1
        assert np.array_equal(drawn, trace.footprint(arg, block=5, kind="read"))
        assert mesh["fills"][1] == fill                     # reads in the block's colour
        assert {i["fill"] for i in fig.items_of(f"reads:{arg}")} == {fill}
    # blocks by linear id (and bid x, y), tiles as [row, col]: the legend line says so
    assert fig.suptitle == (f"gemm: block 5 (bid x=5, y=0) owns tile [{m}, {n}] of c and "
                            "reads the highlighted regions") or \
        fig.suptitle == f"gemm: block 5 owns tile [{m}, {n}] of c and reads the highlighted regions"
    assert "[row, col]" in " ".join(i["s"] for i in fig.items_of("legend"))


def test_one_dimensional_strip():
    z = tl.empty(5000, device="cpu")
    fig = ownership_figure(z.partition(256), name="z", block=3, theme="light")
    (mesh,) = artists(fig, "tiles:z")
    rows, cols = mesh_edges(mesh)
    assert rows == [0, 1]
    assert cols[:3] == [0, 256, 512] and cols[-2:] == [4864, 5000]
    assert mesh_values(mesh).tolist() == [list(range(20))]
    (box,) = artists(fig, "block-tiles")
    assert (box["x"], box["width"]) == (768, 256)


def test_three_dimensional_partition_is_faceted_by_leading_tile():
    z = tl.empty((4, 64, 128), device="cpu")
    p = z.partition((1, 32, 64), schedule=tl.grouped(2))
    fig = ownership_figure(p, name="z", theme="light")
    owners = p.owners()
    meshes = sorted(artists(fig, "tiles:z:"), key=lambda m: m.gid)
    assert [m.gid for m in meshes] == [f"tiles:z:{i}" for i in range(4)]
    for i, mesh in enumerate(meshes):
        assert mesh_values(mesh).tolist() == owners[i].tolist()
    titles = {m["title"] for m in meshes}
    assert {"z[0, :, :]", "z[3, :, :]"} <= titles
    # grouped 3-D: block ids run batch by batch, swizzled within each batch
    for b in range(4):
        for pid in range(4):
            m, n = device.grouped_tile_index(pid, 2, 2, 2)
            assert owners[b, m, n] == b * 4 + pid


@pytest.mark.parametrize("schedule", [tl.row_major, tl.grouped(2), tl.persistent(5)],
                         ids=str)
def test_rank_4_partition_is_faceted_by_its_two_leading_tiles(schedule):
    out = tl.empty((2, 12, 3, 16), device="cpu")          # (batch, seq, heads, dim)
    p = out.partition((1, 8, 1, 8), schedule=schedule)
    fig = ownership_figure(p, name="out", theme="light", block=3)
    owners = p.owners()
    meshes = {m.gid: m for m in artists(fig, "tiles:out:")}
    assert sorted(meshes) == [f"tiles:out:{b},{s}" for b in range(2) for s in range(2)]
    for (b, s) in [(0, 0), (1, 1)]:
        assert mesh_values(meshes[f"tiles:out:{b},{s}"]).tolist() == owners[b, s].tolist()
    titles = {m["title"] for m in meshes.values()}
    assert "out[0, 0:8, :, :]" in titles and "out[1, 8:12, :, :]" in titles
    section = fig.tilelab["sections"][0]
    assert section["block_tiles"] == p.tiles_of(3, p.num_blocks())
    outlined = [t for panel in section["panels"] for t in panel["outlined"]]
    assert sorted(outlined) == sorted(p.tiles_of(3, p.num_blocks()))


def test_rank_5_partition_samples_its_slabs():
    p = tl.empty((2, 3, 4, 32, 32), device="cpu").partition((1, 1, 1, 16, 16),
                                                              schedule=tl.grouped(2))
    fig = ownership_figure(p, name="y", theme="light", max_panels=6, block=50)
    leads = [s["lead"] for s in fig.tilelab["sections"][0]["panels"]]
    assert len(leads) == 6 and p.tiles_of(50)[0][:3] in leads
    assert "6 of 24 slabs shown" in fig.tilelab["sections"][0]["caption"]


def test_many_slabs_are_sampled_and_said_so():
    p = tl.empty((20, 16, 16), device="cpu").partition((1, 16, 16))
    fig = ownership_figure(p, name="z", theme="light", max_panels=6, block=13)
    leads = [s["lead"] for s in fig.tilelab["sections"][0]["panels"]]
    assert len(leads) == 6 and 13 in leads            # the chosen block's slab is shown
    assert "6 of 20 slabs shown" in fig.tilelab["sections"][0]["caption"]


def test_large_grids_stay_readable_and_fast():
    big = tl.empty((8192, 8192), dtype="bfloat16", device="cpu")
    t0 = time.perf_counter()
    fig = ownership_figure(big.partition((128, 128), schedule=tl.grouped(8)), theme="light")
    panel = fig.tilelab["sections"][0]["panels"][0]
    assert not panel["aggregated"] and len(panel["labelled"]) <= 144
    fig = ownership_figure(big.partition((32, 32)), theme="light", max_tiles=4096)
    panel = fig.tilelab["sections"][0]["panels"][0]
    assert panel["aggregated"] and panel["owners"].size <= 4096
    assert panel["row_edges"][-1] == 8192 and not artists(fig, "tile-label")
    assert panel["owners"][0, 1] == 4 * 1          # every 4th tile: tile (0, 4) = block 4
    assert len(fig.to_svg()) < 2_000_000
    assert time.perf_counter() - t0 < 8


def test_dark_theme_colors():
    p = tl.zeros((64, 64), device="cpu").partition((32, 32))
    fig = ownership_figure(p, theme="dark")
    assert fig.tilelab["theme"] == "dark"
    svg = fig.to_svg()       # the page's variables, light fallbacks: follows the theme
    assert "var(--tl-fg, #1a1a1a)" in svg and "var(--tl-c0, " in svg
    assert "#e6e6e6" in fig.svg_for("dark") and "var(--tl-" not in fig.svg_for("dark")
    assert fig._repr_png_()[:4] == b"\x89PNG"


# ---------------------------------------------------------------- races

@tl.kernel(unsafe=True)
def head_permute_raw(out: tl.Raw, x: tl.In, BS: ct.Constant[int]):
    # the classic bug: the store swaps in b for h, so all H heads of a batch land on one
    b, h, s = ct.bid(0), ct.bid(1), ct.bid(2)
    t = ct.load(x, index=(b, h, s, 0), shape=(1, 1, BS, 8))
    ct.store(out, index=(b, s, b, 0), tile=ct.permute(t, (0, 2, 1, 3)))


@tl.kernel(unsafe=True)
def head_permute_fixed(out: tl.Raw, x: tl.In, BS: ct.Constant[int]):
    b, h, s = ct.bid(0), ct.bid(1), ct.bid(2)
    t = ct.load(x, index=(b, h, s, 0), shape=(1, 1, BS, 8))
    ct.store(out, index=(b, s, h, 0), tile=ct.permute(t, (0, 2, 1, 3)))


def _permute_run(kernel, B=2, H=4, S=8, BS=4):
    x = cpu((B, H, S, 8))
    out = tl.zeros((B, S, H, 8), device="cpu")
    return tl.interpret(kernel, out, x, BS, grid=(B, H, S // BS)), (B, H, S)


def test_race_figure_marks_exactly_the_racy_elements():
    trace, (B, H, S) = _permute_run(head_permute_raw)
    assert trace.has_races
    expected = np.zeros((B, S, H, 8), bool)
    for b in range(B):
        expected[b, :, b, :] = True                     # H blocks write out[b, :, b, :]
    d = race_data(trace, "out")
    assert np.array_equal(d.write_write, expected)
    assert not d.read_write.any()
    assert d.writers[expected].min() == H and d.writers[~expected].max() == 0
    fig = race_figure(trace, "out", theme="light", max_panels=B * S)
    drawn = np.zeros_like(expected)
    for mesh in artists(fig, "race:out:"):
        b, s = map(int, mesh.gid.split(":")[-1].split(","))
        drawn[b, s] = mesh_values(mesh) == 3
    assert np.array_equal(drawn, expected)
    involved = {trace.block(i).index for i in fig.tilelab["blocks"]}
    for race in trace.races:
        assert set(race.blocks) <= involved
    (red,) = {mesh["fills"][3] for mesh in artists(fig, "race:out:")}
    assert red == color("race") == "var(--tl-race, #d62728)"
    title = fig.suptitle
    assert f"{int(expected.sum())} elements of 'out' written by more than one block" in title
    assert f"the racing access: test_ownership.py:{_racy_line()}" in title
    assert any("race" in t for t in fig.tilelab["legend"])


def _racy_line():
    """The line of head_permute_raw's racing store in this file."""
    lines = Path(__file__).read_text().splitlines()
    return next(i + 1 for i, ln in enumerate(lines) if "index=(b, s, b, 0)" in ln)


def test_race_figure_names_a_notebook_cell_as_the_race_reports_do(monkeypatch):
    # IPython keeps a cell's code in a temporary file and maps it to its number
    shell = SimpleNamespace(compile=SimpleNamespace(_filename_map={__file__: 7}))
    monkeypatch.setitem(sys.modules, "IPython", SimpleNamespace(get_ipython=lambda: shell))
    trace, _ = _permute_run(head_permute_raw)
    title = race_figure(trace, "out", theme="light").suptitle
    where = f"In[7], line {_racy_line()}"
    assert f"the racing access: {where}" in title
    assert "test_ownership.py" not in title
    assert where in str(trace.races[0])          # the race report says it the same way


def test_race_figure_of_the_fixed_kernel_is_clean():
    trace, _ = _permute_run(head_permute_fixed)
    assert not trace.has_races
    fig = race_figure(trace, "out", theme="light")
    assert fig.tilelab["write_write"] == 0 and fig.tilelab["blocks"] == []
    assert "no block writes what another block touches" in fig.suptitle


def test_read_write_race_is_orange():
    @ct.kernel
    def neighbour(x, T: ct.Constant[int]):
        b = ct.bid(0)
        right = ct.load(x, ((b + 1) % ct.num_blocks(0),), (T,))
        ct.store(x, (b,), right + 1)

    from tilelab.interp import interpret

    trace = interpret(neighbour, np.zeros(16, np.float32), 4, grid=(4,))
    d = race_data(trace, "x")
    assert not d.write_write.any() and d.read_write.all()
    assert d.categories.tolist() == [2] * 16


# ---------------------------------------------------------------- launches

def test_ownership_figures_of_a_recorded_gemm_launch():
    a, b = cpu((256, 128)), cpu((128, 192), seed=1)
    c = tl.empty((256, 192), device="cpu")
    seen = []
    stop = subscribe(seen.append)
    try:
        gemm(c.partition((64, 64), schedule=tl.grouped(2)), a, b, 32)
    finally:
        stop()
    (event,) = seen
    assert ownership_figures(event, theme="light")[0].tilelab["inputs"] == []
    trace = trace_launch(event)
    figs = ownership_figures(event, trace, block=3, theme="light")
    assert [f.tilelab["kind"] for f in figs] == ["ownership"]
    names = [s["name"] for s in figs[0].tilelab["sections"]]
    assert names == ["c", "a", "b"]
    assert np.array_equal(figs[0].tilelab["sections"][1]["mask"],
                          trace.footprint("a", block=3, kind="read"))


def test_trace_launch_keeps_the_gpu_block_count_of_persistent_launches():
    a, b = cpu((256, 64)), cpu((64, 256), seed=1)
    c = tl.zeros((256, 256), device="cpu")
    p = c.partition((64, 64), schedule=tl.persistent())
    trace = trace_args(persistent_gemm, (p, a, b, 32), grid=(7, 1, 1))
    assert trace.num_blocks == 7
    assert float(np.abs(c.numpy()).sum()) == 0.0     # the trace ran on a copy of c


def test_trace_args_does_not_write_the_callers_inout():
    @tl.kernel
    def bump(z: tl.InOut):
        z.store(z.load() + 1)

    z = tl.zeros(64, device="cpu")
    tr = trace_args(bump, (z.partition(16),))
    assert tr.num_blocks == 4 and float(z.numpy().sum()) == 0.0


def test_raw_launch_without_partition_gets_a_reads_figure():
    @tl.kernel(unsafe=True)
    def gather_rows(out: tl.Raw, x: tl.In, T: ct.Constant[int]):
        i = ct.bid(0)
        ct.store(out, index=(i, 0), tile=ct.load(x, index=(i, 0), shape=(1, T)))

    x, out = cpu((4, 16)), tl.zeros((4, 16), device="cpu")
    seen = []
    stop = subscribe(seen.append)
    try:
        gather_rows(out, x, 16, grid=(4,))
    finally:
        stop()
    (event,) = seen
    figs = ownership_figures(event, trace_launch(event), block=2, theme="light")
    assert [f.tilelab["kind"] for f in figs] == ["reads"]
    assert figs[0].tilelab["sections"][0]["description"] == "x[2, 0:16]"


def test_vector_add_strips_with_reads():
    x, y = cpu(1000), cpu(1000, seed=1)
    z = tl.empty(1000, device="cpu")
    p = z.partition(256)
    trace = tl.interpret(vector_add, p, x, y)
    fig = ownership_figure(p, trace=trace, block=3, kernel=vector_add, theme="light")
    sec = fig.tilelab["sections"]
    assert [s["name"] for s in sec] == ["z", "x", "y"]
    assert sec[1]["description"] == "x[768:1000]"      # the partial last tile
    # strips make low sections, stacked at full width
    assert fig.get_size_inches()[1] < 1.3 * len(sec) + 1


# ---------------------------------------------------------------- errors

def test_clear_errors():
    t = tl.zeros((64, 64), device="cpu")
    with pytest.raises(TypeError, match="tl.Partition"):
        ownership_figure(t)
    with pytest.raises(IndexError, match="outside the launch's 4 blocks"):
        ownership_figure(t.partition((32, 32)), block=9)
    x, y = cpu(4096), cpu(4096, seed=1)
    z = tl.empty(4096, device="cpu")
    trace = tl.interpret(vector_add, z.partition(256), x, y, sample_blocks=2)
    missing = next(i for i in range(16) if i not in trace.execution_order)
    with pytest.raises(KeyError, match="did not run"):
        ownership_figure(z.partition(256), trace=trace, block=missing)
    with pytest.raises(KeyError, match="no array argument named 'w'"):
        ownership_figure(z.partition(256), trace=trace, inputs=["w"])


@pytest.mark.parametrize("module", [ownership_module, ownership_data_module,
                                    ownership_svg_module, ownership_launch_module,
                                    ownership_race_module],
                         ids=lambda m: m.__name__)
def test_doctests(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted >= 4


def test_count_only_traces_persistent_launches_one_block_per_tile():
    a, b = cpu((256, 64)), cpu((64, 256), seed=1)
    c = tl.empty((256, 256), device="cpu")
    seen = []
    stop = subscribe(seen.append)
    try:
        persistent_gemm(c.partition((64, 64), schedule=tl.persistent(num_blocks=3)), a, b, 32)
    finally:
        stop()
    (event,) = seen
    full = trace_launch(event)
    counted = trace_launch(event, count_only=True, sample_blocks=2)
    assert full.num_blocks == 3 and counted.num_blocks == 16 and counted.sampled
    assert counted.flops == full.flops == 2 * 256 * 256 * 64
    assert counted.bytes == full.bytes
