"""Count, time and place one recorded launch on the roofline.

Why: a roofline point needs counted work (FLOPs and bytes) and a time. The work comes
from the CPU interpreter's trace of the launch, re-run on *copies* of its arguments
(``tl.InOut`` data is never updated twice), with only some blocks run for large grids
(totals are extrapolated). The time is measured where a GPU ran the launch
(``tl.bench``) and otherwise predicted from the work and a GPU's ceilings
(:func:`tilelab.perf.roofline.predict`); every number says which it is.

The precision a point is drawn against follows
:func:`tilelab.lab.figures.roofline_plot.infer_precision` (a tensor-core precision from the
narrowest float dtype when MMA FLOPs dominate, else FP32 or FP64).

Example:
    >>> Measurement(flops=1e6, bytes=1.2e7, seconds=1e-5).bandwidth
    1200000000000.0
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["SAMPLE_ABOVE", "SAMPLE_BLOCKS", "Measurement", "measure_launch"]

#: grids with more blocks than this are traced on a sample of blocks
SAMPLE_ABOVE = 64
#: how many blocks a sampled trace runs
SAMPLE_BLOCKS = 16


@dataclass
class Measurement:
    """What the lab knows about one launch group's performance.

    ``time_kind`` is ``"measured"`` (on ``time_device``), ``"predicted"`` (lower bound on
    ``time_device`` from the counted work) or None; ``host_seconds`` is the interpreter's
    wall time per launch (CPU backend with ``--bench``); ``point`` the roofline point.

    Example:
        >>> Measurement().describe_time()
        'not timed'
    """

    trace: Any = None
    notes: tuple[str, ...] = ()
    flops: float | None = None
    bytes: float | None = None
    precision: str | None = None
    seconds: float | None = None
    time_kind: str | None = None
    time_device: str | None = None
    host_seconds: float | None = None
    point: Any = None

    def describe_time(self) -> str:
        """``'measured on NVIDIA H200'``, ``'predicted for NVIDIA H200 SXM (model: see the Roofline tab)'``
        or ``'not timed'``.

        Example:
            >>> Measurement(seconds=1e-6, time_kind="measured", time_device="H200").describe_time()
            'measured on H200'
        """
        if self.time_kind == "measured":
            return f"measured on {self.time_device}"
        if self.time_kind == "predicted":
            return f"predicted for {self.time_device} (model: see the Roofline tab)"
        return "not timed"

    @property
    def bandwidth(self) -> float | None:
        """Counted bytes per second over ``seconds`` (B/s), or None.

        Example:
            >>> Measurement(bytes=4e9, seconds=1e-3).bandwidth
            4000000000000.0
        """
        if self.seconds and self.bytes:
            return self.bytes / self.seconds
        return None

    @property
    def flop_rate(self) -> float | None:
        """Counted FLOPs per second over ``seconds`` (FLOP/s), or None.

        Example:
            >>> Measurement(flops=2e9, seconds=1e-3).flop_rate
            2000000000000.0
        """
        if self.seconds and self.flops is not None:
            return self.flops / self.seconds
        return None


def _writable_copies(event: Any) -> list[Any]:
    """Launch arguments for timing: copies of tl.InOut/tl.Raw arguments (they are read and
    written, so re-running on the originals would update them again)."""
    from tilelab.runtime.partition import Partition
    from tilelab.runtime.tensor import Tensor

    params = event.kernel.definition.analysis.params
    out = []
    for p, a in zip(params, event.args):
        if p.kind in ("InOut", "Raw"):
            if isinstance(a, Partition):
                a = Partition(a.tensor.clone(), a.tile_shape, a.schedule)
            elif isinstance(a, Tensor):
                a = a.clone()
        out.append(a)
    return out


def _sample_for(event: Any) -> int | None:
    blocks = math.prod(tuple(event.grid))
    return SAMPLE_BLOCKS if blocks > SAMPLE_ABOVE else None


def measure_launch(event: Any, *, bench: bool, predict_on: Any, gpu_name: str | None = None,
                   count: bool = True, resources: Any = None) -> Measurement:
    """Trace, count and time one launch (see the module docstring).

    ``predict_on`` is the GPU spec (or key) CPU launches are predicted for; ``gpu_name`` the
    device GPU launches ran on; ``bench`` asks for a full ``tl.bench`` (50 timed runs)
    instead of a quick timing (3 runs) on the GPU, and for interpreter timing on the CPU.
    ``resources`` (the compiled kernel's ``art.resources``) sets the prediction model's
    blocks per SM.

    Example:
        >>> m = measure_launch(event, bench=False, predict_on="h200")   # doctest: +SKIP
        >>> m.time_kind, m.point.measured                                # doctest: +SKIP
        ('predicted', False)
    """
    from tilelab.errors import TilelabError
    from tilelab.lab.figures.roofline_plot import infer_precision, point_from_trace
    from tilelab.perf.bench import bench as run_bench

    name = event.kernel.name
    m = Measurement()
    notes: list[str] = []
    if count:
        trace = event.trace
        if trace is None or not getattr(trace, "traced", True):
            from tilelab.lab.figures.ownership import trace_launch

            try:
                trace = trace_launch(event, sample_blocks=_sample_for(event))
            except Exception as e:  # counting is best effort: say why there is no point
                notes.append(f"could not trace {name} on the CPU interpreter to count its "
                             f"work: {type(e).__name__}: {e}")
                trace = None
        m.trace = trace
        if trace is not None:
            m.flops = float(trace.flops)
            m.bytes = float(trace.bytes)
            m.precision = infer_precision(trace)
            if trace.sampled:
                notes.append(f"{name}: bytes and FLOPs extrapolated from "
                             f"{len(trace.execution_order)} of {trace.num_blocks} blocks")
    try:
        if event.device == "gpu":
            args = _writable_copies(event)
            reps = dict(warmup=10, rep=50) if bench else dict(warmup=1, rep=3)
            r = run_bench(lambda: event.kernel.launch_async(*args), name=name, device="gpu",
                          **reps)
            m.seconds, m.time_kind, m.time_device = r.median, "measured", gpu_name or r.device
            if not bench:
                notes.append(f"{name}: quick timing (median of 3 runs); --bench times 50 runs")
        elif bench:
            args = _writable_copies(event)
            r = run_bench(lambda: event.kernel(*args), name=name, warmup=1, rep=3,
                          device="cpu")
            m.host_seconds = r.median
    except TilelabError as e:  # the launch ran once already; say why timing it failed
        notes.append(f"could not time {name}: {e.message}")
    if m.bytes:
        try:
            if m.time_kind == "measured":
                m.point = point_from_trace(m.trace, name=name, precision=m.precision,
                                           seconds=m.seconds, device=m.time_device)
            else:
                m.point = point_from_trace(m.trace, name=name, precision=m.precision,
                                           predict_on=predict_on, event=event,
                                           resources=resources)
                m.seconds, m.time_kind, m.time_device = (m.point.seconds, "predicted",
                                                         m.point.device)
        except Exception as e:  # e.g. a precision the GPU lacks (FP8 on A100)
            notes.append(f"{name}: no roofline point: {type(e).__name__}: {e}")
    elif m.trace is not None:
        notes.append(f"{name}: moved no bytes, so it has no roofline point")
    m.notes = tuple(notes)
    return m
