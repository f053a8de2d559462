"""What machine and software a suite run measured, and the ceilings its figures use.

Why: a number without its GPU, driver and versions cannot be compared with the next run;
and "fraction of peak" needs the one datasheet ceiling it was divided by, stated.

Example:
    >>> env = env_info("cpu")
    >>> env["backend"], "tilelab" in env["versions"]
    ('cpu', True)
"""
from __future__ import annotations

import datetime
import importlib.metadata as md
import platform
import re
import shutil
import subprocess
from typing import Any

import tilelab as tl
from tilelab.perf.roofline import compute_ceiling
from tilelab.perf.specs import PRECISIONS, UnsupportedPrecisionError, lookup_gpu, spec_for_device

from suite_run import Nominal

__all__ = ["env_info", "nominal_for", "gpu_slug"]

_PACKAGES = ("cuda-tile", "cuda-core", "cuda-bindings", "nvidia-cuda-tileiras", "torch",
             "numpy", "ml-dtypes", "matplotlib")


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


def env_info(backend: str, init_gpu: bool = True) -> dict[str, Any]:
    """GPU, driver, versions (tilelab, cuda-tile, torch, toolchain, ...) and the date.

    ``init_gpu=False`` names the GPU through nvidia-smi without creating a CUDA context
    (the parent of isolated runs leaves the GPU to its children)."""
    versions = {"tilelab": tl.__version__, **{p: _version(p) for p in _PACKAGES}}
    try:
        import torch

        versions["torch_cuda"] = torch.version.cuda
    except Exception:
        pass
    try:
        from tilelab.compiler.toolchain import find_toolchain

        tc = find_toolchain()
        toolchain = {"version": tc.version, "describe": tc.describe()}
    except Exception as e:
        toolchain = {"version": None, "describe": f"unavailable: {e}"}
    env: dict[str, Any] = {
        "backend": backend, "gpu": "cpu (interpreter)", "arch": "cpu",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(), "platform": platform.platform(),
        "versions": versions, "toolchain": toolchain}
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
    in the spec table (the CPU interpreter): (Nominal, JSON description)."""
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
    """'h200' for an NVIDIA H200, 'cpu' on the interpreter: for result file names."""
    if env["backend"] != "gpu":
        return "cpu"
    spec = spec_for_device(env["gpu"])
    if spec is not None:
        return spec.key
    return re.sub(r"[^a-z0-9]+", "", env["gpu"].lower().replace("nvidia", "")) or "gpu"
