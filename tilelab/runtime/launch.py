"""Launching a kernel: arguments -> checks -> compiled code -> GPU or CPU interpreter.

The hot path of a launch is: turn each argument into a tensor or partition (foreign
arrays are borrowed without copies), look the argument signature up in the kernel's
in-memory table (a miss specializes, compiles or hits the disk cache, and loads the
cubin), check aliasing and borrows, pack the ``cutile_python_v1`` words and launch with
``cuda.core.launch`` (grid = tile blocks, block = (1, 1, 1)). The CPU backend runs the
same lowered kernel in :mod:`tilelab.interp`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from tilelab.compiler.artifacts import Artifacts
from tilelab.compiler.definition import KernelDefinition
from tilelab.compiler.export import _cutile_function
from tilelab.compiler.signature import ArraySpec, PartitionSpec, describe_arg
from tilelab.compiler.specialize import Specialization
from tilelab.errors import AliasError, LaunchError
from tilelab.runtime import capture
from tilelab.runtime.ledger import LEDGER, LaunchRecord, call_site, checks_enabled, unchecked

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

    def __init__(self, definition: KernelDefinition):
        self.definition = definition
        self.plans: dict[tuple, LaunchPlan] = {}
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
        scalars = {i: _NP_SCALAR[lay.dtype] for i, lay in enumerate(spec.layouts)
                   if lay.kind == "scalar"}
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
        norm, device = self.prepare(args)
        plan = self.plan(norm, device)
        g = self.grid_for(plan, grid)
        claims = self.check_aliases(plan, norm)
        graph = capture.current_graph()
        if graph is not None:
            graph.record(self, plan, norm, g, claims)
            return None
        if device == "gpu":
            return self._launch_gpu(plan, norm, g, claims, stream, sync)
        return self._launch_cpu(plan, norm, g, claims, sync, trace)

    def _launch_gpu(self, plan, args, grid, claims, stream, sync):
        from cuda.core import LaunchConfig, launch as cu_launch

        from tilelab.runtime.device import gpu as get_gpu
        from tilelab.runtime.streams import resolve_stream, stream_key

        gpu = get_gpu()
        s = resolve_stream(stream)
        key = stream_key(s)
        LEDGER.check_launch(self.definition.name, claims, key)
        words = self.words(plan, args)
        try:
            cu_launch(s, LaunchConfig(grid=grid, block=(1, 1, 1)), plan.cu_kernel, *words)
        except Exception as e:
            raise LaunchError(f"launch of {self.definition.name!r} (grid {grid}) failed on "
                              f"{gpu.name}: {e}") from None
        if sync:
            try:
                s.sync()
            except Exception as e:
                raise self._fault(e) from None
            return None
        from tilelab.runtime.future import Future

        ev = s.record()
        rec = LaunchRecord(self.definition.name, call_site(), key, ev.is_done)
        LEDGER.add(rec, claims, [_tensor_of(a) for a in args if _tensor_of(a) is not None])
        return Future(rec, wait_fn=ev.sync, stream=s, error_map=self._fault)

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
                         order=order, seed=seed, sample_blocks=sample_blocks)

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

        rec = LaunchRecord(self.definition.name, call_site(), "cpu", lambda: True)
        LEDGER.add(rec, claims, [_tensor_of(a) for a in args if _tensor_of(a) is not None])
        return Future(rec, wait_fn=lambda: None, stream="cpu")
