"""``tl.wait_for_previous_kernel()``: loads above the wait, what the lowering and the Tile
IR make of them, and when a graph may start such a kernel early (docs/safety.md,
"Programmatic dependent launch")."""
from __future__ import annotations

from types import SimpleNamespace as NS

import numpy as np
import pytest

import cuda.tile as ct
import tilelab as tl
from tilelab.compiler.tileir import reads_before_wait
from tilelab.runtime.graph import may_start_early
from tilelab.runtime.launch.plan import _early_reads


@tl.kernel
def add_early(z: tl.Out, w: tl.In, x: tl.In):
    wt = tl.load_like(w, z)
    tl.wait_for_previous_kernel()
    z.store(tl.load_like(x, z) + wt)


@tl.kernel(unsafe=True)
def raw_write_early(h: tl.Raw, x: tl.In):
    for _ in range(1):
        ct.store(h, index=(0,), tile=ct.load(x, index=(0,), shape=(16,)))
    ct.grid_dependency_control_wait()


@tl.kernel
def gather_early(z: tl.Out, x: tl.In):
    t = ct.gather(x, ct.arange(128, dtype=ct.int32))   # a read, but not a tile's
    tl.wait_for_previous_kernel()
    z.store(t)


def _vec(n=512, fill=None):
    a = np.arange(n, dtype=np.float32) if fill is None else np.full(n, fill, np.float32)
    return tl.tensor(a, device="cpu")


def _early(kernel, args):
    """(artifacts for sm_90, the parameters read before the wait)."""
    art = kernel.compile(*args, arch="sm_90")
    d = kernel.definition
    norm, _ = kernel._launcher.prepare(args)
    spec = d.specialize(list(norm))
    return art, reads_before_wait(art.tileir, d.lowered(spec.plan), spec)


def test_the_wait_goes_where_the_kernel_writes_it():
    lk = add_early.definition.lowered(add_early.definition.specialize(
        list(add_early._launcher.prepare((_vec().partition(128), _vec(), _vec()))[0])).plan)
    lines = [ln.strip() for ln in lk.source.splitlines() if ln.strip()]
    assert lines[1].startswith("wt = __tl_ct.load(w")            # no prologue first
    assert lines[2] == "__tl_dev.grid_dependency_prologue()"
    assert lk.pdl is True


@pytest.mark.toolchain
def test_the_tile_ir_shows_the_early_read_and_nothing_else():
    art, early = _early(add_early, (_vec().partition(128), _vec(), _vec()))
    assert early == frozenset({"w"})
    assert not art.waits_for_previous_grid                    # not eligible on a stream
    ptx = art.ptx
    assert 0 <= ptx.find("ld.global") < ptx.find("griddepcontrol.wait")


@pytest.mark.toolchain
def test_a_write_before_the_wait_makes_a_kernel_ineligible():
    h = _vec()
    _, early = _early(raw_write_early, (h, _vec()))
    assert early is None


@pytest.mark.toolchain
def test_a_gather_before_the_wait_makes_a_kernel_ineligible():
    _, early = _early(gather_early, (_vec(128).partition(128), _vec()))
    assert early is None


@pytest.mark.toolchain
def test_the_launch_plan_records_the_early_reads():
    d = add_early.definition
    args = (_vec().partition(128), _vec(), _vec())
    art = add_early.compile(*args, arch="sm_90")
    spec = d.specialize(list(add_early._launcher.prepare(args)[0]))
    assert _early_reads(d, spec, art) == frozenset({"w"})
    art80 = add_early.compile(*args, arch="sm_80")
    assert _early_reads(d, spec, art80) is None                # no PDL before sm_90


def test_the_interpreter_runs_the_kernel_as_written():
    z, w, x = _vec(fill=0), _vec(fill=2), _vec()
    add_early(z.partition(128), w, x)
    assert np.array_equal(z.numpy(), np.arange(512, dtype=np.float32) + 2)


def _entry(pdl=False, early=None, claims=(), trigger_after_wait=True):
    return NS(plan=NS(pdl=pdl, early_reads=early, triggers_after_wait=trigger_after_wait),
              claims=list(claims))


@pytest.mark.parametrize("before, entry, expected", [
    # the predecessor writes what the kernel reads before its wait
    (_entry(claims=[(0, 0, 64, True, "z")]),
     _entry(early=frozenset({"w"}), claims=[(0, 32, 96, False, "w")]), False),
    # ... only something else
    (_entry(claims=[(0, 0, 64, True, "z")]),
     _entry(early=frozenset({"w"}), claims=[(0, 64, 96, False, "w"),
                                            (0, 0, 64, False, "x")]), True),
    # ... in another memory space
    (_entry(claims=[(1, 0, 64, True, "z")]),
     _entry(early=frozenset({"w"}), claims=[(0, 0, 64, False, "w")]), True),
    # it only reads the same memory
    (_entry(claims=[(0, 0, 64, False, "z")]),
     _entry(early=frozenset({"w"}), claims=[(0, 0, 64, False, "w")]), True),
    # a kernel that waits first, and one that neither waits first nor reads early
    (_entry(claims=[(0, 0, 64, True, "z")]), _entry(pdl=True), True),
    (_entry(claims=[]), _entry(), False),
])
def test_a_graph_starts_a_kernel_early_only_when_its_early_reads_are_not_written(
        before, entry, expected):
    assert may_start_early(before, entry) is expected


def _library_launches(prefetch: int = 1):
    from tilelab.kernels.decode.step import lm_head_partial_kernel
    from tilelab.kernels.decode.gemv import GemvConfig, plan_gemv_silu_mul, plan_row_gemv

    w = tl.randn(256, 1024, dtype="bf16", device="cpu", seed=0)
    w2 = tl.randn(2, 256, 1024, dtype="bf16", device="cpu", seed=1)
    x = tl.randn(1024, dtype="bf16", device="cpu", seed=2)
    r = tl.randn(256, dtype="bf16", device="cpu", seed=3)
    cfg = GemvConfig(bn=16, bk=256, prefetch=prefetch)
    plans = [plan_row_gemv(w, x, config=cfg),
             plan_row_gemv(w, x, x2=x, norm_weight=x, residual=r, config=cfg),
             plan_gemv_silu_mul(w2, x, config=cfg),
             plan_gemv_silu_mul(w2, x, x2=x, norm_weight=x, config=cfg)]
    out = [launch for p in plans for launch in p.launches]
    blocks = 256 // 16
    head = (tl.empty(256, "float32", device="cpu").partition(16),
            tl.empty(blocks, "float32", device="cpu").partition(1),
            tl.empty(blocks, "int32", device="cpu").partition(1), w, x,
            tl.ones(1, "float32", device="cpu"), tl.zeros(1, "int32", device="cpu"),
            tl.zeros(1, "int32", device="cpu"), 512, 0, 1)
    return out + [(lm_head_partial_kernel, head)]


@pytest.mark.parametrize("i, prefetch", [(i, 1) for i in range(5)] +
                         [(i, 2) for i in range(4)])     # (the lm_head has no depth)
@pytest.mark.toolchain
def test_the_decode_gemvs_read_only_their_weights_before_the_wait(i, prefetch):
    """One or two weight tiles ahead (GemvConfig.prefetch): the constant branch
    folds away, and all that precedes the wait is still bounds-checked weight loads."""
    kernel, args = _library_launches(prefetch)[i]
    _, early = _early(kernel, args)
    assert early == frozenset({"w"}), kernel.name


def test_after_a_kernel_started_early_that_triggers_before_its_wait_none_starts_early():
    # the kernel before it may still be running: early reads could race with it
    before = _entry(claims=[(0, 0, 64, True, "z")], trigger_after_wait=False)
    entry = _entry(early=frozenset({"w"}), claims=[(0, 64, 96, False, "w")])
    assert may_start_early(before, entry, before_early=False) is True
    assert may_start_early(before, entry, before_early=True) is False
    assert may_start_early(before, _entry(pdl=True), before_early=True) is True


@tl.kernel(unsafe=True)   # a safe kernel may not call the grid-dependency ops itself
def trigger_first(z: tl.Out, x: tl.In):
    for _ in range(1):
        ct.grid_dependency_control_launch_dependents()
    ct.grid_dependency_control_wait()
    z.store(tl.load_like(x, z))


@pytest.mark.toolchain
def test_the_compiled_code_tells_whether_a_kernel_triggers_after_its_wait():
    args = (_vec().partition(128), _vec())
    assert add_early.compile(_vec().partition(128), _vec(), _vec(),
                             arch="sm_90").triggers_after_wait
    art = trigger_first.compile(*args, arch="sm_90")
    assert art.waits_for_previous_grid and not art.triggers_after_wait
