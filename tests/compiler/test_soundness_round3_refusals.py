"""Soundness, round 3: the false refusals the acceptance corpus found, and the refusals
that stay, each saying how to write it safely.

Lifted (each accepted, compiled for sm_90 and checked against numpy on the CPU backend):

* store and load hints: ``p.store(t, latency=3, allow_tma=False)``, ``p.load(latency=2)``,
  ``tl.load_like(x, p, latency=2, padding_mode=ct.PaddingMode.NEG_INF)``, also on
  persistent and sub-tile stores; a hint's value is a constant (a literal, a
  ``ct.Constant`` parameter, a module constant or a local bound only to such values);
* ``p.store(tile=t)``, the keyword ``ct.store`` uses;
* combining functions of ``ct.reduce`` / ``ct.scan``: ``operator.add`` (and ``mul``,
  ``and_``, ``or_``, ``xor``), the builtins ``max`` / ``min`` and cuTile's binary ops,
  recognized by identity, and a lambda written in the call, checked with the kernel;
* ``assert cond, "message"`` in kernels and helpers, run as cuTile's ``ct.assert_``;
* tiled views of ``tl.In`` arrays, read with ``tv.load(index)`` (bounds-checked).

Kept, with better advice: keyword-only kernel parameters (``param-form``: make it
positional), ``ct.atomic_*`` into a ``tl.Out`` (``write-partition``: partials and a
second launch, or ``unsafe=True`` with ``tl.Raw``), nested ``def`` combiners. And the
hostile variants of every lifted form stay refused, located, with their rule.
"""
from __future__ import annotations

import importlib.util
import inspect
import operator
import re
import sys
import textwrap
import uuid
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("cuda.tile", reason="cuda-tile (cuTile Python) is not installed")

import cuda.tile as ct  # noqa: E402

import tilelab as tl  # noqa: E402
from tilelab.compiler.safety import RULES  # noqa: E402

N, TILE = 100, 32          # ragged: the last tile of every partition is partial

# ---- machinery ----------------------------------------------------------------------------


def _module(tmp_path: Path, text: str):
    """Import ``text`` (dedented, after the common imports) as a module of its own file."""
    name = f"r3r_{uuid.uuid4().hex[:10]}"
    path = tmp_path / f"{name}.py"
    path.write_text("import operator\n\nimport cuda.tile as ct\n\nimport tilelab as tl\n\n"
                    + textwrap.dedent(text), encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


_MARK = re.compile(r"#\s*AT:\s*(?P<id>[\w-]+)\s*(?:@\s(?P<anchor>.*))?$")


def _marker(path: str | Path, case: str) -> tuple[int, int | None]:
    """(line, 1-based column of the anchor or None) of ``# AT: case`` in a file."""
    for number, text in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if "# AT:" in text:
            code, comment = text.split("# AT:", 1)
            m = _MARK.match("# AT:" + comment.rstrip())
            if m and m.group("id") == case:
                anchor = m.group("anchor")
                return number, (code.index(anchor) + 1 if anchor else None)
    raise AssertionError(f"no marker {case!r} in {path}")


def _refused(mod, name: str, rule: str, *phrases: str, case: str | None = None,
             **options) -> tl.SafetyError:
    """``@tl.kernel`` of ``mod.<name>`` raises a SafetyError of ``rule`` that says
    ``phrases`` (message or hint), located at the marker ``case`` (default: ``name``)."""
    with pytest.raises(tl.SafetyError) as info:
        tl.kernel(**options)(getattr(mod, name))
    return _check_refusal(info.value, mod, rule, phrases, case or name)


def _check_refusal(err, mod, rule, phrases, case) -> tl.SafetyError:
    assert err.rule == rule and rule in RULES, (err.rule, str(err))
    said = err.message + "\n" + (err.hint or "")
    missing = [p for p in phrases if p not in said]
    assert not missing, f"missing {missing} in:\n{err}"
    line, col = _marker(mod.__file__, case)
    loc = err.location
    assert loc is not None and Path(loc.filename).resolve() == Path(mod.__file__).resolve()
    assert loc.line == line, f"expected line {line}, got {loc}\n{err}"
    if col is not None:
        assert loc.col == col, f"expected column {col}, got {loc}\n{err}"
    assert err.hint, f"no advice: {err}"
    return err


def _t(a) -> tl.Tensor:
    return tl.tensor(np.array(a, copy=True), device="cpu")


def _out(shape, dtype="float32") -> tl.Tensor:
    t = tl.empty(shape, dtype=dtype, device="cpu")
    t.numpy()[...] = np.nan if np.dtype(dtype).kind == "f" else -12345
    return t


def _compiles(kernel, *args):
    """Compile for sm_90 (the Tile IR validator runs on a safe kernel's IR)."""
    art = kernel.compile(*args, arch="sm_90", cache=False)
    assert art.cubin and art.tileir.strip()
    return art


RNG = np.random.default_rng(37)
X = (RNG.standard_normal(N) * 4 - 3).astype(np.float32)        # mostly negative
M = (RNG.standard_normal((6, 20)) * 4 - 3).astype(np.float32)
MI = RNG.integers(-50, 50, size=(6, 20)).astype(np.int32)


# ======================================================================================
# 1. store and load hints; 4. tl.load_like hints and padding_mode

HINTS = """\
    LAT = 3
    NEG = ct.PaddingMode.NEG_INF


    def hinted(z: tl.Out, acc: tl.InOut, x: tl.In, L: ct.Constant[int]):
        pad = ct.PaddingMode.ZERO
        a = tl.load_like(x, z, latency=2, allow_tma=True, padding_mode=NEG)
        b = acc.load(latency=L, padding_mode=pad)
        z.store(ct.maximum(a, a * 0 - 1000.0), latency=LAT, allow_tma=False)
        acc.store(b + a,
                  allow_tma=False)


    def persistent(y: tl.Out, x: tl.In):
        for t in y.tiles():
            y.store(tl.load_like(x, y, at=t, latency=4) + 1, at=t, allow_tma=False, latency=3)


    def sub_tiles(y: tl.Out, x: tl.In, H: ct.Constant[int]):
        (i,) = y.tile_index
        y.store(ct.load(x, index=(2 * i,), shape=(H,)), offset=(0,), latency=2)
        y.store(ct.load(x, index=(2 * i + 1,), shape=(H,)),
                allow_tma=False, offset=(1,))


    def neg_max(m: tl.Out, x: tl.In, T: ct.Constant[int]):
        t = tl.load_like(x, m, padding_mode=ct.PaddingMode.NEG_INF)
        m.store(ct.reshape(ct.max(t, axis=1), (T, 1)))


    def neg_max_unchecked(m: tl.Out, x: tl.In, T: ct.Constant[int]):
        t = tl.load_like(x, m, padding_mode=ct.PaddingMode.NEG_INF, latency=1)
        m.store(ct.reshape(ct.max(t, axis=1), (T, 1)))
    """


@pytest.mark.toolchain
def test_store_and_load_hints_are_accepted_compile_and_run(tmp_path):
    m = _module(tmp_path, HINTS)
    k = tl.kernel(m.hinted)
    z, acc = _out(N), _t(np.ones(N, np.float32))
    args = (z.partition(TILE), acc.partition(TILE), _t(X), 2)
    lowered = k.lowered_source(*args)
    assert "padding_mode=NEG, latency=2, allow_tma=True" in lowered
    assert "padding_mode=pad, latency=L)" in lowered
    assert "latency=LAT, allow_tma=False" in lowered
    # the multi-line store keeps the kernel's lines
    assert len(lowered.strip("\n").splitlines()) == len(inspect.getsourcelines(m.hinted)[0])
    art = _compiles(k, *args)
    assert "latency = 3" in art.tileir and "allow_tma = false" in art.tileir
    assert "padding_value = neg_inf" in art.tileir
    k(*args)
    np.testing.assert_array_equal(z.numpy(), np.maximum(X, -1000.0))
    np.testing.assert_array_equal(acc.numpy(), 1 + X)


@pytest.mark.toolchain
def test_hints_on_persistent_and_sub_tile_stores(tmp_path):
    m = _module(tmp_path, HINTS)
    k = tl.kernel(m.persistent)
    y = _out(N)
    args = (y.partition(TILE, schedule=tl.persistent(num_blocks=2)), _t(X))
    _compiles(k, *args)
    k(*args)
    np.testing.assert_array_equal(y.numpy(), X + 1)
    k = tl.kernel(m.sub_tiles)
    y = _out(N)
    args = (y.partition(TILE), _t(np.concatenate([X, np.zeros(28, np.float32)])), TILE // 2)
    assert "(0,), latency=2)" in k.lowered_source(*args)
    _compiles(k, *args)
    k(*args)
    np.testing.assert_array_equal(y.numpy(), X)


@pytest.mark.parametrize("kernel", ["neg_max", "neg_max_unchecked"])
@pytest.mark.toolchain
def test_load_like_padding_mode_pads_ragged_tiles(tmp_path, kernel):
    """NEG_INF padding decides the row maxima of all-negative rows past the edge: a
    zero-padded load would give 0 there."""
    m = _module(tmp_path, HINTS)
    opts = {"check_bounds": False} if kernel.endswith("unchecked") else {}
    k = tl.kernel(**opts)(getattr(m, kernel))
    x = -np.abs(M) - 1
    if opts:                                       # unchecked: tiles must be whole
        x = np.hstack([x, np.full((6, 12), -1e30, np.float32)])
    out = _out((6, 32))                            # each row: its maximum, broadcast
    args = (out.partition((2, 32)), _t(x), 2)
    art = _compiles(k, *args)
    if not opts:
        assert "padding_value = neg_inf" in art.tileir
    else:       # every lane is proven inside: no padding applies, none is emitted
        assert "padding_mode" not in k.lowered_source(*args)
    k(*args)
    np.testing.assert_array_equal(out.numpy(), np.repeat(x.max(axis=1, keepdims=True), 32, 1))


HOSTILE_HINTS = """\
    def worker(t):
        return t


    FLAG = 1
    BIG = 11


    def call_value(z: tl.Out, x: tl.In):
        z.store(tl.load_like(x, z), latency=ct.bid(0))  # AT: call_value @ ct.bid


    def launch_value(z: tl.Out, x: tl.In, n: int):
        z.store(tl.load_like(x, z), latency=n)  # AT: launch_value @ n)


    def int_for_bool(z: tl.Out, x: tl.In):
        z.store(tl.load_like(x, z), allow_tma=FLAG)  # AT: int_for_bool @ FLAG


    def out_of_range(z: tl.Out, x: tl.In):
        z.store(tl.load_like(x, z), latency=BIG)  # AT: out_of_range @ BIG


    def function_value(z: tl.Out, x: tl.In):
        z.store(tl.load_like(x, z, latency=worker))  # AT: function_value @ worker


    def loop_bound(z: tl.Out, x: tl.In):
        for lat in range(1, 3):
            z.store(tl.load_like(x, z), latency=lat)  # AT: loop_bound @ lat)


    def tile_value(z: tl.Out, x: tl.In):
        t = tl.load_like(x, z)
        z.store(t, latency=t)  # AT: tile_value @ t)


    def padding_class(z: tl.Out, x: tl.In):
        z.store(tl.load_like(x, z, padding_mode=ct.PaddingMode))  # AT: padding_class @ ct.Pad


    def partition_value(z: tl.Out, acc: tl.InOut, x: tl.In):
        acc.store(acc.load(allow_tma=z))  # AT: partition_value @ z)


    def index_keyword(z: tl.Out, x: tl.In):
        z.store(tl.load_like(x, z), index=(0,))  # AT: index_keyword @ index=
    """


@pytest.mark.parametrize("name,rule,phrases", [
    ("call_value", "hint-value", ("latency=ct.bid(0) is not a constant hint", "computed",
                                  "write latency=3")),
    ("launch_value", "hint-value", ("'n' is a parameter that is not a ct.Constant",)),
    ("int_for_bool", "hint-value", ("FLAG is 1, not a bool", "allow_tma=False")),
    ("out_of_range", "hint-value", ("BIG is 11, not an int from 1 to 10",)),
    ("function_value", "hint-value", ("not an int from 1 to 10",)),
    ("loop_bound", "hint-value", ("bound by something other than 'name = value'",)),
    ("tile_value", "hint-value", ("'t' is bound to tl.load_like(x, z), and "
                                  "tl.load_like(x, z) is computed",)),
    ("padding_class", "hint-value", ("not a member of ct.PaddingMode",)),
    ("partition_value", "hint-value", ("'z' is a parameter that is not a ct.Constant",)),
    ("index_keyword", "partition-store", ("index= cannot be chosen", "latency= and allow_tma=")),
])
def test_a_hint_is_a_constant_or_refused(tmp_path, name, rule, phrases):
    m = _module(tmp_path, HOSTILE_HINTS)
    _refused(m, name, rule, *phrases)


def test_a_hint_constant_rebound_after_definition_is_checked_again(tmp_path):
    m = _module(tmp_path, """\
        LAT = 3


        def kern(z: tl.Out, x: tl.In):
            z.store(tl.load_like(x, z), latency=LAT)  # AT: kern @ LAT
        """)
    k = tl.kernel(m.kern)
    z = _out(N)
    k(z.partition(TILE), _t(X))
    m.LAT = print
    with pytest.raises(tl.SafetyError) as info:            # stage: the next launch
        k(z.partition(TILE), _t(X))
    _check_refusal(info.value, m, "hint-value", ("LAT is <built-in function print>",), "kern")


# ======================================================================================
# 2. p.store(tile=...)

TILE_KEYWORD = """\
    def keyword(z: tl.Out, x: tl.In):
        z.store(tile=tl.load_like(x, z) * 2)


    def keyword_persistent(y: tl.Out, x: tl.In):
        for t in y.tiles():
            y.store(at=t,
                    tile=tl.load_like(x, y, at=t) + 1)


    def twice(z: tl.Out, x: tl.In):
        t = tl.load_like(x, z)
        z.store(t, tile=t)  # AT: twice @ tile=


    def nothing(z: tl.Out, x: tl.In):
        z.store()  # AT: nothing @ z.store


    def starred(z: tl.Out, x: tl.In):
        z.store(*(tl.load_like(x, z),))  # AT: starred @ z.store
    """


@pytest.mark.toolchain
def test_store_takes_the_tile_by_keyword(tmp_path):
    m = _module(tmp_path, TILE_KEYWORD)
    for name, schedule, want in (("keyword", tl.row_major, X * 2),
                                 ("keyword_persistent", tl.persistent(num_blocks=3), X + 1)):
        k = tl.kernel(getattr(m, name))
        z = _out(N)
        args = (z.partition(TILE, schedule=schedule), _t(X))
        lowered = k.lowered_source(*args)
        assert "tile=tl" not in lowered and "tile=__tl_ct.broadcast_to(" in lowered
        _compiles(k, *args)
        k(*args)
        np.testing.assert_array_equal(z.numpy(), want)


@pytest.mark.parametrize("name,phrase", [("twice", "given the tile twice"),
                                         ("nothing", "has no tile to store"),
                                         ("starred", "*args cannot be chosen")])
def test_store_tile_keyword_hostile_forms(tmp_path, name, phrase):
    _refused(_module(tmp_path, TILE_KEYWORD), name, "partition-store", phrase)


# ======================================================================================
# 3. combining functions of ct.reduce / ct.scan

COMBINERS = """\
    from operator import add as plus


    def scan_add(x, y: tl.Out, T: ct.Constant[int], W: ct.Constant[int]):
        px, _ = y.tile_index
        t = ct.load(x, index=(px, 0), shape=(T, W), padding_mode=ct.PaddingMode.ZERO)
        y.store(ct.scan(t, axis=1, func=operator.add, identity=0))


    def scan_plus(x, y: tl.Out, T: ct.Constant[int], W: ct.Constant[int]):
        px, _ = y.tile_index
        t = ct.load(x, index=(px, 0), shape=(T, W), padding_mode=ct.PaddingMode.ZERO)
        y.store(ct.scan(t, 1, plus, 0))


    def scan_lambda(x, y: tl.Out, T: ct.Constant[int], W: ct.Constant[int]):
        px, _ = y.tile_index
        t = ct.load(x, index=(px, 0), shape=(T, W), padding_mode=ct.PaddingMode.ZERO)
        y.store(ct.scan(t, axis=1, func=lambda a, b: a + b, identity=0))


    def reduce_max(x, y: tl.Out, T: ct.Constant[int], W: ct.Constant[int]):
        px, _ = y.tile_index
        t = ct.load(x, index=(px, 0), shape=(T, W), padding_mode=ct.PaddingMode.ZERO)
        y.store(ct.reduce(t, 1, max, -2147483648, keepdims=True))


    def reduce_min(x, y: tl.Out, T: ct.Constant[int], W: ct.Constant[int]):
        px, _ = y.tile_index
        t = ct.load(x, index=(px, 0), shape=(T, W), padding_mode=ct.PaddingMode.ZERO)
        y.store(ct.reduce(t, axis=1, func=min, identity=2147483647, keepdims=True))


    def reduce_maximum(x, y: tl.Out, T: ct.Constant[int], W: ct.Constant[int]):
        px, _ = y.tile_index
        t = ct.load(x, index=(px, 0), shape=(T, W), padding_mode=ct.PaddingMode.ZERO)
        y.store(ct.reduce(t, 1, ct.maximum, -2147483648, keepdims=True))


    def reduce_xor(x, y: tl.Out, T: ct.Constant[int], W: ct.Constant[int]):
        px, _ = y.tile_index
        t = ct.load(x, index=(px, 0), shape=(T, W), padding_mode=ct.PaddingMode.ZERO)
        y.store(ct.reduce(t, 1, operator.xor, 0, keepdims=True))
    """

_PAD = np.zeros((6, 32), np.int64)
_PAD[:, :20] = MI


@pytest.mark.parametrize("name,shape,ref", [
    ("scan_add", (6, 20), lambda: np.cumsum(MI, axis=1)),
    ("scan_plus", (6, 20), lambda: np.cumsum(MI, axis=1)),
    ("scan_lambda", (6, 20), lambda: np.cumsum(MI, axis=1)),
    ("reduce_max", (6, 1), lambda: _PAD.max(axis=1, keepdims=True)),
    ("reduce_min", (6, 1), lambda: _PAD.min(axis=1, keepdims=True)),    # zero padding
    ("reduce_maximum", (6, 1), lambda: _PAD.max(axis=1, keepdims=True)),
    ("reduce_xor", (6, 1), lambda: np.bitwise_xor.reduce(MI, axis=1, keepdims=True)),
])
@pytest.mark.toolchain
def test_cutile_combiners_and_lambdas_are_accepted(tmp_path, name, shape, ref):
    m = _module(tmp_path, COMBINERS)
    k = tl.kernel(getattr(m, name))
    y = _out(shape, "int32")
    args = (_t(MI), y.partition((4, 32 if shape[1] > 1 else 1)), 4, 32)
    _compiles(k, *args)
    k(*args)
    np.testing.assert_array_equal(y.numpy(), ref())


HOSTILE_COMBINERS = """\
    def writer(a, b):
        return a + b


    def scan_sub(x, y: tl.Out, T: ct.Constant[int]):
        t = tl.load_like(x, y)
        y.store(ct.scan(t, axis=0, func=operator.sub, identity=0))  # AT: scan_sub @ operator.sub


    def scan_rebound(x, y: tl.Out, T: ct.Constant[int]):
        t = tl.load_like(x, y)
        y.store(ct.scan(t, axis=0, func=operator.add, identity=0))  # AT: scan_rebound @ operator.add


    def lambda_default(x, y: tl.Out, T: ct.Constant[int]):
        t = tl.load_like(x, y)
        y.store(ct.scan(t, 0, lambda a, b=1: a + b, 0))  # AT: lambda_default @ lambda


    def lambda_shadow(x, y: tl.Out, T: ct.Constant[int]):
        t = tl.load_like(x, y)
        y.store(ct.scan(t, 0, lambda x, b: x + b, 0))  # AT: lambda_shadow @ x, b


    def lambda_partition(x, y: tl.Out, T: ct.Constant[int]):
        t = tl.load_like(x, y)
        y.store(ct.scan(t, 0, lambda a, b: a + b + y.shape[0], 0))  # AT: lambda_partition @ y.shape


    def lambda_writes(x, y: tl.Out, T: ct.Constant[int]):
        t = tl.load_like(x, y)
        y.store(ct.scan(t, 0, lambda a, b: a + ct.atomic_add(x, (0,), b), 0))  # AT: lambda_writes @ ct.atomic_add


    def lambda_elsewhere(x, y: tl.Out, T: ct.Constant[int]):
        f = lambda a, b: a + b  # AT: lambda_elsewhere @ lambda
        y.store(tl.load_like(x, y))


    def lambda_other_call(x, y: tl.Out, T: ct.Constant[int]):
        t = tl.load_like(x, y)
        y.store(writer(t, t, lambda a, b: a + b))  # AT: lambda_other_call @ lambda


    def nested_def(x, y: tl.Out, T: ct.Constant[int]):
        def f(a, b):  # AT: nested_def
            return a + b
        t = tl.load_like(x, y)
        y.store(ct.scan(t, axis=0, func=f, identity=0))
    """


@pytest.mark.parametrize("name,rule,phrases", [
    ("scan_sub", "func-argument", ("operator.add", "got a builtin_function_or_method")),
    ("lambda_default", "func-argument", ("plain positional parameters",)),
    ("lambda_shadow", "func-argument", ("parameter 'x' of the lambda combiner",)),
    ("lambda_partition", "func-argument", ("uses partition 'y'",)),
    ("lambda_writes", "write-input", ("ct.atomic_add()", "'x'")),
    ("lambda_elsewhere", "statement", ("lambdas are not allowed", "may be a lambda written "
                                       "in the call")),
    ("lambda_other_call", "statement", ("except as the combining function",)),
    ("nested_def", "statement", ("write the combiner as a module-level def",)),
])
def test_combiner_hostile_forms_are_refused(tmp_path, name, rule, phrases):
    _refused(_module(tmp_path, HOSTILE_COMBINERS), name, rule, *phrases)


def test_the_python_combiners_are_the_c_functions_themselves():
    from tilelab.compiler.safety import optable

    assert optable.PY_COMBINERS["operator.add"] is operator.add
    assert optable.PY_COMBINERS["max"] is max
    assert optable.py_combiner_name(operator.sub) is None

    def add(a, b):          # a look-alike: a Python function claiming operator's names
        return a + b
    add.__module__ = "_operator"
    assert optable._native(add, "_operator", "add") is None
    assert optable._native(print, "_operator", "add") is None
    assert optable._native(operator.add, "_operator", "add") is operator.add


def test_a_rebound_operator_add_is_no_combiner(tmp_path, monkeypatch):
    """Recognized by identity: operator.add rebound to another builtin is refused at
    definition, and rebound after definition, at the next compile."""
    m = _module(tmp_path, HOSTILE_COMBINERS)
    monkeypatch.setattr(operator, "add", operator.sub)
    _refused(m, "scan_rebound", "func-argument", "got a builtin_function_or_method")
    monkeypatch.undo()
    k = tl.kernel(m.scan_rebound)
    args = (_t(MI[:, 0].copy()), _out(6, "int32").partition(8), 8)
    monkeypatch.setattr(operator, "add", print)
    with pytest.raises(tl.SafetyError) as info:           # stage: compile
        k.compile(*args, arch="sm_90", cache=False)
    _check_refusal(info.value, m, "func-argument", ("got a builtin_function_or_method",),
                   "scan_rebound")


# ======================================================================================
# 7. assert

ASSERTS = """\
    LIMIT = 1000.0


    def bounded(t):
        assert ct.max(t, axis=0) < LIMIT, "too big"  # AT: helper_assert
        return t + 1


    def asserting(z: tl.Out, x: tl.In):
        t = tl.load_like(x, z)
        assert z.tile_shape[0] > 1, "tile too small"
        assert(ct.sum(t * 0) == 0)
        z.store(bounded(t))


    def message_call(z: tl.Out, x: tl.In):
        t = tl.load_like(x, z)
        assert True, bounded(t)  # AT: message_call @ bounded
        z.store(t)


    def message_fstring(z: tl.Out, x: tl.In):
        assert True, f"{x.shape}"  # AT: message_fstring @ f"
        z.store(tl.load_like(x, z))
    """


@pytest.mark.toolchain
def test_assert_runs_as_cutile_assert_in_kernels_and_helpers(tmp_path):
    m = _module(tmp_path, ASSERTS)
    k = tl.kernel(m.asserting)
    z = _out(N)
    args = (z.partition(TILE), _t(X))
    lowered = k.lowered_source(*args).splitlines()
    src = [ln for ln in Path(m.__file__).read_text().splitlines()]
    line = next(i for i, s in enumerate(src) if "tile too small" in s)
    row = next(s for s in lowered if "tile too small" in s)
    # the keyword became '__tla(' (cuTile's ct.assert_): the message keeps its column
    assert row.strip().startswith("__tla(") and row.index('"tile') == src[line].index('"tile')
    art = _compiles(k, *args)
    assert art.tileir.count(" assert ") >= 3          # two in the kernel, one in the helper
    k(*args)
    np.testing.assert_array_equal(z.numpy(), X + 1)
    with pytest.raises(tl.LaunchError) as info:       # the helper's assert fails
        k(z.partition(TILE), _t(X + 2000))
    assert "too big" in str(info.value)
    line, _ = _marker(m.__file__, "helper_assert")
    assert info.value.location.line == line


@pytest.mark.parametrize("name", ["message_call", "message_fstring"])
def test_an_assert_message_is_a_string_literal(tmp_path, name):
    _refused(_module(tmp_path, ASSERTS), name, "assert-form", "not a string literal",
             'assert cond, "what went wrong"')


# ======================================================================================
# 8. tiled views of inputs

VIEWS = """\
    def view_read(z: tl.Out, x: tl.In, T: ct.Constant[int]):
        (i,) = z.tile_index
        tv = x.tiled_view((T,), padding_mode=ct.PaddingMode.ZERO)
        z.store(tv.load((i,), latency=2) + tv.num_tiles(0) * 0)


    def view_overlap(z: tl.Out, x: tl.In, T: ct.Constant[int]):
        i, _ = z.tile_index
        tv = x.tiled_view((2, T), padding_mode=ct.PaddingMode.ZERO, traversal_steps=(1, T))
        z.store(ct.sum(tv.load((i, 0)), axis=0, keepdims=True))


    def view_store(z: tl.Out, x: tl.In, T: ct.Constant[int]):
        tv = x.tiled_view((T,))
        tv.store((0,), tl.load_like(x, z))  # AT: view_store @ tv.store
        z.store(tl.load_like(x, z))


    def view_unchecked(z: tl.Out, x: tl.In, T: ct.Constant[int]):
        z.store(x.tiled_view((T,)).load((0,), check_bounds=False))  # AT: view_unchecked @ check_bounds


    def view_of_slice(z: tl.Out, x: tl.In, T: ct.Constant[int]):
        z.store(x.slice(0, 0, T).tiled_view((T,)).load((0,)))  # AT: view_of_slice @ x.slice


    def view_of_partition(z: tl.Out, x: tl.In, T: ct.Constant[int]):
        z.store(z.tiled_view((T,)).load((0,)))  # AT: view_of_partition @ z.tiled_view
    """


@pytest.mark.toolchain
def test_tiled_views_of_inputs_are_read_bounds_checked(tmp_path):
    m = _module(tmp_path, VIEWS)
    k = tl.kernel(m.view_read)
    z = _out(N)
    args = (z.partition(TILE), _t(X), TILE)
    art = _compiles(k, *args)
    assert "load_view_tko" in art.tileir
    k(*args)
    np.testing.assert_array_equal(z.numpy(), X)
    # overlapping tiles (traversal steps of one row): rows i and i+1, zero past the end
    k = tl.kernel(m.view_overlap)
    x = M[:5]
    z = _out((5, 20))
    args = (z.partition((1, 32)), _t(x), 32)
    _compiles(k, *args)
    k(*args)
    nxt = np.vstack([x[1:], np.zeros((1, 20), np.float32)])
    np.testing.assert_allclose(z.numpy(), x + nxt, rtol=1e-6)


@pytest.mark.parametrize("name,rule,phrase", [
    ("view_store", "write-input", "which is tl.In"),
    ("view_unchecked", "unchecked-read", "check_bounds=False"),
    ("view_of_slice", "view-op", "x.slice() makes or reads a view"),
    ("view_of_partition", "partition-attribute", "has no attribute 'tiled_view'"),
])
def test_writes_unchecked_reads_and_other_views_stay_refused(tmp_path, name, rule, phrase):
    _refused(_module(tmp_path, VIEWS), name, rule, phrase)


# ======================================================================================
# 5. keyword-only parameters; 6. atomics into a tl.Out

KEPT = """\
    def keyword_only(x, y: tl.Out, *, T: ct.Constant[int]):  # AT: keyword_only @ T:
        y.store(tl.load_like(x, y))


    def star_args(x, y: tl.Out, *rest):  # AT: star_args @ rest
        y.store(tl.load_like(x, y))


    def atomic_total(counts: tl.Out, x, T: ct.Constant[int]):
        (i,) = counts.tile_index
        ct.atomic_add(counts, (0,), ct.sum(ct.load(x, index=(i,), shape=(T,))))  # AT: atomic_total @ ct.atomic_add
    """


def test_keyword_only_parameters_say_how_to_write_them(tmp_path):
    err = _refused(_module(tmp_path, KEPT), "keyword_only", "param-form",
                   "'T' follows '*'", "a launch passes every argument by position",
                   "make it a positional parameter", "T: ct.Constant[int]")
    assert "remove the '*'" in err.hint
    _refused(_module(tmp_path, KEPT), "star_args", "param-form", "*args",
             "list each parameter by name")


def test_atomics_into_an_output_name_the_safe_ways(tmp_path):
    err = _refused(_module(tmp_path, KEPT), "atomic_total", "write-partition",
                   "ct.atomic_add() writes partition 'counts' directly")
    for phrase in ("its own tile of a partials tensor", "reduce the partials in a second "
                   "launch", "@tl.kernel(unsafe=True) with a tl.Raw parameter"):
        assert phrase in err.hint, err.hint
