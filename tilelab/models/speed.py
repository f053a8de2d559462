"""The speed report of a generation: what an inference engine's user asks first.

A single "tokens per second" over a whole run mixes three different things: the prefill
(compute-bound, all prompt tokens at once; its time is the time to the first token), the
decode steps (memory-bound, one token each) and, on the first run, compiling and loading
the kernels. :class:`SpeedReport` keeps them apart: load time, first-run time (kernels
compiled or found in the cache and loaded, the decode graph recorded), prefill tokens/s
and time to first token, decode tokens/s, and on a GPU the decode's bandwidth in GB/s
and as a fraction of the card's nominal memory bandwidth (the roof a batch-1 decode
cannot beat: every step reads every weight and the KV cache). The bytes of a step are
:func:`tilelab.models.step_cost.decode_bytes_per_token` at each step's context; the roof
comes from :mod:`tilelab.perf.specs`.

Rates are printed with three significant digits, so a slow run reads "0.0394 tok/s",
never "0.0 tok/s"; a phase that did not run (one new token: no decode step) says so.

Example:
    >>> r = SpeedReport(prompt_tokens=11, prefilled_tokens=11, prefill_s=0.5,
    ...                 new_tokens=8, decode_steps=7, decode_s=140.0, device="cpu")
    >>> print("\\n".join(r.lines()))
    prefill: 11 tokens in 0.500 s: 22.0 tok/s (time to first token 0.500 s)
    decode: 7 steps in 140 s: 0.0500 tok/s
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["SpeedReport", "number", "steps_bytes", "gpu_roof"]


def number(x: float) -> str:
    """``x`` with three significant digits (thousands grouped, no exponent).

    Example:
        >>> number(0.039412), number(12.345), number(1234.5), number(0.0)
        ('0.0394', '12.3', '1,234', '0')
    """
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    digits = max(0, 2 - int(_floor_log10(abs(x))))
    return f"{x:.{digits}f}"


def _floor_log10(x: float) -> int:
    import math

    return math.floor(math.log10(x))


def _seconds(s: float) -> str:
    return f"{number(s)} s" if s >= 100 else f"{s:.3f} s"


def steps_bytes(config: Any, dtype: str, first_context: int, steps: int) -> int:
    """The bytes ``steps`` decode steps read at least, the first attending to
    ``first_context`` positions and each next one to one more.

    Example:
        >>> from types import SimpleNamespace
        >>> cfg = SimpleNamespace(vocab_size=8, hidden_size=4, intermediate_size=8,
        ...                       num_hidden_layers=1, num_attention_heads=1,
        ...                       num_key_value_heads=1, head_dim=4,
        ...                       tie_word_embeddings=True)
        >>> steps_bytes(cfg, "bfloat16", 3, 2)
        960
    """
    from tilelab.models.step_cost import decode_bytes_per_token

    return sum(decode_bytes_per_token(config, first_context + j, dtype=dtype)
               for j in range(steps))


@dataclass
class SpeedReport:
    """The phases of one generation (see the module docstring). Seconds are wall-clock
    on the host; ``decode_steps`` may exceed ``new_tokens - 1`` by the steps that ran
    past a stop before it was read back; ``decode_bytes`` (GPU only) is what those
    steps read at least; ``roof`` the card's nominal bandwidth in bytes/s (None when
    the card is not in :mod:`tilelab.perf.specs`); ``gpu`` its name.

    Example:
        >>> SpeedReport(prompt_tokens=3, prefilled_tokens=3, prefill_s=0.1, new_tokens=1,
        ...             decode_steps=0, decode_s=0.0, device="cpu").decode_rate is None
        True
    """

    prompt_tokens: int
    prefilled_tokens: int
    prefill_s: float
    new_tokens: int
    decode_steps: int
    decode_s: float
    device: str
    load_s: float | None = None
    first_run_s: float | None = None
    decode_bytes: int | None = None
    roof: float | None = None
    gpu: str | None = None

    @property
    def prefill_rate(self) -> float | None:
        """Prefilled tokens per second (None when nothing was timed)."""
        return self.prefilled_tokens / self.prefill_s if self.prefill_s > 0 else None

    @property
    def decode_rate(self) -> float | None:
        """Decode steps per second: tokens/s of the decode (None without a step)."""
        if self.decode_steps < 1 or self.decode_s <= 0:
            return None
        return self.decode_steps / self.decode_s

    @property
    def bandwidth(self) -> float | None:
        """Bytes per second the decode steps read at least (None off the GPU)."""
        if self.decode_bytes is None or self.decode_rate is None:
            return None
        return self.decode_bytes / self.decode_s

    def lines(self) -> list[str]:
        """The report as lines of text (what ``tilelab generate`` prints).

        Example:
            >>> SpeedReport(3, 3, 0.01, 1, 0, 0.0, "cpu").lines()[-1]
            'decode: none (1 new token: the prefill made it)'
        """
        out = []
        if self.load_s is not None:
            out.append(f"load: {_seconds(self.load_s)}")
        if self.first_run_s is not None:
            out.append(f"first run: {_seconds(self.first_run_s)} compiling (or loading) "
                       "the kernels and recording the decode graph, not counted below")
        reused = self.prompt_tokens - self.prefilled_tokens
        kept = f", {reused} reused from the KV cache" if reused > 0 else ""
        rate = self.prefill_rate
        out.append(f"prefill: {self.prefilled_tokens} tokens{kept} in "
                   f"{_seconds(self.prefill_s)}"
                   + (f": {number(rate)} tok/s" if rate is not None else "")
                   + f" (time to first token {_seconds(self.prefill_s)})")
        d = self.decode_rate
        if d is None:
            out.append(f"decode: none ({self.new_tokens} new token: the prefill made it)")
            return out
        out.append(f"decode: {self.decode_steps} steps in {_seconds(self.decode_s)}: "
                   f"{number(d)} tok/s")
        bw = self.bandwidth
        if bw is not None:
            per = self.decode_bytes / self.decode_steps / 1e9
            roof = (f", {number(100 * bw / self.roof)}% of the {self.gpu}'s nominal "
                    f"{number(self.roof / 1e9)} GB/s" if self.roof else
                    f" (no nominal bandwidth known for {self.gpu})")
            out.append(f"decode bandwidth: {number(bw / 1e9)} GB/s{roof} "
                       f"({number(per)} GB per step, weights and KV cache)")
        return out


def gpu_roof() -> tuple[str | None, float | None]:
    """(the GPU's name, its nominal memory bandwidth in bytes/s or None).

    Example:
        >>> gpu_roof()                                                   # doctest: +SKIP
        ('NVIDIA H100 80GB HBM3', 3350000000000.0)
    """
    from tilelab.perf.specs import spec_for_device
    from tilelab.runtime.device import gpu

    name = gpu().name
    spec = spec_for_device(name)
    return name, (float(spec.memory_bandwidth.value) if spec is not None else None)
