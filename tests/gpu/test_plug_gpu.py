"""User kernels plugged into the decode step on the GPU (skipped without one): the
course's reference GEMV and fused RMSNorm + GEMV, compiled for the device and launched in
the replayed CUDA graph (with its programmatic edges) and in plain launches, give the
built-in kernels' tokens on a tiny random Qwen3, and the CPU interpreter's."""
from __future__ import annotations

import numpy as np
import pytest

from tilelab.lab.course.exercises import solution
from tilelab.models import Qwen3
from tilelab.models.config import Qwen3Config
from tilelab.models.device_weights import DeviceWeights
from tilelab.runtime.device import gpu_available, gpu_unavailable_reason

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not gpu_available(),
                                 reason=f"no usable GPU: {gpu_unavailable_reason()}")]
PROMPT = [5, 60, 7, 211, 9]


def _weights(device: str) -> DeviceWeights:
    """The tiny random Qwen3 of notebook 07 (hidden 96: K is not a power of two)."""
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
                                     ones(h), randn(cfg.vocab_size, h), device=device)


def _plugged(device: str) -> Qwen3:
    return Qwen3(_weights(device), max_tokens=64,
                 kernels={"norm_qkv_gemv": solution("capstone_norm_gemv"),
                          "down_gemv": solution("gemv")})


def test_plugged_kernels_on_the_gpu_give_the_builtin_tokens():
    builtin = Qwen3(_weights("gpu"), max_tokens=64)
    want = builtin.generate(PROMPT, max_new_tokens=8)
    model = _plugged("gpu")
    replayed = model.generate(PROMPT, max_new_tokens=8)
    assert model.generate(PROMPT, max_new_tokens=8, graph=False) == replayed
    assert replayed[:6] == want[:6]              # bf16 sums in another order may part later
    cpu = _plugged("cpu").generate(PROMPT, max_new_tokens=8)
    assert cpu[:6] == replayed[:6]
    names = {k.name for k in model.kernels()}
    assert {"_norm_gemv", "_gemv_kernel"} <= names
    assert not any(k.options.unsafe for k in model.kernels())
