"""The grader every kernel exercise shares: hidden cases, every correct form, values by
tile, the byte budget and property checks, each FAIL pointing to a lesson.

Why: a kernel exercise is graded the same way whatever its kernel: run the answer (one
kernel on the case's partition, or a host function making its own launches) on each
hidden case, then ask in order — did a launch race, did it leave elements unwritten, are
the values right, did it stay within the budget, do the exercise's properties hold
(e.g. a streaming kernel's loads stay bounded)? Each question that fails names a lesson
of the exercise: ``"formula"`` (wrong on the plain case), ``"edge"`` (wrong only in
partial edge tiles), the lesson key of the hidden case that failed (``"tile"``,
``"scalar"``, ``"shape"`` ...), ``"budget"``, ``"race"``, ``"unwritten"``, and the keys
properties return. An exercise module states its cases, its set-up, its lessons and its
reference answer; :meth:`KernelExercise.grade` does the rest.

Example:
    >>> import numpy as np, tilelab as tl
    >>> from tilelab.lab.course.grading import Lesson
    >>> lesson = Lesson("doubling", "01", "2. A first kernel in a `%%tile` cell")
    >>> def setup(case):
    ...     x = tl.arange(case.shape[0], dtype="float32", device="cpu")
    ...     return Setup(nan_tensor(case.shape), (x,), 2 * x.numpy())
    >>> ex = KernelExercise("demo", [Case("n = 100", (100,), (32,))], setup,
    ...                     {"formula": lesson, "edge": lesson})
    >>> def double(z: tl.Out, x: tl.In):
    ...     z.store(tl.load_like(x, z) * 2.0)
    >>> ex.grade(double).passed
    True
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from tilelab.lab.course.exercises.budget import Budget
from tilelab.lab.course.exercises.compare import unwritten, unwritten_fill, wrong_values
from tilelab.lab.course.exercises.forms import Ran, run_answer
from tilelab.lab.course.exercises.hidden import Case, first_miss
from tilelab.lab.course.grading import Lesson, Result, miss, passed

__all__ = ["Setup", "KernelExercise", "Property", "nan_tensor", "DEFAULT_LESSONS"]

#: lessons every kernel exercise shares unless it states its own
DEFAULT_LESSONS: dict[str, Lesson] = {
    "race": Lesson(
        "two blocks wrote the same elements (a race)", "05",
        "3. The race detector",
        ("a safe kernel writes only through its partition, where every tile has one owner",
         "with tl.Raw and ct.store the kernel chooses the index itself: which blocks "
         "compute the same one?")),
    "unwritten": Lesson(
        "every element of a tl.Out partition must be stored by its owner", "01",
        "3. What the checker rejects",
        ("nothing checks that a kernel stores its tile: a block that skips the store "
         "leaves the old contents", "does every path through your kernel reach the store, "
         "for every tile the partition has?")),
    "launch": Lesson(
        "the answer launched no kernel", "01", "2. A first kernel in a `%%tile` cell",
        ("a host-function answer must launch its kernels on the tensors it is given",)),
}


def nan_tensor(shape: tuple[int, ...]) -> Any:
    """A float32 CPU tensor filled with a NaN of its own bits (see
    :func:`~tilelab.lab.course.exercises.compare.unwritten_fill`): an element an answer
    never writes keeps them, so the grader tells it from a computed NaN.

    Example:
        >>> bool(np.isnan(nan_tensor((3,)).numpy()).all())
        True
    """
    import tilelab as tl

    return tl.tensor(unwritten_fill(shape), device="cpu")


@dataclass
class Setup:
    """One case, ready to run: the NaN-filled output ``out``, the kernel's other
    arguments ``args`` (inputs and scalars, in the signature's order), the expected
    output ``want`` (float64), the case's ``budget``, and how a kernel answer is
    launched: the ``schedule`` of its partition, ``unsafe``, an explicit ``grid``.
    ``extra["host"]`` holds arguments only a host-function answer gets, after the
    others (a wave size, a number of blocks: what the host chooses the launch by).

    Example:
        >>> Setup(None, (), np.zeros(1)).budget is None
        True
    """

    out: Any
    args: tuple
    want: np.ndarray
    budget: Budget | None = None
    schedule: Any = None
    unsafe: bool = False
    grid: Any = None
    extra: dict = field(default_factory=dict)


#: a property check: (case, what ran, its set-up) -> None, or (lesson key, what is wrong)
Property = Callable[[Case, Ran, Setup], "tuple[str, str] | None"]


@dataclass(frozen=True)
class KernelExercise:
    """A kernel exercise: its ``name``, hidden ``cases`` (the plain one first),
    ``setup(case) -> Setup``, ``lessons`` by key (merged over :data:`DEFAULT_LESSONS`),
    the value tolerance ``tol`` (relative and absolute) and ``properties``.

    Example:
        >>> KernelExercise("x", [], lambda c: None, {}).tol
        1e-05
    """

    name: str
    cases: Sequence[Case]
    setup: Callable[[Case], Setup]
    lessons: Mapping[str, Lesson]
    tol: float = 1e-5
    properties: Sequence[Property] = ()
    output: str = "the output"

    def lesson(self, key: str) -> Lesson:
        """The exercise's lesson ``key`` (its own, else the shared default)."""
        if key in self.lessons:
            return self.lessons[key]
        if key in DEFAULT_LESSONS:
            return DEFAULT_LESSONS[key]
        return self.lessons["formula"]

    def grade(self, answer: Any) -> Result:
        """Grade ``answer`` on every hidden case; the first FAIL, or a PASS that says
        what was checked."""
        spent: list[str] = []
        miss_ = first_miss(self.cases, lambda case: self._grade_case(answer, case, spent))
        if miss_ is not None:
            return miss_
        labels = "; ".join(c.label for c in self.cases)
        within = f", {spent[-1]}" if spent else ""
        return passed(self.name, f"right on all {len(self.cases)} cases ({labels}){within}")

    def _run(self, answer: Any, case: Case, s: Setup) -> Ran:
        part = s.out.partition(case.tile, schedule=s.schedule) if s.schedule is not None \
            else s.out.partition(case.tile)
        host = (s.out, *s.args, *s.extra.get("host", ()))
        return run_answer(answer, (part, *s.args), host, unsafe=s.unsafe, grid=s.grid)

    def _grade_case(self, answer: Any, case: Case, spent: list[str]) -> Result | None:
        from tilelab.errors import SafetyError, TilelabError

        s = self.setup(case)
        name, plain = self.name, case is self.cases[0]
        try:
            ran = self._run(answer, case, s)
        except SafetyError:
            raise                 # a refusal holds for every case: the front door says it
        except TilelabError as e:  # refused by the compiler or the launch on this case
            head = str(e.message).split("\n")[0]
            return miss(name, f"{type(e).__name__}: {head}",
                        self.lesson("formula" if plain else case.lesson))
        if ran.launches == 0:
            return miss(name, "no kernel was launched", self.lesson("launch"))
        if ran.races:
            first = str(ran.races[0]).split(";")[0]
            return miss(name, f"{len(ran.races)} race(s), e.g. {first}", self.lesson("race"))
        got = s.out.numpy()
        left = unwritten(got, case.tile, self.output)
        if left is not None:
            key = "edge" if left.edge_only else "unwritten"
            return miss(name, left.text, self.lesson(key))
        bad = wrong_values(got, s.want, self.tol, case.tile, self.output)
        if bad is not None:
            key = "edge" if bad.edge_only else "formula" if plain else case.lesson
            return miss(name, bad.text, self.lesson(key), bad.secrets)
        if s.budget is not None:
            over = s.budget.over(ran.bytes if s.budget.unit == "bytes" else ran.flops,
                                 ran.launches)
            if over is not None:
                return miss(name, over, self.lesson("budget"))
            spent[:] = [f"within the {s.budget.unit} budget ({s.budget.why})"]
        for prop in self.properties:
            found = prop(case, ran, s)
            if found is not None:
                return miss(name, found[1], self.lesson(found[0]))
        return None
