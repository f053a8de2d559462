"""Tiles of the decode step's projection GEMVs, measured on the device they run on.

A batch-1 decode step is a handful of weight-streaming GEMVs per layer, and which tile
streams best depends on the shape: a projection with few output rows (Qwen3-4B's o and
down projections have 2560) leaves SMs idle at 16 rows per block, while a wide one
fills several waves. :func:`tune_gemv` times each projection the step launches (its
first layer's weights; the fused norm + GEMV kernels when the step fuses its norms)
with every candidate of :data:`CANDIDATES` (CUDA events, L2 flushed, the step's own
buffers), after checking that the candidate's output equals the default tile's, and
returns the winners as the ``gemv_table`` of a
:class:`~tilelab.models.decode_step.StepConfig`. On the GPU it also times cuBLAS
(``torch.mv`` on the same bf16 weight and input, same events and flush) per shape, so
the result says how far each projection is from the vendor GEMV.

Example::

    from benchmarks.decode_tune import tune_gemv, versus_cublas
    table, rows = tune_gemv(engine)          # engine: tilelab.models.Qwen3 on the GPU
    versus_cublas(rows)                      # per shape: best tile vs cuBLAS
    engine = Qwen3(weights, step_config=StepConfig(gemv_table=table))
"""
from __future__ import annotations

import dataclasses
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

#: (rows per block, K per step) tiles of at most 32K elements (the fp32 accumulator)
TILES: tuple[tuple[int, int], ...] = tuple(
    (bn, bk) for bn in (4, 8, 16, 32) for bk in (512, 1024, 2048) if bn * bk <= 32768)
#: (rows per block, K per step, blocks-per-SM hint, load latency hint): every tile with
#: the inferred latency and occupancy hints none, 2 and 4, then latency hints 2, 4 and 8
#: at occupancy 2 for the tiles of at most 16K elements (where a deeper pipeline of
#: loads has registers to spare): 33 + 27 = 60 candidates per projection
CANDIDATES: tuple[tuple[int, int, int | None, int | None], ...] = tuple(
    (bn, bk, occ, None) for bn, bk in TILES for occ in (None, 2, 4)) + tuple(
    (bn, bk, 2, lat) for bn, bk in TILES if bn * bk <= 16384 for lat in (2, 4, 8))
#: the unfused step's GEMVs and the fused kernels that replace them (same shapes)
FUSED_KIND = {"qkv_gemv": "norm_qkv_gemv", "gate_up_silu_gemv": "norm_gate_up_silu_gemv"}


def _launcher(step: Any, kind: str, layer: Any, config: Any):
    """A no-wait call of one projection of ``layer`` with ``config``, and its output,
    with the step's buffers as a layer after the first uses them (the fused forms read
    ``h`` plus the last ``down``)."""
    from tilelab.kernels.decode_gemv import gemv_silu_mul, row_gemv

    eps = step.model_config.rms_norm_eps
    h_in, h_mid = step.stream(1)
    calls = {
        "qkv_gemv": lambda: row_gemv(layer.qkv, step.normed, out=step.qkv, config=config,
                                     sync=False),
        "norm_qkv_gemv": lambda: row_gemv(layer.qkv, h_in, x2=step.down,
                                          norm_weight=layer.input_norm, eps=eps,
                                          out=step.qkv, config=config, sync=False),
        "o_gemv_residual": lambda: row_gemv(
            layer.o, step.attn, residual=(h_in, step.down) if step.config.fuse_norms
            else h_in, out=h_mid, config=config, sync=False),
        "gate_up_silu_gemv": lambda: gemv_silu_mul(layer.gate_up, step.normed, out=step.act,
                                                   config=config, sync=False),
        "norm_gate_up_silu_gemv": lambda: gemv_silu_mul(
            layer.gate_up, h_mid, norm_weight=layer.post_norm, eps=eps, out=step.act,
            config=config, sync=False),
        "down_gemv": lambda: row_gemv(layer.down, step.act, out=step.down, config=config,
                                      sync=False),
    }
    outs = {"qkv_gemv": step.qkv, "norm_qkv_gemv": step.qkv, "o_gemv_residual": h_mid,
            "gate_up_silu_gemv": step.act, "norm_gate_up_silu_gemv": step.act,
            "down_gemv": step.down}
    if kind not in calls:
        raise ValueError(f"tune_gemv: unknown projection {kind!r} (known: "
                         f"{', '.join(calls)})")
    return calls[kind], outs[kind]


def _operands(step: Any, kind: str, layer: Any) -> tuple[Any, Any]:
    """The (N, K) weight and (K,) input of a projection, for the cuBLAS baseline."""
    h_in, h_mid = step.stream(1)
    return {"qkv_gemv": (layer.qkv, step.normed), "norm_qkv_gemv": (layer.qkv, h_in),
            "o_gemv_residual": (layer.o, step.attn),
            "gate_up_silu_gemv": (layer.gate_up, step.normed),
            "norm_gate_up_silu_gemv": (layer.gate_up, h_mid),
            "down_gemv": (layer.down, step.act)}[kind]


def _output(run: Any, out: Any) -> np.ndarray:
    res = run()
    fut = res[1] if isinstance(res, tuple) else None
    if fut is not None:
        fut.wait()
    return np.asarray(out.numpy(), dtype=np.float32)


def _fill_inputs(step: Any, seed: int = 0) -> None:
    """Fresh random activations in the buffers the projections read (never zeros)."""
    rng = np.random.default_rng(seed)
    for t in (step.normed, step.attn, step.act, step.down, *step.h):
        t.copy_(rng.standard_normal(t.shape).astype(np.float32).astype(t.numpy().dtype))


def time_torch(fn: Any, device: str, reps: int = 20) -> float:
    """Median seconds of a torch call: on the GPU by events on tilelab's stream (L2
    flushed, as ``tl.bench`` does for tilelab's kernels), else by the host clock.

    Example::

        time_torch(lambda: torch.mv(w, x), "gpu", reps=30)
    """
    import tilelab as tl

    if device != "gpu":
        return tl.bench(fn, warmup=2, rep=reps).median
    import torch

    from tilelab.runtime.streams import resolve_stream

    try:
        stream = torch.cuda.ExternalStream(int(resolve_stream(None).handle))
    except Exception:  # noqa: BLE001 - no handle to share: time on torch's own stream
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(reps + 3):
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e-3)
        return statistics.median(times[3:])
    with torch.cuda.stream(stream):
        return tl.bench(fn, warmup=3, rep=reps).median


def _cublas_row(step: Any, kind: str, layer: Any, n: int, k: int, rep: int,
                weight_bytes: int) -> dict[str, Any]:
    """cuBLAS (``torch.mv``) on the projection's bf16 weight (gate and up as one
    (2I, K) matrix) and input, timed as the candidates are; skipped off the GPU."""
    row: dict[str, Any] = {"impl": "cublas", "kind": kind, "n": n, "k": k}
    if step.weights.device != "gpu":
        return dict(row, status="skipped: cuBLAS is timed on the GPU only")
    try:
        import torch

        if not torch.cuda.is_available():
            return dict(row, status="skipped: torch has no CUDA")
        w, x = _operands(step, kind, layer)
        wt = torch.from_dlpack(w)
        wt = wt.reshape(-1, wt.shape[-1])
        xt = torch.from_dlpack(x)
        yt = torch.empty(wt.shape[0], dtype=wt.dtype, device=wt.device)
        sec = time_torch(lambda: torch.mv(wt, xt, out=yt), "gpu", reps=rep)
    except Exception as e:  # noqa: BLE001 - a missing baseline is a result
        return dict(row, status=f"error: {type(e).__name__}: {e}"[:300])
    return dict(row, status="ok", us=sec * 1e6, tb_s=weight_bytes / sec / 1e12)


def _time_candidate(step: Any, kind: str, layer: Any, cand: tuple, ref: np.ndarray,
                    out: Any, rep: int, tolerance: float,
                    weight_bytes: int) -> dict[str, Any]:
    """One candidate's row: checked against ``ref``, then timed (or why it was not)."""
    import tilelab as tl
    from tilelab.kernels.decode_gemv import GemvConfig

    bn, bk, occ, lat = cand
    row: dict[str, Any] = {"impl": "tilelab", "kind": kind, "n": out.shape[0],
                           "bn": bn, "bk": bk, "occupancy": occ, "latency": lat}
    try:
        run, _ = _launcher(step, kind, layer, GemvConfig(bn=bn, bk=bk, occupancy=occ,
                                                         latency=lat))
        got = _output(run, out)
        err = float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))
        row["rel_err"] = err
        if not err <= tolerance:
            return dict(row, status=f"wrong: rel err {err:.3g}")
        r = tl.bench(run, warmup=5, rep=rep, name=f"{kind}/{bn}x{bk}/{occ}/{lat}")
    except Exception as e:  # noqa: BLE001 - a failing candidate is a result
        return dict(row, status=f"error: {type(e).__name__}: {e}"[:300])
    return dict(row, status="ok", us=r.median * 1e6, tb_s=weight_bytes / r.median / 1e12)


def tune_gemv(engine: Any, candidates: tuple = CANDIDATES, *, rep: int = 30,
              tolerance: float = 2e-2, cublas: bool = True,
              step: Any = None) -> tuple[tuple, list[dict[str, Any]]]:
    """Time every candidate tile on each projection the engine's decode step launches
    (or ``step``'s), on the first layer's weights.

    Returns ``(gemv_table, rows)``: the table for ``StepConfig(gemv_table=...)`` and one
    row per (projection, candidate) with its median time and achieved bandwidth, or the
    reason it was not timed (its output differs from the default tile's by more than
    ``tolerance`` relative to the output's norm, or it failed to compile or launch);
    with ``cublas``, one more row per projection (``impl == "cublas"``).
    """
    from tilelab.kernels.decode_gemv import GemvConfig

    step = step or engine.decode_step()
    layer = engine.weights.layers[0]
    _fill_inputs(step)
    table, rows = [], []
    for kind, n, k in step.gemv_shapes():
        run0, out = _launcher(step, kind, layer, step._gemv_cfg(kind, n, k))
        ref = _output(run0, out)
        weight_bytes = (2 if "gate_up" in kind else 1) * n * k * 2
        timed = [_time_candidate(step, kind, layer, c, ref, out, rep, tolerance,
                                 weight_bytes) for c in candidates]
        for r in timed:
            r["k"] = k
        rows += timed
        if cublas:
            rows.append(_cublas_row(step, kind, layer, n, k, rep, weight_bytes))
        ok = [r for r in timed if r["status"] == "ok"]
        if ok:
            best = min(ok, key=lambda r: r["us"])
            table.append(((kind, n, k), GemvConfig(bn=best["bn"], bk=best["bk"],
                                                   occupancy=best["occupancy"],
                                                   latency=best["latency"])))
    return tuple(table), rows


def both_forms(table: tuple) -> tuple:
    """``table`` plus, for each entry of a norm + GEMV kernel of one form, the same tiles
    for the matching GEMV of the other form (``FUSED_KIND``), where the table has none:
    so a step built with ``fuse_norms=False`` runs the tiles the fused step was tuned to
    (a comparison of the two forms then measures the fusion alone), and a table tuned
    before the fusion serves the fused step.

    Example:
        >>> from tilelab.kernels.decode_gemv import GemvConfig
        >>> t = ((("norm_qkv_gemv", 8, 16), GemvConfig(bn=4)),)
        >>> [key for key, _ in both_forms(t)]
        [('norm_qkv_gemv', 8, 16), ('qkv_gemv', 8, 16)]
    """
    pairs = {**FUSED_KIND, **{v: k for k, v in FUSED_KIND.items()}}
    have = {key for key, _ in table}
    extra = tuple(((pairs[kind], n, k), cfg) for (kind, n, k), cfg in table
                  if kind in pairs and (pairs[kind], n, k) not in have)
    return tuple(table) + extra


def versus_cublas(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per projection: the best tile's time and bandwidth next to cuBLAS's (None where
    cuBLAS was not timed) and ``cublas_over_best`` (> 1: tilelab is faster).

    Example:
        >>> rows = [{"impl": "tilelab", "kind": "down_gemv", "n": 8, "k": 16, "bn": 4,
        ...          "bk": 512, "occupancy": 2, "latency": None, "status": "ok",
        ...          "us": 10.0, "tb_s": 2.0},
        ...         {"impl": "cublas", "kind": "down_gemv", "n": 8, "k": 16,
        ...          "status": "ok", "us": 12.0, "tb_s": 1.7}]
        >>> versus_cublas(rows)[0]["cublas_over_best"]
        1.2
    """
    out = []
    for kind in dict.fromkeys(r["kind"] for r in rows):
        ok = [r for r in rows if r["kind"] == kind and r["impl"] == "tilelab"
              and r.get("status") == "ok"]
        cub = next((r for r in rows if r["kind"] == kind and r["impl"] == "cublas"
                    and r.get("status") == "ok"), None)
        if not ok:
            continue
        best = min(ok, key=lambda r: r["us"])
        out.append({"kind": kind, "n": best["n"], "k": best["k"],
                    "best": f"{best['bn']}x{best['bk']}/{best['occupancy']}/"
                            f"{best['latency']}", "best_us": best["us"],
                    "best_tb_s": best["tb_s"],
                    "cublas_us": cub["us"] if cub else None,
                    "cublas_tb_s": cub["tb_s"] if cub else None,
                    "cublas_over_best": round(cub["us"] / best["us"], 4) if cub else None})
    return out


def tuned_engine(engine: Any, step_config: Any, *, candidates: tuple = CANDIDATES,
                 rep: int = 30) -> tuple[Any, dict[str, Any]]:
    """The engine rebuilt with the measured best tiles of each projection GEMV its step
    launches, and what the tuning measured (for the benchmark's JSON).

    Example::

        engine, info = tuned_engine(engine, None)
        info["vs_cublas"]
    """
    from tilelab.models import Qwen3
    from tilelab.models.decode_step import StepConfig

    t0 = time.perf_counter()
    table, rows = tune_gemv(engine, candidates, rep=rep)
    base = step_config or StepConfig()
    tuned = Qwen3(engine.weights, max_tokens=engine.cache.capacity,
                  step_config=dataclasses.replace(base, gemv_table=both_forms(table)))
    chosen = [{"kind": key[0], "n": key[1], "k": key[2], "bn": c.bn, "bk": c.bk,
               "occupancy": c.occupancy, "latency": c.latency} for key, c in table]
    return tuned, {"chosen": chosen, "candidates_per_shape": len(candidates),
                   "vs_cublas": versus_cublas(rows), "candidates": rows,
                   "seconds": time.perf_counter() - t0}


def engine_from_table(engine: Any, step_config: Any, name: str,
                      path: str) -> tuple[Any, dict[str, Any]]:
    """The engine rebuilt with the tiles an earlier tuning run (a decode JSON at
    ``path``) chose for model ``name``; SystemExit when it has none.

    Example::

        engine, info = engine_from_table(engine, None, "4b", "decode_h200.json")
    """
    from tilelab.kernels.decode_gemv import GemvConfig
    from tilelab.models import Qwen3
    from tilelab.models.decode_step import StepConfig

    runs = json.loads(Path(path).read_text())["models"]
    chosen = next((m["gemv_tuning"]["chosen"] for m in runs
                   if m["model"] == name and "gemv_tuning" in m), None)
    if chosen is None:
        raise SystemExit(f"decode.py: {path} has no GEMV tuning of model {name!r}")
    table = tuple(((c["kind"], c["n"], c["k"]),
                   GemvConfig(bn=c["bn"], bk=c["bk"], occupancy=c["occupancy"],
                              latency=c.get("latency")))
                  for c in chosen)
    base = step_config or StepConfig()
    tuned = Qwen3(engine.weights, max_tokens=engine.cache.capacity,
                  step_config=dataclasses.replace(base, gemv_table=both_forms(table)))
    return tuned, {"chosen": chosen, "source": str(path)}


def summary(rows: list[dict[str, Any]]) -> str:
    """The winner of each projection, the default tile's time and cuBLAS's."""
    lines = []
    vs = {v["kind"]: v for v in versus_cublas(rows)}
    for kind in dict.fromkeys(r["kind"] for r in rows):
        ok = [r for r in rows if r["kind"] == kind and r["impl"] == "tilelab"
              and r.get("status") == "ok"]
        if not ok:
            lines.append(f"  {kind}: no candidate ran")
            continue
        best = min(ok, key=lambda r: r["us"])
        dflt = next((r for r in ok if (r["bn"], r["bk"], r["occupancy"], r["latency"])
                     == (16, 512, 2, None)), None)
        tail = f", default 16x512/2 {dflt['us']:.1f} us" if dflt else ""
        cub = vs[kind]["cublas_us"]
        tail += f", cuBLAS {cub:.1f} us" if cub is not None else ""
        lines.append(f"  {kind} ({best['n']}x{best['k']}): best {best['bn']}x{best['bk']}/"
                     f"{best['occupancy']}/{best['latency']} {best['us']:.1f} us "
                     f"{best['tb_s']:.2f} TB/s{tail}")
    return "\n".join(lines)
