"""cuTile's terse shape refusals, said the way the CPU interpreter says them.

Why: cuTile refuses an ``mma`` whose operands disagree on K with "Incompatible shapes
for matrix mul on tiles: (16, 32), (16, 16)." and a partition store of a tile of the
wrong shape with "Shape (128,) is not broadcastable to (256,)" (the lowering broadcasts
the stored tile to the partition's tile shape). Neither says which dimension is wrong
or what the store needed. The interpreter builds its refusals of the same kernels from
:mod:`tilelab.limits`; this module reads cuTile's messages and builds the same text, so
a kernel refused on the GPU path and on the CPU backend reads alike.

Example:
    >>> explain_shape_error("Incompatible shapes for matrix mul on tiles: (16, 32), (16, 16).",
    ...                     None)[0]
    'ct.mma: K differs: x is (16, 32), so K = 32, but y is (16, 16), so K = 16 (x @ y multiplies (M, K) by (K, N))'
"""
from __future__ import annotations

import ast
import re

from tilelab.limits import mma_acc_message, mma_shape_message, store_shape_message

__all__ = ["explain_shape_error"]

_SHAPE = r"(\((?:\d+,?\s*)*\))"
_MMA = re.compile(rf"Incompatible shapes for matrix mul on tiles: {_SHAPE}, {_SHAPE}")
_ACC = re.compile(rf"Expect acc shape to be {_SHAPE}, got {_SHAPE}")
_BROADCAST = re.compile(rf"Shape {_SHAPE} is not broadcastable to {_SHAPE}")


def _shape(text: str) -> tuple[int, ...]:
    return tuple(ast.literal_eval(text))


def explain_shape_error(message: str, store_param: str | None
                        ) -> tuple[str, str] | None:
    """(message, hint) for a cuTile shape refusal it recognizes, else None.
    ``store_param`` is the partition whose ``store`` the refused line makes, if any (a
    broadcast refused there is that store's tile not fitting).

    cuTile states the shapes of an ``mma`` after promoting 1-D operands to 2-D, so the
    text names those; the op is named ``ct.mma`` (``ct.matmul`` and ``@`` refuse with the
    same message).

    Example:
        >>> explain_shape_error("Shape (128,) is not broadcastable to (256,)", "z")[0]
        'z.store(tile): the tile is (128,), but z is partitioned into tiles of (256,): a store writes one whole tile of z'
        >>> explain_shape_error("Shape (128,) is not broadcastable to (256,)", None) is None
        True
    """
    m = _MMA.search(message)
    if m:
        return mma_shape_message("ct.mma", _shape(m.group(1)), _shape(m.group(2)))
    m = _ACC.search(message)
    if m:
        return mma_acc_message("ct.mma", _shape(m.group(2)), _shape(m.group(1)))
    m = _BROADCAST.search(message)
    if m and store_param is not None:
        return store_shape_message(store_param, _shape(m.group(1)), _shape(m.group(2)))
    return None
