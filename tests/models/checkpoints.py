"""Real Hugging Face Qwen3 checkpoints, small enough for tests.

:func:`make_qwen3_checkpoint` builds a randomly initialised ``Qwen3ForCausalLM`` with
transformers on the CPU (fixed torch seed), casts it to the asked dtype and saves it with
``save_pretrained``, so the files are exactly what the Hugging Face hub serves: a
``config.json``, one ``model.safetensors`` or several shards named by
``model.safetensors.index.json``, and optionally a ``tokenizer.json``.

Example:
    >>> from .checkpoints import make_qwen3_checkpoint   # in tests/models  # doctest: +SKIP
    >>> path = make_qwen3_checkpoint(tmp / "tiny", shards=2, tokenizer=True)  # doctest: +SKIP
"""
from __future__ import annotations

import json
import pathlib

DTYPES = ("bfloat16", "float16", "float32")
CONFIG_STYLES = ("4.x", "5.x")

# A few sentences the test tokenizer is trained on; prompts in tests use these words.
CORPUS = (
    "the quick brown fox jumps over the lazy dog",
    "a tile kernel reads its block and writes its own tile",
    "safe kernels never write outside their tiles",
    "hello world from tilelab and qwen",
)


def make_qwen3_checkpoint(directory, *, hidden: int = 96, intermediate: int = 160,
                          layers: int = 2, heads: int = 4, kv_heads: int = 2,
                          head_dim: int = 16, vocab: int = 300, tie: bool = False,
                          shards: int = 1, dtype: str = "bfloat16", config_style: str = "5.x",
                          tokenizer: bool = False, seed: int = 0,
                          rope_theta: float = 10000.0, max_positions: int = 512,
                          rms_norm_eps: float = 1e-6,
                          initializer_range: float = 0.02) -> pathlib.Path:
    """Write a Qwen3 checkpoint under ``directory`` and return its path.

    The norm weights (all ones after Hugging Face's initialisation) are perturbed with the
    same seed so that an engine that skips or misplaces a norm gives different logits.
    ``shards > 1`` saves with a ``max_shard_size`` that splits the weights into about that
    many files (at least two) plus ``model.safetensors.index.json``. ``config_style``
    writes ``config.json`` as transformers 4.x does (top-level ``rope_theta`` and
    ``torch_dtype``) or as 5.x does (``rope_parameters`` and ``dtype``).

    Example:
        >>> p = make_qwen3_checkpoint(tmp_path / "c", tie=True, dtype="float16")  # doctest: +SKIP
        >>> sorted(f.name for f in p.iterdir())  # doctest: +SKIP
        ['config.json', 'generation_config.json', 'model.safetensors']
    """
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM
    from transformers.utils import logging

    logging.disable_progress_bar()  # keep "Writing model shards" off the tests' stderr
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, not {dtype!r}")
    if config_style not in CONFIG_STYLES:
        raise ValueError(f"config_style must be one of {CONFIG_STYLES}, not {config_style!r}")
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config = Qwen3Config(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=intermediate,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
        head_dim=head_dim, tie_word_embeddings=tie, rope_theta=rope_theta,
        max_position_embeddings=max_positions, rms_norm_eps=rms_norm_eps,
        initializer_range=initializer_range)
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    _perturb_norms(model, seed)
    model = model.to(getattr(torch, dtype))
    model.save_pretrained(directory, max_shard_size=_shard_size(model, shards))
    _write_config_style(directory / "config.json", config_style, dtype)
    if tokenizer:
        _write_tokenizer(directory, vocab)
    return directory


def _perturb_norms(model, seed: int) -> None:
    import torch

    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.add_(0.1 * torch.randn(param.shape, generator=gen))


def _shard_size(model, shards: int) -> int | str:
    if shards <= 1:
        return "10GB"
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    # the largest tensor bounds a shard from below; a shard never splits a tensor
    largest = max(p.numel() * p.element_size() for p in model.parameters())
    return max(total // shards, largest)


def _write_config_style(path: pathlib.Path, style: str, dtype: str) -> None:
    """Rewrite config.json in the other transformers major version's layout."""
    config = json.loads(path.read_text())
    theta = config.get("rope_theta")
    if theta is None:
        theta = config.get("rope_parameters", {}).get("rope_theta")
    if style == "4.x":
        config.pop("rope_parameters", None)
        config.pop("dtype", None)
        config["rope_theta"] = theta
        config["rope_scaling"] = None
        config["torch_dtype"] = dtype
        config["transformers_version"] = "4.57.1"
    else:
        config.pop("rope_theta", None)
        config.pop("rope_scaling", None)
        config.pop("torch_dtype", None)
        config["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}
        config["dtype"] = dtype
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def _write_tokenizer(directory: pathlib.Path, vocab: int) -> None:
    """A byte-level BPE tokenizer trained on :data:`CORPUS` (any text encodes; decoding
    round-trips), with ``<|endoftext|>`` as token 0 and at most ``vocab`` tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if vocab < len(alphabet) + 1:
        raise ValueError(f"a byte-level tokenizer needs vocab >= {len(alphabet) + 1}, "
                         f"not {vocab}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=alphabet, show_progress=False)
    tok.train_from_iterator(CORPUS, trainer=trainer)
    if tok.get_vocab_size() > vocab:
        raise AssertionError(f"tokenizer has {tok.get_vocab_size()} tokens > vocab {vocab}")
    tok.save(str(directory / "tokenizer.json"))
