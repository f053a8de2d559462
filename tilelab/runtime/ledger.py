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
import types
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


class LaunchInfo:
    """What a launch record shares with other launches of the same prepared launch on
    the same stream: the kernel's name, the stream (its ledger key and, for device work,
    the cuda.core stream), how to poll completion, and the borrows."""

    __slots__ = ("borrows", "cuda_stream", "kernel", "query", "stream")

    def __init__(self, kernel: str, stream: Any, query: Callable[[], bool] | None = None,
                 cuda_stream: Any = None, borrows: Any = ()):
        self.kernel = kernel
        self.stream = stream
        self.query = query
        #: the cuda.core stream the work went to (None: finished CPU work)
        self.cuda_stream = cuda_stream
        self.borrows = borrows   # claims (space, lo, hi, exclusive, param)


class LaunchRecord:
    """One pending unit of device work (a launch or a graph replay).

    ``query`` polls whether the work finished (without observing it); ``site`` says
    where it was launched: a string, or raw (file, line) pairs of the calling frames,
    formatted only when an error message needs them. ``kernel``, ``stream``, ``query``,
    ``cuda_stream`` and ``borrows`` live in its :class:`LaunchInfo`.
    """

    __slots__ = ("info", "_site", "observed", "keepalive", "orphaned", "event")

    def __init__(self, kernel: str, site: Any, stream: Any,
                 query: Callable[[], bool] | None = None, keepalive: Any = None,
                 cuda_stream: Any = None):
        self.info = LaunchInfo(kernel, stream, query, cuda_stream)
        self._site = site
        self.observed = False
        self.keepalive = keepalive
        self.orphaned = False
        #: the event recorded on the stream after the work, made on first need
        self.event = None

    kernel = property(lambda self: self.info.kernel)
    stream = property(lambda self: self.info.stream)
    query = property(lambda self: self.info.query)
    cuda_stream = property(lambda self: self.info.cuda_stream)

    @property
    def borrows(self) -> Any:
        return self.info.borrows

    @borrows.setter
    def borrows(self, claims: Any) -> None:
        self.info.borrows = claims

    def ensure_event(self) -> Any:
        """An event recorded on the launch's stream (after the launch) — made lazily."""
        if self.event is None:
            self.event = self.info.cuda_stream.record()
        return self.event

    def poll(self) -> bool:
        """Whether the work has finished (does not observe it)."""
        info = self.info
        if info.query is not None:
            return info.query()
        if info.cuda_stream is None:
            return True
        return self.ensure_event().is_done

    @property
    def site(self) -> str:
        s = self._site
        if isinstance(s, types.CodeType):   # a PreparedRecord's
            return f"{s.co_filename}:{code_line(s, self._offset)}"
        if isinstance(s, tuple):
            for fn, line in s:
                if not fn.startswith(_PKG):
                    return f"{fn}:{line}"
            return "<unknown>"
        return s

    def describe(self) -> str:
        return f"kernel {self.kernel!r} launched at {self.site}"


class PreparedRecord(LaunchRecord):
    """A launch of a prepared launch (``launch.py``'s repeated-launch path): its shared
    :class:`LaunchInfo`, and where it was launched as the launching frame's code object
    and instruction offset (a launch then reads no line table). A constructor of its own
    because one is made on every async launch."""

    __slots__ = ("_offset",)

    def __init__(self, info: LaunchInfo, code: types.CodeType, offset: int,
                 keepalive: Any):
        self.info = info
        self._site = code
        self._offset = offset
        self.observed = False
        self.keepalive = keepalive
        self.orphaned = False
        self.event = None


def code_line(code: types.CodeType, offset: int) -> int:
    """The source line of the instruction at byte ``offset`` of ``code`` (what
    ``frame.f_lineno`` says for a frame stopped there, computed only when asked)."""
    for start, end, line in code.co_lines():
        if start <= offset < end and line is not None:
            return line
    return code.co_firstlineno


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
    and including it. (The log's order is the order of registration, which follows each
    launch's driver call; a record is observed through an event recorded on its stream
    only after it was registered, so that event also covers every launch registered
    before it.) A record's borrows are its claims ``(space, lo, hi, exclusive, param)``:
    absolute byte addresses [lo, hi) in a memory space (``("cpu",)`` or
    ``("cuda", device_id)``). Keying by address rather than by tensor object makes two
    wrappers of the same memory conflict as they should. Registering a launch is an
    append; the checks scan only what is pending.

    Threads: everything that removes records or logs holds the lock, and iterates a log
    only by popping from its left or over a copy. Registering a launch on a stream that
    has a log is a lock-free ``deque.append`` (atomic under the GIL; see
    :meth:`append`), for prepared launches. An empty log is unregistered (only under the
    lock); an append racing with that is caught from both sides: the remover re-checks
    the log after removing it and puts it back if it is not empty, and the appender
    re-checks after appending that its log is still the registered one and re-registers
    it otherwise (:meth:`_appended`).
    """

    LOG_LIMIT = 4096  # past this many unobserved launches on a stream, poll its tail

    def __init__(self):
        self._lock = threading.RLock()
        #: stream key -> its unobserved records in registration order. A stream without
        #: pending work has no entry: an empty dict means nothing is pending. Never
        #: rebound (launch.py's prepared launches keep a reference to it).
        self._logs: dict[Any, collections.deque] = {}

    # ---- bookkeeping -------------------------------------------------------------
    @property
    def pending_count(self) -> int:
        return len(self.pending_records())

    @staticmethod
    def _drop(rec: LaunchRecord) -> None:
        rec.observed = True
        rec.keepalive = None

    def _unregister(self, key: Any, log: collections.deque) -> None:
        """Remove an empty log (lock held); put it back if an append raced in."""
        if self._logs.get(key) is log:
            del self._logs[key]
            if log:
                self._logs[key] = log

    def observe(self, rec: LaunchRecord) -> None:
        """The user has seen ``rec`` complete: release it and everything launched before
        it on the same stream."""
        with self._lock:
            if rec.observed:
                return
            key = rec.stream
            log = self._logs.get(key)
            if log is None:
                self._drop(rec)
                return
            if key is None:   # unordered: only this record
                try:
                    log.remove(rec)
                except ValueError:
                    pass
                self._drop(rec)
            else:
                popleft = log.popleft
                while log:
                    r = popleft()
                    r.observed = True
                    r.keepalive = None
                    if r is rec:
                        break
                else:
                    self._drop(rec)
            if not log:
                self._unregister(key, log)

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
            for key, log in list(self._logs.items()):
                popleft = log.popleft
                while log:
                    r = popleft()
                    r.observed = True
                    r.keepalive = None
                self._unregister(key, log)

    def pending_records(self) -> list[LaunchRecord]:
        with self._lock:
            return [r for log in list(self._logs.values()) for r in list(log)
                    if not r.observed]

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
        logs = self._logs
        if not logs or not checks_enabled():
            return
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
        self.push(rec)

    def push(self, rec: LaunchRecord) -> None:
        """Register a record that carries its borrows and keepalive already (after
        check_launch passed)."""
        log = self._logs.get(rec.stream)
        if log is None:
            with self._lock:
                log = self._logs.get(rec.stream)
                if log is None:
                    log = self._logs[rec.stream] = collections.deque()
        self.append(log, rec)

    def append(self, log: collections.deque, rec: LaunchRecord) -> None:
        """Append ``rec`` to ``log``, the log registered for ``rec.stream``, without the
        lock. (Prepared launches inline this; keep the two alike.)"""
        log.append(rec)
        if self._logs.get(rec.stream) is not log or not len(log) & 255:
            self._appended(log, rec)

    def _appended(self, log: collections.deque, rec: LaunchRecord) -> None:
        """The rare half of :meth:`append`: re-register ``log`` if it was unregistered
        meanwhile (its records then go after those of the stream's new log, which is
        registration order), and poll a very long log."""
        key = rec.stream
        with self._lock:
            cur = self._logs.get(key)
            if cur is not log:
                if cur is None:
                    if log:
                        self._logs[key] = log
                else:
                    while log:
                        cur.append(log.popleft())
                    log = cur
        if len(log) > self.LOG_LIMIT:
            self._relieve(log)

    def _relieve(self, log: collections.deque) -> None:
        """A long unobserved log: if the stream has finished it all, release it."""
        try:
            tail = log[-1]   # (another thread may have emptied the log meanwhile)
            if tail.cuda_stream is not None and tail.poll():
                self.observe(tail)
        except Exception:
            pass

    def check_host(self, space: Any, lo: int, hi: int, *, write: bool, what: str) -> None:
        """Raise BorrowError if host code may not touch bytes [lo, hi) now."""
        if not self._logs or not checks_enabled():
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
