"""cuTile's ops on numpy, one module per family, above the values they compute with.

``elementwise`` (binary arithmetic, bitwise, comparisons, ``where``), ``unary`` (math
functions, negation, ``isnan``), ``casts`` (``astype``, ``bitcast``, ``ct.int16(2)``),
``matmul`` (``mma``, ``@``, ``mma_scaled``), ``reductions`` (reductions and scans),
``shapes`` (reshape, permute, cat, extract/insert, the tile factories), the memory ops
``memory`` (``ct.load``/``ct.store`` and tiled views), ``elements`` (gather, scatter,
advanced indexing), ``raw`` (``RawArrayMemory``), ``atomics``, with ``memory_args`` (the
argument checks they share), and ``misc`` (block ids, printing, assertions, the static
helpers) with ``static_python`` (``static_assert`` conditions as Python).

Each op module attaches the methods and operators of the values that are its ops
(``Tile.reshape`` in ``shapes``, ``tile + 1`` in ``elementwise``, ``TiledView.load`` in
``memory``) when it is imported (:mod:`tilelab.interp.values.methods`), so this package
imports all of them: importing any op imports every op, and every method exists.
"""
from tilelab.interp.ops import (atomics, casts, elements, elementwise, matmul, memory,
                                memory_args, misc, raw, reductions, shapes, static_python,
                                unary)

__all__ = ["atomics", "casts", "elements", "elementwise", "matmul", "memory", "memory_args",
           "misc", "raw", "reductions", "shapes", "static_python", "unary"]
