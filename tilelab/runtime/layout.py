"""The arithmetic of a strided layout: which bytes a view covers, whether its elements
overlap, how its pointer is aligned, and a numpy view of it inside a byte buffer.

Why: these facts decide what a launch may do with a tensor (a written tensor whose
elements overlap is refused; the alias and borrow checks compare byte ranges; the
compiler may assume the pointer's alignment), so they are computed here once, from the
shape, the strides (in elements) and the item size alone, for :class:`Tensor
<tilelab.runtime.tensor_type.Tensor>`, the launch checks
(:mod:`tilelab.runtime.launch.checks`) and :func:`~tilelab.runtime.tensor_type.wrap_memory`.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

__all__ = ["NEGATIVE_STRIDES", "OVERLAPPING", "elements_overlap", "align_of", "hull",
           "strided_view"]

#: :meth:`Tensor._layout_flags <tilelab.runtime.tensor_type.Tensor._layout_flags>` bits
NEGATIVE_STRIDES, OVERLAPPING = 1, 2


def elements_overlap(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether two distinct indices of a view may address the same element.

    Dimensions of size 1 are ignored and an empty view has no elements. The others are
    taken by increasing ``|stride|``: each stride must be at least the extent (in
    elements) that the dimensions of smaller stride span, ``1 + sum(|s| * (n - 1))``,
    else the view is reported as overlapping. This is exact for the layouts that
    slicing, transposing and broadcasting make (a stride 0 on a dimension of size > 1
    overlaps; rows of ``as_strided`` that share elements overlap) and conservative
    for the rest: it may report an interleaving that happens to be disjoint, never
    the reverse. O(ndim log ndim).

    Example:
        >>> elements_overlap((4, 4), (4, 1)), elements_overlap((4, 4), (1, 4))
        (False, False)
        >>> elements_overlap((8,), (0,)), elements_overlap((4, 4), (2, 1))
        (True, True)
        >>> elements_overlap((1, 8), (0, 1)), elements_overlap((0, 8), (0, 1))
        (False, False)
    """
    if 0 in shape:
        return False
    extent = 1
    for st, n in sorted((abs(st), n) for n, st in zip(shape, strides) if n != 1):
        if st < extent:
            return True
        extent += st * (n - 1)
    return False


def align_of(ptr: int) -> int:
    """Largest power of two <= 16 dividing ptr (what the compiler may assume)."""
    if ptr == 0:
        return 16
    a = 1
    while a < 16 and ptr % (a * 2) == 0:
        a *= 2
    return a


def hull(ptr: int, shape: tuple[int, ...], strides: tuple[int, ...],
          itemsize: int) -> tuple[int, int]:
    """The byte range [lo, hi) that a view at ``ptr`` with these strides covers."""
    if any(s == 0 for s in shape):
        return ptr, ptr
    neg = sum(st * (s - 1) for s, st in zip(shape, strides) if st < 0)
    pos = sum(st * (s - 1) for s, st in zip(shape, strides) if st > 0)
    return ptr + neg * itemsize, ptr + (pos + 1) * itemsize


def strided_view(raw: np.ndarray, byte_offset: int, t: Any) -> np.ndarray:
    """A numpy view of ``t``'s elements inside the uint8 buffer ``raw``."""
    isz = t.itemsize
    return np.ndarray(t.shape, t.dtype, buffer=raw, offset=byte_offset,
                      strides=tuple(s * isz for s in t.strides))
