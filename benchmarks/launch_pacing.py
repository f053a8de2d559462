"""What one launch call costs on the host when the GPU is busy and when it is idle.

Why: ``runtime_bench``'s bare launch loop submits faster than the GPU runs the kernel
(~5 us each), so its launch queue fills and the loop runs at the GPU's rate; the safe
loop, slower on the host, finds the GPU idle at each launch. This times single calls
with ``time.perf_counter`` around each, with a spin of 0-16 us between calls, for the
driver call alone (native module and ``cuda.core.launch``) and the safe async launch.

    python benchmarks/launch_pacing.py --out pacing.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tilelab as tl  # noqa: E402
from tilelab.kernels.examples import vector_add  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="launch_pacing.json")
    ns = ap.parse_args()
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
    calls = {"cuda_core_launch": lambda: cu_launch(s, config, fast.kernel, *fast.words),
             "safe_async_drop": lambda: vector_add.launch_async(zp, x, y)}
    if nat is not None:
        calls["native_launch"] = lambda: nat.launch(fast.native)
    res: dict = {"native": native.status(), "us": {}}

    def spin(us: float) -> None:
        t = time.perf_counter()
        while time.perf_counter() - t < us * 1e-6:
            pass

    for gap in (0, 2, 4, 8, 16):
        for name, fn in calls.items():
            samples = []
            for _ in range(3000):
                spin(gap)
                t0 = time.perf_counter()
                fn()
                samples.append(time.perf_counter() - t0)
            tl.synchronize()
            med = statistics.median(samples[500:]) * 1e6
            res["us"][f"{name}_gap{gap}"] = med
            print(f"{name:18s} gap {gap:2d} us: {med:6.2f} us per call", flush=True)
    Path(ns.out).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
