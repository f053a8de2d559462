"""The probes' shared timing loop: rounds in rotated order, one median per round."""
from __future__ import annotations

import doctest
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import probe_rounds  # noqa: E402


def test_rounds_rotate_and_give_one_median_per_round():
    calls_seen: list[str] = []
    calls = {n: (lambda n=n: calls_seen.append(n)) for n in ("torch", "library", "raw")}
    times = probe_rounds.time_rounds(calls, rounds=3, rep=2, warmup=1)
    assert {n: len(t) for n, t in times.items()} == {"torch": 3, "library": 3, "raw": 3}
    assert all(t >= 0 for ts in times.values() for t in ts)
    order = [n for i, n in enumerate(calls_seen) if i == 0 or calls_seen[i - 1] != n]
    assert order == ["torch", "library", "raw", "library", "raw", "torch",
                     "raw", "torch", "library"]


def test_failures_are_printed_with_their_reason(capsys):
    probe_rounds.print_failures({"ok": {"status": "ok"}, "unset": {},
                                 "bad": {"status": "error", "error": "TypeError: x"},
                                 "off": {"status": "wrong", "rel_err": 0.25}}, 5)
    assert capsys.readouterr().out.splitlines() == ["   bad   error TypeError: x",
                                                    "   off   wrong 0.25"]


def test_docstring_examples_run():
    res = doctest.testmod(probe_rounds)
    assert res.attempted > 0 and res.failed == 0
