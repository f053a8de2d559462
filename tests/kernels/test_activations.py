"""One activation table for the whole kernel library (tilelab.kernels.activation).

Every kernel that fuses an activation — the element-wise unary, binary and scalar
kernels, and every GEMM kernel's epilogue (tiled, persistent, batched, split-K in both
modes, both GEMVs) — is run on the CPU interpreter for every :class:`Activation` and
compared with the float64 reference; the device erfc is checked against ``math.erfc``.
"""
from __future__ import annotations

import importlib
import math
import re

import numpy as np
import pytest

import tilelab as tl
from kernel_checks import check
from support.data import randn
from tilelab.kernels import Activation
from tilelab.kernels import reference as ref
from tilelab.kernels.activation import ACTIVATIONS, activation_code, activation_names
from tilelab.kernels.reference.matmul import bmm_ref, matmul_ref

ew = importlib.import_module("tilelab.kernels.elementwise")
mm = importlib.import_module("tilelab.kernels.matmul")
dv = importlib.import_module("tilelab.kernels._host.device")
MatmulConfig = mm.MatmulConfig

ALL = list(Activation)


def cpu(a, dtype=None):
    return tl.tensor(a, dtype=dtype, device="cpu")


def check_close(got, want, tol=1e-5):
    """Each element within ``tol`` relative, down to 1e-9 of the largest: below that the
    float32 rounding of exp's argument alone exceeds 1e-5 in the tails."""
    g = np.asarray(got.numpy() if isinstance(got, tl.Tensor) else got, np.float64)
    w = np.asarray(want, np.float64)
    assert g.shape == w.shape and not np.isnan(g).any()
    np.testing.assert_allclose(g, w, rtol=tol, atol=1e-9 * np.abs(w).max())


# ======================================================================================
# the table


def test_one_table_everywhere():
    assert ew.ACTIVATIONS is ACTIVATIONS and mm.ACTIVATIONS is ACTIVATIONS
    assert [int(a) for a in Activation] == list(range(7))
    assert ACTIVATIONS["gelu"] is Activation.GELU_TANH     # "gelu" keeps the tanh form
    assert ACTIVATIONS[None] is ACTIVATIONS["none"] is Activation.NONE
    assert set(activation_names()) == set(ACTIVATIONS) - {None}


@pytest.mark.parametrize("spelling,member", [
    (None, Activation.NONE), ("none", Activation.NONE), ("relu", Activation.RELU),
    ("gelu", Activation.GELU_TANH), ("gelu_tanh", Activation.GELU_TANH),
    (Activation.GELU_ERF, Activation.GELU_ERF), ("silu", Activation.SILU),
    ("sigmoid", Activation.SIGMOID), ("exp", Activation.EXP)])
def test_spellings(spelling, member):
    assert activation_code(spelling, "f()") is member
    assert Activation.parse(spelling) is member


@pytest.mark.parametrize("bad", ["tanh", "GELU", 3, Activation.RELU.value + 0.0, "gelu-erf"])
def test_unknown_activations_are_refused_with_the_choices(bad):
    with pytest.raises(ValueError) as e:
        activation_code(bad, "add()")
    msg = str(e.value)
    assert msg.startswith(f"add(): unknown activation={bad!r}; choose None, a "
                          "tilelab.kernels.Activation or one of ")
    assert all(repr(n) in msg for n in activation_names())


def test_every_host_function_words_the_same_error():
    x = cpu(np.zeros((4, 8), np.float32))
    w = cpu(np.zeros((8, 4), np.float32))
    for call, who in [(lambda: ew.add(x, x, activation="tanh"), "add()"),
                      (lambda: ew.unary(x, "tanh"), "unary()"),
                      (lambda: mm.matmul(x, w, activation="tanh"), "matmul"),
                      (lambda: mm.compile_matmul(64, 64, 64, activation="tanh"),
                       "compile_matmul")]:
        with pytest.raises(ValueError, match=rf"^{re.escape(who)}: unknown activation='tanh'"):
            call()


# ======================================================================================
# the device erfc


@tl.kernel
def _erfc_kernel(z: tl.Out, x: tl.In):
    z.store(dv.erfc_nonneg(tl.load_like(x, z)))


def test_device_erfc_matches_math_erfc_in_relative_error():
    """The Numerical Recipes fit keeps its relative error under 1.2e-7 from 0 into the
    far tail (erfc(9) ~ 4e-37), where 1 - erf(z) would have lost every digit."""
    zs = np.concatenate([np.linspace(0.0, 9.0, 4001), [1e-8, 0.5, 3.0, 6.0]])
    x = cpu(zs.astype(np.float64))
    z = tl.empty(x.shape, "float64", device="cpu")
    _erfc_kernel(z.partition(512), x)
    want = np.array([math.erfc(v) for v in zs])
    rel = np.abs(z.numpy() / want - 1.0)
    assert rel.max() < 1.2e-7, (zs[rel.argmax()], rel.max())


# ======================================================================================
# every kernel agrees with the reference, for every activation


def _inputs(act: Activation, shape, seed=0):
    scale = 1.5 if act is Activation.EXP else 3.0          # exp stays finite in fp32
    return randn(shape, seed, scale)


@pytest.mark.parametrize("act", ALL, ids=lambda a: a.label)
def test_elementwise_kernels(act):
    x, y = _inputs(act, (9, 40), seed=1), _inputs(act, (40,), seed=2)
    check_close(ew.unary(cpu(x), act), ref.unary(x, act))                   # unary_kernel
    check_close(ew.add(cpu(x), cpu(y), activation=act),                      # binary_kernel
                ref.add(x, y, activation=act))
    check_close(ew.mul(0.5, cpu(x), activation=act.label),            # binary_scalar_kernel
                ref.mul(0.5, x, activation=act))


#: one config per GEMM kernel (name -> (config, M, B stored transposed))
GEMM_PATHS = {
    "matmul_kernel": (MatmulConfig(tm=16, tn=16, tk=16), 20, False),
    "persistent_matmul_kernel": (MatmulConfig(tm=16, tn=16, tk=16, schedule="persistent",
                                              num_blocks=3), 20, False),
    "splitk_partial_kernel": (MatmulConfig(tm=16, tn=16, tk=16, schedule="splitk",
                                           split_k=2), 8, False),
    "splitk_atomic_kernel": (MatmulConfig(tm=16, tn=16, tk=16, schedule="splitk",
                                          split_k=2, split_mode="atomic"), 8, False),
    "gemv_kernel": (MatmulConfig(tm=1, tn=16, tk=16, schedule="gemv"), 1, False),
    "gemv_rows_kernel": (MatmulConfig(tm=1, tn=8, tk=16, schedule="gemv"), 1, True),
}


@pytest.mark.parametrize("path", list(GEMM_PATHS))
@pytest.mark.parametrize("act", ALL, ids=lambda a: a.label)
def test_gemm_epilogues(path, act):
    cfg, m, trans = GEMM_PATHS[path]
    a = cpu(_inputs(act, (m, 48), seed=3) / 8, "bfloat16")
    w = cpu(_inputs(act, (24, 48), seed=4) / 8, "bfloat16")
    b = w.T if trans else cpu(np.ascontiguousarray(w.numpy().T))
    bias = cpu(np.linspace(-1, 1, 24).astype(np.float32))
    plan = mm.plan_matmul(a, b, bias=bias, activation=act, out_dtype="float32", config=cfg)
    assert path in [k.name for k, _ in plan.launches]
    check(plan.run(), matmul_ref(a, b, bias=bias, activation=act.label), 1e-5)


@pytest.mark.parametrize("act", ALL, ids=lambda a: a.label)
def test_batched_gemm_epilogue(act):
    a = cpu(_inputs(act, (2, 12, 32), seed=5) / 8, "bfloat16")
    b = cpu(_inputs(act, (2, 32, 20), seed=6) / 8, "bfloat16")
    got = mm.bmm(a, b, activation=act, out_dtype="float32",
                 config=MatmulConfig(tm=16, tn=16, tk=16))
    check(got, bmm_ref(a, b, activation=act), 1e-5)
