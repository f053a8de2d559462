"""DLPack and the CUDA array interface on the CPU: numpy and (if installed) torch."""
from __future__ import annotations

import gc
import weakref

import ml_dtypes
import numpy as np
import pytest

import tilelab.runtime.device as dev
import tilelab.runtime.dlpack as D
import tilelab.runtime.tensor as T
from tilelab.errors import BorrowError, LaunchError
from tilelab.runtime.ledger import LEDGER, LaunchRecord

CPU = "cpu"
NUMPY_DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
                "uint16", "uint32", "uint64", "bool"]


# ---- dtype codes ------------------------------------------------------------------
def test_dtype_codes():
    assert D.dtype_to_dlpack(np.dtype(np.float32)) == (2, 32, 1)
    assert D.dtype_to_dlpack(np.dtype(ml_dtypes.bfloat16)) == (4, 16, 1)
    assert D.dtype_to_dlpack(np.dtype(ml_dtypes.float8_e4m3fn)) == (10, 8, 1)
    assert D.dtype_to_dlpack(np.dtype(ml_dtypes.float8_e5m2)) == (12, 8, 1)
    assert D.dtype_to_dlpack(np.dtype(np.bool_)) == (6, 8, 1)
    for code_bits, dt in D._FROM_DL.items():
        assert D.dtype_to_dlpack(dt)[:2] == code_bits
    with pytest.raises(TypeError, match="not supported"):
        D.dlpack_to_dtype(5, 64)     # complex
    with pytest.raises(TypeError, match="lanes"):
        D.dlpack_to_dtype(2, 32, 4)


# ---- numpy ------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_export_to_numpy_shares_memory(dtype):
    t = T.arange(12, dtype=dtype, device=CPU).reshape(3, 4)
    a = np.from_dlpack(t)
    assert a.dtype == t.dtype and a.shape == (3, 4)
    assert a.ctypes.data == t.data_ptr
    np.testing.assert_array_equal(a, t.numpy())


def test_export_strided_view_to_numpy():
    t = T.arange(20, dtype="float32", device=CPU).reshape(4, 5)
    v = t[1:, ::2]
    a = np.from_dlpack(v)
    assert a.ctypes.data == v.data_ptr
    assert a.strides == tuple(s * 4 for s in v.strides)
    a[0, 0] = -1
    assert t[1, 0].item() == -1


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_import_from_numpy_is_zero_copy(dtype):
    a = (np.arange(10) % 2 == 0) if dtype == "bool" else np.arange(10).astype(dtype)
    t = T.from_dlpack(a)
    assert t.data_ptr == a.ctypes.data and t.dtype == a.dtype and t.storage.borrowed
    np.testing.assert_array_equal(t.numpy(), a)


def test_import_strided_numpy():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)[::2, 1::3]
    t = T.from_dlpack(a)
    assert t.shape == (2, 2) and t.strides == (12, 3)
    np.testing.assert_array_equal(t.numpy(), a)


def test_round_trip_numpy_tilelab_numpy():
    a = np.arange(6, dtype=np.int32)
    b = np.from_dlpack(T.from_dlpack(a))
    assert b.ctypes.data == a.ctypes.data
    b[0] = 99
    assert a[0] == 99


def test_import_read_only_numpy():
    a = np.arange(3, dtype=np.float32)
    a.flags.writeable = False
    t = T.from_dlpack(a)
    assert t.storage.readonly
    with pytest.raises(ValueError, match="read-only"):
        t.copy_(0)
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__()                      # DLPack 0.x cannot say "read-only"
    b = np.from_dlpack(t)                   # numpy asks for 1.x: flagged read-only
    assert not b.flags.writeable


def test_import_keeps_producer_alive_and_releases_it():
    a = np.arange(5, dtype=np.float32)
    ref = weakref.ref(a)
    t = T.from_dlpack(a)
    del a
    gc.collect()
    assert ref() is not None and t.numpy().tolist() == [0, 1, 2, 3, 4]
    v = t[1:3]
    del t
    gc.collect()
    assert ref() is not None and v.numpy().tolist() == [1, 2]
    del v
    gc.collect()
    assert ref() is None                    # the producer's deleter ran


def test_export_keeps_tensor_alive_until_consumer_drops_it():
    t = T.arange(4, dtype="int32", device=CPU)
    ref = weakref.ref(t)
    a = np.from_dlpack(t)
    del t
    gc.collect()
    assert ref() is not None and a.tolist() == [0, 1, 2, 3]
    del a
    gc.collect()
    assert ref() is None


def test_unconsumed_capsule_releases_the_tensor():
    t = T.zeros(4, device=CPU)
    ref = weakref.ref(t)
    cap = t.__dlpack__()
    assert type(cap).__name__ == "PyCapsule"
    del t
    gc.collect()
    assert ref() is not None
    del cap
    gc.collect()
    assert ref() is None


def test_consumer_failure_does_not_break_exceptions():
    # numpy cannot take bfloat16: it drops our capsule while its exception is pending.
    t = T.zeros(4, dtype="bf16", device=CPU)
    with pytest.raises(Exception, match="(?i)dtype") as e:
        np.from_dlpack(t)
    assert not isinstance(e.value, SystemError)
    np.from_dlpack(T.zeros(2, device=CPU))  # still healthy afterwards


def test_capsule_import_and_single_consumption():
    a = np.arange(4, dtype=np.int64)
    cap = a.__dlpack__()
    t = T.from_dlpack(cap)
    assert t.data_ptr == a.ctypes.data
    with pytest.raises(TypeError, match="consumed"):
        T.from_dlpack(cap)


def test_versioned_capsule_import():
    a = np.arange(4, dtype=np.float32)
    cap = a.__dlpack__(max_version=(1, 0))
    t = T.from_dlpack(cap)
    assert t.numpy().tolist() == [0, 1, 2, 3]


def test_export_protocol_arguments():
    t = T.arange(3, dtype="float32", device=CPU)
    assert t.__dlpack_device__() == (1, 0)
    assert type(t.__dlpack__(stream=None)).__name__ == "PyCapsule"
    with pytest.raises(BufferError, match="stream"):
        t.__dlpack__(stream=5)
    cap = t.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=True)
    c = T.from_dlpack(cap)
    assert c.data_ptr != t.data_ptr and c.numpy().tolist() == [0, 1, 2]
    with pytest.raises(BufferError, match="device"):
        t.__dlpack__(dl_device=(2, 0), copy=False)


def test_negative_strides_are_refused_for_export():
    t = T.arange(4, dtype="float32", device=CPU)[::-1]
    with pytest.raises(BufferError, match="negative strides"):
        t.__dlpack__()
    assert np.from_dlpack(t.contiguous()).tolist() == [3, 2, 1, 0]


def test_from_dlpack_errors():
    with pytest.raises(TypeError, match="__dlpack__"):
        T.from_dlpack([1, 2, 3])

    class OtherDevice:
        def __dlpack_device__(self):
            return (4, 0)   # OpenCL

        def __dlpack__(self, **kw):
            raise AssertionError("must not be called")

    with pytest.raises(BufferError, match="device type 4"):
        T.from_dlpack(OtherDevice())


def test_export_checks_the_ledger():
    t = T.zeros(4, device=CPU)
    rec = LaunchRecord(kernel="pending_kernel", site="cell.py:3", stream=None,
                       query=lambda: False)
    LEDGER.add(rec, [t._ledger_claim(False, "x")], [t.storage])
    try:
        with pytest.raises(BorrowError, match="pending_kernel"):
            np.from_dlpack(t)
    finally:
        LEDGER.observe(rec)


# ---- CUDA array interface on the CPU ---------------------------------------------------
def test_cpu_tensors_have_no_cuda_array_interface():
    t = T.zeros(3, device=CPU)
    assert not hasattr(t, "__cuda_array_interface__")
    with pytest.raises(AttributeError, match="CPU"):
        t.__cuda_array_interface__


@pytest.mark.skipif(dev.gpu_available(), reason="this machine has a usable GPU")
def test_gpu_imports_need_a_gpu():
    class FakeCAI:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (1 << 20, False),
                                    "version": 3, "strides": None}

    with pytest.raises(LaunchError, match="GPU"):
        T.from_dlpack(FakeCAI())

    class FakeCuda:
        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, **kw):
            raise AssertionError("must not be called")

    with pytest.raises(LaunchError, match="GPU"):
        T.from_dlpack(FakeCuda())


# ---- torch (CPU build) ---------------------------------------------------------------
TORCH_DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "int32", "int64",
                "uint8", "bool", "float8_e4m3fn", "float8_e5m2"]


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_torch_round_trip_every_dtype(dtype):
    torch = pytest.importorskip("torch")
    t = T.tensor(np.arange(12).astype(np.float32) % 3, dtype=dtype, device=CPU).reshape(3, 4)
    x = torch.from_dlpack(t)
    assert str(x.dtype) == f"torch.{dtype}"
    assert x.data_ptr() == t.data_ptr and tuple(x.shape) == (3, 4)
    back = T.from_dlpack(x)
    assert back.data_ptr == t.data_ptr and back.dtype == t.dtype
    np.testing.assert_array_equal(back.numpy(), t.numpy())


def test_torch_views_and_writes_are_shared():
    torch = pytest.importorskip("torch")
    x = torch.arange(24, dtype=torch.bfloat16).reshape(4, 6)
    v = x[1:, ::2]
    t = T.from_dlpack(v)
    assert t.shape == (3, 3) and t.strides == (6, 2) and t.data_ptr == v.data_ptr()
    x[1, 0] = 100
    assert t[0, 0].item() == 100
    t[0, 1] = -5
    assert x[1, 2].item() == -5
    y = torch.from_dlpack(t.T)
    assert tuple(y.stride()) == (2, 6) and y.data_ptr() == t.data_ptr


def test_tensor_of_torch_is_zero_copy_and_keeps_it_alive():
    torch = pytest.importorskip("torch")
    x = torch.ones(5, dtype=torch.float16)
    ptr = x.data_ptr()
    t = T.tensor(x, device=CPU)
    del x
    gc.collect()
    assert t.data_ptr == ptr and t.numpy().tolist() == [1] * 5
    c = T.tensor(torch.ones(3), dtype="bf16", device=CPU)
    assert c.dtype.name == "bfloat16"


def test_copy_from_torch():
    torch = pytest.importorskip("torch")
    t = T.zeros(4, dtype="float32", device=CPU)
    t.copy_(torch.arange(4, dtype=torch.float32))
    assert t.numpy().tolist() == [0, 1, 2, 3]


def test_torch_stream_argument_is_accepted_for_cpu():
    torch = pytest.importorskip("torch")
    t = T.arange(3, dtype="int32", device=CPU)
    assert torch.utils.dlpack.from_dlpack(t.__dlpack__()).tolist() == [0, 1, 2]
