"""The fused decode attention (q/k norm + RoPE + attention + the KV write) against its
raw cuTile twin and against the plain pair of kernels it replaces.

``rope_attention_kernel`` (:mod:`tilelab.kernels.decode.rope_attention`) is a safe
kernel; :func:`raw_rope_attention` below is the same computation written raw in cuTile
Python (``ct.bid``, ``ct.store`` at an index, the offset store as an explicit guard),
the form tilelab lowers the safe kernel to, so timing both measures what safety costs.
The plain pair (``qk_norm_rope_cache_kernel`` then ``decode_attention_kernel``) is
timed beside them, replayed as a graph of two launches, as the step runs it.

Shapes: Qwen3-4B/8B attention (8 KV heads of 4 query heads, head_dim 128, bf16), one
new token at each context. Each kernel is checked against the safe kernel's output
before it is timed.

Example::

    python -m benchmarks.decode.rope_attention --contexts 129,384 --out r.json
"""
from __future__ import annotations

import argparse
import json
import math
from typing import Any

import cuda.tile as ct
import numpy as np

ZERO = ct.PaddingMode.ZERO
LOG2E = 1.4426950408889634
HQ, HKV, D, CAPACITY = 32, 8, 128, 512

__all__ = ["raw_rope_attention", "raw_kv_store", "compare", "main"]


def _rms_rope(a, b, w, c, s, eps, D: int):
    """RMSNorm of rows held as halves a, b (float32) with weight w, then RoPE."""
    half = D // 2
    ss = ct.sum(a * a, axis=-1, keepdims=True) + ct.sum(b * b, axis=-1, keepdims=True)
    rstd = ct.rsqrt(ss * (1.0 / D) + eps)
    a = a * rstd * ct.load(w, index=(0,), shape=(half,)).astype(ct.float32)
    b = b * rstd * ct.load(w, index=(1,), shape=(half,)).astype(ct.float32)
    return ct.cat((a * c - b * s, b * c + a * s), axis=-1)


@ct.kernel
def raw_rope_attention(o, kv_new, k_prev, v_prev, q, k, v, k_cache, v_cache, kv_prev,
                       q_norm, k_norm, cos, sin, pos, eps: float, qk_scale: float,
                       GC: ct.Constant[int], BN: ct.Constant[int], D: ct.Constant[int],
                       PREV: ct.Constant[int]):
    """The raw twin of ``rope_attention_kernel``: block ``hk = bid(0)`` per KV head."""
    hk = ct.bid(0)
    half = D // 2
    p = ct.load(pos, index=(0,), shape=(1,)).item()
    prow = ct.full((1, 1), p, dtype=ct.int32)
    cols = ct.reshape(ct.arange(half, dtype=ct.int32), (1, half))
    c = ct.gather(cos, (prow, cols)).astype(ct.float32)
    s = ct.gather(sin, (prow, cols)).astype(ct.float32)
    k1 = ct.load(k, index=(hk, 0), shape=(1, half)).astype(ct.float32)
    k2 = ct.load(k, index=(hk, 1), shape=(1, half)).astype(ct.float32)
    kr = _rms_rope(k1, k2, k_norm, c, s, eps, D).astype(kv_new.dtype)
    vr = ct.load(v, index=(hk, 0), shape=(1, D)).astype(kv_new.dtype)
    ct.store(kv_new, index=(hk, 0, 0), tile=ct.reshape(ct.cat((kr, vr), axis=-1), (1, 2, D)))
    q1 = ct.load(q, index=(hk, 0, 0), shape=(1, GC, half), padding_mode=ZERO)
    q2 = ct.load(q, index=(hk, 0, 1), shape=(1, GC, half), padding_mode=ZERO)
    qr = _rms_rope(q1.astype(ct.float32), q2.astype(ct.float32), q_norm,
                   ct.reshape(c, (1, 1, half)), ct.reshape(s, (1, 1, half)), eps, D)
    qt = ct.reshape(qr.astype(q.dtype), (GC, D))
    m_i = ct.full((GC, 1), -math.inf, dtype=ct.float32)
    l_i = ct.full((GC, 1), 0.0, dtype=ct.float32)
    acc = ct.full((GC, D), 0.0, dtype=ct.float32)
    for j in range(ct.cdiv(p, BN)):
        kt = ct.load(k_cache, index=(hk, 0, j), shape=(1, D, BN), order=(0, 2, 1),
                     padding_mode=ZERO)
        sc = ct.mma(qt, ct.reshape(kt, (D, BN)), ct.full((GC, BN), 0.0, dtype=ct.float32))
        krow = ct.reshape(j * BN + ct.arange(BN, dtype=ct.int32), (1, BN))
        sc = ct.where(krow < p, sc, -math.inf)
        vt = ct.reshape(ct.load(v_cache, index=(hk, j, 0), shape=(1, BN, D),
                                padding_mode=ZERO), (BN, D))
        m_new = ct.maximum(m_i, ct.max(sc, axis=1, keepdims=True) * qk_scale)
        pr = ct.exp2(sc * qk_scale - m_new, flush_to_zero=True)
        alpha = ct.exp2(m_i - m_new, flush_to_zero=True)
        l_i = l_i * alpha + ct.sum(pr, axis=1, keepdims=True)
        acc = ct.mma(pr.astype(vt.dtype), vt, acc * alpha)
        m_i = m_new
    kn = kr.astype(k_cache.dtype).astype(ct.float32)
    vn = vr.astype(v_cache.dtype)
    s_new = ct.sum(qt.astype(ct.float32) * kn, axis=1, keepdims=True)
    m_new = ct.maximum(m_i, s_new * qk_scale)
    p_new = ct.exp2(s_new * qk_scale - m_new, flush_to_zero=True)
    alpha = ct.exp2(m_i - m_new, flush_to_zero=True)
    l_i = l_i * alpha + p_new
    acc = acc * alpha + p_new.astype(vn.dtype).astype(ct.float32) * vn.astype(ct.float32)
    out = acc / ct.where(l_i > 0.0, l_i, 1.0)
    ct.store(o, index=(hk, 0, 0), tile=ct.reshape(out.astype(o.dtype), (1, GC, D)))
    if PREV:
        if p < k_prev.shape[1]:
            kp = ct.load(kv_prev, index=(hk, 0, 0), shape=(1, 1, D))
            ct.store(k_prev, index=(hk, p, 0), tile=kp.astype(k_prev.dtype))
            vp = ct.load(kv_prev, index=(hk, 1, 0), shape=(1, 1, D))
            ct.store(v_prev, index=(hk, p, 0), tile=vp.astype(v_prev.dtype))


@ct.kernel
def raw_kv_store(k_cache, v_cache, kv, pos, D: ct.Constant[int]):
    """The raw twin of ``kv_store_kernel``."""
    hk = ct.bid(0)
    p = ct.load(pos, index=(0,), shape=(1,)).item()
    if p < k_cache.shape[1]:
        ct.store(k_cache, index=(hk, p, 0),
                 tile=ct.load(kv, index=(hk, 0, 0), shape=(1, 1, D)).astype(k_cache.dtype))
        ct.store(v_cache, index=(hk, p, 0),
                 tile=ct.load(kv, index=(hk, 1, 0), shape=(1, 1, D)).astype(v_cache.dtype))


def _tensors(context: int, device: str, seed: int = 0) -> dict[str, Any]:
    """Random raw qkv, norm weights, two layers' caches and the rope tables."""
    import torch

    import tilelab as tl
    from tilelab.kernels.rope import rope_tables

    dev = "cuda" if device == "gpu" else "cpu"
    gen = torch.Generator(device=dev).manual_seed(seed)

    def randn(*shape, scale=1.0):
        return (scale * torch.randn(*shape, device=dev, generator=gen)).to(torch.bfloat16)

    g = HQ // HKV
    t = {"q": randn(HKV, g, D), "k": randn(HKV, D), "v": randn(HKV, D),
         "q_norm": 1 + randn(D, scale=0.1), "k_norm": 1 + randn(D, scale=0.1),
         "kc": randn(HKV, CAPACITY, D), "vc": randn(HKV, CAPACITY, D),
         "kp": torch.zeros(HKV, CAPACITY, D, device=dev, dtype=torch.bfloat16),
         "vp": torch.zeros(HKV, CAPACITY, D, device=dev, dtype=torch.bfloat16),
         "kv_prev": randn(HKV, 2, D),
         "o": torch.zeros(HKV, g, D, device=dev, dtype=torch.bfloat16),
         "kv_new": torch.zeros(HKV, 2, D, device=dev, dtype=torch.bfloat16),
         "q_rot": torch.zeros(HKV, g, D, device=dev, dtype=torch.bfloat16),
         "pos": torch.tensor([context - 1], device=dev, dtype=torch.int32)}
    cos, sin = rope_tables(CAPACITY, D, device=device)
    t["cos"], t["sin"] = torch.from_dlpack(cos), torch.from_dlpack(sin)
    t["tl"] = {k: tl.from_dlpack(v) for k, v in t.items()}
    return t


def _launchers(t: dict[str, Any], bn: int, stream: Any = None) -> dict[str, Any]:
    """The three forms as callables that enqueue on ``stream`` without waiting (None:
    tilelab's default; the GPU run passes torch's current stream, where ``ct.launch``
    runs the raw twin, so one pair of events brackets each form)."""
    import tilelab as tl
    from tilelab.kernels.decode.step import (decode_attention_kernel,
                                             qk_norm_rope_cache_kernel)
    from tilelab.kernels.decode.rope_attention import rope_attention_kernel

    w = t["tl"]
    scale = LOG2E / math.sqrt(D)
    gc = max(16, 1 << (HQ // HKV - 1).bit_length())
    safe_args = (w["o"].partition((1, gc, D)), w["kv_new"].partition((1, 2, D)),
                 w["kp"].partition((1, CAPACITY, D)), w["vp"].partition((1, CAPACITY, D)),
                 w["q"], w["k"], w["v"], w["kc"], w["vc"], w["kv_prev"], w["q_norm"],
                 w["k_norm"], w["cos"], w["sin"], w["pos"], 1e-6, scale, bn, D, 1)
    raw_args = (t["o"], t["kv_new"], t["kp"], t["vp"], t["q"], t["k"], t["v"], t["kc"],
                t["vc"], t["kv_prev"], t["q_norm"], t["k_norm"], t["cos"], t["sin"],
                t["pos"], 1e-6, scale, gc, bn, D, 1)
    gp = 1 << (HQ // HKV - 1).bit_length()

    def plain():
        qk_norm_rope_cache_kernel.launch_async(
            w["q_rot"].partition((1, gp, D)), w["kc"].partition((1, CAPACITY, D)),
            w["vc"].partition((1, CAPACITY, D)), w["q"], w["k"], w["v"], w["q_norm"],
            w["k_norm"], w["cos"], w["sin"], w["pos"], 1e-6, D, stream=stream)
        return decode_attention_kernel.launch_async(
            w["o"].partition((1, gc, D)), w["q_rot"], w["kc"], w["vc"], w["pos"], scale,
            bn, D, stream=stream)

    def raw():
        if w["o"].device == "cpu":
            tl.interpret(raw_rope_attention, *raw_args, grid=(HKV, 1, 1), trace=False)
            return None
        ct.launch(stream, (HKV, 1, 1), raw_rope_attention, raw_args)
        return None

    return {"safe": lambda: rope_attention_kernel.launch_async(*safe_args, stream=stream),
            "raw": raw,
            "plain_pair": plain}


def compare(contexts: tuple[int, ...] = (129, 384), device: str | None = None,
            bn: int = 256, rep: int = 50) -> list[dict[str, Any]]:
    """Per context: the safe fused kernel, its raw twin and the plain pair, each checked
    against the safe kernel's output and timed (median us, L2 flushed; the plain pair
    and the safe kernel also replayed as graphs, as the step runs them)."""
    import torch

    import tilelab as tl

    device = device or tl.backend()
    rows = []
    for ctx in contexts:
        t = _tensors(ctx, device, seed=ctx)
        stream = torch.cuda.current_stream() if device == "gpu" else None
        run = _launchers(t, bn, stream)
        row: dict[str, Any] = {"context": ctx, "bn": bn}
        outs = {}
        for name, fn in run.items():
            fut = fn()
            if fut is not None:
                fut.wait()
            elif device == "gpu":
                torch.cuda.synchronize()
            outs[name] = t["o"].float().cpu().clone()
        for name in ("raw", "plain_pair"):
            row[f"{name}_max_abs_diff"] = float((outs[name] - outs["safe"]).abs().max())
        reps = 3 if device == "cpu" else rep
        for name, fn in run.items():
            row[f"{name}_us"] = tl.bench(fn, warmup=3, rep=reps, stream=stream,
                                         name=f"rope_attention/{name}").median * 1e6
        graphed = _launchers(t, bn)     # recorded on the graph's own stream
        for name in ("safe", "plain_pair"):
            with tl.graph() as g:
                graphed[name]()
            row[f"{name}_graph_us"] = tl.bench(g.replay, warmup=3, rep=reps,
                                               name=f"rope_attention/{name}_graph"
                                               ).median * 1e6
        row["safe_over_raw"] = row["safe_us"] / row["raw_us"]
        row["fused_over_plain_graph"] = row["safe_graph_us"] / row["plain_pair_graph_us"]
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Command line: ``--contexts 129,384 --bn 256 --out FILE``."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--contexts", default="129,384")
    ap.add_argument("--bn", type=int, default=256, help="keys per step")
    ap.add_argument("--out", default=None, help="JSON path")
    a = ap.parse_args(argv)
    rows = compare(tuple(int(c) for c in a.contexts.split(",")), bn=a.bn)
    text = json.dumps(rows, indent=1)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    return rows


if __name__ == "__main__":
    main()
