"""Programmatic dependent launch on a real GPU: long chains of dependent launches that
start early still see every write of their predecessor, on a stream and in a CUDA graph,
with PDL on and off (docs/safety.md, "Programmatic dependent launch")."""
from __future__ import annotations

import numpy as np
import pytest

import tilelab as tl
from tilelab import config

N = 1 << 22      # 16 MiB per buffer: each launch runs long enough to overlap the next
STEPS = 200


@tl.kernel
def inc(z: tl.Out, x: tl.In):
    """z = x + 1."""
    z.store(tl.load_like(x, z) + 1)


def _chain(a, b, steps):
    """b = a + 1, a = b + 1, ... (the same argument objects: prepared launches)."""
    pa, pb = a.partition(4096), b.partition(4096)
    for i in range(steps):
        if i % 2 == 0:
            inc.launch_async(pb, a)
        else:
            inc.launch_async(pa, b)


@pytest.mark.parametrize("pdl", ["1", "0"])
def test_a_stream_of_dependent_launches_sees_every_write(pdl):
    with config.override(pdl=pdl):
        a = tl.tensor(np.zeros(N, np.float32))
        b = tl.empty(N, "float32")
        args, device = inc._launcher.prepare((b.partition(4096), a))
        assert inc._launcher.plan(args, device).pdl is True   # the kernel waits: eligible
        _chain(a, b, STEPS)
        tl.synchronize()
        assert np.all(a.numpy() == STEPS)


@pytest.mark.parametrize("pdl", ["1", "0"])
def test_a_graph_of_dependent_launches_sees_every_write(pdl):
    with config.override(pdl=pdl):
        a = tl.tensor(np.zeros(N, np.float32))
        b = tl.empty(N, "float32")
        with tl.graph() as g:
            _chain(a, b, 100)
        if pdl == "1":
            assert g.pdl == "99 programmatic edges", g.pdl
        else:
            assert g.pdl.startswith("off")
        for _ in range(3):
            g.replay()
        tl.synchronize()
        assert np.all(a.numpy() == 300)


@tl.kernel
def add_early(z: tl.Out, w: tl.In, x: tl.In):
    """z = x + w, with w's tile loaded before the wait for the previous kernel."""
    wt = tl.load_like(w, z)
    tl.wait_for_previous_kernel()
    z.store(tl.load_like(x, z) + wt)


def _early_chain(a, b, w_of, steps):
    pa, pb = a.partition(4096), b.partition(4096)
    for i in range(steps):
        if i % 2 == 0:
            add_early.launch_async(pb, w_of(a), a)
        else:
            add_early.launch_async(pa, w_of(b), b)


def test_a_kernel_reading_before_its_wait_is_launched_normally_on_a_stream():
    a = tl.tensor(np.zeros(N, np.float32))
    b = tl.empty(N, "float32")
    w = tl.tensor(np.ones(N, np.float32))
    args, device = add_early._launcher.prepare((b.partition(4096), w, a))
    plan = add_early._launcher.plan(args, device)
    assert plan.pdl is False and plan.early_reads == frozenset({"w"})
    _early_chain(a, b, lambda _: w, STEPS)
    tl.synchronize()
    assert np.all(a.numpy() == STEPS)


def test_a_graph_starts_early_only_kernels_whose_early_reads_are_not_being_written():
    a = tl.tensor(np.zeros(N, np.float32))
    b = tl.empty(N, "float32")
    w = tl.tensor(np.ones(N, np.float32))
    with tl.graph() as g:                    # w is never written: every edge may start early
        _early_chain(a, b, lambda _: w, 100)
    assert g.pdl == "99 programmatic edges", g.pdl
    for _ in range(3):
        g.replay()
    tl.synchronize()
    assert np.all(a.numpy() == 300)

    c = tl.tensor(np.ones(N, np.float32))
    d = tl.empty(N, "float32")
    with tl.graph() as g2:                   # each kernel reads early what the last one wrote
        _early_chain(c, d, lambda t: t, 20)
    assert g2.pdl == "no edge into a kernel that waits for its predecessor", g2.pdl
    g2.replay()
    tl.synchronize()
    assert np.all(c.numpy() == 2.0 ** 20)
