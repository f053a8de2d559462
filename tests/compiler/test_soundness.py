"""The soundness corpus (tests/compiler/soundness_cases.py) against tilelab.

* every attempt is refused at its stage (definition, compile, launch, partition, host)
  with its rule id (``err.rule``) or error type and the phrases of its message;
* ... at the file and line of the construct (the ``# AT:`` marker, or the place the
  attempt recorded for temporary files and notebook cells);
* every neutralized attempt runs the checked code: the next compile (a new shape) for
  sm_90 writes nothing but the partition stores (an independent reading of the Tile IR),
  and a CPU launch leaves the inputs unchanged;
* every accepted kernel compiles for sm_90 with only its partition stores as writes and
  matches numpy on the CPU backend.

Known bugs are ``xfail`` cases whose reason gives the repro (strict for tilelab bugs, so a
fix XPASSes and the mark must go; non-strict for the runtime work in progress).
"""
from __future__ import annotations

import builtins
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("cuda.tile", reason="cuda-tile (cuTile Python) is not installed")

from compiler import _soundness as S  # noqa: E402
from compiler import soundness_cases as cases  # noqa: E402

import numpy as np  # noqa: E402

import tilelab as tl  # noqa: E402
from tilelab import config  # noqa: E402
from tilelab.compiler.safety import RULES  # noqa: E402
from tilelab.errors import SourceLocation, TilelabError  # noqa: E402

STAGES = {"definition", "compile", "launch", "partition", "host"}


@pytest.fixture(scope="session")
def soundness_cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("tilelab-soundness-cache")


@pytest.fixture(autouse=True)
def _private_cache(soundness_cache_dir):
    with config.override(cache_dir=str(soundness_cache_dir), cache=config.DEFAULT):
        yield


def _xfail(reason, strict=True):
    return [pytest.mark.xfail(strict=strict, reason=reason)] if reason else []


def _attempt_params(located=False):
    out = []
    for case in cases.ATTEMPTS.values():
        marks = _xfail(case.xfail, case.xfail_strict)
        if located and not marks and case.unlocated:
            marks = _xfail(*case.unlocated)
        out.append(pytest.param(case.id, id=case.id, marks=marks))
    return out


# ---- the corpus itself ---------------------------------------------------------------


def test_corpus_size_and_markers():
    attempts = cases.ATTEMPTS
    assert len(attempts) >= 160
    assert len(cases.ACCEPTED) >= 20
    per_class = Counter(c.cls for c in attempts.values())
    per_class.update(c.cls for c in cases.NEUTRALIZED.values())
    for cls in [str(i) for i in range(1, 11)] + ["other"]:
        assert per_class[cls] >= 4, (cls, per_class)
    for c in attempts.values():
        assert c.stage in STAGES, c
        for alt in c.expect.split("|"):
            assert alt in RULES or alt[0].isupper(), (c.id, alt)
        assert c.phrases or "|" in c.expect, c.id
        assert c.where == "-" or c.where in S.MARKERS or c.id in S.MARKERS or \
            c.stage in ("compile", "definition"), c.id
    # every marker names an attempt, an accepted-error case or the shared launch line
    known = set(attempts) | set(cases.COMPILE_ERRORS) | {"launch_line", "c10_worker_launch"}
    known |= {c.where for c in attempts.values() if c.where}
    assert set(S.MARKERS) <= known, set(S.MARKERS) - known


@pytest.mark.toolchain
def test_tileir_reader_sees_writes():
    """The Tile IR reader the neutralized and accepted tests rely on is not vacuous: it
    reports a raw store, an atomic and the parameter each tile store writes."""
    import cuda.tile as ct

    def raw_writer(r: tl.Raw, x: tl.In):
        t = ct.load(x, index=(ct.bid(0),), shape=(16,))
        ct.store(r, index=(ct.bid(0),), tile=t)
        ct.atomic_add(r, ct.arange(16, dtype=ct.int32), t)

    k = tl.kernel(unsafe=True)(raw_writer)
    art = k.compile(tl.spec(64, "float32"), tl.spec(64, "float32"), arch="sm_90", cache=False)
    writes = S.tileir_writes(art)
    assert ("store_view_tko", "r") in writes, writes
    assert any(op.startswith("atomic") for op, _ in writes), writes
    with pytest.raises(AssertionError, match="writes other than partition stores"):
        S.assert_only_partition_stores(art, k)


# ---- attempts: refused where promised ----------------------------------------------------


_matches = S.matches


@pytest.mark.parametrize("case_id", _attempt_params())
def test_attempt_is_refused(case_id):
    case = cases.ATTEMPTS[case_id]
    stage, err, _steps = S.outcome(case_id)
    assert err is not None, f"{case_id}: nothing was refused (the attempt went through)"
    assert _matches(err, case.expect), (
        f"expected {case.expect}, got {type(err).__name__} "
        f"(rule {getattr(err, 'rule', None)!r}):\n{err}")
    assert stage == case.stage, f"refused at {stage}, expected at {case.stage}:\n{err}"
    said = getattr(err, "message", str(err)) + "\n" + (getattr(err, "hint", None) or "")
    missing = [p for p in case.phrases if p not in said]
    assert not missing, f"missing {missing} in:\n{err}"
    if isinstance(err, tl.SafetyError):
        assert err.rule in RULES


@pytest.mark.parametrize("case_id", _attempt_params(located=True))
def test_attempt_is_located(case_id):
    case = cases.ATTEMPTS[case_id]
    stage, err, steps = S.outcome(case_id)
    assert err is not None, "nothing was refused"
    if case.where == "-":
        assert not isinstance(err, TilelabError), "tilelab's errors carry a location"
        return
    want = S.expected_location(case_id, steps)
    loc = getattr(err, "location", None)
    assert isinstance(loc, SourceLocation), f"no location: {err}"
    where = f"{loc.filename}:{loc.line}:{loc.col}"
    assert Path(loc.filename).resolve() == want.file.resolve() or loc.filename == str(want.file), (
        f"expected {want.file}:{want.line}, got {where}\n{err}")
    assert loc.line == want.line, f"expected line {want.line}, got {where}\n{err}"
    if want.col is not None:
        assert loc.col == want.col, f"expected column {want.col}, got {where}\n{err}"
    assert str(err).startswith(f"{loc}: "), str(err)


def _changed_params():
    import inspect

    out = []
    for case in cases.ATTEMPTS.values():
        if "compile_changed(" in inspect.getsource(case.run):
            out.append(pytest.param(case.id, id=case.id, marks=_xfail(case.xfail)))
    return out


@pytest.mark.parametrize("case_id", _changed_params())
def test_change_is_refused_on_the_cpu_too(case_id):
    """After a change that the next compile refuses, a CPU launch (the change still in
    place) is refused as well, or runs code that leaves the input unchanged."""
    _stage, err, steps = S.outcome(case_id)
    assert err is not None
    assert steps.cpu_outcome in ("refused", "ran"), steps.cpu_outcome
    if steps.cpu_outcome == "ran":
        assert steps.cpu_input_unchanged, "the CPU launch wrote its input"


# ---- neutralized: the checked code is what runs ---------------------------------------


@pytest.mark.parametrize("case_id", [pytest.param(c.id, id=c.id, marks=_xfail(c.xfail))
                                     for c in cases.NEUTRALIZED.values()])
@pytest.mark.toolchain
def test_change_runs_the_checked_code(case_id):
    case = cases.NEUTRALIZED[case_id]
    res = case.run(cases.Steps())
    if res.refusal is not None:
        # a refusal is a correct outcome when it is one of tilelab's located errors
        assert isinstance(res.refusal, (tl.SafetyError, tl.CompileError, tl.LaunchError)), \
            res.refusal
        assert res.refusal.location is not None, f"unlocated refusal: {res.refusal}"
    if res.art is not None and res.art != "cpu-only" and res.refusal is None:
        S.assert_only_partition_stores(res.art, res.kernel)
        assert res.gpu_index_ok, (
            "the compiled partition store does not index by the block id:\n" + res.art.tileir)
    assert res.inputs_unchanged, f"the launch wrote its input: {res.detail}"
    assert res.output_ok, f"the output is not what the checked code computes: {res.detail}"


# ---- accepted kernels --------------------------------------------------------------------


def _accepted_params():
    out = []
    for c in cases.ACCEPTED.values():
        marks = _xfail(c.xfail)
        out.append(pytest.param(c.id, id=c.id, marks=marks))
    return out


@pytest.mark.parametrize("case_id", _accepted_params())
@pytest.mark.toolchain
def test_accepted_kernel_compiles_and_matches_numpy(case_id):
    case = cases.ACCEPTED[case_id]
    if case.needs:
        pytest.importorskip(case.needs)
    kernel = case.kernel()
    args, out, expected, inputs = case.make()
    art = kernel.compile(*args, arch="sm_90")
    assert isinstance(art.cubin, (bytes, bytearray)) and art.cubin
    if not kernel.options.unsafe:
        S.assert_only_partition_stores(art, kernel)
    kernel(*args)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-3, atol=1e-3)
    for t, before in inputs:
        assert np.array_equal(t.numpy(), before), "an input changed"


def test_shadowed_names_do_not_reach_generated_code():
    """The lowered text of a module whose globals are named ct, range, store, _tl_z_t0
    reaches cuTile and range through the reserved names only."""
    from compiler import soundness_shadow as shadow

    z = tl.zeros((64, 64), dtype="float32", device="cpu")
    x = tl.zeros((64, 64), dtype="float32", device="cpu")
    src = shadow.persistent_with_user_range.lowered_source(
        z.partition((16, 16), schedule=tl.persistent(3)), x)
    loop = next(ln for ln in src.splitlines() if ln.strip().startswith("for t in"))
    assert loop.strip().startswith("for t in __tl_range(__tl_ct.bid(0), "), loop
    store = next(ln for ln in src.splitlines() if "store(" in ln)
    assert store.strip().startswith("__tl_ct.store(z, index=__tl_dev.unravel_2d(t, "), store
    assert " range(3)" in store       # the kernel's own call of the user's range stays


def test_builtins_are_what_they_were():
    """The attempts restore what they patch (a leaked patch would poison other tests)."""
    import cuda.tile as ct

    from tilelab.compiler import frozen
    from tilelab.compiler import tile_index as device

    assert builtins.divmod is cases._REAL_DIVMOD
    assert ct.load is cases._REAL_CT_LOAD
    assert ct.bid is frozen.pristine_cutile().bid
    assert frozen.pristine_cutile().load is cases._REAL_CT_LOAD
    assert device.grouped_tile_index is not cases._zero_tile_index
    assert cases.sh.double.__name__ == "double"


def test_a_partition_rewritten_behind_its_guard_is_described_by_its_new_tensor():
    """object.__setattr__ past Partition.__setattr__: the launch's description of the
    partition (its plan key, grid and bounds facts) follows the tensor it now holds, so
    no block writes past that tensor's end."""
    import numpy as np

    import tilelab as tl
    from compiler.soundness_runtime_kernels import copy_kernel

    x = tl.tensor(np.arange(256, dtype=np.float32), device="cpu")
    p = tl.zeros(256, dtype="float32", device="cpu").partition(64)
    copy_kernel(p, x)
    base = tl.zeros(256, dtype="float32", device="cpu")
    object.__setattr__(p, "tensor", base[:64])
    copy_kernel(p, x)
    got = base.numpy()
    np.testing.assert_array_equal(got[:64], np.arange(64, dtype=np.float32))
    assert not got[64:].any(), "a block wrote past the partition's tensor"
