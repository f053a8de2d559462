"""The %%tile rule for which functions become kernels, and the --no-run filter."""
from __future__ import annotations

import ast

import pytest

from tilelab import config
from tilelab.lab.cell.run import (cell_kernel_names, classify_functions, decorate_kernels,
                                  definitions_only)
from tilelab.lab.report.options import DEFAULT_VIEWS, OptionError, TileOptions, parse_show


def plan_of(src: str):
    return classify_functions(ast.parse(src))


def test_access_annotations_make_kernels():
    p = plan_of("def a(z: tl.Out, x: tl.In): pass\n"
                "def b(p: InOut): pass\n"
                "def c(r: t.Raw, n: int): pass\n"
                "def d(x, y): pass\n")
    assert p.kernels == ("a", "b", "c") and p.helpers == ("d",)
    assert "parameter 'z' is tl.Out" in p.reasons["a"]
    assert "no tl.In/Out/InOut/Raw parameter" in p.reasons["d"]


@pytest.mark.parametrize("launch, why", [
    ("k(z.partition(64), x)", "launched with a partition at line 3"),
    ("k(x, grid=(4,))", "launched with grid= at line 3"),
    ("f = k.launch_async(z.partition(8), x)", "uses .launch_async() at line 3"),
    ("art = k.compile(s.partition(8), s, arch='sm_90')", "uses .compile() at line 3"),
    ("tr = tl.interpret(k, z.partition(8))", "passed to tl.interpret at line 3"),
    ("for i in range(3):\n    k(out=z.partition(8))", "launched with a partition at line 4"),
    ("r = tl.bench(lambda: k(z.partition(8), x))", "launched with a partition at line 3"),
])
def test_launches_make_kernels(launch, why):
    p = plan_of(f"def k(z, x):\n    pass\n{launch}\n")
    assert p.kernels == ("k",) and p.reasons["k"] == why


def test_functions_called_from_kernels_stay_helpers():
    p = plan_of('''
def inner(t):
    return t
def outer(t: tl.In):           # annotated, but a kernel calls it: a helper
    return inner(t)
def k(z: tl.Out, x: tl.In):
    z.store(outer(tl.load_like(x, z)))
@tl.kernel
def k2(z: tl.Out, x: tl.In):
    z.store(inner(tl.load_like(x, z)))
''')
    assert p.kernels == ("k",)
    assert set(p.helpers) == {"inner", "outer"}
    assert p.decorated == ("k2",)
    assert p.reasons["outer"] == "called from kernel 'k' at line 7: a helper"
    assert "k: kernel (parameter 'z' is tl.Out)" in p.explain()


def test_decorated_and_async_and_nested_functions_are_left_alone():
    tree = ast.parse('''
@functools.cache
def cached(z: tl.Out): pass
async def coro(z: tl.Out): pass
def host():
    def nested(z: tl.Out): pass
    return nested
@ct.kernel
def raw(x): pass
''')
    p = classify_functions(tree)
    assert p.kernels == () and set(p.decorated) == {"cached", "raw"}
    assert cell_kernel_names(tree, p) == {"raw"}    # any *.kernel decorator counts
    tree = ast.parse("@tl.kernel(unsafe=True)\ndef k(x: tl.Raw): pass\n")
    assert cell_kernel_names(tree, classify_functions(tree)) == {"k"}


def test_decorator_keeps_the_def_line_and_runs_tl_kernel():
    src = "\n\ndef k(z, x):\n    z.store(x)\n"
    tree = decorate_kernels(ast.parse(src), ["k"], {"unsafe": True, "opt_level": 2})
    deco = tree.body[0].decorator_list[0]
    assert ast.unparse(deco) == "__import__('tilelab').kernel(unsafe=True, opt_level=2)"
    assert deco.lineno == tree.body[0].lineno == 3
    compile(tree, "<cell>", "exec")             # locations are complete


def test_no_run_keeps_definitions_and_skips_launches():
    tree = ast.parse('''import tilelab as tl
from x import y
def k(z: tl.Out): pass
class C: pass
s = tl.spec(8, "f32")
TILELAB_EXAMPLES = {"k": (s.partition(8),)}
z = tl.empty(8); k(z.partition(8))
out = k.launch_async(z.partition(8))
print("hello")
for i in range(2):
    pass
n: int = 3
''')
    kept, skipped = definitions_only(tree, {"k"})
    assert [type(s).__name__ for s in kept.body] == [
        "Import", "ImportFrom", "FunctionDef", "ClassDef", "Assign", "Assign", "Assign",
        "AnnAssign"]
    assert skipped == [7, 8, 9, 10]


def test_show_parsing():
    assert parse_show(None) == DEFAULT_VIEWS
    assert parse_show("timings,tileir") == ("tileir", "timings")
    assert "sass" in parse_show("all") and "ptx" in parse_show("+ptx")
    assert "roofline" not in parse_show("-roofline")
    assert parse_show("all,-sass")[-1] == "timings" and "sass" not in parse_show("all,-sass")
    with pytest.raises(OptionError, match="unknown view 'tile_ir'"):
        parse_show("tile_ir")


def test_options_collect_kernel_options_and_defaults(monkeypatch):
    with config.override(lab_view=config.DEFAULT):
        o = TileOptions.from_args(backend="cpu", no_check_bounds=True, num_ctas=2,
                                  opt_level=1, roofline="5090, H200 SXM", no_run=True)
        assert o.kernel_options == {"check_bounds": False, "num_ctas": 2, "opt_level": 1}
        assert o.roofline_gpus == ("rtx5090", "h200") and not o.run and o.view_mode == "auto"
        assert TileOptions.from_args(arch="9.0").arch == "sm_90"
    with config.override(lab_view="html"):
        assert TileOptions.from_args().view_mode == "html"
    # (the variable itself: a value it does not take is an option error where it is read)
    monkeypatch.setenv("TILELAB_LAB_VIEW", "fancy")
    with pytest.raises(OptionError, match="TILELAB_LAB_VIEW"):
        TileOptions.from_args()
