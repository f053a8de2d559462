"""``tl.bench``: time device work the way the measurement method says.

On the GPU: CUDA events around each call on the launch stream, warm-up calls first,
the L2 cache flushed before every timed call (a buffer of twice the L2 size is read,
which leaves clean lines: see ``_L2Flusher``), or inputs rotated among several
argument sets, and the *median* reported with its spread. The flush also covers the
host: it is repeated until it outlasts the call's host time, so the device is still
busy when the call's work arrives and the window holds device time only (a raw
``ct.launch`` spends about 100 us on the host; without the cover its figure held up
to ~90 us of idle device). Host time per call is measured too (it is what launch
overhead is). On the CPU backend the same API times with the host clock.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

__all__ = ["BenchResult", "bench"]


@dataclass(frozen=True)
class BenchResult:
    """Timings of one benchmarked callable (all in seconds).

    Example:
        >>> r = BenchResult("x", [1e-3, 2e-3, 3e-3], [5e-6], "cpu")
        >>> round(r.median * 1e3, 3), r.device
        (2.0, 'cpu')
    """

    name: str
    samples: list[float]
    host_samples: list[float]
    device: str
    flushed_l2: bool = False
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def min(self) -> float:
        return min(self.samples)

    def quantile(self, q: float) -> float:
        s = sorted(self.samples)
        return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]

    @property
    def host_median(self) -> float:
        return statistics.median(self.host_samples) if self.host_samples else float("nan")

    def throughput(self, amount: float) -> float:
        """``amount`` (bytes, FLOPs) per second at the median time."""
        return amount / self.median

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "device": self.device, "median_s": self.median,
                "min_s": self.min, "p10_s": self.quantile(0.1), "p90_s": self.quantile(0.9),
                "n": len(self.samples), "host_median_s": self.host_median,
                "flushed_l2": self.flushed_l2, **self.meta}

    def __str__(self) -> str:
        return (f"{self.name}: median {self.median * 1e6:.1f} us "
                f"(p10 {self.quantile(0.1) * 1e6:.1f}, p90 {self.quantile(0.9) * 1e6:.1f}, "
                f"n={len(self.samples)}) on {self.device}")


class _L2Flusher:
    """Evicts the L2 cache before a timed call by *reading* a buffer twice its size.

    Why reading: overwriting the buffer (a memset) leaves the L2 full of dirty lines,
    and the timed kernel then pays for writing them back to memory — up to 60 MB of
    extra traffic on an H200, which made a 100 MB GEMV look 40% slower than it is. A
    read leaves clean lines that the timed kernel evicts for free. The buffer is
    zeroed once; the reads go through a small tile kernel (one float per block is
    written). If that kernel cannot be compiled, the flush falls back to a memset and
    says so in ``kind``.
    """

    ROW = 4096          # float32 elements per row of the flush buffer
    ROWS_PER_BLOCK = 16

    def __init__(self, gpu: Any):
        from cuda.bindings import driver

        import tilelab as tl

        self._driver = driver
        row_bytes = 4 * self.ROW * self.ROWS_PER_BLOCK
        blocks = -(-max(2 * gpu.l2_bytes, 1 << 20) // row_bytes)
        self.nbytes = blocks * row_bytes
        self.buf = tl.zeros((blocks * self.ROWS_PER_BLOCK, self.ROW), "float32",
                            device="cuda")
        self.kind = "memset"
        self._cost: tuple[float, float] | None = None      # see cost()
        self._launch: Callable[[Any], Any] | None = None
        try:
            self._launch = self._read_launch(blocks)
            self.kind = "read"
        except Exception:  # no toolchain or no tile launches: overwrite instead
            pass

    def _read_launch(self, blocks: int) -> Callable[[Any], Any]:
        import tilelab as tl
        from tilelab.perf.l2flush import read_rows_kernel

        sink = tl.empty((blocks, 1), "float32", device="cuda")
        part, src, n, w = sink.partition((1, 1)), self.buf, self.ROWS_PER_BLOCK, self.ROW
        read_rows_kernel(part, src, n, w)       # compile (and run) it once, here
        return lambda stream: read_rows_kernel.launch_async(part, src, n, w, stream=stream)

    def __call__(self, stream: Any) -> None:
        if self._launch is not None:
            self._launch(stream)
        else:
            self._driver.cuMemsetD8Async(self.buf.data_ptr, 0, self.nbytes,
                                         int(stream.handle))

    def cost(self, stream: Any, device: Any) -> tuple[float, float]:
        """(device, host) seconds of one flush, measured once over eight back-to-back
        flushes (the device runs ahead of the host after the first, so the window holds
        device time)."""
        if self._cost is None:
            from cuda.core import EventOptions

            opts = EventOptions(timing_enabled=True)
            a, b = device.create_event(opts), device.create_event(opts)
            self(stream)
            stream.record(a)
            t0 = time.perf_counter()
            for _ in range(8):
                self(stream)
            host = (time.perf_counter() - t0) / 8
            stream.record(b)
            b.sync()
            self._cost = (max((b - a) * 1e-3 / 8, 1e-6), host)
        return self._cost


_flushers: dict[int, _L2Flusher] = {}

#: at most this many flushes cover one call's host time (a call that waits on the host
#: cannot be covered anyway)
MAX_COVER = 16


def _cover(host_s: float, flush_s: float, flush_host_s: float = 0.0) -> int:
    """Flushes before a timed call so that the device is still flushing when the call's
    work arrives: each flush gains ``flush_s - flush_host_s`` on the host, and the call
    needs ``host_s`` (with a fifth more as margin).

    Example:
        >>> _cover(5e-6, 25e-6), _cover(100e-6, 25e-6, 5e-6), _cover(1.0, 25e-6)
        (1, 6, 16)
    """
    gain = flush_s - flush_host_s
    if gain <= 0:
        return MAX_COVER
    return max(1, min(MAX_COVER, -(-int(host_s * 1.2e9) // max(1, int(gain * 1e9)))))


def bench(fn: Callable[..., Any], *, args: Sequence[Sequence[Any]] | None = None,
          warmup: int = 10, rep: int = 50, inner: int = 1, flush_l2: bool = True,
          stream: Any = None, name: str | None = None,
          device: str | None = None) -> BenchResult:
    """Time ``fn()`` (or ``fn(*args[i])`` rotating over argument sets) on the device.

    ``fn`` should *enqueue* its work on ``stream`` (tilelab's default stream when None)
    without waiting — ``kernel.launch_async(...)``, torch ops, ``ct.launch``: a call that
    waits on the host inside the timed window adds the host's wake-up latency to the
    device time. ``inner`` calls run back to back per sample (the sample is their mean),
    which hides launch gaps for kernels shorter than the launch itself. Returns a
    :class:`BenchResult` with the median device time per call.

    Example:
        >>> r = tl.bench(lambda: add(z.partition(1024), x, y))    # doctest: +SKIP
        >>> print(r.median, r.throughput(3 * x.nbytes))           # doctest: +SKIP
    """
    from tilelab.runtime.device import backend

    name = name or getattr(fn, "__name__", "fn")
    sets = list(args) if args else [()]
    device = device or backend()
    calls = [lambda a=a: fn(*a) for a in sets]
    warm_host = []
    for i in range(warmup):
        t0 = time.perf_counter()
        calls[i % len(calls)]()
        warm_host.append(time.perf_counter() - t0)
    if device == "cpu":
        samples = []
        for i in range(rep):
            t0 = time.perf_counter()
            calls[i % len(calls)]()
            samples.append(time.perf_counter() - t0)
        return BenchResult(name, samples, samples, "cpu")

    from cuda.core import EventOptions

    from tilelab.runtime.device import gpu as get_gpu
    from tilelab.runtime.streams import resolve_stream

    g = get_gpu()
    s = resolve_stream(stream)
    flusher = None
    if flush_l2:
        flusher = _flushers.get(g.device_id) or _flushers.setdefault(g.device_id,
                                                                     _L2Flusher(g))
    opts = EventOptions(timing_enabled=True)
    starts = [g.device.create_event(opts) for _ in range(rep)]
    ends = [g.device.create_event(opts) for _ in range(rep)]
    host = []
    s.sync()
    flush_s, flush_host_s = flusher.cost(s, g.device) if flusher is not None else (0, 0)
    covers = []
    k = 0
    for i in range(rep):
        if flusher is not None:
            # the host time of the calls so far (the warm-up's first call compiles)
            seen = host or warm_host[1:] or warm_host
            per_sample = statistics.median(seen) * inner if seen else 0.0
            covers.append(_cover(per_sample, flush_s, flush_host_s))
            for _ in range(covers[-1]):
                flusher(s)
        s.record(starts[i])
        t0 = time.perf_counter()
        for _ in range(inner):
            calls[k % len(calls)]()
            k += 1
        host.append((time.perf_counter() - t0) / inner)
        s.record(ends[i])
    s.sync()
    from tilelab.runtime.ledger import LEDGER

    LEDGER.observe_all()  # everything timed has finished: release dropped futures now
    samples = [(ends[i] - starts[i]) * 1e-3 / inner for i in range(rep)]  # events: ms
    meta = {"arg_sets": len(sets), "inner": inner}
    if flusher is not None:
        meta["l2_flush"] = flusher.kind
        meta["host_cover_flushes"] = max(covers)
    return BenchResult(name, samples, host, g.name, flushed_l2=flusher is not None,
                       meta=meta)
