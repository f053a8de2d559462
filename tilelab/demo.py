"""``tilelab demo``: the tour's kernels, compiled and shown.

Compiles vector add, a bf16 GEMM (128x128x64 tiles, fp32 accumulation), a row softmax
and a persistent GEMM for the target and prints what each produced: the lowered
source size, Tile IR, cubin, registers, tensor-core remarks and compile timings.
"""
from __future__ import annotations

import time
from pathlib import Path

__all__ = ["run_demo", "demo_cases"]


def demo_cases():
    """(name, kernel, example args) of the tour, as specs (no memory needed)."""
    import tilelab as tl
    from tilelab.kernels.examples import gemm, next_pow2, persistent_gemm, softmax, vector_add

    x = tl.spec(1 << 20, "float32")
    a = tl.spec((4096, 4096), "bfloat16")
    s = tl.spec((4096, 1000), "float32")
    return [
        ("vector add f32", vector_add, (x.partition(1024), x, x)),
        ("GEMM bf16 128x128x64", gemm, (a.partition((128, 128)), a, a, 64)),
        ("row softmax f32", softmax, (s.partition((4, next_pow2(1000))), s)),
        ("persistent GEMM bf16", persistent_gemm,
         (a.partition((128, 128), schedule=tl.persistent(group_m=8)), a, a, 64)),
    ]


def _tensor_core_note(art) -> str:
    try:
        hits = [r for r in art.remarks if "tensor" in (r.pass_name or "").lower()]
    except Exception as e:  # remarks are informative; never fail the demo on them
        return f"remarks unreadable: {e}"
    return f"{len(hits)} tensor-core remarks" if hits else "-"


def run_demo(arch: str | None = None, out_dir: str = "tilelab-demo") -> int:
    """Compile the tour for ``arch`` and print a summary table; returns an exit code."""
    import tilelab as tl
    from tilelab.runtime.kernel import _default_arch

    arch = arch or _default_arch()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    print(f"tilelab {tl.__version__} demo: compiling the tour for {arch}")
    rows = []
    for name, k, args in demo_cases():
        t0 = time.perf_counter()
        try:
            art = k.compile(*args, arch=arch)
        except tl.TilelabError as e:
            print(f"  {name}: FAILED\n{e}")
            return 1
        dt = time.perf_counter() - t0
        res = art.resources
        rows.append((name, art, dt, res))
        (out / f"{k.name}.{arch}.tileir").write_text(art.tileir)
        (out / f"{k.name}.lowered.py").write_text(art.lowered_source)
    print(f"  {'kernel':<24}{'Tile IR':>9}{'cubin':>10}{'regs':>6}{'threads':>9}"
          f"{'compile':>10}  remarks")
    for name, art, dt, res in rows:
        hit = " (cached)" if art.cache_hit else ""
        print(f"  {name:<24}{len(art.tileir.splitlines()):>6} ln{len(art.cubin):>9}B"
              f"{res.registers or 0:>6}{res.threads_per_block or 0:>9}{dt * 1e3:>8.0f}ms  "
              f"{_tensor_core_note(art)}{hit}")
    print(f"  toolchain: {rows[0][1].toolchain}")
    print(f"  Tile IR and lowered sources written to {out}/")
    return 0
