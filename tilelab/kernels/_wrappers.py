"""Foreign wrappers: the ``tl.Tensor`` borrowing a torch tensor or numpy array, reused
while the array still describes the same memory (see :mod:`tilelab.kernels._host`).

Example:
    >>> import numpy as np
    >>> a = np.ones(3, np.float32)
    >>> as_tensor(a) is as_tensor(a)
    True
"""
from __future__ import annotations

import collections
import functools
import sys
import threading
import weakref
from typing import Any

import numpy as np

import tilelab as tl

__all__ = ["as_tensor", "WRAPPER_CAPACITY"]


class _Wrapped:
    """A cached wrapper: a weak reference to the array, the signature it was wrapped
    with, the tensor, and how many references to the array the tensor itself holds."""

    __slots__ = ("ref", "sig", "tensor", "pins")

    def __init__(self, ref: weakref.ref, sig: tuple, tensor: tl.Tensor, pins: int):
        self.ref, self.sig, self.tensor, self.pins = ref, sig, tensor, pins


#: wrappers of foreign arrays by id(array); bounded, because a wrapper keeps its array
#: (and its memory) alive while cached
_WRAPPERS: "collections.OrderedDict[int, _Wrapped]" = collections.OrderedDict()
WRAPPER_CAPACITY = 64
_LOCK = threading.RLock()


def _torch_signature(torch: Any, x: Any) -> tuple:
    # a CUDA tensor is borrowed on torch's current stream, which its launches then run
    # on (tilelab.runtime.foreign): a wrapper made on another stream is not this one
    stream = torch.cuda.current_stream(x.device).cuda_stream if x.is_cuda else None
    return (x.data_ptr(), tuple(x.shape), x.stride(), x.dtype, x.device, stream,
            x.requires_grad)


def _signature(x: Any) -> tuple | None:
    """What must not change for a cached wrapper of ``x`` to stay exact; None when ``x``
    is not an array whose wrapper may be cached."""
    if type(x) is np.ndarray:
        return (x.__array_interface__["data"], x.shape, x.strides, x.dtype)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return _torch_signature(torch, x)
    return None


def _drop_wrapper(key: int, _ref: Any = None) -> None:
    with _LOCK:
        e = _WRAPPERS.get(key)
        if e is not None and e.ref() is None:
            del _WRAPPERS[key]


def _sweep_wrappers() -> None:
    """Forget wrappers whose array only the wrapper itself still references.

    A wrapper borrows its array's memory and, through the runtime's borrow, keeps the
    array object alive, so a weak reference alone would never see it die: count the
    references instead (``pins`` is what the wrapper holds; 2 more are this frame's)."""
    for key, e in list(_WRAPPERS.items()):
        obj = e.ref()
        if obj is None or sys.getrefcount(obj) - 2 <= e.pins:
            _WRAPPERS.pop(key, None)
        del obj


def _wrap(x: Any) -> tuple[tl.Tensor | None, bool]:
    """(tensor borrowing ``x``, whether it is a cached borrow); (None, False) when ``x``
    is not a torch tensor or numpy array that can be cached. Errors of wrapping
    propagate (the caller words them)."""
    sig = _signature(x)
    if sig is None:
        return None, False
    key = id(x)
    with _LOCK:
        e = _WRAPPERS.get(key)
        if e is not None and e.ref() is x and e.sig == sig:
            _WRAPPERS.move_to_end(key)
            return e.tensor, True
    from tilelab.runtime.foreign import borrow

    before = sys.getrefcount(x)
    t = borrow(x)
    pins = sys.getrefcount(x) - before
    ptr = sig[0][0] if isinstance(sig[0], tuple) else sig[0]
    if not t.storage.borrowed or t.data_ptr != ptr:
        return t, False             # a copy: it would go stale, never cache it
    with _LOCK:
        _sweep_wrappers()
        while len(_WRAPPERS) >= WRAPPER_CAPACITY:
            _WRAPPERS.popitem(last=False)
        _WRAPPERS[key] = _Wrapped(weakref.ref(x, functools.partial(_drop_wrapper, key)),
                                  sig, t, pins)
    return t, True


def as_tensor(x: Any) -> tl.Tensor:
    """``x`` as a tensor: itself, a (cached) borrow of a torch tensor or numpy array, or
    ``tl.tensor(x)`` on the device where ``x`` lives.

    Example:
        >>> import numpy as np
        >>> a = np.ones(3, np.float32)
        >>> as_tensor(a) is as_tensor(a)          # the borrow is reused ...
        True
        >>> a.shape = (1, 3); as_tensor(a).shape  # ... while it still describes a
        (1, 3)
    """
    if isinstance(x, tl.Tensor):
        return x
    t, _ = _wrap(x)
    if t is not None:
        return t
    from tilelab.runtime.foreign import borrow

    return borrow(x)
