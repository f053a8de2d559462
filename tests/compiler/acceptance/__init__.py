"""The acceptance corpus: safe ports of the kernels users write, one module per family.

False refusals are the other half of soundness: a checker that refuses ordinary safe code
pushes its users to ``unsafe=True``. Each family module ports kernels of NVIDIA's cuTile
Python samples and TileGym ops to tilelab's safe parameters, in the idioms those kernels
use, and registers them in :data:`ENTRIES` (see :mod:`.registry`).
tests/compiler/test_acceptance_corpus.py checks that each one is accepted, compiles for
sm_90 and matches a numpy reference on the CPU backend.
"""
from __future__ import annotations

from . import attention, elementwise, gemm, misc, norms, softmax  # noqa: F401 (register)
from .registry import ENTRIES, Entry, Refusal

__all__ = ["ENTRIES", "Entry", "Refusal", "FAMILIES"]

#: the family modules, in the order the corpus lists them
FAMILIES = ("elementwise", "norms", "softmax", "gemm", "attention", "misc")
