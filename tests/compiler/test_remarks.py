"""tilelab.compiler.binary.remarks on real tileiras 13.4 remark files and on malformed input."""
from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

from support import cubins as _cubins  # noqa: E402

from tilelab.compiler.binary import remarks as remarks_mod  # noqa: E402
from tilelab.compiler.binary.remarks import Remark, format_remarks, parse_remarks  # noqa: E402

pytestmark = pytest.mark.toolchain   # remark files tileiras wrote

SRC = _cubins.SOURCE.name
TENSOR_CORE = {"sm_80": ("Tensor-core SM80", "[16, 8, 16]"),
               "sm_90": ("Tensor-core SM90", "[64, 128, 16]"),
               "sm_100": ("Tensor-core SM100", "[128, 128, 16]"),
               "sm_120": ("Tensor-core SM80", "[16, 8, 16]")}


@pytest.fixture(scope="session")
def gemm_yaml():
    return {arch: _cubins.build("gemm", arch).remarks_yaml for arch in _cubins.ARCHS}


def _only(remarks, **where):
    found = [r for r in remarks if all(getattr(r, k) == v for k, v in where.items())]
    assert len(found) == 1, (where, found)
    return found[0]


# -- real remark files -----------------------------------------------------------------


@pytest.mark.parametrize("arch", _cubins.ARCHS)
def test_tensor_core_remark(gemm_yaml, arch):
    remarks = parse_remarks(gemm_yaml[arch])
    mma = _only(remarks, pass_name="Tensor-core")
    instruction, shape = TENSOR_CORE[arch]
    assert mma.kind == "passed" and mma.name == "RemarkTensorCoreMMA"
    assert Path(mma.filename).name == SRC
    assert (mma.line, mma.col) == (_cubins.line_of("gemm-mma"), 14)
    assert mma.function == "gemm"
    assert mma.message == "MMA operation successfully optimized to use Tensor Cores"
    assert mma.args["Instruction"] == instruction and mma.args["Shape"] == shape


def test_duplicates_are_removed(gemm_yaml):
    text = gemm_yaml["sm_90"]
    documents = len(re.findall(r"^--- !", text, re.M))
    reasons = text.count("- Reason:")
    remarks = parse_remarks(text)
    assert documents == 2 * len(remarks) == 12  # tileiras writes each remark twice
    assert reasons > 1000  # ... and repeats one Reason thousands of times
    keys = {(r.kind, r.name, r.line, r.col) for r in remarks}
    assert len(keys) == len(remarks)


def test_failed_tma_remarks_carry_one_reason(gemm_yaml):
    remarks = parse_remarks(gemm_yaml["sm_90"])
    store = _only(remarks, name="RemarkMemoryTmaStoreFailed")
    assert store.kind == "failed" and store.line == _cubins.line_of("gemm-store")
    assert store.message == "Failed to select TMA store instruction"
    (reason,) = store.reasons()
    assert reason == f'loc("{store.filename}":{store.line}:{store.col}): stride not 16-byte aligned'
    assert {r.line for r in remarks if r.name == "RemarkMemoryTmaLoadFailed"} == \
        {_cubins.line_of("gemm-load-a"), _cubins.line_of("gemm-load-b")}


def test_tma_selected_with_aligned_strides():
    remarks = parse_remarks(_cubins.build("gemm", "sm_90", aligned=True).remarks_yaml)
    assert all(r.kind == "passed" for r in remarks)
    load = _only(remarks, line=_cubins.line_of("gemm-load-a"))
    assert load.args["Instruction"] == "TMA Load instruction"
    store = _only(remarks, line=_cubins.line_of("gemm-store"))
    assert store.message == "Store instruction selected"


def test_map_location_maps_debugloc_and_reasons(gemm_yaml):
    def to_cell(filename, line, col):
        return ("cell.py", line - 30, col) if filename.endswith(SRC) else None

    remarks = parse_remarks(gemm_yaml["sm_90"], map_location=to_cell)
    assert {r.filename for r in remarks} == {"cell.py"}
    store = _only(remarks, name="RemarkMemoryTmaStoreFailed")
    assert store.line == _cubins.line_of("gemm-store") - 30
    assert store.reasons() == (f'loc("cell.py":{store.line}:{store.col}): '
                               "stride not 16-byte aligned",)
    untouched = parse_remarks(gemm_yaml["sm_90"], map_location=lambda f, l, c: None)
    assert untouched == parse_remarks(gemm_yaml["sm_90"])


def test_mapping_can_merge_duplicates():
    doc = """--- !Passed
Pass: Memory
Name: RemarkMemoryLoadInstructionSelected
DebugLoc: {{ File: '{f}', Line: 3, Column: 1 }}
Function: k
Args:
  - Remark: Load instruction selected
...
"""
    text = doc.format(f="a.py") + doc.format(f="b.py")
    assert len(parse_remarks(text)) == 2
    assert len(parse_remarks(text, map_location=lambda f, l, c: ("k.py", l, c))) == 1


def test_format_real_remarks(gemm_yaml):
    text = format_remarks(parse_remarks(gemm_yaml["sm_90"]))
    mma, store = _cubins.line_of("gemm-mma"), _cubins.line_of("gemm-store")
    load_a = _cubins.line_of("gemm-load-a")
    lines = text.splitlines()
    assert f"{SRC}:{mma}  tensor-core: MMA operation successfully optimized to use Tensor " \
           "Cores (Tensor-core SM90, shape [64, 128, 16])" in lines
    assert f"{SRC}:{store}  memory [failed]: Failed to select TMA store instruction: " \
           "stride not 16-byte aligned" in lines
    # Grouped by line: the location is written once, failures first.
    at = lines.index(f"{SRC}:{load_a}  memory [failed]: Failed to select TMA load "
                     "instruction: stride not 16-byte aligned")
    assert lines[at + 1].strip() == "memory: Load instruction selected " \
                                    "(Global-memory load instruction)"
    assert lines[at + 1].startswith(" " * len(f"{SRC}:{load_a}"))
    assert len(lines) == 6
    numbers = [int(m.group(1)) for m in re.finditer(rf"^{re.escape(SRC)}:(\d+)", text, re.M)]
    assert numbers == sorted(numbers)


def test_format_details():
    base = dict(pass_name="Memory", name="N", filename="/x/k.py", line=7, function="f",
                message="Load instruction selected")
    a = Remark("passed", col=35, args={"Instruction": "Global-memory load instruction"}, **base)
    b = Remark("passed", col=77, args={"Instruction": "Global-memory load instruction"}, **base)
    out = format_remarks([b, a]).splitlines()
    assert out == ["k.py:7:35  memory: Load instruction selected (Global-memory load instruction)",
                   "k.py:7:77  memory: Load instruction selected (Global-memory load instruction)"]
    other = Remark("missed", "Memory", "N", "/x/k.py", 9, 4, "f", "Not vectorized",
                   {"Reason": ('loc("/x/other.py":3:1): too small', "too small")})
    assert format_remarks([other], full_paths=True) == \
        "/x/k.py:9  memory [missed]: Not vectorized: other.py:3: too small; too small"
    nowhere = Remark("analysis", "Memory", "N", None, None, None, None, "m", {})
    assert format_remarks([nowhere, other]).splitlines()[-1] == "<unknown>  memory [analysis]: m"
    assert format_remarks([]) == "(no remarks)"


# -- the format's corners --------------------------------------------------------------


def test_kinds_and_message_fallback():
    text = """--- !Missed
Pass: inline
Name: NoDefinition
Function: main
Args:
  - Callee: foo
  - String: ' will not be inlined into '
  - Caller: main
...
--- !Analysis
Pass: prologepilog
Name: StackSize
Function: main
Args:
  - NumStackBytes: '16'
...
--- !AnalysisFPCommute
Pass: loop-vectorize
Name: CantReorderFPOps
Function: f
Args: []
...
--- !Failed
Pass: p
Name: n
Function: f
...
--- !Brandnew
Pass: p
Name: n
Function: f
"""
    missed, analysis, commute, failed, new = parse_remarks(text)
    assert missed.kind == "missed" and missed.message == "foo will not be inlined into main"
    assert missed.filename is None and missed.location == "<unknown>"
    assert analysis.kind == "analysis" and analysis.args == {"NumStackBytes": "16"}
    assert commute.kind == "analysis" and commute.args == {}
    assert failed.kind == "failed" and new.kind == "brandnew"


def test_repeated_keys_become_tuples():
    text = """--- !Failure
Pass: Memory
Name: X
Function: f
Args:
  - Reason: a
  - Reason: b
  - Reason: a
  - Other: 1
"""
    (r,) = parse_remarks(text)
    assert r.args == {"Reason": ("a", "b"), "Other": 1}
    assert r.reasons() == ("a", "b")


def test_empty_input():
    assert parse_remarks("") == []
    assert parse_remarks("---\n...\n") == []


@pytest.mark.parametrize("text, message", [
    ("--- !Passed\nPass: a\nName: b\n--- !Passed\nPass: [unclosed\n",
     r"remark document 2 \(line 4: '--- !Passed'\) is not valid YAML"),
    ("--- !Passed\nPass: a\nName: b\n---\nPass: a\nName: b\n",
     r"remark document 2 \(line 4: '---'\): expected a tagged remark such as '--- !Passed'"),
    ("--- !Passed\nName: b\n", r"remark document 1 .*: the remark has no 'Pass' string"),
    ("--- !Passed\nPass: a\nName: b\nArgs: {x: 1}\n", r"Args must be a list"),
    ("--- !Passed\nPass: a\nName: b\nArgs: [3]\n", r"each Args entry must be a mapping"),
    ("--- !Passed\nPass: a\nName: b\nDebugLoc: {File: f, Line: x}\n", r"non-integer line"),
    ("--- !Passed\nPass: a\nName: b\nDebugLoc: 12\n", r"DebugLoc must be"),
    ("--- !Passed [1, 2]\n", r"!Passed must tag a mapping"),
    ("just some text\n", r"remark document 1 \(line 1: 'just some text'\): expected a tagged"),
])
def test_malformed_input_names_the_document(text, message):
    with pytest.raises(ValueError, match=message):
        parse_remarks(text)


def test_bytes_are_refused():
    with pytest.raises(TypeError, match="takes the YAML text as str"):
        parse_remarks(b"--- !Passed\n")  # type: ignore[arg-type]


def test_docstring_examples():
    assert doctest.testmod(remarks_mod, optionflags=doctest.ELLIPSIS).failed == 0
