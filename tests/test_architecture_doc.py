"""docs/architecture.md is a map that stays true: every module of ``tilelab/`` is named in
its layer table, and every module, folder or file the page names exists.

How the page names a module (the convention this test reads, written so that a newcomer
can follow it too): the table under "## Layers" has one row per folder of ``tilelab/``
(``tilelab`` for the package's own modules); its second cell lists the folder's modules
in backticks, by name without ``.py``. A sub-folder is written with a slash, and the
names in the parentheses right after it are inside it: ``launch/`` (``launcher``,
``plan``). Any other parenthesis adds names beside the one before it (``export`` (+
``shape_errors``)). A dotted name in backticks (``tilelab.perf.predict``) is an API name,
not a module, and is not read; a name with ``*`` is refused (a pattern would let a new
module in unnamed). Elsewhere on the page, a backticked path (``compiler/lower.py``,
``runtime/launch``, ``tests/test_layers.py``, ``launch/plan.py``) must exist, from
``tilelab/``, from the repository or from one of tilelab's folders.
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tilelab"
DOC = ROOT / "docs" / "architecture.md"

_TOKEN = re.compile(r"`([^`]+)`|(\()|(\))")
_MODULE_NAME = re.compile(r"^[A-Za-z_]\w*/?$|^\w+\.(?:py|c)$")
_PATH = re.compile(r"^[\w.-]+(?:/[\w.-]+)*/?$")


def _layer_rows(text: str) -> list[tuple[str, str]]:
    """(folder, modules cell) of each row of the table under "## Layers"."""
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        m = re.match(r"^\|\s*`([\w/]+)`\s*\|(.*?)\|", line)
        if m:
            rows.append((m.group(1), m.group(2)))
    return rows


def _cell_names(folder: str, cell: str) -> list[str]:
    """The module paths (relative to tilelab/, folders ending in '/') a cell names."""
    base = "" if folder == "tilelab" else folder.rstrip("/") + "/"
    stack, names, last_folder = [base], [], None
    for m in _TOKEN.finditer(cell):
        token, opening, closing = m.groups()
        if opening:
            stack.append(last_folder or stack[-1])
            last_folder = None
        elif closing:
            if len(stack) > 1:
                stack.pop()
            last_folder = None
        else:
            assert "*" not in token, (f"docs/architecture.md, row {folder}: `{token}` is a "
                                      "pattern; name each module")
            last_folder = None
            if not _MODULE_NAME.match(token):
                continue
            path = stack[-1] + token
            names.append(path)
            if token.endswith("/"):
                last_folder = path
    return names


def _listed() -> dict[str, str]:
    """path relative to tilelab/ -> the table row that names it."""
    out = {}
    for folder, cell in _layer_rows(DOC.read_text()):
        if folder != "tilelab":
            out[folder.rstrip("/") + "/"] = folder
        for name in _cell_names(folder, cell):
            out[name] = folder
    return out


def _exists(path: str) -> bool:
    p = PACKAGE / path
    if path.endswith("/"):
        return (p / "__init__.py").is_file()
    if path.endswith((".py", ".c")):
        return p.is_file()
    return (PACKAGE / (path + ".py")).is_file() or (p / "__init__.py").is_file()


def _modules() -> list[str]:
    """Every module and package of tilelab/, as the table writes it (``launch/``,
    ``launch/plan``); the top package itself is not listed."""
    out = []
    for f in sorted(PACKAGE.rglob("*.py")):
        rel = f.relative_to(PACKAGE)
        if "__pycache__" in rel.parts:
            continue
        if rel.name == "__init__.py":
            if rel.parent != Path("."):
                out.append(rel.parent.as_posix() + "/")
        else:
            out.append(rel.with_suffix("").as_posix())
    return out


def test_the_convention_is_read_as_documented():
    names = _cell_names("runtime", "`kernel`, `launch/` (`launcher`, `plan`), `graph` "
                        "(+ `graph_pdl`), `native` (+ `native_launch.c`), "
                        "`tilelab.perf.predict`, (the tour) `events`")
    assert names == ["runtime/kernel", "runtime/launch/", "runtime/launch/launcher",
                     "runtime/launch/plan", "runtime/graph", "runtime/graph_pdl",
                     "runtime/native", "runtime/native_launch.c", "runtime/events"]
    assert _cell_names("tilelab", "`cli`, `errors`") == ["cli", "errors"]


def test_a_pattern_is_refused():
    try:
        _cell_names("perf", "`autotune` (+ `autotune_*`)")
    except AssertionError as e:
        assert "`autotune_*` is a pattern; name each module" in str(e)
    else:
        raise AssertionError("a pattern was accepted")


def test_every_module_is_in_the_layer_table():
    listed = _listed()
    modules = _modules()
    assert len(modules) > 200 and "compiler/safety/" in modules   # (the walk works)
    missing = [m for m in modules if m not in listed]
    assert not missing, ("docs/architecture.md's layer table does not name these modules "
                         f"of tilelab/ (add each to its folder's row): {missing}")


def test_every_module_the_table_names_exists():
    gone = sorted(p for p in _listed() if not _exists(p))
    assert not gone, ("docs/architecture.md's layer table names modules that do not "
                      f"exist under tilelab/: {gone}")


def _prose(text: str) -> str:
    """The page without its layer table (whose names the tests above check)."""
    return "\n".join(ln for ln in text.splitlines() if not re.match(r"^\|\s*`", ln))


def test_every_path_on_the_page_exists():
    """A path in the prose is written from tilelab/, from the repository, or from the
    folder the sentence is about (``launch/plan.py`` in a sentence on the runtime,
    ``cubin.py`` after ``compiler/binary/``): it must exist from one of them."""
    folders = [ROOT, ROOT / "docs", PACKAGE] + sorted(
        p.parent for p in PACKAGE.rglob("__init__.py") if "__pycache__" not in p.parts)
    gone = []
    for token in re.findall(r"`([^`\s]+)`", _prose(DOC.read_text())):
        if token.startswith("$") or not _PATH.match(token):
            continue
        if "/" not in token and not token.endswith((".py", ".md", ".c")):
            continue
        if not any((base / token).exists() for base in folders):
            gone.append(token)
    assert len(folders) > 10
    assert not gone, f"docs/architecture.md names paths that do not exist: {sorted(set(gone))}"
