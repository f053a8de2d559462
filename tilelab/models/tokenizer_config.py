"""What a checkpoint says about its tokenizer beyond ``tokenizer.json``: the chat
template and the named special tokens (``tokenizer_config.json``, ``chat_template.jinja``),
and the generation defaults' end-of-sequence ids (``generation_config.json``).

Hugging Face keeps a chat model's prompt format as a Jinja template: in
``tokenizer_config.json``'s ``chat_template`` (a string, or a list of named templates of
which ``default`` is used), or, as transformers 4.43 and later save it, in a
``chat_template.jinja`` file next to it, which wins when both exist. The named special
tokens (``bos_token``, ``eos_token``, ``pad_token``, ...) are strings or serialized
``AddedToken`` objects (``{"content": "<|im_end|>", ...}``); templates read them by
name, and the tokenizer's ``eos_token`` is one of the ids generation stops at.

Every file is optional; a file that is there but unreadable, or a value of the wrong
type, raises :class:`~tilelab.models.errors.CheckpointError` naming the file and key.

Example:
    >>> cfg = read_tokenizer_config("checkpoints/Qwen3-0.6B")       # doctest: +SKIP
    >>> cfg.special_tokens["eos_token"]                              # doctest: +SKIP
    '<|im_end|>'
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import CheckpointError

__all__ = ["TokenizerConfig", "read_tokenizer_config", "read_json_object",
           "SPECIAL_TOKEN_NAMES", "TOKENIZER_CONFIG_FILE", "CHAT_TEMPLATE_FILE",
           "GENERATION_CONFIG_FILE"]

TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
CHAT_TEMPLATE_FILE = "chat_template.jinja"
GENERATION_CONFIG_FILE = "generation_config.json"
#: the named special tokens a chat template sees (transformers' special_tokens_map)
SPECIAL_TOKEN_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                       "cls_token", "mask_token")


@dataclass(frozen=True)
class TokenizerConfig:
    """The chat template (None without one) and the named special tokens that are set
    (name -> text), read from a checkpoint directory.

    Example:
        >>> TokenizerConfig(None, {"eos_token": "<|im_end|>"}).special_tokens["eos_token"]
        '<|im_end|>'
    """

    chat_template: str | None
    special_tokens: dict[str, str] = field(default_factory=dict)
    #: the file the template came from (for error messages), None without one
    template_file: Path | None = None


def read_json_object(file: Path) -> dict[str, Any]:
    """A JSON file whose top level is an object, or a located :class:`CheckpointError`.

    Example:
        >>> read_json_object(Path("ckpt/generation_config.json"))   # doctest: +SKIP
        {'eos_token_id': [151645, 151643], ...}
    """
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise CheckpointError(f"invalid JSON at line {e.lineno}, column {e.colno}: "
                              f"{e.msg}", path=file) from None
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise CheckpointError(f"unreadable JSON ({e})", path=file) from None
    if not isinstance(raw, dict):
        raise CheckpointError(f"the top level must be a JSON object, not "
                              f"{type(raw).__name__}", path=file)
    return raw


def read_tokenizer_config(path: str | Path) -> TokenizerConfig | None:
    """The :class:`TokenizerConfig` of checkpoint directory ``path``, or None when it has
    neither ``tokenizer_config.json`` nor ``chat_template.jinja``.

    Example:
        >>> read_tokenizer_config("/nonexistent") is None
        True
    """
    path = Path(path)
    file, jinja = path / TOKENIZER_CONFIG_FILE, path / CHAT_TEMPLATE_FILE
    if not file.is_file() and not jinja.is_file():
        return None
    raw = read_json_object(file) if file.is_file() else {}
    template, source = _template(raw, file), file
    if jinja.is_file():
        try:
            template, source = jinja.read_text(encoding="utf-8"), jinja
        except UnicodeDecodeError as e:
            raise CheckpointError(f"not UTF-8 text ({e.reason})", path=jinja) from None
    special = {}
    for name in SPECIAL_TOKEN_NAMES:
        text = _token_text(raw.get(name), file, name)
        if text is not None:
            special[name] = text
    return TokenizerConfig(template, special, source if template is not None else None)


def _template(raw: dict[str, Any], file: Path) -> str | None:
    value = raw.get("chat_template")
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):          # named templates: [{"name": ..., "template": ...}]
        named = {t.get("name"): t.get("template") for t in value if isinstance(t, dict)}
        chosen = named.get("default")
        if isinstance(chosen, str):
            return chosen
        raise CheckpointError(f"chat_template lists templates named {sorted(map(str, named))} "
                              "but none named 'default'", path=file, key="chat_template")
    raise CheckpointError(f"chat_template must be a string or a list of named templates, "
                          f"not {type(value).__name__}", path=file, key="chat_template")


def _token_text(value: Any, file: Path, key: str) -> str | None:
    """A special token's text: a string, or a serialized AddedToken's ``content``."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    raise CheckpointError(f"{key} must be a string or an object with a 'content' string, "
                          f"not {value!r}", path=file, key=key)
