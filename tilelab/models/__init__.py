"""tilelab.models: inference engines built only from safe tilelab kernels.

:class:`Qwen3` runs Hugging Face Qwen3 checkpoints: prefill with the library's GEMM,
flash attention, norms and RoPE; decode as one recorded graph of fused, memory-bound
kernels replayed per token; stopping, streaming, chat templates and sessions around it
(see docs/models.md).

``Qwen3`` is imported when it is first used, so that the command line
(:mod:`tilelab.models.cli`) declares its arguments without loading the engine.

Example:
    >>> from tilelab.models import Qwen3
    >>> model = Qwen3.from_pretrained("path/to/checkpoint", device="cpu")   # doctest: +SKIP
    >>> model.generate([1, 2, 3], max_new_tokens=8)                          # doctest: +SKIP
"""
from typing import Any

__all__ = ["Qwen3"]


def __getattr__(name: str) -> Any:
    if name == "Qwen3":
        from tilelab.models.qwen3 import Qwen3

        return Qwen3
    raise AttributeError(f"module 'tilelab.models' has no attribute {name!r}")
