"""Models fed non-finite data: refused when they load, or raised when a token would be
picked from NaN or infinite logits, never a silent token.

The checkpoints are written by transformers (tests/models/checkpoints.py); a bad
``config.json`` is a good checkpoint's file with one value rewritten (Python's json
writes and reads ``Infinity`` and ``NaN``), a NaN weight is set in transformers and
saved with ``save_pretrained``; the engine's tests run on the CPU interpreter and, when
one is usable, on the GPU. The kernels' flag itself is checked on the decode kernels
directly (lm_head partials, then the token pick).
"""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import tilelab as tl
from tilelab.kernels.decode.step import NONFINITE, lm_head_partial_kernel, pick_token_kernel
from tilelab.models import Qwen3
from tilelab.models.checkpoint import load_checkpoint
from tilelab.models.config import Qwen3Config
from tilelab.models.errors import CheckpointError, GenerateInputError, NonFiniteLogitsError
from tilelab.runtime.device import gpu_available

PROMPT = [5, 60, 7, 211, 9]
#: the engine's NaN tests run on the CPU interpreter, and on the GPU when there is one
DEVICES = ["cpu"] + (["gpu"] if gpu_available() else [])
HINT = ("a weight of the checkpoint is NaN or infinite, or an activation overflowed; "
        "numpy.isfinite(ckpt.tensor(name)).all() finds a bad weight")


@pytest.fixture(scope="module")
def clean(qwen3_checkpoint_factory):
    return qwen3_checkpoint_factory(initializer_range=0.1)


def _rewrite(src, dst, **changes):
    """A copy of checkpoint ``src`` at ``dst`` whose config.json has ``changes``
    (``a__b`` names the key ``b`` inside the object ``a``)."""
    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text())
    for key, value in changes.items():
        *outer, last = key.split("__")
        node = cfg
        for k in outer:
            node = node[k]
        node[last] = value
    (dst / "config.json").write_text(json.dumps(cfg))      # Infinity / NaN as json does
    return dst


# ---------------------------------------------------------------- config values


@pytest.mark.parametrize("changes, message", [
    ({"rms_norm_eps": float("inf")},
     "rms_norm_eps is inf: it must be a finite number from 1e-30 to 0.01"),
    ({"rms_norm_eps": 1e300},
     "rms_norm_eps is 1e+300: it must be a finite number from 1e-30 to 0.01"),
    ({"rms_norm_eps": float("nan")},
     "rms_norm_eps is nan: it must be a finite number from 1e-30 to 0.01"),
    ({"rms_norm_eps": 1e-45},
     "rms_norm_eps is 1e-45: it must be a finite number from 1e-30 to 0.01"),
    ({"rope_parameters__rope_theta": float("inf")},
     "rope_parameters.rope_theta is inf: it must be a finite number greater than 1"),
    ({"rope_parameters__rope_theta": 1.0},
     "rope_parameters.rope_theta is 1.0: it must be a finite number greater than 1"),
    ({"vocab_size": 2 ** 31},
     "vocab_size is 2147483648: it must be an integer from 1 to 2147483647"),
    ({"num_hidden_layers": 2 ** 20 + 1},
     "num_hidden_layers is 1048577: it must be an integer from 1 to 1048576"),
    ({"head_dim": 16.0}, "head_dim is 16.0: it must be an integer from 1 to 1048576"),
    ({"max_position_embeddings": 0},
     "max_position_embeddings is 0: it must be a positive integer"),
    ({"max_position_embeddings": float("inf")},
     "max_position_embeddings is inf: it must be a positive integer"),
])
def test_a_config_value_out_of_range_is_a_located_error(clean, tmp_path, changes, message):
    path = _rewrite(clean, tmp_path / "ckpt", **changes)
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    assert str(info.value) == f"{path / 'config.json'}: {message}"
    assert info.value.path == path / "config.json"
    assert info.value.key == next(iter(changes)).replace("__", ".")


def test_a_4x_config_names_the_top_level_rope_theta(qwen3_checkpoint_factory, tmp_path):
    src = qwen3_checkpoint_factory(config_style="4.x")
    path = _rewrite(src, tmp_path / "ckpt", rope_theta=float("inf"))
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    assert str(info.value) == (f"{path / 'config.json'}: rope_theta is inf: it must be a "
                               "finite number greater than 1")


def test_a_json_integer_too_long_for_python_is_a_checkpoint_error(clean, tmp_path):
    path = shutil.copytree(clean, tmp_path / "ckpt")
    text = (path / "config.json").read_text()
    (path / "config.json").write_text(text.replace('"vocab_size": 300',
                                                   '"vocab_size": ' + "9" * 5000))
    with pytest.raises(CheckpointError, match="config.json: unreadable JSON .*digits"):
        load_checkpoint(path)


def test_a_config_made_in_code_is_checked_too():
    fields = dict(vocab_size=300, hidden_size=96, intermediate_size=160,
                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  head_dim=16, rms_norm_eps=1e-6, rope_theta=1e4,
                  max_position_embeddings=512, tie_word_embeddings=False, dtype="bfloat16")
    Qwen3Config(**fields)
    with pytest.raises(CheckpointError) as info:
        Qwen3Config(**dict(fields, rope_theta=float("inf")))
    assert str(info.value) == ("Qwen3Config: rope_theta is inf: it must be a finite number "
                               "greater than 1")
    with pytest.raises(CheckpointError, match=r"^Qwen3Config: num_attention_heads \(4\) is "
                                              r"not a multiple of num_key_value_heads \(3\)$"):
        Qwen3Config(**dict(fields, num_key_value_heads=3))


# ---------------------------------------------------------------- position tables


def test_a_huge_max_position_embeddings_loads_and_runs_on_a_small_cache(clean, tmp_path):
    """The RoPE tables cover the KV cache the engine allocates, not the model's
    positions (2**40 positions of tables would be 8 TiB)."""
    path = _rewrite(clean, tmp_path / "ckpt", max_position_embeddings=2 ** 40)
    huge = Qwen3.from_pretrained(path, device="cpu", max_tokens=32)
    assert huge.config.max_position_embeddings == 2 ** 40
    assert huge.cache.capacity == 32 and huge.max_tokens == 32
    assert huge.cache.cos.shape == huge.cache.sin.shape == (32, 8)
    ref = Qwen3.from_pretrained(clean, device="cpu", max_tokens=32)
    np.testing.assert_array_equal(huge.cache.cos.numpy(), ref.cache.cos.numpy())
    assert huge.generate(PROMPT, max_new_tokens=4) == ref.generate(PROMPT, max_new_tokens=4)
    default = Qwen3(huge.weights)                       # max_tokens=None: 2048 positions
    assert default.cache.cos.shape == (2048, 8)


def test_a_cache_past_int32_positions_is_refused(clean):
    model = Qwen3.from_pretrained(clean, device="cpu", max_tokens=8)
    with pytest.raises(GenerateInputError) as info:
        Qwen3(model.weights, max_tokens=2 ** 31)
    assert info.value.message == "Qwen3: max_tokens must be from 2 to 1073741824, got 2147483648"


# ---------------------------------------------------------------- NaN weights


def _with_nan(src, dst, name: str, index: tuple[int, ...]):
    """Checkpoint ``src`` re-saved by transformers with ``name[index]`` = NaN."""
    import torch
    import transformers

    model = transformers.Qwen3ForCausalLM.from_pretrained(src, dtype=torch.bfloat16)
    with torch.no_grad():
        model.get_parameter(name)[index] = float("nan")
    model.save_pretrained(dst)
    return dst


@pytest.fixture(scope="module", params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(scope="module")
def greedy(clean):
    """The clean checkpoint's greedy tokens after PROMPT (CPU interpreter)."""
    return Qwen3.from_pretrained(clean, device="cpu", max_tokens=32).generate(PROMPT, 4)


@pytest.fixture(scope="module")
def nan_layer_path(clean, tmp_path_factory):
    return _with_nan(clean, tmp_path_factory.mktemp("nan-layer"),
                     "model.layers.1.mlp.down_proj.weight", (3, 7))


@pytest.fixture(scope="module")
def nan_layer(nan_layer_path, device):
    return Qwen3.from_pretrained(nan_layer_path, device=device, max_tokens=32)


@pytest.mark.parametrize("graph", [True, False])
def test_one_nan_weight_raises_instead_of_returning_tokens(nan_layer, graph):
    """Every logit is NaN from the prefill on: the first new token is refused."""
    with pytest.raises(NonFiniteLogitsError) as info:
        nan_layer.generate(PROMPT, max_new_tokens=3, graph=graph)
    e = info.value
    assert e.message == ("the logits computed at position 4 are not finite (NaN or "
                         "infinity): new token 1 (tokens[5]) cannot be picked from them")
    assert e.hint == HINT and (e.position, e.token_index) == (4, 5)
    assert isinstance(e, tl.TilelabError) and isinstance(e, FloatingPointError)


def test_sampled_tokens_from_nan_logits_raise_naming_the_temperature(nan_layer):
    with pytest.raises(NonFiniteLogitsError) as info:
        nan_layer.generate(PROMPT, max_new_tokens=2, temperature=0.8, seed=1)
    assert info.value.message == (
        "the logits scaled by 1/temperature (temperature 0.8) computed at position 4 are "
        "not finite (NaN or infinity): new token 1 (tokens[5]) cannot be picked from them")


def test_reading_the_cache_after_begin_raises_too(nan_layer):
    nan_layer.begin(PROMPT)
    with pytest.raises(NonFiniteLogitsError, match="position 4"):
        nan_layer.cache.read_tokens(len(PROMPT), len(PROMPT) + 1)
    assert nan_layer.cache.read_tokens(0, len(PROMPT)) == PROMPT   # the prompt is fine


@pytest.fixture(scope="module")
def nan_row_path(clean, greedy, tmp_path_factory):
    """The clean checkpoint with the embedding row of its second greedy token NaN: the
    prompt and the first two steps are finite, the step that embeds that token is not."""
    g1, g2 = greedy[:2]
    assert g2 not in PROMPT and g2 != g1, greedy     # the test's premise, for this seed
    return _with_nan(clean, tmp_path_factory.mktemp("nan-row"),
                     "model.embed_tokens.weight", (g2, 0))


@pytest.fixture(scope="module")
def nan_row(nan_row_path, device):
    return Qwen3.from_pretrained(nan_row_path, device=device, max_tokens=32)


def test_the_error_names_the_step_that_met_the_nan(nan_row, greedy):
    assert nan_row.generate(PROMPT, max_new_tokens=2) == greedy[:2]
    with pytest.raises(NonFiniteLogitsError) as info:
        nan_row.generate(PROMPT, max_new_tokens=4)
    assert info.value.message == ("the logits computed at position 6 are not finite (NaN "
                                  "or infinity): new token 3 (tokens[7]) cannot be picked "
                                  "from them")
    # the NaN keys and values that step left in the cache do not leak into the next
    # sequence (attention multiplies masked positions by zero, and 0 * NaN is NaN)
    assert nan_row.generate(PROMPT, max_new_tokens=2) == greedy[:2]
    assert nan_row.generate(PROMPT, max_new_tokens=2, graph=False) == greedy[:2]


def test_nan_logits_returned_by_logits_leave_no_nan_in_the_cache(nan_row, greedy):
    # NaN keys and values at positions 5..8, past where the next sequence decodes
    logits = nan_row.logits(PROMPT + [greedy[1], 1, 2, 3])   # the caller sees the NaN
    assert np.isnan(logits[-1]).all()
    assert nan_row.generate(PROMPT, max_new_tokens=2) == greedy[:2]


def test_a_temperature_whose_reciprocal_overflows_is_refused(nan_row):
    with pytest.raises(GenerateInputError) as info:
        nan_row.generate(PROMPT, max_new_tokens=2, temperature=1e-40)
    assert info.value.message == ("temperature 1e-40 is too small: 1/temperature is not "
                                  "finite in float32, the type the sampling kernel scales "
                                  "the logits in")
    with pytest.raises(GenerateInputError, match=r"temperature must be a number >= 0 "
                                                 r"\(finite; 0 is greedy\), got inf"):
        nan_row.generate(PROMPT, max_new_tokens=2, temperature=float("inf"))


# ---------------------------------------------------------------- the kernels' flag


def _pick(col: np.ndarray, bn: int = 64, *, sample: int = 0, inv_temp: float = 1.0,
          pos: int = 2) -> tuple[np.ndarray, np.ndarray, int, int]:
    """lm_head partials of the logits ``col`` (w = [col, 0...], x = e_0), then the pick:
    (pval, pidx, token, flag)."""
    v = col.shape[0]
    w = np.zeros((v, 8), np.float32)
    w[:, 0] = col
    x = np.zeros(8, np.float32)
    x[0] = 1.0
    blocks = -(-v // bn)
    t = lambda a: tl.tensor(a, device="cpu")                          # noqa: E731
    lg = tl.empty(v, "float32", device="cpu")
    pv, pi = tl.empty(blocks, "float32", device="cpu"), tl.empty(blocks, "int32", device="cpu")
    p = t(np.array([pos], np.int32))
    lm_head_partial_kernel(lg.partition(bn), pv.partition(1), pi.partition(1), t(w), t(x),
                           t(np.array([inv_temp], np.float32)), t(np.array([3], np.int32)),
                           p, 8, 0, sample)
    tokens, flags = tl.zeros(8, "int32", device="cpu"), tl.zeros(8, "int32", device="cpu")
    pick_token_kernel(tokens.partition(8), flags.partition(8), pv, pi, p, 4)
    return pv.numpy(), pi.numpy(), int(tokens.numpy()[pos + 1]), int(flags.numpy()[pos])


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_logit_flags_its_block_and_the_step(bad):
    col = np.random.default_rng(0).standard_normal(300).astype(np.float32)
    col[250] = 9.0
    pv, pi, token, flag = _pick(col)
    assert (token, flag) == (250, 0) and (pi >= 0).all()
    col[70] = bad                                    # block 1 of 5
    pv, pi, token, flag = _pick(col)
    assert flag == 1 and pi[1] == NONFINITE and pv[1] == -np.inf
    assert token == 250                              # the other blocks still pick
    assert (pi[[0, 2, 3, 4]] >= 0).all()


def test_the_flag_ignores_rows_past_the_vocabulary():
    col = np.random.default_rng(1).standard_normal(300).astype(np.float32)  # the last block has 20 padded rows
    assert _pick(col)[3] == 0


def test_scores_that_overflow_when_scaled_for_sampling_are_flagged():
    col = (100 * np.random.default_rng(2).standard_normal(300)).astype(np.float32)
    assert _pick(col, sample=1, inv_temp=1e30)[3] == 0
    assert _pick(col, sample=1, inv_temp=1e37)[3] == 1      # 100 * 1e37 > float32 max


def test_config_check_examples_run_and_public_names_have_examples():
    import doctest
    import inspect

    import tilelab.models.config_check as module

    res = doctest.testmod(module)
    assert res.attempted > 0 and res.failed == 0
    for attr in module.__all__:
        obj = getattr(module, attr)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            assert "Example" in (obj.__doc__ or ""), attr
