"""The layer graph of the package: each layer imports only layers below it.

Every import in every module of tilelab/ counts, the lazy ones inside functions too
(``import`` and ``from ... import`` statements, relative ones resolved, and
``importlib.import_module("tilelab....")`` calls). From the bottom:

- base: ``errors``, ``config``, ``dlpack_abi``, ``grid``, ``limits`` (leaf modules every
  layer may use)
- ``interp`` (the runtime's CPU backend) and ``compiler`` (capture, safety, lowering,
  export, cache): one level, independent of each other (compiling needs no runtime,
  interpreting needs no compiler)
- ``runtime`` (tensors, partitions, ledger, launches, on the GPU or through interp)
- ``perf`` and the public API ``tilelab`` (``import tilelab as tl``: it re-exports
  compiler, runtime and perf names, so perf's own kernels may be written with it)
- ``kernels`` (the library of safe kernels), then ``models`` (built from kernels)
- ``lab`` (the ``%%tile`` magic and its views)
- ``demo``, then ``cli`` and ``__main__`` at the very top.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tilelab"

#: levels from the bottom; each level holds groups, and a group is one layer (its
#: members may import each other); groups of one level may not import each other
LEVELS: list[list[set[str]]] = [
    [{"errors", "config", "dlpack_abi", "grid", "limits"}],
    [{"interp"}, {"compiler"}],
    [{"runtime"}],
    [{"perf", "tilelab"}],
    [{"kernels"}],
    [{"models"}],
    [{"lab"}],
    [{"demo"}],
    [{"cli", "__main__"}],
]

#: the upward imports allowed, each with why: (importing module, imported module)
EXCEPTIONS = {
    # IPython finds %load_ext's hook on the package itself, so the public API module
    # defines load_ipython_extension, which imports the lab only when it is called
    ("tilelab", "tilelab.lab"): "IPython's extension hook must live on the package",
    # measure_ceilings times the library's bf16 GEMM (the figure it reports is that
    # kernel's rate); imported only when a GPU ceiling is measured
    ("tilelab.perf.ceilings", "tilelab.kernels.examples"):
        "the compute ceiling is the library GEMM's measured rate",
}


def _rank(layer: str) -> tuple[int, int]:
    for level, groups in enumerate(LEVELS):
        for g, group in enumerate(groups):
            if layer in group:
                return level, g
    raise AssertionError(f"tilelab.{layer} is in no layer of tests/test_layers.py: add it "
                         "to LEVELS where docs/architecture.md puts it")


def _layer(module: str) -> str | None:
    """The layer of a tilelab module name (None outside tilelab)."""
    parts = module.split(".")
    if parts[0] != "tilelab":
        return None
    return "tilelab" if len(parts) == 1 else parts[1]


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(rel[:-1] if rel[-1] == "__init__" else rel)


def _is_module(name: str) -> bool:
    base = ROOT.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every tilelab module ``path`` imports, wherever in the file."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            # "from tilelab import config" imports the module tilelab.config
            subs = [f"{module}.{a.name}" for a in node.names if _is_module(
                f"{module}.{a.name}")]
            plain = len(subs) < len(node.names)
            found += [(node.lineno, m) for m in subs + ([module] if plain else [])]
        elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith(
                "import_module") and node.args and isinstance(node.args[0], ast.Constant):
            found.append((node.lineno, str(node.args[0].value)))
    return [(line, m) for line, m in found if _layer(m) is not None]


def upward_imports() -> list[str]:
    """Every import in tilelab/ of a layer that is not below the importer's."""
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        src = _module_name(path)
        src_rank = _rank(_layer(src))
        for line, dst in imports_of(path):
            dst_rank = _rank(_layer(dst))
            same_group = dst_rank == src_rank
            if dst_rank[0] < src_rank[0] or same_group or (src, dst) in EXCEPTIONS:
                continue
            bad.append(f"{path.relative_to(ROOT)}:{line}: {src} (layer {_layer(src)}) "
                       f"imports {dst} (layer {_layer(dst)})")
    return bad


def test_every_import_goes_down_the_layers():
    bad = upward_imports()
    assert not bad, "imports against the layer graph (see tests/test_layers.py):\n" + \
        "\n".join(bad)


def test_every_package_has_a_layer():
    for path in PACKAGE.iterdir():
        if path.name == "__init__.py":
            continue
        if path.suffix == ".py" or (path / "__init__.py").is_file():
            _rank(path.stem if path.suffix == ".py" else path.name)


def test_exceptions_are_still_needed():
    """An exception nobody needs any more is removed, so that it cannot hide a new one."""
    used = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        src = _module_name(path)
        used |= {(src, dst) for _, dst in imports_of(path) if (src, dst) in EXCEPTIONS}
    assert used == set(EXCEPTIONS), f"unused exceptions: {set(EXCEPTIONS) - used}"


def _check(tmp_path: Path, files: dict[str, str], monkeypatch) -> list[str]:
    """upward_imports() over a made-up package in tmp_path."""
    for name, text in files.items():
        p = tmp_path / "tilelab" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    monkeypatch.setitem(globals(), "PACKAGE", tmp_path / "tilelab")
    return upward_imports()


def test_the_check_finds_lazy_relative_and_dynamic_upward_imports(tmp_path, monkeypatch):
    bad = _check(tmp_path, {
        "__init__.py": "",
        "errors.py": "",
        "runtime/__init__.py": "",
        "runtime/tensor.py": "def f():\n    from tilelab.lab import views\n",
        "runtime/launch/__init__.py": "from ..device import x\nfrom ...kernels import k\n",
        "runtime/device.py": "import importlib\nimportlib.import_module('tilelab.perf')\n",
        "compiler/__init__.py": "from tilelab import errors\nimport tilelab.interp\n",
        "interp/__init__.py": "",
        "kernels/__init__.py": "import tilelab as tl\nfrom tilelab.runtime import tensor\n",
        "lab/__init__.py": "", "lab/views.py": "", "perf/__init__.py": "",
    }, monkeypatch)
    assert bad == [
        "tilelab/compiler/__init__.py:2: tilelab.compiler (layer compiler) imports "
        "tilelab.interp (layer interp)",
        "tilelab/runtime/device.py:2: tilelab.runtime.device (layer runtime) imports "
        "tilelab.perf (layer perf)",
        "tilelab/runtime/launch/__init__.py:2: tilelab.runtime.launch (layer runtime) "
        "imports tilelab.kernels (layer kernels)",
        "tilelab/runtime/tensor.py:2: tilelab.runtime.tensor (layer runtime) imports "
        "tilelab.lab.views (layer lab)",
    ]
