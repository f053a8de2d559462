"""Device tensors: round trips, views, random data, free, DLPack/CAI with torch and cupy."""
from __future__ import annotations

import gc

import ml_dtypes
import numpy as np
import pytest

import tilelab.runtime.device as dev
import tilelab.runtime.tensor as T
from tilelab import config
from tilelab.errors import BorrowError
from tilelab.runtime.ledger import LEDGER, LaunchRecord

GPU = "cuda"
DTYPES = ["float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float64",
          "int8", "int32", "int64", "uint8", "bool"]


def _values(dtype, shape=(5, 7)):
    v = (np.arange(int(np.prod(shape))) % 11 - 5).reshape(shape)
    return (v > 0) if dtype == "bool" else v.astype(np.float32).astype(dtype)


# ---- the device ---------------------------------------------------------------------
def test_gpu_facts():
    with config.override(backend=config.DEFAULT):
        g = dev.gpu()
        assert g is dev.gpu()
        assert g.arch.startswith("sm_") and g.compute_capability >= (8, 0)
        assert g.num_sms > 0 and g.l2_bytes > 0 and g.total_memory > 2**30
        assert g.driver_version >= 13000 and g.name
        assert g.stream_handle not in (0, 1, 2)  # our own stream, not a default one
        assert dev.current_arch() == g.arch
        assert dev.backend() == "gpu" and dev.default_device() == "cuda:0"
        assert T.zeros(1).device == "cuda:0"
        assert dev.num_sms("cuda:0") == g.num_sms
        g.synchronize()
        assert "GPU" in repr(g)


def test_forced_backends():
    with config.override(backend="cpu"):
        assert dev.backend() == "cpu" and T.zeros(1).device == "cpu"
        assert T.zeros(1, device="gpu").device == "cuda:0"
    with config.override(backend="gpu"):
        assert dev.backend() == "gpu" and T.zeros(1).device == "cuda:0"


# ---- round trips --------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_host_device_round_trip(dtype):
    a = _values(dtype)
    t = T.tensor(a, device=GPU)
    assert t.device == "cuda:0" and t.dtype == a.dtype and t.shape == a.shape
    assert t.__tilelab_spec__().align == 16
    np.testing.assert_array_equal(t.numpy(), a)
    h = t.to("cpu")
    assert h.device == "cpu"
    np.testing.assert_array_equal(h.numpy(), a)
    back = h.to("cuda:0")
    np.testing.assert_array_equal(back.numpy(), a)
    np.testing.assert_array_equal(np.asarray(t), a)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32"])
def test_constructors_on_gpu(dtype):
    assert (T.zeros((3, 4), dtype=dtype, device=GPU).numpy().astype(float) == 0).all()
    assert (T.ones((3, 4), dtype=dtype, device=GPU).numpy().astype(float) == 1).all()
    assert (T.full(6, 3, dtype=dtype, device=GPU).numpy().astype(float) == 3).all()
    assert T.arange(10, dtype=dtype, device=GPU).numpy().astype(float).tolist() == \
        list(range(10))
    e = T.empty((1 << 20,), dtype=dtype, device=GPU)
    assert e.nbytes == (1 << 20) * e.itemsize


def test_zero_size_and_scalar_tensors():
    e = T.zeros((0, 5), device=GPU)
    assert e.numpy().shape == (0, 5)
    s = T.tensor(2.5, device=GPU)
    assert s.shape == () and s.item() == 2.5


def test_randn_is_fresh_and_seeded():
    a, b = T.randn(4096, device=GPU), T.randn(4096, device=GPU)
    assert not np.array_equal(a.numpy(), b.numpy())
    s1, s2 = T.randn(64, 64, seed=5, device=GPU), T.randn((64, 64), seed=5, device=GPU)
    np.testing.assert_array_equal(s1.numpy(), s2.numpy())
    big = T.randn(1 << 16, device=GPU, seed=2).numpy()
    assert abs(big.mean()) < 0.05 and abs(big.std() - 1) < 0.05
    bf = T.randn(256, dtype="bf16", device=GPU, seed=9)
    ref = np.random.default_rng(9).standard_normal(256, dtype=np.float32)
    np.testing.assert_array_equal(bf.numpy(), ref.astype(ml_dtypes.bfloat16))


# ---- views ------------------------------------------------------------------------
@pytest.mark.parametrize("key", [
    (slice(1, 4),), (slice(None), slice(None, None, 2)), (2,), (-1, 3), (Ellipsis, 1),
    (slice(None, None, -1), slice(1, None, 3)), (None, 1),
])
def test_views_read_like_numpy(key):
    a = _values("float32", (6, 8))
    t = T.tensor(a, device=GPU)
    k = key if Ellipsis in key else key + (Ellipsis,)
    np.testing.assert_array_equal(t[key].numpy(), a[k])
    np.testing.assert_array_equal(t.T[key].numpy(), a.T[k])


def test_writes_through_strided_views_leave_neighbours_alone():
    a = np.zeros((6, 8), np.float32)
    t = T.tensor(a, device=GPU)
    t[1::2, ::3] = 7
    t[0] = np.arange(8)
    t[5, 7] = -1
    a[1::2, ::3] = 7
    a[0] = np.arange(8)
    a[5, 7] = -1
    np.testing.assert_array_equal(t.numpy(), a)
    t.T[2:4].copy_(np.full((2, 6), 9, np.float32))   # a transposed (strided) write
    a.T[2:4] = 9
    np.testing.assert_array_equal(t.numpy(), a)


def test_device_to_device_copies():
    a = _values("bfloat16", (4, 4))
    t = T.tensor(a, device=GPU)
    c = t.clone()
    assert c.data_ptr != t.data_ptr
    np.testing.assert_array_equal(c.numpy(), a)
    assert t.to("cuda") is t
    d = T.empty((4, 4), dtype="bf16", device=GPU).copy_(t)
    np.testing.assert_array_equal(d.numpy(), a)
    s = t[:, 1::2].contiguous()
    assert s.is_contiguous
    np.testing.assert_array_equal(s.numpy(), a[:, 1::2])
    np.testing.assert_array_equal(t.astype("float32").numpy(), a.astype(np.float32))


def test_cross_device_copy_():
    g = T.zeros(4, device=GPU)
    g.copy_(T.arange(4, dtype="float32", device="cpu"))
    h = T.zeros(4, device="cpu").copy_(g)
    assert h.numpy().tolist() == [0, 1, 2, 3]


# ---- free and the ledger ------------------------------------------------------------
def test_free_and_double_free():
    t = T.zeros(1 << 20, device=GPU)
    v = t[10:20]
    t.free()
    with pytest.raises(ValueError, match="freed"):
        v.numpy()
    with pytest.raises(ValueError, match="already freed"):
        t.free()
    u = T.ones(1 << 20, device=GPU)            # the allocator may reuse the memory
    assert u.numpy()[:3].tolist() == [1, 1, 1]


def test_ledger_guards_gpu_tensors():
    t = T.zeros(64, device=GPU)
    rec = LaunchRecord(kernel="gpu_writer", site="cell.py:7", stream=object(),
                       query=lambda: False)
    LEDGER.add(rec, [t[:32]._ledger_claim(True, "out")], [t.storage])
    try:
        with pytest.raises(BorrowError, match="gpu_writer"):
            t.numpy()
        with pytest.raises(BorrowError, match="gpu_writer"):
            t.free()
        assert t[32:].numpy().shape == (32,)
    finally:
        LEDGER.observe(rec)
    t.free()


# ---- torch ------------------------------------------------------------------------
def _torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    return torch


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "int32",
                                   "float8_e4m3fn", "bool"])
def test_torch_dlpack_both_ways_zero_copy(dtype):
    torch = _torch()
    t = T.tensor(_values(dtype, (4, 6)), device=GPU)
    x = torch.from_dlpack(t)
    assert x.is_cuda and x.data_ptr() == t.data_ptr and str(x.dtype) == f"torch.{dtype}"
    back = T.from_dlpack(x)
    assert back.data_ptr == t.data_ptr and back.dtype == t.dtype
    np.testing.assert_array_equal(back.numpy(), t.numpy())


def test_torch_writes_are_visible_and_views_strided():
    torch = _torch()
    t = T.zeros((4, 6), dtype="float32", device=GPU)
    x = torch.from_dlpack(t)
    x[1:3, ::2] += 5
    torch.cuda.synchronize()
    assert t.numpy()[1, 0] == 5 and t.numpy()[1, 1] == 0
    y = torch.arange(24, dtype=torch.bfloat16, device="cuda").reshape(4, 6)[:, 1::2]
    ty = T.from_dlpack(y)
    assert ty.strides == (6, 2) and ty.data_ptr == y.data_ptr()
    np.testing.assert_array_equal(ty.numpy().astype(np.float32), y.float().cpu().numpy())
    assert tuple(torch.from_dlpack(ty.T).stride()) == (2, 6)


def test_tensor_of_torch_cuda_is_zero_copy_and_keeps_it_alive():
    torch = _torch()
    x = torch.ones(1000, device="cuda")
    ptr = x.data_ptr()
    t = T.tensor(x)
    del x
    gc.collect()
    torch.cuda.empty_cache()
    assert t.data_ptr == ptr and (t.numpy() == 1).all()
    cpu = T.tensor(torch.arange(5, dtype=torch.int32), device=GPU)  # host -> device copy
    assert cpu.device == "cuda:0" and cpu.numpy().tolist() == [0, 1, 2, 3, 4]


def test_torch_producer_on_a_side_stream_is_waited_for():
    torch = _torch()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        a = torch.randn(2048, 2048, device="cuda")
        b = a @ a                                # queued on s
        t = T.from_dlpack(b)                     # tilelab's stream waits on s
    np.testing.assert_allclose(t.numpy(), b.cpu().numpy(), rtol=1e-5, atol=1e-3)


def test_torch_consumer_stream_waits_for_tilelab():
    torch = _torch()
    t = T.full(1 << 20, 3.0, device=GPU)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x = torch.from_dlpack(t)                 # passes s to __dlpack__
        total = x.sum()
    s.synchronize()
    assert total.item() == 3.0 * (1 << 20)


def test_torch_via_cuda_array_interface():
    torch = _torch()
    t = T.arange(8, dtype="float32", device=GPU)
    x = torch.as_tensor(t, device="cuda")
    assert x.data_ptr() == t.data_ptr
    with pytest.raises(AttributeError, match="DLPack"):
        T.zeros(2, dtype="bf16", device=GPU).__cuda_array_interface__


# ---- cupy -------------------------------------------------------------------------
def _cupy():
    return pytest.importorskip("cupy")


def test_cupy_cuda_array_interface_both_ways():
    cp = _cupy()
    t = T.arange(12, dtype="float32", device=GPU).reshape(3, 4)
    c = cp.asarray(t)                            # reads __cuda_array_interface__
    assert c.data.ptr == t.data_ptr and c.shape == (3, 4)
    c[0, 0] = 42
    cp.cuda.runtime.deviceSynchronize()
    assert t[0, 0].item() == 42
    v = cp.asarray(t[:, ::2])
    assert v.strides == (16, 8)

    class OnlyCAI:                               # like numba: no __dlpack__
        def __init__(self, arr):
            self.arr = arr
            self.__cuda_array_interface__ = arr.__cuda_array_interface__

    src = cp.arange(10, dtype=cp.int32)[::3]
    w = T.from_dlpack(OnlyCAI(src))
    assert w.data_ptr == src.data.ptr and w.strides == (3,)
    assert w.numpy().tolist() == [0, 3, 6, 9]


def test_cupy_dlpack_both_ways():
    cp = _cupy()
    t = T.arange(6, dtype="float16", device=GPU)
    c = cp.from_dlpack(t)
    assert c.data.ptr == t.data_ptr and c.dtype == cp.float16
    src = cp.arange(6, dtype=cp.float32) * 2
    u = T.from_dlpack(src)
    assert u.data_ptr == src.data.ptr and u.numpy().tolist() == [0, 2, 4, 6, 8, 10]
    del src
    gc.collect()
    assert u.numpy().tolist() == [0, 2, 4, 6, 8, 10]   # u keeps cupy's memory alive


# ---- graphs and streams -----------------------------------------------------------------
def test_device_copy_recorded_into_a_cuda_graph():
    g = dev.gpu()
    src = T.arange(1024, dtype="float32", device=GPU)
    dst = T.zeros(1024, device=GPU)
    builder = g.stream.create_graph_builder()
    builder.begin_building()
    try:
        dst._copy_from_on(src, builder)          # what tl.graph() records for copy_
    finally:
        builder.end_building()
    graph = builder.complete()
    assert (dst.numpy() == 0).all()              # recorded, not run
    src.copy_(np.full(1024, 5, np.float32))
    graph.launch(g.stream)
    g.stream.sync()
    assert (dst.numpy() == 5).all()              # replays read the current source


def test_numpy_refuses_gpu_dlpack_cleanly():
    t = T.zeros(4, device=GPU)
    with pytest.raises(Exception) as e:
        np.from_dlpack(t)
    assert not isinstance(e.value, SystemError)
    assert (np.from_dlpack(t, device="cpu") == 0).all()  # numpy asks for a CPU copy


# ---- jax --------------------------------------------------------------------------
def test_jax_dlpack_both_ways():
    import os

    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    jax = pytest.importorskip("jax")
    try:
        gpu_devs = [d for d in jax.devices() if d.platform == "gpu"]
    except RuntimeError:
        gpu_devs = []
    if not gpu_devs:
        pytest.skip("jax has no GPU")
    import jax.numpy as jnp

    x = jax.device_put(jnp.arange(8, dtype=jnp.float32), gpu_devs[0])
    t = T.from_dlpack(x)
    assert t.device == "cuda:0" and t.numpy().tolist() == list(range(8))
    y = jnp.from_dlpack(T.arange(4, dtype="bfloat16", device=GPU))
    assert y.dtype == jnp.bfloat16 and [float(v) for v in y] == [0, 1, 2, 3]
