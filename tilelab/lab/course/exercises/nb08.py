"""Notebook 08 (flash attention): its exercises' graders and reference answers, and the
numpy model of a flash-attention kernel the notebook shows.

Example:
    >>> from tilelab.lab.course.exercises import grade, solution
    >>> grade("causal_mask", solution("causal_mask")).passed
    True
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from tilelab.lab.course.exercises.compare import first_wrong
from tilelab.lab.course.grading import Result, failed, passed, reference, register

__all__ = ["flash_attention_numpy"]

NOTEBOOK = "08_flash_attention"


def flash_attention_numpy(q: np.ndarray, k: np.ndarray, v: np.ndarray, BM: int, BN: int,
                          mask: Any = None, skip: Any = None) -> tuple[np.ndarray, int]:
    """Tiled attention with the online softmax, in numpy (the model of a flash-attention
    kernel): returns the output and how many (query tile, key tile) pairs it computed.
    ``mask(q0, k0, BM, BN)`` gives the visible keys of a tile, ``skip(...)`` whether to
    skip it.

    Example:
        >>> q = k = v = np.eye(4)
        >>> out, tiles = flash_attention_numpy(q, k, v, 2, 2)
        >>> tiles, out.shape
        (4, (4, 4))
    """
    S, D = q.shape
    out, computed = np.zeros_like(q, dtype=np.float64), 0
    for q0 in range(0, S, BM):
        qt = q[q0:q0 + BM].astype(np.float64) / math.sqrt(D)
        m = np.full(len(qt), -np.inf)
        l, acc = np.zeros(len(qt)), np.zeros((len(qt), D))
        for k0 in range(0, S, BN):
            if skip is not None and skip(q0, k0, BM, BN):
                continue
            computed += 1
            s = qt @ k[k0:k0 + BN].T.astype(np.float64)
            if mask is not None:
                s = np.where(np.asarray(mask(q0, k0, BM, BN))[:len(qt), :s.shape[1]], s, -np.inf)
            m_new = np.maximum(m, s.max(1))
            safe = np.where(np.isfinite(m_new), m_new, 0.0)
            p = np.exp(s - safe[:, None])
            alpha = np.exp(np.where(np.isfinite(m), m - safe, -np.inf))
            l = l * alpha + p.sum(1)
            acc = acc * alpha[:, None] + p @ v[k0:k0 + BN].astype(np.float64)
            m = m_new
        out[q0:q0 + BM] = acc / l[:, None]
    return out, computed


@register("causal_mask", NOTEBOOK,
          "{'mask': mask(q0, k0, BM, BN) -> bool (BM, BN), 'skip': skip(q0, k0, BM, BN) -> "
          "bool}: causal attention that computes only the tiles it needs")
def _causal_mask(answer: Any) -> Result:
    name, S, D, BM, BN = "causal_mask", 96, 16, 32, 32
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((S, D)) for _ in range(3))
    s = q @ k.T / math.sqrt(D)
    s[np.triu_indices(S, 1)] = -np.inf
    p = np.exp(s - s.max(1, keepdims=True))
    want = (p / p.sum(1, keepdims=True)) @ v
    got, tiles = flash_attention_numpy(q, k, v, BM, BN, answer["mask"], answer["skip"])
    wrong = first_wrong(got, want, 1e-6)
    if wrong:
        return failed(name, wrong, "query i sees keys j <= i: mask = (k0 + columns) <= "
                      "(q0 + rows); never skip a tile that holds a visible key")
    least = sum(1 for q0 in range(0, S, BM) for k0 in range(0, S, BN) if k0 <= q0 + BM - 1)
    if tiles > least:
        return failed(name, f"right, but {tiles} tiles computed; only {least} hold a "
                      "visible key", "skip a tile when its first key comes after its "
                      "last query: k0 > q0 + BM - 1")
    return passed(name, f"matches causal attention, computing {tiles} of "
                  f"{(S // BM) * (S // BN)} tiles")


@reference("causal_mask")
def causal_mask() -> dict[str, Callable]:
    """Key ``j`` is visible to query ``i`` when ``j <= i``; a tile whose first key comes
    after its last query is all masked and is skipped.

    Example:
        >>> causal_mask()["mask"](0, 0, 2, 2).tolist()
        [[True, False], [True, True]]
    """
    def mask(q0: int, k0: int, BM: int, BN: int) -> np.ndarray:
        return (k0 + np.arange(BN))[None, :] <= (q0 + np.arange(BM))[:, None]

    def skip(q0: int, k0: int, BM: int, BN: int) -> bool:
        return k0 > q0 + BM - 1
    return {"mask": mask, "skip": skip}
