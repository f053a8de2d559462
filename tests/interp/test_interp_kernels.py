"""Whole kernels: vector add, GEMM, softmax, persistent loops, edges, lowered code."""
from __future__ import annotations

import linecache

import ml_dtypes
import numpy as np
import pytest

import cuda.tile as ct
import cuda.tile as anything_else
from cuda.tile import bid as block_id
from tilelab.interp import interpret

from .kernels_pkg import helpers


@ct.kernel
def vector_add(x, y, z, TILE: ct.Constant[int]):
    b = ct.bid(0)
    a = ct.load(x, (b,), (TILE,), padding_mode=ct.PaddingMode.ZERO)
    c = ct.load(y, (b,), (TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(z, (b,), a + c)


@ct.kernel
def gemm(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    bm, bn = ct.bid(0), ct.bid(1)
    acc = ct.zeros((TM, TN), ct.float32)
    for k in range(ct.num_tiles(A, 1, (TM, TK))):
        a = ct.load(A, (bm, k), (TM, TK), padding_mode=ct.PaddingMode.ZERO)
        b = ct.load(B, (k, bn), (TK, TN), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(a, b, acc)
    ct.store(C, (bm, bn), acc.astype(C.dtype))


@ct.kernel
def softmax(x, out, TILE_N: ct.Constant[int]):
    row = ct.bid(0)
    t = ct.load(x, (row, 0), (1, TILE_N), padding_mode=ct.PaddingMode.NEG_INF)
    t = t.astype(ct.float32)
    e = ct.exp(t - ct.max(t, 1, keepdims=True))
    ct.store(out, (row, 0), (e / ct.sum(e, 1, keepdims=True)).astype(out.dtype))


@ct.kernel
def persistent_scale(x, y, TILE: ct.Constant[int]):
    for t in range(ct.bid(0), ct.num_tiles(x, 0, (TILE,)), ct.num_blocks(0)):
        ct.store(y, (t,), ct.load(x, (t,), (TILE,)) * 3)


@pytest.mark.parametrize("n,tile", [(1 << 12, 256), (1000, 128), (7, 16)])
def test_vector_add(n, tile):
    x = np.random.default_rng(0).random(n, dtype=np.float32)
    y = np.random.default_rng(1).random(n, dtype=np.float32)
    z = np.zeros_like(x)
    trace = interpret(vector_add, x, y, z, tile, grid=(-(-n // tile),))
    assert np.array_equal(z, x + y)
    assert trace.bytes_read == 2 * 4 * n and trace.bytes_written == 4 * n
    # useful work counts the in-bounds lanes, executed work every lane of every tile
    assert trace.flops_elementwise == trace.flops == n and not trace.has_races
    assert trace.flops_elementwise_executed == trace.flops_executed == -(-n // tile) * tile


@pytest.mark.parametrize("m,n,k", [(128, 96, 64), (100, 70, 45)])
def test_bf16_gemm_matches_float64_reference(m, n, k):
    rng = np.random.default_rng(42)
    A = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    B = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
    C = np.zeros((m, n), np.float32)
    trace = interpret(gemm, A, B, C, 32, 32, 16, grid=(-(-m // 32), -(-n // 32)))
    ref = A.astype(np.float64) @ B.astype(np.float64)
    assert np.max(np.abs(C - ref)) <= 1e-2 * np.max(np.abs(ref))
    tiles_k = -(-k // 16)
    assert trace.flops_mma == 2 * m * n * k                   # in-bounds rows, columns, K
    assert trace.flops_mma_executed == 2 * 32 * 32 * 16 * tiles_k * trace.num_blocks
    assert not trace.has_races


def test_bf16_output_gemm_rounds_once():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((64, 64)).astype(ml_dtypes.bfloat16)
    B = rng.standard_normal((64, 64)).astype(ml_dtypes.bfloat16)
    C = np.zeros((64, 64), ml_dtypes.bfloat16)
    interpret(gemm, A, B, C, 32, 32, 64, grid=(2, 2))
    ref = (A.astype(np.float64) @ B.astype(np.float64))
    assert np.allclose(C.astype(np.float64), ref, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_softmax_with_partial_rows(dtype):
    x = np.random.default_rng(5).standard_normal((8, 100)).astype(dtype)
    out = np.zeros_like(x)
    trace = interpret(softmax, x, out, 128, grid=(8,))
    xf = x.astype(np.float64)
    ref = np.exp(xf - xf.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    tol = 1e-6 if dtype is np.float32 else 1e-2
    assert np.allclose(out.astype(np.float64), ref, atol=tol)
    assert not trace.has_races


def test_persistent_loop_covers_every_tile_once():
    x = np.arange(1000, dtype=np.float32)
    y = np.zeros_like(x)
    trace = interpret(persistent_scale, x, y, 64, grid=(3,), order="shuffled", seed=7)
    assert np.array_equal(y, 3 * x)
    owners = trace.owners("y")
    assert set(owners[::64].tolist()) == {0, 1, 2}
    assert not trace.has_races


@ct.kernel
def uses_aliases(x, out, W: ct.Constant[int]):
    row = block_id(0)
    t = helpers.scale(helpers.load_row(x, row, W), 2)
    anything_else.store(out, (row, 0), t)


def test_helpers_in_other_modules_and_import_aliases():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = np.zeros_like(x)
    interpret(uses_aliases, x, out, 4, grid=(3,))
    assert np.array_equal(out, 2 * x)


def test_closures_and_tile_functions():
    factor = 5

    @ct.function
    def times(t):
        return t * factor

    @ct.kernel
    def k(x):
        ct.store(x, (0,), times(ct.load(x, (0,), (4,))))

    x = np.ones(4, np.int32)
    interpret(k, x, grid=(1,))
    assert x.tolist() == [5] * 4


def test_plain_function_kernels_and_shuffled_order_give_same_result():
    def plain(x, y, TILE: ct.Constant[int]):
        ct.store(y, (ct.bid(0),), ct.load(x, (ct.bid(0),), (TILE,)) + 1)

    x = np.arange(64, dtype=np.int32)
    a, b = np.zeros_like(x), np.zeros_like(x)
    interpret(plain, x, a, 8, grid=8)
    tr = interpret(plain, x, b, 8, grid=(8,), order="shuffled", seed=1)
    assert np.array_equal(a, b) and tr.execution_order != list(range(8))


LOWERED = '''
import cuda.tile as ct
import tilelab.compiler.tile_index as _tl


def grouped_gemm(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int],
                 GROUP_M: ct.Constant[int]):
    num_m = ct.cdiv(A.shape[0], TM)
    num_n = ct.cdiv(B.shape[1], TN)
    m, n = _tl.grouped_tile_index(ct.bid(0), num_m, num_n, GROUP_M)
    acc = ct.zeros((TM, TN), ct.float32)
    for k in range(ct.num_tiles(A, 1, (TM, TK))):
        acc = ct.mma(ct.load(A, (m, k), (TM, TK), padding_mode=ct.PaddingMode.ZERO),
                     ct.load(B, (k, n), (TK, TN), padding_mode=ct.PaddingMode.ZERO), acc)
    ct.store(C, (m, n), acc)
'''


def test_lowered_source_in_linecache_with_device_module_alias():
    fname = "<tilelab-lowered-test>"
    linecache.cache[fname] = (len(LOWERED), None, LOWERED.splitlines(True), fname)
    ns: dict = {}
    exec(compile(LOWERED, fname, "exec"), ns)
    A = np.random.default_rng(0).standard_normal((96, 40)).astype(np.float16)
    B = np.random.default_rng(1).standard_normal((40, 64)).astype(np.float16)
    C = np.zeros((96, 64), np.float32)
    trace = interpret(ns["grouped_gemm"], A, B, C, 32, 32, 16, 2, grid=(6,))
    assert np.allclose(C, A.astype(np.float64) @ B.astype(np.float64), atol=1e-3)
    assert not trace.has_races
    writes = trace.regions("C", kind="write")
    assert writes[0].location.filename == fname
    assert "ct.store(C" in writes[0].location.source_line()


def test_tuple_and_list_arguments():
    @ct.kernel
    def k(pair, many, out):
        a, b = pair
        t = ct.load(a, (0,), (4,)) + ct.load(b, (0,), (4,))
        for i in range(len(many)):
            t = t + ct.load(many[i], (0,), (4,))
        ct.store(out, (0,), t)

    ones = np.ones(4, np.float32)
    out = np.zeros(4, np.float32)
    trace = interpret(k, (ones, ones), [ones, ones, ones], out, grid=(1,))
    assert out.tolist() == [5.0] * 4
    assert set(trace.args) == {"pair[0]", "pair[1]", "many[0]", "many[1]", "many[2]", "out"}


def test_stub_calls_the_rebuild_cannot_see_still_run_on_the_interpreter():
    """A function handed in as a ct.Constant keeps its real cuda.tile globals; cuTile's
    dispatch hook still routes its ct.* calls to the interpreter."""
    @ct.kernel
    def apply(x, OP: ct.Constant):
        ct.store(x, (0,), OP(ct.load(x, (0,), (4,))))

    x = np.zeros(4, np.float32)
    interpret(apply, x, lambda t: ct.exp(t) + ct.full((4,), 1.0, ct.float32), grid=(1,))
    assert x.tolist() == [2.0] * 4


def test_registered_location_maps_point_errors_and_accesses_at_user_source():
    from tilelab.errors import SourceLocation
    from tilelab.interp import register_location_map

    src = "\n\ndef k(x):\n    ct.store(x, (0,), ct.load(x, (0,), (4,)) + 1)\n"
    fname = "<generated-for-map-test>"
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    ns = {"ct": ct}
    exec(compile(src, fname, "exec"), ns)
    register_location_map(fname, lambda line, col: SourceLocation("user_cell.py", line + 10,
                                                                  col + 1))
    trace = interpret(ns["k"], np.zeros(4, np.int32), grid=(1,))
    loc = trace.regions("x")[0].location
    assert (loc.filename, loc.line) == ("user_cell.py", 14)


def test_fully_qualified_cuda_tile_references():
    import cuda

    @ct.kernel
    def k(x):
        cuda.tile.store(x, (0,), cuda.tile.full((4,), 3, cuda.tile.int32))

    x = np.zeros(4, np.int32)
    interpret(k, x, grid=(1,))
    assert x.tolist() == [3] * 4
