"""Host time of a library call (``matmul(..., out=, sync=False)`` and friends) on the GPU.

Why: the suite's small GEMMs (8-35 us of device time) drift between runs, and the drift
follows the host time of the library call (20-40 us in ``suite_r3e``, torch 11-27 us):
``tl.bench`` flushes the L2 with a ~25 us read before each call, and a call whose host
side takes longer than that leaves the GPU idle inside the timed window. This times
the host side alone (no flush; the stream is drained every 50 calls so the queue never
fills), next to torch and to the library plan's own ``launch_async``, and prints a
cProfile of the slowest one.

    python benchmarks/library_host_profile.py [--profile matmul]
"""
from __future__ import annotations

import argparse
import cProfile
import importlib
import io
import json
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tilelab as tl  # noqa: E402


def host_us(fn, n: int = 1000, drain=None) -> float:
    """Median host microseconds per call over n calls in blocks of 50."""
    per = []
    for _ in range(n // 50):
        t0 = time.perf_counter()
        for _ in range(50):
            fn()
        per.append((time.perf_counter() - t0) / 50 * 1e6)
        if drain is not None:
            drain()
    return statistics.median(per)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="matmul")
    ap.add_argument("--out", default=None)
    ns = ap.parse_args()
    import torch

    from tilelab.runtime.device import gpu

    mm = importlib.import_module("tilelab.kernels.matmul")
    sm = importlib.import_module("tilelab.kernels.softmax")
    torch.cuda.set_stream(torch.cuda.ExternalStream(gpu().stream_handle))
    bf = torch.bfloat16
    a, b = (torch.randn(1024, 1024, device="cuda", dtype=bf) for _ in range(2))
    c = torch.empty(1024, 1024, device="cuda", dtype=bf)
    ta, tb, tc = (tl.from_dlpack(t) for t in (a, b, c))
    w = torch.randn(1024, 4096, device="cuda", dtype=bf)
    x = torch.randn(4096, device="cuda", dtype=bf)
    y = torch.empty(1024, device="cuda", dtype=bf)
    tw, tx, ty = (tl.from_dlpack(t) for t in (w, x, y))
    s_in = torch.randn(64, 8192, device="cuda", dtype=bf)
    s_out = torch.empty_like(s_in)
    tsi, tso = tl.from_dlpack(s_in), tl.from_dlpack(s_out)
    plan = mm.plan_matmul(ta, tb, out=tc)
    kern, args = plan.launches[0]

    def drain():
        torch.cuda.synchronize()
        tl.synchronize()

    calls = {
        "torch.matmul": lambda: torch.matmul(a, b, out=c),
        "matmul": lambda: mm.matmul(ta, tb, out=tc, sync=False),
        "plan_kernel.launch_async": lambda: kern.launch_async(*args),
        "gemv": lambda: mm.gemv(tw, tx, out=ty, sync=False),
        "torch.mv": lambda: torch.mv(w, x, out=y),
        "softmax": lambda: sm.softmax(tsi, out=tso, sync=False),
        "torch.softmax": lambda: torch.softmax(s_in, -1),
    }
    for fn in calls.values():
        fn()
    drain()
    res = {"host_us": {}}
    for _ in range(2):                     # two rounds, the second reported
        for name, fn in calls.items():
            res["host_us"][name] = host_us(fn, drain=drain)
    for name, v in res["host_us"].items():
        print(f"{name:28s} {v:7.2f} us/call", flush=True)
    prof = cProfile.Profile()
    fn = calls[ns.profile]
    prof.enable()
    for i in range(2000):
        fn()
        if i % 50 == 49:
            drain()
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(30)
    print(buf.getvalue()[:9000])
    if ns.out:
        res["profile"] = buf.getvalue()
        Path(ns.out).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
