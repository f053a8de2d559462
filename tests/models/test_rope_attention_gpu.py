"""The decode step with ``StepConfig(fuse_rope_attention=True)`` on the GPU (skipped
without one): the plain step's tokens and KV cache from the replayed graph (PDL edges
included), transformers' logits, and the fused kernel's raw cuTile twin agreeing with
it (benchmarks/decode/rope_attention.py)."""
from __future__ import annotations

import numpy as np
import pytest

from tilelab.models import Qwen3
from tilelab.models.decode_step import StepConfig
from tilelab.runtime.device import gpu_available, gpu_unavailable_reason

from .qwen3_reference import hf_logits, logits_tolerance

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not gpu_available(),
                                 reason=f"no usable GPU: {gpu_unavailable_reason()}")]
PROMPT = [5, 60, 7, 211, 9, 33]


@pytest.fixture(scope="module")
def path(qwen3_checkpoint_factory):
    return qwen3_checkpoint_factory(initializer_range=0.1)


def test_gpu_fused_step_gives_the_plain_steps_tokens_and_cache(path):
    plain = Qwen3.from_pretrained(path, device="gpu", max_tokens=64)
    fused = Qwen3(plain.weights, max_tokens=64,
                  step_config=StepConfig(fuse_rope_attention=True))
    want = plain.generate(PROMPT, max_new_tokens=12)
    assert fused.generate(PROMPT, max_new_tokens=12) == want
    for got, ref in ((fused.cache.k.numpy(), plain.cache.k.numpy()),
                     (fused.cache.v.numpy(), plain.cache.v.numpy())):
        np.testing.assert_array_equal(got[0], ref[0])       # layer 0: the same bits
        g, r = got.astype(np.float32), ref.astype(np.float32)
        assert np.abs(g - r).max() <= 0.02 * np.abs(r).max()
    assert fused.generate(PROMPT, max_new_tokens=12, graph=False) == want
    sampled = plain.generate(PROMPT, max_new_tokens=8, temperature=0.9, seed=2)
    assert fused.generate(PROMPT, max_new_tokens=8, temperature=0.9, seed=2) == sampled


def test_gpu_fused_step_logits_match_transformers(path):
    model = Qwen3.from_pretrained(path, device="gpu", max_tokens=64,
                                  step_config=StepConfig(fuse_rope_attention=True))
    step = model.begin(PROMPT)
    first = model.cache.read_tokens(len(PROMPT), len(PROMPT) + 1)
    step.replay().wait()
    got, ref = step.logits.numpy(), hf_logits(path, PROMPT + first)[-1]
    max_tol, mean_tol = logits_tolerance(ref)
    assert np.abs(got - ref).max() <= max_tol
    assert np.abs(got - ref).mean() <= mean_tol


def test_gpu_raw_twin_matches_the_safe_kernel():
    from benchmarks.decode.rope_attention import compare

    for row in compare((129, 384), device="gpu", rep=5):
        assert row["raw_max_abs_diff"] == 0.0, row
        assert row["plain_pair_max_abs_diff"] <= 2e-2, row    # the softmax's rounding
