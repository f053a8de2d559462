"""``tilelab generate`` and ``tilelab chat``: a Qwen3 checkpoint from the shell.

The arguments are declared here (:func:`add_generate_arguments`,
:func:`add_chat_arguments`) by functions that import nothing heavy, so that
:mod:`tilelab.cli` builds its parser without loading the engine;
``python -m tilelab.models`` (:mod:`tilelab.models.__main__`) runs the same two commands.
:func:`run_generate` and :func:`run_chat` (:mod:`tilelab.models.cli_chat`, which builds
on this module's settings and engine loading) do the work::

    tilelab generate --model checkpoints/Qwen3-0.6B --prompt "The capital of France is"
    echo "Explain tiles." | tilelab generate --model ckpt --chat --no-think
    tilelab generate --model ckpt --ids 1,2,3 --max-new-tokens 8 --show-ids --ignore-eos
    tilelab generate --model ckpt --prompt "Once" --temperature 0.7 --top-p 0.9 --seed 1
    tilelab chat --model checkpoints/Qwen3-0.6B --system "Be brief."

``generate`` prints the new text to stdout as the tokens come (decoded across token
boundaries; without a tokenizer, the new ids), and the speed report to stderr (load,
first run, prefill and time to first token, decode, and on a GPU the bandwidth against
the card's roof). The prompt comes from ``--prompt``, ``--prompt-file``, ``--ids`` or,
when none is given (or ``--prompt -``), stdin. Bad input (a checkpoint that does not
load, a quantized one, ids outside the vocabulary, a prompt past ``--max-seq-len``)
prints one ``tilelab generate: error: ...`` line and exits with status 2; another
tilelab error while running exits with status 1.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any, TextIO

from tilelab.errors import TilelabError

from .errors import CheckpointError, GenerateInputError

__all__ = ["run_generate", "parse_ids", "add_generate_arguments", "add_chat_arguments",
           "add_engine_arguments", "DEFAULT_NEW_TOKENS",
           "DEFAULT_CHAT_CONTEXT", "load_engine", "one_line", "check_settings",
           "generate_command", "sampling_settings"]

#: --max-new-tokens when none is given
DEFAULT_NEW_TOKENS = 256
#: tilelab chat's --max-seq-len when none is given (capped by the model's positions)
DEFAULT_CHAT_CONTEXT = 4096


def add_engine_arguments(p: argparse.ArgumentParser, *, new_tokens: int) -> None:
    """The arguments ``generate`` and ``chat`` share: the model, the device, the
    context, the token budget, sampling and stopping.

    Example:
        >>> p = argparse.ArgumentParser(); add_engine_arguments(p, new_tokens=8)
        >>> p.parse_args(["--model", "m"]).max_new_tokens
        8
    """
    p.add_argument("--model", required=True,
                   help="checkpoint directory (or a hub id found in the Hugging Face cache)")
    p.add_argument("--device", choices=("cpu", "gpu"), default=None,
                   help="backend (default: the GPU when there is one, else the CPU)")
    p.add_argument("--max-new-tokens", type=int, default=new_tokens,
                   help=f"most tokens to generate per reply (default {new_tokens})")
    p.add_argument("--max-seq-len", type=int, default=None,
                   help="context: prompt plus new tokens, the KV cache's size")
    p.add_argument("--temperature", type=float, default=None,
                   help="0 decodes greedily, above 0 samples (default: the checkpoint's "
                        "generation_config.json, else greedy)")
    p.add_argument("--greedy", action="store_true", help="decode greedily (--temperature 0)")
    for flag, kind, what in (("--top-k", int, "keep the K most likely tokens (0: off)"),
                             ("--top-p", float, "nucleus: keep tokens up to this mass"),
                             ("--min-p", float, "keep tokens at least this times the top "
                                                "one's probability"),
                             ("--repetition-penalty", float, "penalize tokens seen (1: off)"),
                             ("--presence-penalty", float, "penalize tokens generated "
                                                           "(0: off)")):
        p.add_argument(flag, type=kind, default=None,
                       help=f"{what} (default: the checkpoint's generation config)")
    p.add_argument("--seed", type=int, default=None, help="seed of the sampling (default 0)")
    p.add_argument("--stop", action="append", default=[], metavar="TEXT",
                   help="stop when the text contains TEXT (repeatable)")
    p.add_argument("--ignore-eos", action="store_true",
                   help="do not stop at end-of-sequence tokens (benchmarks)")
    p.add_argument("--check-every", type=int, default=1, metavar="N",
                   help="decode steps between token read-backs (default 1)")
    p.add_argument("--no-warmup", action="store_true",
                   help="skip the first run that compiles the kernels before timing")
    think = p.add_mutually_exclusive_group()
    think.add_argument("--think", dest="enable_thinking", action="store_const", const=True,
                       default=None, help="chat template: enable_thinking=True")
    think.add_argument("--no-think", dest="enable_thinking", action="store_const",
                       const=False, help="chat template: enable_thinking=False")
    p.add_argument("--system", default=None, help="system prompt (chat)")


def add_generate_arguments(p: argparse.ArgumentParser) -> None:
    """Declare ``generate``'s arguments on ``p``.

    Example:
        >>> p = argparse.ArgumentParser(); add_generate_arguments(p)
        >>> p.parse_args(["--model", "m", "--ids", "1,2"]).ids
        '1,2'
    """
    add_engine_arguments(p, new_tokens=DEFAULT_NEW_TOKENS)
    prompt = p.add_mutually_exclusive_group()
    prompt.add_argument("--ids", help="prompt token ids, comma-separated: 1,2,3")
    prompt.add_argument("--prompt", help="prompt text ('-': read it from stdin)")
    prompt.add_argument("--prompt-file", help="read the prompt text from this file")
    p.add_argument("--chat", action="store_true",
                   help="send the prompt as a user message through the chat template")
    p.add_argument("--show-ids", action="store_true",
                   help="also print the new token ids (comma-separated, as --ids takes)")


def add_chat_arguments(p: argparse.ArgumentParser) -> None:
    """Declare ``chat``'s arguments on ``p``.

    Example:
        >>> p = argparse.ArgumentParser(); add_chat_arguments(p)
        >>> p.parse_args(["--model", "m", "--system", "Be brief."]).system
        'Be brief.'
    """
    add_engine_arguments(p, new_tokens=512)


def run_generate(ns: argparse.Namespace, out: TextIO | None = None,
                 err: TextIO | None = None, inp: TextIO | None = None) -> int:
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
    out, err, inp = out or sys.stdout, err or sys.stderr, inp or sys.stdin
    try:
        generate_command(ns, out=out, err=err, inp=inp)
    except (CheckpointError, GenerateInputError) as e:
        print(f"tilelab generate: error: {one_line(e)}", file=err)
        return 2
    except TilelabError as e:
        print(f"tilelab generate: error: {one_line(e)}", file=err)
        return 1
    return 0


def load_engine(ns: argparse.Namespace, *, context: int | None) -> tuple[Any, float]:
    """The engine for ``--model``/``--device`` with a context of ``context`` positions
    (None: the default), and the seconds loading took.

    Example:
        >>> load_engine(ns, context=64)                                  # doctest: +SKIP
        (Qwen3(layers=2, ...), 0.41)
    """
    from tilelab.models import Qwen3

    t0 = time.perf_counter()
    engine = Qwen3.from_pretrained(ns.model, device=ns.device, max_seq_len=context)
    return engine, time.perf_counter() - t0


def generate_command(ns: argparse.Namespace, *, out: TextIO, err: TextIO,
                     inp: TextIO) -> list[int]:
    """Load ``ns.model``, generate after the prompt, stream the text to ``out`` and the
    report to ``err``; the new ids.

    Example:
        >>> generate_command(ns, out=sys.stdout, err=sys.stderr,
        ...                  inp=sys.stdin)                            # doctest: +SKIP
        [17, 250, 3, 99]
    """
    from .checkpoint import load_checkpoint
    from .generation import warm_up

    check_settings(ns)
    t0 = time.perf_counter()
    ckpt = load_checkpoint(ns.model)
    prompt_ids = _prompt_ids(ns, ckpt, inp)
    context = ns.max_seq_len
    if context is None:      # just the prompt and the new tokens (at least 2 positions)
        limit = ckpt.config.max_position_embeddings
        context = max(2, min(len(prompt_ids) + ns.max_new_tokens, limit))
    engine, _ = load_engine(ns, context=context)
    load_s = time.perf_counter() - t0         # the checkpoint's files and the engine
    engine._fits(len(prompt_ids), ns.max_new_tokens)
    sampling = sampling_settings(ns, engine)
    first = None if ns.no_warmup else warm_up(engine, prompt_ids, sampling=sampling)
    s = engine.stream(prompt_ids, ns.max_new_tokens, sampling=sampling,
                      stop_strings=ns.stop, ignore_eos=ns.ignore_eos,
                      check_every=ns.check_every)
    text = engine.tokenizer is not None
    for piece in s:
        if text and piece.text:
            out.write(piece.text)
            out.flush()
    if text:
        out.write("\n")
    if ns.show_ids or not text:
        print(f"ids: {','.join(str(t) for t in s.tokens)}", file=out)
    out.flush()
    s.speed.load_s, s.speed.first_run_s = load_s, first
    print(f"{len(s.tokens)} new tokens, stopped by {_reason(s.finish_reason)} (device "
          f"{s.speed.device})", file=err)
    for line in s.speed.lines():
        print(line, file=err)
    return s.tokens


def sampling_settings(ns: argparse.Namespace, engine: Any) -> Any:
    """The :class:`~tilelab.models.sampling.SamplingParams` of the command line: the
    checkpoint's defaults (``engine.sampling_defaults``, else greedy) with the given
    ``--temperature``/``--greedy``, ``--top-k``, ``--top-p``, ``--min-p``, penalties and
    ``--seed`` in their place.

    Example:
        >>> sampling_settings(ns, engine)                                # doctest: +SKIP
        SamplingParams(temperature=0.6, top_k=20, top_p=0.95, ...)
    """
    from .sampling import SamplingParams

    base = engine.sampling_defaults or SamplingParams.greedy()
    given = {"temperature": 0.0 if ns.greedy else ns.temperature, "top_k": ns.top_k,
             "top_p": ns.top_p, "min_p": ns.min_p,
             "repetition_penalty": ns.repetition_penalty,
             "presence_penalty": ns.presence_penalty, "seed": ns.seed}
    changes = {k: v for k, v in given.items() if v is not None}
    return base.replace(**changes) if changes else base


def _reason(reason: str | None) -> str:
    return {"eos": "an end-of-sequence token", "stop": "a stop string",
            "length": "--max-new-tokens"}.get(reason or "", str(reason))


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


def check_settings(ns: argparse.Namespace) -> None:
    """The numeric arguments in range (a :class:`GenerateInputError` otherwise).

    Example:
        >>> check_settings(argparse.Namespace(max_new_tokens=0))
        Traceback (most recent call last):
        ...
        tilelab.models.errors.GenerateInputError: --max-new-tokens must be at least 1, not 0
    """
    import math

    if ns.max_new_tokens < 1:
        raise GenerateInputError(f"--max-new-tokens must be at least 1, not "
                                 f"{ns.max_new_tokens}")
    if ns.temperature is not None and (not math.isfinite(ns.temperature)
                                       or ns.temperature < 0):
        raise GenerateInputError(f"--temperature must be 0 (greedy) or positive, not "
                                 f"{ns.temperature}")
    if ns.max_seq_len is not None and ns.max_seq_len < 2:
        raise GenerateInputError(f"--max-seq-len must be at least 2, not {ns.max_seq_len}")
    if ns.check_every < 1:
        raise GenerateInputError(f"--check-every must be at least 1, not {ns.check_every}")
    if any(not s for s in ns.stop):
        raise GenerateInputError("--stop needs a non-empty text")


def _prompt_ids(ns: argparse.Namespace, ckpt: Any, inp: TextIO) -> list[int]:
    if ns.ids is not None:
        if ns.chat:
            raise GenerateInputError("--chat takes a text prompt, not --ids")
        return parse_ids(ns.ids, ckpt.config.vocab_size)
    text = _prompt_text(ns, inp)
    if ckpt.tokenizer is None:
        raise GenerateInputError(f"a text prompt needs a tokenizer, and {ckpt.path} has no "
                                 "tokenizer.json", hint="pass token ids with --ids 1,2,3")
    if ns.chat:
        text = _chat_prompt(ns, ckpt, text)
    encoded = ckpt.tokenizer.encode(text, add_special_tokens=False).ids
    if not encoded:
        raise GenerateInputError(f"the prompt {text!r} encodes to no tokens",
                                 hint="give a non-empty prompt")
    return list(encoded)


def _prompt_text(ns: argparse.Namespace, inp: TextIO) -> str:
    if ns.prompt_file is not None:
        try:
            with open(ns.prompt_file, encoding="utf-8") as f:
                return f.read()
        except OSError as e:
            raise GenerateInputError(f"--prompt-file {ns.prompt_file}: {e.strerror}") \
                from None
        except UnicodeDecodeError as e:
            raise GenerateInputError(f"--prompt-file {ns.prompt_file}: not UTF-8 text "
                                     f"({e.reason})") from None
    if ns.prompt is not None and ns.prompt != "-":
        return ns.prompt
    if ns.prompt is None and inp.isatty():
        raise GenerateInputError("no prompt: give --prompt TEXT, --prompt-file FILE or "
                                 "--ids 1,2,3, or pipe the prompt on stdin")
    return inp.read()


def _chat_prompt(ns: argparse.Namespace, ckpt: Any, text: str) -> str:
    from .chat import ChatTemplate, ChatTemplateError

    cfg = ckpt.tokenizer_config
    if cfg is None or not cfg.chat_template:
        raise ChatTemplateError(f"--chat: {ckpt.path} has no chat template "
                                "(tokenizer_config.json's chat_template or "
                                "chat_template.jinja)", hint="drop --chat")
    messages = ([{"role": "system", "content": ns.system}] if ns.system else []) + \
        [{"role": "user", "content": text}]
    return ChatTemplate(cfg.chat_template, cfg.special_tokens,
                        source=cfg.template_file).render(
        messages, add_generation_prompt=True, enable_thinking=ns.enable_thinking)


def one_line(e: TilelabError) -> str:
    """An error's message and hint on one line.

    Example:
        >>> one_line(GenerateInputError("bad\\nthing", hint="fix it"))
        'bad thing (hint: fix it)'
    """
    text = " ".join(e.message.split())
    return f"{text} (hint: {' '.join(e.hint.split())})" if e.hint else text
