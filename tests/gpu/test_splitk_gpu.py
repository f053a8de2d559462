"""One-launch (atomic) split-K GEMM on the GPU: numbers against torch on fresh random
data, the self-cleaning workspace across many back-to-back launches, and graph replay."""
from __future__ import annotations

import pytest

import tilelab as tl
from tilelab.kernels._host import workspace
from tilelab.kernels.matmul import MatmulConfig, matmul

torch = pytest.importorskip("torch")

CASES = [
    # (m, n, k, config): the Qwen3-8B k/v projection at decode and prefill sizes, and an
    # edge case (no dimension a multiple of its tile, the last K slice shorter)
    (1, 1024, 4096, MatmulConfig(tm=1, tn=64, tk=128, schedule="gemv", split_k=8,
                                 split_mode="atomic")),
    (16, 1024, 4096, MatmulConfig(tm=16, tn=64, tk=128, schedule="splitk", split_k=4,
                                  split_mode="atomic")),
    (128, 1024, 4096, MatmulConfig(tm=64, tn=64, tk=64, schedule="splitk", split_k=4,
                                   split_mode="atomic")),
    (100, 300, 1000, MatmulConfig(tm=64, tn=64, tk=64, schedule="splitk", split_k=3,
                                  split_mode="atomic")),
]


def _data(m, n, k, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16, generator=g)
    return a, b


def _rel(x, ref):
    return float((x.float() - ref.float()).norm() / ref.float().norm())


def _clean(m, n, cfg):
    tm = 1 if cfg.schedule == "gemv" else cfg.tm
    tiles = -(-m // tm) * -(-n // cfg.tn)
    ws = workspace("cuda:0", (m, n), "float32")
    count = workspace("cuda:0", (tiles,), "int32")
    return not torch.from_dlpack(ws).any() and not torch.from_dlpack(count).any()


@pytest.mark.parametrize("m,n,k,cfg", CASES)
def test_matches_torch_and_leaves_the_workspace_clean(m, n, k, cfg):
    a, b = _data(m, n, k, seed=m + n)
    ref = torch.matmul(a.float(), b.float())
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    matmul(a, b, out=out, config=cfg)
    assert _rel(out, ref) < 1e-2
    assert _clean(m, n, cfg)


@pytest.mark.parametrize("m,n,k,cfg", CASES[:3])
def test_many_back_to_back_launches(m, n, k, cfg):
    """200 async launches on one stream, fresh inputs each 50: every result is exact
    to bf16 and the workspace is clean at the end (a missed reset would accumulate)."""
    out = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
    for round_ in range(4):
        a, b = _data(m, n, k, seed=100 + round_)
        ref = torch.matmul(a.float(), b.float())
        for _ in range(50):
            matmul(a, b, out=out, config=cfg, sync=False)
        tl.synchronize()
        assert _rel(out, ref) < 1e-2, round_
    assert _clean(m, n, cfg)


def test_graph_replay_reuses_the_workspace():
    m, n, k, cfg = CASES[2]
    a, b = _data(m, n, k, seed=7)
    out = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
    ta, tb, tout = tl.from_dlpack(a), tl.from_dlpack(b), tl.from_dlpack(out)
    matmul(ta, tb, out=tout, config=cfg)          # makes the workspace outside the capture
    with tl.graph() as g:
        matmul(ta, tb, out=tout, config=cfg, sync=False)
    for _ in range(5):
        g.replay().wait()
    assert _rel(out, torch.matmul(a.float(), b.float())) < 1e-2
    assert _clean(m, n, cfg)


def test_repeated_call_takes_the_prepared_path():
    """The kernel is bound to its grid, so a repeated call (same tensors: the library
    caches the call's launches) reuses one prepared launch."""
    from tilelab.kernels.matmul import plan_matmul

    m, n, k, cfg = CASES[1]
    a, b = _data(m, n, k, seed=3)
    ta, tb = tl.from_dlpack(a), tl.from_dlpack(b)
    out = tl.empty((m, n), "bfloat16")
    (kern, _), = plan_matmul(ta, tb, out=out, config=cfg).launches
    kern._launcher._fast.clear()
    for _ in range(3):
        matmul(ta, tb, out=out, config=cfg)
    assert kern.fixed_grid is not None and len(kern._launcher._fast) == 1
    assert _rel(torch.from_dlpack(out), torch.matmul(a.float(), b.float())) < 1e-2
