"""Sampling in the Qwen3 engine: the settings and their checks, the checkpoint's
generation_config.json as defaults, the meaning of the settings against transformers'
logits processors, and the engine's sampling head on a tiny checkpoint (CPU
interpreter): greedy on request, reproducibility, graph replay with changed settings,
every token inside the filtered support, the penalties' history."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from tilelab.kernels.decode.sampling import GENERATED, SEEN_IN_PROMPT
from tilelab.models import Qwen3
from tilelab.models.decode_step import StepConfig
from tilelab.models.errors import CheckpointError, GenerateInputError
from tilelab.models.sampling import (SamplingParams, SamplingParamsError, history_vector,
                                     load_generation_config, resolve_sampling)
from tilelab.runtime.device import gpu_available, gpu_unavailable_reason

PROMPT = [5, 60, 7, 211, 9]


# ------------------------------------------------------------------ the settings

@pytest.mark.parametrize("changes,param,message", [
    (dict(temperature=-0.5), "temperature",
     "temperature must be a number >= 0 (finite; 0 is greedy), got -0.5"),
    (dict(temperature=float("nan")), "temperature",
     "temperature must be a number >= 0 (finite; 0 is greedy), got nan"),
    (dict(temperature=1e-40), "temperature",
     "temperature 1e-40 is too small: 1/temperature is not finite in float32, the type "
     "the sampling kernel scales the logits in"),
    (dict(top_k=-1), "top_k", "top_k must be an int >= 0 (0: off), got -1"),
    (dict(top_k=2.5), "top_k", "top_k must be an int >= 0 (0: off), got 2.5"),
    (dict(top_k=True), "top_k", "top_k must be an int >= 0 (0: off), got True"),
    (dict(top_p=0.0), "top_p", "top_p must be a number in (0, 1] (1: off), got 0.0"),
    (dict(top_p=1.01), "top_p", "top_p must be a number in (0, 1] (1: off), got 1.01"),
    (dict(min_p=-0.1), "min_p", "min_p must be a number in [0, 1] (0: off), got -0.1"),
    (dict(min_p="0.1"), "min_p", "min_p must be a number in [0, 1] (0: off), got '0.1'"),
    (dict(repetition_penalty=0.0), "repetition_penalty",
     "repetition_penalty must be a number > 0 (1: off; above 1 discourages repeats), "
     "got 0.0"),
    (dict(repetition_penalty=float("inf")), "repetition_penalty",
     "repetition_penalty must be a finite number, got inf"),
    (dict(presence_penalty=float("nan")), "presence_penalty",
     "presence_penalty must be a finite number, got nan"),
    (dict(presence_penalty=1e39), "presence_penalty",
     "presence_penalty 1e+39 is not finite in float32"),
    (dict(seed=1.5), "seed", "seed must be an int, got 1.5"),
])
def test_invalid_settings_are_refused_naming_the_setting(changes, param, message):
    with pytest.raises(SamplingParamsError) as info:
        SamplingParams(**changes)
    assert info.value.message == message and info.value.param == param
    assert isinstance(info.value, GenerateInputError)


def test_greedy_and_the_heads_the_settings_need():
    assert SamplingParams.greedy() == SamplingParams(temperature=0.0)
    assert SamplingParams.greedy().head == "argmax"
    assert SamplingParams.greedy(repetition_penalty=1.2).head == "sample"
    assert SamplingParams(temperature=0.9).head == "gumbel"
    assert SamplingParams(temperature=0.9, presence_penalty=0.5).head == "sample"
    for f in (dict(top_k=5), dict(top_p=0.9), dict(min_p=0.05)):
        assert SamplingParams(**f).head == "sample"
        assert SamplingParams(temperature=0, **f).head == "argmax"   # greedy ignores them
    assert [SamplingParams(**f).candidates(64) for f in
            (dict(), dict(top_k=5), dict(top_k=500), dict(min_p=0.1),
             dict(temperature=0, top_k=5))] == [0, 5, 64, 64, 1]


def test_resolve_sampling_layers_the_arguments_over_the_defaults():
    d = SamplingParams(temperature=0.6, top_k=20, top_p=0.95)
    assert resolve_sampling(None) == SamplingParams.greedy()
    assert resolve_sampling(d) == d
    assert resolve_sampling(d, temperature=0.9, seed=4) == d.replace(temperature=0.9,
                                                                     seed=4)
    assert resolve_sampling(d, temperature=0).is_greedy
    assert resolve_sampling(d, SamplingParams(top_k=3)).top_k == 3
    with pytest.raises(SamplingParamsError,
                       match="sampling must be a SamplingParams, got dict"):
        resolve_sampling(d, {"top_k": 3})


def test_the_settings_mean_what_transformers_logits_processors_mean():
    """SamplingParams.probabilities (the distribution the device draws from, which the
    kernel tests hold the kernels to) against transformers' repetition penalty,
    temperature, top-k, top-p and min-p processors in their order."""
    torch = pytest.importorskip("torch")
    lp = pytest.importorskip("transformers.generation.logits_process")
    rng = np.random.default_rng(3)
    v = 200
    seen = [3, 17, 40, 41, 150]
    for case in [dict(temperature=0.7, top_k=20, top_p=0.9),
                 dict(temperature=1.3, top_p=0.8),
                 dict(temperature=0.9, top_k=30, min_p=0.05, repetition_penalty=1.4),
                 dict(temperature=1.0, top_k=12, top_p=0.7, min_p=0.02,
                      repetition_penalty=0.8)]:
        lg = (rng.standard_normal(v) * 2).astype(np.float32)
        sp = SamplingParams(**case)
        procs = [lp.RepetitionPenaltyLogitsProcessor(sp.repetition_penalty),
                 lp.TemperatureLogitsWarper(sp.temperature)]
        if sp.top_k:
            procs.append(lp.TopKLogitsWarper(sp.top_k))
        if sp.top_p < 1:
            procs.append(lp.TopPLogitsWarper(sp.top_p))
        if sp.min_p:
            procs.append(lp.MinPLogitsWarper(sp.min_p))
        ids = torch.tensor([seen])
        scores = torch.tensor(lg[None].astype(np.float64))
        for p in procs:
            scores = p(ids, scores)
        want = torch.softmax(scores, -1)[0].numpy()
        got = sp.probabilities(lg, history_vector(v, seen), tile=v)
        np.testing.assert_allclose(got, want, atol=1e-9)


# ------------------------------------------------------------------ generation_config.json

def _write(tmp_path, raw) -> str:
    (tmp_path / "generation_config.json").write_text(
        raw if isinstance(raw, str) else json.dumps(raw))
    return str(tmp_path)


def test_qwen3s_generation_config_is_read_as_transformers_reads_it(tmp_path):
    qwen = {"bos_token_id": 151643, "do_sample": True, "eos_token_id": [151645, 151643],
            "pad_token_id": 151643, "temperature": 0.6, "top_k": 20, "top_p": 0.95,
            "transformers_version": "4.51.0"}
    assert load_generation_config(_write(tmp_path, qwen)) == SamplingParams(
        temperature=0.6, top_k=20, top_p=0.95)
    # do_sample false or absent: greedy, the repetition penalty kept
    assert load_generation_config(_write(tmp_path, {"temperature": 0.6, "top_k": 5})) \
        == SamplingParams.greedy()
    assert load_generation_config(_write(tmp_path, {"do_sample": False,
                                                    "repetition_penalty": 1.1})) \
        == SamplingParams.greedy(repetition_penalty=1.1)
    # absent or null keys are off
    assert load_generation_config(_write(tmp_path, {"do_sample": True, "top_k": None,
                                                    "min_p": 0.05})) \
        == SamplingParams(temperature=1.0, min_p=0.05)
    assert load_generation_config(tmp_path / "nowhere") is None


@pytest.mark.parametrize("raw,key,message", [
    ({"do_sample": True, "top_p": 1.5}, "top_p",
     "top_p must be a number in (0, 1] (1: off), got 1.5"),
    ({"do_sample": True, "temperature": -1}, "temperature",
     "temperature must be a number >= 0 (finite; 0 is greedy), got -1"),
    ({"do_sample": "yes"}, "do_sample", "do_sample is 'yes': it must be true or false"),
    ({"repetition_penalty": 0}, "repetition_penalty",
     "repetition_penalty must be a number > 0 (1: off; above 1 discourages repeats), "
     "got 0"),
    ("[1, 2]", None, "the top level must be a JSON object, not list"),
    ('{"do_sample": true,}', None, "invalid JSON at line 1, column 20: Expecting property "
                                   "name enclosed in double quotes"),
])
def test_a_bad_generation_config_names_the_file_and_the_key(tmp_path, raw, key, message):
    with pytest.raises(CheckpointError) as info:
        load_generation_config(_write(tmp_path, raw))
    e = info.value
    assert e.key == key and e.path == tmp_path / "generation_config.json"
    assert str(e).splitlines()[0] == f"{e.path}: {message}"


# ------------------------------------------------------------------ the engine

@pytest.fixture(scope="module")
def path(qwen3_checkpoint_factory):
    return qwen3_checkpoint_factory(initializer_range=0.1)


@pytest.fixture(scope="module")
def model(path):
    return Qwen3.from_pretrained(path, device="cpu", max_tokens=32)


def _decode(model, n, graph=True, **settings):
    """``n`` new tokens after PROMPT through ``begin`` and the step's replays (or plain
    launches); returns (tokens, step)."""
    step = model.begin(PROMPT, **settings)
    for _ in range(n - 1):
        (step.replay() if graph else step.run()).wait()
    return model.cache.read_tokens(len(PROMPT), len(PROMPT) + n), step


def test_the_tiny_checkpoints_generation_config_means_greedy(model):
    assert model.sampling_defaults == SamplingParams.greedy()
    tokens, step = _decode(model, 3)
    assert step.head == "argmax"


def test_top_k_1_is_greedy_and_new_settings_replay_the_same_graph(model):
    greedy, _ = _decode(model, 6)
    top1, step = _decode(model, 6,
                         sampling=SamplingParams(temperature=1.7, top_k=1, seed=5))
    assert step.head == "sample" and top1 == greedy
    graph = step.graph
    other, again = _decode(model, 6, sampling=SamplingParams(temperature=2.0, top_k=8,
                                                             top_p=0.9, seed=1))
    assert again is step and again.graph is graph          # recorded once
    assert other != greedy
    assert _decode(model, 6, sampling=SamplingParams(temperature=2.0, top_k=8, top_p=0.9,
                                                     seed=1), graph=False)[0] == other


def test_sampling_is_reproducible_by_seed(model):
    sp = SamplingParams(temperature=1.5, top_k=10, min_p=0.01, presence_penalty=0.5)
    a, _ = _decode(model, 6, sampling=sp.replace(seed=11))
    assert _decode(model, 6, sampling=sp.replace(seed=11))[0] == a
    assert _decode(model, 6, sampling=sp, seed=11)[0] == a          # seed= replaces it
    assert _decode(model, 6, sampling=sp.replace(seed=12))[0] != a


def _stepwise(model, sp, n):
    """Decode ``n`` tokens with ``sp`` one replay at a time; yield, per token, the logits
    it was picked from, the history the penalties saw and the token."""
    step = model.begin(PROMPT, sampling=sp)
    v = model.config.vocab_size
    generated: list[int] = []
    for i in range(n):
        if i:
            step.replay().wait()
        tok = model.cache.read_tokens(len(PROMPT) + i, len(PROMPT) + i + 1)[0]
        yield step.logits.numpy(), history_vector(v, PROMPT, generated), tok
        generated.append(tok)
        assert (model.cache.history.numpy() == history_vector(v, PROMPT, generated)).all()


def test_every_sampled_token_is_inside_the_filtered_support(model):
    sp = SamplingParams(temperature=3.0, top_k=3, repetition_penalty=1.5,
                        presence_penalty=2.0, seed=2)
    picked = []
    for logits, hist, tok in _stepwise(model, sp, 6):
        p = sp.probabilities(logits, hist)
        assert np.count_nonzero(p) == 3 and p[tok] > 0, (tok, np.flatnonzero(p))
        picked.append(tok)
    assert len(set(picked)) > 1


def test_greedy_with_penalties_takes_the_penalized_argmax(model):
    """Penalties below 1 and below 0 reward repeats, so they change this model's greedy
    tokens (which never repeat): each pick must be the argmax of the penalized logits."""
    sp = SamplingParams.greedy(repetition_penalty=0.5, presence_penalty=-3.0)
    plain, _ = _decode(model, 6)
    picked = []
    for logits, hist, tok in _stepwise(model, sp, 6):
        assert tok == int(np.argmax(sp.probabilities(logits, hist)))
        picked.append(tok)
    assert picked != plain and len(set(picked)) < len(picked)


def test_the_history_marks_the_prompt_and_the_generated_tokens(model):
    tokens, _ = _decode(model, 4, sampling=SamplingParams(temperature=1.0, top_k=5,
                                                          presence_penalty=0.3))
    h = model.cache.history.numpy()
    assert set(np.flatnonzero(h == GENERATED)) == set(tokens)
    assert set(np.flatnonzero(h == SEEN_IN_PROMPT)) == set(PROMPT) - set(tokens)
    assert np.count_nonzero(h) == len(set(PROMPT) | set(tokens))


def test_a_checkpoints_generation_config_is_the_default(path, tmp_path, model):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(path, ckpt)
    _write(ckpt, {"do_sample": True, "temperature": 0.7, "top_k": 1})
    m = Qwen3(model.weights, max_tokens=32,
              sampling=load_generation_config(ckpt))
    assert m.sampling_defaults == SamplingParams(temperature=0.7, top_k=1)
    loaded = Qwen3.from_pretrained(ckpt, device="cpu", max_tokens=32)
    assert loaded.sampling_defaults == m.sampling_defaults
    greedy, _ = _decode(model, 4)
    tokens, step = _decode(m, 4)
    assert step.head == "sample" and tokens == greedy
    assert _decode(m, 2, temperature=0)[1].head == "argmax"        # greedy on request
    assert _decode(m, 2, sampling=SamplingParams.greedy())[1].head == "argmax"


def test_top_k_beyond_the_candidate_tile_is_refused_with_a_hint(model):
    with pytest.raises(SamplingParamsError) as info:
        model.begin(PROMPT, sampling=SamplingParams(top_k=65))
    assert info.value.message == ("top_k 65 is more than the 64 candidates the decode "
                                  "step keeps")
    assert "StepConfig(sample_candidates=128)" in info.value.hint
    wide = Qwen3(model.weights, max_tokens=32,
                 step_config=StepConfig(sample_candidates=128))
    step = wide.begin(PROMPT, sampling=SamplingParams(top_k=100, seed=3))
    assert step.sampler.candidates == 128 and step.sampler.cval.shape[1] == 128


def test_bad_sampling_arguments_are_refused(model):
    with pytest.raises(SamplingParamsError, match="sampling must be a SamplingParams"):
        model.begin(PROMPT, sampling={"top_k": 3})
    with pytest.raises(GenerateInputError, match="temperature must be a number >= 0"):
        model.begin(PROMPT, temperature=-1.0)
    with pytest.raises(ValueError, match=r"StepConfig.sample_candidates=48 must be a power "
                                         r"of two from 1 to 1024"):
        StepConfig(sample_candidates=48)
    with pytest.raises(ValueError, match=r"StepConfig.sample_block=0 must be a power "):
        StepConfig(sample_block=0)


def test_the_sampling_head_is_two_safe_kernels_between_the_lm_head_and_advance(model):
    step = model.decode_step("sample")
    kinds = [l.kind for l in step.launches]
    assert kinds[-4:] == ["lm_head_partial", "sample_partial", "sample_pick", "advance"]
    assert "pick_token" not in kinds
    assert len(kinds) == len(model.decode_step().launches) + 1
    names = {k.definition.name for k in model.kernels()}
    assert {"sample_partial_kernel", "sample_pick_kernel"} <= names
    assert not any(k.options.unsafe for k in step.kernels())


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(),
                    reason=f"no usable GPU: {gpu_unavailable_reason()}")
def test_the_engines_sampling_step_on_the_gpu(path):
    gpu = Qwen3.from_pretrained(path, device="gpu", max_tokens=64)
    greedy, _ = _decode(gpu, 10)
    top1, step = _decode(gpu, 10, sampling=SamplingParams(temperature=1.5, top_k=1))
    assert top1 == greedy and step.head == "sample"
    graph = step.graph
    sp = SamplingParams(temperature=1.5, top_k=10, top_p=0.9, presence_penalty=0.5, seed=4)
    a, again = _decode(gpu, 10, sampling=sp)
    assert again.graph is graph                            # recorded once
    assert _decode(gpu, 10, sampling=sp)[0] == a
    assert _decode(gpu, 10, sampling=sp, graph=False)[0] == a
    assert _decode(gpu, 10, sampling=sp.replace(seed=5))[0] != a
    for logits, hist, tok in _stepwise(gpu, sp.replace(top_p=1.0), 5):
        assert sp.replace(top_p=1.0).probabilities(logits, hist)[tok] > 0
