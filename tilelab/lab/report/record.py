"""Record the kernel launches a cell makes, grouped the way the lab shows them.

Why: a cell may launch one kernel a thousand times in a loop, or one kernel with two tile
shapes. The lab compiles and shows each *specialization* once (same kernel, same compiled
code) and draws each distinct *launch* once (same specialization, same shapes, grid and
device), counting repeats. Events come from :func:`tilelab.runtime.events.subscribe`, so
recording costs the launch path nothing outside a recorded cell.

A launch the CPU interpreter's race detector stopped ran all the same: the launcher
emits its event, with the error, before raising it, so the launch and its races (the
Race tab) are recorded whether the error leaves the cell, is caught by ``expect(...)``
or by the user's own ``try``/``except``. Whoever holds such an error can ask for the
launch it stopped with :func:`record_failure`.

Example:
    >>> with LaunchRecorder() as rec:
    ...     pass                     # run launches here
    >>> rec.events, rec.groups()
    ([], [])
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from tilelab.runtime.events import LaunchEvent, subscribe

__all__ = ["LaunchGroup", "LaunchRecorder", "describe_launch", "failed_launch", "shape_key",
           "record_failure"]

#: the recorders active now (innermost last): :func:`record_failure` files with them
_ACTIVE: list["LaunchRecorder"] = []


def _arg_key(value: Any) -> Any:
    """What makes two launches 'the same' for one argument: specs, not memory."""
    from tilelab.compiler.signature import ArraySpec, PartitionSpec, describe_arg

    try:
        s = describe_arg(value)
    except TypeError:
        return (type(value).__name__, repr(value))
    if isinstance(s, PartitionSpec):
        a = s.array
        return ("P", a.shape, a.dtype, a.strides, s.tile_shape, repr(s.schedule))
    if isinstance(s, ArraySpec):  # alignment left out: it varies with the allocation
        return ("A", s.shape, s.dtype, s.strides)
    return ("S", type(value).__name__, repr(value))


def shape_key(args: tuple) -> tuple:
    """A hashable key of launch arguments: shapes, dtypes, strides, tiles and scalars.

    Example:
        >>> import numpy as np
        >>> shape_key((np.zeros(4, np.float32), 3))
        (('A', (4,), 'float32', (1,)), ('S', 'int', '3'))
    """
    return tuple(_arg_key(a) for a in args)


def describe_launch(args: tuple, param_names: tuple[str, ...] = ()) -> str:
    """A short human description of launch arguments, e.g. ``z: f32[4096]/256, n=3``.

    Example:
        >>> import numpy as np
        >>> describe_launch((np.zeros((2, 8), np.float32), 3), ("x", "n"))
        'x: float32[2x8], n=3'
    """
    parts = []
    for i, a in enumerate(args):
        k = _arg_key(a)
        name = param_names[i] if i < len(param_names) else f"arg{i}"
        if k[0] == "P":
            shape = "x".join(map(str, k[1]))
            tile = "x".join(map(str, k[4]))
            sched = "" if k[5] == "RowMajor()" else f" {k[5]}"
            parts.append(f"{name}: {k[2]}[{shape}] / tiles {tile}{sched}")
        elif k[0] == "A":
            parts.append(f"{name}: {k[2]}[{'x'.join(map(str, k[1]))}]")
        else:
            parts.append(f"{name}={k[2]}")
    return ", ".join(parts)


@dataclass
class LaunchGroup:
    """Identical launches of one kernel: same compiled code, shapes, grid and device.

    ``event`` is the first launch (its arguments serve as examples for compiling,
    counting and timing); ``count`` how many launches the group holds.

    Example:
        >>> g = LaunchGroup(event=None, count=3, compile_key=("k", "spec"))
        >>> g.count
        3
    """

    event: LaunchEvent
    count: int = 1
    compile_key: tuple = ()
    sync_launches: int = 0

    @property
    def kernel(self) -> Any:
        """The launched ``tl.Kernel``.

        Example:
            >>> group.kernel.name                                 # doctest: +SKIP
            'add'
        """
        return self.event.kernel

    @property
    def name(self) -> str:
        """The kernel's name.

        Example:
            >>> group.name                                        # doctest: +SKIP
            'add'
        """
        return self.event.kernel.name

    @property
    def param_names(self) -> tuple[str, ...]:
        """The kernel's parameter names, in order.

        Example:
            >>> group.param_names                                 # doctest: +SKIP
            ('z', 'x', 'y')
        """
        return tuple(p.name for p in self.kernel.definition.analysis.params)

    def describe(self) -> str:
        """``name(args) grid (x, y, z) on device``: one line for tables and headers.

        Example:
            >>> group.describe()                                  # doctest: +SKIP
            'add(z: float32[4096] / tiles 256, x: float32[4096]) grid (16, 1, 1) on cpu'
        """
        return (f"{self.name}({describe_launch(self.event.args, self.param_names)}) "
                f"grid {self.event.grid} on {self.event.device}")


@dataclass
class LaunchRecorder:
    """Collects :class:`~tilelab.runtime.events.LaunchEvent` s while active (a context
    manager); :meth:`groups` folds them into :class:`LaunchGroup` s in first-seen order.

    ``limit`` bounds the events kept per group key (a hot loop keeps its count, not its
    events).

    Example:
        >>> rec = LaunchRecorder()
        >>> with rec:
        ...     pass
        >>> rec.launch_count
        0
    """

    events: list[LaunchEvent] = field(default_factory=list)
    #: launches a race stopped, with their errors, in the order they failed
    failures: list[tuple[LaunchEvent, BaseException]] = field(default_factory=list)
    _groups: dict[tuple, LaunchGroup] = field(default_factory=dict)
    _stop: Callable[[], None] | None = None

    @property
    def launch_count(self) -> int:
        """Every launch seen, repeats included.

        Example:
            >>> LaunchRecorder().launch_count
            0
        """
        return sum(g.count for g in self._groups.values())

    def add(self, event: LaunchEvent) -> None:
        """Record one launch (what subscribing does for each launch); one that raised
        after it ran (``event.error``) is also a failure (:meth:`add_failure`).

        Example:
            >>> rec = LaunchRecorder(); rec.add(event)              # doctest: +SKIP
        """
        if event.error is not None:
            self.add_failure(event, event.error)
        else:
            self._on_launch(event)

    def failure_of(self, error: BaseException) -> LaunchEvent | None:
        """The recorded launch that ``error`` stopped, or None.

        Example:
            >>> LaunchRecorder().failure_of(ValueError("x")) is None
            True
        """
        return next((ev for ev, e in self.failures if e is error), None)

    def _on_launch(self, event: LaunchEvent) -> None:
        kernel = event.kernel
        spec_key = event.spec.key() if event.spec is not None else ""
        ckey = (id(kernel), spec_key)
        gkey = ckey + (shape_key(event.args), tuple(event.grid), event.device)
        group = self._groups.get(gkey)
        if group is None:
            self._groups[gkey] = LaunchGroup(event, 1, ckey, int(event.sync))
            self.events.append(event)
        else:
            group.count += 1
            group.sync_launches += int(event.sync)

    def add_failure(self, event: LaunchEvent, error: BaseException) -> bool:
        """Record a launch that ``error`` stopped (a race), once per error; returns
        whether it was new.

        Example:
            >>> rec = LaunchRecorder(); rec.add_failure(event, err)   # doctest: +SKIP
            True
        """
        if self.failure_of(error) is not None:
            return False
        self._on_launch(event)
        self.failures.append((event, error))
        return True

    def __enter__(self) -> "LaunchRecorder":
        self._stop = subscribe(self.add)
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._stop is not None:
            self._stop()
            self._stop = None
        for i in range(len(_ACTIVE) - 1, -1, -1):   # by identity (dataclasses compare fields)
            if _ACTIVE[i] is self:
                del _ACTIVE[i]
                break

    def groups(self) -> list[LaunchGroup]:
        """The launch groups, in the order their first launch happened.

        Example:
            >>> [g.count for g in recorder.groups()]               # doctest: +SKIP
            [3, 1]
        """
        return list(self._groups.values())

    def compile_groups(self) -> list[list[LaunchGroup]]:
        """Launch groups bucketed by specialization (one compile each), first-seen order.

        Example:
            >>> LaunchRecorder().compile_groups()
            []
        """
        out: dict[tuple, list[LaunchGroup]] = {}
        for g in self._groups.values():
            out.setdefault(g.compile_key, []).append(g)
        return list(out.values())


def failed_launch(exc: BaseException) -> LaunchEvent | None:
    """The CPU launch a race stopped, as the :class:`LaunchEvent` it emitted (its ``trace`` holds the races), or None when ``exc`` is not such an error.

    The launcher emits that event only to the listeners of the moment (a ``%%tile``
    cell's recorder); who meets the error later (the shell's error display) has it
    rebuilt here from the launcher's frame in the traceback (the kernel, normalized
    arguments, specialization and grid it was running) and the trace it kept
    (``Kernel.last_trace``).

    Example:
        >>> failed_launch(ValueError("not a launch")) is None
        True
    """
    from tilelab.errors import LaunchError

    if not isinstance(exc, LaunchError):
        return None
    tb, found = exc.__traceback__, None
    while tb is not None:
        loc = tb.tb_frame.f_locals
        if {"norm", "plan", "g", "device"} <= loc.keys() and hasattr(loc.get("self"), "kernel"):
            found = loc
        tb = tb.tb_next
    if found is None:
        return None
    launcher = found["self"]
    trace = getattr(launcher, "last_trace", None)
    if trace is None or not getattr(trace, "races", None) or found["device"] != "cpu":
        return None
    return LaunchEvent(launcher.kernel, tuple(found["norm"]), found["plan"].spec,
                       tuple(found["g"]), "cpu", bool(found.get("sync", True)), trace)


def record_failure(error: BaseException) -> LaunchEvent | None:
    """The launch that ``error`` stopped, as an active :class:`LaunchRecorder` (a
    ``%%tile`` cell running now) recorded it; None when ``error`` is no such launch's
    or no recorder is active.

    The launcher emits a stopped launch with its error, so it is recorded already;
    whoever holds the error asks for its event here: ``expect(...)`` (its message points
    to the Race tab) and the cell's runner (the error leaving the cell is a race to
    show before raising it).

    Example:
        >>> record_failure(ValueError("not a launch")) is None
        True
    """
    for rec in reversed(_ACTIVE):
        event = rec.failure_of(error)
        if event is not None:
            return event
    return None
