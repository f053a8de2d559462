"""Data-movement, reduction, scan and FFT kernels of the acceptance corpus: TileGym's
transpose and RoPE (out of place, and in place through ``tl.InOut``), an embedding
gather, row and column reductions (``ct.sum``, ``ct.max``, ``ct.argmax``,
``ct.reduce``), scans (``ct.cumsum``, ``ct.scan``) after cuTile's tests, and cuTile's
FFT sample.

cuTile's tests give ``ct.reduce`` / ``ct.scan`` their combining function as a lambda, a
nested ``def`` or ``operator.add``. A safe kernel takes the lambda written in the call
(checked with the kernel) and ``operator.add`` (recognized by identity); a nested
``def`` becomes a module-level helper (nested functions are refused on purpose: the
checker reads every helper from its own ``def``).
"""
from __future__ import annotations

import operator

import cuda.tile as ct
import numpy as np

import tilelab as tl

from .registry import Run, accept, out, pow2, tensor

ConstInt = ct.Constant[int]
PAD_ZERO = ct.PaddingMode.ZERO


def _matrix(shape, rng, dtype="float32"):
    return {"x": rng.standard_normal(shape).astype(dtype)}


# ---- transpose (TileGym _transpose_kernel) -------------------------------------------


def _transpose_run(d):
    m, n = d["x"].shape
    y = out((n, m), "float32")
    return Run((tensor(d["x"]), y.partition((32, 16)), m, n, 16, 32), [y])


@accept("transpose_tiles", shapes=[(64, 96), (50, 70)], inputs=_matrix, run=_transpose_run,
        reference=lambda d: [d["x"].T.astype(np.float64)],
        origin="TileGym",
        ports="TileGym transpose: load (pid_m, pid_n), store the ct.transpose at (pid_n, pid_m)")
def transpose_kernel(
    input,
    output: tl.Out,
    M: ct.Constant[int],
    N: ct.Constant[int],
    BLOCK_M: ct.Constant[int],
    BLOCK_N: ct.Constant[int],
):
    pid_n, pid_m = output.tile_index        # the output tile (pid_n, pid_m) is this block's
    input_tile = ct.load(input, index=(pid_m, pid_n), shape=(BLOCK_M, BLOCK_N),
                         padding_mode=ct.PaddingMode.ZERO)
    transposed_tile = ct.transpose(input_tile)
    output.store(transposed_tile)


# ---- embedding lookup with index tiles -------------------------------------------------


def _embedding_inputs(shape, rng):
    tokens, vocab, dim = shape
    return {"ids": rng.integers(0, vocab, size=tokens).astype(np.int32),
            "table": rng.standard_normal((vocab, dim)).astype(np.float16)}


def _embedding_run(d):
    dim = d["table"].shape[1]
    o = out((d["ids"].shape[0], dim), "float16")
    return Run((o.partition((8, 32)), tensor(d["ids"]), tensor(d["table"])), [o])


@accept("embedding_gather", shapes=[(32, 50, 64), (13, 20, 40)], inputs=_embedding_inputs,
        run=_embedding_run, reference=lambda d: [d["table"][d["ids"]].astype(np.float64)],
        tol=(0.0, 0.0),
        origin="idiom",
        ports="embedding: ids loaded as a tile, ct.gather(table, (rows[:, None], cols))")
def embedding(out: tl.Out, ids, table):
    bt, bd = out.tile_shape
    m, n = out.tile_index
    rows = ct.load(ids, index=(m,), shape=(bt,), padding_mode=PAD_ZERO)
    cols = n * bd + ct.arange(bd, dtype=ct.int32)
    out.store(ct.gather(table, (rows[:, None], cols[None, :])))


# ---- RoPE (TileGym _rope_kernel): two half stores per tensor ---------------------------


def _rope_inputs(shape, rng):
    b, hq, hk, s, d = shape
    pos = np.arange(s)[:, None] / (10000 ** (np.arange(d // 2) * 2 / d))[None, :]
    return {"q": rng.standard_normal((b, hq, s, d)).astype(np.float32),
            "k": rng.standard_normal((b, hk, s, d)).astype(np.float32),
            "cos": np.cos(pos)[None].astype(np.float32),
            "sin": np.sin(pos)[None].astype(np.float32)}


def _rope_run(d):
    b, hq, s, dh = d["q"].shape
    hk = d["k"].shape[1]
    qo = out(d["q"].shape, "float32")
    ko = out(d["k"].shape, "float32")
    tq, tk = pow2(hq), pow2(hk)
    return Run((qo.partition((1, tq, 1, dh)), ko.partition((1, tk, 1, dh)),
                tensor(d["q"]), tensor(d["k"]), tensor(d["cos"]), tensor(d["sin"]),
                d["cos"].shape[0], tq, tk, dh // 2), [qo, ko])


def _rope_ref(d):
    cos = d["cos"][0].astype(np.float64)[None, None]
    sin = d["sin"][0].astype(np.float64)[None, None]
    res = []
    for name in ("q", "k"):
        x = d[name].astype(np.float64)
        h = x.shape[3] // 2
        x1, x2 = x[..., :h], x[..., h:]
        res.append(np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=3))
    return res


@accept("rope_half_stores_at_offsets", shapes=[(2, 4, 2, 8, 32), (1, 3, 1, 5, 16)],
        inputs=_rope_inputs, run=_rope_run, reference=_rope_ref, tol=(1e-5, 1e-5),
        unchanged=False,
        workaround="writes q_out and k_out: TileGym rotates q and k in place, storing into "
                   "its inputs (see rope_in_place_inout)",
        origin="TileGym",
        ports="TileGym _rope_kernel: the two ct.store halves -> p.store(half, offset=...)")
def rope_kernel(
    q_out: tl.Out,
    k_out: tl.Out,
    q,
    k,
    cos,
    sin,
    COS_BS: ConstInt,
    TILE_QH: ConstInt,
    TILE_KH: ConstInt,
    TILE_RD: ConstInt,
):
    batch_idx, _, row_idx, _ = q_out.tile_index
    cos_batch_idx = 0 if COS_BS == 1 else batch_idx
    cos_row = ct.load(cos, index=(cos_batch_idx, row_idx, 0), shape=(1, 1, TILE_RD),
                      padding_mode=PAD_ZERO).reshape((1, TILE_RD))
    sin_row = ct.load(sin, index=(cos_batch_idx, row_idx, 0), shape=(1, 1, TILE_RD),
                      padding_mode=PAD_ZERO).reshape((1, TILE_RD))
    # y = [x1, x2] * [cos, cos] + [-x2, x1] * [sin, sin]
    q_tile_1 = ct.load(q, index=(batch_idx, 0, row_idx, 0), shape=(1, TILE_QH, 1, TILE_RD),
                       padding_mode=PAD_ZERO).reshape((TILE_QH, TILE_RD))
    q_tile_2 = ct.load(q, index=(batch_idx, 0, row_idx, 1), shape=(1, TILE_QH, 1, TILE_RD),
                       padding_mode=PAD_ZERO).reshape((TILE_QH, TILE_RD))
    new_q_tile_1 = q_tile_1 * cos_row - q_tile_2 * sin_row
    new_q_tile_2 = q_tile_2 * cos_row + q_tile_1 * sin_row
    q_out.store(new_q_tile_1.reshape((1, TILE_QH, 1, TILE_RD)).astype(q.dtype),
                offset=(0, 0, 0, 0))
    q_out.store(new_q_tile_2.reshape((1, TILE_QH, 1, TILE_RD)).astype(q.dtype),
                offset=(0, 0, 0, 1))
    k_tile_1 = ct.load(k, index=(batch_idx, 0, row_idx, 0), shape=(1, TILE_KH, 1, TILE_RD),
                       padding_mode=PAD_ZERO).reshape((TILE_KH, TILE_RD))
    k_tile_2 = ct.load(k, index=(batch_idx, 0, row_idx, 1), shape=(1, TILE_KH, 1, TILE_RD),
                       padding_mode=PAD_ZERO).reshape((TILE_KH, TILE_RD))
    new_k_tile_1 = k_tile_1 * cos_row - k_tile_2 * sin_row
    new_k_tile_2 = k_tile_2 * cos_row + k_tile_1 * sin_row
    k_out.store(new_k_tile_1.reshape((1, TILE_KH, 1, TILE_RD)).astype(k.dtype),
                offset=(0, 0, 0, 0))
    k_out.store(new_k_tile_2.reshape((1, TILE_KH, 1, TILE_RD)).astype(k.dtype),
                offset=(0, 0, 0, 1))


def _rope_inout_run(d):
    b, hq, s, dh = d["q"].shape
    hk = d["k"].shape[1]
    q = tensor(d["q"])
    k = tensor(d["k"])
    tq, tk = pow2(hq), pow2(hk)
    return Run((q.partition((1, tq, 1, dh)), k.partition((1, tk, 1, dh)), tensor(d["cos"]),
                tensor(d["sin"]), d["cos"].shape[0], tq, tk, dh // 2), [q, k])


@accept("rope_in_place_inout", shapes=[(2, 4, 2, 8, 32), (1, 3, 1, 5, 16)],
        inputs=_rope_inputs, run=_rope_inout_run, reference=_rope_ref, tol=(1e-5, 1e-5),
        unchanged=False,
        workaround="q and k are tl.InOut partitions: their halves come from p.load() and "
                   "ct.extract instead of two ct.load at tile-space indices 0 and 1",
        origin="TileGym",
        ports="TileGym _rope_kernel, in place as TileGym does it")
def rope_in_place(
    q: tl.InOut,
    k: tl.InOut,
    cos,
    sin,
    COS_BS: ConstInt,
    TILE_QH: ConstInt,
    TILE_KH: ConstInt,
    TILE_RD: ConstInt,
):
    batch_idx, _, row_idx, _ = q.tile_index
    cos_batch_idx = 0 if COS_BS == 1 else batch_idx
    cos_row = ct.load(cos, index=(cos_batch_idx, row_idx, 0), shape=(1, 1, TILE_RD),
                      padding_mode=PAD_ZERO).reshape((1, 1, 1, TILE_RD))
    sin_row = ct.load(sin, index=(cos_batch_idx, row_idx, 0), shape=(1, 1, TILE_RD),
                      padding_mode=PAD_ZERO).reshape((1, 1, 1, TILE_RD))
    q_tile = q.load()
    q_tile_1 = ct.extract(q_tile, index=(0, 0, 0, 0), shape=(1, TILE_QH, 1, TILE_RD))
    q_tile_2 = ct.extract(q_tile, index=(0, 0, 0, 1), shape=(1, TILE_QH, 1, TILE_RD))
    q.store((q_tile_1 * cos_row - q_tile_2 * sin_row).astype(q.dtype), offset=(0, 0, 0, 0))
    q.store((q_tile_2 * cos_row + q_tile_1 * sin_row).astype(q.dtype), offset=(0, 0, 0, 1))
    k_tile = k.load()
    k_tile_1 = ct.extract(k_tile, index=(0, 0, 0, 0), shape=(1, TILE_KH, 1, TILE_RD))
    k_tile_2 = ct.extract(k_tile, index=(0, 0, 0, 1), shape=(1, TILE_KH, 1, TILE_RD))
    k.store((k_tile_1 * cos_row - k_tile_2 * sin_row).astype(k.dtype), offset=(0, 0, 0, 0))
    k.store((k_tile_2 * cos_row + k_tile_1 * sin_row).astype(k.dtype), offset=(0, 0, 0, 1))


# ---- reductions -------------------------------------------------------------------------


def _row_stats_run(d):
    m, n = d["x"].shape
    s = out((m,), "float32")
    mx = out((m,), "float32")
    am = out((m,), "int32")
    return Run((s.partition(8), mx.partition(8), am.partition(8), tensor(d["x"]), 8,
                pow2(n)), [s, mx, am])


def _row_stats_ref(d):
    x = d["x"].astype(np.float64)
    return [x.sum(axis=1), x.max(axis=1), np.argmax(x, axis=1)]


@accept("row_sum_max_argmax", shapes=[(32, 64), (13, 50)], inputs=_matrix,
        run=_row_stats_run, reference=_row_stats_ref, tol=(1e-5, 1e-5),
        origin="idiom",
        ports="row reductions after cuTile's tests: three tl.Out of one grid, -inf padding")
def row_stats(sums: tl.Out, maxes: tl.Out, argmaxes: tl.Out, x,
              TILE_M: ConstInt, TILE_N: ConstInt):
    (bid,) = sums.tile_index
    t = ct.load(x, index=(bid, 0), shape=(TILE_M, TILE_N), padding_mode=PAD_ZERO)
    neg = ct.load(x, index=(bid, 0), shape=(TILE_M, TILE_N),
                  padding_mode=ct.PaddingMode.NEG_INF)
    sums.store(ct.sum(t, axis=1))
    maxes.store(ct.max(neg, axis=1))
    argmaxes.store(ct.argmax(neg, axis=1).astype(ct.int32))


def _col_reduce_run(d):
    m, n = d["x"].shape
    s = out((n,), "float32")
    return Run((s.partition(16), tensor(d["x"]), pow2(m)), [s])


@accept("column_sum_reduce_lambda", shapes=[(32, 64), (20, 40)], inputs=_matrix,
        run=_col_reduce_run, reference=lambda d: [d["x"].astype(np.float64).sum(axis=0)],
        tol=(1e-5, 1e-5),
        origin="cuTile",
        ports="column sum with ct.reduce(func=lambda a, b: a + b, identity=0.0)")
def column_sum(s: tl.Out, x, TILE_M: ct.Constant[int]):
    (bn,) = s.tile_shape
    (j,) = s.tile_index
    t = ct.load(x, index=(0, j), shape=(TILE_M, bn), padding_mode=PAD_ZERO)
    s.store(ct.reduce(t, axis=0, func=lambda a, b: a + b, identity=0.0))


# ---- scans (cuTile test_scan) -------------------------------------------------------------


def _cumsum_run(d):
    m, n = d["x"].shape
    y = out((m, n), "float32")
    return Run((tensor(d["x"]), y.partition((4, pow2(n))), True, 4, pow2(n)), [y])


def _cumsum_ref(d):
    x = d["x"].astype(np.float64)
    return [np.flip(np.cumsum(np.flip(x, 1), 1), 1)]


@accept("cumsum_reverse_rows", shapes=[(16, 32), (10, 20)], inputs=_matrix,
        run=_cumsum_run, reference=_cumsum_ref, tol=(1e-5, 1e-5),
        origin="cuTile",
        ports="cuTile test cumsum_axis1: ct.cumsum(tile, axis=1, reverse=reverse)")
def cumsum_axis1(input, output: tl.Out, reverse: ct.Constant[bool],
                 T: ct.Constant[int], N: ct.Constant[int]):
    px, _ = output.tile_index
    tile = ct.load(input, index=(px, 0), shape=(T, N), padding_mode=PAD_ZERO)
    out_tile = ct.cumsum(tile, axis=1, reverse=reverse)
    output.store(out_tile)


def running_max(a, b):
    return ct.maximum(a, b)


def _scan_inputs(shape, rng):
    return {"x": rng.integers(-100, 100, size=shape).astype(np.int32)}


def _scan_run(d):
    m, n = d["x"].shape
    y = out((m, n), "int32")
    return Run((tensor(d["x"]), y.partition((pow2(m), 16)), pow2(m), 16), [y])


@accept("scan_running_max_helper", shapes=[(16, 32), (12, 20)], inputs=_scan_inputs,
        run=_scan_run, reference=lambda d: [np.maximum.accumulate(d["x"], axis=0)],
        unchanged=False,
        workaround="the combining function is a module-level def, not a def nested in "
                   "the kernel as in cuTile's test",
        origin="cuTile",
        ports="cuTile test custom scan: ct.scan(func=running_max) down the columns")
def scan_running_max(x, y: tl.Out, T: ct.Constant[int], N: ct.Constant[int]):
    _, py = y.tile_index
    tile = ct.load(x, index=(0, py), shape=(T, N), padding_mode=ct.PaddingMode.ZERO)
    y.store(ct.scan(tile, axis=0, func=running_max, identity=-2147483648))


def _cumsum_op_run(d):
    m, n = d["x"].shape
    y = out((m, n), "int32")
    return Run((tensor(d["x"]), y.partition((4, pow2(n))), 4, pow2(n)), [y])


@accept("scan_operator_add", shapes=[(8, 32), (6, 20)], inputs=_scan_inputs,
        run=_cumsum_op_run, reference=lambda d: [np.cumsum(d["x"], axis=1)],
        origin="cuTile",
        ports="cuTile test custom scan, operator flavor: ct.scan(func=operator.add)")
def scan_cumsum_operator(x, y: tl.Out, T: ct.Constant[int], N: ct.Constant[int]):
    px, _ = y.tile_index
    tile = ct.load(x, index=(px, 0), shape=(T, N), padding_mode=PAD_ZERO)
    y.store(ct.scan(tile, axis=1, func=operator.add, identity=0))


# ---- FFT (cuTile FFT sample): extract, matmul, permute and cat of tiles ---------------


def _twiddles(rows, cols, factor):
    i, j = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    w = np.exp(-2j * np.pi * (i * j) / factor)
    return np.ascontiguousarray(np.stack([w.real, w.imag], axis=-1).astype(np.float32))


FFT_FACTORS = (4, 4, 4)
FFT_PACK = 32


def _fft_inputs(shape, rng):
    (batch,) = shape
    n = int(np.prod(FFT_FACTORS))
    x = rng.standard_normal((batch, n)) + 1j * rng.standard_normal((batch, n))
    return {"x": x.astype(np.complex64)}


def _fft_run(d):
    batch, n = d["x"].shape
    f0, f1, f2 = FFT_FACTORS
    packed = np.stack([d["x"].real, d["x"].imag], axis=-1).reshape(batch, n * 2 // FFT_PACK,
                                                                   FFT_PACK)
    y = out(packed.shape, "float32")
    tw = [_twiddles(f0, f0, f0), _twiddles(f1, f1, f1), _twiddles(f2, f2, f2),
          _twiddles(f0, f1 * f2, n), _twiddles(f1, f2, f1 * f2)]
    return Run((tensor(packed.astype(np.float32)), y.partition((2, n * 2 // FFT_PACK, FFT_PACK)),
                *[tensor(t) for t in tw], n, f0, f1, f2, 2, FFT_PACK), [y])


def _fft_ref(d):
    y = np.fft.fft(d["x"].astype(np.complex128), axis=1)
    batch, n = y.shape
    return [np.stack([y.real, y.imag], axis=-1).reshape(batch, n * 2 // FFT_PACK, FFT_PACK)]


@accept("fft_sample", shapes=[(4,), (3,)], inputs=_fft_inputs, run=_fft_run,
        reference=_fft_ref, tol=(1e-4, 1e-4),
        origin="cuTile",
        ports="cuTile FFT sample: ConstInt arithmetic, ct.extract, ct.matmul, ct.cat")
def fft_kernel(x_packed_in, y_packed_out: tl.Out,
               W0, W1, W2, T0, T1,
               N: ConstInt, F0: ConstInt, F1: ConstInt, F2: ConstInt,
               BS: ConstInt, D: ConstInt):
    F0F1 = F0 * F1
    F1F2 = F1 * F2
    F0F2 = F0 * F2
    bid, _, _ = y_packed_out.tile_index          # this block's minibatch of BS items
    X_ri = ct.reshape(ct.load(x_packed_in, index=(bid, 0, 0),
                              shape=(BS, N * 2 // D, D)), (BS, N, 2))
    X_r = ct.reshape(ct.extract(X_ri, index=(0, 0, 0), shape=(BS, N, 1)), (BS, F0, F1, F2))
    X_i = ct.reshape(ct.extract(X_ri, index=(0, 0, 1), shape=(BS, N, 1)), (BS, F0, F1, F2))
    W0_ri = ct.reshape(ct.load(W0, index=(0, 0, 0), shape=(F0, F0, 2)), (F0, F0, 2))
    W0_r = ct.reshape(ct.extract(W0_ri, index=(0, 0, 0), shape=(F0, F0, 1)), (1, F0, F0))
    W0_i = ct.reshape(ct.extract(W0_ri, index=(0, 0, 1), shape=(F0, F0, 1)), (1, F0, F0))
    W1_ri = ct.reshape(ct.load(W1, index=(0, 0, 0), shape=(F1, F1, 2)), (F1, F1, 2))
    W1_r = ct.reshape(ct.extract(W1_ri, index=(0, 0, 0), shape=(F1, F1, 1)), (1, F1, F1))
    W1_i = ct.reshape(ct.extract(W1_ri, index=(0, 0, 1), shape=(F1, F1, 1)), (1, F1, F1))
    W2_ri = ct.reshape(ct.load(W2, index=(0, 0, 0), shape=(F2, F2, 2)), (F2, F2, 2))
    W2_r = ct.reshape(ct.extract(W2_ri, index=(0, 0, 0), shape=(F2, F2, 1)), (1, F2, F2))
    W2_i = ct.reshape(ct.extract(W2_ri, index=(0, 0, 1), shape=(F2, F2, 1)), (1, F2, F2))
    T0_ri = ct.reshape(ct.load(T0, index=(0, 0, 0), shape=(F0, F1F2, 2)), (F0, F1F2, 2))
    T0_r = ct.reshape(ct.extract(T0_ri, index=(0, 0, 0), shape=(F0, F1F2, 1)), (N, 1))
    T0_i = ct.reshape(ct.extract(T0_ri, index=(0, 0, 1), shape=(F0, F1F2, 1)), (N, 1))
    T1_ri = ct.reshape(ct.load(T1, index=(0, 0, 0), shape=(F1, F2, 2)), (F1, F2, 2))
    T1_r = ct.reshape(ct.extract(T1_ri, index=(0, 0, 0), shape=(F1, F2, 1)), (F1F2, 1))
    T1_i = ct.reshape(ct.extract(T1_ri, index=(0, 0, 1), shape=(F1, F2, 1)), (F1F2, 1))
    # contract over F0, twiddle, permute to (BS, F1, F2, F0)
    X_r = ct.reshape(X_r, (BS, F0, F1F2))
    X_i = ct.reshape(X_i, (BS, F0, F1F2))
    X_r_ = ct.reshape(ct.matmul(W0_r, X_r) - ct.matmul(W0_i, X_i), (BS, N, 1))
    X_i_ = ct.reshape(ct.matmul(W0_i, X_r) + ct.matmul(W0_r, X_i), (BS, N, 1))
    X_r = T0_r * X_r_ - T0_i * X_i_
    X_i = T0_i * X_r_ + T0_r * X_i_
    X_r = ct.permute(ct.reshape(X_r, (BS, F0, F1, F2)), (0, 2, 3, 1))
    X_i = ct.permute(ct.reshape(X_i, (BS, F0, F1, F2)), (0, 2, 3, 1))
    # contract over F1, twiddle, permute to (BS, F2, F0, F1)
    X_r = ct.reshape(X_r, (BS, F1, F0F2))
    X_i = ct.reshape(X_i, (BS, F1, F0F2))
    X_r_ = ct.reshape(ct.matmul(W1_r, X_r) - ct.matmul(W1_i, X_i), (BS, F1F2, F0))
    X_i_ = ct.reshape(ct.matmul(W1_i, X_r) + ct.matmul(W1_r, X_i), (BS, F1F2, F0))
    X_r = T1_r * X_r_ - T1_i * X_i_
    X_i = T1_i * X_r_ + T1_r * X_i_
    X_r = ct.permute(ct.reshape(X_r, (BS, F1, F2, F0)), (0, 2, 3, 1))
    X_i = ct.permute(ct.reshape(X_i, (BS, F1, F2, F0)), (0, 2, 3, 1))
    # contract over F2 and restore the natural order
    X_r = ct.reshape(X_r, (BS, F2, F0F1))
    X_i = ct.reshape(X_i, (BS, F2, F0F1))
    X_r_ = ct.matmul(W2_r, X_r) - ct.matmul(W2_i, X_i)
    X_i_ = ct.matmul(W2_i, X_r) + ct.matmul(W2_r, X_i)
    X_r = ct.permute(ct.reshape(X_r_, (BS, F2, F0, F1)), (0, 1, 3, 2))
    X_i = ct.permute(ct.reshape(X_i_, (BS, F2, F0, F1)), (0, 1, 3, 2))
    X_r = ct.reshape(X_r, (BS, N, 1))
    X_i = ct.reshape(X_i, (BS, N, 1))
    Y_ri = ct.reshape(ct.cat((X_r, X_i), axis=-1), (BS, N * 2 // D, D))
    y_packed_out.store(Y_ri)
