"""Errors (where and what), launch validation, device printing and the static helpers."""
from __future__ import annotations

import io

import numpy as np
import pytest

import cuda.tile as ct
from tilelab.errors import CompileError, LaunchError
from tilelab.interp import KernelNameError, interpret


def test_compile_error_points_at_the_kernel_line():
    @ct.kernel
    def k(x):
        t = ct.load(x, (0,), (4,))
        return t.astype(ct.float16) + t.astype(ct.bfloat16)

    with pytest.raises(CompileError) as info:
        interpret(k, np.zeros(4, np.float32), grid=(1,))
    err = info.value
    assert err.location.filename == __file__
    assert "t.astype(ct.float16) + t.astype(ct.bfloat16)" in err.location.source_line()
    assert "Implicit promotion of float16 and bfloat16" in str(err)
    assert err.hint and "astype" in err.hint


def test_an_undefined_name_is_a_name_error_at_its_line():
    @ct.kernel
    def k(x):
        ct.store(x, (0,), undefined_name)  # noqa: F821

    with pytest.raises(NameError, match="name 'undefined_name' is not defined") as info:
        interpret(k, np.zeros(4), grid=(1,))
    err = info.value
    assert isinstance(err, KernelNameError) and err.name == "undefined_name"
    assert err.location.filename == __file__
    assert "undefined_name" in err.location.source_line()
    text = str(err)
    assert text.startswith(f"{__file__}:{err.location.line}:") and "NameError" in text
    assert "cuTile would reject" not in text and "define or import 'undefined_name'" in text
    assert err.trace.num_blocks == 1            # the partial trace comes with it

    def helper(t):
        return t + missing_too  # noqa: F821

    @ct.kernel
    def via_helper(x):
        ct.store(x, (0,), helper(ct.load(x, (0,), (4,))))

    with pytest.raises(NameError) as info:
        interpret(via_helper, np.zeros(4, np.float32), grid=(1,))
    assert "return t + missing_too" in info.value.location.source_line()


def test_other_python_errors_in_kernels_become_compile_errors():
    @ct.kernel
    def k(x):
        ct.store(x, (0,), len(3))

    with pytest.raises(CompileError, match="TypeError") as info:
        interpret(k, np.zeros(4), grid=(1,))
    assert not isinstance(info.value, NameError)
    assert "len(3)" in info.value.location.source_line()


def test_unsupported_ops_name_the_op_and_line():
    @ct.kernel
    def f(x):
        return x.foreign_pointer

    with pytest.raises(CompileError, match="Array.foreign_pointer is not supported by the CPU "
                                           "interpreter") as info:
        interpret(f, np.zeros(4), grid=(1,))
    assert "return x.foreign_pointer" in info.value.location.source_line()


def test_launch_argument_and_grid_validation():
    @ct.kernel
    def k(x, n):
        pass

    with pytest.raises(LaunchError, match=r"takes 2 arguments \(x, n\), got 1"):
        interpret(k, np.zeros(4), grid=(1,))
    with pytest.raises(LaunchError, match="grid must be 1 to 3 positive integers"):
        interpret(k, np.zeros(4), 1, grid=(1, 2, 3, 4))
    with pytest.raises(LaunchError, match="grid dimension 1 is 0"):
        interpret(k, np.zeros(4), 1, grid=(1, 0))
    with pytest.raises(LaunchError, match="argument 'x' of type dict is invalid"):
        interpret(k, {}, 1, grid=(1,))
    with pytest.raises(LaunchError, match="annotate the parameter as 'x: ct.Constant'"):
        interpret(k, ct.float16, 1, grid=(1,))
    with pytest.raises(LaunchError, match="complex128 has no cuTile equivalent"):
        interpret(k, np.zeros(4, complex), 1, grid=(1,))
    with pytest.raises(LaunchError, match="order must be one of"):
        interpret(k, np.zeros(4), 1, grid=(1,), order="random")
    with pytest.raises(LaunchError, match="expects a @ct.kernel or a Python function"):
        interpret(42, grid=(1,))


def test_assert_failure_is_a_launch_error_naming_the_block():
    @ct.kernel
    def k(x):
        t = ct.load(x, (ct.bid(0),), (4,))
        ct.assert_(t >= 0, "x must be non-negative")

    interpret(k, np.arange(8, dtype=np.int32), grid=(2,))
    expected = (r"assertion failed: x must be non-negative \(first failing element \(1,\)\) "
                r"\(block \(1, 0, 0\)\)")
    with pytest.raises(LaunchError, match=expected):
        interpret(k, np.array([0, 1, 2, 3, 4, -5, 6, 7], np.int32), grid=(2,))
    with pytest.raises(CompileError, match="must be bool"):
        interpret(lambda x: ct.assert_(ct.load(x, (0,), (4,))), np.zeros(4), grid=(1,))


def test_print_and_printf_prefix_each_line_with_the_block():
    @ct.kernel
    def k(x):
        t = ct.load(x, (ct.bid(0),), (2,))
        print(f"tile {ct.bid(0)}: {t:.1f}")
        ct.print("sum", ct.sum(t), sep="=")
        bits = ct.bitcast(t.astype(ct.float16), ct.uint16)
        ct.printf("hex %x %#06x and %5.2f\n", ct.bid(0) + 10, bits, t)
        ct.print("no newline", end="")

    out = io.StringIO()
    interpret(k, np.arange(4, dtype=np.float32), grid=(2,), stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[:4] == ["[block (0, 0, 0)] tile 0: [0.0, 1.0]",
                         "[block (0, 0, 0)] sum=1.000000",
                         "[block (0, 0, 0)] hex a [0x0000, 0x3c00] and [ 0.00,  1.00]",
                         "[block (0, 0, 0)] no newline"]
    assert lines[4] == "[block (1, 0, 0)] tile 1: [2.0, 3.0]"


def test_printf_checks_its_format():
    @ct.kernel
    def k(x):
        ct.printf("%d\n", ct.load(x, (0,), (2,)))

    with pytest.raises(CompileError, match="unexpected type"):
        interpret(k, np.zeros(2, np.float32), grid=(1,))


def test_static_helpers():
    seen = []

    @ct.kernel
    def k(x, N: ct.Constant[int]):
        ct.static_assert(x.dtype == ct.float32, "need float32")
        ct.static_assert(N % 2 == 0)   # (cuTile refuses ct.ensure_constant in here)
        ct.ensure_constant(N % 2 == 0)
        for i in ct.static_iter(range(N)):
            seen.append(i)
        seen.append(ct.static_eval(N * 2 if N > 2 else N))

    interpret(k, np.zeros(4, np.float32), 4, grid=(1,))
    assert seen == [0, 1, 2, 3, 8] and type(seen[0]) is int
    with pytest.raises(CompileError, match="Static assertion failed: need float32"):
        interpret(k, np.zeros(4, np.int32), 4, grid=(1,))

    @ct.kernel
    def dynamic(x):
        ct.ensure_constant(ct.bid(0))

    with pytest.raises(CompileError, match="not a compile-time constant"):
        interpret(dynamic, np.zeros(1), grid=(1,))

    @ct.kernel
    def raising(x, N: ct.Constant[int]):
        if N > 2:
            raise ct.static_exception(ValueError("N is too large"))

    with pytest.raises(CompileError, match=r"compile time \(ValueError: N is too large\)"):
        interpret(raising, np.zeros(1), 3, grid=(1,))


def test_assume_divisible_by_checks_the_promise():
    @ct.kernel
    def k(x, n):
        m = ct.assume_divisible_by(n, 16)
        ct.store(x, (0,), ct.full((1,), m, ct.int32))

    x = np.zeros(1, np.int32)
    interpret(k, x, 32, grid=(1,))
    assert x[0] == 32
    with pytest.raises(LaunchError, match="not divisible by 16"):
        interpret(k, x, 33, grid=(1,))


def test_ops_outside_a_kernel_say_how_to_run_them():
    from tilelab.interp.ops.misc import bid
    with pytest.raises(LaunchError, match="outside of a running kernel"):
        bid(0)


def test_errors_while_running_carry_the_partial_trace():
    @ct.kernel
    def k(x):
        t = ct.load(x, (ct.bid(0),), (4,))
        ct.assert_(t >= 0)
        ct.store(x, (ct.bid(0),), t + 1)

    x = np.array([0, 1, 2, 3, 4, 5, 6, 7, -1, 0, 0, 0], np.int32)
    with pytest.raises(LaunchError) as info:
        interpret(k, x, grid=(3,))
    partial = info.value.trace
    assert partial.execution_order == [0, 1, 2] and len(partial.blocks) == 3
    assert partial.block(2).reads["x"][0].box == ((8, 12),)
    assert "x" not in partial.block(2).writes


def test_partial_trace_lists_only_the_blocks_that_ran():
    @ct.kernel
    def k(x):
        ct.assert_(ct.load(x, (ct.bid(0),), (2,)) >= 0)

    with pytest.raises(LaunchError) as info:
        interpret(k, np.array([0, 0, -1, 0, 0, 0], np.int32), grid=(3,), trace=False)
    assert info.value.trace.execution_order == [0, 1]
