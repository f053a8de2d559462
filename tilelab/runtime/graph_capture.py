"""Thread-local state of CUDA-graph capture (``with tl.graph():``).

Kept in its own small module so that tensor constructors can refuse to allocate during
a capture without importing the launch machinery.
"""
from __future__ import annotations

import threading
from typing import Any

from tilelab.errors import LaunchError

__all__ = ["current_graph", "set_current_graph", "forbid_allocation"]

_state = threading.local()


def current_graph() -> Any:
    """The graph being recorded on this thread, or None."""
    return getattr(_state, "graph", None)


def set_current_graph(graph: Any) -> None:
    from tilelab.runtime.ledger import add_special_mode

    previous = getattr(_state, "graph", None)
    if previous is None and graph is not None:
        add_special_mode(1)
    elif previous is not None and graph is None:
        add_special_mode(-1)
    _state.graph = graph


def forbid_allocation(what: str) -> None:
    """Raise if called while a graph is being recorded (allocations cannot be replayed)."""
    if current_graph() is not None:
        raise LaunchError(f"{what} allocates memory inside 'with tl.graph()', which records "
                          "launches for replay; memory allocated during capture would be "
                          "allocated only once",
                          hint="allocate the tensors before the 'with tl.graph()' block and "
                               "reuse them in every replay")
