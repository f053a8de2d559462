"""The safe kernel language: parameter kinds, ``load_like``, ``wait_for_previous_kernel``
and schedules.

These names only mean something inside a ``@tl.kernel`` body, where the compiler reads
them from the source and lowers them to plain cuTile Python. Outside a kernel they are
inert markers (the annotations) or raise a clear error when called (``load_like``,
``wait_for_previous_kernel``).
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ParamKind", "In", "Out", "InOut", "Raw", "load_like", "wait_for_previous_kernel",
    "Schedule", "RowMajor", "Grouped", "Persistent", "row_major", "grouped", "persistent",
]


class _KindMeta(type):
    def __repr__(cls):
        return f"tl.{cls.__name__}"


class ParamKind(metaclass=_KindMeta):
    """Base of the parameter annotations; ``kind`` names the access discipline."""

    kind: str = ""
    #: whether the host passes a partition (True) or a whole tensor (False)
    takes_partition: bool = False
    #: whether the kernel may write the argument
    writable: bool = False


class In(ParamKind):
    """A read-only tensor parameter (the default for arrays).

    The kernel may read any tile (``ct.load``, ``ct.gather``, ``tl.load_like``) and may
    not write at all.

    Example:
        >>> import tilelab as tl
        >>> @tl.kernel
        ... def copy(z: tl.Out, x: tl.In):
        ...     z.store(tl.load_like(x, z))
    """

    kind = "In"


class Out(ParamKind):
    """A write-only partition: each block stores exactly its own tile with ``p.store``.

    Example:
        >>> import tilelab as tl
        >>> @tl.kernel
        ... def fill(z: tl.Out, x: tl.In):
        ...     z.store(tl.load_like(x, z) * 2)
    """

    kind = "Out"
    takes_partition = True
    writable = True


class InOut(ParamKind):
    """A partition each block reads (``p.load()``) and writes (``p.store``) at its tile.

    Example:
        >>> import tilelab as tl
        >>> @tl.kernel
        ... def scale(p: tl.InOut):
        ...     p.store(p.load() * 2)
    """

    kind = "InOut"
    takes_partition = True
    writable = True


class Raw(ParamKind):
    """A tensor the kernel may use with every cuTile op, writes included.

    Only allowed in ``@tl.kernel(unsafe=True)``: the launch still checks that it does not
    overlap other arguments, but which elements each block writes is up to the kernel
    (run it on the CPU interpreter to find races).

    Example:
        >>> import tilelab as tl, cuda.tile as ct
        >>> @tl.kernel(unsafe=True)
        ... def histogram(h: tl.Raw, x: tl.In):
        ...     v = ct.load(x, index=(ct.bid(0),), shape=(16,))
        ...     ct.atomic_add(h, v, 1)
    """

    kind = "Raw"
    writable = True


def load_like(x, p, *, at=None, latency=None, allow_tma=None, padding_mode=None):
    """Load the tile of ``x`` that sits where partition ``p``'s tile sits.

    Inside a kernel ``tl.load_like(x, p)`` is ``ct.load(x, index=<p's tile index>,
    shape=p.tile_shape, padding_mode=ZERO)``; with a persistent schedule pass the tile
    minted by the loop: ``tl.load_like(x, p, at=t)``. ``latency=``, ``allow_tma=`` and
    ``padding_mode=`` (constants) are passed on to ``ct.load``.

    Example:
        >>> import tilelab as tl
        >>> @tl.kernel
        ... def add(z: tl.Out, x: tl.In, y: tl.In):
        ...     z.store(tl.load_like(x, z) + tl.load_like(y, z))
    """
    raise TypeError("tl.load_like() can only be used inside a @tl.kernel body")


def wait_for_previous_kernel() -> None:
    """Mark where the kernel waits for the previous kernel of its stream.

    Every kernel waits for its predecessor before it touches memory; by default the
    wait is its first statement. Written as a statement of the kernel body itself, this
    moves the wait there, so that the statements above it can load ``tl.In`` arrays the
    previous kernel does not write (weights, say) while that kernel finishes: in a
    ``tl.graph()`` such a kernel may start early (programmatic dependent launch) when
    the kernel it depends on writes nothing it reads before the wait. Above the wait
    the kernel may not store, ``p.load()`` a partition or walk ``p.tiles()``
    (docs/safety.md, "Programmatic dependent launch").

    Example:
        >>> import tilelab as tl, cuda.tile as ct
        >>> @tl.kernel
        ... def scale(y: tl.Out, w: tl.In, x: tl.In):
        ...     wt = tl.load_like(w, y)          # may run while the previous kernel ends
        ...     tl.wait_for_previous_kernel()
        ...     y.store(wt * tl.load_like(x, y))
    """
    raise TypeError("tl.wait_for_previous_kernel() can only be used inside a @tl.kernel "
                    "body")


class Schedule:
    """Which block owns which tile of a partition; every schedule keeps tiles disjoint."""

    name: str = ""
    #: whether kernels walk their tiles with ``for t in p.tiles()``
    persistent: bool = False


@dataclass(frozen=True)
class RowMajor(Schedule):
    """One block per tile, blocks numbered in row-major tile order (the default).

    Example:
        >>> import tilelab as tl
        >>> tl.row_major
        RowMajor()
    """

    name = "row_major"


@dataclass(frozen=True)
class Grouped(Schedule):
    """One block per tile, in groups of ``group_m`` tile rows (L2-friendly for GEMM).

    Example:
        >>> import tilelab as tl
        >>> tl.grouped(group_m=8)
        Grouped(group_m=8)
    """

    group_m: int = 8
    name = "grouped"

    def __post_init__(self):
        if not isinstance(self.group_m, int) or isinstance(self.group_m, bool) \
                or self.group_m < 1:
            raise ValueError(f"tl.grouped(group_m={self.group_m!r}): group_m must be a "
                             "positive int")


@dataclass(frozen=True)
class Persistent(Schedule):
    """A fixed number of blocks (default: one per SM) that loop over the tiles.

    The kernel walks its tiles with ``for t in p.tiles():`` and stores with
    ``p.store(tile, at=t)``; the loop hands each tile to exactly one block. ``group_m``
    orders the tiles as :func:`grouped` does.

    Example:
        >>> import tilelab as tl
        >>> tl.persistent(num_blocks=132)
        Persistent(num_blocks=132, group_m=None)
    """

    num_blocks: int | None = None
    group_m: int | None = None
    name = "persistent"
    persistent = True

    def __post_init__(self):
        for field in ("num_blocks", "group_m"):
            v = getattr(self, field)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                raise ValueError(f"tl.persistent({field}={v!r}): {field} must be a "
                                 "positive int or None")


row_major = RowMajor()


def grouped(group_m: int = 8) -> Grouped:
    """The grouped (L2 swizzle) schedule; see :class:`Grouped`.

    Example:
        >>> import tilelab as tl
        >>> tl.grouped(4).group_m
        4
    """
    return Grouped(group_m)


def persistent(num_blocks: int | None = None, group_m: int | None = None) -> Persistent:
    """The persistent schedule; see :class:`Persistent`.

    Example:
        >>> import tilelab as tl
        >>> tl.persistent().num_blocks is None
        True
    """
    return Persistent(num_blocks, group_m)
