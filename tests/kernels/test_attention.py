"""Flash attention and split-KV decode attention (tilelab.kernels.attention) on the CPU.

Compared with float64 references (tilelab.kernels.reference.matmul) in the Frobenius
norm; outputs and scratch start as NaN so unwritten elements fail; the kernels run under
the race detector; the Hopper configurations compile for sm_90 with tensor-core MMAs.
"""
from __future__ import annotations

import doctest
import importlib
import math
import re

import numpy as np
import pytest

import tilelab as tl
from kernel_checks import check, mma_ops, raw_baselines, remarked, spills
from support.data import rand_tensor as rand
from tilelab.kernels.reference.matmul import (attention_ref, decode_attention_ref)

at = importlib.import_module("tilelab.kernels.attention.host")
AttentionConfig, DecodeConfig = at.AttentionConfig, at.DecodeConfig

#: bf16 output rounding plus P rounded to bf16 before the PV product
TOL = {"bfloat16": 1e-2, "float16": 3e-3}
SMALL = AttentionConfig(bm=16, bn=16)
SMALL_MMA_SUM = AttentionConfig(bm=16, bn=16, row_sum="mma")


def qkv(b, h, hkv, sq, skv, d, dtype="bfloat16", seed=0):
    return (rand((b, h, sq, d), dtype, seed), rand((b, hkv, skv, d), dtype, seed + 1),
            rand((b, hkv, skv, d), dtype, seed + 2))


# ======================================================================================
# flash attention


CASES = {
    # name: (B, H, Hkv, Sq, Skv, D, causal, config)
    "d64_causal": (2, 2, 2, 48, 48, 64, True, SMALL),
    "d64": (2, 2, 2, 48, 48, 64, False, SMALL),
    "d128_causal_ragged": (1, 2, 2, 37, 37, 128, True, SMALL),
    "d128_ragged": (1, 2, 2, 37, 37, 128, False, AttentionConfig(bm=32, bn=16)),
    "gqa4_causal": (1, 8, 2, 40, 40, 64, True, AttentionConfig(bm=16, bn=32)),
    "mqa": (2, 4, 1, 24, 24, 64, False, SMALL),
    "causal_prefix_cache": (1, 4, 2, 20, 53, 64, True, SMALL),   # Sq < Skv, end-aligned
    "cross_lengths": (1, 2, 1, 9, 70, 128, False, SMALL),
    "head_dim_80_padded": (1, 2, 2, 33, 33, 80, True, SMALL),
    "single_token": (1, 2, 2, 1, 1, 64, True, SMALL),
    "default_tiles": (1, 2, 1, 100, 100, 128, True, None),
    # the row sums on the tensor cores: masked tails, GQA, end-aligned causal prefix
    "sum_mma_d128_ragged": (1, 2, 2, 37, 37, 128, False, AttentionConfig(bm=32, bn=16,
                                                                           row_sum="mma")),
    "sum_mma_gqa4_causal": (1, 8, 2, 40, 40, 64, True, AttentionConfig(bm=16, bn=32,
                                                                        row_sum="mma")),
    "sum_mma_causal_prefix_cache": (1, 4, 2, 20, 53, 64, True, SMALL_MMA_SUM),
    "sum_mma_single_token": (1, 2, 2, 1, 1, 64, True, SMALL_MMA_SUM),
    # persistent: fewer blocks than tiles on the CPU's planned 132 SMs is covered below
    "persistent_gqa4_causal": (1, 8, 2, 40, 40, 64, True,
                               AttentionConfig(bm=16, bn=32, persistent=True)),
    "persistent_sum_mma_ragged": (1, 2, 2, 37, 37, 128, False,
                                  AttentionConfig(bm=32, bn=16, row_sum="mma",
                                                  persistent=True)),
    "persistent_prefix_cache_occ2": (1, 4, 2, 20, 53, 64, True,
                                     SMALL.with_(persistent=True, occupancy=2)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_attention_matches_reference(case, seed):
    b, h, hkv, sq, skv, d, causal, cfg = CASES[case]
    q, k, v = qkv(b, h, hkv, sq, skv, d, seed=seed)
    o = at.attention(q, k, v, causal=causal, config=cfg)
    assert o.shape == q.shape and o.dtype == q.dtype
    check(o, attention_ref(q, k, v, causal=causal), TOL["bfloat16"])


def test_attention_fp16_scale_and_float32_out(seed):
    q, k, v = qkv(1, 4, 2, 30, 30, 64, "float16", seed)
    out = tl.zeros(q.shape, "float32", device="cpu")
    got = at.attention(q, k, v, causal=True, scale=0.3, out=out, config=SMALL)
    assert got is out
    check(out, attention_ref(q, k, v, causal=True, scale=0.3), TOL["float16"])


def test_attention_reads_strided_layouts(seed):
    """q/k/v as (B, S, H, D) buffers viewed (B, H, S, D): no copies needed."""
    qs, ks, vs = (rand((2, 40, h, 64), "bfloat16", seed + i) for i, h in enumerate((4, 2, 2)))
    q, k, v = (t.permute(0, 2, 1, 3) for t in (qs, ks, vs))
    assert not q.is_contiguous
    check(at.attention(q, k, v, causal=True, config=SMALL),
          attention_ref(q, k, v, causal=True), TOL["bfloat16"])


def test_causal_skips_masked_tiles(seed):
    """Causal blocks stop at the diagonal: about half the MMA work of non-causal."""
    q, k, v = qkv(1, 1, 1, 128, 128, 64, seed=seed)
    flops = {}
    for causal in (False, True):
        plan = at.plan_attention(q, k, v, causal=causal, config=AttentionConfig(bm=16,
                                                                                 bn=16))
        (kern, args), = plan.launches
        trace = tl.interpret(kern, *args)
        assert not trace.has_races
        flops[causal] = trace.flops
    assert flops[True] < 0.6 * flops[False]


@pytest.mark.parametrize("cfg", [SMALL, SMALL_MMA_SUM, SMALL.with_(persistent=True)],
                         ids=["reduce", "mma", "persistent"])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_no_races(causal, cfg, seed):
    q, k, v = qkv(2, 4, 2, 40, 40, 64, seed=seed)
    plan = at.plan_attention(q, k, v, causal=causal, config=cfg)
    (kern, args), = plan.launches
    assert not tl.interpret(kern, *args, order="shuffled", seed=3).has_races
    check(plan.out, attention_ref(q, k, v, causal=causal), TOL["bfloat16"])


@pytest.mark.parametrize("sms,occupancy", [(2, None), (3, 2)])
def test_persistent_blocks_loop_over_every_tile(sms, occupancy, seed):
    """With fewer blocks than tiles (2 or 6 blocks, 3 x 5 = 15 tiles) each block walks
    several tiles; every tile is written once, in any block order, with no race."""
    q, k, v = qkv(1, 3, 1, 72, 72, 64, seed=seed)
    cfg = SMALL.with_(persistent=True, occupancy=occupancy)
    o = tl.full(q.shape, float("nan"), "bfloat16", device="cpu")
    (kern, args), = at._attention_launches(cfg, o.reshape(3, 72, 64), q, k, v,
                                            1 / math.sqrt(64), True, sms)
    assert kern.name == "persistent_attention_kernel"
    assert args[0].schedule.num_blocks == sms * (occupancy or 1)
    assert not tl.interpret(kern, *args, order="shuffled", seed=5).has_races
    check(o, attention_ref(q, k, v, causal=True), TOL["bfloat16"])


# ======================================================================================
# decode


DECODE = {
    # name: (B, H, Hkv, S, D, kv_len, config)
    "gqa4_d128": (2, 8, 2, 300, 128, 250, DecodeConfig(bn=32, num_splits=3)),
    "mha_d64": (2, 4, 4, 100, 64, None, DecodeConfig(bn=16)),
    "gqa6_not_pow2": (1, 6, 1, 77, 64, 77, DecodeConfig(bn=16, num_splits=5)),
    "gqa16": (1, 16, 1, 64, 64, 50, DecodeConfig(bn=16, num_splits=2)),
    "splits_exceed_tiles": (1, 2, 1, 40, 64, 33, DecodeConfig(bn=16, num_splits=50)),
    "many_splits_chunked": (1, 2, 2, 256, 64, 256, DecodeConfig(bn=16, num_splits=16,
                                                               combine_chunk=4)),
    "one_key": (1, 2, 1, 16, 64, 1, DecodeConfig(bn=16)),
    "defaults": (2, 4, 2, 200, 128, 180, None),
}


@pytest.mark.parametrize("case", list(DECODE))
def test_decode_matches_reference(case, seed):
    b, h, hkv, s, d, kv_len, cfg = DECODE[case]
    q = rand((b, h, d), "bfloat16", seed)
    k, v = rand((b, hkv, s, d), "bfloat16", seed + 1), rand((b, hkv, s, d), "bfloat16",
                                                             seed + 2)
    o = at.decode_attention(q, k, v, kv_len=kv_len, config=cfg)
    assert o.shape == q.shape
    check(o, decode_attention_ref(q, k, v, kv_len=kv_len), TOL["bfloat16"])


def test_decode_four_dim_query_and_scale(seed):
    q = rand((2, 4, 1, 64), "float16", seed)
    k, v = rand((2, 2, 90, 64), "float16", seed + 1), rand((2, 2, 90, 64), "float16",
                                                           seed + 2)
    o = at.decode_attention(q, k, v, scale=0.2, config=DecodeConfig(bn=16, num_splits=4))
    assert o.shape == (2, 4, 1, 64)
    check(o, decode_attention_ref(q, k, v, scale=0.2), TOL["float16"])


def test_decode_tolerates_empty_splits(seed):
    """Splits past kv_len write lse = -inf and zeros; the merge gives them no weight."""
    q = rand((1, 4, 1, 64), "bfloat16", seed)          # (B, Hkv, G, D): G = 4
    k, v = rand((1, 1, 64, 64), "bfloat16", seed + 1), rand((1, 1, 64, 64), "bfloat16",
                                                           seed + 2)
    q4 = q.reshape(1, 1, 4, 64)
    po = tl.full((1, 4, 4 * 64), np.nan, "float32", device="cpu")
    plse = tl.full((1, 4, 4), np.nan, "float32", device="cpu")
    # 2 key tiles of 16 (kv_len 20) over 4 splits of one tile: splits 2 and 3 are empty
    at.decode_split_kernel(po.partition((1, 1, 16 * 64)), plse.partition((1, 1, 16)), q4,
                           k, v, at.LOG2E / 8.0, 20, 1, 16, 64, 0, 0)
    assert np.isneginf(plse.numpy()[0, 2:]).all() and (po.numpy()[0, 2:] == 0).all()
    o = tl.full((1, 4, 64), np.nan, "bfloat16", device="cpu")
    at.decode_combine_kernel(o.partition((1, 4, 64)), po, plse, 4, 64)
    check(o, decode_attention_ref(q4[0], k, v, kv_len=20), TOL["bfloat16"])


def test_decode_no_races(seed):
    q = rand((2, 8, 64), "bfloat16", seed)
    k, v = rand((2, 2, 100, 64), "bfloat16", seed + 1), rand((2, 2, 100, 64), "bfloat16",
                                                             seed + 2)
    plan = at.plan_decode_attention(q, k, v, config=DecodeConfig(bn=16, num_splits=3))
    assert [kern.name for kern, _ in plan.launches] == ["decode_split_kernel",
                                                        "decode_combine_kernel"]
    for kern, args in plan.launches:
        assert not tl.interpret(kern, *args, order="shuffled", seed=5).has_races
    check(plan.out, decode_attention_ref(q, k, v), TOL["bfloat16"])


def test_num_splits_fill_the_gpu():
    cfg = DecodeConfig(bn=64)
    assert at._num_splits(cfg, 128, 8 * 8, 132) == 5        # 64 heads x 5 >= 264 blocks
    assert at._num_splits(cfg, 3, 1, 132) == 3              # never more than key tiles
    assert at._num_splits(cfg.with_(num_splits=7), 20, 64, 132) == 7
    assert at._num_splits(cfg.with_(num_splits=6), 8, 64, 132) == 4   # no empty split


def test_kernels_are_safe():
    for kern in (at.flash_attention_kernel, at.decode_split_kernel,
                 at.decode_combine_kernel):
        assert isinstance(kern, tl.Kernel) and not kern.options.unsafe


# ======================================================================================
# validation


def _z(shape, dtype="bfloat16"):
    return tl.zeros(shape, dtype, device="cpu")


@pytest.mark.parametrize("call,exc,msg", [
    (lambda: at.attention(_z((1, 2, 8, 64), "float32"), _z((1, 2, 8, 64), "float32"),
                          _z((1, 2, 8, 64), "float32")), TypeError, "float16 or bfloat16"),
    (lambda: at.attention(_z((1, 2, 8, 64)), _z((1, 2, 8, 64), "float16"),
                          _z((1, 2, 8, 64), "float16")), TypeError, "share one dtype"),
    (lambda: at.attention(_z((1, 3, 8, 64)), _z((1, 2, 8, 64)), _z((1, 2, 8, 64))),
     ValueError, "multiple of KV heads"),
    (lambda: at.attention(_z((1, 2, 8, 64)), _z((1, 2, 8, 32)), _z((1, 2, 8, 32))),
     ValueError, "head_dim"),
    (lambda: at.attention(_z((1, 2, 8, 64)), _z((1, 2, 8, 64)), _z((1, 2, 9, 64))),
     ValueError, "k and v must both be"),
    (lambda: at.attention(_z((1, 2, 9, 64)), _z((1, 2, 8, 64)), _z((1, 2, 8, 64)),
                          causal=True), ValueError, "more queries"),
    (lambda: at.attention(_z((1, 2, 8, 512)), _z((1, 2, 8, 512)), _z((1, 2, 8, 512))),
     ValueError, "not supported"),
    (lambda: at.attention(_z((2, 8, 64)), _z((2, 8, 64)), _z((2, 8, 64))), ValueError,
     "(B, H, S, D)"),
    (lambda: at.attention(_z((1, 2, 8, 64)), _z((1, 2, 8, 64)), _z((1, 2, 8, 64)),
                          scale=-1.0), ValueError, "positive finite"),
    (lambda: at.attention(_z((1, 2, 8, 64)), _z((1, 2, 8, 64)), _z((1, 2, 8, 64)),
                          out=_z((1, 8, 2, 64)).permute(0, 2, 1, 3)), ValueError,
     "contiguous"),
    (lambda: at.attention(_z((1, 2, 8, 64)), _z((1, 2, 8, 64)), _z((1, 2, 8, 64)),
                          config=DecodeConfig()), TypeError, "AttentionConfig"),
    (lambda: at.decode_attention(_z((1, 2, 64)), _z((1, 2, 8, 64)), _z((1, 2, 8, 64)),
                                 kv_len=9), ValueError, "kv_len must be"),
    (lambda: at.decode_attention(_z((1, 2, 64)), _z((1, 2, 8, 64)), _z((1, 2, 8, 64)),
                                 kv_len=2.5), ValueError, "kv_len must be"),
    (lambda: at.attention(_z((1, 2, 8, 64)), _z((1, 2, 0, 64)), _z((1, 2, 0, 64))),
     ValueError, "no keys"),
    (lambda: at.decode_attention(_z((1, 2, 3, 64)), _z((1, 2, 8, 64)), _z((1, 2, 8, 64))),
     ValueError, "(B, H, 1, D)"),
    (lambda: at.decode_attention(_z((2, 2, 64)), _z((1, 2, 8, 64)), _z((1, 2, 8, 64))),
     ValueError, "batch"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_host_validation(call, exc, msg):
    with pytest.raises(exc, match=re.escape(msg)):
        call()


def test_every_searched_config_attends(seed):
    q, k, v = qkv(1, 2, 1, 40, 40, 64, seed=seed)
    want = attention_ref(q, k, v, causal=True)
    space = at.attention_search_space(64)
    assert space[0] == at.default_attention_config(64)
    for cfg in space:
        check(at.attention(q, k, v, causal=True, config=cfg), want, TOL["bfloat16"])


def test_long_sequences_default_to_the_warp_specialized_kernel():
    """From 4096 keys the default asks tileiras for 8 worker warps; that kernel
    attends like any other (interpreted here on a small problem)."""
    cfg = at.default_attention_config(128, kv_len=4096)
    assert (cfg.bm, cfg.bn, cfg.num_worker_warps, cfg.row_sum) == (128, 256, 8, "mma")
    assert cfg.persistent            # one block per SM, looping over query tiles
    causal = at.default_attention_config(128, True, kv_len=8192)
    assert causal.num_worker_warps == 8 and not causal.persistent
    assert at.default_attention_config(128, True, kv_len=4096).num_worker_warps is None
    assert at.default_attention_config(128, kv_len=1024).num_worker_warps is None
    assert not at.default_attention_config(128, kv_len=1024).persistent
    q, k, v = qkv(1, 2, 1, 40, 40, 64, seed=3)
    got = at.attention(q, k, v, config=AttentionConfig(bm=16, bn=16, num_worker_warps=8))
    check(got, attention_ref(q, k, v), TOL["bfloat16"])


def test_empty_results_need_no_launch():
    assert at.plan_attention(_z((0, 2, 8, 64)), _z((0, 1, 8, 64)),
                             _z((0, 1, 8, 64))).launches == []
    assert at.attention(_z((1, 2, 0, 64)), _z((1, 1, 8, 64)),
                        _z((1, 1, 8, 64))).shape == (1, 2, 0, 64)
    assert at.decode_attention(_z((0, 4, 64)), _z((0, 2, 8, 64)),
                               _z((0, 2, 8, 64))).shape == (0, 4, 64)


@pytest.mark.parametrize("make,msg", [
    (lambda: AttentionConfig(bm=48), "power of two"),
    (lambda: AttentionConfig(latency_k=0), "latency_k"),
    (lambda: AttentionConfig(num_worker_warps=6), "num_worker_warps=6 must be a power of two"),
    (lambda: AttentionConfig(row_sum="shuffle"), "row_sum='shuffle': choose one of 'reduce', "
                                                 "'mma'"),
    (lambda: AttentionConfig(num_worker_warps=64), "num_worker_warps=64 must be an int in"),
    (lambda: AttentionConfig(persistent=1), "persistent=1 must be a bool"),
    (lambda: DecodeConfig(num_splits=0), "num_splits"),
    (lambda: DecodeConfig(combine_chunk=3), "power of two"),
])
def test_config_validation(make, msg):
    with pytest.raises(ValueError, match=msg):
        make()


# ======================================================================================
# Hopper code (compiled for sm_90 without a GPU)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.toolchain
def test_sm90_flash_attention_spec(causal):
    """B=8 H=32 S=8192 D=128 bf16: HGMMA for QK^T and PV, TMA loads, next to no spills
    (the persistent kernel spills 24 B per thread at the 168-register cap; the H200 runs
    it as fast as run h's 12-B probe kernel); the default there is warp-specialized (8
    worker warps: 384 threads)."""
    (art,) = at.compile_attention(8, 32, 8192, 128, causal=causal, arch="sm_90")
    ops = mma_ops(art)
    assert any(op.startswith("HGMMA") and op.endswith("BF16") for op in ops), ops
    assert remarked(art, "TMA Load")
    assert spills(art) <= 32
    assert art.resources.threads_per_block == 384
    # non-causal, the default is the persistent kernel: one block per SM
    assert (art.kernel_name == "persistent_attention_kernel") != causal, art.kernel_name


@pytest.mark.toolchain
def test_sm90_decode_spec():
    """Decode (B=8, H=32, Hkv=8, 8192-long cache): tensor-core MMAs, TMA, and the
    occupancy hint's register cap (64) with next to no spills (16 B in the split
    kernel; occupancy 8 spilled 848 B and ran 3-4x slower on the H200)."""
    split, combine = at.compile_decode_attention(8, 32, 8, 8192, 128, arch="sm_90")
    assert any(op.startswith("HMMA") for op in mma_ops(split))
    assert remarked(split, "TMA Load") and spills(split) <= 32 and spills(combine) == 0
    assert "64 per thread" in str(split.resources)


# ======================================================================================
# raw cuTile baselines and documentation


@pytest.mark.parametrize("sum_mma,blocks,hints", [
    (False, None, {}), (True, None, {}), (True, 5, {"num_worker_warps": 8}),
    (False, 3, {"occupancy": 2})], ids=["reduce", "mma", "persistent_ws", "persistent"])
def test_raw_flash_attention_baseline(sum_mma, blocks, hints, seed):
    raw = raw_baselines()
    q, k, v = (t.numpy() for t in qkv(2, 4, 2, 40, 40, 64, seed=seed))
    o = np.full(q.shape, np.nan, q.dtype)
    grid, kern, args = raw.flash_attention_launch(o.reshape(8, 40, 64), q, k, v,
                                                  causal=True, bm=16, bn=16, sum_mma=sum_mma,
                                                  num_blocks=blocks, **hints)
    if blocks:
        assert grid == (blocks, 1, 1)
    for name, value in hints.items():
        assert getattr(kern._compiler_options, name) == value
    assert not tl.interpret(kern, *args, grid=grid).has_races
    check(o, attention_ref(q, k, v, causal=True), TOL["bfloat16"])


def test_raw_decode_baseline(seed):
    raw = raw_baselines()
    b, h, hkv, s, d = 2, 4, 2, 90, 64
    q = rand((b, h, d), "bfloat16", seed).numpy()
    k, v = (rand((b, hkv, s, d), "bfloat16", seed + i).numpy() for i in (1, 2))
    g, splits = h // hkv, 3
    o = np.full((b, h, d), np.nan, q.dtype)
    po = np.full((b * hkv, splits, g * d), np.nan, np.float32)
    plse = np.full((b * hkv, splits, g), np.nan, np.float32)
    for grid, kern, args in raw.decode_launches(o.reshape(b * hkv, g, d), po, plse,
                                                q.reshape(b, hkv, g, d), k, v, kv_len=70,
                                                bn=16):
        tl.interpret(kern, *args, grid=grid)
    check(o, decode_attention_ref(q, k, v, kv_len=70), TOL["bfloat16"])


def test_doctests():
    result = doctest.testmod(at, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_public_names_have_examples():
    for name in at.__all__:
        assert "Example" in (getattr(at, name).__doc__ or ""), name
    assert math.isclose(at.LOG2E, 1 / math.log(2))
