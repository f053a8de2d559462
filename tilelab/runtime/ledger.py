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
future never frees memory early.
"""
from __future__ import annotations

import contextlib
import sys
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from tilelab.errors import BorrowError

__all__ = ["LaunchRecord", "Borrow", "Ledger", "unchecked", "checks_enabled",
           "call_site", "LEDGER"]

_state = threading.local()


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


def call_site(skip_prefixes: tuple[str, ...] = ()) -> str:
    """'file:line' of the first caller frame outside tilelab (where the user launched)."""
    f = sys._getframe(1)
    import os

    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    while f is not None:
        fn = f.f_code.co_filename
        if not (os.path.abspath(fn).startswith(pkg + os.sep) or
                any(fn.startswith(p) for p in skip_prefixes)):
            return f"{fn}:{f.f_lineno}"
        f = f.f_back
    return "<unknown>"


@dataclass(eq=False)
class LaunchRecord:
    """One pending unit of device work (a launch or a graph replay)."""

    kernel: str
    site: str
    stream: Any                      # a stream identity (hashable); None for the CPU backend
    query: Callable[[], bool]        # True once the work has finished (polled, not observed)
    observed: bool = False
    borrows: list["Borrow"] = field(default_factory=list)
    keepalive: list[Any] = field(default_factory=list)  # memory kept alive meanwhile
    orphaned: bool = False

    def describe(self) -> str:
        return f"kernel {self.kernel!r} launched at {self.site}"


@dataclass(eq=False)
class Borrow:
    """A pending launch's claim on bytes [lo, hi) (absolute addresses) of a memory space.

    A space is ``("cpu",)`` or ``("cuda", device_id)``: keying by address rather than by
    tensor object makes two wrappers of the same memory conflict as they should.
    """

    space: Any
    lo: int
    hi: int
    exclusive: bool
    record: LaunchRecord
    param: str = ""

    def overlaps(self, lo: int, hi: int) -> bool:
        return self.lo < hi and lo < self.hi


class Ledger:
    """The process-wide table of pending borrows, keyed by memory space."""

    def __init__(self):
        self._lock = threading.RLock()
        self._by_space: dict[Any, list[Borrow]] = {}
        self._records: set[LaunchRecord] = set()

    # ---- bookkeeping -------------------------------------------------------------
    def _prune(self) -> None:
        """Drop borrows of observed records, and of orphans whose work has finished."""
        for rec in list(self._records):
            if rec.orphaned and not rec.observed:
                try:
                    finished = rec.query()
                except Exception:
                    finished = False
                if finished:
                    self._release(rec)
            elif rec.observed:
                self._release(rec)

    def _release(self, rec: LaunchRecord) -> None:
        rec.observed = True
        for b in rec.borrows:
            lst = self._by_space.get(b.space)
            if lst is not None:
                try:
                    lst.remove(b)
                except ValueError:
                    pass
                if not lst:
                    del self._by_space[b.space]
        rec.borrows.clear()
        rec.keepalive.clear()
        self._records.discard(rec)

    def pending(self, space: Any) -> list[Borrow]:
        with self._lock:
            self._prune()
            return list(self._by_space.get(space, ()))

    def observe(self, rec: LaunchRecord) -> None:
        """The user has seen ``rec`` complete: release its borrows."""
        with self._lock:
            self._release(rec)

    def orphan(self, rec: LaunchRecord) -> None:
        """A future was dropped unobserved: release its borrows once its work finishes."""
        with self._lock:
            if not rec.observed:
                rec.orphaned = True

    def observe_all(self) -> None:
        """After a device-wide synchronize: every pending record is complete."""
        with self._lock:
            for rec in list(self._records):
                self._release(rec)

    # ---- checks ------------------------------------------------------------------
    def check_launch(self, kernel: str, claims: list[tuple[Any, int, int, bool, str]],
                     stream: Any) -> None:
        """Raise BorrowError if a claim (space, lo, hi, exclusive, param) conflicts
        with a pending launch on another stream."""
        if not checks_enabled():
            return
        with self._lock:
            self._prune()
            for sid, lo, hi, excl, param in claims:
                for b in self._by_space.get(sid, ()):
                    if b.record.stream == stream and stream is not None:
                        continue  # same stream: ordered, no race
                    if (excl or b.exclusive) and b.overlaps(lo, hi):
                        what = "writes" if excl else "reads"
                        theirs = "writes" if b.exclusive else "reads"
                        raise BorrowError(
                            f"launch of {kernel!r} {what} {param!r}, which the pending "
                            f"{b.record.describe()} {theirs} (as {b.param!r}) on another "
                            "stream",
                            hint="wait for the first launch (future.wait()), launch both "
                                 "on the same stream, or chain with future.then(...)")

    def add(self, rec: LaunchRecord, claims: list[tuple[Any, int, int, bool, str]],
            keepalive: list[Any]) -> None:
        """Register a launch's borrows (after check_launch passed)."""
        with self._lock:
            for sid, lo, hi, excl, param in claims:
                b = Borrow(sid, lo, hi, excl, rec, param)
                rec.borrows.append(b)
                self._by_space.setdefault(sid, []).append(b)
            rec.keepalive.extend(keepalive)
            self._records.add(rec)

    def check_host(self, space: Any, lo: int, hi: int, *, write: bool,
                   what: str) -> None:
        """Raise BorrowError if host code may not touch bytes [lo, hi) now."""
        if not checks_enabled():
            return
        with self._lock:
            self._prune()
            for b in self._by_space.get(space, ()):
                if b.overlaps(lo, hi) and (write or b.exclusive):
                    action = "writes" if b.exclusive else "reads"
                    extra = (" (its future was dropped before anyone waited on it)"
                             if b.record.orphaned else "")
                    raise BorrowError(
                        f"{what} touches memory that the pending "
                        f"{b.record.describe()} {action} (as {b.param!r}){extra}",
                        hint="call .wait() on the launch's future first (or "
                             "tl.synchronize()); a pending launch keeps its borrows until "
                             "its completion is observed")

    def check_free(self, space: Any, lo: int, hi: int, what: str) -> None:
        """Raise BorrowError if a pending launch still uses bytes [lo, hi) of a space."""
        self.check_host(space, lo, hi, write=True, what=what)

    def pending_records(self) -> list[LaunchRecord]:
        with self._lock:
            self._prune()
            return list(self._records)


LEDGER = Ledger()


def finalize_unobserved(future: Any, rec: LaunchRecord) -> None:
    """Arrange for a dropped future's record to become an orphan."""
    weakref.finalize(future, LEDGER.orphan, rec)
