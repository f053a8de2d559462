"""The native launch module (tilelab.runtime.native), built with the real C compiler and
bound to a stand-in libcuda (tests/runtime/fake_libcuda.c) that logs its calls: the
build and its cache, the fallbacks, and the C async path's agreement with the Python
one. (test_prepared_launch.py runs all its prepared-launch tests in native mode too.)"""
from __future__ import annotations

import sys

import pytest

import tilelab as tl
from tilelab import config
from tilelab.errors import BorrowError
from tilelab.runtime import launch as L, native
from tilelab.runtime.launch import prepared as P
from tilelab.runtime.ledger import LEDGER

from support.fake_libcuda import NO_NATIVE, recorder
from test_prepared_launch import FakeGpu, _args, add

pytestmark = pytest.mark.skipif(NO_NATIVE is not None, reason=str(NO_NATIVE))
needs_311 = pytest.mark.skipif(sys.version_info < (3, 11),
                               reason="the C async path needs Python 3.11+")


@pytest.fixture
def bound(fake_libcuda):
    """The native module bound to the fake libcuda, and the fake's recorder."""
    with config.override(launch="native"):
        native._reset()
        mod = native.load(str(fake_libcuda))
        assert mod is not None, native.status()
        yield mod, recorder(fake_libcuda)
        native._reset()


@pytest.fixture
def nfake(monkeypatch, fake_libcuda):
    """test_prepared_launch's fake GPU, launching through the native module."""
    add._launcher._fast.clear()
    fake = FakeGpu(monkeypatch, "native", fake_libcuda)
    yield fake
    LEDGER.observe_all()
    add._launcher._fast.clear()
    native._reset()


def _last(rec) -> list[int]:
    i = rec.fake_launches() - 1
    return [rec.fake_call(i, j) for j in range(6)]


# ---- building and loading --------------------------------------------------------------
def test_build_is_cached_by_source_and_abi(tmp_path):
    first = native.build(tmp_path)
    mtime = first.stat().st_mtime_ns
    assert first.name.startswith("_tilelab_native") and first.exists()
    assert native.build(tmp_path) == first and first.stat().st_mtime_ns == mtime
    assert [p.name for p in first.parent.iterdir()] == [first.name]   # no temp left


def test_build_says_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(native.shutil, "which", lambda name: None)
    with pytest.raises(OSError, match="no C compiler found"):
        native.build(tmp_path)


def test_compiler_errors_are_reported(tmp_path, monkeypatch):
    bad = tmp_path / "bad.c"
    bad.write_text("this is not C\n")
    monkeypatch.setattr(native, "_SOURCE", bad)
    with pytest.raises(OSError, match="failed:\n.*error"):
        native.build(tmp_path / "out")
    assert not any((tmp_path / "out").rglob("*.so"))


def test_unavailable_and_off_fall_back(tmp_path, monkeypatch):
    native._reset()
    assert native.status() == "not loaded yet"
    assert native.load(str(tmp_path / "libnothing.so")) is None
    assert native.status().startswith("unavailable (OSError: cannot load")
    assert "cuda-bindings" in native.status()
    native._reset()
    with config.override(launch="driver"):
        assert native.load() is None and native.status() == "off: TILELAB_LAUNCH=driver"
    native._reset()


# ---- the module's calls ----------------------------------------------------------------
def test_calls_reach_the_driver_with_the_packed_arguments(bound):
    mod, rec = bound
    assert native.status().startswith("native: ")
    cap = mod.prepare(0x5678, 3, 2, 1, 0x1000, 0xABC0)
    assert mod.launch(cap) == 0
    assert rec.fake_launches() == 1 and _last(rec) == [0x5678, 3, 2, 1, 0x1000, 0xABC0]
    assert mod.launch_on(cap, 0x2000) == 0 and _last(rec)[4] == 0x2000
    rec.fake_set_error(700)
    assert mod.launch(cap) == 700 and rec.fake_launches() == 2
    assert mod.sync(0x3000) == 0 and rec.fake_last_synced() == 0x3000


def test_pdl_launches_go_through_cuLaunchKernelEx_with_the_attribute(bound):
    mod, rec = bound
    plain = mod.prepare(0x5678, 3, 2, 1, 0x1000, 0xABC0, False)
    pdl = mod.prepare(0x5678, 4, 1, 1, 0x1000, 0xABC0, True)
    assert mod.launch(plain) == 0 and rec.fake_call(rec.fake_launches() - 1, 6) == 0
    assert mod.launch(pdl) == 0
    i = rec.fake_launches() - 1
    assert [rec.fake_call(i, j) for j in range(7)] == [0x5678, 4, 1, 1, 0x1000, 0xABC0, 1]
    assert mod.launch_on(pdl, 0x2000) == 0
    i = rec.fake_launches() - 1
    assert rec.fake_call(i, 4) == 0x2000 and rec.fake_call(i, 6) == 1


def test_prepare_and_bind_check_their_arguments(bound):
    mod, _ = bound
    with pytest.raises(ValueError, match="grid dimension 1 is 0"):
        mod.prepare(1, 4, 0, 1, 0, 0)
    with pytest.raises(TypeError, match="prepare"):
        mod.prepare(1, 2, 3)
    with pytest.raises(ValueError, match="PyCapsule"):
        mod.launch("not a prepared launch")
    with pytest.raises(TypeError, match="12 arguments"):
        mod.bind_hot(1, 2)

    class NoSlots:
        match = None

    with pytest.raises(TypeError, match=r"NoSlots.match is not a __slots__ member"):
        mod.bind_hot(NoSlots, P.PreparedRecord, P.Future, P.LaunchInfo, [0], [0], {},
                     print, print, print, P._Pin, P._PKG_DIR)
    with pytest.raises(AttributeError, match="match"):
        mod.bind_hot(object, P.PreparedRecord, P.Future, P.LaunchInfo, [0], [0], {},
                     print, print, print, P._Pin, P._PKG_DIR)


# ---- the C async path ------------------------------------------------------------------
def _count_runs(monkeypatch) -> list:
    """A list that grows by one at each call of the Python prepared-launch path."""
    runs: list = []
    real_run = P.PreparedLaunch.run
    monkeypatch.setattr(P.PreparedLaunch, "run", lambda *a: runs.append(1) or real_run(*a))
    return runs


@needs_311
def test_repeated_async_launches_take_the_c_path(nfake, monkeypatch):
    zp, x, y = args = _args()
    fast = nfake.prepare(*args)
    runs = _count_runs(monkeypatch)
    add.launch_async(zp, x, y).wait()          # Python: learns this function's code
    assert len(runs) == 1 and fast.caller is not None
    futs = [add.launch_async(zp, x, y)]; line = sys._getframe().f_lineno
    futs += [add.launch_async(zp, x, y), add.launch_async(zp, x, y)]
    assert len(runs) == 1 and len(nfake.launches) == 4       # the last three: C
    assert futs[0]._record.keepalive is fast.pin() is futs[2]._record.keepalive
    assert nfake.launches[-1] == (0x5678, 4, 1, 1, 1, 1, 1, 0, 0x1000, fast.params[0], 0)
    f = futs[0]
    assert isinstance(f, tl.Future) and f.kernel == "add" and f.stream is nfake.gpu.stream
    assert f._record.site.endswith(f"test_native_launch.py:{line}")
    assert LEDGER.pending_count == 3
    with pytest.raises(BorrowError, match=r"pending kernel 'add' launched at "
                                          rf".*test_native_launch.py:{line}"):
        z = zp.tensor
        z.numpy()
    futs[-1].wait()
    assert LEDGER.pending_count == 0


@needs_311
def test_launches_through_tilelab_functions_take_the_c_path_too(nfake, monkeypatch):
    """A library function between the user and launch_async (run_launches here): the C
    path walks past tilelab's frames to the user's line, as the Python path does."""
    from tilelab.kernels._host import run_launches

    zp, x, y = args = _args()
    nfake.prepare(*args)
    runs = _count_runs(monkeypatch)
    run_launches([(add, args)], None, sync=False)[1].wait()   # Python learns the site
    assert len(runs) == 1
    _, fut = run_launches([(add, args)], None, sync=False); line = sys._getframe().f_lineno
    assert len(runs) == 1                                     # C
    assert fut._record.site.endswith(f"test_native_launch.py:{line}")
    fut.wait()


def _plus(a, b):
    return a + b


def _minus(a, b):
    return a - b


@tl.kernel
def add_helped(z: tl.Out, x: tl.In, y: tl.In):
    z.store(_plus(tl.load_like(x, z), tl.load_like(y, z)))


@needs_311
def test_kernels_with_helpers_take_the_c_path_until_a_helper_changes(nfake, monkeypatch):
    """Library kernels call helper functions: the C path checks their bindings itself
    (it used to hand every such launch back to Python), and a redefined helper still
    sends the launch to Python, which finds it stale."""
    args = _args()
    fast = nfake.prepare(*args, kernel=add_helped)
    assert ("_plus", _plus) in [(name, obj) for _, name, obj in fast.helpers.bindings]
    runs = _count_runs(monkeypatch)
    add_helped.launch_async(*args).wait()       # Python learns the call site
    add_helped.launch_async(*args).wait()
    futs = [add_helped.launch_async(*args), add_helped.launch_async(*args),
            add_helped.launch_async(*args)]
    assert len(runs) == 1 and len(nfake.launches) == 5     # the last four: C
    futs[-1].wait()
    monkeypatch.setitem(globals(), "_plus", _minus)   # as a notebook redefining it
    with pytest.raises(AssertionError, match="the full path ran"):
        add_helped.launch_async(*args)          # C hands it back; Python: stale
    assert len(runs) > 1 and len(nfake.launches) == 5      # nothing launched from C
    add_helped._launcher._fast.clear()


@tl.kernel
def axpb(z: tl.Out, x: tl.In, a: float, b: int):
    z.store(tl.load_like(x, z) * a + b)


@needs_311
def test_scalars_match_by_identity_in_c(nfake, monkeypatch):
    """The C path compares a prepared launch's scalars by identity itself (no call of
    their Python __eq__), so equal but different objects still go back to Python."""
    zp, x, _ = _args()
    a, b = 1.0, 1000
    nfake.prepare(zp, x, a, b, kernel=axpb)
    runs = _count_runs(monkeypatch)
    eq_calls = []
    real_eq = P._Same.__eq__
    monkeypatch.setattr(P._Same, "__eq__", lambda s, o: eq_calls.append(1) or real_eq(s, o))
    axpb.launch_async(zp, x, a, b).wait()       # Python learns the call site
    n_eq = len(eq_calls)
    axpb.launch_async(zp, x, a, b).wait()       # C, comparing 1.0 and 1000 itself
    assert len(runs) == 1 and len(nfake.launches) == 2 and len(eq_calls) == n_eq
    for other in ((float("1.0"), b), (a, int("1000")), (a, 1000.0), (True, b), (1, b)):
        assert other == (a, b)                  # equal (and hashing alike) ...
        with pytest.raises(AssertionError, match="the full path ran"):
            axpb.launch_async(zp, x, *other)    # ... but not the prepared objects
    assert len(nfake.launches) == 2
    axpb._launcher._fast.clear()


@needs_311
def test_the_c_path_refuses_other_or_dead_arguments(nfake):
    """hot() itself (not only the launch cache's hash lookup) refuses arguments that
    are not the prepared objects, and a prepared argument that has died."""
    import gc
    import weakref

    zp, x, y = _args()
    fast = nfake.prepare(zp, x, y)

    def hot(args):       # in launch_async's place: the caller is this test's line
        return L.DRIVER.hot(fast, args)

    add.launch_async(zp, x, y).wait()           # Python learns the call site
    assert hot((zp, x, y)) is not None and len(nfake.launches) == 2
    LEDGER.observe_all()
    y2 = tl.randn(1024, device="cpu")
    assert hot((zp, x, y2)) is None and hot((zp, y, x)) is None
    assert hot((zp, x)) is None and hot([zp, x, y]) is None
    yref = weakref.ref(y)
    del y
    gc.collect()
    assert yref() is None
    assert hot((zp, x, y2)) is None and len(nfake.launches) == 2
    assert hot((zp, x, None)) is None   # (a dead weak reference reads as None in C)


@needs_311
def test_the_c_path_leaves_the_rare_cases_to_python(nfake, monkeypatch):
    zp, x, y = args = _args()
    fast = nfake.prepare(*args)
    runs = _count_runs(monkeypatch)
    add.launch_async(zp, x, y).wait()
    n = len(runs)
    with tl.unchecked(), pytest.raises(AssertionError, match="the full path ran"):
        add.launch_async(zp, x, y)            # an unchecked block: the full path
    assert len(runs) > n
    n = len(runs)

    def elsewhere():                          # a new call site: Python learns it
        return add.launch_async(zp, x, y)

    elsewhere().wait()
    assert len(runs) == n + 1 and fast.caller is elsewhere.__code__
    elsewhere().wait()
    assert len(runs) == n + 1                 # then C
    fut = add.launch_async(zp, x, y, stream="side")   # another stream: Python
    assert len(runs) == n + 2 and nfake.launches[-1][8] == nfake._resolve("side").handle
    fut.wait()


def test_hot_off_keeps_the_python_path(fake_libcuda):
    native._reset()
    mod = native.load(str(fake_libcuda))
    d = L.DriverPath()
    with config.override(hot="0"):
        d.use_native(mod)
    assert d.hot is None and d.native_launch is mod.launch and d.path == "native"
    assert d.why.endswith("; async launches on the Python path (TILELAB_HOT=0)")
    native._reset()
