"""Tuning spaces of the library's host functions, and their raw cuTile twins.

Why here: the library's host functions (``tilelab.kernels.matmul.matmul``,
``attention``, ``softmax``, ``rms_norm``, ``add``, ``apply_rope``) take their tiles as
keyword arguments (``config=MatmulConfig(...)``, ``block_m=``, ...) and pick a default
when given none. The suite wraps each in ``tl.autotune`` over a small space whose first
entry is that default (so the correctness gate compares every other config with what the
library would do anyway), and knows how to give the raw kernels of
``benchmarks/baselines/raw_matmul_attention.py`` the same tiles and schedule as the tuned
safe kernel (safe vs raw must differ in safety only).

Everything here is defensive: if the library's API moved (no ``MatmulConfig``, a renamed
keyword), the function runs untuned and without a raw twin, and the report says why.

Example:
    >>> [sorted(c) for c in SPACES["softmax"].configs()][:1]
    [['block_m', 'block_n']]
"""
from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, replace
from typing import Any, Callable

import tilelab as tl
from tilelab.perf.autotune import autotune

__all__ = ["Space", "SPACES", "tune_impl", "raw_library_adapter"]


@dataclass(frozen=True)
class Space:
    """Configs to search for one op: ``configs()`` builds them (it may import the
    library's config classes), ``prune(configs, args)`` fits them to a problem."""

    params: tuple[str, ...]
    configs: Callable[[], list[dict]]
    prune: Callable[[list[dict], dict], list[dict]] | None = None


def _lib(module: str, name: str) -> Any:
    return getattr(importlib.import_module(module), name)


# --------------------------------------------------------------------------- GEMM

def _gemm_configs() -> list[dict]:
    mc = _lib("tilelab.kernels.matmul", "MatmulConfig")
    return [{"config": None},                              # the library's default_config
            {"config": mc(tm=128, tn=128, tk=64, schedule="grouped", group_m=8)},
            # (128x256 needs 8 worker warps: with 256 threads it spills and ran 15-20x
            # slower in every suite up to r3k)
            {"config": mc(tm=128, tn=256, tk=64, schedule="grouped", group_m=8,
                          num_worker_warps=8)},
            {"config": mc(tm=128, tn=128, tk=64, schedule="persistent", group_m=8)},
            {"config": mc(tm=64, tn=64, tk=64, schedule="grouped", group_m=8)}]


def _first_dim(x: Any) -> int:
    shape = getattr(x, "shape", (1,))
    return int(shape[0]) if len(shape) == 2 else 1


def _prune_gemm(configs: list[dict], args: dict) -> list[dict]:
    """Skinny problems (M <= 16: GEMV and split-K) keep the library's choice; 64-row tiles
    only below M = 128, larger ones from M = 128."""
    names = list(args)
    m = _first_dim(args[names[0]])
    if m <= 16:
        return configs[:1]
    keep = [configs[0]]
    for c in configs[1:]:
        tm = c["config"].tm
        if (tm <= 64) == (m < 128):
            keep.append(c)
    return keep


# --------------------------------------------------------------------------- attention

def _attention_configs() -> list[dict]:
    """The default and the library's two defaults for head_dim 128 (short and long
    sequences): which one wins near 2K-4K keys moves with the GPU's clocks. The former
    candidates, 128x64 tiles and latency hints, won only by noise (r3q at 4K keys: tuned
    at 3.69 ms, timed at 4.10 against the default's 4.01); num_ctas=2 runs 2-50x slower
    (variant_probe i)."""
    ac = _lib("tilelab.kernels.attention", "AttentionConfig")
    return [{"config": None},
            {"config": ac(bm=64, bn=128, occupancy=2)},
            {"config": ac(bm=128, bn=256, num_worker_warps=8, row_sum="mma",
                          persistent=True)}]


# --------------------------------------------------------------------------- memory-bound

def _rows_prune(configs: list[dict], args: dict) -> list[dict]:
    """Keep tiles of at most 16K elements (the library's default is 4K)."""
    x = args[list(args)[0]]
    cols = 1 << max(0, int(x.shape[-1]) - 1).bit_length()
    keep = [configs[0]] + [c for c in configs[1:]
                           if (c.get("block_m") or 1) * min(c.get("block_n") or cols, cols)
                           <= 16384]
    return keep


SPACES: dict[str, Space] = {
    "gemm": Space(("config",), _gemm_configs, _prune_gemm),
    "attention": Space(("config",), _attention_configs),
    # decode GEMV: the library's row-panel default and two occupancy-hinted variants
    "gemv": Space(("config",), lambda: [
        {"config": None},
        {"config": _lib("tilelab.kernels.matmul", "MatmulConfig")(
            tm=1, tn=16, tk=512, schedule="gemv", occupancy=2)},
        {"config": _lib("tilelab.kernels.matmul", "MatmulConfig")(
            tm=1, tn=4, tk=512, schedule="gemv", occupancy=4)}]),
    # memory-bound: one alternative each (every config is a compile: minutes on a cold cache)
    "softmax": Space(("block_m", "block_n"), lambda: [
        {"block_m": None, "block_n": None}, {"block_m": 2, "block_n": None}], _rows_prune),
    "rmsnorm": Space(("block_m", "block_n"), lambda: [
        {"block_m": None, "block_n": None}, {"block_m": 4, "block_n": None}], _rows_prune),
    "add": Space(("block_n",), lambda: [{"block_n": None}, {"block_n": 2048}]),
    "rope": Space(("block_t",), lambda: [{"block_t": None}, {"block_t": 8}]),
}


def _positional(fn: Callable, count: int) -> list[str]:
    params = [p for p in inspect.signature(fn).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return [p.name for p in params[:count]]


def tune_impl(op: str, impl: Any, n_args: int, enabled: bool = True) -> Any:
    """``impl`` with its function wrapped in ``tl.autotune`` over the op's space, when the
    function takes the space's keywords and is not tuned already; else ``impl``. With
    ``enabled=False`` the space is reduced to the library default (the raw twin stays)."""
    space = SPACES.get(op)
    if impl.tuned or space is None:
        return impl
    try:
        params = inspect.signature(impl.fn).parameters
        if not all(p in params for p in space.params) or "out" not in params:
            return impl
        configs = space.configs() if enabled else space.configs()[:1]
        fn = autotune(configs=configs, key=_positional(impl.fn, n_args), prune=space.prune,
                      warmup=2, rep=8, outputs=["out"])(impl.fn)
    except Exception as e:   # the library's API moved: benchmark it untuned
        return replace(impl, note=f"untuned: {type(e).__name__}: {e}")
    mirror = _MIRRORS.get(op)
    return replace(impl, fn=fn, mirror=mirror, family="library",
                   note=f"tuned by the suite over {len(configs)} configs "
                        f"({', '.join(space.params)}; the first is the library default)")


# --------------------------------------------------------------------------- raw twins

def _gemm_dims(case: Any) -> tuple[int, int, int]:
    p = case.params
    return p.get("M", 1), p["N"], p["K"]


def _sms(cpu: int = 132) -> int:
    """The GPU's SM count; on the CPU backend ``cpu`` (132: the H200 the library plans
    for there; 4: the CPU backend's default persistent blocks)."""
    from tilelab.runtime.device import backend, num_sms

    return num_sms("cuda:0") if backend() == "gpu" else cpu


def _effective_gemm(best: dict, case: Any) -> Any:
    cfg = best.get("config")
    if cfg is not None:
        return cfg
    m, n, k = _gemm_dims(case)
    default = _lib("tilelab.kernels.matmul", "default_config")
    # decode's gemv(w, x) multiplies by the (N, K) weight's transposed view
    return default(m, n, k, case.dtype, num_sms=_sms(), b_transposed=case.op == "gemv")


def _mirror_gemm(best: dict, case: Any) -> tuple[dict, dict] | None:
    """Raw kwargs with the safe winner's tiles, schedule and worker warps, and the safe
    config that matches them (hints the raw kernels do not take are dropped from the
    safe side)."""
    cfg = _effective_gemm(best, case)
    bare = cfg.with_(latency=None, occupancy=None, num_ctas=None)
    if bare.schedule == "gemv":
        bare = bare.with_(num_worker_warps=None)
    if cfg.schedule == "splitk" or (cfg.schedule == "gemv" and cfg.split_k > 1):
        bare = bare.with_(split_k=1, schedule="gemv" if cfg.schedule == "gemv" else "grouped")
    swap = getattr(bare, "swap_ab", False)
    if swap and bare.schedule == "persistent":      # the raw twin swaps grouped tiles only
        bare, swap = bare.with_(swap_ab=False), False
    if case is not None and case.op == "gemv" and bare.schedule != "gemv":
        return None        # the raw decode twin is the rows GEMV only
    if bare.schedule == "gemv":
        raw = {"schedule": "gemv", "tn": bare.tn, "tk": bare.tk}
    else:
        raw = {"schedule": bare.schedule, "tm": bare.tm, "tn": bare.tn, "tk": bare.tk,
               "group_m": bare.group_m, "num_blocks": bare.num_blocks}
        if swap:
            raw["swap_ab"] = True
        if bare.num_worker_warps is not None:
            raw["num_worker_warps"] = bare.num_worker_warps
    return raw, (best if bare == cfg else {"config": bare})


def _mirror_attention(best: dict, case: Any) -> tuple[dict, dict] | None:
    cfg = best.get("config")
    if cfg is None:
        cfg = _lib("tilelab.kernels.attention", "default_attention_config")(
            case.params["D"], kv_len=case.params["S"])
    bare = cfg.with_(latency_k=None, latency_v=None)   # the raw kernel takes no latency
    raw = {"bm": bare.bm, "bn": bare.bn,
           "sum_mma": getattr(bare, "row_sum", "reduce") == "mma",
           "persistent": getattr(bare, "persistent", False), "occupancy": bare.occupancy,
           "num_worker_warps": bare.num_worker_warps}
    return raw, (best if bare == cfg else {"config": bare})


_MIRRORS = {"gemm": _mirror_gemm, "gemv": _mirror_gemm, "attention": _mirror_attention}


def _launch(spec: tuple) -> None:
    """Run a ``(grid, kernel, args)`` triple: ct.launch on the GPU, the interpreter on the
    CPU backend (with numpy arrays)."""
    grid, kernel, args = spec
    from tilelab.runtime.device import backend

    if backend() == "cpu":
        tl.interpret(kernel, *args, grid=grid, trace=False)
        return
    import cuda.tile as ct
    import torch

    ct.launch(torch.cuda.current_stream(), grid, kernel, args)


def raw_library_adapter(op: str, module: Any) -> Callable | None:
    """A host function (suite convention) over the ``*_launch`` helpers of
    ``raw_matmul_attention.py``, or None when the module lacks them."""
    if op == "gemm" and hasattr(module, "matmul_launch"):
        def raw_matmul(a, b, *, out, schedule="grouped", tm=128, tn=128, tk=64, group_m=8,
                       num_blocks=None, swap_ab=False, num_worker_warps=None):
            if schedule == "gemv":
                _launch(module.gemv_launch(out, a, b, tn, tk))
            elif schedule == "persistent":
                blocks = num_blocks or _sms(cpu=4)
                _launch(module.persistent_matmul_launch(out, a, b, blocks, tm, tn, tk,
                                                        group_m, num_worker_warps))
            else:   # row-major is the grouped walk with one tile row per group
                _launch(module.matmul_launch(out, a, b, tm, tn, tk,
                                             group_m if schedule == "grouped" else 1,
                                             swap_ab, num_worker_warps))
            return out
        return raw_matmul
    if op == "gemv" and hasattr(module, "gemv_rows_launch"):
        def raw_gemv(w, x, *, out, schedule="gemv", tn=8, tk=512):
            # y[1, N] = W x, streaming W's rows as the library's gemv(w, x) does
            _launch(module.gemv_rows_launch(out.reshape(1, -1), x.reshape(1, -1), w, tn,
                                            tk))
            return out
        return raw_gemv
    if op == "attention" and hasattr(module, "flash_attention_launch"):
        def raw_attention(q, k, v, *, out, causal=False, scale=None, bm=128, bn=64,
                          sum_mma=False, persistent=False, occupancy=None,
                          num_worker_warps=None):
            b, h, s, d = q.shape
            o3 = out.reshape(b * h, s, d)
            # as the library: one block per SM times its occupancy
            blocks = _sms() * (occupancy or 1) if persistent else None
            _launch(module.flash_attention_launch(o3, q, k, v, causal=causal, scale=scale,
                                                  bm=bm, bn=bn, sum_mma=sum_mma,
                                                  num_blocks=blocks, occupancy=occupancy,
                                                  num_worker_warps=num_worker_warps))
            return out
        return raw_attention
    return None

