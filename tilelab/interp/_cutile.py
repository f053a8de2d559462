"""The one place where the interpreter touches cuTile's private modules.

cuTile is pinned (``cuda-tile==1.7.0``); its typing facts (the dtype promotion table, how
kernel parameter annotations are parsed) are read from cuTile itself so the interpreter
types kernels exactly as the compiler does. Keeping every private import here means a
cuTile upgrade touches one file.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import cuda.tile as ct
from cuda.tile import _datatype as _dt
from cuda.tile._annotated_function import (HeterogeneousTupleNode, HomogeneousTupleNode,
                                           LeafAnnotationNode, get_annotated_function)

__all__ = ["ct", "foreign_dtype", "promote_table_entry", "parameter_annotations",
           "LeafAnnotationNode", "HomogeneousTupleNode", "HeterogeneousTupleNode", "host_dispatch",
           "is_tile_function_wrapper", "integer_min", "integer_max", "constant_float_value",
           "front_end_refusal", "dataclass_refusal", "static_eval_safe"]


def foreign_dtype(x: Any) -> Any | None:
    """cuTile's dtype for a third-party dtype object (``torch.int32``, ``np.float16``,
    ``np.dtype("bfloat16")``...), as cuTile maps them in kernels; None if it has none.

    cuTile recognizes the object by its type, so this never imports torch.
    """
    if isinstance(x, (str, bool, int, float)) or x is None:
        return None
    try:
        from cuda.tile._cext import foreign_dtype_object_to_native
        return foreign_dtype_object_to_native(x)
    except Exception:  # pragma: no cover - a cuTile without the hook, or an odd object
        return None


def promote_table_entry(a: Any, b: Any) -> Any | None:
    """cuTile's promotion table: the common dtype of two concrete dtypes, or None."""
    return _dt._promote_dtypes(a, b)


def integer_min(dtype: Any) -> int:
    """Smallest value of a cuTile integer dtype."""
    return _dt.integer_dtype_min(dtype)


def integer_max(dtype: Any) -> int:
    """Largest value of a cuTile integer dtype."""
    return _dt.integer_dtype_max(dtype)


def constant_float_value(value: float, dtype: Any) -> float:
    """The value cuTile's compiler gives a float constant of a cuTile ``dtype`` other than
    float64, from its own encoder: nearest even; overflow to inf, or to NaN in formats
    without inf; float8_e8m0fnu: 0 and underflow to 2^-127, ties up. ValueError with
    cuTile's message where the format cannot hold the value (a negative in an unsigned
    format, NaN in float4_e2m1fn)."""
    from cuda.tile._bytecode.float import float_from_bits, float_to_bits
    ty = _dt.dtype_simple_bytecode_type(dtype)
    return float_from_bits(float_to_bits(float(value), ty), ty)


def parameter_annotations(pyfunc: Callable) -> tuple:
    """Parsed ``ct.Constant`` / ``ArrayAnnotation`` / ``ScalarInt64`` nodes, one per parameter."""
    return tuple(get_annotated_function(pyfunc).parameter_annotations)


def is_tile_function_wrapper(obj: Any) -> bool:
    """Whether ``obj`` is a ``@ct.function`` wrapper around a Python function."""
    return bool(getattr(obj, "_cutile_function_wrapper", False)) and hasattr(obj, "__wrapped__")


_MODE_CLASS: Any = None


def _mode_class() -> Any:
    """cuTile's host dispatch mode subclass that routes stub calls to a handler (built
    once; None without the private module)."""
    global _MODE_CLASS
    if _MODE_CLASS is None:
        try:
            from cuda.tile._dispatch_mode import DispatchMode
        except ImportError:  # pragma: no cover - future cuTile layouts
            _MODE_CLASS = False
            return None

        class _InterpMode(DispatchMode):
            def __init__(self, handler: Callable[[Any, tuple, dict], Any]):
                super().__init__()
                self._handler = handler

            def call_tile_function_from_host(self, func, args, kwargs):
                return self._handler(func, args, kwargs)

        _MODE_CLASS = _InterpMode
    return _MODE_CLASS or None


@contextlib.contextmanager
def host_dispatch(handler: Callable[[Any, tuple, dict], Any]) -> Iterator[None]:
    """Route calls of cuTile stubs made from host Python to ``handler(stub, args, kwargs)``.

    cuTile stubs called outside of its compiler go through a thread-local dispatch mode;
    installing ours while a kernel runs catches stub calls that the globals rebuild could
    not see (for example a ``ct.exp`` stored inside a tuple). Without the private module
    the context manager is a no-op.
    """
    cls = _mode_class()
    if cls is None:  # pragma: no cover - future cuTile layouts
        yield
        return
    with cls(handler).as_current():
        yield


def ftof_rounding_modes(src: Any, dst: Any) -> tuple | None:
    """Rounding modes cuTile accepts for a float-to-float ``astype`` (None: unsupported)."""
    from cuda.tile._ir.ops_utils import FTOF_ROUNDING_REGISTRY
    modes = FTOF_ROUNDING_REGISTRY.get((src, dst))
    return None if modes is None else tuple(modes)


def math_op_rules(fn: str) -> tuple[tuple, bool] | None:
    """(accepted rounding modes, accepts flush_to_zero) of a cuTile math op, by its name."""
    from cuda.tile._ir.ops_utils import BINOP_REGISTRY, UNARYOP_REGISTRY
    op = BINOP_REGISTRY.get(fn) or UNARYOP_REGISTRY.get(fn)
    if op is None:
        return None
    return tuple(op.supported_rounding_modes), bool(op.support_flush_to_zero)


def resolve_mma_dtype(x: Any, y: Any, acc: Any | None) -> Any:
    """cuTile's accumulator dtype for an MMA of ``x`` and ``y`` (TileTypeError if invalid)."""
    return _dt._resolve_mma_supported_dtype(x, y, acc)


def check_mma_scaled_dtypes(x: Any, x_scale: Any, y: Any, y_scale: Any, acc: Any) -> None:
    """cuTile's dtype rules of ``mma_scaled`` (TileTypeError if invalid)."""
    _dt._resolve_mma_scaled_supported_dtype(x, x_scale, y, y_scale, acc)


def mma_scaled_block_sizes(x: Any, scale: Any) -> tuple[int, ...]:
    """Allowed scaling block sizes of ``mma_scaled`` for an operand/scale dtype pair."""
    return tuple(_dt._get_mma_scaled_scaling_block_sizes(x, scale))


def exception_classes() -> dict[str, type]:
    """cuTile's exception classes by every name its ``_exception`` module gives them
    (``TileTypeError`` and ``TypeCheckingError`` are one class)."""
    from cuda.tile import _exception
    return {n: c for n, c in vars(_exception).items()
            if isinstance(c, type) and issubclass(c, _exception.TileError)}


def raise_sites() -> list[tuple[Any, type]]:
    """Every ``raise <cuTile exception>(<message>)`` in cuTile's Python sources (also
    ``raise ctx.syntax_error(<message>)``: a helper annotated to return one), as (the
    message expression's AST node, the class), read once per call (callers cache it):
    the interpreter words its refusals as cuTile does, so the message tells which class
    cuTile raises. A message held in a variable (``msg = f"..."; raise
    TileTypeError(msg)``) is found among the assignments of the enclosing function."""
    import ast
    from pathlib import Path
    classes = exception_classes()
    sites: list[tuple[Any, type]] = []
    trees = []
    for path in sorted(Path(ct.__file__).parent.rglob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
            if "raise " in text:
                trees.append(ast.parse(text))
        except (OSError, SyntaxError, UnicodeDecodeError):  # pragma: no cover
            continue
    # helpers that build an exception: def syntax_error(self, message) -> TileSyntaxError
    makers = dict(classes)
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    isinstance(node.returns, ast.Name) and node.returns.id in classes:
                makers.setdefault(node.name, classes[node.returns.id])

    class Scan(ast.NodeVisitor):
        def __init__(self) -> None:
            self.assigned: list[dict[str, list]] = [{}]

        def visit_FunctionDef(self, node: Any) -> None:
            self.assigned.append({})
            self.generic_visit(node)
            self.assigned.pop()

        visit_AsyncFunctionDef = visit_FunctionDef

        def visit_Assign(self, node: Any) -> None:
            if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.assigned[-1].setdefault(node.targets[0].id, []).append(node.value)
            self.generic_visit(node)

        def visit_Raise(self, node: Any) -> None:
            call = node.exc
            if isinstance(call, ast.Call) and call.args:
                func = call.func
                name = func.attr if isinstance(func, ast.Attribute) else \
                    func.id if isinstance(func, ast.Name) else None
                if name in makers:
                    arg = call.args[0]
                    values = self.assigned[-1].get(arg.id, []) \
                        if isinstance(arg, ast.Name) else [arg]
                    sites.extend((v, makers[name]) for v in values)
            self.generic_visit(node)

    for tree in trees:
        Scan().visit(tree)
    return sites


def location(where: Any) -> Any:
    """cuTile's ``Loc`` for a :class:`tilelab.errors.SourceLocation` (or None: unknown)."""
    from cuda.tile._exception import Loc
    if where is None:
        return Loc.unknown()
    return Loc(line=where.line, col=max(where.col - 1, 0), filename=where.filename,
               end_col=None if where.end_col is None else where.end_col - 1)


def front_end_refusal(pyfunc: Callable, entry: bool, generator: bool = False
                      ) -> BaseException | None:
    """cuTile's refusal of ``pyfunc``'s source by its AST front end (``ast2hir``: the
    syntax rules, such as ``break`` in a ``static_iter`` loop or a walrus inside
    ``static_eval``), as the exception cuTile raises (its ``loc`` says where), or None
    when the front end accepts it or cannot read it (no source, a lambda, an internal
    failure: only what cuTile refuses by its rules is reported). ``entry``: the kernel
    itself rather than a helper it calls; ``generator``: the generator function of a
    ``@contextlib.contextmanager`` helper, read as cuTile reads those (one ``yield``, at
    the top level of its body, no ``return``)."""
    from cuda.tile._exception import TileError
    from cuda.tile._passes.ast2hir import HirMode, get_function_hir
    mode = HirMode.GENERATOR_CONTEXT_MANAGER if generator else \
        HirMode.ENTRY_POINT if entry else HirMode.HELPER_FUNCTION
    try:
        found = get_function_hir(pyfunc, mode)
        if generator:
            from cuda.tile._ir.core_ops import _find_generator_yield
            _find_generator_yield(found.body)
    except TileError as error:
        return error
    except Exception:   # noqa: BLE001 - no source, a lambda: cuTile never says no here
        return None
    return None


def dataclass_refusal(cls: type) -> BaseException | None:
    """cuTile's refusal of creating an instance of the dataclass ``cls`` in a kernel (not
    frozen, a custom ``__new__``, ``default_factory`` or ``init=False`` fields, a plain
    subclass of a dataclass, an ``__init__`` that is neither generated nor a static
    def), as the exception cuTile raises; None when cuTile creates it."""
    from cuda.tile._exception import TileError, TypeCheckingError
    from cuda.tile._execution import is_static_def
    from cuda.tile._ir.typing_support import get_dataclass_info
    try:
        info = get_dataclass_info(cls)
    except TileError as error:
        return error
    if info.init_signature is None and not is_static_def(cls.__init__):
        return TypeCheckingError("Dataclass instance creation is only supported for "
                                 "dataclasses with a default generated __init__() method.")
    return None


def static_eval_safe(func: Any) -> bool:
    """Whether cuTile lets the stub ``func`` be called inside ``ct.static_eval`` (a few
    ops work on compile-time values there; the others are refused)."""
    from cuda.tile._execution import is_static_eval_safe_stub
    try:
        return bool(is_static_eval_safe_stub(func))
    except Exception:   # noqa: BLE001 - not a stub
        return False


def has_device_implementation(func: Any) -> bool:
    """Whether cuTile's compiler has an implementation of the Python callable ``func``
    (a builtin such as ``len`` or ``tuple``; ``eval`` and ``enumerate`` have none, so
    cuTile refuses to call them in a kernel)."""
    from cuda.tile._ir.ops import tile_impl_registry
    try:
        return func in tile_impl_registry.op_implementations or \
            func in tile_impl_registry._overloaded_implementations or \
            getattr(func, "_cutile_custom_implementation_handler", None) is not None
    except TypeError:   # (unhashable)
        return False
