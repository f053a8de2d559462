"""Host cost of the prepared launch path, measured without a GPU (a profiling tool only).

This builds a real prepared launch (``_GpuLaunch``) of ``vector_add`` over CPU tensors,
with the few GPU things it touches faked: the driver's ``cuLaunchKernel`` is a no-op
Python function returning ``(CUDA_SUCCESS,)``, and the GPU, its stream and events are
stand-ins whose ``sync``/``record`` do nothing. Everything else (the launch cache lookup,
the checks, the borrow ledger, the launch record and the future) is the real code, so
the difference between the first row and the others is the Python bookkeeping of a
launch. Rows (microseconds per call, the median of several samples):

    bare_noop_driver        the no-op driver call alone
    async_keep              kernel.launch_async(...), every future kept (as runtime_bench)
    async_drop              the same, each future dropped at once
    async_keep_last         the same, only the last future kept
    sync_no_stream_sync     kernel(...), whose stream sync does nothing here
    *_over_driver           each of those minus the bare call

It is not a benchmark of tilelab on a GPU: the real figure comes from
``benchmarks/runtime_bench.py`` (``launch_overhead``) on the GPU machine. Run:

    python benchmarks/hotpath_profile.py            # the table
    python benchmarks/hotpath_profile.py --profile  # plus cProfile of the async path
    python benchmarks/hotpath_profile.py --native   # through the native launch module
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tilelab as tl
from tilelab.kernels.examples import vector_add
from tilelab.runtime import launch as L
from tilelab.runtime.ledger import LEDGER

N = 2000      # launches per sample, as runtime_bench.bench_launch_overhead
REPEATS = 7   # samples; the median is reported


class _Event:
    is_done = True

    def sync(self) -> None:
        pass


class _Stream:
    """A stand-in for cuda.core's Stream: a driver handle, and sync/record that wait for
    nothing (the stand-in GPU finishes everything at once)."""

    def __init__(self, handle: int):
        from cuda.bindings import driver

        self.handle = driver.CUstream(handle)

    def sync(self) -> None:
        pass

    def record(self) -> _Event:
        return _Event()


class _Gpu:
    """The attributes of tilelab.runtime.device.GPU that the prepared launch reads."""

    def __init__(self):
        self.stream = _Stream(0x7F00_1234)
        self.stream_handle = int(self.stream.handle)
        self.num_sms = 132
        self._current = threading.local()
        self.make_current()

    def make_current(self) -> None:
        self._current.ok = True


class _CuKernel:
    def __init__(self):
        from cuda.bindings import driver

        self.handle = driver.CUfunction(0x7F00_5678)


def _bind_native() -> None:
    """Launch through tilelab's native module (its C async path included), bound to the
    tests' stand-in libcuda (tests/runtime/fake_libcuda.c: C functions that log the call
    and return 0)."""
    import shutil
    import subprocess
    import tempfile

    from tilelab.runtime import native

    src = Path(__file__).resolve().parent.parent / "tests" / "runtime" / "fake_libcuda.c"
    lib = Path(tempfile.mkdtemp()) / "libfakecuda.so"
    subprocess.run([shutil.which("cc") or "gcc", "-O2", "-shared", "-fPIC", str(src), "-o",
                    str(lib)], check=True)
    mod = native.load(str(lib))
    if mod is None:
        raise SystemExit(native.status())
    L._bind_native(mod)


def _setup():
    """A prepared launch of vector_add(zp, x, y) in the kernel's launch cache, with the
    driver faked; returns (args, the no-op driver call and its arguments)."""
    from cuda.bindings import driver

    ok = (driver.CUresult.CUDA_SUCCESS,)

    def cu_launch_kernel(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):
        return ok

    fake_gpu = _Gpu()

    def default_gpu():
        L._SUCCESS[0] = driver.CUresult.CUDA_SUCCESS
        L._cuLaunchKernel[0] = cu_launch_kernel
        return fake_gpu

    L._default_gpu = default_gpu
    x = tl.randn(1024, device="cpu")
    y = tl.randn(1024, device="cpu")
    z = tl.empty(1024, device="cpu")
    zp = z.partition(1024)
    args = (zp, x, y)
    launcher = vector_add._launcher
    norm, _ = launcher.prepare(args)
    cpu_plan = launcher.plan(norm, "cpu")
    grid = launcher.grid_for(cpu_plan, None)
    plan = dataclasses.replace(cpu_plan, device="gpu", cu_kernel=_CuKernel())
    claims = launcher.check_aliases(plan, norm)
    fast = L._GpuLaunch(launcher, plan, args, norm, grid, claims, True)
    launcher._fast[hash(args)] = fast
    assert fast.run(args, None, False) is not L._STALE   # the fast path is taken
    LEDGER.observe_all()
    if fast.native is not None:   # the bare call is then the native module's
        return args, (L._native_launch, (fast.native,))
    return args, (cu_launch_kernel, fast.argv)


def per_call(fn, after=None) -> float:
    """Median seconds per call of N calls, over REPEATS samples (GC on, as in real use)."""
    samples = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        for _ in range(N):
            fn()
        t1 = time.perf_counter()
        if after is not None:
            after()
        samples.append((t1 - t0) / N)
    return statistics.median(samples)


def measure() -> dict:
    args, (drv, dargs) = _setup()
    zp, x, y = args
    out = {}
    out["bare_noop_driver_us"] = per_call(lambda: drv(*dargs)) * 1e6

    futs: list = []
    launch_async = vector_add.launch_async

    def keep():
        futs.append(launch_async(zp, x, y))

    # as runtime_bench: 7 x 2000 futures stay alive until the end
    out["async_keep_us"] = per_call(keep) * 1e6
    futs.clear()
    LEDGER.observe_all()
    gc.collect()

    out["async_drop_us"] = per_call(lambda: launch_async(zp, x, y),
                                    LEDGER.observe_all) * 1e6
    LEDGER.observe_all()

    last = [None]

    def keep_last():
        last[0] = launch_async(zp, x, y)

    out["async_keep_last_us"] = per_call(keep_last, lambda: last[0].wait()) * 1e6
    out["sync_no_stream_sync_us"] = per_call(lambda: vector_add(zp, x, y)) * 1e6
    LEDGER.observe_all()
    for k in ("async_keep_us", "async_drop_us", "async_keep_last_us",
              "sync_no_stream_sync_us"):
        out[k.replace("_us", "_over_driver_us")] = out[k] - out["bare_noop_driver_us"]
    return out


def profile() -> None:
    import cProfile
    import pstats

    args, _ = _setup()
    zp, x, y = args
    futs = []
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(20000):
        futs.append(vector_add.launch_async(zp, x, y))
    pr.disable()
    LEDGER.observe_all()
    pstats.Stats(pr).sort_stats("tottime").print_stats(15)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", action="store_true", help="also run cProfile")
    ap.add_argument("--native", action="store_true",
                    help="launch through the native module (bound to a no-op libcuda)")
    ns = ap.parse_args(argv)
    if ns.native:
        _bind_native()
    res = measure()
    width = max(map(len, res))
    for k, v in res.items():
        print(f"{k:<{width}}  {v:7.3f} us")
    if ns.profile:
        profile()
    return 0


if __name__ == "__main__":
    sys.exit(main())
