"""Run unmodified kernel code against the interpreter's ``cuda.tile``.

A kernel is an ordinary Python function that refers to ``cuda.tile`` through its globals
(``ct``, ``cuda.tile``, ``from cuda.tile import load``...) and calls helper functions,
which may live in other modules (tilelab's lowered kernels call ``tilelab.compiler.tile_index``
through an alias). :class:`Rebuilder` re-creates those functions with the same code
objects but with globals in which every cuTile object is replaced by its numpy
implementation, recursively through helpers, closures and user modules, and with the
builtins that have tile semantics (``range``, ``min``, ``max``, ``print``...). Python
control flow then runs natively for each block. torch dtypes in kernel code
(``torch.float16``, ``from torch import int32``) become the interpreter's dtypes, as
cuTile maps them.

:func:`rebuilt` caches the rebuild per kernel function object (a bounded LRU): every
value the rebuild copied (globals, closure cells, module attributes, code objects,
defaults) is recorded and compared by identity before the cached rebuild is reused, so
a redefined helper, a rebound global or a replaced ``__code__`` is never run stale.
"""
from __future__ import annotations

import builtins
import collections
import threading
import types
import weakref
from typing import Any, Callable

import cuda.tile as real_ct
from tilelab.interp import body_rules
from tilelab.interp._cutile import is_tile_function_wrapper
from tilelab.interp.device_checks import device_check, with_device_check
from tilelab.interp.frontend import dataclass_rules
from tilelab.interp.frontend.entry import front_end_checked
from tilelab.interp.frontend.recursion import depth_counted
from tilelab.interp.frontend.source_checks import refusing
from tilelab.interp.library import is_library_module
from tilelab.interp.namespace import IMPLEMENTATIONS, SUBSTITUTES, module as ct_module
from tilelab.interp.ops.misc import BUILTINS

__all__ = ["Rebuilder", "rebuilt", "CACHE_SIZE"]

_MISSING = object()

_names_cache: "weakref.WeakKeyDictionary[types.CodeType, frozenset[str]]" = \
    weakref.WeakKeyDictionary()


def _code_names(code: types.CodeType) -> frozenset[str]:
    """Global names a code object (and the code nested in it) may load."""
    found = _names_cache.get(code)
    if found is None:
        names = set(code.co_names)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                names |= _code_names(const)
        found = _names_cache[code] = frozenset(names)
    return found


class _CudaPackage(types.ModuleType):
    """The ``cuda`` package as kernels see it: ``cuda.tile`` is the interpreter's."""

    def __init__(self, real: types.ModuleType):
        super().__init__(real.__name__, getattr(real, "__doc__", None))
        self.tile = ct_module

    def __getattr__(self, name: str) -> Any:
        import cuda
        return getattr(cuda, name)


class _ModuleProxy(types.ModuleType):
    """A user module whose functions are handed out rebuilt."""

    def __init__(self, real: types.ModuleType, rebuilder: "Rebuilder"):
        super().__init__(real.__name__, getattr(real, "__doc__", None))
        self.__dict__["_proxy_real"] = real
        self.__dict__["_proxy_rebuilder"] = rebuilder

    def __getattr__(self, name: str) -> Any:
        real = self.__dict__["_proxy_real"]
        rebuilder = self.__dict__["_proxy_rebuilder"]
        original = getattr(real, name)
        rebuilder.depend_attr(real, name, original)
        value = rebuilder.substitute(original)
        self.__dict__[name] = value
        return value


class _TorchModule(types.ModuleType):
    """``torch`` as kernels see it: its dtypes are the interpreter's (constructors,
    comparisons), everything else is torch's own."""

    def __init__(self, real: types.ModuleType):
        super().__init__(real.__name__, getattr(real, "__doc__", None))
        self.__dict__["_proxy_real"] = real

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.__dict__["_proxy_real"], name)
        return _torch_dtype(value) or value


def _torch_dtype(value: Any) -> Any:
    """The interpreter's dtype for a ``torch.dtype`` object (None otherwise)."""
    t = type(value)
    if t.__name__ == "dtype" and t.__module__ == "torch":
        from tilelab.interp.values.dtypes import foreign
        return foreign(value)
    return None


#: builtins with tile semantics, ``print`` and ``range`` refusing to run inside a
#: reduce/scan combiner as cuTile does (see interp.body_rules)
_KERNEL_BUILTINS = dict(BUILTINS, print=body_rules.guarded(BUILTINS["print"], "memory"),
                        range=body_rules.looping_range(BUILTINS["range"]))

#: id(Python builtin) -> the interpreter's version of it (range, min, max, print...)
_BUILTIN_SUBSTITUTES: dict[int, Any] = {
    id(getattr(builtins, name)): impl for name, impl in _KERNEL_BUILTINS.items()
    if hasattr(builtins, name) and getattr(builtins, name) is not impl}


class Rebuilder:
    """Re-creates kernel functions so that they run on the interpreter.

    ``on_globals`` is called with every new globals dict (the launch uses it to recognize
    frames of the user's tile code for error locations).
    """

    def __init__(self, on_globals: Callable[[dict], None] = lambda g: None):
        self._functions: dict[int, types.FunctionType] = {}
        self._globals: dict[int, dict] = {}
        self._done: dict[int, set[str]] = {}
        self._modules: dict[int, Any] = {}
        self._keep: list[Any] = []  # keep originals alive: the caches are keyed by id()
        self._on_globals = on_globals
        self.builtins = dict(builtins.__dict__)
        self.builtins.update(_KERNEL_BUILTINS)
        self._cuda: types.ModuleType | None = None
        self._torch: types.ModuleType | None = None
        # what the rebuild copied: (kind, container, key, object), checked by identity
        self._deps: list[tuple[str, Any, Any, Any]] = []

    # ---- staleness --------------------------------------------------------------------
    def depend_attr(self, obj: Any, name: str, value: Any) -> None:
        self._deps.append(("attr", obj, name, value))

    def is_current(self) -> bool:
        """Whether every value the rebuild copied is still what the originals hold."""
        for kind, obj, key, value in self._deps:
            if kind == "global":
                now = obj.get(key, _MISSING)
            elif kind == "attr":
                now = getattr(obj, key, _MISSING)
            else:  # a closure cell
                try:
                    now = obj.cell_contents
                except ValueError:
                    now = _MISSING
            if now is not value:
                return False
        return True

    def globals_dicts(self) -> list[dict]:
        """The rebuilt globals dicts (frames running with them are tile code)."""
        return list(self._globals.values())

    def substitute(self, value: Any) -> Any:
        """The interpreter's counterpart of a value found in kernel globals or closures."""
        sub = SUBSTITUTES.get(id(value))
        if sub is not None:
            return sub
        sub = _BUILTIN_SUBSTITUTES.get(id(value))
        if sub is not None:   # a builtin bound by name in a namespace (tilelab's frozen
            return sub        # kernels bind each builtin they use, and __tl_range)
        if value is real_ct:
            return ct_module
        if isinstance(value, types.ModuleType):
            if value.__name__ == "cuda":
                if self._cuda is None:
                    self._cuda = _CudaPackage(value)
                return self._cuda
            if value.__name__ == "torch":
                if self._torch is None:
                    self._torch = _TorchModule(value)
                return self._torch
            if value.__name__.startswith("cuda.tile") and value is not real_ct and \
                    type(value) is types.ModuleType and not hasattr(value, "__file__"):
                return self.module(value)   # a stand-in of cuTile (tilelab's frozen code)
            if is_library_module(value.__name__):
                return value
            return self.module(value)
        if is_tile_function_wrapper(value):
            return self.function(value.__wrapped__)
        if isinstance(value, types.FunctionType):
            if is_library_module(getattr(value, "__module__", None)):
                return value
            return self.function(value)
        if isinstance(value, type) and "__dataclass_params__" in dir(value):
            return dataclass_rules.checked(value)   # (cuTile's dataclass rules)
        return _torch_dtype(value) or value

    def module(self, mod: types.ModuleType) -> Any:
        proxy = self._modules.get(id(mod))
        if proxy is None:
            proxy = self._modules[id(mod)] = _ModuleProxy(mod, self)
            self._keep.append(mod)
        return proxy

    def _globals_for(self, g: dict) -> dict:
        new = self._globals.get(id(g))
        if new is None:
            new = dict(g)
            new["__builtins__"] = self.builtins
            self._globals[id(g)] = new
            self._done[id(g)] = set()
            self._keep.append(g)
            self._on_globals(new)
        return new

    def function(self, fn: types.FunctionType, entry: bool = False) -> types.FunctionType:
        """``fn`` with interpreter globals (cached: one rebuild per function); ``entry``:
        ``fn`` is the kernel (cuTile's front end reads a kernel and a helper apart)."""
        found = self._functions.get(id(fn))
        if found is not None:
            return found
        g = self._globals_for(fn.__globals__)
        cells = None
        if fn.__closure__:
            cells = tuple(types.CellType() for _ in fn.__closure__)
        defaults = fn.__defaults__
        if defaults:
            defaults = tuple(self.substitute(d) for d in defaults)
        new = types.FunctionType(fn.__code__, g, fn.__name__, defaults, cells)
        check = device_check(fn)   # (tilelab's device helpers: see interp.device_checks)
        run = new if check is None else with_device_check(new, check)
        # (a tuple repetition, which cuTile refuses: see interp.frontend.source_checks)
        run = refusing(fn, run) or run
        # (what cuTile's front end refuses in the source: see interp.frontend.entry)
        # (cuTile's limit on nested calls: see interp.frontend.recursion)
        self._functions[id(fn)] = depth_counted(front_end_checked(fn, run, entry))
        self._keep.append(fn)
        deps = self._deps
        deps.append(("attr", fn, "__code__", fn.__code__))
        deps.append(("attr", fn, "__defaults__", fn.__defaults__))
        deps.append(("attr", fn, "__kwdefaults__", fn.__kwdefaults__))
        new.__kwdefaults__ = (None if fn.__kwdefaults__ is None else
                              {k: self.substitute(v) for k, v in fn.__kwdefaults__.items()})
        new.__qualname__ = fn.__qualname__
        new.__module__ = fn.__module__
        new.__doc__ = fn.__doc__
        new.__dict__.update(fn.__dict__)
        if cells:
            for old, cell in zip(fn.__closure__, cells):
                try:
                    contents = old.cell_contents
                except ValueError:  # an empty cell (variable not yet assigned)
                    deps.append(("cell", old, None, _MISSING))
                    continue
                deps.append(("cell", old, None, contents))
                cell.cell_contents = self.substitute(contents)
        done = self._done[id(fn.__globals__)]
        original = fn.__globals__
        for name in _code_names(fn.__code__) - done:
            done.add(name)
            value = original.get(name, _MISSING)
            deps.append(("global", original, name, value))
            if value is not _MISSING:
                g[name] = self.substitute(value)
        return self._functions[id(fn)]

    def dispatch(self, stub: Any, args: tuple, kwargs: dict) -> Any:
        """Run a cuTile stub called from code the rebuild did not reach."""
        impl = SUBSTITUTES.get(id(stub))
        if impl is None:
            owner, _, attr = getattr(stub, "__qualname__", "").partition(".")
            if attr and owner in IMPLEMENTATIONS:
                impl = getattr(IMPLEMENTATIONS[owner], attr, None)
        if impl is None and is_tile_function_wrapper(stub):
            impl = self.function(stub.__wrapped__)
        if impl is None:
            from tilelab.interp.context import unsupported
            raise unsupported(getattr(stub, "__qualname__", repr(stub)),
                              "this cuTile function is not implemented by the interpreter")
        return impl(*args, **kwargs)


#: kernels whose rebuild is kept (least recently launched ones are dropped first)
CACHE_SIZE = 64
_CACHE: "collections.OrderedDict[types.FunctionType, Rebuilder]" = collections.OrderedDict()
_CACHE_LOCK = threading.Lock()


def rebuilt(pyfunc: types.FunctionType,
            on_globals: Callable[[dict], None] | None = None
            ) -> tuple[Rebuilder, types.FunctionType]:
    """The rebuilder of a kernel function and its rebuilt function, cached per function
    object (identity) and reused only while everything it copied is unchanged.

    ``on_globals`` (default: mark the globals as tile code of the running launch) is
    called with every rebuilt globals dict, the cached ones included.
    """
    if on_globals is None:
        from tilelab.interp.context import register_tile_globals as on_globals
    with _CACHE_LOCK:
        rb = _CACHE.get(pyfunc)
        if rb is not None and rb.is_current():
            _CACHE.move_to_end(pyfunc)
            rb._on_globals = on_globals
            for g in rb.globals_dicts():
                on_globals(g)
            return rb, rb.function(pyfunc, entry=True)
        rb = Rebuilder(on_globals)
        fn = rb.function(pyfunc, entry=True)
        _CACHE[pyfunc] = rb
        _CACHE.move_to_end(pyfunc)
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
        return rb, fn


def clear_cache() -> None:
    """Forget every cached rebuild."""
    with _CACHE_LOCK:
        _CACHE.clear()
