"""Timing the configs that passed :func:`tilelab.autotune`'s correctness gate.

Each passing config is timed once; the configs within :data:`RECHECK_WITHIN` of the
fastest are then timed ``recheck`` more times, interleaved (so a slow spell hits them
alike), and ranked by the median of their timings.

Example:
    >>> results = [{"candidate": 0, "status": "ok", "seconds": None},
    ...            {"candidate": 1, "status": "ok", "seconds": None}]
    >>> configs = [{"t": 2.0}, {"t": 1.0}]
    >>> time_passing(results, configs, lambda call, cfg: cfg["t"], lambda cfg: None, 2)
    >>> [r["seconds"] for r in results]
    [2.0, 1.0]
"""
from __future__ import annotations

import math
import statistics
from typing import Any, Callable, Sequence

from tilelab.perf.autotune_gate import first_line

__all__ = ["Timer", "RECHECK_WITHIN", "time_passing", "time_entry", "recheck",
           "bench_timer", "timer_name"]

#: ``timer(call, config) -> seconds``, where ``call()`` runs the function with ``config``
Timer = Callable[[Callable[[], Any], dict], float]

#: configs whose first timing is within this factor of the fastest are timed again
#: (``recheck`` times) before one of them wins. Wide on purpose: the first timing of a
#: run can come out 1.3-1.7x slow while the clocks ramp up (the suite's first GEMM, bf16
#: 1024^3: its default timed 14.2 us once against 11.0 for a config that then ran
#: 10.8 us; the default runs 8.5), so a 10% window let a slow config win
RECHECK_WITHIN = 1.5


def time_entry(entry: dict, configs: Sequence[dict], timer: Timer,
               call_for: Callable[[dict], Callable[[], Any]], what: str) -> float | None:
    """One timing of the entry's config in seconds; None when the timer raised or
    returned no positive finite time (the entry then says so, under ``what``).

    ``call_for(cfg)`` is the zero-argument call the timer runs.

    Example:
        >>> e = {"candidate": 0, "status": "ok"}
        >>> time_entry(e, [{}], lambda call, cfg: -1.0, lambda cfg: None, "timing"), e["status"]
        (None, 'error')
    """
    cfg = configs[entry["candidate"]]
    call = call_for(cfg)
    try:
        seconds = float(timer(call, cfg))
        if not seconds > 0 or not math.isfinite(seconds):
            raise ValueError(f"timer returned {seconds!r}")
    except Exception as e:
        entry.update(status="error", reason=f"{what}: {type(e).__name__}: "
                     f"{first_line(e)}")
        return None
    return seconds


def time_passing(results: list[dict], configs: Sequence[dict], timer: Timer,
                 call_for: Callable[[dict], Callable[[], Any]], times: int) -> None:
    """Time every entry whose status is "ok" (into its ``seconds``), then
    :func:`recheck` the close ones ``times`` more times.

    Example:
        >>> rs = [{"candidate": 0, "status": "error", "seconds": None},
        ...       {"candidate": 1, "status": "ok", "seconds": None}]
        >>> time_passing(rs, [{}, {}], lambda call, cfg: 0.5, lambda cfg: None, 2)
        >>> [r["seconds"] for r in rs]
        [None, 0.5]
    """
    for entry in results:
        if entry["status"] != "ok":
            continue
        seconds = time_entry(entry, configs, timer, call_for, "timing")
        if seconds is not None:
            entry["seconds"] = seconds
    recheck(results, configs, timer, call_for, times)


def recheck(results: list[dict], configs: Sequence[dict], timer: Timer,
            call_for: Callable[[dict], Callable[[], Any]], times: int) -> None:
    """Time the configs within :data:`RECHECK_WITHIN` of the fastest ``times`` more
    times, interleaved, and rank each by the median of its timings (kept in the entry's
    ``timings``).

    Example:
        >>> rs = [{"candidate": i, "status": "ok", "seconds": s} for i, s in enumerate((1.0, 1.2))]
        >>> recheck(rs, [{"t": 1.3}, {"t": 1.1}], lambda c, cfg: cfg["t"], lambda cfg: None, 2)
        >>> [r["timings"] for r in rs], [r["seconds"] for r in rs]
        ([[1.0, 1.3, 1.3], [1.2, 1.1, 1.1]], [1.3, 1.1])
    """
    timed = [e for e in results if e["status"] == "ok" and e["seconds"] is not None]
    if times < 1 or len(timed) < 2:
        return
    fastest = min(e["seconds"] for e in timed)
    close = [e for e in timed if e["seconds"] <= fastest * RECHECK_WITHIN]
    if len(close) < 2:
        return
    for e in close:
        e["timings"] = [e["seconds"]]
    for _ in range(times):
        for e in close:
            if e["status"] != "ok":
                continue
            seconds = time_entry(e, configs, timer, call_for, "timing (recheck)")
            if seconds is not None:
                e["timings"].append(seconds)
    for e in close:
        if e["status"] == "ok":
            e["seconds"] = statistics.median(e["timings"])


def bench_timer(warmup: int, rep: int, function: str) -> Timer:
    """The device timer: :func:`tilelab.bench`'s median (CUDA events, L2 flushed).

    Example:
        >>> callable(bench_timer(5, 20, "f"))
        True
    """
    from tilelab.perf.bench import bench

    def timer(call: Callable[[], Any], config: dict) -> float:
        return bench(call, warmup=warmup, rep=rep, flush_l2=True,
                     name=f"{function} {config}").median
    return timer


def timer_name(timer: Timer | None, warmup: int, rep: int, times: int) -> str:
    """How the configs were timed, as tuning records say it.

    Example:
        >>> timer_name(None, 5, 20, 2)
        'tl.bench(warmup=5, rep=20, flush_l2=True).median, close configs x3'
    """
    again = f", close configs x{1 + times}" if times else ""
    if timer is not None:
        return f"injected {getattr(timer, '__name__', 'timer')}{again}"
    return f"tl.bench(warmup={warmup}, rep={rep}, flush_l2=True).median{again}"
