"""Notebook 06's exercise, predicting a graph: the reference passes; a chain, a missing
write-after-read dependency, wrong borrows and a malformed answer fail with the concept
and the section that explains it, without giving the expected dependencies away."""
from __future__ import annotations

import doctest

import pytest

from course_checks import Wrong, fails
from tilelab.lab.course.exercises import exercises, grade, solution

exercises()        # every notebook's exercises registered in course order first
# (importing a notebook module alone would register its exercises ahead of the others)
from tilelab.lab.course.exercises import nb06
from tilelab.lab.course.exercises.nb06 import BORROWS, EXERCISE, GRAPHS

RIGHT_DEPS = [[], [0], [], [1, 2], [1, 2]]
RIGHT_RAISES = {"x": False, "y": True, "a": True, "b": True, "c": True}

WRONG = {
    "graph_deps": [
        Wrong("the stub: a chain", {"deps": [[], [0], [1], [2], [3]],
                                    "host_raises": dict.fromkeys("xyabc", True)},
              "only direct dependencies", GRAPHS),
        Wrong("misses a write after a read", {"deps": [[], [0], [], [2], [1, 2]],
                                              "host_raises": RIGHT_RAISES},
              "a launch waits for every earlier launch", GRAPHS),
        Wrong("lists an implied dependency", {"deps": [[], [0], [], [0, 1, 2], [1, 2]],
                                              "host_raises": RIGHT_RAISES},
              "only direct dependencies", GRAPHS),
        Wrong("the host may read what the graph only reads",
              {"deps": RIGHT_DEPS, "host_raises": dict(RIGHT_RAISES, x=True)},
              "a pending replay holds the borrows", BORROWS),
        Wrong("y is written too", {"deps": RIGHT_DEPS,
                                   "host_raises": dict(RIGHT_RAISES, y=False)},
              "a pending replay holds the borrows", BORROWS),
        Wrong("not a dict", [[], [0]], "the answer's form", EXERCISE),
    ],
}


def test_the_reference_answer_passes():
    r = grade("graph_deps", solution("graph_deps"))
    assert r.passed, str(r)


@pytest.mark.parametrize("wrong", WRONG["graph_deps"], ids=lambda w: w.why)
def test_a_wrong_answer_fails_with_its_concept(wrong):
    fails("graph_deps", wrong)


def test_a_fail_shows_the_students_list_not_the_right_one():
    r = grade("graph_deps", WRONG["graph_deps"][1].answer)
    assert r.message == "launch 3: you listed [2], and it waits for more"
    assert "[1, 2]" not in r.message + r.hint


def test_doctests():
    result = doctest.testmod(nb06, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
