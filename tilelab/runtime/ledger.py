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

CPU-backend launches (and ``tl.interpret``, CPU graph replays) check and take their
borrows in one step before the kernel runs, and hold them while it runs: host access or
a launch from another thread that conflicts raises BorrowError naming the running
kernel and its launching line. When the launch returns, a sync launch's borrows end; an
async one's stay until its future is observed, and are released at a later CPU launch
once the future is dropped. ``tl.unchecked()`` counts per thread.
"""
from __future__ import annotations

import collections
import contextlib
import os
import sys
import threading
import types
from typing import Any, Callable

from tilelab.compiler.tile_shapes import caller_location
from tilelab.errors import (BorrowError, LaunchError, SourceLocation, TilelabError,
                            display_filename)

__all__ = ["LaunchRecord", "Ledger", "unchecked", "checks_enabled", "call_site", "raw_site",
           "call_location", "locate", "place", "Site", "LEDGER"]

_state = threading.local()
_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
#: how many ``unchecked`` blocks and graph captures are open in any thread: when zero,
#: hot paths skip the per-thread lookups entirely (changed only under ``_MODES_LOCK``)
SPECIAL_MODES = [0]
_MODES_LOCK = threading.Lock()
#: the log key of CPU-backend work while it runs: unordered (observing one of its
#: records releases only that one) and never skipped as "the same stream"
RUNNING = "cpu:running"


def add_special_mode(delta: int) -> None:
    """Count an ``unchecked`` block or graph capture opening (+1) or closing (-1)."""
    with _MODES_LOCK:
        SPECIAL_MODES[0] += delta


def _depth() -> list:
    """This thread's ``[number of open unchecked blocks]`` (a list, so that a block
    closed on another thread lowers the count of the thread that opened it)."""
    box = getattr(_state, "unchecked", None)
    if box is None:
        box = _state.unchecked = [0]
    return box


def checks_enabled() -> bool:
    """False inside ``with tl.unchecked():`` (of this thread)."""
    if not SPECIAL_MODES[0]:
        return True
    box = getattr(_state, "unchecked", None)
    return box is None or not box[0]


class unchecked(contextlib.ContextDecorator):
    """Skip the launch-time alias and borrow checks of the launches inside the block.

    This is a local, visible opt-out: use it for launches you have reasoned about
    yourself (for example, in-place updates through two views you know are disjoint).
    It applies to the thread that opened it and nests per thread. A block closed on
    another thread (a generator finished elsewhere) ends the opening thread's opt-out.
    It does not lift the refusals that no reasoning can make safe: a written tensor
    whose own elements overlap, negative strides, read-only or copied outputs.

    Example:
        >>> import tilelab as tl
        >>> with tl.unchecked():
        ...     pass   # launches here are not alias- or borrow-checked
    """

    def __init__(self):
        self._boxes: list = []

    def _recreate_cm(self) -> unchecked:   # as a decorator: one block per call
        return unchecked()

    def __enter__(self) -> None:
        box = _depth()
        with _MODES_LOCK:
            box[0] += 1
            SPECIAL_MODES[0] += 1
        self._boxes.append(box)

    def __exit__(self, *exc: object) -> bool:
        if self._boxes:
            box = self._boxes.pop()
            with _MODES_LOCK:
                if box[0] > 0:
                    box[0] -= 1
                    SPECIAL_MODES[0] -= 1
        return False


def _user_frame(f: Any) -> Any:
    """The first frame from ``f`` outward whose code lies outside tilelab (or None)."""
    while f is not None and f.f_code.co_filename.startswith(_PKG):
        f = f.f_back
    return f


def place(filename: str, line: int) -> str:
    """A line of the user's code as messages name it: ``file:line``, or ``In[3], line 5``
    for a notebook or IPython cell (whose code lives in a temporary file such as
    ``/tmp/ipykernel_123/456.py``, a name the user never saw), as IPython's tracebacks
    name cells.

    Example:
        >>> place("kernels.py", 12)
        'kernels.py:12'
    """
    shown = display_filename(filename)
    return f"{filename}:{line}" if shown == filename else f"{shown}, line {line}"


class Site:
    """A line of the user's code, named by :func:`place` only when a message shows it
    (naming a notebook cell asks IPython, which costs microseconds a launch must not
    pay).

    Example:
        >>> str(Site("kernels.py", 12))
        'kernels.py:12'
    """

    __slots__ = ("filename", "line")

    def __init__(self, filename: str, line: int):
        self.filename, self.line = filename, line

    def __str__(self) -> str:
        return place(self.filename, self.line)

    def __repr__(self) -> str:
        return f"Site({self.filename!r}, {self.line})"


def call_site() -> Site | str:
    """Where the first caller frame outside tilelab is (where the user launched): a
    :class:`Site` (``str()`` names it as :func:`place` does), or ``"<unknown>"``."""
    f = _user_frame(sys._getframe(1))
    return "<unknown>" if f is None else Site(f.f_code.co_filename, f.f_lineno)


def call_location() -> SourceLocation | None:
    """Where the user's code called into tilelab: file, line and the columns of the
    call expression (the same frame :func:`call_site` names). For error messages only:
    it walks the stack and reads the code's position table."""
    return caller_location()


def locate(err: TilelabError) -> TilelabError:
    """Give a launch-time error the user's launching line, unless it has a location."""
    if err.location is None:
        err.location = call_location()
    return err


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
    where it was launched: a :class:`Site` or a string, or raw (file, line) pairs of the
    calling frames, formatted only when an error message needs them. ``kernel``,
    ``stream``, ``query``, ``cuda_stream`` and ``borrows`` live in its
    :class:`LaunchInfo`.
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
        """Where the launch was made, as :func:`place` names it (``In[3], line 5`` in a
        notebook)."""
        s = self._site
        if isinstance(s, types.CodeType):   # a PreparedRecord's
            return place(s.co_filename, code_line(s, self._offset))
        if isinstance(s, tuple):
            for fn, line in s:
                if not fn.startswith(_PKG):
                    return place(fn, line)
            return "<unknown>"
        return str(s)

    @property
    def running(self) -> bool:
        """Whether this is CPU work that is running now (see :meth:`Ledger.begin`)."""
        return self.info.stream == RUNNING and not self.observed

    def describe(self) -> str:
        state = "running" if self.running else "pending"
        return f"{state} kernel {self.kernel!r} launched at {self.site}"


class PreparedRecord(LaunchRecord):
    """A launch of a prepared launch (``launch.prepared``, the repeated path): its shared
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


#: the log key of finished CPU-backend work whose future was handed out
CPU_STREAM = "cpu"
_RUNNING_HINT = ("the launch is running on the CPU backend in another thread; touch this "
                 "memory after that launch has returned (join the thread, or wait on its "
                 "future)")


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
        #: rebound (launch.prepared's prepared launches keep a reference to it).
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
            if key is None or key == RUNNING:   # unordered: only this record
                self._remove(log, rec)
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

    def _remove(self, log: collections.deque, rec: LaunchRecord) -> None:
        """Release ``rec`` alone from ``log`` (lock held)."""
        try:
            log.remove(rec)
        except ValueError:
            pass
        self._drop(rec)

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
        """After a device-wide synchronize: every pending record is complete (CPU work
        still running on another thread is not)."""
        with self._lock:
            for key, log in list(self._logs.items()):
                if key == RUNNING:
                    continue
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
                        if rec.running:
                            raise BorrowError(
                                f"launch of {kernel!r} {what} {param!r}, which the "
                                f"{rec.describe()} {theirs} (as {rparam!r}) on another "
                                "thread", hint=_RUNNING_HINT)
                        raise BorrowError(
                            f"launch of {kernel!r} {what} {param!r}, which the "
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
                    if rec.running:
                        raise locate(BorrowError(
                            f"{what} touches memory that the {rec.describe()} {action} "
                            f"(as {rparam!r}) on another thread", hint=_RUNNING_HINT))
                    raise locate(BorrowError(
                        f"{what} touches memory that the {rec.describe()} "
                        f"{action} (as {rparam!r}){extra}",
                        hint="call .wait() on the launch's future first (or "
                             "tl.synchronize()); a pending launch keeps its borrows until "
                             "its completion is observed"))

    # ---- CPU work: borrows held while it runs -----------------------------------------
    def begin(self, rec: LaunchRecord, claims: list[tuple[Any, int, int, bool, str]],
              keepalive: Any = None, storages: Any = ()) -> None:
        """Check ``claims`` against every pending and running launch and register
        ``rec`` as running CPU work, in one step under the lock (so two threads cannot
        both pass the check and then run on the same memory). Until :meth:`end`, host
        access and launches from other threads that conflict raise BorrowError naming
        it. ``storages`` are re-checked for a free that raced with the launch."""
        with self._lock:
            self.check_launch(rec.kernel, claims, CPU_STREAM)
            for st in storages:
                if st._freed:
                    raise LaunchError(f"launch of {rec.kernel!r}: an argument's memory was "
                                      f"freed (by {st.freed_by}) before it could run",
                                      hint="free memory only after the launches using it")
            rec.info.stream = RUNNING
            rec.borrows = claims
            if keepalive is not None:
                rec.keepalive = keepalive
            log = self._logs.get(RUNNING)
            if log is None:
                log = self._logs[RUNNING] = collections.deque()
            log.append(rec)

    def end(self, rec: LaunchRecord, keep: bool) -> None:
        """CPU work registered with :meth:`begin` has returned. ``keep``: its future
        goes to the user, so its borrows stay (filed as finished work of the CPU
        "stream") until it is observed or the future is dropped; else they end now.

        Finished CPU work whose future was dropped is released here, at the next CPU
        launch, so dropped futures never accumulate."""
        with self._lock:
            log = self._logs.get(RUNNING)
            if log is not None:
                try:
                    log.remove(rec)
                except ValueError:
                    pass
                if not log:
                    self._unregister(RUNNING, log)
            if not keep or rec.observed:
                self._drop(rec)
                return
            rec.info.stream = CPU_STREAM
            log = self._logs.get(CPU_STREAM)
            if log is None:
                log = self._logs[CPU_STREAM] = collections.deque()
            while log and (log[0].orphaned or log[0].observed):
                self._drop(log.popleft())
            log.append(rec)
            if not len(log) & 255:   # now and then: dropped futures further back
                kept = [r for r in log if not (r.orphaned or r.observed)]
                if len(kept) != len(log):
                    for r in log:
                        if r.orphaned:
                            self._drop(r)
                    log.clear()
                    log.extend(kept)

    def check_free(self, space: Any, lo: int, hi: int, what: str) -> None:
        """Raise BorrowError if a pending launch still uses bytes [lo, hi) of a space."""
        self.check_host(space, lo, hi, write=True, what=what)


LEDGER = Ledger()
