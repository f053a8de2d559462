"""Derived data kept beside a cache entry: the ptxas -v numbers of ``art.resources`` are
computed once per cached kernel, and a later cache hit shows them without running ptxas."""
from __future__ import annotations

import pytest

import tilelab as tl
from tilelab import config
from tilelab.compiler.artifacts import PTXAS_INFO, Artifacts
from tilelab.compiler.cache import read_sidecar, write_sidecar
from tilelab.kernels.examples import vector_add

X = tl.spec(1 << 12, "float32")
ARGS = (X.partition(256), X, X)


@pytest.fixture
def cache_dir(tmp_path):
    d = tmp_path / "cache"
    with config.override(cache_dir=str(d)):
        yield d


def test_sidecars_go_only_into_existing_entries(tmp_path):
    assert write_sidecar(tmp_path / "gone", "x.json", {"a": 1}) is False
    entry = tmp_path / "entry"
    entry.mkdir()
    assert write_sidecar(entry, "x.json", 1) is False          # no meta.json: not an entry
    (entry / "meta.json").write_text("{}")
    assert write_sidecar(entry, "x.json", {"a": [1, 2]}) is True
    assert read_sidecar(entry, "x.json") == {"a": [1, 2]}
    assert sorted(p.name for p in entry.iterdir()) == ["meta.json", "x.json"]   # no temp
    (entry / "bad.json").write_text("{not json")
    assert read_sidecar(entry, "bad.json") is None and read_sidecar(entry, "no.json") is None


@pytest.mark.toolchain
def test_a_cache_hit_reads_the_ptxas_numbers_kept_by_the_first_compile(cache_dir,
                                                                       monkeypatch):
    first = vector_add.compile(*ARGS, arch="sm_90", force=True)
    assert first.cache_entry is not None and first.cache_entry.is_relative_to(cache_dir)
    shown = str(first.resources)
    kept = read_sidecar(first.cache_entry, PTXAS_INFO)
    assert set(kept) == {first.symbol}

    def no_ptxas(self):
        raise AssertionError("ptxas ran on a cache hit whose numbers were kept")

    monkeypatch.setattr(Artifacts, "_run_ptxas", no_ptxas)
    hit = vector_add.compile(*ARGS, arch="sm_90")
    assert hit.cache_hit and hit.cache_entry == first.cache_entry
    assert str(hit.resources) == shown


@pytest.mark.toolchain
def test_an_uncached_compile_keeps_nothing():
    with config.override(cache="0"):
        art = vector_add.compile(*ARGS, arch="sm_90")
    assert art.cache_entry is None and not art.cache_hit
    assert art.resources.registers is not None
