"""The suite's op table (``benchmarks.suite.kernels.SOURCES``): one line per op names
the library function, the tour stand-in and the raw twins, and the registry takes what
the line names, nothing else."""
from __future__ import annotations

import importlib
import textwrap

import pytest

from benchmarks.suite.cases import OPS
from benchmarks.suite.kernels import SOURCES, Registry, is_host_function
from support.backends import cpu_backend_private_cache  # noqa: F401 (autouse fixture)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def test_every_op_has_one_line_and_every_line_an_op():
    assert set(SOURCES) == set(OPS)


@pytest.mark.parametrize("op", sorted(SOURCES))
def test_the_library_function_is_the_one_the_registry_times(op):
    """The named function is a host function of ``tilelab.kernels``' public API, and the
    registry's safe implementation calls that very function (the tuning wrapper keeps it
    as ``fn``)."""
    import tilelab.kernels as kernels

    want = getattr(kernels, SOURCES[op].library)
    assert is_host_function(want), (op, want)
    impl = Registry(tune=False).safe(op)
    assert impl is not None and impl.family == "library"
    assert impl.name == f"{want.__module__}:{SOURCES[op].library}"
    assert getattr(impl.fn, "fn", impl.fn) is want


def test_the_named_twins_and_stand_ins_exist():
    raw_library = importlib.import_module("benchmarks.baselines.raw_matmul_attention")
    raw_tour = importlib.import_module("benchmarks.baselines.raw_kernels")
    examples = importlib.import_module("tilelab.kernels.examples")
    for op, src in SOURCES.items():
        if src.raw_library:
            assert callable(getattr(raw_library, src.raw_library)), op
        if src.raw_tour:
            assert hasattr(raw_tour, src.raw_tour), op
        if src.tour:
            assert hasattr(examples, src.tour), op
    reg = Registry(tune=False)
    for op in ("gemm", "gemv", "attention"):
        assert reg.raw(op, "library").name == (
            "benchmarks/baselines/raw_matmul_attention.py "
            f"(raw_{'matmul' if op == 'gemm' else op} adapter)")


def test_a_name_the_table_does_not_give_is_not_found(tmp_path, monkeypatch):
    """A package whose GEMM is called ``gemm`` (a name the table does not give) has no
    GEMM for the suite: its cases are missing rather than a guess timed."""
    pkg = tmp_path / "otherkernels"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent('''
        def gemm(a, b, *, out=None):
            return out

        def softmax(x, *, out=None):
            return out
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = Registry(kernel_package="otherkernels", tour=False, tune=False)
    assert reg.safe("gemm") is None
    assert reg.safe("softmax").name == "otherkernels:softmax"
    assert reg.report()["ops"]["gemm"]["tilelab"] is None
