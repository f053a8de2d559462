"""Shared machinery of the soundness corpus (soundness_cases.py) and the tests that read it
(test_soundness.py, test_allowlist.py, test_error_quality.py).

* ``# AT: <id>[, <id>...] [@ <anchor>]`` markers in the corpus files say where an attempt
  must be refused: the marked line, and the column of ``<anchor>`` when one is given.
* :func:`outcome` runs an attempt once per session (cached) and returns the stage it
  reached and the exception it raised.
* :func:`tileir_writes` is an independent reading of the Tile IR a compile produced: every
  write op, and for each tile store the kernel parameter whose view it stores into.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compiler import soundness_cases as cases
from compiler import soundness_helpers, soundness_shadow

CORPUS_FILES = [Path(m.__file__).resolve() for m in (cases, soundness_helpers,
                                                       soundness_shadow)]
_MARK = re.compile(r"#\s*AT:\s*(?P<ids>[\w, ]+?)\s*(?:@(?P<last>last)?\s(?P<anchor>.*))?$")


@dataclass(frozen=True)
class Marker:
    file: Path
    line: int
    col: int | None     # 1-based, only when the marker names an anchor


def _scan() -> dict[str, Marker]:
    found: dict[str, Marker] = {}
    for path in CORPUS_FILES:
        for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "# AT:" not in text:
                continue
            code, comment = text.split("# AT:", 1)
            m = _MARK.match("# AT:" + comment.rstrip())
            if m is None:
                continue
            code = code.split("  # noqa")[0]
            anchor = m.group("anchor")
            col = None
            if anchor:
                col = (code.rindex(anchor) if m.group("last") else code.index(anchor)) + 1
            for case_id in (i.strip() for i in m.group("ids").split(",")):
                assert case_id not in found, f"marker {case_id!r} appears twice"
                found[case_id] = Marker(path, number, col)
    return found


MARKERS = _scan()

_OUTCOMES: dict[str, tuple[str | None, BaseException | None, Any]] = {}


def outcome(case_id: str) -> tuple[str | None, BaseException | None, Any]:
    """(stage reached, exception raised or None, the Steps object) of an attempt, run
    once per session."""
    found = _OUTCOMES.get(case_id)
    if found is None:
        case = cases.ATTEMPTS[case_id]
        steps = cases.Steps()
        err = None
        try:
            case.run(steps)
        except Exception as e:  # noqa: BLE001 - what the attempt raised is the result
            err = e
        found = _OUTCOMES[case_id] = (steps.stage, err, steps)
    return found


def matches(err: BaseException, expect: str) -> bool:
    """Whether err is what ``expect`` names: a rule id (a SafetyError with that .rule),
    ``SafetyError`` (with any rule of RULES), or an error class name; '|' separates
    alternatives."""
    import tilelab as tl
    from tilelab.compiler.safety import RULES

    for alt in expect.split("|"):
        if alt in RULES:
            if isinstance(err, tl.SafetyError) and getattr(err, "rule", None) == alt:
                return True
        elif alt == "SafetyError":
            if isinstance(err, tl.SafetyError) and getattr(err, "rule", None) in RULES:
                return True
        elif alt in (c.__name__ for c in type(err).__mro__):
            return True
    return False


def expected_location(case_id: str, steps: Any) -> Marker:
    """Where the attempt must be refused: set by the attempt itself (temporary files), or
    its marker (``where`` names another attempt's marker when they share a line)."""
    if getattr(steps, "at", None) is not None:
        f, line = steps.at
        return Marker(Path(f), line, None)
    case = cases.ATTEMPTS[case_id]
    return MARKERS[case.where or case_id]


# ---- Tile IR ---------------------------------------------------------------------------

#: every op of Tile IR 13.x that writes memory
WRITE_OPS = ("store_view_tko", "store_ptr_tko", "atomic_rmw_tko", "atomic_cas_tko",
             "atomic_red_view_tko", "multimem_store_view_tko", "multimem_reduce_view_tko")
_DEF = re.compile(r"^\s*(%[\w.$]+)(?:\s*,\s*%[\w.$]+)*\s*=\s*(\w+)\s*(.*)$")


def _arg_params(layouts) -> list[str]:
    """Parameter name of each entry argument (cutile_python_v1: per array ptr, shape[n],
    stride[n]; scalars one each; constants none)."""
    out: list[str] = []
    for lay in layouts:
        if lay.kind == "array":
            out += [lay.name] * (1 + 2 * lay.ndim)
        elif lay.kind == "scalar":
            out.append(lay.name)
    return out


def tileir_writes(art) -> list[tuple[str, str | None]]:
    """(op, parameter written or None) for every write op of the compiled Tile IR.

    A tile store is traced from its partition view to the tensor view, through
    ``assume`` ops, to an entry argument; other writes report the op only.
    """
    text = art.tileir
    assert "entry @" in text, f"no Tile IR text to check:\n{text[:300]}"
    defs: dict[str, tuple[str, str]] = {}
    for line in text.splitlines():
        m = _DEF.match(line)
        if m:
            defs[m.group(1)] = (m.group(2), m.group(3))
    params = _arg_params(art.params)
    out: list[tuple[str, str | None]] = []
    for line in text.splitlines():
        op = next((w for w in WRITE_OPS if re.search(rf"\b{w}\b", line)), None)
        if op is None:
            continue
        target = None
        if op == "store_view_tko":
            m = re.search(r"store_view_tko\s+\w+\s+%[\w.$]+,\s*(%[\w.$]+)\[", line)
            v = m.group(1) if m else None
            for want in ("make_partition_view", "make_tensor_view"):
                d = defs.get(v)
                if d is None or d[0] != want:
                    v = None
                    break
                v = re.match(r"\s*(%[\w.$]+)", d[1]).group(1)
            while v is not None and v in defs and defs[v][0] == "assume":
                v = re.findall(r"%[\w.$]+", defs[v][1])[-1]
            am = re.fullmatch(r"%arg(\d+)", v or "")
            if am and int(am.group(1)) < len(params):
                target = params[int(am.group(1))]
        out.append((op, target))
    return out


def assert_only_partition_stores(art, kernel) -> None:
    """The compiled kernel writes nothing but tile stores into its Out/InOut partitions,
    one per partition store the lowering emitted."""
    writes = tileir_writes(art)
    partitions = set(kernel.definition.analysis.partitions)
    bad = [(op, t) for op, t in writes if op != "store_view_tko" or t not in partitions]
    assert not bad, f"writes other than partition stores: {bad}\n{art.tileir}"
    emitted = art.lowered_source.count("__tl_ct.store(") + \
        art.lowered_source.count("__tl_dev.sub_tile_store(")  # p.store(tile, offset=...)
    assert len(writes) == emitted, (
        f"{len(writes)} tile stores in the Tile IR, {emitted} partition stores lowered")
