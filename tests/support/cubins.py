"""Real cubins and remark files for the compiler tests, built once per test process.

The kernels below are compiled with cuTile's ``export_kernel`` to Tile IR bytecode and
then by the pip ``tileiras`` 13.4 (no GPU needed) with ``--lineinfo`` and all remarks, the
way tilelab's compiler runs it. Builds are cached in-process (``functools.cache``), so every
test module shares them. Lines that tests look up carry a ``# mark: <name>`` comment.
"""
from __future__ import annotations

import functools
import io
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

ct = pytest.importorskip("cuda.tile", reason="cuda-tile (cuTile Python) is not installed")
compilation = pytest.importorskip("cuda.tile.compilation")

ARCHS = ("sm_80", "sm_90", "sm_100", "sm_120")
SOURCE = Path(__file__).resolve()


@ct.kernel
def vadd(a, b, c, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    x = ct.load(a, index=(bid,), shape=(TILE,))  # mark: vadd-load-a
    y = ct.load(b, index=(bid,), shape=(TILE,))  # mark: vadd-load-b
    ct.store(c, index=(bid,), tile=x + y)


@ct.kernel
def gemm(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    bm = ct.bid(0)
    bn = ct.bid(1)
    acc = ct.full((TM, TN), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
        a = ct.load(A, index=(bm, k), shape=(TM, TK))  # mark: gemm-load-a
        b = ct.load(B, index=(k, bn), shape=(TK, TN))  # mark: gemm-load-b
        acc = ct.mma(a, b, acc)  # mark: gemm-mma
    ct.store(C, index=(bm, bn), tile=acc)  # mark: gemm-store


def line_of(mark: str) -> int:
    """1-based line of the ``# mark: <mark>`` comment in this file."""
    for number, text in enumerate(SOURCE.read_text().splitlines(), start=1):
        if text.rstrip().endswith(f"# mark: {mark}"):
            return number
    raise KeyError(mark)


def _array(dtype, ndim: int, stride_divisible_by: int = 1):
    return compilation.ArrayConstraint(
        dtype, ndim, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
        may_alias_internally=False, stride_constant=(None,) * (ndim - 1) + (1,),
        base_addr_divisible_by=16,
        stride_divisible_by=(stride_divisible_by,) * (ndim - 1) + (1,))


def _signature(name: str, aligned: bool):
    conv = compilation.CallingConvention.cutile_python_v1()
    if name == "vadd":
        return vadd, compilation.KernelSignature([_array(ct.float32, 1)] * 3 + [1024], conv)
    if name == "gemm":
        # aligned=True promises 16-byte row strides, which lets sm_90+ use TMA copies.
        bf16 = _array(ct.bfloat16, 2, 8 if aligned else 1)
        f32 = _array(ct.float32, 2, 4 if aligned else 1)
        return gemm, compilation.KernelSignature([bf16, bf16, f32, 128, 128, 64], conv)
    raise KeyError(name)


def tool_path(name: str) -> Path:
    """A tool of the pip CUDA 13.4 packages (nvidia/cu13/bin/<name>); skips if absent."""
    try:
        import nvidia
    except ImportError:
        pytest.skip("the nvidia-cuda-* pip packages are not installed")
    for root in nvidia.__path__:
        path = Path(root) / "cu13" / "bin" / name
        if path.is_file():
            return path
    pytest.skip(f"{name} from the pip CUDA 13.4 packages is not installed")


def clean_env() -> dict[str, str]:
    """The environment minus CUDA_HOME/CUDA_PATH, so an older system CUDA cannot leak in."""
    return {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}


@dataclass(frozen=True)
class Built:
    """One tileiras run: the cubin's bytes and the YAML remarks it wrote."""

    kernel: str
    arch: str
    cubin: bytes
    remarks_yaml: str


@functools.cache
def build(kernel: str, arch: str, aligned: bool = False) -> Built:
    """Compile ``kernel`` ("vadd" or "gemm") for ``arch`` with tileiras, once per process."""
    tileiras = tool_path("tileiras")
    fn, sig = _signature(kernel, aligned)
    buf = io.BytesIO()
    compilation.export_kernel(fn, [sig], buf, gpu_code=arch, output_format="tileir_bytecode")
    with tempfile.TemporaryDirectory(prefix="tilelab-test-") as tmp:
        bc, out, yaml_path = (Path(tmp) / n for n in ("k.bc", "k.cubin", "r.yaml"))
        bc.write_bytes(buf.getvalue())
        proc = subprocess.run(
            [str(tileiras), str(bc), "-o", str(out), "--gpu-name", arch, "-O3", "--lineinfo",
             "--remark-format=yaml", "--remarks=all", f"--remarks-output-file={yaml_path}"],
            capture_output=True, text=True, env=clean_env(), timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"tileiras failed for {kernel} on {arch}: {proc.stderr}")
        remarks = yaml_path.read_text() if yaml_path.exists() else ""
        return Built(kernel, arch, out.read_bytes(), remarks)
