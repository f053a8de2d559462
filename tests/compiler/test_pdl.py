"""Programmatic dependent launch, compiler side: the lowering's grid-dependency prologue,
what tileiras makes of it per arch, and the launcher's test on the compiled code
(docs/safety.md, "Programmatic dependent launch")."""
from __future__ import annotations

import numpy as np
import pytest

import cuda.tile as ct
import tilelab as tl
from tilelab.compiler.lower import LoweringPlan, lower_kernel
from tilelab.compiler.safety import analyze_kernel
from tilelab.compiler.tileir import NON_MEMORY_OPS, waits_before_memory
from tilelab.runtime.launch.plan import _pdl_capable

pytest.importorskip("cuda.tile")


def simple_first(z: tl.Out, x: tl.In):
    z.store(tl.load_like(x, z) * 2)


def docstring_first(z: tl.Out, x: tl.In):
    """A docstring is a simple statement: the prologue goes before it."""
    z.store(tl.load_like(x, z) + 1)


def loop_first(z: tl.Out, x: tl.In):
    for _ in range(2):
        z.store(tl.load_like(x, z))


def _lowered(fn):
    return lower_kernel(analyze_kernel(fn), LoweringPlan("row_major", False, (("z", 1),)))


@pytest.mark.parametrize("fn", [simple_first, docstring_first])
def test_the_prologue_is_the_first_statement(fn):
    lk = _lowered(fn)
    body = lk.source.splitlines()[1].strip()
    assert body.startswith("__tl_dev.grid_dependency_prologue(); ")
    assert lk.pdl is True


def test_a_compound_first_statement_gets_no_prologue():
    lk = _lowered(loop_first)
    assert "grid_dependency_prologue" not in lk.source and lk.pdl is False


def test_the_prologue_keeps_user_locations():
    lk = _lowered(simple_first)
    line = lk.first_line + 1
    col = lk.text.splitlines()[line - 1].index("__tl_ct.store")
    loc = lk.source_map.to_user(line, col)
    assert loc.line == simple_first.__code__.co_firstlineno + 1


@tl.kernel
def scale2(z: tl.Out, x: tl.In):
    """Doubles x."""
    z.store(tl.load_like(x, z) * 2)


@tl.kernel
def scale2_loop(z: tl.Out, x: tl.In):
    for _ in range(1):
        z.store(tl.load_like(x, z) * 2)


def _args():
    x = tl.tensor(np.arange(512, dtype=np.float32), device="cpu")
    return tl.empty(512, device="cpu").partition(128), x


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_100", "sm_120"])
@pytest.mark.toolchain
def test_every_arch_compiles_the_prologue_and_the_validator_accepts_it(arch):
    art = scale2.compile(*_args(), arch=arch)
    assert "gdc_wait_tko" in art.tileir and "gdc_launch_dependents_tko" in art.tileir
    assert art.waits_for_previous_grid
    assert _pdl_capable(art) is (arch != "sm_80")


@pytest.mark.toolchain
def test_on_sm90_the_wait_comes_before_the_first_global_load():
    art = scale2.compile(*_args(), arch="sm_90")
    if art.sass is None:
        pytest.skip("no SASS disassembler")
    ops = [ln.split()[0] for ln in art.sass.splitlines() if ln.strip()
           and ln.split()[0].isupper()]
    names = " ".join(art.sass.split())
    assert "ACQBULK" in names                      # griddepcontrol.wait
    wait = names.index("ACQBULK")
    loads = [names.find(op) for op in ("LDG", "UTMALDG", "LDGSTS") if op in names]
    assert loads and wait < min(loads), ops


@pytest.mark.toolchain
def test_a_kernel_without_the_prologue_is_never_launched_early():
    art = scale2_loop.compile(*_args(), arch="sm_90")
    assert "gdc_wait_tko" not in art.tileir
    assert not art.waits_for_previous_grid and not _pdl_capable(art)


def _entry(*lines: str) -> str:
    return "entry @k(%arg0: tile<i32>) {\n" + "\n".join("  " + ln for ln in lines) + \
        "\n  return\n}"


_WAIT = "%1 = gdc_wait_tko token = %0 -> token"
_LOAD = "%t, %u = load_view_tko weak %v[%arg0] token = %0 : a -> b"
_STORE = "%s = store_view_tko weak %t, %v[%arg0] token = %0 : a -> token"


def test_waits_before_memory_reads_program_order():
    assert waits_before_memory(_entry(_WAIT, _LOAD))
    assert not waits_before_memory(_entry(_LOAD, _WAIT))
    assert not waits_before_memory(_entry(_LOAD))
    assert not waits_before_memory(None)
    assert waits_before_memory(_entry(_WAIT, _STORE))
    assert not waits_before_memory(_entry(_STORE, _WAIT))


def test_a_wait_inside_a_branch_orders_nothing():
    # the wait may not run at all: the store in the other branch would run early
    text = _entry("if %c {", "  " + _WAIT, "} else {", "  " + _STORE, "}", _LOAD)
    assert not waits_before_memory(text)


@tl.kernel(unsafe=True)   # a safe kernel may not call the grid-dependency ops itself
def wait_in_one_branch(z: tl.Out, x: tl.In, c: int):
    if c > 0:
        ct.grid_dependency_control_wait()
    else:
        z.store(tl.load_like(x, z))


@pytest.mark.toolchain
def test_a_kernel_waiting_in_one_branch_only_is_never_launched_early():
    art = wait_in_one_branch.compile(*_args(), 1, arch="sm_90")
    assert "gdc_wait_tko" in art.tileir
    assert not art.waits_for_previous_grid and not _pdl_capable(art)


def test_the_grid_dependency_ops_are_classified_as_touching_no_memory():
    assert {"gdc_wait_tko", "gdc_launch_dependents_tko"} <= NON_MEMORY_OPS


def test_no_edges_make_no_programmatic_edges():
    pytest.importorskip("cuda.bindings")
    from tilelab.runtime.graph_pdl import make_programmatic

    assert make_programmatic(None, []) == "no edge into a kernel that waits for its " \
                                          "predecessor"


def test_a_persistent_kernel_gets_no_prologue():
    lk = lower_kernel(analyze_kernel(simple_first),
                      LoweringPlan("persistent", False, (("z", 1),)))
    assert "grid_dependency_prologue" not in lk.source and lk.pdl is False
