"""Sampling kernels of the decode step: penalties, top-k / top-p / min-p and the seeded
sample, all on the device.

Why on the device: the decode step is replayed as a CUDA graph, so the next token must
be picked without a host round trip for the logits, and the sampling settings must live
in device memory (a replay reuses its recorded arguments; changing a setting rewrites a
small tensor, never the graph). Two launches follow the lm_head GEMV:

* :func:`sample_partial_kernel`, one block per ``BV`` logits (the vocabulary tile):
  the block's scores ``s = penalized(logits) / temperature``, its maximum and
  sum-exp (the pieces of the whole vocabulary's log-sum-exp), the best Gumbel-perturbed
  score ``s + g`` with its index (the sample when no filter is set), and its ``n``
  highest scores with their indices in descending order (ties: the lower index first),
  ``n`` the number of candidates the settings ask for (at most ``KC``, the candidate
  tile);
* :func:`sample_pick_kernel`, one block: merges the blocks' candidates into the
  overall top ``n`` (sorted), applies top-p and min-p to them, picks the token by
  Gumbel-max among the kept ones, writes it to ``tokens[pos + 1]``, the non-finite flag
  to ``nonfinite[pos]`` and marks the token generated in ``history``.

The settings are one float32 vector, ``params`` (:data:`PARAMS` slots, filled by
:func:`tilelab.models.sampling.SamplingParams.device_vector`):

==============  ================================================================
``P_INV_TEMP``  1 / temperature (1 for greedy)
``P_COUNT``     candidates: 0 samples over the whole vocabulary (no filter), else
                the top ``n`` scores are the candidates (``top_k``; ``KC`` when
                top-k is off but top-p or min-p is on; 1 for greedy)
``P_TOP_P``     keep a candidate while the probability mass before it is below this
                (1: off)
``P_MIN_P``     keep a candidate whose probability is at least this fraction of the
                top one (0: off)
``P_REPEAT``    repetition penalty over the prompt and the generated tokens (1: off):
                a positive logit is divided by it, a negative one multiplied
``P_PRESENCE``  subtracted from the logit of every token generated so far (0: off)
``P_WHOLE``     1: top-p's probabilities are normalized over the whole vocabulary
                (top-k off); 0: over the candidates (top-k on, as transformers does)
==============  ================================================================

``history`` is an int32 per vocabulary entry: 0 (not seen), :data:`SEEN_IN_PROMPT` or
:data:`GENERATED`. The repetition penalty applies where it is not 0, the presence
penalty where it is :data:`GENERATED`. The host fills it from the sequence when the
settings are set; :func:`sample_pick_kernel` marks each token it picks, with an offset
store into its one tile covering the vocabulary (the same promise as the KV-cache write:
whatever the token, the write stays inside the block's own tile).

The sample is Gumbel-max with the noise of :func:`tilelab.kernels.decode.step.gumbel_noise`,
a hash of (seed, position, token index): ``argmax_i (s_i + g_i)`` over the kept tokens is
a sample of their softmax, the same seed gives the same tokens, and with no filter the
token is the one :func:`~tilelab.kernels.decode.step.lm_head_partial_kernel`'s sampling form
picks.

Every kernel is safe: outputs are ``tl.Out`` partitions (the token, flag and history
writes are offset stores into the single block's own tiles), everything else is a
``tl.In`` read, bounds-checked or a masked gather.

Example:
    >>> import numpy as np, tilelab as tl
    >>> from tilelab.kernels.decode.sampling import sample_token
    >>> logits = np.array([0.0, 3.0, 1.0, 2.5], np.float32)
    >>> sample_token(logits, count=1)                 # greedy: the top candidate
    1
"""
from __future__ import annotations

import math
from typing import Any

import cuda.tile as ct
import numpy as np

import tilelab as tl
from tilelab.kernels.decode.step import NONFINITE, gumbel_noise

__all__ = ["sample_partial_kernel", "sample_pick_kernel", "sample_token", "PARAMS",
           "P_INV_TEMP", "P_COUNT", "P_TOP_P", "P_MIN_P", "P_REPEAT", "P_PRESENCE",
           "P_WHOLE", "SEEN_IN_PROMPT", "GENERATED"]

#: slots of the float32 settings vector (see the module docstring)
P_INV_TEMP, P_COUNT, P_TOP_P, P_MIN_P, P_REPEAT, P_PRESENCE, P_WHOLE = range(7)
#: length of the settings vector (a power of two: one tile)
PARAMS = 8
#: ``history`` values: a token of the prompt, a generated token
SEEN_IN_PROMPT, GENERATED = 1, 2
#: an index larger than any vocabulary: what a masked lane offers to a min-index
_NO_INDEX = 2147483647


# ======================================================================================
# helpers


def _param(params, slot):
    """Slot ``slot`` of the settings vector as a float32 scalar."""
    return ct.load(params, index=(slot,), shape=(1,)).item()


def _scalar_at(t, i):
    """Element i of a 1-D int tensor as a scalar (a one-element load, then .item())."""
    return ct.load(t, index=(i,), shape=(1,)).item()


def _scores(lg, hist, params):
    """The sampling scores of float32 logits ``lg`` with their ``history`` values: the
    repetition penalty where the token was seen, the presence penalty where it was
    generated, then the 1/temperature scale."""
    rep = _param(params, P_REPEAT)
    pres = _param(params, P_PRESENCE)
    penalized = ct.where(lg > 0.0, lg / rep, lg * rep)
    s = ct.where(hist != 0, penalized, lg)
    s = s - ct.where(hist == GENERATED, pres, 0.0)
    return s * _param(params, P_INV_TEMP)


def _first_max(vals, idx):
    """(max, the smallest index where it is reached) of a 1-D tile ``vals`` with
    indices ``idx`` (same shape), as (1,)-shaped tiles; (-inf, no index) when every
    value is -inf."""
    best = ct.max(vals, axis=0, keepdims=True)
    hit = (vals == best) & (vals > -math.inf)
    first = ct.min(ct.where(hit, idx, _NO_INDEX), axis=0, keepdims=True)
    return best, first


def _top_n(scores, idx, n, KC):
    """The ``n`` (at most ``KC``) largest of ``scores`` (a 1-D float32 tile, -inf for
    masked lanes) with their indices, in descending order, ties by increasing index, as
    two (KC,) tiles; slots past ``n`` or past the finite scores hold -inf and no index.

    Each round takes the maximum and the first index reaching it, records them in slot
    ``r`` and masks that index out. Indices in ``idx`` are distinct (tokens)."""
    lane = ct.arange(KC, dtype=ct.int32)
    vals = ct.full((KC,), -math.inf, dtype=ct.float32)
    inds = ct.full((KC,), _NO_INDEX, dtype=ct.int32)
    work = scores
    for r in range(n):
        best, first = _first_max(work, idx)
        vals = ct.where(lane == r, best, vals)
        inds = ct.where(lane == r, first, inds)
        work = ct.where(idx == first, -math.inf, work)
    return vals, inds


def _kept(vals, inds, params, lse_all):
    """Which of the sorted candidates ``vals``/``inds`` (KC,) survive top-p and min-p.

    Probabilities are ``exp(v - lognorm)``: ``lognorm`` is the whole vocabulary's
    log-sum-exp ``lse_all`` when ``P_WHOLE`` is set, else the candidates'. A candidate
    is kept while the mass before it is below top_p (the first always is) and while its
    probability is at least min_p times the first's."""
    real = inds != _NO_INDEX
    top = ct.max(vals, axis=0, keepdims=True)
    top = ct.where(top == -math.inf, 0.0, top)
    rel = ct.where(real, ct.exp(vals - top), 0.0)
    lse_cand = top + ct.log(ct.maximum(ct.sum(rel, axis=0, keepdims=True), 1e-38))
    whole = _param(params, P_WHOLE)
    lognorm = ct.where(whole > 0.5, lse_all, lse_cand)
    p = ct.where(real, ct.exp(vals - lognorm), 0.0)
    before = ct.cumsum(p, axis=0) - p
    top_p = _param(params, P_TOP_P)
    nucleus = (before < top_p) | (top_p >= 1.0)
    first = ct.arange(vals.shape[0], dtype=ct.int32) == 0
    keep = real & (nucleus | first) & (rel >= _param(params, P_MIN_P))
    return keep


# ======================================================================================
# kernels


@tl.kernel
def sample_partial_kernel(cval: tl.Out, cidx: tl.Out, pmax: tl.Out, psum: tl.Out,
                          gval: tl.Out, gidx: tl.Out, logits: tl.In, history: tl.In,
                          params: tl.In, seed: tl.In, pos: tl.In, BV: ct.Constant[int]):
    """Per vocabulary tile of ``BV`` logits: the candidates and partials of the sample.

    ``cval``/``cidx`` are (blocks, KC) float32/int32 partitioned (1, KC): this block's
    top ``n`` scores and indices, descending (``n`` = the ``P_COUNT`` setting, at most
    KC; other slots -inf and no index). ``pmax``/``psum`` (blocks,) float32 partitioned
    (1,): the block's maximum score and ``sum(exp(s - max))``. ``gval``/``gidx``
    (blocks,) float32/int32 partitioned (1,): the best ``s + gumbel(seed, pos, index)``
    and its first index, or :data:`~tilelab.kernels.decode.step.NONFINITE` in ``gidx`` when a
    score of the block is NaN or infinite (the flag). ``logits`` (V,) float32,
    ``history`` (V,) int32, ``params`` (:data:`PARAMS`,) float32, ``seed``/``pos`` (1,)
    int32.

    Example:
        >>> sample_partial_kernel(cv.partition((1, 64)), ci.partition((1, 64)),
        ...                       pm.partition(1), ps.partition(1), gv.partition(1),
        ...                       gi.partition(1), logits, history, params, seed, pos,
        ...                       4096)                                  # doctest: +SKIP
    """
    n = pmax.tile_index[0]
    kc = cval.tile_shape[1]
    idx = n * BV + ct.arange(BV, dtype=ct.int32)
    valid = idx < logits.shape[0]
    lg = ct.load(logits, index=(n,), shape=(BV,), padding_mode=ct.PaddingMode.ZERO)
    hist = ct.load(history, index=(n,), shape=(BV,), padding_mode=ct.PaddingMode.ZERO)
    s = _scores(lg.astype(ct.float32), hist, params)
    odd = valid & (ct.isnan(s) | (ct.abs(s) == math.inf))
    bad = ct.max(odd.astype(ct.int32), axis=0, keepdims=True) > 0
    s = ct.where(valid & (s == s), s, -math.inf)        # s == s: not NaN
    mx = ct.max(s, axis=0, keepdims=True)
    safe_mx = ct.where(mx == -math.inf, 0.0, mx)
    pmax.store(mx)
    psum.store(ct.sum(ct.exp(s - safe_mx), axis=0, keepdims=True))
    z = s + gumbel_noise(_scalar_at(seed, 0), _scalar_at(pos, 0), idx)
    gbest, gfirst = _first_max(ct.where(valid, z, -math.inf), idx)
    gval.store(ct.where(bad, -math.inf, gbest))
    gidx.store(ct.where(bad, NONFINITE, gfirst))
    count = ct.minimum(ct.full((1,), _param(params, P_COUNT), dtype=ct.float32),
                       float(kc)).astype(ct.int32).item()
    vals, inds = _top_n(s, idx, count, kc)
    cval.store(ct.reshape(vals, (1, kc)))
    cidx.store(ct.reshape(inds, (1, kc)))


@tl.kernel
def sample_pick_kernel(tokens: tl.Out, nonfinite: tl.Out, history: tl.Out, cval: tl.In,
                       cidx: tl.In, pmax: tl.In, psum: tl.In, gval: tl.In, gidx: tl.In,
                       params: tl.In, seed: tl.In, pos: tl.In, BP: ct.Constant[int],
                       KC: ct.Constant[int]):
    """Merge :func:`sample_partial_kernel`'s partials and pick ``tokens[pos + 1]``.

    One block. ``BP`` is the number of partial blocks rounded up to a power of two,
    ``KC`` the candidate tile (``cval.shape[1]``).
    With ``P_COUNT`` 0 the token is the best Gumbel-perturbed score over the whole
    vocabulary; else the blocks' candidates are merged into the overall top ``n``
    (sorted), top-p and min-p keep a prefix-closed part of them (:func:`_kept`) and the
    token is the best ``score + gumbel`` among the kept. ``tokens`` and ``nonfinite``
    are the (S,) int32 sequence and its flags, each partitioned as one tile: the token
    is an offset store at ``pos + 1`` (skipped when that is past the end), the flag (1
    when any block saw a NaN or infinite score) one at ``pos``. ``history`` (V,) int32
    is partitioned as one tile too (a power of two >= V): the token's entry becomes
    :data:`GENERATED` (an offset store at the token, skipped with the token's).

    Example:
        >>> sample_pick_kernel(tokens.partition(S), flags.partition(S),
        ...                    history.partition(VP), cv, ci, pm, ps, gv, gi, params,
        ...                    seed, pos, 64, 64)                        # doctest: +SKIP
    """
    kc = KC
    rows = ct.arange(BP, dtype=ct.int32)
    real = rows < pmax.shape[0]
    m_b = ct.load(pmax, index=(0,), shape=(BP,), padding_mode=ct.PaddingMode.NEG_INF)
    l_b = ct.load(psum, index=(0,), shape=(BP,), padding_mode=ct.PaddingMode.ZERO)
    g_b = ct.load(gval, index=(0,), shape=(BP,), padding_mode=ct.PaddingMode.NEG_INF)
    i_b = ct.load(gidx, index=(0,), shape=(BP,), padding_mode=ct.PaddingMode.ZERO)
    bad = ct.max((real & (i_b == NONFINITE)).astype(ct.int32), axis=0, keepdims=True)
    mx = ct.max(m_b, axis=0, keepdims=True)
    mx = ct.where(mx == -math.inf, 0.0, mx)
    total = ct.sum(ct.where(real, l_b * ct.exp(m_b - mx), 0.0), axis=0, keepdims=True)
    lse_all = mx + ct.log(ct.maximum(total, 1e-38))
    # no filter: the best Gumbel-perturbed score of the whole vocabulary
    _gbest, gtok = _first_max(ct.where(real & (i_b >= 0), g_b, -math.inf),
                              ct.where(i_b >= 0, i_b, _NO_INDEX))
    # filters: the overall top n of the blocks' candidates, then top-p / min-p
    cv = ct.load(cval, index=(0, 0), shape=(BP, kc), padding_mode=ct.PaddingMode.NEG_INF)
    ci = ct.load(cidx, index=(0, 0), shape=(BP, kc), padding_mode=ct.PaddingMode.ZERO)
    ci = ct.where(cv == -math.inf, _NO_INDEX, ci)
    count = ct.minimum(ct.full((1,), _param(params, P_COUNT), dtype=ct.float32),
                       float(kc)).astype(ct.int32).item()
    vals, inds = _top_n(ct.reshape(cv, (BP * kc,)), ct.reshape(ci, (BP * kc,)), count, kc)
    keep = _kept(vals, inds, params, lse_all)
    z = vals + gumbel_noise(_scalar_at(seed, 0), _scalar_at(pos, 0), inds)
    _cbest, ctok = _first_max(ct.where(keep, z, -math.inf), inds)
    tok = ct.where(count > 0, ctok, gtok)
    tok = ct.where(tok == _NO_INDEX, 0, tok)
    p = _scalar_at(pos, 0)
    tokens.store(tok, offset=(p + 1,))
    nonfinite.store(bad, offset=(p,))
    at = ct.where(p + 1 < tokens.shape[0], tok, -1).item()
    history.store(ct.full((1,), GENERATED, dtype=ct.int32), offset=(at,))


# ======================================================================================
# host


def sample_token(logits: Any, *, params: Any = None, count: int = 0, seed: int = 0,
                 position: int = 0, history: Any = None, block: int = 32,
                 candidates: int = 16, device: str = "cpu") -> int:
    """One token sampled by the two kernels from a host vector of ``logits`` (for tests
    and for reading what the step does): ``params`` a :data:`PARAMS`-long settings
    vector (default: temperature 1, no penalty, ``count`` candidates, top-p off, min-p
    off), ``history`` the int32 history (default: all 0), ``block`` the vocabulary
    tile, ``candidates`` the candidate tile ``KC``.

    Example:
        >>> sample_token(np.array([1.0, 4.0, 2.0], np.float32), count=1)
        1
    """
    lg = np.ascontiguousarray(logits, np.float32)
    v = lg.shape[0]
    if params is None:
        params = np.array([1.0, count, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0], np.float32)
    # a copy: the pick marks its token in the history, never in the caller's array
    hist = np.zeros(v, np.int32) if history is None else np.array(history, np.int32)
    t = lambda a, dt=None: tl.tensor(np.asarray(a, dt), device=device)  # noqa: E731
    blocks = -(-v // block)
    bp = 1 << max(0, blocks - 1).bit_length()
    e = lambda shape, dt: tl.empty(shape, dt, device=device)  # noqa: E731
    cv, ci = e((blocks, candidates), "float32"), e((blocks, candidates), "int32")
    pm, ps, gv, gi = (e(blocks, "float32"), e(blocks, "float32"), e(blocks, "float32"),
                      e(blocks, "int32"))
    prm, sd = t(params, np.float32), t([seed], np.int32)
    p = t([position], np.int32)
    hist_t = t(hist)
    sample_partial_kernel(cv.partition((1, candidates)), ci.partition((1, candidates)),
                          pm.partition(1), ps.partition(1), gv.partition(1),
                          gi.partition(1), t(lg), hist_t, prm, sd, p, block)
    cap = 1 << (position + 1).bit_length()
    tokens, flags = tl.zeros(cap, "int32", device=device), tl.zeros(cap, "int32",
                                                                     device=device)
    vp = 1 << max(0, v - 1).bit_length()
    sample_pick_kernel(tokens.partition(cap), flags.partition(cap), hist_t.partition(vp),
                       cv, ci, pm, ps, gv, gi, prm, sd, p, bp, candidates)
    return int(tokens.numpy()[position + 1])
