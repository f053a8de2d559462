"""GEMM, batched GEMM, split-K and GEMV (tilelab.kernels.matmul) on the CPU interpreter.

Results are compared with float64 references (tilelab.kernels.reference.matmul) in the
Frobenius norm. Every tensor the host functions allocate (outputs and split-K scratch)
starts as NaN, so an element no block writes fails the comparison. The kernels also run
under the race detector, and the Hopper configurations compile for sm_90 (no GPU needed)
with tensor-core MMAs and TMA loads.
"""
from __future__ import annotations

import doctest
import importlib
import re

import numpy as np
import pytest

import tilelab as tl
from kernel_checks import check, mma_ops, raw_baselines, remarked, spills
from support.data import rand_tensor as rand
from tilelab.kernels.reference.matmul import matmul_ref, rel_error

mm = importlib.import_module("tilelab.kernels.matmul.host")
refmod = importlib.import_module("tilelab.kernels.reference.matmul")
MatmulConfig = mm.MatmulConfig

#: Frobenius-norm relative tolerance by output dtype (one rounding of the result)
TOL = {"bfloat16": 1e-2, "float16": 2e-3, "float32": 1e-5}
#: fp32 inputs run as tf32 (10-bit mantissa): the inputs' rounding dominates
TF32_TOL = 1e-3
SMALL = MatmulConfig(tm=32, tn=32, tk=16, group_m=2)


def names(plan) -> list[str]:
    return [k.name for k, _ in plan.launches]


# ======================================================================================
# numerics


@pytest.mark.parametrize("in_dtype,out_dtype", [
    ("bfloat16", None), ("bfloat16", "float32"), ("bfloat16", "float16"),
    ("float16", None), ("float16", "float32"), ("float32", None)])
def test_dtypes(in_dtype, out_dtype, seed):
    a, b = rand((72, 56), in_dtype, seed), rand((56, 40), in_dtype, seed + 1)
    c = mm.matmul(a, b, out_dtype=out_dtype, config=SMALL)
    out = out_dtype or in_dtype
    assert c.dtype.name == out
    tol = TF32_TOL if in_dtype == "float32" else max(TOL[out], 1e-5)
    check(c, matmul_ref(a, b), tol)


def test_tf32_is_not_full_fp32(seed):
    """fp32 inputs take the tensor cores (tf32 operands): close to, not equal to, fp32."""
    a, b = rand((32, 64), "float32", seed), rand((64, 32), "float32", seed + 1)
    err = rel_error(mm.matmul(a, b, config=SMALL), matmul_ref(a, b))
    assert 1e-6 < err < TF32_TOL


SCHEDULES = {
    "row_major": SMALL.with_(schedule="row_major"),
    "grouped": SMALL.with_(schedule="grouped", group_m=2),
    "grouped_8": SMALL.with_(schedule="grouped", group_m=8),
    "persistent_3": SMALL.with_(schedule="persistent", num_blocks=3, group_m=2),
    "persistent_default": SMALL.with_(schedule="persistent"),
    "persistent_row_order": SMALL.with_(schedule="persistent", num_blocks=5, group_m=1),
}


def test_schedules_agree_bitwise(seed):
    """Every schedule computes each tile the same way: identical bits, right values."""
    a, b = rand((100, 70), "bfloat16", seed), rand((70, 90), "bfloat16", seed + 1)
    outs = {k: mm.matmul(a, b, out_dtype="float32", config=c).numpy()
            for k, c in SCHEDULES.items()}
    first = outs["row_major"]
    for k, v in outs.items():
        assert np.array_equal(v, first), k
    check(first, matmul_ref(a, b), 1e-5)


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (17, 33, 65), (130, 7, 9), (5, 300, 3),
                                   (64, 64, 64), (33, 31, 100)])
def test_ragged_shapes(m, n, k, seed):
    a, b = rand((m, k), "bfloat16", seed), rand((k, n), "bfloat16", seed + 1)
    check(mm.matmul(a, b, out_dtype="float32", config=SMALL), matmul_ref(a, b), 1e-5)
    check(mm.matmul(a, b, out_dtype="float32"), matmul_ref(a, b), 1e-5)   # default tiles


@pytest.mark.parametrize("m", [1, 2, 3, 8, 16])
def test_small_m_defaults(m, seed):
    """Decode-sized M: one launch, GEMV for M = 1 (16-column panels 1024 deep when N is
    narrow, as here), 16-row tensor-core tiles up to 16 (computed transposed, as N is
    narrow)."""
    a, b = rand((m, 2048), "bfloat16", seed), rand((2048, 96), "bfloat16", seed + 1)
    plan = mm.plan_matmul(a, b, out_dtype="float32")
    cfg = mm.default_config(m, 96, 2048)
    if m == 1:
        assert (cfg.schedule, cfg.tn, cfg.tk, cfg.split_k) == ("gemv", 16, 1024, 1)
        assert names(plan) == ["gemv_kernel"]
    else:
        assert cfg.schedule == "grouped" and cfg.split_k == 1 and cfg.swap_ab
        assert names(plan) == ["matmul_kernel"]
    check(plan.run(), matmul_ref(a, b), 1e-5)


def test_narrow_fp32_m1_splits_k_in_one_launch(seed):
    """fp32 at M = 1 on a narrow N keeps one-launch split-K (16-bit takes deep panels)."""
    cfg = mm.default_config(1, 96, 2048, "float32")
    assert (cfg.schedule, cfg.split_k, cfg.split_mode) == ("gemv", 8, "atomic")
    a, b = rand((1, 2048), "float32", seed), rand((2048, 96), "float32", seed + 1)
    plan = mm.plan_matmul(a, b)
    assert names(plan) == ["splitk_atomic_kernel"]
    check(plan.run(), matmul_ref(a, b), 1e-4)


@pytest.mark.parametrize("m,n", [(128, 1024), (48, 1024), (17, 1024), (128, 2048)])
def test_narrow_skinny_problems_take_narrow_deep_tiles(m, n, seed):
    """Fewer 64-wide columns than a quarter of the SMs at 16 < M <= 128 (the k/v
    projection): 64 x 32 tiles, 256 deep (16-bit only)."""
    cfg = mm.default_config(m, n, 4096)
    assert (cfg.tm, cfg.tn, cfg.tk, cfg.schedule) == (64, 32, 256, "grouped")
    assert mm.default_config(m, n, 4096, "float32") != cfg
    assert mm.default_config(m, 4096, 4096) != cfg                     # q/o: not narrow
    a, b = rand((m, 512), "bfloat16", seed), rand((512, 48), "bfloat16", seed + 1)
    check(mm.matmul(a, b, out_dtype="float32", config=cfg), matmul_ref(a, b), 1e-5)


@pytest.mark.parametrize("m,n", [(16, 1024), (2, 2048), (9, 96), (16, 12288)])
def test_decode_sized_problems_swap_the_operands(m, n, seed):
    """1 < M <= 16: 16 x 64 tiles computed as B^T A^T (the weight fills the MMA's rows,
    the tokens its columns), 512 deep, or as deep as K rounded up (16-bit only)."""
    cfg = mm.default_config(m, n, 4096)
    assert cfg == MatmulConfig(tm=16, tn=64, tk=512, swap_ab=True)
    assert mm.default_config(m, n, 100).tk == 128
    assert not mm.default_config(m, n, 4096, "float32").swap_ab
    assert not mm.default_config(m, n, 4096, "float8_e4m3fn").swap_ab
    assert not mm.default_config(1, n, 4096).swap_ab     # M = 1 on a narrow or wide N
    assert not mm.default_config(17, n, 4096).swap_ab
    a, b = rand((m, 512), "bfloat16", seed), rand((512, 80), "bfloat16", seed + 1)
    want = matmul_ref(a, b, bias=np.ones(80), activation="silu")
    got = mm.matmul(a, b, bias=tl.ones(80, device="cpu"), activation="silu",
                    out_dtype="float32", config=cfg)
    check(got, want, 1e-5)
    # B given as the transposed view of an (N, K) weight: the B^T tile is its own rows
    w = tl.tensor(np.ascontiguousarray(b.numpy().T), device="cpu")
    check(mm.matmul(a, w.T, out_dtype="float32", config=cfg), matmul_ref(a, b), 1e-5)


@pytest.mark.parametrize("cfg", [
    MatmulConfig(tm=16, tn=32, tk=16, swap_ab=True, schedule="persistent", num_blocks=3),
    MatmulConfig(tm=16, tn=32, tk=16, swap_ab=True, schedule="splitk", split_k=3),
    MatmulConfig(tm=16, tn=32, tk=16, swap_ab=True, schedule="splitk", split_k=3,
                 split_mode="atomic"),
    MatmulConfig(tm=32, tn=16, tk=32, swap_ab=True, schedule="row_major")],
    ids=["persistent", "splitk", "atomic", "row_major"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_swapped_tiles_in_every_schedule(cfg, dtype, seed):
    """swap_ab computes each tile as (B^T A^T)^T: the same product in every schedule,
    ragged edges included (M = 21 and N = 50 are no multiples of the tiles)."""
    a, b = rand((21, 80), dtype, seed), rand((80, 50), dtype, seed + 1)
    got = mm.matmul(a, b, out_dtype="float32", config=cfg)
    check(got, matmul_ref(a, b), 1e-5 if dtype == "bfloat16" else 2e-3)


def test_wide_m1_and_fp8_stay_unsplit():
    assert mm.default_config(1, 4096, 4096).split_k == 1       # 64 panels of 64 columns
    assert mm.default_config(1, 1024, 4096, "float8_e4m3fn").split_k == 1
    assert mm.default_config(1, 1024, 128).split_k == 1         # one K tile: nothing to split


def test_small_problems_use_64x128_tiles():
    """Fewer 128x128 tiles than half the SMs: 64x128 tiles (1024^3 on the H200)."""
    cfg = mm.default_config(1024, 1024, 1024)
    assert (cfg.tm, cfg.tn, cfg.schedule) == (64, 128, "grouped")
    assert mm.default_config(2048, 2048, 2048).schedule == "persistent"


@pytest.mark.parametrize("cfg", [
    MatmulConfig(tm=1, tn=16, tk=16, schedule="gemv"),
    MatmulConfig(tm=1, tn=32, tk=32, schedule="gemv", split_k=3),
    MatmulConfig(tm=1, tn=16, tk=16, schedule="gemv", split_k=64),   # more than K tiles
    MatmulConfig(tm=16, tn=16, tk=16, schedule="splitk", split_k=4),
    MatmulConfig(tm=16, tn=32, tk=32, schedule="splitk"),              # split_k 1: direct
], ids=["gemv", "gemv_split3", "gemv_split_many", "splitk4", "splitk1"])
def test_gemv_and_splitk(cfg, seed):
    m = 1 if cfg.schedule == "gemv" else 5
    a, b = rand((m, 200), "float16", seed), rand((200, 70), "float16", seed + 1)
    want = matmul_ref(a, b, bias=np.linspace(-1, 1, 70), activation="silu", alpha=0.5)
    got = mm.matmul(a, b, bias=tl.tensor(np.linspace(-1, 1, 70), "float32", device="cpu"),
                    activation="silu", scale_a=0.5, out_dtype="float32", config=cfg)
    check(got, want, 1e-5)


EPILOGUE_CONFIGS = {
    "grouped": (7, SMALL),
    "persistent": (7, SMALL.with_(schedule="persistent", num_blocks=2)),
    "gemv": (1, MatmulConfig(tm=1, tn=16, tk=16, schedule="gemv")),
    "splitk": (7, MatmulConfig(tm=16, tn=16, tk=16, schedule="splitk", split_k=3)),
}


@pytest.mark.parametrize("activation", [None, "relu", "gelu", "gelu_erf", "silu"])
@pytest.mark.parametrize("path", list(EPILOGUE_CONFIGS))
def test_fused_epilogue(path, activation, seed):
    """act(alpha * a @ b + bias) + residual on every code path, mixed operand dtypes."""
    rows, cfg = EPILOGUE_CONFIGS[path]
    m = rows * 7 if path in ("grouped", "persistent") else rows
    a, b = rand((m, 48), "bfloat16", seed), rand((48, 40), "bfloat16", seed + 1)
    bias, res = rand((40,), "bfloat16", seed + 2), rand((m, 40), "float16", seed + 3)
    got = mm.matmul(a, b, bias=bias, residual=res, activation=activation, scale_a=2.0,
                    scale_b=0.25, out_dtype="float32", config=cfg)
    check(got, matmul_ref(a, b, bias=bias, residual=res, activation=activation, alpha=0.5),
          1e-5)


def test_epilogue_pieces_alone(seed):
    a, b = rand((40, 24), "bfloat16", seed), rand((24, 36), "bfloat16", seed + 1)
    bias, res = rand((36,), "float32", seed + 2), rand((40, 36), "float32", seed + 3)
    for kw, want in [({"bias": bias}, matmul_ref(a, b, bias=bias)),
                     ({"residual": res}, matmul_ref(a, b, residual=res)),
                     ({"activation": "gelu_tanh"}, matmul_ref(a, b, activation="gelu_tanh")),
                     ({"activation": "gelu"}, matmul_ref(a, b, activation="gelu_tanh")),
                     ({"scale_b": 3.0}, matmul_ref(a, b, alpha=3.0))]:
        check(mm.matmul(a, b, out_dtype="float32", config=SMALL, **kw), want, 1e-5)


@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("trans_b", [False, True])
def test_fp8(fmt, trans_b, seed):
    """fp8 inputs, fp32 accumulation, per-tensor dequantization scales, bf16 output."""
    a = rand((50, 64), fmt, seed)
    w = rand((40, 64) if trans_b else (64, 40), fmt, seed + 1)
    b = w.T if trans_b else w
    want = matmul_ref(a, b, alpha=0.125 * 3.0)
    cfg = SMALL.with_(tk=32, fast_acc=True)
    check(mm.matmul(a, b, scale_a=0.125, scale_b=3.0, config=cfg), want, TOL["bfloat16"])
    check(mm.matmul(a, b, scale_a=0.125, scale_b=3.0, out_dtype="float32", config=cfg),
          want, 1e-5)
    assert mm.matmul(a, b, config=cfg).dtype.name == "bfloat16"


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_transposed_b_is_read_k_major(dtype, seed):
    """b = W.T (an (N, K) weight viewed transposed) is passed as W with TRANS_B."""
    a, w = rand((33, 80), dtype, seed), rand((45, 80), dtype, seed + 1)
    plan = mm.plan_matmul(a, w.T, out_dtype="float32", config=SMALL)
    (_, args), = plan.launches
    assert args[2] is not None and args[2].shape == (45, 80) and args[7] is True
    tol = TF32_TOL if dtype == "float32" else 1e-5
    check(plan.run(), matmul_ref(a, w.T), tol)


def test_vector_times_matrix(seed):
    x, b = rand((64,), "bfloat16", seed), rand((64, 48), "bfloat16", seed + 1)
    res = rand((48,), "float32", seed + 2)
    y = mm.matmul(x, b, residual=res, out_dtype="float32")
    assert y.shape == (48,)
    check(y, matmul_ref(x, b, residual=res), 1e-5)


@pytest.mark.parametrize("n,k", [(48, 64), (300, 1000), (1, 40), (40, 1)])
def test_gemv_weight_times_vector(n, k, seed):
    """gemv(w, x) = w @ x for an (N, K) weight: matmul of x with w.T, read K-major."""
    w, x = rand((n, k), "bfloat16", seed), rand((k,), "bfloat16", seed + 1)
    bias = rand((n,), "float32", seed + 2)
    y = mm.gemv(w, x, bias=bias, activation="silu", out_dtype="float32")
    assert y.shape == (n,)
    check(y, matmul_ref(x, w.T, bias=bias, activation="silu"), 1e-5)
    plan = mm.plan_matmul(x, w.T)
    if n > 1 and k > 1:
        assert all(args[2] is not None for _, args in plan.launches)
        assert plan.launches[0][1][2].shape == (n, k)          # w itself, K-major


def test_numpy_inputs_and_out(seed):
    a = np.random.default_rng(seed).standard_normal((20, 30)).astype(np.float32)
    b = np.random.default_rng(seed + 1).standard_normal((30, 10)).astype(np.float32)
    out = tl.zeros((20, 10), "float32", device="cpu")
    got = mm.matmul(a, b, out=out, config=SMALL)
    assert got is out
    check(out, matmul_ref(a, b), TF32_TOL)


def test_out_is_poisoned_and_fully_written(seed):
    a, b = rand((70, 50), "bfloat16", seed), rand((50, 60), "bfloat16", seed + 1)
    for cfg in SCHEDULES.values():
        out = tl.full((70, 60), np.nan, "float32", device="cpu")
        mm.matmul(a, b, out=out, config=cfg)
        check(out, matmul_ref(a, b), 1e-5)


# ======================================================================================
# batched


@pytest.mark.parametrize("shared_b", [False, True])
@pytest.mark.parametrize("schedule", ["grouped", "row_major"])
def test_bmm(shared_b, schedule, seed):
    a = rand((3, 37, 40), "bfloat16", seed)
    b = rand((40, 29) if shared_b else (3, 40, 29), "bfloat16", seed + 1)
    bias, res = rand((29,), "float32", seed + 2), rand((3, 37, 29), "bfloat16", seed + 3)
    cfg = MatmulConfig(tm=16, tn=16, tk=16, group_m=2, schedule=schedule)
    got = mm.bmm(a, b, bias=bias, residual=res, activation="relu", out_dtype="float32",
                 config=cfg)
    check(got, refmod.bmm_ref(a, b, bias=bias, residual=res, activation="relu"), 1e-5)
    check(mm.bmm(a, b, config=cfg), refmod.bmm_ref(a, b), TOL["bfloat16"])


def test_bmm_default_config(seed):
    a, b = rand((2, 100, 24), "float16", seed), rand((2, 24, 20), "float16", seed + 1)
    check(mm.bmm(a, b), refmod.bmm_ref(a, b), TOL["float16"])


# ======================================================================================
# races and safety


RACE_CASES = {
    "grouped": (63, SMALL),
    "row_major": (63, SMALL.with_(schedule="row_major")),
    "persistent": (63, SMALL.with_(schedule="persistent", num_blocks=3)),
    "splitk": (9, MatmulConfig(tm=16, tn=16, tk=16, schedule="splitk", split_k=3)),
    "gemv": (1, MatmulConfig(tm=1, tn=16, tk=16, schedule="gemv")),
    "gemv_split": (1, MatmulConfig(tm=1, tn=16, tk=16, schedule="gemv", split_k=2)),
    "swap": (9, MatmulConfig(tm=16, tn=16, tk=16, swap_ab=True)),
    "swap_splitk": (9, MatmulConfig(tm=16, tn=16, tk=16, schedule="splitk", split_k=3,
                                    swap_ab=True)),
}


@pytest.mark.parametrize("case", list(RACE_CASES))
def test_no_races(case, seed):
    rows, cfg = RACE_CASES[case]
    a, b = rand((rows, 64), "bfloat16", seed), rand((64, 50), "bfloat16", seed + 1)
    plan = mm.plan_matmul(a, b, bias=rand((50,), "float32"), activation="relu",
                          out_dtype="float32", config=cfg)
    for kern, args in plan.launches:
        trace = tl.interpret(kern, *args, order="shuffled", seed=seed)
        assert not trace.has_races, trace.races
    check(plan.out, matmul_ref(a, b, bias=rand((50,), "float32"), activation="relu"), 1e-5)


def test_bmm_no_races(seed):
    a, b = rand((2, 40, 32), "bfloat16", seed), rand((2, 32, 40), "bfloat16", seed + 1)
    plan = mm.plan_bmm(a, b, config=MatmulConfig(tm=16, tn=16, tk=16, group_m=2))
    (kern, args), = plan.launches
    assert not tl.interpret(kern, *args, order="shuffled", seed=1).has_races


def test_kernels_are_safe():
    """Every library GEMM but one-launch split-K writes through a partition; that one
    is unsafe on purpose and says why (tests/kernels/test_matmul_splitk.py races it)."""
    for name in ("matmul_kernel", "persistent_matmul_kernel", "batched_matmul_kernel",
                 "splitk_partial_kernel", "splitk_reduce_kernel", "gemv_kernel",
                 "gemv_rows_kernel"):
        kern = getattr(mm, name)
        assert isinstance(kern, tl.Kernel) and not kern.options.unsafe, name
    assert mm.splitk_atomic_kernel.options.unsafe
    assert "Why ``unsafe=True``" in mm.splitk_atomic_kernel.__doc__


def test_hint_variants_are_cached():
    cfg = SMALL.with_(occupancy=2)
    assert mm._variant(mm.matmul_kernel, cfg) is mm._variant(mm.matmul_kernel, cfg)
    assert mm._variant(mm.matmul_kernel, SMALL) is mm.matmul_kernel
    a, b = rand((40, 16)), rand((16, 40))
    check(mm.matmul(a, b, config=cfg), matmul_ref(a, b), TOL["bfloat16"])


# ======================================================================================
# configuration and validation


@pytest.mark.parametrize("m", [1, 5, 100])
def test_every_searched_config_computes_the_product(m, seed):
    """An autotuner may pick any configuration of the search space: all are correct."""
    a, b = rand((m, 96), "bfloat16", seed), rand((96, 80), "bfloat16", seed + 1)
    want = matmul_ref(a, b, bias=np.ones(80), activation="relu")
    space = mm.search_space(m, 80, 96)
    assert space[0] == mm.default_config(m, 80, 96)
    for cfg in space:
        got = mm.matmul(a, b, bias=tl.ones(80, device="cpu"), activation="relu",
                        out_dtype="float32", config=cfg)
        check(got, want, 1e-5)


def test_empty_results_need_no_launch():
    plan = mm.plan_matmul(_cpu((0, 8)), _cpu((8, 5)))
    assert plan.launches == [] and plan.run().shape == (0, 5)
    assert mm.bmm(_cpu((2, 3, 8)), _cpu((8, 0))).shape == (2, 3, 0)


def test_default_config_choices():
    assert mm.default_config(8192, 8192, 8192) == MatmulConfig(tm=128, tn=128, tk=64,
                                                               schedule="persistent")
    assert (mm.default_config(128, 4096, 4096).tm, mm.default_config(128, 4096, 4096).tn) \
        == (64, 64)                                              # 32 tiles of 128: skinny
    assert mm.default_config(128, 12288, 4096).schedule == "persistent"
    # big 16-bit GEMMs (>= 6400 tiles of 128x128, K >= 8192): warp-specialized 128x256
    ws = MatmulConfig(tm=128, tn=256, tk=64, schedule="persistent", group_m=4,
                      num_worker_warps=8)
    assert mm.default_config(10240, 10240, 10240) == ws
    assert mm.default_config(16384, 16384, 8192, "float16") == ws
    for small in ((8192, 8192, 8192), (16384, 12288, 4096), (8192, 8192, 16384)):
        assert mm.default_config(*small).num_worker_warps is None, small
    assert mm.default_config(16384, 16384, 16384, "float32").tn == 128
    assert mm.default_config(16384, 16384, 16384, "float8_e4m3fn").tn == 128
    assert all(c.num_worker_warps is None for c in mm.search_space(16384, 16384, 16384)
               if c.tn == 128 and c.tm == 128)
    assert mm.default_config(8192, 8192, 8192, "float8_e4m3fn").tk == 128
    assert mm.default_config(4096, 4096, 4096, "float32").tk == 32
    assert mm.default_config(48, 4096, 4096).tm == 64
    g = mm.default_config(1, 12288, 4096)
    assert (g.schedule, g.tm, g.tn, g.split_k) == ("gemv", 1, 128, 1)  # wide: one launch
    g = mm.default_config(1, 4096, 4096)                 # neither narrow nor wide: swapped
    assert (g.schedule, g.tm, g.tn, g.tk, g.swap_ab) == ("grouped", 16, 64, 512, True)
    assert mm.default_config(1, 4096, 4096, "float32").schedule == "gemv"
    s = mm.default_config(8, 4096, 4096)
    assert (s.schedule, s.tm, s.tn, s.split_k, s.swap_ab) == ("grouped", 16, 64, 1, True)
    assert mm.default_config(8, 16384, 64).schedule == "grouped"
    # split-K stays in the search space of skinny problems
    assert any(c.split_k > 1 for c in mm.search_space(8, 4096, 4096))


@pytest.mark.parametrize("kwargs,msg", [
    ({"tm": 96}, "powers of two"), ({"schedule": "fancy"}, "choose one of"),
    ({"group_m": 0}, "positive int"), ({"split_k": 0}, "positive int"),
    ({"latency": 11}, "latency hint"), ({"occupancy": 0}, "1..32"),
    ({"num_ctas": 3}, "power of"), ({"num_blocks": 0}, "num_blocks"),
    ({"num_worker_warps": 12}, "num_worker_warps=12 must be a power of two up to 32"),
    ({"schedule": "gemv"}, "tm=1"), ({"swap_ab": 1}, "swap_ab=1 must be a bool"),
    ({"tm": 1, "schedule": "gemv", "swap_ab": True}, "CUDA cores")])
def test_config_validation(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        MatmulConfig(**kwargs)


def _cpu(shape, dtype="bfloat16"):
    return tl.zeros(shape, dtype, device="cpu")


@pytest.mark.parametrize("call,exc,msg", [
    (lambda: mm.matmul(_cpu((4, 5)), _cpu((6, 3))), ValueError, "inner dimensions"),
    (lambda: mm.matmul(_cpu((4, 5)), _cpu((5, 3), "float16")), TypeError, "cast one"),
    (lambda: mm.matmul(_cpu((4, 5), "float8_e4m3fn"), _cpu((5, 3), "float8_e5m2")),
     TypeError, "fp8 kinds included"),
    (lambda: mm.matmul(_cpu((4, 5), "int32"), _cpu((5, 3), "int32")), TypeError,
     "inputs must be"),
    (lambda: mm.matmul(_cpu((2, 4, 5)), _cpu((5, 3))), ValueError, "use bmm"),
    (lambda: mm.matmul(_cpu((4, 5)), _cpu((5, 3)), activation="tanh"), ValueError,
     "activation='tanh'"),
    (lambda: mm.matmul(_cpu((4, 5)), _cpu((5, 3)), bias=_cpu((4,))), ValueError,
     "one value per output column"),
    (lambda: mm.matmul(_cpu((4, 5)), _cpu((5, 3)), residual=_cpu((3, 4))), ValueError,
     "output's shape"),
    (lambda: mm.matmul(_cpu((4, 5)), _cpu((5, 3)), bias=_cpu((3,), "int32")), TypeError,
     "bias must be"),
    (lambda: mm.matmul(_cpu((4, 5)), _cpu((5, 3)), out=_cpu((4, 4))), ValueError,
     "out has shape"),
    (lambda: mm.matmul(_cpu((4, 5)), _cpu((5, 3)), out=_cpu((4, 3)), out_dtype="f32"),
     TypeError, "out_dtype"),
    (lambda: mm.matmul(_cpu((4, 5)), _cpu((5, 3)), out_dtype="int8"), TypeError,
     "not supported"),
    (lambda: mm.matmul(_cpu((4, 0)), _cpu((0, 3))), ValueError, "K = 0"),
    (lambda: mm.matmul(_cpu((4, 5)), _cpu((5, 3)), config={"tm": 64}), TypeError,
     "MatmulConfig"),
    (lambda: mm.matmul(_cpu((4, 5)), _cpu((5, 3)),
                       config=MatmulConfig(tm=1, schedule="gemv")), ValueError, "M == 1"),
    (lambda: mm.matmul("abc", _cpu((5, 3))), TypeError, "a must be"),
    (lambda: mm.bmm(_cpu((2, 4, 5)), _cpu((5, 3)), config=MatmulConfig(swap_ab=True)),
     ValueError, "swap_ab=True is not available for batches"),
    (lambda: mm.gemv(_cpu((4, 5)), _cpu((4,))), ValueError, "x has 4 elements"),
    (lambda: mm.gemv(_cpu((4, 5)), _cpu((5, 1))), ValueError, "(N, K)"),
    (lambda: mm.bmm(_cpu((2, 4, 5)), _cpu((3, 5, 3))), ValueError, "do not match"),
    (lambda: mm.bmm(_cpu((4, 5)), _cpu((5, 3))), ValueError, "(G, M, K)"),
    (lambda: mm.bmm(_cpu((2, 4, 5), "float8_e4m3fn"), _cpu((5, 3), "float8_e4m3fn")),
     TypeError, "fp8 batches"),
    (lambda: mm.bmm(_cpu((2, 4, 5)), _cpu((5, 3)),
                    config=MatmulConfig(schedule="persistent")), ValueError, "batches"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_host_validation(call, exc, msg):
    with pytest.raises(exc, match=re.escape(msg)):
        call()


# ======================================================================================
# Hopper code (compiled for sm_90 without a GPU)


@pytest.mark.parametrize("dtype,kw,mma", [
    ("bfloat16", {}, "HGMMA.64x128x16.F32.BF16"),
    ("bfloat16", {"config": MatmulConfig(schedule="persistent")}, "HGMMA.64x128x16.F32.BF16"),
    ("float8_e4m3fn", {"trans_b": True}, "QGMMA.64x128x32.F32.E4M3.E4M3"),
    ("float32", {}, "HGMMA.64x128x8.F32.TF32"),
], ids=["bf16_grouped", "bf16_persistent", "fp8_k_major", "tf32"])
@pytest.mark.toolchain
def test_sm90_gemm_uses_wgmma_and_tma(dtype, kw, mma):
    """The 8192^3 GEMM spec: warpgroup MMAs (HGMMA, QGMMA for fp8) fed by TMA loads."""
    (art,) = mm.compile_matmul(8192, 8192, 8192, dtype, arch="sm_90", **kw)
    assert mma in mma_ops(art)
    assert remarked(art, "TMA Load") and remarked(art, "Tensor-core SM90")
    if dtype != "float8_e4m3fn":
        assert spills(art) == 0


@pytest.mark.toolchain
def test_sm90_big_gemm_default_is_warp_specialized_without_spills():
    """The big-problem default (128x256 tiles, 8 worker warps): 64x256 warpgroup MMAs
    fed by TMA, no spills."""
    (art,) = mm.compile_matmul(16384, 16384, 16384, "bfloat16", arch="sm_90")
    assert "HGMMA.64x256x16.F32.BF16" in mma_ops(art)
    assert remarked(art, "TMA Load") and spills(art) == 0


@pytest.mark.toolchain
def test_sm90_decode_gemm_uses_tensor_cores():
    """M = 8 runs on the tensor cores: by default as swapped tiles (warpgroup MMAs 64
    weight columns tall, 16 tokens wide), unswapped as 16-row tiles (mma.sync: HMMA),
    in one launch, or in two with split-K."""
    (one,) = mm.compile_matmul(8, 4096, 4096, "bfloat16", bias=True, activation="silu",
                               arch="sm_90")
    assert "HGMMA.64x16x16.F32.BF16" in mma_ops(one)
    cfg = MatmulConfig(tm=16, tn=64, tk=128, schedule="splitk", split_k=4)
    part, red = mm.compile_matmul(8, 4096, 4096, "bfloat16", bias=True,
                                  activation="silu", config=cfg, arch="sm_90")
    assert any(op.startswith("HMMA") for op in mma_ops(part))
    for art in (one, part):
        assert remarked(art, "TMA Load") and spills(art) == 0
    assert spills(red) == 0


@pytest.mark.toolchain
def test_sm90_swapped_decode_tile_is_a_16_wide_warpgroup_mma():
    """The k/v projection at M = 16 (swap_ab): the weight's 64 columns are the MMA's rows
    and the 16 tokens its columns, HGMMA 64x16 fed by TMA, without spills."""
    (art,) = mm.compile_matmul(16, 1024, 4096, "bfloat16", arch="sm_90")
    assert "HGMMA.64x16x16.F32.BF16" in mma_ops(art)
    assert remarked(art, "TMA Load") and spills(art) == 0


# ======================================================================================
# raw cuTile baselines and documentation


def test_raw_baselines_compute_the_same(seed):
    raw = raw_baselines()
    a = rand((70, 50), "bfloat16", seed).numpy()
    b = rand((50, 40), "bfloat16", seed + 1).numpy()
    want = matmul_ref(a, b)
    for swap in (False, True):
        c = np.full((70, 40), np.nan, np.float32)
        grid, kern, args = raw.matmul_launch(c, a, b, 32, 16, 16, 2, swap)
        assert kern is (raw.raw_swap_matmul if swap else raw.raw_matmul)
        assert not tl.interpret(kern, *args, grid=grid).has_races
        check(c, want, 1e-5)
    c = np.full((70, 40), np.nan, np.float32)
    grid, kern, args = raw.persistent_matmul_launch(c, a, b, 3, 32, 16, 16, 2)
    tl.interpret(kern, *args, grid=grid)
    check(c, want, 1e-5)
    a3, b3 = np.stack([a[:20]] * 2), np.stack([b] * 2)
    c3 = np.full((2, 20, 40), np.nan, np.float32)
    grid, kern, args = raw.batched_matmul_launch(c3, a3, b3, 16, 16, 16, 2)
    tl.interpret(kern, *args, grid=grid)
    check(c3, refmod.bmm_ref(a3, b3), 1e-5)
    c1 = np.full((1, 40), np.nan, np.float32)
    grid, kern, args = raw.gemv_launch(c1, a[:1], b, 16, 16)
    tl.interpret(kern, *args, grid=grid)
    check(c1, matmul_ref(a[:1], b), 1e-5)
    c1[:] = np.nan
    grid, kern, args = raw.gemv_launch(c1, a[:1], np.ascontiguousarray(b.T), 16, 16,
                                       trans_b=True)
    tl.interpret(kern, *args, grid=grid)
    check(c1, matmul_ref(a[:1], b), 1e-5)
    c1[:] = np.nan        # the decode GEMV streaming the (N, K) weight's rows (K ragged)
    grid, kern, args = raw.gemv_rows_launch(c1, a[:1], np.ascontiguousarray(b.T), 8, 16)
    assert grid == (5, 1, 1) and kern is raw.raw_gemv_rows
    assert not tl.interpret(kern, *args, grid=grid).has_races
    check(c1, matmul_ref(a[:1], b), 1e-5)


@pytest.mark.parametrize("module", [mm, refmod], ids=lambda m: m.__name__)
def test_doctests(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_public_names_have_examples():
    for name in mm.__all__:
        obj = getattr(mm, name)
        doc = getattr(obj, "__doc__", None) or ""
        if name in ("ACTIVATIONS", "SCHEDULES", "SPLIT_MODES"):
            continue
        assert "Example" in doc, name


@pytest.mark.parametrize("n,k,tn,tk", [(48, 64, 8, 32), (300, 1000, 16, 128),
                                       (37, 515, 4, 256), (5, 16, 8, 16)])
def test_gemv_rows_kernel_epilogue_and_ragged_edges(n, k, tn, tk, seed):
    """The row-panel GEMV (weight stored (N, K)) with bias, activation and residual,
    on sizes that leave partial tiles in N and K."""
    w, x = rand((n, k), "bfloat16", seed), rand((k,), "bfloat16", seed + 1)
    bias, res = rand((n,), "float32", seed + 2), rand((n,), "float32", seed + 3)
    cfg = MatmulConfig(tm=1, tn=tn, tk=tk, schedule="gemv")
    plan = mm.plan_matmul(x, w.T, bias=bias, residual=res, activation="gelu",
                          out_dtype="float32", config=cfg)
    assert [kern.name for kern, _ in plan.launches] == ["gemv_rows_kernel"]
    y = mm.matmul(x, w.T, bias=bias, residual=res, activation="gelu", out_dtype="float32",
                  config=cfg)
    check(y, matmul_ref(x, w.T, bias=bias, residual=res, activation="gelu"), 1e-5)


def test_gemv_rows_default_fills_the_gpu():
    """M = 1 on a transposed weight: one launch, tn rows per block, a block per SM."""
    for n in (1024, 4096, 12288):
        cfg = mm.default_config(1, n, 4096, b_transposed=True, num_sms=132)
        assert cfg.schedule == "gemv" and cfg.split_k == 1 and cfg.occupancy == 2
        assert -(-n // cfg.tn) >= 132 or cfg.tn == 4
    space = mm.search_space(1, 4096, 4096, b_transposed=True)
    assert space[0] == mm.default_config(1, 4096, 4096, b_transposed=True)
    assert len(space) > 10
