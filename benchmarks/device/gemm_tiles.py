"""Which GEMM tiles keep pace with cuBLAS on big problems, back to back and alone.

Why: big GEMMs run power-capped (an H100 under them clocks well below its 1.98 GHz),
so tiles that win a call timed alone can lose a loop of them, as a model runs them.
For each shape this times, in interleaved rounds, ``torch.matmul`` (cuBLAS), the
library's default config and the two tile shapes :func:`default_config` chooses between
for big 16-bit problems (``128x128``: persistent 128x128 tiles, group 8;
``128x256_ws``: persistent warp-specialized 128x256 tiles, 8 worker warps, group 4):

- **back to back**: about 10 ms of calls per loop on torch tensors with ``sync=False``,
  the host clock from a synchronized start until the device has finished;
- **alone**: one call between CUDA events after the L2 was flushed and the GPU idled
  20 ms, the median of the rounds.

Each variant's product is checked against torch in fp32 first. Needs the GPU and torch
with CUDA. The rule in :func:`tilelab.kernels.matmul.config.default_config` cites this
script's results.

Example::

    python -m benchmarks.device.gemm_tiles --out benchmarks/results/gemm_tiles_h100_DATE.json
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any, Callable

from ..common import env_info, rel_err, write_json
from ..host.torch_calls import interleaved, loop_calls, sync_both

#: big squares and Qwen3-8B projections at M = 8192 and 16384 (bf16)
SHAPES = ((8192, 8192, 8192), (10240, 10240, 10240), (12288, 12288, 12288),
          (16384, 16384, 16384), (16384, 16384, 8192), (8192, 16384, 8192),
          (8192, 8192, 16384), (8192, 12288, 4096), (16384, 12288, 4096),
          (16384, 4096, 12288))


def tile_variants() -> dict[str, Any]:
    """The two big-problem tile shapes, by name (see the module docstring)."""
    from tilelab.kernels.matmul.config import MatmulConfig

    return {"128x128": MatmulConfig(tm=128, tn=128, tk=64, schedule="persistent"),
            "128x256_ws": MatmulConfig(tm=128, tn=256, tk=64, schedule="persistent",
                                       group_m=4, num_worker_warps=8)}


def _alone_s(fns: dict[str, Callable[[], Any]], sync: Callable[[], None], flush: Any,
             rounds: int) -> dict[str, float]:
    """Median seconds of one call of each of ``fns`` between events, L2 flushed and the
    GPU idle before it, rounds taken in turn.

    The flush is a memset of ``flush`` on torch's stream, where the calls and events
    run, not ``tl.bench``'s read flush on tilelab's stream: its dirty lines cost the
    timed call up to an L2 of write-backs (about 2% of the shortest GEMM here, 1.2 ms),
    the same for every variant."""
    import torch

    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            sync()
            flush.zero_()
            torch.cuda.synchronize()
            time.sleep(0.02)
            start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            start.record()
            fn()
            end.record()
            sync()
            samples[name].append(start.elapsed_time(end) / 1e3)
    return {name: statistics.median(v) for name, v in samples.items()}


def shape_case(m: int, n: int, k: int, rounds: int, flush: Any) -> dict[str, Any]:
    """One shape's figures: TFLOP/s back to back and alone, and each over cuBLAS."""
    import torch

    from tilelab.kernels import matmul
    from tilelab.kernels.matmul.config import default_config

    a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    b = torch.randn(k, n, device="cuda").to(torch.bfloat16)
    ref = a.float() @ b.float()
    default = default_config(m, n, k)
    configs = {"default": default, **{name: c for name, c in tile_variants().items()
                                      if c != default}}
    cublas_out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    fns: dict[str, Callable[[], Any]] = {"cublas": lambda: torch.matmul(a, b,
                                                                        out=cublas_out)}
    for name, cfg in configs.items():
        out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        matmul(a, b, out=out, config=cfg)
        err, why = rel_err(out.float(), ref)
        if not err <= 1e-2:
            raise AssertionError(f"{name} at {m}x{n}x{k}: relative error {err:.3g} {why}")
        fns[name] = (lambda o, c: lambda: matmul(a, b, out=o, config=c,
                                                 sync=False))(out, cfg)
    del ref

    for fn in fns.values():
        for _ in range(3):
            fn()
    flops = 2.0 * m * n * k
    loop = loop_calls(flops, 200)
    b2b = {name: flops / s / 1e12 for name, s in
           interleaved(fns, sync_both, calls=loop, rounds=rounds,
                       until_done=True).items()}
    alone = {name: flops / s / 1e12
             for name, s in _alone_s(fns, sync_both, flush, rounds).items()}
    return {"shape": [m, n, k], "default": repr(default),
            "tiles_128x128": -(-m // 128) * -(-n // 128), "calls_per_loop": loop,
            "back_to_back_tflops": b2b, "alone_tflops": alone,
            "back_to_back_vs_cublas": {k_: v / b2b["cublas"] for k_, v in b2b.items()},
            "alone_vs_cublas": {k_: v / alone["cublas"] for k_, v in alone.items()}}


def main() -> None:
    """Time every shape (or those of ``--shapes``) and write the JSON."""
    import torch

    import tilelab as tl

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default=None, metavar="MxNxK[,MxNxK]",
                    help="shapes to time (default: SHAPES)")
    ap.add_argument("--rounds", type=int, default=9, help="interleaved rounds per figure")
    ap.add_argument("--out", type=Path, default=None, help="result JSON path")
    args = ap.parse_args()
    shapes = SHAPES if args.shapes is None else tuple(
        tuple(int(d) for d in s.split("x")) for s in args.shapes.split(","))
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    cases = []
    for shape in shapes:
        case = shape_case(*shape, rounds=args.rounds, flush=flush)
        cases.append(case)
        print("x".join(map(str, shape)), "back to back",
              {k: round(v, 3) for k, v in case["back_to_back_vs_cublas"].items()},
              "alone", {k: round(v, 3) for k, v in case["alone_vs_cublas"].items()},
              flush=True)
        torch.cuda.empty_cache()
    if args.out is not None:
        write_json(args.out, {"cases": cases, "env": env_info(tl.backend())})


if __name__ == "__main__":
    main()
