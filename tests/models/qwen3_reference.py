"""Hugging Face transformers as the reference of the Qwen3 engine's tests.

The reference model is loaded from the same checkpoint and upcast to float32, so it
computes with the very bf16 weights the engine reads but without the engine's bf16
activations: the difference is the engine's own rounding.
"""
from __future__ import annotations

import functools

import numpy as np

#: the engine's float32 logits may differ from float32 transformers on the same bf16
#: weights by this fraction of the reference logits' standard deviation (max) ...
LOGITS_MAX_TOL = 0.08
#: ... and on average by this fraction
LOGITS_MEAN_TOL = 0.015


@functools.lru_cache(maxsize=8)
def hf_model(path: str):
    """The checkpoint in transformers, as float32, in eval mode."""
    import transformers

    return transformers.Qwen3ForCausalLM.from_pretrained(path).float().eval()


def hf_logits(path, ids: list[int]) -> np.ndarray:
    """float32 logits (len(ids), vocab) of transformers."""
    import torch

    with torch.no_grad():
        return hf_model(str(path))(torch.tensor([ids])).logits[0].numpy()


def hf_greedy(path, ids: list[int], n: int) -> tuple[list[int], list[np.ndarray]]:
    """transformers' greedy tokens and the logits each was chosen from."""
    import torch

    with torch.no_grad():
        out = hf_model(str(path)).generate(torch.tensor([ids]), max_new_tokens=n,
                                           do_sample=False, output_logits=True,
                                           return_dict_in_generate=True,
                                           pad_token_id=0)
    tokens = out.sequences[0, len(ids):].tolist()
    return tokens, [lg[0].float().numpy() for lg in out.logits]


def hf_cache(path, ids: list[int]) -> list[tuple[np.ndarray, np.ndarray]]:
    """transformers' past keys and values per layer, each (kv_heads, len(ids), head_dim)."""
    import torch

    with torch.no_grad():
        out = hf_model(str(path))(torch.tensor([ids]), use_cache=True)
    cache = getattr(out, "cache", None) or out.past_key_values
    return [(layer.keys[0].numpy(), layer.values[0].numpy()) for layer in cache.layers]


def near_tie_step(step_logits: list[np.ndarray], gap: float) -> int:
    """The first decode step whose reference top-2 logits are closer than ``gap``
    (len(step_logits) when none is): up to there greedy tokens must agree exactly."""
    for i, lg in enumerate(step_logits):
        top2 = np.sort(lg)[-2:]
        if top2[1] - top2[0] < gap:
            return i
    return len(step_logits)


def logits_tolerance(ref: np.ndarray) -> tuple[float, float]:
    """(max, mean) absolute tolerances for logits of this scale."""
    scale = float(ref.std())
    return LOGITS_MAX_TOL * scale, LOGITS_MEAN_TOL * scale
