"""The decode step with the q/k norm and RoPE folded into the attention
(``StepConfig(fuse_rope_attention=True)``): its launches, its cost rows, and the same
tokens, logits and KV cache as the plain step (tiny checkpoint, CPU interpreter),
against transformers too."""
from __future__ import annotations

import numpy as np
import pytest

from tilelab.models import Qwen3
from tilelab.models.decode_step import StepConfig

from .qwen3_reference import hf_cache, hf_logits, logits_tolerance

PROMPT = [5, 60, 7, 211, 9]
LAYER = ["norm_qkv_gemv", "rope_attn", "o_gemv_residual", "norm_gate_up_silu_gemv",
         "down_gemv"]


@pytest.fixture(scope="module")
def path(qwen3_checkpoint_factory):
    return qwen3_checkpoint_factory(initializer_range=0.1)


@pytest.fixture(scope="module")
def plain(path):
    return Qwen3.from_pretrained(path, device="cpu", max_tokens=32)


@pytest.fixture(scope="module")
def fused(plain):
    return Qwen3(plain.weights, max_tokens=plain.cache.capacity,
                 step_config=StepConfig(fuse_rope_attention=True))


def test_the_step_runs_5_kernels_per_layer_and_one_kv_store(fused):
    layers = fused.config.num_hidden_layers
    kinds = [l.kind for l in fused.decode_step().launches]
    assert len(kinds) == 6 + 5 * layers
    for i in range(layers):
        assert [l.kind for l in fused.decode_step().launches if l.layer == i] == LAYER
    assert kinds[-5:] == ["kv_store", "final_add_rms_norm", "lm_head_partial",
                          "pick_token", "advance"]
    rows = fused.step_cost(context=8)
    assert {r.kernel for r in rows} == set(kinds)
    assert sum(r.launches for r in rows) == len(kinds)
    assert StepConfig().fuse_rope_attention is False      # not the default


def test_every_kernel_of_the_fused_step_is_safe(fused):
    names = set()
    for k in fused.kernels():
        assert not k.definition.options.unsafe, k.definition.name
        names.add(k.definition.name)
    assert {"rope_attention_kernel", "kv_store_kernel"} <= names
    assert "qk_norm_rope_cache_kernel" not in {
        k.definition.name for k in fused.decode_step().kernels()}


def test_same_tokens_and_kv_cache_as_the_plain_step(plain, fused):
    """Greedy and sampled, replayed and launched: the fused step's tokens are the plain
    step's; layer 0's cache rows are the same bits (same norm, rotation and rounding,
    written one layer later), later layers' differ by the attention's float32 rounding
    carried through bf16 activations."""
    want = plain.generate(PROMPT, max_new_tokens=5)
    k_want, v_want = plain.cache.k.numpy().copy(), plain.cache.v.numpy().copy()
    assert fused.generate(PROMPT, max_new_tokens=5) == want
    for got, ref in ((fused.cache.k.numpy(), k_want), (fused.cache.v.numpy(), v_want)):
        np.testing.assert_array_equal(got[0], ref[0])
        g, r = got.astype(np.float32), ref.astype(np.float32)
        assert np.abs(g - r).max() <= 0.02 * np.abs(r).max()
    assert fused.generate(PROMPT, max_new_tokens=5, graph=False) == want
    sampled = plain.generate(PROMPT, max_new_tokens=5, temperature=0.9, seed=4)
    assert fused.generate(PROMPT, max_new_tokens=5, temperature=0.9, seed=4) == sampled


def test_step_logits_and_kv_cache_match_transformers(path, fused):
    step = fused.begin(PROMPT)
    first = fused.cache.read_tokens(len(PROMPT), len(PROMPT) + 1)
    step.run().wait()
    ref = hf_logits(path, PROMPT + first)[-1]
    max_tol, mean_tol = logits_tolerance(ref)
    err = np.abs(step.logits.numpy() - ref)
    assert err.max() <= max_tol and err.mean() <= mean_tol, (err.max(), err.mean())
    seq = PROMPT + first
    for layer, (rk, rv) in enumerate(hf_cache(path, seq)):
        k, v = fused.cache.contents(layer, len(seq))
        for got, want in ((k, rk), (v, rv)):
            assert np.abs(got - want).max() <= 0.03 * np.abs(want).max() + 0.02, layer


def test_the_split_form_keeps_its_own_kernels(plain):
    """Past ``one_pass_upto`` the step runs split attention, which the flag leaves
    alone (its partials need the rotated q of every split)."""
    m = Qwen3(plain.weights, max_tokens=plain.cache.capacity,
              step_config=StepConfig(fuse_rope_attention=True, one_pass_upto=8))
    step = m.decode_step()
    split = [l.kind for l in step.forms[False] if l.layer == 1]
    assert split == ["norm_qkv_gemv", "qk_norm_rope_kv", "attn_split", "attn_combine",
                     "o_gemv_residual", "norm_gate_up_silu_gemv", "down_gemv"]
    # a decode crossing from the fused one-pass form into the split form
    ref = Qwen3(plain.weights, max_tokens=plain.cache.capacity,
                step_config=StepConfig(one_pass_upto=8))
    assert m.generate(PROMPT, max_new_tokens=8) == ref.generate(PROMPT, max_new_tokens=8)
    g, r = m.cache.k.numpy().astype(np.float32), ref.cache.k.numpy().astype(np.float32)
    assert np.abs(g - r).max() <= 0.02 * np.abs(r).max()
