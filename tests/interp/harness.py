"""Small helpers to run cuTile code on the interpreter inside tests.

``run_tiles(body, *arrays)`` loads each numpy array as one whole tile inside a real
one-block ``@ct.kernel`` and returns what ``body(*tiles)`` returned (a Tile, a tuple, or
a Python value), so op tests go through the same path as real kernels.
"""
from __future__ import annotations

from typing import Any, Callable

import ml_dtypes
import numpy as np

import cuda.tile as ct
from tilelab.interp import Tile, interpret

FLOAT_NP = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32,
            "float64": np.float64}
INT_NP = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
          "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64}
ALL_NP = {**INT_NP, **FLOAT_NP, "bool_": np.bool_}


def run_tiles(body: Callable[..., Any], *arrays: np.ndarray, arch: str | None = None) -> Any:
    """Evaluate ``body`` on whole-array tiles inside a one-block kernel, standing for
    GPU ``arch`` (default: ``TILELAB_ARCH``, else sm_90; fp4 and the e8m0 scales need
    ``"sm_100"``)."""
    captured: list[Any] = []
    shapes = tuple(a.shape for a in arrays)

    @ct.kernel
    def harness(xs, SHAPES: ct.Constant, ORIGINS: ct.Constant):
        # (cuTile unrolls a tuple comprehension only over ct.static_iter)
        tiles = tuple(ct.load(xs[i], ORIGINS[i], SHAPES[i])
                      for i in ct.static_iter(range(len(SHAPES))))
        captured.append(body(*tiles))

    # (each tile's index made here: cuTile, and so the interpreter, repeats no tuple)
    origins = tuple(tuple(0 for _ in s) for s in shapes)
    interpret(harness, tuple(arrays), shapes, origins, grid=(1,), arch=arch)
    return captured[0]


def values(t: Any) -> np.ndarray:
    assert isinstance(t, Tile), f"expected a Tile, got {type(t).__name__}"
    return t.numpy()


def same(a: np.ndarray, b: np.ndarray) -> bool:
    """Bitwise-equal floats (NaN == NaN, -0 != +0) or equal integers."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind == "f" or a.dtype.name.startswith(("bfloat", "float")):
        w = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
        with np.errstate(all="ignore"):
            an, bn = np.isnan(a.astype(np.float64)), np.isnan(b.astype(np.float64))
        return bool(np.all((an & bn) | (a.view(w) == b.view(w))))
    return bool(np.array_equal(a, b))


def fast(max_examples: int = 30):
    """Hypothesis settings for this suite: budgets sized so that the whole suite stays well
    under a minute on 2 cores; ``TILELAB_HYPOTHESIS_SCALE`` multiplies them."""
    from hypothesis import HealthCheck, settings

    from tilelab import config
    scale = config.hypothesis_scale()
    return settings(max_examples=max(1, int(max_examples * scale)), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
