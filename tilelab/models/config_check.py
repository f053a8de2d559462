"""The allowed values of a Qwen3 config's numeric fields, and their check.

A ``config.json`` is data from outside, and Python's ``json`` reads more than numbers:
``Infinity``, ``NaN`` and ``1e400`` (which becomes infinity) are all accepted. A value
outside what the engine can compute with does not fail where it is used: an
``rms_norm_eps`` of infinity (or ``1e300``, infinite in float32) makes every norm zero
and every token 0, a ``rope_theta`` of infinity makes every RoPE angle NaN, a
``max_position_embeddings`` of ``2**40`` asks for terabytes of tables. So every number
the engine reads is checked against a range when the config is parsed, and the error
names the key, the value and the range.

The ranges: sizes are integers from 1 to :data:`SIZE_MAX`; ``vocab_size`` goes up to
:data:`VOCAB_MAX` (token ids are int32 on the device); ``max_position_embeddings`` is any
positive integer (it only caps the KV cache, which is sized by the engine's
``max_tokens``); ``rms_norm_eps`` is a finite number in :data:`EPS_RANGE` (positive and
well above float32's underflow, small next to a mean square); ``rope_theta`` is a finite
number greater than 1 (RoPE's frequencies ``theta ** (-2i / head_dim)`` must fall from 1).

Example:
    >>> field_problem("rms_norm_eps", float("inf"))
    'rms_norm_eps is inf: it must be a finite number from 1e-30 to 0.01'
    >>> field_problem("hidden_size", 96) is None
    True
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["SIZE_MAX", "VOCAB_MAX", "EPS_RANGE", "Rule", "RULES", "field_problem",
           "show_value"]

#: the largest hidden, intermediate or head size, layer or head count accepted
SIZE_MAX = 2 ** 20
#: the largest vocabulary: token ids are int32 on the device
VOCAB_MAX = 2 ** 31 - 1
#: rms_norm_eps: positive and normal in float32, and small next to a mean square
EPS_RANGE = (1e-30, 1e-2)


@dataclass(frozen=True)
class Rule:
    """The allowed values of one field: integers or (finite) numbers from ``lo`` to
    ``hi`` (None: no upper bound), ``lo`` excluded when ``lo_open``.

    Example:
        >>> Rule("number", 1.0, None, lo_open=True).describe()
        'a finite number greater than 1'
    """

    kind: str                      # "int" or "number"
    lo: float
    hi: float | None = None
    lo_open: bool = False

    def describe(self) -> str:
        """The range in words, for messages."""
        lo, hi = _num(self.lo), None if self.hi is None else _num(self.hi)
        if self.kind == "int":
            return "a positive integer" if hi is None else f"an integer from {lo} to {hi}"
        if hi is None:
            return f"a finite number {'greater than' if self.lo_open else 'at least'} {lo}"
        return f"a finite number from {lo} to {hi}"

    def allows(self, value: Any) -> bool:
        """Whether ``value`` (anything a JSON file holds) is in the range."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.kind == "int" and not isinstance(value, int):
            return False
        if self.kind == "number":
            try:
                if not math.isfinite(value):
                    return False
            except OverflowError:                 # an int past float's range
                return False
        if self.lo_open and not value > self.lo:
            return False
        if not value >= self.lo:
            return False
        # an int of any size compares exactly with a float bound (no overflow)
        return self.hi is None or value <= self.hi


def _num(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


_SIZE = Rule("int", 1, SIZE_MAX)
#: the rule of each numeric field of :class:`~tilelab.models.config.Qwen3Config`
RULES: dict[str, Rule] = {
    "vocab_size": Rule("int", 1, VOCAB_MAX),
    "hidden_size": _SIZE, "intermediate_size": _SIZE, "num_hidden_layers": _SIZE,
    "num_attention_heads": _SIZE, "num_key_value_heads": _SIZE, "head_dim": _SIZE,
    "max_position_embeddings": Rule("int", 1),
    "rms_norm_eps": Rule("number", *EPS_RANGE),
    "rope_theta": Rule("number", 1.0, None, lo_open=True),
}


def show_value(value: Any, limit: int = 40) -> str:
    """``repr(value)`` for a message, cut to ``limit`` characters (a JSON integer may
    have thousands of digits).

    Example:
        >>> show_value(10 ** 50)
        '1000000000000000000000000000000000000...'
    """
    try:
        text = repr(value)
    except ValueError:          # an int past Python's digit limit for str()
        return f"an integer of more than {limit} digits"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def field_problem(field: str, value: Any, *, key: str | None = None) -> str | None:
    """What is wrong with ``value`` for the config field ``field`` (None: it is
    allowed); ``key`` is the name to print (e.g. ``rope_parameters.rope_theta``).

    Example:
        >>> field_problem("rope_theta", 1e6) is None
        True
        >>> field_problem("rope_theta", -1, key="rope_parameters.rope_theta")
        'rope_parameters.rope_theta is -1: it must be a finite number greater than 1'
    """
    rule = RULES[field]
    if rule.allows(value):
        return None
    return f"{key or field} is {show_value(value)}: it must be {rule.describe()}"
