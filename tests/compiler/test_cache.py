"""The disk cache: hits across processes, atomic concurrent writes, corruption, bounds."""
import json
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

import tilelab as tl
from tilelab.compiler.cache import DiskCache
from tilelab.kernels.examples import vector_add

X = tl.spec(1 << 14, "float32")
ARGS = (X.partition(1024), X, X)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(d))
    return d


def entries(root: Path) -> list[Path]:
    return [p for p in (root / "v1").glob("*/*") if not p.name.startswith(".")]


def test_second_compile_hits_and_matches(cache_dir):
    a = vector_add.compile(*ARGS, arch="sm_90")
    b = vector_add.compile(*ARGS, arch="sm_90")
    assert not a.cache_hit and b.cache_hit
    assert a.cubin == b.cubin and a.tileir == b.tileir and a.symbol == b.symbol
    assert a.remarks_text == b.remarks_text
    assert len(entries(cache_dir)) == 1


def test_key_covers_arch_options_and_specialization(cache_dir):
    vector_add.compile(*ARGS, arch="sm_90")
    assert not vector_add.compile(*ARGS, arch="sm_80").cache_hit
    y = tl.spec(1 << 14, "float16")
    assert not vector_add.compile(y.partition(1024), y, y, arch="sm_90").cache_hit
    odd = tl.spec(1000, "float32")   # different divisibility -> different code
    assert not vector_add.compile(odd.partition(1024), odd, odd, arch="sm_90").cache_hit
    assert len(entries(cache_dir)) == 4


def test_key_covers_the_device_index_helpers(cache_dir, monkeypatch):
    """Lowered kernels call tilelab.compiler.device's index helpers: editing them (an
    editable checkout keeps its version number) must not reuse old cubins."""
    from tilelab.compiler import export

    vector_add.compile(*ARGS, arch="sm_90")
    assert vector_add.compile(*ARGS, arch="sm_90").cache_hit
    monkeypatch.setattr(export, "device_helpers_digest", lambda: "0" * 64)
    assert not vector_add.compile(*ARGS, arch="sm_90").cache_hit


def test_corrupt_entry_is_rebuilt_not_loaded(cache_dir):
    a = vector_add.compile(*ARGS, arch="sm_90")
    [entry] = entries(cache_dir)
    cubin = entry / "cubin"
    data = bytearray(cubin.read_bytes())
    data[100] ^= 0xFF
    cubin.write_bytes(bytes(data))
    b = vector_add.compile(*ARGS, arch="sm_90")
    assert not b.cache_hit and b.cubin == a.cubin
    c = vector_add.compile(*ARGS, arch="sm_90")
    assert c.cache_hit and c.cubin == a.cubin


def test_truncated_metadata_is_ignored(cache_dir):
    vector_add.compile(*ARGS, arch="sm_90")
    [entry] = entries(cache_dir)
    (entry / "meta.json").write_text('{"files": ')
    assert not vector_add.compile(*ARGS, arch="sm_90").cache_hit


def test_cache_is_bounded_lru(tmp_path):
    c = DiskCache(tmp_path, max_bytes=3000)
    for i in range(6):
        c.store(f"{i:064x}", {"cubin": bytes(1000)}, {"symbol": "k"})
        os.utime(c._entry(f"{i:064x}"), (i, i))   # make the order deterministic
    st = c.stats()
    assert st.bytes <= 3000 and st.entries < 6
    assert c.load(f"{5:064x}") is not None      # the newest survived
    assert c.load(f"{0:064x}") is None          # the oldest went


def test_disabled_by_env(monkeypatch, cache_dir):
    monkeypatch.setenv("TILELAB_CACHE", "0")
    vector_add.compile(*ARGS, arch="sm_90")
    assert not vector_add.compile(*ARGS, arch="sm_90").cache_hit
    assert not (cache_dir / "v1").exists()


_CHILD = textwrap.dedent("""
    import json, sys, time
    import tilelab as tl
    from tilelab.kernels.examples import vector_add
    x = tl.spec(1 << 14, "float32")
    t = time.perf_counter()
    a = vector_add.compile(x.partition(1024), x, x, arch="sm_90")
    print(json.dumps({"hit": a.cache_hit, "seconds": time.perf_counter() - t,
                      "sha": __import__("hashlib").sha256(a.cubin).hexdigest()}))
""")


def _compile_in_child(env) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_new_process_hits_the_cache(cache_dir):
    env = dict(os.environ)
    first = _compile_in_child(env)
    second = _compile_in_child(env)
    assert not first["hit"] and second["hit"]
    assert first["sha"] == second["sha"]


def test_concurrent_processes_write_one_valid_entry(cache_dir):
    env = dict(os.environ)
    with ProcessPoolExecutor(max_workers=4) as ex:
        results = list(ex.map(_compile_in_child, [env] * 4))
    assert len({r["sha"] for r in results}) == 1
    assert len(entries(cache_dir)) == 1
    assert not list((cache_dir / "v1").glob("*/.*"))   # no temporary leftovers
    assert _compile_in_child(env)["hit"]


def test_cli_cache_info_and_clear(cache_dir):
    vector_add.compile(*ARGS, arch="sm_90")
    env = dict(os.environ)
    info = subprocess.run([sys.executable, "-m", "tilelab", "cache", "info"], env=env, capture_output=True,
                          text=True)
    assert info.returncode == 0 and "1 kernels" in info.stdout and str(cache_dir) in info.stdout
    clear = subprocess.run([sys.executable, "-m", "tilelab", "cache", "clear"], env=env, capture_output=True,
                           text=True)
    assert "removed 1 cached kernels" in clear.stdout
    assert not entries(cache_dir)
