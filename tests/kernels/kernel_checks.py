"""Checks shared by the GEMM and attention tests: results, SASS, remarks, raw baselines."""
from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import numpy as np

from tilelab.kernels.reference_matmul import rel_error, to_f64


def check(got, want, tol) -> None:
    """Same shape, every element written (no NaN), relative error within ``tol``."""
    g = to_f64(got)
    assert g.shape == np.shape(want)
    assert not np.isnan(g).any(), "NaN in the output: an element was never written"
    err = rel_error(g, want)
    assert err <= tol, f"relative error {err:.3g} > {tol:.3g}"


def mma_ops(art) -> set[str]:
    """The tensor-core instructions in the SASS (HGMMA/QGMMA on Hopper, HMMA otherwise)."""
    return set(re.findall(r"\b([HQ]GMMA\.[\w.]+|HMMA\.[\w.]+)", art.sass))


def spills(art) -> int:
    """Bytes of spill stores ptxas reports for the kernel (0 when none)."""
    return art.resources.spill_store_bytes or 0


def remarked(art, what: str) -> bool:
    """Whether a tileiras remark names ``what`` as the selected instruction."""
    return any(what in str(r.args.get("Instruction")) for r in art.remarks)


def raw_baselines():
    """benchmarks/raw_matmul_attention.py: the same kernels written raw in cuTile."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    return importlib.import_module("raw_matmul_attention")
