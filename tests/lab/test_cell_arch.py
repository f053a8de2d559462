"""A %%tile cell's ``--arch`` is the GPU its CPU launches stand for: the interpreter
refuses what cuTile refuses for that target (float4 before sm_100) and runs it from there,
as ``kernel.compile(arch=...)`` does."""
from __future__ import annotations

import pytest

pytest.importorskip("cuda.tile", reason="cuda-tile (cuTile Python) is not installed")

from tilelab.errors import CompileError  # noqa: E402
from tilelab.lab.cell.run import run_cell  # noqa: E402

CELL = '''
import numpy as np
import cuda.tile as ct
def via_fp4(z: tl.Out, x: tl.In):
    t = tl.load_like(x, z).astype(ct.float4_e2m1fn)
    z.store(t.astype(z.dtype))
x = tl.tensor(np.array([0.5, 1.5, 3.0, 6.0] * 4, np.float32), device="cpu")
z = tl.zeros(16, device="cpu")
via_fp4(z.partition(16), x)
'''


@pytest.mark.toolchain
def test_a_cpu_cell_for_sm_100_runs_float4():
    ns = {"tl": __import__("tilelab")}
    report = run_cell("--backend cpu --arch sm_100 --show timings", CELL, ns,
                      name="<arch-100>")
    assert len(report.launches) == 1
    assert list(ns["z"].numpy()) == [0.5, 1.5, 3.0, 6.0] * 4


def test_a_cpu_cell_for_sm_90_refuses_float4_as_cutile_does():
    ns = {"tl": __import__("tilelab")}
    with pytest.raises(CompileError, match="float4_e2m1fn is not supported on sm_90"):
        run_cell("--backend cpu --arch sm_90 --show timings", CELL, ns, name="<arch-90>")
