"""Tiles of the decode step's projection GEMVs, measured on the device they run on.

A batch-1 decode step is a handful of weight-streaming GEMVs per layer, and which tile
streams best depends on the shape: a projection with few output rows (Qwen3-4B's o and
down projections have 2560) leaves SMs idle at 16 rows per block, while a wide one
fills several waves. :func:`tune_gemv` times each projection the step launches (the
fused norm + GEMV kernels when the step fuses its norms) with every candidate of
:data:`CANDIDATES`, element-wise and tensor-core tiles, after checking that the
candidate's output equals the step's own tile's. It times them as the step runs them:
one launch per layer, each on its own layer's weights, back to back in a replayed
graph (or, with ``graph=False``, the first layer's launch alone, CUDA events, L2
flushed), and returns the winners as the ``gemv_table`` of a
:class:`~tilelab.models.decode_step.StepConfig`. On the GPU it also times cuBLAS
(``torch.mv`` on the same bf16 weight and input, same events and flush) per shape, so
the result says how far each projection is from the vendor GEMV.

Example::

    from benchmarks.decode.tune import tune_gemv, versus_cublas
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

#: element-wise tiles (rows per block, K per step, blocks-per-SM hint), the ones that
#: won or came within 10% on some Qwen3 projection when every tile of at most 32K
#: elements was timed alone on the H200
#: (claims/decode-gemv-tiles/decode_gemv_tuning_h200_2026-12-02.json), and
#: 8 rows of 1024 at three blocks per SM: on an H100, in the replayed Qwen3-4B step, the
#: fastest for the narrow o and down projections (N = 2560: 320 blocks) by 10-12% over
#: 16 rows of 1024 at two (7.4 vs 8.2 and 17.7 vs 20.0 us; at four blocks per SM it
#: was the slowest, 9.8 us for o)
ELEMENTWISE: tuple[tuple[int, int, int | None], ...] = (
    (4, 512, 4), (8, 512, 2), (8, 512, 4), (16, 512, 2), (16, 1024, 2), (32, 512, 2),
    (8, 1024, 3))
#: tensor-core tiles (kernels.decode.gemv_mma): 64 and 128 rows (warpgroup MMAs, one block of
#: about 200 KB of pipeline per SM, or two with the occupancy hint) and 32 rows
#: (mma.sync, about 80 KB), K steps of 128-512
MMA: tuple[tuple[int, int, int | None], ...] = (
    (32, 256, None), (32, 256, 2), (32, 512, None), (64, 128, None), (64, 128, 2),
    (64, 256, None), (64, 512, None), (128, 128, None), (128, 256, None))


def _candidates() -> tuple:
    from tilelab.kernels.decode.gemv import GemvConfig

    return tuple(GemvConfig(bn=bn, bk=bk, occupancy=occ, prefetch=pre)
                 for pre in (1, 2) for bn, bk, occ in ELEMENTWISE) + \
        tuple(GemvConfig(bn=bn, bk=bk, occupancy=occ, mma=True) for bn, bk, occ in MMA)


#: every candidate, as GemvConfigs: 7 element-wise tiles with one or two weight tiles
#: loaded before the wait (``GemvConfig.prefetch``), and 9 tensor-core tiles
CANDIDATES: tuple = _candidates()
#: the unfused step's GEMVs and the fused kernels that replace them (same shapes)
FUSED_KIND = {"qkv_gemv": "norm_qkv_gemv", "gate_up_silu_gemv": "norm_gate_up_silu_gemv"}


def _launcher(step: Any, kind: str, layer: Any, config: Any):
    """A no-wait call of one projection of ``layer`` with ``config``, and its output,
    with the step's buffers as a layer after the first uses them (the fused forms read
    ``h`` plus the last ``down``)."""
    from tilelab.kernels.decode.gemv import gemv_silu_mul, row_gemv

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
    if step.weights.device == "cpu":
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


def config_row(cfg: Any) -> dict[str, Any]:
    """A GemvConfig's fields as a JSON row.

    Example:
        >>> from tilelab.kernels.decode.gemv import GemvConfig
        >>> config_row(GemvConfig(bn=64, bk=256, mma=True))["mma"]
        True
    """
    return {"bn": cfg.bn, "bk": cfg.bk, "occupancy": cfg.occupancy,
            "latency": cfg.latency, "mma": cfg.mma, "prefetch": cfg.prefetch}


def config_of(row: dict[str, Any]) -> Any:
    """The GemvConfig of a JSON row (rows written before ``mma`` existed are
    element-wise; before ``prefetch``, one tile ahead).

    Example:
        >>> config_of({"bn": 8, "bk": 512, "occupancy": 4}).mma
        False
    """
    from tilelab.kernels.decode.gemv import GemvConfig

    return GemvConfig(bn=row["bn"], bk=row["bk"], occupancy=row["occupancy"],
                      latency=row.get("latency"), mma=bool(row.get("mma", False)),
                      prefetch=int(row.get("prefetch", 1)))


def label(cfg: Any) -> str:
    """``rows x K / occupancy / latency``, with ``mma`` for the tensor-core form and
    ``+2`` for two weight tiles loaded before the wait.

    Example:
        >>> from tilelab.kernels.decode.gemv import GemvConfig
        >>> label(GemvConfig(bn=64, bk=256, occupancy=None, mma=True))
        'mma 64x256/None/None'
        >>> label(GemvConfig(bn=8, prefetch=2))
        '8x512/2/None+2'
    """
    more = "+2" if cfg.prefetch == 2 else ""
    return f"{'mma ' if cfg.mma else ''}{cfg.bn}x{cfg.bk}/{cfg.occupancy}/{cfg.latency}{more}"


def _graph_of(runs: list[Any]) -> Any:
    """The calls recorded once as a graph (they enqueue without waiting)."""
    import tilelab as tl

    with tl.graph() as g:
        for run in runs:
            run()
    return g


def _time_candidate(step: Any, kind: str, layers: list[Any], cfg: Any, ref: np.ndarray,
                    out: Any, rep: int, tolerance: float, weight_bytes: int,
                    graph: bool) -> dict[str, Any]:
    """One candidate's row: checked against ``ref`` (the first layer's output), then
    timed alone (one launch, L2 flushed) or, with ``graph``, as the decode step runs
    it: one launch per layer, each on its own layer's weights, back to back in a
    replayed graph (the time per launch is the replay's over the layers)."""
    import tilelab as tl

    row: dict[str, Any] = {"impl": "tilelab", "kind": kind, "n": out.shape[0],
                           **config_row(cfg), "timed": "graph" if graph else "alone"}
    try:
        runs = [_launcher(step, kind, layer, cfg)[0] for layer in layers]
        got = _output(runs[0], out)
        err = float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))
        row["rel_err"] = err
        if not err <= tolerance:
            return dict(row, status=f"wrong: rel err {err:.3g}")
        if graph:
            g = _graph_of(runs)
            r = tl.bench(g.replay, warmup=3, rep=max(5, rep // 3), flush_l2=False,
                         name=f"{kind}/{label(cfg)} x{len(runs)}")
            sec = r.median / len(runs)
        else:
            sec = tl.bench(runs[0], warmup=5, rep=rep, name=f"{kind}/{label(cfg)}").median
    except Exception as e:  # noqa: BLE001 - a failing candidate is a result
        return dict(row, status=f"error: {type(e).__name__}: {e}"[:300])
    return dict(row, status="ok", us=sec * 1e6, tb_s=weight_bytes / sec / 1e12)


def tune_gemv(engine: Any, candidates: tuple | None = None, *, rep: int = 30,
              tolerance: float = 2e-2, cublas: bool = True, step: Any = None,
              graph: bool = True) -> tuple[tuple, list[dict[str, Any]]]:
    """Time every candidate (a GemvConfig; None: :data:`CANDIDATES`) on each projection
    the engine's decode step launches (or ``step``'s): with ``graph``, one launch per
    layer back to back in a replayed graph, as the step runs them; else the first
    layer's launch alone.

    Returns ``(gemv_table, rows)``: the table for ``StepConfig(gemv_table=...)`` and one
    row per (projection, candidate) with its median time and achieved bandwidth, or the
    reason it was not timed (its output differs from the step's own tile's by more
    than ``tolerance`` relative to the output's norm, or it failed to compile or
    launch); with ``cublas``, one more row per projection (``impl == "cublas"``, timed
    alone).
    """
    candidates = CANDIDATES if candidates is None else candidates
    step = step or engine.decode_step()
    layers = list(engine.weights.layers) if graph else [engine.weights.layers[0]]
    _fill_inputs(step)
    table, rows = [], []
    for kind, n, k in step.gemv_shapes():
        run0, out = _launcher(step, kind, layers[0], step._gemv_cfg(kind, n, k))
        ref = _output(run0, out)
        weight_bytes = (2 if "gate_up" in kind else 1) * n * k * 2
        timed = [_time_candidate(step, kind, layers, c, ref, out, rep, tolerance,
                                 weight_bytes, graph) for c in candidates]
        for r in timed:
            r["k"] = k
        rows += timed
        if cublas:
            rows.append(_cublas_row(step, kind, layers[0], n, k, rep, weight_bytes))
        ok = [r for r in timed if r["status"] == "ok"]
        if ok:
            table.append(((kind, n, k), config_of(min(ok, key=lambda r: r["us"]))))
    return tuple(table), rows


def both_forms(table: tuple) -> tuple:
    """``table`` plus, for each entry of a norm + GEMV kernel of one form, the same tiles
    for the matching GEMV of the other form (``FUSED_KIND``), where the table has none:
    so a step built with ``fuse_norms=False`` runs the tiles the fused step was tuned to
    (a comparison of the two forms then measures the fusion alone), and a table tuned
    before the fusion serves the fused step.

    Example:
        >>> from tilelab.kernels.decode.gemv import GemvConfig
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
                    "best": label(config_of(best)), "best_us": best["us"],
                    "best_tb_s": best["tb_s"],
                    "cublas_us": cub["us"] if cub else None,
                    "cublas_tb_s": cub["tb_s"] if cub else None,
                    "cublas_over_best": round(cub["us"] / best["us"], 4) if cub else None})
    return out


def tuned_engine(engine: Any, step_config: Any, *, candidates: tuple | None = None,
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
    chosen = [{"kind": key[0], "n": key[1], "k": key[2], **config_row(c)}
              for key, c in table]
    return tuned, {"chosen": chosen, "candidates_per_shape": len(candidates),
                   "vs_cublas": versus_cublas(rows), "candidates": rows,
                   "seconds": time.perf_counter() - t0}


def with_prefetch(step_config: Any, prefetch: int) -> Any:
    """``step_config`` with every element-wise projection tile (the table's and
    ``gemv``) loading ``prefetch`` weight tiles before its wait; tensor-core tiles keep
    one.

    Example:
        >>> from tilelab.kernels.decode.gemv import GemvConfig
        >>> from tilelab.models.decode_step import StepConfig
        >>> c = StepConfig(gemv_table=((("down_gemv", 8, 16), GemvConfig(bn=8)),))
        >>> with_prefetch(c, 2).gemv_table[0][1].prefetch
        2
    """
    def one(cfg: Any) -> Any:
        return cfg if cfg is None or cfg.mma else cfg.with_(prefetch=prefetch)

    return dataclasses.replace(step_config, gemv=one(step_config.gemv),
                               gemv_table=tuple((key, one(c))
                                                for key, c in step_config.gemv_table))


def compare_prefetch(engine: Any, prompt: list[int], replay_us: Any,
                     rounds: int = 3) -> dict[str, Any]:
    """The replayed decode step with the engine's tiles as they are, and with every
    element-wise projection loading one and two weight tiles before its wait
    (:func:`with_prefetch`): step microseconds of each, the variants alternated for
    ``rounds`` rounds on the same weights, at the first decode position;
    ``replay_us(engine, graph, position)`` times one (``decode_graph.replay_us``).

    Example::

        compare_prefetch(engine, prompt, decode_graph.replay_us)["median_step_us"]
    """
    import statistics

    from tilelab.models import Qwen3

    variants = {"as chosen": engine}
    for pre in (1, 2):
        variants[f"prefetch {pre}"] = Qwen3(
            engine.weights, max_tokens=engine.cache.capacity,
            step_config=with_prefetch(engine.step_config, pre))
    graphs = {}
    for name, eng in variants.items():
        step = eng.begin(prompt)
        graphs[name] = (eng, step.capture(), step.position)
    timed: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(rounds):
        names = list(variants)
        for name in names[r % len(names):] + names[:r % len(names)]:
            eng, graph, pos = graphs[name]
            timed[name].append(replay_us(eng, graph, pos))
    return {"step_us": timed,
            "median_step_us": {k: statistics.median(v) for k, v in timed.items()}}


def engine_from_table(engine: Any, step_config: Any, name: str,
                      path: str) -> tuple[Any, dict[str, Any]]:
    """The engine rebuilt with the tiles an earlier tuning run (a decode JSON at
    ``path``) chose for model ``name``; SystemExit when it has none.

    Example::

        engine, info = engine_from_table(engine, None, "4b", "decode_h200.json")
    """
    from tilelab.models import Qwen3
    from tilelab.models.decode_step import StepConfig

    runs = json.loads(Path(path).read_text())["models"]
    chosen = next((m["gemv_tuning"]["chosen"] for m in runs
                   if m["model"] == name and "gemv_tuning" in m), None)
    if chosen is None:
        raise SystemExit(f"decode.py: {path} has no GEMV tuning of model {name!r}")
    table = tuple(((c["kind"], c["n"], c["k"]), config_of(c)) for c in chosen)
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
        ew = [r for r in ok if not r.get("mma")]
        tail = ""
        if best.get("mma") and ew:
            e = min(ew, key=lambda r: r["us"])
            tail = f", best element-wise {label(config_of(e))} {e['us']:.1f} us"
        cub = vs[kind]["cublas_us"]
        tail += f", cuBLAS {cub:.1f} us (alone)" if cub is not None else ""
        lines.append(f"  {kind} ({best['n']}x{best['k']}): best {label(config_of(best))} "
                     f"{best['us']:.1f} us {best['tb_s']:.2f} TB/s{tail}")
    return "\n".join(lines)
