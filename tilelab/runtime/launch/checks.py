"""The memory checks of a launch: no written argument overlaps another, and no array
has a layout a kernel cannot take (negative strides, self-overlapping outputs, written
read-only memory, a written copy that would never reach its array)."""
from __future__ import annotations

from typing import Any

from tilelab.compiler.definition import KernelDefinition
from tilelab.compiler.safety.kinds import is_partition
from tilelab.errors import AliasError, LaunchError
from tilelab.runtime.ledger import checks_enabled

from .arguments import tensor_of
from .plan import LaunchPlan

__all__ = ["check_aliases"]


def check_aliases(d: KernelDefinition, plan: LaunchPlan, args: list[Any]) -> list[tuple]:
    """AliasError if a written argument of kernel ``d`` overlaps any other; returns the
    ledger claims ``(space, lo, hi, writes, name)`` of the array arguments.

    Also refused, even inside ``tl.unchecked()``: a ``tl.Out``/``tl.InOut`` tensor
    whose own elements overlap (AliasError), any array with negative strides, a
    written tensor over read-only memory or over the copy ``tl.tensor()`` made of an
    array it could not share (LaunchError); see :func:`refuse_layout`.

    Example:
        >>> import tilelab as tl
        >>> @tl.kernel
        ... def neg(z: tl.Out, x: tl.In):
        ...     z.store(-tl.load_like(x, z))
        >>> x = tl.zeros(8, device="cpu")
        >>> args, dev = neg._launcher.prepare((x.partition(8), x))
        >>> plan = neg._launcher.plan(args, dev)
        >>> check_aliases(neg.definition, plan, args)
        Traceback (most recent call last):
        ...
        tilelab.errors.AliasError: neg(): 'z' (tl.Out) overlaps 'x' in memory; ...
    """
    params = d.analysis.params
    ranges = []
    writable = plan.writable
    for i in plan.arrays:
        t = tensor_of(args[i])
        flags = t._layout
        if flags is None:
            flags = t._layout_flags()
        st = t._storage
        if flags or (writable[i] and (st.readonly or st.copied_from is not None)):
            refuse_layout(d.name, params[i], t, flags, writable[i])
        lo, hi = t.byte_range()
        ranges.append((i, st.space, lo, hi))
    if checks_enabled():
        _check_overlaps(d.name, params, writable, ranges)
    return [(s, lo, hi, writable[i], params[i].name) for i, s, lo, hi in ranges]


def _check_overlaps(name: str, params: Any, writable: tuple, ranges: list) -> None:
    for a in range(len(ranges)):
        i, sa, lo_a, hi_a = ranges[a]
        for b in range(a + 1, len(ranges)):
            j, sb, lo_b, hi_b = ranges[b]
            if not (writable[i] or writable[j]):
                continue
            if sa == sb and lo_a < hi_b and lo_b < hi_a:
                w, o = (i, j) if writable[i] else (j, i)
                raise AliasError(
                    f"{name}(): {params[w].name!r} (tl.{params[w].kind}) overlaps "
                    f"{params[o].name!r} in memory; a launch may not write memory that "
                    "another of its arguments reads or writes",
                    hint="pass separate tensors (e.g. a fresh tl.empty_like output); "
                         "if you know the views are disjoint element by element, "
                         "launch inside 'with tl.unchecked():'")


def refuse_layout(name: str, param: Any, t: Any, flags: int, writable: bool) -> None:
    """Raise for what no launch can take (a tensor ``check_aliases`` flagged); return
    for what is only flagged (an In view whose elements overlap: a broadcast).

    Example:
        >>> import numpy as np, tilelab as tl
        >>> from tilelab.runtime.layout import NEGATIVE_STRIDES
        >>> t = tl.tensor(np.arange(4.0, dtype=np.float32)[::-1])
        >>> class P: name, kind = "x", "In"
        >>> refuse_layout("k", P, t, NEGATIVE_STRIDES, False)
        Traceback (most recent call last):
        ...
        tilelab.errors.LaunchError: k(): 'x' (tl.In) has negative strides ...
    """
    from tilelab.runtime.layout import NEGATIVE_STRIDES, OVERLAPPING

    kind = param.kind
    what = f"{name}(): {param.name!r} (tl.{kind})"
    layout = f"shape {t.shape}, strides {t.strides} in elements"
    if flags & NEGATIVE_STRIDES:
        raise LaunchError(
            f"{what} has negative strides ({layout}), a reversed view such as "
            "a[::-1]; cuTile kernels take arrays with non-negative strides only, so "
            "tilelab refuses them on the GPU and on the CPU backend alike",
            hint="pass a copy in increasing order (t.contiguous(), "
                 "np.ascontiguousarray(a)) and reverse in the kernel or afterwards")
    if flags & OVERLAPPING and is_partition(kind):
        _refuse_self_overlap(what, layout, t)
    if writable and t._storage.readonly:
        raise LaunchError(f"{what} is written by the kernel, but its memory is "
                          "read-only (a read-only array or a DLPack export marked "
                          "read-only)",
                          hint="pass a writable array (e.g. a copy: np.array(a))")
    if writable and t._storage.copied_from is not None:
        raise LaunchError(
            f"{what} is written by the kernel, but its tensor is the copy that "
            f"tl.tensor() made of {t._storage.copied_from}: the launch's writes "
            "would never reach that array",
            hint="pass an array tl.tensor() can share, in native byte order with "
                 "strides in whole elements (a = np.ascontiguousarray(a, "
                 "dtype=a.dtype.newbyteorder('='))); or make the copy yourself "
                 "(t = tl.tensor(a).clone()) and read the result from t")


def _refuse_self_overlap(what: str, layout: str, t: Any) -> None:
    zero = [d for d, (n, st) in enumerate(zip(t.shape, t.strides)) if st == 0 and n > 1]
    why = (f"dimension {zero[0]} of size {t.shape[zero[0]]} has stride 0, as in "
           "a broadcast or .expand() view" if zero else
           "its strides make different indices reach the same element, as in an "
           "as_strided view")
    raise AliasError(
        f"{what} is a tensor whose own elements overlap in memory ({layout}: "
        f"{why}); the blocks that own different tiles of it would write the same "
        "memory",
        hint="pass a contiguous copy as the output (tl.empty(shape) or "
             "np.ascontiguousarray(a)) and copy the result back if you need it there")
