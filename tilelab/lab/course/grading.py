"""What every grader is made of: the verdict, the exercise and the registry they go in.

Why: the graders (one module per notebook, :mod:`tilelab.lab.course.exercises.nb01` ...)
and the exercises' front door (:mod:`tilelab.lab.course.exercises`: ``check``, ``grade``,
``solution``) both need the verdict type and the registry; kept here, below both, the
graders register themselves without importing the front door that loads them.

Example:
    >>> r = failed("saxpy_edge", "z[3] is 1.0, expected 7.0", "use a * x + y")
    >>> r.passed, bool(passed("saxpy_edge", "all 1000 elements right"))
    (False, True)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Result", "passed", "failed", "Exercise", "EXERCISES", "register", "reference",
           "as_kernel"]


@dataclass
class Result:
    """The verdict on one answer: ``passed``, what was found (``message``) and, on a
    FAIL, what to look at (``hint``).

    Example:
        >>> print(Result("saxpy_edge", False, "z[3] is 1.0, expected 7.0", "use a * x + y"))
        FAIL saxpy_edge: z[3] is 1.0, expected 7.0
        hint: use a * x + y
    """

    name: str
    passed: bool
    message: str
    hint: str = ""

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        head = f"{'PASS' if self.passed else 'FAIL'} {self.name}: {self.message}"
        return head + (f"\nhint: {self.hint}" if self.hint and not self.passed else "")


def passed(name: str, message: str) -> Result:
    """A PASS verdict. Example: ``passed("x", "all 1000 elements right").passed`` is True."""
    return Result(name, True, message)


def failed(name: str, message: str, hint: str) -> Result:
    """A FAIL verdict with its hint. Example: ``failed("x", "wrong", "try y").hint``."""
    return Result(name, False, message, hint)


@dataclass(frozen=True)
class Exercise:
    """One exercise: where it is (``notebook``), what to do (``task``), the grader and
    the function that returns its reference answer (``solution``, set by
    :func:`reference`).

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


#: every exercise by name, in course order
EXERCISES: dict[str, Exercise] = {}


def register(name: str, notebook: str, task: str) -> Callable:
    """Decorator: register ``grader(answer) -> Result`` as exercise ``name``.

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
        EXERCISES[name] = Exercise(name, notebook, task, grader)
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
        from dataclasses import replace

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
