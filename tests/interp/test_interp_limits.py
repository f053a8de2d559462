"""The CPU backend refuses what compiling for sm_90 refuses, at the same place, saying the
same thing.

Each kernel here breaks one limit of compiled tile code; it is launched on the CPU
backend and compiled with ``kernel.compile(..., arch="sm_90")`` (no GPU needed), and the
two refusals are compared. tilelab's own limit (Tile IR's tile-size limit,
:mod:`tilelab.limits`) is refused with one message on both sides. For the limits cuTile
checks itself (power-of-two shapes, positive dimensions, the types of a tile index, a
tuple repetition, an implicit promotion) the interpreter gives cuTile's message; the
compiler's says which tool refused it first (``cuTile rejected kernel 'k': <cuTile's
message>``). What each target supports (dtypes per arch) is in test_interp_targets.py.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import cuda.tile as ct
import tilelab as tl
from tilelab.errors import CompileError, SourceLocation
from tilelab.interp import interpret
from tilelab.limits import MAX_TILE_ELEMENTS

THIS = Path(__file__).resolve()
BIG = 1 << 25
CPU = "cpu"


def line_of(marker: str) -> int:
    lines = THIS.read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if text.rstrip().endswith(f"# {marker}"))


def where(e: CompileError) -> tuple | None:
    loc = e.location
    return None if loc is None else (str(Path(loc.filename).resolve()), loc.line, loc.col)


def refusals(kernel, *args) -> tuple[CompileError, CompileError]:
    """(the CPU backend's refusal, the sm_90 compile's refusal) of kernel(*args)."""
    with pytest.raises(CompileError) as cpu:
        kernel(*args)
    with pytest.raises(CompileError) as gpu:
        kernel.compile(*args, arch="sm_90", cache=False)
    return cpu.value, gpu.value


def assert_same(cpu: CompileError, gpu: CompileError, mark: str) -> None:
    """One message, one place (file, line, column): the line marked ``mark``."""
    assert cpu.message == gpu.message
    assert cpu.hint == gpu.hint
    assert where(cpu) == where(gpu)
    assert where(cpu)[:2] == (str(THIS), line_of(mark))


def assert_cutile_says(kernel, cpu: CompileError, gpu: CompileError, mark: str) -> None:
    """The interpreter says what cuTile says, where cuTile says it."""
    assert gpu.message == f"cuTile rejected kernel {kernel.name!r}: {cpu.message}"
    assert where(cpu) == where(gpu)
    assert where(cpu)[:2] == (str(THIS), line_of(mark))


def zp(n: int = 256, dtype: str = "float32"):
    return tl.zeros(n, dtype=dtype, device=CPU).partition(n)


# ---- Tile IR's tile-size limit (tilelab's own check: one message) ---------------------------

@tl.kernel
def fill(z: tl.Out):
    z.store(ct.full(z.tile_shape, 1, dtype=z.dtype))  # MARK: fill-store


@pytest.mark.parametrize("shape,tile", [((BIG,), (BIG,)), ((8192, 4096), (8192, 4096))])
def test_partition_tiles_past_the_limit(shape, tile):
    z = tl.zeros(shape, dtype="int8", device=CPU)
    cpu, gpu = refusals(fill, z.partition(tile))
    assert cpu.message == (f"partition 'z' of kernel 'fill' has tiles of shape {tile}, "
                           f"{BIG} elements: more than Tile IR's limit of "
                           f"{MAX_TILE_ELEMENTS} elements per tile")
    assert "at most 16777216 elements" in cpu.hint
    assert_same(cpu, gpu, "MARK: fill-store")
    assert (z.numpy() == 0).all()   # nothing ran


@tl.kernel
def big_temporary(z: tl.Out):
    t = ct.full((BIG,), 1.0, dtype=z.dtype)  # MARK: big-full
    z.store(ct.full(z.tile_shape, 0.0, dtype=z.dtype) + ct.sum(t))


def _big_tile(dtype):
    return ct.full((BIG,), 1.0, dtype=dtype)  # MARK: helper-full


@tl.kernel
def big_in_a_helper(z: tl.Out):
    t = _big_tile(z.dtype)  # MARK: helper-call
    z.store(ct.full(z.tile_shape, 0.0, dtype=z.dtype) + ct.sum(t))


@tl.kernel
def big_num_tiles(z: tl.Out, x: tl.In):
    n = ct.num_tiles(x, 0, (BIG,))  # MARK: big-num-tiles
    z.store(ct.full(z.tile_shape, 0.0, dtype=z.dtype) + n)


@pytest.mark.parametrize("kernel,args,mark", [
    (big_temporary, lambda: [zp()], "MARK: big-full"),
    (big_in_a_helper, lambda: [zp()], "MARK: helper-full"),
    (big_num_tiles, lambda: [zp(), tl.zeros(8, device=CPU)], "MARK: big-num-tiles"),
], ids=["temporary", "helper", "num_tiles"])
@pytest.mark.toolchain
def test_a_tile_past_the_limit_inside_the_kernel(kernel, args, mark):
    cpu, gpu = refusals(kernel, *args())
    expected = (f"kernel {kernel.name!r} makes a tile of shape ({BIG},), {BIG} elements: "
                f"more than Tile IR's limit of {MAX_TILE_ELEMENTS} elements per tile")
    if kernel is big_in_a_helper:   # and the call that led there
        call = SourceLocation(str(THIS), line_of("MARK: helper-call"), 9)
        expected += f" (called from {call})"
    assert cpu.message == expected
    assert_same(cpu, gpu, mark)


@tl.kernel
def big_load(z: tl.Out, x: tl.In):
    t = ct.load(x, (0, 0), (8192, 4096))  # MARK: big-load
    z.store(ct.full(z.tile_shape, 0.0, dtype=z.dtype) + ct.sum(t))


@tl.kernel
def big_broadcast(z: tl.Out):
    a, b = ct.full((8192, 1), 1, dtype=ct.int8), ct.full((1, 4096), 1, dtype=ct.int8)
    t = a + b  # MARK: big-sum
    z.store(ct.full(z.tile_shape, 0.0, dtype=z.dtype) + ct.sum(t).astype(z.dtype))


@pytest.mark.parametrize("kernel,args,mark", [
    (big_load, lambda: [zp(), tl.zeros((8, 8), device=CPU)], "MARK: big-load"),
    (big_broadcast, lambda: [zp()], "MARK: big-sum"),
], ids=["load", "broadcast"])
@pytest.mark.toolchain
def test_a_2d_tile_past_the_limit(kernel, args, mark):
    """The same message; the CPU names the line. (The compiler finds the op that makes
    the tile by disassembling bytecode whose large shapes are replaced by small markers,
    which tileirdisasm refuses for these two kernels: its location is then None.)"""
    cpu, gpu = refusals(kernel, *args())
    assert cpu.message == gpu.message == (
        f"kernel {kernel.name!r} makes a tile of shape (8192, 4096), {BIG} elements: more "
        f"than Tile IR's limit of {MAX_TILE_ELEMENTS} elements per tile")
    assert where(cpu)[:2] == (str(THIS), line_of(mark))
    assert where(gpu) in (None, where(cpu))


@tl.kernel
def at_the_limit(z: tl.Out):
    t = ct.full((MAX_TILE_ELEMENTS,), 1, dtype=ct.int8)
    z.store(ct.full(z.tile_shape, 0, dtype=z.dtype) + ct.sum(t.astype(ct.int32)))


def test_a_tile_at_the_limit_runs_on_the_cpu():
    z = tl.zeros(16, dtype="int32", device=CPU)
    at_the_limit(z.partition(16))
    assert z.numpy().tolist() == [MAX_TILE_ELEMENTS] * 16


@ct.kernel
def plain_cutile_kernel(x):
    t = ct.full((4096, 8192), 0, dtype=ct.int8)  # MARK: plain-full
    ct.store(x, (0,), ct.full((8,), 0, dtype=x.dtype) + ct.sum(t).astype(x.dtype))


def test_tl_interpret_of_a_cutile_kernel_refuses_it_too():
    with pytest.raises(CompileError) as ei:
        interpret(plain_cutile_kernel, np.zeros(8, np.int32), grid=(1,))
    assert ei.value.message.startswith("kernel 'plain_cutile_kernel' makes a tile of shape "
                                       "(4096, 8192), 33554432 elements")
    assert where(ei.value)[:2] == (str(THIS), line_of("MARK: plain-full"))


# ---- limits cuTile checks: the interpreter says what cuTile says ----------------------------

@tl.kernel
def odd_load(z: tl.Out, x: tl.In):
    t = ct.load(x, (0,), (3,))  # MARK: odd-load
    z.store(ct.full(z.tile_shape, 0.0, dtype=z.dtype) + ct.sum(t))


@tl.kernel
def odd_full(z: tl.Out, x: tl.In):
    t = ct.full((6,), 1.0, dtype=z.dtype)  # MARK: odd-full
    z.store(ct.full(z.tile_shape, 0.0, dtype=z.dtype) + ct.sum(t))


@tl.kernel
def odd_zeros(z: tl.Out, x: tl.In):
    t = ct.zeros((4, 3), dtype=z.dtype)  # MARK: odd-zeros
    z.store(ct.full(z.tile_shape, 0.0, dtype=z.dtype) + ct.sum(t))


@tl.kernel
def odd_broadcast(z: tl.Out, x: tl.In):
    t = ct.broadcast_to(ct.full((1,), 1.0, dtype=z.dtype), (12,))  # MARK: odd-broadcast
    z.store(ct.full(z.tile_shape, 0.0, dtype=z.dtype) + ct.sum(t))


@tl.kernel
def odd_num_tiles(z: tl.Out, x: tl.In):
    n = ct.num_tiles(x, 0, (5,))  # MARK: odd-num-tiles
    z.store(ct.full(z.tile_shape, 0.0, dtype=z.dtype) + n)


@tl.kernel
def odd_extract(z: tl.Out, x: tl.In):
    t = ct.extract(ct.full((4,), 1.0, dtype=z.dtype), (0,), (3,))  # MARK: odd-extract
    z.store(ct.full(z.tile_shape, 0.0, dtype=z.dtype) + ct.sum(t))


@tl.kernel
def empty_load(z: tl.Out, x: tl.In):
    t = ct.load(x, (0,), (0,))  # MARK: empty-load
    z.store(ct.full(z.tile_shape, 0.0, dtype=z.dtype) + ct.sum(t))


@tl.kernel
def float_index(z: tl.Out, x: tl.In):
    t = ct.load(x, (0.5,), (4,))  # MARK: float-index
    z.store(ct.full(z.tile_shape, 0.0, dtype=z.dtype) + ct.sum(t))


@tl.kernel
def unsigned_index(z: tl.Out, x: tl.In):
    t = ct.load(x, ct.astype(ct.bid(0), ct.uint32), (4,))  # MARK: unsigned-index
    z.store(ct.full(z.tile_shape, 0.0, dtype=z.dtype) + ct.sum(t))


@tl.kernel
def tile_index(z: tl.Out, x: tl.In):
    t = ct.load(x, (ct.arange(4, dtype=ct.int32),), (4,))  # MARK: tile-index
    z.store(ct.full(z.tile_shape, 0.0, dtype=z.dtype) + ct.sum(t))


@tl.kernel
def index_rank(z: tl.Out, x: tl.In):
    t = ct.load(x, (0, 0), (4,))  # MARK: index-rank
    z.store(ct.full(z.tile_shape, 0.0, dtype=z.dtype) + ct.sum(t))


CUTILE_CASES = {   # kernel: (cuTile's message, the marked line)
    odd_load: ('Invalid argument "shape" of load(): Dimension #0 of shape (3,) is not a '
               "power of two", "odd-load"),
    odd_full: ('Invalid argument "shape" of full(): Dimension #0 of shape (6,) is not a '
               "power of two", "odd-full"),
    odd_zeros: ('Invalid argument "shape" of zeros(): Dimension #1 of shape (4, 3) is not a '
                "power of two", "odd-zeros"),
    odd_broadcast: ('Invalid argument "shape" of broadcast_to(): Dimension #0 of shape (12,) '
                    "is not a power of two", "odd-broadcast"),
    odd_num_tiles: ('Invalid argument "shape" of num_tiles(): Dimension #0 of shape (5,) is '
                    "not a power of two", "odd-num-tiles"),
    odd_extract: ('Invalid argument "shape" of extract(): Dimension #0 of shape (3,) is not '
                  "a power of two", "odd-extract"),
    empty_load: ('Invalid argument "shape" of load(): Dimension #0 of shape (0,) is not '
                 "positive", "empty-load"),
    float_index: ('Invalid argument "index" of load(): Expected a tuple of signed integers '
                  "or a single signed integer scalar, but item #0 has type Tile[float32,()]",
                  "float-index"),
    unsigned_index: ('Invalid argument "index" of load(): Expected a tuple of signed '
                     "integers or a single signed integer scalar, but given value has type "
                     "Tile[uint32,()]", "unsigned-index"),
    tile_index: ('Invalid argument "index" of load(): Expected a tuple of signed integers '
                 "or a single signed integer scalar, but item #0 has type Tile[int32,(4)]",
                 "tile-index"),
    index_rank: ("Index size 2 does not match the array rank 1", "index-rank"),
}


@pytest.mark.parametrize("kernel", list(CUTILE_CASES), ids=lambda k: k.name)
def test_what_cutile_refuses(kernel):
    message, mark = CUTILE_CASES[kernel]
    cpu, gpu = refusals(kernel, zp(16), tl.zeros(16, device=CPU))
    assert cpu.message == message
    assert_cutile_says(kernel, cpu, gpu, f"MARK: {mark}")


# ---- p.store(tile, offset=...) with a float offset -----------------------------------------

@tl.kernel
def float_offset(z: tl.Out, f: float):
    z.store(ct.full((1, 4), 1.0, dtype=z.dtype), offset=(0, f))  # MARK: float-offset


@tl.kernel
def constant_float_offset(z: tl.Out, f: ct.Constant[float]):
    z.store(ct.full((1, 4), 1.0, dtype=z.dtype), offset=(0, f))  # MARK: constant-offset


@pytest.mark.parametrize("kernel,mark", [(float_offset, "float-offset"),
                                         (constant_float_offset, "constant-offset")])
@pytest.mark.parametrize("f", [0.0, 1.0, 3.0, 4.0, 7.5, -1.0],
                         ids=lambda f: f"offset {f}")
def test_a_float_sub_tile_offset_is_refused_whether_or_not_its_guard_holds(kernel, mark, f):
    """The store lands only where the guard holds (0 <= f < 4 here), but cuTile refuses
    the float index of the guarded store whatever the guard says, and so does the CPU."""
    z = tl.zeros((4, 16), device=CPU)
    cpu, gpu = refusals(kernel, z.partition((4, 16)), f)
    assert cpu.message == ('Invalid argument "index" of store(): Expected a tuple of signed '
                           "integers or a single signed integer scalar, but item #1 has "
                           "type Tile[float32,()]")
    assert_cutile_says(kernel, cpu, gpu, f"MARK: {mark}")
    assert (z.numpy() == 0).all()


@tl.kernel
def int_offset(z: tl.Out, k: int):
    z.store(ct.full((1, 4), 1.0, dtype=z.dtype), offset=(0, k))


def test_an_integer_sub_tile_offset_still_stores_only_where_its_guard_holds():
    z = tl.zeros((4, 16), device=CPU)
    int_offset(z.partition((4, 16)), 2)
    int_offset(z.partition((4, 16)), 7)     # outside the block's tile: writes nothing
    int_offset(z.partition((4, 16)), -1)
    expected = np.zeros((4, 16), np.float32)
    expected[0, 8:12] = 1
    assert (z.numpy() == expected).all()


# ---- tuple repetition: cuTile compiles none, the interpreter refuses it alike ---------------

def _zero_index(x):
    return (0,) * x.ndim  # MARK: helper-repeat


@tl.kernel
def repeat_ndim(z: tl.Out, x: tl.In):
    z.store(ct.load(x, (0,) * x.ndim, (16,)))  # MARK: repeat-ndim


@tl.kernel
def repeat_folded(z: tl.Out, x: tl.In):
    z.store(ct.load(x, 1 * (0,), (16,)))  # MARK: repeat-folded


@tl.kernel
def repeat_untaken(z: tl.Out, x: tl.In):
    if x.shape[0] > 1000000:
        t = ct.load(x, (0, 0) * 1, (16,))  # MARK: repeat-untaken
    else:
        t = ct.load(x, (0,), (16,))
    z.store(t)


@tl.kernel
def repeat_augmented(z: tl.Out, x: tl.In):
    index = (0,)
    index *= 1  # MARK: repeat-augmented
    z.store(ct.load(x, index, (16,)))


@tl.kernel
def repeat_shape(z: tl.Out, x: tl.In):
    z.store(ct.load(x, (0,), (16,)) + len(x.shape * 1))  # MARK: repeat-shape


@tl.kernel
def repeat_floats(z: tl.Out, x: tl.In):
    z.store(ct.load(x, (0,), (16,)) + len((1.5, True) * 1))  # MARK: repeat-floats


@tl.kernel
def repeat_in_helper(z: tl.Out, x: tl.In):
    z.store(ct.load(x, _zero_index(x), (16,)))  # MARK: repeat-call


INT = "Tile[int32,()]"
REPEATS = {   # kernel: (cuTile's operand types, the marked line)
    repeat_ndim: (f"Tuple[{INT}] and {INT}", "repeat-ndim"),
    repeat_folded: (f"{INT} and Tuple[{INT}]", "repeat-folded"),   # (Python folds it)
    repeat_untaken: (f"Tuple[{INT},{INT}] and {INT}", "repeat-untaken"),
    repeat_augmented: (f"Tuple[{INT}] and {INT}", "repeat-augmented"),
    repeat_shape: (f"Tuple[{INT}] and {INT}", "repeat-shape"),
    repeat_floats: (f"Tuple[Tile[float32,()],Tile[bool_,()]] and {INT}", "repeat-floats"),
}


@pytest.mark.parametrize("kernel", list(REPEATS), ids=lambda k: k.name)
def test_a_tuple_repetition_is_refused_as_cutile_refuses_it(kernel):
    """Whatever the form (folded by Python, augmented, of a shape, in a branch not
    taken), before a block runs, at the operation."""
    types_, mark = REPEATS[kernel]
    z = tl.zeros(16, device=CPU)
    cpu, gpu = refusals(kernel, z.partition(16), tl.ones(16, device=CPU))
    assert cpu.message == f"Unsupported operand types for *: {types_}"
    assert cpu.hint.startswith("cuTile compiles no tuple repetition: write the tuple out")
    assert_cutile_says(kernel, cpu, gpu, f"MARK: {mark}")
    assert (z.numpy() == 0).all()


def test_a_tuple_repetition_in_a_helper_names_the_call():
    cpu, gpu = refusals(repeat_in_helper, zp(16), tl.ones(16, device=CPU))
    call = SourceLocation(str(THIS), line_of("MARK: repeat-call"), 24)
    assert cpu.message == (f"Unsupported operand types for *: Tuple[{INT}] and {INT} "
                           f"(called from {call})")
    assert_cutile_says(repeat_in_helper, cpu, gpu, "MARK: helper-repeat")


@ct.kernel
def plain_repeat(x, z):
    ct.store(z, (0,), ct.load(x, (0,) * x.ndim, (8,)))  # MARK: plain-repeat


def test_tl_interpret_of_a_cutile_kernel_refuses_a_tuple_repetition():
    z = np.zeros(8, np.float32)
    with pytest.raises(CompileError) as ei:
        interpret(plain_repeat, np.ones(8, np.float32), z, grid=(1,))
    assert ei.value.message == f"Unsupported operand types for *: Tuple[{INT}] and {INT}"
    assert where(ei.value) == (str(THIS), line_of("MARK: plain-repeat"), 34)
    assert (z == 0).all()


@tl.kernel
def concatenated(z: tl.Out, x: tl.In, n: ct.Constant[int]):
    index = () + (0,)
    z.store(ct.load(x, index, (16,)) * n * 2)


@pytest.mark.toolchain
def test_tuple_concatenation_and_products_of_numbers_run():
    z = tl.zeros(16, device=CPU)
    concatenated(z.partition(16), tl.ones(16, device=CPU), 3)
    assert (z.numpy() == 6).all()
    concatenated.compile(z.partition(16), tl.ones(16, device=CPU), 3, arch="sm_90")


# ---- cuTile's words, its spelling included --------------------------------------------------

@tl.kernel
def int8_plus_uint8(z: tl.Out, x: tl.In):
    a, b = ct.full((16,), 1, dtype=ct.int8), ct.full((16,), 1, dtype=ct.uint8)
    z.store((a + b).astype(z.dtype))  # MARK: int8-plus-uint8


def test_an_implicit_promotion_is_refused_in_cutiles_words():
    """cuTile writes 'explict'; where the interpreter gives cuTile's message, so does it."""
    cpu, gpu = refusals(int8_plus_uint8, zp(16), tl.ones(16, device=CPU))
    assert cpu.message == ("Implicit promotion of int8 and uint8 is not supported. Please "
                           "perform an explict cast instead.")
    assert_cutile_says(int8_plus_uint8, cpu, gpu, "MARK: int8-plus-uint8")
