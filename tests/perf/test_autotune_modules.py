"""The modules ``tl.autotune`` is split into: their examples run, their public names are
documented, and every name importable from ``tilelab.perf.autotune`` still is."""
from __future__ import annotations

import doctest
import importlib
import inspect

import pytest

PARTS = ["autotune", "autotune_keys", "autotune_gate", "autotune_search", "autotune_records"]


@pytest.mark.parametrize("name", PARTS)
def test_examples_run(name):
    module = importlib.import_module(f"tilelab.perf.{name}")
    res = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert res.attempted > 0 and res.failed == 0


@pytest.mark.parametrize("name", PARTS)
def test_public_functions_have_examples(name):
    module = importlib.import_module(f"tilelab.perf.{name}")
    for attr in module.__all__:
        obj = getattr(module, attr)
        if inspect.isfunction(obj):
            assert "Example" in (obj.__doc__ or ""), f"{name}.{attr}"


def test_names_stay_importable():
    at = importlib.import_module("tilelab.perf.autotune")
    for name in ("autotune", "Autotuned", "AutotuneError", "AutotuneWarning", "pow2_bucket",
                 "relative_error", "config_json", "RECHECK_WITHIN", "_versions", "_arch"):
        assert hasattr(at, name), name
