"""``tilelab generate``: greedy (or sampled) decoding of a Qwen3 checkpoint from the shell.

The arguments are declared in :mod:`tilelab.cli` (so that building the parser imports
nothing of tilelab.models); :func:`run_generate` does the work::

    tilelab generate --model checkpoints/Qwen3-0.6B --prompt "The capital of France is" \\
        --max-new-tokens 16 --device gpu
    tilelab generate --model ckpt --ids 1,2,3 --max-new-tokens 8 --temperature 0.7 --seed 1

It prints the new token ids (comma-separated, as ``--ids`` takes them), the decoded text
when the checkpoint has a ``tokenizer.json``, and the decoding speed. Bad input (a
checkpoint that does not load, ids that are not in the vocabulary, a text prompt without a
tokenizer, a non-positive token count) prints one ``tilelab generate: error: ...`` line
and exits with status 2; another tilelab error while running exits with status 1.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from typing import TextIO

from tilelab.errors import TilelabError

from .errors import CheckpointError, GenerateInputError

__all__ = ["run_generate", "parse_ids", "generate_command"]


def run_generate(ns: argparse.Namespace, out: TextIO | None = None,
                 err: TextIO | None = None) -> int:
    """Run ``tilelab generate`` for parsed arguments; the exit status.

    Example:
        >>> from tilelab.cli import build_parser
        >>> ns = build_parser().parse_args(["generate", "--model", "/nonexistent",
        ...                                 "--ids", "1,2", "--max-new-tokens", "4"])
        >>> import sys
        >>> run_generate(ns, err=sys.stdout)
        tilelab generate: error: /nonexistent: does not exist (hint: pass the checkpoint directory (holding config.json))
        2
    """
    out, err = out or sys.stdout, err or sys.stderr
    try:
        generate_command(ns.model, ids=ns.ids, prompt=ns.prompt,
                         max_new_tokens=ns.max_new_tokens, temperature=ns.temperature,
                         device=ns.device, seed=ns.seed, out=out)
    except (CheckpointError, GenerateInputError) as e:
        print(f"tilelab generate: error: {_one_line(e)}", file=err)
        return 2
    except TilelabError as e:
        print(f"tilelab generate: error: {_one_line(e)}", file=err)
        return 1
    return 0


def generate_command(model: str, *, ids: str | None = None, prompt: str | None = None,
                     max_new_tokens: int, temperature: float = 0.0, device: str | None = None,
                     seed: int = 0, out: TextIO) -> list[int]:
    """Load ``model``, decode ``max_new_tokens`` tokens after the prompt, print the result
    to ``out`` and return the new ids. Exactly one of ``ids`` ("1,2,3") and ``prompt``.

    Example:
        >>> generate_command("ckpt", ids="1,2,3", max_new_tokens=4,
        ...                  out=sys.stdout)  # doctest: +SKIP
        new ids: 17,250,3,99
        4 new tokens in 0.21 s: 19.0 tok/s (prompt of 3 tokens, device cpu)
    """
    from .checkpoint import load_checkpoint

    _check_settings(max_new_tokens, temperature)
    ckpt = load_checkpoint(model)
    prompt_ids = _prompt_ids(ckpt, ids, prompt)
    limit = ckpt.config.max_position_embeddings
    if len(prompt_ids) + max_new_tokens > limit:
        raise GenerateInputError(
            f"{len(prompt_ids)} prompt tokens + {max_new_tokens} new tokens exceed the "
            f"model's {limit} positions (max_position_embeddings)",
            hint="use a shorter prompt or fewer --max-new-tokens")
    from tilelab.models import Qwen3

    # a KV cache of exactly the prompt plus the new tokens (the engine needs at least 2)
    engine = Qwen3.from_pretrained(model, device=device,
                                   max_tokens=max(2, len(prompt_ids) + max_new_tokens))
    start = time.perf_counter()
    new = list(engine.generate(prompt_ids, max_new_tokens=max_new_tokens,
                               temperature=temperature, seed=seed))
    seconds = time.perf_counter() - start
    print(f"new ids: {','.join(str(t) for t in new)}", file=out)
    if ckpt.tokenizer is not None:
        print(f"text: {ckpt.tokenizer.decode(new)}", file=out)
    rate = len(new) / seconds if seconds > 0 else float("inf")
    print(f"{len(new)} new tokens in {seconds:.2f} s: {rate:.1f} tok/s (prompt of "
          f"{len(prompt_ids)} tokens, device {getattr(engine, 'device', device)})", file=out)
    return new


def parse_ids(text: str, vocab_size: int | None = None) -> list[int]:
    """The token ids of ``--ids``: comma-separated non-negative integers, each below
    ``vocab_size`` when it is given.

    Example:
        >>> parse_ids("1, 2,3")
        [1, 2, 3]
        >>> parse_ids("1,x")
        Traceback (most recent call last):
        ...
        tilelab.models.errors.GenerateInputError: --ids: 'x' is not a token id (a non-negative integer)
        hint: write the ids comma-separated, e.g. --ids 1,2,3
    """
    hint = "write the ids comma-separated, e.g. --ids 1,2,3"
    parts = [p.strip() for p in text.split(",")]
    if not text.strip():
        raise GenerateInputError("--ids is empty: the prompt needs at least one token",
                                 hint=hint)
    ids = []
    for part in parts:
        if not part.isdigit():
            raise GenerateInputError(f"--ids: {part!r} is not a token id (a non-negative "
                                     "integer)", hint=hint)
        ids.append(int(part))
    if vocab_size is not None:
        bad = [i for i in ids if i >= vocab_size]
        if bad:
            raise GenerateInputError(f"--ids: token id {bad[0]} is outside the vocabulary "
                                     f"(vocab_size {vocab_size}: ids 0 to {vocab_size - 1})")
    return ids


def _check_settings(max_new_tokens: int, temperature: float) -> None:
    if max_new_tokens < 1:
        raise GenerateInputError(f"--max-new-tokens must be at least 1, not {max_new_tokens}")
    if not math.isfinite(temperature) or temperature < 0:
        raise GenerateInputError(f"--temperature must be 0 (greedy) or positive, not "
                                 f"{temperature}")


def _prompt_ids(ckpt, ids: str | None, prompt: str | None) -> list[int]:
    if (ids is None) == (prompt is None):
        raise GenerateInputError("give exactly one of --ids and --prompt")
    if ids is not None:
        return parse_ids(ids, ckpt.config.vocab_size)
    if ckpt.tokenizer is None:
        raise GenerateInputError(f"--prompt needs a tokenizer, and {ckpt.path} has no "
                                 "tokenizer.json", hint="pass token ids with --ids 1,2,3")
    encoded = ckpt.tokenizer.encode(prompt).ids
    if not encoded:
        raise GenerateInputError(f"--prompt {prompt!r} encodes to no tokens",
                                 hint="give a non-empty prompt")
    return list(encoded)


def _one_line(e: TilelabError) -> str:
    text = " ".join(e.message.split())
    return f"{text} (hint: {' '.join(e.hint.split())})" if e.hint else text

