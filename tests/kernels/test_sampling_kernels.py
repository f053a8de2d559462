"""The sampling kernels (tilelab.kernels.decode.sampling) against numpy on the CPU backend: the
sampled distribution over many seeds against the exact filtered softmax
(SamplingParams.probabilities), greedy, reproducibility, the writes they make and do not
make, the non-finite flag, and the kernels compiled for sm_90 with their Tile IR
validated."""
from __future__ import annotations

import math

import numpy as np
import pytest

import tilelab as tl
from tilelab.kernels.decode.step import lm_head_partial_kernel, pick_token_kernel
from tilelab.kernels.decode.sampling import (GENERATED, PARAMS, SEEN_IN_PROMPT,
                                             sample_partial_kernel, sample_pick_kernel,
                                             sample_token)
from tilelab.models.sampling import SamplingParams, history_vector

DEV = "cpu"
#: 40 tokens in blocks of 16 (the last one ragged), 8 candidates per block
V, BLOCK, KC = 40, 16, 8
#: draws per distribution test
N = 800


def _logits(seed: int = 7) -> np.ndarray:
    """Peaked enough that a dozen tokens carry the mass, spread enough that top-p and
    min-p cut inside the candidates; positive and negative (the repetition penalty
    treats them differently)."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(V) * 1.6 + 0.3).astype(np.float32)


class _Sampler:
    """The two kernels on fixed tensors (a decode step's view): ``draw(seed)`` writes a
    new seed (and the history it started with: the pick marks its token generated) and
    launches them, returning ``tokens[pos + 1]``."""

    def __init__(self, logits, params, history=None, *, pos=3, cap=16, block=BLOCK,
                 kc=KC):
        v = logits.shape[0]
        blocks = -(-v // block)
        t = lambda a: tl.tensor(np.asarray(a), device=DEV)  # noqa: E731
        self.cv = tl.empty((blocks, kc), "float32", device=DEV)
        self.ci = tl.empty((blocks, kc), "int32", device=DEV)
        self.stats = [tl.empty(blocks, dt, device=DEV)
                      for dt in ("float32", "float32", "float32", "int32")]
        self.logits, self.params = t(np.asarray(logits, np.float32)), t(
            np.asarray(params, np.float32))
        self.hist0 = np.zeros(v, np.int32) if history is None else np.array(history,
                                                                           np.int32)
        self.history = t(self.hist0.copy())      # a CPU tensor may share a numpy array
        self.seed, self.pos = t(np.zeros(1, np.int32)), t(np.array([pos], np.int32))
        self.tokens = tl.zeros(cap, "int32", device=DEV)
        self.flags = tl.zeros(cap, "int32", device=DEV)
        self.block, self.kc, self.p = block, kc, pos
        self.rows = 1 << max(0, blocks - 1).bit_length()
        self.vp = 1 << max(0, v - 1).bit_length()

    def draw(self, seed: int) -> int:
        self.launch(seed)
        return int(self.tokens.numpy()[self.p + 1])

    def launch(self, seed: int) -> None:
        self.seed.copy_(np.array([seed], np.int32))
        self.history.copy_(self.hist0)
        pm, ps, gv, gi = self.stats
        kc = self.kc
        sample_partial_kernel(self.cv.partition((1, kc)), self.ci.partition((1, kc)),
                              pm.partition(1), ps.partition(1), gv.partition(1),
                              gi.partition(1), self.logits, self.history, self.params,
                              self.seed, self.pos, self.block)
        sample_pick_kernel(self.tokens.partition(self.tokens.shape[0]),
                           self.flags.partition(self.flags.shape[0]),
                           self.history.partition(self.vp), self.cv, self.ci, pm, ps, gv,
                           gi, self.params, self.seed, self.pos, self.rows, self.kc)


def _chi2_quantile(df: int, z: float = 3.719) -> float:
    """The chi-square quantile at the standard normal's ``z`` (3.719: 1 - 1e-4), by
    Wilson-Hilferty."""
    a = 2.0 / (9.0 * df)
    return df * (1.0 - a + z * math.sqrt(a)) ** 3


def _check_distribution(counts: np.ndarray, want: np.ndarray) -> None:
    """No draw outside the support; a chi-square test (bins of expected count < 5
    pooled) at the 1e-4 level; and the total-variation distance within 0.08."""
    n = counts.sum()
    outside = np.flatnonzero((want == 0) & (counts > 0))
    assert outside.size == 0, f"drew tokens {outside.tolist()} outside the support"
    exp = want * n
    big = exp >= 5
    obs_b = list(counts[big]) + ([counts[~big].sum()] if (~big & (want > 0)).any() else [])
    exp_b = list(exp[big]) + ([exp[~big].sum()] if (~big & (want > 0)).any() else [])
    obs_b, exp_b = np.array(obs_b, float), np.array(exp_b, float)
    if len(exp_b) > 1:
        chi2 = float(((obs_b - exp_b) ** 2 / exp_b).sum())
        assert chi2 < _chi2_quantile(len(exp_b) - 1), (
            f"chi2 {chi2:.1f} over {len(exp_b) - 1} dof: {counts.tolist()} vs "
            f"{np.round(exp, 1).tolist()}")
    tv = 0.5 * np.abs(counts / n - want).sum()
    assert tv < 0.08, f"total variation {tv:.3f}"


CASES = {
    "temperature": SamplingParams(temperature=0.7),
    "top_k": SamplingParams(temperature=1.3, top_k=5),
    "top_p_whole_vocab": SamplingParams(temperature=0.9, top_p=0.6),
    "top_k_top_p_min_p": SamplingParams(temperature=1.2, top_k=7, top_p=0.85, min_p=0.08),
    "min_p": SamplingParams(temperature=1.0, min_p=0.15),
    "penalties": SamplingParams(temperature=0.8, top_k=6, repetition_penalty=1.8,
                                presence_penalty=1.0),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_sampled_distribution_is_the_filtered_softmax(name):
    sp = CASES[name]
    lg = _logits()
    order = np.argsort(-lg)
    # the prompt holds the best token and a negative one; the two next best were generated
    hist = history_vector(V, [int(order[0]), int(order[-1])], [int(order[1]),
                                                                int(order[2])]) \
        if sp.penalized else None
    want = sp.probabilities(lg, hist, tile=KC)
    assert 2 <= np.count_nonzero(want) <= V
    s = _Sampler(lg, sp.device_vector(), hist)
    counts = np.bincount([s.draw(seed) for seed in range(N)], minlength=V)
    _check_distribution(counts, want)


def test_the_reference_tells_the_cases_apart():
    """The distribution test has power: the cases' distributions differ from each other
    and from the plain softmax by far more than the test's tolerance."""
    lg = _logits()
    plain = SamplingParams().probabilities(lg, tile=KC)
    for name, sp in CASES.items():
        tv = 0.5 * np.abs(sp.probabilities(lg, tile=KC) - plain).sum()
        assert tv > 0.15, (name, tv)


def test_top_p_without_top_k_sees_the_candidate_tile_only():
    """A nucleus wider than the candidate tile is cut there (documented): with 8
    candidates and top_p 0.99 over a flat distribution, exactly 8 tokens can come."""
    flat = np.linspace(0.0, 0.3, V).astype(np.float32)
    sp = SamplingParams(top_p=0.99)
    want = sp.probabilities(flat, tile=KC)
    assert np.count_nonzero(want) == KC
    s = _Sampler(flat, sp.device_vector())
    got = {s.draw(seed) for seed in range(60)}
    assert got <= set(np.flatnonzero(want).tolist()) and len(got) >= 5


def test_greedy_is_the_first_argmax_of_the_penalized_logits():
    lg = _logits()
    top = int(np.argmax(lg))
    lg[[top, top + 1 if top + 1 < V else top - 1]] = lg.max() + 1.0      # a tie
    first = int(np.flatnonzero(lg == lg.max())[0])
    greedy = SamplingParams.greedy()
    assert {_Sampler(lg, greedy.device_vector()).draw(seed) for seed in range(5)} == {first}
    # the repetition penalty on a generated winner hands the pick to the runner-up
    pen = SamplingParams.greedy(repetition_penalty=50.0)
    hist = history_vector(V, [], np.flatnonzero(lg == lg.max()))
    want = int(np.argmax(pen.probabilities(lg, hist)))
    assert want not in np.flatnonzero(lg == lg.max())
    assert _Sampler(lg, pen.device_vector(), hist).draw(0) == want


def test_the_same_seed_gives_the_same_token_and_seeds_vary():
    sp = SamplingParams(temperature=1.0, top_k=10)
    s = _Sampler(_logits(), sp.device_vector())
    a = [s.draw(seed) for seed in range(12)]
    assert a == [s.draw(seed) for seed in range(12)]
    assert len(set(a)) > 2


def test_without_filters_it_draws_the_lm_head_kernels_gumbel_sample():
    """Both use the noise of gumbel_noise(seed, pos, token): with no filter and no
    penalty the sampling head picks exactly what lm_head_partial's sampling form does."""
    lg = _logits(3)
    for seed in range(8):
        mine = sample_token(lg, params=SamplingParams(temperature=0.6).device_vector(),
                            seed=seed, position=5, block=16, candidates=8)
        assert mine == _lm_head_gumbel(lg, 1 / 0.6, seed, 5)


def _lm_head_gumbel(col, inv_temp, seed, pos):
    v = col.shape[0]
    w = np.zeros((v, 8), np.float32)
    w[:, 0] = col
    x = np.zeros(8, np.float32)
    x[0] = 1.0
    t = lambda a: tl.tensor(np.asarray(a), device=DEV)  # noqa: E731
    blocks = -(-v // 16)
    lg, pv = tl.empty(v, "float32", device=DEV), tl.empty(blocks, "float32", device=DEV)
    pi, p = tl.empty(blocks, "int32", device=DEV), t(np.array([pos], np.int32))
    lm_head_partial_kernel(lg.partition(16), pv.partition(1), pi.partition(1), t(w), t(x),
                           t(np.array([inv_temp], np.float32)),
                           t(np.array([seed], np.int32)), p, 8, 0, 1)
    tokens, flags = tl.zeros(16, "int32", device=DEV), tl.zeros(16, "int32", device=DEV)
    pick_token_kernel(tokens.partition(16), flags.partition(16), pv, pi, p, 4)
    return int(tokens.numpy()[pos + 1])


def test_only_the_token_its_flag_and_its_history_entry_are_written():
    lg = _logits()
    rng = np.random.default_rng(1)
    hist = rng.integers(0, 3, V).astype(np.int32)
    sp = SamplingParams(temperature=1.0, top_k=4, presence_penalty=0.5)
    s = _Sampler(lg, sp.device_vector(), hist, pos=5)
    s.tokens.copy_(np.full(16, -3, np.int32))
    s.flags.copy_(np.full(16, 7, np.int32))
    tok = s.draw(2)
    tokens, flags = s.tokens.numpy(), s.flags.numpy()
    assert (np.delete(tokens, 6) == -3).all() and 0 <= tokens[6] < V
    assert (np.delete(flags, 5) == 7).all() and flags[5] == 0
    after = s.history.numpy()
    assert after[tok] == GENERATED
    assert (np.delete(after, tok) == np.delete(hist, tok)).all()
    assert set(np.unique(after)) <= {0, SEEN_IN_PROMPT, GENERATED}


def test_no_token_and_no_history_write_past_the_end_of_the_sequence():
    lg = _logits()
    s = _Sampler(lg, SamplingParams(top_k=3).device_vector(), pos=15, cap=16)
    s.flags.copy_(np.full(16, 7, np.int32))
    s.launch(0)
    assert (s.tokens.numpy() == 0).all()
    assert (s.history.numpy() == 0).all()
    assert s.flags.numpy()[15] == 0 and (s.flags.numpy()[:15] == 7).all()


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("filtered", [False, True], ids=["whole-vocab", "top-k"])
def test_a_non_finite_score_sets_the_flag(bad, filtered):
    lg = _logits()
    lg[21] = bad                                      # in the ragged last-but-one block
    sp = SamplingParams(top_k=4) if filtered else SamplingParams(temperature=0.5)
    s = _Sampler(lg, sp.device_vector(), pos=2)
    s.draw(0)
    assert s.flags.numpy()[2] == 1
    fine = _Sampler(_logits(), sp.device_vector(), pos=2)
    fine.draw(0)
    assert fine.flags.numpy()[2] == 0


def test_the_settings_vector_has_one_slot_per_setting():
    v = SamplingParams(temperature=0.5, top_k=3, top_p=0.9, min_p=0.05,
                       repetition_penalty=1.1, presence_penalty=0.4).device_vector()
    assert v.shape == (PARAMS,) and v.dtype == np.float32
    np.testing.assert_allclose(v[:7], [2.0, 3, 0.9, 0.05, 1.1, 0.4, 0], rtol=1e-6)
    whole = SamplingParams(top_p=0.9).device_vector()
    assert whole[1] >= 1 << 20 and whole[6] == 1                # all candidates, whole norm
    assert SamplingParams(temperature=0.5).device_vector()[1] == 0     # no filter
    assert list(SamplingParams.greedy().device_vector()[:4]) == [1, 1, 1, 0]


def test_the_kernels_are_safe_kernels():
    for k in (sample_partial_kernel, sample_pick_kernel):
        assert not k.options.unsafe


# ------------------------------------------------------------------ compiled for sm_90

def _qwen3_launches():
    """The two kernels as the decode step launches them for Qwen3's vocabulary."""
    S = tl.spec
    v, bv, kc, cap = 151936, 4096, 64, 2048
    b = -(-v // bv)
    cv, ci = S((b, kc), "float32"), S((b, kc), "int32")
    pm, ps, gv, gi = S(b, "float32"), S(b, "float32"), S(b, "float32"), S(b, "int32")
    hist, prm, one = S(v, "int32"), S(PARAMS, "float32"), S(1, "int32")
    return {
        "sample_partial": (sample_partial_kernel, (
            cv.partition((1, kc)), ci.partition((1, kc)), pm.partition(1), ps.partition(1),
            gv.partition(1), gi.partition(1), S(v, "float32"), hist, prm, one, one, bv)),
        "sample_pick": (sample_pick_kernel, (
            S(cap, "int32").partition(cap), S(cap, "int32").partition(cap),
            hist.partition(1 << 18), cv, ci, pm, ps, gv, gi, prm, one, one, 64, kc)),
    }


@pytest.mark.parametrize("name", sorted(_qwen3_launches()))
@pytest.mark.toolchain
def test_the_kernels_compile_for_sm90_and_pass_the_tileir_validator(name):
    from tilelab.compiler.export import export_tileir
    from tilelab.compiler.tileir import check_tileir
    from tilelab.compiler.toolchain import find_toolchain

    if find_toolchain().tileirdisasm is None:      # pragma: no cover - CUDA < 13.4
        pytest.skip("tileirdisasm is not installed")
    kern, args = _qwen3_launches()[name]
    art = kern.compile(*args, arch="sm_90", cache=False)
    assert art.cubin and not art.resources.spill_store_bytes
    d = kern.definition
    sp = d.specialize(args)
    lk = d.lowered(sp.plan)
    _bc, text = export_tileir(d.fn, lk, sp, options=d.options.hints())
    stores = check_tileir(text, lk, sp).partition_stores
    assert stores == (6 if name == "sample_partial" else 3)
