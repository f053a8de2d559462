"""Prepared calls: the cache that makes a repeated library call with ``out=`` cheap, and
the library constants and self-cleaning workspaces such calls may read (see
:mod:`tilelab.kernels._host` for what may be cached).

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
import enum
import functools
import operator
import sys
import weakref
from typing import Any, Callable

import numpy as np

import tilelab as tl
from tilelab.compiler.safety.kinds import ParamKind, writes
from tilelab.kernels._host.args import hash_once, state_without_hash  # noqa: F401 (moved)
from tilelab.kernels._host.plan import Ready
from tilelab.kernels._host.wrappers import _LOCK, _WRAPPERS, TorchState, _is_torch, _wrap, record
from tilelab.runtime import native as _native

__all__ = ["CallCache", "register_constant", "workspace", "has_workspace", "clear_caches",
           "cache_info", "hash_once", "state_without_hash"]


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
#: numpy's own scalar types, exactly (keyed by repr: np.float32(1) is not
#: np.float64(1)); ml_dtypes' are told by their module (see _numpy_scalar)
_NUMPY_SCALARS = frozenset(np.sctypeDict.values())
#: numbers and strings whose exact type is none of the above: never keys
_DERIVED = (int, float, str, bytes, np.generic)
_Tensor = tl.Tensor


def _numpy_scalar(t: type) -> bool:
    """Whether ``t`` is exactly one of numpy's or ml_dtypes' scalar types (no subclass)."""
    return t in _NUMPY_SCALARS or (t.__module__ == "ml_dtypes" and
                                   issubclass(t, np.generic))


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
    if t is float or _numpy_scalar(t):
        return repr(v)
    if t is tuple:
        return tuple((type(x), _part(x, users)) for x in v)
    if isinstance(v, enum.Enum):   # a member (an activation): by its class and name
        return ("enum", t, v._name_)
    if isinstance(v, _DERIVED):
        # a subclass of a number or string: keyed by value, its own __hash__/__eq__
        # would run at every lookup; the call runs uncached (and a kernel launch
        # refuses such a value: tilelab.compiler.values)
        raise _Uncacheable
    e = record(v)   # a foreign array's cached wrapper, still exact (the common case)
    if e is not None:
        users.append(e.tensor)
        return id(e.tensor)
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
            if writes(kind):
                now.append(id(st))
            if kind != ParamKind.OUT and id(st) not in user_storages and \
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
    """One prepared call: its launches and result as templates (see :func:`_freeze`).

    ``fixed`` holds the launches themselves when no launch argument is held weakly
    (they reference views and scratch, not the caller's tensor objects), so that a
    hit only thaws the result."""

    __slots__ = ("users", "launches", "result", "single", "callbacks", "fixed", "seen",
                 "used", "__weakref__")

    def __init__(self, users: tuple, launches: tuple, result: tuple, single: bool):
        self.users, self.launches = users, launches
        self.result, self.single = result, single
        self.fixed = tuple((kern, template) for kern, template, weak in launches) \
            if not any(weak for _, _, weak in launches) else None
        #: the key of this entry's record in its cache's ``_seen`` (None: none yet;
        #: ``_NEVER``: its calls cannot be recorded)
        self.seen = None
        #: reached through that record since the cache last looked (see CallCache)
        self.used = False

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

    def plan(self, users: list) -> Ready | None:
        """The launches with today's objects, if ``users`` are the tensors it was made
        for; None when they are not, or one of its objects is gone."""
        if len(users) != len(self.users):
            return None
        for r, u in zip(self.users, users):
            if r() is not u:
                return None
        return self.ready()

    def ready(self) -> Ready | None:
        """The launches with today's objects (the caller checked that they are this
        entry's); None when one of them is gone. (Written without helper calls: this
        is every hit's path.)"""
        launches = self.fixed
        if launches is None:
            launches = []
            for kern, template, weak in self.launches:
                args = _thaw(template, weak)
                if args is None:
                    return None
                launches.append((kern, args))
        template, weak = self.result
        if weak:
            result = list(template)
            for i in weak:
                t = template[i]()
                if t is None:
                    return None
                result[i] = t
        else:
            result = template
        return Ready((result[0] if self.single else tuple(result), launches))


def _immutable(v: Any) -> bool:
    """Whether ``v`` is a value whose identity fixes its cache-key part for good: None,
    bool, int, float, str, bytes, a numpy number, an enum member, a type, a dtype, or
    a tuple or frozen dataclass of such values."""
    t = type(v)
    if t in _PLAIN or t is float or _numpy_scalar(t) or isinstance(
            v, (enum.Enum, type, np.dtype)):
        return True
    if t is tuple:
        return all(map(_immutable, v))
    if _is_torch_dtype(v):
        return True
    params = getattr(t, "__dataclass_params__", None)
    return params is not None and params.frozen and \
        all(_immutable(getattr(v, f.name)) for f in dataclasses.fields(v))


def _is_torch_dtype(v: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(v, torch.dtype)


class _Seen:
    """A prepared call as reached with these very argument objects, for the next call
    with them to skip building and hashing its key.

    It is filed under the ids of the objects (``CallCache._seen``), and keeps them: the
    immutable values themselves (``keep``), everything else through weak references
    (``weak``; tensors, torch tensors). While every one of these is alive, no other
    object can have its id, so a call filed under the same ids passes the very same
    objects: its key is the one this call had. Torch tensors must also still have
    what their cached wrappers were made with (``state``, a :class:`TorchState`, over
    the values at ``pick``). The entry, held weakly, is the one that key reached: an
    entry evicted from the cache is gone here too.
    """

    __slots__ = ("keep", "weak", "entry", "pick", "one", "at", "state", "fast")

    def __init__(self, keep: tuple, weak: tuple, entry: _Entry, foreign: list,
                 state: TorchState | None):
        self.keep, self.weak, self.entry = keep, weak, weakref.ref(entry)
        self.pick = operator.itemgetter(*foreign) if foreign else None
        #: the torch tensors' positions among the values (the native hit path's pick)
        self.at = tuple(foreign)
        self.one, self.state = len(foreign) == 1, state
        #: the state's check in one C call (TorchState.fast), or None
        self.fast = state.fast if state is not None else None

    @classmethod
    def make(cls, values: tuple, entry: _Entry, users: list) -> "_Seen | None":
        """The record of a call with ``values`` that reached ``entry`` with the tensors
        ``users``; None when a value is neither a tensor, a torch tensor with a cached
        wrapper among ``users``, nor :func:`_immutable`."""
        keep, weak, foreign = [], [], []
        for i, v in enumerate(values):
            if isinstance(v, _Tensor):
                weak.append(weakref.ref(v))
            elif _immutable(v):
                keep.append(v)
            elif _is_torch(v):
                weak.append(weakref.ref(v))
                foreign.append(i)
            else:
                return None
        state = None
        if foreign:
            xs = tuple(values[i] for i in foreign)
            records = [record(x) for x in xs]
            mine = {id(u) for u in users}
            if any(r is None or id(r.tensor) not in mine for r in records):
                return None
            state = TorchState.of(xs, tuple(r.sig for r in records))
            if state is None:
                return None
        return cls(tuple(keep), tuple(weak), entry, foreign, state)

    def ready(self, values: tuple) -> Ready | None:
        """The entry's launches if ``values`` (filed under this record's ids) are the
        very objects recorded, torch tensors unchanged; None otherwise."""
        for r in self.weak:
            if r() is None:    # gone: its id may be another object's now
                return None
        pick = self.pick
        if pick is not None:
            xs = (pick(values),) if self.one else pick(values)
            fast = self.fast
            held = fast(xs) if fast is not None else None
            if not (self.state.holds_exactly(xs) if held is None else held):
                return None
        entry = self.entry()
        if entry is None:
            return None
        entry.used = True
        return entry.ready()


#: [native module, its call_hit bound to _Seen, _Entry and Ready (or None)]
_HIT: list = [None, None]


def _bind_hit(mod: Any) -> Any:
    """The native module's ``call_hit`` (``CallCache.prepare``'s lookup by identity in
    C, see native_launch.c), bound to these classes once per module; None for a module
    without it or that cannot read these classes' slots."""
    try:
        mod.bind_calls(_Seen, _Entry, Ready)
        hit = mod.call_hit
    except (AttributeError, TypeError):
        hit = None
    _HIT[:] = [mod, hit]
    return hit


_CACHES: "weakref.WeakSet[CallCache]" = weakref.WeakSet()
#: see CallCache._remember
_STRAYS, _COLD = 8, 256
_NEVER = object()


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

    A call repeated with the very same argument objects is found first by their
    identities (``_seen``): no key is built or hashed, and torch tensors are checked in
    a few C calls for all of them (see :class:`_Seen`).

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
        #: the calls last seen, by (keyword names, ids of the argument objects)
        self._seen: dict[tuple, _Seen] = {}
        self.hits = self.misses = 0
        #: calls that found their entry under other argument objects than its record's,
        #: in a row; and how many calls skip the lookup by identity for that reason
        self._strays = self._cold = 0
        _CACHES.add(self)

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget every prepared call."""
        with _LOCK:
            self._entries.clear()
            self._seen.clear()

    def prepare(self, build: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        out = kwargs.get("out")
        if out is None or (type(out) is tuple and not _outputs_given(out)):
            return build(*args, **kwargs)     # fresh outputs: nothing to reuse
        values = args + tuple(kwargs.values())
        if self._cold:   # the objects kept changing: their ids would not be found
            self._cold -= 1
            return self._prepare(build, args, kwargs, values, None)
        mod = _NATIVE[0]
        if mod is None:
            ids = (*kwargs, *map(id, values))
        else:
            hit = _HIT[1] if _HIT[0] is mod else _bind_hit(mod)
            if hit is None:
                ids = mod.call_ids(kwargs, values)
            else:   # the lookup below in C: the Ready, or the ids where Python decides
                ids = hit(self._seen, kwargs, values)
                if type(ids) is Ready:
                    self.hits += 1
                    if self._strays:
                        self._strays = 0
                    return ids
        seen = self._seen.get(ids)   # (dict reads are atomic: no lock)
        if seen is not None:
            ready = seen.ready(values)
            if ready is not None:
                self.hits += 1
                if self._strays:
                    self._strays = 0
                return ready
        return self._prepare(build, args, kwargs, values, ids)

    def _prepare(self, build: Callable[..., Any], args: tuple, kwargs: dict,
                 values: tuple, ids: tuple) -> Any:
        """``prepare`` by the call's key (see :func:`_part`)."""
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
                    if ids is not None:
                        self._remember(ids, values, entry, users)
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
                self._make_room()
                self._entries[key] = entry
                if ids is not None:
                    self._remember(ids, values, entry, users)
        return call

    def _make_room(self) -> None:
        """Evict the least recently used entries down to ``capacity - 1`` (under
        _LOCK). A hit through ``_seen`` does not reorder the entries (that would hash
        the full key); it marks its entry ``used`` instead, which gives the entry a
        second chance here: it moves to the recent end, unmarked."""
        entries = self._entries
        while len(entries) >= self.capacity:
            key, entry = entries.popitem(last=False)
            if entry.used:
                entry.used = False
                entries[key] = entry

    def _remember(self, ids: tuple, values: tuple, entry: _Entry, users: list) -> None:
        """Record the call (see :class:`_Seen`), once per entry: an entry reached again
        under other objects (a float made afresh for each call, say) keeps its first
        record, which a later call with those objects may still hit; an entry whose
        calls cannot be recorded (see :meth:`_Seen.make`) is marked ``_NEVER``. Calls
        that reach such entries (``_STRAYS`` of them, no hit by identity between) make
        the next ``_COLD`` calls skip the lookup by identity, which could not find
        them. (Under _LOCK.)"""
        old = entry.seen
        if old is _NEVER or (old is not None and old != ids and old in self._seen):
            self._strays += 1
            if self._strays >= _STRAYS:
                self._strays, self._cold = 0, _COLD
            return
        self._strays = 0
        seen = _Seen.make(values, entry, users)
        if seen is None:     # (values of other kinds: the entry's calls pass them again)
            entry.seen = _NEVER
            return
        if old is not None:
            self._seen.pop(old, None)
        while len(self._seen) >= self.capacity:
            del self._seen[next(iter(self._seen))]
        self._seen[ids] = seen
        entry.seen = ids


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
