"""The import graph of tilelab/ gains no circle: a ratchet.

Every import of every module counts, the lazy ones inside functions too (read by
``tests/test_layers.py``'s :func:`imports_of`, the one reader of imports for both tests):
a lazy import keeps Python from failing at import time, but the two modules still
cannot be understood, tested or moved apart. An import that runs up between layers is
``test_layers.py``'s to refuse (its ``EXCEPTIONS`` list the two allowed); inside a layer
the modules declare no floors, so an import runs back up exactly when it closes a
circle, and this test refuses those.

``KNOWN`` lists the circles of today, each with the issue item that removes it. The test
fails on a circle not in ``KNOWN`` (name the modules that import each other, and cut one
import: move what both need below both, or let the lower one take a callback), and on a
``KNOWN`` circle that no longer exists or changed its members (then delete or correct
its entry: the list only shrinks).
"""
from __future__ import annotations

from support.graphs import circles
from test_layers import EXCEPTIONS, PACKAGE, _module_name, imports_of

#: the circles of the import graph today (modules without the ``tilelab.`` prefix), and
#: what removes each
KNOWN: dict[frozenset[str], str] = {
}


def import_graph() -> dict[str, set[str]]:
    """module -> the tilelab modules it imports (names without ``tilelab.``), less the
    upward imports ``test_layers.EXCEPTIONS`` allows (each lazy and stated there) and
    less what the package itself re-exports: ``tilelab/__init__.py`` is the public
    API's facade, which names every public module (for type checkers, and for its lazy
    ``__getattr__``) while the library's modules use that API (``import tilelab as
    tl``); its own imports are no dependency of theirs."""
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        src = _module_name(path).removeprefix("tilelab.")
        graph.setdefault(src, set())
        if src == "tilelab":
            continue
        for _line, dst in imports_of(path):
            if (_module_name(path), dst) in EXCEPTIONS:
                continue
            dst = dst.removeprefix("tilelab.")
            if dst != src:
                graph[src].add(dst)
    return graph


def _ties(graph: dict[str, set[str]], members: frozenset[str]) -> str:
    return "; ".join(f"{a} -> {b}" for a in sorted(members)
                     for b in sorted(graph[a] & members))


def test_circles_are_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert circles(graph) == [frozenset({"a", "b", "c"})]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_new_circle():
    graph = import_graph()
    assert len(graph) > 200 and "compiler.safety.kinds" in graph   # (the walk works)
    new = [c for c in circles(graph) if c not in KNOWN]
    assert not new, "new circles in tilelab's imports (cut one import of each):\n" + \
        "\n".join(f"{sorted(c)}: {_ties(graph, c)}" for c in new)


def test_known_circles_still_exist():
    """A circle that was removed (or changed) leaves KNOWN, so the list stays true."""
    now = set(circles(import_graph()))
    gone = [f"{sorted(c)} ({why})" for c, why in KNOWN.items() if c not in now]
    assert not gone, ("these circles of KNOWN in tests/test_import_graph.py no longer "
                      "exist as listed: delete or correct their entries:\n" + "\n".join(gone))
