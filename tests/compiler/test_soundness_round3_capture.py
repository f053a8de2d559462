"""Soundness, round 3: how source is captured, what a default is, what an annotation may
be, and who places the wait for the previous kernel.

* Captures are found by code-object identity: two helpers or kernels whose code objects
  compare equal (``CodeType.__eq__`` ignores the file name, and defaults and annotations
  are not in the code) each run their own text -- in two modules and in a re-run
  IPython cell.
* A default is part of the program: helpers run with the default values the check
  accepted; ``__defaults__`` / ``__kwdefaults__`` edited after a launch are checked again
  before the next launch or compile (a value that is not data is refused, located at the
  default in the ``def``), and a changed default is a changed program (no cache hit of
  the old one).
* False refusals: ``ConstInt = ct.Constant[int]`` (also ``ct.Constant[float]``, under
  ``from __future__ import annotations``, imported from another module) annotates kernel
  and helper parameters; helper defaults naming module constants (``pad=PAD_ZERO``,
  ``dtype=ct.float32``, a module int) compile for sm_90 and run on the CPU. A cuTile
  annotation over a type no kernel can take is refused with a message that says what to
  write; a plain type alias (``C = int``) annotates a scalar passed at launch.
* The grid-dependency ops (``ct.grid_dependency_control_*``) are the lowering's: a safe
  kernel that calls them (directly, renamed, through a helper) is refused with rule
  ``wait-form``, whose hint names ``tl.wait_for_previous_kernel()``; unsafe kernels may.

Each attempt states its stage (the step inside ``pytest.raises``), its rule id, phrases
of its message and its location (a ``# AT: <id> [@ <anchor>]`` marker in the module text
it comes from).
"""
from __future__ import annotations

import importlib.util
import inspect
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
from tilelab import config  # noqa: E402
from tilelab.compiler.safety import OpKind, RULES  # noqa: E402
from tilelab.compiler.safety.optable import CT_OPS, is_allowed_value  # noqa: E402

N, TILE = 64, 16

# ---- machinery ----------------------------------------------------------------------------


def _module(tmp_path: Path, text: str, name: str | None = None):
    """Import ``text`` (dedented) as a module from its own file."""
    name = name or f"r3_{uuid.uuid4().hex[:10]}"
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


_MARK = re.compile(r"#\s*AT:\s*(?P<id>[\w-]+)\s*(?:@\s(?P<anchor>.*))?$")


def _marker(path: str | Path, case: str) -> tuple[int, int | None]:
    """(line, 1-based column of the anchor or None) of ``# AT: case`` in a file."""
    for number, text in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if "# AT:" not in text:
            continue
        code, comment = text.split("# AT:", 1)
        m = _MARK.match("# AT:" + comment.rstrip())
        if m and m.group("id") == case:
            anchor = m.group("anchor")
            return number, (code.index(anchor) + 1 if anchor else None)
    raise AssertionError(f"no marker {case!r} in {path}")


def _assert_refusal(err: BaseException, rule: str, phrases: tuple[str, ...], path, case: str):
    """A SafetyError of ``rule`` saying ``phrases`` (message or hint), located at the
    marker ``case`` of ``path``."""
    assert isinstance(err, tl.SafetyError), f"{type(err).__name__}: {err}"
    assert err.rule == rule and rule in RULES, (err.rule, str(err))
    said = err.message + "\n" + (err.hint or "")
    missing = [p for p in phrases if p not in said]
    assert not missing, f"missing {missing} in:\n{err}"
    line, col = _marker(path, case)
    loc = err.location
    assert loc is not None, f"no location: {err}"
    assert Path(loc.filename).resolve() == Path(path).resolve(), (loc, str(err))
    assert loc.line == line, f"expected line {line}, got {loc}\n{err}"
    if col is not None:
        assert loc.col == col, f"expected column {col}, got {loc}\n{err}"
    assert str(err).startswith(f"{loc}: "), str(err)


def _vec(n: int = N) -> tl.Tensor:
    return tl.tensor(np.arange(n, dtype=np.float32), device="cpu")


def _run(kernel, *scalars, n: int = N) -> np.ndarray:
    """Launch on the CPU backend over arange(n); returns the output."""
    z = tl.zeros(N, dtype="float32", device="cpu")
    kernel(z.partition(TILE), _vec(n), *scalars)
    return z.numpy()


def _compile(kernel, *scalars, n: int = N, cache=False):
    return kernel.compile(tl.spec(N, "float32").partition(TILE), tl.spec(n, "float32"),
                          *scalars, arch="sm_90", cache=cache)


X = np.arange(N, dtype=np.float32)


# ======================================================================================
# 2. captured source found by code-object equality


SAME_SHAPED = """\
    import cuda.tile as ct
    import tilelab as tl


    def scale(t, k={k}):
        return t * k


    @tl.kernel
    def kern(z: tl.Out, x: tl.In, s: ct.Constant[{ctype}]):
        z.store(scale(tl.load_like(x, z)) + s)
    """


@pytest.mark.toolchain
def test_same_shaped_helpers_and_kernels_in_two_modules_run_their_own_text(tmp_path):
    a = _module(tmp_path, SAME_SHAPED.format(k=2, ctype="int"))
    b = _module(tmp_path, SAME_SHAPED.format(k=5, ctype="float"))
    # the premise: Python calls these code objects equal (file, defaults and annotations
    # are not compared), so a lookup by equality would give b a's text
    assert a.scale.__code__ == b.scale.__code__
    assert a.kern.definition.fn.__code__ == b.kern.definition.fn.__code__
    np.testing.assert_array_equal(_run(a.kern, 1), X * 2 + 1)
    np.testing.assert_array_equal(_run(b.kern, 0.5), X * 5 + 0.5)
    for mod in (a, b):
        src = mod.kern.definition.analysis.source
        assert Path(src.filename).resolve() == Path(mod.__file__).resolve()
        helpers = [cf for cf in mod.kern.definition.analysis.program.functions.values()
                   if not cf.is_kernel]
        assert [Path(cf.source.filename).resolve() for cf in helpers] == \
            [Path(mod.__file__).resolve()]
    assert "ct.Constant[float]" in b.kern.lowered_source(
        tl.spec(N, "float32").partition(TILE), tl.spec(N, "float32"), 0.5)
    art_a, art_b = _compile(a.kern, 1), _compile(b.kern, 0.5)
    assert art_a.cubin and art_b.cubin
    assert a.kern.definition.analysis.program.fingerprint() != \
        b.kern.definition.analysis.program.fingerprint()


IPY_CELL = '''
import tilelab as tl
import cuda.tile as ct

def r3_cell_scale(t, k={k}):
    return t * k

@tl.kernel
def r3_cell_kernel(z: tl.Out, x: tl.In):
    z.store(r3_cell_scale(tl.load_like(x, z)))
'''


@pytest.mark.toolchain
def test_a_cell_rerun_with_only_a_helper_default_changed_runs_the_new_default(tmp_path):
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    seen = []
    with config.override(cache_dir=str(tmp_path / "cache")):
        for k in (2, 3):
            res = shell.run_cell(IPY_CELL.format(k=k), store_history=True)
            assert res.success, res.error_in_exec
            helper, kernel = shell.user_ns["r3_cell_scale"], shell.user_ns["r3_cell_kernel"]
            np.testing.assert_array_equal(_run(kernel), X * k)
            # compiled through the disk cache: the changed default is a changed program
            seen.append((helper, kernel.definition.analysis.program.fingerprint(),
                         _compile(kernel, cache=True).tileir))
    (h1, f1, ir1), (h2, f2, ir2) = seen
    assert h1.__code__ == h2.__code__ and h1.__code__ is not h2.__code__   # the premise
    assert f1 != f2 and ir1 != ir2


# ---- defaults edited after a launch ----------------------------------------------------------

DEFAULTS = """\
    import cuda.tile as ct
    import tilelab as tl


    def scale(t, k=2):  # AT: k_default @ 2
        return t * k


    def kscale(t, *, k=2):  # AT: kw_default @ 2
        return t * k


    def put(a, t):
        ct.store(a, index=(0,), tile=t)
        return t


    @tl.kernel
    def scaled(z: tl.Out, x: tl.In):
        z.store(scale(tl.load_like(x, z)))


    @tl.kernel
    def kw_scaled(z: tl.Out, x: tl.In):
        z.store(kscale(tl.load_like(x, z)))
    """


@pytest.mark.toolchain
def test_a_default_edited_after_a_launch_is_checked_and_runs(tmp_path):
    m = _module(tmp_path, DEFAULTS)
    np.testing.assert_array_equal(_run(m.scaled), X * 2)
    before = m.scaled.definition.analysis.program.fingerprint()
    epoch = m.scaled.definition.helper_epoch
    m.scale.__defaults__ = (7,)
    np.testing.assert_array_equal(_run(m.scaled), X * 7)
    assert m.scaled.definition.helper_epoch == epoch + 1           # checked again
    assert m.scaled.definition.analysis.program.fingerprint() != before
    assert _compile(m.scaled).cubin


def test_kwdefaults_edited_in_place_after_a_launch_are_checked_and_run(tmp_path):
    m = _module(tmp_path, DEFAULTS)
    np.testing.assert_array_equal(_run(m.kw_scaled), X * 2)
    m.kscale.__kwdefaults__["k"] = 4          # the same dict, edited in place
    np.testing.assert_array_equal(_run(m.kw_scaled), X * 4)
    m.kscale.__kwdefaults__ = {"k": 5}        # a new dict
    np.testing.assert_array_equal(_run(m.kw_scaled), X * 5)


def test_a_writing_helper_as_a_default_is_refused_at_the_next_launch(tmp_path):
    m = _module(tmp_path, DEFAULTS)
    np.testing.assert_array_equal(_run(m.scaled), X * 2)
    m.scale.__defaults__ = (m.put,)
    x = _vec()
    z = tl.zeros(N, dtype="float32", device="cpu")
    with pytest.raises(tl.SafetyError) as info:            # stage: launch
        m.scaled(z.partition(TILE), x)
    _assert_refusal(info.value, "global-value",
                    ("parameter 'k' of 'scale' defaults to function 'put'",
                     "functions are called, never passed around",
                     "give the parameter a constant default"),
                    m.__file__, "k_default")
    np.testing.assert_array_equal(x.numpy(), X)            # the input was not written
    with pytest.raises(tl.SafetyError) as info:            # stage: compile
        _compile(m.scaled)
    _assert_refusal(info.value, "global-value", ("defaults to function 'put'",),
                    m.__file__, "k_default")
    m.scale.__defaults__ = (2,)                            # undone: runs again
    np.testing.assert_array_equal(_run(m.scaled), X * 2)


@pytest.mark.toolchain
def test_a_non_constant_kwdefault_is_refused_at_the_next_compile(tmp_path):
    m = _module(tmp_path, DEFAULTS)
    assert _compile(m.kw_scaled).cubin
    m.kscale.__kwdefaults__["k"] = [3.0]
    with pytest.raises(tl.SafetyError) as info:            # stage: compile
        _compile(m.kw_scaled)
    _assert_refusal(info.value, "global-value",
                    ("parameter 'k' of 'kscale' defaults to a list object",
                     "numbers, strings, tuples, dtypes and cuTile constants"),
                    m.__file__, "kw_default")


def test_more_defaults_than_parameters_are_refused(tmp_path):
    m = _module(tmp_path, DEFAULTS.replace("def scale(t, k=2):  # AT: k_default @ 2",
                                           "def scale(t, k=2):  # AT: k_default @ def"))
    np.testing.assert_array_equal(_run(m.scaled), X * 2)
    m.scale.__defaults__ = (1, 2, 3)
    with pytest.raises(tl.SafetyError) as info:            # stage: launch
        _run(m.scaled)
    _assert_refusal(info.value, "param-form",
                    ("'scale' has 3 default values (its __defaults__) for 2 positional "
                     "parameters",), m.__file__, "k_default")


@pytest.mark.toolchain
def test_kernel_defaults_stay_with_their_parameters(tmp_path):
    """A kernel's own defaults are never used (a launch passes every argument): the
    lowering drops them, so the tile-shape constants it appends do not take them."""
    m = _module(tmp_path, """\
        import tilelab as tl


        @tl.kernel
        def kd(z: tl.Out, x: tl.In, n: int = 3,
               m: float = (
                   2.0)):
            z.store(tl.load_like(x, z) * m + n)
        """)
    args = (tl.spec(N, "float32").partition(TILE), tl.spec(N, "float32"), 1, 1.0)
    src = m.kd.lowered_source(*args)
    assert "defkd(z,x,n,m,__tl_z_t0:__tl_ct.Constant[int]):" in re.sub(r"\s", "", src), src
    assert src.count("\n") == inspect.getsource(m.kd.definition.fn).count("\n")
    np.testing.assert_array_equal(_run(m.kd, 1, 0.5), X * 0.5 + 1)
    assert m.kd.compile(*args, arch="sm_90", cache=False).cubin


# ======================================================================================
# false refusals: annotation aliases and defaults naming module constants


CONSTS = """\
    import cuda.tile as ct

    ConstInt = ct.Constant[int]
    """

ALIASES = """\
    {future}
    import typing

    import cuda.tile as ct
    import tilelab as tl
    import {consts} as consts
    from {consts} import ConstInt as ImportedInt

    ConstInt = ct.Constant[int]
    ConstFloat = ct.Constant[float]
    PlainInt = int
    Documented = typing.Annotated[int, "a count"]


    def add_const(t, c: ConstInt, f: ConstFloat = 1.0):
        return t * f + c


    @tl.kernel
    def k_int(z: tl.Out, x: tl.In, c: ConstInt):
        z.store(tl.load_like(x, z) + c)


    @tl.kernel
    def k_float(z: tl.Out, x: tl.In, c: ConstFloat):
        z.store(tl.load_like(x, z) * c)


    @tl.kernel
    def k_imported(z: tl.Out, x: tl.In, c: ImportedInt):
        z.store(tl.load_like(x, z) - c)


    @tl.kernel
    def k_module_attr(z: tl.Out, x: tl.In, c: consts.ConstInt):
        z.store(tl.load_like(x, z) + 2 * c)


    @tl.kernel
    def k_helper(z: tl.Out, x: tl.In, c: ConstInt):
        z.store(add_const(tl.load_like(x, z), c, 3.0))


    @tl.kernel
    def k_plain(z: tl.Out, x: tl.In, n: PlainInt):
        z.store(tl.load_like(x, z) + n)


    @tl.kernel
    def k_documented(z: tl.Out, x: tl.In, n: Documented):
        z.store(tl.load_like(x, z) + n)
    """

#: kernel -> (launch value, expected output, whether the parameter is a ct.Constant)
ALIAS_CASES = {
    "k_int": (3, X + 3, True),
    "k_float": (0.5, X * 0.5, True),
    "k_imported": (1, X - 1, True),
    "k_module_attr": (2, X + 4, True),
    "k_helper": (1, X * 3 + 1, True),
    "k_plain": (5, X + 5, False),
    "k_documented": (6, X + 6, False),
}


@pytest.mark.parametrize("future", [False, True], ids=["annotations", "future-annotations"])
@pytest.mark.toolchain
def test_annotation_aliases_annotate_kernels_and_helpers(tmp_path, future):
    consts = _module(tmp_path, CONSTS)
    m = _module(tmp_path, ALIASES.format(
        future="from __future__ import annotations" if future else "",
        consts=consts.__name__))
    for name, (value, expected, constant) in ALIAS_CASES.items():
        k = getattr(m, name)
        kind = k.definition.analysis.param(k.definition.analysis.params[2].name).kind
        assert (kind == "constant") == constant, (name, kind)
        np.testing.assert_allclose(_run(k, value), expected, err_msg=name)
        art = _compile(k, value)
        assert art.cubin, name


HELPER_DEFAULTS = """\
    import cuda.tile as ct
    import tilelab as tl

    PAD_ZERO = ct.PaddingMode.ZERO
    SCALE = 3
    SHAPE = (16,)


    def load_scaled(x, i, shape=SHAPE, pad=PAD_ZERO, dtype=ct.float32, k=SCALE):
        return ct.load(x, index=(i,), shape=shape, padding_mode=pad).astype(dtype) * k


    def kw_scaled(t, *, k=SCALE, dtype=ct.float32):
        return t.astype(dtype) * k


    @tl.kernel
    def k_defaults(z: tl.Out, x: tl.In):
        z.store(load_scaled(x, ct.bid(0)))


    @tl.kernel
    def k_kwdefaults(z: tl.Out, x: tl.In):
        z.store(kw_scaled(tl.load_like(x, z)))
    """


@pytest.mark.toolchain
def test_helper_defaults_naming_module_constants_run_and_compile(tmp_path):
    m = _module(tmp_path, HELPER_DEFAULTS)
    # x has 60 elements: the last tile's padding must be PAD_ZERO's zeros
    want = np.where(X < 60, X * 3, 0).astype(np.float32)
    np.testing.assert_array_equal(_run(m.k_defaults, n=60), want)
    assert _compile(m.k_defaults, n=60).cubin
    np.testing.assert_array_equal(_run(m.k_kwdefaults, n=60), want)
    assert _compile(m.k_kwdefaults, n=60).cubin


def test_a_cutile_annotation_over_a_type_no_kernel_takes_is_refused(tmp_path):
    path = tmp_path / "bad_alias.py"
    with pytest.raises(tl.SafetyError) as info:            # stage: definition
        _module(tmp_path, """\
            import cuda.tile as ct
            import tilelab as tl

            ListConst = ct.Constant[list]


            @tl.kernel
            def k_bad(z: tl.Out, x: tl.In, c: ListConst):  # AT: bad_alias @ ListConst
                z.store(tl.load_like(x, z))
            """, name="bad_alias")
    _assert_refusal(info.value, "global-value",
                    ("parameter 'c' is annotated with ListConst",
                     "typing.Annotated[list, ConstantAnnotation()]",
                     "annotate with ct.Constant[int]", "ConstInt = ct.Constant[int]",
                     "with int or float for a value passed at launch"),
                    path, "bad_alias")


def test_an_alias_changed_after_a_launch_is_checked_again(tmp_path):
    """typing.Annotated objects can be assigned new attributes: the snapshot keeps what
    the alias was made of, and the next launch checks it again (a private alias: the
    cached ct.Constant[int] is cuTile's own)."""
    m = _module(tmp_path, """\
        import typing

        import cuda.tile as ct
        import tilelab as tl

        Mine = typing.Annotated[int, ct.ConstantAnnotation()]


        @tl.kernel
        def k_mine(z: tl.Out, x: tl.In, c: Mine):  # AT: changed_alias @ Mine
            z.store(tl.load_like(x, z) + c)
        """)
    assert m.Mine is not ct.Constant[int]
    np.testing.assert_array_equal(_run(m.k_mine, 2), X + 2)
    m.Mine.__origin__ = list
    with pytest.raises(tl.SafetyError) as info:            # stage: launch
        _run(m.k_mine, 2)
    _assert_refusal(info.value, "global-value",
                    ("parameter 'c' is annotated with Mine",
                     "typing.Annotated[list, ConstantAnnotation()]"),
                    m.__file__, "changed_alias")
    m.Mine.__origin__ = int
    np.testing.assert_array_equal(_run(m.k_mine, 3), X + 3)


def test_what_counts_as_a_cutile_annotation():
    import typing

    assert is_allowed_value(ct.Constant[int]) and is_allowed_value(ct.Constant[float])
    assert is_allowed_value(ct.Constant[ct.float32]) and is_allowed_value(ct.Constant[bool])
    assert not is_allowed_value(ct.Constant[list])
    assert not is_allowed_value(typing.Annotated[int, "a count"])       # not cuTile's
    assert not is_allowed_value(typing.Annotated[int, ct.ConstantAnnotation(), object()])
    assert not is_allowed_value(typing.Optional[int])


# ======================================================================================
# 9 (part). the grid-dependency ops belong to the lowering

GRID = """\
    import cuda.tile as ct
    import tilelab as tl
    import tilelab.compiler.tile_index as tl_device
    from cuda.tile import grid_dependency_control_wait as gw


    def k_wait(z: tl.Out, x: tl.In):
        t = tl.load_like(x, z)
        ct.grid_dependency_control_wait()  # AT: gd_wait
        z.store(t)


    def k_trigger(z: tl.Out, x: tl.In):
        ct.grid_dependency_control_launch_dependents()  # AT: gd_trigger
        z.store(tl.load_like(x, z))


    def k_renamed(z: tl.Out, x: tl.In):
        t = tl.load_like(x, z)
        gw()  # AT: gd_renamed
        z.store(t)


    def waits(t):
        ct.grid_dependency_control_wait()  # AT: gd_helper
        return t


    def k_helper(z: tl.Out, x: tl.In):
        z.store(waits(tl.load_like(x, z)))


    def k_device_prologue(z: tl.Out, x: tl.In):
        tl_device.grid_dependency_prologue()
        z.store(tl.load_like(x, z))


    def k_unsafe(z: tl.Raw, x: tl.In):
        t = ct.load(x, index=(ct.bid(0),), shape=(16,))
        ct.grid_dependency_control_wait()
        ct.grid_dependency_control_launch_dependents()
        ct.store(z, index=(ct.bid(0),), tile=t)


    def k_marker(z: tl.Out, x: tl.In):
        t = tl.load_like(x, z)
        tl.wait_for_previous_kernel()
        z.store(t)
    """


def test_the_grid_dependency_ops_are_classified_as_ordering():
    assert CT_OPS["grid_dependency_control_wait"] == OpKind.ORDER
    assert CT_OPS["grid_dependency_control_launch_dependents"] == OpKind.ORDER
    assert not OpKind.ORDER.allowed_in_safe


@pytest.mark.parametrize("name,case,callee", [
    ("k_wait", "gd_wait", "ct.grid_dependency_control_wait()"),
    ("k_trigger", "gd_trigger", "ct.grid_dependency_control_launch_dependents()"),
    ("k_renamed", "gd_renamed", "gw()"),
    ("k_helper", "gd_helper", "ct.grid_dependency_control_wait()"),
])
def test_a_safe_kernel_calling_a_grid_dependency_op_is_refused(tmp_path, name, case, callee):
    m = _module(tmp_path, GRID)
    with pytest.raises(tl.SafetyError) as info:            # stage: definition
        tl.kernel(getattr(m, name))
    _assert_refusal(info.value, "wait-form",
                    (f"{callee} orders this kernel against the kernels before and after "
                     "it on its stream", "write tl.wait_for_previous_kernel()",
                     "needs @tl.kernel(unsafe=True)"), m.__file__, case)


def test_the_device_prologue_called_as_a_helper_is_refused_in_its_own_file(tmp_path):
    import tilelab.compiler.tile_index as device

    m = _module(tmp_path, GRID)
    with pytest.raises(tl.SafetyError) as info:            # stage: definition
        tl.kernel(m.k_device_prologue)
    err = info.value
    assert err.rule == "wait-form", str(err)
    assert "helper 'grid_dependency_prologue'" in err.message
    lines, first = inspect.getsourcelines(device.grid_dependency_prologue)
    want = first + next(i for i, ln in enumerate(lines)
                        if "ct.grid_dependency_control_wait()" in ln)
    assert Path(err.location.filename).resolve() == Path(device.__file__).resolve()
    assert err.location.line == want, str(err)


@pytest.mark.toolchain
def test_unsafe_kernels_and_the_marker_may_order_kernels(tmp_path):
    m = _module(tmp_path, GRID)
    k = tl.kernel(unsafe=True)(m.k_unsafe)
    art = k.compile(tl.spec(N, "float32"), tl.spec(N, "float32"), arch="sm_90", cache=False)
    assert "gdc_wait_tko" in art.tileir and "gdc_launch_dependents_tko" in art.tileir
    marker = tl.kernel(m.k_marker)
    np.testing.assert_array_equal(_run(marker), X)
    assert _compile(marker).cubin
