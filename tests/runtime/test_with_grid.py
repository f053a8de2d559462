"""``Kernel.with_grid``: a kernel without partitions bound to a grid (CPU backend)."""
from __future__ import annotations

import pytest

import cuda.tile as ct
import tilelab as tl


@tl.kernel(unsafe=True)
def fill_blocks(x: tl.Raw, value: float):
    ct.store(x, index=(ct.bid(0),), tile=ct.full((4,), value, ct.float32))


def test_bound_grid_is_used_by_launches_and_the_interpreter():
    k = fill_blocks.with_grid((3,))
    assert k.fixed_grid == (3, 1, 1) and fill_blocks.fixed_grid is None
    x = tl.zeros(16, device="cpu")
    k(x, 1.0)
    assert x.numpy().tolist() == [1.0] * 12 + [0.0] * 4
    k.launch_async(x, 2.0).wait()
    assert x.numpy()[:12].tolist() == [2.0] * 12
    trace = tl.interpret(k, x, 3.0)
    assert len(trace.blocks) == 3 and not trace.has_races
    k(x, 4.0, grid=(4,))                                 # an explicit grid still wins
    assert x.numpy().tolist() == [4.0] * 16


def test_same_grid_same_object_and_rebinding():
    k = fill_blocks.with_grid((2, 1))
    assert k is fill_blocks.with_grid([2, 1, 1]) is fill_blocks.with_grid(2)
    again = k.with_grid(5)
    assert again.fixed_grid == (5, 1, 1) and again is fill_blocks.with_grid(5)
    assert repr(k) == "<tl.kernel unsafe fill_blocks(x: Raw, value: auto) grid=(2, 1, 1)>"


@pytest.mark.parametrize("grid, message", [
    ((0,), r"fill_blocks.with_grid: grid dimension 0 is 0; it must be between 1 and"),
    ((1, 2, 3, 4), r"fill_blocks.with_grid: grid must be 1 to 3 positive integers"),
    ((), r"fill_blocks.with_grid: grid must be 1 to 3 positive integers"),
    ((2, 1.5), r"fill_blocks.with_grid: grid must be 1 to 3 positive integers"),
    ((1, 70000), r"grid dimension 1 is 70000; it must be between 1 and 65535")])
def test_bad_grids_are_refused(grid, message):
    # one check (tilelab.grid) for the launcher, with_grid and the interpreter
    with pytest.raises(tl.LaunchError, match=message):
        fill_blocks.with_grid(grid)


def test_unbound_kernel_without_partitions_still_needs_a_grid():
    with pytest.raises(tl.LaunchError, match="no partitioned argument to infer its grid"):
        fill_blocks(tl.zeros(4, device="cpu"), 1.0)
