"""The transformers side of the decode benchmark (:mod:`benchmarks.decode.throughput`):
the correctness check of the engine against transformers on the same weights, and
transformers' own decode tokens/s, eager and with a static cache + torch.compile.

Example:
    >>> shared_prefix([1, 2, 3], [1, 2, 4])
    2
"""
from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np

__all__ = ["check", "hf_tok_s", "hf_compiled_tok_s", "shared_prefix", "sync_device"]


def sync_device(device: str) -> None:
    if device == "gpu":
        import torch

        torch.cuda.synchronize()


def _hf_generate(hf: Any, ids: list[int], n: int, **kw: Any) -> Any:
    import torch

    x = torch.tensor([ids], device=hf.device)
    with torch.no_grad():
        return hf.generate(x, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                           pad_token_id=0, **kw)


def _rel(a: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(a - ref) / max(float(np.linalg.norm(ref)), 1e-30))


def _hf_float32(hf: Any, prompt: list[int], n: int) -> tuple[np.ndarray, list, list]:
    """transformers in float32 on the same (bf16-valued) weights: prefill logits, the
    per-step logits and tokens of ``n`` greedy steps; the model is cast back after
    (bf16 -> float32 -> bf16 is exact)."""
    import torch

    hf.float()
    try:
        with torch.no_grad():
            ref = hf(torch.tensor([prompt], device=hf.device)).logits[0].cpu().numpy()
        out = _hf_generate(hf, prompt, n, output_logits=True, return_dict_in_generate=True)
        steps = [lg[0].float().cpu().numpy() for lg in out.logits]
        return ref, steps, out.sequences[0, len(prompt):].tolist()
    finally:
        hf.to(torch.bfloat16)


def check(hf: Any, engine: Any, prompt: list[int], n: int) -> dict[str, Any]:
    """Prefill logits and ``n`` greedy tokens of the engine against transformers.

    The reference is transformers in float32 on the same bf16 weights; transformers in
    bf16 is measured against it too, so the engine's error reads against the error bf16
    arithmetic itself makes. Logits pass when the engine's relative error (Frobenius,
    over every position and the vocabulary) is at most twice transformers-bf16's plus
    0.5%. Greedy tokens must equal the float32 reference's up to its first near-tie: a
    step whose top-2 gap is under twice the engine's largest prefill logit error (with
    random weights the logits are nearly flat, so near-ties come early: the token check
    is weak there, and the logits check is the one that tells).
    """
    import torch

    with torch.no_grad():
        ref16 = hf(torch.tensor([prompt], device=hf.device)).logits[0].float().cpu().numpy()
    ref, step_logits, ref_tokens = _hf_float32(hf, prompt, n)
    bf16_tokens = _hf_generate(hf, prompt, n)[0, len(prompt):].tolist()
    got = engine.logits(prompt)
    err = float(np.abs(got - ref).max())
    scale = float(ref.std())
    rel, rel_hf = _rel(got, ref), _rel(ref16, ref)
    tokens = engine.generate(prompt, max_new_tokens=n)
    gap = 2 * err
    tie = next((i for i, lg in enumerate(step_logits)
                if np.diff(np.sort(lg)[-2:])[0] < gap), n)

    match = shared_prefix(tokens, ref_tokens)
    logits_ok = rel <= 2 * rel_hf + 5e-3
    return {"reference": "transformers float32 on the same bf16 weights",
            "logits_rel_error": rel, "hf_bf16_logits_rel_error": rel_hf,
            "logits_max_abs_error": err, "hf_bf16_logits_max_abs_error":
                float(np.abs(ref16 - ref).max()),
            "logits_std": scale, "logits_error_over_std": err / scale if scale else None,
            "top1_agreement": float(np.mean(got.argmax(-1) == ref.argmax(-1))),
            "hf_bf16_top1_agreement": float(np.mean(ref16.argmax(-1) == ref.argmax(-1))),
            "greedy_tokens": n, "greedy_matching_prefix": match,
            "hf_bf16_greedy_matching_prefix": shared_prefix(bf16_tokens, ref_tokens),
            "first_near_tie": tie, "near_tie_gap": gap,
            "passed": bool(logits_ok and match >= tie)}


def shared_prefix(a: list, b: list) -> int:
    """How many leading tokens two sequences share."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))



def hf_tok_s(hf: Any, prompt: list[int], n: int, runs: int, device: str,
             **kw: Any) -> dict[str, Any]:
    """Decode tokens/s of transformers: (generate n) - (generate 1), per new token."""
    def timed(k: int) -> float:
        sync_device(device)
        t0 = time.perf_counter()
        _hf_generate(hf, prompt, k, **kw)
        sync_device(device)
        return time.perf_counter() - t0

    timed(n)                                   # warm-up (and compile, if any)
    first = statistics.median(timed(1) for _ in range(max(1, runs)))
    samples = [(n - 1) / max(1e-9, timed(n) - first) for _ in range(runs)]
    return {"tok_s": statistics.median(samples), "samples": samples,
            "prefill_and_first_token_s": first}


def hf_compiled_tok_s(hf: Any, prompt: list[int], n: int, runs: int,
                      device: str) -> dict[str, Any]:
    """transformers with a static cache, whose ``generate`` then compiles its decode
    step with torch.compile (Inductor, ``reduce-overhead``: CUDA graphs, gpt-fast
    style) through its own ``CompileConfig`` (wrapping ``forward`` by hand instead
    replays CUDA graphs whose outputs ``generate`` still holds)."""
    from transformers.generation.configuration_utils import CompileConfig

    try:
        t0 = time.perf_counter()
        res = hf_tok_s(hf, prompt, n, runs, device, cache_implementation="static",
                       compile_config=CompileConfig(fullgraph=True,
                                                    mode="reduce-overhead"))
        res["compile_and_warmup_s"] = time.perf_counter() - t0
        return res
    except Exception as e:  # noqa: BLE001 - a failed compile is a result, not a crash
        return {"error": f"{type(e).__name__}: {e}"[:500]}
