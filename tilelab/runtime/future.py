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
    time it is needed (``wait`` or ``done``), so launching itself records nothing; such
    an event also covers later work on that stream, which only makes ``wait``
    conservative. Observing a launch also observes every earlier launch of its stream.

    Example:
        >>> fut = add.launch_async(z.partition(256), x, y)   # doctest: +SKIP
        >>> fut.then(scale, w.partition(256), z).wait()      # doctest: +SKIP
    """

    __slots__ = ("_record", "_error_map", "__weakref__")

    def __init__(self, record: LaunchRecord,
                 error_map: Callable[[Exception], Exception] | None = None):
        self._record = record
        self._error_map = error_map

    @property
    def kernel(self) -> str:
        return self._record.kernel

    @property
    def stream(self) -> Any:
        """The stream the work was launched on (None for the CPU backend)."""
        return self._record.cuda_stream

    def wait(self) -> None:
        """Block until the work is finished, then release its borrows."""
        rec = self._record
        if rec.observed:
            return
        if rec.cuda_stream is not None:
            try:
                rec.ensure_event().sync()
            except Exception as e:  # a fault inside the kernel surfaces here
                if self._error_map is not None:
                    raise self._error_map(e) from None
                raise
        LEDGER.observe(rec)

    def done(self) -> bool:
        """True when the work has finished (which also releases its borrows)."""
        if self._record.observed:
            return True
        if self._record.poll():
            self.wait()
            return True
        return False

    def then(self, kernel: Any, *args: Any, **kwargs: Any) -> "Future":
        """Launch ``kernel(*args)`` on the same stream, after this work.

        Stream order makes the second launch see the first one's results, so it may
        read what this one writes without waiting on the host.
        """
        return kernel.launch_async(*args, stream=self._record.cuda_stream, **kwargs)

    def __del__(self) -> None:
        rec = self._record
        if not rec.observed:
            rec.orphaned = True  # its memory stays borrowed until a later observation

    def __repr__(self) -> str:
        state = "done" if self._record.observed else "pending"
        return f"<tl.Future {self._record.kernel} ({state}), launched at {self._record.site}>"
