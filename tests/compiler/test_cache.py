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


@pytest.mark.toolchain
def test_second_compile_hits_and_matches(cache_dir):
    a = vector_add.compile(*ARGS, arch="sm_90")
    b = vector_add.compile(*ARGS, arch="sm_90")
    assert not a.cache_hit and b.cache_hit
    assert a.cubin == b.cubin and a.tileir == b.tileir and a.symbol == b.symbol
    assert a.remarks_text == b.remarks_text
    assert len(entries(cache_dir)) == 1


@pytest.mark.toolchain
def test_key_covers_arch_options_and_specialization(cache_dir):
    vector_add.compile(*ARGS, arch="sm_90")
    assert not vector_add.compile(*ARGS, arch="sm_80").cache_hit
    y = tl.spec(1 << 14, "float16")
    assert not vector_add.compile(y.partition(1024), y, y, arch="sm_90").cache_hit
    odd = tl.spec(1000, "float32")   # different divisibility -> different code
    assert not vector_add.compile(odd.partition(1024), odd, odd, arch="sm_90").cache_hit
    assert len(entries(cache_dir)) == 4


@pytest.mark.toolchain
def test_key_covers_the_device_index_helpers(cache_dir, monkeypatch):
    """Lowered kernels call tilelab.compiler.tile_index's index helpers: editing them (an
    editable checkout keeps its version number) must not reuse old cubins."""
    from tilelab.compiler import export

    vector_add.compile(*ARGS, arch="sm_90")
    assert vector_add.compile(*ARGS, arch="sm_90").cache_hit
    monkeypatch.setattr(export, "device_helpers_digest", lambda: "0" * 64)
    assert not vector_add.compile(*ARGS, arch="sm_90").cache_hit


def test_the_helpers_digest_covers_their_file_name(monkeypatch):
    """A cached entry's Tile IR names the index helpers' file in its locations (the
    validator recognises the sub-tile store by it): the same text under another file
    name is another key, so an entry whose Tile IR names the old file is not reused."""
    from tilelab.compiler import export, tile_index

    digest = export.device_helpers_digest.__wrapped__
    before = digest()
    assert digest() == before
    monkeypatch.setattr(tile_index, "__file__",
                        tile_index.__file__.replace("tile_index.py", "helpers.py"))
    assert digest() != before


@pytest.mark.toolchain
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


@pytest.mark.toolchain
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


@pytest.mark.toolchain
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


@pytest.mark.subprocess
def test_new_process_hits_the_cache(cache_dir):
    env = dict(os.environ)
    first = _compile_in_child(env)
    second = _compile_in_child(env)
    assert not first["hit"] and second["hit"]
    assert first["sha"] == second["sha"]


@pytest.mark.subprocess
def test_concurrent_processes_write_one_valid_entry(cache_dir):
    env = dict(os.environ)
    with ProcessPoolExecutor(max_workers=4) as ex:
        results = list(ex.map(_compile_in_child, [env] * 4))
    assert len({r["sha"] for r in results}) == 1
    assert len(entries(cache_dir)) == 1
    assert not list((cache_dir / "v1").glob("*/.*"))   # no temporary leftovers
    assert _compile_in_child(env)["hit"]


@pytest.mark.subprocess
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


# ---- meta.json is checksummed as a whole -------------------------------------------------


def _edit_meta(entry: Path, **changes) -> dict:
    meta = json.loads((entry / "meta.json").read_text())
    meta.update(changes)
    (entry / "meta.json").write_text(json.dumps(meta))
    return meta


@pytest.mark.parametrize("field, value", [("symbol", "other_kernel_symbol"),
                                          ("toolchain", "tileiras 99.9 (forged)"),
                                          ("kernel", "someone_else"), ("arch", "sm_80")])
@pytest.mark.toolchain
def test_an_edited_meta_field_is_not_loaded(cache_dir, field, value):
    a = vector_add.compile(*ARGS, arch="sm_90")
    [entry] = entries(cache_dir)
    _edit_meta(entry, **{field: value})
    b = vector_add.compile(*ARGS, arch="sm_90")
    assert not b.cache_hit and b.symbol == a.symbol and b.cubin == a.cubin
    c = vector_add.compile(*ARGS, arch="sm_90")   # the rebuilt entry is good again
    assert c.cache_hit and c.symbol == a.symbol
    assert value not in json.dumps(json.loads((entries(cache_dir)[0] / "meta.json").read_text()))


@pytest.mark.toolchain
def test_an_entry_without_the_meta_checksum_is_rebuilt(cache_dir):
    from tilelab.compiler.cache import META_DIGEST

    vector_add.compile(*ARGS, arch="sm_90")
    [entry] = entries(cache_dir)
    meta = json.loads((entry / "meta.json").read_text())
    assert len(meta[META_DIGEST]) == 64
    del meta[META_DIGEST]                    # what an older tilelab wrote
    (entry / "meta.json").write_text(json.dumps(meta))
    assert DiskCache(cache_dir).load(meta["key"]) is None
    assert not entries(cache_dir)            # dropped, so the next store rebuilds it
    assert not vector_add.compile(*ARGS, arch="sm_90").cache_hit
    assert vector_add.compile(*ARGS, arch="sm_90").cache_hit


@pytest.mark.toolchain
def test_a_hit_says_which_toolchain_built_it(cache_dir):
    a = vector_add.compile(*ARGS, arch="sm_90")
    b = vector_add.compile(*ARGS, arch="sm_90")
    assert not a.toolchain.startswith("cached")
    assert b.cache_hit and b.toolchain == f"cached: built by {a.toolchain}"
    assert f"toolchain: cached: built by {a.toolchain}" in b.summary()


# ---- a cache that cannot be written ---------------------------------------------------------


@pytest.fixture
def fresh_warnings(monkeypatch):
    from tilelab.compiler import cache as cache_mod

    monkeypatch.setattr(cache_mod, "_WARNED", set())


def _compile_twice(root: Path, recwarn) -> list:
    arts = [vector_add.compile(*ARGS, arch="sm_90", cache=DiskCache(root)) for _ in range(2)]
    for art in arts:                         # compiled, returned, never lost
        assert art.cubin[:4] == b"\x7fELF" and not art.cache_hit
    return [w for w in recwarn.list if "tilelab cache" in str(w.message)]


@pytest.mark.toolchain
def test_a_cache_path_that_is_a_file_warns_once_and_compiles(tmp_path, fresh_warnings,
                                                             recwarn):
    root = tmp_path / "not-a-dir"
    root.write_text("I am a file")
    warned = _compile_twice(root, recwarn)
    assert len(warned) == 1 and warned[0].category is RuntimeWarning
    msg = str(warned[0].message)
    assert msg.startswith(f"tilelab cache at {root} cannot be written (")
    assert "compiling without caching" in msg
    assert root.read_text() == "I am a file"


@pytest.mark.parametrize("err, reason", [(30, "Read-only file system"),
                                         (28, "No space left on device"),
                                         (13, "Permission denied")])
@pytest.mark.toolchain
def test_a_read_only_or_full_cache_warns_once_and_compiles(tmp_path, monkeypatch,
                                                           fresh_warnings, recwarn, err,
                                                           reason):
    from tilelab.compiler import cache as cache_mod

    real_write = Path.write_bytes

    def write_bytes(self, data):
        if cache_mod.FORMAT in self.parts:
            raise OSError(err, os.strerror(err), str(self))
        return real_write(self, data)
    monkeypatch.setattr(Path, "write_bytes", write_bytes)
    root = tmp_path / "cache"
    warned = _compile_twice(root, recwarn)
    assert len(warned) == 1
    assert f"tilelab cache at {root} cannot be written ({reason})" in str(warned[0].message)
    assert not entries(root) and not list((root / "v1").glob("*/.*"))  # nothing half-written
    # another cache path warns on its own
    other = tmp_path / "other"
    assert len(_compile_twice(other, recwarn)) == 2


def test_store_reports_whether_it_cached(tmp_path, fresh_warnings):
    assert DiskCache(tmp_path).store("a" * 64, {"cubin": b"x"}, {"symbol": "k"}) is True
    f = tmp_path / "file"
    f.write_text("")
    with pytest.warns(RuntimeWarning, match="cannot be written"):
        assert DiskCache(f).store("a" * 64, {"cubin": b"x"}, {"symbol": "k"}) is False
    assert DiskCache(f).load("a" * 64) is None


# ---- shortcuts: a name that leads to an entry while its inputs are unchanged ----

KEY = "ab" * 32


@pytest.fixture
def shortcut(tmp_path):
    """A cache with one entry, and an input file the shortcut to it depends on."""
    from tilelab.compiler.input_fingerprints import fingerprints

    cache = DiskCache(tmp_path / "cache")
    assert cache.store(KEY, {"cubin": b"\x7fELF"}, {"symbol": "add"})
    source = tmp_path / "kernels.py"
    source.write_text("x = 1\n")
    assert cache.remember("cmd", KEY, fingerprints([str(source)]), {"kernel": "add"})
    return cache, source


def test_a_shortcut_leads_to_its_entry(shortcut):
    cache, _ = shortcut
    files, meta, extra = cache.recall("cmd")
    assert files == {"cubin": b"\x7fELF"} and meta["symbol"] == "add"
    assert extra == {"kernel": "add"}
    assert cache.recall("other") is None


def test_a_changed_input_breaks_the_shortcut(shortcut):
    cache, source = shortcut
    source.write_text("x = 2\n")
    assert cache.recall("cmd") is None
    assert not (cache.root / "shortcuts-v1" / "cmd.json").exists()   # removed


def test_a_touched_but_unchanged_input_keeps_the_shortcut(shortcut):
    cache, source = shortcut
    os.utime(source, (1, 1))              # content fingerprints ignore times
    assert cache.recall("cmd") is not None


def test_a_deleted_input_breaks_the_shortcut(shortcut):
    cache, source = shortcut
    source.unlink()
    assert cache.recall("cmd") is None


def test_a_shortcut_to_a_gone_or_rebuilt_entry_is_dropped(shortcut):
    cache, _ = shortcut
    cache.discard(KEY)
    assert cache.recall("cmd") is None
    cache.store(KEY, {"cubin": b"\x7fELF"}, {"symbol": "add"})   # the same key, rebuilt
    assert cache.recall("cmd") is None    # not the entry the shortcut was made from


def test_a_corrupt_or_edited_shortcut_is_ignored(shortcut):
    cache, _ = shortcut
    path = cache.root / "shortcuts-v1" / "cmd.json"
    record = json.loads(path.read_text())
    record["entry"] = "cd" * 32
    path.write_text(json.dumps(record))
    assert cache.recall("cmd") is None and not path.exists()
    path.write_text("{not json")
    assert cache.recall("cmd") is None and not path.exists()


def test_shortcuts_are_bounded_and_cleared(shortcut, monkeypatch):
    from tilelab.compiler import cache as cache_mod

    cache, _ = shortcut
    monkeypatch.setattr(cache_mod, "MAX_SHORTCUTS", 2)
    folder = cache.root / "shortcuts-v1"
    os.utime(folder / "cmd.json", (1, 1))          # the least recently used
    for name in ("b", "c"):
        assert cache.remember(name, KEY, {}, {})
    assert sorted(p.stem for p in folder.glob("*.json")) == ["b", "c"]
    cache.clear()
    assert not folder.exists() and cache.recall("b") is None


@pytest.mark.subprocess
def test_fingerprints_by_content_outside_the_interpreter_by_stat_inside(tmp_path):
    from tilelab.compiler.input_fingerprints import fingerprint, fingerprints, unchanged

    mine = tmp_path / "mine.py"
    mine.write_text("y = 1\n")
    (tmp_path / "__pycache__").mkdir()
    pyc = tmp_path / "__pycache__" / "mine.cpython-311.pyc"
    pyc.write_bytes(b"derived from mine.py")
    installed = json.__file__                      # the standard library
    prints = fingerprints([str(mine), installed, str(tmp_path / "gone.py"), "/proc/self/status",
                           str(pyc)], programs=[sys.executable],
                          skip=())
    assert prints[str(mine)].startswith("sha256:") and prints[installed].startswith("stat:")
    assert prints[sys.executable].startswith("stat:")
    assert set(prints) == {str(mine), installed, sys.executable}
    assert unchanged(prints)
    assert fingerprints([str(mine)], skip=(str(tmp_path),)) == {}
    assert fingerprint(str(tmp_path)) is None       # a directory is no input file
