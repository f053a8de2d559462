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



def test_a_loop_carried_constant_stays_loosely_typed():
    """cuTile types a variable a run-time loop carries from its first value: ``t = n``
    (n = 5) before ``for ...: t += 1`` is an int32 run-time value, so storing it into an
    int16 array is refused ("cannot implicitly cast"). The interpreter runs the loop
    and keeps a loosely typed constant, which int16 holds: documented in
    docs/interp.md, "Limits"."""
    @ct.kernel
    def k(n: ct.Constant[int], x):
        t = n
        for i in range(2):
            t += 1
        ct.scatter(x, (), t)

    x = np.zeros((), np.int16)
    interpret(k, 5, x, grid=(1,))
    assert int(x) == 7                       # cuTile 1.7 refuses this kernel
