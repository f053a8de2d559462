"""Notebook 08's exercises: the causal mask (numpy), a causal flash-attention kernel and
split-KV's combine kernel. The reference answers pass; a causal skip that compares tile
starts fails when BM ≠ BN; a kernel that holds all the keys or all the splits at once
fails the bounded-state check; a merge that meets a chunk of empty splits with
exp(-inf − -inf) fails; every FAIL names its concept and section."""
from __future__ import annotations

import doctest
import math

import numpy as np
import pytest

import cuda.tile as ct
import tilelab as tl
from course_checks import Wrong, fails
from tilelab.lab.course.exercises import exercises, grade, solution

exercises()        # every notebook's exercises registered in course order first
# (importing a notebook module alone would register its exercises ahead of the others)
from tilelab.lab.course.exercises import nb08
from tilelab.lab.course.exercises.nb08 import COMBINE, MASK, RESCALE, SPLIT_KV

Z = ct.PaddingMode.ZERO
NEG = ct.PaddingMode.NEG_INF
_mask = solution("causal_mask")["mask"]
_skip = solution("causal_mask")["skip"]


# ---- causal_mask -------------------------------------------------------------------------

def _all_visible(q0, k0, BM, BN):
    return np.ones((BM, BN), dtype=bool)


def _tril(q0, k0, BM, BN):                     # relative to the tile, not to positions
    return np.tril(np.ones((BM, BN), dtype=bool))


# ---- flash_attention ---------------------------------------------------------------------

def flash_stub(o: tl.Out, q: tl.In, k: tl.In, v: tl.In, BN: ct.Constant[int],
               scale: float):                                      # the notebook's stub
    bm, d = o.tile_shape
    qt = tl.load_like(q, o).astype(ct.float32) * scale
    m = ct.full((bm, 1), -math.inf, dtype=ct.float32)
    l = ct.full((bm, 1), 0.0, dtype=ct.float32)
    acc = ct.full((bm, d), 0.0, dtype=ct.float32)
    for j in range(ct.cdiv(k.shape[0], BN)):
        kt = ct.load(k, index=(j, 0), shape=(BN, d), padding_mode=Z)
        vt = ct.load(v, index=(j, 0), shape=(BN, d), padding_mode=Z)
        s = ct.mma(qt, ct.transpose(kt.astype(ct.float32)),
                   ct.full((bm, BN), 0.0, dtype=ct.float32))
        m_new = ct.maximum(m, ct.max(s, axis=1, keepdims=True))
        p = ct.exp(s - m_new)
        l = l + ct.sum(p, axis=1, keepdims=True)
        acc = ct.mma(p, vt.astype(ct.float32), acc)
        m = m_new
    o.store((acc / l).astype(o.dtype))


def flash_tile_index(o: tl.Out, q: tl.In, k: tl.In, v: tl.In, BN: ct.Constant[int],
                     scale: float):                   # key tiles 0..i: right when BM = BN
    bm, d = o.tile_shape
    i = o.tile_index[0]
    qt = tl.load_like(q, o).astype(ct.float32) * scale
    rows = ct.reshape(i * bm + ct.arange(bm, dtype=ct.int32), (bm, 1))
    m = ct.full((bm, 1), -math.inf, dtype=ct.float32)
    l = ct.full((bm, 1), 0.0, dtype=ct.float32)
    acc = ct.full((bm, d), 0.0, dtype=ct.float32)
    for j in range(i + 1):
        kt = ct.load(k, index=(j, 0), shape=(BN, d), padding_mode=Z).astype(ct.float32)
        vt = ct.load(v, index=(j, 0), shape=(BN, d), padding_mode=Z).astype(ct.float32)
        s = ct.mma(qt, ct.transpose(kt), ct.full((bm, BN), 0.0, dtype=ct.float32))
        cols = ct.reshape(j * BN + ct.arange(BN, dtype=ct.int32), (1, BN))
        s = ct.where(cols <= rows, s, -math.inf)
        m_new = ct.maximum(m, ct.max(s, axis=1, keepdims=True))
        p = ct.exp(s - m_new)
        alpha = ct.exp(m - m_new)
        l = l * alpha + ct.sum(p, axis=1, keepdims=True)
        acc = ct.mma(p, vt, acc * alpha)
        m = m_new
    o.store((acc / l).astype(o.dtype))


def flash_no_skip(o: tl.Out, q: tl.In, k: tl.In, v: tl.In, BN: ct.Constant[int],
                  scale: float):                      # masks every tile, skips none
    bm, d = o.tile_shape
    i = o.tile_index[0]
    qt = tl.load_like(q, o).astype(ct.float32) * scale
    rows = ct.reshape(i * bm + ct.arange(bm, dtype=ct.int32), (bm, 1))
    m = ct.full((bm, 1), -math.inf, dtype=ct.float32)
    l = ct.full((bm, 1), 0.0, dtype=ct.float32)
    acc = ct.full((bm, d), 0.0, dtype=ct.float32)
    for j in range(ct.cdiv(k.shape[0], BN)):
        kt = ct.load(k, index=(j, 0), shape=(BN, d), padding_mode=Z).astype(ct.float32)
        vt = ct.load(v, index=(j, 0), shape=(BN, d), padding_mode=Z).astype(ct.float32)
        s = ct.mma(qt, ct.transpose(kt), ct.full((bm, BN), 0.0, dtype=ct.float32))
        cols = ct.reshape(j * BN + ct.arange(BN, dtype=ct.int32), (1, BN))
        s = ct.where(cols <= rows, s, -math.inf)
        m_new = ct.maximum(m, ct.max(s, axis=1, keepdims=True))
        p = ct.exp(s - m_new)
        alpha = ct.exp(m - m_new)
        l = l * alpha + ct.sum(p, axis=1, keepdims=True)
        acc = ct.mma(p, vt, acc * alpha)
        m = m_new
    o.store((acc / l).astype(o.dtype))


def flash_scale_written_in(o: tl.Out, q: tl.In, k: tl.In, v: tl.In, BN: ct.Constant[int],
                           scale: float):             # the scale of the notebook's case
    bm, d = o.tile_shape
    i = o.tile_index[0]
    qt = tl.load_like(q, o).astype(ct.float32) * 0.25
    rows = ct.reshape(i * bm + ct.arange(bm, dtype=ct.int32), (bm, 1))
    m = ct.full((bm, 1), -math.inf, dtype=ct.float32)
    l = ct.full((bm, 1), 0.0, dtype=ct.float32)
    acc = ct.full((bm, d), 0.0, dtype=ct.float32)
    for j in range(ct.cdiv(ct.minimum((i + 1) * bm, k.shape[0]), BN)):
        kt = ct.load(k, index=(j, 0), shape=(BN, d), padding_mode=Z).astype(ct.float32)
        vt = ct.load(v, index=(j, 0), shape=(BN, d), padding_mode=Z).astype(ct.float32)
        s = ct.mma(qt, ct.transpose(kt), ct.full((bm, BN), 0.0, dtype=ct.float32))
        cols = ct.reshape(j * BN + ct.arange(BN, dtype=ct.int32), (1, BN))
        s = ct.where(cols <= rows, s, -math.inf)
        m_new = ct.maximum(m, ct.max(s, axis=1, keepdims=True))
        p = ct.exp(s - m_new)
        alpha = ct.exp(m - m_new)
        l = l * alpha + ct.sum(p, axis=1, keepdims=True)
        acc = ct.mma(p, vt, acc * alpha)
        m = m_new
    o.store((acc / l).astype(o.dtype))


def flash_all_keys_at_once(o: tl.Out, q: tl.In, k: tl.In, v: tl.In, BN: ct.Constant[int],
                           scale: float):             # a softmax over one tile of 64 keys
    bm, d = o.tile_shape
    i = o.tile_index[0]
    qt = tl.load_like(q, o).astype(ct.float32) * scale
    rows = ct.reshape(i * bm + ct.arange(bm, dtype=ct.int32), (bm, 1))
    kt = ct.load(k, index=(0, 0), shape=(64, d), padding_mode=Z).astype(ct.float32)
    vt = ct.load(v, index=(0, 0), shape=(64, d), padding_mode=Z).astype(ct.float32)
    s = ct.mma(qt, ct.transpose(kt), ct.full((bm, 64), 0.0, dtype=ct.float32))
    s = ct.where(ct.reshape(ct.arange(64, dtype=ct.int32), (1, 64)) <= rows, s, -math.inf)
    p = ct.exp(s - ct.max(s, axis=1, keepdims=True))
    out = ct.mma(p, vt, ct.full((bm, d), 0.0, dtype=ct.float32))
    o.store((out / ct.sum(p, axis=1, keepdims=True)).astype(o.dtype))


# ---- combine_splits ----------------------------------------------------------------------

def _merge_chunk(m, l, acc, e, p, guard):
    """One chunk of the online merge; ``guard``: keep 0 while the maximum is -inf."""
    m_new = ct.maximum(m, ct.max(e, axis=1, keepdims=True))
    base = ct.where(m_new == -math.inf, 0.0, m_new) if guard else m_new
    w = ct.exp(e - base)
    alpha = ct.exp(m - base)
    ch = e.shape[1]
    acc = acc * alpha + ct.reshape(ct.sum(ct.reshape(w, (ch, 1)) * p, axis=0),
                                   (1, p.shape[1]))
    return m_new, l * alpha + ct.sum(w, axis=1, keepdims=True), acc


def combine_stub(o: tl.Out, po: tl.In, lse: tl.In, CH: ct.Constant[int]):   # notebook's
    d = o.tile_shape[1]
    h = o.tile_index[0]
    m = ct.full((1, 1), -math.inf, dtype=ct.float32)
    l = ct.full((1, 1), 0.0, dtype=ct.float32)
    acc = ct.full((1, d), 0.0, dtype=ct.float32)
    for c in range(ct.cdiv(lse.shape[1], CH)):
        e = ct.load(lse, index=(h, c), shape=(1, CH), padding_mode=Z)
        p = ct.reshape(ct.load(po, index=(h, c, 0), shape=(1, CH, d), padding_mode=Z),
                       (CH, d))
        m_new = ct.maximum(m, ct.max(e, axis=1, keepdims=True))
        w = ct.exp(e - m_new)
        l = l + ct.sum(w, axis=1, keepdims=True)
        acc = acc + ct.reshape(ct.sum(ct.reshape(w, (CH, 1)) * p, axis=0), (1, d))
        m = m_new
    o.store(acc / l)


def combine_unguarded(o: tl.Out, po: tl.In, lse: tl.In, CH: ct.Constant[int]):
    d = o.tile_shape[1]
    h = o.tile_index[0]
    m = ct.full((1, 1), -math.inf, dtype=ct.float32)
    l = ct.full((1, 1), 0.0, dtype=ct.float32)
    acc = ct.full((1, d), 0.0, dtype=ct.float32)
    for c in range(ct.cdiv(lse.shape[1], CH)):
        e = ct.load(lse, index=(h, c), shape=(1, CH), padding_mode=NEG)
        p = ct.reshape(ct.load(po, index=(h, c, 0), shape=(1, CH, d), padding_mode=Z),
                       (CH, d))
        m, l, acc = _merge_chunk(m, l, acc, e, p, False)
    o.store(acc / l)


def combine_zero_padding(o: tl.Out, po: tl.In, lse: tl.In, CH: ct.Constant[int]):
    d = o.tile_shape[1]
    h = o.tile_index[0]
    m = ct.full((1, 1), -math.inf, dtype=ct.float32)
    l = ct.full((1, 1), 0.0, dtype=ct.float32)
    acc = ct.full((1, d), 0.0, dtype=ct.float32)
    for c in range(ct.cdiv(lse.shape[1], CH)):
        e = ct.load(lse, index=(h, c), shape=(1, CH), padding_mode=Z)
        p = ct.reshape(ct.load(po, index=(h, c, 0), shape=(1, CH, d), padding_mode=Z),
                       (CH, d))
        m, l, acc = _merge_chunk(m, l, acc, e, p, True)
    o.store(acc / l)


def combine_chunk_of_8(o: tl.Out, po: tl.In, lse: tl.In, CH: ct.Constant[int]):
    d = o.tile_shape[1]
    h = o.tile_index[0]
    m = ct.full((1, 1), -math.inf, dtype=ct.float32)
    l = ct.full((1, 1), 0.0, dtype=ct.float32)
    acc = ct.full((1, d), 0.0, dtype=ct.float32)
    for c in range(ct.cdiv(lse.shape[1], 8)):
        e = ct.load(lse, index=(h, c), shape=(1, 8), padding_mode=NEG)
        p = ct.reshape(ct.load(po, index=(h, c, 0), shape=(1, 8, d), padding_mode=Z), (8, d))
        m, l, acc = _merge_chunk(m, l, acc, e, p, True)
    o.store(acc / l)


def combine_all_at_once(o: tl.Out, po: tl.In, lse: tl.In, CH: ct.Constant[int]):
    d = o.tile_shape[1]
    h = o.tile_index[0]
    e = ct.load(lse, index=(h, 0), shape=(1, 64), padding_mode=NEG)
    p = ct.reshape(ct.load(po, index=(h, 0, 0), shape=(1, 64, d), padding_mode=Z), (64, d))
    w = ct.exp(e - ct.max(e, axis=1, keepdims=True))
    out = ct.reshape(ct.sum(ct.reshape(w, (64, 1)) * p, axis=0), (1, d))
    o.store(out / ct.sum(w, axis=1, keepdims=True))


WRONG = {
    "causal_mask": [
        Wrong("the stub: every key visible", {"mask": _all_visible, "skip": lambda *a: False},
              "causal attention: query i sees key j", MASK),
        Wrong("a mask by tile, not by position", {"mask": _tril, "skip": _skip},
              "causal attention: query i sees key j", MASK),
        Wrong("skips by comparing tile starts", {"mask": _mask,
                                                 "skip": lambda q0, k0, BM, BN: k0 > q0},
              "with BM ≠ BN", MASK, one_shape=True),
        Wrong("skips nothing", {"mask": _mask, "skip": lambda *a: False},
              "skip every tile that holds no visible key", MASK),
    ],
    "flash_attention": [
        Wrong("the stub: no mask, no rescaling, every tile", flash_stub,
              "flash attention: each key tile's scores", RESCALE),
        Wrong("key tiles counted by the query tile's index", flash_tile_index,
              "with BM ≠ BN the key tiles", MASK, one_shape=True),
        Wrong("masks every tile, skips none", flash_no_skip, "bytes moved: q read", MASK),
        Wrong("the scale written in", flash_scale_written_in, "scale is a launch value",
              nb08.FLASH, one_shape=True),
        Wrong("every key in one tile", flash_all_keys_at_once, "bytes moved: q read", MASK),
    ],
    "combine_splits": [
        Wrong("the stub: no rescaling, zero padding", combine_stub, "merging splits",
              SPLIT_KV),
        Wrong("exp(-inf − -inf) on an empty chunk", combine_unguarded,
              "an empty split has lse = -inf", RESCALE, one_shape=True),
        Wrong("padded lanes weighted as splits", combine_zero_padding,
              "need not be a multiple of CH", COMBINE, one_shape=True),
        Wrong("chunks of 8 written in", combine_chunk_of_8, "streams the splits in chunks",
              COMBINE, one_shape=True),
        Wrong("every split at once", combine_all_at_once, "streams the splits in chunks",
              COMBINE),
    ],
}


@pytest.mark.parametrize("name", sorted(WRONG))
def test_the_reference_answer_passes(name):
    r = grade(name, solution(name))
    assert r.passed, str(r)


@pytest.mark.parametrize("name, wrong", [(n, w) for n, ws in WRONG.items() for w in ws],
                         ids=lambda v: getattr(v, "why", v))
def test_a_wrong_answer_fails_with_its_concept(name, wrong):
    fails(name, wrong)


def test_a_tile_start_skip_fails_only_when_bm_differs_from_bn():
    tile_starts = {"mask": _mask, "skip": lambda q0, k0, BM, BN: k0 > q0}
    r = grade("causal_mask", tile_starts)
    assert r.message.startswith("on BM > BN")         # right on the square tiles
    r = grade("flash_attention", flash_tile_index)
    assert r.message.startswith("on BM > BN")


def test_holding_every_split_at_once_fails_the_bounded_state_check():
    r = grade("combine_splits", combine_all_at_once)
    assert r.message.startswith("on the notebook's size") and \
        "a block loaded 256 elements at once; a chunk of CH splits is 128" in r.message
    assert f'"{COMBINE}"' in r.hint


def test_a_computed_nan_is_a_wrong_value_not_an_unwritten_element():
    r = grade("combine_splits", combine_unguarded)
    assert "elements of o are wrong" in r.message and "never written" not in r.message


def test_the_budget_counts_only_the_key_tiles_with_a_visible_key():
    assert nb08._flash_budget(64, 16, 16, 16) == 4 * (2 * 64 * 16 + 2 * 16 * (16 + 32 + 48 + 64))
    assert nb08._flash_budget(100, 16, 32, 16) == 4 * (2 * 100 * 16 + 2 * 16 * (32 + 64 + 96
                                                                             + 100))


def test_doctests():
    result = doctest.testmod(nb08, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
