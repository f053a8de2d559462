"""Inter-block race detection on memory addresses, with owner maps and lock-based ordering.

Memory: every array argument is placed in the *space* of its allocation (the buffer its
numpy view lies in). Arguments whose allocations overlap share one space, so an access
through one view and an access through another view of the same bytes meet in the same
owner map (aliasing arguments, a view whose elements overlap themselves, raw-memory
offsets). A space is indexed either

* logically, when it holds a single argument whose elements cover its allocation exactly
  once (a fresh or C/F-contiguous array: the common case): the maps are shaped like the
  argument and tile accesses are boxes of it, so checking costs a few slice operations;
* by address otherwise: the maps cover the allocation in *granules* (the greatest common
  divisor of the item sizes, strides and offsets involved), in pages allocated on first
  touch, so a small view of a huge buffer costs what it touches.

Owner maps: per element (granule), the block that wrote it and up to two blocks that read
it (plus the source line of each access). Each new access is checked against them with
vectorized numpy, so the cost is linear in the elements touched. An element written by
one block and written or read by another block is a race, unless both accesses are
atomics (atomics are not tracked in the maps) or the earlier access *happens before* the
later one through a lock.

Locks: a successful ``atomic_cas`` of a word is an *acquire* of that word by the block; a
later ``atomic_xchg`` or plain store of a word the block holds is a *release*. Access
``a`` of block ``A`` happens before access ``b`` of block ``B`` when ``A`` released a
lock after ``a`` and ``B`` acquired it before ``b`` (blocks run to completion one after
another, so every release of ``A`` precedes every acquire of ``B``), or through a chain
of such hand-overs via blocks that ran in between. Accesses protected by the same lock
are therefore never races, the same kernel without the lock still races.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from tilelab.errors import SourceLocation, display_filename

__all__ = ["Race", "RaceDetector", "MAX_RACES", "Region", "allocation_bounds",
           "raw_offsets_to_indices", "race_hint"]

#: Most distinct race records kept; further ones are only counted.
MAX_RACES = 1000
_EXAMPLES = 4
#: granules per page of an address-indexed space
_PAGE_SHIFT = 16
_PAGE = 1 << _PAGE_SHIFT

#: A tile access region: a box ``((start, stop), ...)`` or a flat index array.
Region = Any


@dataclass
class Race:
    """Two blocks touched the same memory, at least one of them writing.

    Attributes:
        arg: the array argument of the later access (parameter name; ``xs[1]`` inside a
            tuple parameter).
        kind: ``"write-write"`` or ``"read-write"``.
        blocks: the block of the earlier access and the block of the later one.
        accesses: what each of them did, e.g. ``("read", "write")``.
        locations: source location of each of the two accesses (None if unknown).
        count: how many element accesses conflicted between these two accesses.
        examples: a few conflicting element indices of ``arg`` (element offsets from its
            base pointer when ``raw``).
        other_arg: the argument of the earlier access when it is another view of the same
            memory (aliasing arguments), else None.
        raw: the later access went through ``Array.get_raw_memory()``.

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
    other_arg: str | None = None
    raw: bool = False

    def _where(self, i: int) -> str:
        loc = self.locations[i]
        if loc is None:
            return "?"
        shown = display_filename(loc.filename)
        # a notebook cell reads as IPython's tracebacks do: "In[3], line 5"
        return f"{loc.filename}:{loc.line}" if shown == loc.filename else \
            f"{shown}, line {loc.line}"

    def __str__(self) -> str:
        a, b = self.blocks
        if self.raw:
            ex = (f"offsets {', '.join(str(e[0]) for e in self.examples)} of "
                  f"{self.arg}.get_raw_memory()")
        else:
            ex = ", ".join(f"{self.arg}[{', '.join(str(i) for i in e)}]"
                           for e in self.examples)
        n = f"{self.count} element{'s' * (self.count != 1)}"
        if self.accesses == ("write", "write"):
            what = f"blocks {a} and {b} both write {n}"
        else:
            what = (f"block {a} {self.accesses[0]}s and block {b} {self.accesses[1]}s "
                    f"{n}")
        via = ""
        if self.other_arg is not None and self.other_arg != self.arg:
            via = f" (aliasing '{self.other_arg}', which the earlier access went through)"
        text = f"{self.kind} race on '{self.arg}'{via}: {what}, e.g. {ex}"
        if any(loc is not None for loc in self.locations):
            first, then = self._where(0), self._where(1)
            if first == then and self.accesses[0] == self.accesses[1]:
                text += f"; both by the {self.accesses[0]} at {first}"   # said once
            else:
                text += f"; {self.accesses[0]} at {first}, {self.accesses[1]} at {then}"
        return text


def race_hint(races: list[Race]) -> str:
    """What to write instead of the racing access of ``races[0]``: an output every block
    writes becomes a ``tl.Out`` partition (each block then stores only its own tile, so
    the race cannot be written), an input some block overwrites is read as ``tl.In``
    beside a separate output; a value blocks share on purpose takes atomics.

    Why not "index the store with ``ct.bid``": a racy kernel usually does already; what
    makes the destination of each block's store its own is a partition.

    Example:
        >>> r = Race("out", "write-write", ((0, 0, 0), (1, 0, 0)), ("write", "write"),
        ...          (None, None), 16, [(0,)])
        >>> race_hint([r]).split(":")[0]
        "make 'out' a partition"
    """
    if not races:
        return ""
    r = races[0]
    arg = r.arg.split("[")[0]   # a tuple parameter's element: the parameter
    if r.kind == "write-write":
        return (f"make {arg!r} a partition: declare it '{arg}: tl.Out', launch with "
                f"{arg}.partition(tile_shape) and store with {arg}.store(tile): each "
                "block then writes only its own tile, and the kernel needs no "
                "unsafe=True. A value the blocks share on purpose (a sum, a histogram) "
                "takes ct.atomic_add instead")
    return (f"read {arg!r} as tl.In and write the result to a separate output, a tl.Out "
            "partition stored with out.store(tile): then no block writes what another "
            "reads, and the kernel needs no unsafe=True")


# ---- owner maps ---------------------------------------------------------------------------

class _Maps:
    """Owner maps of one logical argument (shaped like it) or of one page of an address
    space (flat). The second reader's maps and the epochs (used once some block took a
    lock) are allocated when first needed."""

    __slots__ = ("shape", "writer", "writer_site", "reader", "reader_site", "_reader2",
                 "_reader2_site", "w_epoch", "r_epoch", "r2_epoch")

    def __init__(self, shape: tuple[int, ...]):
        self.shape = shape
        self.writer = np.full(shape, -1, np.int32)
        self.writer_site = np.full(shape, -1, np.int32)
        self.reader = np.full(shape, -1, np.int32)
        self.reader_site = np.full(shape, -1, np.int32)
        self._reader2: np.ndarray | None = None
        self._reader2_site: np.ndarray | None = None
        self.w_epoch: np.ndarray | None = None
        self.r_epoch: np.ndarray | None = None
        self.r2_epoch: np.ndarray | None = None

    @property
    def reader2(self) -> np.ndarray:
        if self._reader2 is None:
            self._reader2 = np.full(self.shape, -1, np.int32)
            self._reader2_site = np.full(self.shape, -1, np.int32)
            if self.w_epoch is not None:
                self.r2_epoch = np.zeros(self.shape, np.int32)
        return self._reader2

    @property
    def reader2_site(self) -> np.ndarray:
        self.reader2  # noqa: B018 - allocates both maps
        return self._reader2_site  # type: ignore[return-value]

    def ensure_epochs(self) -> None:
        if self.w_epoch is None:
            self.w_epoch = np.zeros(self.shape, np.int32)
            self.r_epoch = np.zeros(self.shape, np.int32)
            if self._reader2 is not None:
                self.r2_epoch = np.zeros(self.shape, np.int32)


def _select(arr: np.ndarray, where: Any) -> np.ndarray:
    """Elements of an owner map; ``where`` is a tuple of slices or flat indices (always an
    array, also for a 0-d map)."""
    if isinstance(where, tuple):
        return arr[where + (Ellipsis,)]
    return arr.reshape(-1)[where]


def _assign(arr: np.ndarray, where: Any, values: Any) -> None:
    if isinstance(where, tuple):
        arr[where] = values
    else:
        arr.reshape(-1)[where] = values


# ---- memory layout ------------------------------------------------------------------------

def _bounds(a: np.ndarray) -> tuple[int, int]:
    """Byte range [lo, hi) covered by the elements of ``a``."""
    ptr = a.__array_interface__["data"][0]
    if a.size == 0:
        return ptr, ptr
    lo = hi = ptr
    for n, st in zip(a.shape, a.strides):
        if st < 0:
            lo += st * (n - 1)
        else:
            hi += st * (n - 1)
    return lo, hi + a.itemsize


def allocation_bounds(a: np.ndarray) -> tuple[int, int]:
    """Byte range of the allocation ``a`` lies in, as far as numpy knows it: the extent
    of the outermost array of its ``base`` chain (which covers ``a``)."""
    b = a
    while isinstance(b.base, np.ndarray):
        b = b.base
    lo, hi = _bounds(b)
    alo, ahi = _bounds(a)
    return min(lo, alo), max(hi, ahi)


def _is_dense(a: np.ndarray) -> bool:
    """Whether the elements of ``a`` tile its byte range exactly once (any axis order,
    positive strides)."""
    dims = [(st, n) for st, n in zip(a.strides, a.shape) if n != 1]
    if any(st <= 0 for st, _n in dims):
        return False
    expect = a.itemsize
    for st, n in sorted(dims):
        if st != expect:
            return False
        expect *= n
    return True


def _nested(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    """Whether, with the axes sorted by stride, every stride is positive and spans the
    axes below it (no two elements overlap): then an element offset decomposes into
    coordinates greedily."""
    dims = sorted((st, i) for i, (st, n) in enumerate(zip(strides, shape)) if n > 1)
    span = itemsize
    for st, i in dims:
        if st <= 0 or st < span:
            return False
        span = st * shape[i]
    return True


class _Layout:
    """Where the elements of one array argument lie in its space."""

    __slots__ = ("name", "shape", "itemsize", "offset", "strides", "space", "nested")

    def __init__(self, name: str, data: np.ndarray, space: "_Space"):
        self.name = name
        self.shape = data.shape
        self.itemsize = data.itemsize
        self.offset = data.__array_interface__["data"][0] - space.lo  # element 0, bytes
        self.strides = tuple(int(s) for s in data.strides)
        self.space = space
        self.nested = _nested(self.shape, self.strides, self.itemsize)

    def byte_offsets(self, region: Any) -> np.ndarray:
        """Byte offsets (from the space's start) of a box or of flat C-order indices, in
        the region's lane order."""
        if isinstance(region, tuple):
            out = np.asarray(self.offset, np.int64)
            for d, (a, b) in enumerate(region):
                shape = [1] * len(region)
                shape[d] = b - a
                out = out + (np.arange(a, b, dtype=np.int64) * self.strides[d]).reshape(shape)
            return np.broadcast_to(out, tuple(b - a for a, b in region)).reshape(-1)
        idx = np.asarray(region, np.int64)
        if not self.shape:
            return np.full(idx.shape, self.offset, np.int64)
        coords = np.unravel_index(idx, self.shape)
        out = np.full(idx.shape, self.offset, np.int64)
        for c, st in zip(coords, self.strides):
            out += c.astype(np.int64) * st
        return out

    def element_indices(self, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(flat C-order indices, which lanes) of raw element offsets that hit an element
        of this view."""
        return raw_offsets_to_indices(self.shape, self.strides, self.itemsize, offsets,
                                      self.nested)


def raw_offsets_to_indices(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int,
                           offsets: np.ndarray, nested: bool | None = None
                           ) -> tuple[np.ndarray, np.ndarray]:
    """Element offsets from an array's base pointer -> (flat C-order indices of the
    elements they hit, mask of the offsets that hit one). Offsets into gaps between the
    elements of a strided view, or outside it, hit none; so do all offsets of a view whose
    elements overlap (there the element of an address is not unique).

    Example:
        >>> idx, hit = raw_offsets_to_indices((2, 3), (24, 4), 4, np.array([0, 4, 7, 100]))
        >>> idx.tolist(), hit.tolist()
        ([0, 4], [True, False, True, False])
    """
    offsets = np.asarray(offsets, np.int64)
    if not shape:
        hit = offsets == 0
        return np.zeros(int(hit.sum()), np.int64), hit
    dims = sorted(((st, i) for i, (st, n) in enumerate(zip(strides, shape)) if n > 1),
                  reverse=True)
    if nested is None:
        nested = _nested(shape, strides, itemsize)
    if not nested:
        return np.zeros(0, np.int64), np.zeros(offsets.shape, bool)
    rem = offsets * itemsize
    coords = [np.zeros(offsets.shape, np.int64) for _ in shape]
    ok = np.ones(offsets.shape, bool)
    for st, i in dims:
        c = rem // st
        rem = rem - c * st
        coords[i] = c
        ok &= (c >= 0) & (c < shape[i])
    ok &= rem == 0
    picked = tuple(c[ok] for c in coords)
    return np.ravel_multi_index(picked, shape).astype(np.int64), ok


class _Space:
    """One allocation (or several overlapping ones): its owner maps."""

    def __init__(self, sid: int, lo: int, hi: int, granule: int,
                 logical_shape: tuple[int, ...] | None):
        self.id = sid
        self.lo, self.hi = lo, hi
        self.granule = granule
        self.logical_shape = logical_shape
        self.maps: _Maps | None = None
        self.pages: dict[int, _Maps] = {}

    @property
    def logical(self) -> bool:
        return self.logical_shape is not None

    def logical_maps(self) -> _Maps:
        if self.maps is None:
            self.maps = _Maps(self.logical_shape)  # type: ignore[arg-type]
        return self.maps

    def page(self, p: int) -> _Maps:
        found = self.pages.get(p)
        if found is None:
            found = self.pages[p] = _Maps((_PAGE,))
        return found

    def all_maps(self) -> list[_Maps]:
        return ([self.maps] if self.maps is not None else []) + list(self.pages.values())


def _coords(region: Region, shape: tuple[int, ...], lanes: np.ndarray) -> list[tuple[int, ...]]:
    """Element indices of the array for a few lane numbers of an access."""
    out = []
    for p in lanes[:_EXAMPLES]:
        if isinstance(region, tuple):
            local = np.unravel_index(int(p), tuple(b - a for a, b in region))
            out.append(tuple(int(a + i) for (a, _b), i in zip(region, local)))
        else:
            out.append(tuple(int(i) for i in np.unravel_index(int(region[p]), shape)))
    return out


class _Access:
    """The access being checked: what it needs for reports."""

    __slots__ = ("arg", "kind", "block", "site", "epoch", "examples", "raw")

    def __init__(self, arg: str, kind: str, block: int, site: int, epoch: int,
                 examples: Callable[[np.ndarray], list], raw: bool):
        self.arg, self.kind, self.block, self.site = arg, kind, block, site
        self.epoch, self.examples, self.raw = epoch, examples, raw


class RaceDetector:
    """Checks every traced access against the owner maps of its memory.

    ``add_arg`` places the array arguments in their spaces before blocks run (an
    argument never added is indexed logically by the ``shape`` given to ``check``).
    """

    def __init__(self, block_index_of: Any):
        self._block_index_of = block_index_of
        self._layouts: dict[str, _Layout] = {}
        self._fallback: dict[str, _Space] = {}   # arguments checked without add_arg
        self._pending: list[tuple[str, np.ndarray]] = []
        self._spaces: list[_Space] = []
        self._sites: list[tuple[SourceLocation | None, str]] = []
        self._site_ids: dict[Any, int] = {}
        self._races: dict[tuple, Race] = {}
        self.dropped = 0
        # locks
        self._epochs_on = False
        self._epoch: dict[int, int] = {}                 # block -> sync events so far
        self._events: dict[int, list[tuple[int, str, frozenset]]] = {}
        self._held: dict[int, set] = {}
        self._position: dict[int, int] = {}              # block -> execution position
        self._hb_cache: dict[tuple, bool] = {}

    @property
    def races(self) -> list[Race]:
        return list(self._races.values())

    # ---- layout ----------------------------------------------------------------------
    def add_arg(self, name: str, data: np.ndarray) -> None:
        """Register an array argument (all of them, before the first access)."""
        self._pending.append((name, data))

    def _place(self) -> None:
        pending, self._pending = self._pending, []
        items = []
        for name, data in pending:
            if data.size == 0:
                continue
            lo, hi = allocation_bounds(data)
            items.append((lo, hi, name, data))
        items.sort(key=lambda t: t[0])
        groups: list[list] = []
        for it in items:
            if groups and it[0] < max(g[1] for g in groups[-1]):
                groups[-1].append(it)
            else:
                groups.append([it])
        for group in groups:
            lo = min(g[0] for g in group)
            hi = max(g[1] for g in group)
            if len(group) == 1:
                _lo, _hi, name, data = group[0]
                if _is_dense(data) and _bounds(data) == (lo, hi):
                    space = _Space(len(self._spaces), lo, hi, data.itemsize, data.shape)
                    self._spaces.append(space)
                    self._layouts[name] = _Layout(name, data, space)
                    continue
            g = 0
            for _lo, _hi, _name, data in group:
                g = math.gcd(g, data.itemsize, data.__array_interface__["data"][0] - lo,
                             *(abs(int(s)) for s in data.strides))
            space = _Space(len(self._spaces), lo, hi, max(g, 1), None)
            self._spaces.append(space)
            for _lo, _hi, name, data in group:
                self._layouts[name] = _Layout(name, data, space)

    def layout(self, arg: str) -> _Layout | None:
        if self._pending:
            self._place()
        return self._layouts.get(arg)

    def maps(self, arg: str) -> _Maps | None:
        """The logical owner maps of an argument (None if it is indexed by address or was
        never accessed)."""
        lay = self.layout(arg)
        if lay is None:
            space = self._fallback.get(arg)
            return None if space is None else space.maps
        return lay.space.maps if lay.space.logical else None

    def _site(self, loc: SourceLocation | None, arg: str) -> int:
        key = (None if loc is None else (loc.filename, loc.line, loc.col), arg)
        found = self._site_ids.get(key)
        if found is None:
            found = len(self._sites)
            self._sites.append((loc, arg))
            self._site_ids[key] = found
        return found

    def _fallback_space(self, arg: str, shape: tuple[int, ...]) -> _Space:
        space = self._fallback.get(arg)
        if space is None:
            space = self._fallback[arg] = _Space(-1 - len(self._fallback), 0, 0, 1, shape)
        return space

    # ---- accesses --------------------------------------------------------------------------
    def check(self, arg: str, shape: tuple[int, ...], kind: str, region: Region, block: int,
              loc: SourceLocation | None) -> None:
        """Check a ``"read"`` or ``"write"`` of ``region`` (a box or flat C-order indices
        of the argument) by linear block ``block``."""
        lay = self.layout(arg)
        space = lay.space if lay is not None else self._fallback_space(arg, shape)
        acc = _Access(arg, kind, block, self._site(loc, arg), self._epoch.get(block, 0),
                      lambda lanes: _coords(region, shape, lanes), False)
        if space.logical:
            where = tuple(slice(a, b) for a, b in region) if isinstance(region, tuple) \
                else region
            self._check(space.logical_maps(), where, acc, None)
        else:
            self._check_address(space, lay.byte_offsets(region), lay.itemsize, acc)
        if kind == "write" and self._held.get(block):
            self.release(arg, block, region=region)

    def check_raw(self, arg: str, kind: str, offsets: np.ndarray, block: int,
                  loc: SourceLocation | None) -> None:
        """Check a raw-memory access at element ``offsets`` from the argument's base."""
        lay = self.layout(arg)
        if lay is None:
            return
        offsets = np.asarray(offsets, np.int64)
        acc = _Access(arg, kind, block, self._site(loc, arg), self._epoch.get(block, 0),
                      lambda lanes: [(int(offsets[p]),) for p in lanes[:_EXAMPLES]], True)
        space = lay.space
        if space.logical:
            idx, hit = lay.element_indices(offsets)
            lanes = np.flatnonzero(hit)
            self._check(space.logical_maps(), idx, acc, lanes)
        else:
            self._check_address(space, lay.offset + offsets * lay.itemsize, lay.itemsize, acc)
        if kind == "write" and self._held.get(block):
            self.release(arg, block, offsets=offsets)

    def _check_address(self, space: _Space, byte_offsets: np.ndarray, itemsize: int,
                       acc: _Access) -> None:
        g = space.granule
        gran = byte_offsets // g
        k = max(1, itemsize // g)
        if k > 1:
            gran = (gran[:, None] + np.arange(k, dtype=np.int64)).reshape(-1)
        if gran.size == 0:
            return
        pages = gran >> _PAGE_SHIFT
        p0, p1 = int(pages.min()), int(pages.max())
        local = gran & (_PAGE - 1)
        if p0 == p1:
            lanes = np.arange(gran.size, dtype=np.int64) // k if k > 1 else None
            self._check(space.page(p0), local, acc, lanes)
            return
        for p in np.unique(pages).tolist():
            sel = np.flatnonzero(pages == p)
            self._check(space.page(int(p)), local[sel], acc, sel // k if k > 1 else sel)

    def _ordered_mask(self, conflict: np.ndarray, other: np.ndarray, other_epoch: np.ndarray,
                      block: int, epoch: int) -> np.ndarray:
        """Which conflicting earlier accesses happen before the current one (locks)."""
        ob = other[conflict].astype(np.int64)
        keys = ob * (1 << 32) + other_epoch[conflict].astype(np.int64)
        uniq, inverse = np.unique(keys, return_inverse=True)
        hb = np.array([self._hb(int(u) >> 32, int(u) & 0xFFFFFFFF, block, epoch)
                       for u in uniq.tolist()], bool)
        out = np.zeros(conflict.shape, bool)
        out[conflict] = hb[inverse.reshape(-1)]
        return out

    def _check(self, maps: _Maps, where: Any, acc: _Access, lanes: np.ndarray | None) -> None:
        """Check one access of the elements ``where`` of ``maps``; ``lanes`` maps positions
        of ``where`` to the access's lane numbers (None: the same)."""
        block, kind, site = acc.block, acc.kind, acc.site
        epochs = self._epochs_on
        if epochs:
            maps.ensure_epochs()
        writer = _select(maps.writer, where)
        if not np.size(writer):
            return
        # Owner ids are >= -1, so max() < 0 means "nobody yet": the common, fast case.
        written = writer.max() >= 0
        ordered_w = None
        if written:
            conflict = (writer != -1) & (writer != block)
            if conflict.any():
                if epochs:
                    ordered_w = self._ordered_mask(conflict, writer,
                                                   _select(maps.w_epoch, where), block,
                                                   acc.epoch)
                    conflict = conflict & ~ordered_w
                if conflict.any():
                    race_kind = "write-write" if kind == "write" else "read-write"
                    self._report(race_kind, ("write", kind), conflict, writer,
                                 _select(maps.writer_site, where), acc, lanes)
        r1 = _select(maps.reader, where)
        read = r1.max() >= 0
        if kind == "write":
            if read:
                r2 = _select(maps.reader2, where)
                c1 = (r1 != -1) & (r1 != block)
                c2 = (r2 != -1) & (r2 != block)
                if epochs and (c1.any() or c2.any()):
                    o1 = self._ordered_mask(c1, r1, _select(maps.r_epoch, where), block,
                                            acc.epoch)
                    o2 = self._ordered_mask(c2, r2, _select(maps.r2_epoch, where), block,
                                            acc.epoch)
                    # readers ordered before this write are superseded by it
                    if o1.any():
                        _assign(maps.reader, where, np.where(o1, -1, r1))
                    if o2.any():
                        _assign(maps.reader2, where, np.where(o2, -1, r2))
                    c1, c2 = c1 & ~o1, c2 & ~o2
                other = np.where(c1, r1, np.where(c2, r2, -1))
                conflict = other != -1
                if conflict.any():
                    other_site = np.where(c1, _select(maps.reader_site, where),
                                          _select(maps.reader2_site, where))
                    self._report("read-write", ("read", "write"), conflict, other,
                                 other_site, acc, lanes)
            if not written:
                _assign(maps.writer, where, block)
                _assign(maps.writer_site, where, site)
                if epochs:
                    _assign(maps.w_epoch, where, acc.epoch)
            else:
                take = writer == -1
                if ordered_w is not None:
                    take = take | ordered_w  # a write ordered after the last one replaces it
                if take.any():
                    _assign(maps.writer, where, np.where(take, block, writer))
                    _assign(maps.writer_site, where,
                            np.where(take, site, _select(maps.writer_site, where)))
                if epochs:
                    mine = take | (writer == block)
                    _assign(maps.w_epoch, where,
                            np.where(mine, acc.epoch, _select(maps.w_epoch, where)))
        elif not read:
            _assign(maps.reader, where, block)
            _assign(maps.reader_site, where, site)
            if epochs:
                _assign(maps.r_epoch, where, acc.epoch)
        else:
            first = r1 == -1
            if first.any():
                _assign(maps.reader, where, np.where(first, block, r1))
                _assign(maps.reader_site, where,
                        np.where(first, site, _select(maps.reader_site, where)))
            r2 = _select(maps.reader2, where)
            second = ~first & (r1 != block) & (r2 == -1)
            if second.any():
                _assign(maps.reader2, where, np.where(second, block, r2))
                _assign(maps.reader2_site, where,
                        np.where(second, site, _select(maps.reader2_site, where)))
            if epochs:  # the latest read of each block is the one that must be ordered
                mine1 = first | (r1 == block)
                _assign(maps.r_epoch, where,
                        np.where(mine1, acc.epoch, _select(maps.r_epoch, where)))
                mine2 = second | (r2 == block)
                _assign(maps.r2_epoch, where,
                        np.where(mine2, acc.epoch, _select(maps.r2_epoch, where)))

    def _report(self, kind: str, accesses: tuple[str, str], conflict: np.ndarray,
                other_block: np.ndarray, other_site: np.ndarray, acc: _Access,
                lanes: np.ndarray | None) -> None:
        pos = np.flatnonzero(conflict.reshape(-1))
        ob = other_block.reshape(-1)[pos].astype(np.int64)
        os_ = other_site.reshape(-1)[pos].astype(np.int64)
        lane = pos if lanes is None else lanes[pos]
        keys = ob * (1 << 31) + os_
        uniq, inverse = np.unique(keys, return_inverse=True)
        inverse = inverse.reshape(-1)
        for j, key in enumerate(uniq.tolist()):
            obk, olk = divmod(int(key), 1 << 31)
            rkey = (acc.arg, kind, obk, acc.block, olk, acc.site)
            mine = lane[inverse == j]
            n = int(np.unique(mine).size) if lanes is not None else int(mine.size)
            race = self._races.get(rkey)
            if race is None:
                if len(self._races) >= MAX_RACES:
                    self.dropped += 1
                    continue
                other_loc, other_arg = self._sites[olk]
                race = Race(acc.arg, kind, (self._block_index_of(obk),
                                            self._block_index_of(acc.block)),
                            accesses, (other_loc, self._sites[acc.site][0]), 0,
                            acc.examples(np.unique(mine)),
                            other_arg if other_arg != acc.arg else None, acc.raw)
                self._races[rkey] = race
            race.count += n

    # ---- locks ------------------------------------------------------------------------------
    def begin_block(self, block: int) -> None:
        """Note that ``block`` starts running (its position in the execution order)."""
        self._position.setdefault(block, len(self._position))

    def _keys(self, arg: str, region: Any = None, offsets: np.ndarray | None = None
              ) -> list[tuple[int, int]]:
        """Lock keys (space, element) of the words an access touches."""
        lay = self.layout(arg)
        if lay is None:
            return []
        space = lay.space
        if offsets is not None:
            offsets = np.asarray(offsets, np.int64)
            if space.logical:
                idx, _hit = lay.element_indices(offsets)
                return [(space.id, int(i)) for i in np.unique(idx).tolist()]
            word = (lay.offset + offsets * lay.itemsize) // space.granule
        elif space.logical:
            if isinstance(region, tuple) and not region:
                idx = np.zeros(1, np.int64)
            elif isinstance(region, tuple):
                grid = np.indices(tuple(b - a for a, b in region)).reshape(len(region), -1)
                idx = np.ravel_multi_index(tuple(g + a for g, (a, _b) in zip(grid, region)),
                                           space.logical_shape)
            else:
                idx = np.asarray(region, np.int64)
            return [(space.id, int(i)) for i in np.unique(idx).tolist()]
        else:
            word = lay.byte_offsets(region) // space.granule
        return [(space.id, int(i)) for i in np.unique(word).tolist()]

    def acquire(self, arg: str, block: int, *, region: Any = None,
                offsets: np.ndarray | None = None) -> None:
        """A successful ``atomic_cas`` of the words of ``region`` (flat indices) or raw
        ``offsets`` by ``block``: it now holds them."""
        keys = self._keys(arg, region, offsets)
        if not keys:
            return
        self._epochs_on = True
        self._event(block, "acquire", frozenset(keys))
        self._held.setdefault(block, set()).update(keys)

    def release(self, arg: str, block: int, *, region: Any = None,
                offsets: np.ndarray | None = None) -> None:
        """An ``atomic_xchg`` or a store to words of ``arg``: a release of those that
        ``block`` holds."""
        held = self._held.get(block)
        if not held:
            return
        keys = held.intersection(self._keys(arg, region, offsets))
        if not keys:
            return
        held.difference_update(keys)
        self._event(block, "release", frozenset(keys))

    def _event(self, block: int, kind: str, keys: frozenset) -> None:
        e = self._epoch.get(block, 0)
        self._events.setdefault(block, []).append((e, kind, keys))
        self._epoch[block] = e + 1
        self._hb_cache.clear()

    def _hb(self, b1: int, e1: int, b2: int, e2: int) -> bool:
        """Whether block b1's access at epoch e1 happens before block b2's at e2."""
        key = (b1, e1, b2, e2)
        found = self._hb_cache.get(key)
        if found is not None:
            return found
        released: set = set()
        for k, kind, keys in self._events.get(b1, ()):
            if kind == "release" and k >= e1:
                released |= keys
        result = False
        if released:
            acquired: set = set()
            for k, kind, keys in self._events.get(b2, ()):
                if kind == "acquire" and k < e2:
                    acquired |= keys
            result = bool(released & acquired)
            if not result and acquired:
                # hand-overs through blocks that ran in between
                p1, p2 = self._position.get(b1, -1), self._position.get(b2, -1)
                between = sorted((self._position[c], c) for c in self._events
                                 if p1 < self._position.get(c, -1) < p2)
                for _p, c in between:
                    got = None
                    for k, kind, keys in self._events[c]:
                        if kind == "acquire" and got is None and keys & released:
                            got = k
                        elif kind == "release" and got is not None and k > got:
                            released = released | keys
                result = bool(released & acquired)
        self._hb_cache[key] = result
        return result
