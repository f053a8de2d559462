"""Scalars and constants at every door a value reaches a kernel through (sync and async
launches, kernel.compile for sm_90, graph capture and replay, tl.interpret of tilelab and
raw cuTile kernels, the library's call cache, autotune keys), and the launcher's tables.

The rule (tilelab.compiler.values, docs/safety.md "Constants and scalars"): a constant
is an exact bool/int/float, a numpy scalar converted to one; a run-time scalar is an
exact bool/int/float or a numpy scalar of a kernel dtype; anything else is a located
LaunchError that names the parameter, the type and what to pass, raised before any code
of the value's own runs. Plans are filed under what specializes the kernel (never a
scalar's value) and every table is bounded.
"""
from __future__ import annotations

import enum
import math

import numpy as np
import pytest

import cuda.tile as ct
import tilelab as tl
from tilelab.compiler.values import constant_key, constant_value, describe_type
from tilelab.errors import LaunchError
from tilelab.runtime.launch.lru import Lru

HERE = __file__


@tl.kernel
def axpb(z: tl.Out, x: tl.In, a: float, N: ct.Constant[int]):
    z.store(tl.load_like(x, z) * a + N)


@tl.kernel
def times(z: tl.Out, x: tl.In, C: ct.Constant[float]):
    z.store(tl.load_like(x, z) * C)


@tl.kernel
def flagged(z: tl.Out, x: tl.In, F: ct.Constant[bool]):
    if F:
        z.store(tl.load_like(x, z) + 1.0)
    else:
        z.store(tl.load_like(x, z) - 1.0)


_DUNDERS = ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
            "__truediv__", "__rtruediv__", "__neg__", "__abs__", "__index__", "__int__",
            "__float__", "__bool__", "__eq__", "__ne__", "__hash__", "__lt__", "__le__",
            "__gt__", "__ge__", "__repr__", "__str__", "__format__", "__round__")


class Victim:
    """A tl.In tensor over a numpy array that hostile values write behind its back, and
    the log of which of their methods ran."""

    def __init__(self):
        self.array = np.ones(64, np.float32)
        self.x = tl.tensor(self.array, device="cpu")
        self.ran: list[str] = []

    def hostile(self, base: type) -> type:
        """A subclass of ``base`` each of whose operators writes the tl.In tensor."""
        victim = self

        def make(name):
            def method(self, *args):
                victim.ran.append(name)
                victim.array[:] = 99.0
                return getattr(base, name)(self, *args)
            return method

        ns = {n: make(n) for n in _DUNDERS if hasattr(base, n)}

        def getattr_(self, name):
            victim.ran.append(f"getattr {name}")
            victim.array[:] = 99.0
            raise AttributeError(name)

        ns["__getattr__"] = getattr_
        return type(f"Evil{base.__name__.capitalize()}", (base,), ns)

    def untouched(self) -> None:
        assert self.ran == [], f"the value's own code ran: {self.ran}"
        assert (self.array == 1.0).all()


@pytest.fixture
def victim():
    return Victim()


def _out():
    return tl.empty(64, device="cpu")


def _located_here(e: LaunchError) -> None:
    assert e.location is not None and e.location.filename == HERE, e.location


# ---- constants ------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["sync", "async", "interpret", "graph"])
def test_a_constant_of_an_int_subclass_is_refused_before_its_code_runs(victim, how):
    Evil = victim.hostile(int)
    z = _out()
    args = (z.partition(16), victim.x, 2.0, Evil(3))
    with pytest.raises(LaunchError) as ei:
        if how == "sync":
            axpb(*args)
        elif how == "async":
            axpb.launch_async(*args).wait()
        elif how == "interpret":
            tl.interpret(axpb, *args)
        else:
            with tl.graph():
                axpb(*args)
    e = ei.value
    assert "axpb(): parameter 'N' is a ct.Constant and takes an exact bool, int or " \
           "float (numpy scalars are converted); got EvilInt (a subclass of int), whose " \
           "own operators would run inside the kernel" in e.message
    assert e.hint == "pass a plain Python value computed before the launch, e.g. int(N)"
    _located_here(e)
    victim.untouched()


def test_a_constant_of_an_int_subclass_is_refused_by_compile_for_sm90(victim):
    Evil = victim.hostile(int)
    s = tl.spec(64, "float32")
    with pytest.raises(LaunchError, match=r"parameter 'N' is a ct.Constant .* got EvilInt "
                                          r"\(a subclass of int\)") as ei:
        axpb.compile(s.partition(16), s, 2.0, Evil(3), arch="sm_90")
    _located_here(ei.value)
    with pytest.raises(LaunchError, match="got EvilInt"):   # wrapped as a ConstantValue
        axpb.definition.specialize((s.partition(16), s, 2.0,
                                    tl.compiler.signature.ConstantValue(Evil(3))))
    victim.untouched()


def test_an_int_enum_member_is_a_subclass_too(victim):
    class Tile(enum.IntEnum):
        SMALL = 4

    with pytest.raises(LaunchError, match=r"got Tile \(a subclass of int\)"):
        axpb(_out().partition(16), victim.x, 1.0, Tile.SMALL)


def test_a_0d_array_constant_is_a_located_launch_error_not_unhashable(victim):
    z = _out()
    for call in (lambda: axpb(z.partition(16), victim.x, 2.0, np.array(3)),
                 lambda: axpb.compile(tl.spec(64, "f32").partition(16), tl.spec(64, "f32"),
                                      2.0, np.array(3), arch="sm_90")):
        with pytest.raises(LaunchError) as ei:
            call()
        assert "parameter 'N' is a ct.Constant and takes an exact bool, int or float " \
               "(numpy scalars are converted); got a 0-d numpy.ndarray" in ei.value.message
        assert ei.value.hint == "pass N=a.item() (a plain Python value) for a 0-d array a"
        _located_here(ei.value)


@tl.kernel
def moded(z: tl.Out, x: tl.In, MODE: ct.Constant[str]):
    if MODE == "double":
        z.store(tl.load_like(x, z) * 2)
    else:
        z.store(tl.load_like(x, z))


STR_MESSAGE = ("moded(): parameter 'MODE' is a ct.Constant and takes an exact bool, int or "
               "float (numpy scalars are converted); got str (cuTile compiles bool, int and "
               "float constants only)")
STR_HINT = ("choose with a bool or int constant (e.g. MODE: ct.Constant[int] and MODE == 1 "
            "in the kernel), or define one kernel per string")


def test_cutile_compiles_no_string_kernel_constant():
    """What the refusals below rest on: cuTile's compile API takes no str constant (the
    constraint tilelab's compile builds for each ct.Constant refuses one). Should cuTile
    take them one day, this fails: accept exact str constants then (docs/safety.md, "Constants and scalars")."""
    from cuda.tile.compilation import ConstantConstraint

    for value in (True, 3, 2.5):
        ConstantConstraint(value)
    with pytest.raises(TypeError, match="Unexpected constant value type <class 'str'>"):
        ConstantConstraint("double")


@pytest.mark.parametrize("how", ["cpu", "compile_sm90", "async", "interpret"])
def test_a_string_constant_is_a_located_launch_error_saying_why(victim, how):
    z = tl.zeros(64, device="cpu")
    with pytest.raises(LaunchError) as ei:
        if how == "cpu":
            moded(z.partition(16), victim.x, "double")
        elif how == "compile_sm90":
            s = tl.spec(64, "float32")
            moded.compile(s.partition(16), s, "double", arch="sm_90")
        elif how == "async":
            moded.launch_async(z.partition(16), victim.x, "double").wait()
        else:
            tl.interpret(moded, z.partition(16), victim.x, "double")
    assert ei.value.message == STR_MESSAGE
    assert ei.value.hint == STR_HINT
    _located_here(ei.value)
    assert (z.numpy() == 0).all()


@ct.kernel
def raw_moded(x, z, MODE: ct.Constant[str]):
    ct.store(z, (0,), ct.load(x, (0,), (8,)))


def test_raw_interpret_refuses_a_string_constant_as_cutile_does(victim):
    z = np.zeros(8, np.float32)
    with pytest.raises(LaunchError) as ei:
        tl.interpret(raw_moded, victim.array[:8], z, "double", grid=(1,))
    assert ei.value.message == (
        "kernel 'raw_moded' argument 'MODE' is a ct.Constant and takes an exact bool, int "
        "or float or a numpy scalar; got str (cuTile compiles bool, int and float "
        "constants only)")
    assert ei.value.hint == STR_HINT
    _located_here(ei.value)
    assert (z == 0).all()


def test_numpy_scalar_constants_are_converted_and_share_the_plain_values_plan(victim):
    z = _out()
    launcher = axpb._launcher
    axpb(z.partition(16), victim.x, 2.0, 3)
    plans = len(launcher.plans)
    axpb(z.partition(16), victim.x, 2.0, np.int32(3))
    np.testing.assert_array_equal(z.numpy(), 5.0)
    assert len(launcher.plans) == plans            # np.int32(3) is the constant 3
    assert constant_value(np.float32(1.5), "C", "k()") == 1.5
    assert type(constant_value(np.float32(1.5), "C", "k()")) is float
    assert constant_value(np.bool_(False), "F", "k()") is False
    flagged(z.partition(16), victim.x, np.bool_(False))
    np.testing.assert_array_equal(z.numpy(), 0.0)
    spec = tl.spec(64, "float32")
    keys = {axpb.definition.specialize((spec.partition(16), spec, 2.0, n)).key()
            for n in (3, np.int32(3), np.int64(3), np.uint8(3))}
    assert len(keys) == 1                          # one compiled kernel for them all


def test_minus_zero_and_nan_constants(victim):
    z = _out()
    launcher = times._launcher
    times(z.partition(16), victim.x, 0.0)
    assert not np.signbit(z.numpy()).any()
    n = len(launcher.plans)
    times(z.partition(16), victim.x, -0.0)          # its own plan: compiled, x * C is -0.0
    assert np.signbit(z.numpy()).all() and len(launcher.plans) == n + 1
    for _ in range(5):                             # a fresh NaN object each time
        times(z.partition(16), victim.x, float("nan"))
    assert np.isnan(z.numpy()).all()
    assert len(launcher.plans) == n + 2
    assert constant_key(-0.0) != constant_key(0.0)
    assert constant_key(float("nan")) == constant_key(float("nan"))
    assert constant_key(1) != constant_key(True) != constant_key(1.0)
    spec = tl.spec(64, "float32")
    key = lambda c: times.definition.specialize((spec.partition(16), spec, c)).key()  # noqa: E731
    assert key(0.0) != key(-0.0) and key(float("nan")) == key(float("nan"))


# ---- run-time scalars -----------------------------------------------------------------

@pytest.mark.parametrize("base", [int, float])
@pytest.mark.parametrize("how", ["sync", "async", "interpret", "graph", "compile"])
def test_a_scalar_of_a_subclass_is_refused_before_its_code_runs(victim, base, how):
    Evil = victim.hostile(base)
    z = _out()
    args = (z.partition(16), victim.x, Evil(2), 3)
    with pytest.raises(LaunchError) as ei:
        if how == "sync":
            axpb(*args)
        elif how == "async":
            axpb.launch_async(*args).wait()
        elif how == "interpret":
            tl.interpret(axpb, *args)
        elif how == "graph":
            with tl.graph():
                axpb(*args)
        else:
            s = tl.spec(64, "float32")
            axpb.compile(s.partition(16), s, Evil(2), 3, arch="sm_90")
    e = ei.value
    assert f"axpb(): argument 'a' is a scalar and takes an exact bool, int or float, or a " \
           f"numpy scalar of a kernel dtype; got {Evil.__name__} (a subclass of " \
           f"{base.__name__}), whose own operators would run inside the kernel" in e.message
    assert e.hint == ("pass a plain Python value computed before the launch, e.g. "
                      f"{base.__name__}(a)")
    _located_here(e)
    victim.untouched()


def test_a_numpy_scalar_subclass_is_refused(victim):
    class F32(np.float32):
        pass

    with pytest.raises(LaunchError, match=r"got F32 \(a subclass of a numpy scalar type\)"):
        axpb(_out().partition(16), victim.x, F32(2.0), 3)
    with pytest.raises(LaunchError, match="ct.Constant"):
        times(_out().partition(16), victim.x, F32(2.0))


@pytest.mark.parametrize("a, want", [(np.float32(1.5), 4.5), (np.float16(0.5), 3.5),
                                     (np.int32(2), 5.0), (np.bool_(True), 4.0),
                                     (True, 4.0)])
def test_numpy_and_plain_scalars_run_as_scalars_of_their_dtype(victim, a, want):
    z = _out()
    axpb(z.partition(16), victim.x, a, 3)
    np.testing.assert_array_equal(z.numpy(), want)


def test_a_float64_scalar_is_a_float64_parameter(victim):
    """np.float64 is a float subclass, but numpy's own: it passes as a float64 scalar
    (on the GPU its parameter is a double), so a float32 output needs a cast."""
    from tilelab.errors import CompileError

    with pytest.raises(CompileError, match="cannot implicitly cast float64 to float32"):
        axpb(_out().partition(16), victim.x, np.float64(1.5), 3)


def test_graph_replay_keeps_each_launchs_scalar(victim):
    zs = [_out() for _ in range(3)]
    with tl.graph() as g:
        for i, z in enumerate(zs):
            axpb(z.partition(16), victim.x, float(i), 1)
    g.replay().wait()
    for i, z in enumerate(zs):
        np.testing.assert_array_equal(z.numpy(), i + 1.0)


# ---- raw cuTile kernels through tl.interpret ------------------------------------------

@ct.kernel
def raw_scale(x, z, a, TILE: ct.Constant[int]):
    b = ct.bid(0)
    ct.store(z, (b,), ct.load(x, (b,), (TILE,)) * a)


@pytest.mark.parametrize("where", ["scalar", "constant"])
def test_raw_interpret_refuses_subclasses_located(victim, where):
    Evil = victim.hostile(int)
    z = np.zeros(8, np.float32)
    a, tile = (Evil(2), 4) if where == "scalar" else (2.0, Evil(4))
    with pytest.raises(LaunchError) as ei:
        tl.interpret(raw_scale, victim.array[:8], z, a, tile, grid=(2,))
    name = "a" if where == "scalar" else "TILE"
    what = "a scalar" if where == "scalar" else "a ct.Constant"
    assert f"kernel 'raw_scale' argument '{name}' is {what} and takes an exact bool, int " \
           "or float or a numpy scalar; got EvilInt (a subclass of int)" in ei.value.message
    _located_here(ei.value)
    victim.untouched()


def test_raw_interpret_converts_numpy_scalars(victim):
    z = np.zeros(8, np.float32)
    tl.interpret(raw_scale, victim.array[:8], z, np.float32(3), np.int32(4), grid=(2,))
    np.testing.assert_array_equal(z, 3.0)
    with pytest.raises(LaunchError) as ei:
        tl.interpret(raw_scale, victim.array[:8], z, 2.0, np.array(4), grid=(2,))
    assert ei.value.hint == "pass TILE=a.item() (a plain Python value) for a 0-d array a"


# ---- plans: keyed on specialization, bounded ------------------------------------------

@tl.kernel
def step(z: tl.Out, x: tl.In, pos: int, scale: float):
    z.store(tl.load_like(x, z) * scale + pos)


def test_distinct_scalar_values_make_no_new_plan(victim):
    z = _out()
    launcher = step._launcher
    step(z.partition(16), victim.x, 0, 1.0)
    plans = len(launcher.plans)
    for i in range(200):                           # a decode position, a step counter
        step(z.partition(16), victim.x, i, i * 0.5)
    np.testing.assert_array_equal(z.numpy(), 199 + 199 * 0.5)
    for _ in range(20):                            # a fresh NaN object each time
        step(z.partition(16), victim.x, 1, float("nan"))
    step(z.partition(16), victim.x, 1, -0.0)
    assert len(launcher.plans) == plans
    # what does specialize: the scalar's dtype (bool, int64 beyond int32), not its value
    norm, dev = launcher.prepare((z.partition(16), victim.x, 2**40, 1.0))
    launcher.plan(norm, dev)
    norm, dev = launcher.prepare((z.partition(16), victim.x, True, 1.0))
    launcher.plan(norm, dev)
    assert len(launcher.plans) == plans + 2


def test_the_plan_table_is_bounded_least_recently_used_first(victim):
    @tl.kernel
    def add_c(z: tl.Out, x: tl.In, C: ct.Constant[int]):
        z.store(tl.load_like(x, z) + C)

    launcher = add_c._launcher
    launcher.plans.capacity = 4
    z = _out()
    for c in range(10):
        add_c(z.partition(16), victim.x, 0)        # kept in use
        add_c(z.partition(16), victim.x, c + 1)
        np.testing.assert_array_equal(z.numpy(), c + 2.0)
    assert len(launcher.plans) == 4 and launcher.plans.evicted == 11 - 4
    norm, dev = launcher.prepare((z.partition(16), victim.x, 0))
    assert any(k[-1] == constant_key(0) for k in launcher.plans.keys())


def test_lru():
    t = Lru(2)
    t["a"], t["b"] = 1, 2
    assert t.get("a") == 1                          # a is now the most recent
    t["c"] = 3
    assert sorted(t.keys()) == ["a", "c"] and t.evicted == 1 and "b" not in t
    assert t.get("b") is None and len(t) == 2
    with pytest.raises(ValueError, match="capacity must be at least 1"):
        Lru(0)


def test_gpu_plans_of_other_shapes_share_the_loaded_code(monkeypatch):
    """Plans of arrays of other shapes (same layout traits) take the code loaded for the
    first one from the launcher's code table: no second compile or cubin load."""

    compiled, loaded = [], []

    class Gpu:
        arch, name = "sm_90", "a stand-in GPU"

    class Art:
        cubin, symbol, arch, waits_for_previous_grid, triggers_after_wait = \
            b"", "k", "sm_90", False, False
        tileir = ""

    class Obj:
        def get_kernel(self, symbol):
            loaded.append(symbol)
            return object()

    class ObjectCode:
        from_cubin = staticmethod(lambda cubin: Obj())

    monkeypatch.setattr("tilelab.runtime.device.gpu", lambda: Gpu)
    monkeypatch.setattr("cuda.core.ObjectCode", ObjectCode)

    @tl.kernel
    def neg(z: tl.Out, x: tl.In):
        z.store(-tl.load_like(x, z))

    monkeypatch.setattr(neg.definition, "compile",
                        lambda *a, arch: compiled.append(a) or Art())
    launcher = neg._launcher
    for n in (1024, 2048, 4096):
        x, z = tl.zeros(n, device="cpu"), tl.empty(n, device="cpu")
        launcher.plan([z.partition(256), x], "gpu")
    assert len(launcher.plans) == 3 and len(launcher.code) == 1
    assert len(compiled) == 1 and loaded == ["k"]
    x, z = tl.zeros(100, device="cpu"), tl.empty(100, device="cpu")   # other traits
    launcher.plan([z.partition(256), x], "gpu")
    assert len(compiled) == 2 and len(launcher.code) == 2


# ---- the library's call cache and autotune keys ---------------------------------------

def test_call_cache_never_keys_on_a_subclass(victim):
    from tilelab.kernels._host import calls as _calls

    Evil = victim.hostile(int)
    with pytest.raises(_calls._Uncacheable):
        _calls._part(Evil(3), [])
    victim.untouched()

    class Act(enum.IntEnum):
        RELU = 1

    assert _calls._part(Act.RELU, []) == ("enum", Act, "RELU")
    assert _calls._part(float("nan"), []) == _calls._part(float("nan"), [])
    assert _calls._part(-0.0, []) != _calls._part(0.0, [])
    assert _calls._part(np.float32(1), []) != _calls._part(np.float64(1), [])
    assert not _calls._immutable(Evil(3))


def test_library_calls_never_key_their_cache_on_a_subclass(victim):
    """The library converts a scalar operand itself (float(y), in host code before any
    launch); its call cache never hashes or compares the object."""
    from tilelab.kernels import add
    from tilelab.kernels._host.calls import cache_info

    Evil = victim.hostile(float)
    z = _out()
    misses = lambda: sum(c["misses"] for c in cache_info()["calls"].values())  # noqa: E731
    before = misses()
    add(victim.x, Evil(2.0), out=z)
    add(victim.x, Evil(2.0), out=z)
    assert set(victim.ran) == {"__float__"}, victim.ran
    assert misses() == before          # uncached: never looked up by value


def test_autotune_keys_are_exact_values(victim):
    from tilelab.perf.autotune_keys import canonical, key_part, pow2_bucket

    Evil = victim.hostile(int)
    k = key_part(Evil(7), pow2_bucket)
    assert k == 7 and type(k) is int
    victim.untouched()

    class Mode(enum.IntEnum):
        FAST = 2

    assert canonical([key_part(Mode.FAST, None)]) == canonical([Mode.FAST]) == "[2]"
    nan1, nan2 = key_part(float("nan"), None), key_part(float("nan"), None)
    assert (nan1,) == (nan2,) and hash((nan1,)) == hash((nan2,))   # one bucket
    assert math.isnan(nan1)


def test_messages_name_the_type_without_calling_the_value(victim):
    Evil = victim.hostile(str)
    assert describe_type(Evil("x")) == "EvilStr (a subclass of str)"
    assert describe_type(np.zeros((2, 2))) == "a 2-d numpy.ndarray"
    victim.untouched()


# ---- GPU launches of other scalar values (the driver faked, as in test_prepared_launch)

@tl.kernel
def shift(z: tl.Out, x: tl.In, pos: int, scale: float, K: ct.Constant[int]):
    z.store(tl.load_like(x, z) * scale + pos + K)


@pytest.fixture(params=["driver", "native"])
def gpu_fake(monkeypatch, request):
    """The fake driver: cuda-bindings' call, or tilelab's native module over the C
    stand-in libcuda (then a relaunch's packed parameters are prepared for C too)."""
    from test_prepared_launch import FakeGpu

    from tilelab.runtime.ledger import LEDGER

    launcher = shift._launcher
    launcher._fast.clear()
    launcher._by_layout.clear()
    lib = request.getfixturevalue("fake_libcuda") if request.param == "native" else None
    fake = FakeGpu(monkeypatch, request.param, lib)
    yield fake
    LEDGER.observe_all()
    launcher._fast.clear()
    launcher._by_layout.clear()
    if request.param == "native":
        from tilelab.runtime import native

        native._reset()


def _prepared(fake, *args):
    """A prepared launch of shift(*args) filed as the full GPU path files one."""
    from tilelab.runtime.launch.launcher import _layout_key

    fast = fake.prepare(*args, kernel=shift)
    shift._launcher._by_layout[_layout_key(args, shift._launcher._constant)] = fast
    return fast


def test_other_scalar_values_relaunch_the_prepared_launch(gpu_fake, monkeypatch):
    """The same tensors with new scalar values: the prepared launch runs with only the
    scalars repacked (no full path, no plan, nothing kept), each launch with its own
    values, read here at the driver call."""
    import ctypes

    from tilelab.runtime import launch as L

    x, z = tl.ones(1024, device="cpu"), tl.empty(1024, device="cpu")
    zp = z.partition(256)
    first = _prepared(gpu_fake, zp, x, 0, 1.0, 7)
    (_, at_pos, _), (_, at_scale, _) = first.scalars
    seen = []
    if gpu_fake.mode == "driver":
        record = L.DRIVER.cu_launch_kernel

        def decode(*argv):
            ptrs = (ctypes.c_void_p * len(first.params[2])).from_address(argv[9])
            seen.append((ctypes.c_int32.from_address(ptrs[at_pos]).value,
                         ctypes.c_float.from_address(ptrs[at_scale]).value))
            return record(*argv)

        monkeypatch.setattr(L.DRIVER, "cu_launch_kernel", decode)
    launcher = shift._launcher
    plans = len(launcher.plans)
    for i in range(1, 300):                       # the full path never runs (it raises)
        shift.launch_async(zp, x, i, i * 0.5, 7)
    shift(zp, x, -5, float("nan"), 7)
    shift.launch_async(zp, x, 0, 1.0, 7)          # the prepared objects: by hash
    assert len(gpu_fake.launches) == 301 and len(launcher.plans) == plans
    assert len(launcher._fast) == 1 and len(launcher._by_layout) == 1   # nothing kept
    assert first.params[2][at_pos].value == 0     # the prepared launch is never changed
    if seen:
        assert seen[:3] == [(1, 0.5), (2, 1.0), (3, 1.5)] and seen[298] == (299, 149.5)
        assert seen[299][0] == -5 and math.isnan(seen[299][1]) and seen[300] == (0, 1.0)


@pytest.mark.parametrize("other", [
    (2**40, 1.0, 7),        # an int beyond int32: an int64 parameter, another plan
    (True, 1.0, 7),         # a bool for an int: another dtype
    (1, 2, 7),              # an int for a float
    (1, 1.0, 8),            # another constant: other compiled code
])
def test_what_is_not_a_new_scalar_value_takes_the_full_path(gpu_fake, other):
    x, z = tl.ones(1024, device="cpu"), tl.empty(1024, device="cpu")
    zp = z.partition(256)
    _prepared(gpu_fake, zp, x, 0, 1.0, 7)
    with pytest.raises(AssertionError, match="the full path ran"):
        shift.launch_async(zp, x, *other)
    with pytest.raises(AssertionError, match="the full path ran"):   # other tensors
        shift.launch_async(zp, tl.ones(1024, device="cpu"), 1, 1.0, 7)
    assert len(gpu_fake.launches) == 0


def test_a_refused_value_on_the_gpu_path_is_still_a_launch_error(gpu_fake, victim):
    """With prepared launches filed, the lookups of a launch of a 0-d array or subclass
    constant neither fail (unhashable) nor match: the launch is refused as anywhere."""
    x, z = tl.ones(1024, device="cpu"), tl.empty(1024, device="cpu")
    zp = z.partition(256)
    _prepared(gpu_fake, zp, x, 0, 1.0, 7)
    with pytest.raises(LaunchError, match="got a 0-d numpy.ndarray"):
        shift(zp, x, 1, 1.0, np.array(7))
    Evil = victim.hostile(int)
    with pytest.raises(LaunchError, match=r"got EvilInt \(a subclass of int\)"):
        shift(zp, x, 1, 1.0, Evil(7))
    assert set(victim.ran) <= {"__hash__"}        # (the lookup by hash; see docs)
    assert len(gpu_fake.launches) == 0
