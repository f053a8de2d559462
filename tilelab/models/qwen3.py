"""The Qwen3 inference engine, built only from safe tilelab kernels.

``Qwen3.from_pretrained(path)`` loads a Hugging Face checkpoint onto the device;
``logits(ids)`` runs a prefill and returns the logits of every position;
``generate(ids, max_new_tokens)`` runs a prefill, then one recorded decode step per new
token (greedy, or sampled on the device with ``temperature`` and ``seed``) until an
end-of-sequence token, a stop string or the budget (:mod:`~tilelab.models.stopping`);
``stream(...)`` is the same as an iterator of tokens and text
(:mod:`~tilelab.models.generation`); ``chat(messages)`` and ``session()`` talk through
the checkpoint's chat template (:mod:`~tilelab.models.chat`,
:mod:`~tilelab.models.session`), a session continuing in the KV cache.

Example:
    >>> from tilelab.models import Qwen3
    >>> model = Qwen3.from_pretrained("path/to/checkpoint", device="cpu")   # doctest: +SKIP
    >>> model.logits([1, 2, 3]).shape                                        # doctest: +SKIP
    (3, 300)
    >>> model.generate([1, 2, 3], max_new_tokens=4)                          # doctest: +SKIP
    [17, 17, 254, 3]
    >>> model.chat([{"role": "user", "content": "hi"}], max_new_tokens=32)   # doctest: +SKIP
    'Hello! How can I help?'
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
from tilelab.models.generation import Request, TokenStream, check_new_tokens, run
from tilelab.models.kv_cache import MAX_CAPACITY, KVCache
from tilelab.models.plug import plugged
from tilelab.models.prefill import prefill, prefill_logits
from tilelab.models.sampling import SamplingParams, load_generation_config, resolve_sampling
from tilelab.models.session import CacheState, ChatSession
from tilelab.models.step_cost import CostRow, step_cost
from tilelab.models.stopping import stop_rules

__all__ = ["Qwen3", "UnsupportedModelError", "ContextLengthError", "DEFAULT_MAX_TOKENS"]

#: the cache capacity when none is given (capped by the model's max positions)
DEFAULT_MAX_TOKENS = 2048


class UnsupportedModelError(TilelabError, ValueError):
    """A model whose shape the engine's kernels do not handle (the message says which
    dimension and what is supported).

    Example:
        >>> print(UnsupportedModelError("head_dim 80 is not a power of two"))
        head_dim 80 is not a power of two
    """


class ContextLengthError(GenerateInputError):
    """A prompt plus its new tokens do not fit the model's context (``max_seq_len``,
    the KV cache's size): the message gives the three numbers, the hint what to change.

    Example:
        >>> isinstance(ContextLengthError("too long"), GenerateInputError)
        True
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

    ``max_seq_len`` (or its older name ``max_tokens``): the context, prompt plus new
    tokens, capped by ``max_position_embeddings`` (the KV cache holds it rounded up to a
    power of two); ``eos_token_ids``: the ids generation stops at by default;
    ``tokenizer_config``: the chat template and special tokens
    (:class:`~tilelab.models.tokenizer_config.TokenizerConfig`); ``step_config``: tiles of
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
                 kernels: Any = None, max_seq_len: int | None = None,
                 eos_token_ids: Sequence[int] = (), tokenizer_config: Any = None,
                 source: Any = None, sampling: SamplingParams | None = None):
        c = weights.config
        _check_supported(c)
        cap = c.max_position_embeddings
        want = _context(max_tokens, max_seq_len)
        self.weights, self.config, self.tokenizer = weights, c, tokenizer
        self.device = weights.device
        self.cache = KVCache(c, min(want, cap), dtype=weights.dtype, device=weights.device)
        #: the context: prompt plus new tokens of a sequence (what the cache holds)
        self.max_seq_len = min(want, cap)
        self.max_tokens = self.max_seq_len
        #: the ids generation stops at unless told otherwise
        self.eos_token_ids = tuple(int(t) for t in eos_token_ids)
        self.tokenizer_config = tokenizer_config
        #: where the model came from (its checkpoint directory), for messages
        self.source = None if source is None else str(source)
        #: which tokens' keys and values the cache holds (sessions reuse them)
        self.cache_state = CacheState()
        self._chat_template: Any = None
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
                        kernels: Any = None, max_seq_len: int | None = None) -> "Qwen3":
        """Load a Hugging Face Qwen3 checkpoint directory onto ``device`` ("cpu",
        "gpu" or None: the default backend), computing in ``dtype`` (default: the
        checkpoint's dtype when it is bfloat16 or float16, else bfloat16); its tokenizer,
        chat template and EOS ids come with it; ``max_seq_len`` and ``kernels`` as in
        the constructor.

        Example:
            >>> model = Qwen3.from_pretrained("ckpt", device="cpu")        # doctest: +SKIP
        """
        from tilelab.models.checkpoint import load_checkpoint

        ckpt = load_checkpoint(path)
        if dtype is None:
            dtype = ckpt.config.dtype if ckpt.config.dtype in COMPUTE_DTYPES else "bfloat16"
        weights = DeviceWeights.from_checkpoint(ckpt, device=device, dtype=dtype)
        return cls(weights, max_tokens=max_tokens, max_seq_len=max_seq_len,
                   step_config=step_config, tokenizer=ckpt.tokenizer, kernels=kernels,
                   eos_token_ids=ckpt.eos_token_ids, tokenizer_config=ckpt.tokenizer_config,
                   source=ckpt.path, sampling=load_generation_config(ckpt.path))

    # ---- checks -----------------------------------------------------------------------
    def _ids(self, ids: Any) -> list[int]:
        if isinstance(ids, (str, bytes)) or not isinstance(ids, (Sequence, np.ndarray)):
            raise GenerateInputError(f"token ids must be a list of ints, got "
                                     f"{type(ids).__name__}",
                                     hint="encode text with the checkpoint's tokenizer "
                                          "first (model.encode(text))")
        ids = _one_sequence(ids)
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
        self.cache_state.claim()
        self.cache_state.forget()
        out = prefill_logits(self.weights, prefill(self.weights, self.cache, ids))
        if not np.isfinite(out).all():
            # the prefill left NaN or infinity in the cache's keys and values, which a
            # later decode would read (0 * NaN): zero them
            self.cache.discard()
        return out

    def _fits(self, prompt: int, new: int) -> None:
        if prompt + new > self.max_seq_len:
            cap = self.config.max_position_embeddings
            raise ContextLengthError(
                f"{prompt} prompt tokens + {new} new tokens exceed the KV cache's "
                f"{self.max_seq_len} positions (max_seq_len)",
                hint=f"ask for fewer new tokens, or load the model with a larger "
                     f"max_seq_len= (up to {cap}, max_position_embeddings)"
                if self.max_seq_len < cap else "ask for fewer new tokens or shorten the "
                f"prompt: the model has {cap} positions (max_position_embeddings)")

    def generate(self, ids: Sequence[int], max_new_tokens: int = 16, *,
                 temperature: float | None = None, seed: int | None = None,
                 sampling: SamplingParams | None = None, graph: bool = True,
                 stop_strings: Any = (), eos_token_ids: Sequence[int] | None = None,
                 ignore_eos: bool = False, stream: bool = False, check_every: int = 1,
                 reuse_cache: bool = False) -> list[int] | TokenStream:
        """At most ``max_new_tokens`` new token ids after ``ids``, picked on the device
        as ``sampling`` says (a :class:`~tilelab.models.sampling.SamplingParams`), else
        as the checkpoint's ``generation_config.json`` says, else greedily;
        ``temperature`` and ``seed``, when given, replace theirs (``temperature=0``:
        greedy; the same seed gives the same tokens). The generation stops early at an EOS
        token (``eos_token_ids``, default the checkpoint's; ``ignore_eos`` runs to the
        budget), which is the last id returned, as transformers returns it, or at a
        stop string (``stop_strings``, needs the tokenizer). ``stream=True`` returns
        the :class:`~tilelab.models.generation.TokenStream` instead (see
        :meth:`stream`). ``graph=False`` issues the step's launches one by one instead
        of replaying the recorded graph (same tokens); ``check_every``: decode steps
        between the read-backs that decide stopping; ``reuse_cache``: prefill only what
        follows the tokens the cache already holds (see :mod:`~tilelab.models.session`).
        A token whose logits held NaN or infinity (a NaN weight, an overflow) is never
        returned: :class:`~tilelab.models.errors.NonFiniteLogitsError` names its
        position.

        Example:
            >>> model.generate([1, 2, 3], max_new_tokens=2)              # doctest: +SKIP
            [17, 254]
        """
        s = self.stream(ids, max_new_tokens, temperature=temperature, seed=seed,
                        sampling=sampling, graph=graph, stop_strings=stop_strings,
                        eos_token_ids=eos_token_ids, ignore_eos=ignore_eos,
                        check_every=check_every, reuse_cache=reuse_cache,
                        _streamed=stream)
        return s if stream else s.consume().tokens

    def stream(self, ids: Sequence[int], max_new_tokens: int = 16, *,
               temperature: float | None = None, seed: int | None = None,
               sampling: SamplingParams | None = None, graph: bool = True,
               stop_strings: Any = (), eos_token_ids: Sequence[int] | None = None,
               ignore_eos: bool = False, check_every: int = 1, reuse_cache: bool = False,
               _streamed: bool = True) -> TokenStream:
        """:meth:`generate` as an iterator: each new token as a
        :class:`~tilelab.models.generation.Piece` with the text it completed (decoded
        across token boundaries; its pieces add up to the final text), read back from
        the device every ``check_every`` steps. After the last piece the stream has
        ``tokens``, ``text`` (the reply, without the EOS token's text or a stop
        string), ``finish_reason`` ("eos", "stop", "length") and ``speed``
        (:class:`~tilelab.models.speed.SpeedReport`).

        Example:
            >>> s = model.stream(model.encode("the quick"), 16)           # doctest: +SKIP
            >>> for piece in s: print(piece.text, end="", flush=True)     # doctest: +SKIP
            >>> s.finish_reason                                           # doctest: +SKIP
            'eos'
        """
        ids = self._ids(ids)
        n = check_new_tokens(max_new_tokens)
        params = resolve_sampling(self.sampling_defaults, sampling, temperature, seed)
        params.check_candidates(self.step_config.sample_candidates)
        if isinstance(check_every, bool) or not isinstance(check_every, numbers.Integral) \
                or check_every < 1:
            raise GenerateInputError(f"check_every must be a positive int (decode steps "
                                     f"between read-backs), got {check_every!r}")
        self._fits(len(ids), n)
        stop = stop_rules(self.eos_token_ids, eos_token_ids=eos_token_ids,
                          stop_strings=stop_strings, ignore_eos=ignore_eos,
                          vocab_size=self.config.vocab_size)
        return run(self, Request(ids, n, stop, params, bool(graph), int(check_every),
                                 bool(reuse_cache), bool(_streamed)))

    def _begin(self, ids: list[int], *, temperature: float | None, seed: int | None,
               reuse: bool, sampling: SamplingParams | None = None
               ) -> tuple[DecodeStep, int]:
        """Prefill ``ids`` (from the first position the cache does not hold, when
        ``reuse``) and pick the first new token: (the decode step, the position the
        prefill started at). The sampling settings: ``sampling`` or the model's
        defaults, with ``temperature`` and ``seed`` when given
        (:func:`~tilelab.models.sampling.resolve_sampling`)."""
        params = resolve_sampling(self.sampling_defaults, sampling, temperature, seed)
        params.check_candidates(self.step_config.sample_candidates)
        start = self.cache_state.reusable(ids) if reuse else 0
        step = self._step(params.head)
        cache = self.cache
        if start and cache.nonfinite.numpy().any():
            start = 0                         # set_sequence zeroes a flagged cache
        if start:
            cache.tokens[start:len(ids)].copy_(np.asarray(ids[start:], np.int32))
            cache.pos.copy_(np.array([len(ids) - 1], np.int32))
            cache.prompt_length = len(ids)
        else:
            cache.set_sequence(ids)
        cache.set_sampling(params)
        hidden = prefill(self.weights, cache, ids[start:], start=start)
        step.normed.copy_(hidden[len(ids) - start - 1])
        fut = step.run_head()
        if fut is not None:
            fut.wait()
        step.position = cache.position()     # the host tracks it from here on
        return step, start

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
        ticket = self.cache_state.claim()
        step, _ = self._begin(ids, temperature=temperature, seed=seed, reuse=False,
                              sampling=sampling)
        self.cache_state.record(ticket, [])   # the caller's steps: contents unknown
        return step

    # ---- text and chat -------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        """The token ids of ``text`` (special tokens written in it, such as
        ``<|im_start|>``, are recognised), with the checkpoint's tokenizer.

        Example:
            >>> model.encode("the quick brown fox")                      # doctest: +SKIP
            [68, 118, 102]
        """
        tok = self._tokenizer("encode text")
        if not isinstance(text, str):
            raise GenerateInputError(f"encode() takes a string, got {type(text).__name__}")
        return list(tok.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = True) -> str:
        """The text of token ids (special tokens left out unless asked for).

        Example:
            >>> model.decode([68, 118, 102])                             # doctest: +SKIP
            'the quick brown fox'
        """
        return self._tokenizer("decode tokens").decode(
            [int(t) for t in ids], skip_special_tokens=skip_special_tokens)

    def _tokenizer(self, what: str) -> Any:
        if self.tokenizer is None:
            raise GenerateInputError(f"cannot {what}: the checkpoint has no tokenizer.json",
                                     hint="pass token ids instead")
        return self.tokenizer

    @property
    def chat_template(self) -> Any:
        """The checkpoint's :class:`~tilelab.models.chat.ChatTemplate`, or None.

        Example:
            >>> model.chat_template.render([{"role": "user", "content": "hi"}],
            ...                            add_generation_prompt=True)  # doctest: +SKIP
            '<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\n'
        """
        cfg = self.tokenizer_config
        if self._chat_template is None and cfg is not None and cfg.chat_template:
            from tilelab.models.chat import ChatTemplate

            self._chat_template = ChatTemplate(cfg.chat_template, cfg.special_tokens,
                                               source=cfg.template_file)
        return self._chat_template

    def session(self, *, system: str | None = None, enable_thinking: bool | None = None,
                **generation: Any) -> ChatSession:
        """A multi-turn :class:`~tilelab.models.session.ChatSession` that continues in
        the KV cache: each turn prefills only its new tokens.

        Example:
            >>> chat = model.session(system="Be brief.")                 # doctest: +SKIP
            >>> chat.send("hi", max_new_tokens=16)                       # doctest: +SKIP
            'Hello!'
        """
        return ChatSession(self, system=system, enable_thinking=enable_thinking,
                           **generation)

    def chat(self, messages: Sequence[Any], *, enable_thinking: bool | None = None,
             stream: bool = False, **generation: Any) -> Any:
        """The assistant's reply to ``messages`` (dicts with ``role`` and ``content``),
        rendered with the chat template as ``apply_chat_template(...,
        add_generation_prompt=True)`` renders it: the reply's text, or with
        ``stream=True`` its :class:`~tilelab.models.generation.TokenStream`. Keywords as
        :meth:`generate`; the cache is reused for a common prefix with the previous
        generation.

        Example:
            >>> model.chat([{"role": "user", "content": "hi"}], max_new_tokens=16)  # doctest: +SKIP
            'Hello!'
        """
        from tilelab.models.chat import ChatTemplateError

        if self.chat_template is None:
            raise ChatTemplateError(f"{self.source or 'the model'} has no chat template",
                                    hint="generate from token ids instead")
        text = self.chat_template.render(messages, add_generation_prompt=True,
                                         enable_thinking=enable_thinking)
        generation.setdefault("reuse_cache", True)
        s = self.stream(self.encode(text), **generation)
        return s if stream else s.consume().text

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
                         fuse_norms=step.config.fuse_norms,
                         rope_attention=step.config.fuse_rope_attention)

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
            self.generate([0], 2, graph=False, ignore_eos=True)
            self.generate([0], 2, temperature=1.0, graph=False, ignore_eos=True)
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


def _context(max_tokens: Any, max_seq_len: Any) -> int:
    """The context asked for (``max_seq_len``, or its older name ``max_tokens``), checked;
    the default is :data:`DEFAULT_MAX_TOKENS`."""
    if max_tokens is not None and max_seq_len is not None and max_tokens != max_seq_len:
        raise GenerateInputError(f"Qwen3: max_seq_len={max_seq_len!r} and "
                                 f"max_tokens={max_tokens!r} disagree; they are one setting",
                                 hint="pass max_seq_len only")
    name = "max_seq_len" if max_seq_len is not None else "max_tokens"
    value = max_seq_len if max_seq_len is not None else max_tokens
    want = DEFAULT_MAX_TOKENS if value is None else value
    if isinstance(want, bool) or not isinstance(want, numbers.Integral) \
            or not 2 <= want <= MAX_CAPACITY:
        raise GenerateInputError(f"Qwen3: {name} must be from 2 to {MAX_CAPACITY}, "
                                 f"got {value!r}",
                                 hint="it is the KV cache's size: prompt plus new tokens")
    return int(want)


def _one_sequence(ids: Any) -> Any:
    """``ids`` as one sequence: a batch of one (``[[1, 2, 3]]``, an array of shape
    ``(1, n)``) is unwrapped; a larger batch is refused, saying so."""
    first = ids[0] if len(ids) else None
    nested = isinstance(first, (Sequence, np.ndarray)) and not isinstance(first, (str, bytes))
    if not nested:
        return ids
    if len(ids) > 1:
        raise GenerateInputError(
            f"got a batch of {len(ids)} prompts: the engine decodes one sequence at a "
            "time (batch size 1)", hint="call generate() once per prompt")
    return ids[0]
