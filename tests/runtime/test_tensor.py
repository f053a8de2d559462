"""Tensors on the CPU backend: constructors, dtypes, views, the ledger, devices."""
from __future__ import annotations

import gc
import weakref

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilelab.runtime.device as dev
import tilelab.runtime.tensor as T
from tilelab import config
from tilelab.compiler.signature import ArraySpec
from tilelab.errors import BorrowError, ConfigError, LaunchError
from tilelab.runtime.ledger import LEDGER, LaunchRecord, unchecked

CPU = "cpu"
DTYPES = ["float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float64",
          "int8", "int16", "int32", "int64", "uint8", "uint32", "bool"]


# ---- constructors -----------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_constructors_every_dtype(dtype):
    z = T.zeros((2, 3), dtype=dtype, device=CPU)
    o = T.ones((2, 3), dtype=dtype, device=CPU)
    f = T.full((2, 3), 2, dtype=dtype, device=CPU)
    e = T.empty((2, 3), dtype=dtype, device=CPU)
    for t in (z, o, f, e):
        assert t.shape == (2, 3) and t.strides == (3, 1) and t.device == "cpu"
        assert t.dtype.name == dtype and t.is_contiguous
        assert t.nbytes == 6 * t.itemsize
    assert (z.numpy().astype(np.float32) == 0).all()
    assert (o.numpy().astype(np.float32) == 1).all()
    assert (f.numpy().astype(np.float32) == (1 if dtype == "bool" else 2)).all()


def test_dtype_aliases_and_numpy_dtypes():
    assert T.zeros(1, dtype="bf16", device=CPU).dtype == np.dtype(ml_dtypes.bfloat16)
    assert T.zeros(1, dtype=np.float16, device=CPU).dtype == np.float16
    assert T.zeros(1, dtype="e4m3", device=CPU).dtype.name == "float8_e4m3fn"
    assert T.zeros(1, device=CPU).dtype == np.float32


def test_shapes_scalars_and_empty():
    assert T.zeros(5, device=CPU).shape == (5,)
    assert T.zeros((), device=CPU).shape == () and T.zeros((), device=CPU).size == 1
    e = T.zeros((0, 4), device=CPU)
    assert e.size == 0 and e.numpy().shape == (0, 4)
    assert T.zeros(np.int64(3), device=CPU).shape == (3,)


@pytest.mark.parametrize("bad, exc", [((-1, 2), ValueError), ((2.5,), TypeError),
                                      ("abc", TypeError), ((True,), TypeError)])
def test_bad_shapes(bad, exc):
    with pytest.raises(exc):
        T.empty(bad, device=CPU)


def test_bad_dtype_and_device():
    with pytest.raises(TypeError, match="unsupported dtype"):
        T.zeros(3, dtype="complex64", device=CPU)
    with pytest.raises(ValueError, match="unknown device"):
        T.zeros(3, device="tpu")
    with pytest.raises(LaunchError, match="one GPU"):
        T.zeros(3, device="cuda:1")


def test_arange():
    assert T.arange(4, device=CPU).numpy().tolist() == [0, 1, 2, 3]
    assert T.arange(4, device=CPU).dtype == np.int64
    assert T.arange(0.0, 1.0, 0.25, device=CPU).dtype == np.float32
    np.testing.assert_array_equal(T.arange(2, 11, 3, dtype="float16", device=CPU).numpy(),
                                  np.arange(2, 11, 3, dtype=np.float16))
    assert T.arange(8, dtype="bf16", device=CPU).numpy().astype(np.float32).tolist() == \
        list(range(8))
    with pytest.raises(ValueError, match="step"):
        T.arange(0, 4, 0, device=CPU)


def test_randn_fresh_seeded_and_rounded():
    a, b = T.randn(1000, device=CPU), T.randn(1000, device=CPU)
    assert not np.array_equal(a.numpy(), b.numpy())
    s1, s2 = T.randn(4, 5, seed=7, device=CPU), T.randn((4, 5), seed=7, device=CPU)
    assert s1.shape == (4, 5) and np.array_equal(s1.numpy(), s2.numpy())
    big = T.randn(20000, device=CPU, seed=1).numpy()
    assert abs(big.mean()) < 0.05 and abs(big.std() - 1) < 0.05
    bf = T.randn(64, dtype="bf16", device=CPU, seed=3)
    ref = np.random.default_rng(3).standard_normal(64, dtype=np.float32)
    np.testing.assert_array_equal(bf.numpy(), ref.astype(ml_dtypes.bfloat16))
    f8 = T.randn(64, dtype="float8_e4m3fn", device=CPU, seed=3)
    np.testing.assert_array_equal(f8.numpy(), ref.astype(ml_dtypes.float8_e4m3fn))
    with pytest.raises(TypeError, match="floating"):
        T.randn(3, dtype="int32", device=CPU)


def test_tensor_from_python_data():
    t = T.tensor([[1.5, 2], [3, 4]], device=CPU)
    assert t.dtype == np.float32 and t.shape == (2, 2)
    assert T.tensor([1, 2, 3], device=CPU).dtype == np.int64
    assert T.tensor([True], device=CPU).dtype == np.bool_
    assert T.tensor(2.5, device=CPU).item() == 2.5
    b = T.tensor([1.0, 3.0], dtype="bf16", device=CPU)
    assert b.dtype.name == "bfloat16" and b.numpy().astype(float).tolist() == [1.0, 3.0]


def test_tensor_bad_inputs():
    with pytest.raises((ValueError, TypeError), match="ragged|inhomogeneous|cannot make"):
        T.tensor([[1, 2], [3]], device=CPU)
    with pytest.raises(TypeError):
        T.tensor(["a", "b"], device=CPU)
    with pytest.raises(TypeError):
        T.tensor([1j], device=CPU)


def test_tensor_of_numpy_shares_memory_without_copy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = T.tensor(a, device=CPU)
    assert t.data_ptr == a.ctypes.data and t.storage.borrowed
    a[0, 0] = 42
    assert t.numpy()[0, 0] == 42
    t.numpy()[1, 1] = -1
    assert a[1, 1] == -1
    # a strided numpy view stays a view
    v = T.tensor(a[:, ::2], device=CPU)
    assert v.strides == (4, 2) and v.data_ptr == a.ctypes.data


def test_tensor_of_numpy_keeps_it_alive():
    a = np.arange(5, dtype=np.int32)
    ref = weakref.ref(a)
    t = T.tensor(a, device=CPU)
    del a
    gc.collect()
    assert ref() is not None and t.numpy().tolist() == [0, 1, 2, 3, 4]
    del t
    gc.collect()
    assert ref() is None


def test_tensor_copies_when_it_must():
    a = np.arange(4, dtype=np.float64)
    t = T.tensor(a, dtype="float32", device=CPU)   # dtype change: a copy
    assert t.dtype == np.float32 and t.data_ptr != a.ctypes.data
    big = np.arange(4, dtype=">f4")                  # non-native byte order: a copy
    assert T.tensor(big, device=CPU).numpy().tolist() == [0, 1, 2, 3]
    ro = np.arange(3, dtype=np.float32)
    ro.flags.writeable = False
    r = T.tensor(ro, device=CPU)                     # read-only: shared, marked read-only
    assert r.storage.readonly and not r.numpy().flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        r.copy_(0)


def test_tensor_of_tensor_is_itself():
    t = T.zeros(3, device=CPU)
    assert T.tensor(t, device=CPU) is t
    assert T.as_tensor(t, device=CPU) is t
    c = T.tensor(t, dtype="float16", device=CPU)
    assert c.dtype == np.float16 and c is not t


# ---- views --------------------------------------------------------------------------
def _ref_and_tensor(shape, dtype="int32"):
    ref = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    return ref, T.tensor(ref.copy(), device=CPU)


@pytest.mark.parametrize("key", [
    (slice(1, 3),), (slice(None), slice(None, None, 2)), (1,), (-1, 2), (Ellipsis, 1),
    (slice(None, None, -1),), (slice(3, 0, -2), Ellipsis), (None, 1), (0, None, slice(1, 3)),
    (slice(5, 10),), (Ellipsis,), (np.int64(1), slice(None)),
])
def test_slicing_matches_numpy(key):
    ref, t = _ref_and_tensor((4, 5))
    v = t[key]
    expect = ref[key if Ellipsis in key else key + (Ellipsis,)]  # a view, even 0-d
    assert v.shape == expect.shape
    assert v.strides == tuple(s // 4 for s in expect.strides) or expect.size <= 1
    np.testing.assert_array_equal(v.numpy(), expect)
    if v.size:
        assert v.data_ptr == t.data_ptr + (expect.ctypes.data - ref.ctypes.data)


@pytest.mark.parametrize("key, exc, match", [
    ((4,), IndexError, "out of range"), ((0, -6), IndexError, "out of range"),
    ((0, 0, 0), IndexError, "too many"), ((Ellipsis, Ellipsis), IndexError, "ellipsis"),
    (([0, 1],), TypeError, "indexed by"), ((1.0,), TypeError, "indexed by"),
    ((slice(None, None, 0),), ValueError, "zero"),
])
def test_bad_indices(key, exc, match):
    _, t = _ref_and_tensor((4, 5))
    with pytest.raises(exc, match=match):
        t[key]


def test_views_share_memory_and_setitem():
    t = T.zeros((3, 4), dtype="float32", device=CPU)
    t[1, ::2] = 7
    t[2] = [1, 2, 3, 4]
    t[0, 3] = T.tensor(5.0, device=CPU)
    np.testing.assert_array_equal(t.numpy(), [[0, 0, 0, 5], [7, 0, 7, 0], [1, 2, 3, 4]])
    with pytest.raises(ValueError, match="shape"):
        t[0].copy_([1, 2, 3])


def test_reshape_permute_transpose():
    ref, t = _ref_and_tensor((2, 3, 4))
    np.testing.assert_array_equal(t.reshape(6, 4).numpy(), ref.reshape(6, 4))
    np.testing.assert_array_equal(t.reshape((4, -1)).numpy(), ref.reshape(4, -1))
    np.testing.assert_array_equal(t.permute(2, 0, 1).numpy(), ref.transpose(2, 0, 1))
    np.testing.assert_array_equal(t.transpose(0, 2).numpy(), ref.swapaxes(0, 2))
    np.testing.assert_array_equal(t.T.numpy(), ref.T)
    assert t.T.data_ptr == t.data_ptr
    with pytest.raises(ValueError, match="non-contiguous"):
        t.T.reshape(24)
    with pytest.raises(ValueError, match="cannot reshape"):
        t.reshape(5, 5)
    with pytest.raises(ValueError, match="permutation"):
        t.permute(0, 0, 1)
    np.testing.assert_array_equal(t.T.contiguous().reshape(-1).numpy(), ref.T.reshape(-1))


def test_contiguity():
    t = T.zeros((4, 6), device=CPU)
    assert t.is_contiguous and t[1:3].is_contiguous and t[1].is_contiguous
    assert not t[:, :3].is_contiguous and not t.T.is_contiguous
    assert not t[:, 2:3].is_contiguous and t[2:3, 1:4].is_contiguous
    assert t[0:1, ::2][:, 0:1].is_contiguous  # single element


_dims = st.lists(st.integers(0, 6), min_size=1, max_size=4)


@st.composite
def _views(draw):
    shape = tuple(draw(_dims))
    key = []
    for n in shape:
        kind = draw(st.sampled_from(["slice", "int", "all"]) if n else st.just("all"))
        if kind == "int":
            key.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            start = draw(st.none() | st.integers(-n - 2, n + 2))
            stop = draw(st.none() | st.integers(-n - 2, n + 2))
            step = draw(st.sampled_from([None, 1, 2, 3, -1, -2]))
            key.append(slice(start, stop, step))
        else:
            key.append(slice(None))
    return shape, tuple(key)


@settings(max_examples=300, deadline=None)
@given(_views(), st.sampled_from(["int8", "float16", "float32", "float64"]))
def test_views_and_byte_range_soundness(view, dtype):
    shape, key = view
    ref = np.arange(int(np.prod(shape)), dtype=np.int64).astype(dtype).reshape(shape)
    t = T.tensor(ref.copy(), device=CPU)
    v = t[key]
    exp = ref[key]
    assert v.shape == exp.shape
    np.testing.assert_array_equal(v.numpy(), exp)
    lo, hi = v.byte_range()
    base_lo, base_hi = t.byte_range()
    assert base_lo <= lo <= hi <= base_hi
    if v.size == 0:
        assert lo == hi
        return
    addrs = [v.data_ptr + sum(i * s for i, s in zip(idx, v.strides)) * v.itemsize
             for idx in np.ndindex(*v.shape)]
    assert all(lo <= a and a + v.itemsize <= hi for a in addrs)   # sound
    assert min(addrs) == lo and max(addrs) + v.itemsize == hi     # tight hull
    if v.is_contiguous:
        assert hi - lo == v.nbytes                                  # exact


# ---- host access -------------------------------------------------------------------
def test_numpy_is_a_view_and_array_protocol():
    t = T.arange(6, dtype="float32", device=CPU)
    a = t.numpy()
    a[2] = 100
    assert t[2].item() == 100
    assert np.asarray(t) is not None and np.asarray(t)[2] == 100
    assert np.array(t, dtype=np.float64).dtype == np.float64
    assert len(t) == 6 and list(np.asarray(t[:2])) == [0, 1]
    with pytest.raises(TypeError):
        len(T.zeros((), device=CPU))
    assert bool(T.ones(1, device=CPU)) and not bool(T.zeros((), device=CPU))
    with pytest.raises(ValueError, match="ambiguous"):
        bool(T.ones(2, device=CPU))


def test_numpy_view_outlives_free():
    t = T.arange(4, dtype="int32", device=CPU)
    a = t.numpy()
    t.free()
    assert a.tolist() == [0, 1, 2, 3]  # memory stays alive for existing views


def test_free_and_use_after_free():
    t = T.zeros(8, device=CPU)
    v = t[2:4]
    t.free()
    assert t.storage.freed
    with pytest.raises(ValueError, match="freed"):
        v.numpy()
    with pytest.raises(ValueError, match="freed"):
        t.copy_(1)
    with pytest.raises(ValueError, match="freed"):
        t._launch_words()
    with pytest.raises(ValueError, match="already freed"):
        t.free()
    assert "freed" in repr(t)


def test_to_clone_astype():
    t = T.arange(4, dtype="float32", device=CPU)
    assert t.to("cpu") is t and t.to(CPU) is t
    c = t.clone()
    assert c.data_ptr != t.data_ptr and c.numpy().tolist() == [0, 1, 2, 3]
    assert t.astype("bf16").dtype.name == "bfloat16"
    assert t[::2].clone().is_contiguous


def test_copy_between_overlapping_views():
    t = T.arange(6, dtype="int32", device=CPU)
    t[1:].copy_(t[:-1])
    assert t.numpy().tolist() == [0, 0, 1, 2, 3, 4]


def test_copy_casts_and_broadcasts():
    t = T.zeros((2, 3), dtype="bf16", device=CPU)
    t.copy_(np.array([1.0, 2.0, 3.0]))
    assert t.numpy().astype(float).tolist() == [[1, 2, 3], [1, 2, 3]]


def test_repr():
    r = repr(T.arange(3, dtype="float32", device=CPU))
    assert r.startswith("tl.tensor([") and "float32" in r and "cpu" in r
    big = repr(T.zeros((100, 100), device=CPU))
    assert "shape=(100, 100)" in big and "float32" in big


# ---- launch facts ----------------------------------------------------------------------
def test_spec_alignment_and_launch_words():
    t = T.zeros((4, 8), dtype="bf16", device=CPU)
    s = t.__tilelab_spec__()
    assert s == ArraySpec((4, 8), "bfloat16", (8, 1), 16)
    assert t.__tilelab_spec__() is s  # cached
    v = t[1:, 1::2]
    assert v.__tilelab_spec__().align == 2  # 8*2 + 2 bytes past a 64-byte boundary
    assert v.__tilelab_spec__().strides == (8, 2)
    assert v._launch_words() == (v.data_ptr, 3, 4, 8, 2)
    assert all(type(w) is int for w in v._launch_words())
    from tilelab.compiler.signature import describe_arg
    assert describe_arg(t) == s


def test_storage_alignment():
    for n in (1, 3, 100, 1000):
        assert T.empty(n, dtype="int8", device=CPU).data_ptr % 64 == 0


def test_ledger_claim_keys_by_space_and_address():
    a = np.zeros(16, np.float32)
    t1, t2 = T.tensor(a, device=CPU), T.from_dlpack(a)
    c1, c2 = t1[:8]._ledger_claim(True, "z"), t2[4:]._ledger_claim(False, "x")
    assert c1[0] == c2[0] == ("cpu",)
    assert c1[1] < c2[2] and c2[1] < c1[2]  # the two wrappers' ranges overlap


# ---- the borrow ledger -------------------------------------------------------------
@pytest.fixture
def pending():
    """Register fake pending launches; release them after the test."""
    recs = []

    def make(t, exclusive, kernel="scale_kernel", param="z"):
        rec = LaunchRecord(kernel=kernel, site="cell.py:12", stream=None,
                           query=lambda: False)
        LEDGER.add(rec, [t._ledger_claim(exclusive, param)], [t.storage])
        recs.append(rec)
        return rec

    yield make
    for r in recs:
        LEDGER.observe(r)


def test_ledger_blocks_reads_of_pending_writes(pending):
    t = T.zeros(16, device=CPU)
    rec = pending(t[:8], exclusive=True)
    with pytest.raises(BorrowError, match="scale_kernel.*cell.py:12"):
        t.numpy()
    with pytest.raises(BorrowError, match="scale_kernel"):
        t[4:6].numpy()
    with pytest.raises(BorrowError, match="scale_kernel"):
        np.asarray(t)
    assert t[8:].numpy().tolist() == [0] * 8          # disjoint: fine
    assert "pending" in repr(t)
    LEDGER.observe(rec)
    assert t.numpy().shape == (16,)


def test_ledger_blocks_writes_and_free_of_pending_reads(pending):
    t = T.zeros(16, device=CPU)
    pending(t, exclusive=False, kernel="reader")
    assert t.numpy().shape == (16,)                   # shared borrows allow reads
    with pytest.raises(BorrowError, match="reader"):
        t.copy_(1)
    with pytest.raises(BorrowError, match="reader"):
        t[3] = 1
    with pytest.raises(BorrowError, match="reader"):
        t.free()
    assert not t.storage.freed


def test_ledger_sees_other_wrappers_of_the_same_memory(pending):
    a = np.zeros(16, np.float32)
    t1 = T.tensor(a, device=CPU)
    t2 = T.from_dlpack(a)
    pending(t1[:4], exclusive=True, kernel="writer")
    with pytest.raises(BorrowError, match="writer"):
        t2[2:].numpy()
    with pytest.raises(BorrowError, match="writer"):
        t2.free()


def test_ledger_src_of_copy_is_checked(pending):
    src, dst = T.zeros(4, device=CPU), T.zeros(4, device=CPU)
    pending(src, exclusive=True, kernel="producer")
    with pytest.raises(BorrowError, match="producer"):
        dst.copy_(src)


def test_unchecked_skips_the_ledger(pending):
    t = T.zeros(4, device=CPU)
    pending(t, exclusive=True)
    with unchecked():
        assert t.numpy().shape == (4,)


def test_free_of_other_storage_in_the_same_space_is_fine(pending):
    a, b = T.zeros(4, device=CPU), T.zeros(4, device=CPU)
    pending(a, exclusive=True)
    b.free()


# ---- devices and backends ------------------------------------------------------------
def test_device_probe_never_raises():
    assert isinstance(dev.gpu_available(), bool)
    assert isinstance(dev.gpu_unavailable_reason(), str)
    assert dev.current_arch() is None or dev.current_arch().startswith("sm_")


@pytest.mark.skipif(dev.gpu_available(), reason="this machine has a usable GPU")
def test_no_gpu_means_cpu_backend_and_clear_errors():
    with config.override(backend="auto"):
        assert dev.gpu_unavailable_reason()
        assert dev.backend() == "cpu" and dev.default_device() == "cpu"
        assert T.zeros(2).device == "cpu"
        assert dev.current_arch() is None
        with pytest.raises(LaunchError, match="sm_80.*CUDA 13"):
            T.zeros(2, device="cuda")
    with config.override(backend="gpu"):
        with pytest.raises(LaunchError, match="TILELAB_BACKEND=gpu") as e:
            dev.backend()
    assert dev.gpu_unavailable_reason() in str(e.value)


def test_backend_override(monkeypatch):
    with config.override(backend="cpu"):
        assert dev.backend() == "cpu" and T.zeros(1).device == "cpu"
    # (the variable itself: a value it does not take is refused where it is read)
    monkeypatch.setenv("TILELAB_BACKEND", "tpu")
    with pytest.raises(ConfigError, match="TILELAB_BACKEND='tpu' is not allowed; it takes "
                                          "auto, cpu, gpu"):
        dev.backend()


def test_parse_device():
    assert dev.parse_device("cpu") == "cpu" and dev.parse_device(" CPU ") == "cpu"
    with pytest.raises(ValueError):
        dev.parse_device("cuda:x")
    assert dev.num_sms("cpu") >= 1


def test_synchronize_observes_pending_records():
    t = T.zeros(4, device=CPU)
    rec = LaunchRecord(kernel="k", site="x:1", stream=None, query=lambda: False)
    LEDGER.add(rec, [t._ledger_claim(True, "z")], [t.storage])
    dev.synchronize()
    assert rec.observed and t.numpy().shape == (4,)


# ---- graph capture ---------------------------------------------------------------------
class _FakeGraph:
    def __init__(self):
        self.copies = []

    def record_copy(self, dst, src):
        self.copies.append((dst, src))


@pytest.fixture
def capturing():
    from tilelab.runtime import graph_capture

    g = _FakeGraph()
    graph_capture.set_current_graph(g)
    yield g
    graph_capture.set_current_graph(None)


def test_allocation_inside_a_graph_is_refused(capturing):
    with pytest.raises(LaunchError, match="tl.graph"):
        T.zeros(4, device=CPU)
    with pytest.raises(LaunchError, match="tl.graph"):
        T.tensor([1, 2], device=CPU)


def test_copy_inside_a_graph_is_recorded_then_replayed():
    from tilelab.runtime import graph_capture

    dst, src = T.zeros(4, device=CPU), T.arange(4, dtype="float32", device=CPU)
    g = _FakeGraph()
    graph_capture.set_current_graph(g)
    try:
        assert dst.copy_(src) is dst
        with pytest.raises(LaunchError, match="tilelab tensor"):
            dst.copy_(np.ones(4))
    finally:
        graph_capture.set_current_graph(None)
    assert g.copies == [(dst, src)] and dst.numpy().tolist() == [0, 0, 0, 0]
    dst._copy_from_on(src, None)                 # what a CPU replay does
    assert dst.numpy().tolist() == [0, 1, 2, 3]

