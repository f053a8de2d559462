"""Runtime benchmark (issue: GPU runtime): bandwidth, safety overhead, launch overhead,
graph replay and GEMM, each next to its baseline timed in the same process.

Run on a GPU machine:  python benchmarks/runtime_bench.py --out results.json
Every figure is a median of CUDA-event timings after warm-up, on fresh random data,
after a correctness check against a reference.
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tilelab as tl  # noqa: E402
from tilelab.kernels.examples import gemm, vector_add  # noqa: E402


def env_info() -> dict:
    import importlib.metadata as md

    from tilelab.compiler.toolchain import find_toolchain
    from tilelab.runtime.device import gpu

    g = gpu()
    vers = {}
    for pkg in ("tilelab", "cuda-tile", "cuda-core", "cuda-bindings", "torch", "cupy-cuda13x",
                "numpy"):
        try:
            vers[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            vers[pkg] = None
    vers["tilelab"] = tl.__version__
    return {"gpu": g.name, "arch": g.arch, "sms": g.num_sms, "l2_bytes": g.l2_bytes,
            "driver_cuda": g.driver_version, "toolchain": find_toolchain().describe(),
            "python": platform.python_version(), "versions": vers,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def torch_on_tilelab_stream():
    import torch

    from tilelab.runtime.device import gpu

    torch.cuda.set_stream(torch.cuda.ExternalStream(gpu().stream_handle))
    return torch


def rel_err(out, ref) -> float:
    out = np.asarray(out, np.float64)
    ref = np.asarray(ref, np.float64)
    if np.isnan(out).any():
        return float("inf")
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


def bw(nbytes: float, seconds: float) -> float:
    return nbytes / seconds / 1e12


# ---------------------------------------------------------------------------------------
def bench_ceilings(torch, res: dict) -> None:
    n = 1 << 30  # 1 GiB per buffer
    a = torch.empty(n, dtype=torch.uint8, device="cuda").random_(0, 255)
    b = torch.empty_like(a)
    r = tl.bench(lambda: b.copy_(a), rep=20, warmup=5, name="device copy")
    res["copy_TBps"] = bw(2 * n, r.median)
    m = 8192
    x = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    r = tl.bench(lambda: torch.matmul(x, y), rep=20, warmup=5, name="torch bf16 gemm")
    res["torch_gemm_8192_TFLOPs"] = 2 * m ** 3 / r.median / 1e12


def bench_elementwise(torch, res: dict, n: int, tiles: list[int]) -> None:
    from raw_kernels import raw_add
    import cuda.tile as ct

    out = {}
    for dt in ("float32", "bfloat16"):
        tdt = torch.float32 if dt == "float32" else torch.bfloat16
        x = torch.randn(n, device="cuda", dtype=tdt)
        y = torch.randn(n, device="cuda", dtype=tdt)
        z = torch.empty_like(x)
        nbytes = 3 * n * x.element_size()
        torch.add(x, y, out=z)
        ref = torch.add(x, y)   # the reference rounds to the output dtype, as the kernel
        rows = {}
        r = tl.bench(lambda: torch.add(x, y, out=z), rep=20, warmup=5, name="torch.add")
        rows["torch"] = bw(nbytes, r.median)
        tz = tl.from_dlpack(z)
        for tile in tiles:
            z.fill_(float("nan"))
            zp = tz.partition(tile)
            vector_add(zp, x, y)
            err = float((z.float() - ref.float()).norm() / ref.float().norm())
            assert err < 1e-6, (dt, tile, err)
            tx, ty = tl.from_dlpack(x), tl.from_dlpack(y)
            r1 = tl.bench(lambda: vector_add.launch_async(zp, tx, ty), rep=20, warmup=5)
            s = torch.cuda.current_stream()
            grid = ((n + tile - 1) // tile, 1, 1)
            ct.launch(s, grid, raw_add, (z, x, y, tile))
            r2 = tl.bench(lambda: ct.launch(s, grid, raw_add, (z, x, y, tile)), rep=20,
                          warmup=5)
            r3 = tl.bench(lambda: vector_add.launch_async(zp, tx, ty), rep=20, warmup=5)
            rows[f"safe_tile{tile}"] = bw(nbytes, r1.median)
            rows[f"safe_again_tile{tile}"] = bw(nbytes, r3.median)
            rows[f"raw_tile{tile}"] = bw(nbytes, r2.median)
        out[dt] = rows
    res["elementwise_add_TBps"] = out
    res["elementwise_n"] = n


def bench_launch_overhead(torch, res: dict) -> None:
    from cuda.core import LaunchConfig, launch as cu_launch

    from tilelab.runtime.device import gpu

    g = gpu()
    s = g.stream
    x = tl.randn(1024, device="cuda")
    y = tl.randn(1024, device="cuda")
    z = tl.empty(1024, device="cuda")
    zp = z.partition(1024)
    vector_add(zp, x, y)
    L = vector_add._launcher
    norm, dev = L.prepare((zp, x, y))
    plan = L.plan(norm, dev)
    words = L.words(plan, norm)
    config = LaunchConfig(grid=L.grid_for(plan, None), block=(1, 1, 1))
    k = plan.cu_kernel
    N = 2000

    def per_call(fn, sync_each=False):
        samples = []
        for _ in range(7):
            s.sync()
            t0 = time.perf_counter()
            for _ in range(N):
                fn()
                if sync_each:
                    s.sync()
            t1 = time.perf_counter()
            s.sync()
            samples.append((t1 - t0) / N)
        return statistics.median(samples)

    out = res["launch_overhead"] = {}
    from cuda.bindings import driver

    from tilelab.runtime.launch import _pack_params

    packed = _pack_params(plan, norm)
    sh = s.handle
    gx, gy, gz = L.grid_for(plan, None)
    out["bare_async_us"] = per_call(lambda: cu_launch(s, config, k, *words)) * 1e6
    out["driver_async_us"] = per_call(lambda: driver.cuLaunchKernel(
        k.handle, gx, gy, gz, 1, 1, 1, 0, sh, packed[0], 0)) * 1e6
    kh, shi = int(k.handle), int(sh)
    try:
        out["driver_int_async_us"] = per_call(lambda: driver.cuLaunchKernel(
            kh, gx, gy, gz, 1, 1, 1, 0, shi, packed[0], 0)) * 1e6
    except Exception as e:
        out["driver_int_error"] = repr(e)
    import ctypes
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
        fn = libcuda.cuLaunchKernel
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
        assert fn(kh, gx, gy, gz, 1, 1, 1, 0, shi, packed[0], None) == 0
        s.sync()
        out["ctypes_async_us"] = per_call(
            lambda: fn(kh, gx, gy, gz, 1, 1, 1, 0, shi, packed[0], None)) * 1e6
    except Exception as e:
        out["ctypes_error"] = repr(e)
    from tilelab.runtime import native

    nat = native.load()
    out["native_status"] = native.status()
    if nat is not None:   # the native module's call alone (what a prepared launch makes)
        cap = nat.prepare(kh, gx, gy, gz, shi, packed[0])
        out["native_async_us"] = per_call(lambda: nat.launch(cap)) * 1e6
    out["bare_sync_us"] = per_call(lambda: cu_launch(s, config, k, *words), True) * 1e6
    out["safe_sync_us"] = per_call(lambda: vector_add(zp, x, y)) * 1e6
    futs = []

    def async_call():
        futs.append(vector_add.launch_async(zp, x, y))

    out["safe_async_us"] = per_call(async_call) * 1e6
    for f in futs:
        f.wait()
    futs.clear()
    # the same launch with its future dropped at once, and with only the last one kept
    out["safe_async_drop_us"] = per_call(lambda: vector_add.launch_async(zp, x, y)) * 1e6
    tl.synchronize()
    last = [None]

    def keep_last():
        last[0] = vector_add.launch_async(zp, x, y)

    out["safe_async_keep_last_us"] = per_call(keep_last) * 1e6
    last[0].wait()
    out["ratio_sync"] = out["safe_sync_us"] / out["bare_sync_us"]
    out["ratio_async"] = out["safe_async_us"] / out["bare_async_us"]
    out["ratio_async_drop"] = out["safe_async_drop_us"] / out["bare_async_us"]
    out["ratio_async_keep_last"] = out["safe_async_keep_last_us"] / out["bare_async_us"]
    out["safe_sync_inline_partition_us"] = per_call(
        lambda: vector_add(z.partition(1024), x, y)) * 1e6
    out["interleaved"] = _launch_interleaved(s, config, k, words, zp, x, y, nat)
    # graph replay of 100 small launches
    with tl.graph() as gr:
        for _ in range(100):
            vector_add(zp, x, y)
    gr.replay().wait()
    r = tl.bench(lambda: gr.replay(), rep=30, warmup=5, flush_l2=False)
    out["graph_replay_device_us_per_kernel"] = r.median * 1e6 / 100
    out["graph_replay_host_us_per_replay"] = r.host_median * 1e6
    outs = [tl.empty(1024, device="cuda") for _ in range(100)]
    with tl.graph() as gi:   # 100 launches with disjoint outputs: parallel graph branches
        for o in outs:
            vector_add(o.partition(1024), x, y)
    gi.replay().wait()
    assert all(np.allclose(o.numpy(), x.numpy() + y.numpy()) for o in outs[:3])
    r = tl.bench(lambda: gi.replay(), rep=30, warmup=5, flush_l2=False)
    out["graph_independent_device_us_per_kernel"] = r.median * 1e6 / 100
    r = tl.bench(lambda: cu_launch(s, config, k, *words), rep=30, warmup=5, inner=100,
                 flush_l2=False)
    out["stream_launch_device_us_per_kernel"] = r.median * 1e6
    # the baseline for graph replay: torch's CUDA graph of 100 dependent adds of the
    # same size (each writes the output the next one overwrites)
    tx, ty = (torch.randn(1024, device="cuda") for _ in range(2))
    tz = torch.empty_like(tx)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.add(tx, ty, out=tz)
    torch.cuda.synchronize()
    tg = torch.cuda.CUDAGraph()
    with torch.cuda.graph(tg):
        for _ in range(100):
            torch.add(tx, ty, out=tz)
    tg.replay()
    torch.cuda.synchronize()
    assert torch.equal(tz, tx + ty)
    r = tl.bench(lambda: tg.replay(), rep=30, warmup=5, flush_l2=False)
    out["torch_graph_chain_device_us_per_kernel"] = r.median * 1e6 / 100
    # and the same cuTile kernel written raw, launched with ct.launch into a torch graph:
    # what the chain costs without tilelab (the kernel, not the graph, sets the pace)
    from raw_kernels import raw_add
    import cuda.tile as ct

    rz = torch.empty_like(tx)
    with torch.cuda.stream(side):
        ct.launch(side, (1, 1, 1), raw_add, (rz, tx, ty, 1024))
    torch.cuda.synchronize()
    rg = torch.cuda.CUDAGraph()
    with torch.cuda.graph(rg):
        cap = torch.cuda.current_stream()
        for _ in range(100):
            ct.launch(cap, (1, 1, 1), raw_add, (rz, tx, ty, 1024))
    rz.fill_(float("nan"))
    rg.replay()
    torch.cuda.synchronize()
    assert torch.equal(rz, tx + ty)
    r = tl.bench(lambda: rg.replay(), rep=30, warmup=5, flush_l2=False)
    out["raw_cutile_graph_chain_device_us_per_kernel"] = r.median * 1e6 / 100
    r = tl.bench(lambda: gr.replay(), rep=30, warmup=5, flush_l2=False)
    out["graph_replay_again_device_us_per_kernel"] = r.median * 1e6 / 100
    tl.synchronize()


def _launch_interleaved(s, config, k, words, zp, x, y, nat, n: int = 500,
                        rounds: int = 21) -> dict:
    """Host time per launch in loops of ``n``, the variants interleaved round by round
    (medians over ``rounds``), each loop starting from an idle GPU.

    Why next to the 2000-launch loops above: this kernel's launch-to-launch time on the
    GPU (5-7 us there) is about the host's launch time, so 2000 back-to-back launches can
    fill the driver's launch queue, and the loop then runs at the GPU's pace; which
    variant hits that first depends on the run (a faster host path hits it sooner). 500
    launches stay below it, so this times the host.
    """
    from cuda.core import launch as cu_launch

    futs: list = []
    last = [None]

    def keep_all():
        futs.append(vector_add.launch_async(zp, x, y))

    def keep_last():
        last[0] = vector_add.launch_async(zp, x, y)

    variants = {"bare_async": lambda: cu_launch(s, config, k, *words),
                "safe_async_drop": lambda: vector_add.launch_async(zp, x, y),
                "safe_async_keep_last": keep_last,
                "safe_async_keep_all": keep_all}
    if nat is not None:
        cap = vector_add._launcher._fast[hash((zp, x, y))].native
        variants["native_call"] = lambda: nat.launch(cap)
    per: dict[str, list[float]] = {v: [] for v in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            tl.synchronize()
            futs.clear()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            per[name].append((time.perf_counter() - t0) / n * 1e6)
    tl.synchronize()
    futs.clear()
    out = {f"{v}_us": statistics.median(t) for v, t in per.items()}
    for v in ("safe_async_drop", "safe_async_keep_last", "safe_async_keep_all"):
        out[f"ratio_{v.removeprefix('safe_')}"] = out[f"{v}_us"] / out["bare_async_us"]
    out["launches_per_loop"] = n
    out["rounds"] = rounds
    return out


def bench_gemm(torch, res: dict, m: int, rounds: int = 3) -> None:
    """Safe GEMM (row-major and grouped) vs the same kernel through raw ct.launch vs
    cuBLAS, measured in interleaved rounds (median of the rounds' medians)."""
    from raw_kernels import raw_gemm
    import cuda.tile as ct

    a = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(m, m, device="cuda", dtype=torch.bfloat16)
    ref = torch.matmul(a, b).float()
    flops = 2 * m ** 3
    tc, ta, tb = tl.from_dlpack(c), tl.from_dlpack(a), tl.from_dlpack(b)
    s = torch.cuda.current_stream()
    grid = (m // 128, m // 128, 1)
    variants = {
        "torch": lambda: torch.matmul(a, b, out=c),
        "safe_rowmajor": lambda: gemm.launch_async(tc.partition((128, 128)), ta, tb, 64),
        "safe_grouped8": lambda: gemm.launch_async(
            tc.partition((128, 128), schedule=tl.grouped(8)), ta, tb, 64),
        "raw_cutile": lambda: ct.launch(s, grid, raw_gemm, (c, a, b, 128, 128, 64)),
    }
    for name, fn in variants.items():   # correctness first, on poisoned output
        c.fill_(float("nan"))
        fn()
        tl.synchronize()
        err = float((c.float() - ref).norm() / ref.norm())
        assert err < 1e-2, (name, err)
    per: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            r = tl.bench(fn, rep=15, warmup=3)
            per[name].append(flops / r.median / 1e12)
    out = {f"{k}_TFLOPs": statistics.median(v) for k, v in per.items()}
    out["rounds"] = per
    out["safe_vs_raw"] = out["safe_rowmajor_TFLOPs"] / out["raw_cutile_TFLOPs"]
    out["grouped_vs_torch"] = out["safe_grouped8_TFLOPs"] / out["torch_TFLOPs"]
    res[f"gemm_bf16_{m}"] = out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="runtime_bench.json")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="ceilings,elementwise,launch,gemm")
    ns = ap.parse_args()
    torch = torch_on_tilelab_stream()
    res = {"env": env_info()}
    only = ns.only.split(",")
    steps = [("ceilings", lambda: bench_ceilings(torch, res)),
             ("elementwise", lambda: bench_elementwise(
                 torch, res, 1 << (24 if ns.quick else 28),
                 [1024, 4096] if ns.quick else [1024, 2048, 4096, 8192, 16384])),
             ("launch", lambda: bench_launch_overhead(torch, res)),
             ("gemm", lambda: bench_gemm(torch, res, 2048 if ns.quick else 8192))]
    for name, fn in steps:
        if name not in only:
            continue
        t0 = time.time()
        try:
            fn()
        except Exception as e:  # keep the other figures; report the failure
            import traceback

            res[f"{name}_error"] = traceback.format_exc()
            print(f"[{name}] FAILED: {e}", flush=True)
        print(f"[{name}] {time.time() - t0:.1f}s", flush=True)
        Path(ns.out).write_text(json.dumps(res, indent=1))
    print(json.dumps({k: v for k, v in res.items() if k != "env"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
