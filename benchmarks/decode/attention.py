"""Split-KV decode attention on the GPU: configurations against torch SDPA and bandwidth.

Why: ``decode_attention`` (one new token per sequence over a KV cache) had only CPU
tests and compiled code; it reads the whole cache once, so its figure of merit is
bandwidth. Compiled for sm_90 without a hint, its split kernel is one 255-register,
111 KiB block per SM. This times, in interleaved rounds after checking each result
against torch SDPA in float32, the library default and ``DecodeConfig`` variants (keys
per step, occupancy hint, split count) on Qwen3-8B's attention (32 query heads, 8 KV
heads, head_dim 128, bf16) at a few batch sizes and cache lengths, with torch SDPA
(``enable_gqa``) in the same rounds. Bandwidth counts the K and V read once (q and the
output are negligible).

Run with the decode group: ``python -m benchmarks --only decode --decode-attention``.
"""
from __future__ import annotations

import statistics
from typing import Any

import tilelab as tl
from tilelab.kernels import decode_attention
from tilelab.kernels.tuning import DecodeConfig

from ..common import Context, time_rounds

__all__ = ["run", "variants", "SHAPES"]

NOMINAL_BPS = 4.8e12
SHAPES = ((1, 32768), (8, 4096), (32, 2048), (64, 8192))     # (batch, cache length)
H, HKV, D = 32, 8, 128


def variants(bsz: int, sms: int = 132) -> dict[str, DecodeConfig | None]:
    """name -> config (None: the library default) for a batch of ``bsz`` sequences;
    ``per_sm`` variants set the split count to that many blocks per SM."""
    out: dict[str, DecodeConfig | None] = {"library": None}
    for bn in (64, 128):
        for occ in (None, 2, 4):
            out[f"bn{bn}_occ{occ or '-'}"] = DecodeConfig(bn=bn, occupancy=occ)
    for bn, occ in ((64, 4), (128, 2), (64, 8)):
        for per_sm in (4, 8):
            splits = -(-per_sm * sms // (bsz * HKV))
            out[f"bn{bn}_occ{occ}_x{per_sm}"] = DecodeConfig(bn=bn, occupancy=occ,
                                                             num_splits=splits)
    return out


def run(ctx: Context) -> dict[str, Any]:
    """Every shape of :data:`SHAPES` over :func:`variants`, checked against SDPA in
    float32 and timed with SDPA in the same interleaved rounds. GPU only."""
    if ctx.backend != "gpu":
        return {"status": "skipped", "reason": "needs the GPU backend (torch CUDA timing)"}
    import torch

    from tilelab.runtime.device import gpu

    torch.cuda.set_stream(torch.cuda.ExternalStream(gpu().stream_handle))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    res: dict = {"status": "ok", "nominal_Bps": NOMINAL_BPS,
                 "heads": H, "heads_kv": HKV, "head_dim": D, "cases": {}}
    for bsz, cache in SHAPES:
        q = torch.randn(bsz, H, 1, D, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(bsz, HKV, cache, D, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(bsz, HKV, cache, D, device="cuda", dtype=torch.bfloat16)
        o = torch.empty_like(q)
        tq, tk, tv, to = (tl.from_dlpack(t) for t in (q, k, v, o))
        ref = sdpa(q.float(), k.float(), v.float(), enable_gqa=True)
        nbytes = 2 * k.numel() * 2
        row: dict = {"batch": bsz, "cache": cache, "kv_bytes": nbytes, "variants": {}}
        cid = f"decode_attention/b{bsz}s{cache}"
        res["cases"][cid] = row
        calls = {"torch": lambda q=q, k=k, v=v: sdpa(q, k, v, enable_gqa=True)}
        for name, cfg in variants(bsz).items():
            item = row["variants"].setdefault(name, {})
            try:
                o.fill_(float("nan"))
                decode_attention(tq, tk, tv, out=to, config=cfg)
                err = ((o.float() - ref).norm() / ref.norm()).item()
                item["rel_err"] = err
                if not err <= 2e-2:
                    item["status"] = "wrong"
                    continue
                item["status"] = "ok"
                calls[name] = lambda cfg=cfg, a=(tq, tk, tv, to): decode_attention(
                    *a[:3], out=a[3], config=cfg, sync=False)
            except Exception as e:      # a config that does not compile or launch
                item.update(status="error", error=f"{type(e).__name__}: {e}"[:400])
        times = time_rounds(calls, ctx.rounds, ctx.rep)
        t_torch = statistics.median(times["torch"])
        print(cid, flush=True)
        for name in sorted(calls, key=lambda n: statistics.median(times[n])):
            sec = statistics.median(times[name])
            row["variants"].setdefault(name, {}).update(
                median_s=sec, times=times[name], Bps=nbytes / sec,
                fraction_of_nominal=nbytes / sec / NOMINAL_BPS, vs_torch=t_torch / sec)
            print(f"   {name:16s} {sec * 1e6:9.1f} us  {nbytes / sec / 1e12:.2f} TB/s "
                  f"({100 * nbytes / sec / NOMINAL_BPS:.0f}%)  {t_torch / sec:.2f}x torch",
                  flush=True)
        for name, item in row["variants"].items():
            if item.get("status") not in (None, "ok"):
                print(f"   {name:16s} {item['status']} "
                      f"{item.get('error', item.get('rel_err'))}", flush=True)
    return res
