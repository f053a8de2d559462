"""The Qwen3 engine on the GPU (skipped without one): the same tiny checkpoint gives the
CPU interpreter's tokens and transformers' logits, graph replay included, in both forms
of the decode step."""
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


def test_gpu_logits_match_transformers(path):
    model = Qwen3.from_pretrained(path, device="gpu", max_tokens=64)
    got, ref = model.logits(PROMPT), hf_logits(path, PROMPT)
    max_tol, mean_tol = logits_tolerance(ref)
    assert np.abs(got - ref).max() <= max_tol
    assert np.abs(got - ref).mean() <= mean_tol


def test_gpu_graph_replay_plain_launches_and_cpu_agree(path):
    gpu = Qwen3.from_pretrained(path, device="gpu", max_tokens=64)
    cpu = Qwen3.from_pretrained(path, device="cpu", max_tokens=64)
    replayed = gpu.generate(PROMPT, max_new_tokens=12)
    assert gpu.generate(PROMPT, max_new_tokens=12, graph=False) == replayed
    assert cpu.generate(PROMPT, max_new_tokens=12)[:6] == replayed[:6]
    sampled = gpu.generate(PROMPT, max_new_tokens=8, temperature=0.9, seed=2)
    assert gpu.generate(PROMPT, max_new_tokens=8, temperature=0.9, seed=2,
                        graph=False) == sampled
    k_gpu, _ = gpu.cache.contents(0, len(PROMPT))
    cpu.generate(PROMPT, max_new_tokens=1)
    k_cpu, _ = cpu.cache.contents(0, len(PROMPT))
    assert np.abs(k_gpu - k_cpu).max() <= 0.02 * np.abs(k_cpu).max() + 1e-2


@pytest.mark.parametrize("fuse", [True, False], ids=["norms-fused", "norms-apart"])
def test_gpu_decode_step_logits_match_transformers(path, fuse):
    model = Qwen3.from_pretrained(path, device="gpu", max_tokens=64,
                                  step_config=StepConfig(fuse_norms=fuse))
    step = model.begin(PROMPT)
    first = model.cache.read_tokens(len(PROMPT), len(PROMPT) + 1)
    step.replay().wait()
    got, ref = step.logits.numpy(), hf_logits(path, PROMPT + first)[-1]
    max_tol, mean_tol = logits_tolerance(ref)
    assert np.abs(got - ref).max() <= max_tol
    assert np.abs(got - ref).mean() <= mean_tol
