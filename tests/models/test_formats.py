"""What a checkpoint's files say beyond the weights: quantized formats refused up front
and named, the end-of-sequence ids of config.json, generation_config.json and the
tokenizer."""
from __future__ import annotations

import json
import shutil

import pytest

from tilelab.models.checkpoint import load_checkpoint
from tilelab.models.config import parse_config
from tilelab.models.errors import CheckpointError
from tilelab.models.quantized import QUANTIZED_HINT, quantization_problem, tensor_format

from .chat_checkpoints import ENDOFTEXT, IM_END, chat_checkpoint  # noqa: F401 (fixture)


def _copy(src, dst):
    shutil.copytree(src, dst)
    return dst


def _rewrite_weights(path, change):
    """Rewrite model.safetensors through torch with ``change(tensors)`` applied."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(path / "model.safetensors"))
    change(tensors)
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})


@pytest.mark.parametrize("config, named", [
    ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "'fp8' (FP8 weights with block "
                                                                "scales)"),
    ({"quant_method": "awq", "bits": 4}, "'awq' (AWQ 4-bit packed integer weights)"),
    ({"quant_method": "gptq", "bits": 4}, "'gptq' (GPTQ packed integer weights)"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "'bitsandbytes' (bitsandbytes "
                                                              "8-bit or 4-bit weights)"),
    ({"quant_method": "compressed-tensors"}, "'compressed-tensors' (compressed-tensors "
                                             "(quantized or sparse weights))"),
    ({"quant_method": "newfangled"}, "'newfangled'"),
])
def test_a_quantization_config_is_refused_naming_the_method(config, named):
    raw = {"model_type": "qwen3", "quantization_config": config}
    with pytest.raises(CheckpointError) as info:
        parse_config(raw, path="ckpt/config.json")
    assert info.value.message == (f"ckpt/config.json: quantization_config.quant_method is "
                                  f"{named}: quantized checkpoints are not supported")
    assert info.value.hint == QUANTIZED_HINT and info.value.key == "quantization_config"


def test_fp8_weights_are_refused_by_their_dtype(tiny_qwen3, tmp_path):
    import torch

    path = _copy(tiny_qwen3, tmp_path / "fp8")
    name = "model.layers.0.mlp.down_proj.weight"
    _rewrite_weights(path, lambda t: t.update({name: t[name].to(torch.float8_e4m3fn)}))
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    assert info.value.message == (f"{path}: the weights are quantized: FP8 (float8_e4m3fn "
                                  "weights); quantized checkpoints are not supported")
    assert info.value.hint == QUANTIZED_HINT


def test_gptq_awq_tensors_are_refused_by_their_names(tiny_qwen3, tmp_path):
    import torch

    path = _copy(tiny_qwen3, tmp_path / "gptq")
    name = "model.layers.0.self_attn.q_proj"

    def packed(t):
        del t[f"{name}.weight"]
        t[f"{name}.qweight"] = torch.zeros(12, 64, dtype=torch.int32)
        t[f"{name}.qzeros"] = torch.zeros(1, 8, dtype=torch.int32)
        t[f"{name}.scales"] = torch.zeros(1, 64, dtype=torch.float16)
    _rewrite_weights(path, packed)
    with pytest.raises(CheckpointError, match=r"the weights are quantized: GPTQ or AWQ "
                                              r"\(packed integer weights: qweight, qzeros, "
                                              r"scales\)"):
        load_checkpoint(path)


@pytest.mark.parametrize("names, dtypes, fmt", [
    (["a.weight", "a.weight_scale_inv"], {}, "FP8 (weights with block scales: "
                                             "weight_scale_inv)"),
    (["a.weight", "a.SCB"], {}, "bitsandbytes 8-bit (SCB)"),
    (["a.weight", "a.weight.absmax"], {}, "bitsandbytes 4-bit (NF4/FP4 with absmax)"),
    (["a.weight"], {"a.weight": "U8"}, "packed 4-bit or 8-bit integer weights"),
    (["a.weight"], {"a.weight": "BF16"}, None),
])
def test_tensor_formats(names, dtypes, fmt):
    assert tensor_format(names, dtypes) == fmt


def test_no_quantization_config_is_no_problem():
    assert quantization_problem({"model_type": "qwen3"}) is None


def test_eos_ids_come_from_every_file_once(chat_checkpoint):
    ckpt = load_checkpoint(chat_checkpoint)
    assert ckpt.generation_config["eos_token_id"] == [IM_END, ENDOFTEXT]
    assert ckpt.config.eos_token_ids == (IM_END,)
    assert ckpt.eos_token_ids == (IM_END, ENDOFTEXT)     # generation config first, once


def test_the_tokenizers_eos_token_counts_too(chat_checkpoint, tmp_path):
    path = _copy(chat_checkpoint, tmp_path / "tok-eos")
    (path / "generation_config.json").unlink()
    cfg = json.loads((path / "config.json").read_text())
    cfg["eos_token_id"] = ENDOFTEXT
    (path / "config.json").write_text(json.dumps(cfg))
    assert load_checkpoint(path).eos_token_ids == (ENDOFTEXT, IM_END)


@pytest.mark.parametrize("file, key, value, message", [
    ("generation_config.json", "eos_token_id", [2, 300],
     "eos_token_id is [2, 300]: a token id must be an integer from 0 to 299"),
    ("config.json", "eos_token_id", "2", "eos_token_id is '2': a token id must be an integer "
                                         "from 0 to 299"),
    ("tokenizer_config.json", "eos_token", "<|nope|>",
     "eos_token '<|nope|>' is not a token of tokenizer.json"),
])
def test_bad_eos_settings_are_located(chat_checkpoint, tmp_path, file, key, value, message):
    path = _copy(chat_checkpoint, tmp_path / "bad")
    raw = json.loads((path / file).read_text())
    raw[key] = value
    (path / file).write_text(json.dumps(raw))
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    assert info.value.message == f"{path / file}: {message}"


def test_doctests():
    import doctest

    import tilelab.models.quantized

    assert doctest.testmod(tilelab.models.quantized).failed == 0
