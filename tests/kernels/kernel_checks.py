"""Checks shared by the kernel-library tests: results, SASS, remarks, raw baselines, and
for the host paths the native module's state and the Python a call runs."""
from __future__ import annotations

import contextlib
import gc
import importlib
import re
import sys

import numpy as np

from tilelab.kernels.reference.matmul import rel_error, to_f64


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
    """benchmarks/baselines/raw_matmul_attention.py: the same kernels written raw in cuTile."""
    return importlib.import_module("benchmarks.baselines.raw_matmul_attention")


@contextlib.contextmanager
def native_path(request, path: str, python_why: str):
    """The library's host paths in Python (``path == "python"``: no native module,
    ``python_why`` its status) or through the native module (``"native"``: the session's
    ``native_module``, bound to no driver) while the block runs; the state is restored
    after. A skip of the native module leaves the state untouched."""
    from tilelab.runtime import native

    state = [None, python_why]
    if path == "native":
        state = [request.getfixturevalue("native_module"),
                 "native (tests: bound to no driver)"]
    saved = list(native._STATE)
    native._STATE[:] = state
    try:
        yield
    finally:
        native._STATE[:] = saved


def python_calls(fn) -> list[str]:
    """The names of the Python functions that one call of ``fn`` runs (the garbage
    collector held off, so that no finalizer of an earlier test's objects runs inside),
    past ``fn`` itself."""
    names: list[str] = []

    def profile(frame, event, arg):
        if event == "call":
            names.append(frame.f_code.co_name)

    gc.collect()
    gc.disable()
    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
        gc.enable()
    return names[1:]
