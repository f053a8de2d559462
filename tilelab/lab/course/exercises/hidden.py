"""Hidden cases: the configurations a grader runs an answer on besides the notebook's.

Why: an answer that is right for one shape may be right by accident — a hard-coded size,
tile or scalar, a mask that compares tile starts (wrong when BM ≠ BN), an edge nobody
tried. Each exercise lists its cases, from the plain one (the notebook's) to the tricky
ones (partial edge tiles, non-square tiles, sizes that are not multiples of the tile,
other scalars); each case names what it probes (``label``) and the lesson a miss there
teaches (``lesson``: a key of the exercise's lessons). :func:`first_miss` runs them in
order and returns the first FAIL, which names the case.

Example:
    >>> cases = [Case("the notebook's size", (1000,), (256,)),
    ...          Case("another tile size", (1000,), (128,), lesson="tile")]
    >>> first_miss(cases, lambda c: None) is None
    True
    >>> cases[1].describe()
    'another tile size: shape (1000,), tiles of (128,)'
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

__all__ = ["Case", "first_miss", "grade_cases"]


@dataclass(frozen=True)
class Case:
    """One configuration an answer is graded on: what it probes (``label``), the output's
    ``shape`` and the ``tile`` a kernel answer is launched with, other ``params``
    (scalars, schedules, dtypes) and the ``lesson`` key a miss on it teaches (the first
    case of a list teaches the exercise's ``"formula"``).

    Example:
        >>> Case("other scalars", (64,), (16,), {"a": -0.5}, "scalar").describe()
        'other scalars: shape (64,), tiles of (16,), a = -0.5'
    """

    label: str
    shape: tuple[int, ...]
    tile: tuple[int, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict)
    lesson: str = "formula"
    seed: int = 0

    def describe(self) -> str:
        """The case in words, as a FAIL names it (sizes and scalars, never results)."""
        parts = [f"{self.label}: shape {self.shape}"]
        if self.tile:
            parts.append(f"tiles of {self.tile}")
        parts += [f"{k} = {_show(v)}" for k, v in self.params.items()]
        return ", ".join(parts)


def _show(v: Any) -> str:
    return v if isinstance(v, str) else repr(v)


def first_miss(cases: Sequence[Case], grade_case: Callable[[Case], Any]) -> Any:
    """Grade every case in order with ``grade_case(case)`` (a FAIL ``Result``, or None
    when the case is right); return the first FAIL, its message prefixed with the case,
    or None when every case is right.

    Example:
        >>> from tilelab.lab.course.grading import Lesson, miss
        >>> lesson = Lesson("tile sizes", "02", "4. Tile size vs grid")
        >>> r = first_miss([Case("a small tile", (8,), (2,))],
        ...                lambda c: miss("x", "z is wrong", lesson))
        >>> r.message
        'on a small tile: shape (8,), tiles of (2,) — z is wrong'
    """
    for case in cases:
        result = grade_case(case)
        if result is not None and not result.passed:
            return replace(result, message=f"on {case.describe()} — {result.message}")
    return None


def grade_cases(name: str, cases: Sequence[Case], grade_case: Callable[[Case], Any],
                success: str) -> Any:
    """The first FAIL of :func:`first_miss`, or a PASS saying ``success``.

    Example:
        >>> grade_cases("x", [Case("one", (1,))], lambda c: None, "right").message
        'right'
    """
    from tilelab.lab.course.grading import passed

    found = first_miss(cases, grade_case)
    return found if found is not None else passed(name, success)
