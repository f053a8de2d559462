"""Read tileiras' optimization remarks and summarize them per source line.

tileiras (``--remark-format=yaml --remarks=all``) writes LLVM-style remark documents:
``--- !Passed``/``!Missed``/``!Failure``/``!Analysis`` mappings with ``Pass``, ``Name``,
``DebugLoc``, ``Function`` and a list of one-key ``Args``. They tell a user what the
compiler did with each line: whether an ``ct.mma`` reached the tensor cores, whether a load
became a TMA copy and, if not, why. tileiras repeats identical documents (and identical
``Reason`` args) many times, so this module deduplicates, and it can map the synthetic
file name of tilelab's lowered source back to the user's file.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, Callable

import yaml

__all__ = ["Remark", "parse_remarks", "format_remarks"]

LocationMap = Callable[[str, int, int], "tuple[str, int, int] | None"]

# Remark kinds by YAML tag. tileiras 13.4 writes !Passed and !Failure; LLVM also defines
# !Missed, !Analysis, !AnalysisFPCommute and !AnalysisAliasing; !Failed is accepted too.
_KINDS = {
    "Passed": "passed",
    "Missed": "missed",
    "Failure": "failed",
    "Failed": "failed",
    "Analysis": "analysis",
    "AnalysisFPCommute": "analysis",
    "AnalysisAliasing": "analysis",
}
_KIND_ORDER = {"failed": 0, "missed": 1, "passed": 2, "analysis": 3}
_LOC_IN_TEXT = re.compile(r'loc\("([^"]*)":(\d+):(\d+)\)')
_MESSAGE_KEY = "Remark"
_HIDDEN_KEYS = {"RemarkId", _MESSAGE_KEY, "Reason"}
_BARE_KEYS = {"Instruction"}


@dataclass(frozen=True)
class Remark:
    """One compiler remark, located in (possibly mapped) source.

    ``kind`` is ``"passed"``, ``"missed"``, ``"failed"`` or ``"analysis"``; ``message`` the
    remark's sentence; ``args`` every argument by key, a tuple of values where tileiras gave
    a key several different values (as with ``Reason``), in first-seen order.

    Example:
        >>> r = Remark("passed", "Tensor-core", "RemarkTensorCoreMMA", "k.py", 16, 14, "gemm",
        ...            "MMA operation successfully optimized to use Tensor Cores",
        ...            {"Instruction": "Tensor-core SM90", "Shape": "[64, 128, 16]"})
        >>> r.location
        'k.py:16:14'
    """

    kind: str
    pass_name: str
    name: str
    filename: str | None
    line: int | None
    col: int | None
    function: str | None
    message: str
    args: dict[str, Any] = field(default_factory=dict, hash=False)

    @property
    def location(self) -> str:
        """``file:line:col`` (``<unknown>`` when the remark has no DebugLoc)."""
        if self.filename is None:
            return "<unknown>"
        return f"{self.filename}:{self.line}:{self.col}"

    def reasons(self) -> tuple[str, ...]:
        """The distinct ``Reason`` arguments (why a failed/missed remark failed)."""
        value = self.args.get("Reason")
        if value is None:
            return ()
        return value if isinstance(value, tuple) else (value,)

    def _key(self) -> tuple:
        return (self.kind, self.pass_name, self.name, self.filename, self.line, self.col,
                self.function, self.message, repr(sorted(self.args.items())))


class _RemarkLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """Safe YAML loader that turns any ``!Tag`` mapping into ``{"__tag__": Tag, ...}``."""


def _tagged(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if not isinstance(node, yaml.MappingNode):
        raise yaml.constructor.ConstructorError(
            None, None, f"!{suffix} must tag a mapping, not a {node.id}", node.start_mark)
    value = loader.construct_mapping(node, deep=True)
    value["__tag__"] = suffix
    return value


_RemarkLoader.add_multi_constructor("!", _tagged)

_DOC_START = re.compile(r"^---(?=[ \t]|$)", re.M)


def _documents(text: str) -> list[tuple[int, str]]:
    """(1-based line, text) of each YAML document. A line starting ``---`` is always a
    document marker in YAML, so splitting on it is exact."""
    starts = [m.start() for m in _DOC_START.finditer(text)]
    if not starts or text[:starts[0]].strip():
        starts.insert(0, 0)
    docs = []
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(text)
        chunk = text[start:end]
        if chunk.strip() and chunk.strip() not in ("---", "...", "--- ..."):
            docs.append((text.count("\n", 0, start) + 1, chunk))
    return docs


def _describe(index: int, line: int, chunk: str) -> str:
    head = chunk.strip().splitlines()[0][:60] if chunk.strip() else ""
    return f"remark document {index} (line {line}: {head!r})"


def _map_text(value: str, map_location: LocationMap | None) -> str:
    """Rewrite ``loc("file":line:col)`` references inside a message."""
    if map_location is None or "loc(" not in value:
        return value

    def sub(m: re.Match) -> str:
        mapped = map_location(m.group(1), int(m.group(2)), int(m.group(3)))
        if mapped is None:
            return m.group(0)
        return f'loc("{mapped[0]}":{mapped[1]}:{mapped[2]})'
    return _LOC_IN_TEXT.sub(sub, value)


def _collect_args(raw: Any, where: str, map_location: LocationMap | None) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise ValueError(f"{where}: Args must be a list of one-key mappings, got "
                         f"{type(raw).__name__}")
    values: dict[str, list[Any]] = {}
    for item in raw:
        if not isinstance(item, dict):
            raise ValueError(f"{where}: each Args entry must be a mapping, got {item!r}")
        for key, value in item.items():
            if key == "DebugLoc":  # an argument's own location; not shown
                continue
            if isinstance(value, str):
                value = _map_text(value, map_location)
            seen = values.setdefault(str(key), [])
            if value not in seen:
                seen.append(value)
    return {k: v[0] if len(v) == 1 else tuple(v) for k, v in values.items()}


def _remark(doc: Any, where: str, map_location: LocationMap | None) -> Remark:
    if not isinstance(doc, dict) or "__tag__" not in doc:
        raise ValueError(f"{where}: expected a tagged remark such as '--- !Passed', got "
                         f"{type(doc).__name__}; is this a tileiras --remark-format=yaml file?")
    tag = doc.pop("__tag__")
    kind = _KINDS.get(tag, tag.lower())
    for key in ("Pass", "Name"):
        if not isinstance(doc.get(key), str):
            raise ValueError(f"{where}: the remark has no {key!r} string")
    filename = line = col = None
    loc = doc.get("DebugLoc")
    if loc is not None:
        if not isinstance(loc, dict) or not {"File", "Line"} <= set(loc):
            raise ValueError(f"{where}: DebugLoc must be {{File, Line, Column}}, got {loc!r}")
        try:
            filename, line, col = str(loc["File"]), int(loc["Line"]), int(loc.get("Column", 0))
        except (TypeError, ValueError) as e:
            raise ValueError(f"{where}: DebugLoc has a non-integer line/column: {loc!r}") from e
        if map_location is not None:
            mapped = map_location(filename, line, col)
            if mapped is not None:
                filename, line, col = mapped
    args = _collect_args(doc.get("Args"), where, map_location)
    message = args.get(_MESSAGE_KEY)
    if not isinstance(message, str):
        message = "".join(str(v) for v in args.values() if not isinstance(v, tuple))
    function = doc.get("Function")
    return Remark(kind, doc["Pass"], doc["Name"], filename, line, col,
                  None if function is None else str(function), message, args)


def parse_remarks(text: str, map_location: LocationMap | None = None) -> list[Remark]:
    """Parse a tileiras YAML remarks file into deduplicated remarks, in first-seen order.

    ``map_location(filename, line, col)`` may return a new ``(filename, line, col)`` (or
    None to keep it); it is applied to each DebugLoc and to ``loc("file":line:col)``
    references inside arguments. Malformed input raises ValueError naming the document.

    Example:
        >>> text = '''--- !Passed
        ... Pass:            Tensor-core
        ... Name:            RemarkTensorCoreMMA
        ... DebugLoc:        { File: 'lowered.py', Line: 17, Column: 14 }
        ... Function:        gemm
        ... Args:
        ...   - Remark:      MMA operation successfully optimized to use Tensor Cores
        ...   - Shape:       '[64, 128, 16]'
        ... ...
        ... '''
        >>> [r] = parse_remarks(text + text, lambda f, l, c: ("k.py", l - 1, c))
        >>> r.kind, r.location, r.args["Shape"]
        ('passed', 'k.py:16:14', '[64, 128, 16]')
    """
    if not isinstance(text, str):
        raise TypeError(f"parse_remarks() takes the YAML text as str, got {type(text).__name__}")
    remarks: list[Remark] = []
    seen_docs: set[str] = set()
    seen: set[tuple] = set()
    for index, (line, chunk) in enumerate(_documents(text), start=1):
        if chunk in seen_docs:  # tileiras repeats whole documents verbatim
            continue
        seen_docs.add(chunk)
        where = _describe(index, line, chunk)
        try:
            doc = yaml.load(chunk, Loader=_RemarkLoader)
        except yaml.YAMLError as e:
            detail = " ".join(str(e).split())
            raise ValueError(f"{where} is not valid YAML: {detail}") from None
        if doc is None:
            continue
        remark = _remark(doc, where, map_location)
        key = remark._key()
        if key not in seen:
            seen.add(key)
            remarks.append(remark)
    return remarks


def _details(remark: Remark) -> str:
    parts = []
    for key, value in remark.args.items():
        if key in _HIDDEN_KEYS:
            continue
        shown = ", ".join(map(str, value)) if isinstance(value, tuple) else str(value)
        parts.append(shown if key in _BARE_KEYS else f"{key[:1].lower()}{key[1:]} {shown}")
    return f" ({', '.join(parts)})" if parts else ""


def _reasons(remark: Remark) -> str:
    own = (remark.filename, remark.line, remark.col)
    shown = []
    for reason in remark.reasons():
        text = str(reason)
        m = _LOC_IN_TEXT.match(text)
        if m:
            rest = text[m.end():].lstrip(": ")
            where = (m.group(1), int(m.group(2)), int(m.group(3)))
            text = rest if where == own else f"{PurePath(where[0]).name}:{where[1]}: {rest}"
        if text not in shown:
            shown.append(text)
    return f": {'; '.join(shown)}" if shown else ""


def format_remarks(remarks: Iterable[Remark], *, full_paths: bool = False) -> str:
    """A compact text summary, one remark a line, grouped and sorted by source line.

    Failed and missed remarks are marked and carry their reasons; the file is shown by its
    base name unless ``full_paths``, and the column only where one line has remarks at
    several columns.

    Example:
        >>> r = Remark("passed", "Tensor-core", "RemarkTensorCoreMMA", "/x/k.py", 16, 14, "gemm",
        ...            "MMA operation successfully optimized to use Tensor Cores",
        ...            {"RemarkId": 2, "Instruction": "Tensor-core SM90", "Shape": "[64, 128, 16]"})
        >>> print(format_remarks([r]))
        k.py:16  tensor-core: MMA operation successfully optimized to use Tensor Cores (Tensor-core SM90, shape [64, 128, 16])
    """
    items = sorted(remarks, key=lambda r: (r.filename is None, r.filename or "", r.line or 0,
                                           r.col or 0, _KIND_ORDER.get(r.kind, 9),
                                           r.pass_name, r.message))
    if not items:
        return "(no remarks)"
    columns: dict[tuple, set] = {}
    for r in items:
        columns.setdefault((r.filename, r.line), set()).add(r.col)
    rows: list[tuple[str, str]] = []
    for r in items:
        if r.filename is None:
            where = "<unknown>"
        else:
            name = r.filename if full_paths else PurePath(r.filename).name
            where = f"{name}:{r.line}"
            if len(columns[(r.filename, r.line)]) > 1:  # several places on one line
                where += f":{r.col}"
        tag = "" if r.kind == "passed" else f" [{r.kind}]"
        rows.append((where, f"{r.pass_name.lower()}{tag}: {r.message}{_details(r)}{_reasons(r)}"))
    width = max(len(w) for w, _ in rows)
    out, previous = [], None
    for where, text in rows:
        label = where if where != previous else ""
        out.append(f"{label:<{width}}  {text}".rstrip())
        previous = where
    return "\n".join(out)
