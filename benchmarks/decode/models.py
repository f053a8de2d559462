"""The models every decode benchmark builds, and what each run records about itself.

Why a module of its own: the tokens/s run (:mod:`benchmarks.decode.throughput`), the
graph ablation (:mod:`benchmarks.decode.graph`) and the 32B run
(:mod:`benchmarks.decode.large`) all build the same Qwen3 shapes on shared random
weights and stamp their JSON the same way; keeping that here lets each of them import
it without importing the others.

Example:
    >>> sorted(SHAPES)
    ['32b', '4b', '8b', 'tiny']
    >>> SHAPES["8b"]["hidden_size"], COMMON["rope_theta"]
    (4096, 1000000.0)
"""
from __future__ import annotations

import datetime
import sys
from typing import Any

__all__ = ["SHAPES", "COMMON", "build_models", "env_info", "nominal_bandwidth", "say"]

SHAPES: dict[str, dict[str, Any]] = {
    "4b": dict(vocab_size=151936, hidden_size=2560, intermediate_size=9728,
               num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8,
               head_dim=128, tie_word_embeddings=True),
    "8b": dict(vocab_size=151936, hidden_size=4096, intermediate_size=12288,
               num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8,
               head_dim=128, tie_word_embeddings=False),
    # decoded on one H200 (64 GB of bf16 weights): benchmarks/decode/large.py
    "32b": dict(vocab_size=151936, hidden_size=5120, intermediate_size=25600,
                num_hidden_layers=64, num_attention_heads=64, num_key_value_heads=8,
                head_dim=128, tie_word_embeddings=False),
    "tiny": dict(vocab_size=300, hidden_size=96, intermediate_size=160,
                 num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 head_dim=16, tie_word_embeddings=False),
}
COMMON = dict(rms_norm_eps=1e-6, rope_theta=1000000.0, max_position_embeddings=40960)


def build_models(name: str, device: str, seed: int = 0,
                 step_config: Any = None, layers: int | None = None) -> tuple[Any, Any]:
    """(transformers model, tilelab engine) sharing one set of random bf16 weights;
    ``step_config``: the engine's decode tiles (a ``StepConfig``; None: its defaults);
    ``layers``: keep only this many of the shape's layers (a slice of a model too large
    to hold twice)."""
    import torch
    import transformers

    from tilelab.models import Qwen3
    from tilelab.models.config import Qwen3Config
    from tilelab.models.device_weights import DeviceWeights

    shape = dict(SHAPES[name], **COMMON)
    if layers is not None:
        shape["num_hidden_layers"] = layers
    if name == "tiny":
        shape["max_position_embeddings"] = 512
    torch.manual_seed(seed)
    hf_cfg = transformers.Qwen3Config(**shape, attn_implementation="sdpa")
    tdev = "cuda" if device == "gpu" else "cpu"
    with torch.device(tdev):
        hf = transformers.Qwen3ForCausalLM(hf_cfg).to(torch.bfloat16).eval()
    if tdev == "cuda":
        torch.cuda.synchronize()
    cfg = Qwen3Config(dtype="bfloat16", **shape)
    m = hf.model

    def layer(i: int) -> dict[str, Any]:
        blk = m.layers[i]
        a, f = blk.self_attn, blk.mlp
        return {"q_proj": a.q_proj.weight, "k_proj": a.k_proj.weight,
                "v_proj": a.v_proj.weight, "o_proj": a.o_proj.weight,
                "q_norm": a.q_norm.weight, "k_norm": a.k_norm.weight,
                "input_layernorm": blk.input_layernorm.weight,
                "post_attention_layernorm": blk.post_attention_layernorm.weight,
                "gate_proj": f.gate_proj.weight, "up_proj": f.up_proj.weight,
                "down_proj": f.down_proj.weight}

    with torch.no_grad():
        weights = DeviceWeights.from_arrays(
            cfg, layer, m.embed_tokens.weight.detach(), m.norm.weight.detach(),
            None if cfg.tie_word_embeddings else hf.lm_head.weight.detach(),
            device=device)
    return hf, Qwen3(weights, max_tokens=1024, step_config=step_config)


def env_info(device: str) -> dict[str, Any]:
    """GPU, driver, versions and date of this run."""
    from importlib import metadata

    info: dict[str, Any] = {"date": datetime.datetime.now(datetime.timezone.utc)
                            .isoformat(timespec="seconds"), "device": device,
                            "python": sys.version.split()[0]}
    for pkg in ("tilelab", "torch", "transformers", "cuda-tile", "nvidia-cuda-tileiras"):
        try:
            info[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            info[pkg] = None
    if device == "gpu":
        from cuda.bindings import driver

        from tilelab.runtime.device import gpu

        info["gpu"] = gpu().name
        _, ver = driver.cuDriverGetVersion()
        info["driver_cuda_version"] = f"{ver // 1000}.{ver % 1000 // 10}"
    else:
        info["gpu"] = None
    return info


def nominal_bandwidth(gpu_name: str | None) -> tuple[str, float]:
    """(name, bytes/s) of the GPU's nominal memory bandwidth (the H200's when the GPU is
    unknown or absent): the roof the decode figures are a fraction of."""
    from tilelab.perf.specs import lookup_gpu, spec_for_device

    spec = (spec_for_device(gpu_name) if gpu_name else None) or lookup_gpu("h200")
    return spec.name, spec.bandwidth


def say(line: str) -> None:
    """A progress line of the decode benchmarks, flushed at once (a device run's log)."""
    print(f"[decode] {line}", flush=True)
