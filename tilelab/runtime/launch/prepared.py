"""Prepared GPU launches: everything one launch needs, made once, so that a launch
repeated with the very same argument objects only re-checks that they are those
objects and unfreed, checks the borrow ledger, and calls the driver (by the path
:data:`~tilelab.runtime.launch.driver.DRIVER` chose). A launch of the same tensors with
other scalar values (a decode position, a step counter) runs the same prepared launch
with only the scalars' words packed again (:meth:`PreparedLaunch.rebound`): scalars are
launch values, never a reason to specialize, check, prepare or keep anything anew.

``native_launch.c``'s ``nl_hot`` runs the same steps as :meth:`PreparedLaunch.run` for
a repeated async launch on the default stream, reading the slots of these classes
(bound once by :func:`bind_hot`): keep the two alike.
"""
from __future__ import annotations

import ctypes
import os
import weakref
from sys import _getframe
from typing import Any, Sequence

import numpy as np

from tilelab import config
from tilelab.compiler.values import constant_key
from tilelab.errors import LaunchError
from tilelab.runtime import graph_capture
from tilelab.runtime.future import Future
from tilelab.runtime.ledger import (LEDGER, SPECIAL_MODES, LaunchInfo, PreparedRecord,
                                    checks_enabled)
from tilelab.runtime.memory import FREE_EPOCH

from .arguments import _tensor_types, tensor_of
from .driver import DRIVER, driver_error, launch_failed
from .plan import LaunchPlan

__all__ = ["PreparedLaunch", "bind_hot"]

#: the tilelab package's folder: frames there are tilelab's, not the user's
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) \
    + os.sep
_SCALARS = (bool, int, float)
#: what ``PreparedLaunch.run`` returns when the prepared launch does not describe the
#: arguments it was given (it launched nothing): the caller takes the full path
_STALE = object()
#: the borrow ledger's per-stream logs (never rebound), read on every prepared launch
_LOGS = LEDGER._logs
_CTYPE = {"int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32,
          "int64": ctypes.c_int64, "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16,
          "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64, "float32": ctypes.c_float,
          "float64": ctypes.c_double, "bool": ctypes.c_bool}


class _Pin:
    """The arguments of a prepared launch, held by its pending launches' records (one
    object for all of them, rather than a tuple each for the garbage collector to
    scan); the prepared launch refers to it weakly."""

    __slots__ = ("__weakref__", "args")

    def __init__(self, args: tuple):
        self.args = args


def _dead_ref() -> None:
    """A weak reference whose object is gone (what ``PreparedLaunch.pin`` starts as)."""


class _Same:
    """Equal only to this very object: stands for a scalar argument in a prepared
    launch's ``match`` (``1``, ``1.0`` and ``True`` compare and hash alike, but a kernel
    specializes on their types)."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value   # also keeps it alive, so that no other object takes its id

    def __eq__(self, other: object) -> bool:
        return other is self.value

    __hash__ = None  # type: ignore[assignment]


def _match_of(args: Sequence[Any]) -> tuple | None:
    """What ``args == match`` checks a later launch's arguments against: a weak proxy of
    each tensor or partition (equal only to its referent, as these compare by identity,
    and raising ReferenceError once it is gone) and each scalar as :class:`_Same`. One C
    comparison then tells whether a launch passes the very objects prepared for, without
    keeping them alive. None when an argument type defines its own ``==``."""
    out = []
    for a in args:
        if type(a) in _SCALARS:
            out.append(_Same(a))
        elif type(a).__eq__ is object.__eq__:
            out.append(weakref.proxy(a))
        else:
            return None
    return tuple(out)


def all_tilelab_args(args: Sequence[Any]) -> bool:
    """Whether every array argument is a tilelab Tensor or Partition (cacheable by id).

    Example:
        >>> import numpy as np, tilelab as tl
        >>> all_tilelab_args((tl.zeros(2, device="cpu"), 1.0)), all_tilelab_args((np.zeros(2),))
        (True, False)
    """
    Tensor, Partition = _tensor_types()
    return all(type(a) in _SCALARS or isinstance(a, (Tensor, Partition)) for a in args)


def _scalar_slots(plan: LaunchPlan) -> tuple[tuple[int, int, str], ...]:
    """(argument index, word index, dtype) of each run-time scalar of a launch of
    ``plan``, the word index counting the ``cutile_python_v1`` words (an array's
    pointer, shape and strides; a scalar's value; nothing for a constant)."""
    out, at = [], 0
    for i, lay in enumerate(plan.spec.layouts):
        if lay.kind == "scalar":
            out.append((i, at, lay.dtype))
        at += lay.words
    return tuple(out)


def _same_dtype(dtype: str, value: Any) -> bool:
    """Whether an exact Python scalar ``value`` specializes to ``dtype`` as the one it
    replaces did (an int beyond int32 is an int64 parameter: another plan)."""
    if dtype == "int32":
        return -2**31 <= value <= 2**31 - 1
    if dtype == "int64":
        return not -2**31 <= value <= 2**31 - 1
    return True


def _scalar_ctype(dtype: str, value: Any):
    """A ctypes value holding a scalar parameter's bytes (half types by their bits)."""
    if dtype in _CTYPE:
        return _CTYPE[dtype](value)
    from tilelab.compiler.dtypes import to_numpy_dtype

    bits = np.array(value, dtype=to_numpy_dtype(dtype)).view(
        np.uint16 if to_numpy_dtype(dtype).itemsize == 2 else np.uint8)
    return (ctypes.c_uint16 if bits.dtype == np.uint16 else ctypes.c_uint8)(int(bits))


def _pack_params(plan: LaunchPlan, args: list[Any]) -> tuple:
    """(address of a void* array, the array, the values it points to) for
    cuLaunchKernel."""
    values = []
    for i, lay in enumerate(plan.spec.layouts):
        if lay.kind == "array":
            w = tensor_of(args[i])._launch_words()
            idx = ctypes.c_int32 if lay.index_dtype == "int32" else ctypes.c_int64
            values.append(ctypes.c_uint64(w[0]))
            values.extend(idx(x) for x in w[1:])
        elif lay.kind == "scalar":
            values.append(_scalar_ctype(lay.dtype, args[i]))
    ptrs = (ctypes.c_void_p * max(len(values), 1))(*[ctypes.addressof(v) for v in values])
    return ctypes.addressof(ptrs), ptrs, values


def _default_stream(g: Any, tensors: list) -> tuple[Any, Any]:
    """(stream, ledger key) of a launch of ``tensors`` that names no stream: the stream
    a foreign argument was borrowed on (``Storage.stream``, the first one's), else
    tilelab's default stream."""
    for t in tensors:
        home = t.storage.stream
        if home is not None:
            from tilelab.runtime.streams import resolve_stream, stream_key

            s = resolve_stream(home)
            return s, stream_key(s)
    return g.stream, g.stream_handle


def bind_hot(mod: Any) -> Any:
    """The native module's ``hot`` bound to these classes' slots and the ledger, or
    None when it cannot bind (another layout of these classes: Python only)."""
    try:
        mod.bind_hot(PreparedLaunch, PreparedRecord, Future, LaunchInfo, FREE_EPOCH,
                     SPECIAL_MODES, _LOGS, LEDGER.push, LEDGER._appended, launch_failed,
                     _Pin, _PKG_DIR)
    except (TypeError, AttributeError):
        return None
    try:
        mod.bind_match(_Same)   # (without it the C path compares scalars through ==)
    except (TypeError, AttributeError):
        pass
    return mod.hot


# the process's launch path binds its C async path to these classes (see .driver)
DRIVER.bind_hot = bind_hot


class PreparedLaunch:
    """Everything one GPU launch needs, prepared once: the next launch with the very same
    argument objects (tensors and partitions are immutable) only re-checks that they are
    those objects and unfreed, checks the borrow ledger, and calls the driver.

    Made by the launcher at a first GPU launch (``Launcher.launch``), kept in its
    table of prepared launches when the arguments can be matched by identity.
    """

    __slots__ = ("launcher", "definition", "helpers", "changed", "name", "match", "storages",
                 "claims",
                 "words", "config", "kernel", "epoch", "free_epoch", "fault", "params",
                 "grid", "handle", "gpu", "tls", "argv", "info", "pin", "caller", "native",
                 "stream", "key", "plan", "scalars", "constant_at", "tensor_at", "pdl")

    def __init__(self, launcher: Any, plan: LaunchPlan, args: Sequence[Any],
                 norm: list[Any], grid: tuple, claims: list, cache: bool = False):
        from cuda.core import LaunchConfig

        self.launcher = launcher
        self.definition = launcher.definition
        self.helpers = launcher.definition.analysis.program
        self.changed = self.helpers.changed
        self.name = launcher.definition.name
        #: None: made for one launch only (not in the kernel's cache of prepared launches)
        self.match = _match_of(args) if cache else None
        tensors = [t for t in map(tensor_of, norm) if t is not None]
        # weak: a prepared launch must not keep memory alive after its tensors are gone
        self.storages = tuple(weakref.ref(st) for st in
                              {id(t.storage): t.storage for t in tensors}.values())
        self.claims = claims
        self.words = tuple(launcher.words(plan, norm))
        self.plan = plan
        #: where the run-time scalars are among the arguments and words, and the
        #: constants among the arguments (see rebound)
        self.scalars = _scalar_slots(plan)
        at = {i for i, _, _ in self.scalars}
        m = self.match or ()
        self.constant_at = tuple(i for i, a in enumerate(m) if type(a) is _Same
                                 and i not in at)
        self.tensor_at = tuple(i for i, a in enumerate(m) if type(a) is not _Same)
        # programmatic dependent launch: the kernel may start while the previous one
        #: of the stream finishes (it waits for it before touching memory; see
        #: LaunchPlan.pdl). On the native and cuda.core paths; the driver path does not.
        self.pdl = pdl = bool(plan.pdl) and config.pdl()
        self.config = LaunchConfig(grid=grid, block=(1, 1, 1),
                                   programmatic_stream_serialization=pdl)
        self.kernel = plan.cu_kernel
        self.grid = grid
        self.epoch = launcher.definition.helper_epoch
        self.free_epoch = FREE_EPOCH[0]
        self.fault = launcher._fault
        # The kernel parameters packed once, as the driver wants them (an array of
        # pointers to values), so that a repeated launch converts nothing.
        self.params = _pack_params(plan, norm)
        self.handle = plan.cu_kernel.handle
        self.gpu = g = DRIVER.gpu()
        #: the GPU's per-thread "context is current" flag (GPU.make_current sets it)
        self.tls = g._current
        #: the stream of a launch that names none, and its ledger key: a foreign
        #: argument's (its framework's current stream, see tilelab.runtime.foreign),
        #: else tilelab's default stream
        self.stream, self.key = _default_stream(g, tensors)
        # cuLaunchKernel's arguments for that stream, handles as plain ints
        # (cuda-bindings converts those faster than its handle objects)
        self.argv = (int(self.handle), *grid, 1, 1, 1, 0, self.key, self.params[0], 0)
        #: the same, packed for the native module's launch (None: no native module)
        prepare = DRIVER.native_prepare
        self.native = None if prepare is None else prepare(
            int(self.handle), *grid, int(self.key), self.params[0], int(pdl))
        #: what its launch records on that stream share
        self.info = LaunchInfo(self.name, self.key, None, self.stream, claims)
        self.pin = _dead_ref
        #: the code that made the last async launch, known to lie outside tilelab
        self.caller = None

    def rebound(self, args: tuple) -> tuple | None:
        """The launch words of ``args`` that pass the very tensor and partition objects
        this prepared launch was made for, the same constants, and other values of its
        run-time scalars of the same types (and int32/int64 range): ``(argv, native
        launch, words, parameters)`` with only the scalars packed again, for
        ``run(args, ..., packed=...)``; everything else (plan, grid, claims, stream)
        is this launch's. None when ``args`` differ otherwise (the caller takes the
        full path).

        ``Launcher`` files prepared launches under their tensors' ids and their scalars'
        types for this: a step counter launches through here, not through a new
        specialization or preparation, and nothing new is kept.
        """
        match = self.match
        scalars = self.scalars
        if match is None or not scalars or len(args) != len(match):
            return None
        values = list(self.params[2])
        words = list(self.words)
        old_ptrs = self.params[1]
        ptrs = type(old_ptrs).from_buffer_copy(old_ptrs)
        types = self.plan.scalar_types
        for i, at, dtype in scalars:
            v = args[i]
            if type(v) is not type(match[i].value) or not _same_dtype(dtype, v):
                return None
            values[at] = c = _scalar_ctype(dtype, v)
            ptrs[at] = ctypes.addressof(c)
            words[at] = types[i](v)
        for i in self.constant_at:   # a constant: the same value (compiled in)
            a, old = args[i], match[i].value
            if type(a) is not type(old) or constant_key(a) != constant_key(old):
                return None
        try:
            for i in self.tensor_at:     # the very objects (weak proxies compare so)
                if match[i] != args[i]:
                    return None
        except ReferenceError:           # one of them is gone
            return None
        address = ctypes.addressof(ptrs)
        prepare = DRIVER.native_prepare
        native = None if prepare is None else prepare(
            int(self.handle), *self.grid, int(self.key), address, int(self.pdl))
        return (self.argv[:9] + (address, 0), native, tuple(words), (ptrs, values))

    def valid(self) -> bool:
        """Whether the prepared launch still holds (helpers unchanged, no argument freed,
        no unchecked block or graph capture open); ``run`` asks only when one of those
        may have changed. Whether the arguments are the same objects is ``run``'s check."""
        if self.epoch != self.definition.helper_epoch or (
                self.helpers.bindings and self.helpers.changed()):
            return False
        if self.free_epoch != FREE_EPOCH[0]:
            for ref in self.storages:
                st = ref()
                if st is None or st._freed:
                    return False
            self.free_epoch = FREE_EPOCH[0]
        if SPECIAL_MODES[0]:  # an unchecked block or a graph capture is open somewhere
            return checks_enabled() and graph_capture.current_graph() is None
        return True

    def run(self, args: tuple, stream: Any, sync: bool, fresh: bool = False,
            packed: tuple | None = None) -> Any:
        """Launch with ``args`` (the objects this was prepared for; ``fresh``: just
        prepared for them, so unchecked; ``packed``: other scalar values, as
        :meth:`rebound` packed them for ``args``); returns None (sync), a Future
        (async), or ``_STALE`` having launched nothing when this does not describe
        ``args`` anymore.

        This is every repeated launch's host path, so it is written flat (one
        function, longer than most): no call it can avoid, the rare conditions tested
        first by one cheap comparison each.
        """
        if not fresh:
            try:
                if packed is None and args != self.match:   # not the very objects
                    return _STALE                               # (see _match_of)
            except ReferenceError:       # an argument it was made for is gone
                return _STALE
            if (self.epoch != self.definition.helper_epoch or SPECIAL_MODES[0]
                    or self.free_epoch != FREE_EPOCH[0]) and not self.valid():
                return _STALE
            if self.changed():   # the check's snapshot: one identity compare per binding
                return _STALE
        if stream is None:
            g = self.gpu
            try:
                self.tls.ok   # noqa: B018 - set once the context is current on this thread
            except AttributeError:
                g.make_current()
            s = self.stream
            key = self.key
            argv = self.argv if packed is None else packed[0]
        else:
            from tilelab.runtime.streams import resolve_stream, stream_key

            s = resolve_stream(stream)
            key = stream_key(s)
            argv = self.argv if packed is None else packed[0]
            argv = argv[:8] + (int(s.handle),) + argv[9:]
        logs = _LOGS
        if logs and (len(logs) != 1 or key not in logs):  # other streams have pending work
            LEDGER.check_launch(self.name, self.claims, key)
        d = DRIVER
        nat = self.native if packed is None else packed[1]
        if nat is not None:
            err = d.native_launch(nat) if stream is None else d.native_launch_on(nat,
                                                                                 argv[8])
            if err:
                launch_failed(self, err)
            if sync:
                err = d.native_sync(argv[8])
                if err:
                    raise self.fault(RuntimeError(driver_error(err))) from None
                return None
        elif d.path != "cuda.core":
            try:
                err = d.cu_launch_kernel(*argv)[0]
            except TypeError as e:  # a cuda-bindings without this signature
                d.fall_back("cuda.core", "cuda-bindings' cuLaunchKernel does not take "
                                         f"packed parameters ({e})")
                return self.run(args, stream, sync, True, packed)
            if err != d.success:
                launch_failed(self, int(err))
        else:
            from cuda.core import launch as cu_launch

            try:
                cu_launch(s, self.config, self.kernel,
                          *(self.words if packed is None else packed[2]))
            except Exception as e:
                raise LaunchError(f"launch of {self.name!r} (grid {self.grid}) failed: "
                                  f"{e}") from None
        if sync:
            try:
                s.sync()
            except Exception as e:
                raise self.fault(e) from None
            return None
        # the user's launching line, as (code, instruction offset): frame 1 is tilelab's
        # (Kernel.launch_async or Launcher.launch); its line is looked up only for a message
        f = _getframe(2)
        code = f.f_code
        if code is not self.caller:   # (a repeat from the same code needs no walk)
            while code.co_filename.startswith(_PKG_DIR) and f.f_back is not None:
                f = f.f_back
                code = f.f_code
            if not code.co_filename.startswith(_PKG_DIR):
                self.caller = code
        # the record keeps the arguments (and so their memory) alive while it is pending;
        # the pending launches share one _Pin of them
        pin = self.pin()
        if pin is None:
            pin = _Pin(args)
            self.pin = weakref.ref(pin)
        info = self.info
        if key != info.stream:  # another stream (not kept: it must not outlive its user)
            info = LaunchInfo(self.name, key, None, s, self.claims)
        rec = PreparedRecord(info, code, f.f_lasti, pin)
        log = _LOGS.get(key)
        if log is None:
            LEDGER.push(rec)
        else:   # LEDGER.append(log, rec), inlined
            log.append(rec)
            if _LOGS.get(key) is not log or not len(log) & 255:
                LEDGER._appended(log, rec)
        return Future(rec, self.fault)
