"""Reference answers of the exercises (:mod:`tilelab.lab.course.exercises`), one function each.

Each function returns the answer a student would pass to ``check(name, answer)``:
kernels as plain (undecorated) functions, predictions as numbers, arrays or dicts. CI
grades every one of them (``tests/lab/test_exercises.py``), so they stay right. Spoiler:
read them after trying.

Example:
    >>> from tilelab.lab.course.exercises import grade
    >>> grade("grouped_owner", grouped_owner()).passed
    True
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

import cuda.tile as ct
import tilelab as tl

__all__ = ["fix_refused", "saxpy_edge", "grouped_owner", "gemm_traffic", "roofline",
           "online_logsumexp", "fused_bias_gelu", "race_hunt", "graph_deps", "causal_mask"]


def _scale_shift(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) * 2.0 + 1.0)


def fix_refused() -> Callable:
    """01: store through the partition of ``z``, not into the input ``x``.

    Example:
        >>> fix_refused().__name__
        '_scale_shift'
    """
    return _scale_shift


def saxpy(z: tl.Out, x: tl.In, y: tl.In, a: float):
    z.store(a * tl.load_like(x, z) + tl.load_like(y, z))


def saxpy_edge() -> Callable:
    """02: one load of each input, one store: every element once, 12 bytes each.

    Example:
        >>> saxpy_edge().__name__
        'saxpy'
    """
    return saxpy


def grouped_owner() -> dict[str, np.ndarray]:
    """03: the owner of every tile of an 8 × 8 grid under the two schedules, worked out
    by hand: grouped(4) numbers tiles down groups of 4 rows, column by column;
    persistent(6) deals the row-major tiles out to 6 blocks in turn.

    Example:
        >>> grouped_owner()["persistent(6)"][0, :7].tolist()
        [0, 1, 2, 3, 4, 5, 0]
    """
    grouped = np.zeros((8, 8), int)
    for m in range(8):
        for n in range(8):
            group, row = divmod(m, 4)
            grouped[m, n] = group * 4 * 8 + n * 4 + row
    persistent = (np.arange(64) % 6).reshape(8, 8)
    return {"grouped(4)": grouped, "persistent(6)": persistent}


def gemm_traffic() -> Callable[..., int]:
    """03: bytes the loads of the tiled GEMM move. Each block reads its row panel of A
    and its column panel of B; an edge tile reads only its rows or columns inside the
    matrix. So A is read once per column of tiles and B once per row of tiles.

    Example:
        >>> gemm_traffic()(256, 256, 256, 64, 64, 2)
        1048576
    """
    def traffic(M: int, N: int, K: int, TM: int, TN: int, itemsize: int) -> int:
        return (math.ceil(N / TN) * M * K + math.ceil(M / TM) * K * N) * itemsize
    return traffic


def roofline() -> dict[str, float]:
    """03: the roofline's lower bound of a 4096³ bf16 GEMM (compulsory bytes), in
    seconds: ``max(FLOPs / dense bf16 peak, bytes / bandwidth)`` per GPU.

    Example:
        >>> round(roofline()["h200"] * 1e6)
        139
    """
    from tilelab.perf.specs import lookup_gpu

    flops, nbytes = 2 * 4096 ** 3, 3 * 4096 * 4096 * 2
    return {g: max(flops / lookup_gpu(g).peak("bf16"), nbytes / lookup_gpu(g).bandwidth)
            for g in ("h200", "b200")}


def online_logsumexp() -> Callable[[list], tuple[float, float]]:
    """04: the running maximum and sum over chunks, safe when a whole chunk (or row) is
    ``-inf`` and when values are large: never evaluate ``exp(-inf - -inf)``.

    Example:
        >>> m, s = online_logsumexp()([np.array([0.0, 0.0])])
        >>> m, s
        (0.0, 2.0)
    """
    def lse(chunks: list) -> tuple[float, float]:
        m, s = -np.inf, 0.0
        for chunk in chunks:
            m_new = max(m, float(np.max(chunk)))
            if m_new == -np.inf:          # nothing finite yet: the sum stays 0
                continue
            s = s * math.exp(m - m_new) + float(np.exp(chunk - m_new).sum())
            m = m_new
        return m, s
    return lse


def _bias_gelu_residual(y: tl.Out, x: tl.In, bias: tl.In, res: tl.In):
    _, n = y.tile_index
    _, tn = y.tile_shape
    b = ct.load(bias, index=(n,), shape=(tn,), padding_mode=ct.PaddingMode.ZERO)
    h = tl.load_like(x, y) + ct.reshape(b, (1, tn))
    g = 0.5 * h * (1.0 + ct.tanh(0.7978845608028654 * (h + 0.044715 * h * h * h)))
    y.store(g + tl.load_like(res, y))


def fused_bias_gelu() -> Callable:
    """04: one kernel: load x, the bias slice and the residual once, store y once.

    Example:
        >>> fused_bias_gelu().__name__
        '_bias_gelu_residual'
    """
    return _bias_gelu_residual


def _block_sum(out: tl.Raw, x: tl.In, T: ct.Constant[int]):
    t = ct.load(x, index=(ct.bid(0),), shape=(T,), padding_mode=ct.PaddingMode.ZERO)
    ct.atomic_add(out, (0,), ct.sum(t))


def race_hunt() -> Callable:
    """05: every block adds its partial sum into ``out[0]`` with an atomic add.

    Example:
        >>> race_hunt().__name__
        '_block_sum'
    """
    return _block_sum


def graph_deps() -> dict[str, Any]:
    """06: the direct dependencies of the exercise's five launches (a dependency
    implied through another launch is left out), and which tensors the host may not
    read while the replay is pending (those the graph writes).

    Example:
        >>> graph_deps()["deps"]
        [[], [0], [], [1, 2], [1, 2]]
    """
    return {"deps": [[], [0], [], [1, 2], [1, 2]],
            "host_raises": {"x": False, "y": True, "a": True, "b": True, "c": True}}


def causal_mask() -> dict[str, Callable]:
    """08: key ``j`` is visible to query ``i`` when ``j <= i``; a tile whose first key
    comes after its last query is all masked and is skipped.

    Example:
        >>> causal_mask()["mask"](0, 0, 2, 2).tolist()
        [[True, False], [True, True]]
    """
    def mask(q0: int, k0: int, BM: int, BN: int) -> np.ndarray:
        return (k0 + np.arange(BN))[None, :] <= (q0 + np.arange(BM))[:, None]

    def skip(q0: int, k0: int, BM: int, BN: int) -> bool:
        return k0 > q0 + BM - 1
    return {"mask": mask, "skip": skip}
