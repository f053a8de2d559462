"""The safety promises on a real GPU: no bypass gets a writing kernel onto the device.

Each case tries a class of bypass against a kernel already launched on the GPU, and checks
both that it is refused (at compile or launch, with the rule) and that the GPU memory the
bypass aimed at is unchanged. The last cases probe the trusted base: bounds-checked loads
of tiles that lie partly or entirely outside their array read padding, never memory.
"""
from __future__ import annotations

import sys

import numpy as np
import pytest

import cuda.tile as ct
import tilelab as tl

T = 256


def _double(t):
    return t * 2


def _writes_its_argument(x, t):
    ct.scatter(x, ct.arange(T, dtype=ct.int32), t)
    return t


def _twice(t):
    return _double(t)


@tl.kernel
def scaled(z: tl.Out, x: tl.In):
    z.store(_twice(tl.load_like(x, z)))


@tl.kernel
def far_load(z: tl.Out, x: tl.In, OFFSET: ct.Constant[int]):
    t = ct.load(x, index=(ct.bid(0) + OFFSET,), shape=(T,), padding_mode=ct.PaddingMode.ZERO)
    z.store(t + 1)


@tl.kernel
def small_input(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) + 1)


@tl.kernel(check_bounds=False)
def unchecked_copy(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z))


def _gpu(a):
    return tl.tensor(a, device="cuda")


def test_a_swapped_helper_code_never_reaches_the_gpu():
    x = _gpu(np.arange(4 * T, dtype=np.float32))
    z = tl.empty(4 * T, dtype="float32", device="cuda")
    scaled(z.partition(T), x)
    np.testing.assert_array_equal(z.numpy(), x.numpy() * 2)
    original = _double.__code__
    try:
        _double.__code__ = _writes_its_argument.__code__   # checked from the writer's text
        with pytest.raises(tl.SafetyError) as info:
            scaled(z.partition(T), x)            # the same shape: the prepared launch
        assert info.value.rule == "write-input", info.value
        z2 = tl.empty(8 * T, dtype="float32", device="cuda")
        with pytest.raises(tl.SafetyError):
            scaled(z2.partition(T), _gpu(np.zeros(8 * T, np.float32)))   # a new shape
    finally:
        _double.__code__ = original
    np.testing.assert_array_equal(x.numpy(), np.arange(4 * T, dtype=np.float32))
    scaled(z.partition(T), x)                    # restored: checked again, runs again
    np.testing.assert_array_equal(z.numpy(), x.numpy() * 2)


def test_a_rebound_global_is_checked_before_the_next_launch():
    mod = sys.modules[__name__]
    x = _gpu(np.ones(2 * T, dtype=np.float32))
    z = tl.empty(2 * T, dtype="float32", device="cuda")
    scaled(z.partition(T), x)
    saved = mod._twice
    try:
        mod._twice = _writes_its_argument
        with pytest.raises(tl.SafetyError):
            scaled(z.partition(T), x)
    finally:
        mod._twice = saved
    np.testing.assert_array_equal(x.numpy(), np.ones(2 * T, dtype=np.float32))


def test_self_overlapping_outputs_are_refused_before_any_launch():
    torch = pytest.importorskip("torch")
    x = _gpu(np.ones(4 * T, dtype=np.float32))
    base = torch.zeros(T, device="cuda")
    out = tl.from_dlpack(base.expand(4, T))             # four rows over one row's memory
    with pytest.raises((tl.AliasError, tl.LaunchError)) as info:
        small_input(out.partition((1, T)), x.reshape(4, T))
    assert "overlap" in str(info.value)
    assert float(base.abs().sum()) == 0.0


def test_unchecked_kernels_need_their_proof_at_every_launch():
    x = _gpu(np.ones(1000, dtype=np.float32))
    z = tl.empty(1000, dtype="float32", device="cuda")
    with pytest.raises(tl.LaunchError, match="partial tile"):
        unchecked_copy(z.partition(T), x)
    small = _gpu(np.ones(3 * T, dtype=np.float32))
    z4 = tl.empty(4 * T, dtype="float32", device="cuda")
    with pytest.raises(tl.LaunchError, match="covering"):
        unchecked_copy(z4.partition(T), small)


def test_forged_schedules_are_refused():
    class Sneaky(type(tl.grouped(8))):
        name = "row_major"

    z = tl.empty((512, 512), dtype="float32", device="cuda")
    with pytest.raises((TypeError, tl.LaunchError), match="schedule"):
        z.partition((64, 64), schedule=Sneaky(8))


@pytest.mark.parametrize("offset", [4, 1 << 20, -1, -(1 << 20), (1 << 31) // T + 1])
def test_tiles_entirely_outside_the_array_read_padding(offset):
    """The trusted base (docs/safety.md): a bounds-checked load of a tile entirely
    outside its array is documented as undefined by cuTile; tileiras pads it."""
    x = _gpu(np.full(4 * T, 7.0, dtype=np.float32))
    z = tl.empty(4 * T, dtype="float32", device="cuda")
    far_load(z.partition(T), x, offset)
    got = z.numpy().reshape(4, T)
    src = np.arange(4) + offset
    for b in range(4):
        want = 8.0 if 0 <= src[b] < 4 else 1.0
        np.testing.assert_array_equal(got[b], np.full(T, want, np.float32))


def test_load_like_of_a_smaller_input_is_refused_at_launch():
    """Tiles of tl.load_like always meet their array: the launch proves it."""
    x = _gpu(np.full(T + 17, 3.0, dtype=np.float32))
    z = tl.empty(8 * T, dtype="float32", device="cuda")
    with pytest.raises(tl.LaunchError, match="entirely outside"):
        small_input(z.partition(T), x)
    z2 = tl.empty(2 * T, dtype="float32", device="cuda")
    small_input(z2.partition(T), x)              # the partial last tile is padding
    want = np.ones(2 * T, np.float32)
    want[:T + 17] = 4.0
    np.testing.assert_array_equal(z2.numpy(), want)


def test_every_library_kernel_passes_the_tile_ir_validator_on_its_gpu():
    """Every library kernel compiled for this GPU's arch goes through the validator."""
    from tilelab.kernels import add, matmul, rms_norm, softmax

    a = tl.randn(256, 512, dtype="bfloat16", device="cuda")
    b = tl.randn(512, 384, dtype="bfloat16", device="cuda")
    w = tl.randn(512, dtype="bfloat16", device="cuda")
    for out in (add(a, a), matmul(a, b), rms_norm(a, w), softmax(a)):
        assert not np.isnan(out.numpy().astype(np.float32)).any()

