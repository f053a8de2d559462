"""The grid limit ``ct.launch`` adds to CUDA's: at most 2^24 - 1 blocks on an axis.

Why: CUDA lets a grid's x axis reach 2^31 - 1 blocks (:mod:`tilelab.grid` checks that),
but cuTile's launcher refuses any axis of 2^24 blocks or more before the kernel runs
("Grid[0] exceeds 24-bit limit: max=16777215, got=16777216. Use multiple kernel
launches for larger workloads.", a ``ValueError``). The interpreter stands for
``ct.launch``, so it refuses such a grid with the same words and class, before any block
runs (without the check, a huge grid would run for hours on the CPU or fail somewhere in
its first blocks with another message).

Example:
    >>> check_grid((16, 1, 1))
    >>> check_grid((2**24, 1, 1))
    Traceback (most recent call last):
    ...
    tilelab.errors.LaunchError: Grid[0] exceeds 24-bit limit: max=16777215, got=16777216. Use multiple kernel launches for larger workloads.
    hint: launch the work in several grids of fewer blocks (or give each block more work)
"""
from __future__ import annotations

from tilelab.errors import LaunchError

__all__ = ["MAX_GRID_AXIS", "check_grid"]

#: the most blocks ``ct.launch`` accepts on one grid axis (24 bits)
MAX_GRID_AXIS = 2**24 - 1


def check_grid(grid: tuple[int, int, int]) -> None:
    """Refuse a (normalized) grid with an axis of more than :data:`MAX_GRID_AXIS` blocks,
    as ``ct.launch`` does: a :class:`~tilelab.errors.LaunchError` that is a ``ValueError``."""
    for axis, blocks in enumerate(grid):
        if blocks > MAX_GRID_AXIS:
            raise LaunchError(
                f"Grid[{axis}] exceeds 24-bit limit: max={MAX_GRID_AXIS}, got={blocks}. "
                "Use multiple kernel launches for larger workloads.",
                hint="launch the work in several grids of fewer blocks (or give each "
                     "block more work)", foreign=ValueError)
