"""Error quality, in the style of cuTile Rust's compile_error_quality: what users read.

For every refusal of the safety corpus (corpus_kernels.py) and of the soundness corpus
(soundness_cases.py), and for cuTile's own compile errors (a shape mismatch in p.store,
a dtype error, an error inside a helper...), compiled for sm_90 and run on the CPU:

* the message (``str(err)``) never shows a generated or internal name: no ``__tl``
  names, no synthetic ``<tilelab-lowered ...>`` / ``<tilelab-frozen ...>`` files, no
  ``_tl_`` names, no paths into tilelab's compiler or cuTile's private modules, no
  traceback -- except for names the user wrote on the offending line themselves;
* the message has a location, in the user's file, at a line of that file, and starts
  with it.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("cuda.tile", reason="cuda-tile (cuTile Python) is not installed")

from compiler import _soundness as S  # noqa: E402
from compiler import corpus_kernels as corpus  # noqa: E402
from compiler import soundness_cases as cases  # noqa: E402

import tilelab as tl  # noqa: E402
from tilelab import config  # noqa: E402
from tilelab.errors import SourceLocation, TilelabError  # noqa: E402

FORBIDDEN = ("__tl", "<tilelab-lowered", "<tilelab-frozen", "_tl_", "tilelab/compiler",
             "cuda/tile/_", "Traceback")
CORPUS_FILE = Path(corpus.__file__).resolve()
USER_FILES = {p.resolve() for p in S.CORPUS_FILES} | {CORPUS_FILE}


@pytest.fixture(scope="session")
def quality_cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("tilelab-quality-cache")


@pytest.fixture(autouse=True)
def _private_cache(quality_cache_dir):
    with config.override(cache_dir=str(quality_cache_dir), cache=config.DEFAULT):
        yield


def _user_line(loc: SourceLocation | None) -> str:
    return loc.source_line() if loc is not None else ""


def assert_quality(err: BaseException, *, user_file: Path | str | None = None) -> None:
    text = str(err)
    loc = getattr(err, "location", None)
    # names the user wrote on the offending line may be quoted back to them
    shown = text
    for name in re.findall(r"\w*(?:__tl|_tl_)\w*", _user_line(loc)):
        shown = shown.replace(name, "")
    if getattr(err, "rule", None) == "reserved-name":
        shown = shown.replace("'__tl'", "")    # the rule names the reserved prefix
    leaked = [f for f in FORBIDDEN if f in shown]
    assert not leaked, f"the message shows {leaked}:\n{text}"
    assert isinstance(loc, SourceLocation), f"no location:\n{text}"
    assert loc.line >= 1 and loc.col >= 1, loc
    path = Path(loc.filename)
    if user_file is not None:
        assert path.resolve() == Path(user_file).resolve() or loc.filename == str(user_file), (
            f"located in {loc.filename}, not the user's {user_file}:\n{text}")
    assert not loc.filename.startswith("<tilelab-"), loc
    if path.exists():
        lines = path.read_text(encoding="utf-8").splitlines()
        assert loc.line <= len(lines), f"line {loc.line} is past the end of {path}"
        assert lines[loc.line - 1].strip(), f"{loc} is a blank line"
    assert text.startswith(f"{loc}: "), text


# ---- the safety corpus ---------------------------------------------------------------------


def _corpus_error(case):
    if case.when == "compile":
        kernel = case.build()
        with pytest.raises(tl.SafetyError) as ei:
            kernel.compile(*case.examples(), arch="sm_90", cache=False)
        return ei.value
    with pytest.raises(tl.SafetyError) as ei:
        case.build()
    return ei.value


@pytest.mark.parametrize("case_id", [pytest.param(c.id, id=c.id) for c in corpus.REJECT.values()
                                     if not c.xfail])
def test_corpus_refusal_reads_well(case_id):
    case = corpus.REJECT[case_id]
    err = _corpus_error(case)
    assert_quality(err)
    assert Path(err.location.filename).resolve() == CORPUS_FILE


# ---- the soundness corpus -----------------------------------------------------------------


def _soundness_params():
    out = []
    for case in cases.ATTEMPTS.values():
        if case.xfail:
            continue          # the error of a known bug is the bug (see test_soundness.py)
        marks = []
        if case.unlocated:
            marks = [pytest.mark.xfail(strict=case.unlocated[1], reason=case.unlocated[0])]
        out.append(pytest.param(case.id, id=case.id, marks=marks))
    return out


@pytest.mark.parametrize("case_id", _soundness_params())
def test_soundness_refusal_reads_well(case_id):
    case = cases.ATTEMPTS[case_id]
    stage, err, steps = S.outcome(case_id)
    assert err is not None and S.matches(err, case.expect), err
    if not isinstance(err, TilelabError):
        # Python's own errors (a TypeError of tensor.partition): the traceback locates
        # them; their message still must not leak internals
        leaked = [f for f in FORBIDDEN if f in str(err)]
        assert not leaked, f"the message shows {leaked}:\n{err}"
        return
    where = S.expected_location(case_id, steps) if case.where != "-" else None
    assert_quality(err, user_file=where.file if where is not None else None)


# ---- cuTile's own compile errors, mapped back to the user's source -----------------------


def _compile_error_params():
    return [pytest.param(case_id, backend, id=f"{case_id}-{backend}")
            for case_id, (_fn, _args, backends) in cases.COMPILE_ERRORS.items()
            for backend in backends]


@pytest.mark.parametrize("case_id, backend", _compile_error_params())
def test_cutile_compile_error_reads_well(case_id, backend):
    fn, make_args, _ = cases.COMPILE_ERRORS[case_id]
    kernel = tl.kernel(fn)
    with pytest.raises(tl.CompileError) as ei:
        if backend == "gpu":
            kernel.compile(*make_args(), arch="sm_90", cache=False)
        else:
            kernel(*make_args())
    err = ei.value
    want = S.MARKERS[case_id]
    assert_quality(err, user_file=want.file)
    assert err.location.line == want.line, f"expected line {want.line}:\n{err}"
    if want.col is not None:
        assert err.location.col == want.col, f"expected column {want.col}:\n{err}"


def test_a_lowering_bug_reads_well():
    """An InternalSafetyError (the Tile IR validator) also points at the user's line and
    names no generated code. A lowering bug is simulated by replacing load in tilelab's
    own pristine copy of cuda.tile (which generated code uses, and no user code can reach
    through cuda.tile) with a function that also stores into its array."""
    from tilelab.compiler import frozen
    from tilelab.compiler.tileir import InternalSafetyError

    kernel = tl.kernel(cases.n_generated_kernel)
    pristine = frozen.pristine_cutile()
    real = pristine.load
    pristine.load = cases._c4_evil_load
    try:
        with pytest.raises(InternalSafetyError) as ei:
            kernel.compile(cases.S(512).partition(64), cases.S(512), arch="sm_90",
                           cache=False)
    finally:
        pristine.load = real
    err = ei.value
    assert isinstance(err, tl.CompileError)
    assert "internal safety check failed" in str(err)
    assert "stores into 'x'" in str(err)
    want = S.MARKERS["c4_load_patched_used_by_kernel"]     # the store of the stand-in
    assert_quality(err, user_file=want.file)
    assert err.location.line == want.line, err
