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

The map, from the bottom (each floor imports only those below it):

- ``context`` (the running launch's state, where errors point), ``_cutile`` (the one
  module that touches cuTile's private modules), ``body_rules`` (what a reduce/scan
  combiner may not do, checked while it runs) and ``library`` (which modules' functions
  run as they are).
- ``values/``: what a kernel holds. ``dtypes``, ``rounding``, ``targets``, ``Tile``
  (``tile``), ``Array``/``TiledView``/``RawArrayMemory`` (``arrays``), and ``methods``,
  the way an op gives a value a method. No value module imports an op.
- ``ops/``: cuTile's ops on numpy, one module per family (``elementwise``, ``unary``,
  ``casts``, ``matmul``, ``reductions``, ``shapes``, ``memory``, ``elements``, ``raw``,
  ``atomics``, ``misc``...). Each attaches the methods and operators that are its ops
  (``Tile.reshape``, ``tile + 1``, ``TiledView.load``) where it defines them; importing
  ``ops`` imports them all, and this package imports ``ops``.
- ``frontend/``: what cuTile refuses before a kernel runs, read from its source
  (``entry`` runs cuTile's own front end and the rule modules beside it), and which of
  cuTile's exception classes a refusal stands for.
- ``namespace`` (the ``cuda.tile`` module kernels see: the ops by cuTile's names),
  ``device_checks``, ``rebuild`` (the kernel's functions re-created over that namespace),
  ``foreign`` (numpy views of foreign arrays), ``trace`` and ``races`` (what a run saw),
  and ``launch`` (:func:`interpret`) at the top.

Adding a cuTile op touches its op module and one line of ``namespace.IMPLEMENTATIONS``
(or, for a method, one ``@method`` in its op module): docs/interp.md, "Adding an op".
"""
from tilelab.interp import ops  # noqa: F401  (every op attaches its methods to the values)
from tilelab.interp.context import KernelNameError, register_location_map
from tilelab.interp.launch import interpret
from tilelab.interp.races import Race
from tilelab.interp.trace import Access, ArgInfo, BlockRecord, Trace
from tilelab.interp.values.tile import Tile

__all__ = ["interpret", "register_location_map", "Trace", "BlockRecord", "Access", "ArgInfo",
           "Race", "Tile", "KernelNameError"]
