"""Race detection: races are found with readable reports, safe kernels report nothing."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import cuda.tile as ct
import tilelab.compiler.tile_index as device
from tilelab.errors import LaunchError
from tilelab.interp import interpret

from .test_interp_kernels import gemm, persistent_scale, softmax, vector_add


@ct.kernel
def head_permutation(q, out, D: ct.Constant[int]):
    """(B, H, S, D) -> (B, S, H, D), but the store swaps in b for h: H blocks collide."""
    b, h = ct.bid(0), ct.bid(1)
    t = ct.load(q, (b, h, 0, 0), (1, 1, 4, D))
    t = ct.permute(t, (0, 2, 1, 3))
    ct.store(out, (b, 0, b, 0), t)


@ct.kernel
def head_permutation_fixed(q, out, D: ct.Constant[int]):
    b, h = ct.bid(0), ct.bid(1)
    t = ct.load(q, (b, h, 0, 0), (1, 1, 4, D))
    ct.store(out, (b, 0, h, 0), ct.permute(t, (0, 2, 1, 3)))


def test_head_permutation_bug_is_a_write_write_race():
    B, H, S, D = 1, 4, 4, 8
    q = np.random.default_rng(0).standard_normal((B, H, S, D)).astype(np.float32)
    out = np.zeros((B, S, H, D), np.float32)
    trace = interpret(head_permutation, q, out, D, grid=(B, H))
    assert trace.has_races
    race = trace.races[0]
    assert race.arg == "out" and race.kind == "write-write"
    assert race.blocks == ((0, 0, 0), (0, 1, 0))
    assert race.count == S * D and race.examples[0] == (0, 0, 0, 0)
    assert race.locations[0].line == race.locations[1].line
    assert "ct.store(out, (b, 0, b, 0), t)" in race.locations[1].source_line()
    assert {r.blocks[1] for r in trace.races} == {(0, 1, 0), (0, 2, 0), (0, 3, 0)}
    text = str(race)
    assert text.startswith("write-write race on 'out': blocks (0, 0, 0) and (0, 1, 0) both "
                           "write 32 elements, e.g. out[0, 0, 0, 0]")
    with pytest.raises(LaunchError) as info:
        trace.raise_on_race()
    msg = str(info.value)
    assert "3 race(s) in kernel 'head_permutation'" in msg
    assert "ct.store(out, (b, 0, b, 0), t)" in msg and "hint:" in msg

    fixed = np.zeros_like(out)
    ok = interpret(head_permutation_fixed, q, fixed, D, grid=(B, H))
    assert not ok.has_races
    assert np.array_equal(fixed, q.transpose(0, 2, 1, 3))
    ok.raise_on_race()


@ct.kernel
def neighbour_read(x, TILE: ct.Constant[int]):
    """Each block adds its right neighbour's tile into its own tile: read-write race."""
    b = ct.bid(0)
    if b + 1 < ct.num_blocks(0):
        right = ct.load(x, (b + 1,), (TILE,))
        ct.store(x, (b,), ct.load(x, (b,), (TILE,)) + right)


@pytest.mark.parametrize("order", ["sequential", "shuffled"])
def test_read_write_race_is_found_in_any_order(order):
    x = np.arange(64, dtype=np.float32)
    trace = interpret(neighbour_read, x, 16, grid=(4,), order=order, seed=5)
    kinds = {r.kind for r in trace.races}
    assert kinds == {"read-write"}
    pairs = {frozenset((r.blocks[0][0], r.blocks[1][0])) for r in trace.races}
    assert pairs == {frozenset((0, 1)), frozenset((1, 2))}  # block 3 does nothing
    r = trace.races[0]
    assert set(r.accesses) == {"read", "write"} and r.count == 16
    assert "read-write race on 'x'" in str(r)


def test_reduction_into_one_element_without_atomics_races_and_with_atomics_does_not():
    @ct.kernel
    def plain_sum(x, total):
        s = ct.sum(ct.load(x, (ct.bid(0),), (8,)))
        old = ct.load(total, (0,), ())
        ct.store(total, (0,), old + s)

    @ct.kernel
    def atomic_sum(x, total):
        ct.atomic_add(total, 0, ct.sum(ct.load(x, (ct.bid(0),), (8,))))

    x = np.ones(32, np.float32)
    total = np.zeros(1, np.float32)
    bad = interpret(plain_sum, x, total, grid=(4,))
    assert {r.kind for r in bad.races} == {"read-write", "write-write"}
    total[:] = 0
    good = interpret(atomic_sum, x, total, grid=(4,))
    assert total[0] == 32 and not good.has_races


def test_no_false_positives_on_safe_kernels():
    rng = np.random.default_rng(0)
    x = rng.random(1000, dtype=np.float32)
    assert not interpret(vector_add, x, x.copy(), np.zeros_like(x), 128, grid=(8,)).has_races
    A = rng.standard_normal((64, 48)).astype(ml_dtypes.bfloat16)
    B = rng.standard_normal((48, 80)).astype(ml_dtypes.bfloat16)
    C = np.zeros((64, 80), np.float32)
    assert not interpret(gemm, A, B, C, 32, 32, 16, grid=(2, 3), order="shuffled").has_races
    s = rng.standard_normal((4, 60)).astype(np.float32)
    assert not interpret(softmax, s, np.zeros_like(s), 64, grid=(4,)).has_races
    y = np.zeros(1000, np.float32)
    assert not interpret(persistent_scale, x, y, 64, grid=(5,)).has_races


def test_grouped_schedule_via_device_helpers_is_race_free():
    @ct.kernel
    def grouped_copy(x, y, TM: ct.Constant[int], TN: ct.Constant[int], G: ct.Constant[int]):
        num_m = ct.num_tiles(x, 0, (TM, TN))
        num_n = ct.num_tiles(x, 1, (TM, TN))
        m, n = device.grouped_tile_index(ct.bid(0), num_m, num_n, G)
        ct.store(y, (m, n), ct.load(x, (m, n), (TM, TN)))

    x = np.arange(48 * 40, dtype=np.int32).reshape(48, 40)
    y = np.zeros_like(x)
    trace = interpret(grouped_copy, x, y, 16, 8, 2, grid=(3 * 5,), order="shuffled", seed=2)
    assert np.array_equal(x, y) and not trace.has_races
    owners = trace.owners("y")
    assert (owners >= 0).all() and len(np.unique(owners)) == 15


def test_overlapping_arguments_are_reported_as_a_warning():
    x = np.arange(64, dtype=np.float32)

    @ct.kernel
    def shift(src, dst):
        ct.store(dst, (ct.bid(0),), ct.load(src, (ct.bid(0),), (8,)))

    trace = interpret(shift, x[:32], x[8:40], grid=(4,))
    assert any("overlap in memory" in w for w in trace.warnings)
    assert "warning:" in trace.summary()
    # and the races through the two views are found on their addresses: block b reads
    # x[8b:8b+8], which block b - 1 wrote through dst
    assert {(r.kind, r.arg, r.other_arg) for r in trace.races} == {("read-write", "src", "dst")}
    assert {(r.blocks[0][0], r.blocks[1][0]) for r in trace.races} == {(0, 1), (1, 2), (2, 3)}


def test_many_races_are_capped_but_counted():
    @ct.kernel
    def all_write_zero(x):
        ct.store(x, (0,), ct.full((2,), ct.bid(0), ct.int32))

    trace = interpret(all_write_zero, np.zeros(2, np.int32), grid=(50,))
    assert len(trace.races) == 49
    assert "... and" in trace.race_report(limit=3)
