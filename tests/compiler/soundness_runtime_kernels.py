"""A kernel for test_soundness's runtime cases (kernels are checked from a file)."""
import tilelab as tl


@tl.kernel
def copy_kernel(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z))
