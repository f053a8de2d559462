"""Seeded random inputs: the same numbers on every run and every machine.

Example:
    >>> a = randn((2, 3), seed=1)
    >>> a.dtype.name, a.shape, bool((a == randn((2, 3), seed=1)).all())
    ('float32', (2, 3), True)
"""
from __future__ import annotations

import numpy as np

import tilelab as tl


def randn(shape, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    """Standard normal samples times ``scale``, drawn in float64 from
    ``np.random.default_rng(seed)`` and rounded once to float32."""
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def rand_tensor(shape, dtype: str = "bfloat16", seed: int = 0, scale: float = 1.0) -> tl.Tensor:
    """:func:`randn` as a CPU tensor of ``dtype`` (rounded from float32)."""
    return tl.tensor(randn(shape, seed, scale), dtype=dtype, device="cpu")
