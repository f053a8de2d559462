"""Notebook 06 (async launches and graphs): its exercises' graders and reference answers.

Example:
    >>> from tilelab.lab.course.exercises import grade, solution
    >>> grade("graph_deps", solution("graph_deps")).passed
    True
"""
from __future__ import annotations

from typing import Any

import tilelab as tl
from tilelab.kernels.examples import vector_add
from tilelab.lab.course.grading import Lesson, Result, miss, passed, reference, register

NOTEBOOK = "06_async_and_graphs"


@tl.kernel
def _scale(w: tl.Out, z: tl.In):
    w.store(tl.load_like(z, w) * 2.0)


GRAPHS = "4. Graphs: record once, replay many times"
BORROWS = "2. Borrows: a pending launch owns its outputs"
EXERCISE = "Exercise: predict a graph"
#: the headings of notebook 06 the lessons point to (tests check they exist)
SECTIONS = (GRAPHS, BORROWS, EXERCISE)

_LESSONS = {
    "format": Lesson(
        "the answer's form: {'deps': five lists of launch numbers, 'host_raises': "
        "{tensor name: True or False}}", "06", EXERCISE),
    "missing": Lesson(
        "a launch waits for every earlier launch that writes memory it touches, or "
        "touches memory it writes", "06", GRAPHS,
        ("writing a tensor an earlier launch reads is a conflict too (the later write "
         "must wait for the read)",
         "follow each tensor through the five launches: who writes it, who reads it, "
         "in which order")),
    "extra": Lesson(
        "g.dependencies() lists only direct dependencies: one already implied through "
        "another launch is left out, and launches on disjoint memory are independent",
        "06", GRAPHS,
        ("if launch k waits for j and j waits for i, then k need not list i",)),
    "borrows": Lesson(
        "a pending replay holds the borrows of every launch in the graph: exclusive on "
        "what any of them writes, shared on what they only read", "06", BORROWS,
        ("the host may read what is only shared-borrowed, and nothing that is "
         "exclusively borrowed",
         "a tensor one launch reads and a later one writes is written by the graph")),
}


@register("graph_deps", NOTEBOOK,
          "predict g.dependencies() of the five recorded launches and which tensors the "
          "host may not read while the replay is pending: {'deps': [...], "
          "'host_raises': {...}}")
def _graph_deps(answer: Any) -> Result:
    name = "graph_deps"
    if not isinstance(answer, dict) or not isinstance(answer.get("deps"), (list, tuple)) \
            or len(answer["deps"]) != 5:
        return miss(name, "the answer is not a dict whose 'deps' lists five launches",
                    _LESSONS["format"])
    add, scale = vector_add, _scale
    x, y, a, b, c = (tl.ones(1024, dtype="float32", device="cpu") for _ in range(5))
    with tl.graph() as g:
        add(a.partition(256), x, y)     # 0: a = x + y
        scale(b.partition(256), a)      # 1: b = 2a
        add(c.partition(256), x, x)     # 2: c = 2x
        scale(a.partition(256), c)      # 3: a = 2c
        add(y.partition(256), b, c)     # 4: y = b + c
    deps = [set(d) for d in g.dependencies()]
    for i, said in enumerate(answer["deps"]):
        said = {int(j) for j in said}
        if said - deps[i]:
            return miss(name, f"launch {i}: you listed {sorted(said)}, and it does not "
                        "wait for all of those", _LESSONS["extra"])
        if deps[i] - said:
            return miss(name, f"launch {i}: you listed {sorted(said)}, and it waits for "
                        "more", _LESSONS["missing"])
    replay = g.replay()
    raises = {}
    for key, t in (("x", x), ("y", y), ("a", a), ("b", b), ("c", c)):
        try:
            t.numpy()
            raises[key] = False
        except tl.BorrowError:
            raises[key] = True
    replay.wait()
    said = answer.get("host_raises", {})
    for key in raises:
        if key not in said:
            return miss(name, f"no prediction for {key!r} in 'host_raises'",
                        _LESSONS["format"])
        if bool(said[key]) != raises[key]:
            return miss(name, f"reading {key} while the replay is pending: your prediction "
                        "is wrong", _LESSONS["borrows"])
    return passed(name, "the dependencies and the borrows are right")


@reference("graph_deps")
def graph_deps() -> dict[str, Any]:
    """The direct dependencies of the exercise's five launches (a dependency implied
    through another launch is left out), and which tensors the host may not read while
    the replay is pending (those the graph writes).

    Example:
        >>> graph_deps()["deps"]
        [[], [0], [], [1, 2], [1, 2]]
    """
    return {"deps": [[], [0], [], [1, 2], [1, 2]],
            "host_raises": {"x": False, "y": True, "a": True, "b": True, "c": True}}
