"""The kernel library's layout: ``tilelab.kernels`` lists the ops, the planning and tuning
names are ``tilelab.kernels.tuning``, each family package hands on its modules' public
names, the private helpers live in the one ``_host`` package, and the import paths the
docs and notebooks use keep working.
"""
from __future__ import annotations

import doctest
import importlib
import importlib.util
import inspect
import pkgutil

import pytest

import tilelab as tl
import tilelab.kernels as K

TUNING = ["MatmulConfig", "plan_matmul", "plan_bmm", "compile_matmul", "matmul_search_space",
          "AttentionConfig", "DecodeConfig", "plan_attention", "plan_decode_attention",
          "compile_attention", "compile_decode_attention", "attention_search_space", "Plan"]
#: package -> the module whose public names it hands on
FACES = {"matmul": "matmul.host", "attention": "attention.host",
         "reference": "reference.memory_bound"}


def test_the_package_lists_the_ops_only():
    assert not set(TUNING) & set(K.__all__)
    for name in K.__all__:
        obj = getattr(K, name)
        if name in ("Activation", "clear_caches", "rope_tables"):
            continue
        params = inspect.signature(obj).parameters
        assert "sync" in params and "stream" in params, name    # an op: it launches
    assert K.__all__.index("add") == 0


def test_tuning_holds_the_planning_names_as_the_families_define_them():
    assert sorted(K.tuning.__all__) == sorted(TUNING)
    mm = importlib.import_module("tilelab.kernels.matmul.host")
    at = importlib.import_module("tilelab.kernels.attention.host")
    for name in TUNING:
        ours = getattr(K.tuning, name)
        if name == "matmul_search_space":
            assert ours is mm.search_space
        elif name == "Plan":
            assert ours is importlib.import_module("tilelab.kernels._host").Plan
        else:
            assert ours is getattr(mm, name, None) or ours is getattr(at, name), name


@pytest.mark.parametrize("package,module", sorted(FACES.items()))
def test_a_family_package_hands_on_its_public_names(package, module):
    face = importlib.import_module(f"tilelab.kernels.{package}")
    inner = importlib.import_module(f"tilelab.kernels.{module}")
    assert face.__all__ == inner.__all__
    assert all(getattr(face, n) is getattr(inner, n) for n in inner.__all__)


def test_private_helpers_live_in_the_host_package_only():
    names = [m.name for m in pkgutil.walk_packages(K.__path__, "tilelab.kernels.")]
    private = [n for n in names if any(p.startswith("_") for p in n.split(".")[2:])]
    assert private and all(n.startswith("tilelab.kernels._host") for n in private), private
    assert len(names) >= 30 and "tilelab.kernels.decode.step" in names


@pytest.mark.parametrize("name", ["tuning", "matmul", "attention", "reference", "decode"])
def test_package_examples_run(name, monkeypatch):
    monkeypatch.undo()                      # examples show real (unpoisoned) output
    module = importlib.import_module(f"tilelab.kernels.{name}")
    res = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.attempted > 0 and res.failed == 0


def test_the_documented_import_paths_work():
    """The paths README, docs/ and notebooks/ write (``from tilelab.kernels.matmul
    import MatmulConfig, plan_matmul`` in notebook 05, say)."""
    from tilelab.kernels import attention, matmul, reference, softmax
    from tilelab.kernels.attention import (compile_attention, decode_attention,
                                           plan_decode_attention)
    from tilelab.kernels.matmul import MatmulConfig, bmm, gemv, plan_matmul

    assert callable(matmul) and callable(attention) and callable(softmax)
    assert isinstance(MatmulConfig(tm=32, tn=32, tk=16), MatmulConfig)
    assert all(map(callable, (compile_attention, decode_attention, plan_decode_attention,
                              bmm, gemv, plan_matmul, reference.softmax)))
    for path in ("tilelab.kernels.examples", "tilelab.kernels.torch_ops",
                 "tilelab.kernels.elementwise", "tilelab.kernels.norms",
                 "tilelab.kernels.rope", "tilelab.kernels.embedding",
                 "tilelab.kernels.reduce", "tilelab.kernels.reference.matmul",
                 "tilelab.kernels.decode.gemv", "tilelab.kernels.decode.sampling"):
        assert importlib.util.find_spec(path) is not None, path
    assert isinstance(importlib.import_module("tilelab.kernels.examples").gemm, tl.Kernel)
