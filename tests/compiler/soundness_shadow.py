"""A module whose globals try to capture the code tilelab generates (soundness class 5).

Here ``ct`` is not cuTile, ``range`` is the user's own, and ``_tl``, ``_tl_z_t0`` and
``_tl_ct`` are ordinary globals. The lowering reaches cuTile, ``range`` and the tile-shape
constants only through reserved ``__tl`` names, so the partition stores and persistent
loops of these kernels must do exactly what they do elsewhere: every block stores its
own tile (tests/compiler/test_soundness.py runs them on the CPU and compiles them).
"""
from __future__ import annotations

import tilelab as tl

ct = 2                       # a global named ct that is a number
_tl = 3
_tl_z_t0 = 5                 # the name of a tile constant, minus the reserved prefix
_tl_ct = 7


def range(n):                # noqa: A001 - a user-defined range, shadowing the builtin
    return n * 0 + 1


def store():                 # a global named like the op the lowering emits
    return 10


def broadcast_to():          # ... and another
    return 20


@tl.kernel
def scaled_by_globals(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) * ct + _tl + _tl_z_t0 + _tl_ct + store() + broadcast_to())


@tl.kernel
def persistent_with_user_range(z: tl.Out, x: tl.In):
    # the kernel's own 'range' is the user's helper (so the frozen namespace binds it);
    # the persistent loop the lowering generates must still be Python's range
    for t in z.tiles():
        z.store(tl.load_like(x, z, at=t) + range(3), at=t)


@tl.kernel
def grouped_with_user_range(z: tl.Out, x: tl.In):
    m, n = z.tile_index
    z.store(tl.load_like(x, z) + range(m + n))


@tl.kernel
def local_ct(z: tl.Out, x: tl.In):
    ct = 1.5                 # a local named ct
    bid = 2.0                # a local named like the op the index expression uses
    z.store(tl.load_like(x, z) * ct + bid)


@tl.kernel
def param_named_ct(z: tl.Out, x: tl.In, ct: float):
    z.store(tl.load_like(x, z) + ct)


@tl.kernel
def shape_names(z: tl.Out, x: tl.In):
    z_t0 = 4                 # the tile constant's name without the prefix, as a local
    (b,) = z.tile_shape
    z.store(tl.load_like(x, z) + z_t0 + b * 0)
