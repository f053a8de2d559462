"""cuTile's limit on nested helper calls (issue #41): 999 nested calls compile, the
1000th is refused with cuTile's TileRecursionError at the call, and Python's own
recursion limit never ends a kernel cuTile accepts."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import cuda.tile as ct
from tilelab.errors import CompileError
from tilelab.interp import interpret


def _nested(t, n):
    if n > 0:
        out = _nested(t, n - 1) + 1
    else:
        out = t
    return out


@ct.kernel
def _kernel(x, y, N: ct.Constant[int]):
    ct.scatter(y, (), _nested(ct.gather(x, ()), N))


def _run(n: int) -> np.ndarray:
    x = np.array(100.0, np.float32)
    y = np.zeros((), np.float32)
    interpret(_kernel, x, y, n, grid=(1,), trace=False)
    return y


def test_998_nested_helper_calls_run_past_pythons_recursion_limit():
    # kernel -> _nested(998) -> ... -> _nested(0): 999 nested calls, depth 1000 in cuTile
    limit = sys.getrecursionlimit()
    assert float(_run(998)) == 1098.0
    assert sys.getrecursionlimit() == limit       # restored when the launch returns


@pytest.mark.parametrize("n", [999, 100_000])
def test_the_1000th_nested_call_is_cutiles_recursion_error(n):
    with pytest.raises(ct.TileRecursionError) as info:
        _run(n)
    err = info.value
    assert isinstance(err, CompileError)
    assert err.message == ("Maximum recursion depth (1000) reached while inlining a "
                           "function call")
    assert err.location.filename == __file__
    assert err.location.line == _nested.__code__.co_firstlineno + 2   # the call in _nested
    assert "end the recursion sooner" in err.hint
