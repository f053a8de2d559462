"""The memory-bound kernel library on the CPU interpreter.

Every host function is compared with its float64 reference (tilelab.kernels.reference)
on random data, over dtypes and edge shapes. Outputs are poisoned with NaN before each
launch (see ``poisoned_outputs``), so an element no block writes fails the comparison.
Each kernel is also run under the race detector and compiled for sm_90 (no GPU needed).
"""
from __future__ import annotations

import doctest
import functools
import importlib

import ml_dtypes
import numpy as np
import pytest

import tilelab as tl
from tilelab.kernels import reference as ref
from tilelab.runtime.tensor import empty as real_empty

ew = importlib.import_module("tilelab.kernels.elementwise")
hs = importlib.import_module("tilelab.kernels._host")
sm = importlib.import_module("tilelab.kernels.softmax")
nm = importlib.import_module("tilelab.kernels.norms")
rp = importlib.import_module("tilelab.kernels.rope")
em = importlib.import_module("tilelab.kernels.embedding")
rd = importlib.import_module("tilelab.kernels.reduce")
MODULES = [ew, sm, nm, rp, em, rd, ref]

DTYPES = ["float32", "bfloat16", "float16"]
#: relative tolerance per storage dtype (results are rounded to it once)
TOL = {"float32": 1e-5, "bfloat16": 1e-2, "float16": 2e-3}
NP_DTYPE = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}
#: absolute slack of element-wise results that underflow the dtype
TINY = {"float32": 1e-37, "bfloat16": 1e-37, "float16": 1e-7}


# ---- fixtures and helpers ------------------------------------------------------------




def rand(rng, shape, dtype="float32", scale=1.0, offset=0.0):
    return (rng.standard_normal(shape) * scale + offset).astype(NP_DTYPE[dtype])


def cpu(a):
    return tl.tensor(a, device="cpu")


def check(got, want, dtype, *, atol=None, rtol=None):
    """got (tensor or array) ~ want (float64): no unexpected NaN, dtype tolerance.

    By default the absolute slack is ``rtol * max|want|`` (norm-wise: right for
    reductions and normalizations); element-wise ops use :func:`check_ew`.
    """
    g = np.asarray(got.numpy() if isinstance(got, tl.Tensor) else got).astype(np.float64)
    w = np.asarray(want, np.float64)
    assert g.shape == w.shape, (g.shape, w.shape)
    bad = np.isnan(g) & ~np.isnan(w)
    assert not bad.any(), f"unexpected NaN (unwritten?) at {np.argwhere(bad)[:5].tolist()}"
    tol = TOL[dtype] if rtol is None else rtol
    finite = np.abs(w[np.isfinite(w)])
    scale = finite.max() if finite.size else 1.0
    np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale if atol is None else atol)


def check_ew(got, want, dtype):
    """Element-wise results: each element within the relative tolerance, down to 1e-4 of
    the largest (below that, float32 rounding of exp's argument alone exceeds 1e-5)."""
    w = np.abs(np.asarray(want, np.float64))
    scale = w[np.isfinite(w)].max(initial=0.0)
    check(got, want, dtype, atol=max(TINY[dtype], 1e-4 * TOL[dtype] * scale))


OPS = list(ew.BINARY_OPS)
ACTS = ["relu", "gelu_tanh", "gelu_erf", "silu", "sigmoid", "exp"]


# ======================================================================================
# element-wise
# ======================================================================================


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_binary_ops_with_row_broadcast(op, dtype, rng):
    x, b = rand(rng, (37, 130), dtype), rand(rng, (130,), dtype)
    if op == "div":                               # keep quotients inside f16's range
        x, b = ((np.abs(v.astype(np.float32)) + 0.5).astype(NP_DTYPE[dtype]) for v in (x, b))
    check_ew(ew.binary(op, cpu(x), cpu(b)), ref.binary(op, x, b), dtype)
    check_ew(getattr(ew, op)(cpu(b), cpu(x)), ref.binary(op, b, x), dtype)   # x broadcasts


BROADCASTS = {
    "same_3d": ((2, 3, 50), (2, 3, 50)),
    "row_over_3d": ((3, 4, 130), (130,)),
    "row_with_ones": ((3, 4, 130), (1, 1, 130)),
    "column": ((37, 130), (37, 1)),
    "column_3d": ((2, 3, 50), (2, 3, 1)),
    "one_element": ((37, 130), (1, 1)),
    "zero_dim": ((5, 7), ()),
    "vector_1d": ((1,), (9,)),
    "single": ((1,), (1,)),
}


@pytest.mark.parametrize("case", list(BROADCASTS))
def test_broadcast_shapes(case, rng):
    xs, ys = BROADCASTS[case]
    x, y = rand(rng, xs), rand(rng, ys)
    check_ew(ew.sub(cpu(x), cpu(y)), x.astype(np.float64) - y, "float32")
    check_ew(ew.sub(cpu(y), cpu(x)), y.astype(np.float64) - x, "float32")


@pytest.mark.parametrize("dtype", DTYPES)
def test_python_scalars_on_either_side(dtype, rng):
    x = rand(rng, (37, 130), dtype)
    check_ew(ew.mul(cpu(x), 2.5), ref.mul(x, 2.5), dtype)
    check_ew(ew.sub(1.5, cpu(x)), ref.sub(1.5, x), dtype)
    x = (np.abs(x.astype(np.float32)) + 0.1).astype(NP_DTYPE[dtype])
    check_ew(ew.div(1.0, cpu(x), activation="relu"), ref.div(1.0, x, "relu"), dtype)
    check_ew(ew.maximum(cpu(x), 0.0), ref.relu(x), dtype)


def test_strided_and_tiled_edges(rng):
    x = rand(rng, (130, 37))
    y = rand(rng, (37, 130))
    xt = cpu(x).T                                # a non-contiguous (37, 130) view
    check_ew(ew.add(xt, cpu(y), block_m=2, block_n=32), x.T.astype(np.float64) + y, "float32")
    v = rand(rng, (3, 100))[:, ::2]              # strided 2-D, rows not a tile multiple
    check_ew(ew.relu(cpu(v), block_m=2, block_n=16), ref.relu(v), "float32")
    w = cpu(rand(rng, (2, 3, 40)))[:, :, 10:30]   # non-contiguous 3-D: copied, then tiled
    check_ew(ew.exp(w), ref.exp(w.numpy()), "float32")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", ACTS)
def test_fused_add_activation(act, dtype, rng):
    scale = 1.5 if act == "exp" else 4.0         # exp stays inside f16's range
    x, y = rand(rng, (33, 70), dtype, scale), rand(rng, (33, 70), dtype, scale)
    check_ew(ew.add(cpu(x), cpu(y), activation=act), ref.add(x, y, act), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", ACTS)
def test_unary_activations_including_extremes(act, dtype, rng):
    edges = [0.0, -0.0, 1e-3, -1e-3, 10.0, -10.0, 30.0, -30.0, 80.0, -80.0]
    if act == "exp":
        edges = edges[:8]                        # exp(80) overflows f16/bf16 by design
    if dtype == "float16" and act == "exp":
        edges = edges[:6]
    x = np.concatenate([rand(rng, 300, dtype, 2.0 if act == "exp" else 3.0),
                        np.array(edges).astype(NP_DTYPE[dtype])])
    check_ew(ew.unary(cpu(x), act), ref.unary(x, act), dtype)


def test_named_unary_functions(rng):
    x = rand(rng, (5, 40), scale=3.0)
    check_ew(ew.exp(cpu(x)), ref.exp(x), "float32")
    check_ew(ew.relu(cpu(x)), ref.relu(x), "float32")
    check_ew(ew.gelu(cpu(x)), ref.gelu(x), "float32")
    check_ew(ew.gelu(cpu(x), approximate="none"), ref.gelu(x, "none"), "float32")
    check_ew(ew.silu(cpu(x)), ref.silu(x), "float32")
    check_ew(ew.sigmoid(cpu(x)), ref.sigmoid(x), "float32")


def test_empty_and_single_element_tensors():
    z = ew.add(cpu(np.zeros((0, 4), np.float32)), cpu(np.zeros((0, 4), np.float32)))
    assert z.shape == (0, 4)
    assert ew.relu(cpu(np.zeros(0, np.float32))).shape == (0,)
    assert ew.sigmoid(cpu(np.float32(0.0).reshape(()))).numpy() == 0.5


def test_out_argument_is_written_in_place(rng):
    x, y = rand(rng, (9, 20)), rand(rng, (20,))
    out = cpu(np.full((9, 20), np.nan, np.float32))
    res = ew.add(cpu(x), cpu(y), out=out)
    assert res is out
    check_ew(out, ref.add(x, y), "float32")
    with pytest.raises(ValueError, match=r"out must be a \(9, 20\) float32"):
        ew.add(cpu(x), cpu(y), out=cpu(np.zeros((9, 21), np.float32)))


def test_strided_out_views_are_written_in_place(rng):
    x, y = rand(rng, (9, 20)), rand(rng, (9, 20))
    base = np.full((20, 9), np.nan, np.float32)
    out = cpu(base).T                             # a (9, 20) view with strides (1, 9)
    ew.add(cpu(x), cpu(y), out=out)
    check_ew(base.T, ref.add(x, y), "float32")
    base[:] = np.nan
    sm.softmax(cpu(x), out=out)
    check(base.T, ref.softmax(x), "float32")
    sums = np.full(18, np.nan, np.float32)
    rd.row_sum(cpu(x), out=cpu(sums)[::2])        # a strided 1-D output
    check(sums[::2], ref.row_sum(x), "float32")
    assert np.isnan(sums[1::2]).all()
    with pytest.raises(ValueError, match="must be contiguous"):
        ew.relu(cpu(rand(rng, (2, 3, 4))), out=cpu(np.zeros((4, 3, 2), np.float32)).T)


def test_torch_tensors_are_borrowed(rng):
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(rand(rng, (8, 64))).to(torch.bfloat16)
    out = torch.full((8, 64), float("nan"), dtype=torch.bfloat16)
    ew.silu(x, out=out)                          # written through the borrowed memory
    check_ew(out.float().numpy(), ref.silu(x.float().numpy()), "bfloat16")
    y = sm.softmax(x)
    check(y, ref.softmax(x.float().numpy()), "bfloat16")


def test_elementwise_errors():
    f32 = cpu(np.zeros((4, 8), np.float32))
    with pytest.raises(TypeError, match="x is float32 and y is bfloat16"):
        ew.add(f32, cpu(np.zeros((4, 8), ml_dtypes.bfloat16)))
    with pytest.raises(ValueError, match="cannot broadcast"):
        ew.add(cpu(np.zeros((2, 4, 8), np.float32)), cpu(np.zeros((4, 1), np.float32)))
    with pytest.raises(ValueError, match="do not broadcast"):
        ew.add(f32, cpu(np.zeros((8, 4), np.float32)))
    with pytest.raises(ValueError, match="block_n=48 must be a positive power of two"):
        ew.relu(f32, block_n=48)
    with pytest.raises(ValueError, match=r"add\(\): unknown activation='tanh'; choose None, "
                                         r"a tilelab.kernels.Activation or one of 'none'"):
        ew.add(f32, f32, activation="tanh")
    with pytest.raises(ValueError, match="unknown op"):
        ew.binary("pow", f32, f32)
    with pytest.raises(TypeError, match="two scalars"):
        ew.add(1.0, 2.0)
    with pytest.raises(TypeError, match="supported dtypes are float32"):
        ew.relu(cpu(np.zeros(4, np.int32)))
    with pytest.raises(ValueError, match="approximate must be"):
        ew.gelu(f32, approximate="erf")
    with pytest.raises(tl.AliasError):
        ew.add(f32, f32, out=f32)               # an output may not alias an input


# ======================================================================================
# softmax
# ======================================================================================


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_softmax_one_pass(log, dtype, rng):
    x = rand(rng, (37, 300), dtype, 3.0)
    call = sm._softmax_call(cpu(x), log=log)
    assert call.kernel.__wrapped__ is sm.softmax_rows_kernel.__wrapped__   # (hinted copy)
    want = ref.log_softmax(x) if log else ref.softmax(x)
    check(call.run(), want, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,block_m,block_n", [
    ((3, 20000), None, None),          # longer than MAX_ROW_TILE: online by default
    ((5, 1000), 2, 128),               # rows and columns not multiples of the tile
    ((1, 700), None, 64),              # one row
])
def test_softmax_online_long_rows(shape, block_m, block_n, log, dtype, rng):
    x = rand(rng, shape, dtype, 3.0)
    call = sm._softmax_call(cpu(x), log=log, block_m=block_m, block_n=block_n)
    assert call.kernel.__wrapped__ is sm.softmax_online_kernel.__wrapped__
    assert call.kernel.options.occupancy == (4 if dtype == "float32" else 8)
    want = ref.log_softmax(x) if log else ref.softmax(x)
    check(call.run(), want, dtype)


@pytest.mark.parametrize("n,hints", [(16384, (2, None)), (32768, (1, 8))])
def test_rms_norm_of_16bit_rows_up_to_32768_runs_in_one_pass(n, hints, rng):
    """RMSNorm of bf16 rows of 16384/32768: one tile of 128-wide sub-rows, read once,
    under the measured hints; layer norm, the fused add, float32 and rows that would
    need padding keep the looped form."""
    x = rand(rng, (3, n), "bfloat16", 2.0, 0.5)
    w = rand(rng, (n,), "bfloat16")
    call = nm._norm_call("rms_norm", cpu(x), cpu(w), None, None, 1e-6, True, None, None,
                         None)
    assert call.kernel.__wrapped__ is nm.rms_split_kernel.__wrapped__
    assert (call.kernel.options.occupancy, call.kernel.options.num_worker_warps) == hints
    check(call.run(), ref.rms_norm(x, w, 1e-6), "bfloat16")
    looped = {
        "layer_norm": nm._norm_call("layer_norm", cpu(x), cpu(w), None, None, 1e-6, False,
                                    None, None, None),
        "add_rms_norm": nm._norm_call("add_rms_norm", cpu(x), cpu(w), None, cpu(x), 1e-6,
                                      True, None, None, None),
        "float32": nm._norm_call("rms_norm", cpu(x.astype(np.float32)),
                                 cpu(w.astype(np.float32)), None, None, 1e-6, True, None,
                                 None, None),
        "padded": nm._norm_call("rms_norm", cpu(x[:, :n - 4096]), cpu(w[:n - 4096]), None,
                                None, 1e-6, True, None, None, None),
        "block_n": nm._norm_call("rms_norm", cpu(x), cpu(w), None, None, 1e-6, True, None,
                                 4096, None)}
    for name, c in looped.items():
        assert c.kernel.__wrapped__ in (nm.norm_looped_kernel.__wrapped__,
                                        nm.add_norm_looped_kernel.__wrapped__), name


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("n,hints", [(16384, (2, None)), (32768, (1, 8))])
def test_16bit_rows_up_to_32768_run_in_one_pass(n, hints, log, rng):
    """bf16 rows of 16384 and 32768 run as 128 / 256 sub-rows of 128, read once, under
    the hints that compile them without spills; float32 rows and rows that would need
    padding keep the online form."""
    x = rand(rng, (3, n), "bfloat16", 3.0)
    x[1, : n // 3] = -np.inf                      # a masked prefix, as in causal scores
    call = sm._softmax_call(cpu(x), log=log)
    assert call.kernel.__wrapped__ is sm.softmax_split_kernel.__wrapped__
    assert (call.kernel.options.occupancy, call.kernel.options.num_worker_warps) == hints
    assert call.args[0].tile_shape == (n // 128, 128)
    check(call.run(), ref.log_softmax(x) if log else ref.softmax(x), "bfloat16")
    f32 = sm._softmax_call(cpu(rand(rng, (2, n), "float32")), log=log)
    assert f32.kernel.__wrapped__ is sm.softmax_online_kernel.__wrapped__
    padded = sm._softmax_call(cpu(rand(rng, (2, n - 4096), "bfloat16")), log=log)
    assert padded.kernel.__wrapped__ is sm.softmax_online_kernel.__wrapped__


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("n,g", [(8192, 64), (6144, 32), (5000, 8)])
def test_softmax_long_rows_split_into_sub_rows(n, g, log, dtype, rng):
    """Rows of 4096-8192 run as G sub-rows (padded to a power of two when n / G is not
    one): the same results as the reference."""
    x = rand(rng, (3, n), dtype, 3.0)
    call = sm._softmax_call(cpu(x), log=log)
    assert call.kernel.__wrapped__ is sm.softmax_split_kernel.__wrapped__
    assert sm._split_rows(n) == g and call.args[0].tile_shape[0] == g
    want = ref.log_softmax(x) if log else ref.softmax(x)
    check(call.run(), want, dtype)


def test_softmax_split_masked_sub_rows_and_fallbacks(rng):
    """A sub-row of only -inf adds nothing (no NaN), a row of only -inf is NaN as in
    torch; a non-contiguous input or explicit blocks keep the one-row kernel."""
    x = rand(rng, (3, 8192), scale=3.0)
    x[0, :4000] = -np.inf                          # whole sub-rows of -inf
    x[1, 5000] = 90.0
    x[2, :] = -np.inf
    y = sm.softmax(cpu(x)).numpy()
    assert np.isnan(y[2]).all() and not np.isnan(y[:2]).any()
    check(y[:2], ref.softmax(x[:2]), "float32")
    check(sm.log_softmax(cpu(x[:2])), ref.log_softmax(x[:2]), "float32")
    wide = rand(rng, (3, 16384), scale=3.0)
    strided = cpu(wide)[:, :8192]                  # rows 16384 apart: not contiguous
    call = sm._softmax_call(strided)
    assert call.kernel.__wrapped__ is sm.softmax_rows_kernel.__wrapped__
    check(call.run(), ref.softmax(wide[:, :8192]), "float32")
    call = sm._softmax_call(cpu(x[:2]), block_m=1)
    assert call.kernel.__wrapped__ is sm.softmax_rows_kernel.__wrapped__


def test_softmax_masked_prefix_and_extremes(rng):
    x = rand(rng, (4, 1000), scale=3.0)
    x[:, :600] = -np.inf                          # whole leading column tiles are -inf
    x[1, 900] = 80.0
    for bn in (None, 128):
        check(sm.softmax(cpu(x), block_n=bn), ref.softmax(x), "float32")
    x[2, :] = -np.inf                             # a fully masked row is NaN, as in torch
    y = sm.softmax(cpu(x), block_n=128).numpy()
    assert np.isnan(y[2]).all() and not np.isnan(np.delete(y, 2, axis=0)).any()


def test_softmax_shapes_and_errors(rng):
    check(sm.softmax(cpu(rand(rng, (1, 1)))), np.ones((1, 1)), "float32")
    x = rand(rng, (2, 3, 50))
    check(sm.softmax(cpu(x)), ref.softmax(x), "float32")
    check(sm.log_softmax(cpu(x[0, 0])), ref.log_softmax(x[0, 0]), "float32")
    assert sm.softmax(cpu(np.zeros((0, 5), np.float32))).shape == (0, 5)
    with pytest.raises(ValueError, match="at least one dimension"):
        sm.softmax(cpu(np.float32(1).reshape(())))


# ======================================================================================
# norms
# ======================================================================================

NORM_SHAPES = {
    "one_pass": ((37, 300), None, None),
    "one_pass_3d_rows_not_tiled": ((3, 5, 96), 4, None),
    "looped": ((5, 1000), None, 128),
    "looped_long": ((2, 9000), None, None),
    "single": ((1, 1), None, None),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", list(NORM_SHAPES))
def test_layer_norm(case, dtype, rng):
    shape, bm, bn = NORM_SHAPES[case]
    x = rand(rng, shape, dtype, 2.0, 1.0)
    w, b = rand(rng, shape[-1], "float32"), rand(rng, shape[-1], dtype)
    check(nm.layer_norm(cpu(x), cpu(w), cpu(b), block_m=bm, block_n=bn),
          ref.layer_norm(x, w, b, 1e-5), dtype)
    check(nm.layer_norm(cpu(x), cpu(w), eps=1e-3, block_m=bm, block_n=bn),
          ref.layer_norm(x, w, None, 1e-3), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", list(NORM_SHAPES))
def test_rms_norm(case, dtype, rng):
    shape, bm, bn = NORM_SHAPES[case]
    x, w = rand(rng, shape, dtype, 2.0), rand(rng, shape[-1], dtype)
    check(nm.rms_norm(cpu(x), cpu(w), block_m=bm, block_n=bn), ref.rms_norm(x, w, 1e-6),
          dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ["one_pass", "looped", "looped_long"])
@pytest.mark.parametrize("kind", ["layer", "rms"])
def test_norms_with_fused_residual(kind, case, dtype, rng):
    shape, bm, bn = NORM_SHAPES[case]
    x, r = rand(rng, shape, dtype), rand(rng, shape, dtype)
    w, b = rand(rng, shape[-1], dtype), rand(rng, shape[-1], dtype)
    if kind == "layer":
        y, h = nm.add_layer_norm(cpu(x), cpu(r), cpu(w), cpu(b), block_m=bm, block_n=bn)
        want_y, want_h = ref.add_layer_norm(x, r, w, b, 1e-5)
    else:
        y, h = nm.add_rms_norm(cpu(x), cpu(r), cpu(w), block_m=bm, block_n=bn)
        want_y, want_h = ref.add_rms_norm(x, r, w, 1e-6)
    check(h, want_h, dtype)
    # h is rounded to the storage dtype before it is normalized (as unfused code does)
    hs = want_h.astype(NP_DTYPE[dtype])
    want = ref.layer_norm(hs, w, b, 1e-5) if kind == "layer" else ref.rms_norm(hs, w, 1e-6)
    check(y, want, dtype)
    check(y, want_y, dtype, rtol=3 * TOL[dtype])


@pytest.mark.parametrize("block_n", [None, 64], ids=["one_pass", "looped"])
def test_layer_norm_large_mean_is_stable(block_n, rng):
    # E[h^2] - E[h]^2 would lose every digit here; two-pass / Chan merging keeps ~1e-4
    x = rand(rng, (4, 1000), "float32", 1.0, 1000.0)
    w = np.ones(1000, np.float32)
    check(nm.layer_norm(cpu(x), cpu(w), block_n=block_n), ref.layer_norm(x, w), "float32",
          rtol=1e-3)


def test_norm_errors(rng):
    x = cpu(rand(rng, (4, 8)))
    with pytest.raises(ValueError, match=r"weight must have shape \(8,\)"):
        nm.rms_norm(x, cpu(rand(rng, 7)))
    with pytest.raises(ValueError, match=r"bias must have shape \(8,\)"):
        nm.layer_norm(x, cpu(rand(rng, 8)), cpu(rand(rng, 4)))
    with pytest.raises(ValueError, match="residual must match x"):
        nm.add_rms_norm(x, cpu(rand(rng, (4, 8), "bfloat16")), cpu(rand(rng, 8)))
    with pytest.raises(ValueError, match="eps must be a non-negative"):
        nm.rms_norm(x, cpu(rand(rng, 8)), eps=-1.0)
    with pytest.raises(TypeError, match=r"out must be a pair \(out, h\)"):
        nm.add_rms_norm(x, x, cpu(rand(rng, 8)), out=x)


# ======================================================================================
# rope
# ======================================================================================


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["bshd", "thd", "thd_positions_i32", "thd_positions_i64"])
@pytest.mark.parametrize("table", ["half", "full"])
def test_rope_q_and_k(layout, table, dtype, rng):
    cos, sin = ref.rope_tables(40, 16)
    if table == "full":                           # Hugging Face tables: halves repeated
        cos, sin = np.concatenate([cos, cos], 1), np.concatenate([sin, sin], 1)
    cos, sin = cos.astype(np.float32), sin.astype(np.float32)
    shape_q, shape_k = ((2, 5, 6, 16), (2, 5, 3, 16)) if layout == "bshd" else \
        ((11, 6, 16), (11, 3, 16))
    q, k = rand(rng, shape_q, dtype), rand(rng, shape_k, dtype)
    pos = None
    if layout.startswith("thd_positions"):
        pos = rng.integers(0, 40, 11).astype(np.int32 if layout.endswith("i32") else np.int64)
    qo, ko = rp.rope(cpu(q), cpu(k), cpu(cos), cpu(sin),
                     positions=None if pos is None else cpu(pos), block_t=4)
    want_q, want_k = ref.rope(q, k, cos, sin, pos)
    check(qo, want_q, dtype)
    check(ko, want_k, dtype)


def test_apply_rope_single_tensor_default_tiles(rng):
    cos, sin = rp.rope_tables(64, 32, device="cpu")
    x = rand(rng, (3, 7, 5, 32))                  # heads and tokens not powers of two
    check(rp.apply_rope(cpu(x), cos, sin), ref.apply_rope(x, cos.numpy(), sin.numpy()),
          "float32")
    pos = rng.integers(0, 64, 9)
    y = rand(rng, (9, 2, 32), "bfloat16")
    check(rp.apply_rope(cpu(y), cos, sin, positions=cpu(pos)),
          ref.apply_rope(y, cos.numpy(), sin.numpy(), pos), "bfloat16")


def test_rope_errors_and_out_of_range_positions(rng):
    cos, sin = rp.rope_tables(8, 16, device="cpu")
    x = cpu(rand(rng, (4, 2, 16)))
    with pytest.raises(ValueError, match="head_dim must be a power of two"):
        rp.apply_rope(cpu(rand(rng, (4, 2, 12))), *rp.rope_tables(8, 12, device="cpu"))
    with pytest.raises(ValueError, match=r"positions\[1\] = 8 is outside the tables"):
        rp.apply_rope(x, cos, sin, positions=cpu(np.array([0, 8, 1, 2], np.int32)))
    with pytest.raises(ValueError, match="sequence length 9 exceeds"):
        rp.apply_rope(cpu(rand(rng, (1, 9, 2, 16))), cos, sin)
    with pytest.raises(ValueError, match="must match q"):
        rp.rope(x, cpu(rand(rng, (5, 2, 16))), cos, sin)
    with pytest.raises(ValueError, match="positions are for"):
        rp.apply_rope(cpu(rand(rng, (1, 4, 2, 16))), cos, sin,
                      positions=cpu(np.zeros(4, np.int32)))
    with pytest.raises(TypeError, match="positions must be int32 or int64"):
        rp.apply_rope(x, cos, sin, positions=cpu(np.zeros(4, np.float32)))
    with pytest.raises(ValueError, match=r"cos must be \(max_pos, 8\)"):
        rp.apply_rope(x, cpu(np.zeros((8, 5), np.float32)), sin)
    # unchecked: an out-of-range position reads zero tables -> a zero vector, no fault
    y = rp.apply_rope(x, cos, sin, positions=cpu(np.array([0, 99, 1, -1])),
                      check_positions=False).numpy()
    assert (y[[1, 3]] == 0).all() and np.isfinite(y).all()


# ======================================================================================
# embedding
# ======================================================================================


@pytest.mark.parametrize("dtype", DTYPES + ["int32"])
@pytest.mark.parametrize("id_dtype", ["int32", "int64"])
@pytest.mark.parametrize("tiles", [(None, None), (4, 32)], ids=["default", "small"])
def test_embedding(id_dtype, dtype, tiles, rng):
    table = (rng.standard_normal((50, 70)) * 10).astype(NP_DTYPE.get(dtype, dtype))
    ids = rng.integers(0, 50, (3, 5)).astype(id_dtype)
    ids[0, 0], ids[-1, -1] = 0, 49
    out = em.embedding(cpu(ids), cpu(table), block_t=tiles[0], block_d=tiles[1])
    assert out.dtype == table.dtype and out.shape == (3, 5, 70)
    np.testing.assert_array_equal(out.numpy(), table[ids])   # rows are copied exactly
    check(out.numpy().astype(np.float64), ref.embedding(ids, table), "float32")


def test_embedding_out_of_range_ids(rng):
    table = cpu(rand(rng, (10, 8)))
    with pytest.raises(ValueError, match=r"ids\[1, 0\] = 10 is outside the table's 10 rows"):
        em.embedding(cpu(np.array([[1], [10]], np.int64)), table)
    with pytest.raises(ValueError, match=r"ids\[0\] = -1"):
        em.embedding(cpu(np.array([-1, 2], np.int32)), table)
    out = em.embedding(cpu(np.array([3, 10, -1], np.int32)), table, check_ids=False).numpy()
    assert (out[1:] == 0).all()
    np.testing.assert_array_equal(out[0], table.numpy()[3])
    with pytest.raises(TypeError, match="ids must be int32 or int64"):
        em.embedding(cpu(np.zeros(2, np.float32)), table)
    assert em.embedding(cpu(np.zeros((0,), np.int32)), table).shape == (0, 8)


# ======================================================================================
# reductions
# ======================================================================================

REDUCE_SHAPES = {
    "rows": ((37, 300), None, None),
    "tiled_both_ways": ((37, 300), 4, 64),
    "long_rows": ((3, 9000), None, None),
    "vector": ((17,), None, None),
    "3d": ((2, 3, 50), None, None),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", list(REDUCE_SHAPES))
@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
def test_row_reductions(op, case, dtype, rng):
    shape, bm, bn = REDUCE_SHAPES[case]
    x = rand(rng, shape, dtype)
    got = getattr(rd, f"row_{op}")(cpu(x), block_m=bm, block_n=bn)
    want = getattr(ref, f"row_{op}")(x)
    # sums cancel: bound the error by the sum of magnitudes
    mag = np.abs(x.astype(np.float64)).sum(-1).max() / (shape[-1] if op == "mean" else 1)
    check(got, want, dtype, atol=TOL[dtype] * mag if op in ("sum", "mean") else None)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", list(REDUCE_SHAPES))
def test_row_argmax(case, dtype, rng):
    shape, bm, bn = REDUCE_SHAPES[case]
    x = rand(rng, shape, dtype)
    v, i = rd.row_argmax(cpu(x), block_m=bm, block_n=bn)
    want_v, want_i = ref.row_argmax(x)
    assert i.dtype == np.int64
    np.testing.assert_array_equal(i.numpy(), want_i)
    check(v, want_v, dtype, rtol=0, atol=0)


def test_row_argmax_ties_nan_and_inf():
    x = np.zeros((5, 100), np.float32)
    x[0, [30, 70]] = 5.0                          # tie across column tiles: first wins
    x[1, [70, 90]] = np.nan                       # first NaN wins, and NaN is the max
    x[1, 10] = 100.0
    x[2, :] = -np.inf                             # all -inf: index 0
    x[3, 99] = np.inf
    x[4, 64] = 1.0                                # first column of a later tile
    v, i = rd.row_argmax(cpu(x), block_n=32, block_m=2)
    np.testing.assert_array_equal(i.numpy(), [30, 70, 0, 99, 64])
    np.testing.assert_array_equal(v.numpy(), [5.0, np.nan, -np.inf, np.inf, 1.0])
    assert np.isnan(rd.row_max(cpu(x), block_n=32).numpy()[1])
    assert np.isnan(rd.row_min(cpu(x), block_n=32).numpy()[1])


def test_reduction_empty_rows_and_errors():
    e = cpu(np.zeros((3, 0), np.float32))
    np.testing.assert_array_equal(rd.row_sum(e).numpy(), np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="rows are empty"):
        rd.row_max(e)
    with pytest.raises(ValueError, match="rows are empty"):
        rd.row_argmax(e)
    np.testing.assert_array_equal(rd.row_sum(cpu(np.zeros((2, 3, 0), np.float32))).numpy(),
                                  np.zeros((2, 3), np.float32))
    assert rd.row_sum(cpu(np.zeros((0, 4), np.float32))).shape == (0,)
    with pytest.raises(TypeError, match="out must be a pair"):
        rd.row_argmax(cpu(np.zeros((3, 4), np.float32)), out=e)


# ======================================================================================
# every kernel: race detector, schedules, sm_90 compiles
# ======================================================================================


def _small_calls():
    """One small launch of every kernel (name -> _Call), on CPU tensors."""
    r = np.random.default_rng(7)
    x, b, c = cpu(rand(r, (9, 40))), cpu(rand(r, (40,))), cpu(rand(r, (9, 1)))
    w = cpu(rand(r, 40))
    cos, sin = rp.rope_tables(16, 8, device="cpu")
    q, k = cpu(rand(r, (6, 3, 8))), cpu(rand(r, (6, 1, 8)))
    pos = cpu(np.array([3, 1, 4, 1, 5, 9], np.int32))
    return {
        "binary": ew._binary_call("add", x, b, activation="gelu_erf", block_m=4, block_n=16),
        "binary_column": ew._binary_call("div", x, c, block_m=4, block_n=16),
        "binary_scalar": ew._binary_call("sub", 2.0, x, activation="silu", block_m=4, block_n=16),
        "unary": ew._unary_call(x, "sigmoid", "sigmoid", block_n=64),
        "softmax_rows": sm._softmax_call(x, block_m=4),
        "softmax_online": sm._softmax_call(x, block_m=2, block_n=16),
        "softmax_split": sm._softmax_call(cpu(rand(r, (2, 4096)))),
        "norm_rows": nm._norm_call("ln", x, w, w, None, 1e-5, False, 4, None, None),
        "add_norm_rows": nm._norm_call("rms", x, w, None, x, 1e-5, True, 4, None, None),
        "norm_looped": nm._norm_call("ln", x, w, w, None, 1e-5, False, 2, 16, None),
        "add_norm_looped": nm._norm_call("rms", x, w, None, x, 1e-5, True, 2, 16, None),
        "rms_split": nm._norm_call("rms", cpu(rand(r, (2, 16384), "bfloat16")),
                                   cpu(rand(r, 16384, "bfloat16")), None, None, 1e-5, True,
                                   None, None, None),
        "rope_seq": rp._rope_call("apply_rope", q, None, cos, sin, None, 4, True, None),
        "rope_pos": rp._rope_call("apply_rope", q, None, cos, sin, pos, 4, True, None),
        "rope_qk_seq": rp._rope_call("rope", q, k, cos, sin, None, 4, True, None),
        "rope_qk_pos": rp._rope_call("rope", q, k, cos, sin, pos, 4, True, None),
        "embedding": em._embedding_call(cpu(np.array([3, 0, 8, 8, 1], np.int64)), x,
                                        block_t=2, block_d=16),
        "row_reduce": rd._reduce_call("max", x, block_m=4, block_n=16),
        "row_argmax": rd._argmax_call(x, block_m=4, block_n=16),
    }


SMALL = list(_small_calls())


def test_every_kernel_is_covered():
    # compare the Python functions: a call may launch a copy with an occupancy hint
    kernels = {c.kernel.__wrapped__ for c in _small_calls().values()}
    defined = {v.__wrapped__ for m in MODULES for v in vars(m).values()
               if isinstance(v, tl.Kernel)}
    assert defined == kernels, defined ^ kernels
    assert not any(c.kernel.options.unsafe for c in _small_calls().values())  # safe only


@pytest.mark.parametrize("name", SMALL)
def test_no_races_in_any_order(name):
    call = _small_calls()[name]
    for order in ("sequential", "shuffled"):
        trace = tl.interpret(call.kernel, *call.args, order=order, seed=3)
        assert not trace.has_races, trace.race_report()
    assert trace.bytes_written > 0


def test_row_schedule_gives_each_block_whole_rows():
    y = tl.zeros((10, 100), device="cpu")
    p = y.partition((2, 16), schedule=hs.row_schedule(10, 2))
    assert p.num_blocks() == 5
    for m in range(p.grid[0]):
        assert {p.owner((m, n)) for n in range(p.grid[1])} == {m}
    # and the loop hands each block its row's tiles left to right
    assert p.order()[:p.num_blocks()] == [(m, 0) for m in range(5)]


def test_more_than_65535_tile_rows_launch_from_a_1d_grid():
    # CUDA caps grid y/z at 65535: a norm over 70000 tokens with one row per block
    # must still launch (checked on the launch grid; running 70000 blocks is too slow)
    n = 70_000
    x, w = real_empty((n, 8), "float32", "cpu"), real_empty(8, "float32", "cpu")
    cos = sin = real_empty((n, 4), "float32", "cpu")
    calls = [
        ew._binary_call("add", x, w, block_m=1),
        sm._softmax_call(x, block_m=1),
        nm._norm_call("rms_norm", x, w, None, x, 1e-6, True, 1, None, None),
        rp._rope_call("rope", real_empty((n, 2, 8), "float32", "cpu"),
                      real_empty((n, 1, 8), "float32", "cpu"), cos, sin, None, 1, True,
                      None),
        em._embedding_call(real_empty(n, "int32", "cpu"), x, check_ids=False, block_t=1),
    ]
    for call in calls:
        grid = call.kernel.definition.specialize(call.args).grid()
        assert grid == (n, 1, 1), (call.kernel.name, grid)


def _typical_gpu_calls():
    """Each kernel at the tiles its host function picks for a typical GPU problem."""
    def t(shape, dtype="bfloat16"):
        return real_empty(shape, dtype, "cpu")    # contents do not matter to a compile

    h = t((4096, 4096))
    long = t((64, 32768))
    w = t(4096)
    q, k = t((4, 512, 32, 128)), t((4, 512, 8, 128))
    cos, sin = t((4096, 64), "float32"), t((4096, 64), "float32")
    pos = t(2048, "int32")
    return {
        "binary": ew._binary_call("add", h, h, activation="silu"),
        "binary_row": ew._binary_call("mul", h, w),
        "binary_scalar": ew._binary_call("mul", h, 0.5),
        "unary": ew._unary_call(h, "gelu_tanh", "gelu"),
        "softmax_rows": sm._softmax_call(t((4096, 1024))),
        # bf16 rows up to 32768 are one pass now: the online form starts past them
        "softmax_online": sm._softmax_call(t((64, 65536))),
        "softmax_split": sm._softmax_call(h),
        "norm_rows": nm._norm_call("rms", h, w, None, None, 1e-6, True, None, None, None),
        "add_norm_rows": nm._norm_call("ln", h, w, w, h[:, :], 1e-5, False, None, None,
                                       None),
        "norm_looped": nm._norm_call("ln", long, t(32768), None, None, 1e-5, False, None,
                                     None, None),
        "add_norm_looped": nm._norm_call("rms", long, t(32768), None, long[:, :], 1e-6,
                                         True, None, None, None),
        "rms_split": nm._norm_call("rms", t((64, 16384)), t(16384), None, None, 1e-6, True,
                                   None, None, None),
        "rope_qk_seq": rp._rope_call("rope", q, k, cos, sin, None, None, False, None),
        "rope_qk_pos": rp._rope_call("rope", q.reshape(2048, 32, 128),
                                     k.reshape(2048, 8, 128), cos, sin, pos, None, False,
                                     None),
        "rope_seq": rp._rope_call("apply_rope", q, None, cos, sin, None, None, False, None),
        "rope_pos": rp._rope_call("apply_rope", q.reshape(2048, 32, 128), None, cos, sin,
                                  pos, None, False, None),
        "embedding": em._embedding_call(t(2048, "int32"), t((1000, 4096)),
                                        check_ids=False),
        "row_reduce": rd._reduce_call("sum", h),
        "row_argmax": rd._argmax_call(t((64, 151936))),
    }


TYPICAL = functools.lru_cache(maxsize=1)(_typical_gpu_calls)   # built once, lazily
TYPICAL_NAMES = ["binary", "binary_row", "binary_scalar", "unary", "softmax_rows",
                 "softmax_online", "softmax_split", "norm_rows", "add_norm_rows", "norm_looped",
                 "add_norm_looped", "rms_split", "rope_qk_seq", "rope_qk_pos", "rope_seq", "rope_pos",
                 "embedding", "row_reduce", "row_argmax"]


def test_typical_configurations_cover_every_kernel():
    assert list(TYPICAL()) == TYPICAL_NAMES
    # the same kernels, whatever hints a dtype or shape compiles them with
    assert {c.kernel.__wrapped__ for c in TYPICAL().values()} == \
        {c.kernel.__wrapped__ for c in _small_calls().values()}


@pytest.mark.parametrize("name", TYPICAL_NAMES)
@pytest.mark.toolchain
def test_compiles_for_sm_90(name):
    call = TYPICAL()[name]
    art = call.kernel.compile(*call.args, arch="sm_90")
    assert art.cubin and "sm_90" in art.summary()


# ======================================================================================
# documentation
# ======================================================================================


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_docstring_examples_run(module, monkeypatch):
    monkeypatch.undo()                            # examples show real (unpoisoned) output
    res = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.attempted > 0 and res.failed == 0


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_public_name_has_an_example(module):
    for name in module.__all__:
        obj = getattr(module, name)
        if callable(obj):                         # constants (op tables) need none
            assert "Example" in (obj.__doc__ or ""), f"{module.__name__}.{name}"


def test_row_kernels_carry_the_measured_hints(monkeypatch):
    """Softmax and the norms compile with occupancy 4 (no worker-warp hint: the exp2
    kernels were faster without it on sm_90); an arch entry overrides the hint there
    only."""
    import tilelab.runtime.device as dev

    def options(k):
        return k.options.occupancy, k.options.num_worker_warps

    assert options(hs.row_kernel(sm.softmax_split_kernel, "softmax", "cpu")) == (4, None)
    monkeypatch.setattr(dev, "current_arch", lambda: "sm_90")
    assert options(hs.row_kernel(sm.softmax_split_kernel, "softmax", "cuda")) == (4, None)
    assert options(hs.row_kernel(nm.norm_rows_kernel, "norm", "cuda")) == (4, None)
    monkeypatch.setitem(hs.ROW_HINTS_BY_ARCH, "sm_90",
                        {"softmax": {"occupancy": 4, "num_worker_warps": 8}})
    assert options(hs.row_kernel(sm.softmax_rows_kernel, "softmax", "cuda")) == (4, 8)
    monkeypatch.setattr(dev, "current_arch", lambda: "sm_100")
    assert options(hs.row_kernel(sm.softmax_rows_kernel, "softmax", "cuda")) == (4, None)


def test_looped_row_kernels_carry_their_occupancy_hints():
    """Reductions, argmax, the online softmax and RMSNorm of long rows compile with
    occupancy 8 (unhinted, tileiras made each one 255-register block per SM: row_sum
    234 -> 65 us on the H200); layer norm and float32 softmax, which spill at 8, with 4;
    the one-pass kernels keep occupancy 4."""
    import importlib

    red = importlib.import_module("tilelab.kernels.reduce")
    x = tl.zeros((4, 20000), dtype="bfloat16", device="cpu")
    w = tl.zeros((20000,), dtype="bfloat16", device="cpu")
    calls = {
        "row_sum": red._reduce_call("sum", x), "row_max": red._reduce_call("max", x),
        "row_argmax": red._argmax_call(x), "softmax": sm._softmax_call(x),
        "rms_norm": nm._norm_call("rms_norm", x, w, None, None, 1e-6, True, None, None,
                                  None),
        "add_rms_norm": nm._norm_call("add_rms_norm", x, w, None, x, 1e-6, True, None,
                                      None, None),
    }
    wrapped = {"row_sum": red.row_reduce_kernel, "row_max": red.row_reduce_kernel,
               "row_argmax": red.row_argmax_kernel, "softmax": sm.softmax_online_kernel,
               "rms_norm": nm.norm_looped_kernel, "add_rms_norm": nm.add_norm_looped_kernel}
    for name, call in calls.items():
        assert call.kernel.__wrapped__ is wrapped[name].__wrapped__, name
        assert call.kernel.options.occupancy == 8, name
    fours = {"float32 softmax": sm._softmax_call(tl.zeros((4, 20000), dtype="float32",
                                                          device="cpu")),
             "layer_norm": nm._norm_call("layer_norm", x, w, w, None, 1e-6, False, None,
                                         None, None),
             "add_layer_norm": nm._norm_call("add_layer_norm", x, w, w, x, 1e-6, False,
                                             None, None, None)}
    for name, call in fours.items():
        assert call.kernel.options.occupancy == 4, name
    short = nm._norm_call("rms_norm", tl.zeros((4, 4096), device="cpu"),
                          tl.zeros((4096,), device="cpu"), None, None, 1e-6, True, None,
                          None, None)
    assert short.kernel.options.occupancy == 4


def test_rope_of_one_tensor_carries_occupancy_8():
    """apply_rope's kernel compiles with occupancy 8 (3.40 -> 3.89 TB/s on the H200,
    no spills); rope of q and k keeps no hint (occupancy 8 spills there)."""
    import importlib

    rp = importlib.import_module("tilelab.kernels.rope")
    x = tl.zeros((4, 2, 8), device="cpu")
    cos, sin = rp.rope_tables(4, 8, device="cpu")
    one = rp._rope_call("apply_rope", x, None, cos, sin, None, None, False, None)
    assert one.kernel.options.occupancy == 8
    assert one.kernel.__wrapped__ is rp.rope_seq_kernel.__wrapped__
    both = rp._rope_call("rope", x, x, cos, sin, None, None, False, None)
    assert both.kernel is rp.rope_qk_seq_kernel and both.kernel.options.occupancy is None
