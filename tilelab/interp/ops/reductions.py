"""Reductions and scans: sum/prod/max/min/argmax/argmin/reduce and cumsum/cumprod/scan.

Tile dimensions are powers of two, so a reduction is computed as a tree: the two halves
of the axis are combined until one element is left, rounding to the tile's dtype at every
step (float16 sums stay float16, as on the GPU). Scans use the Hillis-Steele scheme,
again in the tile's dtype. Custom ``ct.reduce``/``ct.scan`` bodies are called on whole
half-tiles instead of on scalars; since cuTile forbids branches, loops and memory access
in those bodies, the results are the same.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tilelab.errors import CompileError
from tilelab.interp.context import active, compile_error
from tilelab.interp.ops.elementwise import (check_rounding, float_binary,
                                            require_bool_flag, broadcast_shape, coerce,
                                            make, operand, valid_of)
from tilelab.interp.ops.shapes import constant_int, normalize_axis, to_tile
from tilelab.interp.values.dtypes import BOOL, INT32, TileDType, check_implicit_cast
from tilelab.interp.values.rounding import convert
from tilelab.interp.values.tile import Tile

__all__ = ["sum_", "prod", "max_", "min_", "argmax", "argmin", "reduce", "cumsum",
           "cumprod", "scan"]


def _count(n: int, useful: int | None = None) -> None:
    state = active()
    if state is not None and state.tracer is not None and n > 0:
        state.tracer.count_flops(int(n), useful=useful)


def _reduced_valid(t: Tile, axes: tuple[int, ...], keepdims: bool) -> np.ndarray | None:
    """The result lanes of a reduction that combine at least one useful input lane."""
    if t._m is None:
        return None
    m = np.broadcast_to(t._m, t.shape)
    return np.any(m, axis=axes, keepdims=keepdims) if axes else m


def _halves(v: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    n = v.shape[axis] // 2
    lo = [slice(None)] * v.ndim
    hi = [slice(None)] * v.ndim
    lo[axis] = slice(0, n)
    hi[axis] = slice(n, None)
    return v[tuple(lo)], v[tuple(hi)]


def _tree(values: list[np.ndarray], axis: int,
          combine: Callable[[list, list], list]) -> list[np.ndarray]:
    """Reduce each array of ``values`` along ``axis`` (size a power of two) pairwise."""
    while values[0].shape[axis] > 1:
        halves = [_halves(v, axis) for v in values]
        values = combine([h[0] for h in halves], [h[1] for h in halves])
    return [np.squeeze(v, axis=axis) for v in values]


def _parse_axes(axis: Any, ndim: int, allow_tuple: bool = True) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, tuple):
        if not allow_tuple:
            raise compile_error("Reduction over a tuple of axes is not supported here")
        axes = sorted(normalize_axis(constant_int(a, "axis"), ndim) for a in axis)
        for a, b in zip(axes, axes[1:]):
            if a == b:
                raise compile_error(f"Repeated reduction axis {a}")
        return tuple(axes)
    return (normalize_axis(constant_int(axis, "axis"), ndim),)


def _result_shape(shape: tuple, axes: tuple, keepdims: bool) -> tuple:
    return tuple(1 if i in axes else s for i, s in enumerate(shape)
                 if keepdims or i not in axes)


_INT_COMBINE = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}


def _simple(fn: str, x: Any, axis: Any, keepdims: Any, rounding_mode=None,
            flush_to_zero=False, propagate_nan=False) -> Tile:
    t = to_tile(x)
    keepdims = require_bool_flag(keepdims, "keepdims")
    if not t._dt.arithmetic:
        raise compile_error(f"Non-arithmetic dtype {t._dt} is unsupported for reduction",
                            hint="convert with .astype(ct.float32) first")
    check_rounding(fn, rounding_mode, flush_to_zero, t._dt)
    if t._dt is BOOL:
        t = Tile(convert(t._v, BOOL, INT32), INT32, False, t._m)
    dt = t._dt
    axes = _parse_axes(axis, t.ndim)
    v = t._v
    valid = _reduced_valid(t, axes, keepdims)
    if dt.kind == "f":
        def combine(lhs, rhs):
            return [float_binary(fn, lhs[0], rhs[0], dt, rounding_mode, flush_to_zero,
                                 propagate_nan)]
        executed = v.size - v.size // max(1, int(np.prod([v.shape[a] for a in axes])))
        # k useful inputs of one result take k - 1 useful combines
        useful = None if valid is None else \
            int(np.count_nonzero(np.broadcast_to(t._m, t.shape))) - int(np.count_nonzero(valid))
        _count(executed, useful)
    else:
        f = _INT_COMBINE[fn]

        def combine(lhs, rhs):
            return [f(lhs[0], rhs[0])]
    for i, a in enumerate(axes):
        [v] = _tree([v], a - i, combine)
    out_shape = _result_shape(t.shape, axes, keepdims)
    return make(v.reshape(out_shape), dt, False,
                None if valid is None else valid.reshape(out_shape))


def sum_(x, /, axis=None, *, keepdims=False, rounding_mode=None, flush_to_zero=False):
    """Sum over ``axis`` (None: all axes; a tuple: several). Bools are summed as int32."""
    return _simple("add", x, axis, keepdims, rounding_mode, flush_to_zero)


def prod(x, /, axis=None, *, keepdims=False, rounding_mode=None, flush_to_zero=False):
    """Product over ``axis``."""
    return _simple("mul", x, axis, keepdims, rounding_mode, flush_to_zero)


def max_(x, /, axis=None, *, keepdims=False, flush_to_zero=False, propagate_nan=False):
    """Maximum over ``axis``; NaNs are ignored unless ``propagate_nan=True``."""
    return _simple("max", x, axis, keepdims, None, flush_to_zero,
                   require_bool_flag(propagate_nan, "propagate_nan"))


def min_(x, /, axis=None, *, keepdims=False, flush_to_zero=False, propagate_nan=False):
    """Minimum over ``axis``; NaNs are ignored unless ``propagate_nan=True``."""
    return _simple("min", x, axis, keepdims, None, flush_to_zero,
                   require_bool_flag(propagate_nan, "propagate_nan"))


def _arg(fn: str, x: Any, axis: Any, keepdims: Any, propagate_nan: Any) -> Tile:
    t = to_tile(x)
    keepdims = require_bool_flag(keepdims, "keepdims")
    propagate_nan = require_bool_flag(propagate_nan, "propagate_nan")
    if isinstance(axis, tuple):
        raise compile_error(f"Reduce over tuple of axes is not supported for {fn}")
    v = t._v
    final_shape = None
    if axis is None:
        if keepdims:
            final_shape = (1,) * t.ndim
            keepdims = False
        v = v.reshape(-1)
        ax = 0
    else:
        ax = normalize_axis(constant_int(axis, "axis"), t.ndim)
    if t._dt.kind == "f":
        v = v.astype(np.float32) if v.dtype.itemsize < 4 or t._dt.storage is None else v
    elif t._dt is BOOL:
        v = v.astype(np.int32)
    is_float = v.dtype.kind == "f"
    shape = [1] * v.ndim
    shape[ax] = v.shape[ax]
    idx = np.broadcast_to(np.arange(v.shape[ax], dtype=np.int32).reshape(shape), v.shape)
    better = np.greater if fn == "argmax" else np.less

    def combine(lhs, rhs):
        lv, li = lhs
        rv, ri = rhs
        win = better(lv, rv)
        equal = lv == rv
        if is_float:
            lnan, rnan = np.isnan(lv), np.isnan(rv)
            win = win | (lnan & ~rnan) if propagate_nan else win | (~lnan & rnan)
            equal = equal | (lnan & rnan)
        cond = win | (equal & (li < ri))
        return [np.where(cond, lv, rv), np.where(cond, li, ri)]

    _vals, result = _tree([v, idx], ax, combine)
    if keepdims:
        result = np.expand_dims(result, ax)
    if final_shape is not None:
        result = result.reshape(final_shape)
    valid = None
    if t._m is not None:
        m = np.broadcast_to(t._m, t.shape)
        valid = np.any(m.reshape(-1) if axis is None else m, axis=ax,
                       keepdims=keepdims).reshape(result.shape)
    return make(result, INT32, False, valid)


def argmax(x, /, axis=None, *, keepdims=False, propagate_nan=False):
    """Index of the maximum along ``axis`` (first one on ties; NaNs lose unless
    ``propagate_nan=True``, then the first NaN wins)."""
    return _arg("argmax", x, axis, keepdims, propagate_nan)


def argmin(x, /, axis=None, *, keepdims=False, propagate_nan=False):
    """Index of the minimum along ``axis``."""
    return _arg("argmin", x, axis, keepdims, propagate_nan)


def _constant_scalar(v: Any, what: str) -> Any:
    if type(v) not in (bool, int, float):
        raise compile_error(f"{what}: Expected a scalar constant, got {v!r}")
    return v


def _body(func: Callable, dtypes: list[TileDType], tuple_mode: bool, op_name: str,
          masked: bool = False) -> Callable[[list, list], list]:
    """Call the user's combine function on half tiles, checking what it returns.

    With ``masked`` the last array of ``lhs``/``rhs`` is the useful-lane mask: the body's
    tiles carry it (so its FLOPs count where both sides are useful) and the combined
    lanes are useful where either side was.
    """
    def combine(lhs: list, rhs: list) -> list:
        lm = rm = None
        if masked:
            lhs, lm = lhs[:-1], lhs[-1]
            rhs, rm = rhs[:-1], rhs[-1]
        args = [Tile(a, d, False, lm) for a, d in zip(lhs, dtypes)] + \
               [Tile(b, d, False, rm) for b, d in zip(rhs, dtypes)]
        try:
            res = func(*args)
        except CompileError as e:
            if "truth value" in e.message:
                raise compile_error(f"Branching inside {op_name.lower()} body is not "
                                    f"supported. Consider ct.where() as a workaround.") from e
            raise
        if tuple_mode:
            if not isinstance(res, tuple):
                raise compile_error(f"{op_name} function returns a value of type "
                                    f"{type(res).__name__}, but a tuple was expected")
            if len(res) != len(dtypes):
                raise compile_error(f"{op_name} function must return a tuple of {len(dtypes)} "
                                    f"values to match the number of inputs, but a tuple of "
                                    f"length {len(res)} was found.")
            results = list(res)
        else:
            results = [res]
        out = []
        shape = lhs[0].shape
        for i, (r, d) in enumerate(zip(results, dtypes)):
            where = f" at position #{i}" if tuple_mode else ""
            try:
                rv, rd = operand(r)
            except CompileError:
                raise compile_error(f"{op_name} function returned a value of non-tile type "
                                    f"{type(r).__name__}{where}") from None
            check_implicit_cast(rd, rv, d, f"{op_name} function returned a tile of "
                                           f"unexpected dtype{where}")
            vals = coerce(rv, rd, d)
            if np.ndim(vals) != 0 and np.shape(vals) != shape:
                raise compile_error(f"{op_name} function returned a tile of non-scalar "
                                    f"shape{where}")
            out.append(np.broadcast_to(vals, shape))
        if masked:
            out.append(lm | rm)
        return out
    return combine


def _inputs(x: Any, identity: Any, op: str) -> tuple[list[Tile], tuple, bool]:
    tuple_mode = isinstance(x, tuple)
    xs = [to_tile(v) for v in (x if tuple_mode else (x,))]
    if not xs:
        raise compile_error(f"Need at least one input value to {op}")
    if tuple_mode:
        if not isinstance(identity, tuple):
            raise compile_error(f"Expected a tuple of identity values, got {identity!r}")
        ids = tuple(_constant_scalar(i, "identity") for i in identity)
        if len(ids) != len(xs):
            raise compile_error(f"Number of identity values ({len(ids)}) must match the number "
                                f"of input tiles ({len(xs)})")
    else:
        ids = (_constant_scalar(identity, "identity"),)
    shape = broadcast_shape(*[t.shape for t in xs])
    xs = [Tile(np.broadcast_to(t._v, shape), t._dt, False,
               None if t._m is None else np.broadcast_to(t._m, shape)) for t in xs]
    return xs, ids, tuple_mode


def reduce(x, /, axis, func, identity, *, keepdims=False):
    """Reduce ``x`` (a tile or a tuple of tiles) along ``axis`` with ``func``."""
    xs, _ids, tuple_mode = _inputs(x, identity, "reduce")
    keepdims = require_bool_flag(keepdims, "keepdims")
    if not callable(func):
        raise compile_error(f"Expected a callable object, but given value has type "
                            f"{type(func).__name__}")
    ax = normalize_axis(constant_int(axis, "axis"), xs[0].ndim)
    dtypes = [t._dt for t in xs]
    mask = valid_of(*xs)
    arrays = [t._v for t in xs] + ([] if mask is None else [np.broadcast_to(mask, xs[0].shape)])
    results = _tree(arrays, ax, _body(func, dtypes, tuple_mode, "Reduction", mask is not None))
    if keepdims:
        results = [np.expand_dims(r, ax) for r in results]
    valid = results.pop() if mask is not None else None
    tiles = tuple(make(r, d, False, valid) for r, d in zip(results, dtypes))
    return tiles if tuple_mode else tiles[0]


def _hillis_steele(values: list[np.ndarray], axis: int, reverse: bool,
                   combine: Callable[[list, list], list]) -> list[np.ndarray]:
    if reverse:
        values = [np.flip(v, axis) for v in values]
    n = values[0].shape[axis]
    step = 1
    while step < n:
        head = [slice(None)] * values[0].ndim
        tail = [slice(None)] * values[0].ndim
        head[axis] = slice(0, n - step)
        tail[axis] = slice(step, n)
        combined = combine([v[tuple(head)] for v in values], [v[tuple(tail)] for v in values])
        new = []
        for v, c in zip(values, combined):
            w = np.array(v, copy=True)
            w[tuple(tail)] = c
            new.append(w)
        values = new
        step *= 2
    if reverse:
        values = [np.flip(v, axis) for v in values]
    return values


def _simple_scan(fn: str, x: Any, axis: Any, reverse: Any, rounding_mode: Any,
                 flush_to_zero: Any) -> Tile:
    t = to_tile(x)
    reverse = require_bool_flag(reverse, "reverse")
    flush_to_zero = require_bool_flag(flush_to_zero, "flush_to_zero")
    if not t._dt.arithmetic:
        raise compile_error(f"Non-arithmetic dtype {t._dt} is unsupported for prefix scans")
    check_rounding(fn, rounding_mode, flush_to_zero, t._dt)
    if t._dt is BOOL:
        t = Tile(convert(t._v, BOOL, INT32), INT32, False, t._m)
    dt = t._dt
    if t.ndim == 0:
        raise compile_error("Axis 0 is out of range for rank 0")
    ax = normalize_axis(constant_int(axis, "axis"), t.ndim)
    if dt.kind == "f":
        def combine(lhs, rhs):
            return [float_binary(fn, lhs[0], rhs[0], dt, rounding_mode, flush_to_zero, False)]
        _count(t._v.size, None if t._m is None else
               int(np.count_nonzero(np.broadcast_to(t._m, t.shape))))
    else:
        f = _INT_COMBINE[fn]

        def combine(lhs, rhs):
            return [f(lhs[0], rhs[0])]
    [v] = _hillis_steele([t._v], ax, reverse, combine)
    return make(v, dt, False, t._m)


def cumsum(x, /, axis=0, *, reverse=False, rounding_mode=None, flush_to_zero=False):
    """Inclusive prefix sum along ``axis``."""
    return _simple_scan("add", x, axis, reverse, rounding_mode, flush_to_zero)


def cumprod(x, /, axis=0, *, reverse=False, rounding_mode=None, flush_to_zero=False):
    """Inclusive prefix product along ``axis``."""
    return _simple_scan("mul", x, axis, reverse, rounding_mode, flush_to_zero)


def scan(x, /, axis, func, identity, *, reverse=False):
    """Inclusive scan of ``x`` (a tile or a tuple of tiles) along ``axis`` with ``func``."""
    xs, _ids, tuple_mode = _inputs(x, identity, "scan")
    reverse = require_bool_flag(reverse, "reverse")
    if not callable(func):
        raise compile_error(f"Expected a callable object, but given value has type "
                            f"{type(func).__name__}")
    ax = normalize_axis(constant_int(axis, "axis"), xs[0].ndim)
    dtypes = [t._dt for t in xs]
    mask = valid_of(*xs)
    arrays = [t._v for t in xs] + ([] if mask is None else [np.broadcast_to(mask, xs[0].shape)])
    results = _hillis_steele(arrays, ax, reverse,
                             _body(func, dtypes, tuple_mode, "Scan", mask is not None))
    if mask is not None:
        results.pop()
    tiles = tuple(make(r, d, False, mask) for r, d in zip(results, dtypes))
    return tiles if tuple_mode else tiles[0]
