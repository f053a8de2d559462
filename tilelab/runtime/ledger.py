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

import collections
import contextlib
import os
import sys
import threading
from typing import Any, Callable, Iterator

from tilelab.errors import BorrowError

__all__ = ["LaunchRecord", "Ledger", "unchecked", "checks_enabled", "call_site", "raw_site",
           "LEDGER"]

_state = threading.local()
_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
#: how many ``unchecked`` blocks and graph captures are open in any thread: when zero,
#: hot paths skip the per-thread lookups entirely
SPECIAL_MODES = [0]


def checks_enabled() -> bool:
    """False inside ``with tl.unchecked():``."""
    return not SPECIAL_MODES[0] or not getattr(_state, "unchecked", 0)


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
    SPECIAL_MODES[0] += 1
    try:
        yield
    finally:
        _state.unchecked -= 1
        SPECIAL_MODES[0] -= 1


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

    ``query`` polls whether the work finished (without observing it); ``site`` says
    where it was launched: a string, or raw (file, line) pairs of the calling frames,
    formatted only when an error message needs them.
    """

    __slots__ = ("kernel", "_site", "stream", "query", "observed", "borrows", "keepalive",
                 "orphaned", "cuda_stream", "event")

    def __init__(self, kernel: str, site: Any, stream: Any,
                 query: Callable[[], bool] | None = None, keepalive: Any = None,
                 cuda_stream: Any = None):
        self.kernel = kernel
        self._site = site
        self.stream = stream
        self.query = query
        self.observed = False
        self.borrows: list = []   # its claims (space, lo, hi, exclusive, param)
        self.keepalive = keepalive
        self.orphaned = False
        #: the cuda.core stream the work went to (None: finished CPU work), and the event
        #: recorded after it there, made on first need
        self.cuda_stream = cuda_stream
        self.event = None

    def ensure_event(self) -> Any:
        """An event recorded on the launch's stream (after the launch) — made lazily."""
        if self.event is None:
            self.event = self.cuda_stream.record()
        return self.event

    def poll(self) -> bool:
        """Whether the work has finished (does not observe it)."""
        if self.query is not None:
            return self.query()
        if self.cuda_stream is None:
            return True
        return self.ensure_event().is_done

    @property
    def site(self) -> str:
        s = self._site
        if isinstance(s, tuple):
            for fn, line in s:
                if not fn.startswith(_PKG):
                    return f"{fn}:{line}"
            return "<unknown>"
        return s

    def describe(self) -> str:
        return f"kernel {self.kernel!r} launched at {self.site}"


def raw_site() -> tuple:
    """The calling frames as (file, line) pairs: cheap now, formatted on demand."""
    f = sys._getframe(2)
    out = []
    while f is not None and len(out) < 6:
        out.append((f.f_code.co_filename, f.f_lineno))
        if not f.f_code.co_filename.startswith(_PKG):
            break
        f = f.f_back
    return tuple(out)


class Ledger:
    """The process-wide log of pending launches, one FIFO per stream.

    Launches on one stream finish in order, so observing a launch complete observes
    every earlier launch of its stream too: ``observe`` releases the stream's log up to
    and including it. A record's borrows are its claims ``(space, lo, hi, exclusive,
    param)``: absolute byte addresses [lo, hi) in a memory space (``("cpu",)`` or
    ``("cuda", device_id)``). Keying by address rather than by tensor object makes two
    wrappers of the same memory conflict as they should. Registering a launch is an
    append; the checks scan only what is pending.
    """

    LOG_LIMIT = 4096  # past this many unobserved launches on a stream, poll its tail

    def __init__(self):
        self._lock = threading.RLock()
        self._logs: dict[Any, collections.deque] = {}
        self._pending = 0

    # ---- bookkeeping -------------------------------------------------------------
    @property
    def pending_count(self) -> int:
        return self._pending

    def _drop(self, rec: LaunchRecord) -> None:
        rec.observed = True
        rec.keepalive = None
        self._pending -= 1

    def observe(self, rec: LaunchRecord) -> None:
        """The user has seen ``rec`` complete: release it and everything launched before
        it on the same stream."""
        with self._lock:
            if rec.observed:
                return
            log = self._logs.get(rec.stream)
            if log is None:
                self._drop(rec)
                return
            if rec.stream is None:   # unordered: only this record
                try:
                    log.remove(rec)
                except ValueError:
                    pass
                self._drop(rec)
            else:
                while log:
                    r = log.popleft()
                    if not r.observed:
                        self._drop(r)
                    if r is rec:
                        break
                else:
                    if not rec.observed:
                        self._drop(rec)
            if not log:
                del self._logs[rec.stream]

    def orphan(self, rec: LaunchRecord) -> None:
        """A future was dropped unobserved: its launch keeps its memory alive until a
        later launch on its stream is observed (or the work is found finished when its
        borrows get in someone's way)."""
        rec.orphaned = True

    def _finished_orphan(self, rec: LaunchRecord) -> bool:
        """Release rec if it is an orphan whose work is done (then it no longer conflicts)."""
        if rec.orphaned:
            try:
                if rec.poll():
                    self.observe(rec)
                    return True
            except Exception:
                return False
        return False

    def observe_all(self) -> None:
        """After a device-wide synchronize: every pending record is complete."""
        with self._lock:
            for log in self._logs.values():
                for r in log:
                    if not r.observed:
                        self._drop(r)
            self._logs.clear()
            self._pending = 0

    def pending_records(self) -> list[LaunchRecord]:
        with self._lock:
            return [r for log in self._logs.values() for r in log if not r.observed]

    # ---- checks ------------------------------------------------------------------
    def _conflicts(self, records, space: Any, lo: int, hi: int, excl: bool):
        for rec in list(records):
            if rec.observed:
                continue
            for rspace, rlo, rhi, rexcl, rparam in rec.borrows:
                if rspace == space and (excl or rexcl) and rlo < hi and lo < rhi:
                    if self._finished_orphan(rec):
                        break
                    yield rec, rexcl, rparam
                    break

    def check_launch(self, kernel: str, claims: list[tuple[Any, int, int, bool, str]],
                     stream: Any) -> None:
        """Raise BorrowError if a claim (space, lo, hi, exclusive, param) conflicts with
        a pending launch on another stream."""
        if not self._pending or not checks_enabled():
            return
        logs = self._logs
        if stream is not None and len(logs) == 1 and stream in logs:
            return  # only this stream has pending work: ordered by the stream
        with self._lock:
            for key, log in list(logs.items()):
                if key == stream and stream is not None:
                    continue  # same stream: ordered, no race
                for space, lo, hi, excl, param in claims:
                    for rec, rexcl, rparam in self._conflicts(log, space, lo, hi, excl):
                        what = "writes" if excl else "reads"
                        theirs = "writes" if rexcl else "reads"
                        raise BorrowError(
                            f"launch of {kernel!r} {what} {param!r}, which the pending "
                            f"{rec.describe()} {theirs} (as {rparam!r}) on another stream",
                            hint="wait for the first launch (future.wait()), launch both on "
                                 "the same stream, or chain with future.then(...)")

    def add(self, rec: LaunchRecord, claims: list[tuple[Any, int, int, bool, str]],
            keepalive: Any = None, spaces: Any = None) -> None:
        """Register a launch's borrows (after check_launch passed); ``keepalive`` (the
        launch's tensors) stays referenced until the borrows are released."""
        rec.borrows = claims
        if keepalive is not None:
            rec.keepalive = keepalive
        with self._lock:
            log = self._logs.get(rec.stream)
            if log is None:
                log = self._logs[rec.stream] = collections.deque()
            log.append(rec)
            self._pending += 1
            if len(log) > self.LOG_LIMIT and not len(log) & 255:
                self._relieve(log)

    def _relieve(self, log: collections.deque) -> None:
        """A long unobserved log: if the stream has finished it all, release it."""
        tail = log[-1]
        try:
            if tail.cuda_stream is not None and tail.poll():
                self.observe(tail)
        except Exception:
            pass

    def check_host(self, space: Any, lo: int, hi: int, *, write: bool, what: str) -> None:
        """Raise BorrowError if host code may not touch bytes [lo, hi) now."""
        if not self._pending or not checks_enabled():
            return
        with self._lock:
            for log in list(self._logs.values()):
                for rec, rexcl, rparam in self._conflicts(log, space, lo, hi, write):
                    action = "writes" if rexcl else "reads"
                    extra = (" (its future was dropped before anyone waited on it)"
                             if rec.orphaned else "")
                    raise BorrowError(
                        f"{what} touches memory that the pending {rec.describe()} "
                        f"{action} (as {rparam!r}){extra}",
                        hint="call .wait() on the launch's future first (or "
                             "tl.synchronize()); a pending launch keeps its borrows until "
                             "its completion is observed")

    def check_free(self, space: Any, lo: int, hi: int, what: str) -> None:
        """Raise BorrowError if a pending launch still uses bytes [lo, hi) of a space."""
        self.check_host(space, lo, hi, write=True, what=what)


LEDGER = Ledger()
