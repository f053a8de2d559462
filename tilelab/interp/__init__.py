"""tilelab.interp: the CPU backend, a numpy interpreter for cuTile Python kernels.

It runs unmodified ``@ct.kernel`` functions (and the cuTile Python that tilelab's compiler
produces) block by block, with cuTile's typing and numerics, records what every block
reads and writes, and finds inter-block data races.

Example:
    >>> import numpy as np, cuda.tile as ct
    >>> from tilelab.interp import interpret
    >>> @ct.kernel
    ... def double(x, TILE: ct.Constant[int]):
    ...     t = ct.load(x, (ct.bid(0),), (TILE,))
    ...     ct.store(x, (ct.bid(0),), t * 2)
    >>> x = np.arange(8, dtype=np.int32)
    >>> trace = interpret(double, x, 4, grid=(2,))
    >>> x.tolist(), trace.has_races
    ([0, 2, 4, 6, 8, 10, 12, 14], False)
"""
from tilelab.interp.context import KernelNameError, register_location_map
from tilelab.interp.launch import interpret
from tilelab.interp.races import Race
from tilelab.interp.trace import Access, ArgInfo, BlockRecord, Trace
from tilelab.interp.values.tile import Tile

__all__ = ["interpret", "register_location_map", "Trace", "BlockRecord", "Access", "ArgInfo",
           "Race", "Tile", "KernelNameError"]
