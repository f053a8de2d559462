"""The Qwen3 engine's decode machinery: graph replay, sampling, the KV cache, safety,
the cost table and the errors users read (tiny checkpoints, CPU interpreter)."""
from __future__ import annotations

import numpy as np
import pytest

import tilelab as tl
from tilelab.models import Qwen3
from tilelab.models.decode_step import StepConfig
from tilelab.models.errors import GenerateInputError

from .qwen3_reference import hf_cache

PROMPT = [5, 60, 7, 211, 9]


@pytest.fixture(scope="module")
def path(qwen3_checkpoint_factory):
    return qwen3_checkpoint_factory(initializer_range=0.1)


@pytest.fixture(scope="module")
def model(path):
    return Qwen3.from_pretrained(path, device="cpu", max_tokens=32)


def test_graph_replay_gives_the_plain_launches_tokens(model):
    step = model.decode_step()
    replayed = model.generate(PROMPT, max_new_tokens=5)
    assert step.graph is not None and len(step.graph.entries) == len(step.launches)
    assert model.generate(PROMPT, max_new_tokens=5, graph=False) == replayed
    sampled = model.generate(PROMPT, max_new_tokens=5, temperature=0.9, seed=4)
    assert model.generate(PROMPT, max_new_tokens=5, temperature=0.9, seed=4,
                          graph=False) == sampled


def test_the_step_takes_no_host_arguments_that_change(model):
    """A replay reads token and position from device memory: the step advances them."""
    model.generate(PROMPT, max_new_tokens=3)
    assert model.cache.position() == len(PROMPT) + 2
    assert model.cache.read_tokens(0, len(PROMPT)) == PROMPT


def test_sampling_is_reproducible_by_seed(model):
    a = model.generate(PROMPT, max_new_tokens=6, temperature=1.0, seed=11)
    assert model.generate(PROMPT, max_new_tokens=6, temperature=1.0, seed=11) == a
    b = model.generate(PROMPT, max_new_tokens=6, temperature=1.0, seed=12)
    assert a != b
    assert all(0 <= t < model.config.vocab_size for t in a + b)


def test_a_temperature_near_zero_is_greedy(model):
    greedy = model.generate(PROMPT, max_new_tokens=5)
    assert model.generate(PROMPT, max_new_tokens=5, temperature=1e-5, seed=3) == greedy


def test_kv_cache_holds_transformers_past_keys_and_values(path):
    model = Qwen3.from_pretrained(path, device="cpu", max_tokens=32)
    new = model.generate(PROMPT, max_new_tokens=4)
    seq = PROMPT + new[:-1]           # every token the engine has run through the model
    ref = hf_cache(path, seq)
    assert len(ref) == model.config.num_hidden_layers
    for layer, (rk, rv) in enumerate(ref):
        k, v = model.cache.contents(layer, len(seq))
        assert k.shape == rk.shape == (model.config.num_key_value_heads, len(seq),
                                       model.config.head_dim)
        # bf16 storage of the keys/values: 2^-8 relative, plus the activations' drift
        for got, want in ((k, rk), (v, rv)):
            assert np.abs(got - want).max() <= 0.03 * np.abs(want).max() + 0.02
    kc, _ = model.cache.layer(0)
    assert np.all(kc.numpy()[:, len(seq):] == 0)      # nothing written past the position


def test_every_kernel_the_engine_launches_is_safe(model):
    kernels = model.kernels() + _split(model).kernels()
    names = {k.definition.name for k in kernels}
    for expected in ("embed_at_kernel", "qk_norm_rope_cache_kernel", "decode_split_kernel",
                     "decode_combine_head_kernel", "decode_attention_kernel", "gemv_kernel",
                     "gemv_fused_kernel",
                     "gemv_fused_silu_mul_kernel", "lm_head_partial_kernel",
                     "pick_token_kernel", "advance_kernel", "kv_fill_kernel",
                     "flash_attention_kernel", "embedding_kernel"):
        assert expected in names, (expected, sorted(names))
    for k in kernels:
        assert not k.definition.options.unsafe, k.definition.name


def _variant(model, **changes):
    """The same weights and cache size with other decode-step settings."""
    return Qwen3(model.weights, max_tokens=model.cache.capacity,
                 step_config=StepConfig(**changes))


def _unfused(model):
    """The same weights with the decode step's norms as kernels of their own."""
    return _variant(model, fuse_norms=False)


def _split(model, **changes):
    """The same weights with split-KV attention at every context."""
    return _variant(model, one_pass_upto=0, **changes)


SPLIT = ["attn_split", "attn_combine"]
FUSED_LAYER = ["norm_qkv_gemv", "qk_norm_rope_kv", "attn", "o_gemv_residual",
               "norm_gate_up_silu_gemv", "down_gemv"]
UNFUSED_LAYER = ["add_rms_norm", "qkv_gemv", "qk_norm_rope_kv", "attn", "o_gemv_residual",
                 "rms_norm", "gate_up_silu_gemv", "down_gemv"]


def _with_split(layer):
    i = layer.index("attn")
    return layer[:i] + SPLIT + layer[i + 1:]


def test_the_fused_step_has_6_kernels_per_layer_7_split_and_the_unfused_8_and_9(model):
    layers = model.config.num_hidden_layers
    assert model.decode_step().forms.keys() == {True}      # a 32-position cache: one pass
    for m, per_layer in ((model, FUSED_LAYER), (_unfused(model), UNFUSED_LAYER),
                         (_split(model), _with_split(FUSED_LAYER)),
                         (_split(model, fuse_norms=False), _with_split(UNFUSED_LAYER))):
        step = m.decode_step()
        kinds = [l.kind for l in step.launches]
        assert len(kinds) == 5 + len(per_layer) * layers
        assert [l.kind for l in step.launches if l.layer == 1] == per_layer
        assert kinds[:1] == ["embed"] and kinds[-4:] == ["final_add_rms_norm",
                                                         "lm_head_partial", "pick_token",
                                                         "advance"]
        assert {r.kernel for r in m.step_cost(context=8)} == set(kinds)
        assert sum(r.launches for r in m.step_cost(context=8)) == len(kinds)
    fused = model.decode_step()
    assert [fused.stream(i) for i in (0, 1, 2)] == [fused.h, fused.h[::-1], fused.h]


def test_the_fused_and_unfused_steps_agree(model):
    """Same prompt, one decode step each: the logits (fp32) are close and, away from a
    near tie, the token is the same."""
    other = _unfused(model)
    got = []
    for m in (model, other):
        step = m.begin(PROMPT)
        step.run().wait()
        got.append((step.logits.numpy().copy(), m.cache.read_tokens(0, len(PROMPT) + 2)))
    (a, ta), (b, tb) = got
    assert ta[:len(PROMPT) + 1] == tb[:len(PROMPT) + 1]      # the prefill's token
    assert np.abs(a - b).max() <= 0.05 * a.std(), (np.abs(a - b).max(), a.std())
    top2 = np.sort(a)[-2:]
    if top2[1] - top2[0] > 0.1 * a.std():
        assert ta == tb
    assert model.generate(PROMPT, max_new_tokens=2) == other.generate(PROMPT,
                                                                      max_new_tokens=2)


def test_split_attention_and_tensor_core_gemvs_agree_with_the_default_step(model):
    """Split-KV attention and the tensor-core GEMVs (bf16 inputs to the MMA) compute
    the default step's logits within bf16 rounding."""
    from tilelab.kernels.decode.gemv import GemvConfig

    split = _split(model)
    mma = _variant(model, gemv=GemvConfig(bn=32, bk=16, mma=True))
    names = {e.launcher.kernel.definition.name for e in mma.decode_step().capture().entries}
    assert {"decode_attention_kernel", "gemv_mma_kernel",
            "gemv_mma_silu_mul_kernel"} <= names
    assert "decode_combine_head_kernel" not in names
    got = []
    for m in (model, split, mma):
        step = m.begin(PROMPT)
        for _ in range(3):                   # attention over 9, 10, 11 positions
            step.replay().wait()
        got.append(step.logits.numpy().copy())
    a = got[0]
    for b in got[1:]:
        assert np.abs(a - b).max() <= 0.05 * a.std(), (np.abs(a - b).max(), a.std())


def test_step_cost_has_a_row_per_launch_kind(model):
    step = model.decode_step()
    rows = model.step_cost(context=20)
    kinds = {l.kind for l in step.launches}
    assert {r.kernel for r in rows} == kinds
    assert sum(r.launches for r in rows) == len(step.launches)
    by = {r.kernel: r for r in rows}
    c = model.config
    nq, nkv = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
    qkv_weight = (nq + 2 * nkv) * c.hidden_size * 2
    assert by["norm_qkv_gemv"].bytes >= c.num_hidden_layers * qkv_weight
    unfused = _unfused(model).step_cost(context=20)
    assert {r.kernel: r for r in unfused}["qkv_gemv"].bytes >= c.num_hidden_layers * qkv_weight
    # the norms' own reads and writes of the hidden state are gone
    assert sum(r.bytes for r in rows) < sum(r.bytes for r in unfused)
    assert by["attn"].bytes > model.step_cost(context=2)[
        [r.kernel for r in rows].index("attn")].bytes
    split = {r.kernel: r for r in _split(model).step_cost(context=20)}
    assert split["attn_split"].bytes > by["attn"].bytes      # the partials, written
    assert split["attn_combine"].launches == c.num_hidden_layers
    assert by["lm_head_partial"].flops == 2 * c.vocab_size * c.hidden_size


def test_errors_users_read(model):
    with pytest.raises(GenerateInputError, match=r"ids\[1\] = 300 is outside the vocabulary"):
        model.generate([1, 300])
    with pytest.raises(GenerateInputError, match="not an integer"):
        model.logits([1, 2.5])
    with pytest.raises(GenerateInputError, match="exceed the KV cache's 32 positions"):
        model.generate(PROMPT, max_new_tokens=40)
    with pytest.raises(GenerateInputError, match="max_new_tokens must be a positive int"):
        model.generate(PROMPT, max_new_tokens=0)
    with pytest.raises(GenerateInputError, match="temperature must be a number >= 0"):
        model.generate(PROMPT, temperature=-1.0)
    with pytest.raises(GenerateInputError, match="list of ints"):
        model.generate("hello")
    with pytest.raises(GenerateInputError, match="empty"):
        model.logits([])


def test_repr_and_default_device(path):
    m = Qwen3.from_pretrained(path, max_tokens=16)
    assert m.device == tl.backend()
    assert "layers=2" in repr(m) and "max_tokens=16" in repr(m)


@pytest.mark.parametrize("name", ["qwen3", "decode_step", "prefill", "kv_cache", "step_cost",
                                  "device_weights"])
def test_module_examples_run_and_public_names_have_examples(name):
    import doctest
    import importlib
    import inspect

    module = importlib.import_module(f"tilelab.models.{name}")
    res = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.failed == 0
    for attr in module.__all__:
        obj = getattr(module, attr)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            assert "Example" in (obj.__doc__ or ""), f"{name}.{attr}"


def test_an_unsupported_head_dim_is_refused_with_the_reason():
    from types import SimpleNamespace

    from tilelab.models.qwen3 import UnsupportedModelError

    weights = SimpleNamespace(config=SimpleNamespace(head_dim=80))
    with pytest.raises(UnsupportedModelError, match="head_dim 80 is not supported"):
        Qwen3(weights)


def test_one_pass_keys_per_step_change_the_launch_not_the_result(model):
    """``one_pass_bn`` sets the one-pass kernel's keys per step (the split kernel keeps
    ``attn_bn``): the same logits as the default, several steps into the decode."""
    from tilelab.runtime.events import subscribe

    small, large = _variant(model, one_pass_bn=16), _variant(model, one_pass_bn=64)
    s_small, s_large = small.begin(PROMPT), large.begin(PROMPT)
    seen = []
    stop = subscribe(lambda e: seen.append(e.args) if e.kernel.definition.name ==
                     "decode_attention_kernel" else None)
    try:
        next(l for l in s_small.launches if l.kind == "attn").run().wait()
    finally:
        stop()
    assert seen and seen[0][-2] == 16      # BN, then DP
    for _ in range(3):
        s_small.replay().wait()
        s_large.replay().wait()
        a, b = s_small.logits.numpy(), s_large.logits.numpy()
        assert np.abs(a - b).max() <= 0.05 * b.std()


def test_the_step_switches_to_split_attention_past_one_pass_upto(model):
    """A decode that crosses ``one_pass_upto`` replays the one-pass graph, then the
    split one; each step's logits match those of a step that splits throughout."""
    upto = len(PROMPT) + 3
    mixed, split = _variant(model, one_pass_upto=upto), _split(model)
    s_mixed, s_split = mixed.begin(PROMPT), split.begin(PROMPT)
    assert s_mixed.forms.keys() == {True, False} and s_mixed.position == len(PROMPT)
    forms = []
    for _ in range(5):
        forms.append(s_mixed.one_pass_at(s_mixed.position + 1))
        kinds = {l.kind for l in s_mixed.launches}
        assert ("attn" in kinds) == forms[-1] and ("attn_split" in kinds) != forms[-1]
        s_mixed.replay().wait()
        s_split.replay().wait()
        a, b = s_mixed.logits.numpy(), s_split.logits.numpy()
        assert np.abs(a - b).max() <= 0.05 * b.std()
    assert forms == [True, True, True, False, False]
    assert s_mixed.position == len(PROMPT) + 5 == mixed.cache.position()
    assert len(s_mixed._graphs) == 2
