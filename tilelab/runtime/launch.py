"""Launching a kernel: arguments -> checks -> compiled code -> GPU or CPU interpreter.

The hot path of a launch is: turn each argument into a tensor or partition (foreign
arrays are borrowed without copies), look the argument signature up in the kernel's
in-memory table (a miss specializes, compiles or hits the disk cache, and loads the
cubin), check aliasing and borrows, pack the ``cutile_python_v1`` words and launch
(grid = tile blocks, block = (1, 1, 1)). A launch repeated with the very same argument
objects reuses everything prepared the first time: its parameters are packed once for
the driver's ``cuLaunchKernel`` (``TILELAB_LAUNCH=cuda.core`` launches through
``cuda.core.launch`` instead; graphs are always built with cuda.core). The CPU backend
runs the same lowered kernel in :mod:`tilelab.interp`.
"""
from __future__ import annotations

import ctypes
import os
import sys
import weakref
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from tilelab.compiler.artifacts import Artifacts
from tilelab.compiler.definition import KernelDefinition
from tilelab.compiler.dtypes import to_numpy_dtype
from tilelab.compiler.export import _cutile_function
from tilelab.compiler.signature import ArraySpec, PartitionSpec, describe_arg
from tilelab.compiler.specialize import Specialization
from tilelab.errors import AliasError, LaunchError
from tilelab.runtime import capture, events as _events
from tilelab.runtime.future import Future as _Future
from tilelab.runtime.ledger import (LEDGER, SPECIAL_MODES as _SPECIAL_MODES, LaunchRecord,
                                    call_site, checks_enabled, unchecked)
from tilelab.runtime.memory import FREE_EPOCH as _FREE_EPOCH

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

__all__ = ["LaunchPlan", "Launcher", "to_kernel_arg"]


_NP_SCALAR = {"bool": np.bool_, "int8": np.int8, "int16": np.int16, "int32": np.int32,
              "int64": np.int64, "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32,
              "uint64": np.uint64, "float16": np.float16, "float32": np.float32,
              "float64": np.float64}


def _tensor_types():
    from tilelab.runtime.partition import Partition
    from tilelab.runtime.tensor import Tensor

    return Tensor, Partition


def to_kernel_arg(value: Any, param: str, kernel: str) -> Any:
    """Tensors and partitions pass through; foreign arrays are borrowed as tensors."""
    Tensor, Partition = _tensor_types()
    if isinstance(value, (Tensor, Partition)) or isinstance(value, (bool, int, float,
                                                                      np.generic)):
        return value
    if isinstance(value, (ArraySpec, PartitionSpec)):
        raise LaunchError(f"{kernel}(): argument {param!r} is a tl.spec description, which "
                          "has no memory; specs are for kernel.compile(...)",
                          hint="pass a tensor (tl.empty, tl.tensor, ...) to launch")
    from tilelab.runtime.tensor import _native_device, tensor as as_tensor

    try:
        # a foreign array stays where it lives, borrowed without a copy
        return as_tensor(value, device=_native_device(value))
    except (TypeError, ValueError) as e:
        raise LaunchError(f"{kernel}(): cannot use argument {param!r} "
                          f"({type(value).__name__}): {e}") from None


def _tensor_of(arg: Any) -> Any:
    Tensor, Partition = _tensor_types()
    if isinstance(arg, Partition):
        return arg.tensor
    if isinstance(arg, Tensor):
        return arg
    return None


@dataclass
class LaunchPlan:
    """A specialization ready to launch: its artifacts, layouts and loaded code."""

    spec: Specialization
    artifacts: Artifacts | None
    device: str                     # "gpu" or "cpu"
    cu_kernel: Any = None           # cuda.core Kernel (GPU)
    cpu_function: Any = None        # the lowered cuTile Python function (CPU)
    writable: tuple[bool, ...] = ()
    arrays: tuple[int, ...] = ()    # indices of array arguments
    scalar_types: dict[int, Any] = field(default_factory=dict)


class Launcher:
    """The launch machinery of one kernel (its table of plans)."""

    def __init__(self, definition: KernelDefinition, kernel: Any = None):
        self.definition = definition
        #: the user-facing tl.Kernel (for launch events)
        self.kernel = kernel
        self.plans: dict[tuple, LaunchPlan] = {}
        self._fast: dict[tuple, _GpuLaunch] = {}
        self.last_trace = None
        self._epoch = definition.helper_epoch

    # ---- preparing -------------------------------------------------------------
    def prepare(self, args: Sequence[Any]) -> tuple[list[Any], str]:
        """(normalized args, "gpu"|"cpu") after checking they live on one device."""
        d = self.definition
        params = d.analysis.params
        if len(args) != len(params):
            sig = ", ".join(p.name for p in params)
            raise LaunchError(f"{d.name}() takes {len(params)} arguments ({sig}), got "
                              f"{len(args)}")
        norm = [a if p.kind == "constant" else to_kernel_arg(a, p.name, d.name)
                for p, a in zip(params, args)]
        devices = {}
        for p, a in zip(params, norm):
            t = _tensor_of(a)
            if t is not None:
                if t.storage.freed:
                    raise LaunchError(f"{d.name}(): argument {p.name!r} was freed with "
                                      ".free(); a launch cannot use freed memory",
                                      hint="allocate a new tensor")
                devices.setdefault("cpu" if t.device == "cpu" else "gpu", p.name)
        if len(devices) > 1:
            raise LaunchError(f"{d.name}(): arguments live on different devices "
                              f"({', '.join(f'{v} on {k}' for k, v in devices.items())})",
                              hint="move them with tensor.to('cuda') or tensor.to('cpu')")
        device = next(iter(devices), None)
        if device is None:
            from tilelab.runtime.device import backend

            device = backend()
        return norm, device

    def plan(self, args: list[Any], device: str) -> LaunchPlan:
        d = self.definition
        d.ensure_helpers_checked()
        if self._epoch != d.helper_epoch:  # a helper was redefined: rebuild every plan
            self.plans.clear()
            self._fast.clear()
            self._epoch = d.helper_epoch
        key = (device,) + tuple(describe_arg(a) if _tensor_of(a) is not None else
                                (type(a), a) for a in args)
        plan = self.plans.get(key)
        if plan is None:
            plan = self._make_plan(args, device)
            self.plans[key] = plan
        return plan

    def _make_plan(self, args: list[Any], device: str) -> LaunchPlan:
        d = self.definition
        spec = d.specialize(args)
        writable = tuple(p.kind in ("Out", "InOut", "Raw") for p in d.analysis.params)
        arrays = tuple(i for i, a in enumerate(args) if _tensor_of(a) is not None)
        scalars = {i: _NP_SCALAR.get(lay.dtype) or to_numpy_dtype(lay.dtype).type
                   for i, lay in enumerate(spec.layouts) if lay.kind == "scalar"}
        if device == "gpu":
            from tilelab.runtime.device import gpu as get_gpu

            gpu = get_gpu()
            art = d.compile(*args, arch=gpu.arch)
            from cuda.core import ObjectCode

            try:
                obj = ObjectCode.from_cubin(art.cubin)
                cu_kernel = obj.get_kernel(art.symbol)
            except Exception as e:
                raise LaunchError(f"cannot load the cubin of {d.name!r} for {gpu.arch} on "
                                  f"{gpu.name}: {e}",
                                  hint="the driver must support CUDA 13 tile launches "
                                       "(r580 or newer)") from None
            return LaunchPlan(spec, art, "gpu", cu_kernel=cu_kernel, writable=writable,
                              arrays=arrays, scalar_types=scalars)
        lowered = d.lowered(spec.plan)
        fn = _cutile_function(d.fn, lowered)
        from tilelab.interp import register_location_map

        # race reports and errors of the interpreter then point at the user's source
        register_location_map(lowered.filename, lowered.source_map.to_user)
        return LaunchPlan(spec, None, "cpu", cpu_function=fn, writable=writable,
                          arrays=arrays, scalar_types=scalars)

    # ---- checks ------------------------------------------------------------------
    def check_aliases(self, plan: LaunchPlan, args: list[Any]) -> list[tuple]:
        """AliasError if a written argument overlaps any other; returns ledger claims."""
        params = self.definition.analysis.params
        ranges = []
        for i in plan.arrays:
            t = _tensor_of(args[i])
            lo, hi = t.byte_range()
            ranges.append((i, t.storage.space, lo, hi))
        if checks_enabled():
            for a in range(len(ranges)):
                i, sa, lo_a, hi_a = ranges[a]
                for b in range(a + 1, len(ranges)):
                    j, sb, lo_b, hi_b = ranges[b]
                    if not (plan.writable[i] or plan.writable[j]):
                        continue
                    if sa == sb and lo_a < hi_b and lo_b < hi_a:
                        w, o = (i, j) if plan.writable[i] else (j, i)
                        raise AliasError(
                            f"{self.definition.name}(): {params[w].name!r} "
                            f"(tl.{params[w].kind}) overlaps {params[o].name!r} in memory; "
                            "a launch may not write memory that another of its arguments "
                            "reads or writes",
                            hint="pass separate tensors (e.g. a fresh tl.empty_like output); "
                                 "if you know the views are disjoint element by element, "
                                 "launch inside 'with tl.unchecked():'")
        return [(s, lo, hi, plan.writable[i], params[i].name) for i, s, lo, hi in ranges]

    # ---- GPU -------------------------------------------------------------------
    def words(self, plan: LaunchPlan, args: list[Any]) -> list[Any]:
        out: list[Any] = []
        for i, lay in enumerate(plan.spec.layouts):
            if lay.kind == "array":
                t = _tensor_of(args[i])
                w = t._launch_words()
                idx = np.int32 if lay.index_dtype == "int32" else np.int64
                out.append(w[0])
                out.extend(idx(x) for x in w[1:])
            elif lay.kind == "scalar":
                out.append(plan.scalar_types[i](args[i]))
        return out

    def grid_for(self, plan: LaunchPlan, grid: Any) -> tuple[int, int, int]:
        spec = plan.spec
        if grid is not None:
            if spec.grid_partition is not None:
                raise LaunchError(f"{self.definition.name}(): the grid is inferred from the "
                                  "partitions (one block per tile); do not pass grid=",
                                  hint="choose the block count with the partition's tile "
                                       "shape or schedule (tl.persistent(num_blocks=...))")
            g = tuple(int(x) for x in (grid if isinstance(grid, (tuple, list)) else (grid,)))
            if not 1 <= len(g) <= 3 or any(x < 1 for x in g):
                raise LaunchError(f"grid must be 1 to 3 positive ints, got {grid!r}")
            return g + (1,) * (3 - len(g))  # type: ignore[return-value]
        if spec.grid_partition is None:
            raise LaunchError(f"{self.definition.name}() has no partitioned argument to infer "
                              "its grid from", hint="pass grid=(x, y, z)")
        if plan.device == "gpu":
            from tilelab.runtime.device import gpu as get_gpu

            return spec.grid(get_gpu().num_sms)
        from tilelab.runtime.device import num_sms

        return spec.grid(num_sms("cpu"))

    def launch(self, args: Sequence[Any], *, grid: Any = None, stream: Any = None,
               sync: bool = True, trace: bool | None = None) -> Any:
        """Launch; returns None (sync), a Future (async) or, inside a graph, None."""
        if grid is None and trace is None:
            fast = self._fast.get(_fast_key(args))
            if fast is not None and fast.valid():
                if capture.current_graph() is None:
                    return fast.run(stream, sync)
        norm, device = self.prepare(args)
        plan = self.plan(norm, device)
        g = self.grid_for(plan, grid)
        claims = self.check_aliases(plan, norm)
        graph = capture.current_graph()
        if graph is not None:
            graph.record(self, plan, norm, g, claims)
            return None
        if device == "gpu":
            fast = _GpuLaunch(self, plan, args, norm, g, claims)
            if grid is None and trace is None and checks_enabled() and _native(args):
                # an identical launch again (same objects) skips straight to the driver
                if len(self._fast) >= _FAST_CACHE_SIZE:
                    self._fast.clear()
                self._fast[_fast_key(args)] = fast
            result = fast.run(stream, sync)
        else:
            result = self._launch_cpu(plan, norm, g, claims, sync, trace)
        if _events.LISTENERS:
            _events.emit(_events.LaunchEvent(self.kernel, tuple(norm), plan.spec, g, device,
                                             sync, self.last_trace if device == "cpu"
                                             else None))
        return result

    def _fault(self, e: Exception) -> Exception:
        return LaunchError(f"kernel {self.definition.name!r} failed while running on the "
                           f"GPU: {e}",
                           hint="run it on the CPU backend (TILELAB_BACKEND=cpu) to find "
                                "out-of-bounds accesses and races")

    # ---- CPU -------------------------------------------------------------------
    def cpu_call_args(self, plan: LaunchPlan, args: list[Any]) -> list[Any]:
        out = []
        with unchecked():  # our own launch reads its arguments' memory
            for a in args:
                t = _tensor_of(a)
                out.append(t.numpy() if t is not None else a)
        return out + list(plan.spec.extra_constants)

    def run_cpu(self, plan: LaunchPlan, args: list[Any], grid, *, trace: bool,
                races: bool, order: str = "sequential", seed: int | None = None,
                sample_blocks: int | None = None):
        from tilelab.interp import interpret

        call = self.cpu_call_args(plan, args)
        return interpret(plan.cpu_function, *call, grid=grid, trace=trace or races,
                         order=order, seed=seed, sample_blocks=sample_blocks, races=races)

    def _launch_cpu(self, plan, args, grid, claims, sync, trace):
        LEDGER.check_launch(self.definition.name, claims, "cpu")
        unsafe = self.definition.options.unsafe
        want_trace = bool(trace) or unsafe
        result = self.run_cpu(plan, args, grid, trace=want_trace, races=unsafe)
        self.last_trace = result if want_trace else None
        if unsafe and result is not None and getattr(result, "has_races", False):
            result.raise_on_race()
        if sync:
            return None
        from tilelab.runtime.future import Future

        rec = LaunchRecord(self.definition.name, call_site(), "cpu")
        LEDGER.add(rec, claims, [_tensor_of(a) for a in args if _tensor_of(a) is not None])
        return Future(rec)


_FAST_CACHE_SIZE = 256
_SCALARS = (bool, int, float)


def _fast_key(args: Sequence[Any]) -> tuple:
    """Identity of a launch's arguments (the prepared launch keeps scalars alive, and
    weak references to the rest, so an id cannot silently name another object)."""
    return tuple(map(id, args))


#: whether repeated launches call cuLaunchKernel directly (False: cuda.core.launch)
_DRIVER_LAUNCH = [os.environ.get("TILELAB_LAUNCH", "driver") != "cuda.core"]
_SUCCESS: list = [None]
_CTYPE = {"int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32,
          "int64": ctypes.c_int64, "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16,
          "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64, "float32": ctypes.c_float,
          "float64": ctypes.c_double, "bool": ctypes.c_bool}


_cuLaunchKernel: list = [None]


def _default_gpu():
    """The GPU, with the driver entry points the fast path uses bound once."""
    from cuda.bindings import driver

    from tilelab.runtime.device import gpu

    if _cuLaunchKernel[0] is None:
        _SUCCESS[0] = driver.CUresult.CUDA_SUCCESS
        _cuLaunchKernel[0] = driver.cuLaunchKernel
    g = gpu()
    if getattr(g, "stream_cu", None) is None:
        g.stream_cu = g.stream.handle
    return g


def _scalar_ctype(dtype: str, value: Any):
    """A ctypes value holding a scalar parameter's bytes (half types by their bits)."""
    if dtype in _CTYPE:
        return _CTYPE[dtype](value)
    from tilelab.compiler.dtypes import to_numpy_dtype

    bits = np.array(value, dtype=to_numpy_dtype(dtype)).view(
        np.uint16 if to_numpy_dtype(dtype).itemsize == 2 else np.uint8)
    return (ctypes.c_uint16 if bits.dtype == np.uint16 else ctypes.c_uint8)(int(bits))


def _pack_params(plan: LaunchPlan, args: list[Any]) -> tuple:
    """(address of a void* array, the values it points to) for cuLaunchKernel."""
    values = []
    for i, lay in enumerate(plan.spec.layouts):
        if lay.kind == "array":
            w = _tensor_of(args[i])._launch_words()
            idx = ctypes.c_int32 if lay.index_dtype == "int32" else ctypes.c_int64
            values.append(ctypes.c_uint64(w[0]))
            values.extend(idx(x) for x in w[1:])
        elif lay.kind == "scalar":
            values.append(_scalar_ctype(lay.dtype, args[i]))
    ptrs = (ctypes.c_void_p * max(len(values), 1))(*[ctypes.addressof(v) for v in values])
    return ctypes.addressof(ptrs), ptrs, values


def _native(args: Sequence[Any]) -> bool:
    """Whether every array argument is a tilelab Tensor or Partition (cacheable by id)."""
    Tensor, Partition = _tensor_types()
    return all(type(a) in _SCALARS or isinstance(a, (Tensor, Partition)) for a in args)


class _GpuLaunch:
    """Everything one GPU launch needs, prepared once: the next launch with the very same
    argument objects (tensors and partitions are immutable) only re-checks that they are
    alive and unfreed, checks the borrow ledger, and calls the driver."""

    __slots__ = ("launcher", "definition", "helpers", "name", "refs", "scalars", "storages",
                 "claims", "words", "config", "kernel", "epoch", "free_epoch", "fault",
                 "params", "grid", "handle", "gpu", "spaces")

    def __init__(self, launcher: Launcher, plan: LaunchPlan, args: Sequence[Any],
                 norm: list[Any], grid: tuple, claims: list):
        from cuda.core import LaunchConfig

        from tilelab.runtime.memory import FREE_EPOCH

        self.launcher = launcher
        self.definition = launcher.definition
        self.helpers = launcher.definition.analysis.helpers
        self.name = launcher.definition.name
        self.refs = tuple(weakref.ref(a) for a in args if type(a) not in _SCALARS)
        self.scalars = tuple(a for a in args if type(a) in _SCALARS)  # keeps their ids
        tensors = [t for t in map(_tensor_of, norm) if t is not None]
        # weak: a prepared launch must not keep memory alive after its tensors are gone
        self.storages = tuple(weakref.ref(st) for st in
                              {id(t.storage): t.storage for t in tensors}.values())
        self.claims = claims
        self.spaces = tuple({c[0] for c in claims})
        self.words = tuple(launcher.words(plan, norm))
        self.config = LaunchConfig(grid=grid, block=(1, 1, 1))
        self.kernel = plan.cu_kernel
        self.grid = grid
        self.epoch = launcher.definition.helper_epoch
        self.free_epoch = FREE_EPOCH[0]
        self.fault = launcher._fault
        # The kernel parameters packed once, as the driver wants them (an array of
        # pointers to values), so that a repeated launch converts nothing.
        self.params = _pack_params(plan, norm)
        self.handle = plan.cu_kernel.handle
        self.gpu = _default_gpu()

    def valid(self) -> bool:
        """Whether the prepared launch still describes these arguments exactly."""
        if self.epoch != self.definition.helper_epoch or (
                self.helpers.bindings and self.helpers.changed()):
            return False
        for r in self.refs:
            if r() is None:
                return False
        if self.free_epoch != _FREE_EPOCH[0]:
            for ref in self.storages:
                st = ref()
                if st is None or st._freed:
                    return False
            self.free_epoch = _FREE_EPOCH[0]
        if _SPECIAL_MODES[0]:  # an unchecked block or a graph capture is open somewhere
            return checks_enabled() and capture.current_graph() is None
        return True

    def run(self, stream: Any, sync: bool) -> Any:
        if stream is None:
            g = self.gpu
            g.make_current()
            s, key, sh = g.stream, g.stream_handle, g.stream_cu
        else:
            from tilelab.runtime.streams import resolve_stream, stream_key

            s = resolve_stream(stream)
            key = stream_key(s)
            sh = s.handle
        if LEDGER._pending:
            LEDGER.check_launch(self.name, self.claims, key)
        if _DRIVER_LAUNCH[0]:
            gx, gy, gz = self.grid
            try:
                err = _cuLaunchKernel[0](self.handle, gx, gy, gz, 1, 1, 1, 0, sh,
                                         self.params[0], 0)[0]
            except TypeError:  # a cuda-bindings without this signature: use cuda.core
                _DRIVER_LAUNCH[0] = False
                return self.run(stream, sync)
            if err != _SUCCESS[0]:
                raise LaunchError(f"launch of {self.name!r} (grid {self.grid}) failed: "
                                  f"{getattr(err, 'name', err)}")
        else:
            from cuda.core import launch as cu_launch

            try:
                cu_launch(s, self.config, self.kernel, *self.words)
            except Exception as e:
                raise LaunchError(f"launch of {self.name!r} (grid {self.grid}) failed: "
                                  f"{e}") from None
        if sync:
            try:
                s.sync()
            except Exception as e:
                raise self.fault(e) from None
            return None
        f = sys._getframe(1)
        while f.f_code.co_filename.startswith(_PKG_DIR):  # the user's launching line
            f = f.f_back
        rec = LaunchRecord(self.name, ((f.f_code.co_filename, f.f_lineno),), key, None,
                           [r() for r in self.refs], s)
        # the pending launch keeps its arguments (and so their memory) alive
        LEDGER.add(rec, self.claims, None, self.spaces)
        return _Future(rec, self.fault)
