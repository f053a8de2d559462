"""Memory ops: tile loads/stores, gather/scatter, atomics, advanced indexing, views."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cuda.tile as ct
from tilelab.errors import CompileError, LaunchError
from tilelab.interp import interpret

from .harness import fast

P = ct.PaddingMode


@ct.kernel
def copy_tiles(x, y, TM: ct.Constant[int], TN: ct.Constant[int]):
    bm, bn = ct.bid(0), ct.bid(1)
    ct.store(y, (bm, bn), ct.load(x, (bm, bn), (TM, TN), padding_mode=ct.PaddingMode.ZERO))


@fast(30)
@given(m=st.integers(1, 13), n=st.integers(1, 13), tm=st.sampled_from([1, 2, 4, 8]),
       tn=st.sampled_from([1, 4, 16]))
def test_partial_edge_tiles_copy_exactly(m, n, tm, tn):
    x = np.arange(m * n, dtype=np.int32).reshape(m, n)
    y = np.full_like(x, -1)
    interpret(copy_tiles, x, y, tm, tn, grid=(-(-m // tm), -(-n // tn)))
    assert np.array_equal(x, y)


@pytest.mark.parametrize("mode,expected", [(P.ZERO, 0.0), (P.NEG_ZERO, -0.0),
                                           (P.POS_INF, np.inf), (P.NEG_INF, -np.inf),
                                           (P.UNDETERMINED, 0.0)])
def test_padding_modes(mode, expected):
    got = []

    @ct.kernel
    def k(x):
        got.append(ct.load(x, (1,), (4,), padding_mode=mode))

    interpret(k, np.arange(6, dtype=np.float32), grid=(1,))
    v = got[0].numpy()
    assert v[:2].tolist() == [4.0, 5.0]
    assert np.all(v[2:] == expected) and np.signbit(v[2]) == np.signbit(expected)


def test_nan_padding_and_integer_restriction():
    got = []

    @ct.kernel
    def k(x, mode: ct.Constant):
        got.append(ct.load(x, (0,), (8,), padding_mode=mode))

    interpret(k, np.ones(5, np.float16), P.NAN, grid=(1,))
    assert np.isnan(got[0].numpy()[5:].astype(np.float32)).all()
    with pytest.raises(CompileError, match="floating-point array"):
        interpret(k, np.ones(5, np.int32), P.NAN, grid=(1,))


def test_load_order_and_scalar_tiles():
    got = []

    @ct.kernel
    def k(x, x3):
        got.append(ct.load(x, (1, 0), (1, 4), order="F"))
        got.append(ct.load(x3, (1, 0, 0), (1, 2, 2), order=(0, 2, 1)))
        got.append(ct.load(x, (2, 3), ()))

    x = np.arange(16, dtype=np.int32).reshape(4, 4)
    interpret(k, x, np.arange(8, dtype=np.int32).reshape(2, 2, 2), grid=(1,))
    assert got[0].numpy().tolist() == [[1, 5, 9, 13]]
    assert got[1].numpy().tolist() == [[[4, 6], [5, 7]]]
    assert got[2].shape == () and int(got[2].numpy()) == 11


def test_store_transposed_order_and_scalar_broadcast():
    @ct.kernel
    def k(y):
        ct.store(y, (1, 0), ct.arange(4, dtype=ct.int32).reshape((1, 4)), order="F")
        ct.store(y, (3, 3), 7)

    y = np.zeros((4, 4), np.int32)
    interpret(k, y, grid=(1,))
    assert y[:, 1].tolist() == [0, 1, 2, 3] and y[3, 3] == 7


def test_strided_views_are_written_in_place():
    base = np.zeros((8, 8), np.float32)
    view = base[::2, 1::2]  # non-contiguous 4x4 view
    src = np.arange(16, dtype=np.float32).reshape(4, 4)
    interpret(copy_tiles, src, view, 2, 2, grid=(2, 2))
    assert np.array_equal(base[::2, 1::2], src) and base[1].sum() == 0
    seen = []

    @ct.kernel
    def strides(v):
        seen.append(v.strides)  # run-time int32 scalars: int() is for constants only

    interpret(strides, view, grid=(1,))
    assert [int(s) for s in seen[0]] == [16, 2]


def test_out_of_bounds_tiles_are_launch_errors():
    @ct.kernel
    def entirely_outside(x):
        ct.load(x, (5,), (4,))

    with pytest.raises(LaunchError, match="entirely outside array 'x'"):
        interpret(entirely_outside, np.zeros(8, np.float32), grid=(1,))

    @ct.kernel
    def unchecked(x):
        ct.load(x, (1,), (4,), check_bounds=False)

    with pytest.raises(LaunchError, match="check_bounds=False"):
        interpret(unchecked, np.zeros(6, np.float32), grid=(1,))
    interpret(unchecked, np.zeros(8, np.float32), grid=(1,))


def test_load_store_argument_errors():
    @ct.kernel
    def wrong_rank(x):
        ct.load(x, (0,), (4, 4))

    with pytest.raises(CompileError, match="Expected shape length to be 1"):
        interpret(wrong_rank, np.zeros(8), grid=(1,))

    @ct.kernel
    def float_index(x):
        ct.load(x, (0.5,), (4,))

    with pytest.raises(CompileError, match="integer scalar"):
        interpret(float_index, np.zeros(8), grid=(1,))

    @ct.kernel
    def not_array(x):
        ct.load(ct.zeros((4,), ct.float32), (0,), (4,))

    with pytest.raises(CompileError, match="Expected an array"):
        interpret(not_array, np.zeros(8), grid=(1,))

    @ct.kernel
    def subscript(x):
        return x[0]

    with pytest.raises(CompileError, match="not directly subscriptable"):
        interpret(subscript, np.zeros(8), grid=(1,))

    @ct.kernel
    def bad_order(x):
        ct.load(x, (0,), (4,), memory_order=ct.MemoryOrder.ACQUIRE)

    with pytest.raises(CompileError, match="requires a memory scope"):
        interpret(bad_order, np.zeros(8), grid=(1,))


def test_gather_masks_padding_and_bounds():
    got = []

    @ct.kernel
    def k(x):
        idx = ct.arange(8, dtype=ct.int32) - 2  # -2 .. 5: negatives are out of bounds
        got.append(ct.gather(x, idx, padding_value=-1.0))
        nines = ct.full((8,), 9.0, ct.float32)
        got.append(ct.gather(x, idx, mask=idx % 2 == 0, padding_value=nines))

    x = np.arange(4, dtype=np.float32) * 10
    interpret(k, x, grid=(1,))
    assert got[0].numpy().tolist() == [-1, -1, 0, 10, 20, 30, -1, -1]
    assert got[1].numpy().tolist() == [9, 9, 0, 9, 20, 9, 9, 9]


def test_gather_scatter_2d_broadcast_indices():
    @ct.kernel
    def transpose_by_scatter(x, y):
        r = ct.arange(4, dtype=ct.int32)[:, None]
        c = ct.arange(4, dtype=ct.int32)[None, :]
        ct.scatter(y, (c, r), ct.gather(x, (r, c)))

    x = np.arange(16, dtype=np.int64).reshape(4, 4)
    y = np.zeros_like(x)
    interpret(transpose_by_scatter, x, y, grid=(1,))
    assert np.array_equal(y, x.T)


def test_scatter_skips_masked_and_out_of_bounds_lanes():
    @ct.kernel
    def k(y):
        idx = ct.arange(8, dtype=ct.int32)
        ct.scatter(y, idx, idx + 100, mask=idx != 1)

    y = np.zeros(5, np.int32)
    interpret(k, y, grid=(1,))
    assert y.tolist() == [100, 0, 102, 103, 104]

    @ct.kernel
    def unchecked(y):
        ct.scatter(y, ct.arange(8, dtype=ct.int32), 1, check_bounds=False)

    with pytest.raises(LaunchError, match="index \\(5,\\) is outside"):
        interpret(unchecked, y, grid=(1,))


@pytest.mark.parametrize("op,dtype,ref", [
    ("atomic_add", np.int32, lambda old, u: old + u),
    ("atomic_add", np.float32, lambda old, u: old + u),
    ("atomic_add", np.float16, lambda old, u: old + u),
    ("atomic_max", np.int64, np.maximum), ("atomic_min", np.uint32, np.minimum),
    ("atomic_and", np.int32, np.bitwise_and), ("atomic_or", np.uint64, np.bitwise_or),
    ("atomic_xor", np.int64, np.bitwise_xor), ("atomic_xchg", np.float64, lambda o, u: u),
])
def test_atomics_return_old_values(op, dtype, ref):
    got = []

    @ct.kernel
    def k(x, u):
        upd = ct.load(u, (0,), (4,))
        got.append(getattr(ct, op)(x, ct.arange(4, dtype=ct.int32), upd))

    x = np.array([1, 6, 3, 12], dtype)
    u = np.array([5, 2, 3, 9], dtype)
    before = x.copy()
    interpret(k, x, u, grid=(1,))
    assert np.array_equal(got[0].numpy(), before)
    assert np.array_equal(x, ref(before, u).astype(dtype))


def test_atomic_add_with_repeated_indices_is_serialized():
    got = []

    @ct.kernel
    def histogram(h, v):
        vals = ct.load(v, (ct.bid(0),), (8,))
        got.append(ct.atomic_add(h, vals, 1))

    h = np.zeros(4, np.int32)
    v = np.array([0, 1, 1, 1, 3, 3, 0, 2] * 2, np.int32)
    trace = interpret(histogram, h, v, grid=(2,))
    assert h.tolist() == [4, 6, 2, 4]
    assert got[0].numpy().tolist() == [0, 0, 1, 2, 0, 1, 1, 0]
    assert not trace.has_races  # atomics never race with each other


def test_atomic_cas_and_type_rules():
    got = []

    @ct.kernel
    def k(x):
        idx = ct.arange(4, dtype=ct.int32)
        got.append(ct.atomic_cas(x, idx, 0, 42))

    x = np.array([0, 1, 0, 1], np.int32)
    interpret(k, x, grid=(1,))
    assert got[0].numpy().tolist() == [0, 1, 0, 1] and x.tolist() == [42, 1, 42, 1]

    @ct.kernel
    def bad(x):
        ct.atomic_and(x, 0, 1)

    with pytest.raises(CompileError, match="exactly match the target dtype"):
        interpret(bad, np.zeros(2, np.int64), grid=(1,))
    with pytest.raises(CompileError, match="Unsupported array dtype: int16"):
        interpret(bad, np.zeros(2, np.int16), grid=(1,))


def test_advanced_indexing():
    @ct.kernel
    def k(x, y, col: ct.Constant[int]):
        rows = ct.arange(4, dtype=ct.int32) * 2
        t = ct.load_advanced_indexing(x, (rows, ct.Slice(col, 4)), padding_mode=P.ZERO)
        ct.store_advanced_indexing(y, (rows + 1, ct.Slice(0, 4)), t)

    x = np.arange(64, dtype=np.int32).reshape(8, 8)
    y = np.zeros((8, 4), np.int32)
    interpret(k, x, y, 6, grid=(1,))
    expect = np.zeros((8, 4), np.int32)
    sel = np.zeros((4, 4), np.int32)
    sel[:, :2] = x[::2, 6:8]
    expect[1::2] = sel
    assert np.array_equal(y, expect)

    @ct.kernel
    def two_sparse(x):
        i = ct.arange(4, dtype=ct.int32)
        ct.load_advanced_indexing(x, (i, i))

    with pytest.raises(CompileError, match="exactly one index must be a 1D integer Tile"):
        interpret(two_sparse, x, grid=(1,))


def test_array_slice_views():
    @ct.kernel
    def k(x, y, off):
        sub = x.slice(axis=0, start=off, stop=off + 4)
        ct.store(y, (0,), ct.load(sub, (0,), (4,)))

    y = np.zeros(4, np.int32)
    trace = interpret(k, np.arange(16, dtype=np.int32), y, 8, grid=(1,))
    assert y.tolist() == [8, 9, 10, 11]
    assert trace.regions("x", kind="read")[0].box == ((8, 12),)

    @ct.kernel
    def bad(x):
        x.slice(0, 4, 2)

    with pytest.raises(CompileError, match="greater than or equal to start"):
        interpret(bad, np.zeros(8), grid=(1,))


def test_tiled_views():
    got = []

    @ct.kernel
    def k(x, out, acc):
        tv = x.tiled_view((2, 4))
        got.append(tv.load((1, 0)))
        got.append(x.tiled_view((2, 4), traversal_steps=(1, 4)).load((1, 0)))
        got.append(tv.num_tiles(0))
        ov = out.tiled_view(4)
        for i in range(ov.num_tiles(0)):
            ov.store(i, ct.full((4,), i, ct.int32))
        acc.tiled_view(2).atomic_store_add(1, 5)
        acc.tiled_view((), traversal_steps=3).atomic_store_max(0, 9)

    x = np.arange(16, dtype=np.int32).reshape(4, 4)
    out = np.zeros(10, np.int32)
    acc = np.ones(4, np.int32)
    interpret(k, x, out, acc, grid=(1,))
    assert got[0].numpy().tolist() == [[8, 9, 10, 11], [12, 13, 14, 15]]
    assert got[1].numpy().tolist() == [[4, 5, 6, 7], [8, 9, 10, 11]]
    assert int(got[2].numpy()) == 2
    assert out.tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    assert acc.tolist() == [9, 1, 6, 6]


def test_num_tiles_with_order():
    got = []

    @ct.kernel
    def k(x):
        got.append((ct.num_tiles(x, 0, (4, 8)), ct.num_tiles(x, 0, (4, 8), order="F")))

    interpret(k, np.zeros((42, 64), ml_dtypes.bfloat16), grid=(1,))
    assert [int(v.numpy()) for v in got[0]] == [11, 16]


def _tile_reference(a: np.ndarray, index: tuple, shape: tuple, order: tuple) -> np.ndarray:
    """cuTile's documented tile-space rule: tile axis k spans array axis order[k]."""
    out = np.zeros(shape, a.dtype)
    for pos in np.ndindex(*shape):
        coord = [0] * a.ndim
        for k, d in enumerate(order):
            coord[d] = index[k] * shape[k] + pos[k]
        if all(0 <= c < n for c, n in zip(coord, a.shape)):
            out[pos] = a[tuple(coord)]
    return out


@st.composite
def _tile_case(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 9)) for _ in range(ndim))
    tile = tuple(draw(st.sampled_from([1, 2, 4, 8])) for _ in range(ndim))
    order = tuple(draw(st.permutations(range(ndim))))
    # a tile index inside the tile space, so that at least one element is in bounds
    index = tuple(draw(st.integers(0, -(-shape[order[k]] // tile[k]) - 1))
                  for k in range(ndim))
    return shape, tile, order, index


@fast(40)
@given(case=_tile_case())
def test_random_tile_loads_and_stores_follow_the_tile_space_rule(case):
    shape, tile, order, index = case
    a = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape) + 1
    got = []

    @ct.kernel
    def k(x, y, TILE: ct.Constant, ORDER: ct.Constant, INDEX: ct.Constant):
        t = ct.load(x, INDEX, TILE, order=ORDER, padding_mode=P.ZERO)
        got.append(t)
        ct.store(y, INDEX, t, order=ORDER)

    y = np.zeros_like(a)
    interpret(k, a, y, tile, order, index, grid=(1,))
    ref = _tile_reference(a, index, tile, order)
    assert np.array_equal(got[0].numpy(), ref)
    written = _tile_reference(y, index, tile, order)
    assert np.array_equal(written, ref) and np.count_nonzero(y) == np.count_nonzero(ref)


@fast(40)
@given(data=st.data(), n=st.integers(1, 12), check=st.booleans())
def test_random_gather_scatter(data, n, check):
    idx = np.array(data.draw(st.lists(st.integers(-3, n + 3), min_size=8, max_size=8)),
                   np.int32)
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=8, max_size=8)))
    if not check:
        idx = np.clip(idx, 0, n - 1).astype(np.int32)
    x = np.arange(n, dtype=np.float32) + 1
    y = np.zeros(n, np.float32)
    got = []

    @ct.kernel
    def k(x, y, i, m, CHECK: ct.Constant[bool]):
        ii, mm = ct.load(i, (0,), (8,)), ct.load(m, (0,), (8,))
        v = ct.gather(x, ii, mask=mm, padding_value=-7.0, check_bounds=CHECK)
        got.append(v)
        ct.scatter(y, ii, v, mask=mm, check_bounds=CHECK)

    interpret(k, x, y, idx, mask, check, grid=(1,))
    ok = mask & (idx >= 0) & (idx < n)
    ref = np.where(ok, x[np.clip(idx, 0, n - 1)], -7.0)
    assert np.array_equal(got[0].numpy(), ref)
    expect = np.zeros(n, np.float32)
    expect[idx[ok]] = ref[ok]
    assert np.array_equal(y, expect)


@fast(40)
@given(idx=st.lists(st.integers(0, 5), min_size=8, max_size=8),
       upd=st.lists(st.integers(-9, 9), min_size=8, max_size=8),
       op=st.sampled_from(["atomic_add", "atomic_max", "atomic_xchg", "atomic_xor"]))
def test_random_atomics_match_a_sequential_model(idx, upd, op):
    x = np.arange(6, dtype=np.int64) * 3
    i, u = np.array(idx, np.int32), np.array(upd, np.int64)
    got = []

    @ct.kernel
    def k(x, i, u):
        got.append(getattr(ct, op)(x, ct.load(i, (0,), (8,)), ct.load(u, (0,), (8,))))

    model = x.copy()
    old = []
    f = {"atomic_add": lambda a, b: a + b, "atomic_max": max, "atomic_xchg": lambda a, b: b,
         "atomic_xor": lambda a, b: a ^ b}[op]
    for j, v in zip(idx, upd):
        old.append(int(model[j]))
        model[j] = f(int(model[j]), v)
    interpret(k, x, i, u, grid=(1,))
    assert got[0].numpy().tolist() == old and np.array_equal(x, model)
