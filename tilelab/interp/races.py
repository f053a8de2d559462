"""Inter-block race detection with per-array owner maps.

For every array argument we keep, per element, the first block that wrote it and up to two
blocks that read it (plus the source line of each access). Each new access is checked
against these maps with vectorized numpy, so the cost is linear in the number of elements
touched, however many blocks there are. An element written by one block and written or
read by another block is a race, unless both accesses are atomics (atomics are not tracked
here at all).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tilelab.errors import SourceLocation

__all__ = ["Race", "RaceDetector", "MAX_RACES", "Region"]

#: Most distinct race records kept; further ones are only counted.
MAX_RACES = 1000
_EXAMPLES = 4

#: A tile access region: a box ``((start, stop), ...)`` or a flat index array.
Region = Any


@dataclass
class Race:
    """Two blocks touched the same elements of an array, at least one of them writing.

    Attributes:
        arg: the array argument (parameter name; ``xs[1]`` inside a tuple parameter).
        kind: ``"write-write"`` or ``"read-write"``.
        blocks: the block of the earlier access and the block of the later one.
        accesses: what each of them did, e.g. ``("read", "write")``.
        locations: source location of each of the two accesses (None if unknown).
        count: how many element accesses conflicted between these two accesses.
        examples: a few conflicting element indices of the array.

    Example:
        >>> r = Race("out", "write-write", ((0, 0, 0), (1, 0, 0)), ("write", "write"),
        ...          (None, None), 16, [(0,)])
        >>> print(r)  # doctest: +NORMALIZE_WHITESPACE
        write-write race on 'out': blocks (0, 0, 0) and (1, 0, 0) both write 16 elements,
        e.g. out[0]
    """

    arg: str
    kind: str
    blocks: tuple[tuple[int, int, int], tuple[int, int, int]]
    accesses: tuple[str, str]
    locations: tuple[SourceLocation | None, SourceLocation | None]
    count: int
    examples: list[tuple[int, ...]] = field(default_factory=list)

    def _where(self, i: int) -> str:
        loc = self.locations[i]
        return "?" if loc is None else f"{loc.filename}:{loc.line}"

    def __str__(self) -> str:
        a, b = self.blocks
        ex = ", ".join(f"{self.arg}[{', '.join(str(i) for i in e)}]" for e in self.examples)
        if self.accesses == ("write", "write"):
            what = f"blocks {a} and {b} both write {self.count} elements"
        else:
            what = (f"block {a} {self.accesses[0]}s and block {b} {self.accesses[1]}s "
                    f"{self.count} elements")
        text = f"{self.kind} race on '{self.arg}': {what}, e.g. {ex}"
        if any(loc is not None for loc in self.locations):
            text += (f"; {self.accesses[0]} at {self._where(0)}, {self.accesses[1]} at "
                     f"{self._where(1)}")
        return text


class _Maps:
    """Owner maps of one array argument (allocated on its first traced access; the maps
    of a second reader only when some element is read by two blocks)."""

    def __init__(self, shape: tuple[int, ...]):
        self.shape = shape
        self.writer = np.full(shape, -1, np.int32)
        self.writer_loc = np.full(shape, -1, np.int32)
        self.reader = np.full(shape, -1, np.int32)
        self.reader_loc = np.full(shape, -1, np.int32)
        self._reader2: np.ndarray | None = None
        self._reader2_loc: np.ndarray | None = None

    @property
    def reader2(self) -> np.ndarray:
        if self._reader2 is None:
            self._reader2 = np.full(self.shape, -1, np.int32)
            self._reader2_loc = np.full(self.shape, -1, np.int32)
        return self._reader2

    @property
    def reader2_loc(self) -> np.ndarray:
        self.reader2  # noqa: B018 - allocates both maps
        return self._reader2_loc  # type: ignore[return-value]


def _select(arr: np.ndarray, where: Any) -> np.ndarray:
    """Elements of an owner map; ``where`` is a tuple of slices or flat indices."""
    if isinstance(where, tuple):
        return arr[where]
    return arr.reshape(-1)[where]


def _assign(arr: np.ndarray, where: Any, values: Any) -> None:
    if isinstance(where, tuple):
        arr[where] = values
    else:
        arr.reshape(-1)[where] = values


def _coords(region: Region, shape: tuple[int, ...], mask: np.ndarray) -> list[tuple[int, ...]]:
    """Up to a few element indices of the array where ``mask`` (over the region) is set."""
    picks = np.flatnonzero(mask.reshape(-1))[:_EXAMPLES]
    out = []
    for p in picks:
        if isinstance(region, tuple):
            local = np.unravel_index(int(p), tuple(b - a for a, b in region))
            out.append(tuple(int(a + i) for (a, _b), i in zip(region, local)))
        else:
            out.append(tuple(int(i) for i in np.unravel_index(int(region[p]), shape)))
    return out


class RaceDetector:
    """Checks every traced access against the owner maps of its array."""

    def __init__(self, block_index_of: Any):
        self._maps: dict[str, _Maps] = {}
        self._block_index_of = block_index_of
        self._locations: list[SourceLocation | None] = []
        self._location_ids: dict[Any, int] = {}
        self._races: dict[tuple, Race] = {}
        self.dropped = 0

    @property
    def races(self) -> list[Race]:
        return list(self._races.values())

    def maps(self, arg: str) -> _Maps | None:
        return self._maps.get(arg)

    def _loc_id(self, loc: SourceLocation | None) -> int:
        key = None if loc is None else (loc.filename, loc.line, loc.col)
        found = self._location_ids.get(key)
        if found is None:
            found = len(self._locations)
            self._locations.append(loc)
            self._location_ids[key] = found
        return found

    def check(self, arg: str, shape: tuple[int, ...], kind: str, region: Region, block: int,
              loc: SourceLocation | None) -> None:
        """Check a ``"read"`` or ``"write"`` of ``region`` by linear block ``block``."""
        maps = self._maps.get(arg)
        if maps is None:
            maps = self._maps[arg] = _Maps(shape)
        lid = self._loc_id(loc)
        where = tuple(slice(a, b) for a, b in region) if isinstance(region, tuple) else region
        writer = _select(maps.writer, where)
        # Owner ids are >= -1, so max() < 0 means "nobody yet": the common, fast case.
        written = np.size(writer) and writer.max() >= 0
        if written:
            conflict = (writer != -1) & (writer != block)
            if conflict.any():
                race_kind = "write-write" if kind == "write" else "read-write"
                self._report(arg, race_kind, ("write", kind), region, shape, conflict,
                             writer, _select(maps.writer_loc, where), block, lid)
        r1 = _select(maps.reader, where)
        read = np.size(r1) and r1.max() >= 0
        if kind == "write":
            if read:
                r2 = _select(maps.reader2, where)
                use1 = (r1 != -1) & (r1 != block)
                other = np.where(use1, r1, np.where((r2 != -1) & (r2 != block), r2, -1))
                conflict = other != -1
                if conflict.any():
                    other_loc = np.where(use1, _select(maps.reader_loc, where),
                                         _select(maps.reader2_loc, where))
                    self._report(arg, "read-write", ("read", "write"), region, shape,
                                 conflict, other, other_loc, block, lid)
            if not written:
                _assign(maps.writer, where, block)
                _assign(maps.writer_loc, where, lid)
            else:
                fresh = writer == -1
                if fresh.any():
                    _assign(maps.writer, where, np.where(fresh, block, writer))
                    _assign(maps.writer_loc, where,
                            np.where(fresh, lid, _select(maps.writer_loc, where)))
        elif not read:
            _assign(maps.reader, where, block)
            _assign(maps.reader_loc, where, lid)
        else:
            first = r1 == -1
            if first.any():
                _assign(maps.reader, where, np.where(first, block, r1))
                _assign(maps.reader_loc, where,
                        np.where(first, lid, _select(maps.reader_loc, where)))
            r2 = _select(maps.reader2, where)
            second = ~first & (r1 != block) & (r2 == -1)
            if second.any():
                _assign(maps.reader2, where, np.where(second, block, r2))
                _assign(maps.reader2_loc, where,
                        np.where(second, lid, _select(maps.reader2_loc, where)))

    def _report(self, arg: str, kind: str, accesses: tuple[str, str], region: Region,
                shape: tuple[int, ...], conflict: np.ndarray, other_block: np.ndarray,
                other_loc: np.ndarray, block: int, lid: int) -> None:
        keys = other_block[conflict].astype(np.int64) * (1 << 31) + other_loc[conflict]
        uniq, counts = np.unique(keys, return_counts=True)
        for key, n in zip(uniq.tolist(), counts.tolist()):
            ob, ol = divmod(int(key), 1 << 31)
            rkey = (arg, kind, ob, block, ol, lid)
            race = self._races.get(rkey)
            if race is None:
                if len(self._races) >= MAX_RACES:
                    self.dropped += 1
                    continue
                mask = conflict & (other_block == ob) & (other_loc == ol)
                race = Race(arg, kind, (self._block_index_of(ob), self._block_index_of(block)),
                            accesses, (self._locations[ol], self._locations[lid]), 0,
                            _coords(region, shape, mask))
                self._races[rkey] = race
            race.count += int(n)
