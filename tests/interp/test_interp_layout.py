"""tilelab.interp's layout holds: the values at the bottom, the ops above them, and each
method of a value attached by the op module that defines the op (docs/interp.md,
"Modules" and "Adding an op")."""
from __future__ import annotations

import types

import pytest

from test_layers import PACKAGE, imports_of
from tilelab.interp import ops
from tilelab.interp.values import methods
from tilelab.interp.values.arrays import Array, RawArrayMemory, TiledView
from tilelab.interp.values.dtypes import LooseFloat, LooseInt, TileDType
from tilelab.interp.values.tile import Tile

INTERP = PACKAGE / "interp"

#: what the values may import of the interpreter: each other and the modules beneath them
BENEATH_VALUES = ("tilelab.interp.values", "tilelab.interp.context", "tilelab.interp._cutile",
                  "tilelab.interp.body_rules", "tilelab.interp.races")


def _interp_imports(folder: str) -> dict[str, list[str]]:
    found = {}
    for path in sorted((INTERP / folder).glob("*.py")):
        found[path.name] = [m for _line, m in imports_of(path)
                            if m.startswith("tilelab.interp")]
    return found


def test_the_values_import_no_op():
    wrong = {name: [m for m in mods if not m.startswith(BENEATH_VALUES)]
             for name, mods in _interp_imports("values").items()}
    assert not {k: v for k, v in wrong.items() if v}, wrong


def test_the_ops_import_only_values_ops_and_what_lies_beneath():
    allowed = BENEATH_VALUES + ("tilelab.interp.ops",)
    wrong = {name: [m for m in mods if not m.startswith(allowed)]
             for name, mods in _interp_imports("ops").items()}
    assert not {k: v for k, v in wrong.items() if v}, wrong


def test_the_ops_package_imports_every_op_module():
    modules = {p.stem for p in (INTERP / "ops").glob("*.py") if p.stem != "__init__"}
    assert set(ops.__all__) == modules
    assert all(isinstance(getattr(ops, m), types.ModuleType) for m in modules)


@pytest.mark.parametrize("cls,name,module", [
    (Tile, "reshape", "shapes"), (Tile, "item", "shapes"), (Tile, "__getitem__", "shapes"),
    (Tile, "astype", "casts"), (Tile, "__neg__", "unary"), (Tile, "__abs__", "unary"),
    (Tile, "__add__", "elementwise"), (Tile, "__radd__", "elementwise"),
    (Tile, "__eq__", "elementwise"), (Tile, "__matmul__", "matmul"),
    (Tile, "__rmatmul__", "matmul"), (TileDType, "__call__", "casts"),
    (LooseInt, "astype", "casts"), (LooseFloat, "astype", "casts"),
    (Array, "slice", "memory"), (Array, "tiled_view", "memory"),
    (TiledView, "load", "memory"), (TiledView, "num_tiles", "memory"),
    (TiledView, "atomic_store_add", "atomics"), (RawArrayMemory, "load_offset", "raw"),
    (RawArrayMemory, "atomic_cas_offset", "raw"),
])
def test_each_method_is_attached_by_the_module_of_its_op(cls, name, module):
    attached = cls.__dict__[name]
    assert attached.__module__ == f"tilelab.interp.ops.{module}"
    assert attached.__qualname__ == f"{cls.__qualname__}.{name}"


def test_the_reflections_of_comparisons_are_pythons():
    # (Python reflects a < b into b > a; Tile defines no __rlt__)
    assert "__rlt__" not in Tile.__dict__ and "__req__" not in Tile.__dict__


def test_a_method_is_attached_by_one_module_only():
    class Box:
        def own(self):
            return 1

    def twice(self):
        return 2

    twice.__module__ = "somewhere.else"
    methods.method(Box, "twice")(twice)
    assert Box().twice() == 2 and Box.twice.__qualname__ == f"{Box.__qualname__}.twice"
    methods.method(Box, "twice")(twice)            # the same module again: replaced

    def other(self):
        return 3

    other.__module__ = "another.module"
    with pytest.raises(TypeError, match=r"Box\.twice is already defined \(by somewhere\.else"
                                        r"\); another\.module cannot attach it too"):
        methods.method(Box, "twice")(other)
    with pytest.raises(TypeError, match=r"Box\.own is already defined"):
        methods.method(Box, "own")(other)
