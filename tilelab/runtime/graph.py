"""CUDA graphs: record launches once, replay them with one call.

``with tl.graph() as g:`` records the launches (and tensor copies) made inside the
block instead of running them; on exit the graph is built (a CUDA graph on the GPU,
a replay list on the CPU backend). ``g.replay()`` runs it and returns a ``tl.Future``
that holds the borrows of every launch in the graph. The graph keeps its tensors
alive; allocating inside the block is an error (the allocation would happen once, not
at every replay).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tilelab.errors import LaunchError
from tilelab.runtime import capture
from tilelab.runtime.ledger import LEDGER, LaunchRecord, call_site

__all__ = ["Graph", "graph"]


@dataclass
class _Entry:
    launcher: Any
    plan: Any
    args: list
    grid: tuple
    claims: list


@dataclass
class _Copy:
    dst: Any
    src: Any
    claims: list


class Graph:
    """A recorded sequence of launches (see the module docstring).

    Example:
        >>> with tl.graph() as g:                       # doctest: +SKIP
        ...     add(z.partition(256), x, y)
        ...     scale(w.partition(256), z)
        >>> g.replay().wait()                           # doctest: +SKIP
    """

    def __init__(self):
        self.entries: list[Any] = []
        self.device: str | None = None
        self._cuda_graph = None
        self._site = call_site()
        self._closed = False
        self._merged: list | None = None

    # ---- recording -----------------------------------------------------------
    def __enter__(self) -> "Graph":
        if capture.current_graph() is not None:
            raise LaunchError("tl.graph() blocks cannot be nested")
        if self._closed:
            raise LaunchError("this graph was already recorded; make a new tl.graph()")
        capture.set_current_graph(self)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        capture.set_current_graph(None)
        self._closed = True
        if exc_type is None:
            self._build()

    def _set_device(self, device: str, what: str) -> None:
        if self.device is None:
            self.device = device
        elif self.device != device:
            raise LaunchError(f"a graph records work for one device; {what} runs on "
                              f"{device} but the graph already holds {self.device} work")

    def record(self, launcher: Any, plan: Any, args: list, grid: tuple, claims: list) -> None:
        """Called by a launch made inside the block."""
        self._set_device(plan.device, f"{launcher.definition.name}()")
        self.entries.append(_Entry(launcher, plan, list(args), grid, claims))

    def record_copy(self, dst: Any, src: Any) -> None:
        """Called by ``Tensor.copy_`` inside the block."""
        device = "cpu" if dst.device == "cpu" and src.device == "cpu" else "gpu"
        self._set_device(device, "a tensor copy")
        lo, hi = dst.byte_range()
        slo, shi = src.byte_range()
        claims = [(dst.storage.space, lo, hi, True, "copy destination"),
                  (src.storage.space, slo, shi, False, "copy source")]
        self.entries.append(_Copy(dst, src, claims))

    # ---- building and replaying -------------------------------------------------
    def _build(self) -> None:
        if self.device != "gpu":
            return
        from cuda.core import LaunchConfig, launch as cu_launch

        from tilelab.runtime.device import gpu as get_gpu

        builder = get_gpu().stream.create_graph_builder()
        builder.begin_building()
        try:
            for e in self.entries:
                if isinstance(e, _Entry):
                    words = e.launcher.words(e.plan, e.args)
                    cu_launch(builder, LaunchConfig(grid=e.grid, block=(1, 1, 1)),
                              e.plan.cu_kernel, *words)
                else:
                    e.dst._copy_from_on(e.src, builder)
        finally:
            builder.end_building()
        self._cuda_graph = builder.complete()

    def _claims(self) -> list:
        """The borrows of one replay: every claim of every entry, merged per range."""
        if self._merged is None:
            merged: dict[tuple, list] = {}
            for e in self.entries:
                for space, lo, hi, excl, param in e.claims:
                    m = merged.get((space, lo, hi))
                    if m is None:
                        merged[(space, lo, hi)] = [space, lo, hi, excl, param]
                    elif excl and not m[3]:
                        m[3], m[4] = True, param
            self._merged = [tuple(m) for m in merged.values()]
        return self._merged

    def replay(self, stream: Any = None):
        """Run the recorded work once more; returns a ``tl.Future`` holding its borrows."""
        from tilelab.runtime.future import Future

        if not self._closed:
            raise LaunchError("replay() inside its own 'with tl.graph()' block",
                              hint="replay after the block has ended")
        claims = self._claims()
        if self.device == "gpu":
            from tilelab.runtime.streams import resolve_stream, stream_key

            s = resolve_stream(stream)
            key = stream_key(s)
            LEDGER.check_launch("graph replay", claims, key)
            self._cuda_graph.launch(s)
            rec = LaunchRecord(f"graph of {len(self.entries)} launches", call_site(), key,
                               None, self, s)   # the graph holds its tensors
            LEDGER.add(rec, claims)
            return Future(rec)
        LEDGER.check_launch("graph replay", claims, "cpu")
        for e in self.entries:
            if isinstance(e, _Entry):
                e.launcher._launch_cpu(e.plan, e.args, e.grid, [], True, None)
            else:
                e.dst._copy_from_on(e.src, None)
        rec = LaunchRecord(f"graph of {len(self.entries)} launches", call_site(), "cpu",
                           None, self)
        LEDGER.add(rec, claims)
        return Future(rec)

    def __repr__(self) -> str:
        return f"<tl.graph: {len(self.entries)} recorded ({self.device or 'empty'})>"


def graph() -> Graph:
    """Start recording a graph: ``with tl.graph() as g: ...`` then ``g.replay()``.

    Example:
        >>> import tilelab as tl
        >>> g = tl.graph()
    """
    return Graph()
