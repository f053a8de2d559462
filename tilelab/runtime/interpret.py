"""``tl.interpret``: run a kernel on the CPU interpreter and get its trace.

For a ``@tl.kernel`` the arguments are those of a launch (CPU tensors, numpy arrays,
partitions of CPU tensors, scalars) and the grid is inferred as for a launch; for an
unmodified ``@ct.kernel`` the arguments are numpy arrays and ``grid=`` is required. The
trace records what every block read and wrote, bytes, FLOPs and inter-block races.
"""
from __future__ import annotations

from typing import Any

from tilelab.errors import AliasError, BorrowError, LaunchError
from tilelab.runtime.launch.arguments import tensor_of
from tilelab.runtime.ledger import LEDGER, LaunchRecord, call_site, locate

__all__ = ["interpret"]


def interpret(kernel: Any, *args: Any, grid: Any = None, order: str = "sequential",
              seed: int | None = None, trace: bool = True, sample_blocks: int | None = None,
              stdout: Any = None, races: bool = True, arch: str | None = None):
    """Run ``kernel`` block by block on the CPU and return a ``Trace``.

    ``order="shuffled"`` runs blocks in a seeded random order (to expose order
    dependence); ``sample_blocks=N`` runs N blocks spread over the grid and extrapolates
    bytes and FLOPs (race detection then covers those blocks only); ``races=False``
    only counts (no per-element owner maps: cheaper for very large arrays). ``arch``
    is the GPU the run stands for (default ``TILELAB_ARCH``, else this machine's GPU,
    else sm_90): what cuTile refuses for it (a float4 value before sm_100) is refused.

    Example:
        >>> tr = tl.interpret(add, z.partition(256), x, y)     # doctest: +SKIP
        >>> tr.has_races, tr.bytes_read                         # doctest: +SKIP
        (False, 32768)
    """
    from tilelab.runtime.device import target_arch
    from tilelab.runtime.kernel import Kernel

    arch = target_arch() if arch is None else arch
    if not isinstance(kernel, Kernel):
        from tilelab.interp import interpret as run

        if grid is None:
            raise LaunchError("tl.interpret() of a plain cuTile kernel needs grid=(...)",
                              hint="tilelab kernels infer the grid from their partitions")
        try:
            return run(kernel, *args, grid=grid, order=order, seed=seed, trace=trace,
                       sample_blocks=sample_blocks, stdout=stdout, races=races, arch=arch)
        except LaunchError as e:   # (an argument's error: the user's line, when it has none)
            locate(e)
            raise
    try:
        return _interpret(kernel, args, grid, order=order, seed=seed, trace=trace,
                          sample_blocks=sample_blocks, races=races, arch=arch)
    except (AliasError, BorrowError, LaunchError) as e:
        locate(e)   # (the user's line)
        raise


def _interpret(kernel: Any, args: tuple, grid: Any, **kw: Any):
    launcher = kernel._launcher

    def refuse(norm: list, device: str, empty: Any) -> None:
        if device != "cpu":
            raise LaunchError(f"tl.interpret({kernel.name}): the arguments live on the GPU; "
                              "the interpreter runs on host memory",
                              hint="pass CPU tensors (tensor.to('cpu')) or numpy arrays")
        if empty is not None:
            name = next(p.name for p, a in zip(kernel.definition.analysis.params, norm)
                        if a is empty)
            raise LaunchError(f"tl.interpret({kernel.name}): {name!r} is a partition of an "
                              f"empty tensor (shape {empty.tensor.shape}), so the launch has "
                              "no block to run and no trace to show (a launch of it is a "
                              "no-op)", hint="interpret it with a non-empty tensor")

    first = launcher.first_launch(args, grid, refuse=refuse)
    norm, plan, g, claims = first.args, first.plan, first.grid, first.claims
    tensors = [t for t in map(tensor_of, norm) if t is not None]
    rec = LaunchRecord(kernel.name, call_site(), "cpu")
    LEDGER.begin(rec, claims, tensors, [t._storage for t in tensors])
    try:   # (borrows held while it runs, as a CPU launch's)
        result = launcher.run_cpu(plan, norm, g, trace=kw["trace"],
                                  races=kw["trace"] and kw["races"], order=kw["order"],
                                  seed=kw["seed"], sample_blocks=kw["sample_blocks"],
                                  arch=kw["arch"])
    finally:
        LEDGER.end(rec, False)
    launcher.last_trace = result
    return result
