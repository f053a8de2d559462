"""Limits of compiled tile code that the compiler and the CPU interpreter both enforce.

Why a leaf module: the compiler (:mod:`tilelab.compiler`) refuses a kernel that passes
one of these limits before tileiras runs, and the interpreter (:mod:`tilelab.interp`)
runs the same kernel on the CPU; the two packages may not import each other (DESIGN §1),
and a kernel the GPU toolchain refuses must not run on the CPU backend. Both read the
numbers and build their messages here, so the two refusals say the same thing.

Example:
    >>> tile_limit_message("k", (1 << 25,))
    "kernel 'k' makes a tile of shape (33554432,), 33554432 elements: more than Tile IR's limit of 16777216 elements per tile"
"""
from __future__ import annotations

from typing import Iterable

__all__ = ["MAX_TILE_ELEMENTS", "tile_elements", "tile_limit_hint", "tile_limit_message",
           "partition_limit_message"]

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
