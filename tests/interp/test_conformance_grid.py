"""``grid=()`` is one block, as ``ct.launch`` pads a grid with ones (issue #41, cause 3)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import cuda.tile as ct
from tilelab.errors import LaunchError
from tilelab.interp import interpret


@ct.kernel
def count(x):
    ct.atomic_add(x, (0,), ct.num_blocks(0) * 100 + ct.num_blocks(1) * 10 + ct.num_blocks(2))


def test_an_empty_grid_is_one_block():
    x = np.zeros(1, np.int32)
    trace = interpret(count, x, grid=())
    assert trace.grid == (1, 1, 1) and trace.num_blocks == 1
    assert x.tolist() == [111]


def test_more_than_three_dimensions_are_still_refused():
    with pytest.raises(LaunchError, match="grid must be 1 to 3 positive integers"):
        interpret(count, np.zeros(1, np.int32), grid=(1, 1, 1, 1))


def test_an_axis_of_two_to_the_24_blocks_is_refused_as_ct_launch_refuses_it():
    x = np.zeros(1, np.int32)
    with pytest.raises(LaunchError, match=re.escape(
            "Grid[0] exceeds 24-bit limit: max=16777215, got=16777216. Use multiple kernel "
            "launches for larger workloads.")) as e:
        interpret(count, x, grid=(2**24,))
    assert isinstance(e.value, ValueError)          # ct.launch raises a ValueError
    assert x.tolist() == [0]                        # refused before any block ran


def test_the_largest_24_bit_grid_is_accepted():
    x = np.zeros(1, np.int32)
    trace = interpret(count, x, grid=(2**24 - 1,), sample_blocks=1, trace=False)
    assert trace.grid == (2**24 - 1, 1, 1)
    assert x.tolist() == [(2**24 - 1) * 100 + 11]


def test_the_limit_is_checked_in_a_doctest():
    import doctest

    from tilelab.interp.frontend import grid_rules
    assert doctest.testmod(grid_rules).failed == 0
