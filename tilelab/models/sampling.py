"""Sampling settings of the Qwen3 engine: what they mean, their checks, and the
checkpoint's defaults (``generation_config.json``).

Why a module of its own: the settings cross three layers. The user writes a
:class:`SamplingParams`; the engine turns it into a small float32 vector in device
memory (:meth:`SamplingParams.device_vector`) that the sampling kernels of the decode
step read (:mod:`tilelab.kernels.decode.sampling`), so a replayed step graph samples with the
new settings unchanged; and :meth:`SamplingParams.probabilities` says, in float64
numpy, exactly which distribution the device samples from (the tests hold the kernels
to it).

What the settings do, in this order (transformers' order):

1. ``repetition_penalty`` (1: off): the logit of every token of the prompt or generated
   so far is divided by it when positive, multiplied by it when negative;
   ``presence_penalty`` (0: off) is subtracted from the logit of every token generated
   so far (the prompt does not count, as in vLLM and the OpenAI API).
2. ``temperature``: the scores are the penalized logits / temperature; 0 is greedy
   decoding (the top score; the filters below are ignored, the penalties are not).
3. ``top_k`` (0: off): the ``top_k`` highest scores are the candidates (exactly
   ``top_k``: ties at the k-th score go to the lower token id). At most the decode
   step's candidate tile, ``StepConfig.sample_candidates`` (64 by default).
4. ``top_p`` (1: off): the candidates, sorted, are kept while the probability mass
   before each is below ``top_p`` (the first is always kept). With ``top_k`` set the
   probabilities are renormalized over the top-k (as transformers does); with
   ``top_k`` 0 they are those of the whole vocabulary, and the candidates are the
   ``sample_candidates`` highest scores: a nucleus of more tokens than that is cut
   there.
5. ``min_p`` (0: off): a candidate is kept if its probability is at least ``min_p``
   times the top one's (with ``top_k`` 0, among the ``sample_candidates`` highest).
6. The token is drawn from the softmax of the kept scores, by Gumbel-max with noise
   hashed from (``seed``, position, token id): the same seed gives the same tokens.

With no filter (``top_k`` 0, ``top_p`` 1, ``min_p`` 0) the draw is over the whole
vocabulary.

Example:
    >>> p = SamplingParams(temperature=0.6, top_k=20, top_p=0.95, seed=1)
    >>> p.head, SamplingParams.greedy().head, SamplingParams(temperature=0.8).head
    ('sample', 'argmax', 'gumbel')
    >>> SamplingParams(top_p=1.5)
    Traceback (most recent call last):
    ...
    tilelab.models.sampling.SamplingParamsError: top_p must be a number in (0, 1] (1: off), got 1.5
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tilelab.kernels.decode import sampling as ks
from tilelab.models.errors import CheckpointError, GenerateInputError
from tilelab.models.tokenizer_config import GENERATION_CONFIG_FILE, read_json_object

__all__ = ["SamplingParams", "SamplingParamsError", "load_generation_config",
           "resolve_sampling", "history_vector", "GENERATION_CONFIG",
           "DEFAULT_CANDIDATES", "ALL_CANDIDATES"]

#: the file of a checkpoint that holds its generation defaults
GENERATION_CONFIG = GENERATION_CONFIG_FILE
#: the decode step's candidate tile unless ``StepConfig.sample_candidates`` says
#: otherwise: the most ``top_k`` may be
DEFAULT_CANDIDATES = 64
#: the candidate count stored when top-k is off but top-p or min-p is on: more than any
#: candidate tile (the kernels take the tile's size), exact in float32
ALL_CANDIDATES = 1 << 24


class SamplingParamsError(GenerateInputError):
    """A sampling setting out of its range; ``param`` names it.

    Example:
        >>> e = SamplingParamsError("top_k must be an int >= 0, got -1", param="top_k")
        >>> e.param, isinstance(e, ValueError)
        ('top_k', True)
    """

    def __init__(self, message: str, *, param: str, hint: str | None = None):
        self.param = param
        super().__init__(message, hint=hint)


def _real(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or not math.isfinite(float(value)):
        raise SamplingParamsError(f"{name} must be a finite number, got {value!r}",
                                  param=name)
    return float(value)


def _check_temperature(t: Any) -> None:
    if isinstance(t, bool) or not isinstance(t, numbers.Real) or not 0 <= t < math.inf:
        raise SamplingParamsError(f"temperature must be a number >= 0 (finite; 0 is "
                                  f"greedy), got {t!r}", param="temperature")
    with np.errstate(over="ignore"):
        inv = np.float32(1.0 / float(t)) if t > 0 else np.float32(1)
    if not np.isfinite(inv):
        raise SamplingParamsError(f"temperature {t!r} is too small: 1/temperature is not "
                                  "finite in float32, the type the sampling kernel scales "
                                  "the logits in", param="temperature",
                                  hint="use temperature=0 for greedy decoding")


@dataclass(frozen=True)
class SamplingParams:
    """How the decode step picks each token (see the module docstring for the order
    and the exact meaning of each setting).

    ``temperature`` >= 0 (0: greedy), ``top_k`` int >= 0 (0: off), ``top_p`` in
    (0, 1] (1: off), ``min_p`` in [0, 1] (0: off), ``repetition_penalty`` > 0 (1:
    off), ``presence_penalty`` finite (0: off), ``seed`` an int (its low 31 bits are
    used). A value out of range raises :class:`SamplingParamsError` naming it.

    Example:
        >>> from tilelab.models.sampling import SamplingParams
        >>> qwen = SamplingParams(temperature=0.6, top_k=20, top_p=0.95)
        >>> model.generate(ids, 32, sampling=qwen.replace(seed=7))   # doctest: +SKIP
        >>> SamplingParams.greedy().is_greedy
        True
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        _check_temperature(self.temperature)
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, numbers.Integral) \
                or self.top_k < 0:
            raise SamplingParamsError(f"top_k must be an int >= 0 (0: off), got "
                                      f"{self.top_k!r}", param="top_k")
        top_p = self.top_p
        if isinstance(top_p, bool) or not isinstance(top_p, numbers.Real) \
                or not 0 < top_p <= 1:
            raise SamplingParamsError(f"top_p must be a number in (0, 1] (1: off), got "
                                      f"{top_p!r}", param="top_p")
        min_p = self.min_p
        if isinstance(min_p, bool) or not isinstance(min_p, numbers.Real) \
                or not 0 <= min_p <= 1:
            raise SamplingParamsError(f"min_p must be a number in [0, 1] (0: off), got "
                                      f"{min_p!r}", param="min_p")
        rep = _real("repetition_penalty", self.repetition_penalty)
        with np.errstate(over="ignore", under="ignore"):
            rep32 = np.float32(rep)
        if rep <= 0 or not np.isfinite(rep32) or rep32 == 0:
            raise SamplingParamsError(f"repetition_penalty must be a number > 0 (1: off; "
                                      f"above 1 discourages repeats), got "
                                      f"{self.repetition_penalty!r}",
                                      param="repetition_penalty")
        with np.errstate(over="ignore"):
            pres = np.float32(_real("presence_penalty", self.presence_penalty))
        if not np.isfinite(pres):
            raise SamplingParamsError(f"presence_penalty {self.presence_penalty!r} is not "
                                      "finite in float32", param="presence_penalty")
        if isinstance(self.seed, bool) or not isinstance(self.seed, numbers.Integral):
            raise SamplingParamsError(f"seed must be an int, got {self.seed!r}",
                                      param="seed")

    @classmethod
    def greedy(cls, *, repetition_penalty: float = 1.0,
               presence_penalty: float = 0.0) -> "SamplingParams":
        """Greedy decoding: the top score each step (of the penalized logits when a
        penalty is given).

        Example:
            >>> SamplingParams.greedy().temperature
            0.0
        """
        return cls(temperature=0.0, repetition_penalty=repetition_penalty,
                   presence_penalty=presence_penalty)

    def replace(self, **changes: Any) -> "SamplingParams":
        """A copy with ``changes`` (checked again).

        Example:
            >>> SamplingParams(top_k=20).replace(seed=3).seed
            3
        """
        return dataclasses.replace(self, **changes)

    # ---- what the engine makes of them --------------------------------------------------
    @property
    def is_greedy(self) -> bool:
        """Temperature 0: the top score, no draw."""
        return self.temperature == 0

    @property
    def penalized(self) -> bool:
        """Whether a repetition or presence penalty is on."""
        return self.repetition_penalty != 1 or self.presence_penalty != 0

    @property
    def filtered(self) -> bool:
        """Whether top-k, top-p or min-p is on (and the decoding is not greedy)."""
        return not self.is_greedy and (self.top_k > 0 or self.top_p < 1 or self.min_p > 0)

    @property
    def head(self) -> str:
        """The decode-step head these settings need: ``"argmax"`` (greedy, no penalty),
        ``"gumbel"`` (temperature only: the Gumbel-max fused into the lm_head kernel) or
        ``"sample"`` (penalties or filters: :mod:`tilelab.kernels.decode.sampling`)."""
        if self.penalized or self.filtered:
            return "sample"
        return "argmax" if self.is_greedy else "gumbel"

    def candidates(self, tile: int) -> int:
        """How many candidates the ``sample`` head keeps with a candidate tile of
        ``tile``: 0 (no filter: the whole vocabulary), 1 (greedy), ``top_k``, or
        ``tile`` (top-p or min-p without top-k).

        Example:
            >>> [SamplingParams(**s).candidates(64) for s in ({"top_p": 0.9}, {"top_k": 5})]
            [64, 5]
        """
        if self.is_greedy:
            return 1
        if self.top_k > 0:
            return min(self.top_k, tile)
        return tile if self.filtered else 0

    def check_candidates(self, tile: int) -> None:
        """Refuse a ``top_k`` larger than the decode step's candidate tile.

        Example:
            >>> SamplingParams(top_k=100).check_candidates(64)
            Traceback (most recent call last):
            ...
            tilelab.models.sampling.SamplingParamsError: top_k 100 is more than the 64 candidates the decode step keeps
            hint: build the model with step_config=StepConfig(sample_candidates=128) (a power of two), or use top_k <= 64
        """
        if self.top_k > tile and not self.is_greedy:
            want = 1 << (int(self.top_k) - 1).bit_length()
            raise SamplingParamsError(
                f"top_k {self.top_k} is more than the {tile} candidates the decode step "
                "keeps", param="top_k",
                hint=f"build the model with step_config=StepConfig(sample_candidates="
                     f"{want}) (a power of two), or use top_k <= {tile}")

    def device_vector(self) -> np.ndarray:
        """The float32 settings vector the sampling kernels read (the slots of
        :mod:`tilelab.kernels.decode.sampling`).

        Example:
            >>> SamplingParams(temperature=0.5, top_k=20).device_vector()[:3]
            array([ 2., 20.,  1.], dtype=float32)
        """
        v = np.zeros(ks.PARAMS, np.float32)
        greedy = self.is_greedy
        v[ks.P_INV_TEMP] = 1.0 if greedy else 1.0 / self.temperature
        if greedy:
            v[ks.P_COUNT] = 1
        elif self.top_k > 0:
            v[ks.P_COUNT] = self.top_k
        elif self.filtered:
            v[ks.P_COUNT], v[ks.P_WHOLE] = ALL_CANDIDATES, 1
        v[ks.P_TOP_P] = 1.0 if greedy else self.top_p
        v[ks.P_MIN_P] = 0.0 if greedy else self.min_p
        v[ks.P_REPEAT] = self.repetition_penalty
        v[ks.P_PRESENCE] = self.presence_penalty
        return v

    def probabilities(self, logits: Any, history: Any = None, *,
                      tile: int = DEFAULT_CANDIDATES) -> np.ndarray:
        """The distribution the device draws the next token from, in float64: the
        penalized, scaled, filtered softmax of ``logits`` (V,) given ``history`` (the
        int32 per-token history, see :func:`history_vector`; default: nothing seen) and
        the candidate tile ``tile``. Greedy gives a one-hot vector.

        Example:
            >>> p = SamplingParams(top_k=2).probabilities(np.log([0.5, 0.3, 0.2]))
            >>> np.round(p, 3)
            array([0.625, 0.375, 0.   ])
        """
        lg = np.asarray(logits, np.float64)
        hist = np.zeros(lg.shape, np.int32) if history is None else np.asarray(history)
        s = np.where(hist != 0, np.where(lg > 0, lg / self.repetition_penalty,
                                         lg * self.repetition_penalty), lg)
        s = s - np.where(hist == ks.GENERATED, self.presence_penalty, 0.0)
        out = np.zeros(lg.shape)
        n = self.candidates(tile)
        if n == 0:
            e = np.exp(s / self.temperature - (s / self.temperature).max())
            return e / e.sum()
        s = s * (1.0 if self.is_greedy else 1.0 / self.temperature)
        order = np.lexsort((np.arange(s.size), -s))[:n]
        v = s[order]
        if self.top_k > 0 or self.is_greedy:
            p = np.exp(v - v[0]) / np.exp(v - v[0]).sum()
        else:
            p = np.exp(v - v[0]) / np.exp(s - v[0]).sum()
        before = np.cumsum(p) - p
        keep = (before < self.top_p) | (self.top_p >= 1)
        keep[0] = True
        keep &= np.exp(v - v[0]) >= (0.0 if self.is_greedy else self.min_p)
        w = np.where(keep, np.exp(v - v[0]), 0.0)
        out[order] = w / w.sum()
        return out

    # ---- the checkpoint's defaults ------------------------------------------------------
    @classmethod
    def from_generation_config(cls, raw: dict, *, path: str | Path = GENERATION_CONFIG
                               ) -> "SamplingParams":
        """The settings of a loaded ``generation_config.json`` (see
        :func:`load_generation_config`); a bad value is a :class:`CheckpointError`
        naming the file and the key.

        Example:
            >>> p = SamplingParams.from_generation_config(
            ...     {"do_sample": True, "temperature": 0.6, "top_k": 20, "top_p": 0.95})
            >>> p == SamplingParams(temperature=0.6, top_k=20, top_p=0.95)
            True
        """
        def get(key: str, off: Any) -> Any:
            value = raw.get(key)
            return off if value is None else value

        do_sample = get("do_sample", False)
        if not isinstance(do_sample, bool):
            raise CheckpointError(f"do_sample is {do_sample!r}: it must be true or false",
                                  path=path, key="do_sample")
        fields = {"repetition_penalty": get("repetition_penalty", 1.0)}
        if do_sample:
            fields.update(temperature=get("temperature", 1.0), top_k=get("top_k", 0),
                          top_p=get("top_p", 1.0), min_p=get("min_p", 0.0))
        else:
            fields["temperature"] = 0.0
        try:
            return cls(**fields)
        except SamplingParamsError as e:
            raise CheckpointError(e.message, path=path, key=e.param, hint=e.hint) from None


def load_generation_config(checkpoint_dir: str | Path) -> SamplingParams | None:
    """The sampling defaults of a checkpoint: its ``generation_config.json`` read as
    transformers reads it (``do_sample`` false or absent: greedy, with its
    ``repetition_penalty``; true: ``temperature``, ``top_k``, ``top_p``, ``min_p`` and
    ``repetition_penalty``, an absent or null key off, as transformers 5 has it), or
    None when the checkpoint has no such file. Qwen3's ships ``do_sample`` true,
    temperature 0.6, top_k 20 and top_p 0.95. A file that is not a JSON object or holds
    a value out of range is a :class:`~tilelab.models.errors.CheckpointError`.

    Example:
        >>> load_generation_config("/nonexistent") is None
        True
    """
    file = Path(checkpoint_dir) / GENERATION_CONFIG
    if not file.is_file():
        return None
    return SamplingParams.from_generation_config(read_json_object(file), path=file)


def resolve_sampling(defaults: SamplingParams | None,
                     sampling: SamplingParams | None = None,
                     temperature: float | None = None,
                     seed: int | None = None) -> SamplingParams:
    """The settings of one generation: ``sampling`` if given, else the checkpoint's
    ``defaults``, else greedy; then ``temperature`` and ``seed``, when given, replace
    theirs (so ``temperature=0.7`` keeps a checkpoint's top_k and top_p, as
    transformers' ``generate(temperature=...)`` does, and ``temperature=0`` is greedy).

    Example:
        >>> d = SamplingParams(temperature=0.6, top_k=20)
        >>> resolve_sampling(d, temperature=0.9).top_k, resolve_sampling(None).is_greedy
        (20, True)
    """
    if sampling is not None and not isinstance(sampling, SamplingParams):
        raise SamplingParamsError(f"sampling must be a SamplingParams, got "
                                  f"{type(sampling).__name__}", param="sampling",
                                  hint="from tilelab.models.sampling import SamplingParams")
    base = sampling or defaults or SamplingParams.greedy()
    changes: dict[str, Any] = {}
    if temperature is not None:
        changes["temperature"] = temperature
    if seed is not None:
        changes["seed"] = seed
    return base.replace(**changes) if changes else base


def history_vector(vocab: int, prompt: Any, generated: Any = ()) -> np.ndarray:
    """The int32 per-token history the penalties read: :data:`~tilelab.kernels.decode.sampling.
    GENERATED` for generated tokens, :data:`~tilelab.kernels.decode.sampling.SEEN_IN_PROMPT`
    for the other tokens of the prompt, 0 elsewhere.

    Example:
        >>> history_vector(5, [1, 3], [3, 4]).tolist()
        [0, 1, 0, 2, 2]
    """
    h = np.zeros(vocab, np.int32)
    h[np.asarray(list(prompt), np.int64)] = ks.SEEN_IN_PROMPT
    h[np.asarray(list(generated), np.int64)] = ks.GENERATED
    return h
