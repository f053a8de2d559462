"""What the Tile IR validator answers: a :class:`CheckReport` with an :class:`OpVerdict`
per memory op when a kernel passes, an :class:`InternalSafetyError` when it does not.

The lab's Safety view shows the verdicts; the compile keeps the report on the
artifacts (``art.validation``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tilelab.compiler.tileir.ops import WRITE_OPS
from tilelab.errors import CompileError, SourceLocation

__all__ = ["InternalSafetyError", "OpVerdict", "CheckReport", "INTERNAL_HINT"]


class InternalSafetyError(CompileError):
    """The Tile IR of a kernel the safety checker accepted breaks the safety rules.

    That is a bug in tilelab's lowering (or in cuTile), not in the kernel: the message
    starts "internal safety check failed" and the location is the user's source line of
    the offending op. ``internal_safety`` is True on these errors.

    Example:
        >>> e = InternalSafetyError("internal safety check failed: ...")
        >>> isinstance(e, CompileError), e.internal_safety
        (True, True)
    """

    internal_safety = True


#: the hint of every InternalSafetyError: what it means and what to do
INTERNAL_HINT = ("the kernel passed tilelab's safety checker, so this is a bug in "
                 "tilelab's lowering or in cuTile: please report it with the kernel; the "
                 "cubin was not cached or loaded (@tl.kernel(unsafe=True) compiles without "
                 "this check)")


@dataclass(frozen=True)
class OpVerdict:
    """The validator's verdict on one memory op of the Tile IR, as it decided it.

    ``line`` is the op's line in the ``tileirdisasm -g`` text (1-based; the Tile IR tab
    numbers its lines the same way), ``text`` the op without its ``loc(...)``,
    ``access`` what the validator took the op for (``partition store``, ``sub-tile
    store``, ``bounds-checked load``, ``unchecked load``, ``masked gather``; for a
    refused op ``store``, ``load``, ``gather``, ``write`` or ``op``), ``param`` the
    kernel parameter it traced the op to (None where it did not), ``location`` the
    user's source position the op maps to.

    Example:
        >>> OpVerdict(12, "load_view_tko", "bounds-checked load", "x", True, "...").verdict
        'accepted'
    """

    line: int
    op: str
    access: str
    param: str | None
    accepted: bool
    reason: str
    text: str = ""
    location: SourceLocation | None = None

    @property
    def verdict(self) -> str:
        return "accepted" if self.accepted else "refused"

    @property
    def writes(self) -> bool:
        return self.op in WRITE_OPS


@dataclass
class CheckReport:
    """What :func:`check_tileir` looked at, its verdict on each memory op, and how long
    it took."""

    entries: int = 0
    ops: int = 0
    partition_stores: int = 0
    #: of the partition stores, the guarded sub-tile stores of p.store(tile, offset=...)
    sub_tile_stores: int = 0
    unchecked_loads: int = 0
    gathers: int = 0
    seconds: float = 0.0
    #: the verdict on every memory op (reads and writes), in the order of the text
    verdicts: list[OpVerdict] = field(default_factory=list)

    def __str__(self) -> str:
        return (f"{self.ops} ops in {self.entries} entries: {self.partition_stores} "
                f"partition stores, {self.unchecked_loads} unchecked loads, "
                f"{self.gathers} gathers ({self.seconds * 1e3:.2f} ms)")

