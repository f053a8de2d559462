"""Split-K in one launch (``split_mode="atomic"``) on the CPU interpreter.

``splitk_atomic_kernel`` is the library's one ``unsafe=True`` GEMM: the K slices of a tile
add into a shared fp32 workspace with atomics and the last slice to arrive writes the
tile. These tests check its numbers against float64 references, that the workspace and
the arrival counters are all zeros again after every launch (the next launch relies on
it), that the race detector finds no race in any block order, and that it compiles for
sm_90 with tensor-core MMAs.
"""
from __future__ import annotations

import importlib

import pytest

import tilelab as tl
from kernel_checks import check, mma_ops, spills
from support.data import rand_tensor as rand
from tilelab.kernels._host import has_workspace, workspace
from tilelab.kernels.reference.matmul import matmul_ref

mm = importlib.import_module("tilelab.kernels.matmul.host")
MatmulConfig = mm.MatmulConfig

ATOMIC = MatmulConfig(tm=16, tn=32, tk=16, schedule="splitk", split_k=3,
                      split_mode="atomic")
ATOMIC_GEMV = MatmulConfig(tm=1, tn=16, tk=16, schedule="gemv", split_k=4,
                           split_mode="atomic")


def _workspaces_clean(m: int, n: int, tiles: int) -> bool:
    ws = workspace("cpu", (m, n), "float32").numpy()
    count = workspace("cpu", (tiles,), "int32").numpy()
    return not ws.any() and not count.any()


@pytest.mark.parametrize("m,n,k,cfg", [
    (5, 40, 96, ATOMIC),            # edge tiles in M and N, 6 K tiles in 3 slices
    (33, 64, 80, ATOMIC),           # 5 K tiles: slices of 2, 2 and 1
    (1, 50, 128, ATOMIC_GEMV),      # M = 1: the CUDA-core GEMV loop per slice
])
def test_atomic_split_k_matches_the_reference(m, n, k, cfg, seed):
    a, b = rand((m, k), seed=seed), rand((k, n), seed=seed + 1)
    plan = mm.plan_matmul(a, b, config=cfg)
    assert [kern.name for kern, _ in plan.launches] == ["splitk_atomic_kernel"]
    kern, _ = plan.launches[0]
    tm = 1 if cfg.schedule == "gemv" else cfg.tm
    tiles = -(-m // tm) * -(-n // cfg.tn)
    k_tiles = -(-k // cfg.tk)
    splits = -(-k_tiles // -(-k_tiles // cfg.split_k))
    assert kern.fixed_grid == (splits, -(-m // tm), -(-n // cfg.tn))
    for _ in range(2):              # the second call finds the workspace clean again
        c = plan.run()
        check(c, matmul_ref(a, b), 1e-2)
        assert _workspaces_clean(m, n, tiles)


def test_epilogue_runs_once_on_the_sum(seed):
    """Bias, activation, alpha and the residual apply to the whole sum, not per slice."""
    a, b = rand((20, 64), seed=seed), rand((64, 48), seed=seed + 1)
    bias, res = rand((48,), "float32", seed + 2), rand((20, 48), "float32", seed + 3)
    c = mm.matmul(a, b, bias=bias, residual=res, activation="gelu", scale_a=0.5,
                  out_dtype="float32", config=ATOMIC)
    check(c, matmul_ref(a, b, bias=bias, residual=res, activation="gelu", alpha=0.5),
          1e-5)


def test_no_races_in_any_block_order(seed):
    a, b = rand((20, 64), seed=seed), rand((64, 40), seed=seed + 1)
    plan = mm.plan_matmul(a, b, out_dtype="float32", config=ATOMIC)
    (kern, args), = plan.launches
    assert kern.options.unsafe
    for order_seed in range(3):
        trace = tl.interpret(kern, *args, order="shuffled", seed=seed + order_seed)
        assert not trace.has_races, trace.races
        check(plan.out, matmul_ref(a, b), 1e-5)
        atomics = {arg for block in trace.blocks for arg in block.atomics}
        writes = {arg for block in trace.blocks for arg in block.writes}
        assert atomics == {"ws", "count"} and writes == {"c", "ws"}   # ws: reset to 0


def test_prepared_call_is_cached_with_its_workspace(seed):
    """The workspace is clean between launches, so a call with ``out=`` is cached."""
    from tilelab.kernels._host import cache_info

    a, b = rand((8, 64), seed=seed), rand((64, 32), seed=seed + 1)
    out = tl.empty((8, 32), "bfloat16", device="cpu")
    before = cache_info()["calls"]["matmul"]["hits"]
    for _ in range(3):
        mm.matmul(a, b, out=out, config=ATOMIC)
    assert cache_info()["calls"]["matmul"]["hits"] == before + 2
    check(out, matmul_ref(a, b), 1e-2)


def test_split_mode_is_checked():
    with pytest.raises(ValueError, match="split_mode='tree': choose one of launch, atomic"):
        MatmulConfig(split_mode="tree")


def test_graph_capture_without_workspace_falls_back():
    """Inside a capture no workspace can be allocated: the default config drops split-K."""
    from tilelab.runtime.graph_capture import set_current_graph

    m, n = 3, 24
    assert not has_workspace("cpu", (m, n), "float32")
    cfg = MatmulConfig(tm=16, tn=16, tk=16, schedule="splitk", split_k=2,
                       split_mode="atomic")
    assert mm._workspace_ready("cpu", m, n, cfg)                  # no capture: ready
    set_current_graph(object())
    try:
        assert not mm._workspace_ready("cpu", m, n, cfg)
    finally:
        set_current_graph(None)


@pytest.mark.toolchain
def test_atomic_split_k_compiles_for_hopper():
    arts = mm.compile_matmul(128, 1024, 4096, "bf16", config=MatmulConfig(
        tm=64, tn=64, tk=64, schedule="splitk", split_k=4, split_mode="atomic"))
    assert len(arts) == 1 and spills(arts[0]) == 0
    assert any(op.startswith("HGMMA") for op in mma_ops(arts[0]))
    assert "RED" in arts[0].sass and "ATOM" in arts[0].sass


def test_hinted_copies_stay_unsafe(seed):
    """A cuTile hint (occupancy) makes a copy of the kernel that keeps unsafe=True."""
    cfg = ATOMIC.with_(occupancy=2)
    a, b = rand((5, 64), seed=seed), rand((64, 40), seed=seed + 1)
    plan = mm.plan_matmul(a, b, config=cfg)
    (kern, _), = plan.launches
    assert kern.options.unsafe and kern.options.occupancy == 2
    check(plan.run(), matmul_ref(a, b), 1e-2)


def test_atomic_gemv_refuses_an_occupancy_hint():
    """It hung the H200 (tileiras 13.4) with occupancy 2 or 4: refused with a reason."""
    with pytest.raises(ValueError, match=r"takes no occupancy hint \(got occupancy=2\): "
                                         r"with one it hung the H200"):
        ATOMIC_GEMV.with_(occupancy=2)
    assert ATOMIC.with_(occupancy=2).occupancy == 2        # 16-row tiles ran correctly
