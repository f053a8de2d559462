"""Notebook 04 (softmax, reductions, fusion): its exercises' graders and reference answers.

Example:
    >>> from tilelab.lab.course.exercises import grade, solution
    >>> grade("online_logsumexp", solution("online_logsumexp")).passed
    True
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

import cuda.tile as ct
import tilelab as tl
from tilelab.lab.course.exercises.compare import first_wrong
from tilelab.lab.course.grading import Result, as_kernel, failed, passed, reference, register

NOTEBOOK = "04_softmax_reductions_fusion"


def _lse_rows() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    plain = rng.standard_normal(4096)
    masked = plain.copy()
    masked[:1024] = -np.inf                     # a leading chunk of -inf (a causal mask)
    masked[2000:2100] = -np.inf
    large = rng.standard_normal(4096) * 3 + 5000.0
    return [plain, masked, large]


@register("online_logsumexp", NOTEBOOK,
          "lse(chunks) -> (m, s): the running max and sum of exp(x - m) over a row's "
          "chunks, right with -inf chunks and large values")
def _online_logsumexp(answer: Any) -> Result:
    name = "online_logsumexp"
    for k, row in enumerate(_lse_rows()):
        m, s = answer([c.astype(np.float32) for c in row.reshape(8, 512)])
        got = row - float(m) - math.log(float(s)) if s > 0 else np.full_like(row, np.nan)
        finite = np.isfinite(row)
        want = row - (row[finite].max() + np.log(np.exp(row[finite] - row[finite].max()).sum()))
        if not np.allclose(got[finite], want[finite], rtol=0, atol=1e-4):
            what = ("a row whose first chunk is all -inf" if k == 1 else
                    "a row of values near 5000" if k == 2 else "a plain row")
            return failed(name, f"log-softmax is wrong on {what}: m = {m}, s = {s}",
                          "skip a chunk while the maximum is still -inf (exp(-inf - -inf) "
                          "is nan), and always subtract the running maximum before exp")
    return passed(name, "matches float64 log-softmax on plain, masked and large rows")


@reference("online_logsumexp")
def online_logsumexp() -> Callable[[list], tuple[float, float]]:
    """The running maximum and sum over chunks, safe when a whole chunk (or row) is
    ``-inf`` and when values are large: never evaluate ``exp(-inf - -inf)``.

    Example:
        >>> m, s = online_logsumexp()([np.array([0.0, 0.0])])
        >>> m, s
        (0.0, 2.0)
    """
    def lse(chunks: list) -> tuple[float, float]:
        m, s = -np.inf, 0.0
        for chunk in chunks:
            m_new = max(m, float(np.max(chunk)))
            if m_new == -np.inf:          # nothing finite yet: the sum stays 0
                continue
            s = s * math.exp(m - m_new) + float(np.exp(chunk - m_new).sum())
            m = m_new
        return m, s
    return lse


def _gelu(h: np.ndarray) -> np.ndarray:
    return 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))


@register("fused_bias_gelu", NOTEBOOK,
          "k(y: tl.Out, x: tl.In, bias: tl.In, res: tl.In): y = gelu(x + bias) + res "
          "(tanh GELU) in one kernel that moves the fused minimum of bytes")
def _fused_bias_gelu(answer: Any) -> Result:
    name, (M, N), (TM, TN) = "fused_bias_gelu", (64, 256), (16, 128)
    kern = as_kernel(answer)
    x = tl.randn(M, N, dtype="float32", device="cpu", seed=0)
    bias = tl.randn(N, dtype="float32", device="cpu", seed=1)
    res = tl.randn(M, N, dtype="float32", device="cpu", seed=2)
    y = tl.full((M, N), np.nan, dtype="float32", device="cpu")
    trace = tl.interpret(kern, y.partition((TM, TN)), x, bias, res)
    want = _gelu(x.numpy().astype(np.float64) + bias.numpy()) + res.numpy()
    wrong = first_wrong(y.numpy(), want, 1e-4)
    if wrong:
        return failed(name, wrong, "h = x + bias (bias broadcast along rows); "
                      "gelu(h) = 0.5·h·(1 + tanh(0.79788456·(h + 0.044715·h³))); then + res")
    blocks = (M // TM) * (N // TN)
    least = 3 * M * N * 4 + blocks * TN * 4     # x, res, y once; each block its bias slice
    if trace.bytes > least:
        return failed(name, f"the kernel moved {trace.bytes:,} bytes; fused, it needs "
                      f"{least:,} (x, res and y once, plus each block's {TN} bias values)",
                      "load each input tile once and keep h in registers")
    return passed(name, f"right, in one kernel, at the fused minimum of {least:,} bytes")


def _bias_gelu_residual(y: tl.Out, x: tl.In, bias: tl.In, res: tl.In):
    _, n = y.tile_index
    _, tn = y.tile_shape
    b = ct.load(bias, index=(n,), shape=(tn,), padding_mode=ct.PaddingMode.ZERO)
    h = tl.load_like(x, y) + ct.reshape(b, (1, tn))
    g = 0.5 * h * (1.0 + ct.tanh(0.7978845608028654 * (h + 0.044715 * h * h * h)))
    y.store(g + tl.load_like(res, y))


@reference("fused_bias_gelu")
def fused_bias_gelu() -> Callable:
    """One kernel: load x, the bias slice and the residual once, store y once.

    Example:
        >>> fused_bias_gelu().__name__
        '_bias_gelu_residual'
    """
    return _bias_gelu_residual
