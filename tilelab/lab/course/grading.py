"""What every grader is made of: the verdict, the lesson a FAIL points to, the exercise and
the registry they go in.

Why: the graders (one module per notebook, :mod:`tilelab.lab.course.exercises.nb01` ...)
and the exercises' front door (:mod:`tilelab.lab.course.exercises`: ``check``, ``grade``,
``solution``) both need the verdict type and the registry; kept here, below both, the
graders register themselves without importing the front door that loads them.

A FAIL teaches: it says what was observed (``message``) and names the :class:`Lesson`
that is wrong — the concept, the notebook section that explains it, and a ladder of
further hints (``rungs``) that later failed tries of the same exercise reveal. Neither
states the expected value nor the code to type; the numbers a grader compared against
are kept in ``Result.secrets`` so tests can check that no message gives one away.

Example:
    >>> edge = Lesson("the partial last tile", "02", "3. Partial edge tiles",
    ...               ("a load past the end gives the padding value",))
    >>> r = miss("saxpy_edge", "z is wrong in the last tile", edge)
    >>> r.passed, r.hint_at(1)
    (False, 'the partial last tile: see notebook 02, "3. Partial edge tiles"')
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

__all__ = ["Lesson", "Result", "passed", "failed", "miss", "Exercise", "EXERCISES",
           "register", "reference", "as_kernel"]


@dataclass(frozen=True)
class Lesson:
    """What a FAIL teaches: the ``concept`` that is wrong, where the course explains it
    (``notebook`` — its number, e.g. ``"02"`` — and the title of the ``section``, a
    markdown heading of that notebook without its ``#``), and ``rungs``: more to say on
    the 2nd, 3rd ... failed try. A rung may ask a question or state the principle; it
    never states the expected value or the code to type.

    Example:
        >>> Lesson("row broadcasting", "02", "2. A partition is an ownership map").where
        'notebook 02, "2. A partition is an ownership map"'
    """

    concept: str
    notebook: str
    section: str
    rungs: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        """The pointer a FAIL prints: notebook and section."""
        return f'notebook {self.notebook}, "{self.section}"'

    def text(self, attempt: int) -> str:
        """The hint for the ``attempt``-th failed try: the concept and where to look, then
        one more rung per try after the first.

        Example:
            >>> l = Lesson("c", "01", "s", ("r1", "r2"))
            >>> l.text(1), l.text(3)
            ('c: see notebook 01, "s"', 'c: see notebook 01, "s"\\n  r1\\n  r2')
        """
        lines = [f"{self.concept}: see {self.where}"]
        lines += [f"  {r}" for r in self.rungs[:max(0, attempt - 1)]]
        return "\n".join(lines)


@dataclass
class Result:
    """The verdict on one answer: ``passed``, what was found (``message``) and, on a
    FAIL, what to look at (``hint``; with a ``lesson``, the front door fills it for the
    try it is). ``secrets`` are the numbers the grader compared the answer with (the
    expected values), never shown.

    Example:
        >>> print(Result("saxpy_edge", False, "z is wrong in every tile", "read the task"))
        FAIL saxpy_edge: z is wrong in every tile
        hint: read the task
    """

    name: str
    passed: bool
    message: str
    hint: str = ""
    lesson: Lesson | None = None
    secrets: tuple[float, ...] = field(default=(), repr=False)

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        head = f"{'PASS' if self.passed else 'FAIL'} {self.name}: {self.message}"
        return head + (f"\nhint: {self.hint}" if self.hint and not self.passed else "")

    def hint_at(self, attempt: int) -> str:
        """The hint for the ``attempt``-th failed try (the lesson's ladder, or ``hint``)."""
        return self.lesson.text(attempt) if self.lesson is not None else self.hint

    def at(self, attempt: int) -> "Result":
        """This verdict with its hint for the ``attempt``-th failed try filled in."""
        if self.passed or self.lesson is None:
            return self
        more = ("\n  (another failed try shows one more hint)"
                if attempt <= len(self.lesson.rungs) else
                f"\n  (that is every hint; solution({self.name!r}) shows an answer)")
        return replace(self, hint=self.hint_at(attempt) + more)


def passed(name: str, message: str) -> Result:
    """A PASS verdict. Example: ``passed("x", "all 1000 elements right").passed`` is True."""
    return Result(name, True, message)


def failed(name: str, message: str, hint: str) -> Result:
    """A FAIL verdict with a plain hint (a refusal's or an error's own advice). Graders
    use :func:`miss`, which names a lesson. Example: ``failed("x", "wrong", "y").hint``."""
    return Result(name, False, message, hint)


def miss(name: str, message: str, lesson: Lesson, secrets: tuple[float, ...] = ()) -> Result:
    """A FAIL verdict that points to ``lesson``; ``secrets`` are the expected numbers the
    message must not show.

    Example:
        >>> miss("x", "wrong", Lesson("tiles", "01", "s")).hint_at(1)
        'tiles: see notebook 01, "s"'
    """
    return Result(name, False, message, lesson.text(1), lesson, tuple(secrets))


@dataclass(frozen=True)
class Exercise:
    """One exercise: where it is (``notebook``), what to do (``task``), the grader,
    the function that returns its reference answer (``solution``, set by
    :func:`reference`) and whether the student writes a kernel (``kernel``; None: a
    kernel exercise when the reference answer is one, see
    :func:`tilelab.lab.course.exercises.writes_kernel`).

    Example:
        >>> import tilelab.lab.course.exercises.nb02     # the graders register themselves
        >>> EXERCISES["saxpy_edge"].notebook
        '02_vector_add_and_ownership'
    """

    name: str
    notebook: str
    task: str
    grader: Callable[[Any], Result]
    solution: Callable[[], Any] | None = None
    kernel: bool | None = None


#: every exercise by name
EXERCISES: dict[str, Exercise] = {}


def register(name: str, notebook: str, task: str, kernel: bool | None = None) -> Callable:
    """Decorator: register ``grader(answer) -> Result`` as exercise ``name``
    (``kernel=True``: the answer writes a kernel even when the reference answer is a
    host function that launches it).

    Example:
        >>> @register("demo_exercise", "00_demo", "return 42")
        ... def _demo(answer):
        ...     return passed("demo_exercise", "42") if answer == 42 else failed(
        ...         "demo_exercise", f"got {answer!r}", "return 42")
        >>> EXERCISES["demo_exercise"].grader(41).hint
        'return 42'
        >>> del EXERCISES["demo_exercise"]
    """
    def wrap(grader: Callable[[Any], Result]) -> Callable[[Any], Result]:
        EXERCISES[name] = Exercise(name, notebook, task, grader, kernel=kernel)
        return grader
    return wrap


def reference(name: str) -> Callable:
    """Decorator: ``fn()`` returns the reference answer of exercise ``name`` (registered
    before, in the same notebook module); ``solution(name)`` calls it.

    Example:
        >>> @register("demo_exercise", "00_demo", "return 42")
        ... def _demo(answer):
        ...     return passed("demo_exercise", "42")
        >>> @reference("demo_exercise")
        ... def demo_exercise():
        ...     return 42
        >>> EXERCISES["demo_exercise"].solution()
        42
        >>> del EXERCISES["demo_exercise"]
    """
    def wrap(fn: Callable[[], Any]) -> Callable[[], Any]:
        if name not in EXERCISES:
            raise KeyError(f"reference({name!r}): register the exercise's grader first")
        EXERCISES[name] = replace(EXERCISES[name], solution=fn)
        return fn
    return wrap


def as_kernel(answer: Any, unsafe: bool = False) -> Any:
    """A kernel from an answer: a ``tl.Kernel`` as is, a plain function decorated here
    (so a refusal is raised inside :func:`~tilelab.lab.course.exercises.grade`, which
    reports it).

    Example:
        >>> from tilelab.lab.course.exercises.nb02 import saxpy_edge
        >>> as_kernel(saxpy_edge()).name
        'saxpy'
    """
    import tilelab as tl

    if isinstance(answer, tl.Kernel):
        return answer
    if not callable(answer):
        raise TypeError(f"expected a kernel function, got {type(answer).__name__}")
    return tl.kernel(unsafe=True)(answer) if unsafe else tl.kernel(answer)
