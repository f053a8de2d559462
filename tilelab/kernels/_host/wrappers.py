"""Foreign wrappers: the ``tl.Tensor`` borrowing a torch tensor or numpy array, reused
while the array still describes the same memory (see :mod:`tilelab.kernels._host`).

Checking that a torch tensor is unchanged reads its pointer, shape, strides, dtype,
device, ``requires_grad`` and torch's current stream: through torch's Python API that
is seven calls per tensor, a microsecond or more. :class:`TorchState` checks the same
in a few C calls: one ``data_ptr`` per tensor, one ``TensorGuards.check`` for all of
them (the C++ check ``torch.compile`` guards tensors with: exact Python type, dispatch
keys, which include the device type, dtype, device index, ``requires_grad``, sizes and
strides) and one read of the current stream per device. Where torch lacks that guard,
or it fails a self-test, or it says no (it also compares thread-local dispatch state,
so under ``torch.autocast`` it can refuse what is unchanged), the exact signatures are
compared instead; a guard never turns a changed tensor into a hit. Once the native
module is loaded (at first GPU use, :mod:`tilelab.runtime.native`) its ``torch_holds``
makes those calls from C (:attr:`TorchState.fast`), without a Python frame.

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
from tilelab.runtime import foreign as _foreign, native as _native
from tilelab.runtime.foreign import torch_stream_handle

__all__ = ["as_tensor", "record", "TorchState", "WRAPPER_CAPACITY"]


class _Wrapped:
    """A cached wrapper: a weak reference to the array, the signature it was wrapped
    with, the tensor, how many references to the array the tensor itself holds, and
    (torch) the :class:`TorchState` that checks the signature fast."""

    __slots__ = ("ref", "sig", "tensor", "pins", "state")

    def __init__(self, ref: weakref.ref, sig: tuple, tensor: tl.Tensor, pins: int,
                 state: "TorchState | None"):
        self.ref, self.sig, self.tensor, self.pins, self.state = ref, sig, tensor, pins, state


#: wrappers of foreign arrays by id(array); bounded, because a wrapper keeps its array
#: (and its memory) alive while cached
_WRAPPERS: "collections.OrderedDict[int, _Wrapped]" = collections.OrderedDict()
WRAPPER_CAPACITY = 64
_LOCK = threading.RLock()


def _torch_signature(x: Any) -> tuple:
    # a CUDA tensor is borrowed on torch's current stream, which its launches then run
    # on (tilelab.runtime.foreign): a wrapper made on another stream is not this one
    stream = torch_stream_handle(x.get_device()) if x.is_cuda else None
    return (x.data_ptr(), tuple(x.shape), x.stride(), x.dtype, x.device, stream,
            x.requires_grad)


def _is_torch(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _signature(x: Any) -> tuple | None:
    """What must not change for a cached wrapper of ``x`` to stay exact; None when ``x``
    is not an array whose wrapper may be cached."""
    if type(x) is np.ndarray:
        return (x.__array_interface__["data"], x.shape, x.strides, x.dtype)
    if _is_torch(x):
        return _torch_signature(x)
    return None


# ======================================================================================
# torch tensors, checked in a few C calls


#: [TensorGuards, or False where torch has none that passes the self-test; None: not
#: looked at yet]
_GUARDS: list = [None]


def _guard_type(torch: Any) -> Any:
    """torch's ``TensorGuards`` if it tells apart what a wrapper depends on (checked
    once on small CPU tensors), else None."""
    kind = _GUARDS[0]
    if kind is None:
        kind = False
        try:
            from torch._C._dynamo.guards import TensorGuards

            with torch.inference_mode(False):   # (tensors that may require grad)
                kind = _passes_self_test(torch, TensorGuards) and TensorGuards
        except Exception:  # noqa: BLE001 - another torch: the exact comparison serves
            pass
        _GUARDS[0] = kind
    return kind or None


def _passes_self_test(torch: Any, guards: Any) -> bool:
    """Whether ``guards`` accepts an equal tensor and refuses each change a wrapper
    depends on that a CPU can show (shape, rank, strides, dtype, requires_grad,
    type)."""
    a = torch.zeros(2, 3)
    g = guards(a, dynamic_dims_sizes=None, dynamic_dims_strides=None)
    others = (torch.zeros(3, 2), torch.zeros(2, 3, 1), a.as_strided((2, 3), (1, 2)),
              a.double(), torch.zeros(2, 3, requires_grad=True),
              a.as_subclass(type("_Sub", (torch.Tensor,), {})))
    return g.check(torch.zeros(2, 3)) and not any(g.check(b) for b in others)


class TorchState:
    """The signatures of some torch tensors' cached wrappers (pointer, shape, strides,
    dtype, device, current stream, ``requires_grad``), and a fast check that the
    tensors still have them (see the module docstring).

    Example:
        >>> import torch
        >>> x = torch.zeros(4)
        >>> s = TorchState.of((x,), (_torch_signature(x),))
        >>> s.holds((x,)), s.holds((torch.zeros(4),))
        (True, False)
    """

    __slots__ = ("ptrs", "guard", "sigs", "streams", "ptr_of", "fast")

    def __init__(self, ptrs: tuple, guard: Any, sigs: tuple, streams: tuple, ptr_of: Any):
        self.ptrs, self.guard, self.sigs = ptrs, guard, sigs
        self.streams, self.ptr_of = streams, ptr_of
        #: ``fast(xs)``: :meth:`holds` in one C call (True, False, or None where the
        #: Python check must decide), or None without the native module
        self.fast = self._fast()

    def _fast(self) -> Any:
        """The native ``torch_holds`` bound to this state, or None (no native module, or
        no raw stream getter that agrees with torch's public one). GPU tensors load the
        module if no launch has yet (a first call wraps its tensors before it launches)."""
        if self.streams and _native._STATE[1] is None:
            _native.load()
        mod = _native._STATE[0]
        check = getattr(mod, "torch_holds", None)
        if check is None:
            return None
        torch = sys.modules["torch"]
        public, raw = None, None
        if self.streams:
            torch_stream_handle(self.streams[0][0])      # (validates the raw getter)
            public, raw = _foreign._RAW[0]
            if raw is None:
                return None
        guard = self.guard.check if self.guard is not None else None
        return functools.partial(check, self.ptrs, self.ptr_of, guard, self.streams,
                                 torch.cuda, public, raw)

    @classmethod
    def of(cls, xs: tuple, sigs: tuple) -> "TorchState | None":
        """The state of torch tensors ``xs`` whose wrappers were made with signatures
        ``sigs``; None when the tensors do not have those signatures now."""
        torch = sys.modules["torch"]
        kind = _guard_type(torch)
        guard = None
        if kind is not None:
            try:
                guard = kind(*xs, dynamic_dims_sizes=None, dynamic_dims_strides=None)
            except Exception:  # noqa: BLE001 - (the exact comparison serves)
                guard = None
        # after the guard is made: what it encodes is what the wrappers were made with
        if tuple(map(_torch_signature, xs)) != sigs or (guard is not None and
                                                        not guard.check(*xs)):
            return None
        streams = tuple({(x.get_device(), s[5]) for x, s in zip(xs, sigs)
                         if s[5] is not None})
        return cls(tuple(s[0] for s in sigs), guard, sigs, streams, torch.Tensor.data_ptr)

    def holds(self, xs: tuple) -> bool:
        """Whether torch tensors ``xs`` (the ones this was made of) still have the
        signatures (their memory, layout and torch's current stream)."""
        fast = self.fast
        if fast is not None:
            held = fast(xs)
            if held is not None:
                return held
        return self.holds_exactly(xs)

    def holds_exactly(self, xs: tuple) -> bool:
        """:meth:`holds` in Python: what decides where the C check cannot (no native
        module, no guard, a refusing guard, another stream getter)."""
        if tuple(map(self.ptr_of, xs)) != self.ptrs:
            return False
        guard = self.guard
        if guard is None or not guard.check(*xs):
            return tuple(map(_torch_signature, xs)) == self.sigs
        for index, handle in self.streams:
            if torch_stream_handle(index) != handle:
                return False
        return True


# ======================================================================================
# the cache


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


def record(x: Any) -> _Wrapped | None:
    """The cached wrapper record of ``x`` (``.tensor``, ``.sig``) while it still
    describes ``x`` exactly (the very object, its signature unchanged), else None: not
    wrapped yet, changed, or not an array. Reads without the lock: each dictionary
    operation is atomic, and a record never changes once made.

    Example:
        >>> import numpy as np
        >>> a = np.ones(2, np.float32)
        >>> record(a) is None and record(as_tensor(a)) is None   # (a tensor: no record)
        True
        >>> record(a).tensor is as_tensor(a)
        True
        >>> a.shape = (2, 1); record(a) is None
        True
    """
    e = _WRAPPERS.get(id(x))
    if e is None or e.ref() is not x:
        return None
    state = e.state
    if not (state.holds((x,)) if state is not None else _signature(x) == e.sig):
        return None
    try:
        _WRAPPERS.move_to_end(id(x))
    except KeyError:   # dropped meanwhile by another thread (the record is still exact)
        pass
    return e


def _wrap(x: Any) -> tuple[tl.Tensor | None, bool]:
    """(tensor borrowing ``x``, whether it is a cached borrow); (None, False) when ``x``
    is not a torch tensor or numpy array that can be cached. Errors of wrapping
    propagate (the caller words them)."""
    e = record(x)
    if e is not None:
        return e.tensor, True
    sig = _signature(x)
    if sig is None:
        return None, False
    from tilelab.runtime.foreign import borrow

    before = sys.getrefcount(x)
    t = borrow(x)
    pins = sys.getrefcount(x) - before
    ptr = sig[0][0] if isinstance(sig[0], tuple) else sig[0]
    if not t.storage.borrowed or t.data_ptr != ptr:
        return t, False             # a copy: it would go stale, never cache it
    state = TorchState.of((x,), (sig,)) if type(x) is not np.ndarray else None
    if state is None and type(x) is not np.ndarray:
        return t, False             # changed while it was being wrapped
    key = id(x)
    with _LOCK:
        _sweep_wrappers()
        while len(_WRAPPERS) >= WRAPPER_CAPACITY:
            _WRAPPERS.popitem(last=False)
        _WRAPPERS[key] = _Wrapped(weakref.ref(x, functools.partial(_drop_wrapper, key)),
                                  sig, t, pins, state)
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
