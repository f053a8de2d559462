"""The course's checked exercises: every reference solution PASSes, and the typical wrong
answers (the notebooks' stubs among them) FAIL with the hint meant for them."""
from __future__ import annotations

import math

import numpy as np
import pytest

import cuda.tile as ct
import tilelab as tl
from tilelab.lab.course.exercises import check, exercises, grade, solution
from tilelab.lab.course.grading import EXERCISES
from tilelab.lab.course.expect import expect

def test_there_are_six_to_ten_exercises_and_every_solution_passes():
    names = [e.name for e in exercises()]
    assert 6 <= len(names) <= 10 and len(set(names)) == len(names)
    assert all(EXERCISES[n].solution is not None for n in names)
    for name in names:
        r = grade(name, solution(name))
        assert r.passed, str(r)


def test_check_prints_and_never_raises(capsys):
    check("saxpy_edge", lambda z: None)          # a wrong signature: FAIL, printed
    out = capsys.readouterr().out
    assert out.startswith("FAIL saxpy_edge: ") and "hint:" in out
    check("roofline", solution("roofline"))
    assert capsys.readouterr().out.startswith("PASS roofline: ")
    with pytest.raises(KeyError, match="no exercise named 'nope'; the exercises are: fix_"):
        check("nope", None)


# ---- typical wrong answers ---------------------------------------------------------------

def refused_store(z: tl.Out, x: tl.In):                 # the notebook 01 stub
    ct.store(x, index=z.tile_index, tile=tl.load_like(x, z) * 2.0 + 1.0)


def forgot_shift(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) * 2.0)


def test_fix_refused_fails_on_the_refusal_and_on_wrong_values():
    r = grade("fix_refused", refused_store)
    assert not r.passed and r.message.startswith("the safety checker refused the kernel: ")
    assert "writes to 'x', which is tl.In" in r.message
    r = grade("fix_refused", forgot_shift)
    assert not r.passed and "elements are wrong" in r.message and "+ 1" in r.hint


def saxpy_stub(z: tl.Out, x: tl.In, y: tl.In, a: float):   # the notebook 02 stub
    z.store(tl.load_like(x, z))


def saxpy_twice(z: tl.Out, x: tl.In, y: tl.In, a: float):
    z.store(a * tl.load_like(x, z) + tl.load_like(y, z) * 0.5 + tl.load_like(y, z) * 0.5)


def test_saxpy_fails_on_values_and_on_extra_bytes():
    r = grade("saxpy_edge", saxpy_stub)
    assert not r.passed and "elements are wrong" in r.message and "a * tl.load_like" in r.hint
    r = grade("saxpy_edge", saxpy_twice)
    assert not r.passed and "moved 16,000 bytes; the minimum is 12n = 12,000" in r.message
    assert "load each input tile once" in r.hint


def test_grouped_owner_fails_on_row_major():
    row_major = np.arange(64).reshape(8, 8)
    r = grade("grouped_owner", {"grouped(4)": row_major, "persistent(6)": row_major})
    assert not r.passed and r.message.startswith("grouped(4): tile (0, 1) is block 4's")
    assert "down 4 rows" in r.hint
    good = solution("grouped_owner")
    r = grade("grouped_owner", {"grouped(4)": good["grouped(4)"], "persistent(6)": row_major})
    assert not r.passed and "t % 6" in r.hint
    assert "no prediction" in grade("grouped_owner", {}).message


def test_gemm_traffic_fails_on_compulsory_bytes_and_on_full_edge_tiles():
    r = grade("gemm_traffic", lambda M, N, K, TM, TN, s: (M * K + K * N) * s)
    assert not r.passed and "you said 65,536 bytes, the loads moved 262,144" in r.message
    padded = lambda M, N, K, TM, TN, s: (math.ceil(N / TN) * math.ceil(M / TM) * TM * K  # noqa: E731
                                         + math.ceil(M / TM) * math.ceil(N / TN) * TN * K) * s
    r = grade("gemm_traffic", padded)
    assert not r.passed and "200, 136, 96" in r.message and "edge tile" in r.hint


def test_roofline_fails_on_a_memory_bound_guess():
    guess = {g: 3 * 4096 * 4096 * 2 / bw for g, bw in (("h200", 4.8e12), ("b200", 8e12))}
    r = grade("roofline", guess)
    assert not r.passed and r.message.startswith(
        "h200: you predicted 20.97 µs, the roofline bound is 139 µs")
    assert "max(FLOPs / peak, bytes / bandwidth)" in r.hint


def naive_lse(chunks):                                     # the notebook 04 stub
    m, s = -np.inf, 0.0
    for chunk in chunks:
        m_new = max(m, chunk.max())
        s = s * np.exp(m - m_new) + np.exp(chunk - m_new).sum()
        m = m_new
    return m, s


def test_online_logsumexp_fails_on_a_masked_chunk_and_without_the_max():
    with np.errstate(invalid="ignore"):
        r = grade("online_logsumexp", naive_lse)
    assert not r.passed and "first chunk is all -inf" in r.message and "nan" in r.hint
    no_max = lambda chunks: (0.0, float(sum(np.exp(c.astype(np.float64)).sum()  # noqa: E731
                                            for c in chunks)))
    with np.errstate(over="ignore", invalid="ignore"):
        r = grade("online_logsumexp", no_max)
    assert not r.passed and "subtract the running maximum" in r.hint


def no_gelu(y: tl.Out, x: tl.In, bias: tl.In, res: tl.In):  # the notebook 04 stub
    y.store(tl.load_like(x, y) + tl.load_like(res, y))


def gelu_reloads(y: tl.Out, x: tl.In, bias: tl.In, res: tl.In):
    _, n = y.tile_index
    _, tn = y.tile_shape
    b = ct.reshape(ct.load(bias, index=(n,), shape=(tn,)), (1, tn))
    h = tl.load_like(x, y) + b
    g = 0.5 * h * (1.0 + ct.tanh(0.7978845608028654 * (h + 0.044715 * h * h * h)))
    y.store(g + tl.load_like(res, y) + 0.0 * tl.load_like(x, y))


def test_fused_bias_gelu_fails_on_values_and_on_extra_bytes():
    r = grade("fused_bias_gelu", no_gelu)
    assert not r.passed and "elements are wrong" in r.message and "tanh" in r.hint
    r = grade("fused_bias_gelu", gelu_reloads)
    assert not r.passed and "fused, it needs 200,704" in r.message


def racy_total(out: tl.Raw, x: tl.In, T: ct.Constant[int]):  # the notebook 05 stub
    t = ct.load(x, index=(ct.bid(0),), shape=(T,))
    ct.store(out, index=(0,), tile=ct.reshape(ct.sum(t), (1,)))


def test_race_hunt_fails_on_the_racy_store():
    r = grade("race_hunt", racy_total)
    assert not r.passed and r.message.startswith("15 race(s), e.g. write-write race on 'out'")
    assert "ct.atomic_add(out, (0,), partial)" in r.hint


def test_graph_deps_fails_on_missed_dependencies_and_borrows():
    good = solution("graph_deps")
    r = grade("graph_deps", {"deps": [[], [0], [], [0, 1, 2], [1, 2]], "host_raises": {}})
    assert not r.passed and r.message == "launch 3 waits for [1, 2], you said [0, 1, 2]"
    assert "implied through another is left out" in r.hint
    r = grade("graph_deps", {"deps": good["deps"], "host_raises": dict(good["host_raises"],
                                                                         y=False)})
    assert not r.passed and r.message.startswith("reading y while the replay is pending raises")


def test_causal_mask_fails_on_a_wrong_mask_and_on_computing_every_tile():
    good = solution("causal_mask")
    r = grade("causal_mask", {"mask": lambda q0, k0, BM, BN: np.ones((BM, BN), bool),
                              "skip": good["skip"]})
    assert not r.passed and "elements are wrong" in r.message and "j <= i" in r.hint
    r = grade("causal_mask", {"mask": good["mask"], "skip": lambda *a: False})
    assert not r.passed and "9 tiles computed; only 6" in r.message


def test_every_exercise_is_in_its_notebook():
    from pathlib import Path

    nbformat = pytest.importorskip("nbformat")
    root = Path(__file__).resolve().parents[2] / "notebooks"
    for ex in EXERCISES.values():
        path = root / f"{ex.notebook}.ipynb"
        if not path.exists():
            pytest.fail(f"{ex.name}: no notebook {path.name}")
        code = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells
                         if c.cell_type == "code")
        assert f'check("{ex.name}"' in code, f"{path.name} does not check {ex.name}"


# ---- expect ------------------------------------------------------------------------------

def test_expect_shows_the_error_and_fails_when_it_does_not_happen(capsys):
    err = expect(tl.SafetyError, tl.kernel, refused_store)
    shown = capsys.readouterr().out
    assert type(err).__name__ == "SafetyError"
    assert shown.startswith("SafetyError (expected): ") and "writes to 'x'" in shown
    with pytest.raises(AssertionError, match="expected SafetyError, but the code ran"):
        expect(tl.SafetyError, tl.kernel, forgot_shift)
    with pytest.raises(AssertionError, match="saying 'nope'"):
        expect(tl.SafetyError, tl.kernel, refused_store, match="nope")
    with expect(tl.LaunchError, when=False):
        pass                                  # optional: no error is fine
    with pytest.raises(ValueError):
        with expect(tl.SafetyError):
            raise ValueError("another error passes through")


@pytest.mark.parametrize("module", ["grading", "exercises", "exercises.compare",
                                    "exercises.nb01", "exercises.nb02", "exercises.nb03",
                                    "exercises.nb04", "exercises.nb05", "exercises.nb06",
                                    "exercises.nb08"])
def test_doctests(module):
    import doctest
    import importlib

    mod = importlib.import_module(f"tilelab.lab.course.{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
