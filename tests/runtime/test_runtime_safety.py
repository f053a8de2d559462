"""Runtime safety on the CPU backend: outputs whose own elements overlap, negative
strides, outputs that cannot be written (read-only memory, copies tl.tensor() had to
make), empty launches, the borrows of CPU launches while they run on a thread, per-thread
``tl.unchecked()``, dropped futures, and the launching line in launch-time errors."""
from __future__ import annotations

import gc
import sys
import threading
import weakref

import cuda.tile as ct
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.lib.stride_tricks import as_strided

import tilelab as tl
from tilelab.errors import AliasError, BorrowError, CompileError, LaunchError
from tilelab.runtime import launch as L
from tilelab.runtime.ledger import LEDGER, SPECIAL_MODES, LaunchRecord, checks_enabled
from tilelab.runtime.layout import elements_overlap

CPU = "cpu"
HERE = __file__


@tl.kernel
def add(z: tl.Out, x: tl.In, y: tl.In):
    z.store(tl.load_like(x, z) + tl.load_like(y, z))


@tl.kernel
def inc(z: tl.InOut):
    z.store(z.load() + 1)


@tl.kernel
def copy(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z))


@tl.kernel
def two(a: tl.Out, b: tl.Out, x: tl.In):
    a.store(tl.load_like(x, a))
    b.store(tl.load_like(x, b))


@tl.kernel(unsafe=True)
def fill(x: tl.Raw):
    ct.store(x, index=(ct.bid(0),), tile=ct.full((4,), 1.0, ct.float32))


@pytest.fixture(autouse=True)
def _clean_ledger():
    yield
    assert checks_enabled() and SPECIAL_MODES[0] == 0, "a test left checks off"
    LEDGER.observe_all()


def _f32(n):
    return tl.arange(n, dtype="float32", device=CPU)


def _line(ahead: int) -> int:
    """The caller's line number plus ``ahead`` (where the launch under test is)."""
    return sys._getframe(1).f_lineno + ahead


def _brute_overlap(shape, strides) -> bool:
    offsets = [sum(i * s for i, s in zip(idx, strides)) for idx in np.ndindex(*shape)]
    return len(set(offsets)) < len(offsets)


# ---- the overlap test ---------------------------------------------------------------
@pytest.mark.parametrize("shape, strides, overlap", [
    ((4, 4), (4, 1), False),          # C order
    ((4, 4), (1, 4), False),          # transposed
    ((4, 2), (4, 2), False),          # [:, ::2]
    ((2, 3, 4), (1, 8, 2), False),    # permuted
    ((8,), (0,), True),               # broadcast
    ((1, 8), (0, 1), False),          # stride 0 on a size-1 dimension is harmless
    ((3, 4), (0, 1), True),           # torch .expand(3, 4) of a vector
    ((4, 4), (2, 1), True),           # as_strided rows that share elements
    ((2, 2), (1, 1), True),           # equal strides
    ((0, 8), (0, 1), False),          # empty: no elements at all
    ((8,), (-1,), False),             # reversed
    ((4, 4), (-4, -1), False),
    ((4, 4), (-2, 1), True),
])
def test_elements_overlap_examples(shape, strides, overlap):
    assert elements_overlap(shape, strides) is overlap
    assert _brute_overlap(shape, strides) is overlap


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(-9, 9)), min_size=1, max_size=4))
def test_elements_overlap_never_misses_an_overlap(dims):
    shape, strides = zip(*dims)
    if _brute_overlap(shape, strides):
        assert elements_overlap(shape, strides)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=4), st.data())
def test_elements_overlap_accepts_every_slice_and_permutation(shape, data):
    a = np.arange(int(np.prod(shape))).reshape(shape)
    perm = data.draw(st.permutations(range(len(shape))))
    steps = data.draw(st.lists(st.sampled_from([1, 2, 3, -1, -2]), min_size=len(shape),
                               max_size=len(shape)))
    v = a.transpose(perm)[tuple(slice(None, None, s) for s in steps)]
    strides = tuple(s // a.itemsize for s in v.strides)
    assert not elements_overlap(v.shape, strides)


# ---- outputs whose own elements overlap ----------------------------------------------
def test_a_broadcast_output_is_refused_naming_the_parameter():
    base = np.zeros(4, np.float32)
    out = tl.tensor(as_strided(base, shape=(8,), strides=(0,)), device=CPU)
    line = _line(2)
    with pytest.raises(AliasError) as e:
        add(out.partition(8), _f32(8), tl.ones(8, device=CPU))
    msg = str(e.value)
    assert ("add(): 'z' (tl.Out) is a tensor whose own elements overlap in memory (shape "
            "(8,), strides (0,) in elements: dimension 0 of size 8 has stride 0, as in a "
            "broadcast or .expand() view); the blocks that own different tiles of it would "
            "write the same memory") in msg
    assert "hint: pass a contiguous copy as the output" in msg
    assert msg.startswith(f"{HERE}:{line}:")
    assert base.tolist() == [0, 0, 0, 0]           # refused before anything ran


def test_overlapping_rows_are_refused_as_inout_even_unchecked():
    base = np.zeros(16, np.float32)
    rows = tl.tensor(as_strided(base, shape=(4, 4), strides=(8, 4)), device=CPU)
    with pytest.raises(AliasError, match=r"inc\(\): 'z' \(tl.InOut\) is a tensor whose own "
                                         r"elements overlap in memory \(shape \(4, 4\), "
                                         r"strides \(2, 1\) in elements: its strides make "
                                         r"different indices reach the same element"):
        inc(rows.partition((4, 4)))
    with tl.unchecked(), pytest.raises(AliasError, match="own elements overlap"):
        inc(rows.partition((2, 4)))             # no opt-out makes the tiles disjoint
    assert not base.any()


def test_a_torch_expand_output_is_refused():
    torch = pytest.importorskip("torch")
    t = torch.zeros(4).expand(3, 4)
    with pytest.raises(AliasError, match=r"'z' \(tl.InOut\) .* strides \(0, 1\) .* "
                                         r"dimension 0 of size 3 has stride 0"):
        inc(tl.from_dlpack(t).partition((1, 4)))
    assert not t.any()


def test_inputs_and_strided_outputs_whose_elements_are_distinct_are_fine():
    one = np.ones(1, np.float32)
    bcast = tl.tensor(as_strided(one, shape=(8,), strides=(0,)), device=CPU)  # an In
    z = tl.empty(8, device=CPU)
    add(z.partition(8), _f32(8), bcast)
    assert z.numpy().tolist() == [1, 2, 3, 4, 5, 6, 7, 8]
    w = tl.zeros((4, 8), device=CPU)
    inc(w[:, ::2].partition((2, 2)))            # a strided view: distinct elements
    assert w.numpy()[:, ::2].tolist() == [[1] * 4] * 4 and not w.numpy()[:, 1::2].any()
    inc(w.T.partition((4, 4)))                  # a transposed view
    assert w.numpy()[0].tolist() == [2, 1] * 4


# ---- negative strides -----------------------------------------------------------------
def test_negative_strides_are_a_tilelab_error_at_launch_and_compile():
    rev = tl.tensor(np.arange(8.)[::-1], device=CPU)
    z = tl.empty(8, dtype="float64", device=CPU)
    line = _line(2)
    with pytest.raises(LaunchError) as e:
        copy(z.partition(8), rev)
    msg = str(e.value)
    assert ("copy(): 'x' (tl.In) has negative strides (shape (8,), strides (-1,) in "
            "elements), a reversed view such as a[::-1]; cuTile kernels take arrays with "
            "non-negative strides only, so tilelab refuses them on the GPU and on the CPU "
            "backend alike") in msg
    assert "hint: pass a copy in increasing order (t.contiguous()" in msg
    assert msg.startswith(f"{HERE}:{line}:")
    with pytest.raises(LaunchError, match=r"'z' \(tl.Out\) has negative strides"):
        copy(rev.partition(8), z)
    with pytest.raises(LaunchError, match=r"'x' \(tl.In\) has negative strides"):
        copy(z.partition(8), np.arange(8.)[::-1])          # a numpy array passed as is
    with pytest.raises(LaunchError, match=r"'x' \(tl.In\) has negative strides"):
        copy(tl.empty((4, 4), dtype="float64", device=CPU).partition((2, 2)),
             tl.zeros((4, 4), dtype="float64", device=CPU)[::-1, :])
    with pytest.raises(CompileError, match=r"copy.compile\(\): argument 'x' has negative "
                                           r"strides \(-1,\); cuTile compiles arrays with "
                                           r"non-negative strides only"):
        copy.compile(z.partition(8), rev, arch="sm_90")
    copy(z.partition(8), rev.contiguous())                 # what the hint says works
    assert z.numpy().tolist() == [7, 6, 5, 4, 3, 2, 1, 0]


# ---- outputs that cannot be written ---------------------------------------------------
def test_a_copy_that_tl_tensor_had_to_make_is_refused_as_an_output():
    be = np.arange(8, dtype=">f4")
    x, y = _f32(8), tl.ones(8, device=CPU)
    with pytest.raises(LaunchError) as e:
        add(tl.tensor(be, device=CPU).partition(8), x, y)
    msg = str(e.value)
    assert ("add(): 'z' (tl.Out) is written by the kernel, but its tensor is the copy that "
            "tl.tensor() made of a big-endian numpy array (dtype '>f4'), whose byte order "
            "tilelab cannot share: the launch's writes would never reach that array") in msg
    assert "hint: pass an array tl.tensor() can share, in native byte order" in msg
    assert be.tolist() == list(range(8))
    z = tl.empty(8, device=CPU)
    add(z.partition(8), tl.tensor(be, device=CPU), y)      # as an input the copy is fine
    assert z.numpy().tolist() == list(range(1, 9))
    native = np.ascontiguousarray(be, dtype=be.dtype.newbyteorder("="))   # the hint
    add(tl.tensor(native, device=CPU).partition(8), x, y)
    assert native.tolist() == list(range(1, 9))
    for mine in (tl.tensor(be, dtype="float32", device=CPU),   # copies asked for: fine
                 tl.tensor(be, device=CPU).clone()):
        add(mine.partition(8), x, y)
        assert mine.numpy().tolist() == list(range(1, 9))


def test_misaligned_copies_and_raw_arguments_are_refused_too():
    packed = np.zeros(8, dtype=np.dtype([("tag", "u1"), ("v", "<f4")]))["v"]
    with pytest.raises(LaunchError, match=r"the copy that tl.tensor\(\) made of a numpy array "
                                          r"whose strides \(5,\) \(bytes\) are not multiples "
                                          r"of its item size 4"):
        inc(tl.tensor(packed, device=CPU).partition(8))
    shared = np.ascontiguousarray(packed, dtype=packed.dtype.newbyteorder("="))   # the hint
    inc(tl.tensor(shared, device=CPU).partition(8))
    assert shared.tolist() == [1] * 8
    big = np.zeros(8, ">f4")
    with pytest.raises(LaunchError, match=r"fill\(\): 'x' \(tl.Raw\) is written by the "
                                          r"kernel, but its tensor is the copy"):
        fill.with_grid((2,))(big)                          # tl.tensor() at the launch
    assert not big.any() and not packed.any()


def test_read_only_memory_is_refused_as_an_output():
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    with pytest.raises(LaunchError, match=r"inc\(\): 'z' \(tl.InOut\) is written by the "
                                          r"kernel, but its memory is read-only"):
        inc(tl.tensor(ro, device=CPU).partition(8))
    z = tl.empty(8, device=CPU)
    add(z.partition(8), tl.tensor(ro, device=CPU), tl.ones(8, device=CPU))   # read: fine
    assert z.numpy().tolist() == [1] * 8


# ---- empty launches -------------------------------------------------------------------
def test_a_launch_over_an_empty_partition_is_a_no_op():
    e = tl.empty((0, 8), device=CPU)
    assert inc(e.partition((4, 8))) is None
    fut = inc.launch_async(e.partition((4, 8)))
    assert fut.done() and LEDGER.pending_count == 0
    fut.wait()
    z, x = tl.empty(0, device=CPU), tl.empty(0, device=CPU)
    assert add(z.partition(4, schedule=tl.persistent(2)), x, x) is None
    with tl.graph() as g:
        inc(e.partition((4, 8)))
    assert g.entries == []
    g.replay().wait()
    with pytest.raises(LaunchError, match=r"the partitions have different tile grids \(a: "
                                          r"\(0,\) in tiles \(4,\) -> grid \(0,\)"):
        two(z.partition(4), tl.empty(8, device=CPU).partition(4), x)   # mixed: no no-op
    with pytest.raises(LaunchError, match=r"tl.interpret\(inc\): 'z' is a partition of an "
                                          r"empty tensor \(shape \(0, 8\)\), so the launch "
                                          r"has no block to run"):
        tl.interpret(inc, e.partition((4, 8)))


def test_a_serial_graph_chains_launches_that_its_borrows_would_let_overlap():
    x = tl.ones(8, device=CPU)
    zs = [tl.empty(8, device=CPU) for _ in range(3)]
    for serial, want in ((False, [[], [], [0, 1]]), (True, [[], [0], [1]])):
        with tl.graph(serial=serial) as g:
            add(zs[0].partition(8), x, x)
            add(zs[1].partition(8), x, x)          # independent of the first
            add(zs[2].partition(8), zs[0], zs[1])
        assert g.dependencies() == want and g.serial is serial
        g.replay().wait()
        assert zs[2].numpy().tolist() == [4] * 8


# ---- where launch errors point ---------------------------------------------------------
def _launch_for_the_user(z):
    return add(z.partition(8), z, z)


def test_launch_errors_name_the_launching_line():
    z = tl.zeros(8, device=CPU)
    line = _line(2)
    with pytest.raises(AliasError) as e:
        add(z.partition(8), z, tl.ones(8, device=CPU))
    loc = e.value.location
    assert (loc.filename, loc.line) == (HERE, line) and loc.col > 1
    assert str(e.value).startswith(f"{HERE}:{line}:{loc.col}: add(): 'z' (tl.Out) "
                                   "overlaps 'x' in memory")
    assert "add(z.partition(8), z, tl.ones(8, device=CPU))\n" in str(e.value)  # the excerpt
    line = _line(2)
    with pytest.raises(AliasError) as e:
        add.launch_async(z.partition(8), z, z)
    assert e.value.location.line == line
    line = _line(2)
    with pytest.raises(LaunchError) as e:
        add(z.partition(8), z)
    assert e.value.location.line == line and "takes 3 arguments" in str(e.value)
    line = _line(2)
    with pytest.raises(AliasError) as e:
        tl.interpret(add, z.partition(8), z, z)
    assert e.value.location.line == line
    with pytest.raises(AliasError) as e:
        _launch_for_the_user(z)   # the user's own helper is the user's line
    assert e.value.location.line == _launch_for_the_user.__code__.co_firstlineno + 1


# ---- tl.unchecked() and threads ---------------------------------------------------------
def test_unchecked_nests_per_thread():
    seen = []
    with tl.unchecked():
        with tl.unchecked():
            assert not checks_enabled()
        assert not checks_enabled()
        t = threading.Thread(target=lambda: seen.append(checks_enabled()))
        t.start()
        t.join()
        z = tl.zeros(8, device=CPU)
        add(z.partition(8), z, z)                  # this thread's launches: unchecked
    assert seen == [True] and checks_enabled() and SPECIAL_MODES[0] == 0


def test_unchecked_closed_on_another_thread_ends_the_opt_out():
    errors = []

    def on_thread(fn):
        def run():
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 - the test reports it
                errors.append(e)
        t = threading.Thread(target=run)
        t.start()
        t.join()

    cm = tl.unchecked()
    cm.__enter__()
    assert not checks_enabled()
    on_thread(lambda: cm.__exit__(None, None, None))
    assert errors == [] and checks_enabled() and SPECIAL_MODES[0] == 0

    def gen():
        with tl.unchecked():
            yield
    g = gen()
    next(g)                                    # opened on this thread ...
    assert not checks_enabled()
    on_thread(g.close)                         # ... closed on another
    assert errors == [] and checks_enabled() and SPECIAL_MODES[0] == 0
    cm.__exit__(None, None, None)              # exiting twice changes nothing
    assert checks_enabled() and SPECIAL_MODES[0] == 0


def test_unchecked_from_many_threads_keeps_the_count():
    def work():
        for _ in range(2000):
            with tl.unchecked():
                assert not checks_enabled()
            assert checks_enabled()
    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert SPECIAL_MODES[0] == 0


def test_unchecked_as_a_decorator():
    @tl.unchecked()
    def inside():
        return checks_enabled()
    assert inside() is False and inside() is False and checks_enabled()


# ---- CPU launches hold their borrows while they run ---------------------------------------
class _Held:
    """CPU launches made on the worker thread stop inside (borrows taken, kernel not yet
    run) until released: a deterministic "launch still running"."""

    def __init__(self, monkeypatch):
        self.started, self.release = threading.Event(), threading.Event()
        self.worker: threading.Thread | None = None
        self.error: BaseException | None = None
        real = L.Launcher.run_cpu

        def run_cpu(launcher, *a, **kw):
            if threading.current_thread() is self.worker:
                self.started.set()
                assert self.release.wait(30)
            return real(launcher, *a, **kw)
        monkeypatch.setattr(L.Launcher, "run_cpu", run_cpu)

    def start(self, fn):
        def run():
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 - the test reports it
                self.error = e
        self.worker = threading.Thread(target=run)
        self.worker.start()
        assert self.started.wait(30)

    def finish(self):
        self.release.set()
        self.worker.join(30)
        assert self.error is None, self.error


@pytest.fixture
def held(monkeypatch):
    h = _Held(monkeypatch)
    yield h
    h.release.set()
    if h.worker is not None:
        h.worker.join(30)


def test_a_running_cpu_launch_holds_its_borrows(held):
    z, x, y = tl.zeros(8, device=CPU), _f32(8), tl.ones(8, device=CPU)
    other = tl.zeros(8, device=CPU)
    line = _line(1)
    held.start(lambda: add(z.partition(8), x, y))
    site = rf"running kernel 'add' launched at {HERE}:{line}"
    with pytest.raises(BorrowError, match=rf"Tensor.numpy\(\) touches memory that the {site} "
                                          r"writes \(as 'z'\) on another thread"):
        z.numpy()
    with pytest.raises(BorrowError, match=site):
        z.copy_(1)
    with pytest.raises(BorrowError, match=site):
        z.free()
    assert x.numpy().tolist() == list(range(8))       # its inputs may be read ...
    with pytest.raises(BorrowError, match=rf"{site} reads \(as 'x'\)"):
        x[0] = 5                                      # ... not written
    with pytest.raises(BorrowError, match=rf"launch of 'inc' writes 'z', which the {site} "
                                          r"writes \(as 'z'\) on another thread"):
        inc(z.partition(8))
    with pytest.raises(BorrowError, match=rf"launch of 'add' reads 'x', which the {site}"):
        add(other.partition(8), z, y)
    add(other.partition(8), x, y)                     # disjoint memory: runs meanwhile
    tl.synchronize()                                  # does not end a running launch
    with pytest.raises(BorrowError, match=site):
        z.numpy()
    held.finish()
    assert z.numpy().tolist() == list(range(1, 9)) == other.numpy().tolist()
    assert LEDGER.pending_count == 0


@pytest.mark.parametrize("how", ["interpret", "graph", "async"])
def test_interpret_graph_replays_and_async_launches_hold_borrows_while_they_run(held, how):
    z = tl.zeros(8, device=CPU)
    zp = z.partition(8)
    futs = []
    if how == "graph":
        with tl.graph() as g:
            inc(zp)
        held.start(lambda: futs.append(g.replay()))
        name = "graph of 1 launches"
    elif how == "interpret":
        held.start(lambda: tl.interpret(inc, zp))
        name = "inc"
    else:
        held.start(lambda: futs.append(inc.launch_async(zp)))
        name = "inc"
    with pytest.raises(BorrowError, match=rf"the running kernel '{name}' .* on another "
                                          "thread"):
        z.numpy()
    held.finish()
    if futs:   # returned: pending (not running) until its future is observed
        with pytest.raises(BorrowError, match=rf"the pending kernel '{name}'"):
            z.numpy()
        futs[0].wait()
    assert z.numpy().tolist() == [1] * 8 and LEDGER.pending_count == 0


def test_a_failing_cpu_launch_releases_its_borrows(monkeypatch):
    def boom(*a, **kw):
        raise RuntimeError("interpreter failure")
    monkeypatch.setattr(L.Launcher, "run_cpu", boom)
    z = tl.zeros(8, device=CPU)
    for launch in (inc, inc.launch_async):
        with pytest.raises(RuntimeError, match="interpreter failure"):
            launch(z.partition(8))
    assert LEDGER.pending_count == 0 and z.numpy().tolist() == [0] * 8


# ---- dropped futures --------------------------------------------------------------------
def _records() -> int:
    return sum(type(o) is LaunchRecord for o in gc.get_objects())


def test_dropped_cpu_futures_do_not_accumulate():
    z = tl.zeros(4, device=CPU)
    zp = z.partition(4)
    inc.launch_async(zp)
    gc.collect()
    before = _records()
    for _ in range(10_000):
        inc.launch_async(zp)                       # each future dropped at once
    assert LEDGER.pending_count <= 1
    gc.collect()
    assert _records() - before <= 2
    assert z.numpy().tolist() == [10_001] * 4


def test_a_kept_future_keeps_its_borrows_while_dropped_ones_go():
    z = tl.zeros(4, device=CPU)
    zp = z.partition(4)
    kept = inc.launch_async(zp)
    w = tl.zeros(4, device=CPU)
    ref = weakref.ref(w.storage)
    inc.launch_async(w.partition(4))
    del w
    for _ in range(600):
        inc.launch_async(zp)
    assert LEDGER.pending_count <= 257            # (swept every 256 launches)
    gc.collect()
    assert ref() is None                          # a dropped launch's memory is freed
    with pytest.raises(BorrowError, match="pending kernel 'inc'"):
        z.numpy()                                 # the kept one still borrows
    kept.wait()
    assert z.numpy().tolist() == [601] * 4
