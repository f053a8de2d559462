"""The interpreter's values, the bottom of ``tilelab.interp``: what a kernel holds.

``dtypes`` (cuTile's data types, categories and promotion), ``rounding`` (correctly rounded
conversions between them), ``targets`` (which dtypes the GPU a launch stands for computes
with), ``tile`` (:class:`~tilelab.interp.values.tile.Tile`, an immutable numpy array with a
dtype) and ``arrays`` (``Array``, ``TiledView``, ``RawArrayMemory``, ``Slice``: kernel-side
views of global memory).

These modules import no op module: the op modules of :mod:`tilelab.interp.ops` attach the
methods and operators that are ops (``Tile.reshape``, ``tile + 1``, ``TiledView.load``) where
they define the op.
"""
