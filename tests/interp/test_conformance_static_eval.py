"""What ``ct.static_eval`` gives back (issue #41, cause 3).

cuTile turns the Python result of a static expression back into constants, and a
constant there is a 0-d tile with the tile methods: ``ct.static_eval(t.shape)[1]``
has ``.astype``. The interpreter returns ints and floats (also inside tuples) as
:class:`tilelab.interp.values.dtypes.LooseInt`/``LooseFloat``, which are still Python numbers
and loosely typed (``int8_tile + n`` stays int8).
"""
from __future__ import annotations

import numpy as np

import cuda.tile as ct
from tilelab.interp import interpret
from tilelab.interp.values.dtypes import LooseFloat, LooseInt


def test_static_shape_items_have_astype():
    @ct.kernel
    def k(x):
        tile = ct.load(x, (0, 0), (4, 8))
        shape = ct.static_eval(tile.shape)
        ct.scatter(x, (0, 0), shape[0])
        ct.scatter(x, (0, 1), shape[1].astype(tile.dtype))
        ct.scatter(x, (0, 2), ct.static_eval(shape[1] * 0.5).astype(ct.int32))

    x = np.zeros((10, 10), np.int32)
    interpret(k, x, grid=(1,))
    assert x[0, :3].tolist() == [4, 8, 4]


def test_static_results_stay_loosely_typed_numbers():
    seen = []

    @ct.kernel
    def k(x):
        n = ct.static_eval(3 + 4)
        f = ct.static_eval(1.5)
        t = ct.arange(4, dtype=ct.int8) + n
        seen.append((n, f, t.dtype, n.astype(ct.int16).dtype))
        ct.store(x, (0,), t)

    x = np.zeros(4, np.int8)
    interpret(k, x, grid=(1,))
    n, f, dtype, cast = seen[0]
    assert type(n) is LooseInt and n == 7 and isinstance(n, int)
    assert type(f) is LooseFloat and f == 1.5
    assert str(dtype) == "int8" and str(cast) == "int16"
    assert x.tolist() == [7, 8, 9, 10]
