"""The configuration of a Qwen3 checkpoint, parsed from its Hugging Face ``config.json``.

Both layouts that transformers writes are read: 4.x (top-level ``rope_theta``,
``torch_dtype``) and 5.x (``rope_parameters: {"rope_type": "default", "rope_theta": ...}``,
``dtype``). Keys that Hugging Face treats as optional take Hugging Face's defaults for
Qwen3; every other problem raises :class:`~tilelab.models.errors.CheckpointError` naming
the file and the key. Every number the engine uses must lie in its range
(:mod:`~tilelab.models.config_check`): JSON's ``Infinity``, ``NaN`` and out-of-range
values are refused here, with the value and the range, instead of loading and then
producing NaN logits or one constant token.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config_check import RULES, field_problem
from .errors import CheckpointError
from .quantized import QUANTIZED_HINT, quantization_problem

__all__ = ["Qwen3Config", "parse_config", "read_config", "DTYPES", "token_ids"]

DTYPES = ("bfloat16", "float16", "float32")
ARCHITECTURE = "Qwen3ForCausalLM"
MODEL_TYPE = "qwen3"
# Hugging Face's Qwen3Config defaults for the keys a config.json may leave out
_DEFAULTS = {"rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": 32768,
             "tie_word_embeddings": False}


@dataclass(frozen=True)
class Qwen3Config:
    """The shape and numerics of a Qwen3 model (the keys of ``config.json`` it uses).

    ``dtype`` is the declared weight dtype: ``"bfloat16"``, ``"float16"`` or ``"float32"``;
    ``eos_token_ids`` the ids of ``config.json``'s ``eos_token_id`` (one id or a list;
    empty when it has none), each inside the vocabulary.

    Example:
        >>> c = Qwen3Config(vocab_size=300, hidden_size=96, intermediate_size=160,
        ...                 num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        ...                 head_dim=16, rms_norm_eps=1e-6, rope_theta=10000.0,
        ...                 max_position_embeddings=512, tie_word_embeddings=False,
        ...                 dtype="bfloat16")
        >>> c.weight_shapes()["model.layers.0.self_attn.k_proj.weight"]
        (32, 96)
    """

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    tie_word_embeddings: bool
    dtype: str
    eos_token_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        """Every field in its range, however the config was made (``parse_config``
        checks the same and names the file)."""
        for name in RULES:
            problem = field_problem(name, getattr(self, name))
            if problem is not None:
                raise CheckpointError(f"Qwen3Config: {problem}", key=name)
        if self.num_attention_heads % self.num_key_value_heads:
            raise CheckpointError(f"Qwen3Config: num_attention_heads "
                                  f"({self.num_attention_heads}) is not a multiple of "
                                  f"num_key_value_heads ({self.num_key_value_heads})",
                                  key="num_key_value_heads")
        bad = [t for t in self.eos_token_ids if not 0 <= t < self.vocab_size]
        if bad:
            raise CheckpointError(f"Qwen3Config: eos token id {bad[0]} is outside the "
                                  f"vocabulary (0..{self.vocab_size - 1})",
                                  key="eos_token_id")

    def weight_shapes(self) -> dict[str, tuple[int, ...]]:
        """The Hugging Face tensor names of the model and the shape each must have
        (``lm_head.weight`` only when the embeddings are not tied).

        Example:
            >>> config.weight_shapes()["model.embed_tokens.weight"]  # doctest: +SKIP
            (300, 96)
        """
        h, q, kv = self.hidden_size, self.num_attention_heads * self.head_dim, \
            self.num_key_value_heads * self.head_dim
        shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (self.vocab_size, h),
                                              "model.norm.weight": (h,)}
        if not self.tie_word_embeddings:
            shapes["lm_head.weight"] = (self.vocab_size, h)
        for i in range(self.num_hidden_layers):
            for short, shape in _layer_shapes(self, q, kv).items():
                shapes[layer_tensor_name(i, short)] = shape
        return shapes


# short name -> where it lives inside model.layers.{i}
LAYER_TENSORS = {
    "q_proj": "self_attn.q_proj", "k_proj": "self_attn.k_proj", "v_proj": "self_attn.v_proj",
    "o_proj": "self_attn.o_proj", "q_norm": "self_attn.q_norm", "k_norm": "self_attn.k_norm",
    "input_layernorm": "input_layernorm", "post_attention_layernorm": "post_attention_layernorm",
    "gate_proj": "mlp.gate_proj", "up_proj": "mlp.up_proj", "down_proj": "mlp.down_proj",
}


def layer_tensor_name(layer: int, short: str) -> str:
    """The Hugging Face name of a layer's tensor.

    Example:
        >>> layer_tensor_name(3, "gate_proj")
        'model.layers.3.mlp.gate_proj.weight'
    """
    return f"model.layers.{layer}.{LAYER_TENSORS[short]}.weight"


def _layer_shapes(c: Qwen3Config, q: int, kv: int) -> dict[str, tuple[int, ...]]:
    h, f = c.hidden_size, c.intermediate_size
    return {"q_proj": (q, h), "k_proj": (kv, h), "v_proj": (kv, h), "o_proj": (h, q),
            "q_norm": (c.head_dim,), "k_norm": (c.head_dim,), "input_layernorm": (h,),
            "post_attention_layernorm": (h,), "gate_proj": (f, h), "up_proj": (f, h),
            "down_proj": (h, f)}


def read_config(path: str | Path) -> Qwen3Config:
    """Read and check ``config.json`` (the file itself, or the directory holding it).

    Example:
        >>> read_config("checkpoints/Qwen3-0.6B").num_hidden_layers  # doctest: +SKIP
        28
    """
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise CheckpointError("no config.json", path=path.parent,
                              hint="point at a Hugging Face checkpoint directory (the one "
                                   "holding config.json and the *.safetensors files)")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise CheckpointError(f"invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}",
                              path=path) from None
    except UnicodeDecodeError as e:
        raise CheckpointError(f"not UTF-8 text ({e.reason})", path=path) from None
    except (ValueError, RecursionError) as e:  # an int past Python's digit limit; nesting
        raise CheckpointError(f"unreadable JSON ({e})", path=path) from None
    return parse_config(raw, path=path)


def parse_config(raw: Any, *, path: str | Path = "config.json") -> Qwen3Config:
    """Check a loaded ``config.json`` (a dict) and make a :class:`Qwen3Config`.

    Example:
        >>> parse_config({"model_type": "llama"}, path="c/config.json")
        Traceback (most recent call last):
        ...
        tilelab.models.errors.CheckpointError: c/config.json: model_type is 'llama', not 'qwen3'
        hint: tilelab.models loads Qwen3 checkpoints (Qwen3ForCausalLM) only
    """
    if not isinstance(raw, dict):
        raise CheckpointError(f"the top level must be a JSON object, not {type(raw).__name__}",
                              path=path)
    _check_architecture(raw, path)
    quantized = quantization_problem(raw)
    if quantized is not None:
        raise CheckpointError(quantized, path=path, key="quantization_config",
                              hint=QUANTIZED_HINT)
    cfg = _Reader(raw, path)
    hidden, heads = cfg.field("hidden_size"), cfg.field("num_attention_heads")
    kv_heads = cfg.field("num_key_value_heads", default=heads)
    if heads % kv_heads:
        raise CheckpointError(f"num_attention_heads ({heads}) is not a multiple of "
                              f"num_key_value_heads ({kv_heads})", path=path,
                              key="num_key_value_heads")
    if "head_dim" not in raw and hidden % heads:
        raise CheckpointError(f"no head_dim, and hidden_size ({hidden}) is not a multiple "
                              f"of num_attention_heads ({heads})", path=path, key="head_dim")
    _check_unsupported(raw, path)
    return Qwen3Config(
        vocab_size=cfg.field("vocab_size"), hidden_size=hidden,
        intermediate_size=cfg.field("intermediate_size"),
        num_hidden_layers=cfg.field("num_hidden_layers"),
        num_attention_heads=heads, num_key_value_heads=kv_heads,
        head_dim=cfg.field("head_dim", default=hidden // heads),
        rms_norm_eps=cfg.field("rms_norm_eps"),
        rope_theta=_rope_theta(raw, cfg, path),
        max_position_embeddings=cfg.field("max_position_embeddings"),
        tie_word_embeddings=cfg.boolean("tie_word_embeddings"),
        dtype=_dtype(raw, path),
        eos_token_ids=token_ids(raw.get("eos_token_id"), cfg.field("vocab_size"),
                                path=path, key="eos_token_id"))


class _Reader:
    """Typed access to config keys with located errors."""

    def __init__(self, raw: dict, path):
        self.raw, self.path = raw, path

    def _get(self, key: str, default: Any):
        if key in self.raw and self.raw[key] is not None:
            return self.raw[key]
        if default is not None:
            return default
        if key in _DEFAULTS:
            return _DEFAULTS[key]
        raise CheckpointError(f"missing key {key!r}", path=self.path, key=key,
                              hint="a Qwen3 config.json written by transformers has it")

    def field(self, key: str, default: Any = None, *, value: Any = None,
              name: str | None = None) -> Any:
        """The value of the numeric field ``key`` (or ``value``, read elsewhere, printed
        as ``name``), checked against its range (:mod:`~tilelab.models.config_check`)."""
        value = self._get(key, default) if value is None else value
        problem = field_problem(key, value, key=name)
        if problem is not None:
            raise CheckpointError(problem, path=self.path, key=name or key)
        return float(value) if RULES[key].kind == "number" else value

    def boolean(self, key: str) -> bool:
        value = self._get(key, None)
        if not isinstance(value, bool):
            raise CheckpointError(f"{key} must be true or false, not {value!r}",
                                  path=self.path, key=key)
        return value


def _check_architecture(raw: dict, path) -> None:
    hint = f"tilelab.models loads Qwen3 checkpoints ({ARCHITECTURE}) only"
    if "model_type" not in raw:
        raise CheckpointError("missing key 'model_type'", path=path, key="model_type",
                              hint=hint)
    if raw["model_type"] != MODEL_TYPE:
        raise CheckpointError(f"model_type is {raw['model_type']!r}, not {MODEL_TYPE!r}",
                              path=path, key="model_type", hint=hint)
    archs = raw.get("architectures")
    if archs is not None and (not isinstance(archs, list) or ARCHITECTURE not in archs):
        raise CheckpointError(f"architectures is {archs!r}, which does not include "
                              f"{ARCHITECTURE!r}", path=path, key="architectures", hint=hint)


def _check_unsupported(raw: dict, path) -> None:
    """Features of the Qwen3 config family that the engine does not implement."""
    checks = [
        ("hidden_act", raw.get("hidden_act", "silu") == "silu", "the activation must be 'silu'"),
        ("attention_bias", raw.get("attention_bias") in (None, False),
         "attention with bias terms is not supported"),
        ("use_sliding_window", raw.get("use_sliding_window") in (None, False),
         "sliding-window attention is not supported"),
        ("layer_types", all(t == "full_attention" for t in raw.get("layer_types") or ()),
         "only 'full_attention' layers are supported"),
    ]
    for key, ok, what in checks:
        if not ok:
            raise CheckpointError(f"{key} is {raw.get(key)!r}: {what}", path=path, key=key)


def token_ids(value: Any, vocab_size: int, *, path: str | Path,
              key: str) -> tuple[int, ...]:
    """The token ids of a config key that holds one id, a list of ids or null (as
    ``eos_token_id`` in ``config.json`` and ``generation_config.json``), each an
    integer inside the vocabulary; a located :class:`CheckpointError` otherwise.

    Example:
        >>> token_ids([5, 7], 300, path="c.json", key="eos_token_id")
        (5, 7)
        >>> token_ids(None, 300, path="c.json", key="eos_token_id")
        ()
        >>> token_ids(300, 300, path="c.json", key="eos_token_id")
        Traceback (most recent call last):
        ...
        tilelab.models.errors.CheckpointError: c.json: eos_token_id is 300: a token id must be an integer from 0 to 299
    """
    if value is None:
        return ()
    values = value if isinstance(value, list) else [value]
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < vocab_size:
            raise CheckpointError(f"{key} is {value!r}: a token id must be an integer "
                                  f"from 0 to {vocab_size - 1}", path=path, key=key)
    return tuple(dict.fromkeys(values))


def _rope_theta(raw: dict, cfg: _Reader, path) -> float:
    params = raw.get("rope_parameters")
    if params is None:  # transformers 4.x: top-level rope_theta, scaling in rope_scaling
        scaling = raw.get("rope_scaling")
        if scaling is not None:
            kind = scaling.get("rope_type", scaling.get("type")) if isinstance(scaling, dict) \
                else scaling
            if kind != "default":
                raise CheckpointError(f"rope_scaling is {scaling!r}: only the default RoPE "
                                      "is supported", path=path, key="rope_scaling")
        return cfg.field("rope_theta")
    if not isinstance(params, dict):
        raise CheckpointError(f"rope_parameters must be an object, not {params!r}", path=path,
                              key="rope_parameters")
    if params.get("rope_type", "default") != "default":
        raise CheckpointError(f"rope_parameters.rope_type is {params['rope_type']!r}: only "
                              "'default' RoPE is supported", path=path, key="rope_parameters")
    theta = params.get("rope_theta", raw.get("rope_theta", _DEFAULTS["rope_theta"]))
    return cfg.field("rope_theta", value=theta, name="rope_parameters.rope_theta")


def _dtype(raw: dict, path) -> str:
    key = "dtype" if raw.get("dtype") is not None else "torch_dtype"
    value = raw.get(key)
    if value is None:
        return ""  # not declared: load_checkpoint takes the stored weights' dtype
    if value not in DTYPES:
        raise CheckpointError(f"{key} is {value!r}: unsupported dtype", path=path, key=key,
                              hint=f"tilelab.models reads {', '.join(DTYPES)} checkpoints")
    return value
