"""Partitions: tile grids, regions, and which block owns which tile under each schedule."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilelab.runtime.tensor as T
from tilelab.compiler import device as tiles
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
    with pytest.raises(ValueError, match="rank 4"):
        T.zeros((2, 2, 2, 2), device=CPU).partition((1, 1, 1, 1))
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
