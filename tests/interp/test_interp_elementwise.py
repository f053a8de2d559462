"""Element-wise ops against numpy references over dtypes, shapes and special values."""
from __future__ import annotations

import math
import operator

import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import cuda.tile as ct
from tilelab.errors import CompileError

from .harness import FLOAT_NP, INT_NP, fast, run_tiles, same

POW2_SHAPES = st.sampled_from([(1,), (4,), (8,), (2, 4), (4, 1), (2, 2, 2)])


def _floats(np_dtype, shape, allow_special=True):
    width = {np.float16: 16, np.float32: 32, np.float64: 64}.get(np_dtype, 32)
    elems = st.floats(width=width, allow_nan=allow_special, allow_infinity=allow_special,
                      allow_subnormal=True)
    return hnp.arrays(np.float64 if np_dtype is ml_dtypes.bfloat16 else np_dtype, shape,
                      elements=elems).map(lambda a: a.astype(np_dtype))


def _ints(np_dtype, shape):
    return hnp.arrays(np_dtype, shape, elements=hnp.from_dtype(np.dtype(np_dtype)))


def _ref_round(exact: np.ndarray, np_dtype) -> np.ndarray:
    """Round float64 results of ops on narrower floats (double rounding is harmless)."""
    if np_dtype is ml_dtypes.bfloat16:
        return exact.astype(np.float32).astype(np_dtype)
    return exact.astype(np_dtype)


FLOAT_OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
             "truediv": operator.truediv}


@fast(25)
@given(data=st.data(), name=st.sampled_from(sorted(FLOAT_NP)), op=st.sampled_from(
    sorted(FLOAT_OPS)), shape=POW2_SHAPES)
def test_float_arithmetic_is_correctly_rounded(data, name, op, shape):
    t = FLOAT_NP[name]
    a = data.draw(_floats(t, shape))
    b = data.draw(_floats(t, shape))
    res = run_tiles(lambda x, y: FLOAT_OPS[op](x, y), a, b)
    with np.errstate(all="ignore"):
        ref = _ref_round(FLOAT_OPS[op](a.astype(np.float64), b.astype(np.float64)), t)
    assert res.dtype == getattr(ct, name)
    assert same(res.numpy(), ref)


INT_OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
           "floordiv": operator.floordiv, "mod": operator.mod, "and": operator.and_,
           "or": operator.or_, "xor": operator.xor}


@fast(25)
@given(data=st.data(), name=st.sampled_from(sorted(INT_NP)), op=st.sampled_from(
    sorted(INT_OPS)), shape=POW2_SHAPES)
def test_integer_arithmetic_wraps_and_floors(data, name, op, shape):
    t = INT_NP[name]
    a = data.draw(_ints(t, shape))
    b = data.draw(_ints(t, shape))
    if op in ("floordiv", "mod"):
        assume(np.all(b != 0))
        if np.dtype(t).kind == "i":
            assume(not np.any((a == np.iinfo(t).min) & (b == -1)))
    res = run_tiles(lambda x, y: INT_OPS[op](x, y), a, b)
    bits = np.dtype(t).itemsize * 8
    exp = []
    for x, y in zip(a.ravel().tolist(), b.ravel().tolist()):
        v = INT_OPS[op](x, y) & ((1 << bits) - 1)
        if np.dtype(t).kind == "i" and v >= 1 << (bits - 1):
            v -= 1 << bits
        exp.append(v)
    assert res.numpy().ravel().tolist() == exp


def test_python_style_division_on_negative_integers():
    a = np.array([-7, 7, -7, 7], np.int32)
    b = np.array([2, -2, -2, 2], np.int32)
    q = run_tiles(lambda x, y: x // y, a, b).numpy().tolist()
    r = run_tiles(lambda x, y: x % y, a, b).numpy().tolist()
    assert q == [-4, -4, 3, 3] and r == [1, -1, -1, 1]
    assert run_tiles(lambda x, y: ct.cdiv(x, y), a, b).numpy().tolist() == [-3, -3, 4, 4]
    qd, rd = run_tiles(lambda x, y: divmod(x, y), a, b)
    assert qd.numpy().tolist() == q and rd.numpy().tolist() == r


def test_float_floordiv_mod_and_divmod_rules():
    a = np.array([5.5, -5.5, 1.0, 7.0], np.float32)
    b = np.array([2.2, 2.2, 0.1, -2.0], np.float32)
    q = run_tiles(lambda x, y: x // y, a, b).numpy()
    assert q.tolist() == np.floor(a / b).tolist()
    r = run_tiles(lambda x, y: x % y, a, b).numpy()
    assert np.allclose(r, np.remainder(a, b))
    with pytest.raises(CompileError, match="divmod\\(\\) is not implemented for floating"):
        run_tiles(lambda x, y: divmod(x, y), a, b)


def test_loose_constants_fold_with_python_semantics():
    folded = run_tiles(lambda x: (7 // 2, -7 % 3, 2 ** 10, 5 / 2), np.zeros(1))
    assert folded == (3, 2, 1024, 2.5)
    with pytest.raises(CompileError, match="ZeroDivisionError"):
        run_tiles(lambda x: 1 // 0, np.zeros(1))


@fast(20)
@given(data=st.data(), name=st.sampled_from(sorted(FLOAT_NP)), shape=POW2_SHAPES,
       fn=st.sampled_from(["eq", "ne", "lt", "le", "gt", "ge"]))
def test_comparisons_with_nan(data, name, shape, fn):
    t = FLOAT_NP[name]
    a = data.draw(_floats(t, shape))
    b = data.draw(_floats(t, shape))
    ops = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
           "gt": operator.gt, "ge": operator.ge}
    res = run_tiles(lambda x, y: ops[fn](x, y), a, b)
    assert res.dtype == ct.bool_
    assert np.array_equal(res.numpy(), ops[fn](a.astype(np.float64), b.astype(np.float64)))


@fast(20)
@given(data=st.data(), name=st.sampled_from(["int8", "int32", "uint16", "int64"]),
       shape=POW2_SHAPES)
def test_shifts_and_not(data, name, shape):
    t = INT_NP[name]
    bits = np.dtype(t).itemsize * 8
    a = data.draw(_ints(t, shape))
    s = data.draw(hnp.arrays(t, shape, elements=st.integers(0, bits - 1)))
    left = run_tiles(lambda x, y: x << y, a, s).numpy()
    right = run_tiles(lambda x, y: x >> y, a, s).numpy()
    inv = run_tiles(lambda x: ~x, a).numpy()
    assert np.array_equal(left, np.left_shift(a, s))
    assert np.array_equal(right, np.right_shift(a, s))
    assert np.array_equal(inv, np.invert(a))


def test_bitwise_typing_rules():
    a = np.ones(2, np.int32)
    with pytest.raises(CompileError, match="same data type"):
        run_tiles(lambda x, y: x & y, a, np.ones(2, np.int16))
    with pytest.raises(CompileError, match="require integers or booleans"):
        run_tiles(lambda x: x & 1, np.ones(2, np.float32))
    assert run_tiles(lambda x: x & 1, np.ones(2, np.int8)).dtype == ct.int8
    b = np.array([True, False])
    assert run_tiles(lambda x: ~x, b).numpy().tolist() == [False, True]


UNARY = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
         "rsqrt": lambda v: 1 / np.sqrt(v), "sin": np.sin, "cos": np.cos, "tan": np.tan,
         "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "floor": np.floor,
         "ceil": np.ceil, "abs": np.abs, "negative": np.negative}


def _ulps(got: np.ndarray, ref: np.ndarray, t) -> np.ndarray:
    """Error in units of the last place of the reference's dtype (0 for equal specials)."""
    with np.errstate(all="ignore"):
        g, r = got.astype(np.float64), ref.astype(np.float64)
        specials_match = (np.isnan(g) & np.isnan(r)) | (g == r)
        base = r.astype(np.float32 if t is ml_dtypes.bfloat16 else t)
        spacing = np.abs(np.spacing(base).astype(np.float64))
        if t is ml_dtypes.bfloat16:
            spacing = spacing * 2.0 ** 16
        return np.where(specials_match, 0.0, np.abs(g - r) / np.maximum(spacing, 5e-324))


@fast(25)
@given(data=st.data(), name=st.sampled_from(sorted(FLOAT_NP)), fn=st.sampled_from(
    sorted(UNARY)), shape=POW2_SHAPES)
def test_unary_math_within_few_ulps(data, name, fn, shape):
    t = FLOAT_NP[name]
    a = data.draw(_floats(t, shape))
    if fn in ("sin", "cos", "tan"):
        a = np.where(np.abs(a.astype(np.float64)) < 1e4, a, t(1.0)).astype(t)
    res = run_tiles(lambda x: getattr(ct, fn)(x), a)
    assert res.dtype == getattr(ct, name)
    with np.errstate(all="ignore"):
        ref = _ref_round(UNARY[fn](a.astype(np.float64)), t)
    tol = 4 if t in (np.float32, np.float64) else 1
    assert np.all(_ulps(res.numpy(), ref, t) <= tol)


def test_unary_math_promotes_integers_and_rejects_where_cutile_does():
    assert run_tiles(lambda x: ct.sqrt(x), np.array([4, 9], np.int16)).dtype == ct.float32
    with pytest.raises(CompileError, match="Integer inputs are not supported"):
        run_tiles(lambda x: ct.floor(x), np.array([4], np.int32))
    with pytest.raises(CompileError, match="Float inputs are not supported"):
        run_tiles(lambda x: ct.bitwise_not(x), np.array([4.0], np.float32))
    assert run_tiles(lambda x: -x, np.array([True])).dtype == ct.int32
    assert run_tiles(lambda x: ct.exp(1.0), np.zeros(1)) == math.exp(1.0)


def test_isnan_where_and_minmax_nan_rules():
    a = np.array([1.0, np.nan, 3.0, np.nan], np.float32)
    b = np.array([np.nan, 2.0, 1.0, np.nan], np.float32)
    assert run_tiles(lambda x: ct.isnan(x), a).numpy().tolist() == [False, True, False, True]
    m = run_tiles(lambda x, y: ct.maximum(x, y), a, b).numpy()
    assert np.array_equal(m, np.fmax(a, b), equal_nan=True)
    p = run_tiles(lambda x, y: ct.minimum(x, y, propagate_nan=True), a, b).numpy()
    assert np.array_equal(p, np.minimum(a, b), equal_nan=True)
    w = run_tiles(lambda x: ct.where(ct.isnan(x), 0, x), a)
    assert w.dtype == ct.float32 and w.numpy().tolist() == [1.0, 0.0, 3.0, 0.0]
    assert run_tiles(lambda x: max(x, 2), np.array([1, 5], np.int8)).numpy().tolist() == [2, 5]


def test_pow_keeps_float_dtype_with_integer_exponent_and_rejects_integer_base():
    r = run_tiles(lambda x: x ** 3, np.array([1.5, -2.0], np.float16))
    assert r.dtype == ct.float16 and r.numpy().tolist() == [3.375, -8.0]
    r = run_tiles(lambda x, y: x ** y, np.array([4.0], np.float32), np.array([0.5], np.float32))
    assert r.numpy().tolist() == [2.0]
    with pytest.raises(CompileError, match="`pow` is not supported"):
        run_tiles(lambda x: x ** 2, np.array([3], np.int32))
    assert abs(float(run_tiles(lambda x: ct.atan2(x, x), np.array([1.0], np.float32)).numpy()[0])
               - math.pi / 4) < 1e-6


def test_rounding_modes_on_arithmetic_and_flush_to_zero():
    one = np.array([1.0], np.float32)
    tiny = np.array([2.0 ** -30], np.float32)
    up = run_tiles(lambda x, y: ct.add(x, y, rounding_mode=ct.RoundingMode.RP), one, tiny)
    down = run_tiles(lambda x, y: ct.sub(x, y, rounding_mode=ct.RoundingMode.RZ), one, tiny)
    near = run_tiles(lambda x, y: x + y, one, tiny)
    assert up.numpy()[0] == np.nextafter(np.float32(1), np.float32(2))
    assert down.numpy()[0] == np.nextafter(np.float32(1), np.float32(0))
    assert near.numpy()[0] == 1.0
    d = np.array([1.0], np.float64)
    t64 = np.array([2.0 ** -80], np.float64)
    assert run_tiles(lambda x, y: ct.add(x, y, rounding_mode=ct.RoundingMode.RP), d, t64
                     ).numpy()[0] == np.nextafter(1.0, 2.0)
    # 1/3 rounded to nearest lies below 1/3, so RM keeps it and RP moves one ulp up.
    ones, threes = np.array([1.0], np.float64), np.array([3.0], np.float64)
    down = run_tiles(lambda x, y: ct.truediv(x, y, rounding_mode=ct.RoundingMode.RM),
                     ones, threes).numpy()[0]
    up = run_tiles(lambda x, y: ct.truediv(x, y, rounding_mode=ct.RoundingMode.RP),
                   ones, threes).numpy()[0]
    assert down == 1 / 3 and up == np.nextafter(1 / 3, 1.0)
    sub = np.array([1e-39, 1.0], np.float32)
    assert run_tiles(lambda x: ct.mul(x, 1.0, flush_to_zero=True), sub).numpy().tolist() == \
        [0.0, 1.0]
    with pytest.raises(CompileError, match="Flush to zero can only be used for float32"):
        run_tiles(lambda x: ct.add(x, x, flush_to_zero=True), np.ones(1, np.float64))
    with pytest.raises(CompileError, match="Rounding mode nearest_away is not supported"):
        run_tiles(lambda x: ct.add(x, x, rounding_mode=ct.RoundingMode.RA), one)
    two = np.array([2.0], np.float32)
    s = run_tiles(lambda x: ct.sqrt(x, rounding_mode=ct.RoundingMode.RZ), two)
    assert s.numpy()[0] == np.float32(1.4142135)  # RN would give 1.4142137


def test_operators_reject_non_tile_operands():
    with pytest.raises(CompileError, match="TypeError"):
        run_tiles(lambda x: x + "a", np.ones(1, np.float32))
    with pytest.raises(CompileError, match="Directly indexing a tile is not supported"):
        run_tiles(lambda x: x[0], np.ones(2, np.float32))
    with pytest.raises(CompileError, match="immutable"):
        run_tiles(lambda x: x.__setitem__(0, 1), np.ones(2, np.float32))
    with pytest.raises(CompileError, match="ambiguous"):
        run_tiles(lambda x: bool(x > 0), np.ones(2, np.float32))
