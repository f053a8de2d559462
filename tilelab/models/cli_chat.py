"""``tilelab chat``: an interactive, multi-turn conversation with a Qwen3 checkpoint.

Each line read from stdin is a user message; the reply streams to stdout as it is
generated, and a one-line speed summary follows it on stderr. The conversation goes
through the checkpoint's chat template (``--system``, ``--think``/``--no-think``) and
continues in the KV cache: each turn prefills only the new message. Lines starting
with ``/`` are commands: ``/reset`` (forget the conversation, keep the system prompt),
``/exit`` (or end of input). On a terminal a ``you>`` prompt is shown; piped input
gets the replies only, one per line of input. A turn that does not fit the context
(``--max-seq-len``) prints its error and leaves the conversation as it was.

Example::

    $ tilelab chat --model checkpoints/Qwen3-0.6B --system "Be brief." --no-think
    you> What is a tile?
    A small block of a tensor that one thread block owns.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any, TextIO

from tilelab.errors import TilelabError

from .cli import (DEFAULT_CHAT_CONTEXT, check_settings, load_engine, one_line,
                  sampling_settings)
from .errors import CheckpointError, GenerateInputError

__all__ = ["run_chat", "chat_loop", "turn_summary"]


def run_chat(ns: argparse.Namespace, inp: TextIO | None = None, out: TextIO | None = None,
             err: TextIO | None = None) -> int:
    """Run ``tilelab chat`` for parsed arguments; the exit status (2: the model or the
    settings are unusable; 1: another tilelab error).

    Example:
        >>> from tilelab.cli import build_parser
        >>> ns = build_parser().parse_args(["chat", "--model", "/nonexistent"])
        >>> run_chat(ns, err=sys.stdout)
        tilelab chat: error: /nonexistent: does not exist (hint: pass the checkpoint directory (holding config.json))
        2
    """
    inp, out, err = inp or sys.stdin, out or sys.stdout, err or sys.stderr
    try:
        check_settings(ns)
        from .checkpoint import load_checkpoint

        t0 = time.perf_counter()
        limit = load_checkpoint(ns.model).config.max_position_embeddings
        context = ns.max_seq_len or min(DEFAULT_CHAT_CONTEXT, limit)
        engine, _ = load_engine(ns, context=context)
        load_s = time.perf_counter() - t0
        sampling = sampling_settings(ns, engine)
        session = engine.session(system=ns.system, enable_thinking=ns.enable_thinking,
                                 max_new_tokens=ns.max_new_tokens, sampling=sampling,
                                 stop_strings=ns.stop, ignore_eos=ns.ignore_eos,
                                 check_every=ns.check_every)
        first = None
        if not ns.no_warmup:
            from .generation import warm_up

            first = warm_up(engine, [0], sampling=sampling)
        print(f"tilelab chat: {engine.source} on {engine.device}, context "
              f"{engine.max_seq_len} tokens, loaded in {load_s:.2f} s"
              + (f", first run {first:.2f} s" if first is not None else "")
              + "; /reset forgets the conversation, /exit ends it", file=err)
    except (CheckpointError, GenerateInputError) as e:
        print(f"tilelab chat: error: {one_line(e)}", file=err)
        return 2
    except TilelabError as e:
        print(f"tilelab chat: error: {one_line(e)}", file=err)
        return 1
    try:
        return chat_loop(session, inp, out, err)
    except KeyboardInterrupt:
        print("", file=out)
        return 0


def chat_loop(session: Any, inp: TextIO, out: TextIO, err: TextIO) -> int:
    """Read messages from ``inp`` until it ends (or ``/exit``), answer each; the exit
    status (1 after an engine error that ends the session).

    Example:
        >>> chat_loop(session, io.StringIO("hi\\n"), sys.stdout, sys.stderr)  # doctest: +SKIP
        Hello!
        0
    """
    prompt = inp.isatty()
    while True:
        if prompt:
            print("you> ", end="", file=out, flush=True)
        line = inp.readline()
        if not line:
            return 0
        text = line.rstrip("\n")
        if text.strip() in ("/exit", "/quit"):
            return 0
        if text.strip() == "/reset":
            session.reset()
            print("(conversation forgotten)", file=err)
            continue
        if not text.strip():
            continue
        before = list(session.messages)
        try:
            for piece in session.send(text, stream=True):
                if piece.text:
                    out.write(piece.text)
                    out.flush()
        except GenerateInputError as e:       # too long for the context, a template error
            session.messages = before
            print(f"tilelab chat: error: {one_line(e)}", file=err)
            continue
        except TilelabError as e:
            print(f"\ntilelab chat: error: {one_line(e)}", file=err)
            return 1
        out.write("\n")
        out.flush()
        print(turn_summary(session.last), file=err)


def turn_summary(stream: Any) -> str:
    """One line about a finished turn: why it stopped, prefill and decode speed.

    Example:
        >>> turn_summary(session.last)                                   # doctest: +SKIP
        '[eos: 12 tokens; prefill 9 tokens (40 cached) 0.081 s; decode 11 steps 24.3 tok/s]'
    """
    from .speed import number

    sp = stream.speed
    reused = sp.prompt_tokens - sp.prefilled_tokens
    rate = sp.decode_rate
    decode = f"decode {sp.decode_steps} steps {number(rate)} tok/s" if rate else "no decode"
    return (f"[{stream.finish_reason}: {len(stream.tokens)} tokens; prefill "
            f"{sp.prefilled_tokens} tokens ({reused} cached) {sp.prefill_s:.3f} s; {decode}]")
