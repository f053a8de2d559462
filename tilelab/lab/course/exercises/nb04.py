"""Notebook 04 (softmax, reductions, fusion): its exercises' graders and reference answers.

- ``row_sum_squares``: a row reduction that streams rows of any length in bounded tiles;
- ``online_logsumexp``: the online softmax's recurrence in numpy, right on masked and
  large rows, and streaming (its memory does not grow with the row);
- ``row_logsumexp``: the same recurrence as a kernel, one pass over each row;
- ``fused_bias_gelu``: an elementwise epilogue fused into one kernel, graded on bytes.

Example:
    >>> from tilelab.lab.course.exercises import grade, solution
    >>> grade("online_logsumexp", solution("online_logsumexp")).passed
    True
"""
from __future__ import annotations

import math
import tracemalloc
from typing import Any, Callable, Iterator

import numpy as np

import cuda.tile as ct
import tilelab as tl
from tilelab.lab.course.exercises.budget import Budget
from tilelab.lab.course.exercises.compare import tile_grid
from tilelab.lab.course.exercises.forms import Ran
from tilelab.lab.course.exercises.hidden import Case, grade_cases
from tilelab.lab.course.exercises.kernels import KernelExercise, Setup, nan_tensor
from tilelab.lab.course.grading import Lesson, Result, miss, reference, register

NOTEBOOK = "04_softmax_reductions_fusion"

REDUCTIONS = "2. Reductions"
ONLINE = "3. Online softmax for long rows"
FUSED = "5. A fused kernel, written here"

#: the most elements one load of a streaming kernel may read (16 rows of 1024, say)
LOAD_LIMIT = 16384


def _rows(case: Case) -> np.ndarray:
    """The rows of a reduction case: normal values, shifted by ``offset``; with
    ``masked``, the first ``masked`` columns of every third row are -inf and row 1 is
    -inf throughout."""
    M, N = case.shape
    x = np.random.default_rng(case.seed).standard_normal((M, N)).astype(np.float32)
    x += np.float32(case.params.get("offset", 0.0))
    masked = case.params.get("masked", 0)
    if masked:
        x[::3, :masked] = -np.inf
        x[1, :] = -np.inf                      # a row with nothing visible
    return x


def _bounded(case: Case, ran: Ran, s: Setup) -> tuple[str, str] | None:
    largest = ran.largest_read()
    if largest <= LOAD_LIMIT:
        return None
    return "stream", (f"one load read {largest:,} elements; a streaming kernel reads at "
                      f"most {LOAD_LIMIT:,} at once, whatever the row length")


_STREAM = Lesson(
    "streaming: a row longer than a tile is read in chunks, so a block holds a bounded "
    "tile whatever the row length", "04", REDUCTIONS,
    ("loop over the column tiles of the row (ct.cdiv of the row length by the chunk) and "
     "carry only the running values from one chunk to the next",))


# ---- row_sum_squares ---------------------------------------------------------------------

_SUMSQ = {
    "formula": Lesson(
        "a row reduction: each block owns a slice of the output, one value per row, and "
        "reduces its rows along the columns", "04", REDUCTIONS,
        ("out has one element per row: its tile index says which rows are the block's",
         "accumulate in float32 across the chunks of the row, then store once")),
    "padding": Lesson(
        "padding is the reduction's identity: a padded element must add nothing", "04",
        REDUCTIONS, ("which padding mode adds nothing to a sum of squares?",)),
    "edge": Lesson(
        "the partial last tile of rows: the number of rows need not be a multiple of the "
        "tile", "04", REDUCTIONS, ()),
    "tile": Lesson("the tile of out belongs to the partition, not to the kernel", "04",
                   REDUCTIONS, ("the checker launches several tile sizes",)),
    "stream": _STREAM,
    "budget": Lesson(
        "bytes moved: x read once, out written once", "04", REDUCTIONS,
        ("a reduction that streams reads each chunk once",)),
}


def _reduce_setup(case: Case, want: Callable[[np.ndarray], np.ndarray]) -> Setup:
    x = _rows(case)
    M, N = x.shape
    with np.errstate(all="ignore"):
        expected = want(x.astype(np.float64))
    return Setup(nan_tensor((M,)), (tl.tensor(x, device="cpu"),), expected,
                 Budget(4 * M * N + 4 * M, "4MN + 4M: x read once, out written once"))


def _sumsq_cases() -> list[Case]:
    return [Case("the notebook's rows", (64, 1024), (16,), {}),
            Case("rows whose length is not a multiple of the chunk", (64, 1000), (16,),
                 {}, "padding", 1),
            Case("long rows", (16, 5000), (16,), {}, "stream", 2),
            Case("another tile of rows", (64, 512), (32,), {}, "tile", 3),
            Case("a partial last tile of rows", (37, 300), (16,), {}, "edge", 4)]


ROW_SUM_SQUARES = KernelExercise(
    "row_sum_squares", _sumsq_cases(),
    lambda case: _reduce_setup(case, lambda x: (x * x).sum(1)),
    _SUMSQ, tol=1e-4, properties=(_bounded,), output="out")


@register("row_sum_squares", NOTEBOOK,
          "row_sum_squares(out: tl.Out, x: tl.In): out[i] = Σ_j x[i, j]², rows of any "
          "length in loads of at most 16,384 elements; budget 4MN + 4M bytes")
def _row_sum_squares(answer: Any) -> Result:
    return ROW_SUM_SQUARES.grade(answer)


def _sum_squares_kernel(out: tl.Out, x: tl.In):
    (i,) = out.tile_index
    (tm,) = out.tile_shape
    acc = ct.full((tm,), 0, dtype=ct.float32)
    for k in range(ct.cdiv(x.shape[1], 256)):
        t = ct.load(x, index=(i, k), shape=(tm, 256), padding_mode=ct.PaddingMode.ZERO)
        acc = acc + ct.sum(t * t, axis=1)
    out.store(acc)


@reference("row_sum_squares")
def row_sum_squares() -> Callable:
    """Block ``i`` walks its rows in ``(tm, 256)`` chunks, zero-padded (zero adds nothing
    to a sum of squares), and stores one float32 sum per row.

    Example:
        >>> row_sum_squares().__name__
        '_sum_squares_kernel'
    """
    return _sum_squares_kernel


# ---- online_logsumexp --------------------------------------------------------------------

_LSE = {
    "formula": Lesson(
        "the online recurrence: when a chunk raises the running maximum, the running sum "
        "is rescaled before the chunk is added", "04", ONLINE,
        ("the sum is always of exp(x − m) for the current m: what must happen to it when "
         "m changes?",)),
    "masked": Lesson(
        "a masked chunk (all -inf): the running maximum is still -inf, and -inf − -inf "
        "is not a number", "04", ONLINE,
        ("while nothing finite has been seen, there is nothing to rescale or add",
         "the first finite maximum starts the sum")),
    "large": Lesson(
        "overflow: exp of a large value is past float32's range; only x − m is safe",
        "04", ONLINE, ("subtract the running maximum before every exp",)),
    "stream": Lesson(
        "streaming: the recurrence keeps two numbers, whatever the row length", "04",
        ONLINE, ("a row of a million elements must not be kept: use each chunk and let "
                 "it go",)),
    "answer": Lesson("the answer's form: lse(chunks) -> (m, s), chunks an iterable of "
                     "numpy arrays", "04", ONLINE, ()),
}


def _chunks(row: np.ndarray, size: int) -> Iterator[np.ndarray]:
    """The row in chunks, each a fresh array (an answer that keeps them pays for them)."""
    for i in range(0, len(row), size):
        yield row[i:i + size].copy()


def _lse_case_row(case: Case) -> np.ndarray:
    rng = np.random.default_rng(case.seed)
    row = rng.standard_normal(case.shape[0]).astype(np.float32)
    if case.lesson == "masked":
        row[:2 * case.params["chunk"]] = -np.inf
        row[len(row) // 2:len(row) // 2 + 100] = -np.inf
    if case.lesson == "large":
        row = row * np.float32(3) + np.float32(5000)
    return row


def _peak_memory(fn: Callable[[], Any]) -> int:
    """The most bytes ``fn()`` held at once (numpy's arrays included), by tracemalloc;
    a trace the caller had running goes on after."""
    running = tracemalloc.is_tracing()
    if running:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
    else:
        tracemalloc.start()
        base = 0
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        if not running:
            tracemalloc.stop()


@register("online_logsumexp", NOTEBOOK,
          "lse(chunks) -> (m, s): the running max and sum of exp(x - m) over a row's "
          "chunks (an iterable), right with -inf chunks and large values, in bounded "
          "memory")
def _online_logsumexp(answer: Any) -> Result:
    def one(case: Case) -> Result | None:
        row = _lse_case_row(case)
        chunk = case.params["chunk"]
        if case.lesson == "stream":
            peak = _peak_memory(lambda: answer(_chunks(row, chunk)))
            if peak > 64 * chunk * row.itemsize:
                return miss("online_logsumexp", f"the answer held {peak / 1024:,.0f} KiB "
                            "at once", _LSE["stream"])
            return None
        with np.errstate(all="ignore"):
            result = answer(_chunks(row, chunk))
        if not isinstance(result, tuple) or len(result) != 2:
            return miss("online_logsumexp", f"it returned {type(result).__name__}, not "
                        "(m, s)", _LSE["answer"])
        m, s = (float(v) for v in result)
        finite = row[np.isfinite(row)].astype(np.float64)
        top = finite.max()
        want_m, want_log_s = top, math.log(np.exp(finite - top).sum())
        got = m + math.log(s) if s > 0 and math.isfinite(m) else float("nan")
        if abs(got - (want_m + want_log_s)) <= 1e-4 * max(1.0, abs(want_m)):
            return None
        lesson = _LSE["formula" if case is cases[0] else case.lesson]
        return miss("online_logsumexp", "m + log(s) is not the row's log-sum-exp",
                    lesson, (want_m, want_log_s, want_m + want_log_s, math.exp(want_log_s)))

    cases = [Case("a plain row in 8 chunks", (4096,), params={"chunk": 512}),
             Case("a row whose first chunks are all -inf", (4096,), params={"chunk": 512},
                  lesson="masked", seed=1),
             Case("a row of values near 5000", (4096,), params={"chunk": 512},
                  lesson="large", seed=2),
             Case("chunks of another length", (3000,), params={"chunk": 256},
                  lesson="formula", seed=3),
             Case("a row of a million elements", (1 << 20,), params={"chunk": 1024},
                  lesson="stream", seed=4)]
    return grade_cases("online_logsumexp", cases, one,
                       "matches float64 on plain, masked and large rows, and "
                       "streams a million elements in bounded memory")


@reference("online_logsumexp")
def online_logsumexp() -> Callable[[Any], tuple[float, float]]:
    """The running maximum and sum over chunks, safe when a whole chunk (or row) is
    ``-inf`` and when values are large: never evaluate ``exp(-inf - -inf)``.

    Example:
        >>> m, s = online_logsumexp()([np.array([0.0, 0.0])])
        >>> m, s
        (0.0, 2.0)
    """
    def lse(chunks: Any) -> tuple[float, float]:
        m, s = -np.inf, 0.0
        for chunk in chunks:
            m_new = max(m, float(np.max(chunk)))
            if m_new == -np.inf:          # nothing finite yet: the sum stays 0
                continue
            s = s * math.exp(m - m_new) + float(np.exp(chunk - m_new).sum())
            m = m_new
        return m, s
    return lse


# ---- row_logsumexp -----------------------------------------------------------------------

_ROW_LSE = {
    "formula": _LSE["formula"],
    "padding": Lesson(
        "padding is the reduction's identity: a padded element must add nothing to the "
        "sum of exponentials", "04", "1. Row softmax: one block owns whole rows",
        ("which padding value has exp(x − m) = 0?",)),
    "masked": _LSE["masked"],
    "large": _LSE["large"],
    "edge": _SUMSQ["edge"],
    "tile": _SUMSQ["tile"],
    "stream": _STREAM,
    "budget": Lesson("bytes moved: one pass over x, out written once", "04", ONLINE,
                     ("the online form needs one read of each chunk: no first pass for "
                      "the maximum",)),
}


def _row_lse_want(x: np.ndarray) -> np.ndarray:
    top = x.max(1, keepdims=True)
    safe = np.where(np.isfinite(top), top, 0.0)
    return (safe + np.log(np.exp(x - safe).sum(1, keepdims=True)))[:, 0]


ROW_LOGSUMEXP = KernelExercise(
    "row_logsumexp",
    [Case("the notebook's rows", (32, 1024), (16,), {}),
     Case("rows whose length is not a multiple of the chunk", (32, 1000), (16,),
          {}, "padding", 1),
     Case("masked rows (leading -inf, one row all -inf)", (32, 1024), (16,),
          {"masked": 600}, "masked", 2),
     Case("values near 5000", (32, 1024), (16,), {"offset": 5000.0}, "large", 3),
     Case("long rows", (16, 5000), (16,), {}, "stream", 4),
     Case("another tile of rows", (64, 512), (32,), {}, "tile", 5),
     Case("a partial last tile of rows", (37, 300), (8,), {}, "edge", 6)],
    lambda case: _reduce_setup(case, _row_lse_want), _ROW_LSE, tol=1e-4,
    properties=(_bounded,), output="out")


@register("row_logsumexp", NOTEBOOK,
          "row_logsumexp(out: tl.Out, x: tl.In): out[i] = log Σ_j exp(x[i, j]) in one "
          "pass, loads of at most 16,384 elements, right on -inf and large rows; budget "
          "4MN + 4M bytes")
def _row_logsumexp(answer: Any) -> Result:
    return ROW_LOGSUMEXP.grade(answer)


_NEG_INF = float("-inf")


def _row_lse_kernel(out: tl.Out, x: tl.In):
    (i,) = out.tile_index
    (tm,) = out.tile_shape
    m = ct.full((tm,), _NEG_INF, dtype=ct.float32)
    s = ct.full((tm,), 0, dtype=ct.float32)
    for k in range(ct.cdiv(x.shape[1], 256)):
        t = ct.load(x, index=(i, k), shape=(tm, 256), padding_mode=ct.PaddingMode.NEG_INF)
        m_new = ct.maximum(m, ct.max(t, axis=1))
        safe = ct.where(m_new == _NEG_INF, 0.0, m_new)     # nothing finite yet: no nan
        s = s * ct.exp(m - safe) + ct.sum(ct.exp(t - ct.reshape(safe, (tm, 1))), axis=1)
        m = m_new
    out.store(m + ct.log(s))


@reference("row_logsumexp")
def row_logsumexp() -> Callable:
    """One pass over ``(tm, 256)`` chunks padded with ``-inf`` (exp adds 0): the running
    maximum, and the running sum rescaled by ``exp(m - m_new)``; a row with nothing finite
    yet subtracts 0 instead of ``-inf``.

    Example:
        >>> row_logsumexp().__name__
        '_row_lse_kernel'
    """
    return _row_lse_kernel


# ---- fused_bias_gelu ---------------------------------------------------------------------

_GELU = {
    "formula": Lesson(
        "the epilogue: h = x + bias (bias broadcast along rows), then GELU's tanh form, "
        "then + res", "04", FUSED,
        ("GELU(h) = 0.5·h·(1 + tanh(√(2/π)·(h + 0.044715·h³))): which part is off?",
         "bias has one value per column: its slice follows the block's column tile")),
    "tile": Lesson("the tile shape belongs to the partition, not to the kernel", "04",
                   FUSED, ("the checker launches several tile shapes",)),
    "shape": Lesson("non-square tiles: the bias slice follows y's columns", "04", FUSED, ()),
    "edge": Lesson("partial edge tiles: sizes need not be multiples of the tile", "04",
                   FUSED, ()),
    "budget": Lesson(
        "fusion: x and res read once, y written once, each block its bias slice; h and "
        "GELU(h) never go through memory", "04", "4. RMSNorm with a fused residual",
        ("a second launch, or a tile loaded twice, moves bytes the fused kernel does "
         "not",)),
}


def _gelu(h: np.ndarray) -> np.ndarray:
    return 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))


def _gelu_setup(case: Case) -> Setup:
    M, N = case.shape
    gm, _ = tile_grid(case.shape, case.tile)
    rng = np.random.default_rng(case.seed)
    x, bias, res = (tl.tensor(rng.standard_normal(s).astype(np.float32), device="cpu")
                    for s in ((M, N), (N,), (M, N)))
    want = _gelu(x.numpy().astype(np.float64) + bias.numpy()) + res.numpy()
    return Setup(nan_tensor((M, N)), (x, bias, res), want,
                 Budget(12 * M * N + 4 * gm * N,
                        "12MN: x, res and y once, plus each block's bias slice"))


FUSED_BIAS_GELU = KernelExercise(
    "fused_bias_gelu",
    [Case("the notebook's shape", (64, 256), (16, 128)),
     Case("tiles of another shape", (64, 256), (32, 64), lesson="tile", seed=1),
     Case("tall tiles", (128, 64), (64, 16), lesson="shape", seed=2),
     Case("sizes that are not multiples of the tile", (50, 200), (16, 128), lesson="edge",
          seed=3)],
    _gelu_setup, _GELU, tol=1e-4, output="y")


@register("fused_bias_gelu", NOTEBOOK,
          "k(y: tl.Out, x: tl.In, bias: tl.In, res: tl.In): y = gelu(x + bias) + res "
          "(tanh GELU) in one kernel; budget 12MN bytes plus each block's bias slice")
def _fused_bias_gelu(answer: Any) -> Result:
    return FUSED_BIAS_GELU.grade(answer)


def _bias_gelu_residual(y: tl.Out, x: tl.In, bias: tl.In, res: tl.In):
    _, n = y.tile_index
    _, tn = y.tile_shape
    b = ct.load(bias, index=(n,), shape=(tn,), padding_mode=ct.PaddingMode.ZERO)
    h = tl.load_like(x, y) + ct.reshape(b, (1, tn))
    g = 0.5 * h * (1.0 + ct.tanh(0.7978845608028654 * (h + 0.044715 * h * h * h)))
    y.store(g + tl.load_like(res, y))


@reference("fused_bias_gelu")
def fused_bias_gelu() -> Callable:
    """One kernel: load x, the bias slice and the residual once, store y once.

    Example:
        >>> fused_bias_gelu().__name__
        '_bias_gelu_residual'
    """
    return _bias_gelu_residual
