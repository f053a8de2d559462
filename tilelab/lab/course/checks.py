"""The graders of :mod:`tilelab.lab.course.exercises`, one per exercise, in course order.

Each grader takes the student's answer and returns a
:class:`~tilelab.lab.course.grading.Result`. Kernels run on the CPU interpreter
(``tl.interpret``, device ``"cpu"``), so grading works on any machine; the trace gives the
values, the bytes each block moved and the races.

Example:
    >>> from tilelab.lab.course.exercises import grade, solution
    >>> grade("fix_refused", solution("fix_refused")).passed
    True
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

import tilelab as tl
from tilelab.kernels.examples import gemm, vector_add
from tilelab.lab.course.grading import Result, as_kernel, failed, passed, register

__all__ = ["write_counts", "flash_attention_numpy"]


def write_counts(trace: Any, arg: str) -> np.ndarray:
    """How many times each element of ``arg`` was written, over all blocks of a trace.

    Example:
        >>> write_counts(tl.interpret(add, z.partition(256), x, y), "z").max()  # doctest: +SKIP
        1
    """
    counts = np.zeros(trace.args[arg].shape, np.int64)
    for access in trace.regions(arg, kind="write"):
        once = np.zeros(counts.shape, bool)
        access.paint(once, True)
        counts += once
    return counts


def _first_wrong(got: np.ndarray, want: np.ndarray, tol: float) -> str | None:
    bad = ~np.isclose(got, want, rtol=tol, atol=tol, equal_nan=False)
    if not bad.any():
        return None
    i = tuple(int(v) for v in np.argwhere(bad)[0])
    where = ", ".join(map(str, i))
    return (f"{int(bad.sum())} of {bad.size} elements are wrong, e.g. [{where}] is "
            f"{float(got[i]):.6g}, expected {float(want[i]):.6g}")


@register("fix_refused", "01_hello_tiles",
          "scale_shift(z: tl.Out, x: tl.In): z = 2x + 1, written through z's partition")
def _fix_refused(answer: Any) -> Result:
    name = "fix_refused"
    kern = as_kernel(answer)
    x = tl.arange(1000, dtype="float32", device="cpu")
    z = tl.full(1000, np.nan, dtype="float32", device="cpu")
    tl.interpret(kern, z.partition(256), x)
    wrong = _first_wrong(z.numpy(), 2 * x.numpy() + 1, 1e-6)
    if wrong:
        return failed(name, wrong, "store 2 * tl.load_like(x, z) + 1 with z.store(...)")
    return passed(name, "accepted by the checker, and z = 2x + 1 on all 1000 elements")


@register("saxpy_edge", "02_vector_add_and_ownership",
          "saxpy(z: tl.Out, x: tl.In, y: tl.In, a: float): z = a·x + y, every element "
          "written exactly once, 12n bytes moved")
def _saxpy_edge(answer: Any) -> Result:
    name, n, a = "saxpy_edge", 1000, 3.0
    kern = as_kernel(answer)
    x = tl.arange(n, dtype="float32", device="cpu")
    y = tl.full(n, 0.5, dtype="float32", device="cpu")
    z = tl.full(n, np.nan, dtype="float32", device="cpu")
    trace = tl.interpret(kern, z.partition(256), x, y, a)
    counts = write_counts(trace, "z")
    if (counts != 1).any():
        i = int(np.argwhere(counts != 1)[0][0])
        return failed(name, f"z[{i}] was written {counts[i]} times",
                      "store once, through the partition: z.store(tile)")
    wrong = _first_wrong(z.numpy(), a * x.numpy() + y.numpy(), 1e-6)
    if wrong:
        return failed(name, wrong, "z = a * tl.load_like(x, z) + tl.load_like(y, z)")
    if trace.bytes != 12 * n:
        return failed(name, f"the kernel moved {trace.bytes:,} bytes; the minimum is "
                      f"12n = {12 * n:,} (read x and y once, write z once)",
                      "load each input tile once and reuse the loaded tile")
    return passed(name, f"all {n} elements written once (the edge tile too), "
                  f"{trace.bytes:,} bytes = 12n")


@register("grouped_owner", "03_gemm_schedules_roofline",
          "predict the owner block of every tile of an 8 x 8 grid under tl.grouped(group_m=4)"
          " and tl.persistent(num_blocks=6): a dict of two 8 x 8 arrays")
def _grouped_owner(answer: Any) -> Result:
    name = "grouped_owner"
    c = tl.empty((512, 512), dtype="float32", device="cpu")
    schedules = {"grouped(4)": tl.grouped(group_m=4), "persistent(6)": tl.persistent(num_blocks=6)}
    hints = {"grouped(4)": "grouped(4) numbers the tiles of 4 rows column by column: down "
                           "4 rows, then over one column, then the next group of rows",
             "persistent(6)": "persistent blocks take the tiles in row-major order in "
                              "turn: tile t goes to block t % 6"}
    for key, sched in schedules.items():
        if key not in answer:
            return failed(name, f"no prediction for {key!r}", "answer = {'grouped(4)': ..., "
                          "'persistent(6)': ...}, each an 8 x 8 array of block ids")
        got = np.asarray(answer[key])
        if got.shape != (8, 8):
            return failed(name, f"{key}: an array of shape {got.shape}", "one id per tile: 8 x 8")
        part = c.partition((64, 64), schedule=sched)
        for m in range(8):
            for n in range(8):
                want = part.owner((m, n))
                if int(got[m, n]) != want:
                    return failed(name, f"{key}: tile ({m}, {n}) is block {want}'s, you "
                                  f"said {int(got[m, n])}", hints[key])
    return passed(name, "both ownership maps are right")


@tl.kernel
def _scale(w: tl.Out, z: tl.In):
    w.store(tl.load_like(z, w) * 2.0)


@register("gemm_traffic", "03_gemm_schedules_roofline",
          "traffic(M, N, K, TM, TN, itemsize) -> bytes the tiled GEMM's loads move, "
          "partial edge tiles included")
def _gemm_traffic(answer: Any) -> Result:
    name = "gemm_traffic"
    for M, N, K, TM, TN in ((256, 256, 64, 64, 64), (200, 136, 96, 64, 64),
                            (130, 70, 40, 32, 32)):
        a = tl.randn(M, K, dtype="bfloat16", device="cpu", seed=0)
        b = tl.randn(K, N, dtype="bfloat16", device="cpu", seed=1)
        c = tl.empty((M, N), dtype="bfloat16", device="cpu")
        trace = tl.interpret(gemm, c.partition((TM, TN)), a, b, 32, races=False)
        got = int(answer(M, N, K, TM, TN, 2))
        if got != trace.bytes_read:
            return failed(name, f"M, N, K = {M}, {N}, {K} in {TM} x {TN} tiles: you said "
                          f"{got:,} bytes, the loads moved {trace.bytes_read:,}",
                          "each block reads its whole row panel of A and column panel of "
                          "B; count A once per column of tiles (ceil(N / TN)) and B once "
                          "per row (ceil(M / TM)); an edge tile reads only rows and "
                          "columns inside the matrix")
    return passed(name, "right for all three shapes, edge tiles included")


@register("roofline", "03_gemm_schedules_roofline",
          "predict the roofline's lower bound (seconds) of a 4096³ bf16 GEMM on an H200 "
          "and a B200: {'h200': s, 'b200': s}")
def _roofline(answer: Any) -> Result:
    from tilelab.perf import predict
    from tilelab.perf.counting import gemm as gemm_work

    name = "roofline"
    work = gemm_work(4096, 4096, 4096, a_dtype="bfloat16", c_dtype="bfloat16")
    for gpu in ("h200", "b200"):
        want = predict(work, gpu).bound_s
        got = float(answer.get(gpu, float("nan")))
        if not abs(got - want) <= 0.05 * want:
            return failed(name, f"{gpu}: you predicted {got * 1e6:.4g} µs, the roofline "
                          f"bound is {want * 1e6:.3g} µs",
                          "the roofline's lower bound is max(FLOPs / peak, bytes / "
                          "bandwidth): lookup_gpu(gpu).peak('bf16') and .bandwidth, with "
                          "2·4096³ FLOPs and 3·4096²·2 bytes")
    return passed(name, "both within 5% of the roofline bound (compute-bound on both)")


def _lse_rows() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    plain = rng.standard_normal(4096)
    masked = plain.copy()
    masked[:1024] = -np.inf                     # a leading chunk of -inf (a causal mask)
    masked[2000:2100] = -np.inf
    large = rng.standard_normal(4096) * 3 + 5000.0
    return [plain, masked, large]


@register("online_logsumexp", "04_softmax_reductions_fusion",
          "lse(chunks) -> (m, s): the running max and sum of exp(x - m) over a row's "
          "chunks, right with -inf chunks and large values")
def _online_logsumexp(answer: Any) -> Result:
    name = "online_logsumexp"
    for k, row in enumerate(_lse_rows()):
        m, s = answer([c.astype(np.float32) for c in row.reshape(8, 512)])
        got = row - float(m) - math.log(float(s)) if s > 0 else np.full_like(row, np.nan)
        finite = np.isfinite(row)
        want = row - (row[finite].max() + np.log(np.exp(row[finite] - row[finite].max()).sum()))
        if not np.allclose(got[finite], want[finite], rtol=0, atol=1e-4):
            what = ("a row whose first chunk is all -inf" if k == 1 else
                    "a row of values near 5000" if k == 2 else "a plain row")
            return failed(name, f"log-softmax is wrong on {what}: m = {m}, s = {s}",
                          "skip a chunk while the maximum is still -inf (exp(-inf - -inf) "
                          "is nan), and always subtract the running maximum before exp")
    return passed(name, "matches float64 log-softmax on plain, masked and large rows")


def _gelu(h: np.ndarray) -> np.ndarray:
    return 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))


@register("fused_bias_gelu", "04_softmax_reductions_fusion",
          "k(y: tl.Out, x: tl.In, bias: tl.In, res: tl.In): y = gelu(x + bias) + res "
          "(tanh GELU) in one kernel that moves the fused minimum of bytes")
def _fused_bias_gelu(answer: Any) -> Result:
    name, (M, N), (TM, TN) = "fused_bias_gelu", (64, 256), (16, 128)
    kern = as_kernel(answer)
    x = tl.randn(M, N, dtype="float32", device="cpu", seed=0)
    bias = tl.randn(N, dtype="float32", device="cpu", seed=1)
    res = tl.randn(M, N, dtype="float32", device="cpu", seed=2)
    y = tl.full((M, N), np.nan, dtype="float32", device="cpu")
    trace = tl.interpret(kern, y.partition((TM, TN)), x, bias, res)
    want = _gelu(x.numpy().astype(np.float64) + bias.numpy()) + res.numpy()
    wrong = _first_wrong(y.numpy(), want, 1e-4)
    if wrong:
        return failed(name, wrong, "h = x + bias (bias broadcast along rows); "
                      "gelu(h) = 0.5·h·(1 + tanh(0.79788456·(h + 0.044715·h³))); then + res")
    blocks = (M // TM) * (N // TN)
    least = 3 * M * N * 4 + blocks * TN * 4     # x, res, y once; each block its bias slice
    if trace.bytes > least:
        return failed(name, f"the kernel moved {trace.bytes:,} bytes; fused, it needs "
                      f"{least:,} (x, res and y once, plus each block's {TN} bias values)",
                      "load each input tile once and keep h in registers")
    return passed(name, f"right, in one kernel, at the fused minimum of {least:,} bytes")


@register("race_hunt", "05_unsafe_kernels_and_races",
          "total(out: tl.Raw, x: tl.In, T: ct.Constant[int]), unsafe, grid (n // T,): "
          "out[0] = sum of x, with no race")
def _race_hunt(answer: Any) -> Result:
    name, n, T = "race_hunt", 4096, 256
    kern = as_kernel(answer, unsafe=True)
    x = tl.randn(n, dtype="float32", device="cpu", seed=3)
    out = tl.zeros(1, dtype="float32", device="cpu")
    trace = tl.interpret(kern, out, x, T, grid=(n // T,))
    if trace.has_races:
        first = str(trace.races[0]).split(";")[0]
        return failed(name, f"{len(trace.races)} race(s), e.g. {first}",
                      "all blocks write out[0]: add into it with ct.atomic_add(out, (0,), "
                      "partial) (atomics do not race), or write partials to a partition "
                      "and sum them in a second launch")
    want = float(x.numpy().astype(np.float64).sum())
    got = float(out.numpy()[0])
    if not abs(got - want) <= 1e-3 * max(1.0, abs(want)):
        return failed(name, f"out[0] = {got}, the sum is {want:.6g}",
                      "each block must add the sum of its whole tile of x")
    return passed(name, f"no race, and out[0] = {got:.6g} is the sum")


@register("graph_deps", "06_async_and_graphs",
          "predict g.dependencies() of the five recorded launches and which tensors the "
          "host may not read while the replay is pending")
def _graph_deps(answer: Any) -> Result:
    name = "graph_deps"
    add, scale = vector_add, _scale
    x, y, a, b, c = (tl.ones(1024, dtype="float32", device="cpu") for _ in range(5))
    with tl.graph() as g:
        add(a.partition(256), x, y)     # 0: a = x + y
        scale(b.partition(256), a)      # 1: b = 2a
        add(c.partition(256), x, x)     # 2: c = 2x
        scale(a.partition(256), c)      # 3: a = 2c
        add(y.partition(256), b, c)     # 4: y = b + c
    deps = [sorted(d) for d in g.dependencies()]
    got = [sorted(int(j) for j in d) for d in answer.get("deps", [])]
    if got != deps:
        i = next((i for i in range(5) if i >= len(got) or got[i] != deps[i]), 0)
        return failed(name, f"launch {i} waits for {deps[i]}, you said "
                      f"{got[i] if i < len(got) else 'nothing'}",
                      "a launch waits for an earlier one that writes what it touches or "
                      "touches what it writes (writing an input another launch reads "
                      "counts); a dependency already implied through another is left out")
    replay = g.replay()
    raises = {}
    for key, t in (("x", x), ("y", y), ("a", a), ("b", b), ("c", c)):
        try:
            t.numpy()
            raises[key] = False
        except tl.BorrowError:
            raises[key] = True
    replay.wait()
    said = {k: bool(v) for k, v in answer.get("host_raises", {}).items()}
    for key, want in raises.items():
        if said.get(key) != want:
            return failed(name, f"reading {key} while the replay is pending "
                          f"{'raises' if want else 'is allowed'}; you said "
                          f"{'raises' if said.get(key) else 'allowed' if key in said else 'nothing'}",
                          "the replay holds exclusive borrows on everything the graph "
                          "writes (y too) and shared borrows on what it only reads")
    return passed(name, "the dependencies and the borrows are right")


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


@register("causal_mask", "08_flash_attention",
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
    wrong = _first_wrong(got, want, 1e-6)
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
