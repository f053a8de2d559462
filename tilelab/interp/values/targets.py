"""What the GPU a CPU launch stands for supports: dtypes per target, bfloat16 atomic add.

Why: cuTile compiles values of ``float8_e4m3fn``/``float8_e5m2`` only for sm_90 and newer,
``float4_e2m1fn``/``float8_e8m0fnu`` only for sm_100 and newer, and an atomic add of
bfloat16 only for sm_90 and newer (:mod:`tilelab.limits` holds the table). The
interpreter computes with all of them in numpy, so a kernel that the compiler refuses for
the target would otherwise run on the CPU backend. Each launch names the GPU it stands
for (:attr:`~tilelab.interp.context.LaunchState.arch`): ``interpret(arch=...)``; the
runtime passes ``TILELAB_ARCH``, else this machine's GPU, else sm_90, the target that
``kernel.compile()`` picks without ``arch=``.

Where: cuTile refuses a value of such a dtype at the first operation that takes it as an
operand, after dropping unused code, not where the value is made:
``t = x.astype(ct.float4_e2m1fn)`` compiles for sm_90 while ``t`` is never used, and
``z.store(t.astype(z.dtype))`` is refused at that line. The interpreter does the same: a
tile of such a dtype is made as an :class:`~tilelab.interp.values.tile.UnsupportedTile`, and
the first op that reads its values raises :func:`dtype_error` at the kernel line of that
op; an array argument of such a dtype is an
:class:`~tilelab.interp.values.arrays.UnsupportedArray`, refused at the first load, store,
``num_tiles`` or raw access, while its ``shape``, ``strides`` and ``dtype`` stay
readable (cuTile compiles those for every target); cuTile, and so the interpreter,
names the kernel's parameter that took the array in as the place. Two differences are
known: cuTile folds the conversion of a scalar constant at compile time
(``ct.astype(ct.full((), 2.0, ct.float8_e4m3fn), ct.float32)`` compiles for sm_80),
which the interpreter refuses there; of two arrays of such a dtype, cuTile names the
first parameter, the interpreter the array an op reads first.

Example:
    >>> from tilelab.interp.values.dtypes import DTYPES
    >>> supported(DTYPES["float4_e2m1fn"])      # outside a launch: no target, no refusal
    True
    >>> resolve_arch("10.0")
    'sm_100'
"""
from __future__ import annotations

from tilelab import config
from tilelab.errors import CompileError, LaunchError
from tilelab.interp.context import (active, caller_locations, compile_error,
                                    parameter_location)
from tilelab.interp.values.dtypes import BFLOAT16, TileDType
from tilelab.limits import (ARCHS, BF16_ATOMIC_ADD_MIN_SM, DEFAULT_ARCH, arch_name,
                            atomic_add_arch_message, dtype_arch_hint, dtype_arch_message)

__all__ = ["resolve_arch", "supported", "dtype_error", "array_dtype_error",
           "check_atomic_add"]


def resolve_arch(arch: str | None) -> str:
    """The target a launch stands for: ``arch`` normalized (``"90"``, ``"9.0"`` and
    ``"sm_90"`` are one), or without one ``TILELAB_ARCH``, else sm_90. (The interpreter
    does not look for a GPU: the runtime passes the GPU's arch when there is one.)

    Raises LaunchError for a name tileiras does not compile for."""
    if arch is None:
        return config.arch() or DEFAULT_ARCH
    name = arch_name(arch) if isinstance(arch, str) else None
    if name is None:
        raise LaunchError(f"interpret(): arch={arch!r} is no target tileiras compiles for; "
                          f"it takes {', '.join(ARCHS)}",
                          hint="name the GPU the run stands for, e.g. arch='sm_90'")
    return name


def supported(dtype: TileDType) -> bool:
    """Whether the running launch's target computes with values of ``dtype`` (always
    True outside a launch)."""
    if not dtype.min_sm:
        return True
    state = active()
    return state is None or state.sm >= dtype.min_sm


def dtype_error(dtype: TileDType) -> CompileError:
    """cuTile's refusal of a value of ``dtype`` on the running launch's target, at the
    kernel line of the op that takes it (in a helper: with the calls that led there)."""
    state = active()
    arch = state.arch if state is not None else DEFAULT_ARCH
    message = dtype_arch_message(dtype.name, arch)
    chain = caller_locations()
    if chain:
        message += " (called from " + ", ".join(map(str, chain)) + ")"
    return compile_error(message, hint=dtype_arch_hint(dtype.name, arch))


def array_dtype_error(dtype: TileDType, param: str) -> CompileError:
    """cuTile's refusal of an array argument of ``dtype`` that an op reads or writes on
    the running launch's target: located, as cuTile locates it, at the kernel's
    parameter ``param`` (it refuses the array where the kernel takes it in), else at the
    op's line."""
    where = parameter_location(param)
    if where is None:
        return dtype_error(dtype)
    state = active()
    arch = state.arch if state is not None else DEFAULT_ARCH
    return CompileError(dtype_arch_message(dtype.name, arch), location=where,
                        hint=dtype_arch_hint(dtype.name, arch))


def check_atomic_add(dtype: TileDType) -> None:
    """Refuse an atomic add of bfloat16 on a target before sm_90, as cuTile does."""
    if dtype is not BFLOAT16:
        return
    state = active()
    if state is not None and state.sm < BF16_ATOMIC_ADD_MIN_SM:
        raise compile_error(
            atomic_add_arch_message(dtype.name, state.arch),
            hint=f"accumulate in float32 (an atomic add of float32 or float16 compiles for "
                 f"{state.arch}), or target sm_{BF16_ATOMIC_ADD_MIN_SM} or newer")
