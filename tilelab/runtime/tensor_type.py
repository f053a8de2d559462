"""``tl.Tensor``: a strided view of a Storage on the CPU or the GPU, and the two ways
its own methods make one: over new memory (:func:`empty`) and over memory borrowed from
another owner (:func:`wrap_memory`, :func:`from_dlpack`).

A tensor's metadata (shape, strides in elements, dtype, offset) never changes, so the
facts a launch needs (its spec, its calling-convention words, its byte range for the
alias and borrow checks) are computed once and cached. Every host access goes through
the borrow ledger first: reading memory a pending launch writes, or writing memory a
pending launch uses, raises :class:`~tilelab.errors.BorrowError` instead of racing.

The other constructors (:func:`tilelab.runtime.tensor.tensor`, ``zeros``, ``arange``,
...) build on these in :mod:`tilelab.runtime.tensor`, which re-exports this module's
names: ``tilelab.runtime.tensor.Tensor`` is the documented path.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

import numpy as np

from tilelab.compiler.dtypes import dtype_name, to_numpy_dtype
from tilelab.compiler.language import Schedule, row_major
from tilelab.compiler.signature import ArraySpec
from tilelab.compiler.signature import c_strides as _c_strides
from tilelab.errors import BorrowError, LaunchError
from tilelab.runtime import device as _dev
from tilelab.runtime import dlpack, graph_capture
from tilelab.runtime.layout import (NEGATIVE_STRIDES, OVERLAPPING, align_of, elements_overlap,
                                    hull, strided_view)
from tilelab.runtime.ledger import LEDGER
from tilelab.runtime.memory import Storage, copy_bytes, copy_bytes_async

__all__ = ["Tensor", "empty", "from_dlpack", "borrow_dlpack", "wrap_memory"]

#: CPU tensors with at most this many elements show their values in repr()
REPR_MAX_ELEMENTS = 64


class Tensor:
    """An n-d array on 'cpu' or 'cuda:0': a strided view of a :class:`Storage`.

    Make tensors with :func:`tensor`, :func:`empty`, :func:`zeros`, :func:`arange`, ...;
    slicing returns views that share memory. ``strides`` are in elements.

    Example:
        >>> import tilelab.runtime.tensor as T
        >>> t = T.arange(12, dtype="float32", device="cpu").reshape(3, 4)
        >>> v = t[1:, ::2]
        >>> v.shape, v.strides, v.is_contiguous
        ((2, 2), (4, 2), False)
    """

    __slots__ = ("_storage", "_shape", "_strides", "_dtype", "_offset", "_range", "_spec",
                 "_words", "_parts", "_layout", "__weakref__")

    def __init__(self, storage: Storage, shape: Sequence[int], strides: Sequence[int],
                 dtype: Any, offset: int = 0):
        self._storage = storage
        self._shape = tuple(int(s) for s in shape)
        self._strides = tuple(int(s) for s in strides)
        self._dtype = to_numpy_dtype(dtype)
        self._offset = int(offset)
        if len(self._shape) != len(self._strides):
            raise ValueError(f"shape {self._shape} and strides {self._strides} differ in rank")
        self._range: tuple[int, int] | None = None
        self._spec: ArraySpec | None = None
        self._words: tuple[int, ...] | None = None
        self._parts: dict | None = None
        self._layout: int | None = None

    # ---- metadata ---------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """Size of each dimension.

        Example:
            >>> import tilelab.runtime.tensor as T
            >>> T.zeros((2, 3), device="cpu").shape
            (2, 3)
        """
        return self._shape

    @property
    def strides(self) -> tuple[int, ...]:
        """Distance between neighbours along each dimension, in elements (not bytes).

        Example:
            >>> import tilelab.runtime.tensor as T
            >>> T.zeros((2, 3), device="cpu").T.strides
            (1, 3)
        """
        return self._strides

    @property
    def dtype(self) -> np.dtype:
        """Element type as a numpy dtype (bfloat16/float8 come from ml_dtypes).

        Example:
            >>> import tilelab.runtime.tensor as T
            >>> T.zeros(2, dtype="bf16", device="cpu").dtype.name
            'bfloat16'
        """
        return self._dtype

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self._shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self._shape)

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self._dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the elements (not of the whole storage)."""
        return self.size * self.itemsize

    @property
    def device(self) -> str:
        """'cpu' or 'cuda:0'.

        Example:
            >>> import tilelab.runtime.tensor as T
            >>> T.zeros(2, device="cpu").device
            'cpu'
        """
        return self._storage.device

    @property
    def storage(self) -> Storage:
        """The memory this tensor views (shared by all views of it)."""
        return self._storage

    @property
    def offset(self) -> int:
        """Position of element 0 in the storage, in elements.

        Example:
            >>> import tilelab.runtime.tensor as T
            >>> T.zeros((4, 4), device="cpu")[1:, 2:].offset
            6
        """
        return self._offset

    @property
    def data_ptr(self) -> int:
        """Absolute address of element 0 (what a kernel receives as the base pointer).

        Example:
            >>> import tilelab.runtime.tensor as T
            >>> t = T.zeros(8, dtype="float32", device="cpu")
            >>> t[2:].data_ptr - t.data_ptr
            8
        """
        return self._storage.ptr + self._offset * self._dtype.itemsize

    @property
    def is_contiguous(self) -> bool:
        """Whether the elements are dense and in row-major (C) order.

        Example:
            >>> import tilelab.runtime.tensor as T
            >>> t = T.zeros((4, 4), device="cpu")
            >>> t[1:3].is_contiguous, t[:, 1:3].is_contiguous
            (True, False)
        """
        acc = 1
        for s, st in zip(reversed(self._shape), reversed(self._strides)):
            if s == 0:
                return True
            if s != 1 and st != acc:
                return False
            acc *= s
        return True

    def byte_range(self) -> tuple[int, int]:
        """Absolute addresses [lo, hi) covering every element (empty: lo == hi).

        Exact for contiguous tensors, the smallest enclosing interval for strided ones;
        the alias and borrow checks compare these ranges.

        Example:
            >>> import tilelab.runtime.tensor as T
            >>> t = T.zeros(8, dtype="float32", device="cpu")
            >>> lo, hi = t[2:6].byte_range(); (lo - t.data_ptr, hi - t.data_ptr)
            (8, 24)
        """
        r = self._range
        if r is None:
            p = self.data_ptr
            if self.size == 0:
                r = (p, p)
            else:
                neg = sum(st * (s - 1) for s, st in zip(self._shape, self._strides) if st < 0)
                pos = sum(st * (s - 1) for s, st in zip(self._shape, self._strides) if st > 0)
                r = (p + neg * self.itemsize, p + (pos + 1) * self.itemsize)
            self._range = r
        return r

    def _layout_flags(self) -> int:
        """What a launch must refuse about this view's layout, as bits (cached):
        :data:`NEGATIVE_STRIDES`, :data:`OVERLAPPING` (its own elements share memory:
        see :func:`elements_overlap`). 0 for every ordinary tensor."""
        f = self._layout
        if f is None:
            f = 0
            if any(st < 0 for st in self._strides):
                f |= NEGATIVE_STRIDES
            if elements_overlap(self._shape, self._strides):
                f |= OVERLAPPING
            self._layout = f
        return f

    # ---- launch hot path -----------------------------------------------------------
    def __tilelab_spec__(self) -> ArraySpec:
        """What the compiler specializes on: shape, dtype, strides, base alignment.

        Example:
            >>> import tilelab.runtime.tensor as T
            >>> T.zeros((4, 8), dtype="bf16", device="cpu").__tilelab_spec__().strides
            (8, 1)
        """
        s = self._spec
        if s is None:
            s = self._spec = ArraySpec(self._shape, dtype_name(self._dtype), self._strides,
                                       align_of(self.data_ptr))
        return s

    def _launch_words(self) -> tuple[int, ...]:
        """``(data_ptr, *shape, *strides)``: this array's cutile_python_v1 arguments."""
        w = self._words
        if w is None:
            w = self._words = (self.data_ptr, *self._shape, *self._strides)
        if self._storage._freed:
            self._storage.check_alive("launching with this tensor")
        return w

    def _ledger_claim(self, exclusive: bool, param: str = "") -> tuple:
        """A ledger claim ``(space, lo, hi, exclusive, param)`` for this tensor's bytes."""
        lo, hi = self.byte_range()
        return (self._storage.space, lo, hi, exclusive, param)

    # ---- host access ------------------------------------------------------------
    def _check_host(self, write: bool, what: str) -> None:
        self._storage.check_alive(what)
        lo, hi = self.byte_range()
        LEDGER.check_host(self._storage.space, lo, hi, write=write, what=what)

    def _host_view(self) -> np.ndarray:
        """A numpy view of a CPU tensor's memory, unchecked (the interpreter's access)."""
        lo, hi = self.byte_range()
        if lo == hi:
            return np.empty(self._shape, self._dtype)
        raw = self._storage.host_bytes(lo, hi)
        return strided_view(raw, self.data_ptr - lo, self)

    def _read_hull(self) -> tuple[np.ndarray, int]:
        """A host copy of a GPU tensor's byte hull, and its lowest address."""
        lo, hi = self.byte_range()
        buf = np.empty(hi - lo, np.uint8)
        copy_bytes(buf.ctypes.data, "cpu", lo, self.device, hi - lo)
        return buf, lo

    def numpy(self) -> np.ndarray:
        """The values as a numpy array: a view sharing memory (CPU) or a copy (GPU).

        Raises BorrowError while a pending launch writes this memory.

        Example:
            >>> import tilelab.runtime.tensor as T
            >>> T.arange(4, dtype="int32", device="cpu").numpy()
            array([0, 1, 2, 3], dtype=int32)
        """
        self._check_host(False, "Tensor.numpy()")
        if self.device == "cpu":
            return self._host_view()
        if self.size == 0:
            return np.empty(self._shape, self._dtype)
        buf, lo = self._read_hull()
        return np.ascontiguousarray(strided_view(buf, self.data_ptr - lo, self))

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if copy is False and self.device != "cpu":
            raise ValueError("a GPU tensor cannot become a numpy array without a copy")
        a = self.numpy()
        if dtype is not None:
            a = a.astype(dtype, copy=False)
        return a.copy() if copy else a

    def item(self) -> Any:
        """The value of a one-element tensor as a Python scalar.

        Example:
            >>> import tilelab.runtime.tensor as T
            >>> T.full((1,), 2.5, device="cpu").item()
            2.5
        """
        if self.size != 1:
            raise ValueError(f"item() needs a tensor of one element, this one has {self.size}")
        return self.numpy().reshape(()).item()

    def copy_(self, src: Any) -> "Tensor":
        """Write ``src`` (a tensor, array or scalar, broadcast and cast) into this tensor.

        Synchronous. Raises BorrowError while a pending launch uses this memory (or
        writes ``src``'s). A source that overlaps this tensor in memory (another view of
        the same buffer) is copied as if it were read first, on both backends (on the
        GPU by the steps of :func:`~tilelab.runtime.memory.copy_plan`).

        Example:
            >>> import tilelab.runtime.tensor as T
            >>> t = T.zeros(4, dtype="float32", device="cpu")
            >>> t[1:3].copy_([5, 6]).numpy()
            array([5., 6.], dtype=float32)
        """
        if self._storage.readonly:
            raise ValueError("this tensor is read-only (it borrows read-only memory)")
        graph = graph_capture.current_graph()
        if graph is not None:
            self._check_graph_copy(src)
            graph.record_copy(self, src)
            return self
        self._check_host(True, "Tensor.copy_()")
        if not isinstance(src, (Tensor, np.ndarray, np.generic, numbers.Number, list, tuple)) \
                and (hasattr(src, "__dlpack__") or hasattr(src, "__cuda_array_interface__")):
            src = from_dlpack(src)
        if isinstance(src, Tensor):
            if (src.device != "cpu" and self.device != "cpu" and src.shape == self.shape
                    and src.dtype == self.dtype and src.is_contiguous and self.is_contiguous):
                src._check_host(False, "Tensor.copy_() source")
                copy_bytes(self.data_ptr, self.device, src.data_ptr, src.device, self.nbytes)
                return self
            src = src.numpy()
        vals = np.asarray(src)
        try:
            vals = np.broadcast_to(vals.astype(self._dtype, copy=False), self._shape)
        except ValueError:
            raise ValueError(f"cannot copy values of shape {vals.shape} into a tensor of "
                             f"shape {self._shape}") from None
        if self.device == "cpu":
            if self.size:
                self._host_view()[...] = vals
        elif self.is_contiguous:
            buf = np.ascontiguousarray(vals)
            copy_bytes(self.data_ptr, self.device, buf.ctypes.data, "cpu", self.nbytes)
        elif self.size:
            buf, lo = self._read_hull()  # read-modify-write of the covering bytes
            strided_view(buf, self.data_ptr - lo, self)[...] = vals
            copy_bytes(lo, self.device, buf.ctypes.data, "cpu", buf.nbytes)
        return self

    def _check_graph_copy(self, src: Any) -> None:
        """LaunchError unless ``copy_(src)`` can be recorded in a graph and replayed."""
        self._storage.check_alive("Tensor.copy_()")
        if not isinstance(src, Tensor):
            raise LaunchError("inside 'with tl.graph()', copy_() takes a tilelab tensor (host "
                              f"data such as {type(src).__name__} would be read only once)",
                              hint="copy host data into a tensor before the block, and copy "
                                   "that tensor inside it")
        src._storage.check_alive("Tensor.copy_() source")
        if (src.device == "cpu") != (self.device == "cpu"):
            raise LaunchError("inside 'with tl.graph()', copy_() works within one device, "
                              f"not from {src.device} to {self.device}")
        if self.device != "cpu" and not (src.shape == self.shape and src.dtype == self.dtype
                                         and src.is_contiguous and self.is_contiguous):
            raise LaunchError("inside 'with tl.graph()', GPU copies need contiguous tensors "
                              f"of one shape and dtype (got {src.shape} {src.dtype} into "
                              f"{self.shape} {self.dtype})",
                              hint="make the tensors contiguous (.contiguous()) before the "
                                   "block")

    def _copy_from_on(self, src: "Tensor", stream: Any) -> None:
        """Copy ``src`` into this tensor for a graph replay, without ledger checks (the
        replay holds the borrows): on the CPU now (``stream`` None), on the GPU enqueued on
        ``stream`` (a cuda.core Stream or GraphBuilder) without host synchronization."""
        if self.device == "cpu":
            vals = src._host_view().astype(self._dtype, copy=False)
            if self.size:
                self._host_view()[...] = np.broadcast_to(vals, self._shape)
            return
        copy_bytes_async(self.data_ptr, src.data_ptr, self.nbytes, stream)

    def __setitem__(self, key: Any, value: Any) -> None:
        self[key].copy_(value)

    def to(self, device: Any) -> "Tensor":
        """This tensor on ``device`` ('cpu', 'gpu', 'cuda', 'cuda:0'): itself if already
        there, else a contiguous copy.

        Example:
            >>> import tilelab.runtime.tensor as T
            >>> t = T.zeros(3, device="cpu"); t.to("cpu") is t
            True
        """
        target = _dev.parse_device(device)
        if target == self.device:
            return self
        out = empty(self._shape, self._dtype, target)
        return out.copy_(self)

    def clone(self) -> "Tensor":
        """A contiguous copy on the same device.

        Example:
            >>> import tilelab.runtime.tensor as T
            >>> t = T.ones(3, device="cpu"); c = t.clone(); c.data_ptr != t.data_ptr
            True
        """
        return empty(self._shape, self._dtype, self.device).copy_(self)

    def contiguous(self) -> "Tensor":
        """Itself when contiguous, else a contiguous copy (:meth:`clone`).

        Example:
            >>> import tilelab.runtime.tensor as T
            >>> T.zeros((4, 4), device="cpu").T.contiguous().is_contiguous
            True
        """
        return self if self.is_contiguous else self.clone()

    def astype(self, dtype: Any) -> "Tensor":
        """A copy converted to ``dtype`` (rounding to nearest for bf16/fp8).

        Example:
            >>> import tilelab.runtime.tensor as T
            >>> T.arange(3, device="cpu").astype("bf16").dtype.name
            'bfloat16'
        """
        return empty(self._shape, dtype, self.device).copy_(self)

    def free(self) -> None:
        """Release this tensor's storage now (every view of it becomes unusable).

        Raises BorrowError while a pending launch uses it; freeing twice is a ValueError.

        Example:
            >>> import tilelab.runtime.tensor as T
            >>> t = T.empty(1024, device="cpu"); t.free(); t.storage.freed
            True
        """
        self._storage.free()

    # ---- views ------------------------------------------------------------------
    def _view(self, shape: Sequence[int], strides: Sequence[int], offset: int) -> "Tensor":
        return Tensor(self._storage, shape, strides, self._dtype, offset)

    def __getitem__(self, key: Any) -> "Tensor":
        if not isinstance(key, tuple):
            key = (key,)
        n_ellipsis = sum(k is Ellipsis for k in key)
        if n_ellipsis > 1:
            raise IndexError("an index can only have one ellipsis ('...')")
        n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
        if n_real > self.ndim:
            raise IndexError(f"too many indices: {n_real} for a tensor of {self.ndim} "
                             "dimensions")
        fill = (slice(None),) * (self.ndim - n_real)
        if n_ellipsis:
            i = next(i for i, k in enumerate(key) if k is Ellipsis)
            key = key[:i] + fill + key[i + 1:]
        else:
            key = key + fill
        shape, strides, offset, d = [], [], self._offset, 0
        for k in key:
            if k is None:
                shape.append(1)
                strides.append(0)
                continue
            n, st = self._shape[d], self._strides[d]
            if isinstance(k, slice):
                start, stop, step = k.indices(n)  # raises ValueError for step 0
                length = len(range(start, stop, step))
                if length:
                    offset += start * st
                shape.append(length)
                strides.append(st * step)
            elif isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)):
                i = int(k)
                if not -n <= i < n:
                    raise IndexError(f"index {i} is out of range for dimension {d} of size "
                                     f"{n}")
                offset += (i % n) * st
            else:
                raise TypeError(f"tensors are indexed by ints, slices, '...' and None, not "
                                f"{type(k).__name__}; for gathers use t.numpy()[...]")
            d += 1
        return self._view(shape, strides, offset)

    def reshape(self, *shape: Any) -> "Tensor":
        """The same elements in a new shape (a view; contiguous tensors only; one -1).

        Example:
            >>> import tilelab.runtime.tensor as T
            >>> T.arange(6, device="cpu").reshape(2, -1).shape
            (2, 3)
        """
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = tuple(shape[0])
        shape = tuple(int(s) for s in shape)
        if shape.count(-1) > 1:
            raise ValueError("reshape: only one dimension can be -1")
        if any(s < -1 for s in shape):
            raise ValueError(f"reshape: negative dimension in {shape}")
        known = math.prod(s for s in shape if s != -1)
        if -1 in shape:
            if known == 0 or self.size % known:
                raise ValueError(f"cannot reshape {self._shape} ({self.size} elements) to "
                                 f"{shape}")
            shape = tuple(self.size // known if s == -1 else s for s in shape)
        if math.prod(shape) != self.size:
            raise ValueError(f"cannot reshape {self._shape} ({self.size} elements) to {shape}")
        if not self.is_contiguous:
            raise ValueError(f"reshape of a non-contiguous view (strides {self._strides}); "
                             "call .contiguous() first (it copies)")
        return self._view(shape, _c_strides(shape), self._offset)

    def permute(self, *dims: int) -> "Tensor":
        """A view with the dimensions reordered.

        Example:
            >>> import tilelab.runtime.tensor as T
            >>> T.zeros((2, 3, 4), device="cpu").permute(2, 0, 1).shape
            (4, 2, 3)
        """
        if len(dims) == 1 and not isinstance(dims[0], (int, np.integer)):
            dims = tuple(dims[0])
        dims = tuple(int(d) % self.ndim if self.ndim else int(d) for d in dims)
        if sorted(dims) != list(range(self.ndim)):
            raise ValueError(f"permute{dims} is not a permutation of {self.ndim} dimensions")
        return self._view([self._shape[d] for d in dims], [self._strides[d] for d in dims],
                          self._offset)

    def transpose(self, dim0: int = -2, dim1: int = -1) -> "Tensor":
        """A view with two dimensions swapped (the last two by default).

        Example:
            >>> import tilelab.runtime.tensor as T
            >>> T.zeros((2, 3), device="cpu").transpose().strides
            (1, 3)
        """
        if self.ndim < 2:
            return self
        dims = list(range(self.ndim))
        dims[dim0], dims[dim1] = dims[dim1], dims[dim0]
        return self.permute(*dims)

    @property
    def T(self) -> "Tensor":
        """All dimensions reversed (a view), like numpy's ``.T``.

        Example:
            >>> import tilelab.runtime.tensor as T
            >>> T.zeros((2, 3), device="cpu").T.shape
            (3, 2)
        """
        return self.permute(*reversed(range(self.ndim)))

    def partition(self, tile_shape: int | Sequence[int],
                  schedule: Schedule = row_major) -> Any:
        """Split into disjoint tiles for a ``tl.Out``/``tl.InOut`` parameter.

        Example:
            >>> import tilelab.runtime.tensor as T
            >>> T.empty((300, 200), device="cpu").partition((128, 64)).grid
            (3, 4)
        """
        from tilelab.runtime.partition import Partition

        # Partitions are immutable: hand back the same object for the same split, so
        # that repeated launches with an inline t.partition(...) hit the launch cache.
        key = (tile_shape if not isinstance(tile_shape, list) else tuple(tile_shape), schedule)
        parts = self._parts
        if parts is None:
            parts = self._parts = {}
        p = parts.get(key)
        if p is None:
            p = parts[key] = Partition(self, tile_shape, schedule)
        return p

    # ---- interop ----------------------------------------------------------------
    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None,
                   copy: bool | None = None) -> Any:
        return dlpack.to_dlpack(self, stream=stream, max_version=max_version,
                                dl_device=dl_device, copy=copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        return dlpack.dlpack_device(self)

    @property
    def __cuda_array_interface__(self) -> dict:
        return dlpack.cuda_array_interface(self)

    # ---- Python protocol -----------------------------------------------------------
    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError(f"the truth value of a tensor of {self.size} elements is "
                             "ambiguous")
        return bool(self.item())

    def __repr__(self) -> str:
        head = f"shape={self._shape}, dtype={self._dtype.name}, device={self.device}"
        if self._storage.freed:
            return f"<tl.Tensor {head}, freed>"
        if self.device == "cpu" and self.size <= REPR_MAX_ELEMENTS:
            try:
                self._check_host(False, "repr")
            except BorrowError as e:
                return f"<tl.Tensor {head}, pending: {e.message}>"
            body = np.array2string(self._host_view(), separator=", ", prefix="tl.tensor(")
            return f"tl.tensor({body}, dtype={self._dtype.name}, device=cpu)"
        return f"<tl.Tensor {head}>"


# ---- the tensors a tensor's own methods make ----------------------------------------
def _shape_of(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, (bool, np.bool_)):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise TypeError(f"shape must be an int or a sequence of ints, got {shape!r}") from None
    for s in dims:
        if not isinstance(s, (int, np.integer)) or isinstance(s, (bool, np.bool_)):
            raise TypeError(f"shape {shape!r}: dimensions must be ints, got {s!r}")
        if s < 0:
            raise ValueError(f"shape {tuple(int(d) for d in dims)} has a negative dimension")
    return tuple(int(s) for s in dims)


def _new(shape: tuple[int, ...], dtype: np.dtype, device: str) -> Tensor:
    storage = Storage.allocate(math.prod(shape) * dtype.itemsize, device,
                               what=f"a new {shape} {dtype.name} tensor on {device}")
    return Tensor(storage, shape, _c_strides(shape), dtype)


def empty(shape: Any, dtype: Any = "float32", device: Any = None) -> Tensor:
    """A new contiguous tensor with unspecified contents.

    Example:
        >>> import tilelab as tl
        >>> tl.empty((2, 3), dtype="bf16", device="cpu").shape
        (2, 3)
    """
    return _new(_shape_of(shape), to_numpy_dtype(dtype), _dev.parse_device(device))


def from_dlpack(obj: Any) -> Tensor:
    """A tensor borrowing ``obj``'s memory on its own device, zero copy.

    ``obj`` implements ``__dlpack__`` (torch, cupy, jax, numpy), only
    ``__cuda_array_interface__`` (numba), or is a DLPack capsule.

    Example:
        >>> import numpy as np, tilelab as tl
        >>> tl.from_dlpack(np.ones(3, np.float32)).device
        'cpu'
    """
    return borrow_dlpack(obj)


def borrow_dlpack(obj: Any, stream: int | None = None) -> Tensor:
    """:func:`from_dlpack` with the DLPack ``stream`` the producer is asked to order its
    pending work before (see :func:`tilelab.runtime.dlpack.consume`; -1: none, for
    launches on the producer's own stream). A tensor is returned as it is.

    Example:
        >>> import numpy as np
        >>> a = np.arange(4, dtype=np.float32)
        >>> t = borrow_dlpack(a); a[0] = 7; float(t.numpy()[0])
        7.0
    """
    if isinstance(obj, Tensor):
        return obj
    return wrap_memory(*dlpack.consume(obj, stream))


def wrap_memory(ptr: int, shape: tuple[int, ...], strides: tuple[int, ...] | None,
                dtype: np.dtype, device: str, owner: Any, readonly: bool = False) -> Tensor:
    """A tensor over foreign memory at ``ptr`` (element 0; ``strides`` in elements, None:
    C order), borrowing it from ``owner``, which the tensor keeps alive (the fields of
    a :class:`~tilelab.runtime.dlpack.ForeignMemory`, in order).

    Example:
        >>> import numpy as np
        >>> a = np.arange(6, dtype=np.float32)
        >>> wrap_memory(a.ctypes.data, (2, 3), None, a.dtype, "cpu", a).numpy()[1]
        array([3., 4., 5.], dtype=float32)
    """
    shape = tuple(int(s) for s in shape)
    strides = _c_strides(shape) if strides is None else tuple(int(s) for s in strides)
    lo, hi = hull(int(ptr), shape, strides, dtype.itemsize)
    storage = Storage.borrow(lo, hi - lo, device, owner, readonly)
    return Tensor(storage, shape, strides, dtype, (int(ptr) - lo) // dtype.itemsize)
