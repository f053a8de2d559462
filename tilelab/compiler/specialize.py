"""Bind arguments to a kernel's parameters and decide what to compile for them.

Binding checks that each argument fits its parameter's kind (partitions for ``tl.Out``
and ``tl.InOut``, whole tensors for ``tl.In``/``tl.Raw``, values for constants), that
all partitions share one tile grid and one schedule, and produces the
:class:`Specialization`: the lowering plan, the constants appended to the signature,
the calling-convention layout and the launch grid.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from tilelab.compiler.calling_convention import ParamLayout
from tilelab.compiler.language import Grouped, Persistent, RowMajor, Schedule
from tilelab.compiler.lower import LoweringPlan
from tilelab.compiler.safety import KernelAnalysis
from tilelab.compiler.safety.bounds import prove_launch
from tilelab.compiler.signature import (ArraySpec, ConstantValue, PartitionSpec, ScalarSpec,
                                        array_traits, describe_arg)
from tilelab.compiler.values import (EXACT_SCALARS, NUMBER_TYPES, constant_key,
                                     constant_value, scalar_value)
from tilelab.errors import LaunchError

__all__ = ["Specialization", "specialize", "MAX_GRID_YZ"]

MAX_GRID_YZ = 65535
MAX_GRID_X = 2**31 - 1


@dataclass(frozen=True)
class Specialization:
    """Everything a compile and a launch need to know beyond the source."""

    plan: LoweringPlan
    specs: tuple[tuple[str, str, Any], ...]  # (param, kind, spec)
    extra_constants: tuple[int, ...]
    layouts: tuple[ParamLayout, ...]
    schedule: Schedule | None
    grid_partition: PartitionSpec | None

    def key(self) -> str:
        """A stable text identifying the compiled code (not the data)."""
        parts = []
        for name, kind, s in self.specs:
            if isinstance(s, PartitionSpec):
                parts.append(f"{name}:P{s.tile_shape}:{array_traits(s.array).key()}")
            elif isinstance(s, ArraySpec):
                parts.append(f"{name}:A:{array_traits(s).key()}")
            elif isinstance(s, ScalarSpec):
                parts.append(f"{name}:S:{s.dtype}")
            else:
                parts.append(f"{name}:C:{_constant_text(s.value)}")
        return ";".join(parts) + f"|extra={self.extra_constants}|plan={self.plan}"

    @property
    def num_tiles(self) -> int:
        return self.grid_partition.num_tiles if self.grid_partition else 0

    def grid(self, num_sms: int | None = None) -> tuple[int, int, int]:
        """The launch grid in tile blocks (x, y, z).

        ``num_sms`` sizes persistent launches (one block per SM unless the schedule
        gives ``num_blocks``).
        """
        p = self.grid_partition
        if p is None:
            raise LaunchError("this kernel has no partitioned argument to infer its grid "
                              "from", hint="pass grid=(x, y, z) to the launch")
        g = p.grid
        if isinstance(self.schedule, Persistent):
            blocks = self.schedule.num_blocks or num_sms or 1
            return (max(1, min(blocks, p.num_tiles)), 1, 1)
        if len(g) > 3:
            # rank 4 and 5: the tile grid is linearised onto x, one block per tile; the
            # lowered code unravels ct.bid(0) (tilelab.compiler.tile_index.unravel_4d/5d,
            # grouped_tile_index_4d/5d)
            grid = (math.prod(g), 1, 1)
        elif isinstance(self.schedule, Grouped) and len(g) >= 2:
            grid = (g[-2] * g[-1], g[0] if len(g) == 3 else 1, 1)
        else:
            grid = tuple(reversed(g)) + (1,) * (3 - len(g))
        if grid[0] > MAX_GRID_X or grid[1] > MAX_GRID_YZ or grid[2] > MAX_GRID_YZ:
            if len(g) > 3:
                raise LaunchError(f"tile grid {g} has {grid[0]} tiles, and a partition of "
                                  f"rank {len(g)} launches one block per tile along x, "
                                  f"beyond CUDA's limit of {MAX_GRID_X}",
                                  hint="use larger tiles, or schedule=tl.persistent(), "
                                       "which launches one block per SM")
            raise LaunchError(f"tile grid {g} needs a launch grid {grid}, beyond CUDA's "
                              f"limits ({MAX_GRID_X}, {MAX_GRID_YZ}, {MAX_GRID_YZ})",
                              hint="use larger tiles, or schedule=tl.grouped() or "
                                   "tl.persistent(), which launch a 1-D grid")
        return grid  # type: ignore[return-value]


def _constant_text(value: Any) -> str:
    """A constant in :meth:`Specialization.key`: its type and repr, and a NaN's bits
    (every NaN's repr is 'nan', and cuTile compiles each payload apart)."""
    text = f"{type(value).__name__}:{value!r}"
    if type(value) is float and value != value:
        text += f":{constant_key(value)[1]:#x}"
    return text


def _kind_label(kind: str) -> str:
    return {"auto": "an input", "constant": "a ct.Constant"}.get(kind, f"tl.{kind}")


def _padded(grid: tuple[int, ...], rank: int) -> tuple[int, ...]:
    return tuple(grid) + (1,) * (rank - len(grid))


def specialize(analysis: KernelAnalysis, args: Sequence[Any], *, kernel_name: str,
               check_bounds: bool = True) -> Specialization:
    """Bind ``args`` (tensors, partitions, specs, scalars) to the kernel's parameters.

    Raises :class:`~tilelab.errors.LaunchError` saying which argument does not fit and
    what to pass instead.
    """
    params = analysis.params
    if len(args) != len(params):
        sig = ", ".join(f"{p.name}: {_kind_label(p.kind)}" for p in params)
        raise LaunchError(f"{kernel_name}() takes {len(params)} arguments ({sig}), "
                          f"got {len(args)}")
    specs, layouts = [], []
    partitions: list[tuple[str, PartitionSpec]] = []
    for p, arg in zip(params, args):
        if p.kind == "constant":
            if type(arg) is ConstantValue:
                arg = arg.value
            arg = constant_value(arg, p.name, f"{kernel_name}()")
            specs.append((p.name, p.kind, ConstantValue(arg)))
            layouts.append(ParamLayout(p.name, "constant"))
            continue
        if type(arg) not in EXACT_SCALARS and isinstance(arg, NUMBER_TYPES):
            arg = scalar_value(arg, p.name, f"{kernel_name}()")   # (or LaunchError)
        try:
            s = describe_arg(arg)
        except TypeError as e:
            raise LaunchError(f"{kernel_name}(): argument {p.name!r}: {e}") from None
        if p.is_partition:
            if not isinstance(s, PartitionSpec):
                raise LaunchError(
                    f"{kernel_name}(): parameter {p.name!r} is tl.{p.kind}, so it takes a "
                    f"partition, got {_describe(s)}",
                    hint=f"pass {p.name}.partition(tile_shape), e.g. "
                         f"{p.name}.partition(256) for a 1-D tensor")
            partitions.append((p.name, s))
            arr = s.array
        else:
            if isinstance(s, PartitionSpec):
                raise LaunchError(
                    f"{kernel_name}(): parameter {p.name!r} is {_kind_label(p.kind)}, which "
                    "takes a whole tensor, got a partition",
                    hint="pass the tensor itself; only tl.Out/tl.InOut parameters take "
                         "partitions")
            if isinstance(s, (ScalarSpec, ConstantValue)):
                if p.kind in ("In", "Raw"):
                    raise LaunchError(f"{kernel_name}(): parameter {p.name!r} is "
                                      f"tl.{p.kind} (an array), got a scalar")
                if isinstance(s, ConstantValue):
                    s = describe_arg(s.value)
                specs.append((p.name, p.kind, s))
                layouts.append(ParamLayout(p.name, "scalar", s.dtype))
                continue
            arr = s
        specs.append((p.name, p.kind, s))
        t = array_traits(arr)
        if not t.nonneg_strides:
            raise LaunchError(
                f"{kernel_name}(): {p.name!r} (tl.{p.kind}) has negative strides (shape "
                f"{tuple(arr.shape)}, strides {tuple(arr.strides)} in elements), a reversed "
                "view such as a[::-1]; cuTile kernels take arrays with non-negative "
                "strides only, so tilelab refuses them on the GPU and on the CPU backend "
                "alike", hint="pass a copy in increasing order (t.contiguous(), "
                "np.ascontiguousarray(a)) and reverse in the kernel or afterwards")
        layouts.append(ParamLayout(p.name, "array", arr.dtype, arr.ndim, t.index_dtype))

    schedule, grid_part = None, None
    if partitions:
        scheds = {s.schedule for _, s in partitions}
        if len(scheds) > 1:
            listed = ", ".join(f"{n}: {s.schedule}" for n, s in partitions)
            raise LaunchError(f"{kernel_name}(): all partitions of one launch need the same "
                              f"schedule, got {listed}",
                              hint="partition every output with the same schedule=")
        schedule = partitions[0][1].schedule
        check_schedule(schedule, kernel_name)
        rank = max(s.ndim for _, s in partitions)
        grid_name, grid_part = next((n, s) for n, s in partitions if s.ndim == rank)
        for n, s in partitions:
            if _padded(s.grid, rank) != grid_part.grid:
                listed = "; ".join(f"{m}: {q.array.shape} in tiles {q.tile_shape} -> "
                                   f"grid {q.grid}" for m, q in partitions)
                raise LaunchError(f"{kernel_name}(): the partitions have different tile "
                                  f"grids ({listed})",
                                  hint="every block owns one tile of each partition, so "
                                       "all partitions need the same number of tiles per "
                                       "dimension")
        if schedule.persistent != analysis.persistent:
            if analysis.persistent:
                raise LaunchError(f"{kernel_name}() walks its tiles with 'for t in "
                                  "p.tiles()', so its partitions need "
                                  "schedule=tl.persistent()",
                                  hint="partition with schedule=tl.persistent()")
            raise LaunchError(f"{kernel_name}(): schedule {schedule} is persistent, but "
                              "the kernel does not loop over p.tiles()",
                              hint="use tl.row_major or tl.grouped(), or write the kernel "
                                   "with 'for t in p.tiles(): ... p.store(tile, at=t)'")
        prove_launch(kernel_name, analysis, specs, partitions, check_bounds)
    elif analysis.persistent:  # pragma: no cover - a tiles() loop needs a partition
        raise LaunchError(f"{kernel_name}(): persistent kernel without partitions")

    ranks = tuple((n, s.ndim) for n, s in partitions)
    group_m = None
    if isinstance(schedule, Grouped):
        group_m = schedule.group_m
    elif isinstance(schedule, Persistent) and schedule.group_m:
        group_m = schedule.group_m
    plan = LoweringPlan(schedule.name if schedule else "row_major", group_m is not None,
                        ranks, check_bounds)
    extra = tuple(t for _, s in partitions for t in s.tile_shape)
    if group_m is not None:
        extra += (group_m,)
    return Specialization(plan, tuple(specs), extra, tuple(layouts), schedule, grid_part)


#: the schedules tilelab knows the index math of: a closed set, compared by exact type
SCHEDULE_TYPES = (RowMajor, Grouped, Persistent)


def check_schedule(schedule: Any, kernel_name: str = "launch") -> None:
    """Refuse anything but tilelab's own schedules (no subclasses, no look-alikes).

    Example:
        >>> check_schedule(Grouped(4))
    """
    bad_field = _bad_schedule_field(schedule) if type(schedule) in SCHEDULE_TYPES else None
    if bad_field is not None:
        raise LaunchError(f"{kernel_name}(): schedule {schedule!r} has an invalid "
                          f"{bad_field} (changed after it was made?)",
                          hint="make the schedule with tl.grouped(group_m) or "
                               "tl.persistent(num_blocks, group_m)")
    if type(schedule) not in SCHEDULE_TYPES:
        raise LaunchError(
            f"{kernel_name}(): {schedule!r} is not one of tilelab's schedules (a "
            f"{type(schedule).__qualname__}); schedules decide which block owns which "
            "tile, so only tl.row_major, tl.grouped(...) and tl.persistent(...) "
            "themselves are accepted, never subclasses",
            hint="partition with schedule=tl.row_major, tl.grouped(group_m) or "
                 "tl.persistent(num_blocks)")


def _positive_int(v: Any) -> bool:
    return type(v) is int and v >= 1


def _bad_schedule_field(schedule: Any) -> str | None:
    """The first field of a tilelab schedule that is not what its constructor allows."""
    if isinstance(schedule, Grouped) and not _positive_int(schedule.group_m):
        return "group_m"
    if isinstance(schedule, Persistent):
        for f in ("num_blocks", "group_m"):
            v = getattr(schedule, f)
            if v is not None and not _positive_int(v):
                return f
    return None


def _describe(s: Any) -> str:
    if isinstance(s, ArraySpec):
        return f"a whole tensor of shape {s.shape}"
    if isinstance(s, ScalarSpec):
        return f"a scalar ({s.dtype})"
    return type(s).__name__
