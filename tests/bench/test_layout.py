"""``benchmarks/`` stays a package of packages a newcomer can read: every script lives in
a package whose ``__init__`` names it, no two benchmark modules import each other
(however lazily), and the library never imports the benchmarks."""
from __future__ import annotations

import ast
from pathlib import Path

from support.graphs import circles

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
#: the only modules at the top of benchmarks/: the suite's entry and what all share
TOP = {"__init__", "__main__", "common"}


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module(p): p for p in sorted(BENCH.rglob("*.py")) if "__pycache__" not in p.parts}


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The benchmark modules ``path`` imports, lazy imports inside functions included;
    ``from . import x`` counts as importing ``x`` where ``x`` is a module."""
    name = _module(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            bases = [a.name for a in node.names]
            subs: list[str] = []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] +
                                ([node.module] if node.module else []))
            else:
                base = node.module or ""
            bases, subs = [base], [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for target in bases + subs:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and target != "benchmarks":
                found.add(target)
    return found


def test_the_reader_sees_the_imports():
    mods = _modules()
    assert "benchmarks.decode.models" in imports_of(mods["benchmarks.decode.graph"], set(mods))
    assert "benchmarks.host.runtime" in imports_of(mods["benchmarks.suite.groups"], set(mods))
    assert circles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [frozenset({"a", "b"})]


def test_no_two_benchmark_modules_import_each_other():
    mods = _modules()
    graph = {m: imports_of(p, set(mods)) for m, p in mods.items()}
    assert circles(graph) == [], ("benchmark modules that import each other: move what "
                                  "both need into a module below both (as decode/models.py)")


def test_every_script_lives_in_a_package_that_names_it():
    top = sorted(p.stem for p in BENCH.glob("*.py"))
    assert set(top) <= TOP, f"flat modules in benchmarks/ (put each in a package): {top}"
    for init in sorted(BENCH.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        package = init.parent.name
        unnamed = [p.stem for p in sorted(init.parent.glob("*.py"))
                   if p.stem not in ("__init__", "__main__")
                   and f"benchmarks.{package}.{p.stem}`" not in doc]
        assert not unnamed, f"benchmarks/{package}/__init__.py does not name {unnamed}"


def test_the_library_never_imports_the_benchmarks():
    for path in sorted((ROOT / "tilelab").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n == "benchmarks" or n.startswith("benchmarks.") for n in names), \
                path
