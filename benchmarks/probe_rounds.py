"""Interleaved timing rounds and failure lines shared by the probe scripts.

Why: the H200's clocks sag within a round, so a fixed order favours the variants timed
first (variant_probe run j timed one config at 956 and 1015 us in the same run). Every
probe times its variants in rounds, each round starting one variant later, and reports
a variant's median of round medians; this is that loop, once.

Example:
    >>> rotated(["torch", "library", "a"], 4)
    ['library', 'a', 'torch']
"""
from __future__ import annotations

from typing import Any, Callable

import tilelab as tl

__all__ = ["rotated", "time_rounds", "print_failures"]


def rotated(names: list, r: int) -> list:
    """``names`` starting at position ``r`` (mod its length): round r's timing order.

    Example:
        >>> rotated(["a", "b"], 1)
        ['b', 'a']
    """
    k = r % len(names) if names else 0
    return names[k:] + names[:k]


def time_rounds(calls: dict[str, Callable[[], Any]], rounds: int, rep: int,
                warmup: int = 3) -> dict[str, list[float]]:
    """name -> the ``tl.bench`` median of each round (rounds in rotated order; the L2 is
    flushed before every timed call).

    Example:
        >>> t = time_rounds({"noop": lambda: None}, rounds=2, rep=3)   # doctest: +SKIP
        >>> len(t["noop"])                                             # doctest: +SKIP
        2
    """
    times: dict[str, list[float]] = {n: [] for n in calls}
    for r in range(rounds):
        for name in rotated(list(calls), r):
            times[name].append(tl.bench(calls[name], rep=rep, warmup=warmup).median)
    return times


def print_failures(variants: dict[str, dict], width: int) -> None:
    """One line per variant whose status is neither unset nor 'ok': its status and its
    error (or relative error).

    Example:
        >>> print_failures({"a": {"status": "ok"}, "b": {"status": "wrong", "rel_err": 0.5}},
        ...                4)
           b    wrong 0.5
    """
    for name, item in variants.items():
        if item.get("status") not in (None, "ok"):
            print(f"   {name:{width}s} {item['status']} "
                  f"{item.get('error', item.get('rel_err'))}", flush=True)
