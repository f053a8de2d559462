"""The sampling head of the decode step: its buffers and its two launches.

Why apart from :mod:`tilelab.models.decode_step`: the step's other heads are one launch
after the lm_head GEMV (the argmax or Gumbel-max combine), while this one has scratch of
its own (the candidates and partials of :mod:`tilelab.kernels.decode.sampling`) sized by the
vocabulary and ``StepConfig.sample_candidates``. The step adds these launches between
``lm_head_partial`` and ``advance`` when it is built with ``sample="sample"``; they read
the settings and the history from the cache (``cache.sampling``, ``cache.history``), so a
recorded graph samples with whatever settings the cache holds at replay.

Example:
    >>> sample_block(151936, 4096, 64)          # Qwen3's vocabulary: 38 blocks of 4096
    4096
    >>> sample_block(300, 4096, 64)             # a small vocabulary: one block
    512
"""
from __future__ import annotations

from typing import Any

import tilelab as tl
from tilelab.kernels.decode.sampling import sample_partial_kernel, sample_pick_kernel
from tilelab.models.kv_cache import pow2_at_least

__all__ = ["SampleHead", "sample_block", "check_tiles", "MERGE_ELEMENTS"]

#: the most candidates the one-block merge holds in one tile (blocks x candidates)
MERGE_ELEMENTS = 8192


def sample_block(vocab: int, block: int, candidates: int) -> int:
    """The vocabulary tile of the partial kernel: ``block``, grown (by powers of two) so
    that the blocks' candidates fit :data:`MERGE_ELEMENTS`, and no larger than the
    vocabulary rounded up to a power of two.

    Example:
        >>> sample_block(1 << 20, 4096, 256)    # 32 blocks of 32768
        32768
    """
    most_blocks = max(1, MERGE_ELEMENTS // candidates)
    bv = max(int(block), pow2_at_least(-(-vocab // most_blocks)))
    return min(bv, pow2_at_least(vocab))


def _pow2(name: str, value: Any, top: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 \
            or value & (value - 1) or value > top:
        raise ValueError(f"StepConfig.{name}={value!r} must be a power of two from 1 to "
                         f"{top}")
    return value


def check_tiles(candidates: Any, block: Any) -> None:
    """Refuse ``StepConfig.sample_candidates`` / ``sample_block`` values that are not
    powers of two in range (1..1024 candidates, 1..65536 logits per block).

    Example:
        >>> check_tiles(48, 4096)
        Traceback (most recent call last):
        ...
        ValueError: StepConfig.sample_candidates=48 must be a power of two from 1 to 1024
    """
    _pow2("sample_candidates", candidates, 1024)
    _pow2("sample_block", block, 1 << 16)


class SampleHead:
    """Scratch and launches of the sampling head for a vocabulary of ``vocab`` on
    ``device``: ``block`` logits per partial block (see :func:`sample_block`),
    ``candidates`` the candidate tile (the most ``top_k`` may be).

    Example:
        >>> head = SampleHead(300, "cpu", block=64, candidates=16)
        >>> head.blocks, head.cval.shape, head.merge_rows
        (5, (5, 16), 8)
    """

    def __init__(self, vocab: int, device: Any, *, block: int, candidates: int):
        self.candidates = _pow2("sample_candidates", candidates, 1024)
        self.block = sample_block(vocab, _pow2("sample_block", block, 1 << 16),
                                  self.candidates)
        self.vocab = vocab
        self.blocks = -(-vocab // self.block)
        #: the blocks rounded up to a power of two: the rows of the merge's tile
        self.merge_rows = pow2_at_least(self.blocks)
        empty = lambda shape, dtype: tl.empty(shape, dtype, device=device)  # noqa: E731
        self.cval = empty((self.blocks, self.candidates), "float32")
        self.cidx = empty((self.blocks, self.candidates), "int32")
        self.pmax = empty(self.blocks, "float32")
        self.psum = empty(self.blocks, "float32")
        self.gval = empty(self.blocks, "float32")
        self.gidx = empty(self.blocks, "int32")

    def launches(self, logits: tl.Tensor, cache: Any) -> list[tuple[str, Any, tuple]]:
        """``(kind, kernel, args)`` of the head's two launches, reading ``logits`` (the
        lm_head's float32 output) and the cache's settings, seed, position and history,
        and writing ``tokens[pos + 1]``, ``nonfinite[pos]`` and the token's history.

        Example:
            >>> [k for k, _kern, _a in head.launches(step.logits, cache)]  # doctest: +SKIP
            ['sample_partial', 'sample_pick']
        """
        kc = self.candidates
        partial = (self.cval.partition((1, kc)), self.cidx.partition((1, kc)),
                   self.pmax.partition(1), self.psum.partition(1), self.gval.partition(1),
                   self.gidx.partition(1), logits, cache.history, cache.sampling,
                   cache.seed, cache.pos, self.block)
        pick = (cache.tokens.partition(cache.capacity),
                cache.nonfinite.partition(cache.capacity),
                cache.history.partition(pow2_at_least(self.vocab)), self.cval, self.cidx,
                self.pmax, self.psum, self.gval, self.gidx, cache.sampling, cache.seed,
                cache.pos, self.merge_rows, kc)
        return [("sample_partial", sample_partial_kernel, partial),
                ("sample_pick", sample_pick_kernel, pick)]
