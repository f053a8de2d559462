"""Chat templates: a conversation rendered into the prompt text a chat model was trained on.

A checkpoint's ``chat_template`` (:mod:`~tilelab.models.tokenizer_config`) is a Jinja
program, and it is untrusted code from the internet, so it runs in jinja2's
``ImmutableSandboxedEnvironment`` (no attribute access to Python internals, no mutation
of the lists and dicts it is given). The environment is set up as transformers'
``apply_chat_template`` sets it up, because templates are written against that: blocks
trimmed (``trim_blocks``, ``lstrip_blocks``), the ``loopcontrols`` extension
(``{% break %}``), ``{% generation %}`` blocks (rendered as their body), a ``tojson``
filter that keeps non-ASCII text as is (``json.dumps`` with ``ensure_ascii=False``) and
takes ``indent``/``separators``/``sort_keys``, and the globals ``raise_exception(message)`` (a template refuses a conversation with it),
``strftime_now(format)``, ``dict`` and ``namespace`` (a namespace refuses names starting
with ``_``). The template sees ``messages``, ``tools``, ``documents``,
``add_generation_prompt``, the named special tokens (``bos_token``, ``eos_token``, ...)
and every extra keyword, e.g. Qwen3's ``enable_thinking``. Messages are copied into
plain JSON data first, and a message's ``thinking`` or ``reasoning`` is also offered as
``reasoning_content``, the name templates read.

A template that raises is a :class:`ChatTemplateError` naming the checkpoint's file
and the template's message.

Example:
    >>> t = ChatTemplate("{% for m in messages %}<{{ m.role }}>{{ m.content }}\\n"
    ...                  "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}")
    >>> t.render([{"role": "user", "content": "hi"}], add_generation_prompt=True)
    '<user>hi\\n<assistant>'
"""
from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping, Sequence

from tilelab.models.errors import GenerateInputError

__all__ = ["ChatTemplate", "ChatTemplateError", "check_messages", "REASONING_FIELDS"]

#: names a message's reasoning goes under; templates read the first
REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


class ChatTemplateError(GenerateInputError):
    """A chat template cannot render a conversation: the template raised (its own
    ``raise_exception``), has a syntax error, or the messages are malformed, or the
    checkpoint has no template (a :class:`~tilelab.models.errors.GenerateInputError`:
    bad input, not a fault of the engine).

    Example:
        >>> print(ChatTemplateError("the checkpoint has no chat template"))
        the checkpoint has no chat template
    """


class ChatTemplate:
    """A compiled chat template (see the module docstring). ``special_tokens``: the
    named special tokens the template may read (``{"eos_token": "<|im_end|>"}``);
    ``source``: where the template came from, for error messages.

    Example:
        >>> ChatTemplate("{{ messages[0].content }}").render([{"role": "user",
        ...                                                    "content": "x"}])
        'x'
    """

    def __init__(self, template: str, special_tokens: Mapping[str, str] | None = None,
                 *, source: str | Path | None = None):
        self.text = template
        self.special_tokens = dict(special_tokens or {})
        self.source = None if source is None else str(source)
        try:
            self._compiled = _environment().from_string(template)
        except Exception as e:   # jinja2.TemplateSyntaxError
            raise ChatTemplateError(f"{self._where()}the chat template does not compile: "
                                    f"{e}") from None

    def render(self, messages: Sequence[Mapping[str, Any]], *,
               add_generation_prompt: bool = False, enable_thinking: bool | None = None,
               tools: Sequence[Mapping[str, Any]] | None = None,
               documents: Sequence[Mapping[str, Any]] | None = None,
               **kwargs: Any) -> str:
        """The prompt text of ``messages`` (dicts with ``role`` and ``content``), as
        ``tokenizer.apply_chat_template(messages, tokenize=False, ...)`` renders it.
        ``add_generation_prompt`` opens the assistant's turn; ``enable_thinking`` (None:
        not passed, the template's default) is Qwen3's switch; other keywords reach the
        template as variables.

        Example:
            >>> ChatTemplate("{{ greeting }}").render([], greeting="hello")
            'hello'
        """
        from jinja2.exceptions import TemplateError

        chat = [_reasoning_aliases(m) for m in check_messages(messages)]
        variables = {**self.special_tokens, **_plain(kwargs)}
        if enable_thinking is not None:
            variables["enable_thinking"] = bool(enable_thinking)
        try:
            return self._compiled.render(messages=chat, tools=_plain(tools),
                                         documents=_plain(documents),
                                         add_generation_prompt=bool(add_generation_prompt),
                                         **variables)
        except TemplateError as e:
            raise ChatTemplateError(f"{self._where()}the chat template refused the "
                                    f"conversation: {e}") from None

    def _where(self) -> str:
        return f"{self.source}: " if self.source else ""

    def __repr__(self) -> str:
        return f"ChatTemplate({len(self.text)} characters, source={self.source!r})"


def check_messages(messages: Any) -> list[dict[str, Any]]:
    """``messages`` as a list of plain dicts, each with a string ``role``; else a
    :class:`ChatTemplateError` naming the bad message.

    Example:
        >>> check_messages([{"role": "user", "content": "hi"}])
        [{'role': 'user', 'content': 'hi'}]
        >>> check_messages([{"content": "hi"}])
        Traceback (most recent call last):
        ...
        tilelab.models.chat.ChatTemplateError: messages[0] has no 'role' (a message is a dict like {'role': 'user', 'content': 'hi'})
    """
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise ChatTemplateError(f"messages must be a list of dicts, not "
                                f"{type(messages).__name__}")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise ChatTemplateError(f"messages[{i}] is {type(m).__name__}, not a dict "
                                    "(a message is a dict like {'role': 'user', "
                                    "'content': 'hi'})")
        if not isinstance(m.get("role"), str):
            raise ChatTemplateError(f"messages[{i}] has no 'role' (a message is a dict "
                                    "like {'role': 'user', 'content': 'hi'})")
        out.append(_plain(dict(m)))
    return out


def _reasoning_aliases(message: dict[str, Any]) -> dict[str, Any]:
    """A message's reasoning under every name templates read (``reasoning_content``
    first), as transformers offers it."""
    reasoning = next((message[k] for k in REASONING_FIELDS if message.get(k) is not None),
                     None)
    if reasoning is None:
        return message
    return {"thinking": reasoning, **message, "reasoning_content": reasoning}


def _plain(value: Any) -> Any:
    """``value`` rebuilt from plain JSON types (str, int, float, bool, None, list,
    tuple, dict); anything else becomes its ``str``. A template then never reaches an
    object with methods of its own."""
    import numpy as np

    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, np.generic):
        return _plain(value.item())
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return str(value)


def _environment():
    """The sandboxed Jinja environment of chat templates (made once)."""
    global _ENV
    if _ENV is None:
        _ENV = _make_environment()
    return _ENV


_ENV = None


def _make_environment():
    import jinja2
    import jinja2.ext
    from jinja2.exceptions import SecurityError, TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: Any) -> None:
        raise TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None,
               separators: Any = None, sort_keys: bool = False) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt: str) -> str:
        return datetime.now().strftime(fmt)

    class TemplateDict:
        """``dict(...)`` for templates, without the type itself (no attribute escape)."""

        def __call__(self, *args: Any, **kwargs: Any) -> dict:
            return dict(*args, **kwargs)

        def fromkeys(self, *args: Any, **kwargs: Any) -> dict:
            return dict.fromkeys(*args, **kwargs)

    class TemplateNamespace(jinja2.utils.Namespace):
        """``namespace(...)`` refusing underscore names (no route to dunders)."""

        def __init__(*args: Any, **kwargs: Any) -> None:
            self, rest = args[0], args[1:]
            attrs = dict(*rest, **kwargs)
            for name in attrs:
                TemplateNamespace._check(name)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, name: str, value: Any) -> None:
            TemplateNamespace._check(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

        @staticmethod
        def _check(name: Any) -> None:
            if isinstance(name, str) and name.startswith("_"):
                raise SecurityError(f"a chat template may not store {name!r} on a "
                                    "namespace (names starting with '_' are refused)")

    class Generation(jinja2.ext.Extension):
        """``{% generation %}...{% endgeneration %}`` (marks the assistant's part for
        training masks): rendered as its body."""

        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [],
                                          body).set_lineno(lineno)

        def _body(self, caller: Any) -> str:
            return caller()

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals.update(raise_exception=raise_exception, strftime_now=strftime_now,
                       dict=TemplateDict(), namespace=TemplateNamespace)
    return env
