"""Count, time and place one recorded launch on the roofline.

Why: a roofline point needs counted work (FLOPs and bytes) and a time. The work comes
from the CPU interpreter's trace of the launch, re-run on *copies* of its arguments
(``tl.InOut`` data is never updated twice), with only some blocks run for large grids
(totals are extrapolated). The time is measured where a GPU ran the launch
(``tl.bench``) and otherwise predicted by :func:`tilelab.perf.predict` (launch floor,
kernel body, roofline bound); every number says which it is.

A launch a CPU cell made at a CPU-sized problem is launch-bound on any GPU, so moving its
tile teaches nothing. ``%%tile --predict-at n=67108864`` (a :class:`PredictAt`) predicts
it at the GPU-sized problem instead: the launch is counted again on fresh, untouched
tensors whose every dimension equal to the cell's ``n`` is 67108864 (tile shapes and
scalars as the cell chose them; 16 sampled blocks), and the point, its time and its
verdict say "at n=67108864".

The precision a point is drawn against follows
:func:`tilelab.perf.prediction.infer_precision` (a tensor-core precision from the
narrowest float dtype when MMA FLOPs dominate, else FP32 or FP64).

Example:
    >>> Measurement(flops=1e6, bytes=1.2e7, seconds=1e-5).bandwidth
    1200000000000.0
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilelab.compiler.safety.kinds import reads_written

__all__ = ["SAMPLE_ABOVE", "SAMPLE_BLOCKS", "Measurement", "PredictAt", "measure_launch",
           "scaled_args"]

#: grids with more blocks than this are traced on a sample of blocks
SAMPLE_ABOVE = 64
#: how many blocks a sampled trace runs
SAMPLE_BLOCKS = 16


@dataclass
class Measurement:
    """What the lab knows about one launch group's performance.

    ``time_kind`` is ``"measured"`` (on ``time_device``), ``"predicted"`` (the total of
    :func:`tilelab.perf.predict` for ``time_device``; ``prediction`` holds its parts) or
    None; ``host_seconds`` is the interpreter's wall time per launch (CPU backend with
    ``--bench``); ``point`` the roofline point.

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

    @property
    def prediction(self) -> Any:
        """The :class:`~tilelab.perf.prediction.Prediction` of a predicted point, else None.

        Example:
            >>> Measurement().prediction is None
            True
        """
        return getattr(self.point, "prediction", None)

    def describe_time(self) -> str:
        """``'measured on NVIDIA H200'``, ``'predicted for NVIDIA H200 SXM at n=1024:
        launch-bound: ...'`` (the prediction's verdict) or ``'not timed'``.

        Example:
            >>> Measurement(seconds=1e-6, time_kind="measured", time_device="H200").describe_time()
            'measured on H200'
        """
        if self.time_kind == "measured":
            return f"measured on {self.time_device}"
        if self.time_kind == "predicted":
            pred = self.prediction
            if pred is None:
                return f"predicted for {self.time_device}"
            at = f" at {pred.at}" if pred.at else ""
            return f"predicted for {self.time_device}{at}: {pred.verdict}"
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


@dataclass(frozen=True)
class PredictAt:
    """The GPU-sized problem a cell's launches are predicted at (``--predict-at``): per
    name, the value the cell ran with and the value to predict at.

    Example:
        >>> at = PredictAt((("n", 4096, 1 << 26),))
        >>> at.label, at.scale((4096, 3)), at.scale((8,))
        ('n=67108864', (67108864, 3), (8,))
    """

    sizes: tuple[tuple[str, int, int], ...]

    @property
    def label(self) -> str:
        """``name=value`` of each size, comma separated."""
        return ",".join(f"{name}={new}" for name, _, new in self.sizes)

    def scale(self, shape: Any) -> tuple[int, ...]:
        """``shape`` with every dimension equal to a size as run replaced by its value to
        predict at."""
        swap = {old: new for _, old, new in self.sizes}
        return tuple(swap.get(int(d), int(d)) for d in shape)


def scaled_args(event: Any, at: PredictAt, sms: int) -> tuple[list[Any], int]:
    """The arguments of ``event`` at the problem ``at`` describes — fresh CPU tensors,
    never written except by the sampled blocks that count them (their pages stay
    unallocated), partitions over them with the cell's tile shapes and schedules,
    scalars as they were — and the launch's block count there. An open persistent
    schedule runs ``sms`` blocks (one per SM, as on the GPU); it is counted with one
    block per tile, since the totals do not depend on which block handles a tile.

    Example:
        >>> import tilelab as tl
        >>> from tilelab.kernels.examples import vector_add
        >>> from tilelab.runtime.events import subscribe
        >>> seen = []; stop = subscribe(seen.append)
        >>> x = tl.ones(64, device="cpu")
        >>> vector_add(tl.empty(64, device="cpu").partition(16), x, x); stop()
        >>> args, blocks = scaled_args(seen[0], PredictAt((("n", 64, 1 << 20),)), 132)
        >>> args[0].tensor.shape, args[0].tile_shape, args[1].shape, blocks
        ((1048576,), (16,), (1048576,), 65536)
    """
    from tilelab.compiler.language import Persistent
    from tilelab.runtime.partition import Partition
    from tilelab.runtime.tensor import Tensor, empty

    def fresh(t: Any) -> Any:
        if isinstance(t, Tensor):
            return empty(at.scale(t.shape), dtype=t.dtype, device="cpu")
        if isinstance(t, np.ndarray):
            return np.empty(at.scale(t.shape), t.dtype)
        return t

    out, blocks = [], None
    for a in event.args:
        if not isinstance(a, Partition):
            out.append(fresh(a))
            continue
        part = Partition(fresh(a.tensor), a.tile_shape, a.schedule)
        sched = part.schedule
        if isinstance(sched, Persistent):
            blocks = min(sched.num_blocks or sms, part.num_tiles)
            part = Partition(part.tensor, part.tile_shape,
                             Persistent(num_blocks=part.num_tiles, group_m=sched.group_m))
        elif blocks is None:
            blocks = part.num_blocks()
        out.append(part)
    if blocks is None:
        raise ValueError("it was launched with grid=, which cannot be rescaled")
    return out, int(blocks)


def _predict_at(event: Any, at: PredictAt, predict_on: Any, resources: Any,
                precision: str | None) -> Any:
    """The predicted point of ``event`` at the problem ``at`` (see :func:`scaled_args`)."""
    from types import SimpleNamespace

    from tilelab.lab.figures.roofline_plot import gemm_shape_of
    from tilelab.perf.prediction import predict
    from tilelab.perf.specs import lookup_gpu
    from tilelab.runtime.interpret import interpret

    spec = lookup_gpu(predict_on)
    args, blocks = scaled_args(event, at, int(spec.sm_count.value) if spec.sm_count else 132)
    trace = interpret(event.kernel, *args, sample_blocks=SAMPLE_BLOCKS, races=False)
    gemm = gemm_shape_of(SimpleNamespace(args=args, kernel=event.kernel), trace)
    return predict(trace, spec, name=event.kernel.name, precision=precision, blocks=blocks,
                   resources=resources, gemm=gemm, at=at.label).point()


def _writable_copies(event: Any) -> list[Any]:
    """Launch arguments for timing: copies of tl.InOut/tl.Raw arguments (they are read and
    written, so re-running on the originals would update them again)."""
    from tilelab.runtime.partition import Partition
    from tilelab.runtime.tensor import Tensor

    params = event.kernel.definition.analysis.params
    out = []
    for p, a in zip(params, event.args):
        if reads_written(p.kind):
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
                   count: bool = True, resources: Any = None,
                   predict_at: PredictAt | None = None) -> Measurement:
    """Trace, count and time one launch (see the module docstring).

    ``predict_on`` is the GPU spec (or key) CPU launches are predicted for; ``gpu_name`` the
    device GPU launches ran on; ``bench`` asks for a full ``tl.bench`` (50 timed runs)
    instead of a quick timing (3 runs) on the GPU, and for interpreter timing on the CPU.
    ``resources`` (the compiled kernel's ``art.resources``) sets the prediction model's
    blocks per SM. ``predict_at`` predicts a CPU launch at a GPU-sized problem (a
    launch that cannot be rescaled is predicted as run, with a note saying why).

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
                m.point = _predicted(event, m, predict_on, resources, predict_at, notes)
                m.seconds, m.time_kind, m.time_device = (m.point.seconds, "predicted",
                                                         m.point.device)
                if m.prediction is not None and m.prediction.at:  # work of that problem
                    m.flops, m.bytes = m.point.flops, m.point.bytes
        except Exception as e:  # e.g. a precision the GPU lacks (FP8 on A100)
            notes.append(f"{name}: no roofline point: {type(e).__name__}: {e}")
    elif m.trace is not None:
        notes.append(f"{name}: moved no bytes, so it has no roofline point")
    m.notes = tuple(notes)
    return m


def _predicted(event: Any, m: Measurement, predict_on: Any, resources: Any,
               predict_at: PredictAt | None, notes: list[str]) -> Any:
    """The predicted point of a CPU launch: at ``predict_at`` when it can be rescaled,
    else as counted."""
    from tilelab.errors import TilelabError
    from tilelab.lab.figures.roofline_plot import point_from_trace

    name = event.kernel.name
    if predict_at is not None:
        try:
            return _predict_at(event, predict_at, predict_on, resources, m.precision)
        except (TilelabError, ValueError, MemoryError) as e:
            notes.append(f"{name}: not predicted at {predict_at.label} ({e}); predicted as "
                         "the cell ran it")
    return point_from_trace(m.trace, name=name, precision=m.precision,
                            predict_on=predict_on, event=event, resources=resources)
