"""Launching a kernel: arguments -> checks -> compiled code -> GPU or CPU interpreter.

The hot path of a launch is: turn each argument into a tensor or partition (foreign
arrays are borrowed without copies), look the argument signature up in the kernel's
in-memory table (a miss specializes, compiles or hits the disk cache, and loads the
cubin), check aliasing and borrows, pack the ``cutile_python_v1`` words and launch
(grid = tile blocks, block = (1, 1, 1)). A launch repeated with the very same argument
objects reuses everything prepared the first time: its parameters are packed once for
the driver's ``cuLaunchKernel``, called from tilelab's native C module
(:mod:`tilelab.runtime.native`, whose ``hot`` runs a repeated ``launch_async`` on the
default stream entirely in C) or through cuda-bindings (``TILELAB_LAUNCH=driver``), or
``cuda.core.launch`` (``TILELAB_LAUNCH=cuda.core``; graphs are always built with
cuda.core). The CPU backend runs the same lowered kernel in :mod:`tilelab.interp`.
"""
from __future__ import annotations

import ctypes
import os
import weakref
from dataclasses import dataclass, field
from sys import _getframe
from typing import Any, Sequence

import numpy as np

from tilelab.compiler.artifacts import Artifacts
from tilelab.compiler.definition import KernelDefinition
from tilelab.compiler.dtypes import to_numpy_dtype
from tilelab.compiler.signature import ArraySpec, PartitionSpec, describe_arg
from tilelab.compiler.specialize import Specialization
from tilelab.errors import AliasError, BorrowError, LaunchError, SourceLocation
from tilelab.runtime import capture, events as _events
from tilelab.runtime.future import Future as _Future
from tilelab.runtime.ledger import (LEDGER, SPECIAL_MODES as _SPECIAL_MODES, LaunchInfo,
                                    LaunchRecord, PreparedRecord, call_site, checks_enabled,
                                    locate)
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
        d.ensure_checked()
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
        fn = lowered.function()   # the checked text, never the user's live code
        from tilelab.interp import register_location_map

        # race reports and errors of the interpreter then point at the user's source
        register_location_map(lowered.filename, lowered.source_map.to_user)
        for frozen, user_file in lowered.helper_files.items():
            register_location_map(frozen, lambda line, col, f=user_file: SourceLocation(
                f, line, (col or 0) + 1))
        return LaunchPlan(spec, None, "cpu", cpu_function=fn, writable=writable,
                          arrays=arrays, scalar_types=scalars)

    # ---- checks ------------------------------------------------------------------
    def check_aliases(self, plan: LaunchPlan, args: list[Any]) -> list[tuple]:
        """AliasError if a written argument overlaps any other; returns ledger claims.

        Also refused, even inside ``tl.unchecked()``: a ``tl.Out``/``tl.InOut`` tensor
        whose own elements overlap (AliasError), any array with negative strides, a
        written tensor over read-only memory or over the copy ``tl.tensor()`` made of
        an array it could not share (LaunchError); see :meth:`_refuse_layout`."""
        params = self.definition.analysis.params
        ranges = []
        writable = plan.writable
        for i in plan.arrays:
            t = _tensor_of(args[i])
            flags = t._layout
            if flags is None:
                flags = t._layout_flags()
            st = t._storage
            if flags or (writable[i] and (st.readonly or st.copied_from is not None)):
                self._refuse_layout(params[i], t, flags, writable[i])
            lo, hi = t.byte_range()
            ranges.append((i, st.space, lo, hi))
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

    def _refuse_layout(self, param: Any, t: Any, flags: int, writable: bool) -> None:
        """Raise for what no launch can take (a tensor ``check_aliases`` flagged); return
        for what is only flagged (an In view whose elements overlap: a broadcast)."""
        from tilelab.runtime.tensor import NEGATIVE_STRIDES, OVERLAPPING

        name, kind = self.definition.name, param.kind
        what = f"{name}(): {param.name!r} (tl.{kind})"
        layout = f"shape {t.shape}, strides {t.strides} in elements"
        if flags & NEGATIVE_STRIDES:
            raise LaunchError(
                f"{what} has negative strides ({layout}), a reversed view such as "
                "a[::-1]; cuTile kernels take arrays with non-negative strides only, so "
                "tilelab refuses them on the GPU and on the CPU backend alike",
                hint="pass a copy in increasing order (t.contiguous(), "
                     "np.ascontiguousarray(a)) and reverse in the kernel or afterwards")
        if flags & OVERLAPPING and kind in ("Out", "InOut"):
            zero = [d for d, (n, st) in enumerate(zip(t.shape, t.strides))
                    if st == 0 and n > 1]
            why = (f"dimension {zero[0]} of size {t.shape[zero[0]]} has stride 0, as in "
                   "a broadcast or .expand() view" if zero else
                   "its strides make different indices reach the same element, as in an "
                   "as_strided view")
            raise AliasError(
                f"{what} is a tensor whose own elements overlap in memory ({layout}: "
                f"{why}); the blocks that own different tiles of it would write the same "
                "memory",
                hint="pass a contiguous copy as the output (tl.empty(shape) or "
                     "np.ascontiguousarray(a)) and copy the result back if you need it "
                     "there")
        if writable and t._storage.readonly:
            raise LaunchError(f"{what} is written by the kernel, but its memory is "
                              "read-only (a read-only array or a DLPack export marked "
                              "read-only)",
                              hint="pass a writable array (e.g. a copy: np.array(a))")
        if writable and t._storage.copied_from is not None:
            raise LaunchError(
                f"{what} is written by the kernel, but its tensor is the copy that "
                f"tl.tensor() made of {t._storage.copied_from}: the launch's writes "
                "would never reach that array",
                hint="pass an array tl.tensor() can share, in native byte order with "
                     "strides in whole elements (a = np.ascontiguousarray(a, "
                     "dtype=a.dtype.newbyteorder('='))); or make the copy yourself "
                     "(t = tl.tensor(a).clone()) and read the result from t")

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
            fixed = getattr(self.kernel, "fixed_grid", None)
            if fixed is not None:
                return fixed
            raise LaunchError(f"{self.definition.name}() has no partitioned argument to infer "
                              "its grid from", hint="pass grid=(x, y, z)")
        if plan.device == "gpu":
            from tilelab.runtime.device import gpu as get_gpu

            return spec.grid(get_gpu().num_sms)
        from tilelab.runtime.device import num_sms

        return spec.grid(num_sms("cpu"))

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
        norm, device = self.prepare(args)
        if grid is None and _empty_partition(norm) is not None:
            return None if sync or capture.current_graph() is not None else _done_future(
                self.definition.name)
        plan = self.plan(norm, device)
        g = self.grid_for(plan, grid)
        claims = self.check_aliases(plan, norm)
        graph = capture.current_graph()
        if graph is not None:
            graph.record(self, plan, norm, g, claims)
            return None
        if device == "gpu":
            cache = grid is None and trace is None and checks_enabled() and _native(args)
            fast = _GpuLaunch(self, plan, args, norm, g, claims, cache)
            if fast.match is not None:
                # an identical launch again (same objects) skips straight to the driver
                if len(self._fast) >= _FAST_CACHE_SIZE:
                    self._fast.clear()
                self._fast[hash(args)] = fast
            result = fast.run(args, stream, sync, True)
        else:
            result = self._launch_cpu(plan, norm, g, claims, sync, trace)
        if _events.LISTENERS:
            _events.emit(_events.LaunchEvent(self.kernel, tuple(norm), plan.spec, g, device,
                                             sync, self.last_trace if device == "cpu"
                                             else None))
        return result

    def prepared(self, args: tuple) -> _GpuLaunch | None:
        """The prepared launch filed under these arguments' hash, if any (whether it was
        made for these very objects is for ``_GpuLaunch.run`` to check)."""
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
        # numpy views of the arguments' memory, unchecked: the launch holds the borrows
        out = []
        for a in args:
            t = _tensor_of(a)
            out.append(t._host_view() if t is not None else a)
        return out + list(plan.spec.extra_constants)

    def run_cpu(self, plan: LaunchPlan, args: list[Any], grid, *, trace: bool,
                races: bool, order: str = "sequential", seed: int | None = None,
                sample_blocks: int | None = None):
        from tilelab.interp import interpret

        call = self.cpu_call_args(plan, args)
        return interpret(plan.cpu_function, *call, grid=grid, trace=trace or races,
                         order=order, seed=seed, sample_blocks=sample_blocks, races=races)

    def _launch_cpu(self, plan, args, grid, claims, sync, trace):
        # The borrows are taken before the kernel runs and held while it runs: another
        # thread's conflicting host access or launch meanwhile raises BorrowError.
        tensors = [t for t in map(_tensor_of, args) if t is not None]
        rec = LaunchRecord(self.definition.name, call_site(), "cpu")
        LEDGER.begin(rec, claims, tensors, [t._storage for t in tensors])
        keep = False
        try:
            unsafe = self.definition.options.unsafe
            want_trace = bool(trace) or unsafe
            result = self.run_cpu(plan, args, grid, trace=want_trace, races=unsafe)
            self.last_trace = result if want_trace else None
            if unsafe and result is not None and getattr(result, "has_races", False):
                result.raise_on_race()
            keep = not sync
        finally:
            LEDGER.end(rec, keep)
        if sync:
            return None
        return _Future(rec)


def _empty_partition(args: Sequence[Any]) -> Any:
    """A partition among ``args`` that has no tile (its tensor has a 0-size dimension)
    when every partition among them has none (then the launch has no block to run),
    else None (a launch mixing empty and non-empty partitions is left to the checks of
    the tile grids)."""
    _, Partition = _tensor_types()
    empty = None
    for a in args:
        if isinstance(a, Partition):
            if 0 not in a.tensor.shape:
                return None
            if empty is None:
                empty = a
    return empty


def _done_future(kernel: str) -> _Future:
    """The future of a launch that had nothing to run: already done, holding nothing."""
    rec = LaunchRecord(kernel, "<no launch: an empty partition>", None)
    rec.observed = True
    return _Future(rec)


_FAST_CACHE_SIZE = 256
_SCALARS = (bool, int, float)
#: what ``_GpuLaunch.run`` returns when the prepared launch does not describe the
#: arguments it was given (it launched nothing): the caller takes the full path
_STALE = object()


class _Pin:
    """The arguments of a prepared launch, held by its pending launches' records (one
    object for all of them, rather than a tuple each for the garbage collector to
    scan); the prepared launch refers to it weakly."""

    __slots__ = ("__weakref__", "args")

    def __init__(self, args: tuple):
        self.args = args


def _dead_ref() -> None:
    """A weak reference whose object is gone (what ``_GpuLaunch.pin`` starts as)."""


class _Same:
    """Equal only to this very object: stands for a scalar argument in a prepared
    launch's ``match`` (``1``, ``1.0`` and ``True`` compare and hash alike, but a kernel
    specializes on their types)."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value   # also keeps it alive, so that no other object takes its id

    def __eq__(self, other: object) -> bool:
        return other is self.value

    __hash__ = None  # type: ignore[assignment]


def _match_of(args: Sequence[Any]) -> tuple | None:
    """What ``args == match`` checks a later launch's arguments against: a weak proxy of
    each tensor or partition (equal only to its referent, as these compare by identity,
    and raising ReferenceError once it is gone) and each scalar as :class:`_Same`. One C
    comparison then tells whether a launch passes the very objects prepared for, without
    keeping them alive. None when an argument type defines its own ``==``."""
    out = []
    for a in args:
        if type(a) in _SCALARS:
            out.append(_Same(a))
        elif type(a).__eq__ is object.__eq__:
            out.append(weakref.proxy(a))
        else:
            return None
    return tuple(out)


#: the borrow ledger's per-stream logs (never rebound), read on every prepared launch
_LOGS = LEDGER._logs
#: whether repeated launches call cuLaunchKernel directly (False: cuda.core.launch)
_DRIVER_LAUNCH = [os.environ.get("TILELAB_LAUNCH", "driver") != "cuda.core"]
_SUCCESS: list = [None]
_CTYPE = {"int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32,
          "int64": ctypes.c_int64, "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16,
          "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64, "float32": ctypes.c_float,
          "float64": ctypes.c_double, "bool": ctypes.c_bool}


_cuLaunchKernel: list = [None]
#: the native module's launch/launch_on/sync (None: launch through cuda-bindings)
_native_launch = _native_launch_on = _native_sync = None
#: the native module's prepare, for _GpuLaunch (None: no native launch)
_native_prepare = None
#: [the native module's hot(prepared, args)]: Kernel.launch_async's C path for repeated
#: launches on the default stream (None: Python only)
_HOT: list = [None]


def _default_gpu():
    """The GPU, with the driver entry points the fast path uses bound once."""
    from cuda.bindings import driver

    from tilelab.runtime.device import gpu

    if _cuLaunchKernel[0] is None:
        _SUCCESS[0] = driver.CUresult.CUDA_SUCCESS
        _cuLaunchKernel[0] = driver.cuLaunchKernel
        g = gpu()   # (loads libcuda before the native module binds to it)
        if _DRIVER_LAUNCH[0]:
            from tilelab.runtime import native

            mod = native.load()
            if mod is not None:
                _bind_native(mod)
        return g
    return gpu()


def _bind_native(mod: Any) -> None:
    """Launch prepared launches through the native module ``mod`` (see
    :mod:`tilelab.runtime.native`), its C async path included unless
    ``TILELAB_HOT=0`` or it cannot bind to these classes' slots."""
    global _native_launch, _native_launch_on, _native_sync, _native_prepare
    _native_launch, _native_launch_on = mod.launch, mod.launch_on
    _native_sync, _native_prepare = mod.sync, mod.prepare
    _HOT[0] = None
    if os.environ.get("TILELAB_HOT", "1") == "0":
        return
    try:
        mod.bind_hot(_GpuLaunch, PreparedRecord, _Future, LaunchInfo, _FREE_EPOCH,
                     _SPECIAL_MODES, _LOGS, LEDGER.push, LEDGER._appended, _launch_failed,
                     _Pin, _PKG_DIR)
    except (TypeError, AttributeError):   # another layout of these classes: Python only
        return
    try:
        mod.bind_match(_Same)   # (without it the C path compares scalars through ==)
    except (TypeError, AttributeError):
        pass
    _HOT[0] = mod.hot


def _launch_failed(fast: "_GpuLaunch", err: int) -> None:
    """Raise the LaunchError of a prepared launch whose cuLaunchKernel returned ``err``
    (any path: cuda-bindings, the native call, the native async path), located at the
    user's launching line."""
    raise locate(LaunchError(f"launch of {fast.name!r} (grid {fast.grid}) failed: "
                             f"{_driver_error(err)}"))


def _driver_error(err: int) -> str:
    """A CUresult as its name and the driver's description."""
    from cuda.bindings import driver

    try:
        res = driver.CUresult(err)
    except ValueError:   # a code this cuda-bindings does not know
        return f"CUresult {err}"
    try:
        desc = driver.cuGetErrorString(res)[1]
    except Exception:  # noqa: BLE001 - the name alone says enough
        return res.name
    return f"{res.name}: {desc.decode() if isinstance(desc, bytes) else desc}"


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
    those objects and unfreed, checks the borrow ledger, and calls the driver."""

    __slots__ = ("launcher", "definition", "helpers", "changed", "name", "match", "storages",
                 "claims",
                 "words", "config", "kernel", "epoch", "free_epoch", "fault", "params",
                 "grid", "handle", "gpu", "tls", "argv", "info", "pin", "caller", "native")

    def __init__(self, launcher: Launcher, plan: LaunchPlan, args: Sequence[Any],
                 norm: list[Any], grid: tuple, claims: list, cache: bool = False):
        from cuda.core import LaunchConfig

        from tilelab.runtime.memory import FREE_EPOCH

        self.launcher = launcher
        self.definition = launcher.definition
        self.helpers = launcher.definition.analysis.program
        self.changed = self.helpers.changed
        self.name = launcher.definition.name
        #: None: made for one launch only (not in the kernel's cache of prepared launches)
        self.match = _match_of(args) if cache else None
        tensors = [t for t in map(_tensor_of, norm) if t is not None]
        # weak: a prepared launch must not keep memory alive after its tensors are gone
        self.storages = tuple(weakref.ref(st) for st in
                              {id(t.storage): t.storage for t in tensors}.values())
        self.claims = claims
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
        self.gpu = g = _default_gpu()
        #: the GPU's per-thread "context is current" flag (GPU.make_current sets it)
        self.tls = g._current
        # cuLaunchKernel's arguments for tilelab's default stream, handles as plain ints
        # (cuda-bindings converts those faster than its handle objects)
        self.argv = (int(self.handle), *grid, 1, 1, 1, 0, g.stream_handle, self.params[0], 0)
        #: the same, packed for the native module's launch (None: no native module)
        self.native = None if _native_prepare is None else _native_prepare(
            int(self.handle), *grid, int(g.stream_handle), self.params[0])
        #: what its launch records on tilelab's default stream share
        self.info = LaunchInfo(self.name, g.stream_handle, None, g.stream, claims)
        self.pin = _dead_ref
        #: the code that made the last async launch, known to lie outside tilelab
        self.caller = None

    def valid(self) -> bool:
        """Whether the prepared launch still holds (helpers unchanged, no argument freed,
        no unchecked block or graph capture open); ``run`` asks only when one of those
        may have changed. Whether the arguments are the same objects is ``run``'s check."""
        if self.epoch != self.definition.helper_epoch or (
                self.helpers.bindings and self.helpers.changed()):
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

    def run(self, args: tuple, stream: Any, sync: bool, fresh: bool = False) -> Any:
        """Launch with ``args`` (the objects this was prepared for; ``fresh``: just
        prepared for them, so unchecked); returns None (sync), a Future (async), or
        ``_STALE`` having launched nothing when this does not describe ``args`` anymore.

        This is every repeated launch's host path, so it is written flat: no call it
        can avoid, the rare conditions tested first by one cheap comparison each.
        ``native_launch.c``'s ``nl_hot`` does the same for a repeated async launch on
        the default stream, in C, and leaves the rarer cases to this: keep the two alike.
        """
        if not fresh:
            try:
                if args != self.match:   # not the very objects (see _match_of)
                    return _STALE
            except ReferenceError:       # an argument it was made for is gone
                return _STALE
            if (self.epoch != self.definition.helper_epoch or _SPECIAL_MODES[0]
                    or self.free_epoch != _FREE_EPOCH[0]) and not self.valid():
                return _STALE
            if self.changed():   # the check's snapshot: one identity compare per binding
                return _STALE
        if stream is None:
            g = self.gpu
            try:
                self.tls.ok   # noqa: B018 - set once the context is current on this thread
            except AttributeError:
                g.make_current()
            s = g.stream
            key = g.stream_handle
            argv = self.argv
        else:
            from tilelab.runtime.streams import resolve_stream, stream_key

            s = resolve_stream(stream)
            key = stream_key(s)
            argv = self.argv[:8] + (int(s.handle),) + self.argv[9:]
        logs = _LOGS
        if logs and (len(logs) != 1 or key not in logs):  # other streams have pending work
            LEDGER.check_launch(self.name, self.claims, key)
        nat = self.native
        if nat is not None:
            err = _native_launch(nat) if stream is None else _native_launch_on(nat, argv[8])
            if err:
                _launch_failed(self, err)
            if sync:
                err = _native_sync(argv[8])
                if err:
                    raise self.fault(RuntimeError(_driver_error(err))) from None
                return None
        elif _DRIVER_LAUNCH[0]:
            try:
                err = _cuLaunchKernel[0](*argv)[0]
            except TypeError:  # a cuda-bindings without this signature: use cuda.core
                _DRIVER_LAUNCH[0] = False
                return self.run(args, stream, sync, True)
            if err != _SUCCESS[0]:
                _launch_failed(self, int(err))
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
        # the user's launching line, as (code, instruction offset): frame 1 is tilelab's
        # (Kernel.launch_async or Launcher.launch); its line is looked up only for a message
        f = _getframe(2)
        code = f.f_code
        if code is not self.caller:   # (a repeat from the same code needs no walk)
            while code.co_filename.startswith(_PKG_DIR) and f.f_back is not None:
                f = f.f_back
                code = f.f_code
            if not code.co_filename.startswith(_PKG_DIR):
                self.caller = code
        # the record keeps the arguments (and so their memory) alive while it is pending;
        # the pending launches share one _Pin of them
        pin = self.pin()
        if pin is None:
            pin = _Pin(args)
            self.pin = weakref.ref(pin)
        info = self.info
        if key != info.stream:  # another stream (not kept: it must not outlive its user)
            info = LaunchInfo(self.name, key, None, s, self.claims)
        rec = PreparedRecord(info, code, f.f_lasti, pin)
        log = _LOGS.get(key)
        if log is None:
            LEDGER.push(rec)
        else:   # LEDGER.append(log, rec), inlined
            log.append(rec)
            if _LOGS.get(key) is not log or not len(log) & 255:
                LEDGER._appended(log, rec)
        return _Future(rec, self.fault)
