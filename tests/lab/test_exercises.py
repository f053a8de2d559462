"""The course's checked exercises as a whole: every reference answer PASSes, check() never
raises and climbs a hint ladder, every exercise is checked in its notebook, every lesson
points to a section its notebook has, and no FAIL of any typical wrong answer (those of
tests/lab/test_course_*.py) shows an expected value. Each notebook's exercises have their
own tests in tests/lab/test_course_nbNN.py."""
from __future__ import annotations

import importlib
import re
from pathlib import Path

import numpy as np
import pytest

import cuda.tile as ct
import tilelab as tl
from course_checks import leaks
from tilelab.lab.course.exercises import (SAFE_RULE, check, exercises, forget_tries, grade,
                                          solution, tries, writes_kernel)
from tilelab.lab.course.exercises.kernels import DEFAULT_LESSONS, KernelExercise
from tilelab.lab.course.expect import expect
from tilelab.lab.course.grading import EXERCISES, Lesson

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def test_every_reference_answer_passes():
    names = [e.name for e in exercises()]
    assert len(set(names)) == len(names)
    for name in names:
        assert EXERCISES[name].solution is not None, f"{name} has no reference answer"
        r = grade(name, solution(name))
        assert r.passed, str(r)


def test_notebooks_01_to_04_climb_from_a_tile_to_a_persistent_gemm():
    first = [e for e in exercises() if e.notebook[:2] in ("01", "02", "03", "04")]
    kernels = [e.name for e in first if writes_kernel(e)]
    assert len(first) >= 10 and len(kernels) >= 7, (len(first), kernels)
    order = [e.name for e in first]
    assert order.index("pair_sum") < order.index("broadcast_2d") < order.index("linear") \
        < order.index("grouped_linear") < order.index("persistent_linear") \
        < order.index("row_logsumexp")


def test_check_prints_and_never_raises(capsys):
    forget_tries()
    check("saxpy_edge", lambda z: None)          # a wrong signature: FAIL, printed
    out = capsys.readouterr().out
    assert out.startswith("FAIL saxpy_edge: the answer raised TypeError") and "hint:" in out
    check("roofline", solution("roofline"))
    assert capsys.readouterr().out.startswith("PASS roofline: ")
    with pytest.raises(KeyError, match="no exercise named 'nope'; the exercises are: fix_"):
        check("nope", None)


def test_an_unknown_name_lists_the_exercises_in_notebook_order_whatever_was_imported_first():
    exercises()                                       # every notebook module registered
    registered = dict(EXERCISES)
    by_notebook: dict[str, list[str]] = {}
    for name, ex in registered.items():               # each module registers in its order
        by_notebook.setdefault(ex.notebook, []).append(name)
    want = [n for nb in sorted(by_notebook) for n in by_notebook[nb]]
    try:   # as if notebook 08's module were imported first and notebook 01's last
        EXERCISES.clear()
        EXERCISES.update((n, registered[n]) for nb in sorted(by_notebook, reverse=True)
                         for n in by_notebook[nb])
        assert next(iter(EXERCISES)) == "causal_mask"
        with pytest.raises(KeyError) as info:
            check("nope", None)
    finally:
        EXERCISES.clear()
        EXERCISES.update(registered)
    message = info.value.args[0]
    assert message.startswith("no exercise named 'nope'; the exercises are: "), message
    listed = message.split("the exercises are: ", 1)[1].split(", ")
    assert listed == want
    assert listed[:3] == ["fix_refused", "pair_sum", "saxpy_edge"]
    assert listed[-3:] == ["causal_mask", "flash_attention", "combine_splits"]


def _stub(z: tl.Out, x: tl.In, y: tl.In, a: float):
    z.store(tl.load_like(x, z))


def test_each_failed_check_shows_one_more_hint_and_a_pass_starts_again(capsys):
    forget_tries("saxpy_edge")
    shown = []
    for _ in range(3):
        check("saxpy_edge", _stub)
        shown.append(capsys.readouterr().out)
    assert tries("saxpy_edge") == 3
    assert [s.count("\n") for s in shown] == sorted(s.count("\n") for s in shown)
    assert len(set(shown)) == 3 and "another failed try shows one more hint" in shown[0]
    assert "solution('saxpy_edge') shows an answer" in shown[2]
    check("saxpy_edge", solution("saxpy_edge"))
    assert capsys.readouterr().out.startswith("PASS") and tries("saxpy_edge") == 0


def _into_input(z: tl.Out, x: tl.In, y: tl.In, a: float):
    ct.store(x, index=z.tile_index, tile=tl.load_like(x, z))


def test_a_refusal_quotes_the_checker_and_points_to_the_rule():
    r = grade("saxpy_edge", _into_input)
    assert r.message.startswith("the safety checker refused the kernel: ")
    assert SAFE_RULE.where in r.hint


def test_every_exercise_is_checked_in_its_notebook():
    nbformat = pytest.importorskip("nbformat")
    for ex in EXERCISES.values():
        path = ROOT / "notebooks" / f"{ex.notebook}.ipynb"
        assert path.exists(), f"{ex.name}: no notebook {path.name}"
        code = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells
                         if c.cell_type == "code")
        assert f'check("{ex.name}"' in code, f"{path.name} does not check {ex.name}"


def _lessons() -> list[Lesson]:
    """Every lesson of the course: the shared ones and those the notebook modules hold
    (as values, in dicts, and in their kernel exercises)."""
    exercises()                                   # loads every notebook module
    found = [SAFE_RULE, *DEFAULT_LESSONS.values()]
    for name in sorted({e.notebook[:2] for e in EXERCISES.values()}):
        module = importlib.import_module(f"tilelab.lab.course.exercises.nb{name}")
        for value in vars(module).values():
            if isinstance(value, KernelExercise):
                value = dict(value.lessons)
            if isinstance(value, dict):
                found += [v for v in value.values() if isinstance(v, Lesson)]
            elif isinstance(value, Lesson):
                found.append(value)
    return found


def test_every_lesson_points_to_a_section_its_notebook_has():
    nbformat = pytest.importorskip("nbformat")
    headings: dict[str, set[str]] = {}
    for path in (ROOT / "notebooks").glob("*.ipynb"):
        cells = nbformat.read(path, as_version=4).cells
        headings[path.name[:2]] = {m.group(1).strip() for c in cells if c.cell_type == "markdown"
                                   for m in re.finditer(r"^#+\s+(.*)$", c.source, re.M)}
    lessons = _lessons()
    assert len(lessons) >= 40
    for lesson in lessons:
        assert lesson.section in headings[lesson.notebook], (
            f"{lesson.concept!r} points to {lesson.where}, a heading notebook "
            f"{lesson.notebook} does not have")


def _wrong_answers() -> list[tuple[str, object]]:
    """(exercise, wrong answer) of every tests/lab/test_course_*.py module's WRONG."""
    found = []
    for path in sorted(HERE.glob("test_course_*.py")):
        module = importlib.import_module(path.stem)
        for name, wrongs in getattr(module, "WRONG", {}).items():
            found += [(name, w) for w in wrongs]
    return found


def test_every_exercise_has_typical_wrong_answers_and_kernels_a_one_shape_one():
    """The course's bar: at least two typical wrong answers per exercise, tested in its
    notebook's tests/lab/test_course_nbNN.py (WRONG), and for a kernel exercise one
    that is right on the notebook's configuration only."""
    by_name: dict[str, list] = {}
    for name, w in _wrong_answers():
        by_name.setdefault(name, []).append(w)
    for ex in exercises():
        wrong = by_name.get(ex.name, [])
        assert len(wrong) >= 2, f"{ex.name}: {len(wrong)} typical wrong answers in WRONG"
        if writes_kernel(ex):
            assert any(w.one_shape for w in wrong), f"{ex.name}: no one-shape answer"


def test_no_fail_shows_an_expected_value():
    wrong = _wrong_answers()
    assert len({name for name, _ in wrong}) >= 14
    with_secrets = 0
    for name, w in wrong:
        for attempt in (1, 2, 3):
            with np.errstate(all="ignore"):
                r = grade(name, w.answer, attempt=attempt)
            assert not r.passed
            assert not leaks(r), f"{name}: {w.why}: shows {leaks(r)}:\n{r}"
            assert "expected" not in r.message, f"{name}: {w.why}: {r.message}"
        with_secrets += bool(r.secrets)
    assert with_secrets >= 10         # the check looked at real expected values


def test_leaks_finds_a_value_a_message_gives_away():
    from tilelab.lab.course.grading import miss

    lesson = Lesson("c", "01", "s")
    assert leaks(miss("x", "z[3] is 1.5, it should be 7.25", lesson, (7.25,))) == ["7.25"]
    assert leaks(miss("x", "you said 65,536 bytes; the loads moved 262,144", lesson,
                      (262144,))) == ["262144"]
    assert leaks(miss("x", "the loads moved more", lesson, (262144, 7.25))) == []


# ---- expect ------------------------------------------------------------------------------

def refused_store(z: tl.Out, x: tl.In):
    ct.store(x, index=z.tile_index, tile=tl.load_like(x, z) * 2.0 + 1.0)


def forgot_shift(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) * 2.0)


def test_expect_shows_the_error_and_fails_when_it_does_not_happen(capsys):
    err = expect(tl.SafetyError, tl.kernel, refused_store)
    shown = capsys.readouterr().out
    assert type(err).__name__ == "SafetyError"
    assert shown.startswith("SafetyError (expected): ") and "writes to 'x'" in shown
    with pytest.raises(AssertionError, match="expected SafetyError, but the code ran"):
        expect(tl.SafetyError, tl.kernel, forgot_shift)
    with pytest.raises(AssertionError, match="saying 'nope'"):
        expect(tl.SafetyError, tl.kernel, refused_store, match="nope")
    with expect(tl.LaunchError, when=False):
        pass                                  # optional: no error is fine
    with pytest.raises(ValueError):
        with expect(tl.SafetyError):
            raise ValueError("another error passes through")


COURSE_MODULES = ["grading", "exercises", "exercises.compare", "exercises.hidden",
                  "exercises.budget", "exercises.forms", "exercises.kernels",
                  "exercises.nb01", "exercises.nb02", "exercises.nb03", "exercises.nb04"]


@pytest.mark.parametrize("module", COURSE_MODULES)
def test_doctests(module):
    import doctest

    mod = importlib.import_module(f"tilelab.lab.course.{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
