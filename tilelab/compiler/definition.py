"""A checked kernel definition and its compile step (no runtime, no GPU needed).

``@tl.kernel`` builds one of these: it captures and checks the source immediately
(so unsafe code fails where it is written), and compiles on demand for the specs of
example arguments. The runtime's launchable kernel wraps it.
"""
from __future__ import annotations

import time
import types
from dataclasses import dataclass
from typing import Any, Sequence

from tilelab.compiler.artifacts import Artifacts
from tilelab.compiler.cache import DiskCache, default_cache
from tilelab.compiler.export import check_arch, compile_lowered
from tilelab.compiler.lower import LoweredKernel, LoweringPlan, lower_kernel
from tilelab.compiler.safety import KernelAnalysis, analyze_kernel, recheck
from tilelab.compiler.signature import PartitionSpec
from tilelab.compiler.specialize import Specialization, specialize
from tilelab.compiler.tileir import check_partition_tiles
from tilelab.limits import MAX_TILE_ELEMENTS, tile_elements

__all__ = ["KernelOptions", "KernelDefinition"]

_HINTS = ("occupancy", "num_ctas", "num_worker_warps")


@dataclass(frozen=True)
class KernelOptions:
    """Options of ``@tl.kernel``: safety opt-outs and cuTile's compiler hints.

    Example:
        >>> KernelOptions(occupancy=2).hints()
        {'occupancy': 2, 'opt_level': 3}
    """

    unsafe: bool = False
    check_bounds: bool = True
    occupancy: Any = None
    num_ctas: Any = None
    num_worker_warps: Any = None
    opt_level: int = 3

    def __post_init__(self):
        if not isinstance(self.opt_level, int) or not 0 <= self.opt_level <= 3:
            raise ValueError(f"opt_level must be 0, 1, 2 or 3, got {self.opt_level!r}")
        for name, lo, hi in (("occupancy", 1, 32), ("num_ctas", 1, 16),
                             ("num_worker_warps", 1, 32)):
            v = getattr(self, name)
            if isinstance(v, int) and not isinstance(v, bool) and not lo <= v <= hi:
                raise ValueError(f"{name} must be in [{lo}, {hi}], got {v}")

    def hints(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in _HINTS if getattr(self, k) is not None}
        out["opt_level"] = self.opt_level
        return out


class KernelDefinition:
    """The compiler's view of a ``@tl.kernel`` function.

    Example:
        >>> import tilelab as tl
        >>> def add(z: tl.Out, x: tl.In, y: tl.In):
        ...     z.store(tl.load_like(x, z) + tl.load_like(y, z))
        >>> d = KernelDefinition(add)
        >>> [str(p.kind) for p in d.analysis.params]
        ['Out', 'In', 'In']
    """

    def __init__(self, fn: types.FunctionType, options: KernelOptions | None = None):
        self.fn = fn
        self.name = fn.__name__
        self.options = options or KernelOptions()
        t0 = time.perf_counter()
        self.analysis: KernelAnalysis = analyze_kernel(fn, unsafe=self.options.unsafe)
        self.check_seconds = time.perf_counter() - t0
        self._lowered: dict[LoweringPlan, LoweredKernel] = {}
        #: bumped whenever the kernel is re-checked after a change (launch plans made
        #: under an older epoch are stale)
        self.helper_epoch = 0
        self._needs_check = bool(self.analysis.deferred_calls)

    @property
    def fingerprint(self) -> str:
        """sha256 of the kernel's source text (what the source capture read)."""
        return self.analysis.source.fingerprint

    def specialize(self, args: Sequence[Any]) -> Specialization:
        """The specialization for ``args``; a partition whose tiles pass Tile IR's element
        limit is refused here, where compiling and the CPU backend both start, with the
        same located message (:func:`~tilelab.compiler.tileir.check_partition_tiles`)."""
        spec = specialize(self.analysis, args, kernel_name=self.name,
                          check_bounds=self.options.check_bounds)
        if any(isinstance(s, PartitionSpec) and
               tile_elements(s.tile_shape) > MAX_TILE_ELEMENTS for _n, _k, s in spec.specs):
            check_partition_tiles(self.lowered(spec.plan), spec)
        return spec

    def ensure_checked(self) -> None:
        """Check the kernel again if anything its check resolved changed since, or a
        name was not defined yet when it was defined.

        The fast path is an identity compare per resolved binding (a launch calls it
        too); a change re-checks the captured source against the names as they are
        now, and every lowering (so every compiled or interpreted function) is rebuilt.
        """
        if not self._needs_check and not self.analysis.program.changed():
            return
        recheck(self.fn, self.analysis)
        self._lowered.clear()
        self.helper_epoch += 1
        self._needs_check = False

    def lowered(self, plan: LoweringPlan) -> LoweredKernel:
        """The lowered kernel for a plan (made once per check, then reused)."""
        self.ensure_checked()
        lk = self._lowered.get(plan)
        if lk is None:
            lk = lower_kernel(self.analysis, plan, kernel_fn=self.fn)
            self._lowered[plan] = lk
        return lk

    def lowered_source(self, *example_args: Any) -> str:
        """The cuTile Python this kernel becomes for these example arguments."""
        return self.lowered(self.specialize(example_args).plan).source

    def compile(self, *example_args: Any, arch: str = "sm_90",
                cache: DiskCache | None | bool = True, force: bool = False) -> Artifacts:
        """Compile for the specs of ``example_args`` (tensors, partitions, ``tl.spec``
        descriptions, scalars) without running anything; needs no GPU.
        """
        arch = check_arch(arch)
        t0 = time.perf_counter()
        spec = self.specialize(example_args)
        lk = self.lowered(spec.plan)
        timings = {"check": self.check_seconds, "lower": time.perf_counter() - t0}
        if cache is True:
            cache = default_cache()
        elif cache is False:
            cache = None
        return compile_lowered(self.fn, lk, spec, arch, options=self.options.hints(),
                               cache=cache, force=force, timings=timings,
                               helpers=self.analysis.program.fingerprint(),
                               unsafe=self.options.unsafe)
