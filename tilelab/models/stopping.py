"""When a generation stops, and which of its text is shown.

A generation ends at the first of: an end-of-sequence token (``Stop.eos_token_ids``,
by default the checkpoint's: ``generation_config.json``, ``config.json`` and the
tokenizer's ``eos_token``), a stop string appearing in the text (``Stop.strings``), or
the token budget. Like transformers' ``generate``, the EOS token is the last of the
returned tokens; its text is not part of the reply. A stop string ends the text
before it (as the OpenAI API and llama.cpp do); the token that completed it is the
last token. ``ignore_eos`` runs to the budget whatever comes (benchmarks).

Text is shown as it is decoded (:class:`~tilelab.models.stream.TextDecoder`), except
its tail that could still turn out to begin a stop string: that is held back until the
next tokens decide. So the streamed text never contains part of a stop string, and
the streamed pieces always add up to the final text.

Example:
    >>> class Chars:   # a toy tokenizer: token i is chr(i)
    ...     def decode(self, ids, skip_special_tokens=True):
    ...         return "".join(map(chr, ids))
    >>> s = Stopper(Stop(strings=("END",)), Chars())
    >>> [s.feed(ord(c)) for c in "abEN"], s.feed(ord("D")), s.reason
    (['a', 'b', '', ''], '', 'stop')
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from .errors import GenerateInputError
from .stream import TextDecoder

__all__ = ["Stop", "Stopper", "stop_rules"]


@dataclass(frozen=True)
class Stop:
    """The stopping rules of one generation (see the module docstring).

    Example:
        >>> Stop(eos_token_ids=(2,), strings=("\\n\\n",)).stops_at(2)
        True
    """

    eos_token_ids: tuple[int, ...] = ()
    strings: tuple[str, ...] = ()
    ignore_eos: bool = False

    def stops_at(self, token: int) -> bool:
        """Whether ``token`` ends the generation as an EOS token."""
        return not self.ignore_eos and token in self.eos_token_ids

    @property
    def needs_tokens(self) -> bool:
        """Whether the generation must read its tokens back while it runs (it may stop
        early)."""
        return bool(self.strings) or (not self.ignore_eos and bool(self.eos_token_ids))


def stop_rules(default_eos: Iterable[int], *, eos_token_ids: Iterable[int] | None = None,
               stop_strings: Any = (), ignore_eos: bool = False,
               vocab_size: int | None = None) -> Stop:
    """The checked :class:`Stop` of a generation: ``eos_token_ids`` (None: the
    checkpoint's ``default_eos``), ``stop_strings`` (a string or a list of non-empty
    strings), ``ignore_eos``.

    Example:
        >>> stop_rules((5,), stop_strings="\\n")
        Stop(eos_token_ids=(5,), strings=('\\n',), ignore_eos=False)
        >>> stop_rules((5,), stop_strings=[""])
        Traceback (most recent call last):
        ...
        tilelab.models.errors.GenerateInputError: stop_strings[0] is empty: a stop string needs at least one character
    """
    eos = tuple(default_eos if eos_token_ids is None else eos_token_ids)
    for t in eos:
        if isinstance(t, bool) or not isinstance(t, int) or t < 0 or \
                (vocab_size is not None and t >= vocab_size):
            raise GenerateInputError(f"eos_token_ids: {t!r} is not a token id of the "
                                     "vocabulary")
    strings = (stop_strings,) if isinstance(stop_strings, str) else tuple(stop_strings or ())
    for i, s in enumerate(strings):
        if not isinstance(s, str):
            raise GenerateInputError(f"stop_strings[{i}] is {type(s).__name__}, not a "
                                     "string")
        if not s:
            raise GenerateInputError(f"stop_strings[{i}] is empty: a stop string needs "
                                     "at least one character")
    return Stop(tuple(dict.fromkeys(eos)), strings, bool(ignore_eos))


class Stopper:
    """Follows one generation token by token: :meth:`feed` says which text may be shown
    and sets :attr:`reason` once the generation is over ("eos", "stop"; the caller
    sets "length"). ``tokenizer`` decodes the text (None: no text, and no stop
    strings).

    Example:
        >>> s = Stopper(Stop(eos_token_ids=(0,)), None)
        >>> s.feed(5), s.feed(0), s.reason
        ('', '', 'eos')
    """

    def __init__(self, stop: Stop, tokenizer: Any):
        if stop.strings and tokenizer is None:
            raise GenerateInputError("stop strings need a tokenizer, and this model has "
                                     "none", hint="stop on token ids: eos_token_ids=[...]")
        self.stop = stop
        self.decoder = TextDecoder(tokenizer) if tokenizer is not None else None
        self.tokens: list[int] = []
        #: the text shown so far (the reply, once the generation is over)
        self.text = ""
        self._held = ""
        #: why the generation ended: "eos", "stop", "length", or None while it runs
        self.reason: str | None = None

    def feed(self, token: int) -> str:
        """Take the next token; the text that may be shown now. After the token that
        ends the generation :attr:`reason` is set and every shown piece is final.

        Example:
            >>> s.feed(17)                                                # doctest: +SKIP
            ' world'
        """
        if self.reason is not None:
            raise RuntimeError("Stopper.feed() after the generation ended")
        self.tokens.append(int(token))
        if self.stop.stops_at(int(token)):
            self.reason = "eos"
            return self._show(self._held + self._flush())
        if self.decoder is None:
            return ""
        held = self._held + self.decoder.push(token)
        cut = _first_stop(held, self.stop.strings)
        if cut is not None:
            self.reason = "stop"
            self._held = ""
            return self._show(held[:cut])
        keep = _partial_stop(held, self.stop.strings)
        self._held = held[len(held) - keep:] if keep else ""
        return self._show(held[:len(held) - keep])

    def finish(self) -> str:
        """End the generation at the token budget (reason "length"): the text still
        held back.

        Example:
            >>> s.finish()                                                # doctest: +SKIP
            ''
        """
        if self.reason is not None:
            return ""
        self.reason = "length"
        held = self._held + self._flush()
        self._held = ""
        cut = _first_stop(held, self.stop.strings)
        return self._show(held if cut is None else held[:cut])

    def _flush(self) -> str:
        return self.decoder.flush() if self.decoder is not None else ""

    def _show(self, piece: str) -> str:
        self.text += piece
        return piece


def _first_stop(text: str, strings: tuple[str, ...]) -> int | None:
    """Where the earliest stop string in ``text`` begins, or None."""
    found = [i for i in (text.find(s) for s in strings) if i >= 0]
    return min(found) if found else None


def _partial_stop(text: str, strings: tuple[str, ...]) -> int:
    """The length of the longest tail of ``text`` that begins some stop string (and is
    shorter than it): text that the next tokens may turn into a stop string."""
    best = 0
    for s in strings:
        for n in range(min(len(s) - 1, len(text)), best, -1):
            if text.endswith(s[:n]):
                best = n
                break
    return best
