"""A library call repeated with the very same argument objects: found by their
identities (``CallCache._seen``) without building its key, torch tensors checked in a
few C calls (``TorchState``). Such a hit must be exactly as safe as the first call:
every change of a torch tensor's memory, layout, dtype, device or ``requires_grad``
is seen, with torch's ``TensorGuards`` and without it (the exact comparison). Every
test runs twice: the lookup in Python, and in the native module's C (``call_hit``).
"""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import tilelab as tl
import tilelab.kernels as K
from kernel_checks import native_path, python_calls
from tilelab.kernels import _host
from tilelab.kernels._host import wrappers as _wrappers
from tilelab.kernels._host.calls import CallCache
from tilelab.kernels.elementwise import _unary_call

torch = pytest.importorskip("torch")
_BINARY = K.add.__globals__["_BINARY"]
_BINARY_CALL = K.add.__globals__["_binary_call"]
_MATMUL = K.matmul.__globals__["_MATMUL"]
_MATMUL_CALL = K.matmul.__globals__["plan_matmul"]


@pytest.fixture(autouse=True, params=["python", "native"])
def lookup(request):
    """The lookup by identity in Python, or in C (the native module, bound to no
    driver: ``call_hit``, ``call_ids``, ``call_key`` and ``torch_holds`` need none)."""
    with native_path(request, request.param, "off (tests: the Python lookup)"):
        _host.clear_caches()
        yield request.param
        _host.clear_caches()


@pytest.fixture(params=["guard", "exact"])
def torch_check(request, monkeypatch):
    """Torch tensors checked by torch's TensorGuards, then as by a torch without it."""
    if request.param == "guard":
        assert _wrappers._guard_type(torch) is not None, "TensorGuards failed its self-test"
    else:
        monkeypatch.setattr(_wrappers, "_GUARDS", [False])
    _host.clear_caches()
    yield request.param
    _host.clear_caches()


def _hits() -> int:
    return _BINARY.hits


def test_a_repeated_call_is_found_by_identity(torch_check):
    x, y, out = torch.ones(64), torch.full((64,), 2.0), torch.empty(64)
    misses = _BINARY.misses
    K.add(x, y, out=out)
    assert len(_BINARY._seen) == 1
    hits = _hits()
    for _ in range(3):
        K.add(x, y, out=out)
    assert _hits() - hits == 3 and (out == 3).all()
    assert _BINARY.misses - misses == 1 and len(_BINARY._seen) == 1


def _check(x, y, out) -> None:
    for _ in range(2):                 # the second call is a hit on the new state
        K.add(x, y, out=out)
        torch.testing.assert_close(out, x + y)


def test_every_change_of_a_torch_tensor_is_seen(torch_check):
    x, y = torch.ones(8, 8), torch.full((8, 8), 2.0)
    out = torch.empty(8, 8)
    _check(x, y, out)
    first = _host.as_tensor(x)
    x.mul_(3)                                          # data: read again, same wrapper
    _check(x, y, out)
    assert _host.as_tensor(x) is first
    base = torch.arange(128.0)
    x.set_(base.untyped_storage(), 0, (8, 8), (8, 1))  # other memory, same layout
    _check(x, y, out)
    x.set_(base.untyped_storage(), 8, (8, 8), (8, 1))  # only the pointer moves
    _check(x, y, out)
    x.as_strided_((8, 8), (1, 8))                      # only the strides change
    _check(x, y, out)
    out.set_(torch.empty(72).untyped_storage(), 8, (8, 8), (8, 1))   # the output too
    _check(x, y, out)
    assert _host.as_tensor(x) is not first


def _error(call) -> tuple[type, str]:
    with pytest.raises(Exception) as e:
        call()
    return e.type, str(e.value)


def test_a_change_that_makes_the_call_fail_fails_it_as_a_first_call(torch_check):
    x, y, out = torch.ones(8, 8), torch.full((8, 8), 2.0), torch.empty(8, 8)
    _check(x, y, out)
    x.data = torch.ones(8, 8, dtype=torch.float16)     # the dtype, nothing else
    fresh = torch.ones(8, 8, dtype=torch.float16)
    assert _error(lambda: K.add(x, y, out=out)) == _error(lambda: K.add(fresh, y, out=out))
    x.data = torch.ones(8, 8)
    _check(x, y, out)
    x.requires_grad_(True)                             # DLPack refuses to export it
    fresh = torch.ones(8, 8, requires_grad=True)
    assert _error(lambda: K.add(x, y, out=out)) == _error(lambda: K.add(fresh, y, out=out))


def test_another_dispatch_state_still_hits_without_wrapping_again(torch_check):
    """Under inference mode TensorGuards refuses (it compares thread-local dispatch
    keys too): the exact comparison then finds the tensors unchanged."""
    x, out = torch.ones(64), torch.empty(64)
    K.add(x, x, out=out)
    w, hits = _host.as_tensor(x), _hits()
    with torch.inference_mode():
        K.add(x, x, out=out)
        K.add(x, x, out=out)
    assert _hits() - hits == 2 and _host.as_tensor(x) is w and (out == 2).all()


def test_a_scalar_made_afresh_for_each_call_keeps_one_record():
    one, w = tl.ones(4, device="cpu"), tl.empty(4, device="cpu")
    K.div(one, float("2.0"), out=w)
    seen, hits = len(_BINARY._seen), _hits()
    for _ in range(4):
        K.div(one, float("2.0"), out=w)       # equal, never the same object
    assert _hits() - hits == 4 and len(_BINARY._seen) == seen
    assert (w.numpy() == 0.5).all()


def test_calls_whose_objects_keep_changing_skip_the_lookup_by_identity(monkeypatch):
    from tilelab.kernels._host import calls as _calls

    one, w = tl.ones(4, device="cpu"), tl.empty(4, device="cpu")
    K.div(one, float("2.0"), out=w)
    monkeypatch.setattr(_BINARY, "_cold", 0)
    monkeypatch.setattr(_BINARY, "_strays", 0)
    hits = _hits()
    for _ in range(_calls._STRAYS):
        K.div(one, float("2.0"), out=w)
    assert _BINARY._cold == _calls._COLD and _hits() - hits == _calls._STRAYS
    K.div(one, float("4.0"), out=w)              # another value: computed afresh
    assert _BINARY._cold == _calls._COLD - 1 and (w.numpy() == 0.25).all()


def test_a_record_holds_nothing_alive():
    x, out = torch.ones(64), torch.empty(64)
    t, z = tl.ones(64, device="cpu"), tl.empty(64, device="cpu")
    K.add(x, x, out=out)
    K.add(t, t, out=z)
    refs = [weakref.ref(v) for v in (x, out, t, z)]
    del x, out, t, z
    K.add(torch.ones(8), torch.ones(8), out=torch.empty(8))   # sweeps dropped wrappers
    gc.collect()
    assert all(r() is None for r in refs)


def test_an_entry_hit_through_its_record_gets_a_second_chance():
    cache = CallCache("test", capacity=2)
    xs = [tl.ones(4, device="cpu") for _ in range(3)]
    z = tl.empty(4, device="cpu")

    def call(x):
        return cache.prepare(_unary_call, x, "relu", "relu", out=z)

    call(xs[0])
    call(xs[0])                                  # through the record: marked used
    call(xs[1])
    call(xs[2])                                  # evicts xs[1]'s entry, not xs[0]'s
    misses = cache.misses
    call(xs[0])
    assert cache.misses == misses and len(cache) == 2
    call(xs[1])
    assert cache.misses == misses + 1


def test_values_of_unknown_mutability_are_never_recorded(monkeypatch):
    from tilelab.kernels._host import calls as _calls

    monkeypatch.setattr(_BINARY, "_cold", 0)
    monkeypatch.setattr(_BINARY, "_strays", 0)
    a, b = np.ones(64, np.float32), np.empty(64, np.float32)
    seen = len(_BINARY._seen)
    K.add(a, a, out=b)                             # numpy arrays: keyed afresh each call
    a[...] = 4.0
    K.add(a, a, out=b)
    assert (b == 8.0).all() and len(_BINARY._seen) == seen
    for _ in range(_calls._STRAYS - 1):            # ... and soon not looked up by ids
        K.add(a, a, out=b)
    assert _BINARY._cold == _calls._COLD and (b == 8.0).all()


def test_a_guard_that_misses_a_change_is_never_used():
    class Lenient:                               # a TensorGuards that ignores strides
        def __init__(self, *xs, **kw):
            self.shapes = [x.shape for x in xs]

        def check(self, *xs):
            return [x.shape for x in xs] == self.shapes

    assert _wrappers._passes_self_test(torch, _wrappers._guard_type(torch))
    assert not _wrappers._passes_self_test(torch, Lenient)


def test_a_native_hit_runs_no_python_lookup(lookup, torch_check):
    """In C a hit runs none of ``_Seen.ready``, ``_Entry.ready`` or the torch check's
    Python, on tilelab tensors and on torch tensors the guard accepts; where the C path
    cannot decide (no guard) Python does, with the same result."""
    t, u, z = (tl.full((64, 64), v, device="cpu") for v in (1.0, 2.0, 0.0))
    x, y, out = torch.ones(64, 64), torch.full((64, 64), 2.0), torch.empty(64, 64)
    for args in ((t, u, z), (x, y, out)):
        K.add(args[0], args[1], out=args[2])
        hits = _hits()
        names = [n for n in python_calls(lambda: _BINARY.prepare(
            _BINARY_CALL, "add", args[0], args[1], activation=None, block_m=None,
            block_n=None, out=args[2])) if n in ("prepare", "ready", "holds_exactly")]
        assert _hits() - hits == 1
        on_torch = args[0] is x
        python = lookup == "python" or (on_torch and torch_check == "exact")
        # (in Python the torch tensors' check is holds_exactly: no native torch_holds)
        expected = ["ready", "holds_exactly", "ready"] if on_torch else ["ready", "ready"]
        assert names == ["prepare"] + (expected if python else [])
    assert (z.numpy() == 3).all() and (out == 3).all()


def test_a_native_hit_rebuilds_the_launches_of_weakly_held_tensors(lookup):
    """A GEMM's launches hold the caller's tensors weakly (their templates are thawed on
    each hit): the hit gets today's objects; a dropped tensor ends the record."""
    a = tl.ones((32, 32), "float32", device="cpu")
    b = tl.ones((32, 32), "float32", device="cpu")
    c = tl.empty((32, 32), "float32", device="cpu")
    K.matmul(a, b, out=c)
    entry = next(s.entry() for s in _MATMUL._seen.values())
    assert entry.fixed is None                   # the launches hold a, b, c weakly
    ready = _MATMUL.prepare(_MATMUL_CALL, a, b, out=c, out_dtype=None, bias=None,
                            activation=None, residual=None, scale_a=1.0, scale_b=1.0,
                            config=None)
    (kern, args), = ready.launches
    assert ready.out is c and any(v is a for v in args) and any(v is b for v in args)
    ready.run()
    np.testing.assert_allclose(c.numpy(), 32.0)
    misses = _MATMUL.misses
    b = tl.full((32, 32), 2.0, device="cpu")     # the old b is gone: computed afresh
    K.matmul(a, b, out=c)
    assert _MATMUL.misses == misses + 1
    np.testing.assert_allclose(c.numpy(), 64.0)


def test_a_torch_check_that_raises_raises_from_the_native_hit(lookup, monkeypatch):
    x, y, out = torch.ones(64), torch.ones(64), torch.empty(64)
    K.add(x, y, out=out)
    seen = next(s for s in _BINARY._seen.values() if s.state is not None)

    def broken(xs):
        raise RuntimeError("the check failed")

    monkeypatch.setattr(seen, "fast", broken)
    monkeypatch.setattr(seen.state, "fast", broken)
    with pytest.raises(RuntimeError, match="the check failed"):
        K.add(x, y, out=out)


def test_native_call_hit_refuses_bad_arguments(native_module):
    with pytest.raises(TypeError, match="call_hit"):
        native_module.call_hit({}, ("out",), ())
    with pytest.raises(TypeError, match="bind_calls"):
        native_module.bind_calls(int, int, int)
