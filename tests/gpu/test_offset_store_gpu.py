"""``p.store(tile, offset=...)`` on a real GPU: the kv-cache write lands at the position the
device holds, in a launch and in a replayed CUDA graph, and hostile offsets write nothing
outside the block's own tile (docs/safety.md, "Sub-tile stores")."""
from __future__ import annotations

import numpy as np
import pytest

import cuda.tile as ct
import tilelab as tl

H, S_MAX, D = 8, 64, 128


@tl.kernel
def kv_write(k_cache: tl.Out, k_new: tl.In, position: tl.In, D: ct.Constant[int]):
    h = k_cache.tile_index[0]
    pos = ct.load(position, index=(0,), shape=(1,)).item()
    row = ct.reshape(ct.load(k_new, index=(h, 0), shape=(1, D)), (1, 1, D))
    k_cache.store(row, offset=(0, pos, 0))


@tl.kernel
def advance(p: tl.InOut):
    p.store(p.load() + 1)


@tl.kernel
def hostile(z: tl.Out, x: tl.In, offs: tl.In):
    (b,) = z.tile_index
    o = ct.load(offs, index=(b,), shape=(1,)).item()
    z.store(ct.load(x, index=(0,), shape=(16,)) + b, offset=(o,))


def gpu(a):
    return tl.tensor(np.ascontiguousarray(a), device="cuda")


K_NEW = (np.arange(H * D, dtype=np.float32).reshape(H, D) % 97) + 1


def expected(rows: dict[int, np.ndarray], fill: float = 0.0) -> np.ndarray:
    out = np.full((H, S_MAX, D), fill, np.float32)
    for pos, k in rows.items():
        if 0 <= pos < S_MAX:
            out[:, pos] = k
    return out


@pytest.mark.parametrize("pos", [0, 17, S_MAX - 1, S_MAX, S_MAX + 5, -1, -S_MAX, 2**31 - 1])
def test_kv_write_on_the_gpu_equals_numpy(pos):
    cache = gpu(np.full((H, S_MAX, D), -3.0, np.float32))
    kv_write(cache.partition((1, S_MAX, D)), gpu(K_NEW), gpu(np.array([pos], np.int32)), D)
    np.testing.assert_array_equal(cache.numpy(), expected({pos: K_NEW}, fill=-3.0))


def test_a_replayed_graph_writes_at_the_position_the_device_holds():
    cache = gpu(np.zeros((H, S_MAX, D), np.float32))
    k_new = gpu(K_NEW)
    position = gpu(np.array([S_MAX - 3], np.int32))
    with tl.graph() as g:
        kv_write(cache.partition((1, S_MAX, D)), k_new, position, D)
        advance(position.partition(1))
    for _ in range(5):  # three rows, then two replays past the end that write nothing
        g.replay().wait()
    assert position.numpy().tolist() == [S_MAX + 2]
    want = expected({S_MAX - 3: K_NEW, S_MAX - 2: K_NEW, S_MAX - 1: K_NEW})
    np.testing.assert_array_equal(cache.numpy(), want)


def test_hostile_offsets_write_nothing_outside_the_own_tile():
    offsets = [-1, 4, 3, -2**31, 2**31 - 1, 0, 5, -4]
    x = np.arange(512, dtype=np.float32) + 1
    z = gpu(np.full(512, -7.0, np.float32))
    hostile(z.partition(64), gpu(x), gpu(np.array(offsets, np.int32)))
    want = np.full(512, -7.0, np.float32)
    for b, o in enumerate(offsets):
        if 0 <= o < 4:
            want[64 * b + 16 * o:64 * b + 16 * o + 16] = x[:16] + b
    np.testing.assert_array_equal(z.numpy(), want)


def test_gpu_and_cpu_agree_on_an_edge_tile():
    # 10 x 20 in tiles of (4, 8): sub-tiles crossing the end are masked, past it skipped
    @tl.kernel
    def put(z: tl.Out, a: tl.In):
        i = ct.load(a, index=(0,), shape=(1,)).item()
        j = ct.load(a, index=(1,), shape=(1,)).item()
        z.store(ct.full((2, 4), 7.0, dtype=ct.float32), offset=(i, j))
    for ij in ([1, 1], [0, 1], [1, 0]):
        on_gpu = gpu(np.zeros((10, 20), np.float32))
        on_cpu = tl.zeros((10, 20), dtype="float32", device="cpu")
        put(on_gpu.partition((4, 8)), gpu(np.array(ij, np.int32)))
        put(on_cpu.partition((4, 8)), tl.tensor(np.array(ij, np.int32), device="cpu"))
        np.testing.assert_array_equal(on_gpu.numpy(), on_cpu.numpy())
