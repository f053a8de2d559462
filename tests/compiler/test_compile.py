"""Compiling real kernels through cuTile and tileiras, for several GPUs, with no GPU."""
import re
from pathlib import Path

import pytest

import tilelab as tl
from tilelab.kernels.examples import gemm, next_pow2, persistent_gemm, softmax, vector_add

import kernels_for_tests as K

ARCHS = ["sm_80", "sm_90", "sm_100", "sm_120"]
X = tl.spec(1 << 16, "float32")
A = tl.spec((1024, 1024), "bfloat16")
S = tl.spec((256, 1000), "float32")

TOUR = {
    "vector_add": (vector_add, (X.partition(1024), X, X)),
    "gemm": (gemm, (A.partition((128, 128)), A, A, 64)),
    "softmax": (softmax, (S.partition((4, next_pow2(1000))), S)),
    "persistent_gemm": (persistent_gemm,
                        (A.partition((128, 128), schedule=tl.persistent()), A, A, 64)),
}


def marked_line(marker: str) -> int:
    """Line number of the '# MARK: <marker>' comment in kernels_for_tests.py."""
    lines = Path(K.__file__).read_text().splitlines()
    return next(i + 1 for i, ln in enumerate(lines) if ln.rstrip().endswith(f"MARK: {marker}"))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", list(TOUR))
@pytest.mark.toolchain
def test_tour_kernels_compile_for_each_arch(name, arch):
    kernel, args = TOUR[name]
    art = kernel.compile(*args, arch=arch)
    assert art.arch == arch
    assert art.cubin[:4] == b"\x7fELF"
    assert art.tileir.lstrip().startswith("entry @" + art.symbol)
    assert art.symbol.startswith(kernel.name + "_")
    assert set(art.timings) >= {"check", "lower"}
    if not art.cache_hit:
        assert {"frontend", "tileiras", "total_compile"} <= set(art.timings)
        assert art.timings["tileiras"] > 0
    assert "tileiras 13.4" in art.toolchain
    assert f"ct.store({kernel.definition.analysis.partitions[0]}," in art.lowered_source


@pytest.mark.toolchain
def test_gemm_uses_tensor_cores_on_sm90():
    art = gemm.compile(*TOUR["gemm"][1], arch="sm_90", force=True)
    passes = {r.pass_name for r in art.remarks}
    assert any("tensor" in (p or "").lower() for p in passes), passes
    # remarks point at the user's file and the line of ct.mma, not at lowered source
    src = Path(gemm.definition.analysis.source.filename).read_text().splitlines()
    mma_line = next(i + 1 for i, ln in enumerate(src) if "ct.mma(" in ln)
    tc = [r for r in art.remarks if "tensor" in (r.pass_name or "").lower()]
    assert any(r.filename.endswith("examples.py") and r.line == mma_line for r in tc)


def test_lowering_keeps_line_numbers():
    x = tl.spec(4096, "float32")
    lk = K.multiline.definition.lowered(K.multiline.definition.specialize(
        (x.partition(256), x)).plan)
    orig = K.multiline.definition.analysis.source
    lowered_lines = lk.text.splitlines()
    # the kernel starts on the same line, and unedited lines are identical
    assert lowered_lines[orig.first_line - 1] == ""  # the decorator line is blanked
    assert lowered_lines[orig.tree.lineno - 1].startswith("def multiline(z")
    for i, ln in enumerate(orig.lines):
        lineno = orig.first_line + i
        if "tl." not in ln and "z." not in ln and ln.strip():
            # untouched lines are identical; the store's last line keeps its text
            expect = ln.rstrip("\n")
            assert lowered_lines[lineno - 1].startswith(expect.rstrip(")"))
    assert len(lk.text.splitlines()) == orig.first_line - 1 + len(orig.lines)
    # the multi-line store stays on its lines; the tile shape became constants
    ct_ = lk.ct_alias                   # the lowering's reserved name for cuda.tile
    assert f"{ct_}.store(z," in lowered_lines[orig.tree.lineno + 1]
    assert lowered_lines[orig.tree.lineno + 2].lstrip().startswith(f"{ct_}.load(x,")
    assert lowered_lines[orig.tree.lineno + 3].lstrip().startswith("* 2.0")
    (t0,) = lk.tile_params["z"]
    assert f"t = ({t0},)" in lk.text


@pytest.mark.toolchain
def test_indented_kernel_compiles():
    x = tl.spec(4096, "float32")
    art = K.Holder.indented.compile(x.partition(256), x, arch="sm_90")
    assert art.cubin


def test_source_map_points_into_user_file():
    x = tl.spec(4096, "float32")
    d = K.multiline.definition
    lk = d.lowered(d.specialize((x.partition(256), x)).plan)
    loc = lk.source_map.to_user(d.analysis.source.first_line + 3, 8)
    assert loc.filename == K.__file__
    assert loc.line == d.analysis.source.first_line + 3


def test_shape_error_is_located_in_user_source():
    x = tl.spec(4096, "float32")
    with pytest.raises(tl.CompileError) as ei:
        K.shape_mismatch.compile(x.partition(256), x, arch="sm_90")
    e = ei.value
    assert e.location.filename == K.__file__
    assert e.location.line == marked_line("shape_mismatch")
    # the store's tile against the partition's, not cuTile's "not broadcastable"
    assert e.message.endswith("z.store(tile): the tile is (128,), but z is partitioned "
                              "into tiles of (256,): a store writes one whole tile of z")
    assert e.hint.startswith("store a tile of shape (256,) (z.tile_shape): load it with "
                             "tl.load_like(x, z), or with shape=z.tile_shape")
    assert re.search(rf"kernels_for_tests.py:{e.location.line}:\d+", str(e))


def test_dtype_error_names_astype():
    z = tl.spec(4096, "bfloat16")
    x = tl.spec(4096, "float32")
    with pytest.raises(tl.CompileError) as ei:
        K.dtype_mismatch.compile(z.partition(256), x, arch="sm_90")
    assert ei.value.location.line == marked_line("dtype_mismatch")
    assert "cast" in ei.value.message and "astype" in ei.value.hint


def test_error_in_helper_points_at_helper_line():
    x = tl.spec((64, 64), "float32")
    with pytest.raises(tl.CompileError) as ei:
        K.calls_bad_helper.compile(x.partition((16, 16)), x, arch="sm_90")
    assert ei.value.location.filename == K.__file__
    assert ei.value.location.line == marked_line("bad_helper")
    assert "called from" in ei.value.message


def test_unsupported_arch():
    with pytest.raises(tl.CompileError, match="unsupported target 'sm_75'.*sm_80"):
        vector_add.compile(*TOUR["vector_add"][1], arch="sm_75")


@pytest.mark.toolchain
def test_arch_spellings():
    art = vector_add.compile(*TOUR["vector_add"][1], arch="9.0")
    assert art.arch == "sm_90"


@pytest.mark.toolchain
def test_scalar_and_inout_compile():
    x = tl.spec(4096, "float32")
    art = K.scale.compile(x.partition(512), 2.5, arch="sm_90")
    assert [p.kind for p in art.params] == ["array", "scalar"]
    assert art.params[1].dtype == "float32"


def test_numpy_arrays_as_example_inputs():
    import numpy as np

    x = np.zeros(4096, np.float32)
    art = vector_add.compile(tl.spec(4096, "float32").partition(1024), x, x, arch="sm_90")
    assert art.cubin


# ---- argument binding errors --------------------------------------------------------


def test_wrong_argument_count():
    with pytest.raises(tl.LaunchError, match=r"vector_add\(\) takes 3 arguments"):
        vector_add.compile(X.partition(1024), X, arch="sm_90")


def test_whole_tensor_to_out_parameter():
    with pytest.raises(tl.LaunchError, match="tl.Out, so it takes a partition") as ei:
        vector_add.compile(X, X, X, arch="sm_90")
    assert "z.partition(" in ei.value.hint


def test_partition_to_in_parameter():
    with pytest.raises(tl.LaunchError, match="'x' is tl.In, which takes a whole tensor"):
        vector_add.compile(X.partition(1024), X.partition(1024), X, arch="sm_90")


def test_mismatched_tile_grids_list_each_partition():
    x = tl.spec((256, 64), "float32")
    s = tl.spec((128,), "float32")
    with pytest.raises(tl.LaunchError, match="different tile grids") as ei:
        K.two_outputs.compile(x.partition((16, 64)), s.partition(16), x, arch="sm_90")
    msg = str(ei.value)
    assert "z: (256, 64) in tiles (16, 64) -> grid (16, 1)" in msg
    assert "s: (128,) in tiles (16,) -> grid (8,)" in msg


@pytest.mark.toolchain
def test_lower_rank_partition_with_matching_grid_compiles():
    x = tl.spec((256, 64), "float32")
    s = tl.spec((256,), "float32")
    art = K.two_outputs.compile(x.partition((16, 64)), s.partition(16), x, arch="sm_90")
    assert art.cubin


def test_schedules_must_agree():
    x = tl.spec((256, 64), "float32")
    s = tl.spec((256,), "float32")
    with pytest.raises(tl.LaunchError, match="same schedule"):
        K.two_outputs.compile(x.partition((16, 64), schedule=tl.grouped(4)), s.partition(16),
                              x, arch="sm_90")


def test_persistent_kernel_needs_persistent_schedule():
    with pytest.raises(tl.LaunchError, match="schedule=tl.persistent"):
        persistent_gemm.compile(A.partition((128, 128)), A, A, 64, arch="sm_90")
    with pytest.raises(tl.LaunchError, match="does not loop over p.tiles"):
        gemm.compile(A.partition((128, 128), schedule=tl.persistent()), A, A, 64,
                     arch="sm_90")


@pytest.mark.toolchain
def test_check_bounds_false_requires_whole_tiles():
    x = tl.spec(1000, "float32")
    with pytest.raises(tl.LaunchError, match="check_bounds=False.*partial tile"):
        K.unchecked_copy.compile(x.partition(256), x, arch="sm_90")
    y = tl.spec(1024, "float32")
    small = tl.spec(512, "float32")
    with pytest.raises(tl.LaunchError, match="would read tiles covering"):
        K.unchecked_copy.compile(y.partition(256), small, arch="sm_90")
    art = K.unchecked_copy.compile(y.partition(256), y, arch="sm_90")
    assert "check_bounds=False" in art.lowered_source


def test_constant_parameter_needs_a_value():
    with pytest.raises(tl.LaunchError, match="K_TILE.*ct.Constant"):
        gemm.compile(A.partition((128, 128)), A, A, A, arch="sm_90")


def test_tile_shape_rules():
    with pytest.raises(ValueError, match="power of two"):
        X.partition(1000)
    with pytest.raises(ValueError, match="has 2 dims but the tensor has 1"):
        X.partition((16, 16))
    with pytest.raises(ValueError, match="rank 6"):
        tl.spec((2,) * 6, "f32").partition((1,) * 6)
    assert tl.spec((2,) * 5, "f32").partition((1,) * 5).grid == (2,) * 5


def test_grouped_and_persistent_grids():
    p = A.partition((128, 128), schedule=tl.grouped(8))
    spec = gemm.definition.specialize((p, A, A, 64))
    assert spec.grid() == (64, 1, 1)
    spec = gemm.definition.specialize((A.partition((128, 256)), A, A, 64))
    assert spec.grid() == (4, 8, 1)   # x walks columns of tiles: row-major block order
    p = A.partition((128, 128), schedule=tl.persistent())
    spec = persistent_gemm.definition.specialize((p, A, A, 64))
    assert spec.grid(num_sms=132) == (64, 1, 1)
    assert spec.grid(num_sms=16) == (16, 1, 1)
    p = A.partition((128, 128), schedule=tl.persistent(num_blocks=7))
    spec = persistent_gemm.definition.specialize((p, A, A, 64))
    assert spec.grid(num_sms=132) == (7, 1, 1)


def test_tileiras_killed_by_a_signal_says_so(monkeypatch):
    """A tile of millions of elements (within Tile IR's limit) makes tileiras grow past
    20 GB and get killed; the error says so instead of 'no message'."""
    from tilelab.compiler.toolchain import ToolResult, Toolchain

    real = Toolchain.run

    def run(self, tool, args, timeout=300.0):
        if Path(tool).name == "tileiras":
            return ToolResult(-9, "", "", (str(tool), *args))
        return real(self, tool, args, timeout)
    monkeypatch.setattr(Toolchain, "run", run)
    with pytest.raises(tl.CompileError) as ei:
        vector_add.compile(*TOUR["vector_add"][1], arch="sm_90", cache=False)
    e = ei.value
    assert e.message == ("tileiras was killed by SIGKILL while compiling kernel "
                         "'vector_add' for sm_90 (most likely out of memory)")
    assert "very large tiles" in e.hint and "toolchain: tileiras 13.4" in e.hint


@pytest.mark.toolchain
def test_safe_compile_records_the_tile_ir_check():
    art = vector_add.compile(*TOUR["vector_add"][1], arch="sm_90", force=True)
    assert 0 < art.timings["validate"] < art.timings["tileiras"]
    assert art.timings["disasm"] > 0
