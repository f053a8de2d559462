"""Notebook 04's exercises: the reference answers pass, typical wrong answers fail with a
hint that names the concept and the section that explains it, answers right for one
configuration fail on a hidden one, and streaming is a property: bounded loads for the
kernels, bounded memory for the numpy recurrence."""
from __future__ import annotations

import math

import numpy as np
import pytest

import cuda.tile as ct
import tilelab as tl
from course_checks import Wrong, fails
from tilelab.lab.course.exercises import grade, solution

ROWS = "1. Row softmax: one block owns whole rows"
REDUCTIONS = "2. Reductions"
ONLINE = "3. Online softmax for long rows"
FUSION = "4. RMSNorm with a fused residual"
FUSED = "5. A fused kernel, written here"
NEG_INF = float("-inf")


def sum_not_squared(out: tl.Out, x: tl.In):
    (i,) = out.tile_index
    (tm,) = out.tile_shape
    acc = ct.full((tm,), 0, dtype=ct.float32)
    for k in range(ct.cdiv(x.shape[1], 256)):
        acc = acc + ct.sum(ct.load(x, index=(i, k), shape=(tm, 256),
                                   padding_mode=ct.PaddingMode.ZERO), axis=1)
    out.store(acc)


def inf_padding(out: tl.Out, x: tl.In):
    (i,) = out.tile_index
    (tm,) = out.tile_shape
    acc = ct.full((tm,), 0, dtype=ct.float32)
    for k in range(ct.cdiv(x.shape[1], 256)):
        t = ct.load(x, index=(i, k), shape=(tm, 256), padding_mode=ct.PaddingMode.NEG_INF)
        acc = acc + ct.sum(t * t, axis=1)
    out.store(acc)


def one_wide_load(out: tl.Out, x: tl.In):                  # right for rows up to 1024
    (i,) = out.tile_index
    (tm,) = out.tile_shape
    t = ct.load(x, index=(i, 0), shape=(tm, 1024), padding_mode=ct.PaddingMode.ZERO)
    out.store(ct.sum(t * t, axis=1))


def whole_rows(out: tl.Out, x: tl.In):                     # one load of the whole row
    (i,) = out.tile_index
    (tm,) = out.tile_shape
    t = ct.load(x, index=(i, 0), shape=(tm, 8192), padding_mode=ct.PaddingMode.ZERO)
    out.store(ct.sum(t * t, axis=1))


def rows_of_16(out: tl.Out, x: tl.In):                     # right for tiles of 16 rows
    (i,) = out.tile_index
    acc = ct.full((16,), 0, dtype=ct.float32)
    for k in range(ct.cdiv(x.shape[1], 256)):
        t = ct.load(x, index=(i, k), shape=(16, 256), padding_mode=ct.PaddingMode.ZERO)
        acc = acc + ct.sum(t * t, axis=1)
    out.store(acc)


def naive_lse(chunks):                                     # the notebook's stub
    m, s = -np.inf, 0.0
    for chunk in chunks:
        m_new = max(m, chunk.max())
        s = s * np.exp(m - m_new) + np.exp(chunk - m_new).sum()
        m = m_new
    return m, s


def no_max(chunks):
    return 0.0, float(sum(np.exp(c.astype(np.float32)).sum() for c in chunks))


def keeps_the_row(chunks):
    row = np.concatenate(list(chunks)).astype(np.float64)
    finite = row[np.isfinite(row)]
    return finite.max(), float(np.exp(finite - finite.max()).sum())


def zero_padding(out: tl.Out, x: tl.In):
    (i,) = out.tile_index
    (tm,) = out.tile_shape
    m = ct.full((tm,), NEG_INF, dtype=ct.float32)
    s = ct.full((tm,), 0, dtype=ct.float32)
    for k in range(ct.cdiv(x.shape[1], 256)):
        t = ct.load(x, index=(i, k), shape=(tm, 256), padding_mode=ct.PaddingMode.ZERO)
        m_new = ct.maximum(m, ct.max(t, axis=1))
        safe = ct.where(m_new == NEG_INF, 0.0, m_new)
        s = s * ct.exp(m - safe) + ct.sum(ct.exp(t - ct.reshape(safe, (tm, 1))), axis=1)
        m = m_new
    out.store(m + ct.log(s))


def unsafe_shift(out: tl.Out, x: tl.In):                   # nan once a chunk is all -inf
    (i,) = out.tile_index
    (tm,) = out.tile_shape
    m = ct.full((tm,), NEG_INF, dtype=ct.float32)
    s = ct.full((tm,), 0, dtype=ct.float32)
    for k in range(ct.cdiv(x.shape[1], 256)):
        t = ct.load(x, index=(i, k), shape=(tm, 256), padding_mode=ct.PaddingMode.NEG_INF)
        m_new = ct.maximum(m, ct.max(t, axis=1))
        s = s * ct.exp(m - m_new) + ct.sum(ct.exp(t - ct.reshape(m_new, (tm, 1))), axis=1)
        m = m_new
    out.store(m + ct.log(s))


def two_passes(out: tl.Out, x: tl.In):                     # a pass for the max, one for s
    (i,) = out.tile_index
    (tm,) = out.tile_shape
    m = ct.full((tm,), NEG_INF, dtype=ct.float32)
    for k in range(ct.cdiv(x.shape[1], 256)):
        t = ct.load(x, index=(i, k), shape=(tm, 256), padding_mode=ct.PaddingMode.NEG_INF)
        m = ct.maximum(m, ct.max(t, axis=1))
    safe = ct.where(m == NEG_INF, 0.0, m)
    s = ct.full((tm,), 0, dtype=ct.float32)
    for k in range(ct.cdiv(x.shape[1], 256)):
        t = ct.load(x, index=(i, k), shape=(tm, 256), padding_mode=ct.PaddingMode.NEG_INF)
        s = s + ct.sum(ct.exp(t - ct.reshape(safe, (tm, 1))), axis=1)
    out.store(safe + ct.log(s))


def lse_rows_of_16(out: tl.Out, x: tl.In):                 # right for tiles of 16 rows
    (i,) = out.tile_index
    m = ct.full((16,), NEG_INF, dtype=ct.float32)
    s = ct.full((16,), 0, dtype=ct.float32)
    for k in range(ct.cdiv(x.shape[1], 256)):
        t = ct.load(x, index=(i, k), shape=(16, 256), padding_mode=ct.PaddingMode.NEG_INF)
        m_new = ct.maximum(m, ct.max(t, axis=1))
        safe = ct.where(m_new == NEG_INF, 0.0, m_new)
        s = s * ct.exp(m - safe) + ct.sum(ct.exp(t - ct.reshape(safe, (16, 1))), axis=1)
        m = m_new
    out.store(m + ct.log(s))


def gelu_stub(y: tl.Out, x: tl.In, bias: tl.In, res: tl.In):   # the notebook's stub
    y.store(tl.load_like(x, y) + tl.load_like(res, y))


def gelu_reloads(y: tl.Out, x: tl.In, bias: tl.In, res: tl.In):
    _, n = y.tile_index
    _, tn = y.tile_shape
    b = ct.reshape(ct.load(bias, index=(n,), shape=(tn,)), (1, tn))
    h = tl.load_like(x, y) + b
    g = 0.5 * h * (1.0 + ct.tanh(0.7978845608028654 * (h + 0.044715 * h * h * h)))
    y.store(g + tl.load_like(res, y) + 0.0 * tl.load_like(x, y))


def gelu_128(y: tl.Out, x: tl.In, bias: tl.In, res: tl.In):    # right for 128 columns
    _, n = y.tile_index
    b = ct.reshape(ct.load(bias, index=(n,), shape=(128,)), (1, 128))
    h = tl.load_like(x, y) + b
    g = 0.5 * h * (1.0 + ct.tanh(0.7978845608028654 * (h + 0.044715 * h * h * h)))
    y.store(g + tl.load_like(res, y))


WRONG = {
    "row_sum_squares": [
        Wrong("sums, not squares", sum_not_squared, "a row reduction", REDUCTIONS),
        Wrong("pads with -inf", inf_padding, "padding is the reduction's identity",
              REDUCTIONS),
        Wrong("one load of 1024 columns", one_wide_load, "streaming", REDUCTIONS,
              one_shape=True),
        Wrong("a load of the whole row", whole_rows, "streaming", REDUCTIONS,
              one_shape=True),
        Wrong("16 rows written in", rows_of_16, "belongs to the partition", REDUCTIONS,
              one_shape=True),
    ],
    "online_logsumexp": [
        Wrong("the recurrence as written (nan on -inf)", naive_lse, "a masked chunk", ONLINE),
        Wrong("exp without the maximum", no_max, "overflow", ONLINE),
        Wrong("keeps the whole row", keeps_the_row, "streaming", ONLINE),
    ],
    "row_logsumexp": [
        Wrong("zero padding", zero_padding, "padding is the reduction's identity", ROWS),
        Wrong("subtracts a -inf maximum", unsafe_shift, "a masked chunk", ONLINE),
        Wrong("two passes over x", two_passes, "bytes moved: one pass", ONLINE),
        Wrong("16 rows written in", lse_rows_of_16, "belongs to the partition", REDUCTIONS,
              one_shape=True),
    ],
    "fused_bias_gelu": [
        Wrong("no bias, no GELU", gelu_stub, "the epilogue", FUSED),
        Wrong("loads x twice", gelu_reloads, "fusion", FUSION),
        Wrong("128 columns written in", gelu_128, "belongs to the partition", FUSED,
              one_shape=True),
    ],
}


@pytest.mark.parametrize("name", sorted(WRONG))
def test_the_reference_answer_passes(name):
    r = grade(name, solution(name))
    assert r.passed, str(r)


@pytest.mark.parametrize("name, wrong", [(n, w) for n, ws in WRONG.items() for w in ws],
                         ids=lambda v: getattr(v, "why", v))
def test_a_wrong_answer_fails_with_its_concept(name, wrong):
    with np.errstate(all="ignore"):
        fails(name, wrong)


def test_streaming_is_checked_by_the_size_of_the_loads_and_by_memory():
    r = grade("row_sum_squares", whole_rows)
    assert "one load read 80,000 elements; a streaming kernel reads at most 16,384" in r.message
    r = grade("online_logsumexp", keeps_the_row)
    assert r.message.startswith("on a row of a million elements") and "KiB at once" in r.message


def test_the_bounded_recurrence_passes_whatever_it_is_given():
    lse = solution("online_logsumexp")
    assert grade("online_logsumexp", lambda chunks: lse(iter(chunks))).passed
    m, s = lse([np.array([np.float32(-np.inf)] * 4), np.array([0.0, math.log(3.0)])])
    assert (m, round(s, 6)) == (math.log(3.0), round(1 + 1 / 3, 6))
