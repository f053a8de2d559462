"""``tl.Future``: a pending launch (or graph replay) and the borrows it holds."""
from __future__ import annotations

from typing import Any, Callable

from tilelab.runtime.ledger import LEDGER, LaunchRecord, finalize_unobserved

__all__ = ["Future"]


class Future:
    """The result of ``kernel.launch_async(...)`` or ``graph.replay()``.

    Until its completion is observed (``wait()``, or ``done()`` returning True) the
    launch keeps shared borrows on what it reads and exclusive borrows on what it
    writes: conflicting host access raises ``tl.BorrowError`` instead of racing.

    Example:
        >>> fut = add.launch_async(z.partition(256), x, y)   # doctest: +SKIP
        >>> fut.then(scale, w.partition(256), z).wait()      # doctest: +SKIP
    """

    def __init__(self, record: LaunchRecord, *, wait_fn: Callable[[], None],
                 stream: Any = None, error_map: Callable[[Exception], Exception] | None = None):
        self._record = record
        self._wait_fn = wait_fn
        self.stream = stream
        self._error_map = error_map
        finalize_unobserved(self, record)

    @property
    def kernel(self) -> str:
        return self._record.kernel

    def wait(self) -> None:
        """Block until the work is finished, then release its borrows."""
        if self._record.observed:
            return
        try:
            self._wait_fn()
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
        return kernel.launch_async(*args, stream=self.stream, **kwargs)

    def __repr__(self) -> str:
        state = "done" if self._record.observed else "pending"
        return f"<tl.Future {self._record.kernel} ({state}), launched at {self._record.site}>"
