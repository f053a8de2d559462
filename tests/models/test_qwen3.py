"""The Qwen3 engine against Hugging Face transformers, on tiny random checkpoints.

Each checkpoint is written by transformers (``Qwen3ForCausalLM(config).save_pretrained``)
and read back by both. The reference is transformers upcast to float32: it multiplies
the same bf16 (or fp16) weights but keeps float32 activations, while the engine rounds
its activations to the weights' 16-bit dtype between kernels (8 bits of mantissa for
bf16: a relative error of up to 2^-9 per rounding, accumulated over the layers). So the
logits are compared with a tolerance relative to their spread: at most
``LOGITS_MAX_TOL`` (8%) of the reference logits' standard deviation anywhere and
``LOGITS_MEAN_TOL`` (1.5%) on average — a misplaced norm, a wrong RoPE convention or
a missing residual moves them by far more than the standard deviation itself.

Greedy tokens must equal transformers' ``generate(do_sample=False)`` up to the first
near-tie: a step whose reference top-2 logits are closer than twice the max tolerance
may legitimately pick the other token, after which the sequences may diverge, so only
the steps before it are required to match (and every test config is checked to have
at least two such steps, so the comparison cannot be vacuous). One decode step's logits
are compared with the same tolerances, for both forms of the step (the RMSNorms fused
into the GEMVs, the default, and launched apart).

Configs cover non-power-of-two hidden, intermediate and vocabulary sizes, GQA ratios 2
and 4, tied and untied heads, one shard and several, 5.x and 4.x config files, bf16
and fp16 weights.
"""
from __future__ import annotations

import numpy as np
import pytest

from tilelab.models import Qwen3
from tilelab.models.decode_step import StepConfig

from .qwen3_reference import hf_greedy, hf_logits, logits_tolerance, near_tie_step

CONFIGS = {
    "gqa2-untied-1shard": dict(initializer_range=0.1),
    "gqa4-tied-3shards": dict(hidden=72, intermediate=136, vocab=333, heads=8, kv_heads=2,
                              tie=True, shards=3, layers=3, initializer_range=0.1, seed=5),
    "gqa4-fp16-4x-config": dict(hidden=112, intermediate=200, vocab=271, heads=4,
                                kv_heads=1, head_dim=32, dtype="float16",
                                config_style="4.x", initializer_range=0.1, seed=2,
                                rope_theta=1000000.0),
}
PROMPT = [3, 17, 101, 250, 7, 42, 199]
NEW_TOKENS = 6


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def engine(request, qwen3_checkpoint_factory):
    path = qwen3_checkpoint_factory(**CONFIGS[request.param])
    return path, Qwen3.from_pretrained(path, device="cpu", max_tokens=32)


def test_prefill_logits_match_transformers(engine):
    path, model = engine
    got = model.logits(PROMPT)
    ref = hf_logits(path, PROMPT)
    assert got.shape == ref.shape == (len(PROMPT), model.config.vocab_size)
    assert got.dtype == np.float32
    max_tol, mean_tol = logits_tolerance(ref)
    err = np.abs(got - ref)
    assert err.max() <= max_tol, (err.max(), max_tol)
    assert err.mean() <= mean_tol, (err.mean(), mean_tol)
    # and the last position's ranking is the reference's where it is clear
    assert int(got[-1].argmax()) == int(ref[-1].argmax()) or \
        np.sort(ref[-1])[-1] - ref[-1][int(got[-1].argmax())] < 2 * max_tol


def test_greedy_tokens_match_transformers_up_to_a_near_tie(engine):
    path, model = engine
    ref_tokens, step_logits = hf_greedy(path, PROMPT, NEW_TOKENS)
    gap = 2 * logits_tolerance(hf_logits(path, PROMPT))[0]
    exact = near_tie_step(step_logits, gap)
    assert exact >= 2, f"the config has a near tie at step {exact}: the test is too weak"
    got = model.generate(PROMPT, max_new_tokens=NEW_TOKENS)
    assert len(got) == NEW_TOKENS
    assert got[:exact] == ref_tokens[:exact], (got, ref_tokens, exact)
    if exact < NEW_TOKENS:      # at the near tie, one of the reference's top two
        top2 = np.argsort(step_logits[exact])[-2:]
        assert got[exact] in top2.tolist()


def test_plain_launches_match_transformers_too(engine):
    path, model = engine
    ref_tokens, step_logits = hf_greedy(path, PROMPT, NEW_TOKENS)
    exact = near_tie_step(step_logits, 2 * logits_tolerance(hf_logits(path, PROMPT))[0])
    got = model.generate(PROMPT, max_new_tokens=NEW_TOKENS, graph=False)
    assert got[:exact] == ref_tokens[:exact]


@pytest.mark.parametrize("fuse", [True, False], ids=["norms-fused", "norms-apart"])
def test_decode_step_logits_match_transformers(engine, fuse):
    """One decode step's float32 logits against transformers on the prompt plus the
    token the engine picked after its prefill, in both forms of the step (the RMSNorms
    inside the GEMVs, the residual stream kept as two parts; or norm kernels of their
    own)."""
    path, model = engine
    if not fuse:
        model = Qwen3(model.weights, max_tokens=32, step_config=StepConfig(fuse_norms=False))
    assert model.decode_step().config.fuse_norms is fuse
    step = model.begin(PROMPT)
    first = model.cache.read_tokens(len(PROMPT), len(PROMPT) + 1)
    step.run().wait()
    got = step.logits.numpy()
    ref = hf_logits(path, PROMPT + first)[-1]
    max_tol, mean_tol = logits_tolerance(ref)
    err = np.abs(got - ref)
    assert err.max() <= max_tol, (err.max(), max_tol)
    assert err.mean() <= mean_tol, (err.mean(), mean_tol)
