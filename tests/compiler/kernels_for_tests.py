"""Kernels the compiler tests compile (kernels need a real file: tilelab reads source)."""
import cuda.tile as ct

import tilelab as tl


def make_tile(n):
    return ct.full((n,), 1.0, dtype=ct.float32)


@tl.kernel
def shape_mismatch(z: tl.Out, x: tl.In):
    z.store(ct.load(x, index=(0,), shape=(128,)))  # MARK: shape_mismatch


@tl.kernel
def dtype_mismatch(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z))  # MARK: dtype_mismatch


def bad_helper(t):
    return t + ct.full((3, 3), 0, dtype=ct.float32)  # MARK: bad_helper


@tl.kernel
def calls_bad_helper(z: tl.Out, x: tl.In):
    z.store(bad_helper(tl.load_like(x, z)))


@tl.kernel
def scale(p: tl.InOut, factor):
    p.store(p.load() * factor)


@tl.kernel
def two_outputs(z: tl.Out, s: tl.Out, x: tl.In):
    t = tl.load_like(x, z)
    z.store(t)
    s.store(ct.sum(t, axis=1))


@tl.kernel(check_bounds=False)
def unchecked_copy(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z))


@tl.kernel
def multiline(z: tl.Out,
              x: tl.In):
    z.store(
        tl.load_like(x, z)
        * 2.0)
    t = z.tile_shape


class Holder:
    @tl.kernel
    def indented(z: tl.Out, x: tl.In):
        z.store(tl.load_like(x, z) + 1)
