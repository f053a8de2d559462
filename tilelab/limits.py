"""Limits of compiled tile code that the compiler and the CPU interpreter both enforce,
and the shape rules whose refusals both explain alike.

Why a leaf module: the compiler (:mod:`tilelab.compiler`) refuses a kernel that passes
one of these limits before tileiras runs, and the interpreter (:mod:`tilelab.interp`)
runs the same kernel on the CPU; the two packages may not import each other (docs/architecture.md, "Layers"),
and a kernel the GPU toolchain refuses must not run on the CPU backend. Both read the
numbers and build their messages here, so the two refusals say the same thing. The same
holds for two shape errors a newcomer meets first, which cuTile words tersely: an ``mma``
whose operands disagree on K (:func:`mma_shape_message`) and a partition store of a tile
that is not the partition's (:func:`store_shape_message`), and for what a target GPU
supports: the dtypes cuTile compiles only for newer GPUs (:data:`DTYPE_MIN_SM`,
:func:`dtype_arch_message`), which the CPU backend refuses for the arch it stands for.

Example:
    >>> tile_limit_message("k", (1 << 25,))
    "kernel 'k' makes a tile of shape (33554432,), 33554432 elements: more than Tile IR's limit of 16777216 elements per tile"
"""
from __future__ import annotations

import re
from typing import Iterable

__all__ = ["MAX_TILE_ELEMENTS", "tile_elements", "tile_limit_hint", "tile_limit_message",
           "partition_limit_message", "mma_shape_message", "mma_acc_message",
           "store_shape_message", "ARCHS", "DEFAULT_ARCH", "arch_name", "sm_number",
           "DTYPE_MIN_SM", "BF16_ATOMIC_ADD_MIN_SM", "dtype_supported", "dtype_arch_message",
           "dtype_arch_hint", "atomic_add_arch_message", "STR_CONSTANT_WHY",
           "str_constant_hint"]

#: Tile IR's limit on the elements of one tile (``maxTileNumElements`` in the cuda-tile
#: dialect, include/cuda_tile/Dialect/CudaTile/IR/Types.h; the bytecode reader refuses
#: larger tiles with "tile would exceed the maximum of 16777216 elements")
MAX_TILE_ELEMENTS = 1 << 24


def tile_elements(shape: Iterable[int]) -> int:
    """How many elements a tile of ``shape`` holds (1 for a scalar's ``()``).

    Example:
        >>> tile_elements((8192, 4096)), tile_elements(())
        (33554432, 1)
    """
    n = 1
    for d in shape:
        n *= int(d)
    return n


def tile_limit_hint() -> str:
    """What to do about a tile past :data:`MAX_TILE_ELEMENTS`.

    Example:
        >>> tile_limit_hint().startswith("Tile IR tiles hold at most 16777216 elements")
        True
    """
    return (f"Tile IR tiles hold at most {MAX_TILE_ELEMENTS} elements (2**24); use smaller "
            "tiles and loop over the rest (e.g. a ct.Constant block size and a for loop)")


def tile_limit_message(kernel: str, shape: Iterable[int]) -> str:
    """The refusal of a tile of ``shape`` made inside kernel ``kernel`` (see the module
    docstring's example)."""
    shape = tuple(int(d) for d in shape)
    return (f"kernel {kernel!r} makes a tile of shape {shape}, {tile_elements(shape)} "
            f"elements: more than Tile IR's limit of {MAX_TILE_ELEMENTS} elements per tile")


def partition_limit_message(param: str, kernel: str, tile_shape: Iterable[int]) -> str:
    """The refusal of partition argument ``param`` of ``kernel`` whose tiles are too large.

    Example:
        >>> partition_limit_message("z", "k", (8192, 4096)).split(":")[0]
        "partition 'z' of kernel 'k' has tiles of shape (8192, 4096), 33554432 elements"
    """
    shape = tuple(int(d) for d in tile_shape)
    return (f"partition {param!r} of kernel {kernel!r} has tiles of shape {shape}, "
            f"{tile_elements(shape)} elements: more than Tile IR's limit of "
            f"{MAX_TILE_ELEMENTS} elements per tile")


def mma_shape_message(op: str, x_shape: Iterable[int], y_shape: Iterable[int]
                      ) -> tuple[str, str]:
    """(message, hint) of ``op(x, y, ...)`` (``ct.mma``, ``ct.matmul``, ``@``) whose
    operand shapes do not multiply: which dimension disagrees (K, or the batch
    dimensions) and the shapes that would. 1-D operands count as cuTile counts them (x
    a row, y a column).

    Example:
        >>> m, h = mma_shape_message("ct.mma", (16, 32), (16, 16))
        >>> m
        'ct.mma: K differs: x is (16, 32), so K = 32, but y is (16, 16), so K = 16 (x @ y multiplies (M, K) by (K, N))'
        >>> h
        'load x and y with one K tile size: y as (32, 16) for K = 32, or x as (16, 16) for K = 16'
    """
    xs, ys = tuple(int(d) for d in x_shape), tuple(int(d) for d in y_shape)
    x2 = (1,) + xs if len(xs) == 1 else xs
    y2 = ys + (1,) if len(ys) == 1 else ys
    kx, ky = x2[-1], y2[-2]
    if kx != ky:
        y_fix = ys[:-2] + (kx, ys[-1]) if len(ys) > 1 else (kx,)
        x_fix = xs[:-1] + (ky,)
        return (f"{op}: K differs: x is {xs}, so K = {kx}, but y is {ys}, so K = {ky} "
                "(x @ y multiplies (M, K) by (K, N))",
                f"load x and y with one K tile size: y as {y_fix} for K = {kx}, or x as "
                f"{x_fix} for K = {ky}")
    return (f"{op}: the batch dimensions of x {xs} and y {ys} do not broadcast: "
            f"{x2[:-2]} against {y2[:-2]}",
            "give x and y the same leading (batch) dimensions, or 1 where one of them has "
            "a single batch")


def mma_acc_message(op: str, acc_shape: Iterable[int], out_shape: Iterable[int]
                    ) -> tuple[str, str]:
    """(message, hint) of an ``mma`` accumulator whose shape is not that of ``x @ y``.

    Example:
        >>> mma_acc_message("ct.mma", (16, 32), (16, 16))[0]
        'ct.mma: acc is (16, 32), but x @ y is (16, 16) (M rows of x by N columns of y)'
    """
    acc, out = tuple(int(d) for d in acc_shape), tuple(int(d) for d in out_shape)
    return (f"{op}: acc is {acc}, but x @ y is {out} (M rows of x by N columns of y)",
            f"make the accumulator of shape {out}, e.g. ct.zeros({out}, dtype=ct.float32)")


def store_shape_message(param: str, tile_shape: Iterable[int],
                        partition_tile: Iterable[int]) -> tuple[str, str]:
    """(message, hint) of ``param.store(tile)`` with a tile that is not (and does not
    broadcast to) the partition's tile shape.

    Example:
        >>> m, h = store_shape_message("z", (128,), (256,))
        >>> m
        'z.store(tile): the tile is (128,), but z is partitioned into tiles of (256,): a store writes one whole tile of z'
        >>> print(h)
        store a tile of shape (256,) (z.tile_shape): load it with tl.load_like(x, z), or with shape=z.tile_shape; a tile that divides it is stored as a part of the block's own tile with z.store(tile, offset=...)
    """
    tile, part = tuple(int(d) for d in tile_shape), tuple(int(d) for d in partition_tile)
    hint = (f"store a tile of shape {part} ({param}.tile_shape): load it with "
            f"tl.load_like(x, {param}), or with shape={param}.tile_shape")
    if len(tile) == len(part) and all(0 < t <= p and p % t == 0 for t, p in zip(tile, part)):
        hint += (f"; a tile that divides it is stored as a part of the block's own tile "
                 f"with {param}.store(tile, offset=...)")
    return (f"{param}.store(tile): the tile is {tile}, but {param} is partitioned into "
            f"tiles of {part}: a store writes one whole tile of {param}", hint)


# ---- targets: the GPUs tileiras compiles for and what each supports ---------------------------

#: the ``--gpu-name`` values tileiras 13.4 accepts (the compiler's ``check_arch`` and the
#: ``TILELAB_ARCH`` setting take these)
ARCHS = ("sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90", "sm_100", "sm_103",
         "sm_107", "sm_110", "sm_120", "sm_121")

#: the target of a compile that names none on a machine without a GPU, and so the GPU
#: the CPU backend stands for unless ``TILELAB_ARCH`` names another
DEFAULT_ARCH = "sm_90"


def arch_name(text: str) -> str | None:
    """``text`` as one of :data:`ARCHS` (``"sm_90"``, also written ``"90"``, ``"9.0"``,
    ``"SM_90"``), or None when it names no target tileiras compiles for.

    Example:
        >>> arch_name("9.0"), arch_name("sm_100"), arch_name("sm_70")
        ('sm_90', 'sm_100', None)
    """
    a = str(text).strip().lower()
    if re.fullmatch(r"\d+\.\d", a):
        a = "sm_" + a.replace(".", "")
    elif re.fullmatch(r"\d+", a):
        a = "sm_" + a
    return a if a in ARCHS else None


def sm_number(arch: str) -> int:
    """The number of an arch name, as cuTile compares them (``"sm_100"`` -> 100).

    Example:
        >>> sm_number("sm_89") < sm_number("sm_90") < sm_number("sm_100")
        True
    """
    return int(arch.removeprefix("sm_"))


#: the oldest target (as :func:`sm_number`) each dtype compiles for; cuTile refuses a
#: kernel for an older one at the first operation that takes a value of the dtype
#: ("float4_e2m1fn is not supported on sm_90"). Found by compiling a kernel that
#: converts a tile to the dtype and back, and one that loads an array of it, for every
#: target in :data:`ARCHS` with cuda-tile 1.7 and tileiras 13.4 (tests/interp/
#: test_interp_limits.py compiles them again): the fp8 types from sm_90 (sm_89 has fp8
#: hardware, which tileiras does not target), the MX scale type and fp4 from sm_100.
#: float8_e5m3fnu compiles for sm_107 only (cuTile's own check lets sm_110 and newer
#: through, where tileiras refuses it); the CPU backend has no numpy type for it and
#: refuses it on every target. Other dtypes compile for every target.
DTYPE_MIN_SM: dict[str, int] = {
    "float8_e4m3fn": 90,
    "float8_e5m2": 90,
    "float8_e8m0fnu": 100,
    "float4_e2m1fn": 100,
    "float8_e5m3fnu": 107,
}

#: the oldest target whose atomic add takes bfloat16 (cuTile refuses it for sm_8x:
#: "bfloat16 is not supported by atomic add on sm_80")
BF16_ATOMIC_ADD_MIN_SM = 90


def dtype_supported(dtype: str, arch: str) -> bool:
    """Whether kernels for ``arch`` may compute with values of ``dtype`` (a name).

    Example:
        >>> dtype_supported("float4_e2m1fn", "sm_90"), dtype_supported("float4_e2m1fn", "sm_100")
        (False, True)
    """
    return sm_number(arch) >= DTYPE_MIN_SM.get(dtype, 0)


def dtype_arch_message(dtype: str, arch: str) -> str:
    """cuTile's refusal of a value of ``dtype`` in a kernel for ``arch`` (its very text).

    Example:
        >>> dtype_arch_message("float8_e4m3fn", "sm_80")
        'float8_e4m3fn is not supported on sm_80'
    """
    return f"{dtype} is not supported on {arch}"


def dtype_arch_hint(dtype: str, arch: str) -> str:
    """What to do about a ``dtype`` value in a kernel for ``arch`` (compiled or run on the
    CPU backend, which stands for ``TILELAB_ARCH``, else this machine's GPU, else sm_90).

    Example:
        >>> dtype_arch_hint("float4_e2m1fn", "sm_90").split(";")[0]
        'float4_e2m1fn needs sm_100 or newer'
    """
    need = DTYPE_MIN_SM.get(dtype, 0)
    return (f"{dtype} needs sm_{need} or newer; compute in a dtype {arch} supports (e.g. "
            f"bfloat16 or float16), or target a newer GPU: kernel.compile(..., "
            f"arch='sm_{need}'), and TILELAB_ARCH=sm_{need} for the CPU backend")


def atomic_add_arch_message(dtype: str, arch: str) -> str:
    """cuTile's refusal of an atomic add of ``dtype`` (bfloat16) on ``arch``.

    Example:
        >>> atomic_add_arch_message("bfloat16", "sm_80")
        'bfloat16 is not supported by atomic add on sm_80'
    """
    return f"{dtype} is not supported by atomic add on {arch}"


# ---- kernel constants ---------------------------------------------------------------------------

#: why a string kernel constant is refused (cuTile's compile API, ``cuda.tile.compilation.
#: ConstantConstraint``, raises TypeError for a str value; a string in the kernel body,
#: a message, is another thing)
STR_CONSTANT_WHY = "cuTile compiles bool, int and float constants only"


def str_constant_hint(param: str) -> str:
    """What to pass for ``ct.Constant`` parameter ``param`` instead of a string.

    Example:
        >>> str_constant_hint("MODE")
        'choose with a bool or int constant (e.g. MODE: ct.Constant[int] and MODE == 1 in the kernel), or define one kernel per string'
    """
    return (f"choose with a bool or int constant (e.g. {param}: ct.Constant[int] and "
            f"{param} == 1 in the kernel), or define one kernel per string")
