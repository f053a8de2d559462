"""A Qwen3 model's weights on the device, laid out for the engine's kernels.

Each layer's q, k and v projections are stored as one ``(Nq + 2 Nkv, hidden)`` matrix
(one GEMV reads them in a single pass at decode) and gate and up as one
``(2, intermediate, hidden)`` tensor (one GEMV computes ``silu(gate) * up``). Slices
of these are the separate weights prefill multiplies with. Everything is in one
compute dtype (bfloat16 unless asked otherwise). The RoPE tables are not weights: they
belong to the positions of a KV cache (:class:`~tilelab.models.kv_cache.KVCache`),
whose length the engine chooses, not to ``max_position_embeddings``.

Example:
    >>> from tilelab.models.checkpoint import load_checkpoint        # doctest: +SKIP
    >>> w = DeviceWeights.from_checkpoint(load_checkpoint("ckpt"))   # doctest: +SKIP
    >>> w.layers[0].qkv.shape                                         # doctest: +SKIP
    (128, 96)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import tilelab as tl

__all__ = ["LayerWeights", "DeviceWeights", "COMPUTE_DTYPES"]

#: the dtypes the engine computes in (the attention kernels take 16-bit inputs)
COMPUTE_DTYPES = ("bfloat16", "float16")


@dataclass
class LayerWeights:
    """One decoder layer: the fused projections and the four norm weights.

    Example:
        >>> lw.q(cfg).shape == (cfg.num_attention_heads * cfg.head_dim, cfg.hidden_size)  # doctest: +SKIP
        True
    """

    qkv: tl.Tensor          # (Nq + 2 Nkv, hidden): q rows, then k, then v
    o: tl.Tensor            # (hidden, Nq)
    gate_up: tl.Tensor      # (2, intermediate, hidden): gate, then up
    down: tl.Tensor         # (hidden, intermediate)
    input_norm: tl.Tensor   # (hidden,)
    post_norm: tl.Tensor    # (hidden,)
    q_norm: tl.Tensor       # (head_dim,)
    k_norm: tl.Tensor       # (head_dim,)

    def split_qkv(self, nq: int, nkv: int) -> tuple[tl.Tensor, tl.Tensor, tl.Tensor]:
        """The q, k and v weights: contiguous row blocks of :attr:`qkv`.

        Example:
            >>> q, k, v = lw.split_qkv(64, 32)                            # doctest: +SKIP
        """
        return self.qkv[:nq], self.qkv[nq:nq + nkv], self.qkv[nq + nkv:]


@dataclass
class DeviceWeights:
    """Every weight of the model on one device (see the module docstring).

    ``lm_head`` is the embedding tensor itself when the checkpoint ties them.

    Example:
        >>> w = DeviceWeights.from_checkpoint(ckpt, device="cpu")       # doctest: +SKIP
        >>> w.lm_head is w.embedding                                     # doctest: +SKIP
        True
    """

    config: Any
    dtype: str
    device: str
    embedding: tl.Tensor
    final_norm: tl.Tensor
    lm_head: tl.Tensor
    layers: list[LayerWeights]

    @property
    def tied(self) -> bool:
        """Whether the lm_head is the embedding table.

        Example:
            >>> w.tied                                                     # doctest: +SKIP
            False
        """
        return self.lm_head is self.embedding

    @classmethod
    def from_checkpoint(cls, ckpt: Any, *, device: Any = None,
                        dtype: str = "bfloat16") -> "DeviceWeights":
        """Copy a loaded checkpoint (:func:`tilelab.models.checkpoint.load_checkpoint`)
        to ``device``, converted to ``dtype``.

        Example:
            >>> DeviceWeights.from_checkpoint(ckpt, device="cpu").dtype   # doctest: +SKIP
            'bfloat16'
        """
        c = ckpt.config
        return cls.from_arrays(c, ckpt.layer_tensors, ckpt.embedding(), ckpt.final_norm(),
                               None if c.tie_word_embeddings else ckpt.lm_head(),
                               device=device, dtype=dtype)

    @classmethod
    def from_arrays(cls, config: Any, layer: Callable[[int], dict], embedding: Any,
                    final_norm: Any, lm_head: Any = None, *, device: Any = None,
                    dtype: str = "bfloat16") -> "DeviceWeights":
        """Build from arrays: ``layer(i)`` returns layer i's tensors by their short
        Hugging Face names (q_proj, ..., down_proj, as (out, in) matrices); arrays may
        be numpy (copied to the device) or device tensors (torch, cupy: copied on the
        device). ``lm_head`` None ties it to the embedding.

        Example:
            >>> w = DeviceWeights.from_arrays(cfg, layer_dict, emb, norm)  # doctest: +SKIP
        """
        if dtype not in COMPUTE_DTYPES:
            raise ValueError(f"DeviceWeights: dtype must be one of {COMPUTE_DTYPES}, got "
                             f"{dtype!r}")
        put = _Uploader(device, dtype)
        layers = [_layer(config, layer(i), put) for i in range(config.num_hidden_layers)]
        emb = put.one(embedding, (config.vocab_size, config.hidden_size), "embedding")
        head = emb if lm_head is None else put.one(
            lm_head, (config.vocab_size, config.hidden_size), "lm_head")
        return cls(config, dtype, emb.device, emb,
                   put.one(final_norm, (config.hidden_size,), "final_norm"), head, layers)


class _Uploader:
    """Copies arrays into new device tensors of one dtype, checking their shapes."""

    def __init__(self, device: Any, dtype: str):
        self.device, self.dtype = device, dtype

    def empty(self, shape: tuple[int, ...]) -> tl.Tensor:
        return tl.empty(shape, self.dtype, device=self.device)

    def into(self, dst: tl.Tensor, src: Any, what: str) -> None:
        shape = tuple(getattr(src, "shape", ()))
        if shape != tuple(dst.shape):
            raise ValueError(f"DeviceWeights: {what} has shape {shape}, expected "
                             f"{tuple(dst.shape)}")
        if isinstance(src, np.ndarray) and src.dtype != dst.dtype:
            src = src.astype(dst.dtype)
        elif callable(getattr(src, "detach", None)):    # a torch parameter
            src = src.detach()
        dst.copy_(src)

    def one(self, src: Any, shape: tuple[int, ...], what: str) -> tl.Tensor:
        dst = self.empty(shape)
        self.into(dst, src, what)
        return dst


def _layer(c: Any, t: dict, put: _Uploader) -> LayerWeights:
    h, d = c.hidden_size, c.head_dim
    nq, nkv, inter = c.num_attention_heads * d, c.num_key_value_heads * d, c.intermediate_size
    qkv = put.empty((nq + 2 * nkv, h))
    put.into(qkv[:nq], t["q_proj"], "q_proj")
    put.into(qkv[nq:nq + nkv], t["k_proj"], "k_proj")
    put.into(qkv[nq + nkv:], t["v_proj"], "v_proj")
    gate_up = put.empty((2, inter, h))
    put.into(gate_up[0], t["gate_proj"], "gate_proj")
    put.into(gate_up[1], t["up_proj"], "up_proj")
    return LayerWeights(qkv, put.one(t["o_proj"], (h, nq), "o_proj"), gate_up,
                        put.one(t["down_proj"], (h, inter), "down_proj"),
                        put.one(t["input_layernorm"], (h,), "input_layernorm"),
                        put.one(t["post_attention_layernorm"], (h,), "post_attention_layernorm"),
                        put.one(t["q_norm"], (d,), "q_norm"), put.one(t["k_norm"], (d,), "k_norm"))
