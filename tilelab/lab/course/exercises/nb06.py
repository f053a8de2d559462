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
from tilelab.lab.course.grading import Result, failed, passed, reference, register

NOTEBOOK = "06_async_and_graphs"


@tl.kernel
def _scale(w: tl.Out, z: tl.In):
    w.store(tl.load_like(z, w) * 2.0)


@register("graph_deps", NOTEBOOK,
          "predict g.dependencies() of the five recorded launches and which tensors the "
          "host may not read while the replay is pending")
def _graph_deps(answer: Any) -> Result:
    name = "graph_deps"
    add, scale = vector_add, _scale
    x, y, a, b, c = (tl.ones(1024, dtype="float32", device="cpu") for _ in range(5))
    with tl.graph() as g:
        add(a.partition(256), x, y)     # 0: a = x + y
        scale(b.partition(256), a)      # 1: b = 2a
        add(c.partition(256), x, x)     # 2: c = 2x
        scale(a.partition(256), c)      # 3: a = 2c
        add(y.partition(256), b, c)     # 4: y = b + c
    deps = [sorted(d) for d in g.dependencies()]
    got = [sorted(int(j) for j in d) for d in answer.get("deps", [])]
    if got != deps:
        i = next((i for i in range(5) if i >= len(got) or got[i] != deps[i]), 0)
        return failed(name, f"launch {i} waits for {deps[i]}, you said "
                      f"{got[i] if i < len(got) else 'nothing'}",
                      "a launch waits for an earlier one that writes what it touches or "
                      "touches what it writes (writing an input another launch reads "
                      "counts); a dependency already implied through another is left out")
    replay = g.replay()
    raises = {}
    for key, t in (("x", x), ("y", y), ("a", a), ("b", b), ("c", c)):
        try:
            t.numpy()
            raises[key] = False
        except tl.BorrowError:
            raises[key] = True
    replay.wait()
    said = {k: bool(v) for k, v in answer.get("host_raises", {}).items()}
    for key, want in raises.items():
        if said.get(key) != want:
            return failed(name, f"reading {key} while the replay is pending "
                          f"{'raises' if want else 'is allowed'}; you said "
                          f"{'raises' if said.get(key) else 'allowed' if key in said else 'nothing'}",
                          "the replay holds exclusive borrows on everything the graph "
                          "writes (y too) and shared borrows on what it only reads")
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
