"""The two classifications the checker works with: parameter kinds and op kinds.

Both are string enums, so ``kind == "Out"`` comparisons and ``f"tl.{kind}"`` messages
keep working wherever a kind travels (specializations, launch plans, the lab).
"""
from __future__ import annotations

import enum

__all__ = ["ParamKind", "OpKind", "WRITTEN", "PARTITIONS", "READ_ONLY", "writes",
           "is_partition", "read_only", "reads_written"]


class _StrEnum(str, enum.Enum):
    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        return str.__format__(str(self), spec)


class ParamKind(_StrEnum):
    """How a kernel may use a parameter (the annotation it was declared with).

    Example:
        >>> ParamKind.OUT == "Out", f"tl.{ParamKind.OUT}"
        (True, 'tl.Out')
    """

    IN = "In"
    OUT = "Out"
    INOUT = "InOut"
    RAW = "Raw"
    #: no tilelab annotation: an array passed here is read-only, a scalar is a scalar
    AUTO = "auto"
    #: ``ct.Constant[...]``
    CONSTANT = "constant"

    @property
    def is_partition(self) -> bool:
        return is_partition(self)

    @property
    def writable(self) -> bool:
        return writes(self)


#: the kinds of parameter a kernel may write: the one answer to "does it write?"
WRITTEN = frozenset({ParamKind.OUT, ParamKind.INOUT, ParamKind.RAW})
#: the kinds passed as partitions: a block writes (and an InOut block reads) its own tile
PARTITIONS = frozenset({ParamKind.OUT, ParamKind.INOUT})
#: the array kinds a kernel only reads (an unannotated array is read-only)
READ_ONLY = frozenset({ParamKind.IN, ParamKind.AUTO})


def writes(kind: "ParamKind | str | None") -> bool:
    """Whether a parameter of this kind may be written (``tl.Out``, ``tl.InOut``,
    ``tl.Raw``). ``kind`` is a :class:`ParamKind`, its value (``"Out"``) or None (a
    name that is no parameter).

    Example:
        >>> writes("InOut"), writes(ParamKind.IN), writes(None)
        (True, False, False)
    """
    return kind in WRITTEN


def is_partition(kind: "ParamKind | str | None") -> bool:
    """Whether a parameter of this kind is passed as a partition (``tl.Out``,
    ``tl.InOut``).

    Example:
        >>> is_partition("Out"), is_partition("Raw")
        (True, False)
    """
    return kind in PARTITIONS


def read_only(kind: "ParamKind | str | None") -> bool:
    """Whether a parameter of this kind is an array the kernel only reads (``tl.In`` or
    unannotated).

    Example:
        >>> read_only("auto"), read_only("InOut"), read_only("constant")
        (True, False, False)
    """
    return kind in READ_ONLY


def reads_written(kind: "ParamKind | str | None") -> bool:
    """Whether a written parameter of this kind may also be read, so that its contents
    before a launch matter (``tl.InOut``, ``tl.Raw``; a ``tl.Out`` is only written).

    Example:
        >>> reads_written("InOut"), reads_written("Out"), reads_written("In")
        (True, False, False)
    """
    return writes(kind) and kind != ParamKind.OUT


class OpKind(_StrEnum):
    """What a public name of ``cuda.tile`` does to memory, for the allowlist.

    Example:
        >>> OpKind.WRITE.allowed_in_safe
        False
    """

    #: reads arrays, bounds-checked (the bounds rule decides about check_bounds=False)
    READ = "read"
    #: computes on tiles and scalars; touches no memory
    COMPUTE = "compute"
    #: writes memory (stores, scatters, atomics): only on tl.Raw in unsafe kernels
    WRITE = "write"
    #: makes a new view of an array whose bounds the checker cannot prove
    VIEW = "view"
    #: raw pointers, unchecked indexing, unchecked promises to the compiler
    RAW = "raw"
    #: a type, dtype or constant: usable as a value or annotation, never called
    VALUE = "value"
    #: host-side API (kernel, launch, compilation, exceptions): no meaning in a kernel
    HOST = "host"
    #: orders the kernel against its neighbours on the stream (the grid-dependency ops
    #: of programmatic dependent launch): the lowering places them in safe kernels, where
    #: ``tl.wait_for_previous_kernel()`` says where to wait; called only in unsafe ones
    ORDER = "order"

    @property
    def allowed_in_safe(self) -> bool:
        return self in (OpKind.READ, OpKind.COMPUTE, OpKind.VALUE)
