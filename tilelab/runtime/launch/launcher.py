"""The launcher of one kernel: its tables of plans, loaded code and prepared launches,
and the full launch path (arguments -> plan -> checks -> GPU or CPU interpreter).

A launch that nothing prepared gets ready in one place, :meth:`Launcher.first_launch`
(arguments normalized, the plan found or made, the grid, the memory checks); a
launch, ``tl.interpret`` and a graph's recording all start there.

Plans are filed under what specializes the kernel: each array's spec, each scalar's
dtype (never its value: a decode position or step counter travels with the launch
and makes no new plan), each constant's :func:`~tilelab.compiler.values.constant_key`.
Every table is bounded: plans and loaded code (:data:`PLAN_TABLE_SIZE`,
:data:`~.plan.CODE_TABLE_SIZE`) drop the least recently used first, prepared launches
(:data:`PREPARED_TABLE_SIZE`) the oldest.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from tilelab.compiler.definition import KernelDefinition
from tilelab.compiler.signature import describe_arg
from tilelab.compiler.values import constant_key
from tilelab.errors import AliasError, BorrowError, LaunchError
from tilelab.grid import normalize_grid
from tilelab.runtime import events as _events, graph_capture
from tilelab.runtime.future import Future
from tilelab.runtime.ledger import LEDGER, LaunchRecord, call_site, checks_enabled, locate

from .arguments import empty_partition, normalize, tensor_of
from .checks import check_aliases
from .lru import Lru
from .plan import LaunchPlan, code_table, make_plan
from .prepared import _SCALARS, _STALE, PreparedLaunch, all_tilelab_args

__all__ = ["Launcher", "FirstLaunch"]

#: plans kept per kernel (one per array layout, scalar dtype and constant values met;
#: a plan dropped is remade from the loaded code, without compiling)
PLAN_TABLE_SIZE = 256
#: prepared GPU launches kept per kernel in each of its two lookups (by the argument
#: objects; by the tensors and scalar types, for launches of other scalar values): the
#: oldest is dropped first
PREPARED_TABLE_SIZE = 256


@dataclass
class FirstLaunch:
    """A launch that nothing prepared, made ready by :meth:`Launcher.first_launch`: its
    arguments as the kernel takes them, their ``device``, and, unless ``empty`` (a
    partition without a tile, when every partition has none: no block to run), its
    ``plan``, ``grid`` and the ledger ``claims`` of its array arguments."""

    args: list[Any]
    device: str
    plan: LaunchPlan | None = None
    grid: tuple[int, int, int] | None = None
    claims: list[tuple] | None = None
    empty: Any = None


class Launcher:
    """The launch machinery of one kernel (its table of plans and prepared launches);
    ``kernel._launcher`` of every ``tl.Kernel``.

    Example:
        >>> import tilelab as tl
        >>> @tl.kernel
        ... def neg(z: tl.Out, x: tl.In):
        ...     z.store(-tl.load_like(x, z))
        >>> x, z = tl.ones(8, device="cpu"), tl.empty(8, device="cpu")
        >>> neg._launcher.launch((z.partition(8), x))
        >>> z.numpy()[:3]
        array([-1., -1., -1.], dtype=float32)
    """

    def __init__(self, definition: KernelDefinition, kernel: Any = None):
        self.definition = definition
        #: the user-facing tl.Kernel (for launch events)
        self.kernel = kernel
        #: plans by (device, what specializes the kernel per argument): see plan()
        self.plans = Lru(PLAN_TABLE_SIZE)
        #: loaded GPU code by (arch, helper epoch, Specialization.key()), one table
        #: per definition (plan.code_table)
        self.code = code_table(definition)
        #: prepared GPU launches by the hash of their argument tuple (see kernel.py)
        self._fast: dict[int, PreparedLaunch] = {}
        #: the same, by their tensors' ids, scalars' types and constants (see _launch)
        self._by_layout: dict[tuple, PreparedLaunch] = {}
        #: which parameters are ct.Constant (their values specialize the kernel)
        self._constant = tuple(p.kind == "constant" for p in definition.analysis.params)
        self.last_trace = None
        self._epoch = definition.helper_epoch

    # ---- preparing -------------------------------------------------------------
    def first_launch(self, args: Sequence[Any], grid: Any = None, *,
                     refuse: Callable[[list[Any], str, Any], None] | None = None
                     ) -> FirstLaunch:
        """Make a launch that nothing prepared ready; the one way there (a launch,
        ``tl.interpret``, a graph's recording).

        In order: the arguments as the kernel takes them, on one device
        (:meth:`prepare`); ``refuse(args, device, empty)``, when given, may raise
        before anything is built (``tl.interpret`` refuses GPU memory); unless every
        partition is empty (``empty``: no block to run, nothing more is made), the
        plan from the table or made (:meth:`plan`: specialize, then compile or find
        in the cache and load), the grid (:meth:`grid_for`) and the memory checks'
        claims (:meth:`check_aliases`).

        Example:
            >>> import tilelab as tl
            >>> @tl.kernel
            ... def neg(z: tl.Out, x: tl.In):
            ...     z.store(-tl.load_like(x, z))
            >>> x, z = tl.ones(8, device="cpu"), tl.empty(8, device="cpu")
            >>> first = neg._launcher.first_launch((z.partition(4), x))
            >>> first.device, first.grid, first.plan.writable
            ('cpu', (2, 1, 1), (True, False))
        """
        norm, device = self.prepare(args)
        empty = empty_partition(norm) if grid is None else None
        if refuse is not None:
            refuse(norm, device, empty)
        if empty is not None:
            return FirstLaunch(norm, device, empty=empty)
        plan = self.plan(norm, device)
        g = self.grid_for(plan, grid)
        return FirstLaunch(norm, device, plan, g, self.check_aliases(plan, norm))

    def prepare(self, args: Sequence[Any]) -> tuple[list[Any], str]:
        """(normalized args, "gpu"|"cpu") after checking they live on one device
        (:func:`~.arguments.normalize`)."""
        return normalize(self.definition, args)

    def plan(self, args: list[Any], device: str) -> LaunchPlan:
        """The plan for these (normalized) arguments on ``device``, made on first use.

        It is filed under what specializes the kernel: an array's spec, a scalar's
        dtype (``ScalarSpec``: not its value), a constant's ``constant_key``."""
        d = self.definition
        d.ensure_checked()
        if self._epoch != d.helper_epoch:  # a helper was redefined: rebuild every plan
            self.plans.clear()
            self.code.clear()
            self._fast.clear()
            self._by_layout.clear()
            self._epoch = d.helper_epoch
        key = (device,) + tuple(constant_key(a) if c else describe_arg(a)
                                for a, c in zip(args, self._constant))
        plan = self.plans.get(key)
        if plan is None:
            plan = make_plan(d, args, device)
            self.plans[key] = plan
        return plan

    def check_aliases(self, plan: LaunchPlan, args: list[Any]) -> list[tuple]:
        """The launch's memory checks and ledger claims (see
        :func:`~tilelab.runtime.launch.checks.check_aliases`)."""
        return check_aliases(self.definition, plan, args)

    # ---- GPU words and grids ---------------------------------------------------
    def words(self, plan: LaunchPlan, args: list[Any]) -> list[Any]:
        """The ``cutile_python_v1`` parameter words of a launch (cuda.core, graphs)."""
        out: list[Any] = []
        for i, lay in enumerate(plan.spec.layouts):
            if lay.kind == "array":
                t = tensor_of(args[i])
                w = t._launch_words()
                idx = np.int32 if lay.index_dtype == "int32" else np.int64
                out.append(w[0])
                out.extend(idx(x) for x in w[1:])
            elif lay.kind == "scalar":
                out.append(plan.scalar_types[i](args[i]))
        return out

    def grid_for(self, plan: LaunchPlan, grid: Any) -> tuple[int, int, int]:
        """The launch grid: ``grid`` when given (kernels without partitions), else one
        block per tile of the partitions (a persistent schedule's block count)."""
        spec = plan.spec
        name = self.definition.name
        if grid is not None:
            if spec.grid_partition is not None:
                raise LaunchError(f"{name}(): the grid is inferred from the "
                                  "partitions (one block per tile); do not pass grid=",
                                  hint="choose the block count with the partition's tile "
                                       "shape or schedule (tl.persistent(num_blocks=...))")
            return normalize_grid(grid, f"{name}()")
        if spec.grid_partition is None:
            fixed = getattr(self.kernel, "fixed_grid", None)
            if fixed is not None:
                return fixed
            raise LaunchError(f"{name}() has no partitioned argument to infer "
                              "its grid from", hint="pass grid=(x, y, z)")
        if plan.device == "gpu":
            from tilelab.runtime.device import gpu as get_gpu

            return spec.grid(get_gpu().num_sms)
        from tilelab.runtime.device import num_sms

        return spec.grid(num_sms("cpu"))

    # ---- launching -------------------------------------------------------------
    def launch(self, args: Sequence[Any], *, grid: Any = None, stream: Any = None,
               sync: bool = True, trace: bool | None = None) -> Any:
        """Launch; returns None (sync), a Future (async) or, inside a graph, None.

        A launch whose grid comes from its partitions, all of them empty (tensors
        with a 0-size dimension), has no block to run: it is a no-op that compiles,
        records and launches nothing, and an async one returns a future that is
        already done. Errors raised here (AliasError, LaunchError,
        BorrowError) name the user's launching line as their location."""
        try:
            return self._launch(tuple(args), grid, stream, sync, trace)
        except (AliasError, LaunchError, BorrowError) as e:
            locate(e)
            raise

    def _launch(self, args: tuple, grid: Any, stream: Any, sync: bool,
                trace: bool | None) -> Any:
        if grid is None and trace is None:
            fast = self.prepared(args)
            if fast is not None:
                result = fast.run(args, stream, sync)
                if result is not _STALE:
                    return result
            # the same tensors with other scalar values: the prepared launch, repacked
            # (with listeners, the full path, which tells them: the lab records values)
            base = None if _events.LISTENERS or not self._by_layout else \
                self._by_layout.get(_layout_key(args, self._constant))
            packed = None if base is None else base.rebound(args)
            if packed is not None:
                result = base.run(args, stream, sync, packed=packed)
                if result is not _STALE:
                    return result
        first = self.first_launch(args, grid)
        if first.empty is not None:
            return None if sync or graph_capture.current_graph() is not None else \
                _done_future(self.definition.name)
        norm, device, plan, g, claims = (first.args, first.device, first.plan, first.grid,
                                         first.claims)
        graph = graph_capture.current_graph()
        if graph is not None:
            graph.record(self, plan, norm, g, claims)
            return None
        if device == "gpu":
            cache = grid is None and trace is None and checks_enabled() and \
                all_tilelab_args(args)
            fast = PreparedLaunch(self, plan, args, norm, g, claims, cache)
            if fast.match is not None:
                # an identical launch again (same objects) skips straight to the driver,
                # one with other scalar values repacks them (PreparedLaunch.rebound)
                _file(self._fast, hash(args), fast)
                if fast.scalars:
                    _file(self._by_layout, _layout_key(args, self._constant), fast)
            result = fast.run(args, stream, sync, True)
        else:
            result = self._launch_cpu(plan, norm, g, claims, sync, trace)
        if _events.LISTENERS:
            _events.emit(_events.LaunchEvent(self.kernel, tuple(norm), plan.spec, g, device,
                                             sync, self.last_trace if device == "cpu"
                                             else None))
        return result

    def prepared(self, args: tuple) -> PreparedLaunch | None:
        """The prepared launch filed under these arguments' hash, if any (whether it was
        made for these very objects is for ``PreparedLaunch.run`` to check). With
        none prepared (always on the CPU) the arguments are not even hashed."""
        if not self._fast:
            return None
        try:
            return self._fast.get(hash(args))
        except Exception:  # noqa: BLE001 - unhashable (a numpy array): never prepared
            return None

    def _fault(self, e: Exception) -> Exception:
        return LaunchError(f"kernel {self.definition.name!r} failed while running on the "
                           f"GPU: {e}",
                           hint="run it on the CPU backend (TILELAB_BACKEND=cpu) to find "
                                "out-of-bounds accesses and races")

    # ---- CPU -------------------------------------------------------------------
    def cpu_call_args(self, plan: LaunchPlan, args: list[Any]) -> list[Any]:
        """numpy views of the arguments' memory, unchecked: the launch holds the borrows."""
        out = []
        for a in args:
            t = tensor_of(a)
            out.append(t._host_view() if t is not None else a)
        return out + list(plan.spec.extra_constants)

    def run_cpu(self, plan: LaunchPlan, args: list[Any], grid, *, trace: bool,
                races: bool, order: str = "sequential", seed: int | None = None,
                sample_blocks: int | None = None, arch: str | None = None):
        """Run the plan's lowered function on the CPU interpreter (no borrows taken),
        standing for ``arch`` (default: the target of a compile without ``arch=``,
        :func:`~tilelab.runtime.device.target_arch`): what cuTile refuses for it, the
        interpreter refuses."""
        from tilelab.interp import interpret
        from tilelab.runtime.device import target_arch

        call = self.cpu_call_args(plan, args)
        return interpret(plan.cpu_function, *call, grid=grid, trace=trace or races,
                         order=order, seed=seed, sample_blocks=sample_blocks, races=races,
                         arch=target_arch() if arch is None else arch)

    def _launch_cpu(self, plan, args, grid, claims, sync, trace):
        # The borrows are taken before the kernel runs and held while it runs: another
        # thread's conflicting host access or launch meanwhile raises BorrowError.
        tensors = [t for t in map(tensor_of, args) if t is not None]
        rec = LaunchRecord(self.definition.name, call_site(), "cpu")
        LEDGER.begin(rec, claims, tensors, [t._storage for t in tensors])
        keep = False
        try:
            unsafe = self.definition.options.unsafe
            want_trace = bool(trace) or unsafe
            result = self.run_cpu(plan, args, grid, trace=want_trace, races=unsafe)
            self.last_trace = result if want_trace else None
            if unsafe and result is not None and getattr(result, "has_races", False):
                self._raise_race(plan, args, grid, sync, result)
            keep = not sync
        finally:
            LEDGER.end(rec, keep)
        if sync:
            return None
        return Future(rec)

    def _raise_race(self, plan, args, grid, sync, trace) -> None:
        """Raise the LaunchError of the races ``trace`` found, its launch first told to
        the listeners with the error (``LaunchEvent.error``): the launch ran, and a tool
        that records it (the lab's ``%%tile`` view, its Race tab) sees it whether or not
        the caller catches the error."""
        try:
            trace.raise_on_race()
        except LaunchError as e:
            if _events.LISTENERS:
                _events.emit(_events.LaunchEvent(self.kernel, tuple(args), plan.spec, grid,
                                                 "cpu", sync, trace, e))
            raise


def _done_future(kernel: str) -> Future:
    """The future of a launch that had nothing to run: already done, holding nothing."""
    rec = LaunchRecord(kernel, "<no launch: an empty partition>", None)
    rec.observed = True
    return Future(rec)


def _layout_key(args: tuple, constant: tuple[bool, ...]) -> tuple:
    """Tensors and partitions by identity, run-time scalars by type only, constants by
    value: what a prepared launch that other scalar values may relaunch is filed under
    (its ``rebound`` checks the rest: the objects, the dtypes, the constants' bits)."""
    return tuple((a if c else type(a)) if type(a) in _SCALARS else id(a)
                 for a, c in zip(args, constant))


def _file(table: dict, key: Any, fast: PreparedLaunch) -> None:
    """``table[key] = fast``, the oldest entry dropped first beyond
    :data:`PREPARED_TABLE_SIZE`."""
    while len(table) >= PREPARED_TABLE_SIZE:
        try:
            del table[next(iter(table))]
        except (KeyError, StopIteration, RuntimeError):  # emptied by another thread
            break
    table[key] = fast
