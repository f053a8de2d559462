"""Launch events: a way for tools (the lab, profilers) to see every launch.

Subscribers get a :class:`LaunchEvent` for each launch made while they are subscribed
(the lab records the launches of a ``%%tile`` cell this way). With no subscriber the
launch path pays nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["LaunchEvent", "subscribe", "LISTENERS", "emit"]

#: the current subscribers (launch paths test this list's truth before doing any work)
LISTENERS: list[Callable[["LaunchEvent"], None]] = []


@dataclass
class LaunchEvent:
    """One launch: which kernel, with what (normalized) arguments, where and how.

    ``args`` are the launch's arguments as the runtime saw them (tensors, partitions,
    scalars); ``spec`` the compiler's specialization (lowering plan, layouts, grid);
    ``device`` is ``"gpu"`` or ``"cpu"``; ``trace`` the interpreter trace of a CPU
    launch that traced, else None; ``error`` the error a launch that ran raised
    afterwards (the races the CPU interpreter found), else None.
    """

    kernel: Any
    args: tuple
    spec: Any
    grid: tuple
    device: str
    sync: bool
    trace: Any = None
    error: BaseException | None = None


def subscribe(fn: Callable[[LaunchEvent], None]) -> Callable[[], None]:
    """Call ``fn(event)`` for every launch until the returned function is called.

    Example:
        >>> seen = []
        >>> stop = subscribe(seen.append)
        >>> stop()
    """
    LISTENERS.append(fn)

    def unsubscribe() -> None:
        try:
            LISTENERS.remove(fn)
        except ValueError:
            pass
    return unsubscribe


def emit(event: LaunchEvent) -> None:
    for fn in list(LISTENERS):
        fn(event)
