"""Foreign GPU arrays as launch arguments: the caller's stream.

Triton and cuTile Python launch on the caller's current stream, and so does tilelab: a
torch (or cupy) GPU tensor passed to a launch or a library call is borrowed on its
framework's current stream — the import makes no stream wait for another, since the
launch runs on that very stream — and the borrow's storage remembers the stream
(``Storage.stream``), which the launches using it then run on unless ``stream=`` names
another. Tensors made with ``tl.tensor`` or ``tl.from_dlpack`` keep tilelab's stream.

Example:
    >>> import numpy as np
    >>> borrow(np.ones(3, np.float32)).storage.stream is None   # CPU arrays have none
    True
"""
from __future__ import annotations

import sys
from typing import Any

__all__ = ["current_stream", "torch_stream_handle", "borrow", "BORROWED"]

#: [how many storages were borrowed on a framework's stream] (never rebound): while 0,
#: no launch can default to a foreign stream, and callers may skip looking for one
BORROWED = [0]

#: [(torch.cuda.current_stream as last seen, the raw getter that agreed with it, or
#: None)] (never rebound): see :func:`torch_stream_handle`
_RAW: list = [(None, None)]


class _Handle:
    """A stream handle with ``__cuda_stream__`` (what ``resolve_stream`` takes), keeping
    the framework's stream object alive."""

    __slots__ = ("handle", "owner")

    def __init__(self, handle: int, owner: Any):
        self.handle, self.owner = int(handle), owner

    def __cuda_stream__(self) -> tuple[int, int]:
        return 0, self.handle


def current_stream(x: Any) -> Any:
    """The current stream of the framework that made GPU array ``x``, as an object with
    ``__cuda_stream__``: torch's ``torch.cuda.current_stream(x.device)``, cupy's
    ``cupy.cuda.get_current_stream()``. None for CPU arrays and for producers without
    a current stream (jax, numba: their launches run on tilelab's stream).

    Example:
        >>> import numpy as np
        >>> current_stream(np.zeros(2)) is None
        True
    """
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return torch.cuda.current_stream(x.device) if x.is_cuda else None
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(x, cupy.ndarray):
        s = cupy.cuda.get_current_stream()
        return _Handle(s.ptr, s)
    return None


def torch_stream_handle(index: int) -> int:
    """The handle (``cudaStream_t`` as an int) of torch's current stream on CUDA device
    ``index``: ``torch.cuda.current_stream(index).cuda_stream``, read in one call.

    The public call builds a ``torch.cuda.Stream`` object each time (microseconds);
    ``torch._C._cuda_getCurrentRawStream(index)``, which Triton's launcher reads too,
    returns the handle alone. It is used once it has given the public call's answer,
    checked again whenever ``torch.cuda.current_stream`` is another function (a stand-in
    or a patched torch); where it is missing or disagrees, the public call is used.

    Example:
        >>> torch_stream_handle(0)                                  # doctest: +SKIP
        0
    """
    torch = sys.modules["torch"]
    public = torch.cuda.current_stream
    seen, raw = _RAW[0]
    if seen is not public:
        raw = _agreeing_raw_getter(torch, public, index)
        _RAW[0] = (public, raw)
    if raw is not None:
        return raw(index)
    return public(index).cuda_stream


def _agreeing_raw_getter(torch: Any, public: Any, index: int) -> Any:
    """torch's raw current-stream getter if it answers as ``public`` does, else None."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    try:
        got = raw(index) if raw is not None else None
        return raw if type(got) is int and got == public(index).cuda_stream else None
    except Exception:  # noqa: BLE001 - a torch without CUDA, or another signature
        return None


def borrow(x: Any) -> Any:
    """A tensor borrowing foreign array ``x`` where it lives, without a copy; a torch or
    cupy GPU array is imported on its framework's current stream, which the tensor's
    launches then default to (see the module docstring).

    Example:
        >>> import numpy as np
        >>> borrow(np.arange(3, dtype=np.int32)).numpy()
        array([0, 1, 2], dtype=int32)
    """
    from tilelab.runtime.tensor import _native_device, tensor

    where = _native_device(x)
    stream = current_stream(x) if where not in (None, "cpu") else None
    if stream is None:
        return tensor(x, device=where)
    from tilelab.runtime.tensor_type import borrow_dlpack

    t = borrow_dlpack(x, stream=-1)   # the launches run on x's own stream: no wait
    t.storage.stream = stream
    BORROWED[0] += 1
    return t
