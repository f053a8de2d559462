"""Float ``//`` divides in the operands' dtype, then floors (issue #41, cause 4).

cuTile lowers a float ``x // y`` to ``DivFOp`` in the tile's dtype followed by
``FloorOp``, so a float16 quotient is rounded to float16 before the floor: float16
``93.5 // 4.453`` is ``floor(fp16(21.0))`` = 21, where the floor of the float32 quotient
(20.996...) would be 20.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from .harness import run_tiles


@pytest.mark.parametrize("np_dtype", [np.float16, ml_dtypes.bfloat16])
def test_half_precision_floordiv_floors_the_rounded_quotient(np_dtype):
    x = np.array([93.5, 7.0, -93.5, 1.0], np_dtype)
    y = np.array([4.453, 2.0, 4.453, 3.0], np_dtype)
    got = run_tiles(lambda a, b: a // b, x, y).numpy()
    # reference: the quotient rounded to the dtype (from float64, one rounding), floored
    q = (x.astype(np.float64) / y.astype(np.float64)).astype(np.float32).astype(np_dtype)
    want = np.floor(q.astype(np.float64)).astype(np_dtype)
    assert got.dtype == np.dtype(np_dtype)
    assert got.astype(np.float64).tolist() == want.astype(np.float64).tolist()
    if np_dtype is np.float16:
        assert got.astype(np.float64).tolist() == [21.0, 3.0, -21.0, 0.0]


def test_float32_floordiv_is_unchanged():
    x = np.array([7.5, -7.5, 1e30, 1.0], np.float32)
    y = np.array([2.0, 2.0, 3.0, 3.0], np.float32)
    got = run_tiles(lambda a, b: a // b, x, y).numpy()
    assert got.tolist() == np.floor(x / y).tolist()
