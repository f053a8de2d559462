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
