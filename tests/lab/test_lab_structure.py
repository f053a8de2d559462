"""The lab's wings: each job has one folder, no wing imports a wing above it, no circles.

``tilelab/lab`` holds the entry (``__init__.py`` with ``load_ipython_extension``, and
``magic.py``, the ``%%tile`` magic) and one sub-package per job. From the bottom:

- ``figures`` — SVG scenes, themes, ownership diagrams, the roofline;
- ``report`` — the magic's options, recorded launches, measurements, debug info and the
  report of a cell (a report holds figures);
- ``views`` — the tabs, widgets, linked listings, highlighting, the Race and Timings tabs
  (a view shows a report);
- ``cell`` (make kernels, run, collect, save) and ``course`` (exercises, graders,
  answers, ``expect``, recorded GPU results, teaching charts), side by side: neither
  imports the other;
- ``magic``, then the package itself.

Every import counts, the lazy ones inside functions and those under ``TYPE_CHECKING``
too. A wing may import its own modules and the wings below it. ``docs/architecture.md``
and ``docs/lab.md`` state the same order.
"""
from __future__ import annotations

import ast
from pathlib import Path

from support.graphs import circles

ROOT = Path(__file__).resolve().parents[2]
LAB = "tilelab.lab"

#: levels from the bottom; a group of one level may not import another group of it
LEVELS: list[list[set[str]]] = [
    [{"figures"}],
    [{"report"}],
    [{"views"}],
    [{"cell"}, {"course"}],
    [{"magic"}],
    [{"__init__"}],
]
#: the order as the docs write it
ORDER = "figures → report → views → cell, course → magic"


def _module_name(root: Path, path: Path) -> str:
    rel = path.relative_to(root).with_suffix("").parts
    return ".".join(rel[:-1] if rel[-1] == "__init__" else rel)


def _is_module(root: Path, name: str) -> bool:
    base = root.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def lab_imports(root: Path) -> dict[str, list[tuple[int, str]]]:
    """module -> (line, lab module) of every import of the lab in it, wherever it stands
    (relative imports resolved; ``from tilelab.lab import x`` is module ``x`` when ``x``
    is one, else the package)."""
    out: dict[str, list[tuple[int, str]]] = {}
    for path in sorted((root / "tilelab" / "lab").rglob("*.py")):
        name = _module_name(root, path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: list[tuple[int, str]] = []
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found += [(node.lineno, a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    base = parts[:len(parts) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                subs = [f"{module}.{a.name}" for a in node.names
                        if _is_module(root, f"{module}.{a.name}")]
                plain = len(subs) < len(node.names)
                found += [(node.lineno, m) for m in subs + ([module] if plain else [])]
        out[name] = [(line, m) for line, m in found
                     if (m == LAB or m.startswith(LAB + ".")) and m != name]
    return out


def wing(module: str) -> str:
    """The wing of a lab module: its sub-package, ``magic``, or ``__init__`` (the package)."""
    parts = module.split(".")
    return "__init__" if len(parts) == 2 else parts[2]


def _rank(name: str) -> tuple[int, int]:
    for level, groups in enumerate(LEVELS):
        for g, group in enumerate(groups):
            if name in group:
                return level, g
    raise AssertionError(f"tilelab/lab/{name} is in no wing of tests/lab/test_lab_structure.py"
                         f": put it in one of {[sorted(g) for lv in LEVELS for g in lv]}")


def upward_imports(root: Path) -> list[str]:
    """Every import of a wing that is not the importer's own and not below it."""
    bad = []
    for src, imports in lab_imports(root).items():
        here = _rank(wing(src))
        for line, dst in imports:
            there = _rank(wing(dst))
            if there == here or there[0] < here[0]:
                continue
            bad.append(f"{src} (wing {wing(src)}):{line} imports {dst} (wing {wing(dst)})")
    return bad


def import_circles(root: Path) -> list[list[str]]:
    """The lab's modules that import each other in a loop (strongly connected sets of
    two or more), each sorted."""
    graph = {m: sorted({d for _, d in imports}) for m, imports in lab_imports(root).items()}
    return sorted(sorted(c) for c in circles(graph))


def test_no_wing_imports_a_wing_above_it():
    bad = upward_imports(ROOT)
    assert not bad, ("imports against the lab's wings (see tests/lab/test_lab_structure.py)"
                     ":\n" + "\n".join(bad))


def test_the_lab_has_no_import_circles():
    assert import_circles(ROOT) == []


def test_the_top_holds_only_the_entry_and_the_wings():
    top = ROOT / "tilelab" / "lab"
    files = sorted(p.name for p in top.glob("*.py"))
    assert files == ["__init__.py", "magic.py"], (
        f"tilelab/lab/ holds {files}: a module belongs in the wing of its job")
    wings = sorted(p.name for p in top.iterdir() if (p / "__init__.py").is_file())
    assert wings == sorted(n for lv in LEVELS for g in lv for n in g
                           if n not in ("magic", "__init__"))


def test_a_wing_package_only_describes_its_wing():
    """A wing's ``__init__.py`` is its docstring: importing one module of a wing never
    loads the others, and no name is reachable by two paths."""
    for init in sorted((ROOT / "tilelab" / "lab").glob("*/__init__.py")):
        tree = ast.parse(init.read_text())
        assert ast.get_docstring(tree), f"{init.relative_to(ROOT)} says what its wing is for"
        assert len(tree.body) == 1, f"{init.relative_to(ROOT)} holds more than its docstring"


def test_the_docs_state_the_order():
    for doc in ("docs/architecture.md", "docs/lab.md"):
        assert ORDER in (ROOT / doc).read_text(), f"{doc} does not state the order {ORDER!r}"


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = tmp_path / "tilelab" / "lab" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def test_the_check_finds_upward_lazy_relative_and_sideways_imports(tmp_path):
    root = _tree(tmp_path, {
        "__init__.py": "from tilelab.lab.course.x import check\n",
        "magic.py": "from tilelab.lab.cell import run\n",
        "figures/__init__.py": "", "report/__init__.py": "", "views/__init__.py": "",
        "cell/__init__.py": "", "course/__init__.py": "", "course/x.py": "",
        "cell/run.py": "def f():\n    from tilelab.lab.course import x\n",
        "figures/svg.py": "from ..views import tabs\n",
        "views/tabs.py": "import tilelab.lab.report.options\n",
        "report/options.py": "from tilelab.lab import magic\n",
    })
    assert upward_imports(root) == [
        "tilelab.lab.cell.run (wing cell):2 imports tilelab.lab.course.x (wing course)",
        "tilelab.lab.figures.svg (wing figures):1 imports tilelab.lab.views.tabs (wing views)",
        "tilelab.lab.report.options (wing report):1 imports tilelab.lab.magic (wing magic)",
    ]


def test_the_check_finds_circles_within_a_wing_and_through_the_package(tmp_path):
    root = _tree(tmp_path, {
        "__init__.py": "def last():\n    from tilelab.lab.magic import last\n",
        "magic.py": "from tilelab.lab.figures import images\n",
        "figures/__init__.py": "",
        "figures/images.py": "def f():\n    from tilelab.lab import last\n",
        "figures/a.py": "from tilelab.lab.figures.b import y\n",
        "figures/b.py": "def g():\n    from tilelab.lab.figures import a\n",
    })
    assert import_circles(root) == [
        ["tilelab.lab", "tilelab.lab.figures.images", "tilelab.lab.magic"],
        ["tilelab.lab.figures.a", "tilelab.lab.figures.b"],
    ]
