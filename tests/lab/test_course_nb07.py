"""Notebook 07's kernel exercises (the capstone has tests/lab/test_course_capstone.py): a
GEMV at the bandwidth limit, RMSNorm, RoPE. The reference answers pass, typical wrong
answers fail with the concept and the section, answers right for one configuration (a
hard-coded step count, tile, eps or position) fail on a hidden one, and other right forms
(a host function choosing its own tiles) pass."""
from __future__ import annotations

import doctest

import pytest

import cuda.tile as ct
import tilelab as tl
from course_checks import Wrong, fails
from tilelab.lab.course.exercises import exercises, grade, solution

exercises()        # every notebook's exercises registered in course order first
# (importing a notebook module alone would register its exercises ahead of the others)
from tilelab.lab.course.exercises import nb07
from tilelab.lab.course.exercises.nb07 import GEMV, RMS, ROPE

Z = ct.PaddingMode.ZERO


# ---- gemv --------------------------------------------------------------------------------

def gemv_stub(y: tl.Out, w: tl.In, x: tl.In, BK: ct.Constant[int]):     # the notebook's
    bn = y.tile_shape[0]
    n = y.tile_index[0]
    xk = ct.load(x, index=(0,), shape=(BK,), padding_mode=Z)
    wk = ct.load(w, index=(n, 0), shape=(bn, BK), padding_mode=Z)
    y.store(ct.sum(wk * ct.reshape(xk, (1, BK)), axis=1))


def gemv_four_steps(y: tl.Out, w: tl.In, x: tl.In, BK: ct.Constant[int]):  # K = 4·BK only
    bn = y.tile_shape[0]
    n = y.tile_index[0]
    acc = ct.full((bn, BK), 0.0, dtype=ct.float32)
    for k in range(4):
        xk = ct.load(x, index=(k,), shape=(BK,), padding_mode=Z)
        acc = acc + ct.load(w, index=(n, k), shape=(bn, BK), padding_mode=Z) * \
            ct.reshape(xk, (1, BK))
    y.store(ct.sum(acc, axis=1))


def gemv_rows_16(y: tl.Out, w: tl.In, x: tl.In, BK: ct.Constant[int]):   # 16 rows only
    n = y.tile_index[0]
    acc = ct.full((16, BK), 0.0, dtype=ct.float32)
    for k in range(ct.cdiv(w.shape[1], BK)):
        xk = ct.load(x, index=(k,), shape=(BK,), padding_mode=Z)
        acc = acc + ct.load(w, index=(n, k), shape=(16, BK), padding_mode=Z) * \
            ct.reshape(xk, (1, BK))
    y.store(ct.sum(acc, axis=1))


def gemv_x_twice(y: tl.Out, w: tl.In, x: tl.In, BK: ct.Constant[int]):
    bn = y.tile_shape[0]
    n = y.tile_index[0]
    acc = ct.full((bn, BK), 0.0, dtype=ct.float32)
    for k in range(ct.cdiv(w.shape[1], BK)):
        a = ct.load(x, index=(k,), shape=(BK,), padding_mode=Z)
        b = ct.load(x, index=(k,), shape=(BK,), padding_mode=Z)
        acc = acc + ct.load(w, index=(n, k), shape=(bn, BK), padding_mode=Z) * \
            ct.reshape((a + b) * 0.5, (1, BK))
    y.store(ct.sum(acc, axis=1))


# ---- rms_norm ----------------------------------------------------------------------------

def rms_stub(y: tl.Out, x: tl.In, g: tl.In, eps: float):             # the notebook's
    y.store(tl.load_like(x, y))


def rms_tile_mean(y: tl.Out, x: tl.In, g: tl.In, eps: float):        # divides by BN
    bn = y.tile_shape[1]
    t = tl.load_like(x, y)
    ms = ct.sum(t * t, axis=1, keepdims=True) / bn
    w = ct.load(g, index=(0,), shape=(bn,), padding_mode=Z)
    y.store(t * ct.rsqrt(ms + eps) * ct.reshape(w, (1, bn)))


def rms_eps_written_in(y: tl.Out, x: tl.In, g: tl.In, eps: float):
    bn = y.tile_shape[1]
    t = tl.load_like(x, y)
    ms = ct.sum(t * t, axis=1, keepdims=True) / x.shape[1]
    w = ct.load(g, index=(0,), shape=(bn,), padding_mode=Z)
    y.store(t * ct.rsqrt(ms + 1e-5) * ct.reshape(w, (1, bn)))


def rms_without_g(y: tl.Out, x: tl.In, g: tl.In, eps: float):
    t = tl.load_like(x, y)
    y.store(t * ct.rsqrt(ct.sum(t * t, axis=1, keepdims=True) / x.shape[1] + eps))


# ---- rope --------------------------------------------------------------------------------

def rope_stub(y: tl.Out, x: tl.In, cos: tl.In, sin: tl.In, pos: int):     # the notebook's
    y.store(tl.load_like(x, y))


def _halves(x, h, bh, half):
    return (ct.load(x, index=(h, 0), shape=(bh, half), padding_mode=Z),
            ct.load(x, index=(h, 1), shape=(bh, half), padding_mode=Z))


def rope_signs_swapped(y: tl.Out, x: tl.In, cos: tl.In, sin: tl.In, pos: int):
    half = y.tile_shape[1] // 2
    x1, x2 = _halves(x, y.tile_index[0], y.tile_shape[0], half)
    c = ct.load(cos, index=(pos, 0), shape=(1, half))
    s = ct.load(sin, index=(pos, 0), shape=(1, half))
    y.store(ct.cat((x1 * c + x2 * s, x2 * c - x1 * s), axis=1))


def rope_position_3(y: tl.Out, x: tl.In, cos: tl.In, sin: tl.In, pos: int):
    half = y.tile_shape[1] // 2
    x1, x2 = _halves(x, y.tile_index[0], y.tile_shape[0], half)
    c = ct.load(cos, index=(3, 0), shape=(1, half))
    s = ct.load(sin, index=(3, 0), shape=(1, half))
    y.store(ct.cat((x1 * c - x2 * s, x2 * c + x1 * s), axis=1))


def rope_half_8(y: tl.Out, x: tl.In, cos: tl.In, sin: tl.In, pos: int):   # D = 16 only
    bh = y.tile_shape[0]
    h = y.tile_index[0]
    x1 = ct.load(x, index=(h, 0), shape=(bh, 8), padding_mode=Z)
    x2 = ct.load(x, index=(h, 1), shape=(bh, 8), padding_mode=Z)
    c = ct.load(cos, index=(pos, 0), shape=(1, 8))
    s = ct.load(sin, index=(pos, 0), shape=(1, 8))
    y.store(ct.cat((x1 * c - x2 * s, x2 * c + x1 * s), axis=1))


WRONG = {
    "gemv": [
        Wrong("the stub: the first step of K only", gemv_stub, "dot product of row n", GEMV),
        Wrong("loads x twice a step", gemv_x_twice, "at the bandwidth limit", GEMV),
        Wrong("four steps written in", gemv_four_steps, "the tiles belong to the launch",
              GEMV, one_shape=True),
        Wrong("16 rows a block written in", gemv_rows_16, "the tiles belong to the launch",
              GEMV, one_shape=True),
    ],
    "rms_norm": [
        Wrong("the stub: y = x", rms_stub, "RMSNorm: each row divided", RMS),
        Wrong("forgets g", rms_without_g, "RMSNorm: each row divided", RMS),
        Wrong("the mean over the tile's width", rms_tile_mean, "not over the tile's width",
              RMS, one_shape=True),
        Wrong("eps written in", rms_eps_written_in, "eps is a launch value", RMS,
              one_shape=True),
    ],
    "rope": [
        Wrong("the stub: y = x", rope_stub, "rotate half", ROPE),
        Wrong("the rotation's signs swapped", rope_signs_swapped, "rotate half", ROPE),
        Wrong("position 3 written in", rope_position_3, "pos is a launch value", ROPE,
              one_shape=True),
        Wrong("half a head of 8 written in", rope_half_8, "the tile belongs to the partition",
              ROPE, one_shape=True),
    ],
}


@pytest.mark.parametrize("name", sorted(WRONG))
def test_the_reference_answer_passes(name):
    r = grade(name, solution(name))
    assert r.passed, str(r)
    assert "within the bytes budget" in r.message


@pytest.mark.parametrize("name, wrong", [(n, w) for n, ws in WRONG.items() for w in ws],
                         ids=lambda v: getattr(v, "why", v))
def test_a_wrong_answer_fails_with_its_concept(name, wrong):
    fails(name, wrong)


def test_a_host_function_with_its_own_row_tiles_passes_too():
    kernel = tl.kernel(solution("gemv"))

    def gemv_32_rows(y, w, x, BK):               # larger row tiles: x read fewer times
        kernel(y.partition(32), w, x, BK)
    assert grade("gemv", gemv_32_rows).passed

    def gemv_4_rows(y, w, x, BK):                # smaller ones read x more than the budget
        kernel(y.partition(4), w, x, BK)
    r = grade("gemv", gemv_4_rows)
    assert not r.passed and "at the bandwidth limit" in r.hint


def test_the_budget_fail_says_the_bytes_against_the_budget():
    r = grade("gemv", gemv_x_twice)
    assert r.message.startswith("on the notebook's size") and "the budget is 69,888" in \
        r.message


def test_doctests():
    result = doctest.testmod(nb07, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
