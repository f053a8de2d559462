"""Tests of the minimal FLOP/byte counts against hand-computed values."""
from __future__ import annotations

import doctest

import numpy as np
import pytest
from hypothesis import given, strategies as st

import tilelab.perf.counting as counting_module
from tilelab.perf.counting import (Work, attention_forward, batched_gemm, causal_pairs,
                                   dtype_size, elementwise, gemm, gemm_precision, gemv,
                                   layernorm, rmsnorm, softmax)
from tilelab.perf.specs import UnknownPrecisionError


# ---------------------------------------------------------------- GEMM

def test_gemm_hand_computed():
    w = gemm(128, 256, 64, a_dtype="bfloat16")
    assert w.flops == 2 * 128 * 256 * 64 == 4_194_304
    assert w.bytes_read == (128 * 64 + 64 * 256) * 2 == 49_152
    assert w.bytes_written == 128 * 256 * 2 == 65_536
    assert w.precision == "bf16"
    assert w.intensity == pytest.approx(4_194_304 / 114_688)


def test_gemm_read_c_and_output_dtype():
    w = gemm(10, 20, 30, a_dtype="float32", c_dtype="float32", read_c=True)
    assert w.bytes_read == (10 * 30 + 30 * 20 + 10 * 20) * 4
    assert w.bytes_written == 10 * 20 * 4
    assert w.precision == "fp32"
    assert gemm(10, 20, 30, a_dtype="float32", allow_tf32=True).precision == "tf32"


def test_gemm_low_precision_defaults_and_packing():
    w = gemm(64, 64, 64, a_dtype="float8_e4m3fn")          # output defaults to bf16
    assert w.bytes == 64 * 64 + 64 * 64 + 64 * 64 * 2 and w.precision == "fp8"
    w4 = gemm(64, 64, 64, a_dtype="fp4")                    # two FP4 values per byte
    assert w4.bytes_read == 64 * 64 and w4.precision == "fp4"
    odd = gemm(1, 1, 3, a_dtype="fp4", c_dtype="fp4")       # 1.5 bytes round up per tensor
    assert (odd.bytes_read, odd.bytes_written) == (4, 1)
    i8 = gemm(8, 8, 8, a_dtype="int8")
    assert i8.precision == "int8" and i8.bytes_written == 8 * 8 * 4   # int32 out


@pytest.mark.parametrize("a,b,acc,tf32,expected", [
    ("bf16", None, "float32", False, "bf16"),
    ("float16", None, "float32", False, "fp16"),
    ("float16", None, "float16", False, "fp16_acc16"),
    ("float8_e4m3fn", "float8_e5m2", "float32", False, "fp8"),
    ("e4m3", None, "fp16", False, "fp8_acc16"),
    ("fp4", None, "float32", False, "fp4"),
    ("fp4", "fp8", "float32", False, "fp8"),       # mixed: the wider operand sets the rate
    ("bf16", "fp8", "float32", False, "bf16"),
    ("float32", None, "float32", False, "fp32"),
    ("float32", None, "float32", True, "tf32"),
    ("float64", None, "float64", False, "fp64_tc"),
    ("int8", None, "int32", False, "int8"),
])
def test_gemm_precision(a, b, acc, tf32, expected):
    assert gemm_precision(a, b, acc_dtype=acc, allow_tf32=tf32) == expected


@pytest.mark.parametrize("a,b,acc", [("bf16", None, "float16"), ("int8", "bf16", "float32"),
                                     ("int32", None, "int32"), ("float32", None, "fp16")])
def test_gemm_precision_rejects_impossible_combinations(a, b, acc):
    with pytest.raises(ValueError):
        gemm_precision(a, b, acc_dtype=acc)


def test_batched_gemm():
    one = gemm(32, 48, 16)
    w = batched_gemm(6, 32, 48, 16)
    assert (w.flops, w.bytes_read, w.bytes_written) == (6 * one.flops, 6 * one.bytes_read,
                                                        6 * one.bytes_written)
    shared = batched_gemm(6, 32, 48, 16, shared_b=True)
    assert shared.bytes_read == 6 * 32 * 16 * 2 + 16 * 48 * 2
    assert shared.flops == w.flops


def test_gemv():
    w = gemv(1000, 300, dtype="float32")
    assert w.flops == 2 * 1000 * 300
    assert w.bytes_read == (1000 * 300 + 300) * 4 and w.bytes_written == 1000 * 4
    assert w.precision == "fp32"
    mixed = gemv(1000, 300, dtype="fp8", x_dtype="bf16", y_dtype="float32")
    assert mixed.bytes == 1000 * 300 + 300 * 2 + 1000 * 4
    assert gemv(4, 4, dtype="float64").precision == "fp64"


# ---------------------------------------------------------------- vector kernels

def test_elementwise():
    add = elementwise(1000, inputs=2, dtype="float32")
    assert (add.flops, add.bytes_read, add.bytes_written) == (1000, 8000, 4000)
    fma = elementwise(1000, inputs=3, dtype="bf16", out_dtype="float32")
    assert (fma.flops, fma.bytes_read, fma.bytes_written) == (2000, 6000, 4000)
    unary = elementwise(10, inputs=1, flops_per_element=20)    # e.g. a GELU
    assert unary.flops == 200 and unary.precision == "fp32"
    copy = elementwise(10, inputs=1, flops_per_element=0)
    assert copy.flops == 0 and copy.intensity == 0
    assert elementwise(10, dtype="float64").precision == "fp64"


def test_softmax():
    w = softmax(3, 7, dtype="float32", out_dtype="bf16")
    assert w.flops == 5 * 21 and w.bytes_read == 84 and w.bytes_written == 42


def test_layernorm_and_rmsnorm():
    ln = layernorm(4, 100, dtype="bf16")
    assert ln.flops == 7 * 400
    assert ln.bytes_read == 400 * 2 + 2 * 100 * 2 and ln.bytes_written == 400 * 2
    bare = layernorm(4, 100, dtype="bf16", weight=False, bias=False, save_stats=True)
    assert bare.flops == 5 * 400
    assert bare.bytes_read == 800 and bare.bytes_written == 800 + 2 * 4 * 4
    rms = rmsnorm(4, 100, dtype="bf16", param_dtype="float32", save_stats=True)
    assert rms.flops == 4 * 400
    assert rms.bytes_read == 800 + 100 * 4 and rms.bytes_written == 800 + 4 * 4


# ---------------------------------------------------------------- attention

def test_attention_forward_non_causal():
    b, h, s, d = 2, 16, 512, 64
    w = attention_forward(b, h, s, s, d, dtype="bf16")
    assert w.flops == 4 * b * h * s * s * d
    assert w.bytes_read == 3 * b * h * s * d * 2 and w.bytes_written == b * h * s * d * 2
    assert w.precision == "bf16"


def test_attention_causal_is_about_half():
    b, h, s, d = 1, 4, 2048, 128
    full = attention_forward(b, h, s, s, d)
    causal = attention_forward(b, h, s, s, d, causal=True)
    assert causal.flops == 4 * b * h * (s * (s + 1) // 2) * d
    assert causal.flops / full.flops == pytest.approx(0.5, abs=1e-3)
    assert causal.bytes == full.bytes            # the same tensors move


def test_attention_gqa_decode_and_options():
    # decode: one query against 4096 keys; causal sees every key
    dec = attention_forward(1, 32, 1, 4096, 128, kv_heads=8, causal=True)
    assert dec.flops == 4 * 32 * 4096 * 128
    assert dec.bytes_read == (32 * 128 + 2 * 8 * 4096 * 128) * 2
    mla = attention_forward(1, 2, 8, 8, 192, head_dim_v=128, save_lse=True, dtype="fp16")
    assert mla.flops == 2 * 2 * 64 * (192 + 128)
    assert mla.bytes_written == 2 * 8 * 128 * 2 + 2 * 8 * 4
    assert mla.precision == "fp16"
    with pytest.raises(ValueError, match="multiple of kv_heads"):
        attention_forward(1, 6, 8, 8, 64, kv_heads=4)


@given(st.integers(1, 40), st.integers(1, 40))
def test_causal_pairs_matches_brute_force(seq_q, seq_k):
    offset = seq_k - seq_q
    brute = sum(1 for i in range(seq_q) for j in range(seq_k) if j <= i + offset)
    assert causal_pairs(seq_q, seq_k) == brute


# ---------------------------------------------------------------- dtypes and validation

def test_dtype_size_accepts_names_and_numpy_dtypes():
    assert dtype_size("float32") == dtype_size(np.float32) == dtype_size(np.dtype("f4")) == 4
    assert dtype_size("BF16") == dtype_size("bfloat16") == 2
    assert dtype_size(np.float16) == 2 and dtype_size("fp4") == 0.5
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert dtype_size(ml_dtypes.bfloat16) == 2
    assert dtype_size(ml_dtypes.float8_e4m3fn) == 1
    with pytest.raises(ValueError, match="unknown dtype 'complex128'.*bfloat16"):
        dtype_size("complex128")


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "x", None])
def test_dimensions_must_be_positive_integers(bad):
    with pytest.raises(ValueError, match="^k must be a positive integer"):
        gemm(4, 4, bad)


def test_work_validation_and_dict():
    with pytest.raises(ValueError, match="moves no bytes"):
        Work("nothing", 10, 0, 0, "fp32")
    with pytest.raises(ValueError, match="non-negative"):
        Work("neg", -1, 4, 4, "fp32")
    with pytest.raises(UnknownPrecisionError):
        Work("typo", 1, 4, 4, "bf61")
    d = gemm(2, 2, 2).to_dict()
    assert d["bytes"] == d["bytes_read"] + d["bytes_written"]
    assert d["intensity"] == d["flops"] / d["bytes"]


@given(st.integers(1, 4096), st.integers(1, 4096), st.integers(1, 4096))
def test_gemm_counts_scale_as_the_formula(m, n, k):
    w = gemm(m, n, k, a_dtype="bf16")
    assert w.flops == 2 * m * n * k
    assert w.bytes == 2 * (m * k + k * n + m * n)


def test_doctests():
    result = doctest.testmod(counting_module)
    assert result.attempted > 20 and result.failed == 0
