"""User kernels plugged into the decode step (tilelab.models.plug): the engine launches
them in their role, in the replayed graph and in plain launches, gives the built-ins'
tokens with a right kernel and other tokens with a wrong one, and refuses what would
make it less than safe (CPU interpreter, a tiny random model)."""
from __future__ import annotations

import numpy as np
import pytest

import cuda.tile as ct
import tilelab as tl
from tilelab.models import Qwen3
from tilelab.models.config import Qwen3Config
from tilelab.models.decode_step import StepConfig
from tilelab.models.device_weights import DeviceWeights
from tilelab.models.plug import ROLES, PluggedKernelError, plugged

PROMPT = [5, 60, 7, 211, 9]
Z = ct.PaddingMode.ZERO


def norm_gemv(y: tl.Out, w: tl.In, h: tl.In, down: tl.In, g: tl.In, eps: float,
              BK: ct.Constant[int]):
    bn = y.tile_shape[0]
    n = y.tile_index[0]
    acc = ct.full((bn, BK), 0.0, dtype=ct.float32)
    ss = ct.full((1, BK), 0.0, dtype=ct.float32)
    for k in range(ct.cdiv(w.shape[1], BK)):
        x = (ct.load(h, index=(k,), shape=(BK,), padding_mode=Z).astype(ct.float32)
             + ct.load(down, index=(k,), shape=(BK,), padding_mode=Z).astype(ct.float32))
        x = ct.reshape(x, (1, BK))
        ss = ss + x * x
        gk = ct.load(g, index=(k,), shape=(BK,), padding_mode=Z).astype(ct.float32)
        wk = ct.load(w, index=(n, k), shape=(bn, BK), padding_mode=Z).astype(ct.float32)
        acc = acc + wk * (x * ct.reshape(gk, (1, BK)))
    rstd = ct.rsqrt(ct.sum(ss, axis=1) / w.shape[1] + eps)
    y.store((ct.sum(acc, axis=1) * rstd).astype(y.dtype))


def gemv_without_norm(y: tl.Out, w: tl.In, h: tl.In, down: tl.In, g: tl.In, eps: float,
                      BK: ct.Constant[int]):
    bn = y.tile_shape[0]
    n = y.tile_index[0]
    acc = ct.full((bn, BK), 0.0, dtype=ct.float32)
    for k in range(ct.cdiv(w.shape[1], BK)):
        x = ct.load(h, index=(k,), shape=(BK,), padding_mode=Z).astype(ct.float32)
        wk = ct.load(w, index=(n, k), shape=(bn, BK), padding_mode=Z).astype(ct.float32)
        acc = acc + wk * ct.reshape(x, (1, BK))
    y.store(ct.sum(acc, axis=1).astype(y.dtype))


def gemv(y: tl.Out, w: tl.In, x: tl.In, BK: ct.Constant[int]):
    bn = y.tile_shape[0]
    n = y.tile_index[0]
    acc = ct.full((bn, BK), 0.0, dtype=ct.float32)
    for k in range(ct.cdiv(w.shape[1], BK)):
        xk = ct.load(x, index=(k,), shape=(BK,), padding_mode=Z).astype(ct.float32)
        wk = ct.load(w, index=(n, k), shape=(bn, BK), padding_mode=Z).astype(ct.float32)
        acc = acc + wk * ct.reshape(xk, (1, BK))
    y.store(ct.sum(acc, axis=1).astype(y.dtype))


def writes_an_input(y: tl.Out, w: tl.In, x: tl.In, BK: ct.Constant[int]):
    ct.store(x, index=(0,), tile=ct.full((BK,), 0.0, dtype=ct.float32))


@pytest.fixture(scope="module")
def weights():
    """A 2-layer random Qwen3 (hidden 96: K is not a power of two) from arrays."""
    cfg = Qwen3Config(vocab_size=300, hidden_size=96, intermediate_size=160,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      head_dim=16, rms_norm_eps=1e-6, rope_theta=10000.0,
                      max_position_embeddings=512, tie_word_embeddings=False,
                      dtype="bfloat16")
    rng = np.random.default_rng(0)
    randn = lambda *shape: (0.1 * rng.standard_normal(shape)).astype(np.float32)  # noqa: E731
    ones = lambda n: (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)        # noqa: E731
    h, i, d = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
    nq, nkv = cfg.num_attention_heads * d, cfg.num_key_value_heads * d
    layers = [dict(q_proj=randn(nq, h), k_proj=randn(nkv, h), v_proj=randn(nkv, h),
                   o_proj=randn(h, nq), q_norm=ones(d), k_norm=ones(d),
                   input_layernorm=ones(h), post_attention_layernorm=ones(h),
                   gate_proj=randn(i, h), up_proj=randn(i, h), down_proj=randn(h, i))
              for _ in range(cfg.num_hidden_layers)]
    return DeviceWeights.from_arrays(cfg, lambda l: layers[l], randn(cfg.vocab_size, h),
                                     ones(h), randn(cfg.vocab_size, h), device="cpu")


@pytest.fixture(scope="module")
def builtin(weights):
    model = Qwen3(weights, max_tokens=64)
    return {"greedy": model.generate(PROMPT, max_new_tokens=8),
            "sampled": model.generate(PROMPT, max_new_tokens=8, temperature=0.8, seed=1)}


def test_plugged_kernels_give_the_builtin_tokens(weights, builtin):
    model = Qwen3(weights, max_tokens=64,
                  kernels={"norm_qkv_gemv": norm_gemv, "down_gemv": gemv})
    assert model.generate(PROMPT, max_new_tokens=8) == builtin["greedy"]
    assert model.generate(PROMPT, max_new_tokens=8, graph=False) == builtin["greedy"]
    assert model.generate(PROMPT, max_new_tokens=8, temperature=0.8,
                          seed=1) == builtin["sampled"]
    names = {k.name for k in model.kernels()}
    assert {"norm_gemv", "gemv"} <= names
    assert not any(k.options.unsafe for k in model.kernels())


def test_the_step_launches_the_plugged_kernel_in_every_layer(weights):
    model = Qwen3(weights, max_tokens=64, kernels={"down_gemv": gemv})
    step = model.decode_step()
    graph = step.capture()
    launched = [e.launcher.kernel.name for e in graph.entries
                if getattr(e, "launcher", None) is not None]
    assert launched.count("gemv") == weights.config.num_hidden_layers


def test_a_wrong_kernel_changes_the_tokens(weights, builtin):
    """The plug is really used: a GEMV that skips the norm and the down part gives
    other tokens (and stays within its output: the engine still runs)."""
    model = Qwen3(weights, max_tokens=64, kernels={"norm_qkv_gemv": gemv_without_norm})
    assert model.generate(PROMPT, max_new_tokens=8) != builtin["greedy"]


def test_refusals_name_the_role_and_what_to_change():
    with pytest.raises(PluggedKernelError, match="no decode-step role 'attention'; the "
                       "roles are: norm_qkv_gemv, down_gemv") as e:
        plugged({"attention": gemv})
    assert "ROLES" in e.value.hint
    unsafe = tl.kernel(unsafe=True)(gemv)
    with pytest.raises(PluggedKernelError, match="is unsafe=True; the engine runs only "
                       "checked kernels"):
        plugged({"down_gemv": unsafe})
    with pytest.raises(PluggedKernelError, match=r"the kernel 'gemv' takes \(y: Out, w: "
                       r"In, x: In, BK: constant\); the role 'norm_qkv_gemv' passes "
                       r"\(y: tl.Out, w: tl.In, h: tl.In, down: tl.In, g: tl.In, eps: "
                       r"float, BK: ct.Constant\[int\]\)"):
        plugged({"norm_qkv_gemv": gemv})
    with pytest.raises(PluggedKernelError, match="not a kernel"):
        plugged({"down_gemv": 3})
    with pytest.raises(PluggedKernelError, match="fuse_norms=False"):
        plugged({"norm_qkv_gemv": norm_gemv}, fuse_norms=False)
    with pytest.raises(tl.SafetyError, match="writes to 'x'"):
        plugged({"down_gemv": writes_an_input})


def test_the_model_checks_its_kernels_when_it_is_built(weights):
    with pytest.raises(PluggedKernelError, match="fuse_norms=False"):
        Qwen3(weights, max_tokens=64, step_config=StepConfig(fuse_norms=False),
              kernels={"norm_qkv_gemv": norm_gemv})
    assert Qwen3(weights, max_tokens=64).plugged == {}


def test_every_role_says_what_it_computes():
    for name, role in ROLES.items():
        assert role.name == name and role.params[0] == ("y", "Out")
        assert role.signature.startswith("(y: tl.Out, w: tl.In")
        assert "y[N] = w[N, K] @" in role.computes


def test_doctests():
    import doctest

    import tilelab.models.plug as module

    assert doctest.testmod(module).failed == 0
