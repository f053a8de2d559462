"""The decode step's attention against torch SDPA, in both of its forms.

The step attends with one pass (one block per KV head, one launch) up to
``StepConfig.one_pass_upto`` positions and with split-KV attention (the splits' partials,
then their combine) beyond. :func:`attention_vs_sdpa` times both forms at each context,
each replayed as a graph as the engine runs it, after checking each against SDPA in
float32, so the JSON shows where one form overtakes the other.

Example::

    from benchmarks.decode.step_attention import attention_vs_sdpa
    rows = attention_vs_sdpa((256, 4096), "gpu")
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import tune as decode_tune
from .reference import sync_device


def attention_vs_sdpa(contexts: tuple[int, ...], device: str,
                      one_pass_upto: int | None = None,
                      one_pass_bns: tuple[int, ...] = (64, 128, 256)) -> list[dict[str, Any]]:
    """The step's decode attention (Qwen3-8B heads) against torch SDPA: both of its
    forms, the split kernels (split + combine, replayed as a graph of two launches)
    and the one-pass kernel at each keys-per-step in ``one_pass_bns``
    (``one_pass_<bn>_us``; ``one_pass_us`` is the step's default); ``tilelab_us`` is the
    form the step runs at that context (``StepConfig.one_pass_upto``; None: the
    default)."""
    import torch
    import torch.nn.functional as F

    import tilelab as tl
    from tilelab.kernels._host import hinted
    from tilelab.kernels.decode.step import (LOG2E, decode_attention_kernel,
                                             decode_combine_head_kernel, decode_split_kernel)
    from tilelab.models.decode_step import StepConfig, whole_chunks

    default = StepConfig()
    upto = default.one_pass_upto if one_pass_upto is None else one_pass_upto
    step_bn = default.one_pass_bn or default.attn_bn
    bns = tuple(dict.fromkeys((step_bn, *one_pass_bns)))
    hq, hk, d = 32, 8, 128
    g = hq // hk
    tdev = "cuda" if device == "gpu" else "cpu"
    split = hinted(decode_split_kernel, occupancy=4)
    out = []
    for ctx in contexts:
        gen = torch.Generator(device=tdev).manual_seed(ctx)
        q = torch.randn(1, hq, 1, d, device=tdev, generator=gen).to(torch.bfloat16)
        k = torch.randn(1, hk, ctx, d, device=tdev, generator=gen).to(torch.bfloat16)
        v = torch.randn(1, hk, ctx, d, device=tdev, generator=gen).to(torch.bfloat16)
        qt = tl.from_dlpack(q.reshape(hk, g, d).contiguous())
        kt, vt = tl.from_dlpack(k[0]), tl.from_dlpack(v[0])
        pos = tl.tensor(np.array([ctx - 1], np.int32), device=device)
        splits = whole_chunks(max(1, min(-(-2 * 132 // hk), -(-ctx // 64))), 16)
        po = tl.empty((hk, splits, g * d), "float32", device=device)
        pl = tl.empty((hk, splits, g), "float32", device=device)
        o = tl.empty(hq * d, "bfloat16", device=device)
        chunk = min(16, 1 << (splits - 1).bit_length())
        parts = (po.partition((1, 1, 16 * d)), pl.partition((1, 1, 16)))
        merged = (o.reshape(hk, g, d).partition((1, 1, d)), po.reshape(hk, splits, g, d))
        scale = LOG2E / math.sqrt(d)

        def split_form():
            split.launch_async(*parts, qt, kt, vt, pos, scale, 64, d)
            return decode_combine_head_kernel.launch_async(*merged, pl, chunk, d)

        def one_pass(bn: int):
            return lambda: decode_attention_kernel.launch_async(
                o.reshape(hk, g, d).partition((1, 16, d)), qt, kt, vt, pos, scale, bn, d)

        sync_device(device)
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                             enable_gqa=True).reshape(-1)
        row: dict[str, Any] = {"context": ctx}
        forms = [("split", split_form)] + [(f"one_pass_{bn}", one_pass(bn)) for bn in bns]
        for key, form in forms:
            try:
                form().wait()
            except Exception as e:   # a tile that does not fit: keep the other forms
                if key == f"one_pass_{step_bn}" or key == "split":
                    raise
                row[f"{key}_error"] = f"{type(e).__name__}: {e}"[:500]
                continue
            row[f"{key}_max_abs_error"] = float(
                (torch.from_dlpack(o).float().to(ref.device) - ref).abs().max())
            # replayed as a graph, as the engine runs it: no host work in the time
            with tl.graph() as gr:
                form()
            row[f"{key}_us"] = tl.bench(gr.replay, warmup=3, rep=20,
                                        name=f"decode_attention/{key}").median * 1e6
        row["one_pass_us"] = row[f"one_pass_{step_bn}_us"]
        row["one_pass_max_abs_error"] = row[f"one_pass_{step_bn}_max_abs_error"]
        t_sdpa = decode_tune.time_torch(lambda: F.scaled_dot_product_attention(
            q, k, v, enable_gqa=True), device)
        form = "one_pass" if ctx <= upto else "split"
        ours = row[f"{form}_us"]
        kv_bytes = 2 * hk * ctx * d * 2
        row.update({"form": form, "tilelab_us": ours, "sdpa_us": t_sdpa * 1e6,
                    "speedup_vs_sdpa": t_sdpa * 1e6 / ours,
                    "max_abs_error": row[f"{form}_max_abs_error"],
                    "tilelab_bandwidth": kv_bytes / (ours * 1e-6)})
        out.append(row)
    return out
