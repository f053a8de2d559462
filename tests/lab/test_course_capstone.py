"""The capstone (notebook 07): the student's fused RMSNorm + GEMV is graded on hidden
shapes and its byte budget, then plugged into a tiny Qwen3 as ``norm_qkv_gemv``; the
reference passes and gives the built-in kernel's tokens, and typical wrong answers (no
norm, a second pass, the mean over padded steps, a written-in eps, a store that does not
fit the engine's bfloat16, an unsafe kernel) fail with their concept."""
from __future__ import annotations

import cuda.tile as ct
import tilelab as tl
from course_checks import Wrong, fails
from tilelab.lab.course.exercises import exercises, grade, solution

exercises()        # every notebook's exercises registered in course order first
# (importing a notebook module alone would register its exercises ahead of the others)
from tilelab.lab.course.exercises.nb07 import (CAPSTONE, ENGINE_PROMPT, _builtin_tokens,
                                               tiny_qwen3)
from tilelab.models import Qwen3

Z = ct.PaddingMode.ZERO


def capstone_stub(y: tl.Out, w: tl.In, h: tl.In, down: tl.In, g: tl.In, eps: float,
                  BK: ct.Constant[int]):                           # the notebook's stub
    y.store(ct.full(y.tile_shape, 0.0, dtype=y.dtype))


def _x(h, down, k, BK):
    return ct.reshape(ct.load(h, index=(k,), shape=(BK,), padding_mode=Z).astype(ct.float32)
                      + ct.load(down, index=(k,), shape=(BK,), padding_mode=Z)
                      .astype(ct.float32), (1, BK))


def _g(g, k, BK):
    return ct.reshape(ct.load(g, index=(k,), shape=(BK,), padding_mode=Z).astype(ct.float32),
                      (1, BK))


def _w(w, n, k, bn, BK):
    return ct.load(w, index=(n, k), shape=(bn, BK), padding_mode=Z).astype(ct.float32)


def without_down(y: tl.Out, w: tl.In, h: tl.In, down: tl.In, g: tl.In, eps: float,
                 BK: ct.Constant[int]):                 # the stream's second part forgotten
    bn = y.tile_shape[0]
    n = y.tile_index[0]
    acc = ct.full((bn, BK), 0.0, dtype=ct.float32)
    ss = ct.full((1, BK), 0.0, dtype=ct.float32)
    for k in range(ct.cdiv(w.shape[1], BK)):
        x = ct.reshape(ct.load(h, index=(k,), shape=(BK,), padding_mode=Z)
                       .astype(ct.float32), (1, BK))
        ss = ss + x * x
        acc = acc + _w(w, n, k, bn, BK) * (x * _g(g, k, BK))
    y.store((ct.sum(acc, axis=1) * ct.rsqrt(ct.sum(ss, axis=1) / w.shape[1] + eps))
            .astype(y.dtype))


def two_passes(y: tl.Out, w: tl.In, h: tl.In, down: tl.In, g: tl.In, eps: float,
               BK: ct.Constant[int]):                   # the norm in a pass of its own
    bn = y.tile_shape[0]
    n = y.tile_index[0]
    ss = ct.full((1, BK), 0.0, dtype=ct.float32)
    for k in range(ct.cdiv(w.shape[1], BK)):
        x = _x(h, down, k, BK)
        ss = ss + x * x
    rstd = ct.reshape(ct.rsqrt(ct.sum(ss, axis=1) / w.shape[1] + eps), (1, 1))
    acc = ct.full((bn, BK), 0.0, dtype=ct.float32)
    for k in range(ct.cdiv(w.shape[1], BK)):
        acc = acc + _w(w, n, k, bn, BK) * (_x(h, down, k, BK) * _g(g, k, BK) * rstd)
    y.store(ct.sum(acc, axis=1).astype(y.dtype))


def mean_over_steps(y: tl.Out, w: tl.In, h: tl.In, down: tl.In, g: tl.In, eps: float,
                    BK: ct.Constant[int]):              # divides by the padded width
    bn = y.tile_shape[0]
    n = y.tile_index[0]
    steps = ct.cdiv(w.shape[1], BK)
    acc = ct.full((bn, BK), 0.0, dtype=ct.float32)
    ss = ct.full((1, BK), 0.0, dtype=ct.float32)
    for k in range(steps):
        x = _x(h, down, k, BK)
        ss = ss + x * x
        acc = acc + _w(w, n, k, bn, BK) * (x * _g(g, k, BK))
    y.store((ct.sum(acc, axis=1) * ct.rsqrt(ct.sum(ss, axis=1) / (steps * BK) + eps))
            .astype(y.dtype))


def eps_written_in(y: tl.Out, w: tl.In, h: tl.In, down: tl.In, g: tl.In, eps: float,
                   BK: ct.Constant[int]):               # the engine's eps, not the one given
    bn = y.tile_shape[0]
    n = y.tile_index[0]
    acc = ct.full((bn, BK), 0.0, dtype=ct.float32)
    ss = ct.full((1, BK), 0.0, dtype=ct.float32)
    for k in range(ct.cdiv(w.shape[1], BK)):
        x = _x(h, down, k, BK)
        ss = ss + x * x
        acc = acc + _w(w, n, k, bn, BK) * (x * _g(g, k, BK))
    y.store((ct.sum(acc, axis=1) * ct.rsqrt(ct.sum(ss, axis=1) / w.shape[1] + 1e-6))
            .astype(y.dtype))


def stores_float32(y: tl.Out, w: tl.In, h: tl.In, down: tl.In, g: tl.In, eps: float,
                   BK: ct.Constant[int]):               # right in float32; not in bfloat16
    bn = y.tile_shape[0]
    n = y.tile_index[0]
    acc = ct.full((bn, BK), 0.0, dtype=ct.float32)
    ss = ct.full((1, BK), 0.0, dtype=ct.float32)
    for k in range(ct.cdiv(w.shape[1], BK)):
        x = _x(h, down, k, BK)
        ss = ss + x * x
        acc = acc + _w(w, n, k, bn, BK) * (x * _g(g, k, BK))
    y.store(ct.sum(acc, axis=1) * ct.rsqrt(ct.sum(ss, axis=1) / w.shape[1] + eps))


WRONG = {
    "capstone_norm_gemv": [
        Wrong("the stub: zeros", capstone_stub, "y = W @ (rmsnorm(h + down) · g)", CAPSTONE),
        Wrong("forgets down", without_down, "y = W @ (rmsnorm(h + down) · g)", CAPSTONE),
        Wrong("a second pass for the norm", two_passes, "one pass", CAPSTONE),
        Wrong("the mean over padded steps", mean_over_steps, "the mean is over K elements",
              CAPSTONE, one_shape=True),
        Wrong("eps written in", eps_written_in, "eps is a launch value", CAPSTONE,
              one_shape=True),
        Wrong("stores float32 into bfloat16", stores_float32, "in the engine, your kernel "
              "runs on bfloat16", CAPSTONE),
        Wrong("unsafe=True", tl.kernel(unsafe=True)(solution("capstone_norm_gemv")),
              "the engine runs only checked kernels", CAPSTONE),
    ],
}


def test_the_reference_passes_the_hidden_cases_and_the_engine():
    r = grade("capstone_norm_gemv", solution("capstone_norm_gemv"))
    assert r.passed, str(r)
    assert "right on all 5 cases" in r.message and "within the bytes budget" in r.message
    assert "generate() gives the built-in kernel's 8 tokens" in r.message


def test_wrong_answers_fail_with_their_concept():
    for wrong in WRONG["capstone_norm_gemv"]:
        fails("capstone_norm_gemv", wrong)


def test_a_kernel_right_in_float32_is_graded_in_the_engine_too():
    r = grade("capstone_norm_gemv", stores_float32)
    assert r.message.startswith("right on every hidden case, but plugged into the tiny "
                                "Qwen3: CompileError: ")


def test_the_engine_with_the_students_kernel_gives_the_builtin_tokens():
    """What the notebook's last cell shows: the same tokens with the reference plugged
    in, graph replay and plain launches alike; other tokens with a wrong kernel."""
    plugged = Qwen3(tiny_qwen3(), max_tokens=32,
                    kernels={"norm_qkv_gemv": solution("capstone_norm_gemv")})
    want = list(_builtin_tokens())
    assert plugged.generate(list(ENGINE_PROMPT), max_new_tokens=8) == want
    assert plugged.generate(list(ENGINE_PROMPT), max_new_tokens=8, graph=False) == want
    wrong = Qwen3(tiny_qwen3(), max_tokens=32, kernels={"norm_qkv_gemv": without_down})
    assert wrong.generate(list(ENGINE_PROMPT), max_new_tokens=8) != want


def test_the_course_climbs_to_the_capstone():
    from tilelab.lab.course.exercises import exercises, writes_kernel

    every = exercises()
    assert len(every) >= 20 and sum(writes_kernel(e) for e in every) >= 14
    second = [e for e in every if e.notebook[:2] in ("05", "06", "07", "08")]
    assert len(second) >= 9 and sum(writes_kernel(e) for e in second) >= 7
    order = [e.name for e in second]
    assert order.index("race_hunt") < order.index("gemv") < order.index("rms_norm") \
        < order.index("rope") < order.index("capstone_norm_gemv") \
        < order.index("causal_mask") < order.index("flash_attention")
