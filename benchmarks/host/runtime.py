"""The ``runtime`` group: what the runtime costs next to its baselines, in one process.

* **elementwise**: the tour's safe ``vector_add`` (2^28 elements, f32 and bf16, several
  tiles) against ``torch.add`` and the same kernel written raw in cuTile (``ct.launch``);
* **launch**: host time per launch, safe (sync, async with the future kept, dropped or
  the last kept) against a bare ``cuda.core.launch`` of the same cubin, the driver call
  through cuda-bindings, ctypes and the native module; loops of 2000 launches and
  interleaved loops of 500 (which stay below the driver's queue depth);
* **graphs**: CUDA graph replay of 100 small launches (a chain and independent
  branches) against torch's CUDA graph of the same adds and a raw cuTile kernel in a
  torch graph;
* **gemm**: the tour's safe bf16 GEMM (row-major and grouped) against the raw cuTile
  twin and cuBLAS, in interleaved rounds;
* **ceilings**: a 1 GiB device copy and torch's bf16 GEMM, the two ceilings above;
* **scalar_values**: a loop of launches over distinct scalar values (a decode position,
  a step counter) against the same loop over one value: host time ratio, memory growth
  (tracemalloc) and the kernel's table sizes (:func:`bench_scalar_values`).

Every result is checked (a NaN-poisoned output compared with torch) before it is timed.
GPU only (torch CUDA timing): on the CPU backend the group reports itself skipped;
``python -m benchmarks.host.runtime [--n N] [OUT.json]`` runs the scalar-values figures alone
on the current backend, the CPU included.

Example:
    >>> run(Context(backend="cpu"))["status"]
    'skipped'
    >>> bench_scalar_values(n=20, rounds=1)["plans_after"]
    1
"""
from __future__ import annotations

import statistics
import time
import traceback
from dataclasses import dataclass
from typing import Any

import numpy as np

import tilelab as tl
from tilelab.kernels.examples import gemm, vector_add

from ..common import Context

__all__ = ["run"]


def torch_on_tilelab_stream():
    import torch

    from tilelab.runtime.device import gpu

    torch.cuda.set_stream(torch.cuda.ExternalStream(gpu().stream_handle))
    return torch


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
    from ..baselines.raw_kernels import raw_add
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


@dataclass
class _Launch:
    """One prepared vector add of 1024 elements and the pieces a bare launch needs."""

    s: Any
    x: Any
    y: Any
    z: Any
    zp: Any
    config: Any
    k: Any
    words: list
    packed: tuple
    grid: tuple

    def per_call(self, fn, sync_each: bool = False, n: int = 2000) -> float:
        """Median over 7 loops of the host seconds per call of ``n`` calls of ``fn``."""
        samples = []
        for _ in range(7):
            self.s.sync()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
                if sync_each:
                    self.s.sync()
            t1 = time.perf_counter()
            self.s.sync()
            samples.append((t1 - t0) / n)
        return statistics.median(samples)


def _prepare_launch() -> _Launch:
    from cuda.core import LaunchConfig

    from tilelab.runtime.device import gpu
    from tilelab.runtime.launch import _pack_params

    x = tl.randn(1024, device="cuda")
    y = tl.randn(1024, device="cuda")
    z = tl.empty(1024, device="cuda")
    zp = z.partition(1024)
    vector_add(zp, x, y)
    if not np.allclose(z.numpy(), x.numpy() + y.numpy()):
        raise AssertionError("vector_add computed a wrong sum: nothing timed")
    L = vector_add._launcher
    norm, dev = L.prepare((zp, x, y))
    plan = L.plan(norm, dev)
    grid = L.grid_for(plan, None)
    return _Launch(gpu().stream, x, y, z, zp, LaunchConfig(grid=grid, block=(1, 1, 1)),
                   plan.cu_kernel, L.words(plan, norm), _pack_params(plan, norm), grid)


def _driver_calls(st: _Launch, out: dict) -> Any:
    """The bare launch, the driver call (cuda-bindings, ctypes) and the native module's
    call alone; returns the native module (or None)."""
    import ctypes

    from cuda.bindings import driver
    from cuda.core import launch as cu_launch

    from tilelab.runtime import native

    (gx, gy, gz), p = st.grid, st.packed[0]
    kh, shi = int(st.k.handle), int(st.s.handle)
    out["bare_async_us"] = st.per_call(lambda: cu_launch(st.s, st.config, st.k,
                                                         *st.words)) * 1e6
    out["driver_async_us"] = st.per_call(lambda: driver.cuLaunchKernel(
        st.k.handle, gx, gy, gz, 1, 1, 1, 0, st.s.handle, p, 0)) * 1e6
    try:
        out["driver_int_async_us"] = st.per_call(lambda: driver.cuLaunchKernel(
            kh, gx, gy, gz, 1, 1, 1, 0, shi, p, 0)) * 1e6
    except Exception as e:
        out["driver_int_error"] = repr(e)
    try:
        fn = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
        assert fn(kh, gx, gy, gz, 1, 1, 1, 0, shi, p, None) == 0
        st.s.sync()
        out["ctypes_async_us"] = st.per_call(
            lambda: fn(kh, gx, gy, gz, 1, 1, 1, 0, shi, p, None)) * 1e6
    except Exception as e:
        out["ctypes_error"] = repr(e)
    nat = native.load()
    out["native_status"] = native.status()
    if nat is not None:   # the native module's call alone (what a prepared launch makes)
        cap = nat.prepare(kh, gx, gy, gz, shi, p)
        out["native_async_us"] = st.per_call(lambda: nat.launch(cap)) * 1e6
    return nat


def _safe_calls(st: _Launch, out: dict) -> None:
    """Safe sync and async launches (future kept, dropped, last kept) vs the bare ones."""
    from cuda.core import launch as cu_launch

    zp, x, y = st.zp, st.x, st.y
    out["bare_sync_us"] = st.per_call(lambda: cu_launch(st.s, st.config, st.k, *st.words),
                                      True) * 1e6
    out["safe_sync_us"] = st.per_call(lambda: vector_add(zp, x, y)) * 1e6
    futs: list = []
    out["safe_async_us"] = st.per_call(
        lambda: futs.append(vector_add.launch_async(zp, x, y))) * 1e6
    for f in futs:
        f.wait()
    futs.clear()
    out["safe_async_drop_us"] = st.per_call(lambda: vector_add.launch_async(zp, x, y)) * 1e6
    tl.synchronize()
    last = [None]

    def keep_last():
        last[0] = vector_add.launch_async(zp, x, y)

    out["safe_async_keep_last_us"] = st.per_call(keep_last) * 1e6
    last[0].wait()
    for v in ("sync", "async", "async_drop", "async_keep_last"):
        bare = out["bare_sync_us"] if v == "sync" else out["bare_async_us"]
        out[f"ratio_{v}"] = out[f"safe_{v}_us"] / bare
    out["safe_sync_inline_partition_us"] = st.per_call(
        lambda: vector_add(st.z.partition(1024), x, y)) * 1e6


def _tilelab_graphs(st: _Launch, out: dict) -> Any:
    """Replay of 100 small launches: a chain (one output) and independent branches."""
    from cuda.core import launch as cu_launch

    zp, x, y = st.zp, st.x, st.y
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
    r = tl.bench(lambda: cu_launch(st.s, st.config, st.k, *st.words), rep=30, warmup=5,
                 inner=100, flush_l2=False)
    out["stream_launch_device_us_per_kernel"] = r.median * 1e6
    return gr


def _torch_graphs(torch, out: dict) -> None:
    """The baselines of graph replay: torch's CUDA graph of 100 dependent adds of the same
    size, and the same cuTile kernel written raw, launched with ct.launch into a torch
    graph (what the chain costs without tilelab)."""
    import cuda.tile as ct

    from ..baselines.raw_kernels import raw_add

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


def bench_launch_overhead(torch, res: dict) -> None:
    """Host time per launch and graph replay, each next to its bare or torch baseline
    (``res["launch_overhead"]``)."""
    out = res["launch_overhead"] = {}
    st = _prepare_launch()
    nat = _driver_calls(st, out)
    _safe_calls(st, out)
    out["interleaved"] = _launch_interleaved(st.s, st.config, st.k, st.words, st.zp, st.x,
                                             st.y, nat)
    gr = _tilelab_graphs(st, out)
    _torch_graphs(torch, out)
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
    from ..baselines.raw_kernels import raw_gemm
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


def _scalar_kernel():
    @tl.kernel
    def axpb(z: tl.Out, x: tl.In, a: float, b: int):
        z.store(tl.load_like(x, z) * a + b)

    return axpb


def _scalar_loops(kern, args: tuple, values: list, chunk: int) -> float:
    """Host seconds of one launch per (a, b) in ``values``, async in chunks of
    ``chunk`` (synchronized between chunks, outside the clock: a GPU queue never fills)."""
    total = 0.0
    for i in range(0, len(values), chunk):
        part = values[i:i + chunk]
        t0 = time.perf_counter()
        for a, b in part:
            kern.launch_async(*args, a, b)
        total += time.perf_counter() - t0
        tl.synchronize()
    return total


def bench_scalar_values(n: int = 10_000, rounds: int = 3, device: str | None = None
                        ) -> dict[str, Any]:
    """``n`` launches over ``n`` distinct scalar values (``a`` = i + 0.5, ``b`` = i)
    against ``n`` launches of one value, and ``n`` of a fresh NaN each, of one small
    kernel on ``device`` (the current backend by default): host microseconds per launch
    (median of ``rounds``, the loops interleaved), their ratio, the memory each loop
    leaves allocated (tracemalloc, in a separate pass: tracing slows the loop), and the
    launcher's tables (plans, loaded code, prepared launches) after all of them.

    Plans are filed under what specializes the kernel (a scalar's dtype, not its
    value), so the distinct loop should cost what the one-value loop costs and leave
    the tables as the first launch left them.
    """
    import gc
    import tracemalloc

    kern = _scalar_kernel()
    dev = device or tl.backend()
    dev = "cuda" if dev == "gpu" else dev
    x = tl.ones(1024, device=dev)
    z = tl.empty(1024, device=dev)
    args = (z.partition(256), x)
    kern(*args, 2.5, 3)
    got = z.numpy()
    if not np.allclose(got, 5.5):
        raise AssertionError(f"axpb computed {got[:4]}, not 5.5: nothing timed")
    one = (0.5, 1)
    loops = {"one_value": [one] * n,
             "distinct": [(i + 0.5, i) for i in range(n)],
             "nan": [(float("nan"), 1) for _ in range(n)]}
    chunk = 500 if dev != "cpu" else n
    _scalar_loops(kern, args, loops["distinct"][:chunk], chunk)   # warm every path
    per: dict[str, list[float]] = {k: [] for k in loops}
    for _ in range(rounds):
        for name, values in loops.items():
            per[name].append(_scalar_loops(kern, args, values, chunk) / n * 1e6)
    out: dict[str, Any] = {"device": dev, "n": n, "rounds": rounds}
    out.update({f"{k}_us": statistics.median(v) for k, v in per.items()})
    out["ratio_distinct"] = out["distinct_us"] / out["one_value_us"]
    out["ratio_nan"] = out["nan_us"] / out["one_value_us"]
    for name, values in loops.items():   # what each loop leaves allocated
        fresh = [(a + 1e-3, b + 1) if name == "distinct" else (a, b) for a, b in values]
        gc.collect()   # (cyclic garbage of earlier launches is not growth)
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        _scalar_loops(kern, args, fresh, chunk)
        gc.collect()
        after, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        out[f"{name}_kept_bytes"] = after - before
        out[f"{name}_peak_bytes"] = peak - before
    launcher = kern._launcher
    out["plans_after"] = len(launcher.plans)
    out["code_after"] = len(getattr(launcher, "code", ()))
    out["prepared_after"] = len(launcher._fast)
    out["tables_capacity"] = {"plans": getattr(launcher.plans, "capacity", None),
                              "code": getattr(getattr(launcher, "code", None), "capacity",
                                              None)}
    return out


def run(ctx: Context) -> dict[str, Any]:
    """The runtime figures (see the module docstring), or why they were not measured.

    ``ctx.quick`` shrinks the sizes (2^24 elements, two tiles, a 2048³ GEMM).
    """
    if ctx.backend != "gpu":
        return {"status": "skipped", "reason": "needs the GPU backend (torch CUDA timing)"}
    try:
        torch = torch_on_tilelab_stream()
    except Exception as e:
        return {"status": "error", "error": f"torch with CUDA is needed: {e}"}
    res: dict[str, Any] = {}
    quick = ctx.quick
    steps = [("ceilings", lambda: bench_ceilings(torch, res)),
             ("elementwise", lambda: bench_elementwise(
                 torch, res, 1 << (24 if quick else 28),
                 [1024, 4096] if quick else [1024, 2048, 4096, 8192, 16384])),
             ("launch", lambda: bench_launch_overhead(torch, res)),
             ("scalar_values", lambda: res.__setitem__(
                 "scalar_values", bench_scalar_values(2000 if quick else 10_000))),
             ("gemm", lambda: bench_gemm(torch, res, 2048 if quick else 8192))]
    errors = {}
    for name, fn in steps:
        t0 = time.monotonic()
        try:
            fn()
        except Exception as e:  # keep the other figures; report the failure
            errors[name] = traceback.format_exc()[-2000:]
            print(f"  runtime/{name}: FAILED: {type(e).__name__}: {e}", flush=True)
        print(f"  runtime/{name}: {time.monotonic() - t0:.1f}s", flush=True)
    res["status"] = "error" if errors else "ok"
    if errors:
        res["errors"] = errors
    return res


def main(argv: list[str] | None = None) -> None:
    """``python -m benchmarks.host.runtime [--n N] [OUT.json]``: the scalar-values figures on
    the current backend (TILELAB_BACKEND=cpu for the CPU interpreter), printed and
    optionally written as JSON with the environment."""
    import argparse
    import json
    from pathlib import Path

    from ..common import env_info, write_json

    ap = argparse.ArgumentParser(prog="python -m benchmarks.host.runtime")
    ap.add_argument("--n", type=int, default=10_000, help="launches per loop")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("out", nargs="?", help="write the figures here (JSON)")
    ns = ap.parse_args(argv)
    res = bench_scalar_values(ns.n, ns.rounds)
    print(json.dumps(res, indent=1))
    if ns.out:
        write_json(Path(ns.out), dict(scalar_values=res, env=env_info(tl.backend())))


if __name__ == "__main__":
    main()
