"""GEMM kernels of the acceptance corpus: cuTile's MatMul sample (grouped and persistent),
TileGym's static persistent matmul and batched matmuls, a K loop written with a
``range`` step, a fused epilogue and a GEMV.

A cuTile GEMM picks its output tile from ``ct.bid`` (through a swizzle helper for the
L2-friendly order); the ports get it from the partition, whose schedule does the
swizzle: ``tl.grouped(group_m)`` for one block per tile, ``tl.persistent(num_blocks,
group_m)`` for the static persistent loops (``for t in C.tiles()``).
"""
from __future__ import annotations

import cuda.tile as ct
import numpy as np

import tilelab as tl

from .registry import Run, accept, out, tensor

ConstInt = ct.Constant[int]

ACT_NONE = 0
ACT_RELU = 1
ACT_SILU = 2


def _mnk(shape, rng, dtype):
    m, n, k = shape
    return {"a": rng.standard_normal((m, k)).astype(dtype),
            "b": rng.standard_normal((k, n)).astype(dtype)}


def _mm_ref(d):
    return [d["a"].astype(np.float64) @ d["b"].astype(np.float64)]


#: tf32 operands (the samples' choice for float32 inputs): 10-bit mantissas, K terms
TF32_TOL = (1e-2, 3e-2)


# ---- cuTile MatMul sample, grouped order ---------------------------------------------


def _matmul_run(d):
    m, n = d["a"].shape[0], d["b"].shape[1]
    c = out((m, n), "float16")
    p = c.partition((32, 32), schedule=tl.grouped(group_m=2))
    return Run((tensor(d["a"]), tensor(d["b"]), p, 32, 32, 32), [c])


@accept("matmul_grouped", shapes=[(128, 96, 64), (100, 70, 45)],
        inputs=lambda s, r: _mnk(s, r, "float16"), run=_matmul_run, reference=_mm_ref,
        tol=(1e-2, 2e-2),
        origin="cuTile",
        ports="cuTile MatMul sample: swizzle_2d(ct.bid(0)) -> tl.grouped, ct.num_tiles")
def matmul_kernel(A, B, C: tl.Out,
                  tm: ConstInt,         # tile size along M (rows of C)
                  tn: ConstInt,         # tile size along N (columns of C)
                  tk: ConstInt):        # tile size along K
    bidx, bidy = C.tile_index           # the grouped schedule swizzles the blocks
    num_tiles_k = ct.num_tiles(A, axis=1, shape=(tm, tk))
    accumulator = ct.full((tm, tn), 0, dtype=ct.float32)
    zero_pad = ct.PaddingMode.ZERO
    # float32 operands go through the tensor cores as tf32
    dtype = ct.tfloat32 if A.dtype == ct.float32 else A.dtype
    for k in range(num_tiles_k):
        a = ct.load(A, index=(bidx, k), shape=(tm, tk), padding_mode=zero_pad).astype(dtype)
        b = ct.load(B, index=(k, bidy), shape=(tk, tn), padding_mode=zero_pad).astype(dtype)
        accumulator = ct.mma(a, b, accumulator)
    accumulator = ct.astype(accumulator, C.dtype)
    C.store(accumulator)


# ---- cuTile MatMul sample, persistent -------------------------------------------------


def _persistent_run(d):
    m, n = d["a"].shape[0], d["b"].shape[1]
    c = out((m, n), "float32")
    p = c.partition((32, 32), schedule=tl.persistent(num_blocks=3, group_m=8))
    return Run((tensor(d["a"]), tensor(d["b"]), p, 32, 32, 16), [c])


@accept("matmul_persistent", shapes=[(96, 64, 48), (70, 50, 33)],
        inputs=lambda s, r: _mnk(s, r, "float32"), run=_persistent_run,
        reference=_mm_ref, tol=TF32_TOL,
        origin="cuTile",
        ports="cuTile persistent_matmul_kernel: range(bid, tiles, num_blocks) -> C.tiles()")
def persistent_matmul_kernel(A, B, C: tl.Out, tm: ConstInt, tn: ConstInt, tk: ConstInt):
    num_tiles_k = ct.num_tiles(A, axis=1, shape=(tm, tk))
    zero_pad = ct.PaddingMode.ZERO
    dtype = ct.tfloat32 if A.dtype == ct.float32 else A.dtype
    for t in C.tiles():
        accumulator = ct.full((tm, tn), 0, dtype=ct.float32)
        bidx, bidy = C.tile_index_of(t)
        for k in range(num_tiles_k):
            a = ct.load(A, index=(bidx, k), shape=(tm, tk), padding_mode=zero_pad).astype(dtype)
            b = ct.load(B, index=(k, bidy), shape=(tk, tn), padding_mode=zero_pad).astype(dtype)
            accumulator = ct.mma(a, b, accumulator)
        accumulator = ct.astype(accumulator, C.dtype)
        C.store(accumulator, at=t)


# ---- TileGym static persistent matmul: transposes, latency branches, scalar sizes ----


def _tilegym_inputs(shape, rng):
    d = _mnk(shape, rng, "bfloat16")
    d["bt"] = np.ascontiguousarray(d["b"].T)       # B given as (N, K)
    return d


def _tilegym_run(d):
    m, k = d["a"].shape
    n = d["bt"].shape[0]
    c = out((m, n), "bfloat16")
    p = c.partition((32, 64), schedule=tl.persistent(num_blocks=2, group_m=4))
    return Run((tensor(d["a"]), tensor(d["bt"]), p, m, n, k, 32, 64, 32, False, True, 3),
               [c])


@accept("matmul_static_persistent_transpose_b", shapes=[(64, 128, 64), (50, 90, 40)],
        inputs=_tilegym_inputs, run=_tilegym_run, reference=_mm_ref, tol=(2e-2, 1e-1),
        origin="TileGym",
        ports="TileGym _static_persistent_matmul_kernel: TRANSPOSE_* and latency branches")
def static_persistent_matmul_kernel(
    A,
    B,
    C: tl.Out,
    M: int,
    N: int,
    K: int,
    TILE_SIZE_M: ct.Constant[int],
    TILE_SIZE_N: ct.Constant[int],
    TILE_SIZE_K: ct.Constant[int],
    TRANSPOSE_A: ct.Constant[bool],
    TRANSPOSE_B: ct.Constant[bool],
    LOAD_LATENCY: ct.Constant[int],
):
    k_tiles = ct.cdiv(K, TILE_SIZE_K)
    zero_pad = ct.PaddingMode.ZERO
    for t in C.tiles():
        bid_m, bid_n = C.tile_index_of(t)
        accumulator_dtype = ct.float64 if A.dtype == ct.float64 else ct.float32
        accumulator = ct.full((TILE_SIZE_M, TILE_SIZE_N), 0.0, dtype=accumulator_dtype)
        for k_tile in range(k_tiles):
            if TRANSPOSE_A:
                a = ct.load(A, index=(k_tile, bid_m), shape=(TILE_SIZE_K, TILE_SIZE_M),
                            padding_mode=zero_pad)
                a = ct.transpose(a)
            else:
                if LOAD_LATENCY >= 1:
                    a = ct.load(A, index=(bid_m, k_tile), shape=(TILE_SIZE_M, TILE_SIZE_K),
                                padding_mode=zero_pad, latency=LOAD_LATENCY)
                else:
                    a = ct.load(A, index=(bid_m, k_tile), shape=(TILE_SIZE_M, TILE_SIZE_K),
                                padding_mode=zero_pad)
            if TRANSPOSE_B:
                b = ct.load(B, index=(bid_n, k_tile), shape=(TILE_SIZE_N, TILE_SIZE_K),
                            padding_mode=zero_pad)
                b = ct.transpose(b)
            else:
                b = ct.load(B, index=(k_tile, bid_n), shape=(TILE_SIZE_K, TILE_SIZE_N),
                            padding_mode=zero_pad)
            accumulator = ct.mma(a, b, accumulator)
        C.store(ct.astype(accumulator, C.dtype), at=t)


# ---- a K loop with a range step, and a fused bias + activation epilogue --------------


def apply_activation(x, activation=ACT_NONE):
    """The epilogue's activation, chosen by a compile-time constant."""
    if activation == ACT_RELU:
        return ct.maximum(x, 0.0)
    if activation == ACT_SILU:
        return x / (1.0 + ct.exp(-x))
    return x


def _epilogue_inputs(shape, rng):
    d = _mnk(shape, rng, "float16")
    d["bias"] = rng.standard_normal(shape[1]).astype(np.float16)
    return d


def _epilogue_run(d):
    m, n = d["a"].shape[0], d["b"].shape[1]
    c = out((m, n), "float16")
    return Run((c.partition((32, 32)), tensor(d["a"]), tensor(d["b"]), tensor(d["bias"]),
                d["a"].shape[1], 16, ACT_SILU), [c])


def _epilogue_ref(d):
    z = _mm_ref(d)[0] + d["bias"].astype(np.float64)
    return [z / (1 + np.exp(-z))]


@accept("matmul_range_step_epilogue", shapes=[(64, 64, 64), (40, 50, 70)],
        inputs=_epilogue_inputs, run=_epilogue_run, reference=_epilogue_ref,
        tol=(1e-2, 2e-2),
        origin="idiom",
        ports="GEMM + bias + SiLU: `for k in range(0, K, BK)`, index k // BK, helper default")
def matmul_bias_act(c: tl.Out, a, b, bias, K: int, BK: ct.Constant[int],
                    ACT: ct.Constant[int]):
    tm, tn = c.tile_shape
    m, n = c.tile_index
    acc = ct.zeros((tm, tn), dtype=ct.float32)
    for k in range(0, K, BK):
        x = ct.load(a, index=(m, k // BK), shape=(tm, BK), padding_mode=ct.PaddingMode.ZERO)
        y = ct.load(b, index=(k // BK, n), shape=(BK, tn), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(x, y, acc)
    bias_row = ct.load(bias, index=(n,), shape=(tn,), padding_mode=ct.PaddingMode.ZERO)
    acc = acc + ct.reshape(bias_row.astype(ct.float32), (1, tn))
    c.store(apply_activation(acc, ACT).astype(c.dtype))


# ---- batched matmul (TileGym _bmm_kernel) --------------------------------------------

def _bmm_inputs(shape, rng):
    q, m, n, k = shape
    return {"a": rng.standard_normal((q, m, k)).astype(np.float16),
            "b": rng.standard_normal((q, k, n)).astype(np.float16)}


def _bmm_run(d):
    q, m, _ = d["a"].shape
    n = d["b"].shape[2]
    c = out((q, m, n), "float16")
    return Run((tensor(d["a"]), tensor(d["b"]), c.partition((1, 32, 32)), 32, 32, 32), [c])


@accept("bmm_3d_grid", shapes=[(3, 64, 64, 64), (2, 40, 33, 50)], inputs=_bmm_inputs,
        run=_bmm_run, reference=lambda d: [np.matmul(d["a"].astype(np.float64), d["b"])],
        tol=(1e-2, 2e-2),
        origin="TileGym",
        ports="TileGym _bmm_kernel: 3-D tiles, `sum` as a variable, ct.mma(..., acc=sum), "
              "ct.store(C, index=..., tile=t) -> C.store(tile=t)")
def bmm_kernel(A, B, C: tl.Out, TM: ct.Constant[int], TN: ct.Constant[int],
               TK: ct.Constant[int]):
    bidz, bidx, bidy = C.tile_index       # (batch, M tile, N tile)
    num_k_tiles = ct.num_tiles(A, axis=2, shape=(1, TM, TK))
    sum = ct.full((TM, TN), 0.0, dtype=ct.float32)
    zero_pad = ct.PaddingMode.ZERO
    for k in range(num_k_tiles):
        a = ct.load(A, index=(bidz, bidx, k), shape=(1, TM, TK), padding_mode=zero_pad)
        a = ct.reshape(a, (TM, TK))
        b = ct.load(B, index=(bidz, k, bidy), shape=(1, TK, TN), padding_mode=zero_pad)
        b = ct.reshape(b, (TK, TN))
        sum = ct.mma(a, b, acc=sum)
    result = ct.astype(sum, C.dtype)
    result_3d = ct.reshape(result, (1, TM, TN))
    C.store(tile=result_3d)


# ---- static persistent bmm with a transposed A (TileGym) -----------------------------


def _bmm_t_inputs(shape, rng):
    d = _bmm_inputs(shape, rng)
    d["at"] = np.ascontiguousarray(np.swapaxes(d["a"], 1, 2))   # A given as (Q, K, M)
    return d


def _bmm_t_run(d):
    q, k, m = d["at"].shape
    n = d["b"].shape[2]
    c = out((q, m, n), "float16")
    p = c.partition((1, 32, 32), schedule=tl.persistent(num_blocks=3))
    return Run((tensor(d["at"]), tensor(d["b"]), p, q, m, n, k, 32, 32, 32, 3, True, False),
               [c])


@accept("bmm_static_persistent_permute", shapes=[(2, 64, 64, 32), (3, 33, 40, 20)],
        inputs=_bmm_t_inputs, run=_bmm_t_run,
        reference=lambda d: [np.matmul(d["a"].astype(np.float64), d["b"])],
        tol=(1e-2, 2e-2),
        origin="TileGym",
        ports="TileGym _static_persistent_bmm_kernel: ct.permute, order=, latency=")
def static_persistent_bmm_kernel(
    A,
    B,
    C: tl.Out,
    Batch: int,
    M: ct.Constant[int],
    N: ct.Constant[int],
    K: ct.Constant[int],
    TILE_M: ct.Constant[int],
    TILE_N: ct.Constant[int],
    TILE_K: ct.Constant[int],
    LATENCY: ct.Constant[int],
    TRANSPOSE_A: ct.Constant[bool],
    TRANSPOSE_B: ct.Constant[bool],
):
    for t in C.tiles():
        bid_q, bid_m, bid_n = C.tile_index_of(t)
        accumulator = ct.full((TILE_M, TILE_N), 0.0, dtype=ct.float32)
        zero_pad = ct.PaddingMode.ZERO
        num_k_tiles = ct.cdiv(K, TILE_K)
        for k_tile in range(num_k_tiles):
            if TRANSPOSE_A:
                # A is laid out (Q, K, M): load (1, TILE_K, TILE_M) and permute
                a_tile_3d = ct.load(A, index=(bid_q, k_tile, bid_m), shape=(1, TILE_K, TILE_M),
                                    order=(0, 1, 2), padding_mode=zero_pad, latency=LATENCY)
                a_tile_3d = ct.permute(a_tile_3d, (0, 2, 1))
            else:
                a_tile_3d = ct.load(A, index=(bid_q, bid_m, k_tile), shape=(1, TILE_M, TILE_K),
                                    order=(0, 1, 2), padding_mode=zero_pad, latency=LATENCY)
            a_tile = ct.reshape(a_tile_3d, (TILE_M, TILE_K))
            if TRANSPOSE_B:
                b_tile_3d = ct.load(B, index=(bid_q, bid_n, k_tile), shape=(1, TILE_N, TILE_K),
                                    order=(0, 1, 2), padding_mode=zero_pad, latency=LATENCY)
                b_tile_3d = ct.permute(b_tile_3d, (0, 2, 1))
            else:
                b_tile_3d = ct.load(B, index=(bid_q, k_tile, bid_n), shape=(1, TILE_K, TILE_N),
                                    order=(0, 1, 2), padding_mode=zero_pad, latency=LATENCY)
            b_tile = ct.reshape(b_tile_3d, (TILE_K, TILE_N))
            accumulator = ct.mma(a_tile, b_tile, acc=accumulator)
        result = ct.astype(accumulator, C.dtype)
        C.store(ct.reshape(result, (1, TILE_M, TILE_N)), at=t)


# ---- GEMV with a K loop and a broadcast row -----------------------------------------


def _gemv_inputs(shape, rng):
    m, k = shape
    return {"w": rng.standard_normal((m, k)).astype(np.float32),
            "x": rng.standard_normal(k).astype(np.float32)}


def _gemv_run(d):
    m, k = d["w"].shape
    y = out((m,), "float32")
    return Run((y.partition(16), tensor(d["w"]), tensor(d["x"]), 64), [y])


@accept("gemv_k_loop", shapes=[(64, 256), (50, 100)], inputs=_gemv_inputs, run=_gemv_run,
        reference=lambda d: [d["w"].astype(np.float64) @ d["x"]], tol=(1e-5, 1e-4),
        origin="idiom",
        ports="decode GEMV: ct.cdiv K loop, x[None, :] broadcast, ct.sum(axis=1)")
def gemv(y: tl.Out, W, x, BK: ConstInt):
    (bm,) = y.tile_shape
    (row_tile,) = y.tile_index
    acc = ct.zeros((bm,), dtype=ct.float32)
    for kb in range(ct.cdiv(W.shape[1], BK)):
        w = ct.load(W, index=(row_tile, kb), shape=(bm, BK), padding_mode=ct.PaddingMode.ZERO)
        xv = ct.load(x, index=(kb,), shape=(BK,), padding_mode=ct.PaddingMode.ZERO)
        acc += ct.sum(w * xv[None, :], axis=1)
    y.store(acc)
