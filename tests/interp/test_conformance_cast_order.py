"""A conversion is type-checked before the target's dtype support (issue #41).

cuTile infers types (refusing a rounding mode a conversion does not take, or a bitcast
between different widths) before a later pass refuses dtypes the target does not compute
with; so on sm_90 ``float8_e8m0fnu`` tiles (sm_100 and newer) meet the rounding-mode
refusal first, and only a well-typed conversion of one meets the dtype refusal.
"""
from __future__ import annotations

import numpy as np
import pytest

import cuda.tile as ct
from tilelab.errors import CompileError
from tilelab.interp import interpret


def _astype_kernel(rounding_mode, to_dtype):
    @ct.kernel
    def k(y):
        t = ct.ones((2,), dtype=ct.float8_e8m0fnu)
        t = t.astype(to_dtype, rounding_mode=rounding_mode)
        ct.store(y, index=(0,), tile=t.astype(y.dtype))
    return k


@pytest.mark.parametrize("to_dtype", [ct.float32, ct.float16])
@pytest.mark.parametrize("mode", [ct.RoundingMode.RA, ct.RoundingMode.RM,
                                  ct.RoundingMode.RP])
def test_a_rounding_mode_is_refused_before_the_targets_dtype(mode, to_dtype):
    y = np.zeros(2, np.float32)
    with pytest.raises(ct.TileTypeError) as info:
        interpret(_astype_kernel(mode, to_dtype), y, grid=(1,), arch="sm_90")
    assert isinstance(info.value, CompileError)
    assert info.value.message.startswith(
        f"rounding_mode={mode} is not supported for conversion from float8_e8m0fnu to "
        f"{to_dtype}, supported rounding modes for this conversion are ")
    assert info.value.location.line == \
        _astype_kernel.__code__.co_firstlineno + 4          # the astype line


def test_a_well_typed_conversion_meets_the_dtype_refusal():
    y = np.zeros(2, np.float32)
    with pytest.raises(ct.TileUnsupportedFeatureError) as info:
        interpret(_astype_kernel(None, ct.float32), y, grid=(1,), arch="sm_90")
    assert info.value.message.startswith("float8_e8m0fnu is not supported on sm_90")


def test_the_same_conversion_runs_where_the_dtype_is_supported():
    y = np.zeros(2, np.float32)
    interpret(_astype_kernel(ct.RoundingMode.RZ, ct.float32), y, grid=(1,),
              arch="sm_100")
    assert y.tolist() == [1.0, 1.0]


def test_a_bitcast_of_another_width_is_refused_before_the_targets_dtype():
    @ct.kernel
    def k(y):
        t = ct.ones((2,), dtype=ct.float8_e8m0fnu)
        ct.store(y, index=(0,), tile=ct.bitcast(t, ct.int16).astype(y.dtype))

    with pytest.raises(ct.TileTypeError) as info:
        interpret(k, np.zeros(2, np.float32), grid=(1,), arch="sm_90")
    assert info.value.message == ("Cannot bitcast from float8_e8m0fnu to int16: bit width "
                                  "is different (8 vs. 16)")
