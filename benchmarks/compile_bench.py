"""Compile-time benchmark (issue: foundation): cold compiles per stage and per arch, and
warm-cache compiles in a *new process*, for the tour's kernels.

    python benchmarks/compile_bench.py --out benchmarks/results/compile_<host>_<date>.json

The cold run uses an empty cache directory; each warm measurement starts a fresh Python
process (imports excluded from the timed region, as a notebook or service pays them
once) and times ``kernel.compile(...)`` against the cache the cold run filled.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

ARCHS = ("sm_80", "sm_90", "sm_100", "sm_120")

_CASES = textwrap.dedent("""
    import tilelab as tl
    from tilelab.kernels.examples import gemm, next_pow2, persistent_gemm, softmax, vector_add
    x = tl.spec(1 << 20, "float32")
    a = tl.spec((4096, 4096), "bfloat16")
    s = tl.spec((4096, 1000), "float32")
    CASES = {
        "vector_add": (vector_add, (x.partition(1024), x, x)),
        "gemm_bf16_128x128x64": (gemm, (a.partition((128, 128)), a, a, 64)),
        "softmax": (softmax, (s.partition((4, next_pow2(1000))), s)),
        "persistent_gemm": (persistent_gemm,
                            (a.partition((128, 128), schedule=tl.persistent(group_m=8)),
                             a, a, 64)),
    }
""")

_WARM = _CASES + textwrap.dedent("""
    import json, sys, time
    out = {}
    for name, (k, args) in CASES.items():
        t0 = time.perf_counter()
        art = k.compile(*args, arch=sys.argv[1])
        out[name] = {"seconds": time.perf_counter() - t0, "hit": art.cache_hit}
    print(json.dumps(out))
""")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="compile_bench.json")
    ap.add_argument("--warm-runs", type=int, default=5)
    ns = ap.parse_args()
    cache = tempfile.mkdtemp(prefix="tilelab-compile-bench-")
    os.environ["TILELAB_CACHE_DIR"] = cache
    env = dict(os.environ)
    ns_cases: dict = {}
    exec(_CASES, ns_cases)
    import importlib.metadata as md

    import tilelab as tl
    from tilelab.compiler.toolchain import find_toolchain

    res = {"env": {"host": platform.node(), "python": platform.python_version(),
                   "cpus": os.cpu_count(), "tilelab": tl.__version__,
                   "cuda-tile": md.version("cuda-tile"),
                   "toolchain": find_toolchain().describe(),
                   "date": datetime.datetime.now(datetime.timezone.utc)
                   .isoformat(timespec="seconds")},
           "cold": {}, "warm_new_process": {}}
    for arch in ARCHS:
        for name, (k, args) in ns_cases["CASES"].items():
            t0 = time.perf_counter()
            art = k.compile(*args, arch=arch)
            wall = time.perf_counter() - t0
            res["cold"][f"{name}@{arch}"] = {"wall_s": wall, "hit": art.cache_hit,
                                            "stages_s": art.timings,
                                            "cubin_bytes": len(art.cubin)}
            print(f"cold {name:24s} {arch:7s} {wall * 1e3:8.0f} ms  "
                  + ", ".join(f"{k2} {v * 1e3:.0f}" for k2, v in art.timings.items()),
                  flush=True)
    for arch in ("sm_90",):
        per: dict[str, list[float]] = {}
        for _ in range(ns.warm_runs):
            p = subprocess.run([sys.executable, "-c", _WARM, arch], env=env,
                               capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                raise SystemExit(p.stderr)
            for name, r in json.loads(p.stdout.strip().splitlines()[-1]).items():
                assert r["hit"], f"{name} missed the cache in a new process"
                per.setdefault(name, []).append(r["seconds"])
        for name, xs in per.items():
            res["warm_new_process"][f"{name}@{arch}"] = {
                "median_s": statistics.median(xs), "max_s": max(xs), "runs": xs}
            print(f"warm {name:24s} {arch}: median {statistics.median(xs) * 1e3:.1f} ms "
                  f"(max {max(xs) * 1e3:.1f})", flush=True)
    with open(ns.out, "w") as f:
        json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
