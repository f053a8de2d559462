"""The ``compile`` group: compile times, cold and warm, and what a warm ``tilelab
compile`` costs in a new process.

* **cold**: the tour's kernels (vector add, bf16 GEMM 128x128x64, row softmax,
  persistent GEMM) compiled into an empty cache, per arch (sm_90 with ``--quick``;
  sm_80, sm_90, sm_100 and sm_120 otherwise), with each stage's time. Gate: a cubin
  came out and the cache missed.
* **warm_new_process**: a fresh Python process per run compiles the same kernels
  against the cache the cold run filled (the imports are outside the timed region, as
  a notebook pays them once). Gate: every compile hits the cache.
* **cli**: the whole ``tilelab compile FILE::add --arch sm_90`` command, warm cache, in
  a new process, timed from the caller's side: wall clock and the child's CPU time
  (user + system, which a loaded host inflates less), median of the runs; the baselines
  in the same interleaved runs are ``python -c pass`` (the interpreter's start) and
  ``python -c "import tilelab"``. Measured twice: ``bytecode`` (the first run wrote
  ``.pyc`` files, later runs read them; they go to a ``PYTHONPYCACHEPREFIX`` folder of the
  run's own, never beside the sources of the checkout or the installation) and
  ``no_bytecode`` (``PYTHONDONTWRITEBYTECODE=1`` with ``PYTHONPYCACHEPREFIX`` an empty
  folder: no module has byte-code, so every run compiles the source of every module it
  imports, the standard library's too). Gate: the command succeeds and reports a disk
  cache hit. Target: a median wall clock under 0.2 s with byte-code (``median_s``,
  ``target_met``).

No GPU is needed: the group runs the same on the CPU backend.

Example:
    >>> r = run(Context(backend="cpu", quick=True, options={"compile_runs": 1}))
    ... # doctest: +SKIP
    >>> r["cli"]["target_met"] in (True, False)                     # doctest: +SKIP
    True
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from ..common import Context

__all__ = ["run", "variant_envs", "CLI_TARGET_S", "ARCHS"]

ARCHS = ("sm_80", "sm_90", "sm_100", "sm_120")
CLI_TARGET_S = 0.2

_CASES = textwrap.dedent("""
    import tilelab as tl
    from tilelab.kernels.examples import gemm, next_pow2, persistent_gemm, softmax, vector_add
    x = tl.spec(1 << 20, "float32")
    a = tl.spec((4096, 4096), "bfloat16")
    s = tl.spec((4096, 1000), "float32")
    CASES = {
        "vector_add": (vector_add, (x.partition(1024), x, x)),
        "gemm_bf16_128x128x64": (gemm, (a.partition((128, 128)), a, a, 64)),
        "softmax": (softmax, (s.partition((4, next_pow2(1000))), s)),
        "persistent_gemm": (persistent_gemm,
                            (a.partition((128, 128), schedule=tl.persistent(group_m=8)),
                             a, a, 64)),
    }
""")

_WARM = _CASES + textwrap.dedent("""
    import json, sys, time
    out = {}
    for name, (k, args) in CASES.items():
        t0 = time.perf_counter()
        art = k.compile(*args, arch=sys.argv[1])
        out[name] = {"seconds": time.perf_counter() - t0, "hit": art.cache_hit}
    print(json.dumps(out))
""")

_CLI_KERNEL = textwrap.dedent('''
    import tilelab as tl


    @tl.kernel
    def add(z: tl.Out, x: tl.In, y: tl.In):
        z.store(tl.load_like(x, z) + tl.load_like(y, z))


    _X = tl.spec(4096, "float32")
    TILELAB_EXAMPLES = {"add": (_X.partition(256), _X, _X)}
''')


def _cold(archs: tuple[str, ...]) -> dict:
    ns: dict = {}
    exec(_CASES, ns)
    out = {}
    for arch in archs:
        for name, (k, args) in ns["CASES"].items():
            t0 = time.perf_counter()
            art = k.compile(*args, arch=arch)
            wall = time.perf_counter() - t0
            ok = bool(art.cubin) and not art.cache_hit
            out[f"{name}@{arch}"] = {"status": "ok" if ok else "wrong", "wall_s": wall,
                                     "cache_hit": art.cache_hit, "stages_s": art.timings,
                                     "cubin_bytes": len(art.cubin)}
            print(f"  compile/cold {name:22s} {arch:7s} {wall * 1e3:8.0f} ms", flush=True)
    return out


def _warm(env: dict, arch: str, runs: int) -> dict:
    per: dict[str, list[float]] = {}
    misses: list[str] = []
    for _ in range(runs):
        p = subprocess.run([sys.executable, "-c", _WARM, arch], env=env,
                           capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            return {"status": "error", "error": p.stderr[-2000:]}
        for name, r in json.loads(p.stdout.strip().splitlines()[-1]).items():
            if not r["hit"]:
                misses.append(name)
            per.setdefault(name, []).append(r["seconds"])
    out: dict[str, Any] = {"status": "wrong" if misses else "ok", "arch": arch, "runs": runs}
    if misses:
        out["reason"] = f"missed the cache in a new process: {sorted(set(misses))}"
    for name, xs in per.items():
        out[name] = {"median_s": statistics.median(xs), "max_s": max(xs), "runs_s": xs}
        print(f"  compile/warm {name:22s} {arch}: median "
              f"{statistics.median(xs) * 1e3:.1f} ms", flush=True)
    return out


def _cli_command(src: Path) -> list[str]:
    """The console script installed beside this interpreter (what a user types), else
    ``python -m tilelab``."""
    script = Path(sys.executable).with_name("tilelab")
    base = [str(script)] if script.exists() else [sys.executable, "-m", "tilelab"]
    return base + ["compile", f"{src}::add", "--arch", "sm_90", "--emit", "resources"]


def _timed(cmd: list[str], env: dict) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall seconds, CPU seconds of the child, the finished process) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, p


def _cli_variant(cmds: dict[str, list[str]], env: dict, runs: int) -> dict:
    """Medians of the commands, interleaved (the same host load), after one untimed run
    of each (which fills the cache and writes byte-code where the variant allows)."""
    for cmd in cmds.values():
        first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        if first.returncode != 0:
            return {"status": "error", "error": (first.stdout + first.stderr)[-2000:]}
    wall: dict[str, list[float]] = {n: [] for n in cmds}
    cpu: dict[str, list[float]] = {n: [] for n in cmds}
    hits = []
    for _ in range(runs):
        for name, cmd in cmds.items():
            w, c, p = _timed(cmd, env)
            wall[name].append(w)
            cpu[name].append(c)
            if name == "tilelab_compile":
                hits.append(p.returncode == 0 and "(disk cache hit)" in p.stdout)
    out: dict[str, Any] = {"status": "ok" if all(hits) else "wrong", "runs_s": wall,
                           "cpu_s": cpu}
    for name in cmds:
        out[f"{name}_median_s"] = statistics.median(wall[name])
        out[f"{name}_cpu_median_s"] = statistics.median(cpu[name])
    if not all(hits):
        out["reason"] = "a warm run failed or did not report a disk cache hit"
    return out


def variant_envs(env: dict, workdir: Path) -> dict[str, dict]:
    """The environment of each ``cli`` variant: ``env`` without the caller's byte-code
    switches, plus the variant's own; byte-code is written only under ``workdir``.

    Example:
        >>> envs = variant_envs({"PYTHONDONTWRITEBYTECODE": "1", "HOME": "/h"}, Path("/w"))
        >>> envs["bytecode"]
        {'HOME': '/h', 'PYTHONPYCACHEPREFIX': '/w/pyc'}
        >>> sorted(envs["no_bytecode"].items())
        [('HOME', '/h'), ('PYTHONDONTWRITEBYTECODE', '1'), ('PYTHONPYCACHEPREFIX', '/w/no-pyc')]
    """
    switches = ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
    base = {k: v for k, v in env.items() if k not in switches}
    return {"bytecode": {**base, "PYTHONPYCACHEPREFIX": str(workdir / "pyc")},
            "no_bytecode": {**base, "PYTHONDONTWRITEBYTECODE": "1",
                            "PYTHONPYCACHEPREFIX": str(workdir / "no-pyc")}}


def _cli(env: dict, workdir: Path, runs: int) -> dict:
    src = workdir / "cli_kernel.py"
    src.write_text(_CLI_KERNEL)
    cmds = {"tilelab_compile": _cli_command(src),
            "python_start": [sys.executable, "-c", "pass"],
            "import_tilelab": [sys.executable, "-c", "import tilelab"]}
    variants = {}
    for name, venv in variant_envs(env, workdir).items():
        variants[name] = _cli_variant(cmds, venv, runs)
        v = variants[name]
        if v["status"] == "error":
            return {"status": "error", "error": v["error"], "variant": name}
        print(f"  compile/cli [{name}] tilelab compile (warm, new process): median "
              f"{v['tilelab_compile_median_s'] * 1e3:.0f} ms wall, "
              f"{v['tilelab_compile_cpu_median_s'] * 1e3:.0f} ms CPU (target < "
              f"{CLI_TARGET_S * 1e3:.0f} ms wall); python -c pass "
              f"{v['python_start_median_s'] * 1e3:.0f} ms, import tilelab "
              f"{v['import_tilelab_median_s'] * 1e3:.0f} ms", flush=True)
    main = variants["bytecode"]
    out: dict[str, Any] = {
        "status": next((v["status"] for v in variants.values() if v["status"] != "ok"), "ok"),
        "command": " ".join(cmds["tilelab_compile"]), "runs": runs,
        "median_s": main["tilelab_compile_median_s"],
        "cpu_median_s": main["tilelab_compile_cpu_median_s"],
        "python_start_median_s": main["python_start_median_s"],
        "import_tilelab_median_s": main["import_tilelab_median_s"],
        "variants": variants, "target_s": CLI_TARGET_S,
        "target_met": main["tilelab_compile_median_s"] < CLI_TARGET_S}
    reasons = [f"{n}: {v['reason']}" for n, v in variants.items() if "reason" in v]
    if reasons:
        out["reason"] = "; ".join(reasons)
    return out


def run(ctx: Context) -> dict[str, Any]:
    """Cold, warm and CLI compile times in a private cache (removed afterwards).

    Options: ``compile_runs`` (new-process runs per measurement; default 5, 3 with
    ``--quick``), ``compile_archs`` (comma-separated; default sm_90 with ``--quick``, all
    four otherwise).
    """
    runs = int(ctx.option("compile_runs", 0) or (3 if ctx.quick else 5))
    archs = ctx.option("compile_archs", "") or ("sm_90" if ctx.quick else ",".join(ARCHS))
    archs = tuple(a.strip() for a in str(archs).split(",") if a.strip())
    workdir = Path(tempfile.mkdtemp(prefix="tilelab-compile-bench-"))
    saved = os.environ.get("TILELAB_CACHE_DIR")
    os.environ["TILELAB_CACHE_DIR"] = str(workdir / "cache")
    try:
        env = dict(os.environ)
        res: dict[str, Any] = {"archs": list(archs), "cold": _cold(archs)}
        res["warm_new_process"] = _warm(env, "sm_90" if "sm_90" in archs else archs[0], runs)
        res["cli"] = _cli(env, workdir, runs)
    finally:
        if saved is None:
            os.environ.pop("TILELAB_CACHE_DIR", None)
        else:
            os.environ["TILELAB_CACHE_DIR"] = saved
        shutil.rmtree(workdir, ignore_errors=True)
    parts = [res["warm_new_process"]["status"], res["cli"]["status"],
             *(c["status"] for c in res["cold"].values())]
    res["status"] = next((s for s in ("error", "wrong") if s in parts), "ok")
    return res
