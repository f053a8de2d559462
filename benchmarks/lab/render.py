"""The ``lab`` group: how long a warm ``%%tile`` cell takes to run and draw its view.

A learner reruns a cell after each edit; the view must come back at once. Each cell below
runs through a real IPython shell (:func:`tilelab.lab.magic.measure_cell_time`): once cold
(compiles, fills the caches), then ``repeat`` times warm; the warm median is checked
against :data:`TARGET_S`. The cells are the course's first ones: notebook 01's vector add
(every default tab: Source ↔ Tile IR, Safety, Lowered, Resources, Remarks, Ownership,
Roofline, Timings) and a tiled GEMM with its ownership and roofline. They run on the CPU
backend wherever the group runs (what a laptop without a GPU shows); a machine without
IPython (the GPU machine) reports ``skipped``.

Example:
    >>> r = run(Context(backend="cpu", quick=True))                     # doctest: +SKIP
    >>> r["cells"]["vector_add"]["warm_median_s"] < TARGET_S            # doctest: +SKIP
    True
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import textwrap
from typing import Any

from ..common import Context

__all__ = ["run", "CELLS", "TARGET_S"]

#: what a warm cell may take (issue target; the view of a kernel the user just reran)
TARGET_S = 0.5

CELLS = {
    "vector_add": textwrap.dedent("""
        import tilelab as tl
        @tl.kernel
        def add(z: tl.Out, x: tl.In, y: tl.In):
            z.store(tl.load_like(x, z) + tl.load_like(y, z))
        x = tl.arange(1 << 14, dtype="float32"); y = tl.ones(1 << 14, dtype="float32")
        z = tl.empty(1 << 14, dtype="float32")
        add(z.partition(1024), x, y)
        """),
    "gemm": textwrap.dedent("""
        import tilelab as tl
        import cuda.tile as ct
        @tl.kernel
        def matmul(c: tl.Out, a: tl.In, b: tl.In, BK: ct.Constant[int]):
            bm, bn = c.tile_shape
            i, j = c.tile_index
            acc = ct.zeros((bm, bn), dtype=ct.float32)
            for k in range(ct.cdiv(a.shape[1], BK)):
                ta = ct.load(a, index=(i, k), shape=(bm, BK), padding_mode=ct.PaddingMode.ZERO)
                tb = ct.load(b, index=(k, j), shape=(BK, bn), padding_mode=ct.PaddingMode.ZERO)
                acc = ct.mma(ta, tb, acc)
            c.store(ct.astype(acc, c.dtype))
        a = tl.randn((128, 128), dtype="float32"); b = tl.randn((128, 128), dtype="float32")
        c = tl.empty((128, 128), dtype="float32")
        matmul(c.partition((32, 32)), a, b, 32)
        """),
}


def run(ctx: Context) -> dict[str, Any]:
    """Cold and warm times of each cell of :data:`CELLS` (CPU backend), and whether every
    warm median is under :data:`TARGET_S`."""
    if importlib.util.find_spec("IPython") is None:
        return {"status": "skipped", "reason": "IPython is not installed (the lab's "
                "%%tile magic needs it)"}
    from IPython.testing.globalipapp import start_ipython

    from tilelab.lab.magic import measure_cell_time

    ip = start_ipython()
    repeat = 3 if ctx.quick else 7
    cells = {}
    for name, body in CELLS.items():
        with contextlib.redirect_stdout(io.StringIO()):     # the views, as text
            r = measure_cell_time(body, line="--backend cpu", repeat=repeat, ipython=ip)
        cells[name] = {"cold_s": r["cold_s"], "warm_s": r["warm_s"],
                       "warm_median_s": r["warm_median_s"], "collect_s": r["collect_s"],
                       "target_s": TARGET_S, "target_met": r["warm_median_s"] < TARGET_S}
    met = all(c["target_met"] for c in cells.values())
    return {"status": "ok", "backend": "cpu", "repeat": repeat, "cells": cells,
            "target_s": TARGET_S, "target_met": met}
