"""The allowlist: every public name of ``cuda.tile``, classified, and what else a
kernel may call or read.

A name of ``cuda.tile`` missing here is refused inside kernels, and a test fails when
cuTile gains a public name this table lacks, so a new op is unusable until someone
classifies it (docs/safety.md, "The allowlist").
"""
from __future__ import annotations

import builtins
import operator
import sys
import types
from typing import Any

from tilelab.compiler.safety.kinds import OpKind

__all__ = ["CT_OPS", "TILE_METHODS", "VIEW_METHODS", "WRITE_METHODS", "RAW_METHODS",
           "READ_METHODS", "BUILTIN_CALLS", "FUNC_ARGUMENT_OPS", "CT_COMBINERS",
           "PY_COMBINERS", "py_combiner_name", "classify_ct",
           "is_allowed_value", "is_cutile_annotation", "builtin_name"]

R, C, W, V, X, VAL, H, O = (OpKind.READ, OpKind.COMPUTE, OpKind.WRITE, OpKind.VIEW,
                            OpKind.RAW, OpKind.VALUE, OpKind.HOST, OpKind.ORDER)


def _names(kind: OpKind, text: str) -> dict[str, OpKind]:
    return {n: kind for n in text.split()}


#: every public name of cuda.tile 1.7, by what it does to memory
CT_OPS: dict[str, OpKind] = {
    **_names(R, "load gather"),
    **_names(W, "store scatter store_advanced_indexing atomic_add atomic_and atomic_cas "
                "atomic_max atomic_min atomic_or atomic_xchg atomic_xor"),
    # load_advanced_indexing: "if the tile lies entirely outside the view, the behavior
    # is undefined" (its docstring), and it has no bounds check to keep on.
    # assume_divisible_by: an unchecked promise the compiler may drop bounds masks for.
    **_names(X, "load_advanced_indexing assume_divisible_by foreign_pointer_dtype"),
    # the wait for the previous kernel of the stream and the go-ahead for the next: where
    # they stand decides what may overlap another kernel, which the checker's wait rules
    # (tl.wait_for_previous_kernel()) and the lowering's prologue settle in safe kernels
    **_names(O, "grid_dependency_control_launch_dependents grid_dependency_control_wait"),
    **_names(C, "abs add arange argmax argmin assert_ astile astype atan2 bid bitcast "
                "bitwise_and bitwise_lshift bitwise_not bitwise_or bitwise_rshift "
                "bitwise_xor broadcast_to cat cdiv ceil cos cosh cumprod cumsum divmod "
                "ensure_constant equal exp exp2 expand_dims extract floor floordiv full "
                "gather_scatter_placeholder greater greater_equal "
                "insert isnan less less_equal log log2 matmul max maximum min minimum "
                "mma mma_scaled mod mul negative not_equal num_blocks num_tiles ones "
                "pack_to_bytes permute pow print printf prod reduce reshape rsqrt scan "
                "Slice sin sinh sqrt static_assert static_eval static_exception static_iter "
                "sub sum tan tanh transpose truediv unpack_from_bytes where zeros"),
    **_names(VAL, "Array ArrayAnnotation ByTarget Constant ConstantAnnotation DType "
                  "IndexedWithInt64 ListAnnotation MemoryOrder MemoryScope PaddingMode "
                  "RoundingMode Scalar ScalarInt64 Tile TiledView bfloat16 bool_ "
                  "float16 float32 float4_e2m1fn float64 float8_e4m3fn float8_e5m2 "
                  "float8_e5m3fnu float8_e8m0fnu int16 int32 int64 int8 tfloat32 "
                  "uint16 uint32 uint64 uint8"),
    **_names(H, "StaticException TileCompilerExecutionError TileCompilerTimeoutError "
                "TileError TileInternalError TileRecursionError TileStaticAssertionError "
                "TileStaticEvalError TileSyntaxError TileTypeError "
                "TileUnsupportedFeatureError TileValueError compilation compiler_timeout "
                "function jax kernel launch tune"),
}
CT_OPS.pop("gather_scatter_placeholder")

#: ops whose ``func`` argument is a function the op calls (checked as a helper)
FUNC_ARGUMENT_OPS = {"reduce": 2, "scan": 2}

#: cuTile ops a ``ct.reduce`` / ``ct.scan`` may take as its combining function: the
#: associative binary ops of two tiles (compute only)
CT_COMBINERS = frozenset({"add", "mul", "maximum", "minimum", "bitwise_and", "bitwise_or",
                          "bitwise_xor"})

#: methods of tiles (ct.Tile): compute only
TILE_METHODS = frozenset({"astype", "extract", "insert", "item", "permute", "reshape",
                          "transpose"})
#: methods of arrays that make views (ct.Array)
VIEW_METHODS = frozenset({"slice", "tiled_view"})
#: methods that write (ct.TiledView, RawArrayMemory)
WRITE_METHODS = frozenset({
    "store", "store_offset", "atomic_store_add", "atomic_store_max", "atomic_store_min",
    "atomic_store_and", "atomic_store_or", "atomic_store_xor", "atomic_cas_offset",
    "atomic_xchg_offset", "atomic_add_offset", "atomic_max_offset", "atomic_min_offset",
    "atomic_and_offset", "atomic_or_offset", "atomic_xor_offset"})
#: methods that read through a view (TiledView.load) or raw memory
READ_METHODS = frozenset({"load", "load_offset", "num_tiles"})
#: methods that reach raw memory or pointers
RAW_METHODS = frozenset({"get_raw_memory", "from_foreign"})

#: the builtins cuTile compiles (its frontend implements exactly these)
BUILTIN_CALLS = frozenset({"abs", "bool", "divmod", "float", "int", "len", "max", "min",
                           "print", "range", "repr", "slice", "str", "tuple"})
DYNAMIC_BUILTINS = frozenset({"getattr", "setattr", "delattr", "eval", "exec", "globals",
                              "locals", "vars", "__import__", "compile", "open",
                              "breakpoint", "input", "memoryview", "object", "type"})


def classify_ct(name: str) -> OpKind | None:
    """The kind of ``cuda.tile.<name>``, or None when the table lacks it (refused).

    Example:
        >>> classify_ct("store"), classify_ct("exp")
        (<OpKind.WRITE: 'write'>, <OpKind.COMPUTE: 'compute'>)
    """
    return CT_OPS.get(name)


#: Python's builtins as they were when tilelab was imported (a later patch of the
#: builtins module is not a builtin to the checker)
PRISTINE_BUILTINS: dict[str, Any] = {n: getattr(builtins, n) for n in dir(builtins)
                                     if not n.startswith("_") or n == "__import__"}


def _native(obj: Any, module: str, name: str) -> Any:
    """``obj`` when it is the C function ``module.name`` (a builtin function reports
    the module and name it was defined with, which Python code cannot fake), else None:
    ``operator.add`` rebound before tilelab was imported is no combiner either."""
    ok = (type(obj) is types.BuiltinFunctionType and getattr(obj, "__module__", None) == module
          and getattr(obj, "__name__", None) == name)
    return obj if ok else None


#: the combining functions of Python's own that cuTile compiles in a ``ct.reduce`` /
#: ``ct.scan`` (its tests pass ``operator.add``), taken when tilelab is imported: a
#: combiner is recognized by the identity of the object, never by its name, so a
#: rebound ``operator.add`` is not one of them
PY_COMBINERS: dict[str, Any] = {
    label: f for label, f in (
        *((f"operator.{n}", _native(getattr(operator, n, None), "_operator", n))
          for n in ("add", "mul", "and_", "or_", "xor")),
        *((n, _native(PRISTINE_BUILTINS.get(n), "builtins", n)) for n in ("max", "min")))
    if f is not None}


def py_combiner_name(obj: Any) -> str | None:
    """The name of ``obj`` when it is one of :data:`PY_COMBINERS` (by identity).

    Example:
        >>> import operator
        >>> py_combiner_name(operator.add), py_combiner_name(operator.sub)
        ('operator.add', None)
    """
    return next((n for n, f in PY_COMBINERS.items() if f is obj), None)


def builtin_name(obj: Any) -> str | None:
    """The name of obj when it is one of Python's (pristine) builtins, else None."""
    name = getattr(obj, "__name__", None)
    if isinstance(name, str) and PRISTINE_BUILTINS.get(name) is obj:
        return name
    return None


_SCALARS = (int, float, bool, complex, str, bytes, type(None), type(Ellipsis))
#: builtin types a kernel may name (annotations such as ct.Constant[int], dtype=int)
_BUILTIN_TYPES = (int, float, bool, complex, str, tuple)


def is_allowed_value(obj: Any) -> bool:
    """Whether a kernel may read ``obj`` from its module (immutable, data-only, and of
    exactly an allowed type: a subclass could bring operators that run code).

    Example:
        >>> is_allowed_value((1, 2.0, "a")), is_allowed_value([1, 2])
        (True, False)
    """
    t = type(obj)
    if t in _SCALARS or any(obj is b for b in _BUILTIN_TYPES):
        return True
    if t is tuple or t is frozenset:
        return all(is_allowed_value(v) for v in obj)
    if id(obj) in _ct_value_ids():
        return True
    import enum

    import cuda.tile as ct
    if t is ct.DType or (isinstance(obj, enum.Enum) and id(t) in _ct_value_ids()):
        return True
    numpy_types, dtype_types = _numpy_types()
    if t in numpy_types or t in dtype_types or any(obj is c for c in numpy_types):
        return True
    torch = sys.modules.get("torch")
    if torch is not None and t is getattr(torch, "dtype", None):
        return True
    return is_cutile_annotation(obj)


def is_cutile_annotation(obj: Any) -> bool:
    """Whether ``obj`` is a cuTile annotation such as ``ct.Constant[int]``: a type, so a
    module-level alias of one (``ConstInt = ct.Constant[int]``) may annotate a parameter
    and be read like any other type (docs/safety.md, "Constants and scalars").

    It must be exactly ``typing.Annotated`` over a value a kernel may read (``int``,
    ``float``, ``bool``, ``str``, a dtype, a cuTile type) with cuTile's own annotation
    markers, and nothing else, as metadata.

    Example:
        >>> import cuda.tile as ct, typing
        >>> is_cutile_annotation(ct.Constant[int]), is_cutile_annotation(ct.Constant[list])
        (True, False)
        >>> is_cutile_annotation(typing.Annotated[int, "note"])
        False
    """
    import cuda.tile as ct

    if type(obj) is not type(ct.Constant):
        return False
    meta = getattr(obj, "__metadata__", None)
    if type(meta) is not tuple or not meta:
        return False
    markers = _annotation_markers()
    return all(type(m) in markers for m in meta) and \
        is_allowed_value(getattr(obj, "__origin__", None))


_MARKERS: frozenset | None = None


def _annotation_markers() -> frozenset:
    """cuTile's annotation marker classes (ConstantAnnotation, ArrayAnnotation, and
    those of its classified annotations, such as ScalarInt64's)."""
    global _MARKERS
    if _MARKERS is None:
        import cuda.tile as ct

        found = {ct.ConstantAnnotation, ct.ArrayAnnotation, ct.ListAnnotation}
        for name, kind in CT_OPS.items():
            obj = getattr(ct, name, None)
            if kind == OpKind.VALUE and type(obj) is type(ct.Constant):
                found |= {type(m) for m in obj.__metadata__}
        _MARKERS = frozenset(found)
    return _MARKERS


_NUMPY_TYPES: tuple | None = None


def _numpy_types() -> tuple[frozenset, frozenset]:
    """(numpy's and ml_dtypes' scalar types, their dtype classes), compared by identity:
    a look-alike class that only claims their module is none of them."""
    global _NUMPY_TYPES
    if _NUMPY_TYPES is None:
        import ml_dtypes
        import numpy as np

        scalars = {v for v in np.sctypeDict.values() if isinstance(v, type)}
        scalars |= {getattr(ml_dtypes, n) for n in dir(ml_dtypes)
                    if isinstance(getattr(ml_dtypes, n), type)
                    and issubclass(getattr(ml_dtypes, n), np.generic)}
        dtypes = {type(np.dtype(t)) for t in scalars if t is not np.generic}
        _NUMPY_TYPES = (frozenset(scalars), frozenset(dtypes))
    return _NUMPY_TYPES


_VALUE_IDS: frozenset | None = None


def _ct_value_ids() -> frozenset:
    """ids of the objects CT_OPS classifies as VALUE (types, dtypes, annotations)."""
    global _VALUE_IDS
    if _VALUE_IDS is None:
        import cuda.tile as ct
        _VALUE_IDS = frozenset(id(getattr(ct, n)) for n, k in CT_OPS.items()
                               if k == OpKind.VALUE and hasattr(ct, n))
    return _VALUE_IDS


def is_module(obj: Any) -> bool:
    return isinstance(obj, types.ModuleType)
