

import pytest


@pytest.mark.toolchain
def test_l2_flush_kernel_reads_every_row_it_owns():
    """The read-only L2 flush kernel (tl.bench on the GPU) sums each block's rows."""
    import numpy as np

    import tilelab as tl
    from tilelab.perf.l2flush import read_rows_kernel

    buf = tl.tensor(np.arange(8 * 64, dtype=np.float32).reshape(8, 64), device="cpu")
    sink = tl.empty((2, 1), "float32", device="cpu")
    read_rows_kernel(sink.partition((1, 1)), buf, 4, 64)
    want = buf.numpy().reshape(2, 4 * 64).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(sink.numpy(), want, rtol=1e-6)
    art = read_rows_kernel.compile(sink.partition((1, 1)), buf, 4, 64, arch="sm_90")
    assert art.cubin


def test_cover_outlasts_the_host_time():
    """Enough flushes go before a timed call that the device is still busy when the
    call's work arrives (bounded: a call that waits on the host cannot be covered)."""
    from tilelab.perf.bench import MAX_COVER, _cover

    assert _cover(0.0, 25e-6) == 1
    assert _cover(20e-6, 25e-6) == 1          # one flush already outlasts 20 us
    assert _cover(100e-6, 25e-6) == 5         # 1.2 x 100 us over 25 us flushes
    assert _cover(100e-6, 25e-6, 5e-6) == 6   # each flush's own launch eats 5 us
    assert _cover(5.0, 25e-6) == MAX_COVER
    assert _cover(1e-3, 10e-6, 10e-6) == MAX_COVER   # flushes no longer than launches
