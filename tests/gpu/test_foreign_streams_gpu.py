"""Launches on torch and cupy arrays run on that framework's current stream, on a real
GPU: a side stream made current, and the legacy default stream (handle 0), which is
where torch's and cupy's work goes unless a stream is made current."""
from __future__ import annotations

import numpy as np
import pytest

import tilelab as tl
import tilelab.kernels as K
from tilelab.kernels.examples import vector_add


def _handle(fut) -> int:
    return int(fut.stream.handle)


def test_torch_side_stream_and_default_stream():
    torch = pytest.importorskip("torch")
    x = torch.randn(1 << 20, device="cuda")
    y = torch.randn(1 << 20, device="cuda")
    z = torch.empty_like(x)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        out, fut = K.add(x, y, out=z, sync=False)
        assert _handle(fut) == side.cuda_stream
        w = z * 2                          # torch's next op on the same stream
    # the side-stream launch still holds z until its future is observed: writing z
    # from the default stream now would race, and is refused
    with pytest.raises(tl.BorrowError, match="on another stream"):
        K.add(x, y, out=z, sync=False)
    fut.wait()
    assert torch.allclose(w, 2 * (x + y))
    out, fut = K.add(x, y, out=z, sync=False)          # torch's default stream again
    assert _handle(fut) == torch.cuda.current_stream().cuda_stream
    fut.wait()
    assert torch.allclose(z, x + y)


def test_cupy_side_stream_and_the_legacy_default_stream():
    cp = pytest.importorskip("cupy")
    x = cp.random.standard_normal(1 << 20, dtype=cp.float32)
    z = cp.empty_like(x)
    with cp.cuda.Stream(non_blocking=True) as side:
        fut = vector_add.launch_async(tl.from_dlpack(z).partition(1024), x, x)
        assert _handle(fut) == side.ptr
        w = z + 1                          # cupy's next op on the same stream
    side.synchronize()
    assert cp.allclose(w, 2 * x + 1)
    fut.wait()
    assert cp.cuda.get_current_stream().ptr == 0      # cupy's legacy default stream
    z2 = cp.empty_like(x)
    fut = vector_add.launch_async(tl.from_dlpack(z2).partition(1024), x, z)
    assert _handle(fut) == 0
    fut.wait()
    assert cp.allclose(z2, 3 * x)
    np.testing.assert_allclose(cp.asnumpy(z2[:4]), 3 * cp.asnumpy(x[:4]), rtol=1e-6)
