"""What every benchmark group shares: the environment of a run, its ceilings, timing in
interleaved rounds, the relative error that gates timing, and atomic JSON writing.

Why one module: a figure without its GPU, driver and versions cannot be compared with
the next run, "fraction of peak" needs the one datasheet ceiling it was divided by, and
every group times the same way (``tl.bench``: CUDA events on the GPU, warm-up, L2
flushed, median), so all of them take these from here.

Example:
    >>> env = env_info("cpu")
    >>> env["backend"], "tilelab" in env["versions"]
    ('cpu', True)
    >>> rel_err([1.0, 2.0], [1.0, 2.0])
    (0.0, '')
"""
from __future__ import annotations

import datetime
import importlib.metadata as md
import json
import math
import os
import platform
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

__all__ = ["HERE", "REPO", "RESULTS", "Context", "Nominal", "env_info", "nominal_for", "gpu_slug",
           "rotated", "time_rounds", "rel_err", "clean", "write_json"]

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results"

_PACKAGES = ("cuda-tile", "cuda-core", "cuda-bindings", "nvidia-cuda-tileiras", "torch",
             "numpy", "ml-dtypes", "matplotlib")


# --------------------------------------------------------------------------- a run

@dataclass
class Context:
    """What a group's function is told about the run: the backend (``'gpu'`` or
    ``'cpu'``), ``quick`` (smaller sizes), timing effort (``rounds``, ``rep``) and the
    group options given on the command line (``options``: name -> value).

    Example:
        >>> Context(backend="cpu", quick=True).option("ceilings")
        False
    """

    backend: str
    quick: bool = False
    rounds: int = 3
    rep: int = 20
    options: dict = field(default_factory=dict)

    def option(self, name: str, default: Any = False) -> Any:
        """The value of group option ``name`` (``default`` when not given)."""
        return self.options.get(name, default)


# --------------------------------------------------------------------------- environment

@dataclass
class Nominal:
    """The ceilings figures are quoted against (datasheet, dense).

    Example:
        >>> Nominal("h200", 4.8e12, {"bf16": 989e12}).peak("bf16")
        989000000000000.0
    """

    gpu: str
    bandwidth: float
    peaks: dict

    def peak(self, precision: str) -> float | None:
        """The dense peak FLOP/s of ``precision``, or None when the device has none."""
        return self.peaks.get(precision)


def _version(pkg: str) -> str | None:
    try:
        return md.version(pkg)
    except md.PackageNotFoundError:
        return None


def _smi(field: str) -> str | None:
    """One field of GPU 0 from nvidia-smi ('driver_version', 'name'), when present."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        out = subprocess.run([smi, f"--query-gpu={field}", "--format=csv,noheader", "-i", "0"],
                             capture_output=True, text=True, timeout=15)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def _toolchain() -> dict:
    try:
        from tilelab.compiler.toolchain import find_toolchain

        tc = find_toolchain()
        return {"version": tc.version, "describe": tc.describe()}
    except Exception as e:
        return {"version": None, "describe": f"unavailable: {e}"}


def env_info(backend: str, init_gpu: bool = True) -> dict[str, Any]:
    """GPU, driver, versions (tilelab, cuda-tile, torch, toolchain, ...), host and date.

    ``init_gpu=False`` names the GPU through nvidia-smi without creating a CUDA context
    (the parent of isolated runs leaves the GPU to its children).

    Example:
        >>> sorted(env_info("cpu"))[:3]
        ['arch', 'backend', 'cpus']
    """
    import tilelab as tl

    versions = {"tilelab": tl.__version__, **{p: _version(p) for p in _PACKAGES}}
    try:
        import torch

        versions["torch_cuda"] = torch.version.cuda
    except Exception:
        pass
    env: dict[str, Any] = {
        "backend": backend, "gpu": "cpu (interpreter)", "arch": "cpu",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(), "platform": platform.platform(),
        "cpus": os.cpu_count(), "versions": versions, "toolchain": _toolchain()}
    if backend == "gpu" and init_gpu:
        from tilelab.runtime.device import gpu

        g = gpu()
        env.update(gpu=g.name, arch=g.arch, sms=g.num_sms, l2_bytes=g.l2_bytes,
                   memory_bytes=getattr(g, "total_memory", None),
                   driver_cuda_version=g.driver_version, driver=_smi("driver_version"))
    elif backend == "gpu":
        env.update(gpu=_smi("name") or "unknown GPU", arch=None,
                   driver=_smi("driver_version"))
    return env


def nominal_for(env: dict) -> tuple[Nominal, dict]:
    """The datasheet ceilings of the device (dense), or the H200's when the device is not
    in the spec table (the CPU interpreter): (Nominal, JSON description).

    Example:
        >>> nominal_for({"backend": "cpu", "gpu": "cpu"})[0].bandwidth
        4800000000000.0
    """
    from tilelab.perf.roofline import compute_ceiling
    from tilelab.perf.specs import (PRECISIONS, UnsupportedPrecisionError, lookup_gpu,
                                    spec_for_device)

    spec = spec_for_device(env["gpu"]) if env["backend"] == "gpu" else None
    source = "device" if spec is not None else "h200 (the device is not in the spec table)"
    spec = spec or lookup_gpu("h200")
    peaks = {}
    for prec in PRECISIONS:
        try:
            peaks[prec] = compute_ceiling(spec, prec).value
        except (UnsupportedPrecisionError, KeyError, ValueError):
            continue
    desc = {"gpu": spec.key, "name": spec.name, "from": source,
            "memory_bandwidth_Bps": spec.bandwidth, "dense_peaks_flops": peaks}
    return Nominal(spec.key, spec.bandwidth, peaks), desc


def gpu_slug(env: dict) -> str:
    """'h200' for an NVIDIA H200, 'cpu' on the interpreter: for result file names.

    Example:
        >>> gpu_slug({"backend": "cpu"})
        'cpu'
    """
    from tilelab.perf.specs import spec_for_device

    if env["backend"] != "gpu":
        return "cpu"
    spec = spec_for_device(env["gpu"])
    if spec is not None:
        return spec.key
    return re.sub(r"[^a-z0-9]+", "", env["gpu"].lower().replace("nvidia", "")) or "gpu"


# --------------------------------------------------------------------------- timing

def rotated(names: list, r: int) -> list:
    """``names`` starting at position ``r`` (mod its length): round r's timing order.

    Why: the H200's clocks sag within a round, so a fixed order favours the variant timed
    first; each round starts one variant later.

    Example:
        >>> rotated(["torch", "library", "a"], 4)
        ['library', 'a', 'torch']
    """
    k = r % len(names) if names else 0
    return names[k:] + names[:k]


def time_rounds(calls: dict[str, Callable[[], Any]], rounds: int, rep: int,
                warmup: int = 3, flush_l2: bool = True) -> dict[str, list[float]]:
    """name -> the ``tl.bench`` median (seconds) of each round, rounds in rotated order.

    ``tl.bench`` times with CUDA events on tilelab's stream (the host clock on the CPU),
    after ``warmup`` untimed calls, with the L2 flushed before every timed call.

    Example:
        >>> t = time_rounds({"noop": lambda: None}, rounds=2, rep=3, warmup=1)
        >>> len(t["noop"])
        2
    """
    import tilelab as tl

    times: dict[str, list[float]] = {n: [] for n in calls}
    for r in range(rounds):
        for name in rotated(list(calls), r):
            res = tl.bench(calls[name], rep=rep, warmup=warmup, flush_l2=flush_l2)
            times[name].append(res.median)
    return times


# --------------------------------------------------------------------------- checking

def rel_err(out: Any, ref: Any) -> tuple[float, str]:
    """(||out - ref|| / ||ref||, problem): inf and a reason on a shape mismatch or on a
    NaN/inf where the reference is finite (a poisoned output that was never written).

    Example:
        >>> rel_err([1.0, float("nan")], [1.0, 2.0])
        (inf, 'non-finite values (unwritten output?)')
        >>> rel_err([1.0], [1.0, 2.0])[1]
        'output shape (1,), expected (2,)'
    """
    import numpy as np

    from tilelab.perf.autotune import relative_error

    if isinstance(out, (list, tuple)):
        out = np.asarray(out, np.float64)
    if isinstance(ref, (list, tuple)):
        ref = np.asarray(ref, np.float64)
    oshape, rshape = tuple(getattr(out, "shape", ())), tuple(getattr(ref, "shape", ()))
    if oshape != rshape:
        return math.inf, f"output shape {oshape}, expected {rshape}"
    err = relative_error(out, ref)
    return err, ("non-finite values (unwritten output?)" if math.isinf(err) else "")


# --------------------------------------------------------------------------- JSON

def clean(obj: Any) -> Any:
    """JSON-safe: non-finite floats become null, unknown objects their repr.

    Example:
        >>> clean({"a": float("inf"), "b": (1, 2)})
        {'a': None, 'b': [1, 2]}
    """
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean(v) for v in obj]
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    return repr(obj)


def write_json(path: Path, data: dict) -> None:
    """Write ``data`` to ``path`` atomically (a reader never sees half a file).

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "r.json"
        >>> write_json(p, {"x": float("nan")}); p.read_text()
        '{\\n "x": null\\n}'
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".suite-", suffix=".json", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(clean(data), f, indent=1, allow_nan=False)
    os.replace(tmp, path)
