"""``grid=()`` is one block, as ``ct.launch`` pads a grid with ones (issue #41, cause 3)."""
from __future__ import annotations

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
