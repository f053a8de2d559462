"""How a kernel's parameters are passed under cuTile's ``cutile_python_v1`` calling
convention: per array a pointer, ``shape[0..n)`` and ``stride[0..n)``; a scalar by value;
a ``ct.Constant`` not at all.

The specialization records each parameter's :class:`ParamLayout`; the launch packs its
words by it, and the Tile IR validator (:mod:`tilelab.compiler.tileir`) matches the
entry's arguments to parameters by :func:`arg_slots`.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ParamLayout", "Slot", "arg_slots"]


@dataclass(frozen=True)
class ParamLayout:
    """How one kernel parameter is passed under ``cutile_python_v1``.

    ``kind`` is ``array`` (pointer, shape[ndim], strides[ndim] with ``index_dtype``),
    ``scalar`` (by value, ``dtype``) or ``constant`` (compiled in, not passed).

    Example:
        >>> ParamLayout("x", "array", "float32", 1, "int32").words
        3
    """

    name: str
    kind: str
    dtype: str | None = None
    ndim: int = 0
    index_dtype: str = "int32"

    @property
    def words(self) -> int:
        """Number of launch arguments this parameter expands to."""
        if self.kind == "array":
            return 1 + 2 * self.ndim
        return 1 if self.kind == "scalar" else 0


@dataclass(frozen=True)
class Slot:
    """What one entry argument is: ``ptr``, ``shape``, ``stride`` (with ``dim``) of an
    array parameter, or a ``scalar``."""

    param: str
    what: str
    dim: int = 0


def arg_slots(layouts) -> list[Slot]:
    """The entry arguments of ``cutile_python_v1`` for these parameter layouts.

    Example:
        >>> from tilelab.compiler.calling_convention import ParamLayout
        >>> [(s.param, s.what, s.dim) for s in arg_slots(
        ...     [ParamLayout("z", "array", "float32", 1), ParamLayout("a", "scalar", "float32"),
        ...      ParamLayout("T", "constant")])]
        [('z', 'ptr', 0), ('z', 'shape', 0), ('z', 'stride', 0), ('a', 'scalar', 0)]
    """
    out: list[Slot] = []
    for lay in layouts:
        if lay.kind == "array":
            out.append(Slot(lay.name, "ptr"))
            out += [Slot(lay.name, "shape", d) for d in range(lay.ndim)]
            out += [Slot(lay.name, "stride", d) for d in range(lay.ndim)]
        elif lay.kind == "scalar":
            out.append(Slot(lay.name, "scalar"))
    return out

