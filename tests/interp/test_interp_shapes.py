"""Shape ops and factories against numpy."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import cuda.tile as ct
from tilelab.errors import CompileError

from .harness import fast, run_tiles

SHAPES_3D = st.lists(st.sampled_from([1, 2, 4]), min_size=1, max_size=3).map(tuple)


@fast(25)
@given(data=st.data(), shape=SHAPES_3D)
def test_reshape_permute_transpose_broadcast_expand(data, shape):
    a = data.draw(hnp.arrays(np.int32, shape))
    flat = run_tiles(lambda t: t.reshape((-1,)), a).numpy()
    assert np.array_equal(flat, a.reshape(-1))
    perm = tuple(data.draw(st.permutations(range(a.ndim))))
    assert np.array_equal(run_tiles(lambda t: ct.permute(t, perm), a).numpy(),
                          np.transpose(a, perm))
    if a.ndim >= 2:
        assert np.array_equal(run_tiles(lambda t: ct.transpose(t, 0, -1), a).numpy(),
                              np.swapaxes(a, 0, -1))
    target = (2,) + tuple(4 if d == 1 else d for d in shape)
    assert np.array_equal(run_tiles(lambda t: ct.broadcast_to(t, target), a).numpy(),
                          np.broadcast_to(a, target))
    assert run_tiles(lambda t: ct.expand_dims(t, -1), a).shape == shape + (1,)
    assert run_tiles(lambda t: t[None, ...], a).shape == (1,) + shape


def test_shape_errors_match_cutile():
    a = np.zeros((2, 4), np.float32)
    with pytest.raises(CompileError, match="Cannot reshape"):
        run_tiles(lambda t: t.reshape((3, 3)), a)
    with pytest.raises(CompileError, match="not broadcastable"):
        run_tiles(lambda t: ct.broadcast_to(t, (4, 2)), a)
    with pytest.raises(CompileError, match="Repeated axis"):
        run_tiles(lambda t: ct.permute(t, (0, 0)), a)
    with pytest.raises(CompileError, match="fewer than 2 dimensions"):
        run_tiles(lambda t: ct.transpose(t.reshape((8,))), a)
    with pytest.raises(CompileError, match="not a power of two"):
        run_tiles(lambda t: ct.zeros((3,), ct.float32), a)
    with pytest.raises(CompileError, match="not constant"):
        run_tiles(lambda t: ct.zeros((ct.bid(0),), ct.float32), a)


def test_cat_extract_insert():
    a = np.arange(8, dtype=np.int32).reshape(2, 4)
    both = run_tiles(lambda t: ct.cat((t, t + 10), 0), a).numpy()
    assert np.array_equal(both, np.concatenate([a, a + 10], 0))
    sub = run_tiles(lambda t: ct.extract(t, (1, 1), (1, 2)), a).numpy()
    assert sub.tolist() == [[6, 7]]
    dyn = run_tiles(lambda t: ct.extract(t, (ct.bid(0), 0), (1, 4)), a).numpy()
    assert dyn.tolist() == [[0, 1, 2, 3]]
    ins = run_tiles(lambda t: ct.insert(t, (0, 1), ct.full((2, 2), -1, ct.int32)), a).numpy()
    assert ins.tolist() == [[0, 1, -1, -1], [4, 5, -1, -1]]
    assert run_tiles(lambda t: t.item(), np.array([7], np.int16)).shape == ()
    with pytest.raises(CompileError, match="same dtype"):
        run_tiles(lambda t: ct.cat((t, t.astype(ct.int8)), 0), a)
    with pytest.raises(CompileError, match="power of 2"):
        run_tiles(lambda t: ct.cat((ct.extract(t, (0, 0), (1, 4)), t), 0), a)
    with pytest.raises(CompileError, match="out of bounds"):
        run_tiles(lambda t: ct.extract(t, (2, 0), (1, 4)), a)
    with pytest.raises(CompileError, match="Cannot insert a tile of dtype"):
        run_tiles(lambda t: ct.insert(t, (0, 0), ct.zeros((1, 1), ct.int8)), a)


@fast(20)
@given(dtype=st.sampled_from(["int8", "uint16", "int64", "float16", "bfloat16", "float32",
                              "float64"]),
       start=st.integers(-5, 5), step=st.integers(1, 3), n=st.sampled_from([1, 2, 8, 16]))
def test_factories(dtype, start, step, n):
    dt = getattr(ct, dtype)
    r = run_tiles(lambda t: ct.arange(n, dtype=dt, start=start, step=step), np.zeros(1))
    assert r.dtype == dt
    assert r.numpy().astype(np.float64).tolist() == [float(start + i * step) for i in range(n)] \
        or dtype.startswith("u")
    f = run_tiles(lambda t: ct.full((2, n), 3, dt), np.zeros(1))
    assert f.shape == (2, n) and np.all(f.numpy().astype(np.float64) == 3)
    assert np.all(run_tiles(lambda t: ct.zeros((n,), dt), np.zeros(1)).numpy() == 0)
    assert np.all(run_tiles(lambda t: ct.ones(n, dt), np.zeros(1)).numpy() == 1)


def test_full_wraps_and_rounds_constants_and_accepts_runtime_scalars():
    assert run_tiles(lambda t: ct.full((2,), 300, ct.int8), np.zeros(1)).numpy().tolist() == \
        [44, 44]
    assert run_tiles(lambda t: ct.full((1,), 0.1, ct.bfloat16), np.zeros(1)).numpy()[0] == \
        ml_dtypes.bfloat16(0.1)
    r = run_tiles(lambda t: ct.full((4,), t.item(), ct.float32), np.array([2], np.int32))
    assert r.numpy().tolist() == [2.0] * 4


def test_astile():
    r = run_tiles(lambda t: ct.astile(((1, 2), (3, 4)), dtype=ct.float16), np.zeros(1))
    assert r.dtype == ct.float16 and r.numpy().tolist() == [[1, 2], [3, 4]]
    r = run_tiles(lambda t: ct.astile((ct.bid(0), ct.bid(0) + 1), dtype=ct.int64), np.zeros(1))
    assert r.numpy().tolist() == [0, 1]
    with pytest.raises(CompileError, match="not a power of 2"):
        run_tiles(lambda t: ct.astile((1, 2, 3), dtype=ct.int32), np.zeros(1))
    with pytest.raises(CompileError, match="non-uniform"):
        run_tiles(lambda t: ct.astile(((1, 2), 3), dtype=ct.int32), np.zeros(1))
