"""Element-wise kernels of the acceptance corpus, in the idioms of cuTile's vector-add
kernel and TileGym's activation ops, and a per-row fp8 quantization.

What changes in a port is only what safety needs: the output is a ``tl.Out`` partition,
``ct.bid(...)`` becomes the partition's ``tile_index`` and ``ct.store(out, index=...,
tile=t)`` becomes ``out.store(t)``. Everything else (constant aliases, module constants,
helpers with defaults, ``ct.gather`` with index tiles, rounding modes) stays as written.
"""
from __future__ import annotations

import cuda.tile as ct
import ml_dtypes
import numpy as np
from cuda.tile import RoundingMode as RMd

import tilelab as tl

from .registry import Run, accept, out, pow2, tensor

ConstInt = ct.Constant[int]
PAD_ZERO = ct.PaddingMode.ZERO
#: sqrt(2 / pi), the tanh-GELU constant
GELU_C = 0.7978845608028654
LEAKY_SLOPE = 0.01


def _vec(shape, rng, dtype="float32"):
    return {"a": rng.standard_normal(shape).astype(dtype),
            "b": rng.standard_normal(shape).astype(dtype)}


# ---- vector add: cuTile's first kernel -----------------------------------------------


def _vector_add_run(d):
    c = out(d["a"].shape, "float32")
    return Run((tensor(d["a"]), tensor(d["b"]), c.partition(64), 64), [c])


@accept("vector_add", shapes=[(1024,), (1000,), (7,)], inputs=_vec, run=_vector_add_run,
        reference=lambda d: [d["a"].astype(np.float64) + d["b"]],
        origin="cuTile",
        ports="cuTile's vector-add kernel (1-D tiles, the tile size a ConstInt alias)")
def vector_add(a, b, c: tl.Out, TILE: ConstInt):
    (pid,) = c.tile_index
    tile_a = ct.load(a, index=(pid,), shape=(TILE,))
    tile_b = ct.load(b, index=(pid,), shape=(TILE,))
    c.store(tile_a + tile_b)


def _vector_add_2d_run(d):
    c = out(d["a"].shape, "float16")
    return Run((tensor(d["a"]), tensor(d["b"]), c.partition((16, 32)), 16, 32), [c])


@accept("vector_add_2d", shapes=[(64, 128), (50, 70)],
        inputs=lambda s, r: _vec(s, r, "float16"), run=_vector_add_2d_run,
        reference=lambda d: [d["a"].astype(np.float64) + d["b"]],
        origin="cuTile",
        ports="cuTile's vector-add kernel, 2-D (ct.Constant[int] written inline)")
def vector_add_2d(a, b, c: tl.Out, tile_x: ct.Constant[int], tile_y: ct.Constant[int]):
    pid_x, pid_y = c.tile_index
    tile_a = ct.load(a, index=(pid_x, pid_y), shape=(tile_x, tile_y))
    tile_b = ct.load(b, index=(pid_x, pid_y), shape=(tile_x, tile_y))
    c.store(tile_a + tile_b)


# ---- saxpy: a scalar argument and a module constant ---------------------------------


def _saxpy_run(d):
    z = out(d["a"].shape, "float32")
    return Run((z.partition(128), tensor(d["a"]), tensor(d["b"]), 2.5, 128), [z])


@accept("saxpy", shapes=[(2048,), (3000,)], inputs=_vec, run=_saxpy_run,
        reference=lambda d: [2.5 * d["a"].astype(np.float64) + d["b"]],
        origin="idiom",
        ports="saxpy with a float launch value and PAD_ZERO = ct.PaddingMode.ZERO")
def saxpy(z: tl.Out, x, y, alpha: float, TILE: ct.Constant[int]):
    pid = z.tile_index[0]
    x_t = ct.load(x, index=(pid,), shape=(TILE,), padding_mode=PAD_ZERO)
    y_t = ct.load(y, index=(pid,), shape=(TILE,), padding_mode=PAD_ZERO)
    z.store(alpha * x_t + y_t)


# ---- SiLU-and-mul: TileGym's row-wise gather kernel ---------------------------------


def _silu_inputs(shape, rng):
    rows, hidden = shape
    return {"x": rng.standard_normal((rows, 2 * hidden)).astype(np.float32)}


def _silu_run(d):
    rows, two_h = d["x"].shape
    hidden = two_h // 2
    tile = pow2(hidden)
    y = out((rows, hidden), "float32")
    return Run((tensor(d["x"]), y.partition((1, tile)), tile, hidden), [y])


def _silu_ref(d):
    x = d["x"].astype(np.float64)
    h = x.shape[1] // 2
    a, b = x[:, :h], x[:, h:]
    return [a / (1 + np.exp(-a)) * b]


@accept("silu_and_mul", shapes=[(4, 64), (5, 48)], inputs=_silu_inputs, run=_silu_run,
        reference=_silu_ref, tol=(2e-5, 2e-5),
        origin="TileGym",
        ports="TileGym silu_and_mul, row-wise: ct.gather of index tiles, RMd.APPROX")
def silu_and_mul(input, output: tl.Out, TILE_SIZE: ConstInt, TOTAL_HIDDEN_SIZE: ConstInt):
    bid, _ = output.tile_index          # one row per block
    offsets = ct.arange(TILE_SIZE, dtype=ct.int32)
    row_idx = bid
    a_col_idx = offsets                          # first half: [0, hidden)
    b_col_idx = offsets + TOTAL_HIDDEN_SIZE      # second half: [hidden, 2 * hidden)
    a_tile = ct.gather(input, (row_idx, a_col_idx), check_bounds=True)
    b_tile = ct.gather(input, (row_idx, b_col_idx), check_bounds=True)
    a_tile = ct.astype(a_tile, ct.float32)
    b_tile = ct.astype(b_tile, ct.float32)
    denom = 1 + ct.exp(-a_tile)
    sigmoid_a = ct.truediv(1.0, denom, flush_to_zero=True, rounding_mode=RMd.APPROX)
    result = a_tile * sigmoid_a * b_tile
    result = ct.astype(result, output.dtype)
    output.store(ct.reshape(result, (1, TILE_SIZE)))


# ---- activations through helpers with default arguments -----------------------------


def tanh_gelu(x, approximate=True):
    """GELU of a float32 tile; the tanh form unless approximate=False (then x * Phi(x)
    from the same tanh fit, as a second code path the default leaves unused)."""
    if approximate:
        inner = GELU_C * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1.0 + ct.tanh(inner))
    return x / (1.0 + ct.exp(-1.702 * x))


def leaky_relu(x, slope=LEAKY_SLOPE):
    return ct.where(x > 0, x, x * slope)


def _act_inputs(shape, rng):
    return {"x": rng.standard_normal(shape).astype(np.float32) * 3}


def _gelu_run(d):
    y = out(d["x"].shape, "float32")
    return Run((tensor(d["x"]), y.partition((8, 64)), 8, 64), [y])


def _gelu_ref(d):
    x = d["x"].astype(np.float64)
    return [0.5 * x * (1 + np.tanh(GELU_C * (x + 0.044715 * x ** 3)))]


@accept("gelu_helper_default", shapes=[(32, 128), (13, 100)], inputs=_act_inputs,
        run=_gelu_run, reference=_gelu_ref, tol=(1e-5, 1e-5),
        origin="idiom",
        ports="tanh GELU: the math in a helper with a literal default (approximate=True)")
def gelu(x, y: tl.Out, TILE_M: ct.Constant[int], TILE_N: ct.Constant[int]):
    bm, bn = y.tile_index
    t = ct.load(x, index=(bm, bn), shape=(TILE_M, TILE_N), padding_mode=PAD_ZERO)
    t = ct.astype(t, ct.float32)
    y.store(ct.astype(tanh_gelu(t), y.dtype))


def _leaky_run(d):
    y = out(d["x"].shape, "float32")
    return Run((tensor(d["x"]), y.partition(256), 256), [y])


@accept("leaky_relu_module_default", shapes=[(1024,), (999,)], inputs=_act_inputs,
        run=_leaky_run,
        reference=lambda d: [np.where(d["x"] > 0, d["x"], d["x"] * LEAKY_SLOPE)],
        origin="idiom",
        ports="leaky ReLU: helper default naming a module constant (slope=LEAKY_SLOPE)")
def leaky_relu_kernel(x, y: tl.Out, TILE: ct.Constant[int]):
    (pid,) = y.tile_index
    y.store(leaky_relu(ct.load(x, index=(pid,), shape=(TILE,), padding_mode=PAD_ZERO)))


def load_f32(arr, index, shape, pad=PAD_ZERO, dtype=ct.float32):
    """A tile of ``arr`` converted to ``dtype`` (TileGym-style loader with defaults)."""
    return ct.astype(ct.load(arr, index=index, shape=shape, padding_mode=pad), dtype)


def _cast_inputs(shape, rng):
    return {"x": rng.standard_normal(shape).astype(np.float32)}


def _cast_run(d):
    y = out(d["x"].shape, "bfloat16")
    return Run((tensor(d["x"]), y.partition((16, 32)), 16, 32), [y])


@accept("relu_cast_loader_defaults", shapes=[(64, 64), (40, 50)], inputs=_cast_inputs,
        run=_cast_run, reference=lambda d: [np.maximum(d["x"].astype(np.float64), 0)],
        origin="idiom",
        ports="ReLU to bf16 through a loader helper with pad=PAD_ZERO, dtype=ct.float32")
def relu_cast(x, y: tl.Out, BM: ct.Constant[int], BN: ct.Constant[int]):
    bm, bn = y.tile_index
    t = load_f32(x, (bm, bn), (BM, BN))
    y.store(ct.astype(ct.maximum(t, 0.0), y.dtype))


# ---- per-row fp8 quantization with a scale beside the rows -----------------------------

#: the largest finite float8_e4m3fn
FP8_MAX = 448.0


def _quant_inputs(shape, rng):
    return {"x": (rng.standard_normal(shape) * rng.uniform(0.1, 10, (shape[0], 1)))
            .astype(np.float32)}


def _quant_run(d):
    m, n = d["x"].shape
    q = out((m, n), "float8_e4m3fn")
    scale = out((m, 1), "float32")
    return Run((q.partition((4, pow2(n))), scale.partition((4, 1)), tensor(d["x"]),
                pow2(n)), [q, scale])


def _quant_ref(d):
    x = d["x"]
    amax = np.maximum(np.abs(x).max(axis=1, keepdims=True), np.float32(1e-12))
    scale = (amax / np.float32(FP8_MAX)).astype(np.float32)
    return [(x / scale).astype(ml_dtypes.float8_e4m3fn).astype(np.float64), scale]


@accept("quantize_fp8_rows", shapes=[(8, 64), (10, 48)], inputs=_quant_inputs,
        run=_quant_run, reference=_quant_ref, tol=(1e-6, 1e-6),
        origin="idiom",
        ports="per-row absmax fp8 quantization: ct.abs, ct.max, astype(ct.float8_e4m3fn)")
def quantize_fp8_rows(q: tl.Out, scale: tl.Out, x, BLOCK_N: ct.Constant[int]):
    bm, _ = q.tile_index
    rows, _ = q.tile_shape
    t = ct.load(x, index=(bm, 0), shape=(rows, BLOCK_N), padding_mode=PAD_ZERO)
    amax = ct.maximum(ct.max(ct.abs(t), axis=1, keepdims=True), 1e-12)
    s = amax / FP8_MAX
    scale.store(s)
    q.store(ct.astype(t / s, ct.float8_e4m3fn))
