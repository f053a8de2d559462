"""``p.store(tile, offset=(o0, ...))``: a store at a data-dependent sub-tile of the block's
own tile (docs/safety.md, "Sub-tile stores").

Accepted forms run on the CPU interpreter against numpy, for in-range, out-of-range and
negative offsets (out of range writes nothing); refused forms carry the rule
``offset-store`` (or the partition rules) and the user's location; the motivating
kv-cache write compiles for sm_80 and sm_90 with the real toolchain, its Tile IR passes
the validator, and the race finder sees no race.
"""
from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest

import cuda.tile as ct
import tilelab as tl
from tilelab.compiler.safety import RULES
from tilelab.compiler.tileir import check_tileir

THIS = Path(__file__).resolve()
H, S_MAX, D = 4, 16, 8


def cpu(a):
    return tl.tensor(np.ascontiguousarray(a), device="cpu")


def scalar(v: int):
    return cpu(np.array([v], dtype=np.int32))


def line_of(fn, text: str) -> int:
    """The file line of the first line of ``fn`` that contains ``text``."""
    src, first = inspect.getsourcelines(fn)
    return first + next(i for i, ln in enumerate(src) if text in ln)


# ---- the kernels ------------------------------------------------------------------------


@tl.kernel
def kv_write(k_cache: tl.Out, k_new: tl.In, position: tl.In, D: ct.Constant[int]):
    h = k_cache.tile_index[0]
    pos = ct.load(position, index=(0,), shape=(1,)).item()
    row = ct.reshape(ct.load(k_new, index=(h, 0), shape=(1, D)), (1, 1, D))
    k_cache.store(row, offset=(0, pos, 0))


@tl.kernel
def put_scalar_arg(z: tl.InOut, k: int):
    # an offset from a scalar kernel argument; InOut keeps the rest of its tile
    z.store(ct.full((4,), 9.0, dtype=ct.float32), offset=(k,))


@tl.kernel
def put_2d(z: tl.Out, a: tl.In, b: tl.In):
    i = ct.load(a, index=(0,), shape=(1,)).item()
    j = ct.load(b, index=(0,), shape=(1,)).item()
    z.store(ct.full((2, 4), 7.0, dtype=ct.float32), offset=(i, j))


@tl.kernel
def put_persistent(z: tl.Out, x: tl.In, o: tl.In):
    k = ct.load(o, index=(0,), shape=(1,)).item()
    for t in z.tiles():
        i = z.tile_index_of(t)
        z.store(ct.load(x, index=(i[0], 0), shape=(1, 4)), at=t, offset=(0, k))


@tl.kernel
def put_multiline(z: tl.Out, o: tl.In):
    k = ct.load(o, index=(0,), shape=(1,)).item()
    z.store(
        ct.full((4,), 1.0, dtype=ct.float32),
        offset=(
            k,
        ),
    )


def expected_kv(k_new: np.ndarray, pos: int) -> np.ndarray:
    out = np.zeros((H, S_MAX, D), np.float32)
    if 0 <= pos < S_MAX:
        out[:, pos] = k_new
    return out


K_NEW = np.arange(H * D, dtype=np.float32).reshape(H, D) + 1


def run_kv(pos: int, order: str = "sequential"):
    cache = tl.zeros((H, S_MAX, D), dtype="float32", device="cpu")
    trace = tl.interpret(kv_write, cache.partition((1, S_MAX, D)), cpu(K_NEW), scalar(pos),
                         D, order=order, seed=5)
    return cache.numpy(), trace


# ---- accepted ---------------------------------------------------------------------------


@pytest.mark.parametrize("pos", [0, 5, S_MAX - 1, S_MAX, S_MAX + 1, 10**6, -1, -S_MAX,
                                 -2**31, 2**31 - 1])
def test_kv_write_lands_at_the_position_or_nowhere(pos):
    got, trace = run_kv(pos, order="shuffled")
    np.testing.assert_array_equal(got, expected_kv(K_NEW, pos))
    assert not trace.has_races, trace.race_report()


def test_kv_write_through_the_launch_api():
    cache = tl.zeros((H, S_MAX, D), dtype="float32", device="cpu")
    for pos in (3, 7, S_MAX + 2):
        kv_write(cache.partition((1, S_MAX, D)), cpu(K_NEW * pos), scalar(pos), D)
    want = expected_kv(K_NEW * 3, 3) + expected_kv(K_NEW * 7, 7)
    np.testing.assert_array_equal(cache.numpy(), want)


def test_each_block_writes_only_inside_its_own_tile():
    _, trace = run_kv(6)
    for b, block in enumerate(trace.blocks):
        (access,) = block.writes["k_cache"]
        assert access.box == ((b, b + 1), (6, 7), (0, D))
        assert access.location.line == line_of(kv_write.__wrapped__, "k_cache.store(")


@tl.kernel
def advance(p: tl.InOut):
    p.store(p.load() + 1)


def test_a_recorded_graph_replays_at_the_position_the_device_holds():
    cache = tl.zeros((H, S_MAX, D), dtype="float32", device="cpu")
    position = scalar(S_MAX - 2)
    with tl.graph() as g:
        kv_write(cache.partition((1, S_MAX, D)), cpu(K_NEW), position, D)
        advance(position.partition(1))
    for _ in range(4):  # positions S_MAX-2, S_MAX-1, then two past the end: no writes
        g.replay().wait()
    assert position.numpy().tolist() == [S_MAX + 2]
    want = expected_kv(K_NEW, S_MAX - 2) + expected_kv(K_NEW, S_MAX - 1)
    np.testing.assert_array_equal(cache.numpy(), want)


@pytest.mark.parametrize("k", [0, 1, 3, 4, -1, 100])
def test_a_scalar_argument_offset_on_an_inout(k):
    z = cpu(np.arange(16, dtype=np.float32))
    put_scalar_arg(z.partition(16), k)
    want = np.arange(16, dtype=np.float32)
    if 0 <= k < 4:
        want[4 * k:4 * k + 4] = 9
    np.testing.assert_array_equal(z.numpy(), want)


@pytest.mark.parametrize("i,j", [(0, 0), (1, 1), (0, 1), (2, 0), (1, 2), (-1, 0)])
def test_edge_tiles_are_masked_and_sub_tiles_past_the_end_skipped(i, j):
    # 10 x 20 in tiles of (4, 8): the last row and column of tiles are partial
    z = tl.zeros((10, 20), dtype="float32", device="cpu")
    trace = tl.interpret(put_2d, z.partition((4, 8)), scalar(i), scalar(j))
    want = np.zeros((10, 20), np.float32)
    if 0 <= i < 2 and 0 <= j < 2:
        for bi in range(3):
            for bj in range(3):
                r, c = bi * 4 + 2 * i, bj * 8 + 4 * j
                want[r:r + 2, c:c + 4] = 7  # numpy clips at the edge, as cuTile masks
    np.testing.assert_array_equal(z.numpy(), want)
    assert not trace.has_races


@pytest.mark.parametrize("k", [0, 3, 4, -1])
def test_persistent_kernels_store_sub_tiles_of_the_minted_tile(k):
    x = cpu(np.arange(8 * 16, dtype=np.float32).reshape(8, 16))
    z = tl.zeros((8, 16), dtype="float32", device="cpu")
    put_persistent(z.partition((1, 16), schedule=tl.persistent(3)), x, scalar(k))
    want = np.zeros((8, 16), np.float32)
    if 0 <= k < 4:
        want[:, 4 * k:4 * k + 4] = x.numpy()[:, :4]
    np.testing.assert_array_equal(z.numpy(), want)


@pytest.mark.toolchain
def test_a_store_written_over_several_lines_keeps_its_lines():
    z = tl.zeros(8, dtype="float32", device="cpu")
    put_multiline(z.partition(8), scalar(1))
    np.testing.assert_array_equal(z.numpy(), [0, 0, 0, 0, 1, 1, 1, 1])
    art = put_multiline.compile(tl.spec(8, "float32").partition(8), tl.spec(1, "int32"),
                                arch="sm_90")
    lowered = art.lowered_source.splitlines()
    src = inspect.getsource(put_multiline.__wrapped__).splitlines()
    assert len(lowered) == len(src)  # the decorator's line is blank in the lowered text
    for text in ("ct.full(", "k,"):  # every argument stays on its line
        assert [text in ln for ln in lowered] == [text in ln for ln in src]
    assert "__tl_dev.sub_tile_store(z, " in art.lowered_source


# ---- compiled ---------------------------------------------------------------------------


def kv_specs():
    return (tl.spec((H, S_MAX, D), "float32").partition((1, S_MAX, D)),
            tl.spec((H, D), "float32"), tl.spec(1, "int32"), D)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.toolchain
def test_kv_write_compiles_and_its_tile_ir_passes_the_validator(arch):
    art = kv_write.compile(*kv_specs(), arch=arch, cache=False)
    assert isinstance(art.cubin, (bytes, bytearray)) and art.cubin
    assert "__tl_dev.sub_tile_store(k_cache, " in art.lowered_source
    d = kv_write.definition
    sp = d.specialize(kv_specs())
    lk = d.lowered(sp.plan)
    assert lk.offset_store_params == frozenset({"k_cache"})
    from tilelab.compiler.export import export_tileir

    _bc, text = export_tileir(d.fn, lk, sp)
    report = check_tileir(text, lk, sp)
    assert report.partition_stores == 1 and report.sub_tile_stores == 1
    assert "if %" in text and "tile=(1x1x8)" in text


def test_a_tile_that_does_not_divide_the_partition_tile_is_a_located_compile_error():
    def wide(z: tl.Out, x: tl.In):
        z.store(ct.load(x, index=(0,), shape=(32,)), offset=(0,))
    k = tl.kernel(wide)
    store_line = line_of(wide, "z.store(")
    with pytest.raises(tl.CompileError) as ei:
        k.compile(tl.spec(64, "float32").partition(16), tl.spec(64, "float32"),
                  arch="sm_90", cache=False)
    e = ei.value
    assert "the tile's shape must divide the partition's tile shape on every axis" in str(e)
    assert e.location is not None and e.location.line == store_line
    assert Path(e.location.filename).resolve() == THIS
    assert "offset=" in e.hint and "divides z.tile_shape" in e.hint
    with pytest.raises(tl.CompileError, match="must divide the partition's tile shape") as ei:
        k(tl.zeros(64, dtype="float32", device="cpu").partition(16),
          cpu(np.zeros(64, np.float32)))
    assert ei.value.location.line == store_line


# ---- refused ----------------------------------------------------------------------------


def _refused(fn, rule: str, *phrases: str, at: str):
    with pytest.raises(tl.SafetyError) as ei:
        tl.kernel(fn)
    e = ei.value
    assert e.rule == rule, str(e)
    for p in phrases:
        assert p in str(e), str(e)
    assert e.location is not None and e.location.line == line_of(fn, at)
    assert Path(e.location.filename).resolve() == THIS
    return e


def test_offset_must_be_a_tuple_literal():
    def f(z: tl.Out, x: tl.In):
        o = (1,)
        z.store(tl.load_like(x, z), offset=o)
    e = _refused(f, "offset-store", "takes a tuple literal of one integer per axis, got 'o'",
                 at="offset=o")
    assert "offset=(0, pos, 0)" in e.hint


def test_offset_may_not_be_starred():
    def f(z: tl.Out, x: tl.In):
        o = (1,)
        z.store(tl.load_like(x, z), offset=(*o,))
    _refused(f, "offset-store", "with a starred element", at="offset=(*o,)")


def test_offset_may_not_be_empty():
    def f(z: tl.Out, x: tl.In):
        z.store(tl.load_like(x, z), offset=())
    e = _refused(f, "offset-store", "offset=()) names no axis", at="offset=()")
    assert "z.store(tile)" in e.hint


def test_offset_length_must_match_the_rank():
    def f(z: tl.Out, x: tl.In):
        z.store(ct.load(x, index=(0, 0), shape=(1, 4)), offset=(0, 1, 2))
    k = tl.kernel(f)  # ranks are known at the launch
    with pytest.raises(tl.SafetyError) as ei:
        k(tl.zeros((4, 8), dtype="float32", device="cpu").partition((1, 8)),
          cpu(np.zeros((4, 8), np.float32)))
    e = ei.value
    assert e.rule == "offset-store"
    assert "gives 3 offsets for partition 'z' of rank 2" in str(e)
    assert e.location.line == line_of(f, "offset=(0, 1, 2)")
    assert e.hint == "write 2 entries, one per axis of z"


def test_offset_on_an_input_is_a_write_to_an_input():
    def f(z: tl.Out, x: tl.In):
        x.store(tl.load_like(x, z), offset=(0,))
    _refused(f, "write-input", "writes to 'x', which is tl.In", at="x.store(")


def test_offset_on_an_unannotated_array_is_a_write_to_an_input():
    def f(z: tl.Out, x):
        x.store(tl.load_like(x, z), offset=(0,))
    _refused(f, "write-input", "writes to 'x'", at="x.store(")


def test_offset_next_to_an_index_is_still_refused():
    def f(z: tl.Out, x: tl.In):
        z.store(tl.load_like(x, z), offset=(0,), index=(1,))
    e = _refused(f, "partition-store", "index= cannot be chosen", at="index=(1,)")
    assert "offset=" in e.hint


def test_a_partition_inside_the_offset_escapes():
    def f(z: tl.Out, x: tl.In):
        z.store(tl.load_like(x, z), offset=(z,))
    _refused(f, "partition-escape", "partition 'z' may only be used", at="offset=(z,)")


def test_a_tl_out_stays_write_only():
    def f(z: tl.Out):
        z.store(z.load(), offset=(0,))
    _refused(f, "partition-read-out", "z is tl.Out (write-only)", at="z.load()")


def test_the_device_helper_is_not_a_way_around_the_partition():
    import tilelab.compiler.tile_index as dev

    def f(z: tl.Out, x: tl.In):
        dev.sub_tile_store(z, (5,), (64,), tl.load_like(x, z), (0,))
    _refused(f, "partition-escape", "passing partition 'z' to dev.sub_tile_store()",
             at="dev.sub_tile_store(")


def test_the_rule_is_in_the_table_with_what_it_protects():
    rule = RULES["offset-store"]
    assert "own tile" in rule.protects and "writes nothing" in rule.protects
    assert "offset=(o0, o1, ...)" in rule.hint
