"""Constants fold as cuTile's compiler folds them (issue #41, causes 3 and 4).

cuTile converts a compile-time constant with Python's ``bool()``/``int()``/``float()`` and
then encodes it with its own float encoder; a run-time conversion is the GPU's ``cvt``.
The two differ (0 in float8_e8m0fnu, overflow in float8, a float constant cast to an
integer), and these tests pin the compile-time side. The expected encodings are written
out by hand from the formats (float8_e8m0fnu is 2^(bits - 127), 0xFF is NaN).
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import cuda.tile as ct
from tilelab.errors import CompileError
from tilelab.interp import interpret


def _bits(x: np.ndarray) -> list[int]:
    return [int(b) for b in x.view(np.uint8)]


def test_zero_in_float8_e8m0fnu_is_the_smallest_value():
    @ct.kernel
    def k(out):
        ct.store(out, (0,), ct.full((4,), 0, ct.float8_e8m0fnu))
        ct.store(out, (1,), ct.full((4,), 0.2, ct.float8_e8m0fnu))   # 0.25: ties go up
        ct.store(out, (2,), ct.full((4,), 3.0, ct.float8_e8m0fnu))   # 4.0 (cuTile's tie up)
        ct.store(out, (3,), ct.full((4,), 1e39, ct.float8_e8m0fnu))  # above 2^127: NaN

    out = np.full(16, 7, np.uint8).view(ml_dtypes.float8_e8m0fnu)
    interpret(k, out, grid=(1,), arch="sm_100")
    assert _bits(out) == [0x00] * 4 + [0x7D] * 4 + [0x81] * 4 + [0xFF] * 4


def test_a_negative_float8_e8m0fnu_constant_is_refused_with_cutiles_words():
    @ct.kernel
    def k(out):
        ct.store(out, (0,), ct.full((4,), -0.5, ct.float8_e8m0fnu))

    out = np.zeros(4, ml_dtypes.float8_e8m0fnu)
    with pytest.raises(CompileError, match="Negative values cannot be represented in an "
                                           "unsigned float format") as e:
        interpret(k, out, grid=(1,), arch="sm_100")
    assert e.value.location is not None and e.value.location.line > 0
    assert isinstance(e.value, ct.TileValueError)


def test_a_constant_folded_from_an_unsupported_dtype_compiles_for_sm_90():
    @ct.kernel
    def k(x):
        ct.scatter(x, 0, ct.float16(0.2))
        ct.scatter(x, 1, ct.float64(ct.float8_e8m0fnu(0.2)))

    x = np.zeros(2, np.float64)
    interpret(k, x, grid=(1,), arch="sm_90")
    assert x.tolist() == [float(np.float16(0.2)), 0.25]


def test_float8_constants_overflow_as_cutile_folds_them():
    @ct.kernel
    def k(a, b):
        ct.store(a, (0,), ct.full((2,), 1000.0, ct.float8_e4m3fn))   # no inf: NaN
        ct.store(b, (0,), ct.full((2,), -1e6, ct.float8_e5m2))       # -inf

    a = np.zeros(2, ml_dtypes.float8_e4m3fn)
    b = np.zeros(2, ml_dtypes.float8_e5m2)
    interpret(k, a, b, grid=(1,))
    assert np.isnan(a.astype(np.float32)).all()
    assert (b.astype(np.float32) == -np.inf).all()


def test_run_time_conversions_still_saturate():
    @ct.kernel
    def k(x, a):
        ct.store(a, (0,), ct.load(x, (0,), (2,)).astype(ct.float8_e4m3fn))

    x = np.array([1000.0, -1e6], np.float32)
    a = np.zeros(2, ml_dtypes.float8_e4m3fn)
    interpret(k, x, a, grid=(1,))
    assert a.astype(np.float32).tolist() == [448.0, -448.0]


def test_a_float_constant_cast_to_an_integer_truncates_and_wraps():
    @ct.kernel
    def k(out, x):
        ct.scatter(out, 0, ct.astype(-3.7, ct.uint8))       # int(-3.7) = -3 -> 253
        ct.scatter(out, 1, ct.astype(2.9, ct.uint8))
        ct.scatter(out, 2, ct.astype(ct.gather(x, 0), ct.uint8))   # run time: saturates

    out = np.zeros(3, np.uint8)
    interpret(k, out, np.array([-3.7], np.float32), grid=(1,))
    assert out.tolist() == [253, 2, 0]


def test_dtype_constructors_take_strings_and_no_argument():
    @ct.kernel
    def k(x):
        ct.scatter(x, 0, ct.float32("-inf"))
        ct.scatter(x, 1, ct.float16())
        ct.scatter(x, 2, ct.float32("1.5"))
        ct.store(x, (1,), ct.full((4,), ct.float32("-inf"), dtype=ct.float32))

    x = np.full(8, 9.0, np.float32)
    interpret(k, x, grid=(1,))
    assert x[:3].tolist() == [-math.inf, 0.0, 1.5]
    assert (x[4:] == -np.inf).all()


def test_a_dtype_constructor_refuses_what_python_cannot_convert():
    @ct.kernel
    def k(x):
        ct.scatter(x, 0, ct.float32("one"))

    with pytest.raises(CompileError, match="Invalid argument type for float32"):
        interpret(k, np.zeros(1, np.float32), grid=(1,))


def test_float4_is_no_constructor():
    @ct.kernel
    def k(x):
        ct.scatter(x, 0, ct.float32(ct.float4_e2m1fn(1.0)))

    with pytest.raises(CompileError, match=r"Cannot call an object of type "
                                           r"DTypeSpec\(dtype=<DType 'float4_e2m1fn'>\)"):
        interpret(k, np.zeros(1, np.float32), grid=(1,), arch="sm_100")
