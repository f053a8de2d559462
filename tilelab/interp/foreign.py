"""Numpy views of foreign CPU arrays (torch, jax, tilelab tensors...), without copies.

``np.from_dlpack`` takes the standard dtypes but not bfloat16 or the float8 types. For
those the producer's DLPack capsule is relabelled as unsigned integers of the same width
before numpy consumes it, and the resulting array is viewed with the ``ml_dtypes`` type:
the memory stays the producer's (kernel writes land in the tensor), and numpy's own
capsule handling keeps the producer alive and calls its deleter.
"""
from __future__ import annotations

import ctypes
from typing import Any

import ml_dtypes
import numpy as np

from tilelab.dlpack_abi import (DLManagedTensor as _DLManagedTensor,
                                  DLManagedTensorVersioned as _DLManagedTensorVersioned,
                                  DLTensor as _DLTensor)

__all__ = ["numpy_view"]

_kDLCPU, _kDLCUDAHost = 1, 3
_kDLUInt = 1
#: DLPack (code, bits) -> the ml_dtypes type viewing it (DLPack 1.1 codes)
_ML_TYPES = {key: getattr(ml_dtypes, name) for key, name in {
    (4, 16): "bfloat16", (7, 8): "float8_e3m4", (8, 8): "float8_e4m3",
    (9, 8): "float8_e4m3b11fnuz", (10, 8): "float8_e4m3fn", (11, 8): "float8_e4m3fnuz",
    (12, 8): "float8_e5m2", (13, 8): "float8_e5m2fnuz", (14, 8): "float8_e8m0fnu",
}.items() if hasattr(ml_dtypes, name)}


_IsValid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_GetPointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


class _Relabelled:
    """Hands numpy a capsule prepared beforehand (whatever ``__dlpack__`` arguments)."""

    def __init__(self, capsule: Any, device: tuple[int, int]):
        self._capsule = capsule
        self._device = device

    def __dlpack__(self, **_kwargs: Any) -> Any:
        capsule, self._capsule = self._capsule, None
        return capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._device


def _dl_tensor(capsule: Any) -> _DLTensor | None:
    if _IsValid(capsule, b"dltensor_versioned"):
        return _DLManagedTensorVersioned.from_address(
            _GetPointer(capsule, b"dltensor_versioned")).dl_tensor
    if _IsValid(capsule, b"dltensor"):
        return _DLManagedTensor.from_address(_GetPointer(capsule, b"dltensor")).dl_tensor
    return None


def numpy_view(value: Any) -> np.ndarray:
    """A numpy array sharing the memory of a CPU array-like (``__dlpack__`` or
    ``__array_interface__``), of any dtype ``ml_dtypes`` knows (bf16, fp8...).

    A torch tensor that requires grad is viewed through ``detach()`` (the same memory),
    as cuTile launches take such tensors. Raises BufferError/TypeError when the object
    lives on a GPU or has a dtype numpy cannot view (complex, packed 4-bit).

    Example:
        >>> import numpy as np
        >>> a = np.arange(3, dtype=np.float32)
        >>> numpy_view(a).base is not None or numpy_view(a) is a
        True
    """
    if not hasattr(value, "__dlpack__"):
        return np.asarray(value)
    if getattr(value, "requires_grad", False) is True and hasattr(value, "detach"):
        # torch refuses to export a tensor that autograd tracks; cuTile launches take
        # its memory as it is (a kernel called inside an autograd.Function's forward):
        # the detached tensor is the same memory, so writes still land in ``value``
        value = value.detach()
    try:
        return np.from_dlpack(value)
    except (BufferError, TypeError, RuntimeError, ValueError) as e:
        first = e
    device = tuple(value.__dlpack_device__())
    if device[0] not in (_kDLCPU, _kDLCUDAHost):
        raise BufferError(f"the array lives on DLPack device {device}, not in host memory; "
                          f"the interpreter runs on the CPU") from first
    try:
        capsule = value.__dlpack__(max_version=(1, 0))
    except TypeError:  # a producer from before DLPack 1.0
        capsule = value.__dlpack__()
    dl = _dl_tensor(capsule)
    if dl is None:
        raise first
    key = (int(dl.dtype.code), int(dl.dtype.bits))
    target = _ML_TYPES.get(key) if int(dl.dtype.lanes) == 1 else None
    if target is None:
        raise BufferError(f"{first} (DLPack dtype code {key[0]}, {key[1]} bits, "
                          f"{int(dl.dtype.lanes)} lanes: no numpy view without a copy)")
    dl.dtype.code = _kDLUInt
    arr = np.from_dlpack(_Relabelled(capsule, device))
    return arr.view(target)
