"""Checked exercises for the tour notebooks: run an answer, say PASS or FAIL with a hint.

Why: a course needs exercises a student can check alone. Each exercise has a name, the
notebook it belongs to, a one-line task and a grader. :func:`check` grades an answer and
*prints* the verdict (it never raises, so a notebook that ships with the unsolved stub
still runs top to bottom); :func:`grade` returns the :class:`Result` for tests and tools.
Kernel answers may be plain functions: the grader makes them kernels itself, so a kernel
the safety checker refuses is a FAIL that quotes the refusal, not a stopped notebook.
Graders run kernels on the CPU interpreter (``tl.interpret``) and read correctness, bytes
moved and races from its trace. The reference answers are in
:mod:`tilelab.lab.solutions`; ``solution(name)`` returns one.

Example:
    >>> from tilelab.lab.exercises import grade, solution
    >>> grade("roofline", solution("roofline")).passed
    True
    >>> r = grade("roofline", {"h200": 1e-3, "b200": 1e-3})
    >>> r.passed, r.hint.startswith("the roofline's lower bound")
    (False, True)
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Result", "Exercise", "EXERCISES", "register", "grade", "check", "solution",
           "exercises", "as_kernel"]


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
    the name of its reference answer in :mod:`tilelab.lab.solutions`.

    Example:
        >>> EXERCISES["saxpy_edge"].notebook
        '02_vector_add_and_ownership'
    """

    name: str
    notebook: str
    task: str
    grader: Callable[[Any], Result]


#: every exercise by name, in course order
EXERCISES: dict[str, Exercise] = {}


def register(name: str, notebook: str, task: str) -> Callable:
    """Decorator: register ``grader(answer) -> Result`` as exercise ``name``.

    Example:
        >>> @register("demo_exercise", "00_demo", "return 42")
        ... def _demo(answer):
        ...     return passed("demo_exercise", "42") if answer == 42 else failed(
        ...         "demo_exercise", f"got {answer!r}", "return 42")
        >>> grade("demo_exercise", 41).hint
        'return 42'
        >>> del EXERCISES["demo_exercise"]
    """
    def wrap(grader: Callable[[Any], Result]) -> Callable[[Any], Result]:
        EXERCISES[name] = Exercise(name, notebook, task, grader)
        return grader
    return wrap


def exercises(notebook: str | None = None) -> list[Exercise]:
    """The exercises (of one notebook, by the start of its name), in course order.

    Example:
        >>> [e.name for e in exercises("06")]
        ['graph_deps']
    """
    _load()
    return [e for e in EXERCISES.values() if notebook is None or e.notebook.startswith(notebook)]


def _load() -> None:
    import tilelab.lab.exercise_checks  # noqa: F401  (registers the graders)


def _lookup(name: str) -> Exercise:
    _load()
    try:
        return EXERCISES[name]
    except KeyError:
        known = ", ".join(EXERCISES)
        raise KeyError(f"no exercise named {name!r}; the exercises are: {known}") from None


def grade(name: str, answer: Any) -> Result:
    """Grade ``answer`` for exercise ``name`` and return the :class:`Result` (no output).

    A refusal by the safety checker and any error the answer raises become a FAIL that
    says what happened.

    Example:
        >>> grade("saxpy_edge", solution("saxpy_edge")).passed
        True
    """
    from tilelab.errors import SafetyError, TilelabError

    ex = _lookup(name)
    try:
        return ex.grader(answer)
    except SafetyError as e:
        return failed(name, "the safety checker refused the kernel: "
                      + str(e.message).split("\n")[0],
                      e.hint or "a safe kernel writes only its own tile, through its partition")
    except TilelabError as e:
        return failed(name, f"{type(e).__name__}: {e.message}",
                      e.hint or "read the error: it names the line and what to change")
    except Exception as e:  # the student's code failed: report it, never stop the notebook
        return failed(name, f"the answer raised {type(e).__name__}: {e}",
                      f"the task: {ex.task}")


def check(name: str, answer: Any) -> None:
    """Grade ``answer`` and show PASS or FAIL with a hint. Never raises (unknown names
    excepted), so a notebook shipped with an unsolved stub runs top to bottom.

    Example:
        >>> check("roofline", {"h200": 1e-3, "b200": 1e-3})      # doctest: +ELLIPSIS
        FAIL roofline: h200: you predicted 1000 µs, the model says 139 µs...
    """
    _show(grade(name, answer))


def solution(name: str) -> Any:
    """The reference answer of exercise ``name`` (from :mod:`tilelab.lab.solutions`).

    Example:
        >>> sorted(solution("roofline"))
        ['b200', 'h200']
    """
    from tilelab.lab import solutions

    _lookup(name)
    return getattr(solutions, name)()


def as_kernel(answer: Any, unsafe: bool = False) -> Any:
    """A kernel from an answer: a ``tl.Kernel`` as is, a plain function decorated here
    (so a refusal is raised inside :func:`grade`, which reports it).

    Example:
        >>> as_kernel(solution("saxpy_edge")).name
        'saxpy'
    """
    import tilelab as tl

    if isinstance(answer, tl.Kernel):
        return answer
    if not callable(answer):
        raise TypeError(f"expected a kernel function, got {type(answer).__name__}")
    return tl.kernel(unsafe=True)(answer) if unsafe else tl.kernel(answer)


def _show(result: Result) -> None:
    from tilelab.lab.expect import show_box

    color = "#2ca02c" if result.passed else "#d62728"
    verdict = "PASS" if result.passed else "FAIL"
    hint = ("" if result.passed or not result.hint else
            f'<div style="opacity:.85">hint: {html.escape(result.hint)}</div>')
    body = (f'<div class="tilelab-check" style="border-left:4px solid {color};'
            f'padding:4px 10px;margin:2px 0;font-family:monospace;white-space:pre-wrap">'
            f'<b style="color:{color}">{verdict}</b> {html.escape(result.name)}: '
            f'{html.escape(result.message)}{hint}</div>')
    show_box(str(result), body)
