"""Qwen3 decode on the GPU: the tilelab engine against Hugging Face transformers.

For Qwen3-4B- and 8B-shaped models with random bf16 weights (built on the device from
the real configs: nothing is downloaded), batch 1, a 128-token prompt and 256 new
tokens, this measures, in one run:

1. correctness first, on the same weights: the engine's prefill logits against
   transformers' (max error as a fraction of the logits' spread, top-1 agreement),
   and 64 greedy tokens (the matching prefix, and the first near-tie of the reference,
   up to which they must match);
2. decode tokens/s (the prefill excluded, median of ``--runs``) of the engine's
   replayed graph and of its plain launches, of transformers eager and of
   transformers with a static cache and ``torch.compile``; with ``--compare-fusion``
   also of the engine's decode step in its other form (RMSNorms fused into the GEMVs,
   the default, or launched apart: ``--unfused``), same weights and tiles, and with
   ``--compare-rope-attention`` of the step with ``StepConfig.fuse_rope_attention``
   flipped (q/k norm + RoPE inside the one-pass attention: ``--rope-attention``);
3. the fraction of the nominal HBM roofline: bytes per token (every weight but the
   embedding table, which counts only as a tied lm_head, plus the KV cache at the
   mean context) x tokens/s / the GPU's nominal bandwidth;
4. a per-kernel breakdown of one step (CUDA events around each launch, L2 flushed;
   bytes from :mod:`tilelab.models.step_cost`, fraction of bandwidth), and each kernel
   kind's cost inside the replayed graph (the step without that kind,
   :mod:`benchmarks.decode.graph`);
5. decode attention against torch SDPA at contexts 1K-32K.

Everything goes into one JSON (GPU, driver, versions, date). ``--dry-run`` runs the
same code on the CPU backend with a tiny config and a few tokens.

Usage::

    python -m benchmarks.decode --models 4b,8b --tokens 256
    python -m benchmarks.decode --tune-gemv --compare-fusion --no-compile
    python -m benchmarks.decode --models 4b,8b --no-compile --compare-rope-attention
    python -m benchmarks.decode --dry-run

(``python -m benchmarks.decode`` runs this module's :func:`main`.)
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..common import RESULTS
from . import graph as decode_graph
from . import tune as decode_tune
from .models import SHAPES, build_models, env_info, nominal_bandwidth, say
from .reference import check, hf_compiled_tok_s, hf_tok_s, shared_prefix
from .step_attention import attention_vs_sdpa

CONTEXTS = (128, 256, 384, 512, 1024, 2048, 4096, 8192, 16384, 32768)
CHECK_TOKENS = 64


# ------------------------------------------------------------------ 2. tokens/s

def engine_tok_s(engine: Any, prompt: list[int], n: int, runs: int,
                 graph: bool) -> dict[str, Any]:
    """Decode tokens/s of the engine: ``n - 1`` steps after the prefill, timed alone."""
    samples = []
    for _ in range(runs):
        step = engine.begin(prompt)
        t0 = time.perf_counter()
        fut = None
        for _ in range(n - 1):
            if engine.device == "cpu" and fut is not None:
                fut.wait()
            fut = step.replay() if graph else step.run()
        if fut is not None:
            fut.wait()
        samples.append((n - 1) / (time.perf_counter() - t0))
    return {"tok_s": statistics.median(samples), "samples": samples}


def graph_without_pdl(engine: Any, prompt: list[int], n: int, runs: int) -> dict[str, Any]:
    """The graph's tokens/s with programmatic dependent launch off: the step's graph
    captured again with ordinary edges only (``TILELAB_PDL=0``), timed, then the
    default graph put back."""
    from tilelab import config

    step = engine.begin(prompt)
    saved, step.graph = step.graph, None
    try:
        with config.override(pdl="0"):
            step.capture()
            out = engine_tok_s(engine, prompt, n, runs, graph=True)
            out["pdl"] = step.graph.pdl
    finally:
        step.graph = saved
    return out


# ------------------------------------------------------------------ 4. per kernel

def kernel_breakdown(engine: Any, context: int, bandwidth: float) -> list[dict[str, Any]]:
    """Device time of one launch of each kernel kind (the second layer's where there is
    one: the first layer's GEMVs add no previous down projection), times its launches
    per step, next to its counted bytes."""
    import tilelab as tl

    step = engine.decode_step()
    cache = engine.cache
    rows = {r.kernel: r for r in engine.step_cost(context)}
    pick: dict[str, Any] = {}
    for launch in step.launches:
        if launch.kind not in pick or pick[launch.kind].layer == 0:
            pick[launch.kind] = launch
    out = []
    for launch in pick.values():
        cache.pos.copy_(np.array([context - 1], np.int32))
        r = tl.bench(launch.run, warmup=3, rep=20, name=launch.kind)
        row = rows[launch.kind]
        per_launch_bytes = row.bytes / row.launches
        out.append({"kernel": launch.kind, "launches": row.launches,
                    "us_per_launch": r.median * 1e6, "us_per_step": r.median * 1e6 *
                    row.launches, "bytes_per_launch": per_launch_bytes,
                    "fraction_of_bandwidth": per_launch_bytes / r.median / bandwidth})
    cache.pos.copy_(np.array([context - 1], np.int32))
    total = sum(o["us_per_step"] for o in out) or 1.0
    for o in out:
        o["share_of_step"] = o["us_per_step"] / total
    return out


# ------------------------------------------------------------------ the run

def run_model(name: str, device: str, prompt_len: int, tokens: int, runs: int,
              compile_hf: bool, bandwidth: float, deadline: float = math.inf,
              step_config: Any = None, tune: bool = False,
              table_from: str | None = None, compare_fusion: bool = False,
              one_pass_bns: tuple[int, ...] = (),
              compare_prefetch: bool = False,
              compare_rope: bool = False) -> dict[str, Any]:
    """Everything measured for one model shape; transformers with torch.compile is
    skipped when fewer than 150 s are left before ``deadline`` (a perf_counter time);
    ``tune``: time the projection GEMVs' tiles first and decode with the winners;
    ``table_from``: a decode JSON whose tuning of this model gives the tiles instead;
    ``compare_fusion``: also time the step's other form (:func:`other_form`);
    ``one_pass_bns``: keys per step of the one-pass attention to time in the step (the
    fastest is kept, :func:`_fastest_one_pass`); ``compare_prefetch``: replay the step
    with the projections' weight tiles loaded one and two ahead of their wait too
    (:func:`decode_tune.compare_prefetch`); ``compare_rope``: also time the step with
    ``StepConfig.fuse_rope_attention`` flipped (:func:`other_form`)."""
    from tilelab.models.step_cost import decode_bytes_per_token

    t0 = time.perf_counter()
    hf, engine = build_models(name, device, step_config=step_config)
    rng = np.random.default_rng(0)
    prompt = rng.integers(0, engine.config.vocab_size, prompt_len).tolist()
    res: dict[str, Any] = {"model": name, "shape": SHAPES[name], "prompt": prompt_len,
                           "new_tokens": tokens, "build_s": time.perf_counter() - t0}
    if tune:
        engine, res["gemv_tuning"] = _tuned(engine, step_config, device)
    elif table_from:
        engine, res["gemv_tuning"] = _fastest_table(engine, step_config, name, table_from,
                                                    prompt)
    if one_pass_bns:
        engine, res["one_pass_bn"] = _fastest_one_pass(engine, one_pass_bns, prompt, tokens)
    res["check"] = check(hf, engine, prompt, min(CHECK_TOKENS, tokens))
    say(f"{name}: check {res['check']}")
    res["engine_graph"] = engine_tok_s(engine, prompt, tokens, runs, graph=True)
    res["engine_graph"]["pdl"] = engine.begin(prompt).capture().pdl
    res["engine_graph_without_pdl"] = graph_without_pdl(engine, prompt, tokens, runs)
    say(f"{name}: graph {res['engine_graph']['tok_s']:.1f} tok/s "
         f"({res['engine_graph']['pdl']}), without PDL "
         f"{res['engine_graph_without_pdl']['tok_s']:.1f}")
    # plain launches are host-bound and steady from the first steps: fewer tokens
    res["engine_launches"] = engine_tok_s(engine, prompt, min(tokens, 64), runs,
                                          graph=False)
    say(f"{name}: engine {res['engine_graph']['tok_s']:.1f} tok/s (graph), "
         f"{res['engine_launches']['tok_s']:.1f} (launches)")
    res["hf_eager"] = hf_tok_s(hf, prompt, tokens, runs, device)
    say(f"{name}: transformers eager {res['hf_eager']['tok_s']:.1f} tok/s")
    if compile_hf and deadline - time.perf_counter() < 150:
        res["hf_static_compiled"] = {"error": "skipped: too little of the time budget left"}
    elif compile_hf:
        res["hf_static_compiled"] = hf_compiled_tok_s(hf, prompt, tokens, runs, device)
        say(f"{name}: transformers static+compile {res['hf_static_compiled']}")
    mean_ctx = prompt_len + tokens // 2
    per_token = decode_bytes_per_token(engine.config, mean_ctx)
    res["bytes_per_token"] = per_token
    for key in ("engine_graph", "engine_launches", "hf_eager", "hf_static_compiled"):
        r = res.get(key)
        if r and "tok_s" in r:
            r["fraction_of_hbm_roofline"] = per_token * r["tok_s"] / bandwidth
    res["kernels"] = kernel_breakdown(engine, prompt_len + 1, bandwidth)
    # inside the replayed graph: each kind's cost as the step without it
    res["graph_ablation"] = decode_graph.ablation(engine, prompt, rep=3 if device == "cpu"
                                                  else 30)
    say(f"{name}: in the graph: {decode_graph.summary(res['graph_ablation'])}")
    # the kernels' device time against the replayed step's wall time: the gap is what
    # launch latency and the kernels' tails cost inside the graph
    res["kernels_sum_us"] = sum(k["us_per_step"] for k in res["kernels"])
    res["graph_step_us"] = 1e6 / res["engine_graph"]["tok_s"]
    res["step_cost"] = [r.to_dict() for r in engine.step_cost(prompt_len + 1)]
    res["fuse_norms"] = engine.step_config.fuse_norms
    res["launches_per_step"] = len(engine.decode_step().launches)
    res["fuse_rope_attention"] = engine.step_config.fuse_rope_attention
    if compare_fusion:
        res["other_form"] = other_form(engine, prompt, tokens, runs, bandwidth)
    if compare_rope:
        res["rope_form"] = other_form(engine, prompt, tokens, runs, bandwidth,
                                      "fuse_rope_attention")
    if compare_prefetch:
        res["prefetch"] = decode_tune.compare_prefetch(engine, prompt,
                                                       decode_graph.replay_us)
        say(f"{name}: step by prefetch depth: " + ", ".join(
            f"{k} {v:.1f} us" for k, v in res["prefetch"]["median_step_us"].items()))
    del hf, engine
    if device == "gpu":
        import torch

        torch.cuda.empty_cache()
    res["total_s"] = time.perf_counter() - t0
    return res


def _fastest_table(engine: Any, step_config: Any, name: str, paths: str,
                   prompt: list[int]) -> tuple[Any, dict[str, Any]]:
    """The engine with the projection tiles of the decode JSON at ``paths`` (several,
    comma-separated: each one's step replayed, the fastest kept)."""
    best = None
    timed = []
    for path in [p for p in paths.split(",") if p]:
        eng, info = decode_tune.engine_from_table(engine, step_config, name, path)
        step = eng.begin(prompt)
        us = decode_graph.replay_us(eng, step.capture(), step.position)
        timed.append({"source": path, "step_us": us})
        if best is None or us < best[0]:
            best = (us, eng, info)
    say(f"{name}: step with each GEMV table: " +
         ", ".join(f"{t['source']} {t['step_us']:.1f} us" for t in timed))
    return best[1], dict(best[2], tables_timed=timed)


def _fastest_one_pass(engine: Any, bns: tuple[int, ...], prompt: list[int],
                      tokens: int) -> tuple[Any, dict[str, Any]]:
    """The engine with the one-pass attention's keys per step (of ``bns``) whose
    replayed step is fastest, summed over three positions of the run that the one-pass
    form covers (the first, middle and last token)."""
    import dataclasses

    from tilelab.models import Qwen3

    timed = []
    best = None
    for bn in bns:
        try:
            eng = Qwen3(engine.weights, max_tokens=engine.cache.capacity,
                        step_config=dataclasses.replace(engine.step_config, one_pass_bn=bn))
            step = eng.begin(prompt)
            first = step.position
            spots = [p for p in (first, first + tokens // 2, first + tokens - 2)
                     if step.one_pass_at(p + 1)] or [first]
            us = [decode_graph.replay_us(eng, step.capture(), p) for p in spots]
        except Exception as e:      # e.g. a tile that does not fit: keep the others
            timed.append({"one_pass_bn": bn, "error": f"{type(e).__name__}: {e}"[:500]})
            continue
        timed.append({"one_pass_bn": bn, "positions": spots, "step_us": us})
        if best is None or sum(us) < best[0]:
            best = (sum(us), eng, bn)
    if best is None:
        raise SystemExit(f"decode.py: no one-pass keys per step of {bns} ran: {timed}")
    say("step with each one-pass keys per step: " + ", ".join(
        f"{t['one_pass_bn']}: " + ("/".join(f"{u:.1f}" for u in t["step_us"]) + " us"
                                   if "step_us" in t else t["error"]) for t in timed))
    return best[1], {"chosen": best[2], "timed": timed}


def _tuned(engine: Any, step_config: Any, device: str) -> tuple[Any, dict[str, Any]]:
    """The engine rebuilt with the measured best tiles of each projection GEMV (on the
    CPU backend, a dry run, three of the candidates with three timed calls each)."""
    cands, rep = decode_tune.CANDIDATES, 30
    if device == "cpu":
        cands, rep = decode_tune.CANDIDATES[::7], 3
    tuned, info = decode_tune.tuned_engine(engine, step_config, candidates=cands, rep=rep)
    say(f"gemv tiles ({len(cands)} candidates per projection, "
         f"{info['seconds']:.0f} s):\n" + decode_tune.summary(info["candidates"]))
    return tuned, info


def other_form(engine: Any, prompt: list[int], tokens: int, runs: int,
               bandwidth: float, flag: str = "fuse_norms") -> dict[str, Any]:
    """The engine's weights and tiles in the decode step's other form, the
    ``StepConfig`` field ``flag`` flipped (``fuse_norms``: norms fused into the GEMVs,
    or launched apart; ``fuse_rope_attention``: q/k norm and RoPE inside the attention,
    or a kernel of their own): tokens/s of its replayed graph, its per-kernel
    breakdown, and how many greedy tokens it shares with the engine's form."""
    import dataclasses

    from tilelab.models import Qwen3

    cfg = engine.step_config
    other = Qwen3(engine.weights, max_tokens=engine.cache.capacity,
                  step_config=dataclasses.replace(cfg, **{flag: not getattr(cfg, flag)}))
    n = min(CHECK_TOKENS, tokens)
    mine, theirs = engine.generate(prompt, n), other.generate(prompt, n)
    res: dict[str, Any] = {"flag": flag, flag: not getattr(cfg, flag),
                           "fuse_norms": other.step_config.fuse_norms,
                           "launches_per_step": len(other.decode_step().launches),
                           "greedy_tokens": n,
                           "greedy_matching_prefix": shared_prefix(mine, theirs)}
    res["engine_graph"] = engine_tok_s(other, prompt, tokens, runs, graph=True)
    res["kernels"] = kernel_breakdown(other, len(prompt) + 1, bandwidth)
    res["kernels_sum_us"] = sum(k["us_per_step"] for k in res["kernels"])
    res["graph_step_us"] = 1e6 / res["engine_graph"]["tok_s"]
    say(f"other form ({flag}={not getattr(cfg, flag)}): "
         f"{res['engine_graph']['tok_s']:.1f} tok/s")
    return res


def run(models: tuple[str, ...] = ("4b", "8b"), *, tokens: int = 256, prompt: int = 128,
        runs: int = 3, dry_run: bool = False, compile_hf: bool = True,
        contexts: tuple[int, ...] = CONTEXTS, budget_s: float = 510.0,
        save: str | None = None, step_config: Any = None,
        tune: bool = False, table_from: str | None = None,
        compare_fusion: bool = False, one_pass_bns: tuple[int, ...] = (),
        compare_prefetch: bool = False, compare_rope: bool = False) -> dict[str, Any]:
    """Run the benchmark and return the result dict (see the module docstring).
    ``dry_run`` uses the CPU backend and the tiny config; ``budget_s`` is the time the
    whole run should take (transformers with torch.compile is skipped when it would not
    fit); ``save``: a JSON path rewritten after each model, so a run cut short keeps
    what it measured; ``step_config``: the engine's decode tiles (``StepConfig``);
    ``compare_fusion``: time the decode step's other form too (norms fused into the
    GEMVs or not: ``StepConfig.fuse_norms``), with the same weights and tiles;
    ``one_pass_bns``: one-pass attention keys per step to time in the step (fastest kept);
    ``compare_prefetch``: the step with one and two weight tiles loaded ahead of the
    projections' waits, beside the chosen tiles; ``compare_rope``: the step with and
    without ``StepConfig.fuse_rope_attention``, same weights and tiles.

    Example:
        >>> r = run(dry_run=True, tokens=3, prompt=4, runs=1)       # doctest: +SKIP
        >>> r["models"][0]["check"]["passed"]                         # doctest: +SKIP
        True
    """
    import tilelab as tl

    device = "cpu" if dry_run else tl.backend()
    if dry_run:
        models = ("tiny",) if models else ()
        contexts, compile_hf = tuple(c for c in (64, 256)), False
    info = env_info(device)
    gpu_name, bandwidth = nominal_bandwidth(info.get("gpu"))
    result: dict[str, Any] = {"benchmark": "decode", "env": info,
                              "step_config": repr(step_config) if step_config else "default",
                              "bandwidth_gpu": gpu_name, "nominal_bandwidth": bandwidth,
                              "dry_run": dry_run, "models": []}
    deadline = time.perf_counter() + budget_s
    for name in models:
        result["models"].append(run_model(name, device, prompt, tokens, runs, compile_hf,
                                          bandwidth, deadline, step_config, tune,
                                          table_from, compare_fusion, one_pass_bns,
                                          compare_prefetch, compare_rope))
        _save(result, save)
    result["attention_vs_sdpa"] = attention_vs_sdpa(contexts, device)
    _save(result, save)
    return result


def _save(result: dict[str, Any], path: str | None) -> None:
    if path:
        Path(path).write_text(json.dumps(result, indent=2, default=str) + "\n")


def summary(result: dict[str, Any]) -> str:
    """A few lines for the terminal."""
    lines = [f"decode benchmark on {result['env'].get('gpu') or 'the CPU backend'} "
             f"(roofline of {result['bandwidth_gpu']})"]
    for m in result["models"]:
        c = m["check"]
        lines.append(f"  {m['model']}: check {'passed' if c['passed'] else 'FAILED'} "
                     f"(logits rel err {c['logits_rel_error']:.3g} vs transformers-bf16 "
                     f"{c['hf_bf16_logits_rel_error']:.3g}; top-1 {c['top1_agreement']:.2f} "
                     f"vs {c['hf_bf16_top1_agreement']:.2f}; greedy prefix "
                     f"{c['greedy_matching_prefix']}/{c['greedy_tokens']} vs "
                     f"{c['hf_bf16_greedy_matching_prefix']}, first near tie "
                     f"{c['first_near_tie']})")
        for key in ("engine_graph", "engine_launches", "hf_eager", "hf_static_compiled"):
            r = m.get(key)
            if r is None:
                continue
            if "tok_s" in r:
                lines.append(f"    {key:<20} {r['tok_s']:10.1f} tok/s  "
                             f"{100 * r['fraction_of_hbm_roofline']:5.1f}% of the HBM "
                             "roofline")
            else:
                lines.append(f"    {key:<20} {r.get('error')}")
        lines.append(f"    one step ({m['launches_per_step']} launches, fuse_norms="
                     f"{m['fuse_norms']}, fuse_rope_attention="
                     f"{m.get('fuse_rope_attention', False)}): "
                     f"{m['graph_step_us']:.0f} us replayed, kernels "
                     f"alone {m['kernels_sum_us']:.0f} us")
        if "one_pass_bn" in m:
            lines.append(f"    one-pass attention keys per step: {m['one_pass_bn']['chosen']} "
                         "(of " + ", ".join(str(t["one_pass_bn"])
                                            for t in m["one_pass_bn"]["timed"]) + ")")
        top = sorted(m["kernels"], key=lambda k: -k["us_per_step"])[:4]
        lines.append("    most time: " + ", ".join(
            f"{k['kernel']} {k['us_per_step']:.0f} us ({100 * k['share_of_step']:.0f}%)"
            for k in top))
        for o in (m.get("other_form"), m.get("rope_form")):
            if not o:
                continue
            flag = o.get("flag", "fuse_norms")
            lines.append(f"    other form ({o['launches_per_step']} launches, {flag}="
                         f"{o[flag]}): {o['engine_graph']['tok_s']:.1f} tok/s, "
                         f"{o['graph_step_us']:.0f} us replayed, kernels alone "
                         f"{o['kernels_sum_us']:.0f} us; greedy tokens shared "
                         f"{o['greedy_matching_prefix']}/{o['greedy_tokens']}")
    for a in result["attention_vs_sdpa"]:
        lines.append(f"  attention @ {a['context']:>6}: {a['tilelab_us']:9.1f} us "
                     f"({a['form']}; split {a['split_us']:.1f}, one pass "
                     f"{a['one_pass_us']:.1f}) vs SDPA {a['sdpa_us']:9.1f} us "
                     f"({a['speedup_vs_sdpa']:.2f}x), err {a['max_abs_error']:.2g}")
    return "\n".join(lines)


def _step_config(ap: argparse.ArgumentParser, gemv: str | None, splits: int | None,
                 fuse_norms: bool = True, rope: bool = False) -> Any:
    if gemv is None and splits is None and fuse_norms and not rope:
        return None
    from tilelab.kernels.decode.gemv import GemvConfig
    from tilelab.models.decode_step import StepConfig

    cfg = None
    if gemv is not None:
        try:
            bn, bk = (int(v) for v in gemv.split(","))
            cfg = GemvConfig(bn=bn, bk=bk)
        except ValueError as e:
            ap.error(f"--gemv {gemv!r}: give two powers of two, rows,K ({e})")
    return StepConfig(gemv=cfg, attn_splits=splits, fuse_norms=fuse_norms,
                      fuse_rope_attention=rope)


def _ints(ap: argparse.ArgumentParser, flag: str, text: str | None) -> tuple[int, ...]:
    if not text:
        return ()
    try:
        vals = tuple(int(v) for v in text.split(","))
    except ValueError:
        ap.error(f"{flag} {text!r}: give comma-separated powers of two, e.g. 64,128")
    if any(v < 16 or v & (v - 1) for v in vals):
        ap.error(f"{flag} {text!r}: each value must be a power of two >= 16")
    return vals


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line: ``--models 4b,8b --tokens N --runs R --dry-run --no-compile --out F``
    (``--gemv BN,BK`` and ``--attn-splits N`` tune the engine's decode step;
    ``--unfused`` and ``--compare-fusion`` choose and compare its two forms)."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks.decode",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="4b,8b", help="comma-separated: 4b, 8b")
    ap.add_argument("--tokens", type=int, default=256, help="new tokens per run")
    ap.add_argument("--prompt", type=int, default=128, help="prompt length")
    ap.add_argument("--runs", type=int, default=3, help="timed runs (median)")
    ap.add_argument("--dry-run", action="store_true",
                    help="CPU backend, tiny config, a few tokens")
    ap.add_argument("--no-compile", action="store_true",
                    help="skip transformers with torch.compile")
    ap.add_argument("--budget", type=float, default=510.0,
                    help="seconds the run may take (transformers+compile is skipped "
                         "when it would not fit)")
    ap.add_argument("--gemv", default=None, metavar="BN,BK",
                    help="tiles of the projection GEMVs (rows per block, K per step)")
    ap.add_argument("--tune-gemv", action="store_true",
                    help="time the projection GEMVs' tiles first, decode with the best")
    ap.add_argument("--gemv-table", default=None, metavar="JSON[,JSON]",
                    help="take the projection tiles from an earlier --tune-gemv run (of "
                         "several, the one whose step replays fastest)")
    ap.add_argument("--attention-only", action="store_true",
                    help="only decode attention against SDPA (no models)")
    ap.add_argument("--one-pass-bn", default=None, metavar="BN[,BN]",
                    help="keys per step of the one-pass attention (several: each timed "
                         "in the replayed step, the fastest kept)")
    ap.add_argument("--attn-splits", type=int, default=None,
                    help="KV splits per KV head of decode attention")
    ap.add_argument("--unfused", action="store_true",
                    help="decode with the norms as kernels of their own (9 per layer, "
                         "not 7)")
    ap.add_argument("--compare-fusion", action="store_true",
                    help="also time the step's other form (norms fused or not), same "
                         "weights and tiles")
    ap.add_argument("--rope-attention", action="store_true",
                    help="decode with the q/k norm and RoPE inside the one-pass "
                         "attention (StepConfig.fuse_rope_attention: 5 kernels per layer)")
    ap.add_argument("--compare-rope-attention", action="store_true",
                    help="also time the step with fuse_rope_attention flipped, same "
                         "weights and tiles, with its per-kernel breakdown")
    ap.add_argument("--compare-prefetch", action="store_true",
                    help="also replay the step with the projections loading one and two "
                         "weight tiles before their wait")
    ap.add_argument("--out", default=None, help="JSON path (default: benchmarks/results/"
                                                "decode_<gpu>_<date>.json; none for a dry run)")
    a = ap.parse_args(argv)
    models = tuple(m.strip() for m in a.models.split(",") if m.strip())
    bad = [m for m in models if m not in ("4b", "8b")]
    if bad:
        ap.error(f"unknown model {bad[0]!r}: choose 4b and/or 8b")
    if a.attention_only:
        models = ()
    tokens, prompt, runs = a.tokens, a.prompt, a.runs
    if a.dry_run:
        tokens, prompt, runs = min(tokens, 4), min(prompt, 8), 1
    out = a.out
    if out is None and not a.dry_run:
        import tilelab as tl

        gpu = "gpu"
        if tl.backend() == "gpu":
            from tilelab.runtime.device import gpu as get_gpu

            gpu = get_gpu().name.lower().replace("nvidia ", "")
        out = str(RESULTS /
                  f"decode_{gpu.replace(' ', '_')}_{datetime.date.today()}.json")
    result = run(models, tokens=tokens, prompt=prompt, runs=runs, dry_run=a.dry_run,
                 compile_hf=not a.no_compile, budget_s=a.budget, save=out,
                 step_config=_step_config(ap, a.gemv, a.attn_splits, not a.unfused,
                                          a.rope_attention),
                 tune=a.tune_gemv, table_from=a.gemv_table,
                 compare_fusion=a.compare_fusion, compare_prefetch=a.compare_prefetch,
                 compare_rope=a.compare_rope_attention,
                 one_pass_bns=_ints(ap, "--one-pass-bn", a.one_pass_bn))
    print(summary(result))
    if out:
        print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
