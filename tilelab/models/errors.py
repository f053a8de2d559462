"""Typed errors of tilelab.models.

All derive from :class:`tilelab.errors.TilelabError` (so ``except tl.TilelabError``
catches them). :class:`CheckpointError` and :class:`GenerateInputError` are also
:class:`ValueError` (bad input); :class:`NonFiniteLogitsError` is a
:class:`FloatingPointError` (the model computed NaN or infinity).
"""
from __future__ import annotations

from pathlib import Path

from tilelab.errors import TilelabError

__all__ = ["CheckpointError", "GenerateInputError", "NonFiniteLogitsError"]


class CheckpointError(TilelabError, ValueError):
    """A checkpoint directory cannot be loaded: the message names the file and, where
    there is one, the config key or tensor that is wrong.

    Attributes:
        path: the file (or directory) at fault.
        key: the config.json key or the tensor name at fault, when there is one.

    Example:
        >>> e = CheckpointError("model_type is 'llama', not 'qwen3'",
        ...                     path="ckpt/config.json", key="model_type")
        >>> print(e)
        ckpt/config.json: model_type is 'llama', not 'qwen3'
    """

    def __init__(self, message: str, *, path: str | Path | None = None,
                 key: str | None = None, hint: str | None = None):
        self.path = None if path is None else Path(path)
        self.key = key
        super().__init__(f"{path}: {message}" if path is not None else message, hint=hint)


class GenerateInputError(TilelabError, ValueError):
    """The prompt or the generation settings are not usable: token ids that are not
    integers or are outside the vocabulary, a text prompt for a checkpoint without a
    tokenizer, a non-positive number of new tokens, a negative temperature.

    Example:
        >>> print(GenerateInputError("--ids: 'x' is not an integer",
        ...                          hint="write the ids as 1,2,3"))
        --ids: 'x' is not an integer
        hint: write the ids as 1,2,3
    """


class NonFiniteLogitsError(TilelabError, FloatingPointError):
    """The logits a token is picked from hold NaN or infinity, so no token is right
    (an argmax or a sample of them is noise): raised where the tokens are read, never
    a silent token.

    Attributes:
        position: the cache position whose logits were not finite.
        token_index: the index in the sequence of the token they were to pick
            (``position + 1``).

    Example:
        >>> e = NonFiniteLogitsError("the logits at position 6 are not finite",
        ...                          position=6)
        >>> e.token_index, isinstance(e, FloatingPointError)
        (7, True)
    """

    def __init__(self, message: str, *, position: int, hint: str | None = None):
        self.position = position
        self.token_index = position + 1
        super().__init__(message, hint=hint)
