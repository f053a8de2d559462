"""Incremental detokenization: text that can be printed as tokens arrive.

Decoding each token alone is wrong twice over. A byte-level BPE token may hold part of
a UTF-8 character (an emoji or a CJK character is often two or three tokens), and
decoders that merge pieces (SentencePiece's leading "▁", WordPiece's "##") give a
token's text only in context. So :class:`TextDecoder` decodes a short window of the
recent tokens and emits what the window added past what was already shown, and holds
back text that ends in an incomplete character (decoded as U+FFFD) until the next
token completes it. The window starts at the token before the last emitted ones, so
merging sees context, and the emitted pieces concatenate to exactly
``tokenizer.decode(all_tokens)`` (the tests check this on every prefix). Each token
costs two decodes of a few tokens, not a decode of the whole text.

Example:
    >>> from tokenizers import Tokenizer                             # doctest: +SKIP
    >>> d = TextDecoder(Tokenizer.from_file("tokenizer.json"))       # doctest: +SKIP
    >>> "".join(d.push(t) for t in ids) + d.flush() == tok.decode(ids)  # doctest: +SKIP
    True
"""
from __future__ import annotations

from typing import Any

__all__ = ["TextDecoder", "REPLACEMENT"]

#: what an incomplete UTF-8 sequence decodes to
REPLACEMENT = "\ufffd"


class TextDecoder:
    """Turns a stream of token ids into a stream of text pieces (see the module
    docstring). ``skip_special_tokens``: leave special tokens (``<|im_end|>``) out of
    the text, as ``tokenizer.decode(..., skip_special_tokens=True)`` does.

    Example:
        >>> class Bytes:   # a toy tokenizer: each id is one byte of UTF-8
        ...     def decode(self, ids, skip_special_tokens=True):
        ...         return bytes(ids).decode("utf-8", errors="replace")
        >>> d = TextDecoder(Bytes())
        >>> [d.push(b) for b in "é!".encode()], d.flush()
        (['', 'é', '!'], '')
    """

    def __init__(self, tokenizer: Any, *, skip_special_tokens: bool = True):
        self.tokenizer = tokenizer
        self.skip_special_tokens = skip_special_tokens
        self.ids: list[int] = []
        self._prefix = 0      # the window's first token
        self._read = 0        # tokens whose text was emitted
        #: all text emitted so far
        self.text = ""

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=self.skip_special_tokens)

    def push(self, token: int) -> str:
        """Add one token; the text it completes (may be "" while a character or a
        merge is incomplete).

        Example:
            >>> d.push(17)                                               # doctest: +SKIP
            ' world'
        """
        self.ids.append(int(token))
        window = self._decode(self.ids[self._prefix:])
        if window.endswith(REPLACEMENT):
            return ""
        shown = self._decode(self.ids[self._prefix:self._read])
        if window.startswith(shown):
            piece = window[len(shown):]
        else:   # the new token changed the window's earlier text: compare with it all
            full = self._decode(self.ids)
            piece = full[len(self.text):] if full.startswith(self.text) else ""
        if not piece:
            return ""
        self._prefix, self._read = self._read, len(self.ids)
        self.text += piece
        return piece

    def flush(self) -> str:
        """The text still held back (an incomplete character at the end): call once
        the stream has ended. Afterwards :attr:`text` is the decode of every token.

        Example:
            >>> d.flush()                                                # doctest: +SKIP
            ''
        """
        full = self._decode(self.ids)
        piece = full[len(self.text):] if full.startswith(self.text) else ""
        self._prefix = self._read = len(self.ids)
        self.text += piece
        return piece
