"""Scalars and constants on the GPU: distinct scalar values relaunch one plan and one
loaded kernel (a copy of the prepared launch with the scalars repacked), each launch
computes with its own values, constants that compile differently (-0.0, NaN payloads
aside) get their own code, and subclasses are refused before they reach the kernel."""
from __future__ import annotations

import numpy as np
import pytest

import cuda.tile as ct
import tilelab as tl
from tilelab.errors import LaunchError


@tl.kernel
def axpb(z: tl.Out, x: tl.In, a: float, b: int):
    z.store(tl.load_like(x, z) * a + b)


@tl.kernel
def times(z: tl.Out, x: tl.In, C: ct.Constant[float]):
    z.store(tl.load_like(x, z) * C)


def test_distinct_scalars_share_one_plan_and_compute_their_own_values():
    x = tl.tensor(np.arange(1024, dtype=np.float32), device="cuda")
    z = tl.empty(1024, device="cuda")
    zp = z.partition(256)
    launcher = axpb._launcher
    axpb(zp, x, 1.0, 0)
    plans, code = len(launcher.plans), len(launcher.code)
    outs = []
    for i in range(1, 400):
        axpb(zp, x, i * 0.5, i)                    # sync: each result read back
        if i % 57 == 0:
            outs.append((i, z.numpy().copy()))
    futs = [axpb.launch_async(zp, x, 2.0, i) for i in range(100)]
    futs[-1].wait()
    np.testing.assert_array_equal(z.numpy(), np.arange(1024) * 2.0 + 99)
    for i, got in outs:
        np.testing.assert_array_equal(got, np.arange(1024, dtype=np.float32) * (i * 0.5) + i)
    axpb(zp, x, float("nan"), 3)
    assert len(launcher.plans) == plans and len(launcher.code) == code
    axpb(zp, x, 1.0, 2**40)                        # an int64 parameter: another plan
    np.testing.assert_array_equal(z.numpy(), np.arange(1024, dtype=np.float32) + 2.0**40)
    assert len(launcher.plans) == plans + 1


def test_nan_and_signed_zero_scalars_and_constants():
    x = tl.ones(512, device="cuda")
    z = tl.empty(512, device="cuda")
    for _ in range(3):
        axpb(z.partition(256), x, float("nan"), 0)
        assert np.isnan(z.numpy()).all()
    axpb(z.partition(256), x, -0.0, 0)
    assert not np.signbit(z.numpy()).any()         # -0.0 * 1 + 0 is +0.0
    times(z.partition(256), x, 0.0)
    assert not np.signbit(z.numpy()).any()
    times(z.partition(256), x, -0.0)               # compiled apart from 0.0
    assert np.signbit(z.numpy()).all()
    n = len(times._launcher.plans)
    for _ in range(3):
        times(z.partition(256), x, float("nan"))
    assert np.isnan(z.numpy()).all() and len(times._launcher.plans) == n + 1


def test_numpy_scalars_on_the_gpu():
    x = tl.ones(512, device="cuda")
    z = tl.empty(512, device="cuda")
    axpb(z.partition(256), x, np.float32(1.5), np.int32(2))
    np.testing.assert_array_equal(z.numpy(), 3.5)
    times(z.partition(256), x, np.float32(4.0))
    np.testing.assert_array_equal(z.numpy(), 4.0)


def test_subclasses_are_refused_before_the_gpu_launch():
    class Evil(int):
        pass

    x = tl.ones(512, device="cuda")
    z = tl.empty(512, device="cuda")
    with pytest.raises(LaunchError, match=r"argument 'b' is a scalar .* got Evil"):
        axpb(z.partition(256), x, 1.0, Evil(2))
    with pytest.raises(LaunchError, match=r"parameter 'C' is a ct.Constant .* got a 0-d"):
        times(z.partition(256), x, np.array(2.0))
