"""Notebook 03 (GEMM, schedules, roofline): its exercises' graders and reference answers.

Three that predict (graded on hidden shapes and parameters, never against one number):
``gemm_traffic`` (bytes the tiled GEMM's loads move), ``grouped_owner`` (the owner maps
of the two schedules) and ``roofline`` (the roofline bound of a GEMM on a GPU). Three
that write a GEMM: ``linear`` (a tiled ``x @ wᵀ + bias``), ``grouped_linear`` (launched
so that a wave of blocks shares panels) and ``persistent_linear`` (a fixed number of
blocks looping over their tiles); each is graded on its bytes.

Example:
    >>> from tilelab.lab.course.exercises import grade, solution
    >>> grade("grouped_owner", solution("grouped_owner")).passed
    True
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

import cuda.tile as ct
import tilelab as tl
from tilelab.lab.course.exercises.budget import Budget
from tilelab.lab.course.exercises.compare import tile_grid
from tilelab.lab.course.exercises.forms import Ran
from tilelab.lab.course.exercises.hidden import Case, grade_cases
from tilelab.lab.course.exercises.kernels import KernelExercise, Setup, nan_tensor
from tilelab.lab.course.grading import Lesson, Result, miss, reference, register

NOTEBOOK = "03_gemm_schedules_roofline"

GEMM = "1. A tiled GEMM"
READS = "3. What block (m, n) reads"
SCHEDULES = "4. Schedules: which block takes which tile, and when"
WAVES = "5. A wave of blocks and the L2 cache"
ROOFLINE = "6. The roofline"


def _randn(shape: tuple[int, ...], seed: int) -> Any:
    data = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return tl.tensor(data, device="cpu")


# ---- gemm_traffic ------------------------------------------------------------------------

_TRAFFIC = {
    "formula": Lesson(
        "tile traffic: every block reads its whole row panel of A and column panel of B",
        "03", READS,
        ("a panel of A is read by every block of its row of C tiles: how many blocks is "
         "that?", "count A and B apart, then add; the compulsory bytes count each matrix "
         "once, the loads do not")),
    "edge": Lesson(
        "partial edge tiles: an edge block reads only the rows and columns inside the "
        "matrix (the interpreter counts in-bounds bytes)", "03", READS,
        ("round the number of tiles up, but not the rows a tile reads",)),
    "shape": Lesson(
        "non-square tiles (TM ≠ TN): which tile size counts the blocks that share a panel "
        "of A, and which those that share a panel of B?", "03", READS, ()),
    "dtype": Lesson("bytes are elements times the item size", "03", READS, ()),
}


def _traffic_cases() -> list[Case]:
    def c(label: str, dims: tuple[int, ...], lesson: str = "formula") -> Case:
        M, N, K, TM, TN, size = dims
        return Case(label, (M, N), (TM, TN), {"K": K, "itemsize": size}, lesson)
    return [c("the notebook's shape", (256, 256, 64, 64, 64, 2)),
            c("partial edge tiles", (200, 136, 96, 64, 64, 2), "edge"),
            c("more partial edge tiles", (130, 70, 40, 32, 32, 2), "edge"),
            c("tiles with TM ≠ TN", (192, 96, 64, 64, 32, 2), "shape"),
            c("float32 (4-byte items)", (128, 128, 64, 32, 32, 4), "dtype")]


@register("gemm_traffic", NOTEBOOK,
          "traffic(M, N, K, TM, TN, itemsize) -> bytes the tiled GEMM's loads move, "
          "partial edge tiles included")
def _gemm_traffic(answer: Any) -> Result:
    from tilelab.kernels.examples import gemm

    dtypes = {2: "bfloat16", 4: "float32"}

    def one(case: Case) -> Result | None:
        (M, N), (TM, TN) = case.shape, case.tile
        K, size = case.params["K"], case.params["itemsize"]
        a = tl.zeros((M, K), dtype=dtypes[size], device="cpu")
        b = tl.zeros((K, N), dtype=dtypes[size], device="cpu")
        c = tl.empty((M, N), dtype=dtypes[size], device="cpu")
        want = tl.interpret(gemm, c.partition((TM, TN)), a, b, 32, races=False).bytes_read
        got = int(answer(M, N, K, TM, TN, size))
        if got == want:
            return None
        lesson = _TRAFFIC["formula" if case is cases[0] else case.lesson]
        return miss("gemm_traffic", f"you said {got:,} bytes; the loads moved "
                    f"{'more' if want > got else 'fewer'}", lesson, (want,))

    cases = _traffic_cases()
    return grade_cases("gemm_traffic", cases, one,
                       f"right on all {len(cases)} shapes (edge tiles, TM ≠ TN, 4-byte "
                       "items)")


@reference("gemm_traffic")
def gemm_traffic() -> Callable[..., int]:
    """Bytes the loads of the tiled GEMM move. Each block reads its row panel of A and
    its column panel of B; an edge tile reads only its rows or columns inside the matrix.
    So A is read once per column of tiles and B once per row of tiles.

    Example:
        >>> gemm_traffic()(256, 256, 256, 64, 64, 2)
        1048576
    """
    def traffic(M: int, N: int, K: int, TM: int, TN: int, itemsize: int) -> int:
        return (math.ceil(N / TN) * M * K + math.ceil(M / TM) * K * N) * itemsize
    return traffic


# ---- grouped_owner -----------------------------------------------------------------------

_OWNERS = {
    "grouped": Lesson(
        "the grouped order: blocks walk a group of group_m rows of tiles column by column, "
        "then the next group", "03", SCHEDULES,
        ("within a group, consecutive blocks go down the rows first",
         "the last group has fewer rows when group_m does not divide the rows of tiles: "
         "its blocks walk only the rows it has")),
    "persistent": Lesson(
        "the persistent order: the tiles, in row-major order, are dealt out to the blocks "
        "in turn", "03", SCHEDULES,
        ("block b takes the tiles b, b + num_blocks, b + 2·num_blocks, ... of the "
         "row-major order",)),
    "answer": Lesson(
        "the answer's form: {'grouped': f(grid_m, grid_n, group_m), 'persistent': "
        "f(grid_m, grid_n, num_blocks)}, each returning a grid_m × grid_n array of block "
        "ids", "03", SCHEDULES, ()),
}


def _owner_cases() -> list[Case]:
    return [Case("grouped, the notebook's grid", (8, 8), params={"group_m": 4},
                 lesson="grouped"),
            Case("grouped, a short last group", (6, 5), params={"group_m": 4},
                 lesson="grouped"),
            Case("grouped, group_m = 1", (3, 7), params={"group_m": 1}, lesson="grouped"),
            Case("persistent, the notebook's grid", (8, 8), params={"num_blocks": 6},
                 lesson="persistent"),
            Case("persistent, a non-square grid", (5, 7), params={"num_blocks": 4},
                 lesson="persistent"),
            Case("persistent, blocks that do not divide the tiles", (3, 5),
                 params={"num_blocks": 7}, lesson="persistent")]


@register("grouped_owner", NOTEBOOK,
          "{'grouped': f(grid_m, grid_n, group_m), 'persistent': f(grid_m, grid_n, "
          "num_blocks)}: the block that owns each tile, as a grid_m × grid_n array")
def _grouped_owner(answer: Any) -> Result:
    def one(case: Case) -> Result | None:
        gm, gn = case.shape
        kind = case.lesson
        if not isinstance(answer, dict) or not callable(answer.get(kind)):
            return miss("grouped_owner", f"no function for {kind!r}", _OWNERS["answer"])
        param = case.params["group_m" if kind == "grouped" else "num_blocks"]
        sched = (tl.grouped(group_m=param) if kind == "grouped"
                 else tl.persistent(num_blocks=param))
        part = tl.empty((gm * 16, gn * 16), device="cpu").partition((16, 16), schedule=sched)
        want = np.array([[part.owner((m, n)) for n in range(gn)] for m in range(gm)])
        got = np.asarray(answer[kind](gm, gn, param))
        if got.shape != want.shape:
            return miss("grouped_owner", f"an array of shape {got.shape}, not one block "
                        "id per tile", _OWNERS["answer"])
        bad = np.argwhere(got != want)
        if not len(bad):
            return None
        return miss("grouped_owner", f"{len(bad)} of {want.size} tiles have the wrong "
                    f"owner", _OWNERS[kind], tuple(float(v) for v in want.ravel()))

    return grade_cases("grouped_owner", _owner_cases(), one,
                       "both owner maps are right on every grid (short last groups "
                       "included)")


@reference("grouped_owner")
def grouped_owner() -> dict[str, Callable[..., np.ndarray]]:
    """The owner of every tile under the two schedules, worked out by hand: grouped
    numbers tiles down groups of ``group_m`` rows (the last group may be shorter),
    column by column; persistent deals the row-major tiles out to the blocks in turn.

    Example:
        >>> grouped_owner()["persistent"](1, 8, 6)[0].tolist()
        [0, 1, 2, 3, 4, 5, 0, 1]
    """
    def grouped(grid_m: int, grid_n: int, group_m: int) -> np.ndarray:
        owner = np.zeros((grid_m, grid_n), int)
        for m in range(grid_m):
            first = m // group_m * group_m
            rows = min(group_m, grid_m - first)
            for n in range(grid_n):
                owner[m, n] = first * grid_n + n * rows + (m - first)
        return owner

    def persistent(grid_m: int, grid_n: int, num_blocks: int) -> np.ndarray:
        blocks = min(num_blocks, grid_m * grid_n)
        return (np.arange(grid_m * grid_n) % blocks).reshape(grid_m, grid_n)
    return {"grouped": grouped, "persistent": persistent}


# ---- roofline ----------------------------------------------------------------------------

_ROOF = {
    "formula": Lesson(
        "the roofline bound: the slower of the math at the peak rate and the compulsory "
        "bytes at the memory bandwidth", "03", ROOFLINE,
        ("which peak: dense bf16 tensor cores (lookup_gpu(gpu).peak('bf16')); which "
         "bytes: A, B and C once each", "a bound is a maximum of two times, not a sum")),
    "memory": Lesson(
        "a GEMM with a small M is memory-bound: the bound is the bytes' time, not the "
        "math's", "03", ROOFLINE,
        ("compare the two times for this shape: which one is larger?",)),
    "gpu": Lesson("every GPU has its own roofs", "03", ROOFLINE,
                  ("read the peak and the bandwidth of the GPU you are given",)),
}


@register("roofline", NOTEBOOK,
          "bound(M, N, K, gpu) -> seconds: the roofline's lower bound of an M×N×K bf16 "
          "GEMM (A, B and C moved once) on a GPU ('h200', 'b200', 'rtx5090')")
def _roofline(answer: Any) -> Result:
    from tilelab.perf import predict
    from tilelab.perf.counting import gemm as gemm_work

    def one(case: Case) -> Result | None:
        M, N = case.shape
        K, gpu = case.params["K"], case.params["gpu"]
        want = predict(gemm_work(M, N, K, a_dtype="bfloat16", c_dtype="bfloat16"),
                       gpu).bound_s
        got = float(answer(M, N, K, gpu))
        if abs(got - want) <= 0.05 * want:
            return None
        lesson = _ROOF["formula" if case is cases[0] else case.lesson]
        return miss("roofline", f"{got:.4g} s is {'above' if got > want else 'below'} "
                    "the bound (by more than 5%)", lesson, (want, want * 1e6, want * 1e3))

    cases = [Case("a large GEMM on an H200", (4096, 4096), params={"K": 4096, "gpu": "h200"}),
             Case("the same GEMM on a B200", (4096, 4096), params={"K": 4096, "gpu": "b200"},
                  lesson="gpu"),
             Case("a thin GEMM (16 rows) on an H200", (16, 4096),
                  params={"K": 4096, "gpu": "h200"}, lesson="memory"),
             Case("a rectangular GEMM on an RTX 5090", (8192, 1024),
                  params={"K": 2048, "gpu": "rtx5090"}, lesson="gpu")]
    return grade_cases("roofline", cases, one,
                       f"within 5% of the roofline bound on all {len(cases)} GEMMs "
                       "(compute-bound and memory-bound, three GPUs)")


@reference("roofline")
def roofline() -> Callable[[int, int, int, str], float]:
    """The roofline's lower bound of a bf16 GEMM, compulsory bytes: ``max(FLOPs / dense
    bf16 peak, bytes / bandwidth)``.

    Example:
        >>> round(roofline()(4096, 4096, 4096, "h200") * 1e6)
        139
    """
    from tilelab.perf.specs import lookup_gpu

    def bound(M: int, N: int, K: int, gpu: str) -> float:
        spec = lookup_gpu(gpu)
        return max(2 * M * N * K / spec.peak("bf16"),
                   (M * K + K * N + M * N) * 2 / spec.bandwidth)
    return bound


# ---- linear, grouped_linear, persistent_linear --------------------------------------------

_LINEAR = {
    "formula": Lesson(
        "the tiled GEMM: block (m, n) accumulates row panel m of x times column panel n "
        "of wᵀ along K, then adds its slice of bias", "03", GEMM,
        ("w is stored (N, K), a row per output feature: the tile of w at (n, k) is "
         "(tn, tk), and the product needs it transposed",
         "accumulate in float32 over every K step, then add bias broadcast along rows")),
    "shape": Lesson(
        "non-square tiles (TM ≠ TN): x's tiles follow y's rows, w's tiles y's columns",
        "03", GEMM,
        ("with square tiles a swapped index or shape goes unnoticed",)),
    "tile": Lesson("the tile shape belongs to the partition, not to the kernel", "03",
                   GEMM, ("the checker launches several tile shapes",)),
    "edge": Lesson(
        "partial tiles: M, N and K need not be multiples of the tiles; padding must add "
        "nothing to the sum", "03", GEMM,
        ("the last K step is partial too: what does a zero-padded tile add to a dot "
         "product?",)),
    "K": Lesson("the K loop: the number of steps comes from K, not from a constant", "03",
                GEMM, ("the checker uses several K",)),
    "budget": Lesson(
        "tile traffic: each block reads its row panel of x, its column panel of w and its "
        "bias slice once, and writes its tile once", "03", READS,
        ("a tile loaded twice per K step, or a panel loaded again, costs bytes the budget "
         "does not have",)),
    "grouped": Lesson(
        "a wave of blocks shares panels through L2 when the blocks cover a square patch "
        "of tiles: choose the launch's schedule", "03", WAVES,
        ("row-major order gives a wave one panel of x and many of w; which group_m "
         "makes the patch square for this wave?",
         "the wave size is a parameter of your function: the group size can follow it")),
    "persistent": Lesson(
        "a persistent kernel: a fixed number of blocks, each looping over the tiles the "
        "schedule hands it", "03", "4. Schedules: which block takes which tile, and when",
        ("every tile of the loop is computed and stored at the tile the loop gave",
         "the number of blocks is the schedule's, whatever the number of tiles")),
}


def _linear_budget(M: int, N: int, K: int, TM: int, TN: int) -> Budget:
    gm, gn = tile_grid((M, N), (TM, TN))
    return Budget(4 * (gn * M * K + gm * N * K + gm * N + M * N),
                  "x read once per column of tiles, w and bias once per row of tiles, "
                  "y written once")


def _linear_setup(case: Case) -> Setup:
    M, N = case.shape
    K = case.params["K"]
    x, w, bias = _randn((M, K), case.seed), _randn((N, K), case.seed + 1), \
        _randn((N,), case.seed + 2)
    want = x.numpy().astype(np.float64) @ w.numpy().T.astype(np.float64) + bias.numpy()
    return Setup(nan_tensor((M, N)), (x, w, bias), want, _linear_budget(M, N, K, *case.tile))


def _linear_cases(lesson_edge: str = "edge") -> list[Case]:
    return [Case("the notebook's shape", (64, 64), (32, 32), {"K": 64}),
            Case("tiles with TM ≠ TN", (64, 64), (32, 16), {"K": 64}, "shape", 1),
            Case("another K", (64, 64), (32, 32), {"K": 160}, "K", 2),
            Case("sizes that are not multiples of the tiles", (100, 72), (32, 16),
                 {"K": 80}, lesson_edge, 3),
            Case("larger square tiles", (128, 64), (64, 64), {"K": 32}, "tile", 4)]


LINEAR = KernelExercise("linear", _linear_cases(), _linear_setup, _LINEAR, tol=1e-4,
                        output="y")


@register("linear", NOTEBOOK,
          "linear(y: tl.Out, x: tl.In, w: tl.In, bias: tl.In): y = x @ wᵀ + bias, w of "
          "shape (N, K); budget: x once per column of tiles, w and bias once per row of "
          "tiles, y once (4-byte items)")
def _linear(answer: Any) -> Result:
    return LINEAR.grade(answer)


def _linear_kernel(y: tl.Out, x: tl.In, w: tl.In, bias: tl.In):
    m, n = y.tile_index
    tm, tn = y.tile_shape
    acc = ct.full((tm, tn), 0, dtype=ct.float32)
    for k in range(ct.cdiv(x.shape[1], 32)):
        a = ct.load(x, index=(m, k), shape=(tm, 32), padding_mode=ct.PaddingMode.ZERO)
        b = ct.load(w, index=(n, k), shape=(tn, 32), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(a, ct.transpose(b), acc)
    b = ct.load(bias, index=(n,), shape=(tn,), padding_mode=ct.PaddingMode.ZERO)
    y.store((acc + ct.reshape(b, (1, tn))).astype(y.dtype))


@reference("linear")
def linear() -> Callable:
    """Block ``(m, n)`` walks K in steps of 32: a ``(tm, 32)`` tile of x and a
    ``(tn, 32)`` tile of w (transposed) into a float32 accumulator, then the bias slice
    broadcast along rows.

    Example:
        >>> linear().__name__
        '_linear_kernel'
    """
    return _linear_kernel


def _wave_bytes(case: Case, ran: Ran, s: Setup) -> tuple[str, str] | None:
    """The distinct bytes the first ``wave`` blocks of the GEMM launch read, against what
    a square patch of tiles reads."""
    wave = case.params["wave"]
    gemm = max(ran.traces, key=lambda t: t.flops)
    used = 0
    for arg, info in gemm.args.items():
        seen = np.zeros(info.shape, bool)
        for block in range(min(wave, gemm.num_blocks)):
            seen |= gemm.footprint(arg, block=block, kind="read")
        used += int(seen.sum()) * info.itemsize
    side = math.isqrt(wave)
    (TM, TN), K = case.tile, case.params["K"]
    limit = 4 * (side * TM * K + side * TN * K + side * TN)
    if used <= limit:
        return None
    return "grouped", (f"the first {wave} blocks read {used:,} distinct bytes of x, w and "
                       f"bias; the budget for a wave is {limit:,} (a {side} × {side} patch "
                       "of tiles)")


def _grouped_setup(case: Case) -> Setup:
    s = _linear_setup(case)
    s.budget = None                 # graded on the wave's bytes (a property)
    s.extra["host"] = (case.params["wave"],)
    return s


GROUPED_LINEAR = KernelExercise(
    "grouped_linear",
    [Case("the notebook's shape, a wave of 16", (256, 256), (32, 32), {"K": 32, "wave": 16},
          "grouped"),
     Case("a wave of 4", (192, 192), (32, 32), {"K": 32, "wave": 4}, "grouped", 1),
     Case("a wave of 64, 10 rows of tiles", (320, 512), (32, 32), {"K": 32, "wave": 64},
          "grouped", 2)],
    _grouped_setup, _LINEAR, tol=1e-4, properties=(_wave_bytes,), output="y")


@register("grouped_linear", NOTEBOOK,
          "run(y, x, w, bias, wave): launch a linear kernel on (32, 32) tiles of y so "
          "that the first `wave` blocks read at most the panels of a √wave × √wave patch",
          kernel=True)
def _grouped_linear(answer: Any) -> Result:
    return GROUPED_LINEAR.grade(answer)


@reference("grouped_linear")
def grouped_linear() -> Callable:
    """Launch :func:`linear`'s kernel with ``tl.grouped(group_m=√wave)``: the first wave
    covers a square patch of tiles.

    Example:
        >>> grouped_linear().__name__
        'run'
    """
    kernel = tl.kernel(_linear_kernel)

    def run(y: Any, x: Any, w: Any, bias: Any, wave: int) -> None:
        group = tl.grouped(group_m=math.isqrt(wave))
        kernel(y.partition((32, 32), schedule=group), x, w, bias)
    return run


def _persistent_setup(case: Case) -> Setup:
    s = _linear_setup(case)
    s.schedule = tl.persistent(num_blocks=case.params["blocks"])
    s.extra["host"] = (case.params["blocks"],)
    return s


def _blocks(case: Case, ran: Ran, s: Setup) -> tuple[str, str] | None:
    blocks = max(ran.traces, key=lambda t: t.flops).num_blocks
    tiles = math.prod(tile_grid(case.shape, case.tile))
    if blocks == min(case.params["blocks"], tiles):   # (never more blocks than tiles)
        return None
    return "persistent", f"the GEMM launch ran {blocks} blocks, not the schedule's number"


PERSISTENT_LINEAR = KernelExercise(
    "persistent_linear",
    [Case(c.label, c.shape, c.tile, dict(c.params, blocks=b), c.lesson, c.seed)
     for c, b in zip(_linear_cases(), (3, 4, 5, 7, 2))],
    _persistent_setup,
    dict(_LINEAR, formula=_LINEAR["persistent"], unwritten=_LINEAR["persistent"]), tol=1e-4,
    properties=(_blocks,), output="y")


@register("persistent_linear", NOTEBOOK,
          "plinear(y: tl.Out, x: tl.In, w: tl.In, bias: tl.In) for a tl.persistent "
          "partition of y: every block loops over its tiles; the linear budget")
def _persistent_linear(answer: Any) -> Result:
    return PERSISTENT_LINEAR.grade(answer)


def _persistent_kernel(y: tl.Out, x: tl.In, w: tl.In, bias: tl.In):
    tm, tn = y.tile_shape
    for t in y.tiles():
        m, n = y.tile_index_of(t)
        acc = ct.full((tm, tn), 0, dtype=ct.float32)
        for k in range(ct.cdiv(x.shape[1], 32)):
            a = ct.load(x, index=(m, k), shape=(tm, 32), padding_mode=ct.PaddingMode.ZERO)
            b = ct.load(w, index=(n, k), shape=(tn, 32), padding_mode=ct.PaddingMode.ZERO)
            acc = ct.mma(a, ct.transpose(b), acc)
        b = ct.load(bias, index=(n,), shape=(tn,), padding_mode=ct.PaddingMode.ZERO)
        y.store((acc + ct.reshape(b, (1, tn))).astype(y.dtype), at=t)


@reference("persistent_linear")
def persistent_linear() -> Callable:
    """:func:`linear`'s body inside ``for t in y.tiles()``, at ``y.tile_index_of(t)``,
    storing ``at=t``.

    Example:
        >>> persistent_linear().__name__
        '_persistent_kernel'
    """
    return _persistent_kernel
