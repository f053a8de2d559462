"""Sessions: a conversation that continues in the KV cache instead of starting over.

The engine has one KV cache. :class:`CacheState` remembers which tokens' keys and
values it holds (positions ``0..n-1``), and which generation owns it: a stream that a
later generation superseded refuses to go on rather than decode from someone else's
cache. A generation that asks to reuse the cache (``reuse=True``; sessions do)
prefills only what follows the longest common prefix of its prompt and the cached
tokens, so a chat's next turn prefills the new user message and not the whole
conversation again. The prefix is a token match, so it holds however the chat template
re-renders earlier turns (Qwen3's drops the thinking of earlier answers: the cache is
reused up to where the rendering first differs).

:class:`ChatSession` is the conversation: its messages, the chat template, the system
prompt, the thinking switch; ``send(text)`` renders the conversation with the new user
message, generates the reply with the cache reused, and appends the reply.

Example:
    >>> chat = model.session(system="Be brief.", enable_thinking=False)  # doctest: +SKIP
    >>> chat.send("What is a tile?", max_new_tokens=64)                  # doctest: +SKIP
    'A block of a tensor ...'
    >>> chat.send("And a partition?").speed.prefilled_tokens             # doctest: +SKIP
    9
"""
from __future__ import annotations

from typing import Any

from .chat import ChatTemplateError
from .errors import GenerateInputError

__all__ = ["CacheState", "ChatSession", "StaleStreamError", "common_prefix"]


class StaleStreamError(GenerateInputError):
    """A token stream was resumed after another generation on the same model took
    over its KV cache.

    Example:
        >>> print(StaleStreamError("superseded"))
        superseded
    """


def common_prefix(a: list[int], b: list[int]) -> int:
    """The length of the longest common prefix of two token lists.

    Example:
        >>> common_prefix([1, 2, 3, 4], [1, 2, 5])
        2
    """
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class CacheState:
    """The tokens whose keys and values the KV cache holds, and the generation that
    owns the cache (see the module docstring).

    Example:
        >>> s = CacheState(); t = s.claim(); s.record(t, [1, 2, 3])
        >>> s.tokens, s.reusable([1, 2, 9, 9]), s.reusable([1, 2, 3])
        ([1, 2, 3], 2, 2)
    """

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self._owner = 0

    def claim(self) -> int:
        """A ticket for a new generation, which now owns the cache."""
        self._owner += 1
        return self._owner

    def check(self, ticket: int) -> None:
        """Raise :class:`StaleStreamError` when ``ticket`` no longer owns the cache."""
        if ticket != self._owner:
            raise StaleStreamError(
                "this token stream was superseded: another generation ran on the same "
                "model since, and the KV cache is now its",
                hint="finish (or close()) a stream before starting the next generation "
                     "on the same model, or load a second model")

    def record(self, ticket: int, tokens: list[int]) -> None:
        """The cache now holds ``tokens`` (if ``ticket`` still owns it)."""
        if ticket == self._owner:
            self.tokens = list(tokens)

    def forget(self) -> None:
        """The cache's contents are unknown (or were zeroed)."""
        self.tokens = []

    def reusable(self, ids: list[int]) -> int:
        """How many leading positions of ``ids`` the cache already holds, leaving at
        least the last token to prefill (its logits pick the next token)."""
        return min(common_prefix(self.tokens, ids), len(ids) - 1)


class ChatSession:
    """A multi-turn conversation with a model, continued in its KV cache (see the
    module docstring). ``system``: the system prompt (None: none);
    ``enable_thinking``: Qwen3's switch (None: the template's default, which thinks);
    ``generation``: defaults for every turn (``max_new_tokens``, ``temperature``,
    ``seed``, ``stop_strings``, ...) that ``send`` keywords override.

    Example:
        >>> chat = ChatSession(model, system="Be brief.")               # doctest: +SKIP
        >>> chat.send("hi", max_new_tokens=16)                          # doctest: +SKIP
        'Hello!'
        >>> [m["role"] for m in chat.messages]                          # doctest: +SKIP
        ['system', 'user', 'assistant']
    """

    def __init__(self, model: Any, *, system: str | None = None,
                 enable_thinking: bool | None = None, **generation: Any):
        if model.chat_template is None:
            raise ChatTemplateError(
                f"{model.source or 'the model'} has no chat template (tokenizer_config.json's "
                "chat_template or chat_template.jinja)",
                hint="generate from token ids or text instead: model.generate(...)")
        if system is not None and not isinstance(system, str):
            raise GenerateInputError(f"system must be a string, got {type(system).__name__}")
        self.model = model
        self.enable_thinking = enable_thinking
        self.generation = dict(generation)
        self.messages: list[dict[str, Any]] = []
        if system:
            self.messages.append({"role": "system", "content": system})
        #: the stream of the last turn (its speed report, finish reason, tokens)
        self.last: Any = None

    def prompt(self, content: str | None = None) -> str:
        """The prompt text the next turn sends: the conversation, the user message
        ``content`` (None: none), and the opened assistant turn.

        Example:
            >>> chat.prompt("hi")                                       # doctest: +SKIP
            '<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\n'
        """
        messages = self.messages + ([{"role": "user", "content": content}]
                                    if content is not None else [])
        return self.model.chat_template.render(messages, add_generation_prompt=True,
                                               enable_thinking=self.enable_thinking)

    def send(self, content: str, *, stream: bool = False, **generation: Any) -> Any:
        """Send the user message ``content`` and generate the reply: its text, or with
        ``stream=True`` the :class:`~tilelab.models.generation.TokenStream` (the reply
        joins the conversation when the stream ends). Keywords as
        :meth:`Qwen3.stream <tilelab.models.qwen3.Qwen3.stream>`.

        Example:
            >>> for piece in chat.send("hi", stream=True):              # doctest: +SKIP
            ...     print(piece.text, end="", flush=True)
        """
        if not isinstance(content, str):
            raise GenerateInputError(f"a message must be a string, got "
                                     f"{type(content).__name__}")
        ids = self.model.encode(self.prompt(content))
        settings = {**self.generation, **generation}
        s = self.model.stream(ids, reuse_cache=True, **settings)   # checks it fits
        self.messages.append({"role": "user", "content": content})
        self.last = s
        if stream:
            return _Turn(s, self)
        s.consume()
        self._reply(s)
        return s.text

    def _reply(self, s: Any) -> None:
        self.messages.append({"role": "assistant", "content": s.text})

    def reset(self) -> None:
        """Forget the conversation except the system prompt (the cache is reused for
        the system prompt's tokens)."""
        self.messages = [m for m in self.messages[:1] if m["role"] == "system"]


class _Turn:
    """A streamed reply that joins the conversation once it has ended."""

    def __init__(self, stream: Any, session: ChatSession):
        self._stream, self._session, self._done = stream, session, False

    def __iter__(self) -> "_Turn":
        return self

    def __next__(self) -> Any:
        try:
            return next(self._stream)
        except StopIteration:
            if not self._done:
                self._done = True
                self._session._reply(self._stream)
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
