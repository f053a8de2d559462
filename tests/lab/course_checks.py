"""What the course's exercise tests share (tests/lab/test_course_*.py, test_exercises.py).

A test module of a notebook's exercises lists its typical wrong answers in ``WRONG``:
exercise name -> list of :class:`Wrong`. Each wrong answer must FAIL with a hint that
names its concept and points to the notebook section that explains it; ``one_shape``
marks answers right on the notebook's configuration only (a hard-coded size, tile or
scalar), which must fail on a hidden case. ``test_exercises.py`` collects every module's
``WRONG`` and checks that no FAIL shows an expected value.
"""
from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from dataclasses import dataclass
from typing import Any

from tilelab.lab.course.exercises import grade
from tilelab.lab.course.grading import Result


@dataclass
class Wrong:
    """A typical wrong answer: ``concept`` (words the hint names), ``section`` (the
    notebook heading it points to, or None for a refusal that quotes the checker), and
    whether it is right on one configuration only (``one_shape``)."""

    why: str
    answer: Any
    concept: str
    section: str | None
    one_shape: bool = False


def fails(name: str, wrong: Wrong, attempt: int = 1) -> Result:
    """Grade a wrong answer; assert it fails with its concept and pointer."""
    r = grade(name, wrong.answer, attempt=attempt)
    assert not r.passed, f"{name}: {wrong.why} passed: {r}"
    assert wrong.concept in r.hint, f"{name}: {wrong.why}: {wrong.concept!r} not in\n{r}"
    if wrong.section is not None:
        assert f'"{wrong.section}"' in r.hint, f"{name}: {wrong.why}: no pointer in\n{r}"
    if wrong.one_shape:
        assert r.message.startswith("on ") and "the notebook's" not in r.message.split(
            " — ")[0], f"{name}: {wrong.why} should fail on a hidden case: {r}"
    return r


_NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")


def _shows(token: str, value: float) -> bool:
    """Whether the number ``token`` (as a message writes it) is ``value`` written to the
    token's own precision; a token of fewer than 3 significant digits only when exact."""
    try:
        shown = Decimal(token.replace(",", ""))
    except InvalidOperation:
        return False
    if float(shown) == value:
        return True
    digits = len(shown.as_tuple().digits)
    if digits < 3:
        return False
    return Decimal(repr(value)).quantize(Decimal(1).scaleb(shown.as_tuple().exponent)) == shown


def leaks(result: Result) -> list[str]:
    """The expected numbers (``result.secrets``) that the FAIL's text shows: a number of
    the text that is the secret written to that number's precision. Small integers
    (|v| < 100) are not checked: they cannot be told from the indices and sizes a message
    names."""
    tokens = _NUMBER.findall(f"{result.message}\n{result.hint}")
    found = []
    for v in result.secrets:
        if not math.isfinite(v) or v == 0 or (float(v).is_integer() and abs(v) < 100):
            continue
        if any(_shows(t, float(v)) for t in tokens):
            found.append(f"{v:g}")
    return found


def ladder(name: str, answer: Any) -> list[str]:
    """The hints of the 1st, 2nd and 3rd failed try of one answer."""
    return [grade(name, answer, attempt=k).hint for k in (1, 2, 3)]
