"""The ``cuda.tile`` module that interpreted kernels see.

Every public name of ``cuda.tile`` maps to its numpy implementation here (or stays the
same object when it is plain data, such as ``ct.PaddingMode``). Names the interpreter
cannot run raise a CompileError that names the op and the kernel line. ``SUBSTITUTES``
maps the real cuTile objects to ours, which is how kernels written with
``from cuda.tile import load`` or ``import cuda.tile as anything`` are rewired.
"""
from __future__ import annotations

import types
from typing import Any, Callable

import cuda.tile as real_ct
from tilelab.interp import body_rules
from tilelab.interp.context import compile_error, unsupported
from tilelab.interp.ops import atomics as at
from tilelab.interp.ops import casts
from tilelab.interp.ops import elements as el
from tilelab.interp.ops import elementwise as ew
from tilelab.interp.ops import matmul as mm
from tilelab.interp.ops import memory as mem
from tilelab.interp.ops import misc
from tilelab.interp.ops import reductions as red
from tilelab.interp.ops import shapes as sh
from tilelab.interp.ops import unary as un
from tilelab.interp.values.arrays import Array, RawArrayMemory, Slice, TiledView
from tilelab.interp.values.dtypes import DTYPES, TileDType
from tilelab.interp.values.tile import Tile

__all__ = ["KernelModule", "module", "SUBSTITUTES", "IMPLEMENTATIONS", "UNSUPPORTED"]


def _function_decorator(func: Any = None, /, **_options: Any) -> Any:
    """``@ct.function`` inside interpreted code: the function is simply called."""
    if func is None:
        return lambda f: f
    return func


def _refuse(name: str, why: str, hint: str | None = None) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise unsupported(f"ct.{name}", why, hint)
    refuse.__name__ = name
    return refuse


def _not_in_kernel(name: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise compile_error(f"ct.{name} cannot be used inside a kernel")
    refuse.__name__ = name
    return refuse


#: cuda.tile name -> implementation, for every op the interpreter runs.
IMPLEMENTATIONS: dict[str, Any] = {
    # types
    "Array": Array, "Tile": Tile, "TiledView": TiledView, "Slice": Slice, "DType": TileDType,
    "RawArrayMemory": RawArrayMemory,
    # block ids
    "bid": misc.bid, "num_blocks": misc.num_blocks, "num_tiles": mem.num_tiles,
    # memory
    "load": mem.load, "store": mem.store, "gather": el.gather, "scatter": el.scatter,
    "load_advanced_indexing": el.load_advanced_indexing,
    "store_advanced_indexing": el.store_advanced_indexing,
    "atomic_cas": at.atomic_cas, "atomic_xchg": at.atomic_xchg,
    "atomic_add": at.atomic_add, "atomic_max": at.atomic_max,
    "atomic_min": at.atomic_min, "atomic_and": at.atomic_and,
    "atomic_or": at.atomic_or, "atomic_xor": at.atomic_xor,
    # factories and shapes
    "arange": sh.arange, "full": sh.full, "ones": sh.ones, "zeros": sh.zeros,
    "astile": sh.astile, "reshape": sh.reshape, "broadcast_to": sh.broadcast_to,
    "permute": sh.permute, "transpose": sh.transpose, "expand_dims": sh.expand_dims,
    "cat": sh.cat, "extract": sh.extract, "insert": sh.insert,
    "pack_to_bytes": sh.pack_to_bytes, "unpack_from_bytes": sh.unpack_from_bytes,
    "astype": casts.astype, "bitcast": casts.bitcast,
    # matmul
    "mma": mm.mma, "matmul": mm.matmul, "mma_scaled": mm.mma_scaled,
    # reductions and scans
    "sum": red.sum_, "prod": red.prod, "max": red.max_, "min": red.min_,
    "argmax": red.argmax, "argmin": red.argmin, "reduce": red.reduce,
    "cumsum": red.cumsum, "cumprod": red.cumprod, "scan": red.scan,
    # element-wise
    "add": ew.add, "sub": ew.sub, "mul": ew.mul, "truediv": ew.truediv,
    "floordiv": ew.floordiv, "mod": ew.mod, "divmod": ew.divmod_, "pow": ew.pow_,
    "cdiv": ew.cdiv, "atan2": ew.atan2, "minimum": ew.minimum, "maximum": ew.maximum,
    "negative": un.negative, "abs": un.abs_, "exp": un.exp, "exp2": un.exp2,
    "log": un.log, "log2": un.log2, "sqrt": un.sqrt, "rsqrt": un.rsqrt, "sin": un.sin,
    "cos": un.cos, "tan": un.tan, "sinh": un.sinh, "cosh": un.cosh, "tanh": un.tanh,
    "floor": un.floor, "ceil": un.ceil, "isnan": un.isnan, "where": ew.where,
    "bitwise_and": ew.bitwise_and, "bitwise_or": ew.bitwise_or,
    "bitwise_xor": ew.bitwise_xor, "bitwise_not": un.bitwise_not,
    "bitwise_lshift": ew.bitwise_lshift, "bitwise_rshift": ew.bitwise_rshift,
    "equal": ew.equal, "not_equal": ew.not_equal, "less": ew.less,
    "less_equal": ew.less_equal, "greater": ew.greater, "greater_equal": ew.greater_equal,
    # utilities and compile-time helpers
    "printf": misc.printf, "print": misc.print_, "assert_": misc.assert_,
    "static_eval": misc.static_eval, "static_assert": misc.static_assert,
    "static_iter": misc.static_iter, "static_exception": misc.static_exception,
    "ensure_constant": misc.ensure_constant, "assume_divisible_by": misc.assume_divisible_by,
    "grid_dependency_control_wait": misc.grid_dependency_control_wait,
    "grid_dependency_control_launch_dependents":
        misc.grid_dependency_control_launch_dependents,
    "function": _function_decorator,
}

def _reduce(x: Any, /, axis: Any, func: Any, identity: Any, *, keepdims: bool = False) -> Any:
    """``ct.reduce`` with ``func`` run as a reduction body (see interp.body_rules)."""
    return red.reduce(x, axis, body_rules.combiner(func, "reduction"), identity,
                      keepdims=keepdims)


def _scan(x: Any, /, axis: Any, func: Any, identity: Any, *, reverse: bool = False) -> Any:
    """``ct.scan`` with ``func`` run as a scan body (see interp.body_rules)."""
    return red.scan(x, axis, body_rules.combiner(func, "scan"), identity, reverse=reverse)


IMPLEMENTATIONS["reduce"] = _reduce
IMPLEMENTATIONS["scan"] = _scan

#: ops cuTile refuses inside a reduce/scan combiner, by why (see interp.body_rules)
BODY_RESTRICTED = {
    "nested": ("sum", "prod", "max", "min", "argmax", "argmin", "reduce", "cumsum",
               "cumprod", "scan"),
    "memory": ("load", "store", "gather", "scatter", "load_advanced_indexing",
               "store_advanced_indexing", "atomic_cas", "atomic_xchg", "atomic_add",
               "atomic_max", "atomic_min", "atomic_and", "atomic_or", "atomic_xor",
               "printf", "print", "assert_"),
}
for _what, _names in BODY_RESTRICTED.items():
    for _name in _names:
        IMPLEMENTATIONS[_name] = body_rules.guarded(IMPLEMENTATIONS[_name], _what)

#: cuda.tile names the interpreter refuses, with the reason.
UNSUPPORTED: dict[str, Callable[..., Any]] = {
    "launch": _not_in_kernel("launch"),
    "kernel": _not_in_kernel("kernel"),
    "foreign_pointer_dtype": _refuse("foreign_pointer_dtype",
                                     "the CPU interpreter has no device pointers"),
}


class KernelModule(types.ModuleType):
    """``cuda.tile`` for interpreted kernels; unknown names raise CompileError."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if hasattr(real_ct, name):
            raise unsupported(f"ct.{name}", "this name is not implemented by the interpreter")
        raise compile_error(f"module 'cuda.tile' has no attribute '{name}'")


def _build() -> tuple[KernelModule, dict[int, Any]]:
    mod = KernelModule("cuda.tile", "cuda.tile as seen by tilelab's CPU interpreter")
    subs: dict[int, Any] = {}
    for name in dir(real_ct):
        if name.startswith("_"):
            continue
        real = getattr(real_ct, name)
        if name in IMPLEMENTATIONS:
            ours = IMPLEMENTATIONS[name]
        elif name in UNSUPPORTED:
            ours = UNSUPPORTED[name]
        elif name in DTYPES:
            ours = DTYPES[name]
        else:
            ours = real  # enums, annotations, exceptions, host utilities
        setattr(mod, name, ours)
        if ours is not real:
            subs[id(real)] = ours
    for dt in DTYPES.values():
        subs[id(dt.real)] = dt
    return mod, subs


module, SUBSTITUTES = _build()
