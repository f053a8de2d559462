"""Typing of the interpreter against cuTile: promotion, loose constants, implicit casts."""
from __future__ import annotations

import itertools
from typing import Annotated

import numpy as np
import pytest

import cuda.tile as ct
from cuda.tile._datatype import _promote_dtypes
from tilelab.errors import CompileError
from tilelab.interp import interpret
from tilelab.interp.values.dtypes import DTYPES, as_dtype

from .harness import ALL_NP, run_tiles

ARITH = ["bool_", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
         "float16", "bfloat16", "float32", "float64"]


def _one(name: str) -> np.ndarray:
    return np.ones(2, dtype=ALL_NP[name])


@pytest.mark.parametrize("a,b", list(itertools.combinations_with_replacement(ARITH, 2)))
def test_comparison_promotion_matches_cutile_table(a, b):
    expected = _promote_dtypes(getattr(ct, a), getattr(ct, b))
    if expected is None:
        with pytest.raises(CompileError, match="Implicit promotion"):
            run_tiles(lambda x, y: x == y, _one(a), _one(b))
    else:
        res = run_tiles(lambda x, y: ct.where(x == y, x, y), _one(a), _one(b))
        assert res.dtype == expected


@pytest.mark.parametrize("a,b", [("int8", "int16"), ("uint8", "uint32"), ("float16", "int64"),
                                 ("bfloat16", "float32"), ("int32", "float64")])
def test_arithmetic_result_dtype(a, b):
    res = run_tiles(lambda x, y: x + y, _one(a), _one(b))
    assert res.dtype == _promote_dtypes(getattr(ct, a), getattr(ct, b))


def test_loose_int_keeps_tile_dtype_and_checks_range():
    i8 = np.array([1, 2], np.int8)
    assert run_tiles(lambda x: x + 3, i8).dtype == ct.int8
    assert run_tiles(lambda x: 3 * x - 1, i8).dtype == ct.int8
    with pytest.raises(CompileError, match="Integer constant 300 is out of range of int8"):
        run_tiles(lambda x: x + 300, i8)


def test_loose_float_with_int_tile_is_float32_and_with_half_stays_half():
    assert run_tiles(lambda x: x + 0.5, np.ones(2, np.int8)).dtype == ct.float32
    assert run_tiles(lambda x: x * 0.5, np.ones(2, np.float16)).dtype == ct.float16
    assert run_tiles(lambda x: x + 2**40, np.ones(2, np.float16)).dtype == ct.float16


def test_truediv_of_integers_is_float32():
    res = run_tiles(lambda x, y: x / y, np.array([7, 1], np.int64), np.array([2, 4], np.int64))
    assert res.dtype == ct.float32
    assert res.numpy().tolist() == [3.5, 0.25]


def test_bool_arithmetic_is_rejected_but_comparison_allowed():
    b = np.array([True, False])
    with pytest.raises(CompileError, match="does not support bool"):
        run_tiles(lambda x: x + x, b)
    assert run_tiles(lambda x: x == x, b).dtype == ct.bool_


def test_restricted_floats_do_no_arithmetic():
    import ml_dtypes
    f8 = np.ones(2, ml_dtypes.float8_e4m3fn)
    with pytest.raises(CompileError, match="non-arithmetic dtype float8_e4m3fn"):
        run_tiles(lambda x: x + x, f8)
    assert run_tiles(lambda x: x.astype(ct.float32) + 1, f8).dtype == ct.float32


def test_strict_constant_wins_over_loose_constant():
    res = run_tiles(lambda x: x + (5 + ct.int16(2)), np.arange(2, dtype=np.int8))
    assert res.dtype == ct.int16 and res.numpy().tolist() == [7, 8]


def test_scalar_dtypes_of_block_ids_and_shapes():
    seen = {}

    @ct.kernel
    def k(x, s, f, flag):
        seen["bid"] = ct.bid(0)
        seen["shape"] = x.shape[0]
        seen["stride"] = x.strides[0]
        seen["num"] = ct.num_tiles(x, 0, (4,))
        seen["s"], seen["f"], seen["flag"] = s, f, flag
        seen["ndim"] = x.ndim

    interpret(k, np.zeros(10, np.float32), 7, 0.5, True, grid=(1,))
    assert seen["bid"].dtype == ct.int32 and seen["shape"].dtype == ct.int32
    assert int(seen["shape"]) == 10 and int(seen["stride"]) == 1 and int(seen["num"]) == 3
    assert seen["s"].dtype == ct.int32 and seen["f"].dtype == ct.float32
    assert seen["flag"].dtype == ct.bool_ and seen["ndim"] == 1


def test_scalar_int64_annotation_and_overflow_message():
    from tilelab.errors import LaunchError

    @ct.kernel
    def k(a, b: ct.ScalarInt64):
        ct.static_assert(b.dtype == ct.int64)
        ct.static_assert(a.dtype == ct.int32)

    interpret(k, 1, 2**40, grid=(1,))
    with pytest.raises(LaunchError, match="does not fit in int32"):
        interpret(k, 2**40, 1, grid=(1,))


def test_constant_parameters_stay_python_values():
    seen = {}

    @ct.kernel
    def k(n: ct.Constant[int], dt: ct.Constant, shape: ct.Constant[tuple]):
        seen["n"] = n // 2
        seen["dt"] = dt
        seen["z"] = ct.zeros(shape, dt)

    interpret(k, 7, ct.float16, (2, 4), grid=(1,))
    assert seen["n"] == 3 and type(seen["n"]) is int
    assert seen["dt"] == ct.float16 and seen["z"].dtype == ct.float16


def test_dtype_objects_compare_and_construct():
    assert as_dtype(ct.float32) == ct.float32 and ct.float32 == as_dtype("float32")
    assert hash(as_dtype(ct.int8)) == hash(ct.int8)
    assert repr(DTYPES["bfloat16"]) == "<DType 'bfloat16'>"
    res = run_tiles(lambda x: (ct.int16(70000), ct.float16(1.0 / 3), ct.int32(2.9)),
                    np.zeros(1, np.int8))
    assert [int(res[0].numpy()), res[1].dtype, int(res[2].numpy())] == [4464, ct.float16, 2]


def test_implicit_cast_on_store():
    @ct.kernel
    def k(x, out):
        ct.store(out, (0,), ct.load(x, (0,), (4,)))

    x = np.ones(4, np.float32)
    ok = np.zeros(4, np.float64)
    interpret(k, x, ok, grid=(1,))
    assert ok.tolist() == [1.0] * 4
    import ml_dtypes
    with pytest.raises(CompileError, match="cannot implicitly cast float32 to bfloat16"):
        interpret(k, x, np.zeros(4, ml_dtypes.bfloat16), grid=(1,))


def test_loose_constant_store_checks_range():
    @ct.kernel
    def k(out, v: ct.Constant[int]):
        ct.store(out, (0,), v)

    out = np.zeros(1, np.uint8)
    interpret(k, out, 255, grid=(1,))
    assert out[0] == 255
    with pytest.raises(CompileError, match="out of range of uint8"):
        interpret(k, out, 256, grid=(1,))


def test_loop_variable_is_int32_tile():
    seen = []

    @ct.kernel
    def k(x):
        for i in range(3):
            seen.append(i)
        acc = ct.zeros((2,), ct.int8)
        for j in range(2):
            acc = acc + j  # int8 tile + int32 loop variable -> int32, as in cuTile
        seen.append(acc)

    interpret(k, np.zeros(1), grid=(1,))
    assert [int(v) for v in seen[:3]] == [0, 1, 2]
    assert seen[0].dtype == ct.int32 and seen[3].dtype == ct.int32


def test_int_and_float_builtins_need_constants():
    @ct.kernel
    def k(x):
        int(ct.bid(0))

    with pytest.raises(CompileError, match=r"int\(\) expects a constant argument"):
        interpret(k, np.zeros(1), grid=(1,))
    assert run_tiles(lambda x: (int(ct.int32(3) + 4), float(2), isinstance(3, int)),
                     np.zeros(1)) == (7, 2.0, True)


def test_array_annotations_static_dims_and_int64_indexing():
    seen = {}

    @ct.kernel
    def k(big: ct.IndexedWithInt64,
          st: Annotated[ct.Array, ct.ArrayAnnotation(static_shape_dims=(0,))]):
        seen["big"] = big.shape[0]
        seen["st"] = st.shape
        ct.static_assert(st.shape[0] == 8)

    interpret(k, np.zeros(4, np.float32), np.zeros((8, 2), np.float32), grid=(1,))
    assert seen["big"].dtype == ct.int64
    assert seen["st"][0] == 8 and type(seen["st"][0]) is int
    assert seen["st"][1].dtype == ct.int32
