"""Different constants on the two sides of a run-time ``if`` (issue #41, cause 3): a
documented difference (docs/interp.md, "Limits").

cuTile merges ``a = 1`` / ``a = 2`` under a run-time condition into a strict int32
run-time value; the interpreter runs one path and keeps its loosely typed constant.
These tests pin what the interpreter does, so that a change of it updates the docs.
"""
from __future__ import annotations

import numpy as np

import cuda.tile as ct
from tilelab.interp import interpret


def test_the_path_taken_keeps_its_loosely_typed_constant():
    seen = []

    @ct.kernel
    def k(out, n: ct.Constant[int]):
        if ct.bid(0) == 0:
            t = n
        else:
            t = 7
        b = ct.arange(4, dtype=ct.int8) + t   # cuTile: int32 (t is a merged int32)
        seen.append(str(b.dtype))
        ct.scatter(out, ct.arange(4, dtype=ct.int32), b)

    out = np.zeros(4, np.int32)
    interpret(k, out, 5, grid=(1,))
    assert out.tolist() == [5, 6, 7, 8]      # the values agree with cuTile's
    assert seen == ["int8"]                  # the dtype is the documented difference

