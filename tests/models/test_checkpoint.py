"""tilelab.models.checkpoint against real checkpoints written by transformers."""
from __future__ import annotations

import dataclasses
import json
import shutil

import numpy as np
import pytest

from tilelab.errors import TilelabError
from tilelab.models.checkpoint import CheckpointError, Qwen3Config, load_checkpoint
from tilelab.models.config import parse_config

LAYER_SHORT_NAMES = {"q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm",
                     "input_layernorm", "post_attention_layernorm", "gate_proj", "up_proj",
                     "down_proj"}


def stored_tensors(directory):
    """Every tensor of a checkpoint as transformers' own safetensors reader sees it."""
    from safetensors.torch import load_file

    out = {}
    for f in sorted(directory.glob("*.safetensors")):
        out.update(load_file(str(f)))
    return out


def as_numpy(t):
    import torch

    return t.to(torch.float32).numpy()


def copy_of(src, tmp_path):
    dst = tmp_path / "ckpt"
    shutil.copytree(src, dst)
    return dst


def edit_config(directory, **changes):
    """Set keys of config.json; a value of ... deletes the key."""
    path = directory / "config.json"
    config = json.loads(path.read_text())
    for key, value in changes.items():
        if value is ...:
            config.pop(key, None)
        else:
            config[key] = value
    path.write_text(json.dumps(config))


def resave(directory, change):
    """Rewrite model.safetensors after change(dict of torch tensors) edits it."""
    from safetensors.torch import load_file, save_file

    path = directory / "model.safetensors"
    tensors = load_file(str(path))
    change(tensors)
    save_file(tensors, str(path), metadata={"format": "pt"})


def raises(path, *fragments) -> CheckpointError:
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
    assert isinstance(info.value, TilelabError) and isinstance(info.value, ValueError)
    return info.value


# ---------------------------------------------------------------- what loads


@pytest.mark.parametrize("style", ["4.x", "5.x"])
def test_both_config_styles_give_the_same_config(qwen3_checkpoint_factory, style):
    path = qwen3_checkpoint_factory(config_style=style, rope_theta=5e5)
    raw = json.loads((path / "config.json").read_text())
    assert ("rope_parameters" in raw) == (style == "5.x")
    assert ("torch_dtype" in raw) == (style == "4.x")
    assert load_checkpoint(path).config == Qwen3Config(
        vocab_size=300, hidden_size=96, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6,
        rope_theta=5e5, max_position_embeddings=512, tie_word_embeddings=False,
        dtype="bfloat16")


@pytest.mark.parametrize("dtype, numpy_name", [("bfloat16", "bfloat16"),
                                                ("float16", "float16"),
                                                ("float32", "float32")])
def test_tensors_come_back_in_the_stored_dtype_with_the_stored_values(
        qwen3_checkpoint_factory, dtype, numpy_name):
    path = qwen3_checkpoint_factory(dtype=dtype)
    ckpt = load_checkpoint(path)
    reference = stored_tensors(path)
    assert ckpt.config.dtype == dtype
    assert ckpt.names() == sorted(reference)
    for name, expected in reference.items():
        got = ckpt.tensor(name)
        assert got.dtype.name == numpy_name and got.shape == tuple(expected.shape)
        np.testing.assert_array_equal(got.astype(np.float32), as_numpy(expected), err_msg=name)


def test_layer_embedding_norm_and_head_accessors_have_the_config_shapes(tiny_qwen3):
    ckpt = load_checkpoint(tiny_qwen3)
    c = ckpt.config
    layer = ckpt.layer_tensors(1)
    assert set(layer) == LAYER_SHORT_NAMES
    assert layer["q_proj"].shape == (c.num_attention_heads * c.head_dim, c.hidden_size)
    assert layer["k_proj"].shape == (c.num_key_value_heads * c.head_dim, c.hidden_size)
    assert layer["o_proj"].shape == (c.hidden_size, c.num_attention_heads * c.head_dim)
    assert layer["down_proj"].shape == (c.hidden_size, c.intermediate_size)
    assert layer["k_norm"].shape == (c.head_dim,)
    reference = stored_tensors(tiny_qwen3)
    np.testing.assert_array_equal(
        layer["gate_proj"].astype(np.float32),
        as_numpy(reference["model.layers.1.mlp.gate_proj.weight"]))
    assert ckpt.embedding().shape == (300, 96) and ckpt.final_norm().shape == (96,)
    np.testing.assert_array_equal(ckpt.lm_head().astype(np.float32),
                                  as_numpy(reference["lm_head.weight"]))
    assert not np.shares_memory(ckpt.lm_head(), ckpt.embedding())


def test_tied_checkpoint_uses_the_embedding_as_lm_head(qwen3_checkpoint_factory):
    ckpt = load_checkpoint(qwen3_checkpoint_factory(tie=True))
    assert ckpt.config.tie_word_embeddings
    assert "lm_head.weight" not in ckpt.names()
    assert np.shares_memory(ckpt.lm_head(), ckpt.embedding())


@pytest.mark.parametrize("shards", [2, 4])
def test_sharded_checkpoint_reads_like_the_single_file(qwen3_checkpoint_factory, shards):
    sharded = qwen3_checkpoint_factory(shards=shards)
    assert not (sharded / "model.safetensors").exists()
    assert len(list(sharded.glob("model-*-of-*.safetensors"))) >= 2
    single, split = load_checkpoint(qwen3_checkpoint_factory()), load_checkpoint(sharded)
    assert split.names() == single.names()
    for name in single.names():
        np.testing.assert_array_equal(split.tensor(name).view(np.uint16),
                                      single.tensor(name).view(np.uint16), err_msg=name)


def test_tokenizer_is_loaded_when_present(qwen3_checkpoint_factory):
    with_tok = load_checkpoint(qwen3_checkpoint_factory(tokenizer=True))
    ids = with_tok.tokenizer.encode("hello world from tilelab").ids
    assert ids and max(ids) < with_tok.config.vocab_size
    assert with_tok.tokenizer.decode(ids) == "hello world from tilelab"
    assert load_checkpoint(qwen3_checkpoint_factory()).tokenizer is None


def test_tensors_are_read_only_views_of_the_file_mapping(tiny_qwen3):
    ckpt = load_checkpoint(tiny_qwen3)
    name = "model.layers.0.mlp.up_proj.weight"
    t = ckpt.tensor(name)
    weights = ckpt._files[name]
    mapping = weights.mapping()
    assert isinstance(t, np.memmap) and np.shares_memory(t, mapping)
    assert t.ctypes.data == mapping.ctypes.data + weights.data_start + weights.entries[name].begin
    assert not t.flags.writeable
    with pytest.raises(ValueError):
        t[0, 0] = 1


def test_dtype_is_taken_from_the_weights_when_config_declares_none(tiny_qwen3, tmp_path):
    path = copy_of(tiny_qwen3, tmp_path)
    edit_config(path, dtype=..., torch_dtype=...)
    assert load_checkpoint(path).config.dtype == "bfloat16"


# ---------------------------------------------------------------- config parsing


@pytest.fixture(scope="module")
def base_config(qwen3_checkpoint_factory):
    return json.loads((qwen3_checkpoint_factory() / "config.json").read_text())


def parse_with(base, **changes):
    raw = {k: v for k, v in base.items() if changes.get(k, 0) is not ...}
    raw.update({k: v for k, v in changes.items() if v is not ...})
    return parse_config(raw, path="ckpt/config.json")


def test_absent_optional_keys_take_hugging_face_defaults(base_config):
    c = parse_with(base_config, head_dim=..., num_key_value_heads=..., rms_norm_eps=...,
                   max_position_embeddings=..., tie_word_embeddings=..., rope_parameters=...)
    assert c.head_dim == 96 // 4 and c.num_key_value_heads == c.num_attention_heads
    assert (c.rms_norm_eps, c.rope_theta, c.max_position_embeddings) == (1e-6, 10000.0, 32768)
    assert c.tie_word_embeddings is False


@pytest.mark.parametrize("changes, fragments", [
    ({"model_type": "llama", "architectures": ["LlamaForCausalLM"]},
     ["ckpt/config.json: model_type is 'llama', not 'qwen3'", "Qwen3ForCausalLM"]),
    ({"model_type": ...}, ["ckpt/config.json: missing key 'model_type'"]),
    ({"architectures": ["Qwen3MoeForCausalLM"]}, ["architectures is ['Qwen3MoeForCausalLM']"]),
    ({"hidden_size": ...}, ["ckpt/config.json: missing key 'hidden_size'"]),
    ({"vocab_size": ...}, ["missing key 'vocab_size'"]),
    ({"hidden_size": -96}, ["hidden_size is -96: it must be an integer from 1 to 1048576"]),
    ({"num_hidden_layers": "2"}, ["num_hidden_layers is '2': it must be an integer"]),
    ({"intermediate_size": True}, ["intermediate_size is True: it must be an integer"]),
    ({"num_key_value_heads": 3}, ["num_attention_heads (4) is not a multiple of "
                                  "num_key_value_heads (3)"]),
    ({"head_dim": ..., "hidden_size": 90}, ["no head_dim, and hidden_size (90)"]),
    ({"rms_norm_eps": 0}, ["rms_norm_eps is 0: it must be a finite number from 1e-30 to 0.01"]),
    ({"tie_word_embeddings": "yes"}, ["tie_word_embeddings must be true or false"]),
    ({"dtype": "float64"}, ["dtype is 'float64': unsupported dtype", "bfloat16, float16"]),
    ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0}},
     ["rope_parameters.rope_type is 'yarn'"]),
    ({"rope_parameters": ..., "rope_theta": 1e6, "rope_scaling": {"type": "linear"}},
     ["rope_scaling is {'type': 'linear'}"]),
    ({"rope_parameters": {"rope_type": "default", "rope_theta": -1}},
     ["rope_parameters.rope_theta is -1: it must be a finite number greater than 1"]),
    ({"attention_bias": True}, ["attention_bias is True"]),
    ({"use_sliding_window": True}, ["use_sliding_window is True"]),
    ({"layer_types": ["full_attention", "sliding_attention"]}, ["layer_types is"]),
    ({"hidden_act": "gelu"}, ["hidden_act is 'gelu'"]),
])
def test_config_errors_name_the_file_and_key(base_config, changes, fragments):
    with pytest.raises(CheckpointError) as info:
        parse_with(base_config, **changes)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)
    assert str(info.value.path) == "ckpt/config.json"
    assert info.value.key is not None and info.value.key.split(".")[0] in str(info.value)


def test_config_must_be_an_object():
    with pytest.raises(CheckpointError, match="top level must be a JSON object, not list"):
        parse_config([1, 2], path="c.json")


# ---------------------------------------------------------------- directory errors


def test_path_that_is_not_a_directory(tiny_qwen3, tmp_path):
    raises(tmp_path / "nope", "nope: does not exist")
    raises(tiny_qwen3 / "config.json", "config.json: is not a directory",
           "pass the checkpoint directory")


def test_directory_without_config_json(tmp_path):
    raises(tmp_path, f"{tmp_path}: no config.json", "Hugging Face checkpoint directory")


def test_invalid_json_names_line_and_column(tiny_qwen3, tmp_path):
    path = copy_of(tiny_qwen3, tmp_path)
    (path / "config.json").write_text('{\n  "model_type": "qwen3",\n  oops\n}')
    raises(path, "config.json: invalid JSON at line 3, column 3")


def test_other_architecture(tiny_qwen3, tmp_path):
    path = copy_of(tiny_qwen3, tmp_path)
    edit_config(path, model_type="llama", architectures=["LlamaForCausalLM"])
    error = raises(path, "config.json: model_type is 'llama', not 'qwen3'")
    assert error.key == "model_type" and error.path == path / "config.json"


def test_no_weights_file(tiny_qwen3, tmp_path):
    path = copy_of(tiny_qwen3, tmp_path)
    (path / "model.safetensors").unlink()
    raises(path, "no weights: neither model.safetensors nor model.safetensors.index.json",
           "found: config.json, generation_config.json, tokenizer.json")
    (path / "pytorch_model.bin").write_bytes(b"\0")
    raises(path, "PyTorch pickle format", "save_pretrained")


def test_index_naming_a_missing_shard(qwen3_checkpoint_factory, tmp_path):
    path = copy_of(qwen3_checkpoint_factory(shards=2), tmp_path)
    shard = sorted(path.glob("model-*.safetensors"))[-1]
    shard.unlink()
    raises(path, "model.safetensors.index.json: names the shard", f"'{shard.name}'",
           "which does not exist")


def test_index_mapping_a_tensor_to_a_shard_without_it(qwen3_checkpoint_factory, tmp_path):
    path = copy_of(qwen3_checkpoint_factory(shards=2), tmp_path)
    index = json.loads((path / "model.safetensors.index.json").read_text())
    first = sorted(path.glob("model-*.safetensors"))[0].name
    moved = next(n for n, f in index["weight_map"].items() if f != first)
    index["weight_map"][moved] = first
    (path / "model.safetensors.index.json").write_text(json.dumps(index))
    raises(path, f"maps tensor '{moved}' to '{first}', which does not hold it")


def test_index_without_weight_map(qwen3_checkpoint_factory, tmp_path):
    path = copy_of(qwen3_checkpoint_factory(shards=2), tmp_path)
    (path / "model.safetensors.index.json").write_text('{"metadata": {}}')
    raises(path, "model.safetensors.index.json: no 'weight_map' object")


def test_missing_tensor(tiny_qwen3, tmp_path):
    path = copy_of(tiny_qwen3, tmp_path)
    resave(path, lambda t: t.pop("model.layers.1.self_attn.k_norm.weight"))
    error = raises(path, "missing tensor 'model.layers.1.self_attn.k_norm.weight'")
    assert error.key == "model.layers.1.self_attn.k_norm.weight"


def test_missing_lm_head_suggests_tying(tiny_qwen3, tmp_path):
    path = copy_of(tiny_qwen3, tmp_path)
    resave(path, lambda t: t.pop("lm_head.weight"))
    raises(path, "missing tensor 'lm_head.weight'", "tie_word_embeddings")


def test_misshapen_tensor_names_expected_and_got(tiny_qwen3, tmp_path):
    import torch

    path = copy_of(tiny_qwen3, tmp_path)
    name = "model.layers.0.mlp.down_proj.weight"
    resave(path, lambda t: t.update({name: torch.zeros(96, 128, dtype=torch.bfloat16)}))
    raises(path, "model.safetensors:", f"tensor '{name}' has shape (96, 128), "
           "expected (96, 160) from config.json")


def test_unsupported_tensor_dtype(tiny_qwen3, tmp_path):
    path = copy_of(tiny_qwen3, tmp_path)
    resave(path, lambda t: t.update({"model.norm.weight": t["model.norm.weight"].double()}))
    raises(path, "model.safetensors: tensor 'model.norm.weight' has dtype F64, which is not "
           "supported", "BF16, F16 and F32")


def test_truncated_weights_file(tiny_qwen3, tmp_path):
    path = copy_of(tiny_qwen3, tmp_path)
    data = (path / "model.safetensors").read_bytes()
    (path / "model.safetensors").write_bytes(data[: len(data) // 2])
    raises(path, "model.safetensors: not a valid safetensors file", "download it again")


def test_unreadable_tokenizer(tiny_qwen3, tmp_path):
    path = copy_of(tiny_qwen3, tmp_path)
    (path / "tokenizer.json").write_text('{"not": "a tokenizer"}')
    raises(path, "tokenizer.json: cannot read the tokenizer")


def test_tokenizer_larger_than_the_vocabulary(tiny_qwen3, tmp_path):
    path = copy_of(tiny_qwen3, tmp_path)
    config = json.loads((path / "config.json").read_text())
    tok = json.loads((path / "tokenizer.json").read_text())
    tok["added_tokens"].append({**tok["added_tokens"][0], "id": config["vocab_size"],
                                "content": "<|extra|>"})
    (path / "tokenizer.json").write_text(json.dumps(tok))
    raises(path, "tokenizer.json: the tokenizer has 301 tokens, more than vocab_size 300")


def test_unknown_tensor_and_layer_lookups(tiny_qwen3):
    ckpt = load_checkpoint(tiny_qwen3)
    with pytest.raises(CheckpointError, match="no tensor 'model.layers.9.mlp.up_proj.weight'"):
        ckpt.tensor("model.layers.9.mlp.up_proj.weight")
    with pytest.raises(IndexError, match="layer 2 out of range: the checkpoint has 2 layers"):
        ckpt.layer_tensors(2)


def test_config_is_frozen(tiny_qwen3):
    config = load_checkpoint(tiny_qwen3).config
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.hidden_size = 1


def test_doctests():
    import doctest

    import tilelab.models.checkpoint
    import tilelab.models.config
    import tilelab.models.errors
    import tilelab.models.weights

    for module in (tilelab.models.errors, tilelab.models.config, tilelab.models.weights,
                   tilelab.models.checkpoint):
        result = doctest.testmod(module)
        assert result.failed == 0, module.__name__
