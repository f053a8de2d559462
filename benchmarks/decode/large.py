"""Qwen3-32B decode on one GPU: a model whose weights fit the device once, not twice.

The 4B and 8B benchmark (:mod:`benchmarks.decode.throughput`) builds transformers' model
and the engine on one set of weights. Qwen3-32B's bf16 weights are 65 GB, so on an H200 the
engine holds them alone: its random weights are drawn on the device layer by layer
(normal, std 0.02 as transformers initializes them; norms 1), and what needs
transformers is done apart, one model on the device at a time:

1. correctness on a 2-layer slice of the same config (the full hidden size, heads,
   intermediate size and vocabulary): prefill logits and 64 greedy tokens against
   transformers on shared weights (:func:`benchmarks.decode.reference.check`);
2. the engine on all 64 layers: decode tokens/s of the replayed graph (with and
   without programmatic dependent launch) and of plain launches, the fraction of the
   nominal HBM roofline, the per-kernel breakdown and each kind's cost in the graph;
3. the cost of reading tokens back to stop and stream
   (:mod:`benchmarks.decode.readback`);
4. transformers eager on the full model, built after the engine is freed (skipped
   when the device cannot hold it).

Usage::

    python -m benchmarks.decode.large --out results.json
    python -m benchmarks.decode.large --dry-run      # the CPU backend, the tiny shape
"""
from __future__ import annotations

import argparse
import datetime
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..common import RESULTS
from . import graph as decode_graph
from . import readback as decode_readback
from .models import COMMON, SHAPES, build_models, env_info, nominal_bandwidth, say
from .reference import check, hf_tok_s
from .throughput import engine_tok_s, graph_without_pdl, kernel_breakdown

__all__ = ["random_engine", "run", "main"]

#: layers of the slice checked against transformers
SLICE_LAYERS = 2


def random_engine(name: str, device: str, seed: int = 0, max_tokens: int = 1024) -> Any:
    """The engine alone on random bf16 weights of the ``name`` shape, drawn on the
    device one tensor at a time (the peak is the engine's weights plus one layer)."""
    import torch

    from tilelab.models import Qwen3
    from tilelab.models.config import Qwen3Config
    from tilelab.models.device_weights import DeviceWeights

    shape = dict(SHAPES[name], **COMMON)
    cfg = Qwen3Config(dtype="bfloat16", **shape)
    tdev = "cuda" if device == "gpu" else "cpu"
    gen = torch.Generator(device=tdev).manual_seed(seed)
    h, d = cfg.hidden_size, cfg.head_dim
    nq, nkv = cfg.num_attention_heads * d, cfg.num_key_value_heads * d

    def normal(*shape: int) -> Any:
        return torch.randn(shape, generator=gen, device=tdev, dtype=torch.bfloat16) * 0.02

    def ones(n: int) -> Any:
        return torch.ones(n, device=tdev, dtype=torch.bfloat16)

    def layer(i: int) -> dict[str, Any]:
        return {"q_proj": normal(nq, h), "k_proj": normal(nkv, h), "v_proj": normal(nkv, h),
                "o_proj": normal(h, nq), "q_norm": ones(d), "k_norm": ones(d),
                "input_layernorm": ones(h), "post_attention_layernorm": ones(h),
                "gate_proj": normal(cfg.intermediate_size, h),
                "up_proj": normal(cfg.intermediate_size, h),
                "down_proj": normal(h, cfg.intermediate_size)}

    lm_head = None if cfg.tie_word_embeddings else normal(cfg.vocab_size, h)
    weights = DeviceWeights.from_arrays(cfg, layer, normal(cfg.vocab_size, h), ones(h),
                                        lm_head, device=device)
    return Qwen3(weights, max_tokens=max_tokens)


def _free(device: str) -> None:
    import gc

    gc.collect()
    if device == "gpu":
        import torch

        torch.cuda.empty_cache()


def _check_slice(name: str, device: str, prompt: list[int], n: int) -> dict[str, Any]:
    hf, engine = build_models(name, device, layers=SLICE_LAYERS)
    try:
        return dict(check(hf, engine, prompt, n), layers=SLICE_LAYERS)
    finally:
        del hf, engine
        _free(device)


def _hf_full(name: str, device: str, prompt: list[int], tokens: int, runs: int
             ) -> dict[str, Any]:
    """transformers eager on the full shape, built straight in bf16 on the device."""
    import torch
    import transformers

    hf_cfg = transformers.Qwen3Config(**SHAPES[name], **COMMON, attn_implementation="sdpa")
    tdev = "cuda" if device == "gpu" else "cpu"
    try:
        with torch.device(tdev):
            hf = transformers.Qwen3ForCausalLM._from_config(hf_cfg, dtype=torch.bfloat16)
        hf.eval()
    except torch.OutOfMemoryError as e:
        _free(device)
        return {"error": f"skipped: the device cannot hold transformers' model ({e})"}
    try:
        return hf_tok_s(hf, prompt, tokens, runs, device)
    finally:
        del hf
        _free(device)


def run(name: str = "32b", *, tokens: int = 256, prompt_len: int = 128, runs: int = 3,
        dry_run: bool = False, hf_runs: int = 1, save: str | None = None
        ) -> dict[str, Any]:
    """Everything in the module docstring for one shape; ``dry_run``: the CPU backend
    and the tiny shape.

    Example:
        >>> r = run(dry_run=True, tokens=3, prompt_len=4, runs=1)     # doctest: +SKIP
        >>> r["check"]["passed"]                                      # doctest: +SKIP
        True
    """
    import tilelab as tl
    from tilelab.models.step_cost import decode_bytes_per_token

    device = "cpu" if dry_run else tl.backend()
    name = "tiny" if dry_run else name
    info = env_info(device)
    gpu_name, bandwidth = nominal_bandwidth(info.get("gpu"))
    res: dict[str, Any] = {"benchmark": "decode_large", "env": info, "model": name,
                           "shape": SHAPES[name], "prompt": prompt_len,
                           "new_tokens": tokens, "bandwidth_gpu": gpu_name,
                           "nominal_bandwidth": bandwidth, "dry_run": dry_run}
    prompt = np.random.default_rng(0).integers(0, SHAPES[name]["vocab_size"],
                                               prompt_len).tolist()
    res["check"] = _check_slice(name, device, prompt, min(64, tokens))
    say(f"{name}: check on {SLICE_LAYERS} layers {res['check']}")
    _save(res, save)
    t0 = time.perf_counter()
    engine = random_engine(name, device)
    res["build_s"] = time.perf_counter() - t0
    res["engine_graph"] = engine_tok_s(engine, prompt, tokens, runs, graph=True)
    res["engine_graph_without_pdl"] = graph_without_pdl(engine, prompt, tokens, runs)
    res["engine_launches"] = engine_tok_s(engine, prompt, min(tokens, 64), runs,
                                          graph=False)
    per_token = decode_bytes_per_token(engine.config, prompt_len + tokens // 2)
    res["bytes_per_token"] = per_token
    for key in ("engine_graph", "engine_graph_without_pdl", "engine_launches"):
        res[key]["fraction_of_hbm_roofline"] = per_token * res[key]["tok_s"] / bandwidth
    say(f"{name}: graph {res['engine_graph']['tok_s']:.1f} tok/s "
         f"({res['engine_graph']['fraction_of_hbm_roofline']:.1%} of the roof)")
    _save(res, save)
    res["kernels"] = kernel_breakdown(engine, prompt_len + 1, bandwidth)
    res["graph_ablation"] = decode_graph.ablation(engine, prompt, rep=3 if dry_run else 20)
    res["readback"] = decode_readback.measure(engine, prompt, tokens, runs)
    res["launches_per_step"] = len(engine.decode_step().launches)
    _save(res, save)
    del engine
    _free(device)
    res["hf_eager"] = _hf_full(name, device, prompt, tokens, hf_runs)
    if "tok_s" in res["hf_eager"]:
        res["hf_eager"]["fraction_of_hbm_roofline"] = (
            per_token * res["hf_eager"]["tok_s"] / bandwidth)
    say(f"{name}: transformers eager {res['hf_eager']}")
    _save(res, save)
    return res


def _save(result: dict[str, Any], path: str | None) -> None:
    if path:
        Path(path).write_text(json.dumps(result, indent=2, default=str) + "\n")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line: ``--model 32b --tokens N --runs R --dry-run --out F``."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="32b", choices=sorted(set(SHAPES) - {"tiny"}))
    ap.add_argument("--tokens", type=int, default=256, help="new tokens per run")
    ap.add_argument("--prompt", type=int, default=128, help="prompt length")
    ap.add_argument("--runs", type=int, default=3, help="timed runs (median)")
    ap.add_argument("--hf-runs", type=int, default=1, help="timed transformers runs")
    ap.add_argument("--dry-run", action="store_true", help="CPU backend, tiny shape")
    ap.add_argument("--out", default=None, help="JSON path (default: benchmarks/results/"
                                                "decode_<model>_<date>.json)")
    a = ap.parse_args(argv)
    tokens, prompt, runs = a.tokens, a.prompt, a.runs
    if a.dry_run:
        tokens, prompt, runs = min(tokens, 4), min(prompt, 8), 1
    out = a.out or (None if a.dry_run else str(
        RESULTS /
        f"decode_{a.model}_{datetime.date.today()}.json"))
    res = run(a.model, tokens=tokens, prompt_len=prompt, runs=runs, dry_run=a.dry_run,
              hf_runs=a.hf_runs, save=out)
    g = res["engine_graph"]
    print(f"{res['model']} on {res['env'].get('gpu') or 'the CPU backend'}: "
          f"{g['tok_s']:.1f} tok/s, {g['fraction_of_hbm_roofline']:.1%} of the roof; "
          f"check {'passed' if res['check'].get('passed') else 'FAILED'}")
    if out:
        print(f"wrote {out}")
    return res


if __name__ == "__main__":
    main()
