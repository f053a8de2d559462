"""Where compiler output points, in the user's terms: every error, remark, SASS line and
Tile IR verdict names the user's file, line and column, not the lowered text's.

The lowered kernel, its frozen helpers and the tile-index helpers are compiled from
synthetic files (``<tilelab-lowered ...>``, ``<tilelab-frozen ...>``,
``<tilelab-device ...>``): :func:`location_mapper` maps a position in those files back
to the user's source, and :func:`locate_frames` picks, of an op's call frames, the
innermost one in the user's code.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable

from tilelab.errors import SourceLocation

if TYPE_CHECKING:
    from tilelab.compiler.lower import LoweredKernel

__all__ = ["location_mapper", "locate_frames"]

#: maps (file, line, 0-based col) of compiler output to (file, line, 1-based col)
Mapper = Callable[[str, int, int], tuple[str, int, int]]


def location_mapper(lowered: LoweredKernel) -> Mapper:
    """(file, line, 0-based col) in compiler output -> (file, line, 1-based col) for users.

    Artifacts loaded from the cache may name the lowered file of an earlier definition
    of the same text (a notebook cell re-run): the name ends with the text's digest, so
    any lowered name with this digest maps through this kernel's source map.
    """
    digest = lowered.filename.rsplit(" ", 1)[-1]

    def mapping(filename: str, line: int, col: int) -> tuple[str, int, int]:
        if filename == lowered.filename or (
                filename.startswith("<tilelab-lowered ") and filename.endswith(" " + digest)):
            loc = lowered.source_map.to_user(line, col)
            return loc.filename, loc.line, loc.col
        helper = getattr(lowered, "helper_files", None) or {}
        if filename in helper:  # a frozen helper's synthetic file: same lines, columns
            return helper[filename], line, (col or 0) + 1
        return filename, line, (col or 0) + 1
    return mapping


def locate_frames(frames: Iterable[tuple[str, int, int]], mapper: Mapper | None
                  ) -> tuple[SourceLocation | None, list[str]]:
    """(where, the calling frames) of an op whose frames (file, line, 0-based col,
    innermost first) are ``frames``: ``where`` is the innermost frame in the user's code
    (cuTile's own sources and tilelab's compiler and tile-index helpers are passed over
    when any other frame is left), mapped by ``mapper`` (None: columns made 1-based);
    (None, []) without frames.

    Example:
        >>> where, chain = locate_frames([("/x/tilelab/compiler/f.py", 9, 0),
        ...                               ("k.py", 3, 4), ("nb.py", 7, 0)], None)
        >>> str(where), chain
        ('k.py:3:5', ['nb.py:7:1'])
    """
    mapped = []
    for f, ln, col in frames:
        if mapper is not None:
            uf, ul, uc = mapper(f, ln, col)
        else:
            uf, ul, uc = f, ln, col + 1
        mapped.append(SourceLocation(uf, ul, uc))
    if not mapped:
        return None, []
    # prefer a frame in the user's code over cuTile's own sources and tilelab's helpers
    def internal(loc: SourceLocation) -> bool:
        fn = loc.filename.replace("\\", "/")
        return "/cuda/tile/" in fn or "/tilelab/compiler/" in fn or \
            fn.startswith("<tilelab-device ")
    user = [m for m in mapped if not internal(m)] or mapped
    where = user[0]
    chain = [str(m) for m in user[1:]]
    return where, chain
