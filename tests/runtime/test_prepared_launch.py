"""The prepared (repeated) GPU launch path, run here without a GPU.

``_GpuLaunch.run`` only runs with a GPU, and tests/gpu skip without one; these tests run
it over CPU tensors with the few GPU things faked (the driver's ``cuLaunchKernel``, the
GPU, its streams and events), so that its checks — same objects, freed memory, borrows,
streams, threads, error paths — are exercised on every machine.
"""
from __future__ import annotations

import dataclasses
import gc
import sys
import threading
import weakref

import pytest

import tilelab as tl
from tilelab import config
from tilelab.errors import BorrowError, LaunchError
from tilelab.runtime import launch as L
from tilelab.runtime.launch import prepared as P
from tilelab.runtime.ledger import LEDGER, LaunchRecord, Ledger


@tl.kernel
def add(z: tl.Out, x: tl.In, y: tl.In):
    z.store(tl.load_like(x, z) + tl.load_like(y, z))


class _Event:
    def __init__(self, stream: _Stream):
        self.stream = stream

    @property
    def is_done(self) -> bool:
        return self.stream.done

    def sync(self) -> None:
        pass


class _Stream:
    """A stand-in for a cuda.core Stream: a handle, and sync/record that wait for nothing."""

    def __init__(self, handle: int):
        self.handle = handle
        self.done = True   # what events recorded on it report
        self.syncs = 0

    def sync(self) -> None:
        self.syncs += 1

    def record(self) -> _Event:
        return _Event(self)


class _Gpu:
    """What the prepared launch reads of tilelab.runtime.device.GPU."""

    def __init__(self):
        self.stream = _Stream(0x1000)
        self.stream_handle = self.stream.handle
        self.num_sms = 4
        self._current = threading.local()
        self.made_current = 0

    def make_current(self) -> None:
        self._current.ok = True
        self.made_current += 1


class _CuKernel:
    handle = 0x5678


class FakeGpu:
    """The fake driver and GPU, and helpers to prepare launches of ``add`` on them.

    ``mode`` "driver": cuda-bindings' ``cuLaunchKernel`` is a Python function recording
    its arguments; "native": tilelab's native launch module (C, async path included) is
    bound to a C stand-in libcuda (``lib``) that logs its calls."""

    def __init__(self, monkeypatch, mode: str = "driver", lib=None):
        from cuda.bindings import driver

        self.mode = mode
        self.gpu = _Gpu()
        self._launches: list[tuple] = []
        self._result = driver.CUresult.CUDA_SUCCESS
        self.streams = {}
        d = L.DRIVER
        monkeypatch.setattr(d, "path", "driver")
        monkeypatch.setattr(d, "why", "a fake driver (tests)")
        monkeypatch.setattr(d, "cu_launch_kernel", self._cu_launch_kernel)
        monkeypatch.setattr(d, "success", driver.CUresult.CUDA_SUCCESS)
        monkeypatch.setattr(d, "gpu", lambda: self.gpu)
        for name in ("native_launch", "native_launch_on", "native_sync", "native_prepare",
                     "hot"):
            monkeypatch.setattr(d, name, None)
        monkeypatch.setattr("tilelab.runtime.streams.resolve_stream", self._resolve)
        # the first launch of new arguments takes the full path: on the GPU there, here
        # preparing them as a GPU launch would do, then running the prepared launch
        monkeypatch.setattr(L.Launcher, "_launch_cpu", self._launch_gpu)
        if mode == "native":
            from support.fake_libcuda import recorder

            from tilelab.runtime import native

            with config.override(launch="native", hot=True):   # (read here only)
                native._reset()
                mod = native.load(str(lib))
                assert mod is not None, native.status()
                self.lib = recorder(lib)
                d.use_native(mod)
            assert d.hot is not None and d.path == "native"

    @property
    def launches(self) -> list[tuple]:
        """Each driver launch's arguments, as cuLaunchKernel takes them."""
        if self.mode == "driver":
            return self._launches
        c = self.lib.fake_call
        return [(c(i, 0), c(i, 1), c(i, 2), c(i, 3), 1, 1, 1, 0, c(i, 4), c(i, 5), 0)
                for i in range(self.lib.fake_launches())]

    @property
    def syncs(self) -> int:
        """Stream synchronizations of the default stream."""
        return self.gpu.stream.syncs if self.mode == "driver" else self.lib.fake_syncs()

    @property
    def result(self):
        return self._result

    @result.setter
    def result(self, value) -> None:
        """What the driver's launch returns from now on."""
        self._result = value
        if self.mode == "native":
            self.lib.fake_set_error(int(value))

    def _cu_launch_kernel(self, *argv):
        self._launches.append(argv)
        return (self._result,)

    def _resolve(self, stream=None):
        if stream is None:
            return self.gpu.stream
        if isinstance(stream, _Stream):
            return stream
        return self.streams.setdefault(stream, _Stream(0x2000 + len(self.streams)))

    def _launch_gpu(self, *args):
        raise AssertionError("the full path ran where the prepared launch should have")

    def prepare(self, *args, stream=None, kernel=None):
        """A prepared launch of kernel(*args) (default ``add``) in its launch cache (what
        a first GPU launch leaves there)."""
        launcher = (kernel or add)._launcher
        norm, _ = launcher.prepare(args)
        cpu_plan = launcher.plan(norm, "cpu")
        plan = dataclasses.replace(cpu_plan, device="gpu", cu_kernel=_CuKernel())
        claims = launcher.check_aliases(plan, norm)
        fast = P.PreparedLaunch(launcher, plan, args, norm, launcher.grid_for(cpu_plan, None),
                            claims, True)
        launcher._fast[hash(args)] = fast
        return fast


@pytest.fixture(params=["driver", "native"])
def fake(monkeypatch, request):
    add._launcher._fast.clear()
    lib = request.getfixturevalue("fake_libcuda") if request.param == "native" else None
    yield FakeGpu(monkeypatch, request.param, lib)
    LEDGER.observe_all()
    add._launcher._fast.clear()
    if request.param == "native":
        from tilelab.runtime import native

        native._reset()


def _args():
    x = tl.randn(1024, device="cpu")
    y = tl.randn(1024, device="cpu")
    z = tl.empty(1024, device="cpu")
    return z.partition(256), x, y


def test_repeated_launches_go_straight_to_the_driver(fake):
    zp, x, y = args = _args()
    fast = fake.prepare(*args)
    add(zp, x, y)
    fut = add.launch_async(zp, x, y)
    assert len(fake.launches) == 2 and fake.syncs == 1
    # plain int handles, the default stream, the packed parameters
    assert fake.launches[0] == (0x5678, 4, 1, 1, 1, 1, 1, 0, 0x1000, fast.params[0], 0)
    assert isinstance(fut, tl.Future) and fut.stream is fake.gpu.stream
    assert LEDGER.pending_count == 1
    assert fut.done() and LEDGER.pending_count == 0


def test_pending_launch_holds_borrows_and_names_the_launching_line(fake):
    zp, x, y = args = _args()
    fake.prepare(*args)
    line = sys._getframe().f_lineno + 1
    fut = add.launch_async(zp, x, y)
    with pytest.raises(BorrowError, match=rf"pending kernel 'add' launched at "
                                          rf".*test_prepared_launch.py:{line}\b"):
        zp.tensor.numpy()
    x.numpy()                                  # reading an input is fine
    with pytest.raises(BorrowError):
        x.copy_(tl.zeros(1024, device="cpu"))  # writing it is not
    assert f"test_prepared_launch.py:{line}" in repr(fut)
    fut.wait()
    zp.tensor.numpy()


def test_dropped_future_keeps_memory_and_says_so(fake, monkeypatch):
    zp, x, y = args = _args()
    fake.prepare(*args)
    add.launch_async(zp, x, y).wait()   # (the call site is known from here on)
    if fake.mode == "native" and sys.version_info >= (3, 11):   # (the C path's Pythons)
        monkeypatch.setattr(P.PreparedLaunch, "run", None)   # the C path alone launches next
    storage = weakref.ref(x.storage)
    add.launch_async(zp, x, y)   # dropped at once
    del args, x
    gc.collect()
    assert storage() is not None   # the pending launch keeps its inputs alive
    fake.gpu.stream.done = False
    with pytest.raises(BorrowError, match=r"its future was dropped before anyone waited"):
        zp.tensor.numpy()
    fake.gpu.stream.done = True    # finished: a dropped launch no longer gets in the way
    zp.tensor.numpy()
    assert LEDGER.pending_count == 0
    gc.collect()
    assert storage() is None


def test_a_prepared_launch_keeps_nothing_alive(fake):
    zp, x, y = _args()
    fake.prepare(zp, x, y)
    add(zp, x, y)
    storage = weakref.ref(zp.tensor.storage)
    del zp
    gc.collect()
    assert storage() is None


def test_other_objects_take_the_full_path(fake):
    zp, x, y = args = _args()
    fake.prepare(*args)
    x2 = tl.randn(1024, device="cpu")
    calls = []
    real = L.Launcher.launch

    def spy(self, *a, **k):
        calls.append(a[0])
        return real(self, *a, **k)

    L.Launcher.launch = spy
    try:
        add(zp, x, y)
        assert not calls
        with pytest.raises(AssertionError, match="full path"):
            add(zp, x2, y)             # not the objects it was prepared for
        with pytest.raises(AssertionError, match="full path"):
            add(zp, y, x)              # the same objects in another order
        with pytest.raises(AssertionError, match="full path"):
            add(zp, x, x2)
    finally:
        L.Launcher.launch = real
    assert len(calls) == 3 and len(fake.launches) == 1


def test_a_prepared_launch_whose_argument_died_is_stale(fake):
    zp, x, y = args = _args()
    fast = fake.prepare(*args)
    del args, y
    gc.collect()
    y2 = tl.randn(1024, device="cpu")
    assert fast.run((zp, x, y2), None, True) is P._STALE
    assert not fake.launches


def test_scalars_match_by_identity_not_equality():
    one, half, yes, big = 1, 0.5, True, 10 ** 30
    m = P._match_of((one, half, yes, big))
    assert (one, half, yes, big) == m
    assert (yes, half, yes, big) != m and (1.0, half, yes, big) != m   # equal, not the same
    assert (one, half, 1, big) != m and (one, half, yes, int(str(big))) != m

    class Eq:
        def __eq__(self, other):
            return True

        __hash__ = object.__hash__

    assert P._match_of((Eq(),)) is None   # its == would say nothing about identity


def test_freeing_an_argument_invalidates_the_prepared_launch(fake):
    zp, x, y = args = _args()
    fake.prepare(*args)
    add(zp, x, y)
    y.free()
    with pytest.raises(tl.TilelabError, match="freed"):
        add(zp, x, y)
    assert len(fake.launches) == 1


def test_unchecked_and_graph_capture_take_the_full_path(fake):
    args = _args()
    fast = fake.prepare(*args)
    with tl.unchecked():
        assert fast.run(args, None, True) is P._STALE
    with tl.graph():
        assert fast.run(args, None, True) is P._STALE
    assert fast.run(args, None, True) is None and len(fake.launches) == 1


def test_conflicting_launch_on_another_stream(fake):
    zp, x, y = args = _args()
    fake.prepare(*args)
    fut = add.launch_async(zp, x, y)
    other = object()
    with pytest.raises(BorrowError, match="on another stream"):
        add.launch_async(zp, x, y, stream=other)
    assert len(fake.launches) == 1    # refused before the driver was called
    fut2 = add.launch_async(zp, x, y)   # the same stream is ordered
    fut.wait()
    fut2.wait()
    fut3 = add.launch_async(zp, x, y, stream=other)   # nothing pending: fine
    assert fake.launches[-1][8] == fake.streams[other].handle
    assert fut3.stream is fake.streams[other]
    fut4 = fut3.then(add, zp, x, y)
    assert fake.launches[-1][8] == fake.streams[other].handle
    fut4.wait()
    assert LEDGER.pending_count == 0


def test_a_conflict_found_by_a_prepared_launch_names_its_line(fake):
    zp, x, y = args = _args()
    fake.prepare(*args)
    fut = add.launch_async(zp, x, y)
    line = sys._getframe().f_lineno + 2
    with pytest.raises(BorrowError) as e:
        add(zp, x, y, stream=object())
    assert (e.value.location.filename, e.value.location.line) == (__file__, line)
    assert str(e.value).startswith(f"{__file__}:{line}:")
    fut.wait()


def test_an_empty_partition_launches_nothing(fake):
    z, x = tl.empty((0, 64), device="cpu"), tl.empty((0, 64), device="cpu")
    assert add(z.partition((16, 64)), x, x) is None
    fut = add.launch_async(z.partition((16, 64)), x, x)
    assert fut.done() and fut.stream is None
    assert fake.launches == [] and add._launcher._fast == {} and LEDGER.pending_count == 0


def test_waiting_on_a_future_observes_earlier_launches_only(fake):
    zp, x, y = args = _args()
    fake.prepare(*args)
    futs = [add.launch_async(zp, x, y) for _ in range(5)]
    futs[2].wait()
    assert LEDGER.pending_count == 2
    assert [f.done() for f in futs[:3]] == [True] * 3
    futs[4].wait()
    assert LEDGER.pending_count == 0


def test_a_new_thread_makes_the_context_current(fake):
    zp, x, y = args = _args()
    fake.prepare(*args)
    fake.gpu.make_current()
    add(zp, x, y)
    assert fake.gpu.made_current == 1
    t = threading.Thread(target=add, args=args)
    t.start()
    t.join()
    assert fake.gpu.made_current == 2 and len(fake.launches) == 2


def test_driver_errors_and_the_cuda_core_fallback(fake, monkeypatch):
    from cuda.bindings import driver

    zp, x, y = args = _args()
    fast = fake.prepare(*args)
    add.launch_async(zp, x, y).wait()   # (this function's later launches: the C path)
    fake.result = driver.CUresult.CUDA_ERROR_INVALID_VALUE
    with pytest.raises(LaunchError, match=r"launch of 'add' \(grid \(4, 1, 1\)\) failed: "
                                          "CUDA_ERROR_INVALID_VALUE"):
        add(zp, x, y)
    for _ in range(2):
        with pytest.raises(LaunchError, match="CUDA_ERROR_INVALID_VALUE"):
            add.launch_async(zp, x, y)
    assert LEDGER.pending_count == 0    # a failed launch borrows nothing
    fake.result = driver.CUresult.CUDA_SUCCESS
    if fake.mode == "native":           # (no cuda-bindings call to fall back from)
        return
    launched = []
    monkeypatch.setattr("cuda.core.launch", lambda *a: launched.append(a))

    def old_bindings(*argv):
        raise TypeError("an argument of another type")

    L.DRIVER.cu_launch_kernel = old_bindings
    fut = add.launch_async(zp, x, y)   # falls back to cuda.core.launch for good
    assert L.DRIVER.path == "cuda.core"
    assert L.DRIVER.why.startswith("cuda-bindings' cuLaunchKernel does not take packed "
                                   "parameters (an argument of another type)")
    assert launched == [(fake.gpu.stream, fast.config, fast.kernel, *fast.words)]
    assert "test_prepared_launch.py" in fut._record.site
    fut.wait()


def test_a_long_unwaited_log_is_released_once_the_stream_finished(fake, monkeypatch):
    monkeypatch.setattr(Ledger, "LOG_LIMIT", 300)
    zp, x, y = args = _args()
    fake.prepare(*args)
    futs = [add.launch_async(zp, x, y) for _ in range(511)]
    assert LEDGER.pending_count == 511
    futs.append(add.launch_async(zp, x, y))   # the 512th: past the limit, polled
    assert LEDGER.pending_count == 0 and all(f.done() for f in futs)


# ---- the ledger's lock-free append (what prepared launches inline) -------------------
def _record(stream):
    return LaunchRecord("k", "here:1", stream, keepalive=[], cuda_stream=_Stream(1))


def test_append_reregisters_a_log_removed_meanwhile():
    led = Ledger()
    first = _record(7)
    led.push(first)
    log = led._logs[7]
    led.observe(first)              # empties and unregisters the log
    assert 7 not in led._logs
    rec = _record(7)
    led.append(log, rec)            # an append that had fetched the log before that
    assert led._logs[7] is log and led.pending_records() == [rec]


def test_append_to_a_replaced_log_moves_its_records_after_the_new_ones():
    led = Ledger()
    first = _record(7)
    led.push(first)
    stale = led._logs[7]
    led.observe(first)
    newer = _record(7)
    led.push(newer)                 # a new log for the stream
    rec = _record(7)
    led.append(stale, rec)          # registration order: after ``newer``
    assert list(led._logs[7]) == [newer, rec] and not stale
    led.observe(newer)
    assert led.pending_records() == [rec]


def test_unregister_puts_back_a_log_appended_to_meanwhile():
    led = Ledger()
    log = led._logs[7] = __import__("collections").deque()
    log.append(_record(7))          # appended between the emptiness test and removal
    led._unregister(7, log)
    assert led._logs[7] is log


def test_a_foreign_arguments_stream_is_the_default_launch_stream(fake):
    """Memory borrowed on a framework's current stream (``Storage.stream``, set by
    tilelab.runtime.foreign for torch and cupy GPU tensors) makes that stream the
    launches' default: on the Python path and on the native module's C path."""
    zp, x, y = args = _args()
    home = object()
    x.storage.stream = home
    fake.prepare(*args)
    s = fake.streams[home]
    add(zp, x, y)
    fut = add.launch_async(zp, x, y)
    fut2 = add.launch_async(zp, x, y)
    assert [argv[8] for argv in fake.launches] == [s.handle] * 3
    assert fut.stream is s and fut2.stream is s
    if fake.mode == "native":
        assert fake.lib.fake_last_synced() == s.handle
    else:
        assert s.syncs == 1 and fake.gpu.stream.syncs == 0
    fut2.wait()
    assert LEDGER.pending_count == 0
