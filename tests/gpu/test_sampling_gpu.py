"""The sampling head on a real GPU (skipped without one): the sampled distribution at
Qwen3's vocabulary against numpy, the GPU's draws against the CPU interpreter's, and the
head's cost next to the argmax head's, printed (run with -s to read it). The engine's
sampling step on the GPU is tested in tests/models/test_sampling.py (it needs the
checkpoint fixtures there)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import tilelab as tl
from tilelab.kernels.decode.step import pick_token_kernel
from tilelab.kernels.decode.sampling import sample_partial_kernel, sample_pick_kernel
from tilelab.models.sampling import SamplingParams, history_vector
from tilelab.models.sample_head import SampleHead

QWEN3_VOCAB = 151936


class _Cache:
    """What the sampling head reads of a KV cache, on the GPU."""

    def __init__(self, vocab, params, history=None, *, pos=3, capacity=64, device="gpu"):
        t = lambda a: tl.tensor(np.asarray(a), device=device)  # noqa: E731
        self.capacity = capacity
        self.tokens = tl.zeros(capacity, "int32", device=device)
        self.nonfinite = tl.zeros(capacity, "int32", device=device)
        self.pos = t(np.array([pos], np.int32))
        self.seed = t(np.zeros(1, np.int32))
        self.sampling = t(np.asarray(params, np.float32))
        self.hist0 = np.zeros(vocab, np.int32) if history is None else np.array(history,
                                                                               np.int32)
        self.history = t(self.hist0.copy())


def _head_graph(logits, cache, **tiles):
    head = SampleHead(logits.shape[0], logits.device, **tiles)
    with tl.graph() as g:
        for _kind, kernel, args in head.launches(logits, cache):
            kernel.launch_async(*args)
    return g


def _draws(logits_np, sp, n, *, history=None, device="gpu", block=4096, candidates=64):
    logits = tl.tensor(logits_np, device=device)
    cache = _Cache(logits_np.shape[0], sp.device_vector(), history, device=device)
    g = _head_graph(logits, cache, block=block, candidates=candidates)
    out = []
    for seed in range(n):
        cache.seed.copy_(np.array([seed], np.int32))
        cache.history.copy_(cache.hist0)
        g.replay().wait()
        out.append(int(cache.tokens[4:5].numpy()[0]))
    return out


def _check(counts, want):
    n = counts.sum()
    assert not counts[want == 0].any(), np.flatnonzero((want == 0) & (counts > 0))
    exp = want * n
    big = exp >= 5
    obs = np.append(counts[big], counts[~big].sum())
    ex = np.append(exp[big], exp[~big].sum())
    keep = ex > 0
    obs, ex = obs[keep], ex[keep]
    df = len(ex) - 1
    a = 2.0 / (9.0 * df)
    limit = df * (1.0 - a + 3.719 * math.sqrt(a)) ** 3            # chi-square, 1 - 1e-4
    chi2 = float(((obs - ex) ** 2 / ex).sum())
    assert chi2 < limit, (chi2, limit)


@pytest.mark.parametrize("settings", [
    dict(temperature=0.6, top_k=20, top_p=0.95),                 # Qwen3's defaults
    dict(temperature=1.0, min_p=0.05),
    dict(temperature=0.8, top_k=30, repetition_penalty=1.3, presence_penalty=0.5),
])
def test_the_sampled_distribution_at_qwen3s_vocabulary(settings):
    rng = np.random.default_rng(0)
    lg = (rng.standard_normal(QWEN3_VOCAB) * 1.0).astype(np.float32)
    top = np.argsort(-lg)[:40]
    lg[top] += np.linspace(6.0, 3.0, 40).astype(np.float32)   # a head that carries the mass
    sp = SamplingParams(**settings)
    hist = history_vector(QWEN3_VOCAB, top[:3], top[3:6]) if sp.penalized else None
    want = sp.probabilities(lg, hist)
    counts = np.bincount(_draws(lg, sp, 3000, history=hist), minlength=QWEN3_VOCAB)
    _check(counts, want)


def test_the_gpu_draws_the_cpu_interpreters_tokens():
    """The same hash and the same float32 operations: the tokens agree except where the
    devices' exp/log round differently at a near tie."""
    rng = np.random.default_rng(1)
    lg = (rng.standard_normal(700) * 2).astype(np.float32)
    sp = SamplingParams(temperature=0.9, top_k=16, top_p=0.9)
    gpu = _draws(lg, sp, 200, block=128, candidates=16)
    cpu = _draws(lg, sp, 200, device="cpu", block=128, candidates=16)
    assert np.mean(np.array(gpu) == np.array(cpu)) >= 0.97


def test_the_sampling_heads_cost_next_to_the_argmax_head():
    """Printed, not judged tightly: the two sampling kernels at Qwen3's vocabulary
    (settings as Qwen3 ships them) against the argmax head's combine, each replayed as
    a graph; the bound only catches a pathological build."""
    rng = np.random.default_rng(2)
    lg = tl.tensor(rng.standard_normal(QWEN3_VOCAB).astype(np.float32), device="gpu")
    sp = SamplingParams(temperature=0.6, top_k=20, top_p=0.95)
    cache = _Cache(QWEN3_VOCAB, sp.device_vector(), capacity=4096)
    sample = _head_graph(lg, cache, block=4096, candidates=64)
    blocks = -(-QWEN3_VOCAB // 16)
    pval = tl.tensor(rng.standard_normal(blocks).astype(np.float32), device="gpu")
    pidx = tl.tensor(np.arange(blocks, dtype=np.int32) * 16, device="gpu")
    with tl.graph() as argmax:
        pick_token_kernel.launch_async(cache.tokens.partition(4096),
                                       cache.nonfinite.partition(4096), pval, pidx,
                                       cache.pos, 1024)
    times = {}
    for name, g in (("argmax pick_token", argmax),
                    ("sample_partial + sample_pick", sample)):
        g.replay().wait()
        times[name] = tl.bench(lambda g=g: g.replay(), warmup=20, rep=200,
                               flush_l2=False).median * 1e6
    whole = SampleHead(QWEN3_VOCAB, "gpu", block=4096, candidates=64)
    print(f"\nsampling head at vocab {QWEN3_VOCAB} ({whole.blocks} blocks of "
          f"{whole.block}, 64 candidates, top_k 20): " +
          ", ".join(f"{k} {v:.1f} us" for k, v in times.items()))
    assert times["sample_partial + sample_pick"] < 500
    for k in (sample_partial_kernel, sample_pick_kernel):
        assert not k.options.unsafe
