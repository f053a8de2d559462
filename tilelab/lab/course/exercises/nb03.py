"""Notebook 03 (GEMM, schedules, roofline): its exercises' graders and reference answers.

Example:
    >>> from tilelab.lab.course.exercises import grade, solution
    >>> grade("grouped_owner", solution("grouped_owner")).passed
    True
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

import tilelab as tl
from tilelab.kernels.examples import gemm
from tilelab.lab.course.grading import Result, failed, passed, reference, register

NOTEBOOK = "03_gemm_schedules_roofline"


@register("grouped_owner", NOTEBOOK,
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


@reference("grouped_owner")
def grouped_owner() -> dict[str, np.ndarray]:
    """The owner of every tile of an 8 × 8 grid under the two schedules, worked out by
    hand: grouped(4) numbers tiles down groups of 4 rows, column by column;
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


@register("gemm_traffic", NOTEBOOK,
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


@register("roofline", NOTEBOOK,
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


@reference("roofline")
def roofline() -> dict[str, float]:
    """The roofline's lower bound of a 4096³ bf16 GEMM (compulsory bytes), in seconds:
    ``max(FLOPs / dense bf16 peak, bytes / bandwidth)`` per GPU.

    Example:
        >>> round(roofline()["h200"] * 1e6)
        139
    """
    from tilelab.perf.specs import lookup_gpu

    flops, nbytes = 2 * 4096 ** 3, 3 * 4096 * 4096 * 2
    return {g: max(flops / lookup_gpu(g).peak("bf16"), nbytes / lookup_gpu(g).bandwidth)
            for g in ("h200", "b200")}
