"""astype (all rounding modes), bitcast and byte packing against independent references.

The float references enumerate every finite value of the (8- or 16-bit) target format and
pick the right one by exact comparison, so they share no code with the interpreter.
"""
from __future__ import annotations

import functools
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import cuda.tile as ct
from tilelab.errors import CompileError

from .harness import INT_NP, fast, run_tiles, same

R = ct.RoundingMode
NARROW = {"float16": (np.float16, np.uint16), "bfloat16": (ml_dtypes.bfloat16, np.uint16),
          "float8_e5m2": (ml_dtypes.float8_e5m2, np.uint8),
          "float8_e4m3fn": (ml_dtypes.float8_e4m3fn, np.uint8)}


@functools.lru_cache(maxsize=None)
def _finite_values(name: str) -> tuple[np.ndarray, np.ndarray]:
    """All finite values of a format, sorted, with their bit patterns."""
    t, u = NARROW[name]
    bits = np.arange(np.iinfo(u).max + 1, dtype=np.int64).astype(u)
    with np.errstate(all="ignore"):
        vals = bits.view(t).astype(np.float64)
    keep = np.isfinite(vals)
    vals, bits = vals[keep], bits[keep]
    order = np.lexsort((bits, vals))
    return vals[order], bits[order]


def _reference(x: float, name: str, mode) -> float:
    vals, bits = _finite_values(name)
    t = NARROW[name][0]
    if math.isnan(x):
        return math.nan
    saturating = name.startswith("float8")
    big = vals[-1]
    if math.isinf(x) or abs(x) > big:
        if saturating:
            return math.copysign(big, x)
        if math.isinf(x):
            return x  # infinities convert exactly
        if mode in (None, R.RN, R.RA):
            half_ulp = (big - vals[-2]) / 2
            return math.copysign(math.inf if abs(x) >= big + half_ulp else big, x)
        toward = {R.RZ: False, R.RM: x < 0, R.RP: x > 0}[mode]
        return math.copysign(math.inf if toward else big, x)
    i = int(np.searchsorted(vals, x))
    if i < len(vals) and vals[i] == x:
        return float(np.array(x).astype(t).astype(np.float64)) if x == 0 else x
    lo, hi = vals[i - 1], vals[i]
    if mode is R.RZ:
        return hi if x < 0 else lo
    if mode is R.RM:
        return lo
    if mode is R.RP:
        return hi
    if x - lo < hi - x:
        return lo
    if hi - x < x - lo:
        return hi
    if mode is R.RA:
        return hi if x > 0 else lo
    return lo if int(bits[i - 1]) % 2 == 0 else hi


@fast(40)
@given(name=st.sampled_from(sorted(NARROW)),
       x=st.floats(allow_nan=True, allow_infinity=True, width=64) | st.floats(-600, 600))
def test_round_to_nearest_even_from_float64(name, x):
    got = run_tiles(lambda a: a.astype(getattr(ct, name)), np.array([x]))
    ref = _reference(x, name, None)
    g = float(got.numpy().astype(np.float64)[0])
    assert (math.isnan(g) and math.isnan(ref)) or g == ref


@fast(40)
@given(case=st.sampled_from([("float32", "float16", R.RZ), ("float32", "bfloat16", R.RZ),
                             ("bfloat16", "float16", R.RM), ("bfloat16", "float16", R.RP)]),
       x=st.floats(allow_nan=False, allow_infinity=False, width=32))
def test_directed_rounding_to_16_bit_floats(case, x):
    src, dst, mode = case
    storage = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16}[src]
    a = np.array([x], np.float32).astype(storage)
    got = run_tiles(lambda t: ct.astype(t, getattr(ct, dst), rounding_mode=mode), a)
    ref = _reference(float(a.astype(np.float64)[0]), dst, mode)
    assert float(got.numpy().astype(np.float64)[0]) == ref


@fast(40)
@given(mode=st.sampled_from([R.RZ, R.RM, R.RP]),
       x=st.floats(allow_nan=False, allow_infinity=False, min_value=-3e38, max_value=3e38))
def test_directed_rounding_float64_to_float32(mode, x):
    got = float(run_tiles(lambda t: ct.astype(t, ct.float32, rounding_mode=mode),
                          np.array([x])).numpy()[0])
    rn = np.float32(x)
    if mode is R.RM or (mode is R.RZ and x > 0):
        ref = rn if float(rn) <= x else np.nextafter(rn, np.float32(-np.inf))
    else:
        ref = rn if float(rn) >= x else np.nextafter(rn, np.float32(np.inf))
    assert got == float(ref)


def test_round_half_away_and_unsupported_modes():
    # bfloat16 values halfway between float16 subnormals (multiples of 2**-24): ties.
    x = np.array([2.0 ** -25, 5 * 2.0 ** -25, -5 * 2.0 ** -25, 1.0], ml_dtypes.bfloat16)
    ra = run_tiles(lambda a: ct.astype(a, ct.float16, rounding_mode=R.RA), x).numpy()
    rn = run_tiles(lambda a: a.astype(ct.float16), x).numpy()
    assert ra.tolist() == [2.0 ** -24, 3 * 2.0 ** -24, -3 * 2.0 ** -24, 1.0]
    assert rn.tolist() == [0.0, 2 * 2.0 ** -24, -2 * 2.0 ** -24, 1.0]
    with pytest.raises(CompileError, match="is not supported for conversion from float32 to "
                                           "bfloat16"):
        run_tiles(lambda a: ct.astype(a, ct.bfloat16, rounding_mode=R.RM),
                  np.ones(1, np.float32))
    with pytest.raises(CompileError, match="only valid for float to float"):
        run_tiles(lambda a: ct.astype(a, ct.int32, rounding_mode=R.RZ), np.ones(1, np.float32))


@fast(40)
@given(dst=st.sampled_from(sorted(INT_NP)),
       x=st.floats(allow_nan=True, allow_infinity=True, width=64))
def test_float_to_int_truncates_and_saturates(dst, x):
    got = int(run_tiles(lambda a: a.astype(getattr(ct, dst)), np.array([x])).numpy()[0])
    info = np.iinfo(INT_NP[dst])
    ref = 0 if math.isnan(x) else (info.max if x >= info.max else info.min if x <= info.min
                                   else int(x))
    assert got == ref


@fast(30)
@given(src=st.sampled_from(sorted(INT_NP)), dst=st.sampled_from(sorted(INT_NP)),
       data=st.data())
def test_int_to_int_wraps(src, dst, data):
    a = data.draw(hnp.arrays(INT_NP[src], (4,)))
    got = run_tiles(lambda t: t.astype(getattr(ct, dst)), a).numpy()
    bits = np.dtype(INT_NP[dst]).itemsize * 8
    ref = []
    for v in a.tolist():
        v &= (1 << bits) - 1
        if np.dtype(INT_NP[dst]).kind == "i" and v >= 1 << (bits - 1):
            v -= 1 << bits
        ref.append(v)
    assert got.tolist() == ref


@fast(30)
@given(v=st.integers(-2**31, 2**31 - 1), name=st.sampled_from(["bfloat16", "float16"]))
def test_int_to_narrow_float_is_rounded_once(v, name):
    got = run_tiles(lambda a: a.astype(getattr(ct, name)), np.array([v], np.int32))
    assert float(got.numpy().astype(np.float64)[0]) == _reference(float(v), name, None)


def test_bool_conversions_and_tf32():
    got = run_tiles(lambda a: a.astype(ct.bool_), np.array([0.0, -0.0, np.nan, 2.0], np.float32))
    assert got.numpy().tolist() == [False, False, True, True]
    assert run_tiles(lambda a: a.astype(ct.float32), np.array([True, False])).numpy().tolist() \
        == [1.0, 0.0]
    tf = run_tiles(lambda a: a.astype(ct.tfloat32), np.array([1 + 2**-11, 1 + 3 * 2**-11],
                                                             np.float32))
    assert tf.dtype == ct.tfloat32
    assert tf.astype(ct.float32).numpy().tolist() == [1.0, 1 + 2**-9]


@fast(30)
@given(data=st.data(), pair=st.sampled_from([("float32", "int32"), ("float16", "int16"),
                                             ("bfloat16", "uint16"), ("int64", "float64"),
                                             ("uint8", "int8"), ("float8_e4m3fn", "uint8")]))
def test_bitcast_round_trips(data, pair):
    a_name, b_name = pair
    np_a = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
            "int64": np.int64, "uint8": np.uint8,
            "float8_e4m3fn": ml_dtypes.float8_e4m3fn}[a_name]
    raw = data.draw(hnp.arrays(np.uint8, (4 * np.dtype(np_a).itemsize,)))
    a = raw.view(np_a)
    res = run_tiles(lambda t: ct.bitcast(ct.bitcast(t, getattr(ct, b_name)),
                                         getattr(ct, a_name)), a)
    mid = run_tiles(lambda t: ct.bitcast(t, getattr(ct, b_name)), a)
    assert same(res.numpy(), a)
    assert mid.numpy().tobytes() == a.tobytes()


def test_bitcast_errors():
    with pytest.raises(CompileError, match="bit width is different"):
        run_tiles(lambda t: ct.bitcast(t, ct.int16), np.ones(2, np.float32))
    with pytest.raises(CompileError, match="to or from bool"):
        run_tiles(lambda t: ct.bitcast(t, ct.uint8), np.ones(2, bool))
    assert run_tiles(lambda t: ct.bitcast(1.0, ct.uint32), np.ones(1)).numpy() == 0x3F800000


def test_pack_and_unpack_bytes():
    packed = run_tiles(lambda t: ct.pack_to_bytes(t), np.array([0x04030201], np.int32))
    assert packed.dtype == ct.uint8 and packed.numpy().tolist() == [1, 2, 3, 4]
    back = run_tiles(lambda t: ct.unpack_from_bytes(t, ct.int32), np.arange(1, 5, dtype=np.uint8))
    assert back.numpy().tolist() == [0x04030201]
    f4 = np.array([0.5, -6.0, 1.5, 3.0], ml_dtypes.float4_e2m1fn)
    rt = run_tiles(lambda t: ct.unpack_from_bytes(ct.pack_to_bytes(t), ct.float4_e2m1fn), f4,
                   arch="sm_100")   # (float4 compiles for sm_100 and newer)
    assert rt.numpy().astype(np.float32).tolist() == [0.5, -6.0, 1.5, 3.0]
    with pytest.raises(CompileError, match="requires uint8 tile"):
        run_tiles(lambda t: ct.unpack_from_bytes(t, ct.int16), np.ones(4, np.int8))
    with pytest.raises(CompileError, match="not divisible by"):
        run_tiles(lambda t: ct.unpack_from_bytes(t, ct.int32), np.ones(2, np.uint8))
