"""Kernels on the GPU: correctness on fresh random data, every runtime error, async
chains, graphs, torch/cupy interop, and agreement with the CPU interpreter."""
from __future__ import annotations

import numpy as np
import pytest

import cuda.tile as ct
import tilelab as tl
from tilelab.kernels.examples import gemm, next_pow2, persistent_gemm, softmax, vector_add


def rel_err(out, ref):
    out = np.asarray(out, np.float64)
    ref = np.asarray(ref, np.float64)
    assert not np.isnan(out).any(), "NaN in output"
    return np.linalg.norm(out - ref) / np.linalg.norm(ref)


def poisoned(shape, dtype):
    """An output pre-filled with NaN: any element the kernel misses shows up."""
    return tl.full(shape, float("nan"), dtype=dtype, device="cuda")


@pytest.mark.parametrize("n,tile", [(1 << 20, 1024), (1000, 256), (4096 + 17, 512)])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_vector_add(n, tile, dtype):
    x = tl.randn(n, dtype=dtype, device="cuda")
    y = tl.randn(n, dtype=dtype, device="cuda")
    z = poisoned(n, dtype)
    vector_add(z.partition(tile), x, y)
    ref = x.numpy().astype(np.float64) + y.numpy().astype(np.float64)
    tol = 1e-6 if dtype == "float32" else 1e-2
    assert rel_err(z.numpy(), ref) < tol


@pytest.mark.parametrize("schedule", [tl.row_major, tl.grouped(8)])
@pytest.mark.parametrize("m,n,k", [(1024, 1024, 1024), (1000, 777, 300)])
def test_gemm_bf16(schedule, m, n, k):
    a = tl.randn(m, k, dtype="bfloat16", device="cuda")
    b = tl.randn(k, n, dtype="bfloat16", device="cuda")
    c = poisoned((m, n), "float32")
    gemm(c.partition((128, 128), schedule=schedule), a, b, 64)
    ref = a.numpy().astype(np.float64) @ b.numpy().astype(np.float64)
    assert rel_err(c.numpy(), ref) < 1e-5   # bf16 products are exact in fp32


def test_persistent_gemm_matches_gemm():
    a = tl.randn(1024, 512, dtype="bfloat16", device="cuda")
    b = tl.randn(512, 768, dtype="bfloat16", device="cuda")
    c1 = poisoned((1024, 768), "bfloat16")
    c2 = poisoned((1024, 768), "bfloat16")
    gemm(c1.partition((128, 128)), a, b, 64)
    persistent_gemm(c2.partition((128, 128), schedule=tl.persistent(group_m=8)), a, b, 64)
    assert np.array_equal(c1.numpy().astype(np.float32), c2.numpy().astype(np.float32))


@pytest.mark.parametrize("rows,cols", [(512, 1000), (33, 4096)])
def test_softmax(rows, cols):
    x = tl.randn(rows, cols, device="cuda")
    y = poisoned((rows, cols), "float32")
    softmax(y.partition((1, next_pow2(cols))), x)
    xn = x.numpy().astype(np.float64)
    e = np.exp(xn - xn.max(1, keepdims=True))
    assert rel_err(y.numpy(), e / e.sum(1, keepdims=True)) < 1e-5


@tl.kernel
def scale(p: tl.InOut, factor):
    p.store(p.load() * factor)


def test_inout_and_scalar():
    x = tl.randn(5000, device="cuda")
    before = x.numpy().copy()
    scale(x.partition(1024), 3.0)
    assert np.allclose(x.numpy(), before * 3.0)


# ---- errors ---------------------------------------------------------------------------


def test_alias_error_names_both_parameters():
    x = tl.randn(4096, device="cuda")
    with pytest.raises(tl.AliasError, match="'z' \\(tl.Out\\) overlaps 'x'"):
        vector_add(x.partition(256), x, tl.randn(4096, device="cuda"))
    # overlapping views of one buffer are caught too
    buf = tl.randn(8192, device="cuda")
    with pytest.raises(tl.AliasError):
        vector_add(buf[:4096].partition(256), buf[2048:6144], buf[4096:])
    # disjoint views are fine
    vector_add(buf[:4096].partition(256), buf[4096:], buf[4096:])


def test_unchecked_skips_the_alias_check():
    x = tl.randn(4096, device="cuda")
    before = x.numpy().copy()
    with tl.unchecked():
        vector_add(x.partition(256), x, x)   # in place: each block reads its own tile
    assert np.allclose(x.numpy(), 2 * before)


def test_borrow_error_on_host_read_of_pending_output():
    x = tl.randn(1 << 22, device="cuda")
    y = tl.randn(1 << 22, device="cuda")
    z = tl.empty(1 << 22, device="cuda")
    fut = vector_add.launch_async(z.partition(1024), x, y)
    with pytest.raises(tl.BorrowError, match="pending kernel 'vector_add' launched at .*"
                                             "test_kernels_gpu.py"):
        z.numpy()
    x.numpy()   # reading an input of a pending launch is fine (shared borrow)
    with pytest.raises(tl.BorrowError):
        x.copy_(tl.zeros(1 << 22, device="cuda"))   # writing it is not
    with pytest.raises(tl.BorrowError):
        z.free()
    fut.wait()
    assert np.allclose(z.numpy(), x.numpy() + y.numpy())


def test_borrow_error_on_conflicting_launch_on_another_stream():
    x = tl.randn(1 << 22, device="cuda")
    z = tl.empty(1 << 22, device="cuda")
    w = tl.empty(1 << 22, device="cuda")
    fut = vector_add.launch_async(z.partition(1024), x, x)
    other = tl.stream()
    with pytest.raises(tl.BorrowError, match="on another stream"):
        vector_add.launch_async(w.partition(1024), z, x, stream=other)
    # the same stream is ordered: no conflict
    fut2 = vector_add.launch_async(w.partition(1024), z, x)
    fut2.wait()
    fut.wait()
    assert np.allclose(w.numpy(), 3 * x.numpy())


def test_then_chains_on_the_same_stream_and_done():
    x = tl.randn(1 << 20, device="cuda")
    z = tl.empty(1 << 20, device="cuda")
    w = tl.empty(1 << 20, device="cuda")
    fut = vector_add.launch_async(z.partition(1024), x, x).then(
        vector_add, w.partition(1024), z, x)
    fut.wait()
    assert fut.done()
    assert np.allclose(w.numpy(), 3 * x.numpy())


def test_dropped_future_keeps_memory_alive():
    import gc

    x = tl.randn(1 << 22, device="cuda")
    z = tl.empty(1 << 22, device="cuda")
    vector_add.launch_async(z.partition(1024), x, x)   # future dropped at once
    del x
    gc.collect()
    tl.synchronize()
    assert np.isfinite(z.numpy()).all()


def test_grid_errors():
    x = tl.randn(4096, device="cuda")
    with pytest.raises(tl.LaunchError, match="inferred from the partitions"):
        vector_add(x.partition(256), x.clone(), x.clone(), grid=(4,))


def test_partition_grid_mismatch():
    a = tl.randn(256, 64, device="cuda")
    with pytest.raises(tl.LaunchError, match="different tile grids"):
        _two(a.partition((16, 64)), tl.empty(128, device="cuda").partition(16), a)


@tl.kernel
def _two(z: tl.Out, s: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    z.store(t)
    s.store(ct.sum(t, axis=1))


def test_mixed_devices_rejected():
    x = tl.randn(4096, device="cuda")
    with pytest.raises(tl.LaunchError, match="different devices"):
        vector_add(tl.empty(4096, device="cuda").partition(256), x,
                   tl.randn(4096, device="cpu"))


# ---- graphs ---------------------------------------------------------------------------


def test_graph_replay():
    x = tl.randn(1 << 20, device="cuda")
    z = poisoned(1 << 20, "float32")
    w = poisoned(1 << 20, "float32")
    with tl.graph() as g:
        vector_add(z.partition(1024), x, x)
        vector_add(w.partition(1024), z, x)
    assert np.isnan(w.numpy()).all()   # recording ran nothing
    fut = g.replay()
    with pytest.raises(tl.BorrowError):
        w.numpy()
    fut.wait()
    assert np.allclose(w.numpy(), 3 * x.numpy())
    x.copy_(tl.ones(1 << 20, device="cuda"))
    g.replay().wait()
    assert np.allclose(w.numpy(), 3.0)


def test_graph_refuses_allocation():
    with pytest.raises(tl.LaunchError, match="inside 'with tl.graph\\(\\)'"):
        with tl.graph():
            tl.empty(16, device="cuda")


# ---- interop --------------------------------------------------------------------------


def test_torch_tensors_go_straight_to_kernels():
    torch = pytest.importorskip("torch")
    x = torch.randn(1 << 20, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(1 << 20, device="cuda", dtype=torch.bfloat16)
    z = torch.empty_like(x)
    vector_add(tl.from_dlpack(z).partition(1024), x, y)
    torch.cuda.synchronize()
    assert torch.allclose(z.float(), (x.float() + y.float()), rtol=1e-2, atol=1e-2)


def test_cupy_arrays_go_straight_to_kernels():
    cp = pytest.importorskip("cupy")
    x = cp.random.standard_normal(1 << 20, dtype=cp.float32)
    z = cp.empty_like(x)
    vector_add(tl.from_dlpack(z).partition(1024), x, x)
    assert cp.allclose(z, 2 * x)


# ---- the two backends agree (issue: CPU backend) ---------------------------------------


@pytest.mark.parametrize("case", ["vadd_f32", "vadd_bf16", "gemm_bf16", "gemm_f32_tf32",
                                  "softmax_f32", "pgemm_bf16"])
def test_cpu_and_gpu_agree(case):
    rng = np.random.default_rng()
    if case.startswith("vadd"):
        dt = "float32" if case.endswith("f32") else "bfloat16"
        xs = [rng.standard_normal(100_003).astype(np.float32) for _ in range(2)]
        outs = []
        for dev in ("cpu", "cuda"):
            x, y = (tl.tensor(v, dtype=dt, device=dev) for v in xs)
            z = tl.empty(100_003, dtype=dt, device=dev)
            vector_add(z.partition(1024), x, y)
            outs.append(z.numpy().astype(np.float64))
        tol = 1e-6 if dt == "float32" else 1e-2
    elif case.startswith("gemm") or case.startswith("pgemm"):
        dt = "float32" if "f32" in case else "bfloat16"
        A = rng.standard_normal((300, 200)).astype(np.float32)
        B = rng.standard_normal((200, 260)).astype(np.float32)
        outs = []
        for dev in ("cpu", "cuda"):
            a, b = tl.tensor(A, dtype=dt, device=dev), tl.tensor(B, dtype=dt, device=dev)
            c = tl.empty((300, 260), device=dev)
            if case.startswith("pgemm"):
                persistent_gemm(c.partition((64, 64), schedule=tl.persistent()), a, b, 32)
            else:
                gemm(c.partition((64, 64)), a, b, 32)
            outs.append(c.numpy().astype(np.float64))
        tol = 3e-4 if dt == "float32" else 1e-5
    else:
        X = rng.standard_normal((64, 1000)).astype(np.float32)
        outs = []
        for dev in ("cpu", "cuda"):
            x = tl.tensor(X, device=dev)
            y = tl.empty((64, 1000), device=dev)
            softmax(y.partition((4, 1024)), x)
            outs.append(y.numpy().astype(np.float64))
        tol = 1e-5
    assert rel_err(outs[0], outs[1]) < tol


def test_repeated_launch_fast_path_still_checks():
    x = tl.randn(4096, device="cuda")
    y = tl.randn(4096, device="cuda")
    z = tl.empty(4096, device="cuda")
    zp = z.partition(256)
    for _ in range(3):                      # the second and third hit the launch cache
        vector_add(zp, x, y)
    assert np.allclose(z.numpy(), x.numpy() + y.numpy())
    fut = vector_add.launch_async(zp, x, y)
    with pytest.raises(tl.BorrowError):     # the cached path still registers borrows
        z.numpy()
    fut.wait()
    other = tl.stream()
    fut = vector_add.launch_async(zp, x, y)
    with pytest.raises(tl.BorrowError, match="another stream"):
        vector_add.launch_async(zp, x, y, stream=other)
    fut.wait()
    y.free()
    with pytest.raises(tl.TilelabError, match="freed"):
        vector_add(zp, x, y)


def test_graph_is_a_dag_of_the_borrows():
    x = tl.randn(1 << 16, device="cuda")
    zs = [poisoned(1 << 16, "float32") for _ in range(4)]
    with tl.graph() as g:
        vector_add(zs[0].partition(1024), x, x)          # independent of the next
        vector_add(zs[1].partition(1024), x, x)
        vector_add(zs[2].partition(1024), zs[0], zs[1])  # needs both
        vector_add(zs[3].partition(1024), zs[2], x)      # needs the third
        vector_add(zs[0].partition(1024), x, zs[3])      # rewrites an input of the third
    assert g.dependencies() == [[], [], [0, 1], [2], [3]]
    g.replay().wait()
    xn = x.numpy()
    assert np.allclose(zs[3].numpy(), 5 * xn)
    assert np.allclose(zs[0].numpy(), 6 * xn)


def test_prepared_launches_do_not_keep_memory_alive():
    """The launch cache holds its arguments weakly: a dropped output is freed."""
    import gc
    import weakref

    x = tl.randn(1 << 16, device="cuda")
    z = tl.empty(1 << 16, device="cuda")
    zp = z.partition(1024)
    vector_add(zp, x, x)
    vector_add(zp, x, x)          # now prepared in the kernel's launch cache
    assert vector_add._launcher._fast
    storage = weakref.ref(z.storage)
    del z, zp
    gc.collect()
    assert storage() is None


def test_bench_window_holds_device_time_only():
    """A call that spends 200 us on the host before a ~5 us launch is timed near its
    device time: the repeated L2 flush covers the host, so the events do not time the
    idle gap (before the cover, a raw ct.launch's ~100 us of host time showed up)."""
    import time as _time

    x = tl.randn(1 << 16, dtype="float32", device="cuda")
    y = tl.randn(1 << 16, dtype="float32", device="cuda")
    z = tl.empty(1 << 16, "float32", device="cuda")
    part = z.partition(1024)

    def quick():
        vector_add.launch_async(part, x, y)

    def slow_host():
        t0 = _time.perf_counter()
        while _time.perf_counter() - t0 < 200e-6:
            pass
        vector_add.launch_async(part, x, y)

    fast = tl.bench(quick, warmup=3, rep=20)
    slow = tl.bench(slow_host, warmup=3, rep=20)
    assert slow.host_median > 200e-6
    assert slow.meta["host_cover_flushes"] > 1
    assert slow.median < fast.median + 20e-6, (slow, fast)
