"""Notebook 01's exercises: the reference answers pass, typical wrong answers fail with a
hint that names the concept and the section that explains it, answers right for one
tile size fail on a hidden one, and the hints climb a ladder."""
from __future__ import annotations

import pytest

import cuda.tile as ct
import tilelab as tl
from course_checks import Wrong, fails, ladder
from tilelab.lab.course.exercises import grade, solution

FIRST = "2. A first kernel in a `%%tile` cell"
PRIMER = "4. The cuTile API in five minutes"


def refused_store(z: tl.Out, x: tl.In):                 # the notebook's stub
    ct.store(x, index=z.tile_index, tile=tl.load_like(x, z) * 2.0 + 1.0)


def forgot_shift(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) * 2.0)


def loads_twice(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) + tl.load_like(x, z) + 1.0)


def tile_of_256(z: tl.Out, x: tl.In):                   # right for the notebook's tile only
    (i,) = z.tile_index
    z.store(ct.load(x, index=(i,), shape=(256,), padding_mode=ct.PaddingMode.ZERO) * 2.0
            + 1.0)


def pairs_at_z(z: tl.Out, x: tl.In):                    # the notebook's stub: x's own tile
    z.store(tl.load_like(x, z) * 2.0)


def index_in_elements(z: tl.Out, x: tl.In):
    (i,) = z.tile_index
    (t,) = z.tile_shape
    pairs = ct.load(x, index=(2 * i,), shape=(2 * t,), padding_mode=ct.PaddingMode.ZERO)
    z.store(ct.sum(ct.reshape(pairs, (t, 2)), axis=1))


def first_of_pair_twice(z: tl.Out, x: tl.In):
    (i,) = z.tile_index
    (t,) = z.tile_shape
    pairs = ct.load(x, index=(i,), shape=(2 * t,), padding_mode=ct.PaddingMode.ZERO)
    z.store(ct.sum(ct.reshape(pairs, (2, t)), axis=0))


def pairs_of_128(z: tl.Out, x: tl.In):                  # right for tiles of 128 only
    (i,) = z.tile_index
    pairs = ct.load(x, index=(i,), shape=(256,), padding_mode=ct.PaddingMode.ZERO)
    z.store(ct.sum(ct.reshape(pairs, (128, 2)), axis=1))


WRONG = {
    "fix_refused": [
        Wrong("stores into its input", refused_store, "a safe kernel writes only its own "
              "tile", "3. What the checker rejects"),
        Wrong("forgets the + 1", forgot_shift, "what the kernel computes", FIRST),
        Wrong("loads x twice", loads_twice, "bytes moved", FIRST),
        Wrong("a tile of 256 written in", tile_of_256, "the tile shape belongs to the "
              "partition", "1. A tensor, cut into tiles", one_shape=True),
    ],
    "pair_sum": [
        Wrong("loads x at z's tile", pairs_at_z, "which elements of x a block needs", PRIMER),
        Wrong("counts index= in elements", index_in_elements,
              "which elements of x a block needs", PRIMER),
        Wrong("pairs the two halves of the tile", first_of_pair_twice,
              "which elements of x a block needs", PRIMER),
        Wrong("a tile of 128 written in", pairs_of_128, "the tile shape belongs to the "
              "partition", PRIMER, one_shape=True),
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


def test_the_refusal_quotes_the_checker():
    r = grade("fix_refused", refused_store)
    assert r.message.startswith("the safety checker refused the kernel: ")
    assert "writes to 'x', which is tl.In" in r.message


def test_a_host_function_that_launches_the_kernel_passes_too():
    kernel = tl.kernel(solution("pair_sum"))

    def launch(z, x):                           # its own tile size
        kernel(z.partition(64), x)
    assert grade("pair_sum", launch).passed


def test_the_hint_ladder_says_more_on_each_try():
    hints = ladder("pair_sum", pairs_at_z)
    assert hints[1].startswith(hints[0].splitlines()[0])
    assert hints[0].count("\n") < hints[1].count("\n") < hints[2].count("\n")
    assert "index= counts tiles" not in hints[0] and "index= counts tiles" in hints[1]
    assert "ct.reshape" in hints[2] and "solution('pair_sum')" in hints[2]
