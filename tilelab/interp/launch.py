"""``interpret()``: run a cuTile kernel block by block on numpy arrays.

Arguments are bound as ``ct.launch`` would bind them: numpy arrays and CPU DLPack tensors
become global arrays (writes land in place, strided views included), Python
``int``/``float``/``bool`` become int32/float32/bool scalars (int64 with
``ct.ScalarInt64``), ``ct.Constant`` parameters stay Python values (numpy scalars
converted to them), tuples and lists are converted item by item. Scalars and constants
are exact ``bool``/``int``/``float`` or numpy scalars of a cuTile dtype: a subclass is a
LaunchError, so that no user type's operators run in the kernel body, and so is a string
constant, which cuTile does not compile (see :mod:`tilelab.compiler.values` for the same
rule of tilelab kernels). A launch stands for one GPU (``arch=``): what cuTile refuses
for it is refused (:mod:`tilelab.interp.values.targets`).
Blocks then run one at a time, in grid order or in a seeded
random order, calling the kernel function rebuilt for the interpreter (cached per function
object, see :mod:`tilelab.interp.rebuild`).
"""
from __future__ import annotations

import enum
import inspect
import os
import types
import weakref
from typing import Any, Callable, Sequence, TextIO

import numpy as np

from tilelab.errors import CompileError, LaunchError, TilelabError
from tilelab.grid import normalize_grid
from tilelab.interp import _cutile, context
from tilelab.interp._cutile import HeterogeneousTupleNode, HomogeneousTupleNode, ct
from tilelab.interp.foreign import numpy_view
from tilelab.interp.frontend.cutile_errors import as_cutile
from tilelab.interp.frontend.grid_rules import check_grid
from tilelab.interp.frontend.python_errors import cutile_refusal
from tilelab.interp.ops import misc
from tilelab.interp.rebuild import rebuilt
from tilelab.interp.trace import ArgInfo, Trace, Tracer
from tilelab.interp.values.arrays import ArgRoot, Array
from tilelab.interp.values.dtypes import (BOOL, DTYPES, FLOAT32, FLOAT64, INT32, INT64,
                                          TileDType, as_dtype, from_numpy)
from tilelab.interp.values.dtypes import foreign as foreign_dtype
from tilelab.interp.values.rounding import convert
from tilelab.interp.values.targets import resolve_arch
from tilelab.interp.values.tile import Tile
from tilelab.limits import STR_CONSTANT_WHY, str_constant_hint

__all__ = ["interpret"]

_ORDERS = ("sequential", "shuffled")

#: the Python types a scalar or constant may have, exactly (never a subclass)
_EXACT = frozenset((bool, int, float))

#: numpy's (and ml_dtypes') scalar types of the cuTile dtypes, exactly
_NUMPY_SCALARS = frozenset(np.dtype(d.storage).type for d in DTYPES.values()
                           if d.storage is not None)


def _resolve(kernel: Any) -> tuple[types.FunctionType, str]:
    func = getattr(kernel, "_pyfunc", kernel)
    while _cutile.is_tile_function_wrapper(func):
        func = func.__wrapped__
    if not isinstance(func, types.FunctionType):
        raise LaunchError(f"interpret() expects a @ct.kernel or a Python function, got "
                          f"{type(kernel).__name__}",
                          hint="decorate the kernel with @ct.kernel or pass the function")
    return func, func.__name__


class _Binder:
    """Converts launch arguments into what the kernel body sees."""

    def __init__(self, kernel: str):
        self.kernel = kernel
        self.roots: list[ArgRoot] = []

    def bind(self, name: str, value: Any, node: Any) -> Any:
        if isinstance(node, (HomogeneousTupleNode, HeterogeneousTupleNode)):
            if not isinstance(value, tuple):
                raise self._error(name, value, "Received a non-tuple argument for a "
                                               "parameter annotated as a tuple")
            items = node.items if isinstance(node, HeterogeneousTupleNode) else \
                (node.each,) * len(value)
            if len(items) != len(value):
                why = (f"Received a tuple of length {len(value)} for a parameter "
                       f"annotated as a tuple of length {len(items)}")   # (cuTile's words)
                raise self._error(name, value, why)
            return tuple(self.bind(f"{name}[{i}]", v, n)
                         for i, (v, n) in enumerate(zip(value, items)))
        constant = getattr(node, "constant", False)
        if constant:
            return self._constant(name, value)
        if _derived(value):
            raise self._subclass(name, value, "a scalar")
        if isinstance(value, type) and foreign_dtype(value) is not None:
            raise LaunchError(f"kernel '{self.kernel}' argument '{name}' = {value!r} is not a "
                              f"run-time value", hint=f"annotate the parameter as "
                                                      f"'{name}: ct.Constant' to pass it as a "
                                                      f"compile-time constant",
                              foreign=TypeError)
        if type(value) in _NUMPY_SCALARS:   # (before arrays: numpy scalars have an
            dt = from_numpy(value.dtype)      # __array_interface__), a scalar of its dtype
            return Tile(np.asarray(value, dt.storage), dt)
        if isinstance(value, np.ndarray) or _array_like(value):
            return self._array(name, value, getattr(node, "array", None))
        if getattr(node, "array", None) is not None:
            raise self._error(name, value, "ArrayAnnotation needs an array argument")
        if isinstance(value, list):
            elem = getattr(getattr(node, "list", None), "element", None)
            return [self._array(f"{name}[{i}]", v, elem) for i, v in enumerate(value)]
        if isinstance(value, tuple):
            return tuple(self.bind(f"{name}[{i}]", v, node) for i, v in enumerate(value))
        if isinstance(value, bool):
            return Tile(np.asarray(value), BOOL)
        if isinstance(value, int):
            scalar = getattr(node, "scalar", None)
            dt = INT64 if scalar is not None and scalar.dtype == ct.int64 else INT32
            lo, hi = -(1 << (dt.bitwidth - 1)), (1 << (dt.bitwidth - 1)) - 1
            if not lo <= value <= hi:
                hint = ("annotate the parameter with ct.ScalarInt64" if dt is INT32
                        else "pass a smaller value")
                raise LaunchError(f"kernel '{self.kernel}' argument '{name}' = {value} does "
                                  f"not fit in {dt}", hint=hint)
            return Tile(np.asarray(value, dt.storage), dt)
        if isinstance(value, float):
            # (not const_array: its cache is for the kernel's own literals; a run-time
            # value per launch, a step counter, would fill it)
            return Tile(convert(np.asarray(value, np.float64), FLOAT64, FLOAT32), FLOAT32)
        if isinstance(value, np.generic):
            dt = from_numpy(value.dtype)
            return Tile(np.asarray(value, dt.storage), dt)
        if value is None or isinstance(value, (str, enum.Enum, ct.DType, TileDType)) or \
                foreign_dtype(value) is not None:
            raise LaunchError(f"kernel '{self.kernel}' argument '{name}' = {value!r} is not a "
                              f"run-time value", hint=f"annotate the parameter as "
                                                      f"'{name}: ct.Constant' to pass it as a "
                                                      f"compile-time constant",
                              foreign=TypeError)
        raise self._error(name, value, "expected an array, a bool/int/float scalar, a tuple, "
                                       "a list of arrays or a ct.Constant value")

    def _constant(self, name: str, value: Any) -> Any:
        t = type(value)
        if t in _EXACT:
            return value
        if t is str:   # (cuTile's compile API refuses it: see tilelab.limits)
            raise LaunchError(f"kernel '{self.kernel}' argument '{name}' is a ct.Constant "
                              f"and takes an exact bool, int or float or a numpy scalar; "
                              f"got str ({STR_CONSTANT_WHY})", hint=str_constant_hint(name),
                              foreign=TypeError)
        if t in _NUMPY_SCALARS:
            return value.item()
        if _derived(value):
            raise self._subclass(name, value, "a ct.Constant")
        found = foreign_dtype(value)  # torch.float16, np.int32: cuTile maps them
        if found is not None:
            return found
        if isinstance(value, np.ndarray) or _array_like(value):
            e = self._error(name, value, "a ct.Constant parameter needs a scalar, tuple or "
                                         "dataclass constant")
            e.hint = f"pass {name}=a.item() (a plain Python value) for a 0-d array a"
            raise e
        if isinstance(value, ct.DType):
            return as_dtype(value)
        if isinstance(value, tuple):
            return tuple(self._constant(name, v) for v in value)
        if isinstance(value, np.generic):
            return value.item()
        return value

    def _array(self, name: str, value: Any, ann: Any) -> Array:
        if not isinstance(value, np.ndarray):
            try:
                value = numpy_view(value)  # no copy, bfloat16/float8 included
            except Exception as e:
                raise self._error(name, value, f"it could not be viewed as a numpy array ({e})")
        try:
            dt = from_numpy(value.dtype)
        except CompileError:
            raise self._error(name, value, f"numpy dtype {value.dtype} has no cuTile "
                                           f"equivalent") from None
        if value.dtype.byteorder == ">":
            raise self._error(name, value, "big-endian arrays are not supported")
        index_dtype = INT32
        static_shape: tuple[bool, ...] = ()
        static_strides: tuple[bool, ...] = ()
        if ann is not None:
            index_dtype = as_dtype(ann.index_dtype)
            static_shape = _static_mask(ann.static_shape_dims, value.ndim, name,
                                        "static_shape_dims")
            static_strides = _static_mask(ann.static_stride_dims, value.ndim, name,
                                          "static_stride_dims")
        if index_dtype is INT32 and any(n > 2**31 - 1 for n in value.shape):
            raise LaunchError(f"argument '{name}' has a dimension beyond int32",
                              hint="annotate the parameter with ct.IndexedWithInt64")
        root = ArgRoot(name, value, dt, index_dtype, static_shape, static_strides)
        self.roots.append(root)
        return Array(root, value, (0,) * value.ndim)

    def _subclass(self, name: str, value: Any, what: str) -> LaunchError:
        """The error for a number or string of a type derived from Python's or numpy's
        (its own operators would run in the kernel body); reads nothing but its type."""
        t = type(value)
        base = next((b.__name__ for b in (bool, int, float, str, np.generic)
                     if isinstance(value, b)), "object")
        return LaunchError(f"kernel '{self.kernel}' argument '{name}' is {what} and takes "
                           f"an exact bool, int or float or a numpy scalar; got "
                           f"{t.__name__} (a subclass of {base}), whose own operators "
                           f"would run inside the kernel",
                           hint="pass a plain Python value computed before the launch, "
                                f"e.g. int({name}) or float({name})", foreign=TypeError)

    def _error(self, name: str, value: Any, why: str) -> LaunchError:
        return LaunchError(f"kernel '{self.kernel}' argument '{name}' of type "
                           f"{type(value).__name__} is invalid: {why}", foreign=TypeError)


def _derived(value: Any) -> bool:
    """Whether ``value`` is a number or string of a type derived from Python's or
    numpy's own (an ``int`` subclass, an ``IntEnum`` member, a numpy scalar subclass),
    read from its type alone."""
    t = type(value)
    if t in _EXACT or t in _NUMPY_SCALARS or t is str:
        return False
    if isinstance(value, np.generic):
        return t.__module__ not in ("numpy", "ml_dtypes")
    return isinstance(value, (bool, int, float, str))


def _array_like(value: Any) -> bool:
    return hasattr(value, "__array_interface__") or hasattr(value, "__dlpack__")


def _static_mask(dims: Sequence[int], ndim: int, name: str, what: str) -> tuple[bool, ...]:
    mask = [False] * ndim
    for d in dims:
        if not -ndim <= d < ndim:   # (cuTile's launch: a ValueError in these words)
            raise LaunchError(f"argument '{name}': {what} contains axis {d}, which is out "
                              f"of range for an array of rank {ndim}",
                              hint=f"name axes from {-ndim} to {ndim - 1} in {what}",
                              foreign=ValueError)
        mask[d % ndim] = True
    return tuple(mask)


def _block_order(total: int, order: str, seed: int | None,
                 sample: int | None) -> tuple[list[int], bool]:
    if sample is None and order == "sequential":
        return list(range(total)), False
    rng = np.random.default_rng(0 if seed is None else seed)
    ids = list(range(total))
    sampled = False
    if sample is not None:
        if isinstance(sample, bool) or not isinstance(sample, (int, np.integer)) or sample < 1:
            raise LaunchError(f"sample_blocks must be a positive int, got {sample!r}")
        if sample < total:
            edges = np.linspace(0, total, int(sample) + 1)
            ids = [int(rng.integers(int(lo), max(int(lo) + 1, int(hi))))
                   for lo, hi in zip(edges[:-1], edges[1:])]
            ids = sorted(set(ids))
            sampled = True
    if order == "shuffled":
        ids = [int(i) for i in rng.permutation(ids)]
    return ids, sampled


_INTERP_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _raised_inside_interpreter(exc: BaseException, state: context.LaunchState
                               ) -> str | None:
    """The interpreter function in which ``exc`` was raised, when it was not raised by the
    kernel's own code (an interpreter failure, e.g. a numpy error inside an op); None
    otherwise. A failed attribute lookup (``ct.no_such_op``) is the kernel's."""
    tile_globals = state.tile_globals
    tb = exc.__traceback__
    last = None   # the innermost frame of the kernel's code or of the interpreter's
    while tb is not None:           # (library frames, numpy's, are skipped)
        frame = tb.tb_frame
        if id(frame.f_globals) in tile_globals or \
                frame.f_code.co_filename.startswith(_INTERP_DIR):
            last = frame
        tb = tb.tb_next
    if last is None or id(last.f_globals) in tile_globals or \
            not last.f_code.co_filename.startswith(_INTERP_DIR):
        return None
    if last.f_code.co_name == "__getattr__":
        return None
    return last.f_code.co_name


def _as_compile_error(exc: Exception, state: context.LaunchState) -> TilelabError:
    """A Python error raised while a block ran, at the innermost line of tile code: an
    undefined name is a :class:`~tilelab.interp.context.KernelNameError` (a NameError);
    an error raised inside the interpreter itself is a LaunchError saying so (the
    interpreter failed; cuTile may well accept the kernel); other errors are what cuTile
    reports when compiling."""
    loc = None
    tb = exc.__traceback__
    while tb is not None:
        if id(tb.tb_frame.f_globals) in state.tile_globals:
            loc = context.location_of_frame(tb.tb_frame, tb.tb_lasti)
        tb = tb.tb_next
    inside = _raised_inside_interpreter(exc, state)
    if inside is not None and not isinstance(exc, (NameError, RecursionError)):
        return LaunchError(f"the CPU interpreter failed in {inside}() while running this "
                           f"line ({type(exc).__name__}: {exc}); this is a failure of the "
                           f"interpreter, not a refusal of the kernel", location=loc,
                           hint="report it to tilelab with the kernel; the GPU backend "
                                "runs what cuTile compiles")
    refusal = cutile_refusal(exc, exc.__traceback__,     # (unpacking, static_eval...)
                             lambda frame: id(frame.f_globals) in state.tile_globals)
    if refusal is not None:
        return refusal
    if isinstance(exc, NameError):
        missing = getattr(exc, "name", None)
        what = f"'{missing}'" if missing else "the name"
        error = context.KernelNameError(
            f"{type(exc).__name__}: {exc}", location=loc, name=missing,
            hint=f"define or import {what} in the kernel's module (a kernel sees its "
                 f"module's globals), or check the spelling")
        error.foreign = ct.TileSyntaxError   # cuTile: "Undefined variable x used"
        return error
    return CompileError(f"{type(exc).__name__}: {exc}", location=loc,
                        hint="cuTile would reject this kernel when compiling it")


def _overlap_warnings(roots: list[ArgRoot], blocks: list) -> list[str]:
    written = {a.arg for b in blocks for a in b.accesses if a.kind in ("write", "atomic")}
    out = []
    for i, a in enumerate(roots):
        for b in roots[i + 1:]:
            if a.name in written or b.name in written:
                if np.may_share_memory(a.data, b.data) and np.shares_memory(
                        a.data, b.data, max_work=10**6):
                    out.append(f"arguments '{a.name}' and '{b.name}' overlap in memory and one "
                               f"of them is written: cuTile leaves this undefined")
    return out


def interpret(kernel: Any, *args: Any, grid: int | Sequence[int], order: str = "sequential",
              seed: int | None = None, trace: bool = True, sample_blocks: int | None = None,
              stdout: TextIO | None = None, races: bool = True,
              arch: str | None = None) -> Trace:
    """Run a cuTile kernel on the CPU, one block at a time, and trace what it does.

    Args:
        kernel: a ``@ct.kernel`` or a plain Python function written against ``cuda.tile``.
        *args: one per kernel parameter: numpy arrays (any cuTile dtype, strided views
            allowed; writes land in place), CPU tensors with ``__dlpack__`` (torch, jax,
            tilelab; bf16/fp8 included, viewed without a copy), Python/numpy scalars,
            tuples, lists of arrays, and plain values for ``ct.Constant`` parameters
            (torch and numpy dtypes included).
        grid: 1 to 3 block counts (``()`` is one block, as for ``ct.launch``).
        order: ``"sequential"`` (grid order, x fastest) or ``"shuffled"`` (seeded random
            order, to expose order-dependent kernels).
        seed: seed of the shuffle and of block sampling (default 0).
        trace: record accesses, bytes, FLOPs and races (off: faster, empty trace).
        races: with ``trace``, also detect inter-block races (off: no per-element owner
            maps, which matters for arrays of hundreds of MB when only counting work).
        sample_blocks: run only this many blocks, spread over the grid; totals are then
            extrapolated and race detection covers the sampled blocks only.
        stdout: where device ``print``/``printf`` output goes (default ``sys.stdout``);
            each line is prefixed with the block index.
        arch: the GPU the run stands for (``"sm_100"``; default ``TILELAB_ARCH``, else
            sm_90): what cuTile refuses for it is refused here, e.g. a float4 value
            before sm_100 (:mod:`tilelab.interp.values.targets`).

    Returns:
        A :class:`~tilelab.interp.trace.Trace`.

    Raises:
        CompileError: for what cuTile rejects when compiling (type/shape errors,
            unsupported ops, dtypes ``arch`` does not support), pointing at the kernel
            line; an undefined name is a
            :class:`~tilelab.interp.context.KernelNameError` (also a ``NameError``).
        LaunchError: for bad arguments or grid, a failed ``ct.assert_``, or undefined
            behaviour such as a tile entirely outside its array.
        A refusal cuTile makes too is also an instance of cuTile's class for it
        (``TileTypeError``, ``TileSyntaxError``...; a bad argument is a ``TypeError``):
        see :mod:`tilelab.interp.frontend.cutile_errors`.
        Errors raised while blocks run carry the partial trace in ``error.trace``.

    Example:
        >>> import numpy as np, cuda.tile as ct
        >>> @ct.kernel
        ... def add(x, y, z, TILE: ct.Constant[int]):
        ...     b = ct.bid(0)
        ...     t = ct.load(x, (b,), (TILE,)) + ct.load(y, (b,), (TILE,))
        ...     ct.store(z, (b,), t)
        >>> x = np.arange(8, dtype=np.float32); y = np.ones(8, np.float32)
        >>> z = np.zeros(8, np.float32)
        >>> tr = interpret(add, x, y, z, 4, grid=(2,))
        >>> z.tolist(), tr.bytes_read, tr.has_races
        ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], 64, False)
    """
    try:
        return _interpret(kernel, args, grid, order, seed, trace, sample_blocks, stdout,
                          races, arch)
    except TilelabError as e:
        as_cutile(e)   # also cuTile's class for the same refusal (TileTypeError...)
        raise


def _interpret(kernel: Any, args: tuple, grid: int | Sequence[int], order: str,
               seed: int | None, trace: bool, sample_blocks: int | None,
               stdout: TextIO | None, races: bool, arch: str | None) -> Trace:
    """:func:`interpret` without the cuTile classes of its errors."""
    pyfunc, name = _resolve(kernel)
    # ct.launch pads the grid with ones, an empty one too: () is (1, 1, 1)
    grid3 = normalize_grid((1,) if isinstance(grid, tuple) and not grid else grid)
    check_grid(grid3)   # ct.launch's 24-bit limit per axis
    if order not in _ORDERS:
        raise LaunchError(f"order must be one of {_ORDERS}, got {order!r}")
    target = resolve_arch(arch)
    params, nodes = _parameters(kernel, pyfunc, name, len(args))
    total = grid3[0] * grid3[1] * grid3[2]
    run, sampled = _block_order(total, order, seed, sample_blocks)
    tracer = Tracer(grid3, detect_races=races) if trace else None
    state = context.LaunchState(grid3, tracer, stdout, name, target)
    state.function = pyfunc
    binder = _Binder(name)

    def result() -> Trace:
        ran = run[:state.blocks_run]
        if tracer is None:
            return Trace(name, grid3, [], {}, [], total, order, seed, ran, sampled=sampled,
                         traced=False)
        detector = tracer.detector
        return Trace(name, grid3, tracer.blocks, tracer.args,
                     detector.races if detector is not None else [], total, order, seed,
                     ran, sampled=sampled, races_dropped=detector.dropped if detector else 0,
                     warnings=_overlap_warnings(binder.roots, tracer.blocks))

    with context.enter(state), np.errstate(all="ignore"):
        rebuilder, fn = rebuilt(pyfunc)
        with _cutile.host_dispatch(rebuilder.dispatch):
            bound = [binder.bind(p.name, a, n) for p, a, n in zip(params, args, nodes)]
            if tracer is not None:
                for root in binder.roots:
                    tracer.add_arg(ArgInfo(root.name, root.data.shape, root.dtype.name,
                                           root.dtype.itemsize), root.data)
            try:
                _run_blocks(fn, bound, run, grid3, state, tracer)
            except TilelabError as e:
                e.trace = result()  # type: ignore[attr-defined]  # what ran before it failed
                raise
    return result()


#: parsed annotations and signature per kernel function: parsing them took about a
#: quarter of a small kernel's CPU launch (a redefined kernel is a new function); the
#: entry is reused while the function's code and annotations are the same objects
_SIGNATURES: "weakref.WeakKeyDictionary[types.FunctionType, tuple]" = \
    weakref.WeakKeyDictionary()


def _parameters(kernel: Any, pyfunc: types.FunctionType, name: str, nargs: int
                ) -> tuple[list[inspect.Parameter], tuple]:
    """The kernel's parameters and cuTile's parsed annotation of each (checked against
    the number of arguments)."""
    parsed = getattr(kernel, "_annotated_function", None)
    # (the kernel object's parse is held by id: a strong reference from the value would
    # keep the weakly held function alive)
    key = (pyfunc.__code__, pyfunc.__annotations__, pyfunc.__defaults__, id(parsed))
    cached = _SIGNATURES.get(pyfunc)
    if cached is None or any(a is not b and a != b for a, b in zip(cached[0], key)):
        try:
            nodes = tuple(parsed.parameter_annotations) if parsed is not None else \
                _cutile.parameter_annotations(pyfunc)
        except Exception as e:
            raise LaunchError(f"cannot read the parameter annotations of kernel '{name}': "
                              f"{e}", hint="make every name used in the annotations "
                                           "importable") from e
        cached = (key, list(inspect.signature(pyfunc).parameters.values()), nodes)
        _SIGNATURES[pyfunc] = cached
    _key, params, nodes = cached
    params = list(params)
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY):
            raise LaunchError(f"kernel '{name}' parameter '{p.name}' must be positional")
    if nargs != len(params):
        listed = ", ".join(p.name for p in params)
        n = len(params)
        said = (f"Kernel expects {n} argument{'' if n == 1 else 's'} but {nargs} "
                f"{'was' if nargs == 1 else 'were'} given")   # (cuTile's launch's words)
        raise LaunchError(f"{said}: kernel '{name}' takes {n} arguments ({listed}), got "
                          f"{nargs}", foreign=TypeError)
    return params, nodes


def _run_blocks(fn: Callable, bound: list, run: list[int], grid: tuple[int, int, int],
                state: context.LaunchState, tracer: Tracer | None) -> None:
    gx, gy, _gz = grid
    for linear in run:
        index = (linear % gx, (linear // gx) % gy, linear // (gx * gy))
        state.block = index
        state.blocks_run += 1
        if tracer is not None:
            tracer.begin_block(index, linear)
        try:
            fn(*bound)
        except TilelabError:
            raise
        except Exception as e:
            raise _as_compile_error(e, state) from e
        finally:
            misc.flush_output()
            if tracer is not None:
                tracer.end_block()
