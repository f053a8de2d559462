"""Calls cuTile does not compile are refused from the source (issue #41, cause 2).

cuTile compiles a call only to what its compiler implements; the interpreter, which
runs kernel bodies as Python, refuses the others before the function runs
(:mod:`tilelab.interp.frontend.call_rules`), with cuTile 1.7's words and class
(``UnsupportedCallError``), also on a path no block takes. Each refusal below is
cuTile 1.7's for the same kernel compiled for sm_90.
"""
from __future__ import annotations

import dataclasses
import enum
import inspect

import numpy as np
import pytest

import cuda.tile as ct
from tilelab.errors import CompileError
from tilelab.interp import interpret
from tilelab.interp._cutile import exception_classes


class Foo:
    pass


@dataclasses.dataclass(frozen=True)
class Pair:
    a: int
    b: int


class Color(enum.IntEnum):
    RED = 1
    BLUE = 2


def _line(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def _refusal(kernel, *args) -> CompileError:
    with pytest.raises(CompileError) as info:
        interpret(kernel, *args, grid=(1,))
    assert isinstance(info.value, exception_classes()["UnsupportedCallError"])
    return info.value


def test_a_builtin_cutile_does_not_implement_is_refused_on_a_path_not_taken():
    @ct.kernel
    def k(x):
        if ct.bid(0) > 5:
            eval("2 + 2")
        ct.scatter(x, 0, 1)

    x = np.zeros(1, np.int32)
    error = _refusal(k, x)
    assert error.message == "eval() is not supported in device code"
    assert error.location.line == _line(k._pyfunc, 'eval("2 + 2")')
    assert x.tolist() == [0]


@pytest.mark.parametrize("call, name", [("round(2.5)", "round"), ("pow(2, 3)", "pow"),
                                        ("sum((1, 2))", "sum"),
                                        ("1 if isinstance(3, int) else 2", "isinstance")])
def test_other_builtins_without_an_implementation(call, name):
    # (the kernel is written to a module file: the check reads its source)
    import importlib.util
    import sys
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"kernel_{name}.py"
        path.write_text(f"import cuda.tile as ct\n\ndef k(x):\n    ct.scatter(x, 0, {call})\n")
        spec = importlib.util.spec_from_file_location(f"kernel_{name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        try:
            error = _refusal(module.k, np.zeros(1, np.int32))
        finally:
            sys.modules.pop(f"kernel_{name}", None)
    assert error.message == f"{name}() is not supported in device code"


def test_instances_of_plain_and_builtin_classes_are_refused():
    @ct.kernel
    def plain():
        Foo()

    @ct.kernel
    def builtin(x):
        for i, v in enumerate((1, 2)):
            ct.scatter(x, i, v)

    assert _refusal(plain).message == \
        'Creating instances of type "Foo" is not supported in device code'
    assert _refusal(builtin, np.zeros(2, np.int32)).message == \
        'Creating instances of type "enumerate" is not supported in device code'


def test_what_cutile_compiles_runs():
    @ct.kernel
    def k(x):
        t = (3, 1)
        p = Pair(1, 2)                                   # a frozen dataclass
        c = Color(2)                                     # an enum from a constant
        n = len(t) + abs(-1) + min(1, 2) + int(2.0)      # builtins cuTile implements
        n += ct.static_eval(sum(sorted(t)))              # plain Python at compile time
        ct.static_assert(all((True, True)))
        for i, v in ct.static_iter(enumerate(t)):        # static_iter's iterable too
            n += v
        ct.scatter(x, 0, n + p.b + c.value)

    x = np.zeros(1, np.int32)
    interpret(k, x, grid=(1,))
    assert x.tolist() == [2 + 1 + 1 + 2 + 4 + 4 + 2 + 2]


def test_an_enum_member_from_a_run_time_value_is_refused():
    @ct.kernel
    def k(x, out):
        bid = ct.bid(0)
        _ = Color(bid)
        ct.scatter(out, (), 0)

    with pytest.raises(CompileError) as info:
        interpret(k, np.zeros(1, np.float32), np.ones((), np.int32), grid=(1,))
    assert info.value.message == "Enum constructor argument must be a constant"
    assert isinstance(info.value, ct.TileTypeError)
    assert info.value.location.line == _line(k._pyfunc, "_ = Color(bid)")
