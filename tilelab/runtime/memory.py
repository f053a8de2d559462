"""Storage: the bytes behind tensors, owned or borrowed, on the host or the GPU.

A :class:`Storage` is one contiguous byte range in one memory *space* (``("cpu",)`` or
``("cuda", 0)``). The borrow ledger keys borrows by space and absolute address range, so
two wrappers of the same memory (a tensor and its DLPack import, say) conflict as they
should. Owned GPU memory comes from cuda.core's stream-ordered allocator on tilelab's
stream, never from managed memory. Borrowed memory keeps its producer alive.

Copies that touch the host are synchronous: when they return, the data is in place.
A device-to-device copy between overlapping ranges (two views of one buffer) goes
through a staging buffer in the order :func:`copy_plan` gives: one ``cuMemcpy`` is
undefined for overlapping ranges, and the host copy (``memmove``) is overlap-safe, so
both backends give what copying the source's values first would give.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilelab.runtime import graph_capture
from tilelab.runtime import device as _dev
from tilelab.runtime.ledger import LEDGER

__all__ = ["HOST_SPACE", "HOST_ALIGN", "STAGE_BYTES", "Storage", "CopyPlan", "copy_plan",
           "run_copy_plan", "copy_bytes", "copy_bytes_async", "memset_zero"]

#: the memory space of host (CPU) memory
HOST_SPACE: tuple = ("cpu",)
#: alignment tilelab gives host allocations, in bytes
HOST_ALIGN = 64


#: bumped by every Storage.free(): a prepared launch made before a free re-validates
FREE_EPOCH = [0]


_THREAD = threading.local()


def _thread_token() -> object:
    """An object unique to the calling thread (a thread id may be reused once its thread
    ends; a token held by a freed storage never is)."""
    token = getattr(_THREAD, "token", None)
    if token is None:
        token = _THREAD.token = object()
    return token


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
                 "stream", "_buffer", "_host", "_owner", "_freed", "_freed_by", "__weakref__")

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
        self._freed_by: object | None = None   # the token of the thread that freed it

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
        graph_capture.forbid_allocation(what)
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

    @property
    def freed_by(self) -> str | None:
        """Who called :meth:`free`, for error messages: ``"this thread"`` (the calling
        thread), ``"another thread"``, or None while the memory is alive.

        Example:
            >>> s = Storage.allocate(8, "cpu"); s.free(); s.freed_by
            'this thread'
        """
        if not self._freed:
            return None
        return "this thread" if self._freed_by is _thread_token() else "another thread"

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
            self._freed_by = _thread_token()
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


#: the most bytes an overlapping device copy stages at a time (its staging buffer's size)
STAGE_BYTES = 32 << 20


@dataclass(frozen=True)
class CopyPlan:
    """How to copy bytes between two ranges with copies that are each defined.

    ``steps`` are ``(dst, src, nbytes)`` (absolute addresses), to run in order. With
    ``stage_bytes`` 0 each step is one copy whose two ranges are disjoint; otherwise each
    step goes through a staging buffer of that many bytes (source to stage, then stage
    to destination) before the next step starts.

    Example:
        >>> copy_plan(0, 100, 50)
        CopyPlan(steps=((0, 100, 50),), stage_bytes=0)
    """

    steps: tuple[tuple[int, int, int], ...]
    stage_bytes: int = 0


def copy_plan(dst: int, src: int, nbytes: int, stage: int = STAGE_BYTES) -> CopyPlan:
    """The steps that copy ``nbytes`` from ``src`` to ``dst`` when the two ranges may
    overlap (two views of one buffer), leaving at ``dst`` the values ``src`` held before.

    Why: ``cuMemcpy`` (and a graph's memcpy node) is undefined for overlapping ranges.
    Disjoint ranges are one copy; identical ones none. Otherwise the copy runs in chunks
    in the direction that reads every source chunk before any write reaches it
    (ascending when ``dst`` lies below ``src``, descending above): chunks as long as the
    distance between the ranges are then disjoint from their own destination and copied
    directly, when that distance is at least ``stage`` bytes; closer ranges go through a
    staging buffer of at most ``stage`` bytes, chunk by chunk.

    Example:
        >>> copy_plan(0, 4, 12, stage=8)    # dst below src: ascending, staged
        CopyPlan(steps=((0, 4, 8), (8, 12, 4)), stage_bytes=8)
        >>> copy_plan(40, 0, 100, stage=8)  # 40 bytes apart: direct, descending
        CopyPlan(steps=((120, 80, 20), (80, 40, 40), (40, 0, 40)), stage_bytes=0)
    """
    nbytes = int(nbytes)
    if nbytes <= 0 or dst == src:
        return CopyPlan(())
    gap = abs(dst - src)
    if gap >= nbytes:
        return CopyPlan(((dst, src, nbytes),))
    staged = gap < stage
    chunk = min(nbytes, stage) if staged else gap
    offsets = range(0, nbytes, chunk)
    if dst > src:
        offsets = reversed(offsets)
    steps = tuple((dst + o, src + o, min(chunk, nbytes - o)) for o in offsets)
    return CopyPlan(steps, chunk if staged else 0)


def run_copy_plan(plan: CopyPlan, memcpy: Any, stage_ptr: int = 0) -> None:
    """Run ``plan`` with ``memcpy(dst, src, nbytes)`` (one defined copy of disjoint ranges,
    run in order); ``stage_ptr`` is a buffer of ``plan.stage_bytes`` bytes when it has
    them.

    Example:
        >>> import ctypes, numpy as np
        >>> a = np.arange(8, dtype=np.uint8); base = a.ctypes.data
        >>> stage = np.empty(4, np.uint8)
        >>> run_copy_plan(copy_plan(base + 2, base, 6, stage=4),
        ...               lambda d, s, n: ctypes.memmove(d, s, n), stage.ctypes.data)
        >>> a
        array([0, 1, 0, 1, 2, 3, 4, 5], dtype=uint8)
    """
    if plan.stage_bytes and not stage_ptr:
        raise ValueError("this copy plan needs a staging buffer")
    for dst, src, n in plan.steps:
        if plan.stage_bytes:
            memcpy(stage_ptr, src, n)
            memcpy(dst, stage_ptr, n)
        else:
            memcpy(dst, src, n)


def copy_bytes(dst_ptr: int, dst_device: str, src_ptr: int, src_device: str,
               nbytes: int) -> None:
    """Copy ``nbytes`` between two addresses on 'cpu'/'cuda:0', synchronously; the two
    ranges may overlap (the result is then what copying the source first would give).

    Host-to-host is a ``memmove``; any copy that touches the GPU goes through the CUDA
    driver on tilelab's stream (every CUresult checked) and waits for completion, a
    device-to-device one by the steps of :func:`copy_plan`.

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
        _copy_device(dst_ptr, src_ptr, nbytes, g)
    _dev.check_cuda(driver.cuStreamSynchronize(s), "cuStreamSynchronize")


def _copy_device(dst_ptr: int, src_ptr: int, nbytes: int, g: Any) -> None:
    """Enqueue a device-to-device copy on tilelab's stream by :func:`copy_plan`'s steps,
    with a staging buffer (stream-ordered, freed after the steps) when they need one."""
    from cuda.bindings import driver

    s = g.stream_handle

    def memcpy(d: int, src: int, n: int) -> None:
        _dev.check_cuda(driver.cuMemcpyAsync(d, src, n, s), "cuMemcpyAsync")

    plan = copy_plan(dst_ptr, src_ptr, nbytes)
    if not plan.stage_bytes:
        run_copy_plan(plan, memcpy)
        return
    try:
        stage = g.device.allocate(plan.stage_bytes, stream=g.stream)
    except Exception as e:
        from tilelab.errors import LaunchError

        raise LaunchError(f"copying between overlapping views needs a {plan.stage_bytes}-"
                          f"byte staging buffer, and allocating it failed: {e}",
                          hint="free tensors you no longer need (t.free())") from e
    try:
        run_copy_plan(plan, memcpy, int(stage.handle))
    finally:
        stage.close(g.stream)   # stream-ordered: after the steps


def copy_bytes_async(dst_ptr: int, src_ptr: int, nbytes: int, stream: Any) -> None:
    """Enqueue a device-to-device copy on ``stream`` (anything with ``__cuda_stream__``:
    a cuda.core Stream or GraphBuilder, a torch stream) without waiting; graph capture
    records it. Ranges that overlap by more than a staging chunk would need a staging
    buffer that outlives this call: they are refused (ValueError; use
    :func:`copy_bytes`), never copied by one undefined ``cuMemcpyAsync``.

    Example:
        >>> copy_bytes_async(dst, src, 1024, tl_gpu.stream)    # doctest: +SKIP
    """
    plan = copy_plan(dst_ptr, src_ptr, nbytes)
    if plan.stage_bytes:
        raise ValueError(f"copy_bytes_async: the byte ranges at {dst_ptr:#x} and "
                         f"{src_ptr:#x} ({nbytes} bytes) overlap; copy with copy_bytes")
    if not plan.steps:
        return
    from cuda.bindings import driver

    handle = stream.__cuda_stream__()[1] if stream is not None else _dev.gpu().stream_handle

    def memcpy(d: int, src: int, n: int) -> None:
        _dev.check_cuda(driver.cuMemcpyAsync(d, src, n, handle), "cuMemcpyAsync")

    run_copy_plan(plan, memcpy)


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
