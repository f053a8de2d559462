"""Partitions: tile grids, regions, and which block owns which tile under each schedule."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilelab.runtime.tensor as T
from tilelab.compiler import tile_index as tiles
from tilelab.compiler.language import grouped, persistent, row_major
from tilelab.compiler.signature import PartitionSpec, spec
from tilelab.runtime.partition import Partition

CPU = "cpu"


def test_grid_tile_shape_and_spec():
    t = T.zeros((300, 200), dtype="bf16", device=CPU)
    p = t.partition((128, 64))
    assert isinstance(p, Partition) and p.tensor is t and p.schedule == row_major
    assert p.tile_shape == (128, 64) and p.grid == (3, 4) and p.num_tiles == 12
    s = p.__tilelab_spec__()
    assert isinstance(s, PartitionSpec) and s is p.__tilelab_spec__()
    assert s == spec((300, 200), "bf16").partition((128, 64))
    assert s.grid == p.grid
    assert T.zeros(1000, device=CPU).partition(256).grid == (4,)


def test_partition_spec_carries_the_view():
    t = T.zeros((64, 64), device=CPU)[:, 1::2]
    s = t.partition((16, 16), schedule=grouped(4)).__tilelab_spec__()
    assert s.array.strides == (64, 2) and s.array.shape == (64, 32)
    assert s.schedule == grouped(4)


@pytest.mark.parametrize("tile, exc, match", [
    ((100, 64), ValueError, "power of two"), ((64,), ValueError, "dims"),
    ((0, 64), ValueError, "power of two"), ("x", TypeError, "tile shape"),
    ((4.0, 4), TypeError, "tile shape"),
])
def test_bad_tile_shapes(tile, exc, match):
    with pytest.raises(exc, match=match):
        T.zeros((8, 8), device=CPU).partition(tile)


def test_rank_limits_and_bad_schedule():
    with pytest.raises(ValueError, match="rank 6 are not supported.*rank 1 to 5"):
        T.zeros((2,) * 6, device=CPU).partition((1,) * 6)
    assert T.zeros((2,) * 4, device=CPU).partition((1,) * 4).grid == (2,) * 4
    assert T.zeros((2,) * 5, device=CPU).partition((1,) * 5).grid == (2,) * 5
    with pytest.raises(TypeError, match="schedule"):
        T.zeros(8, device=CPU).partition(4, schedule="grouped")


def test_tile_of_clips_at_edges_and_view():
    t = T.arange(10 * 7, dtype="int32", device=CPU).reshape(10, 7)
    p = t.partition((4, 4))
    assert p.grid == (3, 2)
    assert p.tile_of((0, 0)) == (slice(0, 4), slice(0, 4))
    assert p.tile_of((2, 1)) == (slice(8, 10), slice(4, 7))
    np.testing.assert_array_equal(p.view((2, 1)).numpy(), t.numpy()[8:10, 4:7])
    assert T.zeros(10, device=CPU).partition(4).tile_of(2) == (slice(8, 10),)
    for bad in [(3, 0), (0, 2), (-1, 0), (0,)]:
        with pytest.raises(IndexError, match="outside the tile grid"):
            p.tile_of(bad)


def test_row_major_order_and_owner():
    p = T.zeros((8, 12), device=CPU).partition((4, 4))
    order = p.order()
    assert order == list(itertools.product(range(2), range(3)))
    assert [p.owner(t) for t in order] == list(range(6))
    assert p.num_blocks() == 6 and p.tiles_of(4) == [(1, 1)]
    np.testing.assert_array_equal(p.owners(), [[0, 1, 2], [3, 4, 5]])


def test_grouped_matches_the_device_functions():
    p = T.zeros((8 * 16, 5 * 16), device=CPU).partition((16, 16), schedule=grouped(3))
    gm, gn = p.grid
    expect = [tiles.grouped_tile_index(b, gm, gn, 3) for b in range(gm * gn)]
    assert p.order() == expect
    assert sorted(p.order()) == sorted(itertools.product(range(gm), range(gn)))
    for b, t in enumerate(expect):
        assert p.owner(t) == b


def test_grouped_3d_batches_by_launch_grid_y():
    p = T.zeros((2, 4, 4), device=CPU).partition((1, 2, 1), schedule=grouped(2))
    g0, g1, g2 = p.grid
    assert p.grid == (2, 2, 4)
    per = g1 * g2
    for b in range(p.num_tiles):
        assert p.order()[b] == tiles.grouped_tile_index_3d(b // per, b % per, g1, g2, 2)
    assert sorted(p.order()) == sorted(itertools.product(range(g0), range(g1), range(g2)))


def test_grouped_rank_1_is_row_major():
    p = T.zeros(64, device=CPU).partition(8, schedule=grouped(4))
    assert p.order() == [(i,) for i in range(8)]


def test_persistent_round_robin():
    p = T.zeros((16, 16), device=CPU).partition((4, 4), schedule=persistent(num_blocks=5))
    assert p.num_blocks() == 5
    order = p.order()
    assert order == [tiles.unravel_2d(k, 4) for k in range(16)]
    assert [p.owner(t) for t in order] == [k % 5 for k in range(16)]
    assert p.tiles_of(1) == [order[1], order[6], order[11]]
    owners = p.owners()
    assert owners.shape == (4, 4) and sorted(np.bincount(owners.ravel())) == [3, 3, 3, 3, 4]
    with pytest.raises(IndexError, match="block 5"):
        p.tiles_of(5)


def test_persistent_block_counts():
    p = T.zeros(64, device=CPU).partition(16, schedule=persistent())
    assert p.num_blocks(2) == 2
    assert p.num_blocks(100) == 4            # never more blocks than tiles
    assert 1 <= p.num_blocks() <= 4          # default: one per core on the CPU
    fixed = T.zeros(64, device=CPU).partition(16, schedule=persistent(num_blocks=3))
    assert fixed.num_blocks(2) == 3          # the schedule's own count wins


def test_persistent_grouped_and_3d_orders():
    p = T.zeros((32, 32), device=CPU).partition((8, 8), schedule=persistent(2, group_m=2))
    assert p.order() == [tiles.grouped_tile_index(k, 4, 4, 2) for k in range(16)]
    q = T.zeros((2, 8, 8), device=CPU).partition((1, 4, 4), schedule=persistent(3))
    assert q.order() == [tiles.unravel_3d(k, 2, 2) for k in range(8)]
    r = T.zeros((2, 8, 8), device=CPU).partition((1, 4, 4), schedule=persistent(3, 2))
    assert r.order() == [tiles.grouped_tile_index_3d(k // 4, k % 4, 2, 2, 2)
                         for k in range(8)]


def test_empty_tensor_has_no_tiles():
    p = T.zeros((0, 8), device=CPU).partition((4, 4))
    assert p.grid == (0, 2) and p.num_tiles == 0 and p.order() == []


def test_repr():
    r = repr(T.zeros((300, 200), device=CPU).partition((128, 64), schedule=grouped(8)))
    assert "(3, 4)" in r and "12 tiles" in r and "Grouped" in r


_schedules = st.sampled_from([row_major, grouped(1), grouped(2), grouped(3), persistent(1),
                              persistent(3), persistent(4, 2)])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(1, 20), min_size=1, max_size=3),
       st.lists(st.sampled_from([1, 2, 4, 8]), min_size=3, max_size=3), _schedules)
def test_tiles_cover_every_element_once(shape, tile, schedule):
    shape = tuple(shape)
    tile = tuple(tile[:len(shape)])
    p = T.zeros(shape, dtype="int8", device=CPU).partition(tile, schedule=schedule)
    order = p.order()
    assert len(order) == p.num_tiles == len(set(order))     # each tile handed out once
    cover = np.zeros(shape, dtype=np.int64)
    for t in order:
        cover[p.tile_of(t)] += 1
    assert (cover == 1).all()                                # disjoint and complete
    owners = p.owners()
    assert owners.min() >= 0 and owners.max() < p.num_blocks()
    for t in order[:10]:
        assert t in p.tiles_of(p.owner(t))


# ---------------------------------------------------------------- rank 4 and 5
# Ranks 4 and 5 launch a 1-D grid of prod(grid) blocks (persistent: num_blocks) and the
# lowered code unravels the block id (or the loop's tile number) with
# tilelab.compiler.tile_index.unravel_4d/5d, or grouped_tile_index_4d/5d for group_m.


def _all_tiles(grid):
    return list(itertools.product(*(range(g) for g in grid)))


def _check_exactly_once(p, num_blocks=None):
    """Every tile owned by exactly one block; every block's tiles listed once."""
    nb = p.num_blocks(num_blocks)
    owned = [t for b in range(nb) for t in p.tiles_of(b, nb)]
    assert sorted(owned) == _all_tiles(p.grid)            # disjoint and complete
    owners = p.owners(nb)
    assert owners.shape == p.grid
    for b in range(nb):
        for t in p.tiles_of(b, nb):
            assert owners[t] == b == p.owner(t, nb)
    return owners


def test_unravel_4d_5d_are_row_major():
    for grid in [(2, 3, 4, 5), (1, 1, 1, 7), (3, 1, 2, 1)]:
        got = [tiles.unravel_4d(k, *grid[1:]) for k in range(int(np.prod(grid)))]
        assert got == _all_tiles(grid)
    for grid in [(2, 3, 1, 4, 2), (1, 2, 2, 2, 3)]:
        got = [tiles.unravel_5d(k, *grid[1:]) for k in range(int(np.prod(grid)))]
        assert got == _all_tiles(grid)


@pytest.mark.parametrize("grid", [(2, 3, 5, 4), (1, 2, 3, 1), (3, 2, 1, 6)])
@pytest.mark.parametrize("gm", [1, 2, 3, 8])
def test_grouped_4d_groups_the_last_two_dims_within_each_batch(grid, gm):
    g0, g1, gm_, gn = grid
    per = gm_ * gn
    order = [tiles.grouped_tile_index_4d(k, g1, gm_, gn, gm) for k in range(g0 * g1 * per)]
    assert sorted(order) == _all_tiles(grid)
    for k, (b0, b1, m, n) in enumerate(order):
        # the batch is the block id's quotient, unravelled row-major; (m, n) is the 2-D
        # grouped order of the remainder, exactly as grouped_tile_index_3d treats its batch
        assert (b0, b1) == divmod(k // per, g1)
        assert (m, n) == tiles.grouped_tile_index(k % per, gm_, gn, gm)
        assert tiles.grouped_tile_index_3d(b0 * g1 + b1, k % per, gm_, gn, gm)[1:] == (m, n)


@pytest.mark.parametrize("grid", [(2, 2, 3, 5, 4), (1, 3, 1, 2, 2), (2, 1, 2, 1, 3)])
@pytest.mark.parametrize("gm", [1, 2, 4])
def test_grouped_5d_groups_the_last_two_dims_within_each_batch(grid, gm):
    g0, g1, g2, gm_, gn = grid
    per = gm_ * gn
    n = int(np.prod(grid))
    order = [tiles.grouped_tile_index_5d(k, g1, g2, gm_, gn, gm) for k in range(n)]
    assert sorted(order) == _all_tiles(grid)
    for k, t in enumerate(order):
        assert t[:3] == tiles.unravel_3d(k // per, g1, g2)
        assert t[3:] == tiles.grouped_tile_index(k % per, gm_, gn, gm)


def test_rank_4_row_major_owners():
    p = T.zeros((2, 6, 3, 16), device=CPU).partition((1, 4, 1, 8))
    assert p.grid == (2, 2, 3, 2) and p.num_tiles == 24 and p.num_blocks() == 24
    assert p.order() == _all_tiles(p.grid)
    assert p.order() == [tiles.unravel_4d(k, 2, 3, 2) for k in range(24)]
    owners = _check_exactly_once(p)
    np.testing.assert_array_equal(owners.ravel(), np.arange(24))   # block id = row-major
    assert p.tiles_of(13) == [(1, 0, 0, 1)]
    assert p.tile_of((1, 1, 2, 1)) == (slice(1, 2), slice(4, 6), slice(2, 3), slice(8, 16))


def test_rank_5_row_major_owners():
    p = T.zeros((2, 3, 2, 5, 8), device=CPU).partition((1, 2, 2, 4, 4))
    assert p.grid == (2, 2, 1, 2, 2) and p.num_tiles == 16
    assert p.order() == [tiles.unravel_5d(k, 2, 1, 2, 2) for k in range(16)]
    assert p.order() == _all_tiles(p.grid)
    _check_exactly_once(p)


def test_rank_4_grouped_matches_the_device_functions():
    p = T.zeros((2, 3, 5 * 16, 4 * 16), device=CPU).partition((1, 1, 16, 16),
                                                               schedule=grouped(2))
    g = p.grid
    assert g == (2, 3, 5, 4) and p.num_blocks() == 120
    expect = [tiles.grouped_tile_index_4d(k, g[1], g[2], g[3], 2) for k in range(120)]
    assert p.order() == expect
    assert p.order()[:4] == [(0, 0, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1), (0, 0, 1, 1)]
    assert p.order()[20] == (0, 1, 0, 0)                # the next batch starts at 5 * 4
    owners = _check_exactly_once(p)
    for k, t in enumerate(expect):
        assert owners[t] == k


def test_rank_5_grouped_matches_the_device_functions():
    p = T.zeros((2, 2, 3, 48, 32), device=CPU).partition((1, 1, 1, 16, 16),
                                                         schedule=grouped(2))
    g = p.grid
    assert g == (2, 2, 3, 3, 2)
    expect = [tiles.grouped_tile_index_5d(k, g[1], g[2], g[3], g[4], 2)
              for k in range(p.num_tiles)]
    assert p.order() == expect
    _check_exactly_once(p)


@pytest.mark.parametrize("shape, tile", [((2, 3, 8, 8), (1, 1, 4, 2)),
                                         ((2, 2, 3, 8, 8), (1, 1, 2, 4, 2))])
@pytest.mark.parametrize("gm", [None, 2])
@pytest.mark.parametrize("num_blocks", [1, 5, 7, 1000])
def test_rank_4_5_persistent_round_robin(shape, tile, gm, num_blocks):
    p = T.zeros(shape, device=CPU).partition(tile, schedule=persistent(num_blocks, gm))
    g = p.grid
    nb = p.num_blocks()
    assert nb == min(num_blocks, p.num_tiles)
    unravel = tiles.unravel_4d if len(g) == 4 else tiles.unravel_5d
    group = tiles.grouped_tile_index_4d if len(g) == 4 else tiles.grouped_tile_index_5d
    expect = [group(k, *g[1:], gm) if gm else unravel(k, *g[1:])
              for k in range(p.num_tiles)]
    assert p.order() == expect
    # the loop 'for t in range(bid, num_tiles, num_blocks)' gives block b tiles b, b+nb, ...
    for b in range(nb):
        assert p.tiles_of(b) == expect[b::nb]
    owners = _check_exactly_once(p)
    assert sorted(np.bincount(owners.ravel(), minlength=nb)) == sorted(
        len(range(b, p.num_tiles, nb)) for b in range(nb))


def test_rank_4_5_grouped_1_and_persistent_group_1_are_row_major():
    for shape in [(2, 3, 4, 5), (2, 1, 3, 4, 5)]:
        ones = (1,) * len(shape)
        rm = T.zeros(shape, device=CPU).partition(ones).order()
        assert T.zeros(shape, device=CPU).partition(ones, schedule=grouped(1)).order() == rm
        assert T.zeros(shape, device=CPU).partition(
            ones, schedule=persistent(3, group_m=1)).order() == rm


def test_rank_4_5_specs_and_launch_grids():
    from tilelab.compiler.specialize import MAX_GRID_X, Specialization

    def grid_of(part, num_sms=None):
        s = Specialization(None, (), (), (), part.schedule, part)  # type: ignore[arg-type]
        return s.grid(num_sms)

    a = spec((2, 3, 64, 64), "f32")
    for sched in (row_major, grouped(4)):
        p = a.partition((1, 1, 16, 32), schedule=sched)
        assert p.grid == (2, 3, 4, 2) and grid_of(p) == (48, 1, 1)
    assert grid_of(a.partition((1, 1, 16, 32), schedule=persistent())) == (1, 1, 1)
    assert grid_of(a.partition((1, 1, 16, 32), schedule=persistent()), 132) == (48, 1, 1)
    assert grid_of(a.partition((1, 1, 16, 32), schedule=persistent()), 8) == (8, 1, 1)
    b = spec((2, 2, 3, 5, 7), "bf16").partition((1, 1, 1, 4, 4), schedule=grouped(2))
    assert grid_of(b) == (2 * 2 * 3 * 2 * 2, 1, 1)
    # rank <= 3 keeps its own grids
    assert grid_of(spec((2, 64, 64), "f32").partition((1, 16, 32))) == (2, 4, 2)
    assert grid_of(spec((2, 64, 64), "f32").partition((1, 16, 32), grouped(2))) == (8, 2, 1)
    # a 1-D grid holds at most MAX_GRID_X blocks
    huge = spec((2**16, 2**16, 2, 1), "int8").partition((1, 1, 1, 1))
    assert huge.num_tiles > MAX_GRID_X
    from tilelab.errors import LaunchError
    with pytest.raises(LaunchError, match="rank 4 launches one block per tile"):
        grid_of(huge)
    assert grid_of(spec((2**16, 2**16, 2, 1), "int8").partition(
        (1, 1, 1, 1), schedule=persistent()), 132) == (132, 1, 1)


_schedules45 = st.sampled_from([row_major, grouped(1), grouped(2), grouped(3), grouped(8),
                                persistent(1), persistent(3), persistent(4, 2),
                                persistent(7, 3)])


@settings(max_examples=120, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=4, max_size=5),
       st.lists(st.sampled_from([1, 2, 4]), min_size=5, max_size=5), _schedules45)
def test_rank_4_5_tiles_cover_every_element_once(shape, tile, schedule):
    shape = tuple(shape)
    tile = tuple(tile[:len(shape)])
    p = T.zeros(shape, dtype="int8", device=CPU).partition(tile, schedule=schedule)
    order = p.order()
    assert len(order) == p.num_tiles == len(set(order))     # each tile handed out once
    cover = np.zeros(shape, dtype=np.int64)
    for t in order:
        cover[p.tile_of(t)] += 1
    assert (cover == 1).all()                                # disjoint and complete
    _check_exactly_once(p)
