"""Notebook 02's exercises: the reference answers pass, typical wrong answers fail with a
hint that names the concept and the section that explains it, answers right for one
configuration (a hard-coded scalar or tile) fail on a hidden one."""
from __future__ import annotations

import pytest

import cuda.tile as ct
import tilelab as tl
from course_checks import Wrong, fails
from tilelab.lab.course.exercises import grade, solution

BROADCAST = "4. Vectors beside a matrix: 2-D broadcasting"


def saxpy_stub(z: tl.Out, x: tl.In, y: tl.In, a: float):   # the notebook's stub
    z.store(tl.load_like(x, z))


def saxpy_three(z: tl.Out, x: tl.In, y: tl.In, a: float):  # right for a = 3 only
    z.store(3.0 * tl.load_like(x, z) + tl.load_like(y, z))


def saxpy_twice(z: tl.Out, x: tl.In, y: tl.In, a: float):
    z.store(a * tl.load_like(x, z) + tl.load_like(y, z) * 0.5 + tl.load_like(y, z) * 0.5)


def saxpy_256(z: tl.Out, x: tl.In, y: tl.In, a: float):   # right for tiles of 256 only
    (i,) = z.tile_index
    xt = ct.load(x, index=(i,), shape=(256,), padding_mode=ct.PaddingMode.ZERO)
    yt = ct.load(y, index=(i,), shape=(256,), padding_mode=ct.PaddingMode.ZERO)
    z.store(a * xt + yt)


def no_shift(z: tl.Out, x: tl.In, row: tl.In, col: tl.In):
    _, n = z.tile_index
    _, tn = z.tile_shape
    r = ct.load(row, index=(n,), shape=(tn,), padding_mode=ct.PaddingMode.ZERO)
    z.store(tl.load_like(x, z) * ct.reshape(r, (1, tn)))


def swapped_slices(z: tl.Out, x: tl.In, row: tl.In, col: tl.In):
    m, n = z.tile_index
    tm, tn = z.tile_shape
    r = ct.load(row, index=(m,), shape=(tn,), padding_mode=ct.PaddingMode.ZERO)
    c = ct.load(col, index=(n,), shape=(tm,), padding_mode=ct.PaddingMode.ZERO)
    z.store(tl.load_like(x, z) * ct.reshape(r, (1, tn)) + ct.reshape(c, (tm, 1)))


def square_tiles_only(z: tl.Out, x: tl.In, row: tl.In, col: tl.In):
    m, n = z.tile_index
    tm, _ = z.tile_shape
    r = ct.load(row, index=(n,), shape=(tm,), padding_mode=ct.PaddingMode.ZERO)
    c = ct.load(col, index=(m,), shape=(tm,), padding_mode=ct.PaddingMode.ZERO)
    z.store(tl.load_like(x, z) * ct.reshape(r, (1, tm)) + ct.reshape(c, (tm, 1)))


WRONG = {
    "saxpy_edge": [
        Wrong("the stub: z = x", saxpy_stub, "what saxpy computes",
              "1. The kernel, in a `%%tile` cell"),
        Wrong("loads y twice", saxpy_twice, "bytes moved", "7. Bandwidth on the roofline"),
        Wrong("a = 3 written in", saxpy_three, "a scalar parameter is a launch value",
              "1. The kernel, in a `%%tile` cell", one_shape=True),
        Wrong("tiles of 256 written in", saxpy_256, "the tile shape belongs to the "
              "partition", "2. A partition is an ownership map", one_shape=True),
    ],
    "broadcast_2d": [
        Wrong("forgets the column vector", no_shift, "2-D broadcasting", BROADCAST),
        Wrong("slices at the wrong tile index", swapped_slices, "2-D broadcasting",
              BROADCAST),
        Wrong("assumes square tiles", square_tiles_only, "non-square tiles", BROADCAST,
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
    fails(name, wrong)


def test_a_fail_says_where_the_values_are_wrong_not_what_they_should_be():
    r = grade("broadcast_2d", no_shift)
    assert "elements of z are wrong: wrong in every tile" in r.message
    assert "expected" not in r.message
    r = grade("saxpy_edge", saxpy_twice)
    assert "the launch moved 16,000 bytes; the budget is 12,000" in r.message


def test_every_form_passes_two_launches_too():
    kernel = tl.kernel(solution("saxpy_edge"))

    def two_launches(z, x, y, a):               # a host function: two halves of z
        n = z.shape[0] // 2
        kernel(z[:n].partition(128), x[:n], y[:n], a)
        kernel(z[n:].partition(128), x[n:], y[n:], a)
    r = grade("saxpy_edge", two_launches)
    assert r.passed, str(r)
