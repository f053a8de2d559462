"""Softmax kernels of the acceptance corpus, after TileGym's softmax op: the TMA
kernel and the chunked three-pass kernel with their static persistent row loops, the
one-row-per-block gather kernel, plus an online log-softmax with an early ``continue``.

TileGym's row loop ``for row_idx in range(ct.bid(0), N_ROWS, ct.num_blocks(0))`` becomes
``for t in output.tiles()`` on a ``tl.persistent`` partition of whole rows; its
chunk-by-chunk ``ct.scatter`` becomes a sub-tile store ``output.store(chunk, at=t,
offset=(0, j))``.
"""
from __future__ import annotations

import math

import cuda.tile as ct
import numpy as np
from cuda.tile import RoundingMode as RMd

import tilelab as tl

from .registry import Run, accept, out, pow2, tensor

ConstInt = ct.Constant[int]


def _rows(shape, rng, dtype="float32"):
    return {"x": (rng.standard_normal(shape) * 3).astype(dtype)}


def _softmax_ref(d):
    x = d["x"].astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return [e / e.sum(axis=1, keepdims=True)]


# ---- TMA softmax with a static persistent row loop -----------------------------------


def _tma_run(d):
    m, n = d["x"].shape
    y = out((m, n), "float32")
    p = y.partition((1, pow2(n)), schedule=tl.persistent(num_blocks=4))
    return Run((p, tensor(d["x"]), m, n, pow2(n)), [y])


@accept("softmax_tma_persistent", shapes=[(9, 64), (7, 50)], inputs=_rows, run=_tma_run,
        reference=_softmax_ref, tol=(1e-5, 1e-6), occupancy=2,
        origin="TileGym",
        ports="TileGym _softmax_kernel_tma: range(pid, N_ROWS, num_programs) -> tiles()")
def softmax_kernel_tma(output: tl.Out, input, N_ROWS: ConstInt, N_COLS: ConstInt,
                       TILE_SIZE: ConstInt):
    for t in output.tiles():
        row_idx, _ = output.tile_index_of(t)
        # the whole row in one tile (TILE_SIZE >= N_COLS)
        row = ct.load(input, index=(row_idx, 0), shape=(1, TILE_SIZE),
                      padding_mode=ct.PaddingMode.NEG_INF)
        row = ct.astype(row, ct.float32)
        row_max = ct.max(row, 1, keepdims=True)
        row_minus_max = row - row_max
        numerator = ct.exp(row_minus_max, rounding_mode=RMd.APPROX)
        denominator = ct.sum(numerator, 1, keepdims=True)
        softmax_output = ct.truediv(numerator, denominator, rounding_mode=RMd.APPROX,
                                    flush_to_zero=True)
        softmax_output = ct.astype(softmax_output, input.dtype)
        output.store(softmax_output, at=t)


# ---- one row per block through ct.gather (the multi-wave kernel) ---------------------


def _gather_run(d):
    m, n = d["x"].shape
    y = out((m, n), "float16")
    return Run((y.partition((1, pow2(n))), tensor(d["x"]), n, pow2(n)), [y])


@accept("softmax_gather_rows", shapes=[(6, 128), (5, 100)],
        inputs=lambda s, r: _rows(s, r, "float16"), run=_gather_run,
        reference=_softmax_ref,
        unchanged=False,
        workaround="check_bounds=True where TileGym passes check_bounds=(TILE_SIZE != N): "
                   "a computed check_bounds is refused (rule unchecked-read)",
        origin="TileGym",
        ports="TileGym softmax multi-wave: ct.gather(padding_value=-inf), arange offsets")
def softmax_gather(output: tl.Out, input, N: ct.Constant[int], TILE_SIZE: ct.Constant[int]):
    row_idx, _ = output.tile_index
    offsets = ct.arange(TILE_SIZE, dtype=ct.int32)
    row = ct.gather(input, (row_idx, offsets), check_bounds=True, padding_value=-math.inf)
    row = ct.astype(row, ct.float32)
    row_max = ct.max(row, 0, keepdims=True)
    numerator = ct.exp(row - row_max, rounding_mode=RMd.APPROX)
    denominator = ct.sum(numerator, 0, keepdims=True)
    softmax_output = ct.truediv(numerator, denominator, rounding_mode=RMd.APPROX,
                                flush_to_zero=True)
    softmax_output = ct.astype(softmax_output, input.dtype)
    output.store(ct.reshape(softmax_output, (1, TILE_SIZE)))


# ---- chunked three-pass softmax for long rows -----------------------------------------


def _chunked_run(d):
    m, n = d["x"].shape
    y = out((m, n), "float32")
    width = pow2(-(-n // 32)) * 32          # the block's own tile: the whole (padded) row
    p = y.partition((1, width), schedule=tl.persistent(num_blocks=2))
    return Run((p, tensor(d["x"]), m, n, 32), [y])


@accept("softmax_chunked_three_pass", shapes=[(3, 128), (4, 70)], inputs=_rows,
        run=_chunked_run, reference=_softmax_ref, tol=(1e-5, 1e-6),
        origin="TileGym",
        ports="TileGym _softmax_kernel_chunked: static persistent rows, max / sum / write "
              "passes over chunks, each chunk a sub-tile store")
def softmax_chunked(output: tl.Out, input, N_ROWS: ct.Constant[int],
                    N_COLS: ct.Constant[int], TILE_SIZE: ct.Constant[int]):
    for t in output.tiles():
        row_idx, _ = output.tile_index_of(t)
        row_max = ct.full((1,), -math.inf, dtype=ct.float32)
        denominator = ct.full((1,), 0.0, dtype=ct.float32)
        num_chunks = (N_COLS + TILE_SIZE - 1) // TILE_SIZE
        col_offsets_base = ct.arange(TILE_SIZE, dtype=ct.int32)
        # pass 1: the row's maximum
        for chunk_idx in range(num_chunks):
            chunk_start = chunk_idx * TILE_SIZE
            col_indices = ct.full((TILE_SIZE,), chunk_start, dtype=ct.int32) + col_offsets_base
            chunk = ct.gather(input, (row_idx, col_indices), check_bounds=True,
                              padding_value=-math.inf)
            chunk = ct.astype(chunk, ct.float32)
            chunk_max = ct.max(chunk, 0, keepdims=True)
            row_max = ct.maximum(row_max, chunk_max)
        # pass 2: the sum of exponentials
        for chunk_idx in range(num_chunks):
            chunk_start = chunk_idx * TILE_SIZE
            col_indices = ct.full((TILE_SIZE,), chunk_start, dtype=ct.int32) + col_offsets_base
            chunk = ct.gather(input, (row_idx, col_indices), check_bounds=True,
                              padding_value=-math.inf)
            chunk = ct.astype(chunk, ct.float32)
            row_minus_max = chunk - row_max
            numerator = ct.exp(row_minus_max, rounding_mode=RMd.APPROX)
            exponentials_sum = ct.sum(numerator, 0, keepdims=True)
            denominator = denominator + exponentials_sum
        inv_denominator = ct.truediv(1.0, denominator, rounding_mode=RMd.APPROX,
                                     flush_to_zero=True)
        # pass 3: the softmax, chunk by chunk
        for chunk_idx in range(num_chunks):
            chunk_start = chunk_idx * TILE_SIZE
            col_indices = ct.full((TILE_SIZE,), chunk_start, dtype=ct.int32) + col_offsets_base
            chunk = ct.gather(input, (row_idx, col_indices), check_bounds=True,
                              padding_value=-math.inf)
            chunk = ct.astype(chunk, ct.float32)
            row_minus_max = chunk - row_max
            numerator = ct.exp(row_minus_max, rounding_mode=RMd.APPROX)
            softmax_output = numerator * inv_denominator
            softmax_output = ct.astype(softmax_output, input.dtype)
            output.store(ct.reshape(softmax_output, (1, TILE_SIZE)), at=t,
                         offset=(0, chunk_idx))


# ---- online log-softmax that skips fully masked chunks with `continue` ---------------


def _log_inputs(shape, rng):
    m, n = shape
    x = (rng.standard_normal((m, n)) * 3).astype(np.float32)
    lengths = rng.integers(1, n + 1, size=m).astype(np.int32)
    lengths[0] = n
    return {"x": x, "lengths": lengths}


def _log_run(d):
    m, n = d["x"].shape
    y = out((m, n), "float32")
    return Run((y.partition((1, 32)), tensor(d["x"]), tensor(d["lengths"]), 32), [y])


def _log_ref(d):
    x = d["x"].astype(np.float64)
    cols = np.arange(x.shape[1])[None, :]
    valid = cols < d["lengths"][:, None]
    xm = np.where(valid, x, -np.inf)
    mx = xm.max(axis=1, keepdims=True)
    lse = mx + np.log(np.exp(xm - mx).sum(axis=1, keepdims=True))
    return [np.where(valid, x - lse, -np.inf)]


@accept("log_softmax_varlen_continue", shapes=[(4, 128), (5, 90)], inputs=_log_inputs,
        run=_log_run, reference=_log_ref, tol=(1e-5, 1e-5),
        origin="idiom",
        ports="online log-softmax over per-row lengths: `continue` past each row's end")
def log_softmax_varlen(y: tl.Out, x, lengths, BLOCK: ct.Constant[int]):
    row, chunk = y.tile_index
    n = ct.load(lengths, index=(row,), shape=(1,)).item()
    cols = ct.arange(BLOCK, dtype=ct.int32)
    m_i = ct.full((1,), -math.inf, dtype=ct.float32)
    s_i = ct.full((1,), 0.0, dtype=ct.float32)
    for c in range(ct.cdiv(x.shape[1], BLOCK)):
        if c * BLOCK >= n:
            continue                      # nothing of this row left in the chunk
        v = ct.load(x, index=(row, c), shape=(1, BLOCK), padding_mode=ct.PaddingMode.NEG_INF)
        v = ct.where(ct.reshape(c * BLOCK + cols, (1, BLOCK)) < n, v, -math.inf)
        m_new = ct.maximum(m_i, ct.reshape(ct.max(v, axis=1), (1,)))
        s_i = s_i * ct.exp(m_i - m_new) + ct.reshape(
            ct.sum(ct.exp(v - ct.reshape(m_new, (1, 1))), axis=1), (1,))
        m_i = m_new
    lse = ct.reshape(m_i + ct.log(s_i), (1, 1))
    v = ct.load(x, index=(row, chunk), shape=(1, BLOCK), padding_mode=ct.PaddingMode.ZERO)
    keep = ct.reshape(chunk * BLOCK + cols, (1, BLOCK)) < n
    y.store(ct.where(keep, v - lse, -math.inf))
