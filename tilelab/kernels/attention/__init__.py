"""Attention: flash attention (prefill) and split-KV decode attention (the host
functions, their configurations and their kernels).

The family is three modules: :mod:`~tilelab.kernels.attention.host` (the host functions
and their launches), :mod:`~tilelab.kernels.attention.config` (:class:`AttentionConfig`,
:class:`DecodeConfig`, the defaults and the search space) and
:mod:`~tilelab.kernels.attention.kernels` (the safe kernels). This package hands on their
public names; the planning and tuning ones are also in :mod:`tilelab.kernels.tuning`.

Example:
    >>> import tilelab as tl
    >>> from tilelab.kernels.attention import AttentionConfig, attention
    >>> q = tl.randn(1, 2, 24, 32, dtype="bf16", device="cpu", seed=0)
    >>> attention(q, q, q, causal=True, config=AttentionConfig(bm=16, bn=16)).shape
    (1, 2, 24, 32)
"""
from tilelab.kernels.attention.host import (
    AttentionConfig, DecodeConfig, attention, attention_search_space, compile_attention,
    compile_decode_attention, decode_attention, decode_combine_kernel, decode_split_kernel,
    default_attention_config, default_decode_config, flash_attention_kernel,
    persistent_attention_kernel, plan_attention, plan_decode_attention)

__all__ = ["AttentionConfig", "DecodeConfig", "default_attention_config",
           "default_decode_config", "attention_search_space", "attention",
           "decode_attention", "plan_attention", "plan_decode_attention",
           "compile_attention", "compile_decode_attention", "flash_attention_kernel",
           "persistent_attention_kernel", "decode_split_kernel", "decode_combine_kernel"]
