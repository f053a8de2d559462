"""Re-running launches for the ownership pictures: traces on CPU copies of the arguments.

Why: GPU launches carry no trace, and the ownership and race pictures need one; and the
caller's data must never be written twice (``tl.InOut``). So a recorded launch is re-run
on the CPU interpreter over *copies* of its arguments. :func:`ownership_figures` then draws
every picture of one launch.

Example:
    >>> import tilelab as tl
    >>> from tilelab.kernels.examples import vector_add
    >>> x = tl.ones(64, device="cpu"); z = tl.zeros(64, device="cpu")
    >>> trace_args(vector_add, (z.partition(16), x, x)).num_blocks
    4
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from tilelab.lab.figures.ownership_data import _input_names
from tilelab.lab.figures.ownership_race import race_figure
from tilelab.lab.figures.ownership_svg import ownership_figure, reads_figure
from tilelab.lab.figures.svg import SvgFigure
from tilelab.lab.figures.theme import Theme

__all__ = ["cpu_copy", "trace_args", "trace_launch", "ownership_figures"]


def cpu_copy(value: Any, persistent_blocks: int | None = None) -> Any:
    """A host copy of a launch argument: tensors and numpy arrays are copied, partitions
    re-made over a copy (an open persistent schedule gets ``persistent_blocks`` blocks, to
    mirror a GPU launch), anything else returned as is.

    Example:
        >>> import tilelab as tl
        >>> p = tl.zeros(64, device="cpu").partition(16, schedule=tl.persistent())
        >>> q = cpu_copy(p, 3)
        >>> q.schedule, q.tensor is p.tensor
        (Persistent(num_blocks=3, group_m=None), False)
    """
    from tilelab.compiler.language import Persistent
    from tilelab.runtime.partition import Partition
    from tilelab.runtime.tensor import Tensor

    if isinstance(value, Partition):
        sched = value.schedule
        if isinstance(sched, Persistent) and sched.num_blocks is None and persistent_blocks:
            sched = Persistent(num_blocks=persistent_blocks, group_m=sched.group_m)
        return Partition(cpu_copy(value.tensor, None), value.tile_shape, sched)
    if isinstance(value, Tensor):
        return value.clone() if value.device == "cpu" else value.to("cpu")
    if isinstance(value, np.ndarray):
        return value.copy()
    return value


def trace_args(kernel: Any, args: Sequence[Any], *, grid: Sequence[int] | None = None,
               sample_blocks: int | None = None, max_bytes: int = 4 << 30,
               count_only: bool = False) -> Any:
    """Trace ``kernel(*args)`` on the CPU interpreter using *copies* of the arguments
    (GPU tensors are copied to the host; nothing of the caller's is written, so
    ``tl.InOut`` arguments are not updated twice). Persistent partitions that leave
    ``num_blocks`` open keep the block count of their own device (or of ``grid``).
    ``sample_blocks`` runs only that many blocks (bytes and FLOPs are extrapolated);
    ``count_only`` traces persistent partitions with one block per tile (see
    :func:`trace_launch`).

    Example:
        >>> import tilelab as tl
        >>> from tilelab.kernels.examples import vector_add
        >>> x = tl.ones(64, device="cpu"); z = tl.zeros(64, device="cpu")
        >>> tr = trace_args(vector_add, (z.partition(16), x, x))
        >>> tr.num_blocks, float(z.numpy().sum())        # z itself was not written
        (4, 0.0)
    """
    from tilelab.compiler.language import Persistent
    from tilelab.runtime.interpret import interpret
    from tilelab.runtime.partition import Partition
    from tilelab.runtime.tensor import Tensor

    total = 0
    for a in args:
        t = a.tensor if isinstance(a, Partition) else a
        total += int(getattr(t, "nbytes", 0)) if isinstance(t, (Tensor, np.ndarray)) else 0
    name = getattr(kernel, "name", getattr(kernel, "__name__", "kernel"))
    if total > max_bytes:
        raise ValueError(f"tracing {name} would copy {total / 2**30:.1f} GiB of arguments "
                         f"to the host (limit {max_bytes / 2**30:.1f} GiB); trace a smaller "
                         "problem")
    blocks = int(np.prod(tuple(grid))) if grid is not None else None
    if blocks is None:
        open_persistent = [a for a in args if isinstance(a, Partition)
                           and isinstance(a.schedule, Persistent) and not a.schedule.num_blocks]
        blocks = open_persistent[0].num_blocks() if open_persistent else None
    copies = [cpu_copy(a, blocks) for a in args]
    if count_only:   # totals do not depend on which block handles a tile
        copies = [Partition(a.tensor, a.tile_shape,
                            Persistent(num_blocks=a.num_tiles, group_m=a.schedule.group_m))
                  if isinstance(a, Partition) and isinstance(a.schedule, Persistent) else a
                  for a in copies]
    has_partition = any(isinstance(a, Partition) for a in copies)
    # Race detection keeps an owner map per element of every argument: worth it for
    # unsafe kernels and small problems, not for counting the work of a large launch.
    options = getattr(kernel, "options", None)
    races = not count_only and (getattr(options, "unsafe", True) or total <= 256 << 20)
    return interpret(kernel, *copies, grid=None if has_partition or grid is None else grid,
                     sample_blocks=sample_blocks, races=races)


def trace_launch(event: Any, *, sample_blocks: int | None = None,
                 max_bytes: int = 4 << 30, count_only: bool = False) -> Any:
    """Re-run a recorded launch on the CPU interpreter, on copies of its arguments (see
    :func:`trace_args`), and return the trace: GPU launches carry none, and the ownership
    and race figures need one.

    ``count_only=True`` is for bytes and FLOPs only: a persistent launch is then traced
    with one block per tile (its totals do not depend on which block handles a tile), so
    a sampled block costs one tile of interpretation rather than tiles / SMs of them.

    Example:
        >>> import tilelab as tl
        >>> from tilelab.kernels.examples import vector_add
        >>> from tilelab.runtime.events import subscribe
        >>> seen = []; stop = subscribe(seen.append)
        >>> x = tl.ones(64, device="cpu"); z = tl.empty(64, device="cpu")
        >>> vector_add(z.partition(16), x, x); stop()
        >>> trace_launch(seen[0]).num_blocks
        4
    """
    return trace_args(event.kernel, event.args, grid=event.grid, sample_blocks=sample_blocks,
                      max_bytes=max_bytes, count_only=count_only)


def ownership_figures(event: Any, trace: Any = None, block: Any = None, *,
                      theme: "Theme | str | None" = None,
                      max_tiles: int = 4096) -> list[SvgFigure]:
    """Every ownership picture of one launch: one figure per partitioned argument (the
    first also shows what ``block`` read of each ``tl.In`` argument when a trace is at
    hand), a reads figure for launches without partitions, and a race figure per argument
    the trace found races on.

    ``trace`` defaults to ``event.trace`` (CPU launches that traced); for GPU launches pass
    :func:`trace_launch(event) <trace_launch>` to see reads.

    Example:
        >>> import tilelab as tl
        >>> from tilelab.kernels.examples import vector_add
        >>> from tilelab.runtime.events import subscribe
        >>> seen = []; stop = subscribe(seen.append)
        >>> x = tl.ones(64, device="cpu"); z = tl.empty(64, device="cpu")
        >>> vector_add(z.partition(16), x, x); stop()
        >>> [f.tilelab["kind"] for f in ownership_figures(seen[0], theme="light")]
        ['ownership']
    """
    from tilelab.runtime.partition import Partition

    trace = trace if trace is not None else getattr(event, "trace", None)
    kernel = event.kernel
    params = kernel.definition.analysis.params
    parts = [(p.name, a) for p, a in zip(params, event.args) if isinstance(a, Partition)]
    blocks = int(np.prod(tuple(event.grid)))
    if trace is not None and blocks != trace.num_blocks:
        raise ValueError(f"the trace ran {trace.num_blocks} blocks but the launch had "
                         f"{blocks}; trace this launch with trace_launch(event)")
    figs = []
    for i, (name, part) in enumerate(parts):
        figs.append(ownership_figure(part, trace=trace, block=block, kernel=kernel,
                                     name=name, num_blocks=blocks, theme=theme,
                                     max_tiles=max_tiles, inputs=None if i == 0 else ()))
    if not parts and trace is not None and _input_names(trace, kernel):
        figs.append(reads_figure(trace, block, kernel=kernel, theme=theme))
    if trace is not None:
        for arg in dict.fromkeys(r.arg for r in trace.races):
            if arg in trace.args:
                figs.append(race_figure(trace, arg, theme=theme))
    return figs

