"""Where a replayed decode step's time goes: each kernel kind's cost inside the graph.

A kernel timed alone (events around one launch, L2 flushed) pays its own launch,
ramp-up and tail; inside the step's graph, with programmatic dependent launch, part of
that overlaps the kernel before it, so a per-kernel breakdown of lone launches
over-counts the small kernels. :func:`ablation` measures the graph itself: the step's
launches recorded as a chain (``tl.graph(serial=True)``: each launch waits for the one
before it, as on a stream, so leaving a launch out cannot let its neighbours overlap),
replayed, then the same chain with every launch of one kind left out. The difference
is what that kind costs the step. The step's own graph (edges from the launches'
borrows) is timed too: it is the chain where every launch depends on the one before.
The kernels' run times do not depend
on the values they read (no data-dependent loop but attention's, whose length is the
device-held position, reset before every timing), so leaving a kind out changes what
the others compute, not how long they take.

Example::

    from benchmarks.decode.graph import ablation
    rows = ablation(engine, prompt)      # engine: tilelab.models.Qwen3 on the GPU
    [(r["kind"], r["us_in_graph"]) for r in rows]
"""
from __future__ import annotations

from typing import Any

import numpy as np

from . import tune as decode_tune
from .models import build_models, env_info


def _graph(step: Any, leave_out: str | None) -> Any:
    """The step's launches recorded as a chain, those of kind ``leave_out`` omitted."""
    import tilelab as tl

    with tl.graph(serial=True) as g:
        for launch in step.launches:
            if launch.kind != leave_out:
                launch.run()
    return g


def replay_us(engine: Any, graph: Any, position: int, rep: int = 30) -> float:
    """Median device microseconds of one replay of ``graph`` (a decode step's) with the
    cache position reset to ``position`` first (each replay advances it by one; rep
    replays stay within ``position + rep + 3``).

    Example::

        replay_us(engine, engine.decode_step().capture(), 129)
    """
    import tilelab as tl

    engine.cache.pos.copy_(np.array([position], np.int32))
    r = tl.bench(graph.replay, warmup=3, rep=rep, flush_l2=False, name="decode step")
    return r.median * 1e6


def ablation(engine: Any, prompt: list[int], rep: int = 30) -> list[dict[str, Any]]:
    """Per kernel kind of the decode step: launches per step, the replayed chain's time
    without them and the difference (``us_in_graph``: what the kind costs the step),
    after a first row for the whole chain (``kind == "step"``; ``us_own_graph``: the
    step's own graph).

    Example::

        rows = ablation(engine, prompt)
        rows[0]["us"], rows[1]["kind"], rows[1]["us_in_graph"]
    """
    step = engine.begin(prompt)
    position = step.position
    full = replay_us(engine, _graph(step, None), position, rep)
    rows: list[dict[str, Any]] = [{"kind": "step", "launches": len(step.launches),
                                   "us": full, "us_own_graph": replay_us(
                                       engine, step.capture(), position, rep)}]
    for kind in dict.fromkeys(launch.kind for launch in step.launches):
        n = sum(launch.kind == kind for launch in step.launches)
        without = replay_us(engine, _graph(step, kind), position, rep)
        rows.append({"kind": kind, "launches": n, "us_without": without,
                     "us_in_graph": full - without,
                     "us_per_launch": (full - without) / n})
    engine.begin(prompt)   # the cache and position as a fresh decode expects them
    return rows


def summary(rows: list[dict[str, Any]]) -> str:
    """One line per kind, largest cost first.

    Example:
        >>> print(summary([{"kind": "step", "launches": 3, "us": 10.0},
        ...                {"kind": "a", "launches": 2, "us_without": 4.0,
        ...                 "us_in_graph": 6.0, "us_per_launch": 3.0}]))
        step 10.0 us, 3 launches: a 6.0 us (2 x 3.0)
    """
    head, rest = rows[0], sorted(rows[1:], key=lambda r: -r["us_in_graph"])
    return (f"step {head['us']:.1f} us, {head['launches']} launches: " +
            ", ".join(f"{r['kind']} {r['us_in_graph']:.1f} us ({r['launches']} x "
                      f"{r['us_per_launch']:.1f})" for r in rest))


def _engine_with(engine: Any, **changes: Any) -> Any:
    """The engine's weights in a new engine whose step config has ``changes``."""
    import dataclasses

    from tilelab.models import Qwen3

    return Qwen3(engine.weights, max_tokens=engine.cache.capacity,
                 step_config=dataclasses.replace(engine.step_config, **changes))


def run(models: tuple[str, ...], *, splits: tuple[int | None, ...] = (None,),
        prompt_len: int = 128, table: str | None = None, dry_run: bool = False,
        rep: int = 30) -> dict[str, Any]:
    """For each model: the ablation of its decode step for each KV split count of
    decode attention (None: the step's defaults, one pass at short contexts; 0: the
    split form with its default split count; n: the split form with n splits, 1 the
    one-pass kernel), with the projection tiles of
    ``table`` (a decode JSON with a GEMV tuning) or the defaults.

    Example::

        run(("4b",), splits=(None, 0, 4), table="benchmarks/results/decode_h200_2026-12-05.json")
    """
    import tilelab as tl

    device = "cpu" if dry_run else tl.backend()
    out: dict[str, Any] = {"benchmark": "decode_graph", "env": env_info(device),
                           "table": table, "prompt": prompt_len, "models": []}
    for name in (("tiny",) if dry_run else models):
        _, engine = build_models(name, device)
        if table:
            engine, _ = decode_tune.engine_from_table(engine, None, name, table)
        prompt = np.random.default_rng(0).integers(
            0, engine.config.vocab_size, prompt_len).tolist()
        for s in splits:
            eng = engine if s is None else _engine_with(
                engine, attn_splits=s or None, one_pass_upto=0)
            rows = ablation(eng, prompt, rep)
            step = eng.decode_step()
            out["models"].append({"model": name, "attn_splits": step.splits,
                                  "one_pass_upto": step.one_pass_upto,
                                  "asked_splits": s, "rows": rows})
            print(f"[decode_graph] {name} splits={step.splits} one_pass_upto="
                  f"{step.one_pass_upto}: {summary(rows)}",
                  flush=True)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line: ``--models 4b,8b --splits default,split,4 --gemv-table JSON --out F``."""
    import argparse
    import json
    from pathlib import Path

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="4b,8b")
    ap.add_argument("--splits", default="default",
                    help="comma-separated: 'default' (the step's own form), 'split' "
                         "(split-KV attention, default splits) or a split count")
    ap.add_argument("--gemv-table", default=None, metavar="JSON",
                    help="projection tiles from a decode --tune-gemv run")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--rep", type=int, default=30, help="timed replays per graph")
    ap.add_argument("--dry-run", action="store_true", help="CPU backend, tiny model")
    ap.add_argument("--out", default=None, help="JSON path")
    a = ap.parse_args(argv)
    try:
        named = {"default": None, "split": 0}
        splits = tuple(named[v.strip()] if v.strip() in named else int(v)
                       for v in a.splits.split(",") if v.strip())
    except ValueError:
        ap.error(f"--splits {a.splits!r}: give 'default', 'split' or positive integers")
    if any(s is not None and s < 0 for s in splits):
        ap.error("--splits: split counts are at least 1")
    models = tuple(m.strip() for m in a.models.split(",") if m.strip())
    res = run(models, splits=splits, prompt_len=min(a.prompt, 8) if a.dry_run else a.prompt,
              table=a.gemv_table, dry_run=a.dry_run, rep=3 if a.dry_run else a.rep)
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=2, default=str) + "\n")
        print(f"wrote {a.out}")
    return res


if __name__ == "__main__":
    main()
