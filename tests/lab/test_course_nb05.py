"""Notebook 05's exercises: the race hunt in every correct form (an atomic add, or two
safe launches), the out-of-place smoothing; typical wrong answers fail with the concept
and the section that explains it, answers right for one configuration fail on a hidden
one."""
from __future__ import annotations

import doctest

import numpy as np
import pytest

import cuda.tile as ct
import tilelab as tl
from course_checks import Wrong, fails
from tilelab.lab.course.exercises import exercises, grade, solution

exercises()        # every notebook's exercises registered in course order first
# (importing a notebook module alone would register its exercises ahead of the others)
from tilelab.lab.course.exercises import nb05
from tilelab.lab.course.exercises.nb05 import (PRINTING, RACE_HUNT, RW_RACE, SMOOTH, SPLIT_K,
                                               race_hunt_two_launches)

Z = ct.PaddingMode.ZERO


# ---- race_hunt ---------------------------------------------------------------------------

def racy_total(out: tl.Raw, x: tl.In, T: ct.Constant[int]):        # the notebook's stub
    t = ct.load(x, index=(ct.bid(0),), shape=(T,))
    ct.store(out, index=(0,), tile=ct.reshape(ct.sum(t), (1,)))


def atomic_max(out: tl.Raw, x: tl.In, T: ct.Constant[int]):
    t = ct.load(x, index=(ct.bid(0),), shape=(T,), padding_mode=Z)
    ct.atomic_add(out, (0,), ct.max(t))


def reads_twice(out: tl.Raw, x: tl.In, T: ct.Constant[int]):
    t = ct.load(x, index=(ct.bid(0),), shape=(T,), padding_mode=Z)
    u = ct.load(x, index=(ct.bid(0),), shape=(T,), padding_mode=Z)
    ct.atomic_add(out, (0,), ct.sum(t) * 0.5 + ct.sum(u) * 0.5)


def tiles_of_256(out: tl.Raw, x: tl.In, T: ct.Constant[int]):      # right for T = 256
    t = ct.load(x, index=(ct.bid(0),), shape=(256,), padding_mode=Z)
    ct.atomic_add(out, (0,), ct.sum(t))


def on_the_host(out, x, T):                      # no kernel: the sum taken by numpy
    out.copy_(tl.tensor(np.array([x.numpy().sum()], np.float32), device=out.device))


_racy = tl.kernel(unsafe=True)(racy_total)


def racy_host(out, x, T):                        # a host function whose launch races
    _racy(out, x, T, grid=(-(-x.shape[0] // T),))


# ---- smooth_shift ------------------------------------------------------------------------

def smooth_stub(y: tl.Out, x: tl.In, shift: int):                  # the notebook's stub
    y.store(tl.load_like(x, y))


def smooth_next_tile(y: tl.Out, x: tl.In, shift: int):
    right = ct.load(x, index=(y.tile_index[0] + 1,), shape=(y.tile_shape[0],),
                    padding_mode=Z)
    y.store((tl.load_like(x, y) + right) * 0.5)


def smooth_shift_one(y: tl.Out, x: tl.In, shift: int):             # right for shift = 1
    t = y.tile_shape[0]
    i = y.tile_index[0] * t + ct.arange(t, dtype=ct.int32)
    y.store((tl.load_like(x, y) + ct.gather(x, i + 1)) * 0.5)


def smooth_three_reads(y: tl.Out, x: tl.In, shift: int):
    t = y.tile_shape[0]
    i = y.tile_index[0] * t + ct.arange(t, dtype=ct.int32)
    here = (ct.gather(x, i) + tl.load_like(x, y)) * 0.5
    y.store((here + ct.gather(x, i + shift)) * 0.5)


def smooth_raw(y: tl.Raw, x: tl.In, shift: int):                   # the unsafe "fix"
    t = ct.load(x, index=(ct.bid(0),), shape=(128,))
    ct.store(y, index=(ct.bid(0),), tile=t)


def smooth_two_gathers(y: tl.Out, x: tl.In, shift: int):           # another right form
    t = y.tile_shape[0]
    i = y.tile_index[0] * t + ct.arange(t, dtype=ct.int32)
    y.store((ct.gather(x, i) + ct.gather(x, i + shift)) * 0.5)


WRONG = {
    "race_hunt": [
        Wrong("the stub: every block stores", racy_total, "without a race", RACE_HUNT),
        Wrong("a host function whose launch races", racy_host, "without a race", RACE_HUNT),
        Wrong("adds each tile's maximum", atomic_max, "out[0] must be the sum", RACE_HUNT),
        Wrong("loads its tile twice", reads_twice, "x read once", SPLIT_K),
        Wrong("tiles of 256 written in", tiles_of_256, "T is a parameter of the launch",
              RACE_HUNT, one_shape=True),
        Wrong("sums on the host", on_the_host, "the answer launched no kernel",
              "2. A first kernel in a `%%tile` cell"),
    ],
    "smooth_shift": [
        Wrong("the stub: y = x", smooth_stub, "y[i] is the mean of x[i]", SMOOTH),
        Wrong("the next tile, not the next element", smooth_next_tile,
              "y[i] is the mean of x[i]", SMOOTH),
        Wrong("a shift of 1 written in", smooth_shift_one, "shift is a launch value", SMOOTH,
              one_shape=True),
        Wrong("reads x three times", smooth_three_reads, "read at most twice", SMOOTH),
        Wrong("an unsafe kernel", smooth_raw, "a safe kernel", RW_RACE),
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


def test_the_race_hunt_takes_the_safe_two_launch_answer_the_notebook_suggests():
    r = grade("race_hunt", race_hunt_two_launches())
    assert r.passed, str(r)
    assert "within the byte budget" in r.message


def neg_inf_padding(out: tl.Raw, x: tl.In, T: ct.Constant[int]):   # wrong past the end
    t = ct.load(x, index=(ct.bid(0),), shape=(T,), padding_mode=ct.PaddingMode.NEG_INF)
    ct.atomic_add(out, (0,), ct.sum(t))


def test_the_race_hunt_checks_a_size_that_t_does_not_divide():
    r = grade("race_hunt", neg_inf_padding)
    assert not r.passed and r.message.startswith("on n not a multiple of T")
    assert "what its padding adds to the sum" in r.hint and f'"{PRINTING}"' in r.hint


def test_smoothing_takes_another_right_form():
    r = grade("smooth_shift", smooth_two_gathers)
    assert r.passed, str(r)


def test_a_race_fail_names_the_blocks_not_a_value():
    r = grade("race_hunt", racy_total)
    assert "15 race(s), e.g. write-write race on 'out': blocks (0, 0, 0) and (1, 0, 0)" \
        in r.message
    assert "expected" not in r.message


def test_the_sections_are_headings_of_the_notebook():
    nbformat = pytest.importorskip("nbformat")
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "notebooks" / f"{nb05.NOTEBOOK}.ipynb"
    text = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells
                     if c.cell_type == "markdown")
    for section in nb05.SECTIONS + (PRINTING,):
        assert f"# {section}\n" in text + "\n", section


def test_doctests():
    result = doctest.testmod(nb05, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
