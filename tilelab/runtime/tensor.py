"""``tl.Tensor`` and its constructors: :func:`tensor` (and :func:`as_tensor`) from any
array-like, sharing memory whenever that is possible, and ``zeros``, ``ones``, ``full``,
``arange``, ``randn`` of new memory.

The class itself, with the two constructors its own methods use (:func:`empty` over new
memory; :func:`from_dlpack`, :func:`borrow_dlpack` and :func:`wrap_memory` over borrowed
memory), is :mod:`tilelab.runtime.tensor_type`, and this module re-exports them:
``tilelab.runtime.tensor`` is the one path to the public tensor API (``import
tilelab.runtime.tensor as T; T.zeros(...)``, ``tl.Tensor``). The layout arithmetic
(overlap, byte hull, alignment) is :mod:`tilelab.runtime.layout`.
"""
from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from tilelab.compiler.dtypes import to_numpy_dtype
from tilelab.runtime import device as _dev
from tilelab.runtime.memory import memset_zero
from tilelab.runtime.tensor_type import (Tensor, _new, _shape_of, empty, from_dlpack,
                                         wrap_memory)

__all__ = ["Tensor", "tensor", "as_tensor", "from_dlpack", "empty", "zeros", "ones", "full",
           "arange", "randn"]


def _from_numpy(arr: np.ndarray, device: str) -> Tensor:
    """A new tensor on ``device`` holding a copy of ``arr``."""
    t = _new(tuple(arr.shape), to_numpy_dtype(arr.dtype), device)
    return t.copy_(arr)


def zeros(shape: Any, dtype: Any = "float32", device: Any = None) -> Tensor:
    """A new tensor of zeros.

    Example:
        >>> import tilelab as tl
        >>> tl.zeros(3, device="cpu").numpy()
        array([0., 0., 0.], dtype=float32)
    """
    t = empty(shape, dtype, device)
    memset_zero(t.data_ptr, t.device, t.nbytes)
    return t


def full(shape: Any, value: Any, dtype: Any = "float32", device: Any = None) -> Tensor:
    """A new tensor with every element ``value`` (cast to ``dtype``).

    Example:
        >>> import tilelab as tl
        >>> tl.full((2,), 7, dtype="int32", device="cpu").numpy()
        array([7, 7], dtype=int32)
    """
    shape, dt = _shape_of(shape), to_numpy_dtype(dtype)
    return _new(shape, dt, _dev.parse_device(device)).copy_(np.asarray(value).astype(dt))


def ones(shape: Any, dtype: Any = "float32", device: Any = None) -> Tensor:
    """A new tensor of ones.

    Example:
        >>> import tilelab as tl
        >>> tl.ones(2, dtype="f16", device="cpu").numpy()
        array([1., 1.], dtype=float16)
    """
    return full(shape, 1, dtype, device)


def arange(start: Any, stop: Any = None, step: Any = 1, *, dtype: Any = None,
           device: Any = None) -> Tensor:
    """Evenly spaced values in [start, stop), like ``numpy.arange``.

    ``dtype`` defaults to int64 for integer arguments and float32 otherwise.

    Example:
        >>> import tilelab as tl
        >>> tl.arange(1, 7, 2, dtype="float32", device="cpu").numpy()
        array([1., 3., 5.], dtype=float32)
    """
    if stop is None:
        start, stop = 0, start
    if dtype is None:
        ints = all(isinstance(v, (int, np.integer)) for v in (start, stop, step))
        dtype = "int64" if ints else "float32"
    dt = to_numpy_dtype(dtype)
    if step == 0:
        raise ValueError("arange: step must not be zero")
    values = np.arange(start, stop, step, dtype=np.float64 if dt.kind == "V" else None)
    return _from_numpy(values.astype(dt), _dev.parse_device(device))


def randn(*shape: Any, dtype: Any = "float32", device: Any = None,
          seed: int | None = None) -> Tensor:
    """Standard-normal random values (fresh each call unless ``seed`` is given).

    bfloat16/float8 values are drawn in float32 and rounded to the nearest.

    Example:
        >>> import tilelab as tl
        >>> tl.randn(2, 3, device="cpu", seed=0).shape
        (2, 3)
    """
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
        shape = shape[0]
    dims, dt = _shape_of(shape), to_numpy_dtype(dtype)
    if dt.kind in "biu":
        raise TypeError(f"randn needs a floating dtype, got {dt.name}")
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(dims, dtype=np.float64 if dt == np.float64 else np.float32)
    return _from_numpy(values.astype(dt), _dev.parse_device(device))


def _native_device(obj: Any) -> str | None:
    """Where a foreign array lives, without touching it: 'cpu', 'cuda:0' or None."""
    if isinstance(obj, np.ndarray):
        return "cpu"
    dev = getattr(obj, "__dlpack_device__", None)
    if dev is not None:
        try:
            kind, _ = dev()
        except Exception:
            return None
        return "cpu" if kind in (1, 3) else "cuda:0" if kind in (2, 13) else None
    if hasattr(obj, "__cuda_array_interface__"):
        return "cuda:0"
    return None


def _unshareable(a: np.ndarray) -> str | None:
    """Why a CPU tensor cannot share ``a``'s memory (None: it can)."""
    try:
        dt = to_numpy_dtype(a.dtype)
    except TypeError:
        return f"a numpy array of dtype {a.dtype}, which tilelab has no type for"
    if not a.dtype.isnative:
        order = "big" if a.dtype.byteorder == ">" else "little"
        return (f"a {order}-endian numpy array (dtype {a.dtype.str!r}), whose byte order "
                "tilelab cannot share")
    if dt != a.dtype:
        return f"a numpy array of dtype {a.dtype} (tilelab's {dt} is laid out differently)"
    if any(s % a.itemsize for s in a.strides):
        return (f"a numpy array whose strides {a.strides} (bytes) are not multiples of its "
                f"item size {a.itemsize}")
    return None


def _borrow_numpy(a: np.ndarray) -> Tensor | None:
    """A CPU tensor sharing ``a``'s memory, or None when its layout cannot be shared."""
    if _unshareable(a) is not None:
        return None
    dt = to_numpy_dtype(a.dtype)
    ptr = a.__array_interface__["data"][0]
    return wrap_memory(ptr, a.shape, tuple(s // a.itemsize for s in a.strides), dt, "cpu",
                       a, readonly=not a.flags.writeable)


def _values(obj: Any, want: np.dtype | None) -> np.ndarray:
    """Python data (lists, scalars, array-likes) as a numpy array of a tilelab dtype."""
    try:
        arr = np.asarray(obj)
    except ValueError as e:
        raise ValueError(f"cannot make a tensor from {type(obj).__name__}: {e}") from None
    if arr.dtype == object:
        raise TypeError(f"cannot make a tensor from {type(obj).__name__} (ragged nested "
                        "sequences or non-numbers?)")
    if want is not None:
        return arr.astype(want)
    if arr.dtype == np.float64 and not isinstance(obj, (np.ndarray, np.generic)):
        arr = arr.astype(np.float32)  # Python floats default to float32, as in torch
    return arr.astype(to_numpy_dtype(arr.dtype), copy=False)


def tensor(obj: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """A tensor from an array-like, sharing memory whenever that is possible.

    Tilelab tensors, numpy arrays and DLPack/CUDA-array-interface objects (torch, cupy,
    jax) that already live on ``device`` with dtype ``dtype`` are wrapped without a copy
    (the tensor borrows their memory and keeps them alive); anything else is copied.
    A numpy array whose layout cannot be shared (non-native byte order, strides that
    are not multiples of the item size) is copied too, and that copy is refused as a
    launch's output (a launch's writes would never reach the array): convert it
    first, or ask for the copy with ``dtype=``.
    ``device=None`` is the default backend's device; ``dtype=None`` keeps the source's
    (Python floats become float32).

    Example:
        >>> import numpy as np, tilelab as tl
        >>> a = np.arange(4, dtype=np.float32)
        >>> t = tl.tensor(a, device="cpu"); a[0] = 9; t.numpy()
        array([9., 1., 2., 3.], dtype=float32)
        >>> tl.tensor([[1, 2], [3, 4]], dtype="bf16", device="cpu").dtype.name
        'bfloat16'
    """
    target = _dev.parse_device(device)
    want = to_numpy_dtype(dtype) if dtype is not None else None
    src: Tensor | None = None
    if isinstance(obj, Tensor):
        src = obj
    elif isinstance(obj, np.ndarray):
        same = want is None or want == obj.dtype
        src = _borrow_numpy(obj) if target == "cpu" and same else None
        if src is None:
            t = _from_numpy(_values(obj, want), target)
            if target == "cpu" and same:
                # a copy where a borrow was asked for: writes to it would never reach
                # obj, so a launch refuses it as an output (Launcher.check_aliases)
                t._storage.copied_from = _unshareable(obj)
            return t
    elif not isinstance(obj, (np.generic, numbers.Number, list, tuple)) and \
            _native_device(obj) is not None:
        src = from_dlpack(obj)
    if src is None:
        return _from_numpy(_values(obj, want), target)
    if src.device == target and (want is None or want == src.dtype):
        return src
    if want is not None and want != src.dtype:
        return empty(src.shape, want, target).copy_(src)
    return src.to(target)


def as_tensor(obj: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """Alias of :func:`tensor` (which already avoids copies), for torch users.

    Example:
        >>> import tilelab as tl
        >>> tl.as_tensor([1.0], device="cpu").dtype
        dtype('float32')
    """
    return tensor(obj, dtype, device)
