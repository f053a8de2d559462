"""The KV cache and the device-held state of one sequence.

Layout: keys and values are two ``(layers, kv_heads, capacity, head_dim)`` tensors; a
layer's cache ``k[l]`` is a contiguous ``(kv_heads, capacity, head_dim)`` block, the
layout the decode-attention kernels read (a KV head's positions are consecutive rows)
and, with a leading 1, Hugging Face's ``past_key_values`` layout ``(batch, kv_heads,
seq, head_dim)``. ``capacity`` is a power of two, so one tile covers a head's whole cache
and the cache write can be an offset store into it.

The sequence state lives on the device too, so that a replayed decode step finds what
changed there: ``tokens`` (every token of the sequence, int32, ``capacity`` of them),
``nonfinite`` (int32 per position: 1 where the logits computed at that position held
NaN or infinity), ``pos`` (the position of the token being processed), ``inv_temp``
(1 / temperature, float32), ``seed`` (int32), ``sampling`` (the float32 settings
vector of :mod:`tilelab.kernels.decode.sampling`) and ``history`` (int32 per vocabulary entry:
seen in the prompt, generated, or neither; what the penalties read). The RoPE tables
``cos``/``sin`` (``(capacity, head_dim / 2)`` float32, base ``rope_theta``) cover
exactly the cache's positions: they are sized by the cache the engine allocates, not by
the model's ``max_position_embeddings``.

Tokens leave the device through :meth:`KVCache.read_tokens`, which reads their flags
with them and raises :class:`~tilelab.models.errors.NonFiniteLogitsError` for a token
picked from non-finite logits: such a token is never returned.

Example:
    >>> from types import SimpleNamespace
    >>> cfg = SimpleNamespace(num_hidden_layers=2, num_key_value_heads=2, head_dim=16,
    ...                       rope_theta=10000.0, vocab_size=300)
    >>> c = KVCache(cfg, 40, dtype="bfloat16", device="cpu")
    >>> c.capacity, c.k.shape, c.cos.shape
    (64, (2, 2, 64, 16), (64, 8))
"""
from __future__ import annotations

from typing import Any

import numpy as np

import tilelab as tl
from tilelab.kernels.rope import rope_tables
from tilelab.models.errors import NonFiniteLogitsError
from tilelab.models.sampling import SamplingParams, history_vector

__all__ = ["KVCache", "pow2_at_least", "MAX_CAPACITY"]

#: the most positions a cache may hold: positions and token indices are int32 on the
#: device
MAX_CAPACITY = 2 ** 30


def pow2_at_least(n: int) -> int:
    """The smallest power of two >= n (and >= 1).

    Example:
        >>> pow2_at_least(40), pow2_at_least(64), pow2_at_least(0)
        (64, 64, 1)
    """
    return 1 << max(0, int(n) - 1).bit_length()


class KVCache:
    """Keys, values and the sequence state of one sequence (see the module docstring).

    ``max_tokens`` is rounded up to a power of two (the :attr:`capacity`), at most
    :data:`MAX_CAPACITY`; ``config`` gives the layers, KV heads, ``head_dim``,
    ``rope_theta`` and ``vocab_size``.

    Example:
        >>> from types import SimpleNamespace
        >>> cfg = SimpleNamespace(num_hidden_layers=1, num_key_value_heads=1, head_dim=8,
        ...                       rope_theta=10000.0, vocab_size=16)
        >>> c = KVCache(cfg, 8, dtype="bfloat16", device="cpu")
        >>> c.set_sequence([5, 6, 7]); c.position(), c.read_tokens(0, 3)
        (2, [5, 6, 7])
    """

    def __init__(self, config: Any, max_tokens: int, *, dtype: str, device: Any):
        if not 1 <= max_tokens <= MAX_CAPACITY:
            raise ValueError(f"KVCache: max_tokens must be from 1 to {MAX_CAPACITY} "
                             f"(positions are int32 on the device), got {max_tokens}")
        self.capacity = pow2_at_least(max_tokens)
        shape = (config.num_hidden_layers, config.num_key_value_heads, self.capacity,
                 config.head_dim)
        self.k = tl.zeros(shape, dtype, device=device)
        self.v = tl.zeros(shape, dtype, device=device)
        self.tokens = tl.zeros(self.capacity, "int32", device=device)
        self.nonfinite = tl.zeros(self.capacity, "int32", device=device)
        self.pos = tl.zeros(1, "int32", device=device)
        self.inv_temp = tl.ones(1, "float32", device=device)
        self.seed = tl.zeros(1, "int32", device=device)
        self.sampling = tl.tensor(SamplingParams.greedy().device_vector(), device=device)
        self.history = tl.zeros(config.vocab_size, "int32", device=device)
        self.device = self.k.device
        self.cos, self.sin = rope_tables(self.capacity, config.head_dim,
                                         base=float(config.rope_theta), device=self.device)
        #: the prompt's length and the temperature of the current sequence (messages)
        self.prompt_length, self.temperature = 0, 0.0
        #: the settings last stored by :meth:`set_sampling`
        self.sampling_params = SamplingParams.greedy()

    def layer(self, i: int) -> tuple[tl.Tensor, tl.Tensor]:
        """Layer i's ``(kv_heads, capacity, head_dim)`` key and value caches.

        Example:
            >>> k0, v0 = cache.layer(0)                                   # doctest: +SKIP
        """
        return self.k[i], self.v[i]

    def set_sequence(self, ids: list[int]) -> None:
        """Put a prompt in ``tokens`` and point ``pos`` at its last token.

        The flags of the previous sequence are cleared; if one was set, its keys and
        values may hold NaN, and attention multiplies the masked positions of a key
        tile by zero (0 * NaN is NaN), so the caches are zeroed first.

        Example:
            >>> cache.set_sequence([1, 2, 3])                              # doctest: +SKIP
        """
        if not 1 <= len(ids) <= self.capacity:
            raise ValueError(f"KVCache: a sequence of {len(ids)} tokens does not fit the "
                             f"cache's {self.capacity} positions")
        if self.nonfinite.numpy().any():
            self.discard()
        self.tokens[:len(ids)].copy_(np.asarray(ids, np.int32))
        self.pos.copy_(np.array([len(ids) - 1], np.int32))
        self.prompt_length = len(ids)

    def discard(self) -> None:
        """Zero the keys, values and flags: after a computation that may have left NaN or
        infinity in them (see :meth:`set_sequence`). One layer at a time, so no host
        buffer is larger than a layer.

        Example:
            >>> cache.discard()                                            # doctest: +SKIP
        """
        for i in range(self.k.shape[0]):
            self.k[i].copy_(0)
            self.v[i].copy_(0)
        self.nonfinite.copy_(0)

    def set_sampling(self, sampling: SamplingParams | float, seed: int | None = None
                     ) -> None:
        """Store the settings the decode step's head reads: ``sampling`` a
        :class:`~tilelab.models.sampling.SamplingParams` (or, the older form, a
        temperature, with ``seed``; 0 is greedy). Writes 1 / temperature and the seed
        (the Gumbel head's), the settings vector (the sampling head's) and, when a
        penalty is on, the ``history`` of the current sequence: its prompt
        (``tokens[:prompt_length]``) seen, ``tokens[prompt_length:pos + 1]`` generated
        (a read of the device's tokens). The sampling head marks each token it picks
        from then on.

        Example:
            >>> cache.set_sampling(SamplingParams(0.7, top_k=20, seed=3))  # doctest: +SKIP
            >>> cache.set_sampling(0.7, seed=3)                            # doctest: +SKIP
        """
        if not isinstance(sampling, SamplingParams):
            sampling = SamplingParams(temperature=sampling,
                                      seed=0 if seed is None else seed)
        elif seed is not None:
            sampling = sampling.replace(seed=seed)
        t = sampling.temperature
        self.inv_temp.copy_(np.array([1.0 / t if t > 0 else 1.0], np.float32))
        self.seed.copy_(np.array([np.int64(sampling.seed) & 0x7FFFFFFF], np.int32))
        self.sampling.copy_(sampling.device_vector())
        if sampling.penalized:
            end = self.position() + 1
            seq = self.tokens[:end].numpy()
            cut = min(self.prompt_length, end)
            self.history.copy_(history_vector(self.history.shape[0], seq[:cut], seq[cut:]))
        self.temperature = float(t)
        self.sampling_params = sampling

    def position(self) -> int:
        """The device-held position, read on the host (a sync on the GPU).

        Example:
            >>> cache.position()                                           # doctest: +SKIP
            2
        """
        return int(self.pos.numpy()[0])

    def read_tokens(self, start: int, stop: int) -> list[int]:
        """``tokens[start:stop]`` as Python ints (a device read), checked: a token picked
        from logits that held NaN or infinity raises
        :class:`~tilelab.models.errors.NonFiniteLogitsError` naming the first such
        position.

        Example:
            >>> cache.read_tokens(0, 3)                                    # doctest: +SKIP
            [5, 6, 7]
        """
        tokens = [int(t) for t in self.tokens[start:stop].numpy()]
        lo = max(start - 1, 0)       # tokens[i] was picked from the logits at i - 1
        flags = self.nonfinite[lo:max(stop - 1, lo)].numpy()
        bad = np.flatnonzero(flags)
        if bad.size:
            raise self._nonfinite_error(lo + int(bad[0]))
        return tokens

    def _nonfinite_error(self, position: int) -> NonFiniteLogitsError:
        what = "logits" if not self.temperature > 0 else \
            f"logits scaled by 1/temperature (temperature {self.temperature:g})"
        new = position + 2 - self.prompt_length
        which = f"new token {new}" if new >= 1 else "the token"
        return NonFiniteLogitsError(
            f"the {what} computed at position {position} are not finite (NaN or "
            f"infinity): {which} (tokens[{position + 1}]) cannot be picked from them",
            position=position,
            hint="a weight of the checkpoint is NaN or infinite, or an activation "
                 "overflowed; numpy.isfinite(ckpt.tensor(name)).all() finds a bad weight")

    def contents(self, layer: int, length: int) -> tuple[np.ndarray, np.ndarray]:
        """Layer ``layer``'s first ``length`` keys and values as float32 numpy arrays of
        shape ``(kv_heads, length, head_dim)`` (for tests and inspection).

        Example:
            >>> k, v = cache.contents(0, 3)                                # doctest: +SKIP
        """
        k, v = self.layer(layer)
        return (k[:, :length].numpy().astype(np.float32),
                v[:, :length].numpy().astype(np.float32))
