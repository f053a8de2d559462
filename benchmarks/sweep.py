"""Configuration sweep on the GPU: every library kernel of the suite over a wide set of
tiles, schedules and cuTile hints, each timed next to its torch baseline in one process.

Why: the suite (benchmarks/suite.py) times each op with a handful of configurations;
choosing the library's per-shape defaults needs the whole picture. This script compiles
all configurations first, in parallel worker processes (compiling needs no data: the
kernels are specialized on tensor *specs*), so the timed part finds them in the disk
cache; then it checks each configuration against the torch result on a poisoned output
before timing it (L2 flushed before every call, median of ``--rep`` calls).

    python benchmarks/sweep.py --groups gemm,decode,attention,memory --out sweep.json

The JSON keeps, per case, the torch time and every configuration's status, error and
median; ``best`` names the fastest correct one.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import dataclasses
import json
import multiprocessing
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cuda.tile as ct  # noqa: E402

import tilelab as tl  # noqa: E402

QWEN = (("q_proj", 4096, 4096), ("k_proj", 1024, 4096), ("gate_proj", 12288, 4096),
        ("down_proj", 4096, 12288))


# ------------------------------------------------------------------ configuration spaces

#: the persistent schedule's own knobs (``--gemm-set persistent``)
PERSISTENT_SET = [{"tm": 128, "tn": 128, "tk": 64, "schedule": "persistent", **kw} for kw in (
    {}, {"group_m": 4}, {"group_m": 16}, {"group_m": 32},
    {"num_blocks": 264, "occupancy": 2}, {"num_blocks": 264},
    {"latency": 2}, {"latency": 8})]


def splitk_space(m: int, n: int, k: int) -> list[dict]:
    """One-launch (atomic) split-K configurations for skinny and small problems, after
    the current default (``--gemm-set splitk``)."""
    from tilelab.kernels.matmul import default_config

    out = [dataclasses.asdict(default_config(m, n, k))]
    if m == 1:
        for tn in (32, 64, 128):
            for tk in (64, 128, 256):
                for split in (4, 8, 16):
                    out.append(dict(tm=1, tn=tn, tk=tk, schedule="gemv", split_k=split,
                                    split_mode="atomic"))
    elif m <= 16:
        for tn in (32, 64, 128):
            for tk in (64, 128, 256):
                for split in (2, 4, 8):
                    out.append(dict(tm=16, tn=tn, tk=tk, schedule="splitk", split_k=split,
                                    split_mode="atomic"))
    else:
        for tm, tn in ((64, 64), (64, 128), (128, 64), (128, 128)):
            for split in (2, 3, 4, 8):
                out.append(dict(tm=tm, tn=tn, tk=64, schedule="splitk", split_k=split,
                                split_mode="atomic"))
    return out


def occupancy_space(m: int, n: int, k: int) -> list[dict]:
    """Occupancy hints for skinny and small problems (``--gemm-set occupancy``): their
    kernels run one 160-190 KB block per SM by default and are bound by each K step's
    latency, so two to four blocks per SM may hide it."""
    from tilelab.kernels.matmul import default_config

    out = [dataclasses.asdict(default_config(m, n, k))]
    occs = (None, 2, 4)
    if m == 1:
        for tn in (64, 128):
            for occ in occs:
                out.append(dict(tm=1, tn=tn, tk=128, schedule="gemv", occupancy=occ))
        for split in (8, 16):       # (no occupancy hint: see MatmulConfig's check)
            out.append(dict(tm=1, tn=128, tk=128, schedule="gemv", split_k=split,
                            split_mode="atomic"))
    elif m <= 16:
        for tn in (32, 64):
            for tk in (128, 256):
                for occ in occs:
                    out.append(dict(tm=16, tn=tn, tk=tk, schedule="grouped", occupancy=occ))
        for occ in occs:
            out.append(dict(tm=16, tn=64, tk=256, schedule="splitk", split_k=8,
                            split_mode="atomic", occupancy=occ))
    else:
        for tm, tn in ((64, 64), (64, 128), (128, 64)):
            for tk in (64, 128):
                for occ in (None, 2, 3, 4):
                    out.append(dict(tm=tm, tn=tn, tk=tk, schedule="grouped", occupancy=occ))
        for occ in (2, 4):
            out.append(dict(tm=64, tn=64, tk=64, schedule="splitk", split_k=4,
                            split_mode="atomic", occupancy=occ))
    return [dict(c) for c in {tuple(sorted(c.items())): c for c in out}.values()]


def latency_space(m: int, n: int, k: int) -> list[dict]:
    """Load-latency hints with and without two blocks per SM, for skinny problems
    (``--gemm-set latency``): low ones (shallower pipelines, less shared memory) and,
    since sweep 14, high ones (deeper pipelines: more of B in flight)."""
    from tilelab.kernels.matmul import default_config

    base = dataclasses.asdict(default_config(m, n, k))
    out = [base]
    atomic_gemv = base["split_mode"] == "atomic" and base["schedule"] == "gemv"
    for lat in (1, 2, 3, 6, 8, 10):
        for occ in ((None,) if atomic_gemv else (None, 2, 4)):
            out.append(dict(base, latency=lat, occupancy=occ))
    return out


def skinny_space(m: int, n: int, k: int) -> list[dict]:
    """Narrow, deep tiles for skinny problems (``--gemm-set skinny``): a probe
    (skinny_probe_h200_*.json) found 64x32x256 tiles 14% faster than the default 64x64x64
    on the k/v projection at M = 128, so this walks tn 16-64 against tk 128-1024."""
    from tilelab.kernels.matmul import default_config

    out = [dataclasses.asdict(default_config(m, n, k))]
    if m == 1:
        for tn in (16, 32, 64):
            for tk in (256, 512, 1024):
                out.append(dict(tm=1, tn=tn, tk=tk, schedule="gemv"))
        for tn, tk, split in ((32, 256, 4), (32, 256, 8), (64, 256, 8), (32, 512, 4)):
            out.append(dict(tm=1, tn=tn, tk=tk, schedule="gemv", split_k=split,
                            split_mode="atomic"))
        return out
    if m <= 16:   # A padded to 64 rows: tensor-core tiles of 16 x 16 are slow
        for tn, tk in ((16, 256), (32, 256), (16, 512)):
            out.append(dict(tm=64, tn=tn, tk=tk, schedule="grouped"))
        for tm in (16, 64):   # and K split in one launch over those narrow tiles
            for split in (2, 4):
                out.append(dict(tm=tm, tn=32, tk=256, schedule="splitk", split_k=split,
                                split_mode="atomic"))
            out.append(dict(tm=tm, tn=64, tk=256, schedule="splitk", split_k=4,
                            split_mode="atomic"))
    tms = (16,) if m <= 16 else (32, 64, 128)
    for tm in tms:
        for tn in (16, 32, 64):
            for tk in (128, 256, 512):
                if tm * tk + tk * tn <= 64 * 1024:   # at most 128 KB of bf16 per stage
                    out.append(dict(tm=tm, tn=tn, tk=tk, schedule="grouped"))
    return [dict(c) for c in {tuple(sorted(c.items())): c for c in out}.values()]


def deepsplit_space(m: int, n: int, k: int) -> list[dict]:
    """K split 16-32 ways over narrow tiles for skinny problems (``--gemm-set
    deepsplit``): the earlier sets stopped at 8 slices, which leaves the k/v projection
    (N = 1024) at M = 16 with 64-128 blocks on 132 SMs; 16-32 slices give 256-512."""
    from tilelab.kernels.matmul import default_config

    out = [dataclasses.asdict(default_config(m, n, k))]
    if m <= 16:
        for tn in (32, 64, 128):
            for tk in (128, 256):
                for split in (16, 32):
                    if k // (tk * split) < 1:
                        continue
                    for mode in ("atomic", "launch"):
                        out.append(dict(tm=16, tn=tn, tk=tk, schedule="splitk",
                                        split_k=split, split_mode=mode))
    elif m <= 128:
        for tn in (32, 64):
            for tk in (128, 256):
                for split in (4, 8):
                    for mode in ("atomic", "launch"):
                        out.append(dict(tm=64 if m <= 64 else 128, tn=tn, tk=tk,
                                        schedule="splitk", split_k=split, split_mode=mode))
    return out


def deepk_space(m: int, n: int, k: int) -> list[dict]:
    """Tiles 512-1024 deep for skinny problems (``--gemm-set deepk``): the M = 1 GEMV
    keeps 64 blocks x 32 KB of B in flight (16 columns x 1024 rows) and matches cuBLAS on
    the k/v projection, while the M = 16 default (64 x 32 x 256) keeps 32 x 16 KB; the
    earlier sets stopped at 512 rows for tensor-core tiles."""
    from tilelab.kernels.matmul import default_config

    out = [dataclasses.asdict(default_config(m, n, k))]
    if m <= 16:
        for tm in (16, 64):
            for tn in (16, 32):
                for tk in (512, 1024):
                    out.append(dict(tm=tm, tn=tn, tk=tk, schedule="grouped"))
        for tn in (16, 32):
            for split in (2, 4):
                out.append(dict(tm=16, tn=tn, tk=512, schedule="splitk", split_k=split,
                                split_mode="atomic"))
    elif m <= 128:
        for tm in (64, 128):
            for tn, tk in ((16, 512), (16, 1024), (32, 512), (64, 256)):
                out.append(dict(tm=tm, tn=tn, tk=tk, schedule="grouped"))
    return out


def swap_space(m: int, n: int, k: int) -> list[dict]:
    """Tiles computed transposed (``swap_ab``, ``--gemm-set swap``) for M <= 128: B's
    columns fill the MMA's 64 rows, the tokens its columns (16 for M = 1, A's row
    zero-padded); 64-128 wide, 256-512 deep, with and without the latency hint 4, and
    split-K over 2-4 slices."""
    from tilelab.kernels.matmul import default_config

    out = [dataclasses.asdict(default_config(m, n, k))]
    if m <= 128:
        tm = max(16, 1 << (m - 1).bit_length())
        for tn in (64, 128):
            for tk in (256, 512):
                for lat in (None, 4):
                    out.append(dict(tm=tm, tn=tn, tk=tk, latency=lat, swap_ab=True))
        for split in (2, 4):
            out.append(dict(tm=tm, tn=64, tk=256, latency=4, swap_ab=True,
                            schedule="splitk", split_k=split, split_mode="atomic"))
    return out


#: the focused GEMM sets of ``--gemm-set`` (besides "default" and "persistent")
FOCUSED_SETS: dict[str, Callable[[int, int, int], list[dict]]] = {
    "splitk": splitk_space, "occupancy": occupancy_space, "latency": latency_space,
    "skinny": skinny_space, "deepsplit": deepsplit_space, "deepk": deepk_space,
    "swap": swap_space}


def gemm_space(m: int, n: int, k: int, which: str = "default") -> list[dict]:
    """MatmulConfig keyword sets for an (m, k) @ (k, n) problem (B row-major)."""
    if which == "persistent" and m > 128:
        return list(PERSISTENT_SET)
    if which in FOCUSED_SETS:
        return FOCUSED_SETS[which](m, n, k)
    out: list[dict] = []
    if m == 1:
        for tn in (64, 128, 256):
            for tk in (32, 64, 128):
                for split in (1, 4, 8):
                    out.append(dict(tm=1, tn=tn, tk=tk, schedule="gemv", split_k=split))
        return out
    if m <= 16:
        for tn in (32, 64, 128):
            for tk in (64, 128, 256):
                for split in (1, 4, 8):
                    out.append(dict(tm=16, tn=tn, tk=tk, schedule="splitk" if split > 1
                                    else "grouped", split_k=split))
        return out
    if m <= 128:
        for tm in (64, 128):
            for tn in (64, 128, 256):
                out.append(dict(tm=tm, tn=tn, tk=64, schedule="grouped"))
        out += [dict(tm=64, tn=128, tk=128, schedule="grouped"),
                dict(tm=128, tn=128, tk=64, schedule="persistent"),
                dict(tm=64, tn=64, tk=64, schedule="grouped", occupancy=2),
                dict(tm=128, tn=64, tk=64, schedule="splitk", split_k=2),
                dict(tm=64, tn=128, tk=64, schedule="splitk", split_k=4)]
        return out
    # (sweep 1 also timed 128x256 / 256x128 without worker warps (they spill: 10-16x
    # slower), tk 128, latency 4, group_m 16, occupancy 1: none won; see
    # results/sweep_h200_2026-11-30.json)
    out.append({"tm": 128, "tn": 128, "tk": 64, "schedule": "persistent"})
    for tm, tn in ((128, 128), (128, 256), (256, 128)):
        for sched in ("grouped", "persistent"):
            out.append({"tm": tm, "tn": tn, "tk": 64, "schedule": sched,
                        "num_worker_warps": 8})
    out += [{"tm": 128, "tn": 256, "tk": 64, "schedule": "grouped", "num_worker_warps": 8,
             "num_ctas": 2},
            {"tm": 256, "tn": 128, "tk": 64, "schedule": "grouped", "num_worker_warps": 8,
             "num_ctas": 2},
            {"tm": 128, "tn": 256, "tk": 64, "schedule": "persistent",
             "num_worker_warps": 8, "num_ctas": 2},
            {"tm": 128, "tn": 128, "tk": 128, "schedule": "persistent",
             "num_worker_warps": 8},
            {"tm": 128, "tn": 256, "tk": 64, "schedule": "grouped", "num_worker_warps": 8,
             "group_m": 16}]
    return out


def gemv_space(n: int, k: int, which: str = "default") -> list[dict]:
    """Row-panel GEMV configurations (weight stored (N, K)); with ``which="swap"`` the
    default and swapped tensor-core tiles (:func:`swap_space`) instead."""
    if which == "swap":
        from tilelab.kernels.matmul import default_config

        return [dataclasses.asdict(default_config(1, n, k, b_transposed=True))] + \
            swap_space(1, n, k)[1:5]
    out = []
    for tn in (2, 4, 8, 16, 32):
        for tk in (256, 512, 1024):
            out.append(dict(tm=1, tn=tn, tk=tk, schedule="gemv"))
    for tn, tk in ((4, 512), (8, 512), (16, 512)):
        for occ in (2, 4):
            out.append(dict(tm=1, tn=tn, tk=tk, schedule="gemv", occupancy=occ))
        out.append(dict(tm=1, tn=tn, tk=tk, schedule="gemv", latency=8))
    return out


def attention_space() -> list[dict]:
    out = [{"bm": 64, "bn": 128, "occupancy": 2}]
    for bm, bn in ((128, 128), (128, 64), (64, 128), (256, 64), (256, 128), (128, 256)):
        out.append({"bm": bm, "bn": bn, "num_worker_warps": 8})
    for lk, lv in ((2, 4), (4, 4)):
        out.append({"bm": 128, "bn": 128, "num_worker_warps": 8, "latency_k": lk,
                    "latency_v": lv})
    out.append({"bm": 128, "bn": 128, "num_worker_warps": 4})
    # (sweep 15: the middle lengths, 2K-4K keys, trail SDPA most)
    for lat in (2, 4):
        out.append({"bm": 128, "bn": 256, "num_worker_warps": 8, "latency_k": lat,
                    "latency_v": lat})
    out += [{"bm": 64, "bn": 256, "occupancy": 2}, {"bm": 64, "bn": 64, "occupancy": 2},
            {"bm": 64, "bn": 128, "occupancy": 3}]
    return out


#: "_occ" sets the occupancy hint of the op's one-pass row kernel (its entry of
#: tilelab.kernels.elementwise.ROW_HINTS, without the per-arch extras; "default" leaves
#: the library's hints)
MEMORY_SPACES: dict[str, list[dict]] = {
    "add": [{"block_n": b} for b in (None, 512, 1024, 2048, 4096)],
    "softmax": [{"block_m": bm, "block_n": None, "_occ": occ}
                for occ in ("default", None, 2, 4, 8) for bm in (None, 2)]
    + [{"block_m": 1, "block_n": 4096, "_occ": "default"}],
    "rmsnorm": [{"block_m": bm, "block_n": None, "_occ": occ}
                for occ in ("default", None, 2, 4) for bm in (None, 1, 2, 4, 8)],
    "rope": [{"block_t": b} for b in (None, 1, 2)],
}

_OCC_KEY = {"softmax": "softmax", "rmsnorm": "norm"}


def _memory_call(op: str, fn: Callable, cfg: dict) -> Callable:
    """The library call for one memory-bound config (setting the occupancy hint first)."""
    import tilelab.kernels as K
    from tilelab.kernels import elementwise as E

    cfg = dict(cfg)
    occ = cfg.pop("_occ", "default")
    key = _OCC_KEY.get(op)
    if key is not None:
        if not hasattr(_memory_call, "defaults"):
            _memory_call.defaults = (dict(E.ROW_HINTS), {a: dict(h) for a, h in
                                                         E.ROW_HINTS_BY_ARCH.items()})
        hints, by_arch = _memory_call.defaults
        E.ROW_HINTS.clear()
        E.ROW_HINTS.update(hints)
        E.ROW_HINTS_BY_ARCH.clear()
        E.ROW_HINTS_BY_ARCH.update({a: dict(h) for a, h in by_arch.items()})
        if occ != "default":
            E.ROW_HINTS[key] = {} if occ is None else {"occupancy": occ}
            for per_op in E.ROW_HINTS_BY_ARCH.values():
                per_op.pop(key, None)
        K.clear_caches()
    return fn(**cfg)


# ------------------------------------------------------------------ parallel compiles

def _compile_task(task: tuple) -> tuple[str, float, str | None]:
    """Compile one configuration into the shared disk cache (runs in a worker)."""
    t0 = time.perf_counter()
    try:
        kind = task[0]
        if kind == "gemm":
            from tilelab.kernels.matmul import MatmulConfig, compile_matmul

            _, m, n, k, dtype, trans_b, cfg = task
            compile_matmul(m, n, k, dtype, config=MatmulConfig(**cfg), trans_b=trans_b)
        elif kind == "attention":
            from tilelab.kernels.attention import AttentionConfig, compile_attention

            _, b, h, s, d, cfg = task
            compile_attention(b, h, s, d, config=AttentionConfig(**cfg))
        return repr(task), time.perf_counter() - t0, None
    except Exception as e:  # reported; the timed run then shows the failure too
        return repr(task), time.perf_counter() - t0, f"{type(e).__name__}: {e}"


def precompile(tasks: list[tuple], workers: int) -> dict:
    t0 = time.perf_counter()
    errors = {}
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as ex:
        for key, _, err in ex.map(_compile_task, tasks, chunksize=1):
            if err:
                errors[key] = err
    return {"tasks": len(tasks), "workers": workers, "seconds": time.perf_counter() - t0,
            "errors": errors}


# ------------------------------------------------------------------ timing

def rel_err(torch, got, ref) -> float:
    g, r = got.float(), ref.float()
    if not torch.isfinite(g).all():
        return float("inf")
    return float((g - r).norm() / r.norm().clamp_min(1e-30))


def time_configs(torch, tl, case_id: str, torch_fn: Callable, make_call: Callable,
                 configs: list[dict], out, ref, tol: float, rep: int, flops: float,
                 nbytes: float) -> dict:
    """Torch first, then every configuration: correctness on a poisoned output, timing."""
    row: dict[str, Any] = {"id": case_id, "flops": flops, "bytes": nbytes, "configs": []}
    r = tl.bench(torch_fn, rep=rep, warmup=3)
    row["torch_s"] = r.median
    best = None
    for cfg in configs:
        item: dict[str, Any] = {"config": cfg}
        try:
            call = make_call(cfg)
            out.fill_(float("nan"))
            t0 = time.perf_counter()
            call()
            tl.synchronize()
            item["first_call_s"] = time.perf_counter() - t0
            err = rel_err(torch, out, ref)
            item["rel_err"] = err
            if not err <= tol:
                item["status"] = "wrong"
            else:
                r = tl.bench(call, rep=rep, warmup=3)
                item["status"] = "ok"
                item["median_s"] = r.median
                item["vs_torch"] = row["torch_s"] / r.median
                if best is None or r.median < best["median_s"]:
                    best = item
        except Exception as e:
            item["status"] = "error"
            item["error"] = f"{type(e).__name__}: {e}"[:400]
        row["configs"].append(item)
    if best is not None:
        row["best"] = best["config"]
        row["best_s"] = best["median_s"]
        row["best_vs_torch"] = row["torch_s"] / best["median_s"]
    line = (f"{case_id}: torch {row['torch_s'] * 1e6:.1f} us; best "
            f"{row.get('best_s', float('nan')) * 1e6:.1f} us "
            f"({row.get('best_vs_torch', float('nan')):.3f}x) {row.get('best')}")
    print(line, flush=True)
    return row


def run_gemm(torch, tl, ns, res: dict) -> None:
    from tilelab.kernels.matmul import MatmulConfig, matmul

    cases = []
    for dt in ns.gemm_dtypes.split(","):
        for s in ns.squares:
            cases.append((f"gemm/{dt}/square{s}", s, s, s, dt))
    for name, n, k in QWEN:
        if name not in ns.qwen.split(","):
            continue
        for m in ns.qwen_m:
            cases.append((f"gemm/bfloat16/qwen3_{name}_M{m}", m, n, k, "bfloat16"))
    tasks = [("gemm", m, n, k, dt, False, cfg) for _, m, n, k, dt in cases
             for cfg in gemm_space(m, n, k, ns.gemm_set)]
    res["precompile_gemm"] = precompile(tasks, ns.workers)
    print("precompiled gemm", json.dumps(res["precompile_gemm"])[:300], flush=True)
    rows = res.setdefault("gemm", [])
    for cid, m, n, k, dt in cases:
        tdt = getattr(torch, dt)
        a = torch.randn(m, k, device="cuda", dtype=tdt)
        b = torch.randn(k, n, device="cuda", dtype=tdt)
        c = torch.empty(m, n, device="cuda", dtype=tdt)
        ref = torch.matmul(a, b)
        ta, tb, tc = tl.from_dlpack(a), tl.from_dlpack(b), tl.from_dlpack(c)

        def make(cfg, ta=ta, tb=tb, tc=tc):
            mc = MatmulConfig(**cfg)
            return lambda: matmul(ta, tb, out=tc, config=mc, sync=False)
        rows.append(time_configs(torch, tl, cid, lambda a=a, b=b, c=c: torch.matmul(a, b, out=c),
                                 make, gemm_space(m, n, k, ns.gemm_set), c, ref, 2e-2, ns.rep,
                                 2.0 * m * n * k, (m * k + k * n + m * n) * a.element_size()))
        del a, b, c, ref


def run_decode(torch, tl, ns, res: dict) -> None:
    from tilelab.kernels.matmul import MatmulConfig, default_config, gemv

    rows = res.setdefault("decode", [])
    which = "swap" if ns.gemm_set == "swap" else "default"
    tasks = [("gemm", 1, n, k, "bfloat16", True, cfg) for _, n, k in QWEN
             for cfg in gemv_space(n, k, which)]
    res["precompile_decode"] = precompile(tasks, ns.workers)
    for name, n, k in QWEN:
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        x = torch.randn(k, device="cuda", dtype=torch.bfloat16)
        out = torch.empty(n, device="cuda", dtype=torch.bfloat16)
        ref = torch.mv(w, x)
        tw, tx, to = tl.from_dlpack(w), tl.from_dlpack(x), tl.from_dlpack(out)

        def make(cfg, tw=tw, tx=tx, to=to):
            mc = MatmulConfig(**cfg)
            return lambda: gemv(tw, tx, out=to, config=mc, sync=False)
        space = gemv_space(n, k, which)
        d = dataclasses.asdict(default_config(1, n, k, b_transposed=True))
        row = time_configs(torch, tl, f"decode/bfloat16/qwen3_{name}_gemv",
                           lambda w=w, x=x, out=out: torch.mv(w, x, out=out), make, space,
                           out, ref, 2e-2, ns.rep, 2.0 * n * k, (n * k + k + n) * 2)
        row["default"] = {key: d[key] for key in ("tn", "tk")}
        row["best_TBps"] = row["bytes"] / row["best_s"] / 1e12 if "best_s" in row else None
        rows.append(row)


def run_attention(torch, tl, ns, res: dict) -> None:
    from tilelab.kernels.attention import AttentionConfig, attention

    b, h, d = 8, 32, 128
    tasks = [("attention", b, h, s, d, cfg) for s in ns.seqs for cfg in attention_space()]
    res["precompile_attention"] = precompile(tasks, ns.workers)
    rows = res.setdefault("attention", [])
    f = torch.nn.functional.scaled_dot_product_attention
    for s in ns.seqs:
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
                   for _ in range(3))
        o = torch.empty_like(q)
        ref = f(q, k, v)
        tq, tk, tv, to = (tl.from_dlpack(t) for t in (q, k, v, o))

        def make(cfg, tq=tq, tk=tk, tv=tv, to=to):
            ac = AttentionConfig(**cfg)
            return lambda: attention(tq, tk, tv, out=to, config=ac, sync=False)
        rows.append(time_configs(torch, tl, f"attention/bfloat16/b{b}h{h}s{s}d{d}",
                                 lambda q=q, k=k, v=v: f(q, k, v), make, attention_space(),
                                 o, ref, 3e-2, ns.rep, 4.0 * b * h * s * s * d,
                                 4 * q.numel() * 2))
        del q, k, v, o, ref


def softmax_rows_persistent(y: tl.Out, x: tl.In):
    """A candidate for the library: one-pass softmax where each of a fixed set of blocks
    loops over whole rows, so the compiler may overlap one row's loads with the previous
    row's math (the library form gives each block one row)."""
    for t in y.tiles():
        m, n = y.tile_index_of(t)
        v = ct.load(x, index=(m, n), shape=y.tile_shape,
                    padding_mode=ct.PaddingMode.NEG_INF).astype(ct.float32)
        e = ct.exp(v - ct.max(v, axis=1, keepdims=True))
        y.store((e / ct.sum(e, axis=1, keepdims=True)).astype(y.dtype), at=t)


def _persistent_softmax_kernel(occupancy):
    return tl.kernel(occupancy=occupancy)(softmax_rows_persistent)


def run_softmax_persistent(torch, tl, ns, res: dict) -> None:
    from tilelab.runtime.device import gpu

    rows_out = res.setdefault("softmax_persistent", [])
    r, c = 16384, 8192
    x = torch.randn(r, c, device="cuda", dtype=torch.bfloat16) * 2
    o = torch.empty_like(x)
    tx, to = tl.from_dlpack(x), tl.from_dlpack(o)
    sms = gpu().num_sms
    space = [{"occupancy": occ, "blocks_per_sm": b} for occ in (4, None, 2)
             for b in (1, 2, 4, 8)]
    kernels = {}

    def make(cfg):
        occ = cfg["occupancy"]
        k = kernels.get(occ) or kernels.setdefault(occ, _persistent_softmax_kernel(occ))
        part = to.partition((1, c), schedule=tl.persistent(num_blocks=sms * cfg["blocks_per_sm"]))
        return lambda: k.launch_async(part, tx)
    rows_out.append(time_configs(torch, tl, f"softmax_persistent/bfloat16/{r}x{c}",
                                 lambda: torch.softmax(x, -1), make, space, o,
                                 torch.softmax(x.float(), -1), 2e-2, ns.rep, 0,
                                 2 * x.numel() * 2))


def run_memory(torch, tl, ns, res: dict) -> None:
    from tilelab.kernels.elementwise import add
    from tilelab.kernels.norms import rms_norm
    from tilelab.kernels.rope import apply_rope
    from tilelab.kernels.softmax import softmax

    rows = res.setdefault("memory", [])
    bf = torch.bfloat16
    for dt in (torch.float32, bf):
        n = 1 << 28
        x, y = torch.randn(n, device="cuda", dtype=dt), torch.randn(n, device="cuda", dtype=dt)
        z = torch.empty_like(x)
        tx, ty, tz = (tl.from_dlpack(t) for t in (x, y, z))
        rows.append(time_configs(
            torch, tl, f"memory/add/{str(dt)[6:]}/n{n}",
            lambda x=x, y=y, z=z: torch.add(x, y, out=z),
            lambda cfg, tx=tx, ty=ty, tz=tz: (lambda: add(tx, ty, out=tz, sync=False, **cfg)),
            MEMORY_SPACES["add"], z, torch.add(x, y), 1e-2, ns.rep, n, 3 * n * x.element_size()))
        del x, y, z
    r, c = 16384, 8192
    x = torch.randn(r, c, device="cuda", dtype=bf) * 2
    o = torch.empty_like(x)
    tx, to = tl.from_dlpack(x), tl.from_dlpack(o)
    rows.append(time_configs(
        torch, tl, f"memory/softmax/bfloat16/{r}x{c}", lambda: torch.softmax(x, -1),
        lambda cfg: _memory_call("softmax", lambda **kw: (
            lambda: softmax(tx, out=to, sync=False, **kw)), cfg),
        MEMORY_SPACES["softmax"], o, torch.softmax(x.float(), -1), 2e-2, ns.rep, 0,
        2 * x.numel() * 2))
    del x, o
    r, c = 65536, 4096
    x = torch.randn(r, c, device="cuda", dtype=bf)
    w = torch.randn(c, device="cuda", dtype=bf)
    o = torch.empty_like(x)
    tx, tw, to = (tl.from_dlpack(t) for t in (x, w, o))
    ref = torch.nn.functional.rms_norm(x.float(), (c,), w.float(), 1e-6)
    rows.append(time_configs(
        torch, tl, f"memory/rmsnorm/bfloat16/{r}x{c}",
        lambda: torch.nn.functional.rms_norm(x, (c,), w, 1e-6),
        lambda cfg: _memory_call("rmsnorm", lambda **kw: (
            lambda: rms_norm(tx, tw, eps=1e-6, out=to, sync=False, **kw)), cfg),
        MEMORY_SPACES["rmsnorm"], o, ref, 2e-2, ns.rep, 0, 2 * x.numel() * 2))
    del x, o, ref
    t, h, d = 32768, 32, 128
    x = torch.randn(t, h, d, device="cuda", dtype=bf)
    cos = torch.randn(t, d // 2, device="cuda", dtype=bf) * 0.7
    sin = torch.randn(t, d // 2, device="cuda", dtype=bf) * 0.7
    o = torch.empty_like(x)
    half = d // 2

    def rope_torch():
        x1, x2 = x[..., :half], x[..., half:]
        cc, ss = cos[:, None, :], sin[:, None, :]
        return torch.cat([x1 * cc - x2 * ss, x2 * cc + x1 * ss], -1)
    ref = rope_torch()
    tx, tc, ts, to = (tl.from_dlpack(v) for v in (x, cos, sin, o))
    rows.append(time_configs(
        torch, tl, f"memory/rope/bfloat16/{t}x{h}x{d}", rope_torch,
        lambda cfg: (lambda: apply_rope(tx, tc, ts, out=to, sync=False, **cfg)),
        MEMORY_SPACES["rope"], o, ref, 2e-2, ns.rep, 0,
        (2 * x.numel() + 2 * cos.numel()) * 2))
    for row in rows:
        if "best_s" in row:
            row["best_TBps"] = row["bytes"] / row["best_s"] / 1e12
            row["torch_TBps"] = row["bytes"] / row["torch_s"] / 1e12


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--groups", default="memory,decode,gemm,attention")
    ap.add_argument("--out", default="sweep.json")
    ap.add_argument("--rep", type=int, default=10)
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--squares", type=lambda s: [int(x) for x in s.split(",") if x],
                    default=[1024, 2048, 4096, 8192, 16384])
    ap.add_argument("--gemm-dtypes", default="bfloat16,float16")
    ap.add_argument("--gemm-set", choices=("default", "persistent", *FOCUSED_SETS),
                    default="default",
                    help="GEMM configs: the wide set, the persistent schedule's knobs, "
                         "or for skinny and small problems one-launch split-K, occupancy "
                         "hints or low load-latency hints, narrow deep tiles, K split "
                         "16-32 ways, tiles 512-1024 deep, or tiles computed transposed "
                         "(swap_ab)")
    ap.add_argument("--qwen", default="q_proj,k_proj,gate_proj,down_proj",
                    help="Qwen3-8B projections of the GEMM group")
    ap.add_argument("--qwen-m", type=lambda s: [int(x) for x in s.split(",")],
                    default=[1, 16, 128, 2048, 8192])
    ap.add_argument("--seqs", type=lambda s: [int(x) for x in s.split(",")],
                    default=[1024, 4096, 8192])
    ns = ap.parse_args()

    import torch
    from suite_env import env_info

    from tilelab.runtime.device import gpu

    torch.cuda.set_stream(torch.cuda.ExternalStream(gpu().stream_handle))
    torch.manual_seed(0)
    res: dict[str, Any] = {"env": env_info("gpu"), "argv": sys.argv[1:],
                           "method": "tl.bench: CUDA events, L2 flushed before every call, "
                                     f"median of {ns.rep} after 3 warm-up calls; library "
                                     "calls with sync=False into a preallocated out="}
    runners = {"gemm": run_gemm, "decode": run_decode, "attention": run_attention,
               "memory": run_memory, "softmax_persistent": run_softmax_persistent}
    for g in ns.groups.split(","):
        t0 = time.time()
        try:
            runners[g](torch, tl, ns, res)
        except Exception:
            res[f"{g}_error"] = traceback.format_exc()
            print(res[f"{g}_error"], flush=True)
        res[f"{g}_seconds"] = time.time() - t0
        print(f"[{g}] {time.time() - t0:.1f}s", flush=True)
        Path(ns.out).write_text(json.dumps(res, indent=1, default=str))
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
