"""Safe vs raw persistent GEMM at 8192^3 and 16384^3, in interleaved rounds.

Why: the suite measured the library's persistent GEMM 5-6% slower than its raw cuTile
twin at 16384^3 (and equal at 8192^3) while the library's own tuning pass timed it as
fast as the twin. This times the library call, the tour's persistent kernel and the raw
kernel (``ct.launch``) back to back in several rounds, after checking all three.

    python benchmarks/persistent_gap.py --out persistent_gap.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tilelab as tl  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="persistent_gap.json")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", default="8192,16384")
    ns = ap.parse_args()
    import cuda.tile as ct
    import torch
    from raw_matmul_attention import persistent_matmul_launch

    from tilelab.kernels.examples import persistent_gemm
    from tilelab.kernels.matmul import matmul
    from tilelab.runtime.device import gpu

    torch.cuda.set_stream(torch.cuda.ExternalStream(gpu().stream_handle))
    s = torch.cuda.current_stream()
    sms = gpu().num_sms
    res = {"gpu": gpu().name, "sizes": {}}
    for n in (int(x) for x in ns.sizes.split(",")):
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
        ref = torch.matmul(a, b).float()
        ta, tb, tc = tl.from_dlpack(a), tl.from_dlpack(b), tl.from_dlpack(c)
        part = tc.partition((128, 128), schedule=tl.persistent(group_m=8))
        grid, kern, args = persistent_matmul_launch(c, a, b, sms)
        variants = {
            "torch": lambda: torch.matmul(a, b, out=c),
            "library": lambda: matmul(ta, tb, out=tc, sync=False),
            "tour": lambda: persistent_gemm.launch_async(part, ta, tb, 64),
            "raw": lambda: ct.launch(s, grid, kern, args),
        }
        for name, fn in variants.items():
            c.fill_(float("nan"))
            fn()
            tl.synchronize()
            err = float((c.float() - ref).norm() / ref.norm())
            assert err < 1e-2, (name, n, err)
        per: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(ns.rounds):
            for name, fn in variants.items():
                per[name].append(tl.bench(fn, rep=10, warmup=2).median)
        med = {k: statistics.median(v) for k, v in per.items()}
        res["sizes"][n] = {"median_s": med, "rounds_s": per,
                           "library_vs_raw": med["raw"] / med["library"],
                           "tour_vs_raw": med["raw"] / med["tour"]}
        print(n, {k: f"{v * 1e3:.3f} ms" for k, v in med.items()},
              f"library/raw {med['raw'] / med['library']:.3f}",
              f"tour/raw {med['raw'] / med['tour']:.3f}", flush=True)
        variants.clear()   # (frees the inputs before the next size)
    Path(ns.out).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
