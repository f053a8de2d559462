"""Which line of the user's source each Tile IR op came from.

Why: the lab shows a kernel's source beside its Tile IR and links every op to the line
that produced it. ``tileirdisasm -g`` (``--print-debug-info``) prints each op with a
``loc(#locN)`` suffix whose aliases, defined at the end of the listing, resolve to
positions in tilelab's lowered source; the kernel's location map
(``Artifacts.location_map``) turns those into the user's file (or notebook cell) and line.

Example:
    >>> text = '''%1 = addf %a, %b : tile<4xf32> loc(#loc2)
    ... #loc1 = loc("k.py":6:4)
    ... #loc2 = #cuda_tile.di_loc<#loc1 in #di_subprogram>'''
    >>> [(l.text, l.line) for l in parse_debug_tileir(text)]
    [('%1 = addf %a, %b : tile<4xf32>', 6)]
"""
from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

__all__ = ["IRLine", "parse_debug_tileir", "annotate_tileir"]

LocationMap = Callable[[str, int, int], "tuple[str, int, int] | None"]

_ALIAS_DEF = re.compile(r"^\s*(#[\w$.-]+)\s*=\s*(.*)$")
_FILE_LOC = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+):(\d+)')
_ALIAS_REF = re.compile(r"#loc[\w$.-]*")


@dataclass(frozen=True)
class IRLine:
    """One line of Tile IR and the user's source position it came from (None if unknown).

    Example:
        >>> IRLine("return", None, None, None).located
        False
    """

    text: str
    filename: str | None
    line: int | None
    col: int | None

    @property
    def located(self) -> bool:
        """Whether the line maps to a source position.

        Example:
            >>> IRLine("%0 = make_token : token", "cell", 5, 1).located
            True
        """
        return self.line is not None


def _split_loc(line: str) -> tuple[str, str | None]:
    """(op text without its trailing ``loc(...)``, the loc expression or None)."""
    stripped = line.rstrip()
    if not stripped.endswith(")"):
        return line.rstrip(), None
    idx = stripped.rfind(" loc(")
    if idx < 0:
        return line.rstrip(), None
    depth = 0
    for ch in stripped[idx + 1:]:  # the parentheses after 'loc' must close at the end
        depth += ch == "("
        depth -= ch == ")"
    if depth != 0:
        return line.rstrip(), None
    return stripped[:idx].rstrip(), stripped[idx + 1:]


def _resolve(expr: str, aliases: dict[str, str], seen: frozenset = frozenset()
             ) -> tuple[str, int, int] | None:
    m = _FILE_LOC.search(expr)
    if m:
        return m.group(1), int(m.group(2)), int(m.group(3))
    for ref in _ALIAS_REF.findall(expr):  # callsite(#a at #b): the callee comes first
        if ref in aliases and ref not in seen:
            hit = _resolve(aliases[ref], aliases, seen | {ref})
            if hit is not None:
                return hit
    return None


def _positions(expr: str, aliases: dict[str, str], seen: frozenset = frozenset()
               ) -> "list[tuple[str, int, int]]":
    """Every file position of a loc expression, callee before caller."""
    m = _FILE_LOC.search(expr)
    if m:
        return [(m.group(1), int(m.group(2)), int(m.group(3)))]
    out = []
    for ref in _ALIAS_REF.findall(expr):
        if ref in aliases and ref not in seen:
            out += _positions(aliases[ref], aliases, seen | {ref})
    return out


def parse_debug_tileir(text: str, location_map: LocationMap | None = None) -> list[IRLine]:
    """The ops of ``tileirdisasm -g`` output with their (mapped) source positions.

    Alias definitions (``#loc...``, ``#di_...``) are consumed, not returned; op text loses
    its ``loc(...)`` suffix. ``location_map(file, line, col0)`` maps the lowered file's
    positions to the user's (``Artifacts.location_map`` is one).

    Example:
        >>> parse_debug_tileir('return loc("k.py":3:0)',
        ...                    lambda f, l, c: ("cell", l - 1, c + 1))[0]
        IRLine(text='return', filename='cell', line=2, col=1)
    """
    aliases: dict[str, str] = {}
    body: list[str] = []
    for raw in text.splitlines():
        m = _ALIAS_DEF.match(raw)
        if m and raw.lstrip().startswith("#"):
            aliases[m.group(1)] = m.group(2)
        else:
            body.append(raw)
    while body and not body[-1].strip():
        body.pop()
    out = []
    for raw in body:
        op, loc = _split_loc(raw)
        where = _resolve(loc, aliases) if loc else None
        if where is not None and location_map is not None:
            # callsite(callee at caller): an op made inside cuTile (x.astype -> _stub.py)
            # belongs to the user's line that called it: the first position the map
            # translates (one in the lowered source), else the callee's
            mapped = ((p, location_map(*p)) for p in _positions(loc, aliases))
            where = next((m for p, m in mapped if m and m[0] != p[0]), None) or \
                location_map(*where) or where
        if where is None:
            out.append(IRLine(op, None, None, None))
        else:
            out.append(IRLine(op, where[0], int(where[1]), int(where[2])))
    return out


def annotate_tileir(art: Any, location_map: LocationMap | None = None
                    ) -> tuple[list[IRLine], str | None]:
    """Tile IR lines of compiled artifacts, located in the user's source.

    Runs the toolchain's ``tileirdisasm -g`` on ``art.bytecode``; returns the lines and
    None, or, when the disassembler is missing or fails, the plain ``art.tileir`` lines
    unlocated and the reason. ``location_map`` defaults to ``art.location_map``.

    Example:
        >>> lines, problem = annotate_tileir(art)          # doctest: +SKIP
        >>> lines[0].line                                   # doctest: +SKIP
        5
    """
    from tilelab.compiler.toolchain import find_toolchain
    from tilelab.errors import ToolchainError

    plain = [IRLine(t, None, None, None) for t in art.tileir.rstrip().splitlines()]
    try:
        tc = find_toolchain()
    except ToolchainError as e:
        return plain, f"no toolchain to read debug info with: {e.message}"
    if tc.tileirdisasm is None:
        return plain, ("tileirdisasm is not beside tileiras (CUDA 13.4 or newer has it), so "
                       "the ops are not linked to source lines")
    with tempfile.TemporaryDirectory(prefix="tilelab-lab-") as tmp:
        path = Path(tmp) / "kernel.tileirbc"
        path.write_bytes(art.bytecode)
        try:
            r = tc.run(tc.tileirdisasm, ["-g", str(path)], timeout=60)
        except ToolchainError as e:
            return plain, e.message
    if r.returncode != 0:
        return plain, f"tileirdisasm -g failed: {(r.stderr or r.stdout).strip()}"
    return parse_debug_tileir(r.stdout, location_map or art.location_map), None
