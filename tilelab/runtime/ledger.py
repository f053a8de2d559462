"""The borrow ledger: who may touch which memory while launches are in flight.

Every pending launch (or graph replay) holds *borrows* on the memory of its arguments:
shared borrows on what it reads, exclusive borrows on what it writes. A borrow lasts
until the launch is **observed** complete (``future.wait()``, ``future.done()`` returning
True, a sync launch returning, ``tl.synchronize()``), not merely until the GPU happens to
finish, so the same program behaves the same way every run.

Conflicts raise :class:`~tilelab.errors.BorrowError` naming the kernel and the line that
launched it: a host read of memory a pending launch writes, any host write or free of
memory a pending launch uses, and a launch on another stream that would write what a
pending launch uses (or read what it writes). Launches on the same stream are ordered
by the stream and never conflict. ``with tl.unchecked():`` skips these checks and the
alias check locally. Memory stays alive while any borrow refers to it, so dropping a
future never frees memory early: a dropped future's borrows are released only once its
work has finished.

Borrows are kept per memory space and per stream, so a launch only scans the borrows of
*other* streams: a pipeline of async launches on one stream costs O(1) per launch.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import Any, Callable, Iterator

from tilelab.errors import BorrowError

__all__ = ["LaunchRecord", "Borrow", "Ledger", "unchecked", "checks_enabled", "call_site",
           "LEDGER"]

_state = threading.local()
_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def checks_enabled() -> bool:
    """False inside ``with tl.unchecked():``."""
    return not getattr(_state, "unchecked", 0)


@contextlib.contextmanager
def unchecked() -> Iterator[None]:
    """Skip the launch-time alias and borrow checks of the launches inside the block.

    This is a local, visible opt-out: use it for launches you have reasoned about
    yourself (for example, in-place updates through two views you know are disjoint).

    Example:
        >>> import tilelab as tl
        >>> with tl.unchecked():
        ...     pass   # launches here are not alias- or borrow-checked
    """
    _state.unchecked = getattr(_state, "unchecked", 0) + 1
    try:
        yield
    finally:
        _state.unchecked -= 1


def call_site() -> str:
    """'file:line' of the first caller frame outside tilelab (where the user launched)."""
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(_PKG):
            return f"{fn}:{f.f_lineno}"
        f = f.f_back
    return "<unknown>"


class LaunchRecord:
    """One pending unit of device work (a launch or a graph replay).

    ``query`` polls whether the work finished (without observing it); ``site`` is a
    callable or a string saying where it was launched (made lazily: it is only needed
    for error messages).
    """

    __slots__ = ("kernel", "_site", "stream", "query", "observed", "borrows", "keepalive",
                 "orphaned")

    def __init__(self, kernel: str, site: Any, stream: Any, query: Callable[[], bool],
                 keepalive: Any = None):
        self.kernel = kernel
        self._site = site
        self.stream = stream
        self.query = query
        self.observed = False
        self.borrows: list[Borrow] = []
        self.keepalive = keepalive
        self.orphaned = False

    @property
    def site(self) -> str:
        return self._site

    def describe(self) -> str:
        return f"kernel {self.kernel!r} launched at {self.site}"


class Borrow:
    """A pending launch's claim on bytes [lo, hi) (absolute addresses) of a memory space.

    A space is ``("cpu",)`` or ``("cuda", device_id)``: keying by address rather than by
    tensor object makes two wrappers of the same memory conflict as they should.
    """

    __slots__ = ("space", "lo", "hi", "exclusive", "record", "param")

    def __init__(self, space: Any, lo: int, hi: int, exclusive: bool, record: LaunchRecord,
                 param: str = ""):
        self.space = space
        self.lo = lo
        self.hi = hi
        self.exclusive = exclusive
        self.record = record
        self.param = param

    def overlaps(self, lo: int, hi: int) -> bool:
        return self.lo < hi and lo < self.hi


class Ledger:
    """The process-wide table of pending borrows: space -> stream -> borrows."""

    ORPHAN_SWEEP = 256  # sweep finished orphans once this many have piled up

    def __init__(self):
        self._lock = threading.RLock()
        self._borrows: dict[Any, dict[Any, list[Borrow]]] = {}
        self._pending = 0
        self._orphans: list[LaunchRecord] = []

    # ---- bookkeeping -------------------------------------------------------------
    @property
    def pending_count(self) -> int:
        return self._pending

    def _release(self, rec: LaunchRecord) -> None:
        # O(1): the record is marked observed and its borrows become dead entries that
        # scans skip and later compactions drop.
        if rec.observed:
            return
        rec.observed = True
        rec.borrows = []
        rec.keepalive = None
        self._pending -= 1
        if self._pending == 0:
            self._borrows.clear()
            self._orphans = []

    @staticmethod
    def _live(lst: list) -> list:
        return [b for b in lst if not b.record.observed]

    def observe(self, rec: LaunchRecord) -> None:
        """The user has seen ``rec`` complete: release its borrows."""
        with self._lock:
            self._release(rec)

    def orphan(self, rec: LaunchRecord) -> None:
        """A future was dropped unobserved: release its borrows once its work finishes."""
        with self._lock:
            if rec.observed:
                return
            rec.orphaned = True
            self._orphans.append(rec)
            if len(self._orphans) >= self.ORPHAN_SWEEP:
                self._sweep_orphans()

    def _sweep_orphans(self) -> None:
        keep = []
        for rec in self._orphans:
            if rec.observed:
                continue
            try:
                finished = rec.query()
            except Exception:
                finished = False
            if finished:
                self._release(rec)
            else:
                keep.append(rec)
        self._orphans = keep

    def _finished_orphan(self, rec: LaunchRecord) -> bool:
        """Release rec if it is an orphan whose work is done (then it no longer conflicts)."""
        if rec.orphaned:
            try:
                if rec.query():
                    self._release(rec)
                    return True
            except Exception:
                return False
        return False

    def observe_all(self) -> None:
        """After a device-wide synchronize: every pending record is complete."""
        with self._lock:
            for rec in self.pending_records():
                self._release(rec)
            self._borrows.clear()
            self._orphans = []
            self._pending = 0

    def pending_records(self) -> list[LaunchRecord]:
        with self._lock:
            recs = {id(b.record): b.record for streams in self._borrows.values()
                    for lst in streams.values() for b in lst if not b.record.observed}
            return list(recs.values())

    # ---- checks ------------------------------------------------------------------
    def check_launch(self, kernel: str, claims: list[tuple[Any, int, int, bool, str]],
                     stream: Any) -> None:
        """Raise BorrowError if a claim (space, lo, hi, exclusive, param) conflicts with
        a pending launch on another stream."""
        if not self._pending or not checks_enabled():
            return
        with self._lock:
            for space, lo, hi, excl, param in claims:
                streams = self._borrows.get(space)
                if not streams:
                    continue
                for s, lst in list(streams.items()):
                    if s == stream and stream is not None:
                        continue  # same stream: ordered, no race
                    for b in list(lst):
                        if b.record.observed:
                            continue
                        if (excl or b.exclusive) and b.overlaps(lo, hi):
                            if self._finished_orphan(b.record):
                                continue
                            what = "writes" if excl else "reads"
                            theirs = "writes" if b.exclusive else "reads"
                            raise BorrowError(
                                f"launch of {kernel!r} {what} {param!r}, which the pending "
                                f"{b.record.describe()} {theirs} (as {b.param!r}) on "
                                "another stream",
                                hint="wait for the first launch (future.wait()), launch "
                                     "both on the same stream, or chain with "
                                     "future.then(...)")

    def add(self, rec: LaunchRecord, claims: list[tuple[Any, int, int, bool, str]],
            keepalive: Any = None) -> None:
        """Register a launch's borrows (after check_launch passed); ``keepalive`` (the
        launch's tensors) stays referenced until the borrows are released."""
        if keepalive is not None:
            rec.keepalive = keepalive
        with self._lock:
            for space, lo, hi, excl, param in claims:
                b = Borrow(space, lo, hi, excl, rec, param)
                rec.borrows.append(b)
                streams = self._borrows.get(space)
                if streams is None:
                    streams = self._borrows[space] = {}
                lst = streams.get(rec.stream)
                if lst is None:
                    lst = streams[rec.stream] = []
                elif len(lst) >= 64 and not len(lst) & 63:
                    lst[:] = self._live(lst)   # drop released borrows now and then
                lst.append(b)
            self._pending += 1

    def check_host(self, space: Any, lo: int, hi: int, *, write: bool, what: str) -> None:
        """Raise BorrowError if host code may not touch bytes [lo, hi) now."""
        if not self._pending or not checks_enabled():
            return
        with self._lock:
            for lst in list(self._borrows.get(space, {}).values()):
                for b in list(lst):
                    if b.record.observed:
                        continue
                    if b.overlaps(lo, hi) and (write or b.exclusive):
                        if self._finished_orphan(b.record):
                            continue
                        action = "writes" if b.exclusive else "reads"
                        extra = (" (its future was dropped before anyone waited on it)"
                                 if b.record.orphaned else "")
                        raise BorrowError(
                            f"{what} touches memory that the pending "
                            f"{b.record.describe()} {action} (as {b.param!r}){extra}",
                            hint="call .wait() on the launch's future first (or "
                                 "tl.synchronize()); a pending launch keeps its borrows "
                                 "until its completion is observed")

    def check_free(self, space: Any, lo: int, hi: int, what: str) -> None:
        """Raise BorrowError if a pending launch still uses bytes [lo, hi) of a space."""
        self.check_host(space, lo, hi, write=True, what=what)


LEDGER = Ledger()
