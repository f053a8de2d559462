"""Kernel-side views of global arrays: ``Array``, ``TiledView`` and ``Slice``.

An :class:`Array` wraps a numpy view of the caller's array, so stores land in place even
for strided, non-contiguous arrays. It remembers which kernel argument it views and where
its origin lies in that argument (``Array.slice`` shifts it), so every access is recorded
in the argument's own index space, which is what the ownership diagrams need (the race
detector then places the argument in memory). ``Array.get_raw_memory()`` gives a
:class:`RawArrayMemory`: loads, stores and atomics at element offsets from the array's
base pointer over the flat buffer of its allocation, bounds-checked against it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tilelab.interp.context import active, compile_error, current_location, unsupported
from tilelab.interp.values.dtypes import INT32, TileDType
from tilelab.interp.values.targets import array_dtype_error, supported
from tilelab.interp.values.tile import Tile

__all__ = ["ArgRoot", "Array", "UnsupportedArray", "TiledView", "Slice", "RawArrayMemory",
           "index_value"]


@dataclass
class ArgRoot:
    """A kernel array argument: its name, the caller's numpy array and its annotations."""

    name: str
    data: np.ndarray
    dtype: TileDType
    index_dtype: TileDType = INT32
    static_shape: tuple[bool, ...] = ()
    static_strides: tuple[bool, ...] = ()
    _flat: Any = None  # (flat element view of the allocation, its start address)

    def allocation(self) -> tuple[np.ndarray, int]:
        """The allocation the argument lies in as a flat array of its dtype, and the
        address of its element 0 (for raw-memory access; built once)."""
        if self._flat is None:
            from tilelab.interp.races import allocation_bounds
            data = self.data
            lo, hi = allocation_bounds(data)
            b = data
            while isinstance(b.base, np.ndarray):
                b = b.base
            if b.size == 0 or hi <= lo:
                self._flat = (np.empty(0, data.dtype), lo)
                return self._flat
            first = b.reshape(1) if b.ndim == 0 else \
                b[tuple(slice(n - 1, n) if st < 0 else slice(0, 1)
                        for n, st in zip(b.shape, b.strides))]
            start = first.__array_interface__["data"][0]   # == lo
            raw = np.lib.stride_tricks.as_strided(first.reshape(-1).view(np.uint8),
                                                  shape=(hi - start,), strides=(1,))
            size = data.itemsize
            skew = (data.__array_interface__["data"][0] - start) % size
            n = (raw.size - skew) // size
            flat = raw[skew:skew + n * size].view(data.dtype)
            self._flat = (flat, start + skew)
        return self._flat


def index_value(x: Any, what: str, *, signed: bool = True) -> int:
    """A scalar integer index (Python int or 0-d integer tile) as a Python int."""
    if isinstance(x, Tile):
        if x.ndim != 0 or x._dt.kind not in "iu" or (signed and x._dt.kind != "i"):
            kind = "signed integer" if signed else "integer"
            raise compile_error(f"{what}: Expected a {kind} scalar, but given value has type "
                                f"{x._dt}{x.shape}")
        return int(x._v)
    if isinstance(x, float) and signed:   # a float constant: cuTile names its type
        raise compile_error(f"{what}: Expected a signed integer scalar, but got "
                            f"Tile[float32,()]")
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise compile_error(f"{what}: Expected an integer scalar, got {x!r}")
    return int(x)


class Array:
    """A global array as seen inside a kernel (``x.shape``, ``x.dtype``, ``x.slice``...).

    ``shape`` and ``strides`` are tuples of int32 scalars (run-time values, as in cuTile;
    dimensions annotated with ``ArrayAnnotation(static_shape_dims=...)`` are Python ints,
    and so is the extent of an axis that ``slice`` cut with constant bounds).
    """

    __slots__ = ("_root", "_data", "_origin", "_static")

    def __init__(self, root: ArgRoot, data: np.ndarray, origin: tuple[int, ...],
                 static: tuple[bool, ...] | None = None):
        self._root = root
        self._data = data
        self._origin = origin
        # which dimensions have a compile-time extent (the argument's annotation, then
        # what slices with constant bounds made static)
        self._static = root.static_shape if static is None else static
        if root.dtype.min_sm and not supported(root.dtype):   # fp8 before sm_90
            self.__class__ = UnsupportedArray

    @property
    def dtype(self) -> TileDType:
        """The element dtype (a compile-time constant)."""
        return self._root.dtype

    @property
    def ndim(self) -> int:
        """Number of dimensions (a compile-time constant)."""
        return _DATA.__get__(self).ndim

    def _index_tuple(self, values: tuple[int, ...], static: tuple[bool, ...]) -> tuple:
        idt = self._root.index_dtype
        return tuple(v if i < len(static) and static[i] else
                     Tile(np.asarray(v, dtype=idt.storage), idt) for i, v in enumerate(values))

    @property
    def shape(self) -> tuple:
        """Dimensions as int32 scalars (Python ints for static dimensions)."""
        return self._index_tuple(_DATA.__get__(self).shape, self._static)

    @property
    def strides(self) -> tuple:
        """Strides in elements as int32 scalars (Python ints for static strides)."""
        data = _DATA.__get__(self)
        return self._index_tuple(tuple(s // data.itemsize for s in data.strides),
                                 self._root.static_strides)

    # (``slice`` and ``tiled_view`` are attached by tilelab.interp.ops.memory: see
    # tilelab.interp.values.methods)

    @property
    def foreign_pointer(self) -> Any:
        raise unsupported("Array.foreign_pointer", "the CPU interpreter has no device pointers")

    @staticmethod
    def from_foreign(pointer: Any, shape: Any, strides: Any) -> "Array":
        raise unsupported("Array.from_foreign", "the CPU interpreter has no device pointers")

    def get_raw_memory(self) -> "RawArrayMemory":
        """Loads, stores and atomics by element offset from this array's base pointer."""
        return RawArrayMemory(self)

    def __getitem__(self, key: Any) -> Any:
        raise compile_error("Arrays are not directly subscriptable. Use load() or gather() "
                            "instead.")

    def __setitem__(self, key: Any, value: Any) -> None:
        raise compile_error("Arrays do not support item assignment. Use store() or scatter() "
                            "instead.")

    def __repr__(self) -> str:
        shape = _DATA.__get__(self).shape
        if active() is not None:   # inside a kernel: cuTile's type, dynamic extents as ?
            dims = [str(n) if i < len(self._static) and self._static[i] else "?"
                    for i, n in enumerate(shape)]
            inner = f"{dims[0]}," if len(dims) == 1 else ", ".join(dims)
            return f"<array[{self.dtype}, ({inner})]>"
        return f"Array[{self.dtype}, {shape}]({self._root.name})"

    # ---- element access used by the memory ops -------------------------------------------------
    def trace(self, kind: str, op: str, region: Any, count: int) -> None:
        """Record an access; ``region`` is a box (in this view) or per-dim index arrays."""
        state = active()
        if state is None or state.tracer is None or count == 0:
            return
        root = self._root
        if isinstance(region, tuple) and region and isinstance(region[0], tuple):
            reg = tuple((o + a, o + b) for o, (a, b) in zip(self._origin, region))
        elif isinstance(region, tuple) and not region:
            reg = ()
        else:
            coords = tuple(np.asarray(c, np.int64) + o for c, o in zip(region, self._origin))
            reg = np.ravel_multi_index(coords, root.data.shape) if coords else \
                np.zeros(count, np.int64)
        state.tracer.record(root.name, root.data.shape, root.dtype.itemsize, kind, op, reg,
                            count, current_location())

    def root_indices(self, coords: tuple) -> np.ndarray:
        """Flat C-order indices in the argument of per-dimension coordinates of this view."""
        root = self._root
        if not coords:
            return np.zeros(1, np.int64)
        shifted = tuple(np.asarray(c, np.int64) + o for c, o in zip(coords, self._origin))
        return np.ravel_multi_index(shifted, root.data.shape).astype(np.int64)

    def sync(self, kind: str, coords: tuple) -> None:
        """A lock event (``"acquire"``/``"release"``) of the elements at ``coords``."""
        state = active()
        if state is None or state.tracer is None or state.tracer.detector is None:
            return
        state.tracer.sync(self._root.name, kind, region=self.root_indices(coords))

    def raw_shift(self) -> int:
        """Element offset of this view's base from the argument's element 0."""
        root = self._root
        delta = self._data.__array_interface__["data"][0] - \
            root.data.__array_interface__["data"][0]
        return delta // max(1, root.data.itemsize)

    def trace_raw(self, kind: str, op: str, offsets: np.ndarray) -> None:
        """Record a raw-memory access at element ``offsets`` from this view's base."""
        state = active()
        if state is None or state.tracer is None or offsets.size == 0:
            return
        from tilelab.interp.races import raw_offsets_to_indices
        root = self._root
        rel = np.asarray(offsets, np.int64).reshape(-1) + self.raw_shift()
        idx, _hit = raw_offsets_to_indices(root.data.shape, root.data.strides,
                                           root.data.itemsize, rel)
        state.tracer.record(root.name, root.data.shape, root.dtype.itemsize, kind, op, idx,
                            int(rel.size), current_location(), offsets=rel)

    def sync_raw(self, kind: str, offsets: np.ndarray) -> None:
        state = active()
        if state is None or state.tracer is None or state.tracer.detector is None:
            return
        rel = np.asarray(offsets, np.int64).reshape(-1) + self.raw_shift()
        state.tracer.sync(self._root.name, kind, offsets=rel)


#: the slot that holds an array's numpy view, read past :class:`UnsupportedArray`'s
#: guard for what cuTile compiles on every target (shape, strides, rank)
_DATA = Array.__dict__["_data"]


class UnsupportedArray(Array):
    """An array argument of a dtype that the launch's target does not compute with (a
    float8 array for sm_80): its ``shape``, ``strides``, ``ndim`` and ``dtype`` are
    read as for any array, but a load, store, gather, atomic, ``num_tiles``, slice or
    raw access raises cuTile's refusal at that op's kernel line, as compiling for the
    target does (see :mod:`tilelab.interp.values.targets`)."""

    __slots__ = ()

    @property
    def _data(self) -> np.ndarray:
        raise array_dtype_error(self._root.dtype, self._root.name)

    @_data.setter
    def _data(self, data: np.ndarray) -> None:
        _DATA.__set__(self, data)

    def get_raw_memory(self) -> "RawArrayMemory":
        raise array_dtype_error(self._root.dtype, self._root.name)


class TiledView:
    """An array partitioned into tiles: ``load``/``store``/``atomic_store_*`` by tile index.

    Consecutive tiles start ``traversal_steps`` elements apart (``tile_shape`` by default).
    """

    __slots__ = ("_array", "_tile_shape", "_padding", "_steps")

    def __init__(self, array: Array, tile_shape: tuple[int, ...], padding: Any,
                 steps: tuple[int, ...]):
        self._array = array
        self._tile_shape = tile_shape
        self._padding = padding
        self._steps = steps

    @property
    def dtype(self) -> TileDType:
        return self._array.dtype

    @property
    def tile_shape(self) -> tuple[int, ...]:
        return self._tile_shape

    @property
    def traversal_steps(self) -> tuple[int, ...]:
        return self._steps

    # (``num_tiles``, ``load`` and ``store`` are attached by tilelab.interp.ops.memory,
    # the ``atomic_store_*`` by tilelab.interp.ops.atomics)

    def __repr__(self) -> str:
        return f"TiledView[{self.dtype}, tile {self._tile_shape}]({self._array._root.name})"


class RawArrayMemory:
    """``Array.get_raw_memory()``: element-offset access from the array's base pointer.

    Offsets ignore the array's shape and strides: offset ``k`` is the element ``k`` item
    sizes after element 0, anywhere in the allocation the array lies in (for a view of a
    larger numpy array, that array's memory). An active lane outside the allocation is a
    LaunchError at the kernel line (undefined behaviour on the GPU). Accesses are traced
    and race-checked on their addresses.
    """

    __slots__ = ("_array",)

    def __init__(self, array: Array):
        self._array = array

    @property
    def dtype(self) -> TileDType:
        """The element dtype (a compile-time constant)."""
        return self._array.dtype

    # (``load_offset``, ``store_offset`` and the ``atomic_*_offset`` methods are attached by
    # tilelab.interp.ops.raw)

    def __repr__(self) -> str:
        return f"RawArrayMemory[{self.dtype}]({self._array._root.name})"


class Slice:
    """``ct.Slice(start, length)``: a dense dimension of ``load/store_advanced_indexing``."""

    __slots__ = ("start", "length")

    def __init__(self, start: Any, length: Any, /):
        index_value(start, "ct.Slice start")
        index_value(length, "ct.Slice length")
        self.start = start
        self.length = length

    def __repr__(self) -> str:
        return f"Slice({self.start}, {self.length})"
