"""The generation loop: decode steps on the device, tokens read back to stop and stream.

The decode step runs as a replayed graph that reads and advances its token and
position in device memory (:mod:`~tilelab.models.decode_step`), so the device does not
need the host between steps. The host needs the tokens only to stop (an EOS token, a
stop string) and to stream text. :func:`run` issues ``check_every`` replays, waits for
the last, and reads their new tokens back in one call
(:meth:`~tilelab.models.kv_cache.KVCache.read_tokens`: the tokens and their
non-finite flags, two copies of ``4 * check_every`` bytes); then it feeds them to the
:class:`~tilelab.models.stopping.Stopper`. Steps that ran past a stop inside a chunk are
counted (the speed report says so) and their tokens dropped. A generation that cannot
stop early (no EOS ids and no stop strings, or ``ignore_eos``) and is not streamed
reads nothing until its last step, as before.

:class:`TokenStream` is the iterator the caller gets: :class:`Piece` objects (the token
and the text it completed), then ``tokens``, ``text``, ``finish_reason`` and ``speed``
(a :class:`~tilelab.models.speed.SpeedReport`). ``Qwen3.generate`` consumes one and
returns its tokens.

Example:
    >>> s = model.stream([1, 2, 3], max_new_tokens=8)               # doctest: +SKIP
    >>> for piece in s: print(piece.text, end="", flush=True)       # doctest: +SKIP
    >>> s.finish_reason, s.speed.decode_rate                        # doctest: +SKIP
    ('eos', 3.2)
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterator

from .errors import GenerateInputError
from .speed import SpeedReport, gpu_roof, steps_bytes
from .stopping import Stop, Stopper

__all__ = ["Piece", "TokenStream", "Request", "run", "warm_up", "check_new_tokens"]


@dataclass(frozen=True)
class Piece:
    """One new token and the text it let through (may be "": a character or a merge
    still incomplete, a special token, text held back as the start of a stop string).

    Example:
        >>> Piece(17, " world")
        Piece(token=17, text=' world')
    """

    token: int
    text: str


@dataclass(frozen=True)
class Request:
    """One generation, checked: the prompt ids, at most ``max_new_tokens`` new ones, the
    stopping rules, the sampling (a :class:`~tilelab.models.sampling.SamplingParams`;
    None: greedy), ``graph`` (replay the recorded step, else plain launches),
    ``check_every`` (steps between read-backs), ``reuse`` (keep the cache's keys and
    values of a common prefix: a session), ``streamed`` (read back as it runs).

    Example:
        >>> Request([1, 2], 4, Stop()).max_new_tokens
        4
    """

    ids: list[int]
    max_new_tokens: int
    stop: Stop
    sampling: Any = None
    graph: bool = True
    check_every: int = 1
    reuse: bool = False
    streamed: bool = False


class TokenStream:
    """The pieces of a running generation (see the module docstring); iterate it once.
    Its attributes fill in as it runs: ``tokens`` (new ids, the EOS token included),
    ``text`` (the reply: no EOS text, nothing from a stop string on),
    ``finish_reason`` ("eos", "stop" or "length"; None while running), ``speed``.

    Example:
        >>> s = model.stream("the quick", max_new_tokens=4)             # doctest: +SKIP
        >>> "".join(p.text for p in s) == s.text                        # doctest: +SKIP
        True
    """

    def __init__(self, pieces: Iterator[Piece], stopper: Stopper):
        self._pieces = pieces
        self._stopper = stopper
        #: the speed report, once the stream has ended
        self.speed: SpeedReport | None = None

    def __iter__(self) -> "TokenStream":
        return self

    def __next__(self) -> Piece:
        return next(self._pieces)

    @property
    def tokens(self) -> list[int]:
        """The new tokens so far."""
        return list(self._stopper.tokens)

    @property
    def text(self) -> str:
        """The text shown so far (the reply once the stream has ended)."""
        return self._stopper.text

    @property
    def finish_reason(self) -> str | None:
        """Why the generation ended ("eos", "stop", "length"), None while it runs."""
        return self._stopper.reason

    def consume(self) -> "TokenStream":
        """Run the stream to its end; returns it.

        Example:
            >>> model.stream([1, 2], 4).consume().tokens                 # doctest: +SKIP
            [17, 254, 3, 99]
        """
        for _ in self:
            pass
        return self

    def close(self) -> None:
        """Stop the generation here (the steps already run stay in the KV cache)."""
        self._pieces.close()


def run(model: Any, req: Request) -> TokenStream:
    """Start ``req`` on ``model`` (a :class:`~tilelab.models.qwen3.Qwen3`); the stream of
    its pieces. Nothing runs until the stream is iterated.

    Example:
        >>> run(model, Request([1, 2], 4, Stop())).consume().tokens     # doctest: +SKIP
        [17, 254, 3, 99]
    """
    stopper = Stopper(req.stop, model.tokenizer)
    stream = TokenStream(iter(()), stopper)
    stream._pieces = _pieces(model, req, stopper, stream)
    return stream


def _pieces(model: Any, req: Request, stopper: Stopper,
            stream: TokenStream) -> Iterator[Piece]:
    """The generation itself (a generator: it runs as the stream is iterated)."""
    state = model.cache_state
    ticket = state.claim()
    cache, length = model.cache, len(req.ids)
    steps, failed, began = 0, False, False
    try:
        t0 = time.perf_counter()
        step, start = model._begin(req.ids, temperature=None, seed=None,
                                   reuse=req.reuse, sampling=req.sampling)
        began = True
        pending = cache.read_tokens(length, length + 1)
        t1 = t2 = time.perf_counter()
        made, chunk = 1, _chunk(req)
        while True:
            for token in pending:
                text = stopper.feed(token)
                yield Piece(token, text)
                state.check(ticket)
                if stopper.reason is not None:
                    break
            if stopper.reason is not None:
                break
            if made >= req.max_new_tokens:
                tail = stopper.finish()
                if tail:
                    yield Piece(stopper.tokens[-1], tail)
                break
            n = min(chunk, req.max_new_tokens - made)
            _replay(model, step, n, req.graph)
            steps += n
            pending = cache.read_tokens(length + made, length + made + n)
            made += n
            t2 = time.perf_counter()
        stream.speed = _report(model, req, start, t1 - t0, steps, t2 - t1,
                               len(stopper.tokens))
    except GeneratorExit:      # closed by the caller: what ran is in the cache
        raise
    except BaseException:
        failed = True
        raise
    finally:
        if began:
            # the cache holds keys and values of every position the steps processed
            state.record(ticket, [] if failed else (req.ids + stopper.tokens)[:length + steps])


def _chunk(req: Request) -> int:
    """Steps between read-backs: ``check_every`` when the generation may stop early or
    is streamed, else all of them (nothing to read until the end)."""
    if req.stop.needs_tokens or req.streamed:
        return req.check_every
    return max(1, req.max_new_tokens - 1)


def _replay(model: Any, step: Any, n: int, graph: bool) -> None:
    """Run ``n`` decode steps back to back and wait for the last."""
    fut = None
    for _ in range(n):
        if model.device == "cpu" and fut is not None:
            fut.wait()
        fut = step.replay() if graph else step.run()
    if fut is not None:
        fut.wait()


def _report(model: Any, req: Request, start: int, prefill_s: float, steps: int,
            decode_s: float, new: int) -> SpeedReport:
    report = SpeedReport(prompt_tokens=len(req.ids), prefilled_tokens=len(req.ids) - start,
                         prefill_s=prefill_s, new_tokens=new, decode_steps=steps,
                         decode_s=decode_s, device="cpu" if model.device == "cpu" else "gpu")
    if report.device == "gpu" and steps:
        report.decode_bytes = steps_bytes(model.config, model.weights.dtype,
                                          len(req.ids) + 1, steps)
        report.gpu, report.roof = gpu_roof()
    return report


def check_new_tokens(max_new_tokens: Any) -> int:
    """``max_new_tokens`` as a positive int, else :class:`GenerateInputError`.

    Example:
        >>> check_new_tokens(0)
        Traceback (most recent call last):
        ...
        tilelab.models.errors.GenerateInputError: max_new_tokens must be a positive int, got 0
    """
    import numbers

    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, numbers.Integral) \
            or max_new_tokens < 1:
        raise GenerateInputError(f"max_new_tokens must be a positive int, got "
                                 f"{max_new_tokens!r}")
    return int(max_new_tokens)


def warm_up(model: Any, ids: list[int], **sampling: Any) -> float | None:
    """Run the prefill of ``ids`` and one decode step once, before anything is timed:
    the kernels are compiled (or found in the disk cache) and loaded, the step's graph
    (of the head that ``sampling``'s keywords of :meth:`~tilelab.models.qwen3.Qwen3.
    stream` choose) recorded. The seconds it took (the speed report's "first run");
    None when the context has no room for it.

    Example:
        >>> warm_up(model, [1, 2, 3])                                    # doctest: +SKIP
        0.97
    """
    n = min(2, model.max_seq_len - len(ids))
    if n < 1:
        return None
    t0 = time.perf_counter()
    model.stream(ids, n, ignore_eos=True, **sampling).consume()
    return time.perf_counter() - t0
