"""Launch plans: a kernel's specialization for one argument signature, its code loaded.

A plan is made once per (device, argument signature) by :func:`make_plan` and kept in
the launcher's bounded table: on the GPU it holds the compiled artifacts and the loaded
``cuda.core`` kernel (shared by the plans of one compiled specialization through the
launcher's table of loaded code), on the CPU the lowered cuTile Python function the
interpreter runs. A signature is what specializes the kernel (array specs, scalar
dtypes, constant values), never a scalar's value. :func:`make_plan` is the one place
a plan is made; ``Launcher.first_launch`` is the one way a launch reaches it.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tilelab.compiler.artifacts import Artifacts
from tilelab.compiler.definition import KernelDefinition
from tilelab.compiler.dtypes import to_numpy_dtype
from tilelab.compiler.safety.kinds import writes
from tilelab.compiler.specialize import Specialization
from tilelab.errors import LaunchError, SourceLocation

from .arguments import tensor_of
from .lru import Lru

__all__ = ["LaunchPlan", "make_plan", "code_table"]

_NP_SCALAR = {"bool": np.bool_, "int8": np.int8, "int16": np.int16, "int32": np.int32,
              "int64": np.int64, "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32,
              "uint64": np.uint64, "float16": np.float16, "float32": np.float32,
              "float64": np.float64}


@dataclass
class LaunchPlan:
    """A specialization ready to launch: its artifacts, layouts and loaded code.

    Example:
        >>> import tilelab as tl
        >>> @tl.kernel
        ... def neg(z: tl.Out, x: tl.In):
        ...     z.store(-tl.load_like(x, z))
        >>> x = tl.zeros(8, device="cpu")
        >>> z = tl.empty(8, device="cpu")
        >>> args, device = neg._launcher.prepare((z.partition(8), x))
        >>> neg._launcher.plan(args, device).device
        'cpu'
    """

    spec: Specialization
    artifacts: Artifacts | None
    device: str                     # "gpu" or "cpu"
    cu_kernel: Any = None           # cuda.core Kernel (GPU)
    cpu_function: Any = None        # the lowered cuTile Python function (CPU)
    writable: tuple[bool, ...] = ()
    arrays: tuple[int, ...] = ()    # indices of array arguments
    scalar_types: dict[int, Any] = field(default_factory=dict)
    #: whether this GPU may start the kernel with programmatic dependent launch: an
    #: sm_90+ device, and the kernel waits for the previous one before touching memory
    #: (``Artifacts.waits_for_previous_grid``); ``TILELAB_PDL`` decides at each launch
    #: path whether it does
    pdl: bool = False
    #: the parameters a kernel that waits later (``tl.wait_for_previous_kernel()``)
    #: reads before its wait, when those reads are all it does before it
    #: (``tileir.reads_before_wait``, sm_90+); None otherwise. A graph may start
    #: such a kernel early only after a kernel that writes none of their memory
    early_reads: frozenset | None = None
    #: whether the kernel lets the next one start only after its own wait
    #: (``Artifacts.triggers_after_wait``): a kernel with early reads may be started
    #: early after this one only if this one started normally or this holds (False
    #: where unknown: the CPU backend builds no CUDA graph)
    triggers_after_wait: bool = False


#: loaded GPU code kept per kernel definition, one per compiled specialization
CODE_TABLE_SIZE = 64
_CODE: "weakref.WeakKeyDictionary[KernelDefinition, Lru]" = weakref.WeakKeyDictionary()


def code_table(d: KernelDefinition) -> Lru:
    """The GPU code loaded for kernel ``d``, by ``(arch, Specialization.key())``: one
    table per definition, shared by its launchers (a kernel and its grid-bound copies),
    bounded by :data:`CODE_TABLE_SIZE`.

    Example:
        >>> import tilelab as tl
        >>> @tl.kernel
        ... def neg(z: tl.Out, x: tl.In):
        ...     z.store(-tl.load_like(x, z))
        >>> table = code_table(neg.definition)
        >>> table is code_table(neg.definition), len(table), table.capacity
        (True, 0, 64)
    """
    table = _CODE.get(d)
    if table is None:
        table = _CODE[d] = Lru(CODE_TABLE_SIZE)
    return table


def make_plan(d: KernelDefinition, args: list[Any], device: str) -> LaunchPlan:
    """Specialize kernel ``d`` for ``args`` and load its code for ``device`` ("gpu":
    compile, or find in the cache, and load the cubin; "cpu": the lowered function).

    On the GPU a plan whose specialization compiles to code already loaded for ``d``
    (the same layouts and constants, arrays of other shapes: :func:`code_table`) takes
    it from there, without a cache lookup, a Tile IR check or a cubin load.

    Example:
        >>> import tilelab as tl
        >>> @tl.kernel
        ... def neg(z: tl.Out, x: tl.In):
        ...     z.store(-tl.load_like(x, z))
        >>> x, z = tl.zeros(8, device="cpu"), tl.empty(8, device="cpu")
        >>> make_plan(neg.definition, [z.partition(8), x], "cpu").writable
        (True, False)
    """
    spec = d.specialize(args)
    writable = tuple(writes(p.kind) for p in d.analysis.params)
    arrays = tuple(i for i, a in enumerate(args) if tensor_of(a) is not None)
    scalars = {i: _NP_SCALAR.get(lay.dtype) or to_numpy_dtype(lay.dtype).type
               for i, lay in enumerate(spec.layouts) if lay.kind == "scalar"}
    if device == "gpu":
        art, cu_kernel = _load_gpu(d, args, spec, code_table(d))
        pdl = _pdl_capable(art)
        return LaunchPlan(spec, art, "gpu", cu_kernel=cu_kernel, writable=writable,
                          arrays=arrays, scalar_types=scalars, pdl=pdl,
                          early_reads=None if pdl else _early_reads(d, spec, art),
                          triggers_after_wait=art.triggers_after_wait)
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


def _pdl_capable(art: Artifacts) -> bool:
    """Whether a launch of ``art`` may use programmatic dependent launch (see
    ``LaunchPlan.pdl``): built for sm_90 or newer, waiting before any memory access."""
    return _sm90(art) and art.waits_for_previous_grid


def _early_reads(d: KernelDefinition, spec: Any, art: Artifacts) -> frozenset | None:
    """``LaunchPlan.early_reads`` of a kernel that does not wait first."""
    if not _sm90(art) or "gdc_wait_tko" not in (art.tileir or ""):
        return None
    from tilelab.compiler.tileir import reads_before_wait

    return reads_before_wait(art.tileir, d.lowered(spec.plan), spec) or None


def _sm90(art: Artifacts) -> bool:
    digits = "".join(ch for ch in art.arch.split("_")[-1] if ch.isdigit())
    return bool(digits) and int(digits) >= 90


def _load_gpu(d: KernelDefinition, args: list[Any], spec: Specialization,
              code: Lru) -> tuple[Artifacts, Any]:
    """(artifacts, the loaded cuda.core kernel) of ``d`` for ``args`` on this GPU,
    from ``code`` when it holds them (see :func:`make_plan`)."""
    from tilelab.runtime.device import gpu as get_gpu

    gpu = get_gpu()
    key = (gpu.arch, d.helper_epoch, spec.key())
    loaded = code.get(key)
    if loaded is not None:
        return loaded
    art = d.compile(*args, arch=gpu.arch)
    from cuda.core import ObjectCode

    try:
        obj = ObjectCode.from_cubin(art.cubin)
        loaded = art, obj.get_kernel(art.symbol)
    except Exception as e:
        raise LaunchError(f"cannot load the cubin of {d.name!r} for {gpu.arch} on "
                          f"{gpu.name}: {e}",
                          hint="the driver must support CUDA 13 tile launches "
                               "(r580 or newer)") from None
    code[key] = loaded
    return loaded
