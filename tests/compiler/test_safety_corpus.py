"""The safety checker against a corpus of real kernels (tests/compiler/corpus_kernels.py).

* every accepted kernel is checked, lowered and compiled to a cubin for sm_90 (no GPU);
* every rejected kernel raises ``tl.SafetyError`` at the file, line and column of the
  offending construct (the ``# REJECT: <id>`` marker), carrying the id of the rule it
  breaks (``err.rule``, a key of ``tilelab.compiler.safety.RULES``), with the rule's
  message and a hint where one is promised.

Known checker bugs are ``xfail(strict=True)`` cases whose reason says what is wrong; when a
bug is fixed its case XPASSes and the mark must go.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("cuda.tile", reason="cuda-tile (cuTile Python) is not installed")

from compiler import corpus_kernels as corpus  # noqa: E402

import tilelab as tl  # noqa: E402
from tilelab import config  # noqa: E402
from tilelab.compiler.safety import RULES  # noqa: E402
from tilelab.errors import SourceLocation  # noqa: E402

CORPUS_FILE = Path(corpus.__file__).resolve()
CORPUS_LINES = CORPUS_FILE.read_text(encoding="utf-8").splitlines()
_MARK = re.compile(r"#\s*REJECT:\s*(?P<ids>[\w, ]+?)\s*(?:@(?P<last>last)?\s(?P<anchor>.*))?$")


def _markers() -> dict[str, tuple[int, int]]:
    """case id -> expected (line, 1-based column) from the ``# REJECT:`` comments."""
    found: dict[str, tuple[int, int]] = {}
    for number, text in enumerate(CORPUS_LINES, start=1):
        if "# REJECT:" not in text:
            continue
        code, comment = text.split("# REJECT:", 1)
        m = _MARK.match("# REJECT:" + comment.rstrip())
        if m is None:  # prose about markers (a malformed one leaves its case unmatched)
            continue
        anchor = m.group("anchor")
        code = code.split("  # noqa")[0]
        if anchor:
            col = (code.rindex(anchor) if m.group("last") else code.index(anchor)) + 1
        else:
            col = len(code) - len(code.lstrip()) + 1
        for case_id in (i.strip() for i in m.group("ids").split(",")):
            assert case_id not in found, f"marker {case_id!r} appears twice"
            found[case_id] = (number, col)
    return found


MARKERS = _markers()


def _param(case):
    marks = [pytest.mark.xfail(strict=True, reason=case.xfail)] if case.xfail else []
    return pytest.param(case.id, id=case.id, marks=marks)


@pytest.fixture(scope="session")
def corpus_cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("tilelab-cache")


@pytest.fixture(autouse=True)
def _private_cache(corpus_cache_dir):
    """Compile into one throw-away cache per session, never into ~/.cache."""
    with config.override(cache_dir=str(corpus_cache_dir), cache=config.DEFAULT):
        yield


# ---- the corpus itself --------------------------------------------------------------


def test_corpus_size_and_markers():
    assert len(corpus.ACCEPT) >= 20
    assert len(corpus.REJECT) >= 30
    # every rejected case has exactly one marker, and every marker names a case
    assert set(MARKERS) == set(corpus.REJECT), (
        set(MARKERS) ^ set(corpus.REJECT))
    # the headline kernels are all there
    for case_id in ("gemm_bf16_128x128x64", "gemm_grouped_bias_relu", "gemm_persistent",
                    "row_softmax", "head_permutation_partition"):
        assert case_id in corpus.ACCEPT
    assert "head_permutation_raw_store_out" in corpus.REJECT
    # every rejection asserts at least one phrase of its message, and names a real rule
    assert all(case.phrases for case in corpus.REJECT.values())
    unknown = {c.id: c.rule for c in corpus.REJECT.values() if c.rule not in RULES}
    assert not unknown, unknown


# ---- accepted kernels ---------------------------------------------------------------


@pytest.mark.parametrize("case_id", [_param(c) for c in corpus.ACCEPT.values()])
@pytest.mark.toolchain
def test_accepted_kernel_compiles(case_id):
    case = corpus.ACCEPT[case_id]
    kernel = case.build()
    assert isinstance(kernel, tl.Kernel)
    art = kernel.compile(*case.examples(), arch="sm_90")
    assert isinstance(art.cubin, (bytes, bytearray)) and len(art.cubin) > 0
    assert isinstance(art.tileir, str) and art.tileir.strip()
    assert art.arch.startswith("sm_90")
    # the lowered text is plain cuTile: no tilelab construct survives lowering
    lowered = "\n".join(ln.split("#")[0] for ln in art.lowered_source.splitlines())
    assert f"def {kernel.name}(" in lowered
    assert "tl.load_like" not in lowered and "load_like(" not in lowered
    assert ".tiles()" not in lowered and ".tile_index" not in lowered
    for name in kernel.definition.analysis.partitions:
        assert f"{name}.store(" not in lowered and f"{name}.load(" not in lowered


def test_accepted_kernels_keep_their_kinds():
    """Unannotated arrays are tl.In, scalars stay scalars, ct.Constant is a constant."""
    kinds = {p.name: p.kind for p in corpus.ACCEPT["fused_add_relu"].build()
             .definition.analysis.params}
    assert kinds == {"z": "Out", "x": "auto", "y": "auto"}
    kinds = {p.name: p.kind for p in corpus.ACCEPT["gemm_bf16_128x128x64"].build()
             .definition.analysis.params}
    assert kinds == {"c": "Out", "a": "In", "b": "In", "BK": "constant"}
    kinds = {p.name: p.kind for p in corpus.ACCEPT["unsafe_histogram"].build()
             .definition.analysis.params}
    assert kinds == {"h": "Raw", "x": "In", "BS": "constant"}


def test_head_permutation_destination_is_fixed_by_the_partition():
    """The accepted head permutation stores at the block's own tile, nowhere else."""
    case = corpus.ACCEPT["head_permutation_partition"]
    kernel = case.build()
    lowered = kernel.lowered_source(*case.examples())
    stores = [ln.strip() for ln in lowered.splitlines() if "ct.store(" in ln]
    assert len(stores) == 1
    # generated code reaches cuTile through the reserved name __tl_ct (hygienic lowering)
    assert stores[0].startswith("__tl_ct.store(out, index=(__tl_ct.bid(2), __tl_ct.bid(1), "
                                "__tl_ct.bid(0)), ")
    # and the raw versions, which pick the destination themselves, are all rejected
    for case_id in ("head_permutation_raw_store_out", "head_permutation_raw_unannotated",
                    "head_permutation_store_swapped_index", "head_permutation_raw_param_safe"):
        with pytest.raises(tl.SafetyError):
            corpus.REJECT[case_id].build()


def test_persistent_gemm_reads_the_tile_it_stores():
    """c.tile_index_of(t) and c.store(..., at=t) lower to the same tile coordinates."""
    case = corpus.ACCEPT["gemm_persistent_grouped"]
    lowered = case.build().lowered_source(*case.examples())
    (index_of,) = [ln for ln in lowered.splitlines() if "m, n = " in ln]
    (store,) = [ln for ln in lowered.splitlines() if "ct.store(" in ln]
    coords = index_of.split("m, n = ", 1)[1].strip()
    assert "grouped_tile_index(t," in coords
    assert f"ct.store(c, index={coords}, " in store


# ---- rejected kernels ---------------------------------------------------------------


def _reject(case):
    if case.when == "compile":
        kernel = case.build()                     # fine when defined ...
        assert isinstance(kernel, tl.Kernel)
        with pytest.raises(tl.SafetyError) as ei:
            kernel.compile(*case.examples(), arch="sm_90")   # ... refused before compiling
        return ei.value
    with pytest.raises(tl.SafetyError) as ei:
        case.build()
    return ei.value


@pytest.mark.parametrize("case_id", [_param(c) for c in corpus.REJECT.values()])
def test_rejected_kernel(case_id):
    case = corpus.REJECT[case_id]
    err = _reject(case)
    assert getattr(err, "rule", None) == case.rule, (
        f"expected rule {case.rule!r}, got {getattr(err, 'rule', None)!r}\n{err}")
    line, col = MARKERS[case_id]
    loc = err.location
    assert isinstance(loc, SourceLocation), f"no location: {err}"
    assert Path(loc.filename).resolve() == CORPUS_FILE
    assert (loc.line, loc.col) == (line, col), (
        f"expected {line}:{col}, got {loc.line}:{loc.col}\n{err}")
    text = str(err)
    assert f"{loc.filename}:{line}:{col}: " in text
    assert CORPUS_LINES[line - 1].strip().split("  #")[0] in text   # the excerpt
    # the rule's words, in the message or its hint (not just in the quoted source)
    said = err.message + "\n" + (err.hint or "")
    missing = [p for p in case.phrases if p not in said]
    assert not missing, f"missing {missing} in:\n{text}"
    # which kernel (or helper) is at fault, unless the location alone says it: errors on
    # the signature, and helpers whose source cannot be read (located at the call)
    if not re.search(r"cannot be \*args|keyword-only|^cannot check helper", err.message):
        assert re.search(r"\(in (kernel|helper) '", err.message), err.message


def test_rejection_caret_marks_the_construct():
    """The excerpt's caret starts under the reported column."""
    err = _reject(corpus.REJECT["unicode_column"])
    excerpt = err.location.excerpt().splitlines()
    source, caret = excerpt
    assert source.strip().startswith("ŧ = tl.load_like(x, z); ct.store(")
    assert source[caret.index("^"):].startswith("ct.store(x")


def test_dynamic_lookup_says_what_to_write():
    err = _reject(corpus.REJECT["getattr_lookup"])
    assert err.hint


def test_same_helper_checked_per_kind():
    """A helper that writes its argument is fine with tl.Raw and refused with tl.In."""
    assert isinstance(corpus.ACCEPT["unsafe_helper_writes_raw"].build(), tl.Kernel)
    err = _reject(corpus.REJECT["unsafe_helper_writes_in"])
    assert "called from kernel 'unsafe_helper_writes'" in err.message


# ---- helpers rebound between definition and compile ---------------------------------


def _rebind_args():
    return (corpus.S(256).partition(64), corpus.S(256))


def test_helper_rebound_after_definition_is_rechecked(monkeypatch):
    kernel = tl.kernel(corpus.rebind_victim)          # _rebindable_helper only reads
    monkeypatch.setattr(corpus, "_rebindable_helper", corpus._rebound_writer)
    with pytest.raises(tl.SafetyError, match="which is tl.In") as ei:
        kernel.compile(*_rebind_args(), arch="sm_90", cache=False)
    assert ei.value.rule == "write-input"


@pytest.mark.toolchain
def test_helper_rebound_misses_the_cache(monkeypatch):
    kernel = tl.kernel(corpus.rebind_victim)
    first = kernel.compile(*_rebind_args(), arch="sm_90")
    monkeypatch.setattr(corpus, "_rebindable_helper", corpus._rebound_reader)
    second = kernel.compile(*_rebind_args(), arch="sm_90")
    assert not second.cache_hit
    assert second.tileir != first.tileir
