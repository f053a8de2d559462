"""Prepared calls: the cache that makes a repeated library call with ``out=`` cheap, the
library constants and self-cleaning workspaces such calls may read, and hashing of
configs as cache keys (see :mod:`tilelab.kernels._host` for what may be cached).

Example:
    >>> import tilelab as tl
    >>> from tilelab.kernels import add
    >>> x = tl.ones(8, device="cpu"); z = tl.empty(8, device="cpu")
    >>> _ = add(x, x, out=z); _ = add(x, x, out=z)
    >>> cache_info()["calls"]["binary"]["hits"] >= 1
    True
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import weakref
from typing import Any, Callable

import numpy as np

import tilelab as tl
from tilelab.kernels._plan import Plan
from tilelab.kernels._wrappers import _LOCK, _WRAPPERS, _wrap
from tilelab.runtime import native as _native

__all__ = ["CallCache", "register_constant", "workspace", "has_workspace", "clear_caches",
           "cache_info", "hash_once", "state_without_hash"]


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
