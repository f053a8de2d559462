"""Notebook 08 (flash attention): its exercises' graders and reference answers, and the
numpy model of a flash-attention kernel the notebook shows.

- ``causal_mask``: the mask of a tile and which tiles to skip, for any BM and BN;
- ``flash_attention``: a causal flash-attention kernel for one head, streaming keys and
  values in tiles (bounded state), computing only the key tiles that hold a visible key;
- ``combine_splits``: split-KV decode's second launch, merging the splits' partial
  outputs by their log-sum-exps in chunks, right when whole chunks of splits are empty.

Example:
    >>> from tilelab.lab.course.exercises import grade, solution
    >>> grade("causal_mask", solution("causal_mask")).passed
    True
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

import cuda.tile as ct
import tilelab as tl
from tilelab.lab.course.exercises.budget import Budget
from tilelab.lab.course.exercises.compare import tile_grid, wrong_values
from tilelab.lab.course.exercises.hidden import Case, first_miss
from tilelab.lab.course.exercises.kernels import KernelExercise, Setup, nan_tensor
from tilelab.lab.course.grading import Lesson, Result, miss, passed, reference, register

__all__ = ["flash_attention_numpy", "SECTIONS"]

NOTEBOOK = "08_flash_attention"

TILES = "1. Tiles of queries, tiles of keys"
RESCALE = "2. Why the rescaling works"
MASK = "4. Exercise: the causal mask"
FLASH = "Exercise: a flash-attention kernel"
SPLIT_KV = "5. Split-KV decode"
COMBINE = "Exercise: combining the splits"
#: the headings of notebook 08 the lessons point to (tests check they exist)
SECTIONS = (TILES, RESCALE, MASK, FLASH, SPLIT_KV, COMBINE)

_Z = ct.PaddingMode.ZERO


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


# ---- causal_mask -------------------------------------------------------------------------

_MASK_LESSONS = {
    "formula": Lesson(
        "causal attention: query i sees key j only when j <= i, and the mask of a tile "
        "compares the absolute positions of its rows and columns", "08", MASK,
        ("a tile's row r is query q0 + r and its column c is key k0 + c",
         "a mask that is right on the diagonal tiles must also be right on the tiles "
         "below them, where every key is visible")),
    "bm_bn": Lesson(
        "with BM ≠ BN a tile's queries and keys are not aligned: compare positions, not "
        "tile starts", "08", MASK,
        ("a key tile may start after a query tile starts and still hold keys its later "
         "queries see: which query of the tile sees the most keys?",)),
    "edge": Lesson(
        "S need not be a multiple of the tiles: the last tiles are partial", "08", MASK,
        ("the mask is still (BM, BN): rows and columns past S are cut off, but positions "
         "inside must be right",)),
    "skip": Lesson(
        "skip every tile that holds no visible key, and only those", "08", MASK,
        ("a tile holds no visible key when its first key comes after its last query",
         "for a long sequence that is almost half the tiles: the work causal attention "
         "saves")),
}

_MASK_CASES = [
    Case("the notebook's size", (96, 16), (32, 32)),
    Case("BM > BN", (96, 16), (32, 16), lesson="bm_bn", seed=1),
    Case("BM < BN", (96, 16), (16, 32), lesson="bm_bn", seed=2),
    Case("S not a multiple of the tiles", (100, 16), (32, 16), lesson="edge", seed=3),
]


def _causal_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    s = q @ k.T / math.sqrt(q.shape[1])
    s[np.triu_indices(len(s), 1)] = -np.inf
    p = np.exp(s - s.max(1, keepdims=True))
    return (p / p.sum(1, keepdims=True)) @ v


def _mask_case(answer: Any, case: Case) -> Result | None:
    name, (S, D), (BM, BN) = "causal_mask", case.shape, case.tile
    rng = np.random.default_rng(4 + case.seed)
    q, k, v = (rng.standard_normal((S, D)) for _ in range(3))
    got, tiles = flash_attention_numpy(q, k, v, BM, BN, answer["mask"], answer["skip"])
    bad = wrong_values(got, _causal_reference(q, k, v), 1e-6, (BM, D), "out")
    if bad is not None:
        key = "formula" if case is _MASK_CASES[0] else case.lesson
        return miss(name, bad.text, _MASK_LESSONS[key], bad.secrets)
    for q0 in range(0, S, BM):
        for k0 in range(0, S, BN):
            if k0 > min(q0 + BM, S) - 1 and not answer["skip"](q0, k0, BM, BN):
                return miss(name, f"right, but the tile of queries from {q0} and keys "
                            f"from {k0} was computed, and it holds no visible key",
                            _MASK_LESSONS["skip"])
    return None


@register("causal_mask", NOTEBOOK,
          "{'mask': mask(q0, k0, BM, BN) -> bool (BM, BN), 'skip': skip(q0, k0, BM, BN) -> "
          "bool}: causal attention that computes only the tiles it needs, for any BM, BN")
def _causal_mask(answer: Any) -> Result:
    if not isinstance(answer, dict) or not {"mask", "skip"} <= set(answer):
        return miss("causal_mask", "the answer is not a dict with 'mask' and 'skip'",
                    _MASK_LESSONS["formula"])
    found = first_miss(_MASK_CASES, lambda case: _mask_case(answer, case))
    if found is not None:
        return found
    return passed("causal_mask", f"matches causal attention on all {len(_MASK_CASES)} "
                  "cases (BM = BN, BM > BN, BM < BN, a ragged S), skipping every tile "
                  "without a visible key")


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


# ---- flash_attention ---------------------------------------------------------------------

_FLASH_LESSONS = {
    "formula": Lesson(
        "flash attention: each key tile's scores update a running maximum m and sum l "
        "per query row, what was accumulated is rescaled by exp(m_old − m_new), and the "
        "output is divided by l at the end", "08", RESCALE,
        ("the scores of a tile are q · kᵀ times the scale; masked scores become -inf, "
         "which exp turns into 0",
         "the first key tile starts from m = -inf: exp(-inf − m_new) is 0, not NaN, as "
         "long as m_new is finite")),
    "bm_bn": Lesson(
        "with BM ≠ BN the key tiles a query tile needs end at its last query's position, "
        "not at its own tile index", "08", MASK,
        ("counting key tiles by the query tile's index is right only when BM = BN",)),
    "scalar": Lesson(
        "scale is a launch value: the kernel must use the scale it is given", "08", FLASH,
        ("the checker launches your kernel with several scales",)),
    "tile": Lesson(
        "the tiles belong to the launch: BM and the head size from o's partition, BN "
        "from its parameter", "08", FLASH,
        ("the checker launches your kernel with several tiles",)),
    "edge": Lesson(
        "S need not be a multiple of the tiles: the last query tile and the last key "
        "tile are partial", "08", MASK,
        ("zero-padded keys past S give scores of 0, not -inf: are they masked?",)),
    "budget": Lesson(
        "bytes moved: q read and o written once; k and v only in the key tiles that hold "
        "a key some query of the tile sees", "08", MASK,
        ("a key tile after the tile's last query holds no visible key: skip it, do not "
         "only mask it",)),
    "stream": Lesson(
        "flash attention streams: a block holds one tile of keys and values at a time, "
        "so its state stays bounded however long the sequence", "08", TILES,
        ("load keys and values in tiles of BN rows inside the loop over key tiles",)),
}


def _flash_budget(S: int, D: int, BM: int, BN: int) -> int:
    keys = sum(min(math.ceil(min(q0 + BM, S) / BN) * BN, S) for q0 in range(0, S, BM))
    return 4 * (2 * S * D + 2 * D * keys)


def _flash_setup(case: Case) -> Setup:
    (S, D), (BM, _), BN, scale = case.shape, case.tile, case.params["BN"], case.params["scale"]
    rng = np.random.default_rng(80 + case.seed)
    q, k, v = (rng.standard_normal((S, D)).astype(np.float32) for _ in range(3))
    s = q.astype(np.float64) @ k.T * scale
    s[np.triu_indices(S, 1)] = -np.inf
    p = np.exp(s - s.max(1, keepdims=True))
    want = (p / p.sum(1, keepdims=True)) @ v
    tensors = tuple(tl.tensor(t, device="cpu") for t in (q, k, v))
    return Setup(nan_tensor((S, D)), (*tensors, BN, scale), want,
                 Budget(_flash_budget(S, D, BM, BN),
                        "q read and o written once; k and v read in the key tiles "
                        "that hold a visible key"))


def _bounded(case: Case, ran: Any, s: Setup) -> tuple[str, str] | None:
    limit = max(case.tile[0], case.params["BN"]) * case.shape[1]
    if ran.largest_read() > limit:
        return ("stream", f"a block loaded {ran.largest_read():,} elements at once; one "
                f"tile of queries or keys is at most {limit:,}")
    return None


FLASH_EXERCISE = KernelExercise(
    "flash_attention",
    [Case("the notebook's size", (64, 16), (16, 16), {"BN": 16, "scale": 0.25}),
     Case("BM > BN", (64, 16), (32, 16), {"BN": 16, "scale": 0.25}, lesson="bm_bn",
          seed=1),
     Case("BM < BN", (64, 16), (16, 16), {"BN": 32, "scale": 0.25}, lesson="bm_bn",
          seed=2),
     Case("another scale and head size", (64, 32), (16, 32), {"BN": 16, "scale": 0.3},
          lesson="scalar", seed=3),
     Case("S not a multiple of the tiles", (100, 16), (32, 16), {"BN": 16, "scale": 0.25},
          lesson="edge", seed=4)],
    _flash_setup, _FLASH_LESSONS, tol=1e-4, properties=(_bounded,), output="o")


@register("flash_attention", NOTEBOOK,
          "attention(o: tl.Out, q: tl.In, k: tl.In, v: tl.In, BN: ct.Constant[int], "
          "scale: float): causal softmax(q kᵀ · scale) v for one head (S, D), o in (BM, D) "
          "tiles; budget: q and o once, k and v only in key tiles with a visible key")
def _flash_attention(answer: Any) -> Result:
    return FLASH_EXERCISE.grade(answer)


def _causal_attention(o: tl.Out, q: tl.In, k: tl.In, v: tl.In, BN: ct.Constant[int],
                      scale: float):
    bm, d = o.tile_shape
    i = o.tile_index[0]
    qt = tl.load_like(q, o).astype(ct.float32) * scale
    rows = ct.reshape(i * bm + ct.arange(bm, dtype=ct.int32), (bm, 1))
    m = ct.full((bm, 1), -math.inf, dtype=ct.float32)
    l = ct.full((bm, 1), 0.0, dtype=ct.float32)
    acc = ct.full((bm, d), 0.0, dtype=ct.float32)
    last = ct.minimum((i + 1) * bm, k.shape[0])       # this tile's queries see keys < last
    for j in range(ct.cdiv(last, BN)):
        kt = ct.load(k, index=(j, 0), shape=(BN, d), padding_mode=_Z).astype(ct.float32)
        vt = ct.load(v, index=(j, 0), shape=(BN, d), padding_mode=_Z).astype(ct.float32)
        s = ct.mma(qt, ct.transpose(kt), ct.full((bm, BN), 0.0, dtype=ct.float32))
        cols = ct.reshape(j * BN + ct.arange(BN, dtype=ct.int32), (1, BN))
        s = ct.where(cols <= rows, s, -math.inf)
        m_new = ct.maximum(m, ct.max(s, axis=1, keepdims=True))
        p = ct.exp(s - m_new)
        alpha = ct.exp(m - m_new)
        l = l * alpha + ct.sum(p, axis=1, keepdims=True)
        acc = ct.mma(p, vt, acc * alpha)
        m = m_new
    o.store((acc / l).astype(o.dtype))


@reference("flash_attention")
def flash_attention() -> Callable:
    """A block owns ``BM`` queries; it walks the key tiles up to its last query's
    position (``ceil(min((i + 1)·BM, S) / BN)`` of them), masks scores by absolute
    positions, keeps the running maximum and sum per row, rescales the accumulator by
    ``exp(m_old − m_new)`` and divides by the sum at the end. Every row's first key is
    visible, so ``m`` is finite after the first tile.

    Example:
        >>> flash_attention().__name__
        '_causal_attention'
    """
    return _causal_attention


# ---- combine_splits ----------------------------------------------------------------------

_COMBINE_LESSONS = {
    "formula": Lesson(
        "merging splits: each split's partial output is weighted by exp(lse_s − L), L "
        "the log-sum-exp of all the splits' lse", "08", SPLIT_KV,
        ("it is the rescaling of section 2 again: keep a running maximum of the lse, a "
         "running sum of weights and a running weighted output, rescaled when the "
         "maximum grows",
         "the output is the weighted sum divided by the sum of the weights")),
    "empty": Lesson(
        "an empty split has lse = -inf and weight 0; a chunk of only empty splits must "
        "leave the running state as it was", "08", RESCALE,
        ("while the running maximum is still -inf, exp(-inf − -inf) is NaN: guard the "
         "subtraction",)),
    "chunk_edge": Lesson(
        "the number of splits need not be a multiple of CH: the last chunk is partial, "
        "and its padded lanes are not splits", "08", COMBINE,
        ("which padding value of lse gives a padded lane the weight 0?",)),
    "tile": Lesson(
        "CH and the head size belong to the launch", "08", COMBINE,
        ("the checker launches your kernel with several chunk sizes and head sizes",)),
    "budget": Lesson(
        "bytes moved: every partial output and lse read once, o written once", "08",
        COMBINE, ("load each chunk once and use it for the weights and the output",)),
    "stream": Lesson(
        "the merge streams the splits in chunks of CH: its state stays bounded however "
        "many splits there are", "08", COMBINE,
        ("load the partials in chunks of CH splits inside the loop",)),
}


def _combine_setup(case: Case) -> Setup:
    (H, D), splits, empty = case.shape, case.params["splits"], case.params.get("empty", 0)
    rng = np.random.default_rng(90 + case.seed)
    po = rng.standard_normal((H, splits, D)).astype(np.float32)
    lse = (3 * rng.standard_normal((H, splits))).astype(np.float32)
    lse[:, :empty], po[:, :empty] = -np.inf, 0.0
    big = lse.astype(np.float64)
    top = big.max(axis=1, keepdims=True)
    wgt = np.exp(big - top)
    want = (wgt[:, :, None] * po).sum(1) / wgt.sum(1, keepdims=True)
    return Setup(nan_tensor((H, D)), (tl.tensor(po, device="cpu"),
                                      tl.tensor(lse, device="cpu"), case.params["CH"]),
                 want, Budget(4 * (H * splits * D + H * splits + H * D),
                              "every partial output and lse read once, o written once"))


def _chunked(case: Case, ran: Any, s: Setup) -> tuple[str, str] | None:
    limit = case.params["CH"] * case.shape[1]
    if ran.largest_read() > limit:
        return ("stream", f"a block loaded {ran.largest_read():,} elements at once; a "
                f"chunk of CH splits is {limit:,}")
    return None


COMBINE_EXERCISE = KernelExercise(
    "combine_splits",
    [Case("the notebook's size", (4, 16), (1, 16), {"splits": 16, "CH": 8}),
     Case("a leading chunk of empty splits", (4, 16), (1, 16),
          {"splits": 24, "CH": 8, "empty": 8}, lesson="empty", seed=1),
     Case("splits not a multiple of CH", (3, 16), (1, 16), {"splits": 20, "CH": 8},
          lesson="chunk_edge", seed=2),
     Case("another chunk and head size", (2, 32), (1, 32), {"splits": 40, "CH": 4,
                                                             "empty": 5},
          lesson="tile", seed=3)],
    _combine_setup, _COMBINE_LESSONS, tol=1e-5, properties=(_chunked,), output="o")


@register("combine_splits", NOTEBOOK,
          "combine(o: tl.Out, po: tl.In, lse: tl.In, CH: ct.Constant[int]): o[h] = "
          "Σ_s exp(lse[h, s] − L_h) po[h, s], splits read in chunks of CH, empty splits "
          "(-inf) included; budget: po and lse read once, o written once")
def _combine_splits(answer: Any) -> Result:
    return COMBINE_EXERCISE.grade(answer)


def _combine(o: tl.Out, po: tl.In, lse: tl.In, CH: ct.Constant[int]):
    d = o.tile_shape[1]
    h = o.tile_index[0]
    m = ct.full((1, 1), -math.inf, dtype=ct.float32)
    l = ct.full((1, 1), 0.0, dtype=ct.float32)
    acc = ct.full((1, d), 0.0, dtype=ct.float32)
    for c in range(ct.cdiv(lse.shape[1], CH)):
        e = ct.load(lse, index=(h, c), shape=(1, CH),
                    padding_mode=ct.PaddingMode.NEG_INF).astype(ct.float32)
        p = ct.load(po, index=(h, c, 0), shape=(1, CH, d), padding_mode=_Z)
        p = ct.reshape(p.astype(ct.float32), (CH, d))
        m_new = ct.maximum(m, ct.max(e, axis=1, keepdims=True))
        safe = ct.where(m_new == -math.inf, 0.0, m_new)   # no split seen yet: stay at 0
        w = ct.exp(e - safe)
        alpha = ct.exp(m - safe)
        l = l * alpha + ct.sum(w, axis=1, keepdims=True)
        acc = acc * alpha + ct.reshape(ct.sum(ct.reshape(w, (CH, 1)) * p, axis=0), (1, d))
        m = m_new
    o.store((acc / l).astype(o.dtype))


@reference("combine_splits")
def combine_splits() -> Callable:
    """The online merge of notebook 4, over chunks of ``CH`` splits: padded lanes of
    ``lse`` read ``-inf`` (weight 0), and while the running maximum is ``-inf`` the
    subtraction uses 0, so a chunk of empty splits changes nothing.

    Example:
        >>> combine_splits().__name__
        '_combine'
    """
    return _combine
