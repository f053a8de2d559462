"""Launches of the decode engine's kernels (tilelab.kernels.decode: step, gemv,
gemv_mma, rope_attention, sampling) with the
argument forms the engine passes them, at small shapes, for the Tile IR validator tests.

The shapes follow :class:`tilelab.models.decode_step.DecodeStep` (one layer of a small
GQA model: 2 KV heads of 3 query heads each, head_dim 16, a 16-position cache),
:class:`tilelab.models.kv_cache.KVCache` (int32 ``tokens``/``pos``/``seed``, float32
``inv_temp``) and :func:`tilelab.models.prefill` (``kv_fill_kernel`` on the cache's first
rows).
"""
from __future__ import annotations

import math

from tilelab.kernels.decode import gemv as dg
from tilelab.kernels.decode import rope_attention as dra
from tilelab.kernels.decode import sampling as ks
from tilelab.kernels.decode import step as dk
from tilelab.kernels._host import hinted
from tilelab.kernels.rope import rope_tables
from tilelab.runtime.tensor import empty

HK, G, D, S, HIDDEN, VOCAB = 2, 3, 16, 16, 64, 100
GP, GC = 4, 16                 # the group rounded up to a power of two, and to >= 16 rows
SPLITS, BN = 3, 16             # KV splits per KV head and keys per step
HEAD = dg.GemvConfig(bn=16, bk=32, latency=2)
DT = "bfloat16"


def _t(shape, dtype=DT):
    return empty(shape, dtype, "cpu")


def _attention_launches(pos, cache_k, cache_v) -> dict:
    nq, nkv = HK * G * D, HK * D
    qkv = _t(nq + 2 * nkv)
    q3 = qkv[:nq].reshape(HK, G, D)
    k2, v2 = qkv[nq:nq + nkv].reshape(HK, D), qkv[nq + nkv:].reshape(HK, D)
    kc, vc = cache_k[0], cache_v[0]
    cos, sin = rope_tables(32, D, device="cpu")
    q_rot, attn = _t((HK, G, D)), _t(nq)
    po, plse = _t((HK, SPLITS, G * D), "float32"), _t((HK, SPLITS, G), "float32")
    chunk = 1 << (SPLITS - 1).bit_length()
    kv_new, kv_prev = _t((HK, 2, D)), _t((HK, 2, D))
    k_prev, v_prev = _t((HK, S, D)), _t((HK, S, D))

    def rope_attention(prev):
        return (dra.rope_attention_kernel, (
            attn.reshape(HK, G, D).partition((1, GC, D)), kv_new.partition((1, 2, D)),
            k_prev.partition((1, S, D)), v_prev.partition((1, S, D)), q3, k2, v2, kc, vc,
            kv_prev, _t(D), _t(D), cos, sin, pos, 1e-6, dk.LOG2E / math.sqrt(D), BN, D,
            prev))

    return {
        "rope_attention": rope_attention(1),
        "rope_attention_first_layer": rope_attention(0),
        "kv_store": (dra.kv_store_kernel, (k_prev.partition((1, S, D)),
                                           v_prev.partition((1, S, D)), kv_new, pos)),
        "qk_norm_rope_cache": (dk.qk_norm_rope_cache_kernel, (
            q_rot.partition((1, GP, D)), kc.partition((1, S, D)), vc.partition((1, S, D)),
            q3, k2, v2, _t(D), _t(D), cos, sin, pos, 1e-6, D)),
        "decode_split": (hinted(dk.decode_split_kernel, occupancy=4), (
            po.partition((1, 1, GC * D)), plse.partition((1, 1, GC)), q_rot, kc, vc, pos,
            dk.LOG2E / math.sqrt(D), BN, D)),
        "decode_attention": (dk.decode_attention_kernel, (
            attn.reshape(HK, G, D).partition((1, GC, D)), q_rot, kc, vc, pos,
            dk.LOG2E / math.sqrt(D), BN, D)),
        "decode_combine_head": (dk.decode_combine_head_kernel, (
            attn.reshape(HK, G, D).partition((1, 1, D)), po.reshape(HK, SPLITS, G, D), plse,
            chunk, D)),
    }


def _head_launches(pos, tokens) -> dict:
    blocks = -(-VOCAB // HEAD.bn)
    logits, pval, pidx = _t(VOCAB, "float32"), _t(blocks, "float32"), _t(blocks, "int32")
    w, x = _t((VOCAB, HIDDEN)), _t(HIDDEN)
    inv_temp, seed = _t(1, "float32"), _t(1, "int32")
    head = hinted(dk.lm_head_partial_kernel, occupancy=HEAD.occupancy)

    def partial(latency, sample):
        return (head, (logits.partition(HEAD.bn), pval.partition(1), pidx.partition(1), w,
                       x, inv_temp, seed, pos, HEAD.bk, latency, sample))

    return {
        "lm_head_partial_sample": partial(HEAD.latency, 1),
        "lm_head_partial_greedy": partial(0, 0),
        "pick_token": (dk.pick_token_kernel, (
            tokens.partition(S), _t(S, "int32").partition(S), pval, pidx, pos,
            1 << (blocks - 1).bit_length())),
    }


def _sampling_launches(pos, tokens) -> dict:
    """The sampling head (tilelab.models.sample_head): 7 blocks of 16 logits, 8
    candidates each, merged in one block; the history partitioned as one tile."""
    bv, kc = 16, 8
    blocks = -(-VOCAB // bv)
    cv, ci = _t((blocks, kc), "float32"), _t((blocks, kc), "int32")
    pm, ps = _t(blocks, "float32"), _t(blocks, "float32")
    gv, gi = _t(blocks, "float32"), _t(blocks, "int32")
    history, params, seed = _t(VOCAB, "int32"), _t(ks.PARAMS, "float32"), _t(1, "int32")
    return {
        "sample_partial": (ks.sample_partial_kernel, (
            cv.partition((1, kc)), ci.partition((1, kc)), pm.partition(1), ps.partition(1),
            gv.partition(1), gi.partition(1), _t(VOCAB, "float32"), history, params, seed,
            pos, bv)),
        "sample_pick": (ks.sample_pick_kernel, (
            tokens.partition(S), _t(S, "int32").partition(S),
            history.partition(1 << (VOCAB - 1).bit_length()), cv, ci, pm, ps, gv, gi,
            params, seed, pos, 1 << (blocks - 1).bit_length(), kc)),
    }


def _gemv_launches() -> dict:
    cfg = dg.GemvConfig(bn=4, bk=16, latency=3)
    mma = dg.GemvConfig(bn=64, bk=16, latency=3, mma=True)
    x, res = _t(40), _t(24)
    plans = {
        "gemv": dg.plan_row_gemv(_t((24, 40)), x, config=cfg.with_(latency=None)),
        "gemv_residual": dg.plan_row_gemv(_t((24, 40)), x, residual=res, config=cfg),
        "gemv_silu_mul": dg.plan_gemv_silu_mul(_t((2, 24, 40)), x, config=cfg),
        # the decode step's norm + GEMV kernels (StepConfig.fuse_norms)
        "gemv_fused_norm_x2": dg.plan_row_gemv(_t((24, 40)), x, x2=x, norm_weight=x,
                                               config=cfg),
        "gemv_fused_residual_pair": dg.plan_row_gemv(_t((24, 40)), x, residual=(res, res),
                                                     config=cfg.with_(latency=None)),
        "gemv_fused_silu_mul_norm": dg.plan_gemv_silu_mul(_t((2, 24, 40)), x,
                                                          norm_weight=x, config=cfg),
        # the tensor-core forms (GemvConfig(mma=True)), each flag set once
        "gemv_mma_norm_x2": dg.plan_row_gemv(_t((24, 40)), x, x2=x, norm_weight=x,
                                             config=mma),
        "gemv_mma_residual_pair": dg.plan_row_gemv(_t((24, 40)), x, residual=(res, res),
                                                   config=mma.with_(latency=None)),
        "gemv_mma_silu_mul_norm": dg.plan_gemv_silu_mul(_t((2, 24, 40)), x,
                                                        norm_weight=x, config=mma),
    }
    return {name: plan.launches[0] for name, plan in plans.items()}


def decode_launches() -> dict:
    """name -> (kernel, args): one launch of every decode-engine kernel (each compile-time
    variant the engine uses: with and without sampling, residual, load latency hints).

    Example:
        >>> sorted(decode_launches())[:2]                             # doctest: +SKIP
        ['advance', 'decode_combine_head']
    """
    tokens, pos = _t(S, "int32"), _t(1, "int32")
    cache_k, cache_v = _t((1, HK, S, D)), _t((1, HK, S, D))
    t = 5                                    # a prefill of 5 tokens
    bt = 1 << (t - 1).bit_length()
    out = {
        "embed_at": (dk.embed_at_kernel, (_t(HIDDEN).partition(HIDDEN), _t((50, HIDDEN)),
                                          tokens, pos)),
        "advance": (dk.advance_kernel, (pos.partition(1),)),
        "kv_fill": (dk.kv_fill_kernel, (cache_k[0][:, :t].partition((1, bt, D)),
                                        _t((t, HK, D)))),
    }
    out.update(_attention_launches(pos, cache_k, cache_v))
    out.update(_head_launches(pos, tokens))
    out.update(_sampling_launches(pos, tokens))
    out.update(_gemv_launches())
    return out
