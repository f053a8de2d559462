"""Where a loop of safe async launches spends its host time on the GPU machine.

Why: timed per call (``launch_pacing.py``) a safe async launch costs ~1.16x a bare
``cuda.core.launch``, but a tight loop of them runs at 8.2 us per launch against the
bare loop's 5.0 us. This times tight loops (bare, native call, safe with and without
the garbage collector) and prints a cProfile of the safe loop.

    python benchmarks/async_loop_probe.py
"""
from __future__ import annotations

import cProfile
import gc
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tilelab as tl  # noqa: E402
from tilelab.kernels.examples import vector_add  # noqa: E402


def main() -> int:
    from cuda.core import LaunchConfig, launch as cu_launch

    from tilelab.runtime import native
    from tilelab.runtime.device import gpu

    x, y, z = (tl.randn(1024, device="cuda") for _ in range(3))
    zp = z.partition(1024)
    vector_add(zp, x, y)
    fast = vector_add._launcher._fast[hash((zp, x, y))]
    nat = native.load()
    s = gpu().stream
    config = LaunchConfig(grid=fast.grid, block=(1, 1, 1))
    launch_async = vector_add.launch_async

    def loop(fn, n=2000, reps=7):
        out = []
        for _ in range(reps):
            tl.synchronize()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            out.append((time.perf_counter() - t0) / n * 1e6)
        tl.synchronize()
        return statistics.median(out)

    rows = {"bare_cuda_core": lambda: cu_launch(s, config, fast.kernel, *fast.words),
            "native_call": lambda: nat.launch(fast.native),
            "safe_async_drop": lambda: launch_async(zp, x, y)}
    for name, fn in rows.items():
        print(f"{name:24s} {loop(fn):6.2f} us per launch", flush=True)
    gc.disable()
    print(f"{'safe_async_drop_nogc':24s} {loop(rows['safe_async_drop']):6.2f} us", flush=True)
    gc.enable()
    for n in (100, 500):
        print(f"{'safe_drop_n' + str(n):24s} {loop(rows['safe_async_drop'], n=n, reps=21):6.2f}"
              f" us  (bare {loop(rows['bare_cuda_core'], n=n, reps=21):6.2f})", flush=True)
    pr = cProfile.Profile()
    tl.synchronize()
    pr.enable()
    for _ in range(20000):
        launch_async(zp, x, y)
    pr.disable()
    tl.synchronize()
    pstats.Stats(pr).sort_stats("tottime").print_stats(14)
    return 0


if __name__ == "__main__":
    sys.exit(main())
