"""Storage: the bytes behind tensors, owned or borrowed, on the host or the GPU.

A :class:`Storage` is one contiguous byte range in one memory *space* (``("cpu",)`` or
``("cuda", 0)``). The borrow ledger keys borrows by space and absolute address range, so
two wrappers of the same memory (a tensor and its DLPack import, say) conflict as they
should. Owned GPU memory comes from cuda.core's stream-ordered allocator on tilelab's
stream, never from managed memory. Borrowed memory keeps its producer alive.

Copies that touch the host are synchronous: when they return, the data is in place.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tilelab.runtime import capture
from tilelab.runtime import device as _dev
from tilelab.runtime.ledger import LEDGER

__all__ = ["HOST_SPACE", "HOST_ALIGN", "Storage", "copy_bytes", "copy_bytes_async",
           "memset_zero"]

#: the memory space of host (CPU) memory
HOST_SPACE: tuple = ("cpu",)
#: alignment tilelab gives host allocations, in bytes
HOST_ALIGN = 64


#: bumped by every Storage.free(): a prepared launch made before a free re-validates
FREE_EPOCH = [0]


def _cuda_space(device_id: int = 0) -> tuple:
    return ("cuda", int(device_id))


class _HostSpan:
    """A numpy-consumable view of raw host bytes that keeps their owner alive."""

    __slots__ = ("__array_interface__", "_keep")

    def __init__(self, ptr: int, nbytes: int, readonly: bool, keep: Any):
        self.__array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                    "data": (ptr, readonly), "version": 3}
        self._keep = keep


class Storage:
    """One contiguous block of memory that tensors view.

    Make one with :meth:`allocate` (owned) or :meth:`borrow` (foreign memory, kept alive
    through ``owner``). ``free()`` releases it early; pending launches that use it make
    that a :class:`~tilelab.errors.BorrowError`.

    Attributes:
        ptr: absolute base address. nbytes: size in bytes. device: 'cpu' or 'cuda:0'.
        space: the ledger's memory-space key, ``("cpu",)`` or ``("cuda", 0)``.
        readonly: whether the memory may not be written (read-only foreign arrays).
        borrowed: whether the memory belongs to a foreign producer.
        copied_from: None, or what :func:`tilelab.tensor` copied into this memory
            because it could not share it (a launch refuses to write such a copy).
        stream: None, or the foreign framework's stream that a launch using this
            memory runs on when it names none (see :mod:`tilelab.runtime.foreign`).

    Example:
        >>> s = Storage.allocate(256, "cpu")
        >>> s.nbytes, s.space, s.ptr % HOST_ALIGN
        (256, ('cpu',), 0)
        >>> s.free()
    """

    __slots__ = ("ptr", "nbytes", "space", "device", "readonly", "borrowed", "copied_from",
                 "stream", "_buffer", "_host", "_owner", "_freed", "__weakref__")

    def __init__(self, ptr: int, nbytes: int, device: str, *, buffer: Any = None,
                 host: np.ndarray | None = None, owner: Any = None, readonly: bool = False,
                 borrowed: bool = False):
        self.ptr = int(ptr)
        self.nbytes = int(nbytes)
        self.device = device
        self.space = HOST_SPACE if device == "cpu" else _cuda_space(int(device.split(":")[1]))
        self.readonly = readonly
        self.borrowed = borrowed
        self.copied_from: str | None = None
        self.stream: Any = None
        self._buffer = buffer      # cuda.core Buffer (owned device memory)
        self._host = host          # numpy uint8 array (owned host memory)
        self._owner = owner        # foreign producer (borrowed memory)
        self._freed = False

    # ---- construction -----------------------------------------------------------
    @classmethod
    def allocate(cls, nbytes: int, device: str, what: str = "this allocation") -> "Storage":
        """Allocate ``nbytes`` on 'cpu' (64-byte aligned) or 'cuda:0' (stream-ordered).

        Refused inside ``with tl.graph()`` (a replay would not allocate again); ``what``
        names the allocation in that error.

        Example:
            >>> Storage.allocate(16, "cpu").device
            'cpu'
        """
        nbytes = int(nbytes)
        if nbytes < 0:
            raise ValueError(f"cannot allocate {nbytes} bytes")
        capture.forbid_allocation(what)
        if device == "cpu":
            raw = np.empty(max(nbytes, 1) + HOST_ALIGN, dtype=np.uint8)
            base = raw.__array_interface__["data"][0]
            start = (-base) % HOST_ALIGN
            host = raw[start:start + max(nbytes, 1)]
            return cls(base + start, nbytes, "cpu", host=host)
        g = _dev.gpu()
        try:
            buf = g.device.allocate(max(nbytes, 1), stream=g.stream)
        except Exception as e:
            from tilelab.errors import LaunchError

            raise LaunchError(f"allocating {nbytes} bytes on {device} failed: {e}",
                              hint="free tensors you no longer need (t.free()) or use "
                                   "smaller shapes") from e
        return cls(int(buf.handle), nbytes, device, buffer=buf)

    @classmethod
    def borrow(cls, ptr: int, nbytes: int, device: str, owner: Any,
               readonly: bool = False) -> "Storage":
        """Wrap foreign memory without copying; ``owner`` is kept alive meanwhile.

        Example:
            >>> import numpy as np
            >>> a = np.zeros(4, np.float32)
            >>> s = Storage.borrow(a.ctypes.data, a.nbytes, "cpu", owner=a)
            >>> s.borrowed, s.nbytes
            (True, 16)
        """
        return cls(ptr, nbytes, device, owner=owner, readonly=readonly, borrowed=True)

    # ---- state ------------------------------------------------------------------
    @property
    def freed(self) -> bool:
        """Whether :meth:`free` was called.

        Example:
            >>> Storage.allocate(8, "cpu").freed
            False
        """
        return self._freed

    def check_alive(self, what: str = "this tensor") -> None:
        """Raise ValueError if the storage was freed (use after free).

        Example:
            >>> s = Storage.allocate(8, "cpu"); s.free()
            >>> s.check_alive("t.numpy()")
            Traceback (most recent call last):
            ...
            ValueError: t.numpy(): its memory was freed with .free(); create a new tensor instead
        """
        if self._freed:
            raise ValueError(f"{what}: its memory was freed with .free(); create a new "
                             "tensor instead")

    def free(self) -> None:
        """Release the memory now (owned) or drop the reference to the producer (borrowed).

        Raises BorrowError if a pending launch still uses any of it, ValueError if it was
        already freed. Memory the GPU still reads is released stream-ordered, so it is
        never reused under a running kernel.

        Example:
            >>> s = Storage.allocate(64, "cpu"); s.free(); s.freed
            True
        """
        if self._freed:
            raise ValueError(f"this {self.device} memory was already freed (freeing twice "
                             "is an error)")
        with LEDGER._lock:   # (a CPU launch checks and registers under it: see Ledger.begin)
            LEDGER.check_host(self.space, self.ptr, self.ptr + max(self.nbytes, 1),
                              write=True,
                              what=f"freeing {self.nbytes} bytes of {self.device} memory")
            self._freed = True
            FREE_EPOCH[0] += 1  # prepared launches re-check their tensors after any free
        buf, self._buffer = self._buffer, None
        self._host = None
        self._owner = None
        if buf is not None:
            g = _dev.gpu()
            buf.close(g.stream)

    # ---- host access ------------------------------------------------------------
    def host_bytes(self, lo: int, hi: int) -> np.ndarray:
        """A uint8 numpy view of host bytes [lo, hi) (absolute addresses), unchecked.

        The view keeps the memory alive even if the storage is freed later.

        Example:
            >>> s = Storage.allocate(8, "cpu")
            >>> s.host_bytes(s.ptr, s.ptr + 8).shape
            (8,)
        """
        self.check_alive()
        if self.device != "cpu":
            raise ValueError("host_bytes() of device memory; copy it to the host first")
        if not (self.ptr <= lo <= hi <= self.ptr + max(self.nbytes, 1)):
            raise ValueError(f"byte range [{lo:#x}, {hi:#x}) lies outside this storage "
                             f"[{self.ptr:#x}, {self.ptr + self.nbytes:#x})")
        if hi == lo:
            return np.empty(0, np.uint8)
        keep = (self, self._host if self._host is not None else self._owner)
        return np.asarray(_HostSpan(lo, hi - lo, self.readonly, keep))

    def __repr__(self) -> str:
        kind = "borrowed" if self.borrowed else "owned"
        state = ", freed" if self._freed else ""
        return f"<tl.Storage {self.nbytes} bytes on {self.device} at {self.ptr:#x} ({kind}{state})>"


def copy_bytes(dst_ptr: int, dst_device: str, src_ptr: int, src_device: str,
               nbytes: int) -> None:
    """Copy ``nbytes`` between two addresses on 'cpu'/'cuda:0', synchronously.

    Host-to-host is a numpy copy; any copy that touches the GPU goes through the CUDA
    driver on tilelab's stream (every CUresult checked) and waits for completion.

    Example:
        >>> import numpy as np
        >>> a, b = np.arange(4, dtype=np.uint8), np.zeros(4, np.uint8)
        >>> copy_bytes(b.ctypes.data, "cpu", a.ctypes.data, "cpu", 4); b
        array([0, 1, 2, 3], dtype=uint8)
    """
    if nbytes <= 0:
        return
    if dst_device == "cpu" and src_device == "cpu":
        import ctypes

        ctypes.memmove(dst_ptr, src_ptr, nbytes)
        return
    from cuda.bindings import driver

    g = _dev.gpu()
    s = g.stream_handle
    if dst_device == "cpu":
        _dev.check_cuda(driver.cuMemcpyDtoHAsync(dst_ptr, src_ptr, nbytes, s),
                        "cuMemcpyDtoHAsync")
    elif src_device == "cpu":
        _dev.check_cuda(driver.cuMemcpyHtoDAsync(dst_ptr, src_ptr, nbytes, s),
                        "cuMemcpyHtoDAsync")
    else:
        _dev.check_cuda(driver.cuMemcpyAsync(dst_ptr, src_ptr, nbytes, s), "cuMemcpyAsync")
    _dev.check_cuda(driver.cuStreamSynchronize(s), "cuStreamSynchronize")


def copy_bytes_async(dst_ptr: int, src_ptr: int, nbytes: int, stream: Any) -> None:
    """Enqueue a device-to-device copy on ``stream`` (anything with ``__cuda_stream__``:
    a cuda.core Stream or GraphBuilder, a torch stream) without waiting; graph capture
    records it.

    Example:
        >>> copy_bytes_async(dst, src, 1024, tl_gpu.stream)    # doctest: +SKIP
    """
    if nbytes <= 0:
        return
    from cuda.bindings import driver

    handle = stream.__cuda_stream__()[1] if stream is not None else _dev.gpu().stream_handle
    _dev.check_cuda(driver.cuMemcpyAsync(dst_ptr, src_ptr, nbytes, handle), "cuMemcpyAsync")


def memset_zero(ptr: int, device: str, nbytes: int) -> None:
    """Set ``nbytes`` at ``ptr`` to zero (GPU: cuMemsetD8Async on tilelab's stream).

    Example:
        >>> import numpy as np
        >>> a = np.ones(4, np.uint8); memset_zero(a.ctypes.data, "cpu", 4); a
        array([0, 0, 0, 0], dtype=uint8)
    """
    if nbytes <= 0:
        return
    if device == "cpu":
        import ctypes

        ctypes.memset(ptr, 0, nbytes)
        return
    from cuda.bindings import driver

    g = _dev.gpu()
    _dev.check_cuda(driver.cuMemsetD8Async(ptr, 0, nbytes, g.stream_handle),
                    "cuMemsetD8Async")
    _dev.check_cuda(driver.cuStreamSynchronize(g.stream_handle), "cuStreamSynchronize")
