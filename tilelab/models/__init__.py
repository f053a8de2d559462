"""tilelab.models: inference engines built only from safe tilelab kernels.

:class:`Qwen3` runs Hugging Face Qwen3 checkpoints: prefill with the library's GEMM,
flash attention, norms and RoPE; decode as one recorded graph of fused, memory-bound
kernels replayed per token (see docs/models.md).

Example:
    >>> from tilelab.models import Qwen3
    >>> model = Qwen3.from_pretrained("path/to/checkpoint", device="cpu")   # doctest: +SKIP
    >>> model.generate([1, 2, 3], max_new_tokens=8)                          # doctest: +SKIP
"""
from tilelab.models.qwen3 import Qwen3

__all__ = ["Qwen3"]
