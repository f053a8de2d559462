"""Run unmodified kernel code against the interpreter's ``cuda.tile``.

A kernel is an ordinary Python function that refers to ``cuda.tile`` through its globals
(``ct``, ``cuda.tile``, ``from cuda.tile import load``...) and calls helper functions,
which may live in other modules (tilelab's lowered kernels call ``tilelab.compiler.device``
through an alias). :class:`Rebuilder` re-creates those functions with the same code
objects but with globals in which every cuTile object is replaced by its numpy
implementation, recursively through helpers, closures and user modules, and with the
builtins that have tile semantics (``range``, ``min``, ``max``, ``print``...). Python
control flow then runs natively for each block.
"""
from __future__ import annotations

import builtins
import sys
import types
from typing import Any, Callable

import cuda.tile as real_ct
from tilelab.interp._cutile import is_tile_function_wrapper
from tilelab.interp.misc import BUILTINS
from tilelab.interp.namespace import IMPLEMENTATIONS, SUBSTITUTES, module as ct_module

__all__ = ["Rebuilder", "is_library_module"]

_LIBRARY_ROOTS = frozenset({
    "builtins", "numpy", "ml_dtypes", "cuda", "torch", "cupy", "jax", "jaxlib", "scipy",
    "pandas", "matplotlib", "IPython", "ipykernel", "ipywidgets", "hypothesis", "pytest",
    "_pytest", "typing_extensions", "pluggy",
})


def is_library_module(name: str | None) -> bool:
    """Modules whose functions are run as they are (stdlib, numpy, cuda, the interpreter)."""
    if not name:
        return False
    if name == "tilelab.interp" or name.startswith("tilelab.interp."):
        return True
    root = name.split(".", 1)[0]
    return root in _LIBRARY_ROOTS or root in sys.stdlib_module_names


_names_cache: dict[types.CodeType, frozenset[str]] = {}


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
        value = self.__dict__["_proxy_rebuilder"].substitute(getattr(real, name))
        self.__dict__[name] = value
        return value


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
        self.builtins.update(BUILTINS)
        self._cuda: types.ModuleType | None = None

    def substitute(self, value: Any) -> Any:
        """The interpreter's counterpart of a value found in kernel globals or closures."""
        sub = SUBSTITUTES.get(id(value))
        if sub is not None:
            return sub
        if value is real_ct:
            return ct_module
        if isinstance(value, types.ModuleType):
            if value.__name__ == "cuda":
                if self._cuda is None:
                    self._cuda = _CudaPackage(value)
                return self._cuda
            if is_library_module(value.__name__):
                return value
            return self.module(value)
        if is_tile_function_wrapper(value):
            return self.function(value.__wrapped__)
        if isinstance(value, types.FunctionType):
            if is_library_module(getattr(value, "__module__", None)):
                return value
            return self.function(value)
        return value

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

    def function(self, fn: types.FunctionType) -> types.FunctionType:
        """``fn`` with interpreter globals (cached: one rebuild per function)."""
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
        self._functions[id(fn)] = new
        self._keep.append(fn)
        new.__kwdefaults__ = (None if fn.__kwdefaults__ is None else
                              {k: self.substitute(v) for k, v in fn.__kwdefaults__.items()})
        new.__qualname__ = fn.__qualname__
        new.__module__ = fn.__module__
        new.__doc__ = fn.__doc__
        new.__dict__.update(fn.__dict__)
        if cells:
            for old, cell in zip(fn.__closure__, cells):
                try:
                    cell.cell_contents = self.substitute(old.cell_contents)
                except ValueError:  # an empty cell (variable not yet assigned)
                    pass
        done = self._done[id(fn.__globals__)]
        for name in _code_names(fn.__code__) - done:
            done.add(name)
            if name in fn.__globals__:
                g[name] = self.substitute(fn.__globals__[name])
        return new

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
