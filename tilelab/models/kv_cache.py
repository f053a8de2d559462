"""The KV cache and the device-held state of one sequence.

Layout: keys and values are two ``(layers, kv_heads, capacity, head_dim)`` tensors; a
layer's cache ``k[l]`` is a contiguous ``(kv_heads, capacity, head_dim)`` block, the
layout the decode-attention kernels read (a KV head's positions are consecutive rows)
and, with a leading 1, Hugging Face's ``past_key_values`` layout ``(batch, kv_heads,
seq, head_dim)``. ``capacity`` is a power of two, so one tile covers a head's whole cache
and the cache write can be an offset store into it.

The sequence state lives on the device too, so that a replayed decode step finds what
changed there: ``tokens`` (every token of the sequence, int32, ``capacity`` of them),
``pos`` (the position of the token being processed), ``inv_temp`` (1 / temperature,
float32) and ``seed`` (int32).

Example:
    >>> from types import SimpleNamespace
    >>> cfg = SimpleNamespace(num_hidden_layers=2, num_key_value_heads=2, head_dim=16)
    >>> c = KVCache(cfg, 40, dtype="bfloat16", device="cpu")
    >>> c.capacity, c.k.shape
    (64, (2, 2, 64, 16))
"""
from __future__ import annotations

from typing import Any

import numpy as np

import tilelab as tl

__all__ = ["KVCache", "pow2_at_least"]


def pow2_at_least(n: int) -> int:
    """The smallest power of two >= n (and >= 1).

    Example:
        >>> pow2_at_least(40), pow2_at_least(64), pow2_at_least(0)
        (64, 64, 1)
    """
    return 1 << max(0, int(n) - 1).bit_length()


class KVCache:
    """Keys, values and the sequence state of one sequence (see the module docstring).

    ``max_tokens`` is rounded up to a power of two (the :attr:`capacity`).

    Example:
        >>> from types import SimpleNamespace
        >>> cfg = SimpleNamespace(num_hidden_layers=1, num_key_value_heads=1, head_dim=8)
        >>> c = KVCache(cfg, 8, dtype="bfloat16", device="cpu")
        >>> c.set_sequence([5, 6, 7]); c.position(), c.read_tokens(0, 3)
        (2, [5, 6, 7])
    """

    def __init__(self, config: Any, max_tokens: int, *, dtype: str, device: Any):
        self.capacity = pow2_at_least(max_tokens)
        shape = (config.num_hidden_layers, config.num_key_value_heads, self.capacity,
                 config.head_dim)
        self.k = tl.zeros(shape, dtype, device=device)
        self.v = tl.zeros(shape, dtype, device=device)
        self.tokens = tl.zeros(self.capacity, "int32", device=device)
        self.pos = tl.zeros(1, "int32", device=device)
        self.inv_temp = tl.ones(1, "float32", device=device)
        self.seed = tl.zeros(1, "int32", device=device)
        self.device = self.k.device

    def layer(self, i: int) -> tuple[tl.Tensor, tl.Tensor]:
        """Layer i's ``(kv_heads, capacity, head_dim)`` key and value caches.

        Example:
            >>> k0, v0 = cache.layer(0)                                   # doctest: +SKIP
        """
        return self.k[i], self.v[i]

    def set_sequence(self, ids: list[int]) -> None:
        """Put a prompt in ``tokens`` and point ``pos`` at its last token.

        Example:
            >>> cache.set_sequence([1, 2, 3])                              # doctest: +SKIP
        """
        if not 1 <= len(ids) <= self.capacity:
            raise ValueError(f"KVCache: a sequence of {len(ids)} tokens does not fit the "
                             f"cache's {self.capacity} positions")
        self.tokens[:len(ids)].copy_(np.asarray(ids, np.int32))
        self.pos.copy_(np.array([len(ids) - 1], np.int32))

    def set_sampling(self, temperature: float, seed: int) -> None:
        """Store 1 / temperature and the seed that the sampling kernel reads.

        Example:
            >>> cache.set_sampling(0.7, seed=3)                            # doctest: +SKIP
        """
        self.inv_temp.copy_(np.array([1.0 / temperature], np.float32))
        self.seed.copy_(np.array([np.int64(seed) & 0x7FFFFFFF], np.int32))

    def position(self) -> int:
        """The device-held position, read on the host (a sync on the GPU).

        Example:
            >>> cache.position()                                           # doctest: +SKIP
            2
        """
        return int(self.pos.numpy()[0])

    def read_tokens(self, start: int, stop: int) -> list[int]:
        """``tokens[start:stop]`` as Python ints (a device read).

        Example:
            >>> cache.read_tokens(0, 3)                                    # doctest: +SKIP
            [5, 6, 7]
        """
        return [int(t) for t in self.tokens[start:stop].numpy()]

    def contents(self, layer: int, length: int) -> tuple[np.ndarray, np.ndarray]:
        """Layer ``layer``'s first ``length`` keys and values as float32 numpy arrays of
        shape ``(kv_heads, length, head_dim)`` (for tests and inspection).

        Example:
            >>> k, v = cache.contents(0, 3)                                # doctest: +SKIP
        """
        k, v = self.layer(layer)
        return (k[:, :length].numpy().astype(np.float32),
                v[:, :length].numpy().astype(np.float32))
