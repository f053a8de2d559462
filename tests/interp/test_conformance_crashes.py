"""Kernels cuTile compiles that the interpreter used to crash on or refuse (#41 cause 5):
atomics on a 0-d array, a failing ``ct.assert_``, torch tensors that require grad; and an
exception raised inside the interpreter itself, which is reported as the interpreter's
failure, never as cuTile refusing the kernel."""
from __future__ import annotations

import io

import numpy as np
import pytest

import cuda.tile as ct
from tilelab.errors import CompileError, LaunchError
from tilelab.interp import interpret
from tilelab.interp.ops import atomics


@ct.kernel
def spinning_lock(x, lock):
    while ct.atomic_cas(lock, (), 0, 1, memory_order=ct.MemoryOrder.ACQUIRE) == 1:
        pass
    v = ct.gather(x, ())
    v += 1
    ct.scatter(x, (), v)
    ct.atomic_xchg(lock, (), 0, memory_order=ct.MemoryOrder.RELEASE)


@ct.kernel
def count_blocks(counter, seen):
    old = ct.atomic_add(counter, (), 1)
    ct.scatter(seen, ct.bid(0), old)


def test_atomic_cas_and_xchg_on_a_0d_array_are_a_spin_lock():
    x = np.array(3.25, np.float32)
    lock = np.array(0, np.int32)
    trace = interpret(spinning_lock, x, lock, grid=(16,))
    assert float(x) == 3.25 + 16 and int(lock) == 0
    assert not trace.has_races   # each block's update is ordered by the lock hand-over


def test_atomic_add_on_a_0d_array_returns_each_blocks_old_value():
    counter = np.array(0, np.int64)
    seen = np.full(8, -1, np.int64)
    interpret(count_blocks, counter, seen, grid=(8,), order="shuffled", seed=3)
    assert int(counter) == 8
    assert sorted(seen.tolist()) == list(range(8))


@ct.kernel
def asserting(cond, TILE: ct.Constant[int]):
    ct.assert_(ct.load(cond, (ct.bid(0),), (TILE,)), "assert failed")


def test_a_failing_assert_prints_like_the_gpu_and_fails_the_launch():
    cond = np.ones(8, np.bool_)
    cond[5] = False
    out = io.StringIO()
    with pytest.raises(LaunchError, match=r"assertion failed: assert failed \(first failing "
                                          r"element \(1,\)\) \(block \(1, 0, 0\)\)"):
        interpret(asserting, cond, 4, grid=(2,), stdout=out)
    assert out.getvalue() == ("[block (1, 0, 0)] assertion failed: assert failed (first "
                              "failing element (1,))\n")


def test_a_passing_assert_prints_nothing():
    out = io.StringIO()
    interpret(asserting, np.ones(8, np.bool_), 4, grid=(2,), stdout=out)
    assert out.getvalue() == ""


@ct.kernel
def double(x, y):
    ct.store(y, (0,), ct.load(x, (0,), (4,)) * 2)


def test_torch_tensors_that_require_grad_are_read_and_written_in_place():
    torch = pytest.importorskip("torch")
    x = torch.arange(4, dtype=torch.float32, requires_grad=True)
    y = torch.zeros(4, requires_grad=True)
    interpret(double, x, y, grid=(1,))
    assert y.detach().tolist() == [0.0, 2.0, 4.0, 6.0]   # the kernel wrote y's memory
    assert x.requires_grad and y.requires_grad


def test_an_exception_inside_the_interpreter_is_its_failure_not_a_refusal(monkeypatch):
    # numpy raising inside an op (here: a broken combine step of atomic_add)
    def broken_combine(*args):
        return np.arange(3).reshape(2)

    monkeypatch.setattr(atomics, "_combine", broken_combine)
    with pytest.raises(LaunchError) as info:
        interpret(count_blocks, np.array(0, np.int64), np.zeros(1, np.int64), grid=(1,))
    e = info.value
    assert not isinstance(e, CompileError) and not isinstance(e, ct.TileError)
    assert e.message.startswith("the CPU interpreter failed in <lambda>() while running "
                                "this line (ValueError: cannot reshape array")
    assert "not a refusal of the kernel" in e.message
    assert e.location.line == count_blocks._pyfunc.__code__.co_firstlineno + 2
    assert isinstance(e.__cause__, ValueError)


@ct.kernel
def python_error(x):
    ct.store(x, (0,), ct.load(x, (0,), (4,)) + len(x.shape[0]))


def test_a_python_error_in_the_kernels_own_code_stays_a_compile_error():
    with pytest.raises(CompileError, match=r"TypeError: object of type 'Tile' has no len"):
        interpret(python_error, np.zeros(4, np.float32), grid=(1,))
