"""The suite's groups, in one explicit table: each names its cases (checked and timed
by the case engine, :mod:`benchmarks.suite.run`) and/or a function that measures
something else and returns a JSON-ready dict with a ``status``.

Why a table: a group is run because it is listed here, with what it measures, not
because a module happens to be named like one. ``python -m benchmarks --list`` prints it.

Example:
    >>> list(GROUPS)
    ['runtime', 'compile', 'lab', 'torch', 'memory', 'decode', 'gemm', 'attention']
    >>> GROUPS["gemm"].cases is not None, GROUPS["compile"].func is not None
    (True, True)
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import traceback
from dataclasses import dataclass
from typing import Any, Callable

from ..common import Context
from .cases import Case, build_cases

__all__ = ["Group", "GROUPS", "RUN_ORDER", "case_groups", "run_decode_script"]


@dataclass(frozen=True)
class Group:
    """One named group of the suite.

    ``cases(preset)`` gives the group's checked-and-timed cases (None: none); ``func(ctx)``
    measures the rest and returns a dict with ``status`` ('ok', 'skipped', 'missing',
    'wrong' or 'error'); ``weight`` is the group's share of the case budget;
    ``func_s`` the seconds its function is expected to take on an H200 with the full
    preset (what the wall-clock plan of a run reserves for it); ``backends`` the
    backends whose runs include the group (the others skip it without starting it).

    Example:
        >>> g = Group("x", "an example", func=lambda ctx: {"status": "ok"})
        >>> g.func(Context(backend="cpu"))
        {'status': 'ok'}
    """

    name: str
    description: str
    cases: Callable[[str], list[Case]] | None = None
    func: Callable[[Context], dict[str, Any]] | None = None
    weight: float = 1.0
    func_s: float = 0.0
    backends: tuple[str, ...] = ("cpu", "gpu")


def _cases_of(group: str) -> Callable[[str], list[Case]]:
    def build(preset: str) -> list[Case]:
        return build_cases(preset, [group])
    return build


def _runtime(ctx: Context) -> dict[str, Any]:
    from ..host import runtime

    return runtime.run(ctx)


def _compile(ctx: Context) -> dict[str, Any]:
    from ..host import compile_times

    return compile_times.run(ctx)


def _lab(ctx: Context) -> dict[str, Any]:
    from ..lab import render as lab_render

    return lab_render.run(ctx)


def _torch(ctx: Context) -> dict[str, Any]:
    from ..host import torch_calls

    return torch_calls.run(ctx)


def _memory_ceilings(ctx: Context) -> dict[str, Any]:
    if not ctx.option("ceilings"):
        return {"status": "skipped", "reason": "the device ceilings run with --ceilings"}
    from ..device import ceilings

    return ceilings.run(ctx)


def run_decode_script(ctx: Context,
                      module: str = "benchmarks.decode.throughput") -> dict[str, Any]:
    """``run(...)`` of benchmarks/decode/throughput.py, given the keywords it takes among
    those of :func:`_decode_keywords`; a missing script or one that fails to import is
    reported, not raised; a model whose check failed makes the status 'wrong'.

    Example:
        >>> run_decode_script(Context(backend="cpu"), module="benchmarks.no_such_script")
        ... # doctest: +ELLIPSIS
        {'status': 'missing', 'reason': 'benchmarks/no_such_script.py does not exist...'}
    """
    path = module.replace(".", "/") + ".py"
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return {"status": "missing", "reason": f"{path} does not exist (the decode "
                "benchmark script): nothing was measured"}
    try:
        mod = importlib.import_module(module)
        fn = getattr(mod, "run")
    except Exception as e:
        return {"status": "error", "error": f"{path} failed to import or has no run(): "
                f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-2000:]}
    params = inspect.signature(fn).parameters
    kwargs = {k: v for k, v in _decode_keywords(ctx).items() if k in params}
    out = fn(**kwargs)
    if not isinstance(out, dict):
        return {"status": "error", "error": f"{path}: run() returned {type(out).__name__}, "
                "not a dict"}
    out = dict(out, suite_keywords=sorted(kwargs))
    checks = [m.get("check", {}).get("passed") for m in out.get("models", [])
              if isinstance(m, dict)]
    out.setdefault("status", "wrong" if False in checks else "ok")
    return out


def _decode_keywords(ctx: Context) -> dict[str, Any]:
    """What the suite offers decode/throughput.py's ``run``: on the CPU its dry run (a tiny model);
    on the GPU the 8B shape without the torch.compile baseline, fewer tokens with
    ``--quick``, and the script's own defaults (4B and 8B, torch.compile) with
    ``--decode-full``. Only the keywords ``run`` takes are passed."""
    offer: dict[str, Any] = {"ctx": ctx, "backend": ctx.backend, "quick": ctx.quick,
                             "rounds": ctx.rounds, "rep": ctx.rep}
    if ctx.backend != "gpu":
        return dict(offer, dry_run=True, tokens=4, prompt=8, runs=1)
    if ctx.option("decode_full"):
        return offer
    offer.update(models=("8b",), compile_hf=False, dry_run=False)
    if ctx.quick:
        offer.update(tokens=32, runs=1, contexts=(1024, 8192))
    else:
        offer.update(tokens=128, runs=3)
    return offer


def _decode(ctx: Context) -> dict[str, Any]:
    out: dict[str, Any] = {"status": "ok", "decode_script": run_decode_script(ctx)}
    if ctx.option("decode_attention"):
        from ..decode import attention as decode_attention

        out["decode_attention"] = decode_attention.run(ctx)
    for status in ("error", "wrong", "missing"):
        bad = [v for v in out.values() if isinstance(v, dict) and v.get("status") == status]
        if bad:
            out["status"] = status
            out["reason"] = bad[0].get("reason") or bad[0].get("error", "")
            break
    return out


GROUPS: dict[str, Group] = {g.name: g for g in (
    Group("runtime", "launch overhead (safe vs bare cuda.core.launch, the driver call, the "
          "native module), launches over 10,000 distinct scalar values vs one value (time "
          "and memory), vector add bandwidth vs torch.add and raw cuTile, CUDA graph "
          "replay vs torch graphs, tour GEMM vs raw cuTile and cuBLAS (GPU only)",
          func=_runtime, func_s=60.0),
    Group("compile", "cold compiles per arch, warm compiles in a new process, and the "
          "warm-cache `tilelab compile` command in a new process vs python's start "
          "(target < 0.2 s)", func=_compile, func_s=60.0),
    Group("lab", "a warm %%tile cell (notebook 01's vector add, a tiled GEMM) run and drawn "
          "on the CPU backend through a real IPython shell (target < 0.5 s; CPU runs only: "
          "--backend cpu or --dry-run)", func=_lab, backends=("cpu",)),
    Group("torch", "library calls as a torch user makes them (torch CUDA tensors, torch's "
          "stream, sync=False loops): host time per repeated add vs torch.add and vs "
          "tilelab tensors; back-to-back bf16 matmul vs torch.matmul (GPU only)",
          func=_torch, func_s=40.0),
    Group("memory", "add, softmax, RMSNorm and RoPE vs torch eager, torch.compile (Inductor) "
          "and a copy of the same bytes; --ceilings adds the device's read/write/copy "
          "ceilings (GPU only)",
          cases=_cases_of("memory"), func=_memory_ceilings, weight=4.0),
    Group("decode", "GEMV y = W x over the Qwen3-8B projection weights vs torch.mv; "
          "benchmarks/decode/throughput.py's run() (the Qwen3 decode engine vs transformers; "
          "--decode-full for the script's own defaults); --decode-attention adds split-KV "
          "decode attention over DecodeConfig variants vs SDPA (GPU only)",
          cases=_cases_of("decode"), func=_decode, weight=1.0, func_s=150.0),
    Group("gemm", "bf16/fp16 squares and Qwen3-8B projections vs cuBLAS and raw cuTile",
          cases=_cases_of("gemm"), weight=4.0),
    Group("attention", "flash attention forward (bf16, head_dim 128, 1K-16K) vs SDPA and raw "
          "cuTile", cases=_cases_of("attention"), weight=3.0),
)}

#: the order groups run in: cheap ones first, the largest problems last (a tight budget
#: drops those first)
RUN_ORDER: tuple[str, ...] = tuple(GROUPS)


def case_groups() -> list[str]:
    """The groups that have cases, in run order.

    Example:
        >>> case_groups()
        ['memory', 'decode', 'gemm', 'attention']
    """
    return [n for n in RUN_ORDER if GROUPS[n].cases is not None]
