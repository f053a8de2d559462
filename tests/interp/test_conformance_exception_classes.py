"""The interpreter's refusals are also instances of cuTile's exception classes.

Code ported from cuTile catches ``ct.TileTypeError`` and friends; the interpreter raises
tilelab's ``CompileError``/``LaunchError`` (location, hint). Each refusal must be both:
the class cuTile raises for the same kernel, and the tilelab class.
"""
from __future__ import annotations

import pickle
from typing import Annotated

import numpy as np
import pytest

import cuda.tile as ct
import tilelab as tl
from tilelab.errors import (CompileError, LaunchError, SourceLocation, TilelabError,
                            with_foreign_class)
from tilelab.interp import interpret
from tilelab.interp.context import KernelNameError
from tilelab.interp.frontend.cutile_errors import cutile_class


@ct.kernel
def subscript(x):
    t = x[0]  # noqa: F841


@ct.kernel
def bad_static_assert(x):
    ct.static_assert(1 + 1 == 3, "arithmetic")


@ct.kernel
def mma_dtypes(x, y):
    a = ct.load(x, (0, 0), (16, 16))
    b = ct.load(y, (0, 0), (16, 16))
    acc = ct.full((16, 16), 0, ct.int8)
    ct.mma(a, b, acc)


@ct.kernel
def undefined(x):
    ct.store(x, (0,), ct.load(x, (nowhere,), (4,)))  # noqa: F821


@ct.kernel
def copy(x, y):
    ct.store(y, (ct.bid(0),), ct.load(x, (ct.bid(0),), (4,)))


def _raised(kernel, *args, grid=(1,)):
    with pytest.raises(TilelabError) as info:
        interpret(kernel, *args, grid=grid)
    return info.value


def test_array_subscript_is_cutiles_type_error_and_a_compile_error():
    e = _raised(subscript, np.zeros(4, np.float32))
    assert isinstance(e, ct.TileTypeError) and isinstance(e, CompileError)
    # the class reads as tilelab's in a traceback; the cuTile class it also is, by name
    assert type(e).__name__ == "CompileError" and issubclass(e.foreign, ct.TileTypeError)
    assert "Arrays are not directly subscriptable. Use load() or gather() instead." in str(e)
    assert e.location.line == subscript._pyfunc.__code__.co_firstlineno + 2  # (decorator)
    # cuTile's own location attribute points at the same place (0-based column)
    assert (e.loc.filename, e.loc.line, e.loc.col) == (
        e.location.filename, e.location.line, e.location.col - 1)


def test_pytest_raises_with_cutiles_class_and_message_catches_it():
    with pytest.raises(ct.TileTypeError, match="Arrays are not directly subscriptable"):
        interpret(subscript, np.zeros(4, np.float32), grid=(1,))


def test_static_assert_is_cutiles_static_assertion_error():
    e = _raised(bad_static_assert, np.zeros(4, np.float32))
    assert isinstance(e, ct.TileStaticAssertionError) and isinstance(e, CompileError)
    assert "Static assertion failed: arithmetic" in e.message


def test_a_refusal_cutile_itself_raised_keeps_that_class():
    # the interpreter asks cuTile's MMA dtype rules and rewords cuTile's refusal; the
    # exception it handled is cuTile's (the context, even when the cause is suppressed)
    e = _raised(mma_dtypes, np.zeros((16, 16), np.float16), np.zeros((16, 16), np.float16))
    assert isinstance(e, CompileError) and e.message.startswith("mma: ")
    cause = e.__cause__ or e.__context__
    assert isinstance(cause, ct.TileError)
    assert isinstance(e, type(cause))


def test_an_undefined_name_is_a_name_error_a_compile_error_and_a_tile_syntax_error():
    e = _raised(undefined, np.zeros(4, np.float32))
    assert isinstance(e, KernelNameError) and isinstance(e, NameError)
    assert isinstance(e, ct.TileSyntaxError)   # cuTile: "Undefined variable nowhere used"
    assert "name 'nowhere' is not defined" in str(e)


def test_a_bad_argument_is_a_type_error_as_in_cutiles_launch():
    with pytest.raises(TypeError, match=r"^Kernel expects 2 arguments but 1 was given: "
                                        r"kernel 'copy' takes 2 arguments \(x, y\), got 1"):
        interpret(copy, np.zeros(4), grid=(1,))
    with pytest.raises(TypeError, match="^Kernel expects 1 argument but 2 were given"):
        interpret(subscript, np.zeros(4), np.zeros(4), grid=(1,))
    e = _raised(copy, np.zeros(4, np.float32), "s")
    assert isinstance(e, LaunchError) and isinstance(e, TypeError)
    assert "argument 'y' = 's' is not a run-time value" in e.message


def test_undefined_behaviour_is_no_cutile_error():
    # a tile entirely outside its array: cuTile does not check it, the interpreter refuses
    e = _raised(copy, np.zeros(4, np.float32), np.zeros(4, np.float32), grid=(2,))
    assert isinstance(e, LaunchError)
    assert not isinstance(e, ct.TileError)
    assert cutile_class(e) is None


def test_a_message_no_cutile_template_matches_falls_back_to_type_error():
    e = CompileError("tiles are not iterable")
    assert cutile_class(e) is ct.TileTypeError


def test_the_raise_site_may_name_the_class():
    e = CompileError("a refusal in tilelab's own words", foreign=ct.TileValueError)
    assert cutile_class(e) is ct.TileValueError


def test_cutiles_raise_sites_give_the_class_of_a_message_in_its_words():
    # raise TileTypeError(f"..."), and raise ctx.syntax_error(f"...") through a helper
    # annotated to return a TileSyntaxError
    cases = {"Arrays do not support item assignment. Use store() or scatter() instead.":
             ct.TileTypeError,
             "Break in a for loop with static_iter() is not supported": ct.TileSyntaxError,
             "Undefined variable blk used": ct.TileSyntaxError}
    for message, cls in cases.items():
        assert cutile_class(CompileError(message)) is cls, message


def test_with_foreign_class_keeps_message_location_hint_and_pickles():
    loc = SourceLocation("k.py", 3, 5)
    e = with_foreign_class(CompileError("bad", location=loc, hint="do this"),
                           ct.TileValueError)
    assert isinstance(e, ct.TileValueError) and isinstance(e, CompileError)
    assert str(e) == "k.py:3:5: bad\nhint: do this"
    assert e.args == ("bad",)
    again = pickle.loads(pickle.dumps(e))
    assert type(again) is type(e) and str(again) == str(e)
    # the same pair gives the same class; a class it already is changes nothing
    assert type(with_foreign_class(CompileError("x"), ct.TileValueError)) is type(e)
    assert with_foreign_class(e, CompileError) is e
    assert type(with_foreign_class(LaunchError("x"), None)) is LaunchError


def test_a_static_axis_out_of_range_is_a_value_error_in_cutiles_words():
    @ct.kernel
    def bad(x: Annotated[ct.Array, ct.ArrayAnnotation(static_shape_dims=(5,))]):
        pass

    with pytest.raises(ValueError, match="static_shape_dims contains axis 5") as info:
        interpret(bad, np.zeros((4, 8), np.float32), grid=(1,))
    assert isinstance(info.value, LaunchError)
    assert info.value.hint == "name axes from -2 to 1 in static_shape_dims"


@tl.kernel
def int8_plus_uint8(z: tl.Out, x: tl.In):
    a, b = ct.full((16,), 1, dtype=ct.int8), ct.full((16,), 1, dtype=ct.uint8)
    z.store((a + b).astype(z.dtype))


@pytest.mark.toolchain
def test_both_backends_refuse_with_cutiles_class():
    """The CPU backend (the interpreter) and ``kernel.compile`` (cuTile's compiler) raise
    a CompileError that is also cuTile's TileTypeError, in cuTile's words."""
    z = tl.zeros(16, device="cpu").partition(16)
    x = tl.ones(16, device="cpu")
    with pytest.raises(ct.TileTypeError, match="Implicit promotion of int8 and uint8") as cpu:
        int8_plus_uint8(z, x)
    with pytest.raises(ct.TileTypeError, match="Implicit promotion of int8 and uint8") as gpu:
        int8_plus_uint8.compile(z, x, arch="sm_90", cache=False)
    for e in (cpu.value, gpu.value):
        assert isinstance(e, CompileError) and e.location is not None
    assert gpu.value.message.startswith("cuTile rejected kernel 'int8_plus_uint8': ")


def test_a_grid_past_24_bits_is_refused_as_cutiles_launch_refuses_it():
    x = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match=r"Grid\[0\] exceeds 24-bit limit: max=16777215, "
                                         r"got=16777216\. Use multiple kernel launches for "
                                         r"larger workloads\.") as info:
        interpret(copy, x, x, grid=(1 << 24,))
    assert isinstance(info.value, LaunchError)
