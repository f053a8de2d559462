"""CUDA graphs: record launches once, replay them with one call.

``with tl.graph() as g:`` records the launches (and tensor copies) made inside the
block instead of running them; on exit the graph is built (a CUDA graph on the GPU,
a replay list on the CPU backend). ``g.replay()`` runs it and returns a ``tl.Future``
that holds the borrows of every launch in the graph. The graph keeps its tensors
alive; allocating inside the block is an error (the allocation would happen once, not
at every replay). A CUDA graph holds the addresses it was built with, so a replay after
one of its tensors was freed (``t.free()``) is refused on both backends with the same
:class:`~tilelab.errors.LaunchError`, naming the tensor and who freed it. A copy between
overlapping views becomes the chunked steps of
:func:`~tilelab.runtime.memory.copy_plan` (one memcpy node is undefined for overlap),
through a staging buffer the graph owns when the views lie close.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tilelab.errors import LaunchError
from tilelab.runtime import graph_capture
from tilelab.runtime.ledger import LEDGER, LaunchRecord, call_site
from tilelab.runtime.memory import FREE_EPOCH, Storage, copy_plan

__all__ = ["Graph", "graph"]


def _conflict(a: list, b: list) -> bool:
    """Whether two claim lists touch overlapping memory with at least one write."""
    for sa, lo, hi, ea, _ in a:
        for sb, lo2, hi2, eb, _ in b:
            if sa == sb and (ea or eb) and lo < hi2 and lo2 < hi:
                return True
    return False


def may_start_early(before: Any, entry: Any, before_early: bool = False) -> bool:
    """Whether kernel entry ``entry`` may start while ``before``, the one kernel it
    depends on, still runs: it waits for ``before`` ahead of every memory access
    (``LaunchPlan.pdl``), or what it reads ahead of its wait
    (``LaunchPlan.early_reads``) overlaps nothing ``before`` writes and every kernel
    before ``before`` has finished when ``entry`` starts: ``before`` was not started
    early itself (``before_early``), or lets its dependents start only after its own
    wait (``LaunchPlan.triggers_after_wait``).

    Example:
        >>> from types import SimpleNamespace as NS
        >>> w = NS(plan=NS(pdl=False, early_reads=frozenset({"w"})),
        ...        claims=[(0, 0, 64, False, "w"), (0, 64, 96, True, "y")])
        >>> may_start_early(NS(claims=[(0, 96, 128, True, "x")]), w)
        True
        >>> may_start_early(NS(claims=[(0, 32, 40, True, "w2")]), w)
        False
    """
    if entry.plan.pdl:
        return True
    early = entry.plan.early_reads
    if not early or (before_early and not before.plan.triggers_after_wait):
        return False
    reads = [c for c in entry.claims if c[4] in early]
    writes = [c for c in before.claims if c[3]]
    return not _conflict(reads, writes)


@dataclass
class _Entry:
    launcher: Any
    plan: Any
    args: list
    grid: tuple
    claims: list
    #: (what, tensor) of each array argument, for the freed-memory check of a replay
    tensors: list
    site: str


@dataclass
class _Copy:
    dst: Any
    src: Any
    claims: list
    tensors: list
    site: str


def _array_arguments(launcher: Any, args: list) -> list[tuple[str, Any]]:
    """(description, tensor) of each tensor or partition argument of a recorded launch."""
    from tilelab.runtime.partition import Partition
    from tilelab.runtime.tensor import Tensor

    name = launcher.definition.name
    out = []
    for p, a in zip(launcher.definition.analysis.params, args):
        t = a.tensor if isinstance(a, Partition) else a if isinstance(a, Tensor) else None
        if t is not None:
            out.append((f"argument {p.name!r} of {name}()", t))
    return out


class Graph:
    """A recorded sequence of launches (see the module docstring).

    Example:
        >>> with tl.graph() as g:                       # doctest: +SKIP
        ...     add(z.partition(256), x, y)
        ...     scale(w.partition(256), z)
        >>> g.replay().wait()                           # doctest: +SKIP
    """

    def __init__(self, serial: bool = False):
        self.entries: list[Any] = []
        #: every entry waits for the one recorded before it (see :func:`graph`)
        self.serial = bool(serial)
        self.device: str | None = None
        #: programmatic dependent launch in the built CUDA graph (see _build), in words
        self.pdl = "not built"
        self._cuda_graph = None
        self._site = call_site()
        self._closed = False
        self._merged: list | None = None
        #: the staging buffer of the built graph's overlapping copies (None: none)
        self._stage: Storage | None = None
        #: Storage.free()'s epoch when no storage of the graph was found freed
        self._alive_epoch = -1

    # ---- recording -----------------------------------------------------------
    def __enter__(self) -> "Graph":
        if graph_capture.current_graph() is not None:
            raise LaunchError("tl.graph() blocks cannot be nested")
        if self._closed:
            raise LaunchError("this graph was already recorded; make a new tl.graph()")
        graph_capture.set_current_graph(self)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        graph_capture.set_current_graph(None)
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
        self.entries.append(_Entry(launcher, plan, list(args), grid, claims,
                                   _array_arguments(launcher, args), call_site()))

    def record_copy(self, dst: Any, src: Any) -> None:
        """Called by ``Tensor.copy_`` inside the block."""
        device = "cpu" if dst.device == "cpu" and src.device == "cpu" else "gpu"
        if device == "gpu" and not (dst.is_contiguous and src.is_contiguous
                                    and dst.shape == src.shape and dst.dtype == src.dtype):
            raise LaunchError("a copy recorded in a GPU graph must be between contiguous "
                              f"tensors of one shape and dtype (got {src.shape} "
                              f"{src.dtype} -> {dst.shape} {dst.dtype})",
                              hint="make the copy outside the graph, or copy contiguous "
                                   "tensors")
        self._set_device(device, "a tensor copy")
        lo, hi = dst.byte_range()
        slo, shi = src.byte_range()
        claims = [(dst.storage.space, lo, hi, True, "copy destination"),
                  (src.storage.space, slo, shi, False, "copy source")]
        tensors = [("the destination of a copy", dst), ("the source of a copy", src)]
        self.entries.append(_Copy(dst, src, claims, tensors, call_site()))

    # ---- building and replaying -------------------------------------------------
    def dependencies(self) -> list[list[int]]:
        """For each recorded entry, the earlier entries it must wait for.

        Two entries depend when one writes memory the other reads or writes (their
        claims overlap and one is exclusive); the rest may run concurrently. This is
        the same rule the borrow ledger applies to launches on different streams, so a
        graph is as parallel as its ownership allows. A ``serial`` graph is a chain
        instead: each entry waits for the one before it (more order, never less).
        """
        if self.serial:
            return [[j - 1] if j else [] for j in range(len(self.entries))]
        deps: list[list[int]] = []
        for j, e in enumerate(self.entries):
            mine = []
            for i in range(j):
                if _conflict(self.entries[i].claims, e.claims):
                    mine.append(i)
            # drop edges implied by others (i -> k -> j makes i -> j redundant)
            implied = set()
            for k in mine:
                implied.update(self._ancestors(deps, k))
            deps.append([i for i in mine if i not in implied])
        return deps

    @staticmethod
    def _ancestors(deps: list[list[int]], k: int) -> set[int]:
        out, stack = set(), list(deps[k])
        while stack:
            i = stack.pop()
            if i not in out:
                out.add(i)
                stack.extend(deps[i])
        return out

    def _build(self) -> None:
        if self.device != "gpu":
            return
        from cuda.core import LaunchConfig
        from cuda.core.graph import GraphDefinition

        from tilelab import config
        from tilelab.runtime.graph_pdl import make_programmatic

        gd = GraphDefinition()
        nodes, programmatic, early = [], [], []
        pdl = config.pdl()
        plans = {i: copy_plan(e.dst.data_ptr, e.src.data_ptr, e.dst.nbytes)
                 for i, e in enumerate(self.entries) if isinstance(e, _Copy)}
        stage_bytes = max((c.stage_bytes for c in plans.values()), default=0)
        if stage_bytes:   # (after the capture: allocating is allowed here)
            from tilelab.runtime.device import gpu

            device = next(self.entries[i].dst.device for i in plans)
            self._stage = Storage.allocate(stage_bytes, device, "a graph's staging buffer")
            gpu().stream.sync()   # allocated (stream-ordered) before any replay's stream uses it
        for i, (e, deps) in enumerate(zip(self.entries, self.dependencies())):
            parent = nodes[deps[0]] if deps else gd
            first = None   # the entry's first node, where its edges end (a copy's chain)
            if isinstance(e, _Entry):
                words = e.launcher.words(e.plan, e.args)
                node = parent.launch(LaunchConfig(grid=e.grid, block=(1, 1, 1)),
                                     e.plan.cu_kernel, *words)
                # one kernel before it, and this kernel waits for it before touching
                # memory (or reads only what it does not write before the wait): the
                # edge may be programmatic (tilelab.runtime.graph_pdl)
                starts_early = (pdl and len(deps) == 1
                                and isinstance(self.entries[deps[0]], _Entry)
                                and may_start_early(self.entries[deps[0]], e,
                                                    early[deps[0]]))
                if starts_early:
                    programmatic.append((nodes[deps[0]].handle, node.handle))
                early.append(starts_early)
            else:
                first, node = self._copy_nodes(parent, plans[i])
                early.append(False)
            if len(deps) > 1:
                (node if first is None else first).pred = {nodes[j] for j in deps}
            nodes.append(node)
        #: what became of programmatic dependent launch in this graph, in words
        self.pdl = make_programmatic(gd.handle, programmatic) if pdl else "off (TILELAB_PDL=0)"
        self._cuda_graph = gd.instantiate()
        self._definition = gd

    def _copy_nodes(self, parent: Any, plan: Any) -> tuple[Any, Any]:
        """The memcpy nodes of one recorded copy, chained in the plan's order after
        ``parent`` (the graph or the node it waits for): (its first node, its last)."""
        stage = self._stage.ptr if plan.stage_bytes else 0
        pairs = []
        for dst, src, n in plan.steps:
            pairs += [(stage, src, n), (dst, stage, n)] if plan.stage_bytes else [(dst, src, n)]
        if not pairs:   # nothing to copy (onto itself, or empty): an empty node keeps the edges
            empty = parent.join()
            return empty, empty
        first = node = parent.memcpy(*pairs[0])
        for dst, src, n in pairs[1:]:
            node = node.memcpy(dst, src, n)
        return first, node

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

    def check_alive(self) -> None:
        """Raise LaunchError if memory of a recorded launch or copy was freed since it
        was recorded: the built CUDA graph still holds the old addresses (memory that
        may now belong to another allocation), and a CPU replay would read freed memory.

        Called by :meth:`replay` under the ledger's lock, which ``Storage.free`` takes
        too; a scan runs only when something was freed since the last one found all
        alive (``FREE_EPOCH``), so a replay of a graph of live tensors costs a compare.
        """
        if self._alive_epoch == FREE_EPOCH[0]:
            return
        for e in self.entries:
            for what, t in e.tensors:
                st = t.storage
                if st.freed:
                    raise LaunchError(
                        f"graph replay: {what} (recorded at {e.site}) was freed with "
                        f".free() by {st.freed_by} after the graph was recorded; a replay "
                        "cannot use freed memory",
                        hint="free the tensors of a graph only after its last replay, or "
                             "record a new graph with live tensors")
        self._alive_epoch = FREE_EPOCH[0]

    def replay(self, stream: Any = None):
        """Run the recorded work once more; returns a ``tl.Future`` holding its borrows.

        Raises LaunchError if a tensor of the graph was freed since it was recorded
        (:meth:`check_alive`), on both backends alike."""
        from tilelab.runtime.future import Future

        if not self._closed:
            raise LaunchError("replay() inside its own 'with tl.graph()' block",
                              hint="replay after the block has ended")
        claims = self._claims()
        name = f"graph of {len(self.entries)} launches"
        if self.device == "gpu":
            from tilelab.runtime.streams import resolve_stream, stream_key

            s = resolve_stream(stream)
            key = stream_key(s)
            # under the lock a free takes: no tensor is freed between the check and the
            # registration of the borrows that make a later free a BorrowError
            with LEDGER._lock:
                self.check_alive()
                LEDGER.check_launch("graph replay", claims, key)
                self._cuda_graph.launch(s)
                rec = LaunchRecord(name, call_site(), key, None, self, s)   # holds tensors
                LEDGER.add(rec, claims)
            return Future(rec)
        # the replay's borrows are held while it runs (another thread's conflicting
        # access raises BorrowError), then until its future is observed
        rec = LaunchRecord(name, call_site(), "cpu")
        with LEDGER._lock:
            self.check_alive()
            LEDGER.begin(rec, claims, self)
        keep = False
        try:
            for e in self.entries:
                if isinstance(e, _Entry):
                    e.launcher._launch_cpu(e.plan, e.args, e.grid, [], True, None)
                else:
                    e.dst._copy_from_on(e.src, None)
            keep = True
        finally:
            LEDGER.end(rec, keep)
        return Future(rec)

    def __repr__(self) -> str:
        return f"<tl.graph: {len(self.entries)} recorded ({self.device or 'empty'})>"


def graph(*, serial: bool = False) -> Graph:
    """Start recording a graph: ``with tl.graph() as g: ...`` then ``g.replay()``.

    Launches that touch disjoint memory may run concurrently in the graph (the edges
    follow their borrows); ``serial=True`` chains every launch to the one recorded before
    it, as a stream would run them (what a benchmark comparing two graphs that differ
    by a launch needs, so leaving one out cannot let others overlap).

    Example:
        >>> import tilelab as tl
        >>> g = tl.graph()
        >>> tl.graph(serial=True).serial
        True
    """
    return Graph(serial=serial)
