"""Host-side plumbing of the kernel library: running a call's launches (synchronously or
asynchronously) and the two caches that make a repeated call cheap.

Why this exists: a library call such as ``matmul(a, b, out=c)`` validates its
arguments, wraps foreign arrays (torch, numpy) as tensors, makes views and partitions,
picks a config and only then launches. Done from scratch on every call this costs tens
of microseconds of Python, and it hands the runtime *new* view, partition and scalar
objects every time, so the runtime's prepared-launch path (which recognises a launch
repeated with the very same argument objects) never fires. Two caches fix that:

* **Foreign wrappers** (:func:`as_tensor`): the ``tl.Tensor`` borrowing a torch tensor or
  a numpy array is reused for as long as the array still describes the same memory —
  pointer, shape, strides, dtype, device, read-only flag (numpy) and ``requires_grad``
  (torch) are compared on *every* use — and, for a CUDA torch tensor, only while torch's
  current stream is tilelab's stream (a fresh wrap would otherwise order the two
  streams). Other producers (cupy, jax, ...) are wrapped per call.
* **Prepared calls** (:class:`CallCache`): when a call's outputs are given (``out=``),
  its launches — kernels and their exact argument objects — are kept, keyed by the
  identity of every tensor passed and the value of every other argument. The same call
  again relaunches them: same objects, so the runtime's prepared launch is reused.

What may never happen is a cached call computing with stale data or writing into the
wrong buffer, so an entry is only made when every tensor a launch reads is a view of a
tensor the caller passed (read live at each launch), of a library constant, or of
scratch an earlier launch of the same call writes in full. A plan that copied an input
(a non-contiguous operand made contiguous, say) is never cached. Outputs the library
allocates (``out=None``) are fresh per call, so such calls are never cached either.
Cached entries hold the caller's tensors only weakly: an entry disappears when one of
them is collected, so an ``id`` can never name another object.

Example:
    >>> import tilelab as tl
    >>> from tilelab.kernels import add
    >>> x = tl.ones(8, device="cpu"); z = tl.empty(8, device="cpu")
    >>> out, fut = add(x, x, out=z, sync=False)
    >>> fut.wait(); out.numpy()[:2]
    array([2., 2.], dtype=float32)
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import sys
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

import numpy as np

import tilelab as tl
from tilelab.runtime import native as _native

__all__ = ["Plan", "run_launches", "done_future", "as_tensor", "hinted", "CallCache",
           "register_constant", "workspace", "has_workspace", "clear_caches", "cache_info",
           "TensorResult", "PairResult", "hash_once", "state_without_hash"]

#: What a host function with one output returns: the tensor, or with ``sync=False``
#: ``(tensor, future)`` (the future is None inside a ``tl.graph()`` capture).
TensorResult = Union[tl.Tensor, tuple[tl.Tensor, Optional[tl.Future]]]
#: The same for two outputs: ``(y, h)``, or ``((y, h), future)``.
PairResult = Union[tuple[tl.Tensor, tl.Tensor],
                   tuple[tuple[tl.Tensor, tl.Tensor], Optional[tl.Future]]]


# ======================================================================================
# running launches


def run_launches(launches: list[tuple[Any, tuple]], result: Any, *, sync: bool = True,
                 stream: Any = None) -> Any:
    """Launch ``(kernel, args)`` pairs in order; ``result`` when ``sync``, else
    ``(result, future)``.

    Synchronous launches each wait (the library's behaviour since its first version).
    Asynchronous ones go to one stream (``stream``, default tilelab's), so the returned
    future — the last launch's — covers the earlier launches too: observing it observes
    every earlier launch of its stream. A call with nothing to launch returns a future
    that is already done; inside ``with tl.graph():`` the launches are recorded and the
    future is None (replay the graph to run them).

    Example:
        >>> import tilelab as tl
        >>> run_launches([], "out", sync=False)[1].done()
        True
    """
    if sync:
        for kern, args in launches:
            kern(*args, stream=stream)
        return result
    fut = done_future() if not launches else None
    for kern, args in launches:
        fut = kern.launch_async(*args, stream=stream)
    return result, fut


def hinted(kernel: tl.Kernel, **hints: Any) -> tl.Kernel:
    """``kernel`` itself, or a copy compiled with these cuTile hints (``occupancy``,
    ``num_ctas``, ``num_worker_warps``; hints that are None are left out). Each set of
    hints makes one copy per kernel, once, so repeated launches find it prepared.

    Example:
        >>> from tilelab.kernels.examples import vector_add
        >>> hinted(vector_add, occupancy=None) is vector_add
        True
        >>> hinted(vector_add, occupancy=2) is hinted(vector_add, occupancy=2)
        True
    """
    given = {k: v for k, v in hints.items() if v is not None}
    if not given:
        return kernel
    return _hinted_copy(kernel.__wrapped__, dataclasses.replace(kernel.options, **given))


@functools.cache
def _hinted_copy(fn: Callable, options: Any) -> tl.Kernel:
    """The copy keeps every other option of the kernel (unsafe, check_bounds, ...)."""
    from tilelab.runtime.kernel import Kernel

    return Kernel(fn, options)


def done_future(what: str = "(nothing to launch)") -> tl.Future:
    """A future that is already observed: what an asynchronous call with no launch
    (an empty tensor) returns, so callers can always ``wait()``.

    Example:
        >>> f = done_future(); f.done(), f.wait()
        (True, None)
    """
    from tilelab.runtime.ledger import LaunchRecord

    rec = LaunchRecord(what, "<no launch>", None)
    rec.observed = True
    return tl.Future(rec)


@dataclass
class Plan:
    """The launches of one library call, in order, and what the call returns.

    ``run()`` launches them; tests and tools can instead pass each ``(kernel, args)`` to
    ``tl.interpret`` (race detection, traces) or to ``kernel.compile``.

    Example:
        >>> import tilelab as tl
        >>> from tilelab.kernels.matmul import MatmulConfig, plan_matmul
        >>> a = tl.randn(1, 64, device="cpu", seed=0); b = tl.randn(64, 32, device="cpu")
        >>> p = plan_matmul(a, b, config=MatmulConfig(tm=1, tn=16, tk=16, schedule="gemv",
        ...                                           split_k=2))
        >>> [k.name for k, _ in p.launches]
        ['splitk_partial_kernel', 'splitk_reduce_kernel']
        >>> p.run().shape
        (1, 32)
    """

    out: Any
    launches: list[tuple[Any, tuple]]

    def run(self, sync: bool = True, stream: Any = None) -> Any:
        """Launch every kernel in order; returns ``out``, or ``(out, future)`` with
        ``sync=False`` (see :func:`run_launches`).

        Example:
            >>> Plan(out=None, launches=[]).run() is None
            True
            >>> Plan(out=None, launches=[]).run(sync=False)[1].done()
            True
        """
        return run_launches(self.launches, self.out, sync=sync, stream=stream)


# ======================================================================================
# configs as cache keys


def hash_once(self: Any) -> int:
    """``__hash__`` for a frozen config dataclass, computed once per object: a cached
    call keys on the config it is passed (``config=`` of every call of a tuned
    kernel), and hashing a dozen fields each time was a microsecond of its host time.
    Assign it in the class body (``__hash__ = hash_once``; a dataclass keeps an
    explicit hash) and pair it with :func:`state_without_hash` as ``__getstate__``, so a
    pickled config (str hashes differ between processes) hashes afresh where it lands.

    Example:
        >>> from tilelab.kernels.matmul import MatmulConfig
        >>> c = MatmulConfig(tm=64)
        >>> hash(c) == hash(MatmulConfig(tm=64)) and c == MatmulConfig(tm=64)
        True
    """
    h = self.__dict__.get("_hash")
    if h is None:
        h = hash(tuple([getattr(self, f.name) for f in dataclasses.fields(self)]))
        object.__setattr__(self, "_hash", h)
    return h


def state_without_hash(self: Any) -> dict:
    """``__getstate__`` of a :func:`hash_once` class: its fields, not the cached hash.

    Example:
        >>> import pickle
        >>> from tilelab.kernels.matmul import MatmulConfig
        >>> c = MatmulConfig(); _ = hash(c)
        >>> "_hash" in pickle.loads(pickle.dumps(c)).__dict__
        False
    """
    return {k: v for k, v in self.__dict__.items() if k != "_hash"}


# ======================================================================================
# foreign wrappers


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


def _torch_signature(torch: Any, x: Any) -> tuple | None:
    if x.is_cuda:
        # from_dlpack makes tilelab's stream wait for torch's current stream; a reused
        # wrapper skips that, which is only the same when they are one stream
        from tilelab.runtime.device import gpu

        if torch.cuda.current_stream(x.device).cuda_stream != gpu().stream_handle:
            return None
    return (x.data_ptr(), tuple(x.shape), x.stride(), x.dtype, x.device, x.requires_grad)


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
    from tilelab.runtime.tensor import _native_device

    before = sys.getrefcount(x)
    t = tl.tensor(x, device=_native_device(x))
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
    from tilelab.runtime.tensor import _native_device

    return tl.tensor(x, device=_native_device(x))


# ======================================================================================
# constants


_CONSTANTS: "weakref.WeakSet[Any]" = weakref.WeakSet()


def register_constant(t: tl.Tensor) -> tl.Tensor:
    """Mark ``t``'s memory as a library constant (never written, e.g. a placeholder for
    an absent bias) that cached calls may read. Returns ``t``.

    Example:
        >>> import tilelab as tl
        >>> register_constant(tl.zeros(1, device="cpu")).shape
        (1,)
    """
    _CONSTANTS.add(t.storage)
    return t


# ======================================================================================
# self-cleaning workspaces


_WORKSPACE_STORAGES: "weakref.WeakSet[Any]" = weakref.WeakSet()
_WORKSPACES: dict[tuple, tl.Tensor] = {}


def workspace(device: str, shape: tuple[int, ...], dtype: str) -> tl.Tensor:
    """A zero-filled scratch tensor shared by every call that needs this shape and
    dtype, for kernels that leave it all zeros again when they finish (the fused
    split-K GEMM sums into one with atomics and zeroes it as it reads the sums back).

    Such scratch holds nothing between launches, so a prepared call may relaunch with
    it. Launches on one stream run one after another; two in flight on different
    streams would share it, which the borrow ledger refuses (``tl.BorrowError``).
    Inside a ``tl.graph()`` capture only an existing workspace can be had (allocating
    there is an error): :func:`has_workspace` says whether it exists.

    Example:
        >>> w = workspace("cpu", (2, 3), "float32")
        >>> w is workspace("cpu", (2, 3), "float32"), float(w.numpy().sum())
        (True, 0.0)
    """
    key = (device, tuple(shape), dtype)
    with _LOCK:
        t = _WORKSPACES.get(key)
        if t is None:
            t = _WORKSPACES[key] = tl.zeros(tuple(shape), dtype, device=device)
            _WORKSPACE_STORAGES.add(t.storage)
    return t


def has_workspace(device: str, shape: tuple[int, ...], dtype: str) -> bool:
    """Whether :func:`workspace` of this shape already exists (no allocation needed).

    Example:
        >>> has_workspace("cpu", (7, 7, 7), "int32")
        False
    """
    return (device, tuple(shape), dtype) in _WORKSPACES


# ======================================================================================
# prepared calls


#: [the native module or None] (``tilelab.runtime.native``'s state, never rebound): once
#: it is loaded (at first GPU use) its ``call_key`` builds the same key as the Python
#: below, in C: keying ten arguments one Python call each was a third of a cached
#: call's host time
_NATIVE = _native._STATE


class _Uncacheable(Exception):
    """An argument that cannot be part of a cache key (the call runs uncached)."""


_PLAIN = frozenset((bool, int, str, bytes, type(None)))
_Tensor = tl.Tensor


def _is_array(v: Any) -> bool:
    return isinstance(v, np.ndarray) or hasattr(v, "__dlpack__") or \
        hasattr(v, "__cuda_array_interface__") or hasattr(v, "__array_interface__")


def _part(v: Any, users: list) -> Any:
    """The cache-key part of one argument: a tensor (or a foreign array, through its
    cached wrapper) by identity — collected in ``users`` — anything else by value
    (floats by ``repr``, which keeps -0.0 apart from 0.0). Raises _Uncacheable for
    what cannot be keyed: unhashable values, arrays whose wrapper cannot be cached."""
    t = type(v)
    if t is _Tensor or isinstance(v, _Tensor):
        users.append(v)
        return id(v)
    if t in _PLAIN:
        return v
    if t is float or isinstance(v, np.generic):
        return repr(v)
    if t is tuple:
        return tuple((type(x), _part(x, users)) for x in v)
    if _is_array(v):
        try:
            w, cached = _wrap(v)
        except Exception:
            raise _Uncacheable from None   # the uncached call words the error
        if not cached:
            raise _Uncacheable
        users.append(w)
        return id(w)
    try:
        hash(v)
    except TypeError:
        raise _Uncacheable from None
    return v


def _resolved(v: Any) -> Any:
    """``v`` with foreign arrays replaced by their cached wrappers (after :func:`_part`
    accepted it, so they are cached), as the call's builder is to see them."""
    if type(v) is tuple:
        return tuple(_resolved(x) for x in v)
    if isinstance(v, _Tensor) or type(v) in _PLAIN or not _is_array(v):
        return v
    return _wrap(v)[0]


def _outputs_given(out: Any) -> bool:
    if out is None:
        return False
    if type(out) is tuple:
        return all(o is not None for o in out)
    return True


def _kinds(kern: Any) -> tuple[str, ...]:
    return tuple(p.kind for p in kern.definition.analysis.params)


def _reads_fresh(launches: list[tuple[Any, tuple]], user_storages: set[int]) -> bool:
    """Whether every tensor the launches read is a caller's tensor (or a view of one),
    a library constant, a self-cleaning :func:`workspace`, or scratch that an earlier
    launch of the call wrote: then a relaunch reads live data, never a stale copy."""
    Partition = tl.Partition
    written: set[int] = set()
    for kern, args in launches:
        kinds = _kinds(kern)
        now = []
        for kind, a in zip(kinds, args):
            t = a.tensor if isinstance(a, Partition) else a
            if not isinstance(t, tl.Tensor):
                continue
            st = t.storage
            if kind in ("Out", "InOut", "Raw"):
                now.append(id(st))
            if kind != "Out" and id(st) not in user_storages and \
                    id(st) not in written and st not in _CONSTANTS and \
                    st not in _WORKSPACE_STORAGES:
                return False
        written.update(now)
    return True


def _freeze(values: tuple, user_ids: set[int]) -> tuple[tuple, tuple[int, ...]]:
    """(template, positions held weakly): the caller's tensors and their partitions are
    referenced weakly, so the cache never keeps them alive; everything else (views,
    scratch, the exact scalar objects whose ids the runtime keys on) strongly."""
    Partition = tl.Partition
    out, weak = [], []
    for i, a in enumerate(values):
        root = a.tensor if isinstance(a, Partition) else a
        if id(root) in user_ids and isinstance(root, tl.Tensor):
            out.append(weakref.ref(a))
            weak.append(i)
        else:
            out.append(a)
    return tuple(out), tuple(weak)


def _thaw(template: tuple, weak: tuple[int, ...]) -> tuple | None:
    if not weak:
        return template
    args = list(template)
    for i in weak:
        a = template[i]()
        if a is None:
            return None
        args[i] = a
    return tuple(args)


class _Entry:
    """One prepared call: its launches and result as templates (see :func:`_freeze`)."""

    __slots__ = ("users", "launches", "result", "single", "callbacks")

    def __init__(self, users: tuple, launches: tuple, result: tuple, single: bool):
        self.users, self.launches = users, launches
        self.result, self.single = result, single

    @classmethod
    def make(cls, call: Any, users: list) -> "_Entry | None":
        """An entry for ``call`` (a Plan-like: ``.launches`` and ``.out``), or None when
        it may not be cached: nothing to launch (empty tensors; some such calls write
        on the host), a launch reading data that a relaunch would not refresh, or a
        result that is not the caller's memory (it would need more than the launches)."""
        launches = list(call.launches)
        if not launches:
            return None
        user_ids = {id(u) for u in users}
        user_storages = {id(u.storage) for u in users}
        if not _reads_fresh(launches, user_storages):
            return None
        out = call.out
        single = type(out) is not tuple
        if not all(isinstance(t, tl.Tensor) and id(t.storage) in user_storages
                   for t in ((out,) if single else out)):
            return None
        frozen = tuple((k,) + _freeze(tuple(args), user_ids) for k, args in launches)
        result = _freeze((out,) if single else out, user_ids)
        return cls(tuple(weakref.ref(u) for u in users), frozen, result, single)

    def plan(self, users: list) -> Plan | None:
        """The launches with today's objects; None when one of them is gone."""
        if len(users) != len(self.users):
            return None
        for r, u in zip(self.users, users):
            if r() is not u:
                return None
        launches = []
        for kern, template, weak in self.launches:
            args = _thaw(template, weak)
            if args is None:
                return None
            launches.append((kern, args))
        result = _thaw(*self.result)
        if result is None:
            return None
        return Plan(result[0] if self.single else result, launches)


_CACHES: "weakref.WeakSet[CallCache]" = weakref.WeakSet()


def _evict(cache_ref: weakref.ref, key: tuple, _dead: Any = None) -> None:
    cache = cache_ref()
    if cache is not None:
        with _LOCK:
            cache._entries.pop(key, None)


class CallCache:
    """Prepared calls of one host function (an LRU of ``capacity`` entries).

    ``prepare(build, *args, **kwargs)`` returns ``build(*args, **kwargs)`` — a Plan-like
    object with ``launches`` and ``out`` — or, for a call repeated with the same tensor
    objects and equal other arguments, the launches prepared the first time. Only calls
    whose outputs are given (``out=`` not None, every element of an ``out`` tuple too)
    are cached. ``build`` must depend on nothing but its arguments and the tensors'
    (immutable) metadata.

    Example:
        >>> import tilelab as tl
        >>> from tilelab.kernels.elementwise import _unary_call
        >>> cache = CallCache("relu")
        >>> x = tl.ones(4, device="cpu"); z = tl.empty(4, device="cpu")
        >>> p1 = cache.prepare(_unary_call, x, "relu", "relu", out=z)
        >>> p2 = cache.prepare(_unary_call, x, "relu", "relu", out=z)
        >>> p1.launches[0][1] == p2.launches[0][1], len(cache)
        (True, 1)
    """

    def __init__(self, name: str, capacity: int = 64):
        self.name = name
        self.capacity = capacity
        self._entries: "collections.OrderedDict[tuple, _Entry]" = collections.OrderedDict()
        self.hits = self.misses = 0
        _CACHES.add(self)

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget every prepared call."""
        with _LOCK:
            self._entries.clear()

    def prepare(self, build: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if not _outputs_given(kwargs.get("out")):
            return build(*args, **kwargs)     # fresh outputs: nothing to reuse
        values = args + tuple(kwargs.values())
        users: list = []
        mod = _NATIVE[0]
        try:
            key = (tuple(kwargs), tuple(map(type, values)),
                   tuple([_part(v, users) for v in values])) if mod is None else \
                mod.call_key(tuple(kwargs), values, users, _part, _Tensor)
        except _Uncacheable:
            return build(*args, **kwargs)
        with _LOCK:
            entry = self._entries.get(key)
            if entry is not None:
                plan = entry.plan(users)
                if plan is not None:
                    self._entries.move_to_end(key)
                    self.hits += 1
                    return plan
                del self._entries[key]
            self.misses += 1
        call = build(*map(_resolved, args), **{k: _resolved(v) for k, v in kwargs.items()})
        entry = _Entry.make(call, users)
        if entry is not None:
            me = weakref.ref(self)
            # dropping any caller tensor drops the entry (and what it keeps alive)
            entry.callbacks = [weakref.ref(u, functools.partial(_evict, me, key))
                               for u in {id(u): u for u in users}.values()]
            with _LOCK:
                while len(self._entries) >= self.capacity:
                    self._entries.popitem(last=False)
                self._entries[key] = entry
        return call


def clear_caches() -> None:
    """Forget every cached foreign wrapper and prepared call of the kernel library.

    Cached entries never change results; this only releases what they keep alive (a
    wrapped torch tensor stays referenced by its cached wrapper until then, or until
    the next new array is wrapped and finds it otherwise unreferenced).

    Example:
        >>> from tilelab.kernels import clear_caches
        >>> clear_caches()
    """
    with _LOCK:
        _WRAPPERS.clear()
        _WORKSPACES.clear()
        for cache in list(_CACHES):
            cache.clear()


def cache_info() -> dict[str, Any]:
    """Sizes and hit counts of the library's caches (for tests and tuning).

    Example:
        >>> sorted(cache_info())
        ['calls', 'wrappers']
    """
    with _LOCK:
        return {"wrappers": len(_WRAPPERS),
                "calls": {c.name: {"entries": len(c), "hits": c.hits, "misses": c.misses}
                          for c in list(_CACHES)}}
