"""Softmax and RMSNorm one-pass kernels under cuTile's occupancy and worker-warp hints.

Why: the library compiles its one-pass row kernels with an occupancy hint of 4 (a
whole row otherwise takes 255 registers and one block per SM). With 8 worker warps
tileiras builds 384-thread blocks with 80 registers and a shorter program; this times
those variants against the library's choice and torch, in interleaved rounds, on the
suite's shapes, after checking each against torch.

    python benchmarks/row_hints.py --out row_hints.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import tilelab as tl

HINTS = [{"occupancy": 4}, {"occupancy": 2, "num_worker_warps": 8},
         {"occupancy": 3, "num_worker_warps": 8}, {"num_worker_warps": 8},
         {"occupancy": 4, "num_worker_warps": 8}]
#: RoPE's one-token tiles never had a hint: its blocks may be register-limited too
ROPE_HINTS = [{}, {"occupancy": 2}, {"occupancy": 4}, {"occupancy": 8},
              {"num_worker_warps": 8}, {"occupancy": 4, "num_worker_warps": 8}]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="row_hints.json")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ops", default="softmax,rmsnorm",
                    help="which of softmax, rmsnorm, rope to time")
    ns = ap.parse_args()
    import importlib

    import torch

    from tilelab.runtime.device import gpu

    sm = importlib.import_module("tilelab.kernels.softmax")
    nm = importlib.import_module("tilelab.kernels.norms")
    rm = importlib.import_module("tilelab.kernels.rope")
    torch.cuda.set_stream(torch.cuda.ExternalStream(gpu().stream_handle))
    res: dict = {"gpu": gpu().name, "cases": {}}
    bf = torch.bfloat16
    x = torch.randn(16384, 8192, device="cuda", dtype=bf) * 2
    xs, ys = tl.from_dlpack(x), tl.from_dlpack(torch.empty_like(x))
    h = torch.randn(65536, 4096, device="cuda", dtype=bf)
    w = torch.randn(4096, device="cuda", dtype=bf)
    xh, wh, yh = tl.from_dlpack(h), tl.from_dlpack(w), tl.from_dlpack(torch.empty_like(h))
    cases = {
        "softmax/16384x8192": (lambda: torch.softmax(x, -1), torch.softmax(x.float(), -1),
                               ys, 2 * x.numel() * 2,
                               lambda bm: sm._softmax_call(xs, block_m=bm, out=ys),
                               (None, 2)),
        "rmsnorm/65536x4096": (
            lambda: torch.nn.functional.rms_norm(h, (4096,), w, 1e-6),
            torch.nn.functional.rms_norm(h.float(), (4096,), w.float(), 1e-6),
            yh, 2 * h.numel() * 2,
            lambda bm: nm._norm_call("rms_norm", xh, wh, None, None, 1e-6, True, bm, None,
                                     yh),
            (1, 2, 4)),
    }
    if "rope" in ns.ops:
        r = torch.randn(32768, 32, 128, device="cuda", dtype=bf)
        ang = torch.rand(32768, 64, device="cuda") * 6.28
        cos, sin = ang.cos().to(bf), ang.sin().to(bf)
        xr, yr = tl.from_dlpack(r), tl.from_dlpack(torch.empty_like(r))
        cr, sr = tl.from_dlpack(cos), tl.from_dlpack(sin)
        c3, s3, half = cos.float()[:, None], sin.float()[:, None], 64
        x1, x2 = r.float()[..., :half], r.float()[..., half:]
        ref_r = torch.cat([x1 * c3 - x2 * s3, x2 * c3 + x1 * s3], -1)

        def rope_torch():
            a1, a2 = r[..., :half], r[..., half:]
            return torch.cat([a1 * cos[:, None] - a2 * sin[:, None],
                              a2 * cos[:, None] + a1 * sin[:, None]], -1)
        cases["rope/32768x32x128"] = (
            rope_torch, ref_r, yr, (2 * r.numel() + 2 * cos.numel()) * 2,
            lambda bt: rm._rope_call("apply_rope", xr, None, cr, sr, None, bt, False, yr),
            (1, 2))
    cases = {k: v for k, v in cases.items() if k.split("/")[0] in ns.ops}
    for name, (torch_fn, ref, out, nbytes, call_for, block_ms) in cases.items():
        variants = {"torch": torch_fn}
        for bm in block_ms:
            for hint in (ROPE_HINTS if name.startswith("rope") else HINTS):
                call = call_for(bm)
                kern = tl.kernel(**hint)(call.kernel.__wrapped__) if hint else call.kernel
                args = call.args
                tag = f"bm{bm}_" + ("_".join(f"{k[:3]}{v}" for k, v in hint.items())
                                     or "nohint")
                try:
                    out_t = torch.from_dlpack(out)
                    out_t.fill_(float("nan"))
                    kern(*args)
                    err = float((out_t.float() - ref).norm() / ref.norm())
                    if not err < 2e-2:
                        print(name, tag, "wrong", err, flush=True)
                        continue
                except Exception as e:  # a hint tileiras rejects: report, go on
                    print(name, tag, "error", str(e)[:200], flush=True)
                    continue
                variants[tag] = (lambda kern=kern, args=args: kern.launch_async(*args))
        per: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(ns.rounds):
            for tag, fn in variants.items():
                per[tag].append(tl.bench(fn, rep=15, warmup=3).median)
        med = {k: statistics.median(v) for k, v in per.items()}
        res["cases"][name] = {"median_s": med, "TBps": {k: nbytes / v / 1e12
                                                         for k, v in med.items()}}
        best = min((k for k in med if k != "torch"), key=med.get)
        print(name, f"torch {nbytes / med['torch'] / 1e12:.2f} TB/s;",
              " ".join(f"{k}:{nbytes / v / 1e12:.2f}" for k, v in sorted(
                  med.items(), key=lambda kv: kv[1])[:6]), f"best {best}", flush=True)
    Path(ns.out).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
