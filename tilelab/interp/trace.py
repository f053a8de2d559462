"""What a kernel did on the CPU interpreter: accesses, bytes, FLOPs and races.

A :class:`Trace` holds one :class:`BlockRecord` per executed block. Each record lists the
accesses (:class:`Access`) of that block (a tile load/store is a box of the array, a
gather/scatter/atomic/raw-memory access is a set of elements), the bytes it moved
(in-bounds elements only) and its FLOPs (MMA separately from element-wise math): the
useful ones, on lanes that derive from in-bounds data, and the executed ones, on every
lane of the tiles (padding of partial tiles included). The lab draws ownership diagrams
from :meth:`Trace.regions`, :meth:`Trace.footprint` and :meth:`Trace.owners`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from tilelab.errors import LaunchError, SourceLocation
from tilelab.interp.races import Race, RaceDetector, race_hint

__all__ = ["Access", "BlockRecord", "ArgInfo", "Trace", "Tracer"]

BlockIndex = tuple[int, int, int]


@dataclass(slots=True)
class Access:
    """One memory access of a block to an array argument.

    Attributes:
        arg: parameter name of the array.
        kind: ``"read"``, ``"write"`` or ``"atomic"`` (an atomic read-modify-write).
        op: the cuTile op, e.g. ``"ct.load"``.
        box: per-dimension ``(start, stop)`` of a tile access, clipped to the array;
            None for element-wise accesses.
        indices: flat (C-order) indices of the elements of a gather/scatter/atomic; None
            for box accesses. For a raw-memory access (``RawArrayMemory.*_offset``), the
            elements of the array hit by the offsets (an offset may also reach memory of
            the allocation outside the array's view).
        count: number of in-bounds elements accessed.
        location: the kernel line of the access.
        offsets: for raw-memory accesses, the element offsets from the array's base
            pointer (None otherwise).

    Example:
        >>> a = Access("x", "read", "ct.load", ((0, 2), (4, 8)), None, 8, None)
        >>> int(a.mask((2, 8)).sum())
        8
    """

    arg: str
    kind: str
    op: str
    box: tuple[tuple[int, int], ...] | None
    indices: np.ndarray | None
    count: int
    location: SourceLocation | None
    offsets: np.ndarray | None = None

    def mask(self, shape: tuple[int, ...]) -> np.ndarray:
        """Boolean mask over the array (of ``shape``) of the elements accessed."""
        m = np.zeros(shape, bool)
        self.paint(m, True)
        return m

    def paint(self, target: np.ndarray, value: Any, only_where: Any = None) -> None:
        """Set the accessed elements of ``target`` (an array shaped like the argument) to
        ``value``; with ``only_where``, only elements currently equal to it."""
        if self.box is not None:
            view = target[tuple(slice(a, b) for a, b in self.box)]
            if only_where is None:
                view[...] = value
            else:
                view[view == only_where] = value
        elif self.indices is not None:
            flat = target.reshape(-1)
            idx = self.indices
            if only_where is not None:
                idx = idx[flat[idx] == only_where]
            flat[idx] = value

    def __repr__(self) -> str:
        where = "" if self.location is None else f" @ line {self.location.line}"
        region = (f"box {list(self.box)}" if self.box is not None
                  else f"{self.count} elements")
        return f"Access({self.kind} {self.arg} {region} by {self.op}{where})"


@dataclass
class BlockRecord:
    """Everything one block did.

    Attributes:
        index: the block index ``(x, y, z)``.
        linear: its linear id ``x + gx * (y + gy * z)``.
        accesses: the block's accesses in program order.
        bytes_read / bytes_written: bytes moved (atomics count as both).
        flops_mma: useful MMA FLOPs: ``2*M*N*K`` per MMA over the rows, columns and ``K``
            lanes that hold in-bounds data.
        flops_elementwise: useful element-wise FLOPs: one per in-bounds lane of each
            float arithmetic/math op and per in-bounds element combined by float
            reductions and scans.
        flops_mma_executed / flops_elementwise_executed: the same counted over every lane
            of the tiles, padding of partial tiles included.
    """

    index: BlockIndex
    linear: int
    accesses: list[Access] = field(default_factory=list)
    bytes_read: int = 0
    bytes_written: int = 0
    flops_mma: int = 0
    flops_elementwise: int = 0
    flops_mma_executed: int = 0
    flops_elementwise_executed: int = 0

    def _by_arg(self, kinds: Iterable[str]) -> dict[str, list[Access]]:
        out: dict[str, list[Access]] = {}
        for a in self.accesses:
            if a.kind in kinds:
                out.setdefault(a.arg, []).append(a)
        return out

    @property
    def reads(self) -> dict[str, list[Access]]:
        """Plain reads per array argument."""
        return self._by_arg(("read",))

    @property
    def writes(self) -> dict[str, list[Access]]:
        """Plain writes per array argument."""
        return self._by_arg(("write",))

    @property
    def atomics(self) -> dict[str, list[Access]]:
        """Atomic read-modify-writes per array argument."""
        return self._by_arg(("atomic",))

    @property
    def flops(self) -> int:
        """Useful FLOPs (in-bounds lanes)."""
        return self.flops_mma + self.flops_elementwise

    @property
    def flops_executed(self) -> int:
        """FLOPs over every executed lane, padding included."""
        return self.flops_mma_executed + self.flops_elementwise_executed


@dataclass(frozen=True)
class ArgInfo:
    """Shape and dtype of an array argument (by parameter name)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    itemsize: int


class Tracer:
    """Collects the records while blocks run (used by ``interpret``)."""

    def __init__(self, grid: BlockIndex, detect_races: bool = True):
        self.grid = grid
        self.blocks: list[BlockRecord] = []
        self.args: dict[str, ArgInfo] = {}
        self.current: BlockRecord | None = None
        self.detector = RaceDetector(self.block_index) if detect_races else None

    def block_index(self, linear: int) -> BlockIndex:
        gx, gy, _gz = self.grid
        return (linear % gx, (linear // gx) % gy, linear // (gx * gy))

    def add_arg(self, info: ArgInfo, data: np.ndarray | None = None) -> None:
        """Register an array argument (``data``: its numpy view, which places it in memory
        for the race detector)."""
        self.args[info.name] = info
        if data is not None and self.detector is not None:
            self.detector.add_arg(info.name, data)

    def begin_block(self, index: BlockIndex, linear: int) -> None:
        self.current = BlockRecord(index, linear)
        if self.detector is not None:
            self.detector.begin_block(linear)

    def end_block(self) -> None:
        if self.current is not None:
            self.blocks.append(self.current)
        self.current = None

    def count_flops(self, n: int, *, mma: bool = False, useful: int | None = None) -> None:
        """Add ``n`` executed FLOPs, ``useful`` of them on in-bounds lanes (all when None)."""
        rec = self.current
        if rec is None:
            return
        u = n if useful is None else useful
        if mma:
            rec.flops_mma += u
            rec.flops_mma_executed += n
        else:
            rec.flops_elementwise += u
            rec.flops_elementwise_executed += n

    def record(self, arg: str, shape: tuple[int, ...], itemsize: int, kind: str, op: str,
               region: Any, count: int, location: SourceLocation | None,
               offsets: np.ndarray | None = None) -> None:
        """Record an access: ``region`` is a box tuple or a flat index array; for a
        raw-memory access ``offsets`` are the element offsets from the array's base and
        ``region`` the flat indices of the array elements they hit."""
        rec = self.current
        if rec is None or count == 0:
            return
        box = region if isinstance(region, tuple) else None
        indices = None if box is not None else np.asarray(region, dtype=np.int64)
        rec.accesses.append(Access(arg, kind, op, box, indices, int(count), location,
                                   None if offsets is None else np.asarray(offsets, np.int64)))
        nbytes = int(count) * itemsize
        if kind == "read":
            rec.bytes_read += nbytes
        elif kind == "write":
            rec.bytes_written += nbytes
        else:
            rec.bytes_read += nbytes
            rec.bytes_written += nbytes
        if self.detector is not None and kind != "atomic":
            if offsets is None:
                self.detector.check(arg, shape, kind, region, rec.linear, location)
            else:
                self.detector.check_raw(arg, kind, offsets, rec.linear, location)

    def sync(self, arg: str, kind: str, region: Any = None,
             offsets: np.ndarray | None = None) -> None:
        """A lock event of the running block: ``"acquire"`` (a successful ``atomic_cas``)
        or ``"release"`` (an ``atomic_xchg``) of the words of ``region`` (flat indices of
        the argument) or of raw ``offsets``."""
        rec = self.current
        if rec is None or self.detector is None:
            return
        if kind == "acquire":
            self.detector.acquire(arg, rec.linear, region=region, offsets=offsets)
        else:
            self.detector.release(arg, rec.linear, region=region, offsets=offsets)


class Trace:
    """The result of :func:`tilelab.interp.interpret`: per-block accesses, totals, races.

    Attributes:
        kernel: the kernel's name.
        grid: the launch grid ``(x, y, z)``.
        order: ``"sequential"`` or ``"shuffled"``; ``execution_order`` lists the linear
            block ids in the order they ran.
        blocks: one :class:`BlockRecord` per executed block, by linear id.
        args: :class:`ArgInfo` per array argument.
        sampled: True when only some blocks ran (``sample_blocks``); totals are then
            extrapolated to the whole grid and race detection covers the sampled blocks
            only.
        races: detected inter-block races (empty when tracing was off).
        warnings: things worth knowing that are not errors (e.g. overlapping arguments).

    Example:
        >>> t = Trace("k", (2, 1, 1), [], {}, [], 2, "sequential", None, [0, 1])
        >>> t.has_races, t.bytes_read
        (False, 0)
    """

    def __init__(self, kernel: str, grid: BlockIndex, blocks: list[BlockRecord],
                 args: dict[str, ArgInfo], races: list[Race], num_blocks: int, order: str,
                 seed: int | None, execution_order: list[int], *, sampled: bool = False,
                 traced: bool = True, races_dropped: int = 0,
                 warnings: list[str] | None = None):
        self.kernel = kernel
        self.grid = grid
        self.blocks = sorted(blocks, key=lambda b: b.linear)
        self.args = args
        self.races = races
        self.races_dropped = races_dropped
        self.num_blocks = num_blocks
        self.order = order
        self.seed = seed
        self.execution_order = execution_order
        self.sampled = sampled
        self.traced = traced
        self.warnings = list(warnings or [])
        self._by_linear = {b.linear: b for b in self.blocks}

    # ---- totals --------------------------------------------------------------------------
    @property
    def scale(self) -> float:
        """Factor from measured totals to whole-grid totals (1.0 unless sampled)."""
        ran = len(self.execution_order)
        return self.num_blocks / ran if self.sampled and ran else 1.0

    def _total(self, attr: str) -> int:
        return int(round(sum(getattr(b, attr) for b in self.blocks) * self.scale))

    @property
    def bytes_read(self) -> int:
        """Bytes read by all blocks (extrapolated when sampled)."""
        return self._total("bytes_read")

    @property
    def bytes_written(self) -> int:
        """Bytes written by all blocks (extrapolated when sampled)."""
        return self._total("bytes_written")

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def flops_mma(self) -> int:
        """MMA FLOPs (2*M*N*K each) of all blocks (extrapolated when sampled)."""
        return self._total("flops_mma")

    @property
    def flops_elementwise(self) -> int:
        """Element-wise float FLOPs of all blocks (extrapolated when sampled)."""
        return self._total("flops_elementwise")

    @property
    def flops(self) -> int:
        """Useful FLOPs: MMA plus element-wise work on in-bounds lanes (the roofline's)."""
        return self.flops_mma + self.flops_elementwise

    @property
    def flops_mma_executed(self) -> int:
        """MMA FLOPs over every lane of the operand tiles, padding included."""
        return self._total("flops_mma_executed")

    @property
    def flops_elementwise_executed(self) -> int:
        """Element-wise FLOPs over every lane, padding of partial tiles included."""
        return self._total("flops_elementwise_executed")

    @property
    def flops_executed(self) -> int:
        """FLOPs over every executed lane (>= ``flops``; equal without partial tiles)."""
        return self.flops_mma_executed + self.flops_elementwise_executed

    @property
    def arithmetic_intensity(self) -> float:
        """Useful FLOPs per byte moved (0 when nothing moved)."""
        return self.flops / self.bytes if self.bytes else 0.0

    # ---- races -----------------------------------------------------------------------------
    @property
    def has_races(self) -> bool:
        return bool(self.races)

    def race_report(self, limit: int = 10) -> str:
        """A readable report of the races (at most ``limit`` of them)."""
        if not self.races:
            scope = " among the sampled blocks" if self.sampled else ""
            return f"no inter-block races found{scope}"
        lines = [f"{len(self.races)} race(s) in kernel '{self.kernel}'"
                 + (" among the sampled blocks" if self.sampled else "") + ":"]
        for r in self.races[:limit]:
            lines.append(f"  - {r}")
        more = len(self.races) - limit + self.races_dropped
        if more > 0:
            lines.append(f"  ... and {more} more")
        return "\n".join(lines)

    def raise_on_race(self) -> None:
        """Raise LaunchError with the race report when races were found.

        Example:
            >>> Trace("k", (1, 1, 1), [], {}, [], 1, "sequential", None, [0]).raise_on_race()
        """
        if self.races:
            first = self.races[0]
            raise LaunchError(self.race_report(), location=first.locations[1],
                              hint=race_hint(self.races))

    # ---- regions -----------------------------------------------------------------------------
    def block(self, index: int | BlockIndex) -> BlockRecord:
        """The record of a block, by linear id or ``(x, y, z)``."""
        if isinstance(index, tuple):
            idx = tuple(index) + (0,) * (3 - len(index))
            gx, gy, _ = self.grid
            index = idx[0] + gx * (idx[1] + gy * idx[2])
        try:
            return self._by_linear[index]
        except KeyError:
            raise KeyError(f"block {index} did not run (sampled: {self.sampled})") from None

    def regions(self, arg: str, block: int | BlockIndex | None = None,
                kind: str = "write") -> list[Access]:
        """Accesses of ``arg`` of one block (or of all blocks) of a kind.

        ``kind`` is ``"read"``, ``"write"``, ``"atomic"`` or ``"any"``.
        """
        self._check_arg(arg)
        recs = self.blocks if block is None else [self.block(block)]
        return [a for r in recs for a in r.accesses
                if a.arg == arg and (kind == "any" or a.kind == kind)]

    def footprint(self, arg: str, block: int | BlockIndex | None = None,
                  kind: str = "write") -> np.ndarray:
        """Boolean mask over ``arg`` of the elements accessed (by one block or all)."""
        shape = self._check_arg(arg).shape
        m = np.zeros(shape, bool)
        for a in self.regions(arg, block, kind):
            a.paint(m, True)
        return m

    def owners(self, arg: str, kind: str = "write") -> np.ndarray:
        """Per element of ``arg``: the linear id of the first block that accessed it with
        ``kind`` (``"write"`` or ``"read"``), or -1."""
        shape = self._check_arg(arg).shape
        out = np.full(shape, -1, np.int64)
        position = {lin: i for i, lin in enumerate(self.execution_order)}
        for b in sorted(self.blocks, key=lambda r: position.get(r.linear, 0)):
            for a in b.accesses:
                if a.arg == arg and a.kind == kind:
                    a.paint(out, b.linear, only_where=-1)
        return out

    def _check_arg(self, arg: str) -> ArgInfo:
        info = self.args.get(arg)
        if info is None:
            known = ", ".join(sorted(self.args)) or "none"
            raise KeyError(f"no array argument named {arg!r} (array arguments: {known})")
        return info

    # ---- presentation --------------------------------------------------------------------------
    def table(self) -> list[dict[str, Any]]:
        """One row per executed block (for pandas or display)."""
        return [dict(block=b.index, linear=b.linear, bytes_read=b.bytes_read,
                     bytes_written=b.bytes_written, flops_mma=b.flops_mma,
                     flops_elementwise=b.flops_elementwise,
                     flops_executed=b.flops_executed, accesses=len(b.accesses))
                for b in self.blocks]

    def summary(self) -> str:
        """A few lines: grid, blocks run, bytes, FLOPs, races, warnings."""
        ran = len(self.execution_order)
        lines = [f"kernel '{self.kernel}' on grid {self.grid}: {ran} of {self.num_blocks} "
                 f"blocks ran ({self.order})"]
        if not self.traced:
            lines.append("tracing was off: no accesses, bytes, FLOPs or races recorded")
            return "\n".join(lines)
        est = " (extrapolated from the sampled blocks)" if self.sampled else ""
        lines.append(f"bytes read {_fmt(self.bytes_read)}, written "
                     f"{_fmt(self.bytes_written)}{est}")
        executed = self.flops_executed
        padded = (f" ({_fmt(executed)} executed, padding lanes included)"
                  if executed != self.flops else "")
        lines.append(f"FLOPs: mma {_fmt(self.flops_mma)}, element-wise "
                     f"{_fmt(self.flops_elementwise)}{padded}; intensity "
                     f"{self.arithmetic_intensity:.2f} FLOP/byte")
        if self.sampled:
            lines.append("race detection covered only the sampled blocks")
        lines.append(self.race_report(limit=5))
        lines.extend(f"warning: {w}" for w in self.warnings)
        return "\n".join(lines)

    def __repr__(self) -> str:
        races = f"{len(self.races)} races" if self.races else "no races"
        samp = ", sampled" if self.sampled else ""
        return (f"<Trace {self.kernel} grid={self.grid} blocks={len(self.execution_order)}/"
                f"{self.num_blocks}{samp} read={_fmt(self.bytes_read)}B "
                f"written={_fmt(self.bytes_written)}B flops={_fmt(self.flops)} {races}>")


def _fmt(n: float) -> str:
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.3g}{unit}"
    return str(int(n))
