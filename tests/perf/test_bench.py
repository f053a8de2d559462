

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
