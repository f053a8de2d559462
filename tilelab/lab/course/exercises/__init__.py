"""Checked exercises for the tour notebooks: run an answer, say PASS or FAIL with a hint.

Why: a course needs exercises a student can check alone. Each exercise has a name, the
notebook it belongs to, a one-line task and a grader. :func:`check` grades an answer and
*prints* the verdict (it never raises, so a notebook that ships with the unsolved stub
still runs top to bottom); :func:`grade` returns the :class:`Result` for tests and tools.
Kernel answers may be plain functions: the grader makes them kernels itself, so a kernel
the safety checker refuses is a FAIL that quotes the refusal, not a stopped notebook.
Graders run kernels on the CPU interpreter (``tl.interpret``) and read correctness, bytes
moved and races from its trace.

The package holds one module per notebook (``nb01`` ... ``nb08``: that notebook's graders
and reference answers, registered with
:func:`~tilelab.lab.course.grading.register` and
:func:`~tilelab.lab.course.grading.reference`); every ``nbNN`` module found here is
loaded, in notebook order, on the first use. ``solution(name)`` returns a reference
answer.

A FAIL names the concept that is wrong and the notebook section that explains it, never
the expected value nor the code to type; each further failed :func:`check` of the same
exercise shows one more hint of its ladder (:class:`~tilelab.lab.course.grading.Lesson`),
and a PASS starts the ladder again. The shared machinery: :mod:`.hidden` (the hidden
cases), :mod:`.forms` (every correct form of an answer: one kernel, or a host function
making several launches), :mod:`.budget` (bytes or FLOPs against the stated budget),
:mod:`.compare` (values by tile) and :mod:`.kernels` (the grader of kernel exercises).

Example:
    >>> from tilelab.lab.course.exercises import grade, solution
    >>> grade("saxpy_edge", solution("saxpy_edge")).passed
    True
    >>> import tilelab as tl
    >>> def saxpy(z: tl.Out, x: tl.In, y: tl.In, a: float):
    ...     z.store(tl.load_like(x, z))
    >>> r = grade("saxpy_edge", saxpy)
    >>> r.passed, "notebook 02" in r.hint
    (False, True)
"""
from __future__ import annotations

import html
from typing import Any

from tilelab.lab.course.grading import EXERCISES, Exercise, Lesson, Result, failed

__all__ = ["grade", "check", "solution", "exercises", "writes_kernel", "tries",
           "forget_tries"]

#: what a refusal by the safety checker teaches, beside the checker's own advice
SAFE_RULE = Lesson("the rule: a safe kernel writes only its own tile, through its "
                   "partition", "01", "3. What the checker rejects")

#: failed checks in a row, per exercise: the rung of the hint ladder the next FAIL shows
_TRIES: dict[str, int] = {}


def exercises(notebook: str | None = None) -> list[Exercise]:
    """The exercises (of one notebook, by the start of its name), in course order.

    Example:
        >>> [e.name for e in exercises("06")]
        ['graph_deps']
    """
    _load()
    every = sorted(EXERCISES.values(), key=lambda e: e.notebook)   # (stable: course order)
    return [e for e in every if notebook is None or e.notebook.startswith(notebook)]


def writes_kernel(ex: Exercise) -> bool:
    """Whether the student writes a kernel in exercise ``ex``: as registered, else when
    its reference answer is a kernel.

    Example:
        >>> writes_kernel(exercises("02")[0])
        True
    """
    from tilelab.lab.course.exercises.forms import is_kernel_answer

    if ex.kernel is not None:
        return ex.kernel
    return ex.solution is not None and is_kernel_answer(ex.solution())


def _load() -> None:
    """Import every notebook module of this package (``nbNN``), which registers its
    exercises, in notebook order."""
    import importlib
    import pkgutil

    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("nb") and info.name[2:].isdigit():
            importlib.import_module(f"{__name__}.{info.name}")


def _lookup(name: str) -> Exercise:
    """Exercise ``name``, or a KeyError listing every exercise in course order (by
    notebook, then as its module registers them), whichever module was imported first."""
    _load()
    try:
        return EXERCISES[name]
    except KeyError:
        known = ", ".join(e.name for e in exercises())
        raise KeyError(f"no exercise named {name!r}; the exercises are: {known}") from None


def grade(name: str, answer: Any, attempt: int = 1) -> Result:
    """Grade ``answer`` for exercise ``name`` and return the :class:`Result` (no output),
    its hint that of the ``attempt``-th failed try (a ladder: later tries say more).

    A refusal by the safety checker and any error the answer raises become a FAIL that
    says what happened.

    Example:
        >>> grade("saxpy_edge", solution("saxpy_edge")).passed
        True
    """
    from tilelab.errors import SafetyError, TilelabError

    ex = _lookup(name)
    try:
        return ex.grader(answer).at(attempt)
    except SafetyError as e:
        advice = e.hint or "write through the partition"
        return failed(name, "the safety checker refused the kernel: "
                      + str(e.message).split("\n")[0],
                      f"{advice}\n  {SAFE_RULE.text(1)}")
    except TilelabError as e:
        return failed(name, f"{type(e).__name__}: {e.message}",
                      e.hint or "read the error: it names the line and what to change")
    except Exception as e:  # the student's code failed: report it, never stop the notebook
        return failed(name, f"the answer raised {type(e).__name__}: {e}",
                      f"the task: {ex.task}")


def check(name: str, answer: Any) -> None:
    """Grade ``answer`` and show PASS or FAIL with a hint. Never raises (unknown names
    excepted), so a notebook shipped with an unsolved stub runs top to bottom. Each
    failed check of the same exercise shows one more hint; a PASS resets the count.

    Example:
        >>> check("saxpy_edge", lambda z: None)                  # doctest: +ELLIPSIS
        FAIL saxpy_edge: the answer raised TypeError: ...
    """
    _lookup(name)
    result = grade(name, answer, attempt=_TRIES.get(name, 0) + 1)
    _TRIES[name] = 0 if result.passed else _TRIES.get(name, 0) + 1
    _show(result)


def tries(name: str) -> int:
    """How many checks of exercise ``name`` failed in a row (0 after a PASS).

    Example:
        >>> forget_tries(); tries("saxpy_edge")
        0
    """
    return _TRIES.get(name, 0)


def forget_tries(name: str | None = None) -> None:
    """Start the hint ladder again, for one exercise or (no name) for every one.

    Example:
        >>> forget_tries("saxpy_edge")
    """
    if name is None:
        _TRIES.clear()
    else:
        _TRIES.pop(name, None)


def solution(name: str) -> Any:
    """The reference answer of exercise ``name`` (from its notebook's module).

    Example:
        >>> sorted(solution("grouped_owner"))
        ['grouped', 'persistent']
    """
    ex = _lookup(name)
    if ex.solution is None:
        raise KeyError(f"exercise {name!r} has no reference answer")
    return ex.solution()


def _show(result: Result) -> None:
    from tilelab.lab.course.expect import show_box

    color = "#2ca02c" if result.passed else "#d62728"
    verdict = "PASS" if result.passed else "FAIL"
    hint = ("" if result.passed or not result.hint else
            f'<div style="opacity:.85">hint: {html.escape(result.hint)}</div>')
    body = (f'<div class="tilelab-check" style="border-left:4px solid {color};'
            f'padding:4px 10px;margin:2px 0;font-family:monospace;white-space:pre-wrap">'
            f'<b style="color:{color}">{verdict}</b> {html.escape(result.name)}: '
            f'{html.escape(result.message)}{hint}</div>')
    show_box(str(result), body)
