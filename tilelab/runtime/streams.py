"""Streams: tilelab's default stream, new streams, and foreign ones (torch, cupy).

Launches go to a stream; launches on one stream run in order, which is why the borrow
ledger lets them share memory without waiting on the host.
"""
from __future__ import annotations

from typing import Any

from tilelab.errors import LaunchError

__all__ = ["resolve_stream", "new_stream", "stream_key"]

_wrapped: dict[int, Any] = {}


def new_stream() -> Any:
    """A new non-blocking stream on the GPU (``tl.stream()``).

    Example:
        >>> s = tl.stream()                     # doctest: +SKIP
        >>> add.launch_async(z.partition(256), x, y, stream=s).wait()   # doctest: +SKIP
    """
    from tilelab.runtime.device import gpu

    return gpu().device.create_stream()


def resolve_stream(stream: Any = None) -> Any:
    """A cuda.core Stream for ``stream``: None (tilelab's default), a cuda.core Stream, or
    any object with ``__cuda_stream__`` (torch.cuda.Stream, cupy streams)."""
    from tilelab.runtime.device import gpu

    g = gpu()
    if stream is None:
        return g.stream
    from cuda.core import Stream

    if isinstance(stream, Stream):
        return stream
    if hasattr(stream, "__cuda_stream__"):
        _, handle = stream.__cuda_stream__()
        entry = _wrapped.get(handle)
        if entry is None:
            # keep the foreign owner alive alongside our wrapper of its handle
            entry = _wrapped[handle] = (g.device.create_stream(stream), stream)
        return entry[0]
    raise LaunchError(f"stream={stream!r} is not a CUDA stream",
                      hint="pass tl.stream(), a cuda.core Stream, or a torch/cupy stream")


def stream_key(s: Any) -> Any:
    """A hashable identity of a stream, for the borrow ledger."""
    try:
        return int(s.handle)
    except Exception:
        return id(s)
