"""On the device: a copy between overlapping views of one buffer, made at once or
recorded in a graph, leaves what reading the source first would (one cuMemcpy is
undefined for overlapping ranges), and a graph whose tensor was freed is refused before
it launches, with the message the CPU backend gives.

The decisions these paths make are tested without a GPU in
tests/runtime/test_graph_memory.py; here they meet the driver.
"""
from __future__ import annotations

import numpy as np
import pytest

import tilelab as tl
from tilelab.kernels.examples import vector_add
from tilelab.runtime.ledger import LEDGER
from tilelab.runtime.memory import STAGE_BYTES, copy_plan

SMALL = 4096
#: int32 elements of more than two staging chunks (values stay exact)
BIG = 2 * (STAGE_BYTES // 4) + 1000
#: a distance (in elements) of more than one staging chunk: direct chunked copies
FAR = STAGE_BYTES // 4 + 7


def _views(t, shift: int):
    """(destination, source): views of ``t`` ``shift`` elements apart, overlapping."""
    n, k = t.shape[0], abs(shift)
    return (t[k:], t[:n - k]) if shift > 0 else (t[:n - k], t[k:])


def _shifted(values: np.ndarray, shift: int) -> np.ndarray:
    """What copying the source view into the destination view leaves, computed on the
    host from a copy of the source."""
    out = values.copy()
    n, k = values.size, abs(shift)
    if shift > 0:
        out[k:] = values[:n - k].copy()
    else:
        out[:n - k] = values[k:].copy()
    return out


def _staged(t, shift: int) -> bool:
    dst, src = _views(t, shift)
    return copy_plan(dst.data_ptr, src.data_ptr, dst.nbytes).stage_bytes > 0


@pytest.mark.parametrize("n,shift,staged", [
    (SMALL, 1, True), (SMALL, -1, True), (SMALL, 3, True), (SMALL, -1000, True),
    (BIG, 1, True), (BIG, -5, True), (BIG, FAR, False), (BIG, -FAR, False)])
def test_a_copy_between_overlapping_device_views(n, shift, staged):
    t = tl.arange(n, dtype="int32", device="cuda")
    before = t.numpy()
    assert _staged(t, shift) == staged   # which path of the copy plan runs
    dst, src = _views(t, shift)
    dst.copy_(src)
    np.testing.assert_array_equal(t.numpy(), _shifted(before, shift))


@pytest.mark.parametrize("shift", [1, -3, FAR])
def test_a_graph_copies_overlapping_device_views(shift):
    t = tl.arange(BIG, dtype="int32", device="cuda")
    before = t.numpy()
    dst, src = _views(t, shift)
    with tl.graph() as g:
        dst.copy_(src)
    np.testing.assert_array_equal(t.numpy(), before)   # recording copied nothing
    g.replay().wait()
    once = _shifted(before, shift)
    np.testing.assert_array_equal(t.numpy(), once)
    g.replay().wait()                                   # each replay shifts once more
    np.testing.assert_array_equal(t.numpy(), _shifted(once, shift))


def test_a_copy_chain_keeps_the_order_of_the_graph():
    """add -> overlapping copy (a chain of staged memcpys) -> add: each waits for the one
    before it through the chain's first and last nodes."""
    n = 1 << 16
    x = tl.randn(n, device="cuda")
    z = tl.full(n, float("nan"), device="cuda")
    w = tl.full(n, float("nan"), device="cuda")
    with tl.graph() as g:
        vector_add(z.partition(1024), x, x)   # z = 2x
        z[1:].copy_(z[:-1])                   # z shifted up by one
        vector_add(w.partition(1024), z, x)   # w = shifted z + x
    assert g.dependencies() == [[], [0], [1]]
    g.replay().wait()
    xn = x.numpy()
    zn = xn + xn                          # exact in float32, as on the device
    zn[1:] = zn[:-1].copy()
    np.testing.assert_array_equal(z.numpy(), zn)
    np.testing.assert_allclose(w.numpy(), zn + xn, rtol=1e-6, atol=1e-6)


def _recorded(device: str):
    """A graph of one launch on ``device`` (recorded on one line for both devices, so
    their messages name the same site), its input and output."""
    x = tl.ones(1 << 16, device=device)
    z = tl.zeros(1 << 16, device=device)
    with tl.graph() as g:
        vector_add(z.partition(1024), x, x)
    return g, x, z


def test_a_replay_after_a_free_is_refused_before_it_launches():
    g, x, z = _recorded("cuda")
    g.replay().wait()
    assert (z.numpy() == 2).all()
    z.copy_(tl.zeros(1 << 16, device="cuda"))
    x.free()
    with pytest.raises(tl.LaunchError, match=r"graph replay: argument 'x' of vector_add\(\) "
                                             r"\(recorded at .*\) was freed with \.free\(\) "
                                             r"by this thread after the graph was recorded"):
        g.replay()
    tl.synchronize()
    assert (z.numpy() == 0).all()   # the graph did not run
    assert LEDGER.pending_count == 0


def test_the_gpu_and_cpu_replays_of_freed_memory_say_the_same():
    errors = []
    for device in ("cuda", "cpu"):
        g, x, _z = _recorded(device)
        x.free()
        with pytest.raises(tl.LaunchError) as ei:
            g.replay()
        errors.append((ei.value.message, ei.value.hint))
    assert errors[0] == errors[1]
