"""``tl.interpret``: run a kernel on the CPU interpreter and get its trace.

For a ``@tl.kernel`` the arguments are those of a launch (CPU tensors, numpy arrays,
partitions of CPU tensors, scalars) and the grid is inferred as for a launch; for an
unmodified ``@ct.kernel`` the arguments are numpy arrays and ``grid=`` is required. The
trace records what every block read and wrote, bytes, FLOPs and inter-block races.
"""
from __future__ import annotations

from typing import Any

from tilelab.errors import LaunchError
from tilelab.runtime.ledger import LEDGER

__all__ = ["interpret"]


def interpret(kernel: Any, *args: Any, grid: Any = None, order: str = "sequential",
              seed: int | None = None, trace: bool = True, sample_blocks: int | None = None,
              stdout: Any = None, races: bool = True):
    """Run ``kernel`` block by block on the CPU and return a ``Trace``.

    ``order="shuffled"`` runs blocks in a seeded random order (to expose order
    dependence); ``sample_blocks=N`` runs N blocks spread over the grid and extrapolates
    bytes and FLOPs (race detection then covers those blocks only); ``races=False``
    only counts (no per-element owner maps: cheaper for very large arrays).

    Example:
        >>> tr = tl.interpret(add, z.partition(256), x, y)     # doctest: +SKIP
        >>> tr.has_races, tr.bytes_read                         # doctest: +SKIP
        (False, 32768)
    """
    from tilelab.runtime.kernel import Kernel

    if not isinstance(kernel, Kernel):
        from tilelab.interp import interpret as run

        if grid is None:
            raise LaunchError("tl.interpret() of a plain cuTile kernel needs grid=(...)",
                              hint="tilelab kernels infer the grid from their partitions")
        return run(kernel, *args, grid=grid, order=order, seed=seed, trace=trace,
                   sample_blocks=sample_blocks, stdout=stdout, races=races)
    launcher = kernel._launcher
    norm, device = launcher.prepare(args)
    if device != "cpu":
        raise LaunchError(f"tl.interpret({kernel.name}): the arguments live on the GPU; the "
                          "interpreter runs on host memory",
                          hint="pass CPU tensors (tensor.to('cpu')) or numpy arrays")
    plan = launcher.plan(norm, "cpu")
    g = launcher.grid_for(plan, grid)
    claims = launcher.check_aliases(plan, norm)
    LEDGER.check_launch(kernel.name, claims, "cpu")
    result = launcher.run_cpu(plan, norm, g, trace=trace, races=trace and races,
                              order=order, seed=seed, sample_blocks=sample_blocks)
    launcher.last_trace = result
    return result
