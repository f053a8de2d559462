"""DLPack and ``__cuda_array_interface__``, both ways, without copies.

Export: ``Tensor.__dlpack__`` returns a ``DLManagedTensor`` capsule ("dltensor") or,
when the consumer allows DLPack 1.x, a ``DLManagedTensorVersioned`` ("dltensor_versioned").
The capsule holds a reference to the tensor until the consumer calls the deleter, so the
memory outlives every foreign view of it.

Import: :func:`consume` takes a producer's capsule (or reads its CUDA array interface)
and describes the memory as a :class:`ForeignMemory`, whose owner keeps the producer
alive and calls its deleter when dropped; :func:`tilelab.runtime.tensor.from_dlpack`
wraps that in a tensor over a borrowed :class:`~tilelab.runtime.memory.Storage`. This
module knows tensors only by their attributes, so it sits below
:mod:`tilelab.runtime.tensor`, which imports it.

Streams follow the DLPack protocol: a consumer passes the stream it will use, and the
producer makes that stream wait for the data (an event, no host synchronization).
"""
from __future__ import annotations

import ctypes
import functools
import weakref
from typing import Any, NamedTuple

import numpy as np

from tilelab.dlpack_abi import (DLManagedTensor as _DLManagedTensor,
                                  DLManagedTensorVersioned as _DLManagedTensorVersioned)

from tilelab.errors import LaunchError
from tilelab.runtime import device as _dev
from tilelab.runtime.ledger import LEDGER
from tilelab.runtime.memory import _HostSpan

__all__ = ["kDLCPU", "kDLCUDA", "kDLCUDAHost", "kDLCUDAManaged", "dtype_to_dlpack",
           "dlpack_to_dtype", "dlpack_device", "to_dlpack", "ForeignMemory", "consume",
           "cuda_array_interface", "read_cuda_array_interface"]

kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged = 1, 2, 3, 13
_kDLInt, _kDLUInt, _kDLFloat, _kDLBfloat, _kDLBool = 0, 1, 2, 4, 6
_kDLFloat8_e4m3fn, _kDLFloat8_e5m2 = 10, 12
_FLAG_READ_ONLY, _FLAG_IS_COPIED = 1 << 0, 1 << 1
#: the DLPack version tilelab speaks when the consumer allows 1.x
DLPACK_VERSION = (1, 0)


# ---- C structures: tilelab.dlpack_abi ------------------------------------------------
_Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


# ---- dtypes -----------------------------------------------------------------------
_TO_DL: dict[np.dtype, tuple[int, int]] = {
    np.dtype(np.bool_): (_kDLBool, 8),
    **{np.dtype(f"int{b}"): (_kDLInt, b) for b in (8, 16, 32, 64)},
    **{np.dtype(f"uint{b}"): (_kDLUInt, b) for b in (8, 16, 32, 64)},
    **{np.dtype(f"float{b}"): (_kDLFloat, b) for b in (16, 32, 64)},
}
_FROM_DL = {v: k for k, v in _TO_DL.items()}
#: the ml_dtypes types' codes, for when one is first asked for (see _add_ml_dtypes)
_ML_CODES = {"bfloat16": (_kDLBfloat, 16), "float8_e4m3fn": (_kDLFloat8_e4m3fn, 8),
             "float8_e5m2": (_kDLFloat8_e5m2, 8)}


@functools.lru_cache(maxsize=None)
def _add_ml_dtypes() -> None:
    """Add bfloat16 and the fp8 types to the tables (importing ml_dtypes) once."""
    from tilelab.compiler.dtypes import ml_dtype

    for name, code in _ML_CODES.items():
        dt = ml_dtype(name)
        _TO_DL[dt] = code
        _FROM_DL[code] = dt
        _CARRIER[dt] = np.dtype(np.uint16 if dt.itemsize == 2 else np.uint8)


def dtype_to_dlpack(dtype: np.dtype) -> tuple[int, int, int]:
    """DLPack (code, bits, lanes) of a tilelab dtype.

    Example:
        >>> import ml_dtypes, numpy as np
        >>> dtype_to_dlpack(np.dtype(ml_dtypes.bfloat16))
        (4, 16, 1)
    """
    dt = np.dtype(dtype)
    if dt not in _TO_DL and dt.name in _ML_CODES:
        _add_ml_dtypes()
    try:
        code, bits = _TO_DL[dt]
    except KeyError:
        raise BufferError(f"dtype {dtype} has no DLPack code") from None
    return code, bits, 1


def dlpack_to_dtype(code: int, bits: int, lanes: int = 1) -> np.dtype:
    """The numpy dtype of a DLPack (code, bits, lanes); TypeError for unsupported ones.

    Example:
        >>> dlpack_to_dtype(2, 32)
        dtype('float32')
    """
    if lanes != 1:
        raise TypeError(f"DLPack vector dtypes (lanes={lanes}) are not supported")
    key = (int(code), int(bits))
    if key not in _FROM_DL and key in _ML_CODES.values():
        _add_ml_dtypes()
    try:
        return _FROM_DL[key]
    except KeyError:
        raise TypeError(f"DLPack dtype (code={code}, bits={bits}) is not supported by "
                        "tilelab (bool, int/uint 8-64, float16/32/64, bfloat16, "
                        "float8_e4m3fn, float8_e5m2)") from None


# ---- Python C-API through ctypes ---------------------------------------------------
_api = ctypes.pythonapi
_Capsule_IsValid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _api))
_Capsule_GetPointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))
_Capsule_SetName = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", _api))

# Capsule names must outlive the capsules: module-level constants do.
_NAME = b"dltensor"
_NAME_V = b"dltensor_versioned"
_USED = b"used_dltensor"
_USED_V = b"used_dltensor_versioned"


# ---- export -----------------------------------------------------------------------
# The capsule is made by numpy, from a carrier array with the tensor's address, shape and
# strides whose base keeps the tensor alive: numpy's C destructor and deleter then manage
# the lifetime correctly (a Python capsule destructor made with ctypes cannot: it breaks
# when a consumer drops the capsule while an exception is pending). numpy cannot name
# bfloat16/float8 or device memory, so those fields are patched in the DLTensor before
# the capsule is handed out; numpy never reads the data.
#: the carrier dtype of each type numpy lacks (filled by _add_ml_dtypes)
_CARRIER: dict[np.dtype, np.dtype] = {}


def _carrier(t: Any) -> np.ndarray:
    lo, hi = t.byte_range()
    raw = np.asarray(_HostSpan(lo, hi - lo, t._storage.readonly, t)) if hi > lo else \
        np.asarray(_HostSpan(t.data_ptr, 0, t._storage.readonly, t))
    if t.dtype.name in _ML_CODES:
        _add_ml_dtypes()
    return np.ndarray(t.shape, _CARRIER.get(t.dtype, t.dtype), buffer=raw,
                      offset=t.data_ptr - lo if hi > lo else 0,
                      strides=tuple(s * t.itemsize for s in t.strides))


def dlpack_device(t: Any) -> tuple[int, int]:
    """``__dlpack_device__`` of a tensor: (kDLCPU, 0) or (kDLCUDA, 0).

    Example:
        >>> import tilelab.runtime.tensor as T
        >>> dlpack_device(T.zeros(2, device="cpu"))
        (1, 0)
    """
    return (kDLCPU, 0) if t.device == "cpu" else (kDLCUDA, int(t.device.split(":")[1]))


def _consumer_stream_wait(consumer_stream: int) -> None:
    """Make ``consumer_stream`` wait for work queued so far on tilelab's stream."""
    from cuda.bindings import driver

    g = _dev.gpu()
    if consumer_stream == g.stream_handle:
        return
    ev = _dev.check_cuda(driver.cuEventCreate(
        driver.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
    try:
        _dev.check_cuda(driver.cuEventRecord(ev, g.stream_handle), "cuEventRecord")
        _dev.check_cuda(driver.cuStreamWaitEvent(consumer_stream, ev, 0), "cuStreamWaitEvent")
    finally:
        _dev.check_cuda(driver.cuEventDestroy(ev), "cuEventDestroy")


def _producer_stream_wait(producer_stream: int) -> None:
    """Make tilelab's stream wait for work queued so far on ``producer_stream``."""
    from cuda.bindings import driver

    g = _dev.gpu()
    if producer_stream == g.stream_handle:
        return
    ev = _dev.check_cuda(driver.cuEventCreate(
        driver.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
    try:
        _dev.check_cuda(driver.cuEventRecord(ev, producer_stream), "cuEventRecord")
        _dev.check_cuda(driver.cuStreamWaitEvent(g.stream_handle, ev, 0), "cuStreamWaitEvent")
    finally:
        _dev.check_cuda(driver.cuEventDestroy(ev), "cuEventDestroy")


def to_dlpack(t: Any, *, stream: Any = None, max_version: tuple[int, int] | None = None,
              dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
    """Implement ``Tensor.__dlpack__`` (the Python array API protocol).

    ``stream`` is the consumer's stream: None means the legacy default stream for GPU
    tensors (and is the only value for CPU ones), -1 means no synchronization, other
    values are stream handles (1: legacy default, 2: per-thread default). The consumer
    stream is made to wait for tilelab's stream, without blocking the host.

    Example:
        >>> import numpy as np, tilelab.runtime.tensor as T
        >>> np.from_dlpack(T.arange(3, dtype="int32", device="cpu"))
        array([0, 1, 2], dtype=int32)
    """
    t._storage.check_alive("__dlpack__")
    copied = False
    if dl_device is not None and tuple(dl_device) != dlpack_device(t):
        if copy is False:
            raise BufferError(f"tensor is on {t.device}, the consumer asked for DLPack "
                              f"device {tuple(dl_device)} with copy=False")
        if tuple(dl_device) != (kDLCPU, 0):
            raise BufferError(f"cannot export a {t.device} tensor to DLPack device "
                              f"{tuple(dl_device)}")
        t, copied = t.to("cpu"), True
    elif copy:
        t, copied = t.clone(), True
    if any(st < 0 for st in t.strides):  # torch aborts the process on these
        raise BufferError(f"this view has negative strides {t.strides}, which many DLPack "
                          "consumers (torch) cannot take; export t.contiguous() instead")
    if t.device == "cpu":
        if stream not in (None, -1):
            raise BufferError(f"__dlpack__(stream={stream!r}) of a CPU tensor: CPU "
                              "tensors take stream=None")
    else:
        if stream == 0:
            raise BufferError("__dlpack__(stream=0) is ambiguous for CUDA; pass 1 for the "
                              "legacy default stream, 2 for the per-thread one, or a handle")
        if stream != -1:
            _consumer_stream_wait(1 if stream is None else int(stream))
    lo, hi = t.byte_range()
    LEDGER.check_host(t._storage.space, lo, hi, write=True,
                      what="exporting a tensor through DLPack")

    versioned = max_version is not None and tuple(max_version)[0] >= 1
    if t._storage.readonly and not versioned:
        raise BufferError("this tensor is read-only, and DLPack before 1.0 cannot say so; "
                          "the consumer must pass max_version=(1, 0)")
    carrier = _carrier(t)
    capsule = None
    if versioned:
        try:
            capsule = carrier.__dlpack__(max_version=DLPACK_VERSION)
        except TypeError:  # numpy < 2.1 speaks only DLPack 0.x
            versioned = False
    if capsule is None:
        capsule = carrier.__dlpack__()
    if _Capsule_IsValid(capsule, _NAME_V):
        m = _DLManagedTensorVersioned.from_address(_Capsule_GetPointer(capsule, _NAME_V))
        if copied:
            m.flags |= _FLAG_IS_COPIED
    else:
        m = _DLManagedTensor.from_address(_Capsule_GetPointer(capsule, _NAME))
    code, bits, _ = dtype_to_dlpack(t.dtype)
    m.dl_tensor.dtype.code, m.dl_tensor.dtype.bits = code, bits
    m.dl_tensor.device.device_type, m.dl_tensor.device.device_id = dlpack_device(t)
    return capsule


# ---- import -----------------------------------------------------------------------
class _DLPackOwner:
    """Owns a consumed DLManagedTensor(Versioned): calls its deleter once, when dropped."""

    __slots__ = ("producer", "__weakref__")

    def __init__(self, addr: int, deleter: int | None, producer: Any):
        self.producer = producer
        if deleter:
            weakref.finalize(self, _call_deleter, deleter, addr)


def _call_deleter(deleter: int, addr: int) -> None:
    _Deleter(deleter)(addr)


def _device_of(device_type: int, device_id: int) -> str:
    if device_type in (kDLCPU, kDLCUDAHost):
        return "cpu"
    if device_type in (kDLCUDA, kDLCUDAManaged):
        if device_id != 0:
            raise LaunchError(f"the array lives on cuda:{device_id}; tilelab uses cuda:0",
                              hint="copy it to cuda:0 first, or select that GPU with "
                                   "CUDA_VISIBLE_DEVICES")
        return _dev.parse_device("cuda:0")
    raise BufferError(f"DLPack device type {device_type} is not supported (tilelab takes "
                      "CPU and CUDA memory)")


class ForeignMemory(NamedTuple):
    """Another framework's array memory, as an import found it: element 0 at ``ptr``,
    ``strides`` in elements (None: C order), and the ``owner`` a borrowing tensor must
    keep alive (it holds the producer, and calls a DLPack deleter when dropped).
    :func:`tilelab.runtime.tensor.wrap_memory` takes these fields in this order.

    Example:
        >>> import numpy as np
        >>> m = consume(np.arange(6, dtype=np.float32).reshape(2, 3))
        >>> m.shape, m.strides, m.dtype, m.device, m.readonly
        ((2, 3), (3, 1), dtype('float32'), 'cpu', False)
    """

    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None
    dtype: np.dtype
    device: str
    owner: Any
    readonly: bool


def _consume_capsule(capsule: Any, producer: Any) -> ForeignMemory:
    if _Capsule_IsValid(capsule, _NAME_V):
        addr = _Capsule_GetPointer(capsule, _NAME_V)
        m = _DLManagedTensorVersioned.from_address(addr)
        if m.version.major > 1:
            raise BufferError(f"DLPack {m.version.major}.{m.version.minor} capsule: tilelab "
                              "reads DLPack 1.x")
        readonly = bool(m.flags & _FLAG_READ_ONLY)
        used = _USED_V
    elif _Capsule_IsValid(capsule, _NAME):
        addr = _Capsule_GetPointer(capsule, _NAME)
        m = _DLManagedTensor.from_address(addr)
        readonly, used = False, _USED
    else:
        raise TypeError("from_dlpack() needs an object with __dlpack__ or a DLPack capsule "
                        "named 'dltensor'/'dltensor_versioned' (was it consumed already?)")
    dl = m.dl_tensor
    # On errors here the capsule stays unconsumed: its own destructor frees it.
    dtype = dlpack_to_dtype(dl.dtype.code, dl.dtype.bits, dl.dtype.lanes)
    device = _device_of(dl.device.device_type, dl.device.device_id)
    ndim = int(dl.ndim)
    shape = tuple(int(dl.shape[i]) for i in range(ndim))
    strides = (tuple(int(dl.strides[i]) for i in range(ndim)) if dl.strides else None)
    ptr = (dl.data or 0) + int(dl.byte_offset)
    # Take ownership: rename first, so the producer's destructor no longer frees it.
    if _Capsule_SetName(capsule, used) != 0:  # pragma: no cover - CPython never fails here
        raise BufferError("could not take ownership of the DLPack capsule")
    owner = _DLPackOwner(addr, m.deleter, producer)
    return ForeignMemory(ptr, shape, strides, dtype, device, owner, readonly)


def consume(obj: Any, stream: int | None = None) -> ForeignMemory:
    """The memory of ``obj`` (torch, cupy, jax, numpy, a capsule), zero copy: what a
    tensor borrowing it needs (:func:`tilelab.runtime.tensor.from_dlpack` makes that
    tensor).

    ``obj`` may implement ``__dlpack__`` (preferred), only ``__cuda_array_interface__``,
    or be a DLPack capsule. The owner keeps ``obj`` alive. GPU producers are asked to
    make the consumer's stream wait for their pending work: ``stream`` is that stream's
    handle as DLPack passes it (-1: no synchronization, for work that will run on the
    producer's own current stream), None tilelab's stream.

    Example:
        >>> import numpy as np
        >>> a = np.arange(4, dtype=np.float32)
        >>> m = consume(a); m.ptr == a.ctypes.data, m.shape
        (True, (4,))
    """
    if type(obj).__name__ == "PyCapsule":
        return _consume_capsule(obj, None)
    if not hasattr(obj, "__dlpack__"):
        if hasattr(obj, "__cuda_array_interface__"):
            return read_cuda_array_interface(obj)
        raise TypeError(f"from_dlpack() needs an object with __dlpack__ or "
                        f"__cuda_array_interface__, got {type(obj).__name__}")
    dev_type, dev_id = obj.__dlpack_device__()
    consumer = None
    if dev_type in (kDLCUDA, kDLCUDAManaged):
        _device_of(dev_type, dev_id)
        consumer = _dev.gpu().stream_handle if stream is None else stream
    elif dev_type not in (kDLCPU, kDLCUDAHost):
        _device_of(dev_type, dev_id)  # raises
    try:
        capsule = obj.__dlpack__(stream=consumer, max_version=DLPACK_VERSION)
    except TypeError:  # a producer from before DLPack 1.0 has no max_version
        capsule = obj.__dlpack__(stream=consumer)
    return _consume_capsule(capsule, obj)


# ---- CUDA array interface ------------------------------------------------------------
def cuda_array_interface(t: Any) -> dict:
    """``__cuda_array_interface__`` (version 3) of a GPU tensor.

    CPU tensors and bf16/fp8 tensors have none (the attribute is missing, so consumers
    fall back to DLPack); asking directly says why.

    Example:
        >>> import tilelab.runtime.tensor as T
        >>> t = T.zeros(4, device="cuda")                          # doctest: +SKIP
        >>> t.__cuda_array_interface__["typestr"]                  # doctest: +SKIP
        '<f4'
    """
    if t.device == "cpu":
        raise AttributeError("__cuda_array_interface__: this tensor is on the CPU; use "
                             "__array__ / numpy() or DLPack")
    if t.dtype.kind == "V" or t.dtype not in _CAI_DTYPES:
        raise AttributeError(f"__cuda_array_interface__ cannot describe {t.dtype} (it has no "
                             "typestr for bfloat16/float8): use DLPack instead, e.g. "
                             "torch.from_dlpack(t) or cupy.from_dlpack(t)")
    t._storage.check_alive("__cuda_array_interface__")
    if any(st < 0 for st in t.strides):
        raise AttributeError(f"__cuda_array_interface__: this view has negative strides "
                             f"{t.strides}; export t.contiguous() instead")
    lo, hi = t.byte_range()
    LEDGER.check_host(t._storage.space, lo, hi, write=True,
                      what="exporting a tensor through __cuda_array_interface__")
    return {
        "shape": t.shape,
        "typestr": t.dtype.str,
        "data": (t.data_ptr, bool(t._storage.readonly)),
        "version": 3,
        "strides": None if t.is_contiguous else tuple(s * t.itemsize for s in t.strides),
        "stream": _dev.gpu().stream_handle,
    }


_CAI_DTYPES = {np.dtype(np.bool_), *(np.dtype(f"int{b}") for b in (8, 16, 32, 64)),
               *(np.dtype(f"uint{b}") for b in (8, 16, 32, 64)),
               *(np.dtype(f"float{b}") for b in (16, 32, 64))}


def read_cuda_array_interface(obj: Any) -> ForeignMemory:
    """The memory of a CUDA array interface (v2/v3) object, zero copy.

    The producer's ``stream`` (if any) is made to precede tilelab's stream.

    Example:
        >>> import cupy                                            # doctest: +SKIP
        >>> read_cuda_array_interface(cupy.ones(3)).shape          # doctest: +SKIP
        (3,)
    """
    cai = obj.__cuda_array_interface__
    if cai.get("mask") is not None:
        raise TypeError("masked CUDA arrays are not supported")
    try:
        dtype = np.dtype(cai["typestr"])
    except TypeError:
        raise TypeError(f"CUDA array interface typestr {cai['typestr']!r} is not "
                        "supported") from None
    if dtype not in _CAI_DTYPES:
        raise TypeError(f"CUDA array interface dtype {dtype} is not supported")
    if not dtype.isnative:
        raise TypeError(f"CUDA array interface dtype {dtype} is not native-endian")
    shape = tuple(int(s) for s in cai["shape"])
    ptr, readonly = cai["data"]
    strides = cai.get("strides")
    if strides is not None:
        if any(s % dtype.itemsize for s in strides):
            raise TypeError(f"CUDA array strides {tuple(strides)} (bytes) are not multiples "
                            f"of the item size {dtype.itemsize}")
        strides = tuple(int(s) // dtype.itemsize for s in strides)
    device = _dev.parse_device("cuda:0")
    stream = cai.get("stream")
    if stream is not None and int(ptr or 0) != 0:
        if stream == 0:
            raise BufferError("__cuda_array_interface__ stream 0 is disallowed (v3)")
        _producer_stream_wait(int(stream))
    return ForeignMemory(int(ptr or 0), shape, strides, dtype, device, obj, bool(readonly))
