"""The kernel library's helper and split modules: their examples run, their public names
are documented, and every name importable before the split still is, from where it was.
"""
from __future__ import annotations

import doctest
import importlib
import inspect

import pytest

import tilelab as tl

SPLIT = ["activation", "_host.device", "_host.args", "_host.tiles", "_host.plan",
         "_host.wrappers", "_host.calls", "_host", "matmul.config", "matmul.kernels",
         "attention.config", "attention.kernels"]


@pytest.mark.parametrize("name", SPLIT)
def test_examples_run(name, monkeypatch):
    monkeypatch.undo()                      # examples show real (unpoisoned) output
    module = importlib.import_module(f"tilelab.kernels.{name}")
    res = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.attempted > 0 and res.failed == 0


@pytest.mark.parametrize("name", SPLIT)
def test_public_names_have_examples(name):
    module = importlib.import_module(f"tilelab.kernels.{name}")
    for attr in module.__all__:
        obj = getattr(module, attr)
        if inspect.isfunction(obj) or inspect.isclass(obj) or isinstance(obj, tl.Kernel):
            assert "Example" in (obj.__doc__ or ""), f"{name}.{attr}"


#: names other modules, tests and tools imported before the helpers moved
HOST_NAMES = ["Plan", "run_launches", "done_future", "as_tensor", "hinted", "CallCache",
              "register_constant", "workspace", "has_workspace", "clear_caches",
              "cache_info", "TensorResult", "PairResult", "hash_once", "state_without_hash",
              "_hinted_copy", "_NATIVE", "_part", "_Tensor", "_Uncacheable", "_wrap"]
MATMUL_NAMES = ["MatmulConfig", "ACTIVATIONS", "SCHEDULES", "Plan", "default_config",
                "search_space", "matmul", "bmm", "gemv", "plan_matmul", "plan_bmm",
                "compile_matmul", "matmul_kernel", "persistent_matmul_kernel",
                "batched_matmul_kernel", "splitk_partial_kernel", "splitk_reduce_kernel",
                "splitk_atomic_kernel", "gemv_kernel", "gemv_rows_kernel", "SPLIT_MODES",
                "_variant", "_workspace_ready"]
ATTENTION_NAMES = ["AttentionConfig", "DecodeConfig", "default_attention_config",
                   "default_decode_config", "attention_search_space", "attention",
                   "decode_attention", "plan_attention", "plan_decode_attention",
                   "compile_attention", "compile_decode_attention", "flash_attention_kernel",
                   "persistent_attention_kernel", "decode_split_kernel",
                   "decode_combine_kernel", "LOG2E", "ROW_SUMS", "_attention_launches",
                   "_num_splits"]
ELEMENTWISE_NAMES = ["add", "sub", "mul", "div", "maximum", "minimum", "binary", "exp",
                     "relu", "gelu", "silu", "sigmoid", "unary", "ACTIVATIONS", "BINARY_OPS",
                     "TILE_ELEMS", "binary_kernel", "binary_scalar_kernel", "unary_kernel",
                     "_binary_call", "_unary_call"]


@pytest.mark.parametrize("module,names", [("_host", HOST_NAMES), ("matmul.host", MATMUL_NAMES),
                                          ("elementwise", ELEMENTWISE_NAMES),
                                          ("attention.host", ATTENTION_NAMES)])
def test_names_stay_importable(module, names):
    mod = importlib.import_module(f"tilelab.kernels.{module}")
    missing = [n for n in names if not hasattr(mod, n)]
    assert not missing, f"tilelab.kernels.{module} lost {missing}"


def test_host_reexports_are_the_same_objects():
    """Tests switch the native key builder through ``_host._NATIVE``: it must be the one
    list the prepared-call cache reads."""
    host = importlib.import_module("tilelab.kernels._host")
    calls = importlib.import_module("tilelab.kernels._host.calls")
    assert host._NATIVE is calls._NATIVE and host.CallCache is calls.CallCache
    assert host.ROW_HINTS is importlib.import_module("tilelab.kernels._host.tiles").ROW_HINTS


def test_one_copy_of_the_shared_helpers():
    """``pow2_ceil``, ``dtype_name``, the power-of-two check and tensor conversion have one
    definition each, in ``_host.args``; the kernel modules use it."""
    args = importlib.import_module("tilelab.kernels._host.args")
    for name in ("softmax", "norms", "rope", "reduce", "embedding", "attention.host",
                 "matmul.config"):
        mod = importlib.import_module(f"tilelab.kernels.{name}")
        for helper in ("pow2_ceil", "is_pow2", "dtype_name", "tensor_arg"):
            if hasattr(mod, helper):
                assert getattr(mod, helper) is getattr(args, helper), (name, helper)
        assert not hasattr(mod, "_pow2") and not hasattr(mod, "_pow2_ceil"), name
        assert not hasattr(mod, "_dtype_name"), name


def test_launch_args_names_every_parameter():
    from tilelab.kernels._host import launch_args
    from tilelab.kernels.examples import gemm

    assert launch_args(gemm, c=1, a=2, b=3, K_TILE=4) == (1, 2, 3, 4)
    with pytest.raises(TypeError, match=r"launch_args\(gemm\): missing \['K_TILE'\], "
                                        r"unknown \['K'\]; the parameters are c, a, b, K_TILE"):
        launch_args(gemm, c=1, a=2, b=3, K=4)
