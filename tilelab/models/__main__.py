"""``python -m tilelab.models``: the ``generate`` and ``chat`` commands (as ``tilelab
generate`` and ``tilelab chat``).

This module is the one place that knows both commands: the arguments and ``generate``
are :mod:`tilelab.models.cli`'s, ``chat`` is :mod:`tilelab.models.cli_chat`'s (which
builds on ``cli``'s settings and engine loading), so neither of those imports the other
back.
"""
from __future__ import annotations

import argparse
import sys

from tilelab.models.cli import add_chat_arguments, add_generate_arguments, run_generate

__all__ = ["build_parser", "main"]


def build_parser(prog: str = "python -m tilelab.models") -> argparse.ArgumentParser:
    """The parser of ``python -m tilelab.models``: the ``generate`` and ``chat`` commands.

    Example:
        >>> build_parser().parse_args(["chat", "--model", "m"]).command
        'chat'
    """
    p = argparse.ArgumentParser(prog=prog, description="Run a Qwen3 checkpoint with "
                                "tilelab's safe kernels.")
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="generate text after a prompt")
    add_generate_arguments(g)
    g.set_defaults(func=lambda ns: run_generate(ns))
    c = sub.add_parser("chat", help="talk with the model (multi-turn, chat template)")
    add_chat_arguments(c)
    c.set_defaults(func=lambda ns: _run_chat(ns))
    return p


def main(argv: list[str] | None = None) -> int:
    """``python -m tilelab.models``.

    Example:
        >>> main(["generate", "--model", "/nonexistent", "--ids", "1"])  # doctest: +SKIP
        2
    """
    ns = build_parser().parse_args(argv)
    return int(ns.func(ns) or 0)


def _run_chat(ns: argparse.Namespace) -> int:
    from tilelab.models.cli_chat import run_chat

    return run_chat(ns)


if __name__ == "__main__":
    sys.exit(main())
