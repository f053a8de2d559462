"""Tiles of the decode step's projection GEMVs, measured on the device they run on.

A batch-1 decode step is a handful of weight-streaming GEMVs per layer, and which tile
streams best depends on the shape: a projection with few output rows (Qwen3-4B's o and
down projections have 2560) leaves SMs idle at 16 rows per block, while a wide one
fills several waves. :func:`tune_gemv` times each projection of the first layer with
every candidate tile (CUDA events, L2 flushed, the step's own buffers), after checking
that the candidate's output equals the default tile's, and returns the winners as the
``gemv_table`` of a :class:`~tilelab.models.decode_step.StepConfig`.

Example::

    from benchmarks.decode_tune import tune_gemv
    table, rows = tune_gemv(engine)          # engine: tilelab.models.Qwen3 on the GPU
    engine = Qwen3(weights, step_config=StepConfig(gemv_table=table))
"""
from __future__ import annotations

from typing import Any

import numpy as np

#: (rows per block, K per step, blocks-per-SM hint): the grid a tuning run times
CANDIDATES: tuple[tuple[int, int, int | None], ...] = tuple(
    (bn, bk, occ) for bn in (4, 8, 16, 32) for bk in (512, 1024) for occ in (None, 2, 4))


def _launcher(step: Any, kind: str, layer: Any, config: Any):
    """A no-wait call of one projection of ``layer`` with ``config``, and its output."""
    from tilelab.kernels.decode_gemv import gemv_silu_mul, row_gemv

    if kind == "qkv_gemv":
        return (lambda: row_gemv(layer.qkv, step.normed, out=step.qkv, config=config,
                                 sync=False)), step.qkv
    if kind == "o_gemv_residual":
        h_in, h_mid = step.h
        return (lambda: row_gemv(layer.o, step.attn, residual=h_in, out=h_mid,
                                 config=config, sync=False)), h_mid
    if kind == "gate_up_silu_gemv":
        return (lambda: gemv_silu_mul(layer.gate_up, step.normed, out=step.act,
                                      config=config, sync=False)), step.act
    if kind == "down_gemv":
        return (lambda: row_gemv(layer.down, step.act, out=step.down, config=config,
                                 sync=False)), step.down
    raise ValueError(f"tune_gemv: unknown projection {kind!r}")


def _output(run: Any, out: Any) -> np.ndarray:
    res = run()
    fut = res[1] if isinstance(res, tuple) else None
    if fut is not None:
        fut.wait()
    return np.asarray(out.numpy(), dtype=np.float32)


def _fill_inputs(step: Any, seed: int = 0) -> None:
    """Fresh random activations in the buffers the projections read (never zeros)."""
    rng = np.random.default_rng(seed)
    for t in (step.normed, step.attn, step.act, step.h[0]):
        t.copy_(rng.standard_normal(t.shape).astype(np.float32).astype(t.numpy().dtype))


def tune_gemv(engine: Any, candidates: tuple = CANDIDATES, *, rep: int = 30,
              tolerance: float = 2e-2) -> tuple[tuple, list[dict[str, Any]]]:
    """Time every candidate tile on each projection of the engine's first layer.

    Returns ``(gemv_table, rows)``: the table for ``StepConfig(gemv_table=...)`` and one
    row per (projection, candidate) with its median time and achieved bandwidth, or the
    reason it was not timed (its output differs from the default tile's by more than
    ``tolerance`` relative to the output's norm, or it failed to compile or launch).
    """
    import tilelab as tl
    from tilelab.kernels.decode_gemv import GemvConfig

    step = engine.decode_step()
    layer = engine.weights.layers[0]
    _fill_inputs(step)
    table, rows = [], []
    for kind, n, k in step.gemv_shapes():
        run0, out = _launcher(step, kind, layer, step._gemv_cfg(kind, n, k))
        ref = _output(run0, out)
        weight_bytes = {"gate_up_silu_gemv": 2}.get(kind, 1) * n * k * 2
        best = None
        for bn, bk, occ in candidates:
            cfg = GemvConfig(bn=bn, bk=bk, occupancy=occ)
            row: dict[str, Any] = {"kind": kind, "n": n, "k": k, "bn": bn, "bk": bk,
                                   "occupancy": occ}
            try:
                run, _ = _launcher(step, kind, layer, cfg)
                got = _output(run, out)
                err = float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))
                row["rel_err"] = err
                if not err <= tolerance:
                    row["status"] = f"wrong: rel err {err:.3g}"
                    rows.append(row)
                    continue
                r = tl.bench(run, warmup=5, rep=rep, name=f"{kind}/{bn}x{bk}/{occ}")
            except Exception as e:  # noqa: BLE001 - a failing candidate is a result
                row["status"] = f"error: {type(e).__name__}: {e}"[:300]
                rows.append(row)
                continue
            row.update(status="ok", us=r.median * 1e6,
                       tb_s=weight_bytes / r.median / 1e12)
            rows.append(row)
            if best is None or row["us"] < best["us"]:
                best = row
        if best is not None:
            table.append(((kind, n, k), GemvConfig(bn=best["bn"], bk=best["bk"],
                                                   occupancy=best["occupancy"])))
    return tuple(table), rows


def summary(rows: list[dict[str, Any]]) -> str:
    """The winner of each projection and how far the default tile was from it."""
    lines = []
    for kind in dict.fromkeys(r["kind"] for r in rows):
        ok = [r for r in rows if r["kind"] == kind and r.get("status") == "ok"]
        if not ok:
            lines.append(f"  {kind}: no candidate ran")
            continue
        best = min(ok, key=lambda r: r["us"])
        dflt = next((r for r in ok if (r["bn"], r["bk"], r["occupancy"]) == (16, 512, 2)),
                    None)
        tail = f", default 16x512/2 {dflt['us']:.1f} us" if dflt else ""
        lines.append(f"  {kind} ({best['n']}x{best['k']}): best {best['bn']}x{best['bk']}/"
                     f"{best['occupancy']} {best['us']:.1f} us {best['tb_s']:.2f} TB/s{tail}")
    return "\n".join(lines)
