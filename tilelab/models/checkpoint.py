"""Hugging Face Qwen3 checkpoints: ``config.json``, safetensors weights, the tokenizer.

:func:`load_checkpoint` reads a checkpoint directory as ``save_pretrained`` (or the
Hugging Face hub) lays it out: one ``model.safetensors``, or shards named by
``model.safetensors.index.json``. Everything is checked when it loads: the config, that
every tensor the config implies is there with the right shape and a supported dtype
(BF16, F16, F32; a quantized checkpoint is refused naming its format), the tokenizer
(``tokenizer.json``), its chat template and special tokens
(:mod:`~tilelab.models.tokenizer_config`) and the end-of-sequence ids of
``generation_config.json``. The weights stay in the files: each tensor is a read-only,
zero-copy view of a memory mapping, in its stored dtype. A hub id such as
``Qwen/Qwen3-0.6B`` is found in the local Hugging Face cache when it was downloaded
there; otherwise the error says how to download it.

Example:
    >>> ckpt = load_checkpoint("checkpoints/Qwen3-0.6B")  # doctest: +SKIP
    >>> ckpt.layer_tensors(0)["q_proj"].shape  # doctest: +SKIP
    (2048, 1024)
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path

import numpy as np

from .config import LAYER_TENSORS, Qwen3Config, layer_tensor_name, read_config, token_ids
from .errors import CheckpointError
from .quantized import QUANTIZED_HINT, tensor_format
from .tokenizer_config import (GENERATION_CONFIG_FILE, TokenizerConfig, read_json_object,
                               read_tokenizer_config)
from .weights import NUMPY_DTYPES, SafetensorsFile, TensorEntry

__all__ = ["Checkpoint", "load_checkpoint", "Qwen3Config", "CheckpointError"]

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
TOKENIZER_FILE = "tokenizer.json"
_DTYPE_NAMES = {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}


class Checkpoint:
    """A loaded (and checked) Qwen3 checkpoint.

    Attributes:
        path: the checkpoint directory.
        config: its :class:`Qwen3Config`.
        tokenizer: a ``tokenizers.Tokenizer`` from ``tokenizer.json``, or None.
        tokenizer_config: its :class:`~tilelab.models.tokenizer_config.TokenizerConfig`
            (chat template, named special tokens), or None.
        generation_config: ``generation_config.json`` as a dict (empty without one).
        eos_token_ids: the ids generation stops at: ``generation_config.json``'s
            ``eos_token_id``, then ``config.json``'s, then the tokenizer's
            ``eos_token``, each once.

    Example:
        >>> ckpt = load_checkpoint(path)  # doctest: +SKIP
        >>> ckpt.embedding().shape == (ckpt.config.vocab_size,  # doctest: +SKIP
        ...                            ckpt.config.hidden_size)
        True
    """

    def __init__(self, path: Path, config: Qwen3Config, files: dict[str, SafetensorsFile],
                 tokenizer=None, tokenizer_config: TokenizerConfig | None = None,
                 generation_config: dict | None = None,
                 eos_token_ids: tuple[int, ...] = ()):
        self.path = path
        self.config = config
        self.tokenizer = tokenizer
        self.tokenizer_config = tokenizer_config
        self.generation_config = dict(generation_config or {})
        self.eos_token_ids = tuple(eos_token_ids)
        self._files = files  # tensor name -> the file holding it
        self._shapes = config.weight_shapes()

    def __repr__(self) -> str:
        c = self.config
        return (f"Checkpoint({str(self.path)!r}, layers={c.num_hidden_layers}, "
                f"hidden={c.hidden_size}, vocab={c.vocab_size}, dtype={c.dtype}, "
                f"tokenizer={self.tokenizer is not None})")

    def names(self) -> list[str]:
        """The names of all tensors in the weights files, sorted.

        Example:
            >>> "model.norm.weight" in ckpt.names()  # doctest: +SKIP
            True
        """
        return sorted(self._files)

    def tensor(self, name: str) -> np.ndarray:
        """The tensor ``name`` as stored (dtype and shape), memory-mapped and read-only.

        Example:
            >>> ckpt.tensor("model.norm.weight").dtype  # doctest: +SKIP
            dtype(bfloat16)
        """
        if name not in self._files:
            raise CheckpointError(f"no tensor {name!r} in the checkpoint", path=self.path,
                                  key=name, hint="Checkpoint.names() lists the tensors")
        return self._files[name].array(name)

    def layer_tensors(self, i: int) -> dict[str, np.ndarray]:
        """The tensors of decoder layer ``i`` by short name: q_proj, k_proj, v_proj, o_proj,
        q_norm, k_norm, input_layernorm, post_attention_layernorm, gate_proj, up_proj,
        down_proj (projections as Hugging Face stores them, ``(out, in)``).

        Example:
            >>> sorted(ckpt.layer_tensors(0))[:3]  # doctest: +SKIP
            ['down_proj', 'gate_proj', 'input_layernorm']
        """
        layers = self.config.num_hidden_layers
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not 0 <= i < layers:
            raise IndexError(f"layer {i!r} out of range: the checkpoint has {layers} layers")
        return {short: self.tensor(layer_tensor_name(int(i), short)) for short in LAYER_TENSORS}

    def embedding(self) -> np.ndarray:
        """The token embedding, ``(vocab_size, hidden_size)``.

        Example:
            >>> ckpt.embedding().shape  # doctest: +SKIP
            (300, 96)
        """
        return self.tensor("model.embed_tokens.weight")

    def final_norm(self) -> np.ndarray:
        """The weight of the RMSNorm after the last layer, ``(hidden_size,)``.

        Example:
            >>> ckpt.final_norm().shape  # doctest: +SKIP
            (96,)
        """
        return self.tensor("model.norm.weight")

    def lm_head(self) -> np.ndarray:
        """The output projection, ``(vocab_size, hidden_size)``: the embedding itself when
        ``tie_word_embeddings`` is set, else ``lm_head.weight``.

        Example:
            >>> tied = load_checkpoint(tied_path)  # doctest: +SKIP
            >>> np.shares_memory(tied.lm_head(), tied.embedding())  # doctest: +SKIP
            True
        """
        if self.config.tie_word_embeddings:
            return self.embedding()
        return self.tensor("lm_head.weight")


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Load and check the Qwen3 checkpoint in directory ``path``.

    Raises :class:`CheckpointError` naming the file and what is wrong: not a directory, no
    or invalid ``config.json``, another architecture, a missing or bad key, no weights
    file, an index naming a missing shard, a missing or misshapen tensor, an unsupported
    dtype, an unreadable ``tokenizer.json``.

    Example:
        >>> ckpt = load_checkpoint("checkpoints/Qwen3-0.6B")  # doctest: +SKIP
        >>> ckpt.config.num_hidden_layers  # doctest: +SKIP
        28
    """
    path = _resolve(Path(path))
    config = read_config(path / "config.json")
    files = _weight_files(path)
    config = _check_tensors(path, config, files)
    tokenizer = _load_tokenizer(path, config)
    tok_config = read_tokenizer_config(path)
    generation = _generation_config(path)
    eos = _eos_ids(path, config, generation, tokenizer, tok_config)
    return Checkpoint(path, config, files, tokenizer, tok_config, generation, eos)


#: a Hugging Face hub id: owner/name
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")


def _resolve(path: Path) -> Path:
    """The checkpoint directory: ``path`` itself, or, for a hub id that is not a local
    path, its snapshot in the Hugging Face cache; else a CheckpointError that says
    how to get the files."""
    if path.is_dir():
        return path
    if path.exists():
        raise CheckpointError("is not a directory", path=path,
                              hint="pass the checkpoint directory (holding config.json)")
    text = str(path)
    if _HUB_ID.fullmatch(text):
        cached = hub_snapshot(text)
        if cached is not None:
            return cached
        name = text.split("/")[1]
        raise CheckpointError(
            "does not exist locally (tilelab.models reads checkpoint directories; it "
            "does not download)", path=path,
            hint=f"if {text!r} is a Hugging Face hub id, download it with "
                 f"`huggingface-cli download {text} --local-dir checkpoints/{name}` and "
                 f"pass checkpoints/{name}")
    raise CheckpointError("does not exist", path=path,
                          hint="pass the checkpoint directory (holding config.json)")


def hub_snapshot(repo_id: str) -> Path | None:
    """The snapshot directory of hub model ``repo_id`` in the local Hugging Face cache
    (``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``): the
    revision ``refs/main`` names, else the only snapshot; None when there is none with
    a ``config.json``.

    Example:
        >>> hub_snapshot("nobody/no-such-model") is None
        True
    """
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache",
                                                      "huggingface")
    root = Path(os.environ.get("HF_HUB_CACHE") or os.path.join(home, "hub"))
    repo = root / ("models--" + repo_id.replace("/", "--"))
    snapshots = repo / "snapshots"
    if not snapshots.is_dir():
        return None
    ref = repo / "refs" / "main"
    candidates = []
    if ref.is_file():
        candidates.append(snapshots / ref.read_text(encoding="utf-8").strip())
    found = [p for p in snapshots.iterdir() if p.is_dir()]
    if len(found) == 1:
        candidates.append(found[0])
    for c in candidates:
        if (c / "config.json").is_file():
            return c
    return None


def _weight_files(path: Path) -> dict[str, SafetensorsFile]:
    """Tensor name -> its file, from model.safetensors or the shards of the index."""
    if (path / SINGLE_FILE).is_file():
        f = SafetensorsFile(path / SINGLE_FILE)
        return {name: f for name in f.entries}
    if (path / INDEX_FILE).is_file():
        return _sharded_files(path / INDEX_FILE)
    present = sorted(p.name for p in path.iterdir())
    hint = "tilelab.models reads safetensors weights (save with save_pretrained)"
    if any(n.endswith((".bin", ".pt", ".pth")) for n in present):
        hint = ("the weights are in PyTorch pickle format; re-save them with "
                "model.save_pretrained(dir) (safetensors)")
    raise CheckpointError(f"no weights: neither {SINGLE_FILE} nor {INDEX_FILE} "
                          f"(found: {', '.join(present) or 'nothing'})", path=path, hint=hint)


def _sharded_files(index_path: Path) -> dict[str, SafetensorsFile]:
    try:
        index = json.loads(index_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"invalid JSON ({e})", path=index_path) from None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(
            isinstance(v, str) for v in weight_map.values()):
        raise CheckpointError("no 'weight_map' object mapping tensor names to shard files",
                              path=index_path, key="weight_map")
    shards: dict[str, SafetensorsFile] = {}
    files = {}
    for name, shard in sorted(weight_map.items()):
        if Path(shard).name != shard:
            raise CheckpointError(f"tensor {name!r} is in {shard!r}, which is not a file "
                                  "of the checkpoint directory", path=index_path, key=name)
        if shard not in shards:
            if not (index_path.parent / shard).is_file():
                raise CheckpointError(f"names the shard {shard!r} (for tensor {name!r}), "
                                      "which does not exist", path=index_path, key=name,
                                      hint="the download may be incomplete")
            shards[shard] = SafetensorsFile(index_path.parent / shard)
        if name not in shards[shard].entries:
            raise CheckpointError(f"maps tensor {name!r} to {shard!r}, which does not hold "
                                  "it", path=index_path, key=name)
        files[name] = shards[shard]
    return files


def _check_tensors(path: Path, config: Qwen3Config,
                   files: dict[str, SafetensorsFile]) -> Qwen3Config:
    """Every tensor the config implies is present, shaped and of a supported dtype; the
    config's dtype is the embedding's when config.json does not declare one. A
    quantized checkpoint is refused first, naming its format."""
    fmt = tensor_format(files, {n: f.entries[n].dtype for n, f in files.items()})
    if fmt is not None:
        raise CheckpointError(f"the weights are quantized: {fmt}; quantized checkpoints "
                              "are not supported", path=path, hint=QUANTIZED_HINT)
    for name, shape in config.weight_shapes().items():
        if name not in files:
            hint = ("set tie_word_embeddings in config.json if the output projection is "
                    "the embedding" if name == "lm_head.weight" else None)
            raise CheckpointError(f"missing tensor {name!r}", path=path, key=name, hint=hint)
        entry: TensorEntry = files[name].entries[name]
        if entry.shape != shape:
            raise CheckpointError(f"tensor {name!r} has shape {entry.shape}, expected {shape} "
                                  "from config.json", path=entry.file, key=name)
        if entry.dtype not in NUMPY_DTYPES:
            raise CheckpointError(f"tensor {name!r} has dtype {entry.dtype}, which is not "
                                  "supported", path=entry.file, key=name,
                                  hint="tilelab.models reads BF16, F16 and F32 weights")
    if not config.dtype:
        stored = files["model.embed_tokens.weight"].entries["model.embed_tokens.weight"]
        config = dataclasses.replace(config, dtype=_DTYPE_NAMES[stored.dtype])
    return config


def _load_tokenizer(path: Path, config: Qwen3Config):
    file = path / TOKENIZER_FILE
    if not file.is_file():
        return None
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(file))
    except Exception as e:  # tokenizers raises a bare Exception for bad files
        raise CheckpointError(f"cannot read the tokenizer ({e})", path=file) from None
    if tokenizer.get_vocab_size() > config.vocab_size:
        raise CheckpointError(f"the tokenizer has {tokenizer.get_vocab_size()} tokens, more "
                              f"than vocab_size {config.vocab_size} in config.json", path=file)
    return tokenizer


def _generation_config(path: Path) -> dict:
    file = path / GENERATION_CONFIG_FILE
    return read_json_object(file) if file.is_file() else {}


def _eos_ids(path: Path, config: Qwen3Config, generation: dict, tokenizer,
             tok_config: TokenizerConfig | None) -> tuple[int, ...]:
    """generation_config.json's eos_token_id, config.json's, the tokenizer's eos_token."""
    ids = list(token_ids(generation.get("eos_token_id"), config.vocab_size,
                         path=path / GENERATION_CONFIG_FILE, key="eos_token_id"))
    ids += config.eos_token_ids
    eos = tok_config.special_tokens.get("eos_token") if tok_config else None
    if eos is not None and tokenizer is not None:
        tid = tokenizer.token_to_id(eos)
        if tid is None:
            raise CheckpointError(f"eos_token {eos!r} is not a token of tokenizer.json",
                                  path=path / "tokenizer_config.json", key="eos_token")
        ids.append(int(tid))
    return tuple(dict.fromkeys(ids))
