"""Notebook 03's exercises: the reference answers pass, typical wrong answers fail with a
hint that names the concept and the section that explains it, answers right for one
shape (square tiles, one K, one wave size, one GPU) fail on a hidden one."""
from __future__ import annotations

import math

import numpy as np
import pytest

import cuda.tile as ct
import tilelab as tl
from course_checks import Wrong, fails
from tilelab.lab.course.exercises import grade, solution

GEMM = "1. A tiled GEMM"
READS = "3. What block (m, n) reads"
SCHEDULES = "4. Schedules: which block takes which tile, and when"
WAVES = "5. A wave of blocks and the L2 cache"
ROOF = "6. The roofline"


def compulsory(M, N, K, TM, TN, s):                         # the notebook's stub
    return (M * K + K * N) * s


def padded(M, N, K, TM, TN, s):                              # full tiles at the edges
    return (math.ceil(N / TN) * math.ceil(M / TM) * TM * K
            + math.ceil(M / TM) * math.ceil(N / TN) * TN * K) * s


def swapped(M, N, K, TM, TN, s):                             # TM and TN confused
    return (math.ceil(N / TM) * M * K + math.ceil(M / TN) * K * N) * s


def _row_major(gm, gn, g):
    return np.arange(gm * gn).reshape(gm, gn)


def _full_groups(gm, gn, g):                                 # every group of g rows
    return np.array([[m // g * g * gn + n * g + m % g for n in range(gn)] for m in range(gm)])


def _chunks(gm, gn, p):                                      # contiguous runs per block
    per = math.ceil(gm * gn / p)
    return (np.arange(gm * gn) // per).reshape(gm, gn)


def _dealt(gm, gn, p):
    return (np.arange(gm * gn) % p).reshape(gm, gn)


def compute_only(M, N, K, gpu):
    from tilelab.perf.specs import lookup_gpu
    return 2 * M * N * K / lookup_gpu(gpu).peak("bf16")


def memory_only(M, N, K, gpu):
    from tilelab.perf.specs import lookup_gpu
    return (M * K + K * N + M * N) * 2 / lookup_gpu(gpu).bandwidth


def h200_number(M, N, K, gpu):                               # one GPU's figure, typed in
    return 2 * M * N * K / 989.5e12


def no_bias(y: tl.Out, x: tl.In, w: tl.In, bias: tl.In):
    m, n = y.tile_index
    tm, tn = y.tile_shape
    acc = ct.full((tm, tn), 0, dtype=ct.float32)
    for k in range(ct.cdiv(x.shape[1], 32)):
        a = ct.load(x, index=(m, k), shape=(tm, 32), padding_mode=ct.PaddingMode.ZERO)
        b = ct.load(w, index=(n, k), shape=(tn, 32), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(a, ct.transpose(b), acc)
    y.store(acc)


def w_not_transposed(y: tl.Out, x: tl.In, w: tl.In, bias: tl.In):
    m, n = y.tile_index
    tm, tn = y.tile_shape
    acc = ct.full((tm, tn), 0, dtype=ct.float32)
    for k in range(ct.cdiv(x.shape[1], 32)):
        a = ct.load(x, index=(m, k), shape=(tm, 32), padding_mode=ct.PaddingMode.ZERO)
        b = ct.load(w, index=(k, n), shape=(32, tn), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(a, b, acc)
    b = ct.load(bias, index=(n,), shape=(tn,), padding_mode=ct.PaddingMode.ZERO)
    y.store(acc + ct.reshape(b, (1, tn)))


def two_k_steps(y: tl.Out, x: tl.In, w: tl.In, bias: tl.In):   # right for K = 64 only
    m, n = y.tile_index
    tm, tn = y.tile_shape
    acc = ct.full((tm, tn), 0, dtype=ct.float32)
    for k in range(2):
        a = ct.load(x, index=(m, k), shape=(tm, 32), padding_mode=ct.PaddingMode.ZERO)
        b = ct.load(w, index=(n, k), shape=(tn, 32), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(a, ct.transpose(b), acc)
    b = ct.load(bias, index=(n,), shape=(tn,), padding_mode=ct.PaddingMode.ZERO)
    y.store(acc + ct.reshape(b, (1, tn)))


def reloads_x(y: tl.Out, x: tl.In, w: tl.In, bias: tl.In):
    m, n = y.tile_index
    tm, tn = y.tile_shape
    acc = ct.full((tm, tn), 0, dtype=ct.float32)
    for k in range(ct.cdiv(x.shape[1], 32)):
        a = ct.load(x, index=(m, k), shape=(tm, 32), padding_mode=ct.PaddingMode.ZERO)
        a2 = ct.load(x, index=(m, k), shape=(tm, 32), padding_mode=ct.PaddingMode.ZERO)
        b = ct.load(w, index=(n, k), shape=(tn, 32), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(a * 0.5 + a2 * 0.5, ct.transpose(b), acc)
    b = ct.load(bias, index=(n,), shape=(tn,), padding_mode=ct.PaddingMode.ZERO)
    y.store(acc + ct.reshape(b, (1, tn)))


def _run(schedule_of):
    kernel = tl.kernel(solution("linear"))

    def run(y, x, w, bias, wave):
        kernel(y.partition((32, 32), schedule=schedule_of(wave)), x, w, bias)
    return run


def plinear_first_tile_only(y: tl.Out, x: tl.In, w: tl.In, bias: tl.In):
    tm, tn = y.tile_shape
    for t in y.tiles():
        m, n = y.tile_index_of(t)
        acc = ct.full((tm, tn), 0, dtype=ct.float32)
        for k in range(ct.cdiv(x.shape[1], 32)):
            a = ct.load(x, index=(m, k), shape=(tm, 32), padding_mode=ct.PaddingMode.ZERO)
            b = ct.load(w, index=(n, k), shape=(tn, 32), padding_mode=ct.PaddingMode.ZERO)
            acc = ct.mma(a, ct.transpose(b), acc)
        b = ct.load(bias, index=(n,), shape=(tn,), padding_mode=ct.PaddingMode.ZERO)
        y.store(acc + ct.reshape(b, (1, tn)), at=t)
        break


def plinear_32(y: tl.Out, x: tl.In, w: tl.In, bias: tl.In):    # right for 32 x 32 tiles
    for t in y.tiles():
        m, n = y.tile_index_of(t)
        acc = ct.full((32, 32), 0, dtype=ct.float32)
        for k in range(ct.cdiv(x.shape[1], 32)):
            a = ct.load(x, index=(m, k), shape=(32, 32), padding_mode=ct.PaddingMode.ZERO)
            b = ct.load(w, index=(n, k), shape=(32, 32), padding_mode=ct.PaddingMode.ZERO)
            acc = ct.mma(a, ct.transpose(b), acc)
        b = ct.load(bias, index=(n,), shape=(32,), padding_mode=ct.PaddingMode.ZERO)
        y.store(acc + ct.reshape(b, (1, 32)), at=t)


WRONG = {
    "gemm_traffic": [
        Wrong("the compulsory bytes", compulsory, "tile traffic", READS),
        Wrong("full tiles at the edges", padded, "partial edge tiles", READS),
        Wrong("TM and TN swapped", swapped, "non-square tiles", READS, one_shape=True),
    ],
    "grouped_owner": [
        Wrong("row-major for grouped", {"grouped": _row_major, "persistent": _dealt},
              "the grouped order", SCHEDULES),
        Wrong("every group full", {"grouped": _full_groups, "persistent": _dealt},
              "the grouped order", SCHEDULES, one_shape=True),
        Wrong("contiguous runs for persistent",
              {"grouped": solution("grouped_owner")["grouped"], "persistent": _chunks},
              "the persistent order", SCHEDULES),
        Wrong("arrays, not functions", {"grouped": np.zeros((8, 8)), "persistent": None},
              "the answer's form", SCHEDULES),
    ],
    "roofline": [
        Wrong("the bytes' time only", memory_only, "the roofline bound", ROOF),
        Wrong("the math's time only", compute_only, "memory-bound", ROOF, one_shape=True),
        Wrong("the H200's peak typed in", h200_number, "every GPU has its own roofs", ROOF,
              one_shape=True),
    ],
    "linear": [
        Wrong("no bias", no_bias, "the tiled GEMM", GEMM),
        Wrong("w read as (K, N)", w_not_transposed, "the tiled GEMM", GEMM),
        Wrong("loads x twice", reloads_x, "tile traffic", READS),
        Wrong("two K steps written in", two_k_steps, "the K loop", GEMM, one_shape=True),
    ],
    "grouped_linear": [
        Wrong("row-major launch", _run(lambda wave: tl.grouped(group_m=1)),
              "a wave of blocks shares panels", WAVES),
        Wrong("group_m = 4 for every wave", _run(lambda wave: tl.grouped(group_m=4)),
              "a wave of blocks shares panels", WAVES, one_shape=True),
        Wrong("a kernel, launched row-major by the checker", solution("linear"),
              "a wave of blocks shares panels", WAVES),
    ],
    "persistent_linear": [
        Wrong("the one-tile kernel", solution("linear"), "a persistent kernel", SCHEDULES),
        Wrong("stops after its first tile", plinear_first_tile_only, "a persistent kernel",
              SCHEDULES),
        Wrong("32 x 32 tiles written in", plinear_32, "non-square tiles", GEMM,
              one_shape=True),
    ],
}


@pytest.mark.parametrize("name", sorted(WRONG))
def test_the_reference_answer_passes(name):
    r = grade(name, solution(name))
    assert r.passed, str(r)


@pytest.mark.parametrize("name, wrong", [(n, w) for n, ws in WRONG.items() for w in ws],
                         ids=lambda v: getattr(v, "why", v))
def test_a_wrong_answer_fails_with_its_concept(name, wrong):
    fails(name, wrong)


def test_predictions_fail_without_the_number():
    r = grade("gemm_traffic", compulsory)
    assert r.message.endswith("you said 65,536 bytes; the loads moved more")
    r = grade("roofline", memory_only)
    assert "is below the bound (by more than 5%)" in r.message and "µs" not in r.message


def test_a_linear_host_function_with_its_own_tiles_is_graded_on_its_bytes():
    kernel = tl.kernel(solution("linear"))

    def tiles(shape):
        def launch(y, x, w, bias):
            kernel(y.partition(shape), x, w, bias)
        return launch
    assert grade("linear", tiles((64, 64))).passed       # bigger tiles: fewer bytes
    r = grade("linear", tiles((16, 64)))                 # thinner: x panels read more
    assert not r.passed and "the budget is" in r.message and "tile traffic" in r.hint


def test_the_wave_budget_is_stated_in_the_fail():
    r = grade("grouped_linear", _run(lambda wave: tl.grouped(group_m=1)))
    assert "the first 16 blocks read" in r.message and "a 4 × 4 patch of tiles" in r.message
