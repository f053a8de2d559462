"""Normalization kernels of the acceptance corpus: TileGym's RMSNorm (static persistent,
gather-looped, backward dx and dw) and layer norm (looped, persistent), plus the fused
residual add of a pre-norm transformer block.

TileGym writes per-row statistics (``Rstd``, ``Mean``) with ``ct.scatter`` or
``ct.store`` next to the output; the ports write them as ``tl.Out`` partitions of one
element per row, on the output's tile grid (the (M,) vectors viewed (M, 1)). Where a
TileGym kernel writes one row in several chunks from one block, the port's block owns the
whole row and writes each chunk with a sub-tile store, ``Y.store(chunk, offset=(0, j))``.
"""
from __future__ import annotations

import cuda.tile as ct
import numpy as np

import tilelab as tl

from .registry import Run, accept, out, pow2, tensor

ConstInt = ct.Constant[int]
PAD_ZERO = ct.PaddingMode.ZERO
EPS = 1e-5


def _rows(shape, rng, dtype="float32"):
    m, n = shape
    return {"x": (rng.standard_normal((m, n)) * 2 + 0.5).astype(dtype),
            "w": rng.standard_normal(n).astype(dtype),
            "b": rng.standard_normal(n).astype(dtype)}


def _rms_ref(d):
    x = d["x"].astype(np.float64)
    r = 1 / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + EPS)
    return [x * r * d["w"].astype(np.float64)]


def _ln_ref(d, shift=0.0):
    x = d["x"].astype(np.float64)
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    return [(x - mu) / np.sqrt(var + EPS) * (d["w"].astype(np.float64) + shift)
            + d["b"].astype(np.float64)]


# ---- RMSNorm, static persistent (TileGym rms_norm_kernel_static_persistent) ----------

def _rms_persistent_run(d):
    m, n = d["x"].shape
    y = out((m, n), "float32")
    p = y.partition((4, pow2(n)), schedule=tl.persistent(num_blocks=3))
    return Run((tensor(d["x"]), p, tensor(d["w"]), 4, pow2(n), EPS), [y])


@accept("rms_norm_static_persistent", shapes=[(16, 64), (13, 100)], inputs=_rows,
        run=_rms_persistent_run, reference=_rms_ref,
        origin="TileGym",
        ports="TileGym rms_norm static persistent: ct.bid/num_blocks loop -> p.tiles(), "
              "the store's allow_tma=False, latency=3 hints kept")
def rms_norm_kernel_static_persistent(
    X,                                  # input tensor
    Y: tl.Out,                          # output tensor
    W,                                  # weight tensor
    TILE_SIZE_M: ct.Constant[int],      # rows per tile
    TILE_SIZE_N: ct.Constant[int],      # columns per tile
    eps: ct.Constant[float],
):
    N = X.shape[1]
    # the weight vector is loaded once and reused for every tile of this block
    w = ct.load(W, index=(0,), shape=(TILE_SIZE_N,))
    w = ct.astype(w, ct.float32)
    for t in Y.tiles():
        current_bid, _ = Y.tile_index_of(t)
        x = ct.load(X, index=(current_bid, 0), shape=(TILE_SIZE_M, TILE_SIZE_N), latency=10)
        x = ct.astype(x, ct.float32)
        x_squared = ct.mul(x, x)
        x2_sum = ct.sum(x_squared, axis=1, keepdims=True)
        N_f32 = ct.full((TILE_SIZE_M, 1), N * 1.0, dtype=ct.float32)
        variance = ct.truediv(x2_sum, N_f32)
        eps_tensor = ct.full((TILE_SIZE_M, 1), eps, dtype=ct.float32)
        rsqrt_var = ct.rsqrt(ct.add(variance, eps_tensor))
        x_normalized = ct.mul(x, rsqrt_var)
        w_broadcasted = ct.reshape(w, (1, TILE_SIZE_N))
        y = ct.mul(x_normalized, w_broadcasted)
        y = ct.astype(y, X.dtype)
        Y.store(y, at=t, allow_tma=False, latency=3)


# ---- RMSNorm, gather loop over column chunks (TileGym rms_norm_kernel_gather) --------


def _row_tile(n: int, chunk: int) -> int:
    """The width of a block's own tile for a row of ``n`` written in ``chunk`` chunks."""
    return pow2(-(-n // chunk)) * chunk


def _rms_gather_run(d):
    m, n = d["x"].shape
    y = out((m, n), "float32")
    rstd = out((m, 1), "float32")          # TileGym's (M,) Rstd, viewed (M, 1)
    return Run((tensor(d["x"]), tensor(d["w"]), y.partition((1, _row_tile(n, 32))),
                rstd.partition((1, 1)), n, EPS, 32), [y, rstd])


def _rms_gather_ref(d):
    x = d["x"].astype(np.float64)
    r = 1 / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + EPS)
    return [x * r * d["w"].astype(np.float64), r]


@accept("rms_norm_gather_looped", shapes=[(6, 128), (5, 75)], inputs=_rows,
        run=_rms_gather_run, reference=_rms_gather_ref,
        origin="TileGym",
        ports="TileGym rms_norm gather: `_rms += xj * xj` over ct.cdiv(N, TILE) chunks, "
              "the row written chunk by chunk (sub-tile stores), Rstd beside it")
def rms_norm_kernel_gather(
    x,
    w,
    out: tl.Out,
    Rstd: tl.Out,
    N: ct.Constant[int],
    eps: ct.Constant[float],
    TILE_SIZE: ct.Constant[int],
):
    row, _ = out.tile_index                 # one row per block
    _rms = ct.full((TILE_SIZE,), 0.0, dtype=ct.float32)
    num_tiles = ct.cdiv(N, TILE_SIZE)
    offsets = ct.arange(TILE_SIZE, dtype=ct.int32)
    for j in range(0, num_tiles):
        offs = j * TILE_SIZE + offsets
        xj = ct.gather(x, (row, offs), latency=1)
        xj = ct.astype(xj, ct.float32)
        _rms += xj * xj
    rms = ct.rsqrt(ct.sum(_rms, axis=0, keepdims=False) / N + eps)
    Rstd.store(ct.reshape(rms, (1, 1)))
    for j in range(0, num_tiles):
        offs = j * TILE_SIZE + offsets
        wj = ct.gather(w, offs, latency=1)
        wj = ct.astype(wj, ct.float32)
        xj = ct.gather(x, (row, offs), latency=1)
        xj = ct.astype(xj, ct.float32)
        yj = xj * rms * wj
        yj = ct.astype(yj, x.dtype)
        out.store(ct.reshape(yj, (1, TILE_SIZE)), offset=(0, j))


# ---- layer norm, looped with range steps (TileGym _layer_norm_fwd_kernel) -------------


def _ln_looped_run(d):
    m, n = d["x"].shape
    y = out((m, n), "float32")
    mean = out((m, 1), "float32")
    rstd = out((m, 1), "float32")
    return Run((tensor(d["x"]), y.partition((1, _row_tile(n, 16))), tensor(d["w"]),
                tensor(d["b"]), mean.partition((1, 1)), rstd.partition((1, 1)), n, EPS, 0.5,
                16), [y, mean, rstd])


def _ln_looped_ref(d):
    x = d["x"].astype(np.float64)
    mu = x.mean(axis=1, keepdims=True)
    r = 1 / np.sqrt(((x - mu) ** 2).mean(axis=1, keepdims=True) + EPS)
    return [_ln_ref(d, shift=0.5)[0], mu, r]


@accept("layer_norm_range_step", shapes=[(4, 64), (3, 50)], inputs=_rows,
        run=_ln_looped_run, reference=_ln_looped_ref,
        origin="TileGym",
        ports="TileGym layer_norm fwd: `for off in range(0, N, BLOCK_SIZE)`, masks, gathers, "
              "Mean and Rstd beside the row")
def layer_norm_fwd_kernel(
    X,
    Y: tl.Out,
    W,
    B,
    Mean: tl.Out,
    Rstd: tl.Out,
    N: ct.Constant[int],
    EPS: ct.Constant[float],
    WEIGHT_SHIFT: ct.Constant[float],
    BLOCK_SIZE: ct.Constant[int],
):
    row, _ = Y.tile_index                   # one row per block
    row_tile = ct.full((BLOCK_SIZE,), row, dtype=ct.int32)
    # mean
    _mean = ct.zeros((BLOCK_SIZE,), dtype=ct.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + ct.arange(BLOCK_SIZE, dtype=ct.int32)
        a = ct.gather(X, (row_tile, cols), padding_value=0)
        a = ct.astype(a, ct.float32)
        _mean = _mean + a
    mean = ct.sum(_mean, axis=0) / N
    # variance
    _var = ct.zeros((BLOCK_SIZE,), dtype=ct.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + ct.arange(BLOCK_SIZE, dtype=ct.int32)
        x = ct.gather(X, (row_tile, cols), padding_value=0)
        x = ct.astype(x, ct.float32)
        mask = cols < N
        x = ct.where(mask, x - mean, ct.zeros((BLOCK_SIZE,), dtype=ct.float32))
        _var = _var + x * x
    var = ct.sum(_var, axis=0) / N
    rstd = ct.rsqrt(var + EPS)
    Mean.store(ct.reshape(mean, (1, 1)))
    Rstd.store(ct.reshape(rstd, (1, 1)))
    # normalize, apply the affine transform, write the row chunk by chunk
    for off in range(0, N, BLOCK_SIZE):
        cols = off + ct.arange(BLOCK_SIZE, dtype=ct.int32)
        w = ct.gather(W, cols, padding_value=0)
        w = w + WEIGHT_SHIFT
        b = ct.gather(B, cols, padding_value=0)
        x = ct.gather(X, (row_tile, cols), padding_value=0)
        x = ct.astype(x, ct.float32)
        x_hat = (x - mean) * rstd
        y = x_hat * w + b
        y = ct.astype(y, X.dtype)
        Y.store(ct.reshape(y, (1, BLOCK_SIZE)), offset=(0, off // BLOCK_SIZE))


# ---- layer norm, persistent with [:, None] broadcasts (TileGym persistent_layer_norm) -


def _ln_persistent_run(d):
    m, n = d["x"].shape
    y = out((m, n), "bfloat16")
    mean = out((m, 1), "float32")
    rstd = out((m, 1), "float32")
    sched = tl.persistent(num_blocks=2)
    return Run((tensor(d["x"]), y.partition((4, pow2(n)), schedule=sched), tensor(d["w"]),
                tensor(d["b"]), mean.partition((4, 1), schedule=sched),
                rstd.partition((4, 1), schedule=sched), m, n, EPS, 1, 4, pow2(n)),
               [y, mean, rstd])


def _ln_persistent_ref(d):
    x = d["x"].astype(np.float64)
    mu = x.mean(axis=1, keepdims=True)
    r = 1 / np.sqrt(((x - mu) ** 2).mean(axis=1, keepdims=True) + EPS)
    return [_ln_ref(d)[0], mu, r]


@accept("layer_norm_persistent_subscripts", shapes=[(16, 64), (11, 40)], inputs=_rows,
        run=_ln_persistent_run, reference=_ln_persistent_ref, tol=(2e-2, 5e-2),
        origin="TileGym",
        ports="TileGym persistent layer norm: mean[:, None], w[None, :], E[x^2] - E[x]^2, "
              "Mean and Rstd stored `if TRAINING:`")
def persistent_layer_norm_fwd_kernel(
    X,
    Y: tl.Out,
    W,
    B,
    Mean: tl.Out,
    Rstd: tl.Out,
    N: ct.Constant[int],
    D: ct.Constant[int],
    EPS: ct.Constant[float],
    TRAINING: ct.Constant[int],
    BLOCK_N: ct.Constant[int],
    BLOCK_D: ct.Constant[int],
):
    w = ct.load(W, index=(0,), shape=(BLOCK_D,), padding_mode=PAD_ZERO)
    b = ct.load(B, index=(0,), shape=(BLOCK_D,), padding_mode=PAD_ZERO)
    w = ct.astype(w, ct.float32)
    b = ct.astype(b, ct.float32)
    for t in Y.tiles():
        current_pid, _ = Y.tile_index_of(t)
        x_tile = ct.load(X, index=(current_pid, 0), shape=(BLOCK_N, BLOCK_D),
                         padding_mode=PAD_ZERO, latency=4)
        x = ct.astype(x_tile, ct.float32)
        x_squared = x * x
        avg_square = ct.sum(x_squared, axis=1) / D
        mean = ct.sum(x, axis=1) / D
        var = avg_square - mean * mean
        rstd = ct.rsqrt(var + EPS)
        if TRAINING:
            Mean.store(ct.reshape(mean, (BLOCK_N, 1)), at=t, allow_tma=False)
            Rstd.store(ct.reshape(rstd, (BLOCK_N, 1)), at=t, allow_tma=False)
        if BLOCK_N != 1:
            mean = mean[:, None]
            rstd = rstd[:, None]
        x_hat = (x - mean) * rstd
        w_broadcasted = w[None, :]
        b_broadcasted = b[None, :]
        y = x_hat * w_broadcasted + b_broadcasted
        y = ct.astype(y, ct.bfloat16)
        Y.store(y, at=t, allow_tma=False)


# ---- fused residual add + RMSNorm with two outputs ------------------------------------


def _add_rows(shape, rng):
    d = _rows(shape, rng, "float16")
    d["r"] = rng.standard_normal(shape).astype(np.float16)
    return d


def _add_rms_run(d):
    m, n = d["x"].shape
    y = out((m, n), "float16")
    h = out((m, n), "float16")
    tile = (2, pow2(n))
    return Run((y.partition(tile), h.partition(tile), tensor(d["x"]), tensor(d["r"]),
                tensor(d["w"]), 1e-5, pow2(n)), [y, h])


def _add_rms_ref(d):
    h = (d["x"] + d["r"]).astype(np.float64)        # h is rounded to fp16 first
    r = 1 / np.sqrt(np.mean(h * h, axis=1, keepdims=True) + EPS)
    return [h * r * d["w"].astype(np.float64), h]


@accept("add_rms_norm_two_outputs", shapes=[(8, 64), (7, 48)], inputs=_add_rows,
        run=_add_rms_run, reference=_add_rms_ref, tol=(4e-3, 4e-3),
        origin="idiom",
        ports="pre-norm residual add + RMSNorm: two tl.Out of one grid, eps a launch value")
def add_rms_norm(y: tl.Out, h_out: tl.Out, x, residual, weight, eps: float,
                 TILE_N: ConstInt):
    h = tl.load_like(x, y) + tl.load_like(residual, y)      # rounded to x.dtype
    h_out.store(h)
    hf = h.astype(ct.float32)
    n = x.shape[1]
    ms = ct.sum(hf * hf, axis=1, keepdims=True) / n
    w = ct.load(weight, index=(0,), shape=(TILE_N,), padding_mode=PAD_ZERO)
    w = ct.reshape(w.astype(ct.float32), (1, TILE_N))
    y.store((hf * ct.rsqrt(ms + eps) * w).astype(y.dtype))


# ---- RMSNorm backward (TileGym rms_norm_backward_dx / _dw) ---------------------------


def _bwd_inputs(shape, rng):
    d = _rows(shape, rng)
    x = d["x"].astype(np.float64)
    d["rstd"] = (1 / np.sqrt(np.mean(x * x, axis=1) + EPS)).astype(np.float32)
    d["dy"] = rng.standard_normal(shape).astype(np.float32)
    return d


def _bwd_dx_run(d):
    m, n = d["x"].shape
    dx = out((m, n), "float32")
    return Run((dx.partition((1, pow2(n))), tensor(d["dy"]), tensor(d["x"]),
                tensor(d["w"]), tensor(d["rstd"]), pow2(n)), [dx])


def _bwd_dx_ref(d):
    x, dy, w = (d[k].astype(np.float64) for k in ("x", "dy", "w"))
    r = d["rstd"].astype(np.float64)[:, None]
    n = x.shape[1]
    return [dy * w * r - x * r ** 3 / n * np.sum(dy * w * x, axis=1, keepdims=True)]


@accept("rms_norm_backward_dx", shapes=[(4, 64), (5, 37)], inputs=_bwd_inputs,
        run=_bwd_dx_run, reference=_bwd_dx_ref, tol=(1e-4, 1e-4),
        origin="TileGym",
        ports="TileGym rms_norm_backward_dx: `M, N = x.shape`, (1,) loads, broadcasts")
def rms_norm_backward_dx(dx: tl.Out, dy, x, weight, Rstd, TILE_SIZE: ct.Constant[int]):
    row_idx, _ = dx.tile_index
    M, N = x.shape
    input_row = ct.load(x, index=(row_idx, 0), shape=(1, TILE_SIZE), padding_mode=PAD_ZERO)
    gradient_row = ct.load(dy, index=(row_idx, 0), shape=(1, TILE_SIZE),
                           padding_mode=PAD_ZERO)
    inv_std_row = ct.load(Rstd, index=(row_idx,), shape=(1,), padding_mode=PAD_ZERO)
    inv_std_row = ct.reshape(inv_std_row, (1, 1))
    weight_vector = ct.load(weight, index=(0,), shape=(TILE_SIZE,), padding_mode=PAD_ZERO)
    weight_vector = ct.reshape(weight_vector, (1, TILE_SIZE))
    weighted_gradient_sum = ct.sum(input_row * weight_vector * gradient_row, axis=1,
                                   keepdims=True)
    inv_std_cubed = inv_std_row * inv_std_row * inv_std_row
    norm_factor = ct.full((1, 1), N * 1.0, dtype=ct.float32)
    correction = input_row * inv_std_cubed / norm_factor * weighted_gradient_sum
    scaled_gradient = gradient_row * weight_vector * inv_std_row
    dx.store(ct.astype(scaled_gradient - correction, dx.dtype))


def _bwd_dw_run(d):
    m, n = d["x"].shape
    dw = out((n,), "float32")
    return Run((dw.partition(1), tensor(d["dy"]), tensor(d["x"]), tensor(d["rstd"]),
                pow2(m)), [dw])


def _bwd_dw_ref(d):
    x, dy = d["x"].astype(np.float64), d["dy"].astype(np.float64)
    return [np.sum(dy * x * d["rstd"].astype(np.float64)[:, None], axis=0)]


@accept("rms_norm_backward_dw_columns", shapes=[(16, 24), (13, 9)], inputs=_bwd_inputs,
        run=_bwd_dw_run, reference=_bwd_dw_ref, tol=(1e-5, 1e-5),
        origin="TileGym",
        ports="TileGym rms_norm_backward_dw: one column per block, a (TILE, 1) reduction")
def rms_norm_backward_dw(dw: tl.Out, dy, x, Rstd, TILE_SIZE: ct.Constant[int]):
    (col_idx,) = dw.tile_index
    input_col = ct.load(x, index=(0, col_idx), shape=(TILE_SIZE, 1), padding_mode=PAD_ZERO)
    gradient_col = ct.load(dy, index=(0, col_idx), shape=(TILE_SIZE, 1),
                           padding_mode=PAD_ZERO)
    inv_std_col = ct.load(Rstd, index=(0,), shape=(TILE_SIZE,), padding_mode=PAD_ZERO)
    inv_std_col = ct.reshape(inv_std_col, (TILE_SIZE, 1))
    input_col = ct.astype(input_col, ct.float32)
    gradient_col = ct.astype(gradient_col, ct.float32)
    column_contributions = gradient_col * input_col * inv_std_col
    weight_gradient = ct.sum(column_contributions, axis=0, keepdims=False)
    weight_gradient = ct.reshape(weight_gradient, (1,))
    dw.store(ct.astype(weight_gradient, dw.dtype))
