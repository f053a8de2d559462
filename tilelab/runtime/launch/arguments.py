"""A launch's arguments as a kernel takes them: tensors, partitions and exact scalars.

:func:`normalize` is the first step of every launch that nothing prepared (see
``Launcher.first_launch``): it turns each argument into what its parameter takes (a
foreign array borrowed as a tensor without a copy, a ``ct.Constant``'s value made
exact, a scalar checked to be an exact bool/int/float or a numpy scalar of a kernel
dtype) and finds the one device they all live on. :func:`tensor_of` is how the rest of
the launch machinery finds the memory behind an argument.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from tilelab.compiler.definition import KernelDefinition
from tilelab.compiler.signature import ArraySpec, ConstantValue, PartitionSpec
from tilelab.compiler.values import EXACT_SCALARS, constant_value, scalar_value
from tilelab.errors import LaunchError

__all__ = ["normalize", "to_kernel_arg", "tensor_of", "empty_partition"]


def _tensor_types():
    # (imported when first needed: tensors and partitions sit beside the launch
    # machinery, and a kernel's definition needs neither)
    from tilelab.runtime.partition import Partition
    from tilelab.runtime.tensor import Tensor

    return Tensor, Partition


def normalize(d: KernelDefinition, args: Sequence[Any]) -> tuple[list[Any], str]:
    """(the arguments as kernel ``d`` takes them, ``"gpu"`` or ``"cpu"``): each one
    through :func:`to_kernel_arg` (a ``ct.Constant``'s through
    :func:`~tilelab.compiler.values.constant_value`), checked to be unfreed and to live
    on one device; with no array at all, the default backend's device.

    Example:
        >>> import tilelab as tl
        >>> @tl.kernel
        ... def neg(z: tl.Out, x: tl.In):
        ...     z.store(-tl.load_like(x, z))
        >>> x, z = tl.zeros(8, device="cpu"), tl.empty(8, device="cpu")
        >>> args, device = normalize(neg.definition, (z.partition(8), x))
        >>> device, args[1] is x
        ('cpu', True)
    """
    params = d.analysis.params
    if len(args) != len(params):
        sig = ", ".join(p.name for p in params)
        raise LaunchError(f"{d.name}() takes {len(params)} arguments ({sig}), got "
                          f"{len(args)}")
    norm = [_constant(a, p.name, d.name) if p.kind == "constant" else
            to_kernel_arg(a, p.name, d.name) for p, a in zip(params, args)]
    devices = {}
    for p, a in zip(params, norm):
        t = tensor_of(a)
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


def to_kernel_arg(value: Any, param: str, kernel: str) -> Any:
    """Tensors, partitions and scalars pass through; foreign arrays (numpy, torch, ...)
    are borrowed as tensors without a copy. Raises LaunchError for what cannot be an
    argument (a ``tl.spec``, which has no memory, an object no tensor can wrap, or a
    number that is not an exact bool/int/float or a numpy scalar of a kernel dtype:
    :func:`~tilelab.compiler.values.scalar_value`).

    Example:
        >>> import numpy as np
        >>> to_kernel_arg(np.zeros(4, np.float32), "x", "k").shape
        (4,)
    """
    if type(value) in EXACT_SCALARS:
        return value
    Tensor, Partition = _tensor_types()
    if isinstance(value, (Tensor, Partition)):
        return value
    if isinstance(value, (int, float, np.generic)):
        # a numpy scalar of a kernel dtype, else refused (subclasses' own operators
        # would run inside the kernel): see tilelab.compiler.values
        return scalar_value(value, param, f"{kernel}()")
    if isinstance(value, (ArraySpec, PartitionSpec)):
        raise LaunchError(f"{kernel}(): argument {param!r} is a tl.spec description, which "
                          "has no memory; specs are for kernel.compile(...)",
                          hint="pass a tensor (tl.empty, tl.tensor, ...) to launch")
    from tilelab.runtime.foreign import borrow

    try:
        # a foreign array stays where it lives, borrowed without a copy (a torch or cupy
        # GPU array on its framework's current stream, which the launch then runs on)
        return borrow(value)
    except (TypeError, ValueError) as e:
        raise LaunchError(f"{kernel}(): cannot use argument {param!r} "
                          f"({type(value).__name__}): {e}") from None


def _constant(value: Any, param: str, kernel: str) -> bool | int | float:
    """A ``ct.Constant`` argument as the kernel gets it: an exact bool/int/float (a
    numpy scalar converted), else LaunchError (see :mod:`tilelab.compiler.values`)."""
    if type(value) is ConstantValue:
        value = value.value
    return constant_value(value, param, f"{kernel}()")


def tensor_of(arg: Any) -> Any:
    """The tensor an argument is or partitions, else None (a scalar or constant).

    Example:
        >>> import tilelab as tl
        >>> x = tl.zeros(8, device="cpu")
        >>> tensor_of(x.partition(4)) is x, tensor_of(2.0)
        (True, None)
    """
    Tensor, Partition = _tensor_types()
    if isinstance(arg, Partition):
        return arg.tensor
    if isinstance(arg, Tensor):
        return arg
    return None


def empty_partition(args: Sequence[Any]) -> Any:
    """A partition among ``args`` that has no tile (its tensor has a 0-size dimension)
    when every partition among them has none (then the launch has no block to run),
    else None (a launch mixing empty and non-empty partitions is left to the checks of
    the tile grids).

    Example:
        >>> import tilelab as tl
        >>> empty = tl.zeros((0, 4), device="cpu").partition((2, 4))
        >>> empty_partition([empty, 1.0]) is empty
        True
    """
    _, Partition = _tensor_types()
    empty = None
    for a in args:
        if isinstance(a, Partition):
            if 0 not in a.tensor.shape:
                return None
            if empty is None:
                empty = a
    return empty
