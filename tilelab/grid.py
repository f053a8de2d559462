"""Launch grids: the one check of a grid a user passes (``grid=``, ``with_grid``).

A grid is 1 to 3 positive integers (numpy integers included, bools not), padded to
three with ones, each axis within CUDA's limit (x up to 2**31 - 1, y and z up to 65535).
The GPU launcher, ``Kernel.with_grid`` and the CPU interpreter all check through
:func:`normalize_grid`, so a grid means the same, and is refused with the same message,
everywhere.

Example:
    >>> normalize_grid((4, 2))
    (4, 2, 1)
"""
from __future__ import annotations

from typing import Any

from tilelab.errors import LaunchError

__all__ = ["GRID_LIMITS", "normalize_grid"]

#: the largest block count of each grid axis (CUDA's limits)
GRID_LIMITS = (2**31 - 1, 65535, 65535)


def _is_int(d: Any) -> bool:
    if isinstance(d, bool):
        return False
    if isinstance(d, int):
        return True
    return type(d).__module__ == "numpy" and hasattr(d, "__index__")


def normalize_grid(grid: Any, who: str = "") -> tuple[int, int, int]:
    """``grid`` as three positive ints, or a :class:`~tilelab.errors.LaunchError` that
    says what is wrong; ``who`` (e.g. ``"add()"``) starts the message.

    Example:
        >>> normalize_grid(8)
        (8, 1, 1)
        >>> normalize_grid((2, 0))
        Traceback (most recent call last):
        ...
        tilelab.errors.LaunchError: grid dimension 1 is 0; it must be between 1 and 65535
    """
    prefix = f"{who}: " if who else ""
    dims: tuple[int, ...] | None
    if _is_int(grid):
        dims = (int(grid),)
    else:
        try:
            dims = tuple(grid)
        except TypeError:
            dims = None
        if dims is not None and not all(_is_int(d) for d in dims):
            dims = None
    if dims is None or not 1 <= len(dims) <= 3:
        raise LaunchError(f"{prefix}grid must be 1 to 3 positive integers, got {grid!r}",
                          hint="e.g. grid=(n_tiles,) or grid=(m_tiles, n_tiles)")
    dims = tuple(int(d) for d in dims) + (1,) * (3 - len(dims))
    for axis, (d, limit) in enumerate(zip(dims, GRID_LIMITS)):
        if not 1 <= d <= limit:
            raise LaunchError(f"{prefix}grid dimension {axis} is {d}; it must be between 1 "
                              f"and {limit}")
    return dims  # type: ignore[return-value]
