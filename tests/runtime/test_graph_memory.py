"""Graph replays of freed memory and copies between overlapping views, run without a GPU.

The GPU halves of these paths (a CUDA graph's replay, ``cuMemcpy`` between device views)
run only on a device (tests/gpu/test_graph_copy_gpu.py); here the decisions they make are
exercised on every machine: the copy plan that keeps an overlapping device copy defined
(run on host memory by a memcpy that refuses overlapping ranges), the memcpy nodes a
graph builds from it, and the freed-memory check of a replay on both backends (the GPU
replay with its CUDA graph and stream faked).
"""
from __future__ import annotations

import threading
from types import SimpleNamespace as NS

import numpy as np
import pytest

import tilelab as tl
from tilelab.errors import LaunchError
from tilelab.runtime import graph as G
from tilelab.runtime import streams
from tilelab.runtime.ledger import LEDGER, LaunchRecord
from tilelab.runtime.memory import (STAGE_BYTES, CopyPlan, Storage, copy_bytes_async,
                                    copy_plan, run_copy_plan)

CPU = "cpu"


@tl.kernel
def add(z: tl.Out, x: tl.In, y: tl.In):
    z.store(tl.load_like(x, z) + tl.load_like(y, z))


@pytest.fixture(autouse=True)
def _clean_ledger():
    yield
    LEDGER.observe_all()


# ---- the copy plan ------------------------------------------------------------------------
class StrictMemory:
    """A byte buffer whose memcpy refuses overlapping ranges (undefined for cuMemcpy), with
    a separate staging buffer at addresses past the end."""

    def __init__(self, size: int, stage: int):
        self.size = size
        self.bytes = np.random.default_rng(size).integers(0, 256, size + stage,
                                                          dtype=np.uint8)
        self.calls = 0

    def memcpy(self, dst: int, src: int, n: int) -> None:
        assert n > 0
        assert dst + n <= src or src + n <= dst, f"overlapping memcpy {dst}, {src}, {n}"
        assert 0 <= min(dst, src) and max(dst, src) + n <= self.bytes.size
        self.bytes[dst:dst + n] = self.bytes[src:src + n].copy()
        self.calls += 1


def _check_plan(nbytes: int, dst: int, src: int, stage: int) -> CopyPlan:
    size = max(dst, src) + nbytes
    mem = StrictMemory(size, stage)
    expected = mem.bytes[:size].copy()
    expected[dst:dst + nbytes] = mem.bytes[src:src + nbytes].copy()
    plan = copy_plan(dst, src, nbytes, stage=stage)
    assert plan.stage_bytes <= stage
    run_copy_plan(plan, mem.memcpy, size)
    assert np.array_equal(mem.bytes[:size], expected), (nbytes, dst, src, stage, plan)
    return plan


@pytest.mark.parametrize("stage", [1, 3, 8, 64])
def test_every_overlap_copies_as_if_the_source_were_read_first(stage):
    for nbytes in (1, 2, 5, 16, 37):
        for src in (0, 7):
            for dst in range(0, src + nbytes + 3):
                _check_plan(nbytes, dst, src, stage)


def test_the_plan_copies_directly_what_needs_no_stage():
    assert copy_plan(0, 100, 100) == CopyPlan(((0, 100, 100),))      # disjoint: one copy
    assert copy_plan(64, 64, 100) == CopyPlan(())                    # onto itself: none
    assert copy_plan(0, 5, 0) == CopyPlan(())
    # ranges further apart than a stage: chunks as long as the distance, no stage
    plan = _check_plan(1000, 0, 300, stage=256)
    assert plan.stage_bytes == 0 and [n for _d, _s, n in plan.steps] == [300, 300, 300, 100]
    plan = _check_plan(1000, 300, 0, stage=256)
    assert plan.stage_bytes == 0 and [d for d, _s, _n in plan.steps] == [1200, 900, 600, 300]
    # close ranges: at most stage bytes staged at a time, two memcpys per chunk
    plan = _check_plan(1000, 4, 0, stage=256)
    assert plan.stage_bytes == 256 and len(plan.steps) == 4
    # the default stage bounds what an overlapping copy of a large tensor allocates
    big = copy_plan(4, 0, 1 << 30)
    assert big.stage_bytes == STAGE_BYTES and len(big.steps) == (1 << 30) // STAGE_BYTES


def test_a_staged_plan_needs_its_stage():
    with pytest.raises(ValueError, match="staging buffer"):
        run_copy_plan(copy_plan(0, 4, 16, stage=8), lambda *a: None)


def test_an_async_device_copy_refuses_what_it_cannot_stage():
    """copy_bytes_async has no staging buffer that outlives it: close overlapping ranges
    are refused before the driver is reached (this machine has none)."""
    with pytest.raises(ValueError, match="overlap; copy with copy_bytes"):
        copy_bytes_async(0x1000, 0x1004, 4096, None)
    copy_bytes_async(0x1000, 0x1000, 4096, None)   # onto itself: nothing to do


@pytest.mark.parametrize("shift", [1, -1, 3, -700])
def test_copy_between_overlapping_cpu_views(shift):
    n = 1000
    t = tl.arange(n, dtype="int32", device=CPU)
    k = abs(shift)
    dst, src = (t[k:], t[:n - k]) if shift > 0 else (t[:n - k], t[k:])
    ref = t.numpy().copy()
    if shift > 0:
        ref[k:] = ref[:n - k].copy()
    else:
        ref[:n - k] = ref[k:].copy()
    dst.copy_(src)
    assert t.numpy().tolist() == ref.tolist()


# ---- the memcpy nodes of a graph's copy ----------------------------------------------------
class _Node:
    """A stand-in graph node: memcpy() makes a node that depends on this one."""

    def __init__(self, log: list, op=None, parent=None):
        self.log, self.op, self.parent = log, op, parent

    def memcpy(self, dst, src, n):
        node = _Node(self.log, ("memcpy", dst, src, n), self)
        self.log.append(node)
        return node

    def join(self):
        node = _Node(self.log, ("empty",), self)
        self.log.append(node)
        return node


@pytest.mark.parametrize("dst,src,nbytes", [(0, 4, 1000), (4, 0, 1000), (0, 500, 1000),
                                            (0, 2000, 1000), (8, 8, 64), (0, 0, 0)])
def test_a_graph_copies_overlapping_views_by_the_plan_in_one_chain(dst, src, nbytes,
                                                                   monkeypatch):
    stage = 256
    monkeypatch.setattr(G, "copy_plan", lambda d, s, n: copy_plan(d, s, n, stage=stage))
    size = max(dst, src) + nbytes
    g = G.Graph()
    g._stage = NS(ptr=size)   # the staging buffer: past the data
    log: list = []
    root = _Node(log)
    first, last = g._copy_nodes(root, G.copy_plan(dst, src, nbytes))
    # one chain from the parent: each node depends on the one before it
    assert first.parent is root and log[0] is first and log[-1] is last
    assert all(b.parent is a for a, b in zip(log, log[1:]))
    mem = StrictMemory(size, stage)
    expected = mem.bytes[:size].copy()
    expected[dst:dst + nbytes] = mem.bytes[src:src + nbytes].copy()
    for node in log:
        if node.op[0] == "memcpy":
            mem.memcpy(*node.op[1:])
    assert np.array_equal(mem.bytes[:size], expected)
    if dst == src or not nbytes:
        assert [n.op for n in log] == [("empty",)]


# ---- replaying a graph whose memory was freed ---------------------------------------------
def _graph_of_add():
    x = tl.arange(64, dtype="float32", device=CPU)
    y = tl.ones(64, device=CPU)
    z = tl.zeros(64, device=CPU)
    w = tl.zeros(64, device=CPU)
    with tl.graph() as g:
        add(z.partition(16), x, y)    # MARK: recorded-add
        w.copy_(z)                    # MARK: recorded-copy
    return g, x, y, z, w


def _line(mark: str) -> int:
    import inspect

    src = inspect.getsource(_graph_of_add).splitlines()
    first = _graph_of_add.__code__.co_firstlineno
    return first + next(i for i, ln in enumerate(src) if f"MARK: {mark}" in ln)


class _FakeStream:
    handle = 0x7777

    def record(self):
        return NS(is_done=True, sync=lambda: None)


class _FakeCudaGraph:
    def __init__(self):
        self.launches = 0

    def launch(self, stream):
        self.launches += 1


def _as_gpu_graph(g, monkeypatch) -> _FakeCudaGraph:
    """Make a graph recorded on the CPU replay by its GPU path, against a fake CUDA
    graph and stream (the path's checks and ledger records are what is tested)."""
    fake = _FakeCudaGraph()
    g.device, g._cuda_graph = "gpu", fake
    monkeypatch.setattr(streams, "resolve_stream", lambda stream=None: _FakeStream())
    return fake


def _replay_error(g) -> LaunchError:
    with pytest.raises(LaunchError) as ei:
        g.replay()
    return ei.value


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
@pytest.mark.parametrize("freed", ["x", "w"])
def test_a_replay_after_this_thread_freed_a_tensor_is_refused(backend, freed, monkeypatch):
    g, x, y, z, w = _graph_of_add()
    fake = _as_gpu_graph(g, monkeypatch) if backend == "gpu" else None
    g.replay().wait()
    if fake is not None:
        assert fake.launches == 1
    {"x": x, "w": w}[freed].free()
    e = _replay_error(g)
    what, mark = (("argument 'x' of add()", "recorded-add") if freed == "x"
                  else ("the destination of a copy", "recorded-copy"))
    assert e.message == (f"graph replay: {what} (recorded at {__file__}:{_line(mark)}) "
                         "was freed with .free() by this thread after the graph was "
                         "recorded; a replay cannot use freed memory")
    assert "record a new graph" in e.hint
    if fake is not None:
        assert fake.launches == 1          # nothing was launched
    assert LEDGER.pending_count == 0       # nor any borrow taken


def test_the_cpu_and_gpu_replays_refuse_with_one_message(monkeypatch):
    messages = []
    for backend in ("cpu", "gpu"):
        g, x, *_ = _graph_of_add()
        if backend == "gpu":
            _as_gpu_graph(g, monkeypatch)
        x.free()
        e = _replay_error(g)
        messages.append((type(e), e.message, e.hint))
    assert messages[0] == messages[1]


def test_a_replay_names_a_free_by_another_thread():
    g, x, *_ = _graph_of_add()
    t = threading.Thread(target=x.free)
    t.start()
    t.join()
    assert "was freed with .free() by another thread after" in _replay_error(g).message


def test_a_graph_of_live_tensors_scans_only_after_a_free(monkeypatch):
    g, x, y, z, w = _graph_of_add()
    g.replay().wait()
    scans = []
    real = type(x.storage).freed
    monkeypatch.setattr(Storage, "freed", property(lambda s: scans.append(s) or real.fget(s)))
    g.replay().wait()
    assert scans == []                     # nothing freed since the last replay
    tl.zeros(4, device=CPU).free()         # any free: the next replay looks again
    g.replay().wait()
    assert len(scans) == 5                 # x, y, z of the launch; w, z of the copy
    assert w.numpy().tolist() == [float(i + 1) for i in range(64)]


def test_a_launch_says_which_thread_freed_its_memory():
    """Ledger.begin re-checks the storages of a CPU launch under its lock: the memory was
    freed after the launch's own check, and the message says by whom."""
    for where in ("this thread", "another thread"):
        st = Storage.allocate(64, CPU)
        if where == "this thread":
            st.free()
        else:
            t = threading.Thread(target=st.free)
            t.start()
            t.join()
        rec = LaunchRecord("k", "here", "cpu")
        with pytest.raises(LaunchError, match=rf"memory was freed \(by {where}\) before it "
                                              "could run"):
            LEDGER.begin(rec, [], None, [st])
    assert LEDGER.pending_count == 0


def test_freed_by_is_none_while_alive():
    st = Storage.allocate(8, CPU)
    assert st.freed_by is None
    st.free()
    assert st.freed_by == "this thread"
