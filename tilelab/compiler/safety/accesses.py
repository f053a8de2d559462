"""The checker's record of every memory access it accepted, and why each is safe.

The checker decides each access of a kernel (and of every helper it reaches) when it
judges the call: a partition's ``p.store`` / ``p.load``, ``tl.load_like``, cuTile's
``ct.load`` / ``ct.gather`` and, in unsafe kernels, writes, views and raw ops. Where it
accepts one, it appends an :class:`AccessRecord` saying where the access is written, what
it touches and which of the six :class:`AccessKind` s makes it safe. The records are
what the lab's Safety view shows, so they are written by the rule that accepted the
access, never worked out again from the source afterwards. Recording changes nothing
that is accepted or refused.

Example:
    >>> import tilelab as tl
    >>> from tilelab.compiler.safety import analyze_kernel
    >>> def add(z: tl.Out, x: tl.In, y: tl.In):
    ...     z.store(tl.load_like(x, z) + tl.load_like(y, z))
    >>> [(r.kind.label, r.text) for r in analyze_kernel(add).accesses][:2]
    [('own-tile store', 'z.store(tl.load_like(x, z) + tl.load_like(y, z))'), ('launch-proven read', 'tl.load_like(x, z)')]
"""
from __future__ import annotations

import ast
import enum
from dataclasses import dataclass
from typing import Any

__all__ = ["AccessKind", "AccessRecord", "record_access"]


class AccessKind(str, enum.Enum):
    """Why one memory access of a kernel is safe (the value is a CSS-friendly id).

    Example:
        >>> AccessKind.OWN_STORE.label, str(AccessKind.MASKED_GATHER)
        ('own-tile store', 'masked-gather')
    """

    #: ``p.store(tile)`` on a ``tl.Out``/``tl.InOut`` partition: the block's own tile
    OWN_STORE = "own-store"
    #: ``p.load()`` on a ``tl.InOut`` partition: the block's own tile
    OWN_LOAD = "own-load"
    #: ``tl.load_like(x, p)``: the launch proves from the shapes that the tile meets x
    LAUNCH_PROVEN = "launch-proven"
    #: ``ct.load`` keeping cuTile's bounds check: elements outside are padding
    BOUNDS_CHECKED = "bounds-checked"
    #: ``ct.gather``: every index masked against the array's shape
    MASKED_GATHER = "masked-gather"
    #: an ``unsafe=True`` opt-out: a ``tl.Raw`` access, an unchecked load, a raw op
    UNSAFE = "unsafe"

    def __str__(self) -> str:
        return self.value

    @property
    def label(self) -> str:
        """A short name for legends: ``own-tile store``, ``masked gather`` ..."""
        return _LABELS[self]

    @property
    def meaning(self) -> str:
        """What a mark of this kind says, in one sentence (the legend's tooltip)."""
        return _MEANINGS[self]


_LABELS = {
    AccessKind.OWN_STORE: "own-tile store",
    AccessKind.OWN_LOAD: "own-tile load",
    AccessKind.LAUNCH_PROVEN: "launch-proven read",
    AccessKind.BOUNDS_CHECKED: "bounds-checked read",
    AccessKind.MASKED_GATHER: "masked gather",
    AccessKind.UNSAFE: "unsafe opt-out",
}
_MEANINGS = {
    AccessKind.OWN_STORE: "writes this block's own tile of a tl.Out/tl.InOut partition; the "
                          "partition fixes the destination, so no two blocks write one "
                          "element",
    AccessKind.OWN_LOAD: "reads this block's own tile of a tl.InOut partition, which no "
                         "other block writes",
    AccessKind.LAUNCH_PROVEN: "tl.load_like reads a parameter at the partition's position; "
                              "every launch proves from the shapes that each block's tile "
                              "meets the array (zero padding past its edge; wholly inside "
                              "under check_bounds=False)",
    AccessKind.BOUNDS_CHECKED: "keeps cuTile's bounds check: elements outside the array are "
                               "padding, never memory outside it",
    AccessKind.MASKED_GATHER: "reads elements at computed indices, each masked against the "
                              "array's shape (masked lanes get the padding value)",
    AccessKind.UNSAFE: "an @tl.kernel(unsafe=True) opt-out: a tl.Raw access, an unchecked "
                       "load or a raw op, which nothing proves; run it on the CPU "
                       "interpreter to look for races",
}


@dataclass(frozen=True)
class AccessRecord:
    """One memory access the checker accepted: where, what and why it is safe.

    Positions are those of the user's file or notebook cell: 1-based lines, 1-based
    character columns, ``end_col`` just past the access's last character on
    ``end_line``. ``arrays`` are the kernel (or helper) parameters the access reaches;
    ``reason`` is the checker's sentence for this access.

    Example:
        >>> r = AccessRecord(AccessKind.OWN_LOAD, "acc.load", ("acc",), False, "...",
        ...                  "cell", 4, 9, 4, 19, "acc.load()", "k")
        >>> r.where, r.contains(4, 9), r.contains(5, 1)
        ('cell:4:9', True, False)
    """

    kind: AccessKind
    #: the callee as written: ``z.store``, ``tl.load_like``, ``ct.load``, ``.store()``
    op: str
    arrays: tuple[str, ...]
    writes: bool
    reason: str
    filename: str
    line: int
    col: int
    end_line: int
    end_col: int
    #: the access's source text
    text: str
    #: the function it is written in (the kernel or a helper)
    function: str

    @property
    def where(self) -> str:
        return f"{self.filename}:{self.line}:{self.col}"

    def contains(self, line: int, col: int) -> bool:
        """Whether the position (1-based line and column) lies inside the access."""
        if not self.line <= line <= self.end_line:
            return False
        if line == self.line and col < self.col:
            return False
        return not (line == self.end_line and col >= self.end_col)

    def sort_key(self) -> tuple:
        return (self.filename, self.line, self.col, -self.end_line, -self.end_col,
                self.kind.value)


def _char_col(src: Any, line: int, byte_col: int) -> int:
    """1-based character column of a byte offset on a line of ``src``."""
    text = src.line_text(line)
    return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore")) + 1


def record_access(checker: Any, node: ast.AST, kind: AccessKind, op: str,
                  arrays: Any, reason: str, *, writes: bool = False) -> None:
    """Append the record of an access the checker accepted (one per node and kind)."""
    src = checker.src
    line, end_line = node.lineno, getattr(node, "end_lineno", None) or node.lineno
    col = _char_col(src, line, node.col_offset)
    end = getattr(node, "end_col_offset", None)
    end_col = _char_col(src, end_line, end) if end is not None else col + 1
    rec = AccessRecord(AccessKind(kind), op, tuple(sorted(set(arrays))), writes, reason,
                       src.filename, line, col, end_line, end_col,
                       checker.text(node), checker.fn.__name__)
    if rec not in checker.accesses:
        checker.accesses.append(rec)
