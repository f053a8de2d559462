"""The map from a lowered kernel's text back to the user's file or cell.

The lowering (:mod:`tilelab.compiler.lower`) writes the kernel as a sequence of pieces:
text copied verbatim from the user's source, and generated text anchored at the source
offset it stands for. :class:`SourceMap` keeps where each piece landed, so a position
in the lowered text (a cuTile or tileiras error, a remark, a SASS line) names the
user's line and column (:mod:`tilelab.compiler.locations` asks it). It describes the
generated text and decides nothing that runs: it is not part of the trusted base
(docs/safety.md).
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Iterable

from tilelab.errors import SourceLocation

__all__ = ["SourceMap"]


@dataclass(frozen=True)
class SourceMap:
    """Maps (line, byte column) in the lowered text to the user's source location."""

    filename: str
    first_line: int
    orig_text: str
    out_text: str
    out_starts: tuple[int, ...]
    pieces: tuple[tuple[int, int, int, bool], ...]  # (out_start, out_end, orig, verbatim)

    def orig_offset(self, line: int, col: int | None = None) -> int | None:
        """Offset in the original block of lowered (1-based line, 0-based byte col)."""
        out_lines = self.out_text.splitlines(True)
        if line < 1 or line > len(out_lines) or line < self.first_line:
            return None
        lt = out_lines[line - 1]
        col_chars = len(lt.encode()[:col or 0].decode(errors="ignore")) if col else 0
        off = self.out_starts[line - 1] + col_chars
        i = bisect.bisect_right([p[0] for p in self.pieces], off) - 1
        if i < 0:
            return None
        start, _end, orig, verbatim = self.pieces[i]
        return orig + (off - start) if verbatim else orig

    def to_user(self, line: int, col: int | None = None) -> SourceLocation:
        """User location of lowered (1-based line, 0-based UTF-8 byte column)."""
        o = self.orig_offset(line, col)
        if o is None:
            return SourceLocation(self.filename, max(line, 1), 1)
        before = self.orig_text[:o]
        oline = self.first_line + before.count("\n")
        ocol = len(before) - (before.rfind("\n") + 1)
        return SourceLocation(self.filename, oline, ocol + 1)

    @classmethod
    def build(cls, filename: str, first_line: int, orig_text: str, text: str,
              prefix_len: int, pieces: Iterable[Any]) -> "SourceMap":
        """The map of lowered ``text``: ``prefix_len`` characters of blank lines (and an
        ``if True:`` for an indented kernel) before the block that ``pieces`` (each with
        ``text``, ``orig`` and ``verbatim``) make, offsets relative to that block.

        Example:
            >>> from types import SimpleNamespace as P
            >>> m = SourceMap.build("k.py", 2, "x = 1\\n", "\\nx = 1\\n", 1,
            ...                     [P(text="x = 1\\n", orig=0, verbatim=True)])
            >>> m.to_user(2, 4)
            SourceLocation(filename='k.py', line=2, col=5, end_col=None)
        """
        spans, pos = [], 0
        for p in pieces:
            spans.append((pos, pos + len(p.text), p.orig, p.verbatim))
            pos += len(p.text)
        out_starts, acc = [], 0
        for ln in text.splitlines(True):
            out_starts.append(acc - prefix_len)
            acc += len(ln)
        return cls(filename, first_line, orig_text, text, tuple(out_starts), tuple(spans))
