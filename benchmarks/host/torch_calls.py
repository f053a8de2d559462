"""The suite's ``torch`` group: library calls the way a torch user makes them.

torch CUDA tensors, torch's current stream, a loop of calls with ``sync=False``. Two
figures per call, each beside its torch equivalent in the same run:

- **host time per repeated call** (microseconds of host clock per call over a loop, the
  device left to run behind): ``tl.kernels.add`` on 65,536 float32 on torch tensors, on
  tilelab tensors, and ``torch.add``; the torch-tensor call and ``torch.add`` again with
  a torch side stream current (torch's default stream is the legacy one, which the
  driver orders against every other blocking stream); and where the time goes
  (``breakdown_us``: the driver's launch, ``Kernel.launch_async`` around it, the
  library call above, the torch tensors' check), from the layers timed alone;
- **back-to-back throughput** (the host clock from a synchronized start until the
  device has finished a loop of calls, nothing flushed in between, as a model's
  forward runs them): ``tl.kernels.matmul`` in bf16 at 4096³, 2048×4096×12288 and
  16384³ on torch tensors, on tilelab tensors, and ``torch.matmul`` (cuBLAS), about
  10 ms of GEMMs per loop.

The variants of a case are timed round by round in turn (one round of each, then the
next), each figure the median of its rounds: timed one after another, the later ones
ran on a hotter GPU at lower clocks (cuBLAS alone drifted from 834 to 753 TFLOP/s over
a minute of back-to-back GEMMs on an H100), which no median removes. Each call's result
is checked against torch before it is timed. Needs the GPU backend and torch with
CUDA; elsewhere the group reports ``skipped``.

Example::

    python -m benchmarks --only torch
"""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable

from ..common import Context, rel_err

__all__ = ["run", "per_call_s", "interleaved", "loop_calls", "sync_both", "summary"]

ADD_N = 65536
MATMULS = ((4096, 4096, 4096), (2048, 4096, 12288), (16384, 16384, 16384))
#: device seconds of GEMMs per timed loop (see :func:`loop_calls`)
LOOP_S = 0.01


def loop_calls(flops: float, most: int) -> int:
    """Calls of ``flops`` each per timed back-to-back loop: about :data:`LOOP_S` of
    device time at 700 TFLOP/s, at least 6 and at most ``most``.

    Example:
        >>> loop_calls(2.0 * 4096 ** 3, 50), loop_calls(2.0 * 16384 ** 3, 50)
        (50, 6)
    """
    return max(6, min(most, round(LOOP_S / (flops / 700e12))))


def sync_both() -> None:
    """Wait for tilelab's and torch's work on the device."""
    import torch

    import tilelab as tl

    tl.synchronize()
    torch.cuda.synchronize()


def per_call_s(fn: Callable[[], Any], sync: Callable[[], None], calls: int = 2000,
               rounds: int = 5, *, until_done: bool = False) -> float:
    """Median over ``rounds`` of seconds per call in a loop of ``calls`` calls issued back
    to back, each round started synchronized. The clock stops when the host has issued
    the calls (their host cost, the device left to run behind), or with ``until_done``
    when the device has finished them (their throughput)."""
    samples = []
    for _ in range(rounds):
        sync()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        if until_done:
            sync()
        samples.append((time.perf_counter() - t0) / calls)
        sync()
    return statistics.median(samples)


def interleaved(fns: dict[str, Callable[[], Any]], sync: Callable[[], None],
                calls: int = 2000, rounds: int = 7, *,
                until_done: bool = False) -> dict[str, float]:
    """Seconds per call of each of ``fns`` as :func:`per_call_s` measures one, with the
    rounds taken in turn (a round of each function, then the next round of each) so
    that a drift of the clocks meets all of them alike; the median of each.

    Example:
        >>> t = interleaved({"a": lambda: None, "b": lambda: None}, lambda: None,
        ...                 calls=10, rounds=3)
        >>> sorted(t), all(v > 0 for v in t.values())
        (['a', 'b'], True)
    """
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples[name].append(per_call_s(fn, sync, calls, 1, until_done=until_done))
    return {name: statistics.median(v) for name, v in samples.items()}


def _checked(name: str, got: Any, ref: Any, tol: float) -> None:
    err, _ = rel_err(got, ref)
    if not err <= tol:
        raise AssertionError(f"{name}: relative error {err:.3g} over {tol:g}")


def _add_case() -> dict[str, Any]:
    import torch

    import tilelab as tl
    from tilelab.kernels import add

    x, y = (torch.randn(ADD_N, device="cuda") for _ in range(2))
    out = torch.empty_like(x)
    tx, ty, tout = tl.from_dlpack(x), tl.from_dlpack(y), tl.empty(ADD_N, "float32")
    add(x, y, out=out)
    _checked("add on torch tensors", out, x + y, 1e-6)
    add(tx, ty, out=tout)
    _checked("add on tilelab tensors", torch.from_dlpack(tout), x + y, 1e-6)
    calls = {
        "tilelab_torch_tensors": lambda: add(x, y, out=out, sync=False),
        "tilelab_tensors": lambda: add(tx, ty, out=tout, sync=False),
        "torch_add": lambda: torch.add(x, y, out=out),
    }

    for fn in calls.values():                  # warm-up: wrappers, plans, caches
        for _ in range(50):
            fn()
    sync_both()
    parts = _parts()
    us = {k: s * 1e6 for k, s in interleaved({**calls, **parts}, sync_both).items()}
    checks = _torch_checks()
    # the same two calls with a side stream current: torch's default stream is the
    # legacy one, whose launches the driver orders against every blocking stream
    with torch.cuda.stream(torch.cuda.Stream()):
        side = {name: calls[name] for name in ("tilelab_torch_tensors", "torch_add")}
        for fn in side.values():
            for _ in range(50):
                fn()
        sync_both()
        us.update({f"{k}_side_stream": s * 1e6
                   for k, s in interleaved(side, sync_both).items()})
    sync_both()
    breakdown = _breakdown(us)
    return {"case": f"add/float32/n{ADD_N}", "host_us_per_call": us,
            "breakdown_us": breakdown,
            "torch_checks": checks,
            "torch_tensors_vs_torch": us["tilelab_torch_tensors"] / us["torch_add"],
            "torch_tensors_vs_tilelab_tensors":
                us["tilelab_torch_tensors"] / us["tilelab_tensors"],
            "side_stream_torch_tensors_vs_torch":
                us["tilelab_torch_tensors_side_stream"] / us["torch_add_side_stream"],
            "targets": {"torch_tensors_vs_torch_max": 1.5,
                        "torch_tensors_vs_tilelab_tensors_max": 1.05}}


def _parts() -> dict[str, Callable[[], Any]]:
    """The repeated add's layers alone, for :func:`_breakdown`: ``Kernel.launch_async``
    of each call's prepared launch (``launch_async_*``), and the driver's launch of the
    tilelab-tensor call's prepared launch through the native module (``driver_launch``:
    a diagnostic that bypasses the borrow ledger; it rewrites the same output with the
    same values). Empty where a call has no single prepared launch or no native module."""
    from tilelab.kernels.elementwise import _BINARY
    from tilelab.runtime.launch.driver import DRIVER

    try:
        parts = _layers(_BINARY, DRIVER)
    except Exception:  # noqa: BLE001 - a diagnostic: the group's figures stand without it
        return {}
    return parts if len(parts) == 3 else {}


def _layers(cache: Any, driver: Any) -> dict[str, Callable[[], Any]]:
    """:func:`_parts` for the records of call cache ``cache`` and launch path ``driver``
    (whatever of them exists: on the CPU backend, no driver launch)."""
    parts: dict[str, Callable[[], Any]] = {}
    for seen in list(cache._seen.values()):
        entry = seen.entry()
        ready = entry.ready() if entry is not None else None
        if ready is None or len(ready.launches) != 1:
            continue
        kern, args = ready.launches[0]
        name = "launch_async_" + ("torch_tensors" if seen.state is not None else
                                  "tilelab_tensors")
        parts[name] = (lambda k, a: lambda: k.launch_async(*a))(kern, args)
        prepared = kern._launcher._fast.get(hash(args))
        native, launch_on = getattr(prepared, "native", None), driver.native_launch_on
        if seen.state is None and native is not None and launch_on is not None:
            handle = int(prepared.stream.handle)
            parts["driver_launch"] = lambda: launch_on(native, handle)
    return parts


def _breakdown(us: dict[str, float]) -> dict[str, float] | None:
    """Where a repeated add's host time goes, in microseconds: the driver's launch,
    ``Kernel.launch_async`` around it (lookup, checks, ledger record, future), the
    library call above that, and what torch tensors add (their check); None when
    :func:`_parts` could not time the layers."""
    if "driver_launch" not in us:
        return None
    return {"driver_launch": us["driver_launch"],
            "launch_async": us["launch_async_tilelab_tensors"] - us["driver_launch"],
            "library_call": us["tilelab_tensors"] - us["launch_async_tilelab_tensors"],
            "torch_tensors_extra": us["tilelab_torch_tensors"] - us["tilelab_tensors"]}


def _torch_checks() -> str:
    """Where the repeated add checked its torch tensors: ``"C"`` (the native module's
    ``torch_holds``) or ``"Python"``."""
    from tilelab.kernels.elementwise import _BINARY

    records = [r for r in _BINARY._seen.values() if r.state is not None]
    return "C" if records and all(r.fast is not None for r in records) else "Python"


def _matmul_case(m: int, n: int, k: int) -> dict[str, Any]:
    import torch

    import tilelab as tl
    from tilelab.kernels import matmul

    a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    b = torch.randn(k, n, device="cuda").to(torch.bfloat16)
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    ta, tb = tl.from_dlpack(a), tl.from_dlpack(b)
    tout = tl.empty((m, n), "bfloat16")
    ref = (a.float() @ b.float())
    matmul(a, b, out=out)
    _checked(f"matmul {m}x{n}x{k} on torch tensors", out.float(), ref, 1e-2)
    matmul(ta, tb, out=tout)
    torch.cuda.synchronize()
    _checked(f"matmul {m}x{n}x{k} on tilelab tensors", torch.from_dlpack(tout).float(),
             ref, 1e-2)
    calls = {
        "tilelab_torch_tensors": lambda: matmul(a, b, out=out, sync=False),
        "tilelab_tensors": lambda: matmul(ta, tb, out=tout, sync=False),
        "torch_matmul": lambda: torch.matmul(a, b, out=out),
    }
    for fn in calls.values():
        for _ in range(5):
            fn()
    torch.cuda.synchronize()
    flops = 2.0 * m * n * k
    secs = interleaved(calls, sync_both, calls=loop_calls(flops, 50), rounds=15,
                       until_done=True)
    tflops = {k: flops / s / 1e12 for k, s in secs.items()}
    return {"case": f"matmul/bfloat16/{m}x{n}x{k}", "tflops": tflops,
            "torch_tensors_vs_cublas": tflops["tilelab_torch_tensors"] /
                tflops["torch_matmul"]}


def run(ctx: Context) -> dict[str, Any]:
    """The group's figures (see the module docstring); ``skipped`` off the GPU."""
    if ctx.backend != "gpu":
        return {"status": "skipped", "reason": "needs the GPU backend and torch with CUDA"}
    try:
        import torch
    except ImportError:
        return {"status": "skipped", "reason": "torch is not installed"}
    if not torch.cuda.is_available():
        return {"status": "skipped", "reason": "torch has no CUDA device"}
    cases = [_add_case()] + [_matmul_case(*s) for s in MATMULS]
    return {"status": "ok", "cases": cases}


def summary(result: dict[str, Any]) -> str:
    """A few lines for the terminal."""
    if result.get("status") != "ok":
        return f"torch: {result.get('status')} ({result.get('reason', '')})"
    lines = []
    for c in result["cases"]:
        if "host_us_per_call" in c:
            u = c["host_us_per_call"]
            lines.append(f"  {c['case']}: host us/call torch tensors "
                         f"{u['tilelab_torch_tensors']:.1f}, tilelab tensors "
                         f"{u['tilelab_tensors']:.1f}, torch.add {u['torch_add']:.1f} "
                         f"({c['torch_tensors_vs_torch']:.2f}x torch); on a side stream "
                         f"{u['tilelab_torch_tensors_side_stream']:.1f} vs "
                         f"{u['torch_add_side_stream']:.1f}")
            b = c.get("breakdown_us")
            if b:
                lines.append("    where it goes (us): " + ", ".join(
                    f"{k} {v:.2f}" for k, v in b.items()))
        else:
            t = c["tflops"]
            lines.append(f"  {c['case']}: TFLOP/s torch tensors "
                         f"{t['tilelab_torch_tensors']:.0f}, tilelab tensors "
                         f"{t['tilelab_tensors']:.0f}, torch.matmul {t['torch_matmul']:.0f} "
                         f"({c['torch_tensors_vs_cublas']:.3f}x cuBLAS back to back)")
    return "\n".join(lines)


def main() -> None:
    """Run the group alone on the default backend and print its summary."""
    import sys
    from pathlib import Path

    import tilelab as tl

    from ..common import env_info, write_json

    backend = tl.backend()
    res = dict(run(Context(backend=backend)), env=env_info(backend))
    print(summary(res))
    if len(sys.argv) > 1:
        write_json(Path(sys.argv[1]), res)


if __name__ == "__main__":
    main()
