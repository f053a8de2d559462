"""Partitions of rank 4 and 5: the tile grid linearised onto a 1-D launch grid.

The motivating kernel is the head permutation of attention, out[b, s, h, :] = x[b, h, s, :]
on (batch, heads, seq, dim) tensors. Its raw cuTile version raced (the store swapped in b
for h, so H blocks wrote one tile); written with a rank-4 ``tl.Out`` partition, the
destination of every store is fixed by the partition, so it is deterministic.

The lowering unravels ``ct.bid(0)`` (or the persistent tile number) with the device
helpers ``unravel_4d`` / ``unravel_5d`` / ``grouped_tile_index_4d`` /
``grouped_tile_index_5d``; the host mirror of ownership uses the same helpers.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import tilelab as tl

ct = pytest.importorskip("cuda.tile", reason="cuda-tile (cuTile Python) is not installed")


SCHEDULES = [tl.row_major, tl.grouped(2), tl.grouped(8)]
PERSISTENT = [tl.persistent(num_blocks=1), tl.persistent(num_blocks=5),
              tl.persistent(num_blocks=7, group_m=2)]


# ---------------------------------------------------------------- kernels

@tl.kernel
def head_permute(out: tl.Out, x: tl.In):
    """out[b, s, h, :] = x[b, h, s, :]: each block owns one (1, BS, 1, BD) tile of out.

    The block reads the matching (1, 1, BS, BD) tile of x (heads and seq swapped in the
    index of the load, which may read anything) and stores to its own tile of out.
    """
    b, s, h, d = out.tile_index
    _, bs, _, bd = out.tile_shape
    t = ct.load(x, index=(b, h, s, d), shape=(1, 1, bs, bd),
                padding_mode=ct.PaddingMode.ZERO)
    out.store(ct.permute(t, (0, 2, 1, 3)))


@tl.kernel
def head_permute_persistent(out: tl.Out, x: tl.In):
    """The head permutation with a fixed number of blocks looping over out's tiles."""
    _, bs, _, bd = out.tile_shape
    for t in out.tiles():
        b, s, h, d = out.tile_index_of(t)
        tile = ct.load(x, index=(b, h, s, d), shape=(1, 1, bs, bd),
                       padding_mode=ct.PaddingMode.ZERO)
        out.store(ct.permute(tile, (0, 2, 1, 3)), at=t)


@tl.kernel
def axpy5(y: tl.InOut, x: tl.In, alpha: float):
    """y += alpha * x on rank-5 tensors, one tile per block."""
    y.store(y.load() + alpha * tl.load_like(x, y))


@tl.kernel
def axpy5_persistent(y: tl.InOut, x: tl.In, alpha: float):
    for t in y.tiles():
        y.store(y.load(at=t) + alpha * tl.load_like(x, y, at=t), at=t)


@tl.kernel
def copy_and_sum(y: tl.Out, s: tl.Out, x: tl.In):
    """y = x (rank 4, one (1, 1, S, D) tile per block) and s[b, h] = sum of x[b, h].

    ``s`` is a rank-2 partition sharing y's grid (B, H, 1, 1): it takes the leading two
    tile coordinates of y's tile.
    """
    t = tl.load_like(x, y)
    y.store(t)
    s.store(ct.reshape(ct.sum(ct.sum(t, axis=3), axis=2), (1, 1)))


def _x(shape, seed=0):
    rng = np.random.default_rng(seed)
    return tl.tensor(rng.standard_normal(shape).astype(np.float32), device="cpu")


def _element_owners(p, num_blocks=None):
    """The host mirror at element level: per element of p's tensor, its owning block."""
    out = np.full(p.tensor.shape, -1, np.int64)
    for t in itertools.product(*(range(g) for g in p.grid)):
        out[p.tile_of(t)] = p.owner(t, num_blocks)
    return out


# ---------------------------------------------------------------- no lowering needed

def test_the_racy_head_permutation_cannot_be_written_safely():
    with pytest.raises(tl.SafetyError):
        @tl.kernel
        def head_permute_bad(out: tl.Out, x: tl.In):
            b, s, h, d = out.tile_index
            t = ct.load(x, index=(b, h, s, d), shape=(1, 1, 4, 8))
            ct.store(out, index=(b, s, b, d), tile=ct.permute(t, (0, 2, 1, 3)))


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_rank_4_partitions_launch_a_1d_grid(schedule):
    x = tl.spec((2, 3, 12, 16), "f32")
    out = tl.spec((2, 12, 3, 16), "f32").partition((1, 8, 1, 8), schedule=schedule)
    assert out.grid == (2, 2, 3, 2)
    spec = head_permute.definition.specialize((out, x))
    assert spec.grid() == (24, 1, 1)
    assert spec.plan.grid_rank == 4


def test_rank_5_and_persistent_launch_grids():
    y = tl.spec((2, 3, 2, 8, 8), "f32").partition((1, 2, 1, 4, 4))
    assert y.grid == (2, 2, 2, 2, 2)
    spec = axpy5.definition.specialize((y, tl.spec((2, 3, 2, 8, 8), "f32"), 2.0))
    assert spec.grid() == (32, 1, 1)
    yp = tl.spec((2, 3, 2, 8, 8), "f32").partition((1, 2, 1, 4, 4),
                                                    schedule=tl.persistent())
    spec = axpy5_persistent.definition.specialize((yp, tl.spec((2, 3, 2, 8, 8), "f32"), 2.0))
    assert spec.grid(num_sms=132) == (32, 1, 1) and spec.grid(num_sms=8) == (8, 1, 1)


def test_lower_rank_partition_shares_a_rank_4_grid():
    B, H, S, D = 2, 3, 8, 16
    y = tl.spec((B, H, S, D), "f32").partition((1, 1, S, D))
    s = tl.spec((B, H), "f32").partition((1, 1))
    spec = copy_and_sum.definition.specialize((y, s, tl.spec((B, H, S, D), "f32")))
    assert spec.grid() == (B * H, 1, 1) and dict(spec.plan.ranks) == {"y": 4, "s": 2}


# ---------------------------------------------------------------- end to end (CPU)

@pytest.mark.parametrize("schedule", SCHEDULES, ids=str)
def test_head_permutation_is_deterministic(schedule):
    B, H, S, D = 2, 3, 12, 16          # S is not a multiple of the seq tile: edge tiles
    x = _x((B, H, S, D))
    expected = x.numpy().transpose(0, 2, 1, 3)
    results = []
    for order, seed in [("sequential", None), ("shuffled", 1), ("shuffled", 2)]:
        out = tl.full((B, S, H, D), -7.0, dtype="float32", device="cpu")
        p = out.partition((1, 8, 1, 8), schedule=schedule)
        trace = tl.interpret(head_permute, p, x, order=order, seed=seed)
        assert not trace.has_races, trace.race_report()
        assert trace.grid == (p.num_tiles, 1, 1)
        # the device (the lowered code, interpreted) and the host mirror agree on owners
        np.testing.assert_array_equal(trace.owners("out"), _element_owners(p))
        np.testing.assert_array_equal(out.numpy(), expected)
        results.append(out.numpy().copy())
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])


@pytest.mark.parametrize("schedule", PERSISTENT, ids=str)
def test_persistent_head_permutation_is_deterministic(schedule):
    B, H, S, D = 2, 3, 12, 16
    x = _x((B, H, S, D), seed=3)
    expected = x.numpy().transpose(0, 2, 1, 3)
    for order, seed in [("sequential", None), ("shuffled", 4)]:
        out = tl.zeros((B, S, H, D), dtype="float32", device="cpu")
        p = out.partition((1, 8, 1, 8), schedule=schedule)
        trace = tl.interpret(head_permute_persistent, p, x, order=order, seed=seed)
        assert not trace.has_races, trace.race_report()
        assert trace.grid == (p.num_blocks(), 1, 1)
        np.testing.assert_array_equal(trace.owners("out"), _element_owners(p))
        np.testing.assert_array_equal(out.numpy(), expected)


def test_head_permutation_through_a_plain_launch():
    B, H, S, D = 2, 4, 8, 8
    x = _x((B, H, S, D), seed=5)
    out = tl.empty((B, S, H, D), dtype="float32", device="cpu")
    head_permute(out.partition((1, 4, 1, 8)), x)
    np.testing.assert_array_equal(out.numpy(), x.numpy().transpose(0, 2, 1, 3))


@pytest.mark.parametrize("schedule", [tl.row_major, tl.grouped(2)], ids=str)
def test_rank_5_inout(schedule):
    shape = (2, 3, 2, 5, 12)
    x, y = _x(shape, 1), _x(shape, 2)
    want = y.numpy() + 0.5 * x.numpy()
    p = y.partition((1, 2, 2, 4, 8), schedule=schedule)
    trace = tl.interpret(axpy5, p, x, 0.5, order="shuffled", seed=0)
    assert not trace.has_races, trace.race_report()
    np.testing.assert_array_equal(trace.owners("y"), _element_owners(p))
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("schedule", [tl.persistent(num_blocks=3),
                                      tl.persistent(num_blocks=4, group_m=2)], ids=str)
def test_rank_5_persistent_inout(schedule):
    shape = (2, 3, 2, 5, 12)
    x, y = _x(shape, 1), _x(shape, 2)
    want = y.numpy() + 0.5 * x.numpy()
    p = y.partition((1, 2, 2, 4, 8), schedule=schedule)
    trace = tl.interpret(axpy5_persistent, p, x, 0.5, order="shuffled", seed=0)
    assert not trace.has_races, trace.race_report()
    np.testing.assert_array_equal(trace.owners("y"), _element_owners(p, p.num_blocks()))
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("schedule", [tl.row_major, tl.grouped(2)], ids=str)
def test_lower_rank_partition_takes_the_leading_tile_coordinates(schedule):
    B, H, S, D = 2, 3, 8, 16
    x = _x((B, H, S, D), seed=6)
    y = tl.zeros((B, H, S, D), dtype="float32", device="cpu")
    s = tl.zeros((B, H), dtype="float32", device="cpu")
    trace = tl.interpret(copy_and_sum, y.partition((1, 1, S, D), schedule=schedule),
                         s.partition((1, 1), schedule=schedule), x, order="shuffled", seed=0)
    assert not trace.has_races, trace.race_report()
    np.testing.assert_array_equal(y.numpy(), x.numpy())
    np.testing.assert_allclose(s.numpy(), x.numpy().sum(axis=(2, 3)), rtol=1e-5)
    # block k owns y's tile (b, h, 0, 0) = unravel(k) and s's tile (b, h)
    np.testing.assert_array_equal(trace.owners("s"), np.arange(B * H).reshape(B, H))


def test_lowered_source_unravels_the_block_id():
    x = tl.spec((2, 3, 12, 16), "f32")
    out = tl.spec((2, 12, 3, 16), "f32")
    for schedule, helper in [(tl.row_major, "unravel_4d("),
                             (tl.grouped(4), "grouped_tile_index_4d(")]:
        src = head_permute.lowered_source(out.partition((1, 8, 1, 8), schedule=schedule), x)
        assert helper in src and "bid(0)" in src
        assert "bid(1)" not in src and "bid(2)" not in src and "bid(3)" not in src
    src = head_permute_persistent.lowered_source(
        out.partition((1, 8, 1, 8), schedule=tl.persistent(4)), x)
    assert "unravel_4d(" in src
    y = tl.spec((2, 3, 2, 8, 8), "f32")
    src = axpy5_persistent.lowered_source(
        y.partition((1, 2, 1, 4, 4), schedule=tl.persistent(4, group_m=2)), y, 1.0)
    assert "grouped_tile_index_5d(" in src


@pytest.mark.parametrize("schedule", [tl.row_major, tl.grouped(4), tl.persistent(8, 2)],
                         ids=str)
@pytest.mark.toolchain
def test_head_permutation_compiles_to_a_cubin(schedule):
    x = tl.spec((2, 32, 1024, 128), "bf16")
    out = tl.spec((2, 1024, 32, 128), "bf16").partition((1, 64, 1, 128), schedule=schedule)
    kernel = head_permute_persistent if schedule.persistent else head_permute
    art = kernel.compile(out, x, arch="sm_90")
    assert art.cubin and art.tileir
