"""The interpreter's ``cuda.tile`` matches cuTile's public API, and its docs run."""
from __future__ import annotations

import doctest
import importlib
import inspect

import pytest

import cuda.tile as ct
from tilelab.errors import CompileError
from tilelab.interp.namespace import IMPLEMENTATIONS, UNSUPPORTED, module


def _signature(f):
    while hasattr(f, "__wrapped__"):
        f = f.__wrapped__
    return inspect.signature(f)


def _shape(sig):
    return [(p.name, p.kind, repr(p.default)) for p in sig.parameters.values()]


@pytest.mark.parametrize("name", sorted(n for n, v in IMPLEMENTATIONS.items()
                                        if not isinstance(v, type) and n != "function"))
def test_op_signatures_match_cutile(name):
    assert _shape(_signature(IMPLEMENTATIONS[name])) == _shape(_signature(getattr(ct, name)))


@pytest.mark.parametrize("cls,meth", [("Array", "slice"), ("Array", "tiled_view"),
                                      ("TiledView", "load"), ("TiledView", "store"),
                                      ("TiledView", "num_tiles"),
                                      ("TiledView", "atomic_store_add"), ("Tile", "astype"),
                                      ("Tile", "transpose"), ("Tile", "item")])
def test_method_signatures_match_cutile(cls, meth):
    real = _signature(getattr(getattr(ct, cls), meth))
    ours = _signature(getattr(IMPLEMENTATIONS[cls], meth))
    assert [p.name for p in ours.parameters.values()] == \
        [p.name for p in real.parameters.values()]


@pytest.mark.parametrize("meth", ["load_offset", "store_offset", "atomic_cas_offset",
                                  "atomic_xchg_offset", "atomic_add_offset",
                                  "atomic_max_offset", "atomic_min_offset",
                                  "atomic_and_offset", "atomic_or_offset",
                                  "atomic_xor_offset"])
def test_raw_memory_signatures_match_cutile(meth):
    from cuda.tile._stub import RawArrayMemory as Stub
    from tilelab.interp.values.arrays import RawArrayMemory
    assert _shape(_signature(getattr(RawArrayMemory, meth))) == \
        _shape(_signature(getattr(Stub, meth)))


def test_every_public_name_is_implemented_or_refused_clearly():
    for name in ct.__all__:
        assert hasattr(module, name), name
    assert set(UNSUPPORTED) <= set(ct.__all__)
    with pytest.raises(CompileError, match="module 'cuda.tile' has no attribute 'nope'"):
        getattr(module, "nope")


@pytest.mark.parametrize("mod", ["launch", "trace", "races", "values.tile", "values.dtypes",
                                 "values.rounding", "ops.misc", "context", "values.arrays",
                                 "foreign", "ops.matmul", "ops.raw"])
def test_docstring_examples(mod):
    m = importlib.import_module(f"tilelab.interp.{mod}")
    failures, _ = doctest.testmod(m, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert failures == 0
