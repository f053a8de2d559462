"""The rebuilt kernel function is cached per function object and never runs stale code."""
from __future__ import annotations

import time
import types

import numpy as np
import pytest

import cuda.tile as ct
from tilelab.interp import interpret
from tilelab.interp import rebuild

from .kernels_pkg import helpers


def _module(source: str) -> types.ModuleType:
    """A user module made from source (its globals can be rebound like a notebook's)."""
    mod = types.ModuleType("user_kernels_for_cache_test")
    exec(compile(source, "<user-kernels>", "exec"), mod.__dict__)
    return mod


SOURCE = '''
import cuda.tile as ct

FACTOR = 2.0

def helper(t):
    return t * FACTOR

@ct.kernel
def k(x):
    ct.store(x, (0,), helper(ct.load(x, (0,), (4,))))
'''


def _run(kernel) -> list[float]:
    x = np.ones(4, np.float32)
    interpret(kernel, x, grid=(1,))
    return x.tolist()


def test_a_kernel_is_rebuilt_once_and_reused():
    mod = _module(SOURCE)
    assert _run(mod.k) == [2.0] * 4
    first = rebuild._CACHE[mod.k._pyfunc]
    assert _run(mod.k) == [2.0] * 4
    assert rebuild._CACHE[mod.k._pyfunc] is first


def test_rebound_globals_and_redefined_helpers_are_seen():
    mod = _module(SOURCE)
    assert _run(mod.k) == [2.0] * 4
    mod.FACTOR = 3.0                              # a rebound global the helper reads
    assert _run(mod.k) == [3.0] * 4
    exec("def helper(t):\n    return t + FACTOR\n", mod.__dict__)     # a redefined helper
    assert _run(mod.k) == [4.0] * 4
    del mod.helper                                # a helper that disappears
    with pytest.raises(NameError, match="helper"):
        _run(mod.k)
    exec("def helper(t):\n    return t - 1.0\n", mod.__dict__)       # and comes back
    assert _run(mod.k) == [0.0] * 4


def test_replaced_code_defaults_and_closure_cells_are_seen():
    scale = 2.0

    @ct.kernel
    def k(x):
        ct.store(x, (0,), ct.load(x, (0,), (4,)) * scale)

    assert _run(k) == [2.0] * 4
    scale = 5.0  # noqa: F841 - rebinds the closure cell the kernel reads
    assert _run(k) == [5.0] * 4

    def add(t, amount=1.0):
        return t + amount

    @ct.kernel
    def k2(x):
        ct.store(x, (0,), add(ct.load(x, (0,), (4,))))

    assert _run(k2) == [2.0] * 4
    add.__defaults__ = (10.0,)
    assert _run(k2) == [11.0] * 4
    add.__code__ = (lambda t, amount=1.0: t * amount).__code__
    assert _run(k2) == [10.0] * 4


def test_module_attributes_reached_through_a_user_module_are_checked(monkeypatch):
    @ct.kernel
    def k(x):
        ct.store(x, (0,), helpers.scale(ct.load(x, (0,), (4,)), 3.0))

    assert _run(k) == [3.0] * 4
    monkeypatch.setattr(helpers, "scale", lambda t, f: t + f)
    assert _run(k) == [4.0] * 4


def test_the_cache_is_bounded():
    kernels = []
    for i in range(rebuild.CACHE_SIZE + 5):
        mod = _module(SOURCE.replace("FACTOR = 2.0", f"FACTOR = {float(i)}"))
        kernels.append(mod.k)
        assert _run(mod.k) == [float(i)] * 4
    assert len(rebuild._CACHE) <= rebuild.CACHE_SIZE
    assert kernels[0]._pyfunc not in rebuild._CACHE       # least recently used went first
    assert _run(kernels[0]) == [0.0] * 4                   # and is simply rebuilt


def test_cached_launches_are_cheaper_than_rebuilding():
    mod = _module(SOURCE)
    x = np.ones(4, np.float32)
    interpret(mod.k, x, grid=(1,), trace=False)

    def best(fn, n=30):
        out = []
        for _ in range(n):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
        return min(out)

    cached = best(lambda: interpret(mod.k, x, grid=(1,), trace=False))

    def cold():
        rebuild.clear_cache()
        interpret(mod.k, x, grid=(1,), trace=False)

    assert cached < best(cold)
