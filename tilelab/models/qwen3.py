"""The Qwen3 inference engine, built only from safe tilelab kernels.

``Qwen3.from_pretrained(path)`` loads a Hugging Face checkpoint onto the device;
``logits(ids)`` runs a prefill and returns the logits of every position;
``generate(ids, max_new_tokens)`` runs a prefill, then one recorded decode step per new
token (greedy, or sampled on the device with ``temperature`` and ``seed``).

Example:
    >>> from tilelab.models import Qwen3
    >>> model = Qwen3.from_pretrained("path/to/checkpoint", device="cpu")   # doctest: +SKIP
    >>> model.logits([1, 2, 3]).shape                                        # doctest: +SKIP
    (3, 300)
    >>> model.generate([1, 2, 3], max_new_tokens=4)                          # doctest: +SKIP
    [17, 17, 254, 3]
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

import numpy as np

from tilelab.errors import TilelabError
from tilelab.models.decode_step import DecodeStep, StepConfig
from tilelab.models.device_weights import COMPUTE_DTYPES, DeviceWeights
from tilelab.models.errors import GenerateInputError
from tilelab.models.kv_cache import MAX_CAPACITY, KVCache
from tilelab.models.plug import plugged
from tilelab.models.prefill import prefill, prefill_logits
from tilelab.models.sampling import SamplingParams, load_generation_config, resolve_sampling
from tilelab.models.step_cost import CostRow, step_cost

__all__ = ["Qwen3", "UnsupportedModelError", "DEFAULT_MAX_TOKENS"]

#: the cache capacity when none is given (capped by the model's max positions)
DEFAULT_MAX_TOKENS = 2048


class UnsupportedModelError(TilelabError, ValueError):
    """A model whose shape the engine's kernels do not handle (the message says which
    dimension and what is supported).

    Example:
        >>> print(UnsupportedModelError("head_dim 80 is not a power of two"))
        head_dim 80 is not a power of two
    """


def _check_supported(c: Any) -> None:
    d = c.head_dim
    if d < 2 or d & (d - 1) or d > 256:
        raise UnsupportedModelError(
            f"head_dim {d} is not supported: the engine's RoPE and attention kernels "
            "take a power of two from 2 to 256 (each half of a head is one tile)",
            hint="Qwen3 models use head_dim 128")


def _check_temperature(temperature: Any) -> None:
    """0 (greedy) or a positive number whose reciprocal is finite in float32 (the
    sampling kernel multiplies the logits by it)."""
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) \
            or not 0 <= temperature < math.inf:
        raise GenerateInputError(f"temperature must be a number >= 0 (finite; 0 is "
                                 f"greedy), got {temperature!r}")
    with np.errstate(over="ignore"):
        inv = np.float32(1.0 / float(temperature)) if temperature > 0 else np.float32(1)
    if not np.isfinite(inv):
        raise GenerateInputError(f"temperature {temperature!r} is too small: "
                                 "1/temperature is not finite in float32, the type the "
                                 "sampling kernel scales the logits in",
                                 hint="use temperature=0 for greedy decoding")


class Qwen3:
    """A Qwen3 model on one device (see the module docstring).

    ``max_tokens``: the KV-cache capacity (prompt plus new tokens), rounded up to a
    power of two and capped by ``max_position_embeddings``; ``step_config``: tiles of
    the decode kernels (:class:`~tilelab.models.decode_step.StepConfig`); ``kernels``:
    user kernels the decode step launches in the built-ins' place, by role
    (``{"norm_qkv_gemv": my_kernel}``; the roles are :data:`tilelab.models.plug.ROLES`,
    each kernel a checked, safe ``@tl.kernel``).

    Example:
        >>> model = Qwen3(weights, max_tokens=64)                    # doctest: +SKIP
        >>> model.cache.capacity                                     # doctest: +SKIP
        64
    """

    def __init__(self, weights: DeviceWeights, *, max_tokens: int | None = None,
                 step_config: StepConfig | None = None, tokenizer: Any = None,
                 kernels: Any = None, sampling: SamplingParams | None = None):
        c = weights.config
        _check_supported(c)
        cap = c.max_position_embeddings
        want = DEFAULT_MAX_TOKENS if max_tokens is None else int(max_tokens)
        if not 2 <= want <= MAX_CAPACITY:
            raise GenerateInputError(f"Qwen3: max_tokens must be from 2 to {MAX_CAPACITY}, "
                                     f"got {max_tokens!r}",
                                     hint="it is the KV cache's size: prompt plus new "
                                          "tokens")
        self.weights, self.config, self.tokenizer = weights, c, tokenizer
        self.device = weights.device
        self.cache = KVCache(c, min(want, cap), dtype=weights.dtype, device=weights.device)
        self.max_tokens = min(self.cache.capacity, cap)
        self.step_config = step_config or StepConfig()
        #: user kernels by role, checked now (tilelab.models.plug)
        self.plugged = plugged(kernels, fuse_norms=self.step_config.fuse_norms)
        self._steps: dict[str, DecodeStep] = {}
        #: the sampling defaults of generation (the checkpoint's generation_config.json;
        #: None: greedy)
        self.sampling_defaults = resolve_sampling(None, sampling) if sampling else None

    @classmethod
    def from_pretrained(cls, path: Any, device: Any = None, *, dtype: str | None = None,
                        max_tokens: int | None = None,
                        step_config: StepConfig | None = None,
                        kernels: Any = None) -> "Qwen3":
        """Load a Hugging Face Qwen3 checkpoint directory onto ``device`` ("cpu",
        "gpu" or None: the default backend), computing in ``dtype`` (default: the
        checkpoint's dtype when it is bfloat16 or float16, else bfloat16); ``kernels``
        as in the constructor.

        Example:
            >>> model = Qwen3.from_pretrained("ckpt", device="cpu")        # doctest: +SKIP
        """
        from tilelab.models.checkpoint import load_checkpoint

        ckpt = load_checkpoint(path)
        if dtype is None:
            dtype = ckpt.config.dtype if ckpt.config.dtype in COMPUTE_DTYPES else "bfloat16"
        weights = DeviceWeights.from_checkpoint(ckpt, device=device, dtype=dtype)
        return cls(weights, max_tokens=max_tokens, step_config=step_config,
                   tokenizer=getattr(ckpt, "tokenizer", None), kernels=kernels,
                   sampling=load_generation_config(ckpt.path))

    # ---- checks -----------------------------------------------------------------------
    def _ids(self, ids: Any) -> list[int]:
        if isinstance(ids, (str, bytes)) or not isinstance(ids, (Sequence, np.ndarray)):
            raise GenerateInputError(f"token ids must be a list of ints, got "
                                     f"{type(ids).__name__}",
                                     hint="encode text with the checkpoint's tokenizer "
                                          "first (model.tokenizer.encode(text).ids)")
        out = []
        vocab = self.config.vocab_size
        for i, t in enumerate(ids):
            if isinstance(t, bool) or not isinstance(t, numbers.Integral):
                raise GenerateInputError(f"ids[{i}] = {t!r} is not an integer")
            if not 0 <= int(t) < vocab:
                raise GenerateInputError(f"ids[{i}] = {int(t)} is outside the vocabulary "
                                         f"(0..{vocab - 1})")
            out.append(int(t))
        if not out:
            raise GenerateInputError("the prompt is empty; give at least one token id")
        return out

    def _step(self, sample: bool | str) -> DecodeStep:
        head = sample if isinstance(sample, str) else ("gumbel" if sample else "argmax")
        if head not in self._steps:
            self._steps[head] = DecodeStep(self.weights, self.cache, self.step_config,
                                           sample=head, kernels=self.plugged)
        return self._steps[head]

    # ---- the interface ----------------------------------------------------------------
    def logits(self, ids: Sequence[int]) -> np.ndarray:
        """float32 logits of every position of ``ids``: shape ``(len(ids), vocab)``.

        Example:
            >>> model.logits([1, 2, 3]).shape                            # doctest: +SKIP
            (3, 300)
        """
        ids = self._ids(ids)
        self._fits(len(ids), 0)
        out = prefill_logits(self.weights, prefill(self.weights, self.cache, ids))
        if not np.isfinite(out).all():
            # the prefill left NaN or infinity in the cache's keys and values, which a
            # later decode would read (0 * NaN): zero them
            self.cache.discard()
        return out

    def _fits(self, prompt: int, new: int) -> None:
        if prompt + new > self.max_tokens:
            raise GenerateInputError(
                f"{prompt} prompt tokens + {new} new tokens exceed the KV cache's "
                f"{self.max_tokens} positions",
                hint="load the model with a larger max_tokens= (up to "
                     f"{self.config.max_position_embeddings})")

    def generate(self, ids: Sequence[int], max_new_tokens: int = 16, *,
                 temperature: float = 0.0, seed: int = 0, graph: bool = True) -> list[int]:
        """``max_new_tokens`` new token ids after ``ids``: greedy when ``temperature``
        is 0, else sampled from softmax(logits / temperature) on the device (Gumbel-max
        with a hash of ``seed``, the position and the token index: the same seed gives
        the same tokens). ``graph=False`` issues the step's launches one by one instead
        of replaying the recorded graph (same tokens). A token whose logits held NaN or
        infinity (a NaN weight, an overflow) is never returned:
        :class:`~tilelab.models.errors.NonFiniteLogitsError` names its position.

        Example:
            >>> model.generate([1, 2, 3], max_new_tokens=2)              # doctest: +SKIP
            [17, 254]
        """
        ids = self._ids(ids)
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, numbers.Integral) \
                or max_new_tokens < 1:
            raise GenerateInputError(f"max_new_tokens must be a positive int, got "
                                     f"{max_new_tokens!r}")
        _check_temperature(temperature)
        self._fits(len(ids), int(max_new_tokens))
        step = self.begin(ids, temperature=temperature, seed=seed)
        fut = None
        for _ in range(int(max_new_tokens) - 1):
            if self.device == "cpu" and fut is not None:
                fut.wait()
            fut = step.replay() if graph else step.run()
        if fut is not None:
            fut.wait()
        return self.cache.read_tokens(len(ids), len(ids) + int(max_new_tokens))

    def begin(self, ids: Sequence[int], *, temperature: float | None = None,
              seed: int | None = None, sampling: SamplingParams | None = None
              ) -> DecodeStep:
        """Prefill ``ids`` and pick the first new token (into ``cache.tokens``); returns
        the decode step whose :meth:`~DecodeStep.replay` (or ``run``) makes each further
        token. :meth:`generate` is this plus the loop; benchmarks time the loop alone.
        The sampling: ``sampling`` (a :class:`~tilelab.models.sampling.SamplingParams`),
        else the checkpoint's ``generation_config.json`` (:attr:`sampling_defaults`),
        else greedy; ``temperature`` and ``seed``, when given, replace theirs. The
        settings live in device memory: another call with other settings replays the
        same recorded step.

        Example:
            >>> step = model.begin([1, 2, 3])                            # doctest: +SKIP
            >>> step.replay().wait(); model.cache.read_tokens(3, 5)      # doctest: +SKIP
            [17, 254]
            >>> top20 = SamplingParams(top_k=20)
            >>> step = model.begin([1, 2, 3], sampling=top20)            # doctest: +SKIP
        """
        ids = self._ids(ids)
        if temperature is not None:
            _check_temperature(temperature)
        self._fits(len(ids), 1)
        params = resolve_sampling(self.sampling_defaults, sampling, temperature, seed)
        params.check_candidates(self.step_config.sample_candidates)
        step = self._step(params.head)
        cache = self.cache
        cache.set_sequence(ids)
        cache.set_sampling(params)
        hidden = prefill(self.weights, cache, ids)
        step.normed.copy_(hidden[len(ids) - 1])
        fut = step.run_head()
        if fut is not None:
            fut.wait()
        step.position = cache.position()     # the host tracks it from here on
        return step

    def step_cost(self, context: int | None = None) -> list[CostRow]:
        """Bytes and FLOPs of each kernel of one decode step attending to ``context``
        positions (default: the cache's current position + 1); see
        :mod:`tilelab.models.step_cost`.

        Example:
            >>> [r.kernel for r in model.step_cost(16)][:2]              # doctest: +SKIP
            ['embed', 'norm_qkv_gemv']
        """
        step = self._step(False)
        ctx = context if context is not None else self.cache.position() + 1
        return step_cost(self.config, ctx, dtype=self.weights.dtype, splits=step.splits,
                         one_pass=step.one_pass_at(ctx),
                         head_rows=step.config.head.bn,
                         fuse_norms=step.config.fuse_norms)

    def decode_step(self, sample: bool | str = False) -> DecodeStep:
        """The decode step with a head of :data:`~tilelab.models.decode_step.HEADS`
        (False: argmax, True: Gumbel-max, ``"sample"``: penalties and filters): its
        launches, buffers and graph.

        Example:
            >>> [l.kind for l in model.decode_step().launches][-1]       # doctest: +SKIP
            'advance'
        """
        return self._step(sample if isinstance(sample, str) else bool(sample))

    def kernels(self) -> list[Any]:
        """Every tilelab kernel the engine launches, seen by running a one-token
        prefill and a greedy and a sampled decode step (this overwrites the cache):
        for audits, such as checking that none of them is unsafe.

        Example:
            >>> any(k.options.unsafe for k in model.kernels())           # doctest: +SKIP
            False
        """
        from tilelab.runtime.events import subscribe

        found: dict[int, Any] = {}
        stop = subscribe(lambda e: found.setdefault(id(e.kernel), e.kernel))
        try:
            self.logits([0])
            self.generate([0], 2, graph=False)
            self.generate([0], 2, temperature=1.0, graph=False)
            self.begin([0], sampling=SamplingParams(top_k=2, repetition_penalty=1.1)
                       ).run().wait()
        finally:
            stop()
        return list(found.values())

    def __repr__(self) -> str:
        c = self.config
        return (f"Qwen3(layers={c.num_hidden_layers}, hidden={c.hidden_size}, "
                f"vocab={c.vocab_size}, device={self.device!r}, "
                f"max_tokens={self.max_tokens})")
