"""What reading tokens back costs a replayed decode: the generation loop's stopping and
streaming against the bare graph replay, on the same engine and prompt.

A generation that may stop early (an EOS id, a stop string) or streams its text waits
for the device every ``check_every`` steps and copies the new tokens and their
non-finite flags back (:mod:`tilelab.models.generation`). This times, each as the
median of ``runs`` decodes of ``tokens`` new tokens after one prefill:

- ``replay``: the step's graph replayed ``tokens - 1`` times, nothing read back;
- ``generate``: ``Qwen3.generate`` that cannot stop early (``ignore_eos``), which reads
  only after its last step;
- ``stream_every_<k>``: ``Qwen3.stream`` with an EOS id that never comes, reading back
  every ``k`` steps (1 and 8);

and reports each one's microseconds per step and the extra over ``replay``: the
read-back's cost per step. The decode rates come from the stream's own
:class:`~tilelab.models.speed.SpeedReport` (prefill excluded), the replay's from the
wall clock around its replays.

Example:
    >>> per_step_us(2.0)
    500000.0
"""
from __future__ import annotations

import statistics
import time
from typing import Any

__all__ = ["per_step_us", "measure"]

#: read-back intervals timed (steps between the waits that decide stopping)
CHECK_EVERY = (1, 8)


def per_step_us(tok_s: float) -> float:
    """Microseconds per decode step at ``tok_s`` tokens per second."""
    return 1e6 / tok_s


def _replay_rate(engine: Any, prompt: list[int], n: int) -> float:
    step = engine.begin(prompt)
    t0 = time.perf_counter()
    fut = None
    for _ in range(n - 1):
        fut = step.replay()
    if fut is not None:
        fut.wait()
    return (n - 1) / (time.perf_counter() - t0)


def _never_produced(engine: Any, prompt: list[int], n: int) -> int:
    """A token id the greedy decode of ``prompt`` does not produce in ``n`` steps: the
    EOS id of a stream that must run to its budget while still checking every chunk."""
    seen = set(engine.generate(prompt, n, ignore_eos=True, temperature=0))
    return next(t for t in range(engine.config.vocab_size) if t not in seen)


def measure(engine: Any, prompt: list[int], tokens: int = 256, runs: int = 3
            ) -> dict[str, Any]:
    """The rates and per-step costs described in the module docstring, greedy decoding.

    Example:
        >>> r = measure(engine, prompt, tokens=64, runs=3)         # doctest: +SKIP
        >>> r["extra_us_per_step"]["stream_every_1"]               # doctest: +SKIP
        9.8
    """
    eos = _never_produced(engine, prompt, tokens)
    rates: dict[str, list[float]] = {"replay": [], "generate": []}
    rates.update({f"stream_every_{k}": [] for k in CHECK_EVERY})
    for _ in range(runs):
        rates["replay"].append(_replay_rate(engine, prompt, tokens))
        s = engine.generate(prompt, tokens, ignore_eos=True, temperature=0, stream=True)
        s.consume()
        rates["generate"].append(s.speed.decode_rate)
        for k in CHECK_EVERY:
            s = engine.stream(prompt, tokens, eos_token_ids=[eos], temperature=0,
                              check_every=k)
            for _piece in s:
                pass
            if s.finish_reason != "length":
                raise RuntimeError(f"the stream stopped early ({s.finish_reason}): the "
                                   f"read-back timing needs all {tokens} tokens")
            rates[f"stream_every_{k}"].append(s.speed.decode_rate)
    tok_s = {k: statistics.median(v) for k, v in rates.items()}
    base = per_step_us(tok_s["replay"])
    return {"tokens": tokens, "runs": runs, "tok_s": tok_s, "samples": rates,
            "us_per_step": {k: per_step_us(v) for k, v in tok_s.items()},
            "extra_us_per_step": {k: per_step_us(v) - base for k, v in tok_s.items()
                                  if k != "replay"}}
