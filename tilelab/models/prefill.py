"""Prefill: the whole prompt through the model at once, filling the KV cache.

Every position is processed together with the library's kernels: ``embedding``,
``rms_norm``/``add_rms_norm``, the GEMM (``matmul``, with the residual add of the o
projection and the SiLU of the gate fused in its epilogue), the q/k norms as
``rms_norm`` over head_dim, ``rope`` of q and k in one launch, causal GQA flash
``attention`` and ``mul``. The rotated keys and the values of each layer are copied
into the cache's first positions (:func:`~tilelab.kernels.decode.step.kv_fill_kernel`) and
attention reads them from there. The result is the final normed hidden state of every
position; :func:`prefill_logits` multiplies it with the lm_head. A continued sequence
prefills only its new tokens (``start``): they go into the cache after the positions it
holds and attend to all of them.

Example:
    >>> hidden = prefill(weights, cache, [1, 2, 3])                # doctest: +SKIP
    >>> hidden.shape                                               # doctest: +SKIP
    (3, 96)
"""
from __future__ import annotations

from typing import Any

import numpy as np

import tilelab as tl
from tilelab.kernels import (add_rms_norm, attention, embedding, matmul, mul, rms_norm,
                             rope)
from tilelab.kernels.decode.step import kv_fill_kernel
from tilelab.models.kv_cache import pow2_at_least

__all__ = ["prefill", "prefill_logits"]


def prefill(weights: Any, cache: Any, ids: list[int], start: int = 0) -> tl.Tensor:
    """Run ``ids``, the tokens at positions ``start..start+len(ids)-1``, through every
    layer, writing their keys and values into ``cache``; returns their final normed
    hidden states ``(len(ids), hidden)``. With ``start > 0`` the cache must hold the
    keys and values of positions ``0..start-1`` (a sequence being continued): the new
    tokens attend to them and to each other, causally.

    Example:
        >>> prefill(weights, cache, [5, 6]).shape                    # doctest: +SKIP
        (2, 96)
        >>> prefill(weights, cache, [7], start=2).shape              # doctest: +SKIP
        (1, 96)
    """
    c = weights.config
    eps = c.rms_norm_eps
    t = len(ids)
    if start < 0 or start + t > cache.capacity:
        raise ValueError(f"prefill: positions {start}..{start + t - 1} are outside the "
                         f"cache's {cache.capacity} positions")
    ids_t = tl.tensor(np.asarray(ids, np.int32), device=weights.device)
    h = embedding(ids_t, weights.embedding, check_ids=False)
    down = None
    for i, lw in enumerate(weights.layers):
        if down is None:
            n = rms_norm(h, lw.input_norm, eps=eps)
        else:
            n, h = add_rms_norm(down, h, lw.input_norm, eps=eps)
        h = _attention(weights, cache, i, lw, n, h, t, start)
        n = rms_norm(h, lw.post_norm, eps=eps)
        gate, up = lw.gate_up[0], lw.gate_up[1]
        act = mul(matmul(n, gate.T, activation="silu"), matmul(n, up.T))
        down = matmul(act, lw.down.T)
    if down is None:
        return rms_norm(h, weights.final_norm, eps=eps)
    return add_rms_norm(down, h, weights.final_norm, eps=eps)[0]


def _attention(weights: Any, cache: Any, i: int, lw: Any, n: tl.Tensor, h: tl.Tensor,
               t: int, start: int) -> tl.Tensor:
    """Layer i's attention block for the ``t`` tokens from position ``start``: returns
    the residual stream ``h + o_proj(attn)``."""
    c = weights.config
    hq, hk, d = c.num_attention_heads, c.num_key_value_heads, c.head_dim
    wq, wk, wv = lw.split_qkv(hq * d, hk * d)
    q = rms_norm(matmul(n, wq.T).reshape(t, hq, d), lw.q_norm, eps=c.rms_norm_eps)
    k = rms_norm(matmul(n, wk.T).reshape(t, hk, d), lw.k_norm, eps=c.rms_norm_eps)
    v = matmul(n, wv.T).reshape(t, hk, d)
    # the tables' rows from ``start``: token j is at position start + j
    q, k = rope(q, k, cache.cos[start:], cache.sin[start:])
    kc, vc = cache.layer(i)
    bt = min(pow2_at_least(t), max(1, 4096 // pow2_at_least(d)))
    kv_fill_kernel(kc[:, start:start + t].partition((1, bt, d)), k)
    kv_fill_kernel(vc[:, start:start + t].partition((1, bt, d)), v)
    # causal attention aligns the queries with the last keys: query j sees 0..start+j
    keys = cache.k[i:i + 1, :, :start + t]
    values = cache.v[i:i + 1, :, :start + t]
    o = attention(q.reshape(1, t, hq, d).permute(0, 2, 1, 3), keys, values, causal=True)
    o = o.permute(0, 2, 1, 3).contiguous().reshape(t, hq * d)
    return matmul(o, lw.o.T, residual=h)


def prefill_logits(weights: Any, hidden: tl.Tensor) -> np.ndarray:
    """float32 logits ``(tokens, vocab)`` of the final normed hidden states.

    Example:
        >>> prefill_logits(weights, hidden).shape                    # doctest: +SKIP
        (3, 300)
    """
    return matmul(hidden, weights.lm_head.T, out_dtype="float32").numpy()
