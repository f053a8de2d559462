"""Notebook 05 (unsafe kernels and races): its exercises' graders and reference answers.

- ``race_hunt``: the sum of a vector into ``out[0]`` without a race, in any correct form:
  one unsafe kernel with an atomic add, or a host function whose launches (a safe
  partial-sums kernel and a second launch that adds the partials, say) do it;
- ``smooth_shift``: the read-write race of the notebook fixed the safe way: read ``x``
  as ``tl.In``, write ``y`` through its partition, and fetch the element ``shift`` places
  on with a masked gather.

Example:
    >>> from tilelab.lab.course.exercises import grade, solution
    >>> grade("race_hunt", solution("race_hunt")).passed
    True
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

import cuda.tile as ct
import tilelab as tl
from tilelab.lab.course.exercises.budget import Budget
from tilelab.lab.course.exercises.forms import run_answer
from tilelab.lab.course.exercises.hidden import Case, first_miss
from tilelab.lab.course.exercises.kernels import (DEFAULT_LESSONS, KernelExercise, Setup,
                                                  nan_tensor)
from tilelab.lab.course.grading import Lesson, Result, miss, passed, reference, register

__all__ = ["SECTIONS"]

NOTEBOOK = "05_unsafe_kernels_and_races"

#: the headings of notebook 05 the lessons point to (tests check they exist)
RACE_HUNT = "Exercise: a race hunt"
SPLIT_K = "Split-K: two safe launches, or one unsafe atomic kernel"
PRINTING = "Printing from inside a kernel"
SMOOTH = "Exercise: smoothing out of place"
RW_RACE = "A read-write race"
SECTIONS = (RACE_HUNT, SPLIT_K, PRINTING, SMOOTH, RW_RACE)


# ---- race_hunt ---------------------------------------------------------------------------

_RACE_LESSONS = {
    "race": Lesson(
        "blocks that share one output element must combine their partial sums without a "
        "race", "05", RACE_HUNT,
        ("a plain store from every block is a write-write race, whatever the order; the "
         "Atomics section says which update is indivisible",
         "two safe launches work too: each block writes its partial sum to its own tile of "
         f"a partition, and a second launch adds the partials (see \"{SPLIT_K}\")")),
    "formula": Lesson(
        "out[0] must be the sum of every element of x: each block adds the sum of its "
        "whole tile", "05", RACE_HUNT,
        ("a block's tile of x is the T elements at its block index, counted in tiles",
         "print the block's partial sum from inside the kernel and compare it with numpy "
         f"(see \"{PRINTING}\")")),
    "edge": Lesson(
        "the last tile is partial when T does not divide n: what its padding adds to the "
        "sum", "05", PRINTING,
        ("a load past the end of x fills the tile with its padding value: which value "
         "leaves a sum unchanged?",)),
    "tile": Lesson(
        "T is a parameter of the launch: the kernel must use the tile size it is given",
        "05", RACE_HUNT,
        ("the checker launches your answer with several values of T: where does it "
         "assume one?",)),
    "budget": Lesson(
        "bytes moved: x read once, plus a few bytes per block for its partial sum", "05",
        SPLIT_K,
        ("every load moves its bytes again: load each tile of x once",)),
    "launch": DEFAULT_LESSONS["launch"],
}

_RACE_CASES = [
    Case("the notebook's size", (4096,), (256,)),
    Case("another T", (4096,), (512,), lesson="tile", seed=2),
    Case("n not a multiple of T", (1000,), (128,), lesson="edge", seed=1),
]


def _race_case(answer: Any, case: Case) -> Result | None:
    name = "race_hunt"
    (n,), (T,) = case.shape, case.tile
    blocks = math.ceil(n / T)
    x = tl.randn(n, dtype="float32", device="cpu", seed=3 + case.seed)
    out = tl.zeros(1, dtype="float32", device="cpu")
    plain = case is _RACE_CASES[0]
    try:
        ran = run_answer(answer, (out, x, T), (out, x, T), unsafe=True, grid=(blocks,))
    except tl.SafetyError:
        raise                      # a refusal holds for every case: the front door says it
    except tl.TilelabError as e:   # a host function's racing launch, a load off the end
        head = str(e.message).split("\n")[0]
        key = "race" if "race" in head else "formula" if plain else case.lesson
        return miss(name, f"{type(e).__name__}: {head}", _RACE_LESSONS[key])
    if ran.launches == 0:
        return miss(name, "no kernel was launched", _RACE_LESSONS["launch"])
    if ran.races:
        first = str(ran.races[0]).split(";")[0]
        return miss(name, f"{len(ran.races)} race(s), e.g. {first}", _RACE_LESSONS["race"])
    want = float(x.numpy().astype(np.float64).sum())
    got = float(out.numpy()[0])
    if not abs(got - want) <= 1e-4 * max(1.0, float(np.abs(x.numpy()).sum())):
        key = "formula" if plain else case.lesson
        return miss(name, "out[0] is not the sum of x", _RACE_LESSONS[key], (want,))
    budget = Budget(4 * n + 8 * blocks + 16, "4n: x read once, plus 8 bytes a block for "
                    "its partial sum")
    over = budget.over(ran.bytes, ran.launches)
    if over is not None:
        return miss(name, over, _RACE_LESSONS["budget"])
    return None


@register("race_hunt", NOTEBOOK,
          "out[0] = the sum of x with no race: total(out: tl.Raw, x: tl.In, T: "
          "ct.Constant[int]), unsafe, one block per tile of T; or a host function "
          "total(out, x, T) whose launches do it; budget 4n bytes plus 8 a block")
def _race_hunt(answer: Any) -> Result:
    found = first_miss(_RACE_CASES, lambda case: _race_case(answer, case))
    if found is not None:
        return found
    return passed("race_hunt", "no race, and out[0] is the sum on all "
                  f"{len(_RACE_CASES)} cases, within the byte budget")


def _block_sum(out: tl.Raw, x: tl.In, T: ct.Constant[int]):
    t = ct.load(x, index=(ct.bid(0),), shape=(T,), padding_mode=ct.PaddingMode.ZERO)
    ct.atomic_add(out, (0,), ct.sum(t))


@reference("race_hunt")
def race_hunt() -> Callable:
    """Every block adds its partial sum into ``out[0]`` with an atomic add (the zero
    padding of the last tile adds nothing).

    Example:
        >>> race_hunt().__name__
        '_block_sum'
    """
    return _block_sum


def _partial_sums(partials: tl.Out, x: tl.In, T: ct.Constant[int]):
    t = ct.load(x, index=(partials.tile_index[0],), shape=(T,),
                padding_mode=ct.PaddingMode.ZERO)
    partials.store(ct.reshape(ct.sum(t), (1,)))


def _sum_all(out: tl.Out, partials: tl.In, P: ct.Constant[int]):
    p = ct.load(partials, index=(0,), shape=(P,), padding_mode=ct.PaddingMode.ZERO)
    out.store(ct.reshape(ct.sum(p), (1,)))


def race_hunt_two_launches() -> Callable:
    """The safe form the notebook suggests: one partial sum per block into a partition,
    then one block adds the partials (``P``: a power of two covering them).

    Example:
        >>> from tilelab.lab.course.exercises import grade
        >>> grade("race_hunt", race_hunt_two_launches()).passed
        True
    """
    partial, final = tl.kernel(_partial_sums), tl.kernel(_sum_all)

    def total(out: Any, x: Any, T: int) -> None:
        blocks = -(-x.shape[0] // T)
        partials = tl.empty(blocks, dtype="float32", device=x.device)
        partial(partials.partition(1), x, T)
        final(out.partition(1), partials, 1 << (blocks - 1).bit_length())
    return total


# ---- smooth_shift ------------------------------------------------------------------------

_SMOOTH_LESSONS = {
    "safe": Lesson(
        "the fix for a read-write race is a safe kernel: x read as tl.In, y written "
        "through its own tl.Out partition, so no block writes what another reads", "05",
        RW_RACE, ("an unsafe kernel may still race; a safe one cannot, and the checker "
                  "proves it when the kernel is defined",)),
    "formula": Lesson(
        "y[i] is the mean of x[i] and of the element shift places on (0 past the end of "
        "x)", "05", SMOOTH,
        ("ct.load's index counts tiles, not elements: the next tile is not the element "
         "shift places on",
         "a gather takes the element indices you compute: this tile's first index is its "
         "tile index times its tile size")),
    "scalar": Lesson(
        "shift is a launch value: the kernel must use the shift it is given", "05", SMOOTH,
        ("the checker launches your kernel with several shifts",)),
    "tile": Lesson(
        "the tile size belongs to the partition: read it from y, never assume it", "05",
        SMOOTH, ("the checker launches your kernel with several tile sizes",)),
    "edge": Lesson(
        "past the end of x the shifted element counts as 0", "05", SMOOTH,
        ("a gather returns its padding value for indices outside x: which one is it?",)),
    "budget": Lesson(
        "bytes moved: each element of x read at most twice (its own tile and the shifted "
        "one) and y written once", "05", SMOOTH,
        ("every load moves its bytes again, also of elements already loaded",)),
}


def _smooth_setup(case: Case) -> Setup:
    (n,), shift = case.shape, case.params["shift"]
    data = np.random.default_rng(50 + case.seed).standard_normal(n).astype(np.float32)
    x = tl.tensor(data, device="cpu")
    shifted = np.concatenate([data.astype(np.float64), np.zeros(shift)])[shift:]
    return Setup(nan_tensor((n,)), (x, shift), (data + shifted) / 2,
                 Budget(12 * n, "12n: x read at most twice, y written once"))


SMOOTH_SHIFT = KernelExercise(
    "smooth_shift",
    [Case("the notebook's size", (1000,), (128,), {"shift": 1}),
     Case("another shift", (1000,), (128,), {"shift": 5}, lesson="scalar", seed=1),
     Case("a shift of a whole tile", (512,), (64,), {"shift": 64}, lesson="tile", seed=2),
     Case("a shift past a partial last tile", (300,), (256,), {"shift": 7}, lesson="edge",
          seed=3)],
    _smooth_setup, _SMOOTH_LESSONS, tol=1e-6, output="y")


@register("smooth_shift", NOTEBOOK,
          "smooth(y: tl.Out, x: tl.In, shift: int): y[i] = (x[i] + x[i + shift]) / 2, "
          "x past its end counting as 0, in a safe kernel; budget 12n bytes")
def _smooth_shift(answer: Any) -> Result:
    try:
        return SMOOTH_SHIFT.grade(answer)
    except tl.SafetyError as e:    # the checker's advice would be the opt-out: not here
        if "tl.Raw" not in e.message:
            raise
        return miss("smooth_shift", "the kernel takes a tl.Raw parameter: "
                    + e.message.split("\n")[0], _SMOOTH_LESSONS["safe"])


def _smooth(y: tl.Out, x: tl.In, shift: int):
    t = y.tile_shape[0]
    i = y.tile_index[0] * t + ct.arange(t, dtype=ct.int32)
    right = ct.gather(x, i + shift)          # masked: 0 past the end of x
    y.store((tl.load_like(x, y) + right) * 0.5)


@reference("smooth_shift")
def smooth_shift() -> Callable:
    """The tile of ``x`` at ``y``'s position, plus a gather of the elements ``shift``
    places on (indices outside ``x`` read 0), halved; stored through ``y``.

    Example:
        >>> smooth_shift().__name__
        '_smooth'
    """
    return _smooth
