"""The allowlist itself (tilelab/compiler/safety/optable.py) and the rule table.

* every public name of ``cuda.tile`` is classified in ``optable.CT_OPS``: a name cuTile
  gains that the table lacks fails here until someone classifies it;
* each ``OpKind`` is enforced: one kernel per kind, then every classified name and every
  method table, each called from a generated kernel, gets its kind's verdict;
* every rule of ``RULES`` is reachable: at least one case of the safety corpus or of the
  soundness corpus is refused with it.
"""
from __future__ import annotations

import importlib.util
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

pytest.importorskip("cuda.tile", reason="cuda-tile (cuTile Python) is not installed")

import cuda.tile  # noqa: E402

from compiler import _soundness as S  # noqa: E402
from compiler import corpus_kernels as corpus  # noqa: E402
from compiler import soundness_cases as cases  # noqa: E402

import tilelab as tl  # noqa: E402
from tilelab.compiler.safety import RULES, OpKind  # noqa: E402
from tilelab.compiler.safety import optable  # noqa: E402


def public_names() -> list[str]:
    return [n for n in dir(cuda.tile) if not n.startswith("_")]


def test_every_public_name_of_cuda_tile_is_classified():
    missing = [n for n in public_names() if n not in optable.CT_OPS]
    assert not missing, (
        f"cuda.tile has public names the allowlist does not classify: {missing}; classify "
        "each in tilelab/compiler/safety/optable.py (CT_OPS: read, compute, write, view, "
        "raw, value or host) -- until then kernels cannot use them")


def test_the_table_classifies_only_known_kinds():
    assert set(optable.CT_OPS.values()) <= set(OpKind)
    assert "gather_scatter_placeholder" not in optable.CT_OPS   # not cuTile's public API
    stale = [n for n in optable.CT_OPS if not hasattr(cuda.tile, n)]
    assert set(stale) <= {"jax"}, f"the table names what cuda.tile no longer has: {stale}"


# ---- generated kernels -----------------------------------------------------------------


def _module(tmp_path: Path, body: str):
    """Import a module of kernels (text after the imports) from a temporary file."""
    name = f"allow_{uuid.uuid4().hex[:10]}"
    path = tmp_path / f"{name}.py"
    path.write_text("import cuda.tile as ct\nimport tilelab as tl\n\n" + body,
                    encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _verdict(fn, **options) -> str:
    """'accepted' or the rule id of the refusal at definition."""
    try:
        tl.kernel(**options)(fn)
    except tl.SafetyError as e:
        return e.rule
    return "accepted"


#: one kernel per kind, as a user would write it, and the verdict it must get
ONE_PER_KIND = {
    OpKind.READ: ("z.store(ct.load(x, index=z.tile_index, shape=z.tile_shape))", "accepted"),
    OpKind.COMPUTE: ("z.store(ct.exp(tl.load_like(x, z)))", "accepted"),
    OpKind.WRITE: ("ct.store(x, index=(0,), tile=tl.load_like(x, z))\n"
                   "    z.store(tl.load_like(x, z))", "write-input"),
    OpKind.VIEW: ("z.store(ct.load(x.slice(0, 0, 64), index=(0,), shape=(64,)))",
                  "view-op"),
    OpKind.RAW: ("z.store(ct.load_advanced_indexing(x, (ct.arange(64, dtype=ct.int32),)))",
                 "raw-op"),
    OpKind.VALUE: ("z.store(tl.load_like(x, z) + ct.float32(1.0))", "call-unknown"),
    OpKind.HOST: ("ct.launch(None, (1,), None, ())\n    z.store(tl.load_like(x, z))",
                  "call-host"),
    OpKind.ORDER: ("ct.grid_dependency_control_wait()\n    z.store(tl.load_like(x, z))",
                   "wait-form"),
}


def test_each_op_kind_is_enforced(tmp_path):
    assert set(ONE_PER_KIND) == set(OpKind)
    body = "".join(f"def k_{kind.value}(z: tl.Out, x: tl.In):\n    {code}\n\n\n"
                   for kind, (code, _) in ONE_PER_KIND.items())
    mod = _module(tmp_path, body)
    got = {kind: _verdict(getattr(mod, f"k_{kind.value}")) for kind in ONE_PER_KIND}
    want = {kind: verdict for kind, (_, verdict) in ONE_PER_KIND.items()}
    assert got == want
    # the unsafe opt-out lifts exactly the write/view/raw/order refusals (on tl.Raw)
    unsafe = _module(tmp_path, textwrap.dedent("""\
        def w(r: tl.Raw, x: tl.In):
            ct.store(r, index=(0,), tile=ct.load(x, index=(0,), shape=(64,)))


        def v(r: tl.Raw, x: tl.In):
            t = x.tiled_view((64,)).load((0,))


        def a(r: tl.Raw, x: tl.In):
            t = ct.load_advanced_indexing(x, (ct.arange(64, dtype=ct.int32),))


        def h(r: tl.Raw, x: tl.In):
            ct.launch(None, (1,), None, ())


        def o(r: tl.Raw, x: tl.In):
            ct.grid_dependency_control_wait()
        """))
    assert [_verdict(getattr(unsafe, n), unsafe=True) for n in "wvaho"] == \
        ["accepted", "accepted", "accepted", "call-host", "accepted"]


#: what calling ct.<name>(x, ...) in a safe kernel gets, by the name's kind
BY_KIND = {OpKind.READ: "accepted", OpKind.COMPUTE: "accepted", OpKind.WRITE: "write-input",
           OpKind.RAW: "raw-op", OpKind.VIEW: "view-op", OpKind.VALUE: "call-unknown",
           OpKind.HOST: "call-host", OpKind.ORDER: "wait-form"}


def _call_args(name: str) -> str:
    """ct.<name>(x, 0, 0), with a helper in the func position of ops that call one
    (ct.reduce(x, 0, add2), ...): a non-function there is func-argument, tested below."""
    pos = optable.FUNC_ARGUMENT_OPS.get(name)
    if pos is None:
        return "x, 0, 0"
    args = ["x"] + ["0"] * max(2, pos)
    args[pos] = "add2"
    return ", ".join(args)


def test_every_classified_name_gets_its_kinds_verdict(tmp_path):
    """ct.<name>(x, 0, 0) for every public name: the verdict follows the table."""
    names = [n for n in public_names() if n in optable.CT_OPS]
    body = "def add2(a, b):\n    return a + b\n\n\n"
    body += "".join(f"def k_{n}(z: tl.Out, x: tl.In):\n    ct.{n}({_call_args(n)})\n"
                    "    z.store(tl.load_like(x, z))\n\n\n" for n in names)
    mod = _module(tmp_path, body)
    wrong = {}
    for n in names:
        want = BY_KIND[optable.CT_OPS[n]]
        got = _verdict(getattr(mod, f"k_{n}"))
        if got != want:
            wrong[n] = (optable.CT_OPS[n].value, want, got)
    assert not wrong, f"name: (kind, expected, got): {wrong}"


def test_func_argument_ops_check_their_func(tmp_path):
    """The func of ct.reduce / ct.scan (positional index 2, or func=): a plain helper and
    one of cuTile's combiners are accepted, anything else is func-argument, a writing
    helper is write-input."""
    assert set(optable.FUNC_ARGUMENT_OPS) == {"reduce", "scan"}
    body = ("def add2(a, b):\n    return a + b\n\n\n"
            "def put(a, b):\n    ct.store(a, index=(0,), tile=b)\n    return a + b\n\n\n")
    forms = {"helper": "add2", "number": "0", "op": "ct.exp", "writer": "put",
             "combiner": "ct.add"}
    for n in optable.FUNC_ARGUMENT_OPS:
        for form, func in forms.items():
            body += (f"def k_{n}_{form}_pos(z: tl.Out, x: tl.In):\n"
                     f"    t = tl.load_like(x, z)\n"
                     f"    z.store(t + ct.{n}(t, 0, {func}, 0.0))\n\n\n"
                     f"def k_{n}_{form}_kw(z: tl.Out, x: tl.In):\n"
                     f"    t = tl.load_like(x, z)\n"
                     f"    z.store(t + ct.{n}(t, axis=0, func={func}, identity=0.0))\n\n\n")
    mod = _module(tmp_path, body)
    want = {"helper": "accepted", "number": "func-argument", "op": "func-argument",
            "writer": "write-input", "combiner": "accepted"}
    got = {(n, form, how): _verdict(getattr(mod, f"k_{n}_{form}_{how}"))
           for n in optable.FUNC_ARGUMENT_OPS for form in forms for how in ("pos", "kw")}
    wrong = {key: v for key, v in got.items() if v != want[key[1]]}
    assert not wrong, wrong


def test_read_ops_keep_their_bounds_checks(tmp_path):
    reads = [n for n, k in optable.CT_OPS.items() if k == OpKind.READ]
    body = "".join(f"def k_{n}(z: tl.Out, x: tl.In):\n    ct.{n}(x, 0, check_bounds=False)\n"
                   "    z.store(tl.load_like(x, z))\n\n\n" for n in reads)
    mod = _module(tmp_path, body)
    assert {n: _verdict(getattr(mod, f"k_{n}")) for n in reads} == \
        {n: "unchecked-read" for n in reads}


METHOD_TABLES = {
    "TILE_METHODS": (optable.TILE_METHODS, {"accepted"}),
    "WRITE_METHODS": (optable.WRITE_METHODS, {"write-input"}),
    # a tiled view of an input, and loads through it, are bounds-checked reads
    # (tests/compiler/test_soundness_round3_refusals.py); slices are not
    "VIEW_METHODS": (optable.VIEW_METHODS, {"view-op", "accepted"}),
    "READ_METHODS": (optable.READ_METHODS, {"view-op", "raw-op", "accepted"}),
    "RAW_METHODS": (optable.RAW_METHODS, {"raw-op"}),
}


@pytest.mark.parametrize("table", list(METHOD_TABLES))
def test_every_method_table_is_enforced(table, tmp_path):
    """t.<m>(...) on an input array: each method table gets its verdict; any other
    method name is refused."""
    methods, verdicts = METHOD_TABLES[table]
    body = "".join(f"def k_{m}(z: tl.Out, x: tl.In):\n    x.{m}(0, 0)\n"
                   "    z.store(tl.load_like(x, z))\n\n\n" for m in sorted(methods))
    body += "def k_other(z: tl.Out, x: tl.In):\n    x.tofile(0)\n    z.store(tl.load_like(x, z))\n"
    mod = _module(tmp_path, body)
    got = {m: _verdict(getattr(mod, f"k_{m}")) for m in sorted(methods)}
    assert all(v in verdicts for v in got.values()), got
    assert _verdict(mod.k_other) == "method-unknown"


def test_builtins_allowlist():
    """The builtins kernels may call are the ones cuTile compiles; the dynamic ones are
    refused as such."""
    import builtins

    assert optable.BUILTIN_CALLS <= set(dir(builtins))
    assert not optable.BUILTIN_CALLS & optable.DYNAMIC_BUILTINS
    for dangerous in ("getattr", "setattr", "eval", "exec", "globals", "vars", "__import__",
                      "compile", "open", "type"):
        assert dangerous in optable.DYNAMIC_BUILTINS


# ---- every rule is reachable -------------------------------------------------------------


def _corpus_rules() -> dict[str, str]:
    """rule id -> a corpus case raising it."""
    out: dict[str, str] = {}
    for case in corpus.REJECT.values():
        try:
            k = case.build()
            if case.when == "compile":
                k.compile(*case.examples(), arch="sm_90", cache=False)
        except tl.SafetyError as e:
            out.setdefault(getattr(e, "rule", None), case.id)
    return out


def _soundness_rules() -> dict[str, str]:
    out: dict[str, str] = {}
    for case_id, case in cases.ATTEMPTS.items():
        if case.xfail:
            continue                 # a known bug's error does not count
        _stage, err, _steps = S.outcome(case_id)
        if isinstance(err, tl.SafetyError):
            out.setdefault(getattr(err, "rule", None), case_id)
    return out


def test_every_rule_is_reachable():
    reached = {**_soundness_rules(), **_corpus_rules()}
    unreached = sorted(set(RULES) - set(reached))
    assert not unreached, (
        f"no corpus case is refused with {unreached}: add one to tests/compiler/"
        "corpus_kernels.py or soundness_cases.py (or remove the rule)")
    assert None not in reached, f"a SafetyError without .rule: {reached.get(None)}"
    assert set(reached) <= set(RULES), set(reached) - set(RULES)
