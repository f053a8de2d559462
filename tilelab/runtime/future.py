"""``tl.Future``: a pending launch (or graph replay) and the borrows it holds."""
from __future__ import annotations

from typing import Any, Callable

from tilelab.runtime.ledger import LEDGER, LaunchRecord

__all__ = ["Future"]


class Future:
    """The result of ``kernel.launch_async(...)`` or ``graph.replay()``.

    Until its completion is observed (``wait()``, or ``done()`` returning True) the
    launch keeps shared borrows on what it reads and exclusive borrows on what it
    writes: conflicting host access raises ``tl.BorrowError`` instead of racing.
    Dropping a future unobserved keeps its memory alive until the work has finished.

    Completion is tracked with a CUDA event recorded on the launch's stream the first
    time it is needed (``wait``, ``done`` or the future being dropped), so launching
    itself records nothing; such an event also covers later work on that stream, which
    only makes ``wait`` conservative.

    Example:
        >>> fut = add.launch_async(z.partition(256), x, y)   # doctest: +SKIP
        >>> fut.then(scale, w.partition(256), z).wait()      # doctest: +SKIP
    """

    __slots__ = ("_record", "_stream", "_event", "_error_map", "__weakref__")

    def __init__(self, record: LaunchRecord, *, stream: Any = None, event: Any = None,
                 error_map: Callable[[Exception], Exception] | None = None):
        self._record = record
        self._stream = stream      # a cuda.core Stream, or None for completed CPU work
        self._event = event
        self._error_map = error_map
        if stream is None:
            record.query = _true
        else:
            record.query = self._query

    @property
    def kernel(self) -> str:
        return self._record.kernel

    @property
    def stream(self) -> Any:
        """The stream the work was launched on (None for the CPU backend)."""
        return self._stream

    def _ensure_event(self) -> Any:
        if self._event is None:
            self._event = self._stream.record()
        return self._event

    def _query(self) -> bool:
        return self._ensure_event().is_done

    def wait(self) -> None:
        """Block until the work is finished, then release its borrows."""
        if self._record.observed:
            return
        if self._stream is not None:
            try:
                self._ensure_event().sync()
            except Exception as e:  # a fault inside the kernel surfaces here
                if self._error_map is not None:
                    raise self._error_map(e) from None
                raise
        LEDGER.observe(self._record)

    def done(self) -> bool:
        """True when the work has finished (which also releases its borrows)."""
        if self._record.observed:
            return True
        if self._record.query():
            self.wait()
            return True
        return False

    def then(self, kernel: Any, *args: Any, **kwargs: Any) -> "Future":
        """Launch ``kernel(*args)`` on the same stream, after this work.

        Stream order makes the second launch see the first one's results, so it may
        read what this one writes without waiting on the host.
        """
        return kernel.launch_async(*args, stream=self._stream, **kwargs)

    def __del__(self) -> None:
        rec = getattr(self, "_record", None)
        if rec is None or rec.observed:
            return
        try:
            if self._stream is not None:
                ev = self._ensure_event()
                rec.query = lambda: ev.is_done
            LEDGER.orphan(rec)
        except Exception:  # interpreter shutdown: nothing left to protect
            pass

    def __repr__(self) -> str:
        state = "done" if self._record.observed else "pending"
        return f"<tl.Future {self._record.kernel} ({state}), launched at {self._record.site}>"


def _true() -> bool:
    return True
