"""Programmatic dependent launch inside CUDA graphs: turning a kernel→kernel edge into
a programmatic one.

Why: in a graph of short kernels (a decode step is ~250 of them) the gap between one
kernel's last block and the next kernel's first is a large share of the time. A
programmatic edge lets the next kernel be scheduled as soon as every block of the
previous one has passed its grid-dependency prologue; the next kernel's own prologue
then waits until the previous one has finished and its writes are visible, before it
reads or writes anything. So an edge may become programmatic only when its target
kernel starts with that wait (``LaunchPlan.pdl``); the launches are otherwise ordered
exactly as before. Converting an edge is all or nothing: if the driver refuses the
programmatic edge, the ordinary edge is put back, and if that fails too the graph is not
built (a lost edge would be a race).
"""
from __future__ import annotations

from typing import Any, Iterable

__all__ = ["make_programmatic"]


def _node(handle: Any) -> Any:
    from cuda.bindings import driver

    return handle if isinstance(handle, driver.CUgraphNode) else driver.CUgraphNode(
        int(handle))


def _graph(handle: Any) -> Any:
    from cuda.bindings import driver

    return handle if isinstance(handle, driver.CUgraph) else driver.CUgraph(int(handle))


def _check(result: Any, what: str) -> None:
    from cuda.bindings import driver

    err = result[0] if isinstance(result, tuple) else result
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{what}: {err!r}")


def make_programmatic(graph_handle: Any, edges: Iterable[tuple[Any, Any]]) -> str:
    """Replace each ordinary edge ``(before, after)`` (cuda.core graph node handles) of
    the graph by a programmatic one; returns how many were converted, or why none.

    Example (what ``tl.graph`` does for each edge into a kernel that waits)::

        make_programmatic(definition.handle, [(a.handle, b.handle)])
    """
    from cuda.bindings import driver

    pairs = list(edges)
    if not pairs:
        return "no edge into a kernel that waits for its predecessor"
    try:
        g = _graph(graph_handle)
        prog = driver.CUgraphEdgeData()
        prog.type = driver.CUgraphDependencyType.CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC
        prog.from_port = driver.CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC
        plain = driver.CUgraphEdgeData()
        nodes = [(_node(a), _node(b)) for a, b in pairs]
    except Exception as e:   # an older cuda-bindings: keep the ordinary edges
        return f"programmatic edges unavailable ({type(e).__name__}: {e})"
    done = 0
    for a, b in nodes:
        _check(driver.cuGraphRemoveDependencies(g, [a], [b], [plain], 1),
               "removing a graph edge")
        try:
            _check(driver.cuGraphAddDependencies(g, [a], [b], [prog], 1),
                   "adding a programmatic graph edge")
        except Exception as e:
            # put the ordinary edge back; if that fails the graph must not be used
            _check(driver.cuGraphAddDependencies(g, [a], [b], [plain], 1),
                   "restoring a graph edge")
            return f"{done} programmatic edges, then the driver refused one ({e})"
        done += 1
    return f"{done} programmatic edges"
