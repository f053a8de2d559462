"""What the compiler knows about each argument: specs and their specialization.

A kernel is compiled for *specs* of its arguments, not for the arguments themselves:
dtype, rank, strides, alignment and divisibility of arrays; tile shape and schedule of
partitions; dtypes of scalars; values of constants. Real tensors, numpy arrays and
``tl.spec(...)`` descriptions all reduce to these, so ``kernel.compile`` works without
any memory (and without a GPU).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from tilelab.compiler.dtypes import dtype_name, itemsize
from tilelab.compiler.language import Schedule, row_major
from tilelab.compiler.tile_shapes import MAX_PARTITION_RANK, tile_shape_error
from tilelab.compiler.values import EXACT_SCALARS, describe_type, is_numpy_scalar

__all__ = ["ArraySpec", "PartitionSpec", "ScalarSpec", "ConstantValue", "spec", "c_strides",
           "ArrayTraits", "array_traits", "describe_arg", "scalar_spec", "ArgSpec",
           "MAX_PARTITION_RANK"]

_I32_MAX = 2**31 - 1


def _largest_pow2_divisor(n: int, cap: int = 16) -> int:
    """Largest power of two <= cap dividing n (n == 0 counts as divisible by cap)."""
    n = abs(int(n))
    if n == 0:
        return cap
    d = 1
    while d < cap and n % (d * 2) == 0:
        d *= 2
    return d


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def c_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major (C-contiguous) strides in elements; empty dimensions count as 1.

    Example:
        >>> c_strides((2, 3, 4))
        (12, 4, 1)
    """
    out, acc = [], 1
    for s in reversed(tuple(shape)):
        out.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(out))


@dataclass(frozen=True)
class ArraySpec:
    """Shape, dtype, strides (in elements) and base alignment (bytes) of an array.

    Example:
        >>> import tilelab as tl
        >>> tl.spec((1024, 512), "bf16")
        ArraySpec(shape=(1024, 512), dtype='bfloat16', strides=(512, 1), align=16)
    """

    shape: tuple[int, ...]
    dtype: str
    strides: tuple[int, ...]
    align: int = 16

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def itemsize(self) -> int:
        return itemsize(self.dtype)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def partition(self, tile_shape: int | Sequence[int],
                  schedule: Schedule = row_major) -> "PartitionSpec":
        """Describe this array split into tiles, as ``Tensor.partition`` does (and
        refusing the tile shapes it refuses, with the same located
        :class:`~tilelab.compiler.tile_shapes.TileShapeError`).

        Example:
            >>> import tilelab as tl
            >>> tl.spec((1000,), "f32").partition(256).grid
            (4,)
        """
        return PartitionSpec(self, normalize_tile_shape(tile_shape, self.shape), schedule)


def normalize_tile_shape(tile_shape: int | Sequence[int],
                         shape: Sequence[int]) -> tuple[int, ...]:
    """A partition's tile shape as a tuple of ints, checked against the array's
    ``shape`` and cuTile's rules: a TypeError for what is not ints, a located
    :class:`~tilelab.compiler.tile_shapes.TileShapeError` for a shape no kernel takes.

    Example:
        >>> normalize_tile_shape(128, (4096,)), normalize_tile_shape([64, 32], (300, 200))
        ((128,), (64, 32))
    """
    dims = tile_shape if isinstance(tile_shape, (tuple, list)) else (tile_shape,)
    if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in dims):
        raise TypeError(f"tile shape must be an int or a tuple of ints, got {tile_shape!r}")
    err = tile_shape_error(dims, shape)
    if err is not None:
        raise err
    return tuple(int(d) for d in dims)


@dataclass(frozen=True)
class PartitionSpec:
    """An array split into disjoint tiles, with the schedule that assigns them to blocks.

    Example:
        >>> import tilelab as tl
        >>> p = tl.spec((300, 200), "f32").partition((128, 64))
        >>> p.grid, p.num_tiles
        ((3, 4), 12)
    """

    array: ArraySpec
    tile_shape: tuple[int, ...]
    schedule: Schedule = row_major

    @property
    def grid(self) -> tuple[int, ...]:
        """Tiles per dimension (partial edge tiles included)."""
        return tuple(_cdiv(s, t) for s, t in zip(self.array.shape, self.tile_shape))

    @property
    def num_tiles(self) -> int:
        return math.prod(self.grid)

    @property
    def ndim(self) -> int:
        return self.array.ndim


@dataclass(frozen=True)
class ScalarSpec:
    """A scalar passed by value, with its dtype.

    Example:
        >>> ScalarSpec("float32")
        ScalarSpec(dtype='float32')
    """

    dtype: str


@dataclass(frozen=True)
class ConstantValue:
    """A compile-time constant (a ``ct.Constant`` parameter's value).

    Example:
        >>> ConstantValue(64).value
        64
    """

    value: Any


ArgSpec = ArraySpec | PartitionSpec | ScalarSpec | ConstantValue


def spec(shape: int | Sequence[int], dtype: Any, strides: Sequence[int] | None = None,
         align: int = 16) -> ArraySpec:
    """Describe an array by shape and dtype, for compiling without data.

    ``strides`` are in elements (C-contiguous by default); ``align`` is the byte
    alignment the base address is promised to have.

    Example:
        >>> import tilelab as tl
        >>> tl.spec((64, 64), "float16").strides
        (64, 1)
    """
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"shape {shape} has a negative dimension")
    if strides is None:
        strides = c_strides(shape)
    strides = tuple(int(s) for s in strides)
    if len(strides) != len(shape):
        raise ValueError(f"strides {strides} do not match shape {shape}")
    if align < 1 or align & (align - 1):
        raise ValueError(f"align must be a power of two, got {align}")
    return ArraySpec(shape, dtype_name(dtype), strides, min(int(align), 16))


def scalar_spec(value: Any) -> ScalarSpec:
    """The dtype a Python or numpy scalar is passed with (ints as int32 when they fit):
    all a run-time scalar specializes a kernel on (its value travels with the launch).
    TypeError for anything but an exact bool, int or float or a numpy scalar of a
    kernel dtype (see :mod:`tilelab.compiler.values`).

    Example:
        >>> scalar_spec(3), scalar_spec(2.5), scalar_spec(2**40)
        (ScalarSpec(dtype='int32'), ScalarSpec(dtype='float32'), ScalarSpec(dtype='int64'))
    """
    t = type(value)
    if t is int:
        return ScalarSpec("int32" if -2**31 <= value <= _I32_MAX else "int64")
    if t is float:
        return ScalarSpec("float32")
    if t is bool or t is np.bool_:
        return ScalarSpec("bool")
    if is_numpy_scalar(value):
        return ScalarSpec(dtype_name(value.dtype))
    raise TypeError(f"cannot pass {describe_type(value)} as a scalar; kernels take "
                    "tensors, partitions, exact bools, ints and floats, and numpy scalars "
                    "of kernel dtypes (a subclass's own operators would run inside the "
                    "kernel)")


def describe_arg(value: Any) -> ArgSpec:
    """The spec of an example argument: a spec, a numpy array, a scalar, or any object
    with a ``__tilelab_spec__()`` method (tensors and partitions of the runtime).

    Example:
        >>> import numpy as np
        >>> describe_arg(np.zeros((4, 8), np.float32)).strides
        (8, 1)
    """
    if isinstance(value, (ArraySpec, PartitionSpec, ScalarSpec, ConstantValue)):
        return value
    if type(value) in EXACT_SCALARS or is_numpy_scalar(value):
        return scalar_spec(value)
    if isinstance(value, (bool, int, float, np.generic)):
        # a subclass: refused before any of its own code (even a __getattr__) runs
        return scalar_spec(value)
    hook = getattr(value, "__tilelab_spec__", None)
    if hook is not None:
        return hook()
    if isinstance(value, np.ndarray):
        strides = tuple(s // value.itemsize for s in value.strides)
        addr = value.__array_interface__["data"][0]
        return ArraySpec(tuple(value.shape), dtype_name(value.dtype), strides,
                         _largest_pow2_divisor(addr))
    raise TypeError(f"cannot use {type(value).__name__} as a kernel argument; pass a "
                    "tilelab tensor, a partition, a numpy/torch/cupy array, tl.spec(...), "
                    "or a scalar")


@dataclass(frozen=True)
class ArrayTraits:
    """The facts about an array that a compiled kernel is specialized on.

    Two arrays with equal traits share one cubin. Divisibility facts let tileiras use
    16-byte vector loads and TMA; they are only claimed when they hold.

    Example:
        >>> import tilelab as tl
        >>> array_traits(tl.spec((4096, 4096), "bf16")).shape_div
        (16, 16)
    """

    dtype: str
    ndim: int
    index_dtype: str
    contiguous_last: bool
    shape_div: tuple[int, ...]
    stride_div: tuple[int, ...]
    base_div: int
    nonneg_strides: bool
    may_alias_internally: bool

    def key(self) -> str:
        return (f"{self.dtype}/{self.ndim}/{self.index_dtype}/c{int(self.contiguous_last)}/"
                f"s{self.shape_div}/t{self.stride_div}/b{self.base_div}/"
                f"n{int(self.nonneg_strides)}/a{int(self.may_alias_internally)}")


def array_traits(a: ArraySpec) -> ArrayTraits:
    """Specialization traits of an array spec (see :class:`ArrayTraits`)."""
    extent = sum(abs(st) * max(s - 1, 0) for s, st in zip(a.shape, a.strides))
    big = max([extent, *a.shape, *(abs(s) for s in a.strides)], default=0)
    index_dtype = "int32" if big <= _I32_MAX else "int64"
    contiguous_last = a.ndim > 0 and a.strides[-1] == 1
    shape_div = tuple(_largest_pow2_divisor(s) for s in a.shape)
    stride_div = tuple(1 if (contiguous_last and i == a.ndim - 1)
                       else _largest_pow2_divisor(s) for i, s in enumerate(a.strides))
    # Zero strides (broadcast views) make distinct indices share memory.
    zero_stride = any(st == 0 and s > 1 for s, st in zip(a.shape, a.strides))
    return ArrayTraits(a.dtype, a.ndim, index_dtype, contiguous_last, shape_div, stride_div,
                       a.align, all(s >= 0 for s in a.strides), zero_stride)
