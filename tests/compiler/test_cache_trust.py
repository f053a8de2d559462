"""Who the disk cache trusts: only entries its user's secret key signed, only in a
directory nobody else can write (docs/safety.md, "Caches: the trust model").

The attacks are written as an attacker would write them after reading
tilelab/compiler/cache.py: every sha256 of ``meta.json`` recomputed, and its MAC field
filled with whatever can be computed without the victim's key.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

ct = pytest.importorskip("cuda.tile", reason="cuda-tile (cuTile Python) is not installed")

import tilelab as tl  # noqa: E402
from tilelab import config  # noqa: E402
from tilelab.compiler import cache_trust  # noqa: E402
from tilelab.compiler import export  # noqa: E402
from tilelab.compiler.cache import META_DIGEST, DiskCache  # noqa: E402
from tilelab.compiler.cache_trust import load_key, mac  # noqa: E402
from tilelab.errors import ConfigError  # noqa: E402
from tilelab.kernels.examples import vector_add  # noqa: E402

X = tl.spec(1 << 14, "float32")
ARGS = (X.partition(1024), X, X)


@tl.kernel(unsafe=True)
def scatter_anywhere(z: tl.Raw, x: tl.In):
    """An unsafe kernel: it writes wherever its indices say."""
    i = ct.bid(0) * 256 + ct.arange(256, dtype=ct.int32)
    ct.scatter(z, i, ct.gather(x, i))


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(d))
    monkeypatch.setenv("TILELAB_CACHE_KEY", str(tmp_path / "config" / "cache.key"))
    return d


@pytest.fixture
def exports(monkeypatch) -> list:
    """Counts the compiles that really run cuTile's frontend (a hit runs none)."""
    calls: list = []
    real = export._export

    def counting(*a, **k):
        calls.append(a[1].name)
        return real(*a, **k)
    monkeypatch.setattr(export, "_export", counting)
    return calls


def entry_of(root: Path, key: str) -> Path:
    return root / "v1" / key[:2] / key


def forge(entry: Path, mac_field: str) -> None:
    """Recompute every sha256 of the entry's meta.json, then its MAC field as
    ``mac_field`` says: 'sha256' (the digest of every other field, as tilelab wrote it
    before entries were signed) or 'own-key' (an HMAC under the attacker's own key)."""
    meta = json.loads((entry / "meta.json").read_text())
    for name in meta["files"]:
        meta["files"][name] = hashlib.sha256((entry / name).read_bytes()).hexdigest()
    meta["bytes"] = sum((entry / n).stat().st_size for n in meta["files"])
    body = {k: v for k, v in meta.items() if k != META_DIGEST}
    if mac_field == "sha256":
        meta[META_DIGEST] = hashlib.sha256(json.dumps(body, sort_keys=True).encode()
                                           ).hexdigest()
    else:
        meta[META_DIGEST] = mac(os.urandom(32), "entry", body)
    (entry / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True))


def plant_unsafe_cubin(root: Path) -> tuple[Path, bytes, bytes]:
    """Compile the safe vector_add and the unsafe kernel into the cache at ``root``,
    then put the unsafe kernel's cubin and symbol into vector_add's entry. Returns
    (that entry, the safe cubin, the unsafe cubin)."""
    safe = vector_add.compile(*ARGS, arch="sm_90")
    evil = scatter_anywhere.with_grid((16,)).compile(X, X, arch="sm_90")
    assert not safe.cache_hit and safe.cubin != evil.cubin
    entry = entry_of(root, safe.key)
    (entry / "cubin").write_bytes(evil.cubin)
    meta = json.loads((entry / "meta.json").read_text())
    meta["symbol"] = evil.symbol
    (entry / "meta.json").write_text(json.dumps(meta))
    return entry, safe.cubin, evil.cubin


# ---- a writer of the cache cannot make a safe kernel serve foreign code ----------------------


@pytest.mark.parametrize("mac_field", ["sha256", "own-key"])
@pytest.mark.toolchain
def test_a_planted_cubin_with_recomputed_checksums_is_not_served(cache_dir, exports,
                                                                 mac_field):
    entry, safe_cubin, evil_cubin = plant_unsafe_cubin(cache_dir)
    forge(entry, mac_field)
    exports.clear()
    with pytest.warns(RuntimeWarning, match="was not loaded: its MAC does not verify with "
                                            "your cache key"):
        again = vector_add.compile(*ARGS, arch="sm_90")
    assert not again.cache_hit and again.cubin == safe_cubin != evil_cubin
    assert exports == ["vector_add"]                   # compiled again, from the source
    hit = vector_add.compile(*ARGS, arch="sm_90")      # the rebuilt entry is served
    assert hit.cache_hit and hit.cubin == safe_cubin and exports == ["vector_add"]
    count, last = DiskCache(cache_dir).rejections()
    assert count == 1 and "MAC does not verify" in last


@pytest.mark.toolchain
def test_with_the_victims_key_the_same_forgery_is_served(cache_dir):
    """The boundary of the promise: whoever holds the key (the user's own account) can
    sign anything. This is the forgery above, signed with the real key."""
    entry, safe_cubin, evil_cubin = plant_unsafe_cubin(cache_dir)
    forge(entry, "sha256")
    meta = json.loads((entry / "meta.json").read_text())
    body = {k: v for k, v in meta.items() if k != META_DIGEST}
    meta[META_DIGEST] = mac(load_key(), "entry", body)
    (entry / "meta.json").write_text(json.dumps(meta))
    served = vector_add.compile(*ARGS, arch="sm_90")
    assert served.cache_hit and served.cubin == evil_cubin


@pytest.mark.toolchain
def test_a_signed_entry_moved_under_another_kernels_key_is_not_served(cache_dir, exports):
    """The unsafe kernel's own entry, validly signed, copied whole into the safe kernel's
    place: its MAC covers its key, so it does not pass for another kernel."""
    safe = vector_add.compile(*ARGS, arch="sm_90")
    evil = scatter_anywhere.with_grid((16,)).compile(X, X, arch="sm_90")
    target = entry_of(cache_dir, safe.key)
    shutil.rmtree(target)
    shutil.copytree(entry_of(cache_dir, evil.key), target)
    exports.clear()
    with pytest.warns(RuntimeWarning, match="signed for another kernel"):
        again = vector_add.compile(*ARGS, arch="sm_90")
    assert not again.cache_hit and again.cubin == safe.cubin and exports == ["vector_add"]


@pytest.mark.toolchain
def test_a_cache_signed_with_another_key_misses_and_recompiles(cache_dir, tmp_path,
                                                               exports):
    """A cache copied to another user (or restored under a new key): every entry is a
    miss, compiled again and re-signed; the first key then misses in turn."""
    first = vector_add.compile(*ARGS, arch="sm_90")
    with config.override(cache_key=str(tmp_path / "other-user" / "cache.key")):
        with pytest.warns(RuntimeWarning, match="MAC does not verify"):
            other = vector_add.compile(*ARGS, arch="sm_90")
        assert not other.cache_hit and other.cubin == first.cubin
        assert vector_add.compile(*ARGS, arch="sm_90").cache_hit
    with pytest.warns(RuntimeWarning, match="MAC does not verify"):   # the first key
        assert not vector_add.compile(*ARGS, arch="sm_90").cache_hit
    assert exports == ["vector_add"] * 3


@pytest.mark.toolchain
def test_normal_hits_still_hit(cache_dir, exports):
    arts = [vector_add.compile(*ARGS, arch="sm_90") for _ in range(3)]
    assert [a.cache_hit for a in arts] == [False, True, True]
    assert exports == ["vector_add"]
    assert len({a.cubin for a in arts}) == 1


@pytest.mark.toolchain
def test_an_unsigned_entry_of_an_older_tilelab_is_rebuilt_quietly(cache_dir, recwarn):
    first = vector_add.compile(*ARGS, arch="sm_90")
    entry = entry_of(cache_dir, first.key)
    meta = json.loads((entry / "meta.json").read_text())
    del meta[META_DIGEST]
    meta["meta_sha256"] = "0" * 64                        # what tilelab wrote before
    (entry / "meta.json").write_text(json.dumps(meta))
    assert not vector_add.compile(*ARGS, arch="sm_90").cache_hit
    assert not [w for w in recwarn.list if "tilelab cache" in str(w.message)]
    assert DiskCache(cache_dir).rejections()[0] == 1
    assert vector_add.compile(*ARGS, arch="sm_90").cache_hit


def test_a_forged_shortcut_is_not_followed(tmp_path):
    """A shortcut rewritten to lead to another (validly signed) entry, its digest
    recomputed: refused, and removed."""
    from tilelab.compiler.input_fingerprints import fingerprints

    cache = DiskCache(tmp_path / "cache", key_file=tmp_path / "cache.key")
    for k, cubin in (("ab" * 32, b"\x7fELF safe"), ("cd" * 32, b"\x7fELF evil")):
        assert cache.store(k, {"cubin": cubin}, {"symbol": "k"})
    source = tmp_path / "k.py"
    source.write_text("x = 1\n")
    assert cache.remember("cmd", "ab" * 32, fingerprints([str(source)]), {"kernel": "k"})
    path = cache.root / "shortcuts-v1" / "cmd.json"
    record = json.loads(path.read_text())
    record["entry"] = "cd" * 32
    record["entry_digest"] = json.loads(
        (entry_of(cache.root, "cd" * 32) / "meta.json").read_text())[META_DIGEST]
    body = {k: v for k, v in record.items() if k != META_DIGEST}
    record[META_DIGEST] = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    path.write_text(json.dumps(record))
    assert cache.recall("cmd") is None and not path.exists()


@pytest.mark.subprocess
def test_cache_info_reports_the_key_and_the_refused_entries(cache_dir):
    entry, _, _ = plant_unsafe_cubin(cache_dir)
    forge(entry, "own-key")
    with pytest.warns(RuntimeWarning):
        vector_add.compile(*ARGS, arch="sm_90")
    info = subprocess.run([sys.executable, "-m", "tilelab", "cache", "info"],
                          capture_output=True, text=True, env=dict(os.environ))
    assert info.returncode == 0, info.stderr
    assert f"entries signed with the key in {os.environ['TILELAB_CACHE_KEY']}" in info.stdout
    assert "1 entries refused since the cache was cleared" in info.stdout
    assert "MAC does not verify" in info.stdout
    subprocess.run([sys.executable, "-m", "tilelab", "cache", "clear"], check=True,
                   capture_output=True, env=dict(os.environ))
    assert DiskCache(cache_dir).rejections() == (0, None)


# ---- the key file ------------------------------------------------------------------------------


def test_a_key_is_made_on_a_fresh_machine(tmp_path):
    path = tmp_path / "home" / ".config" / "tilelab" / "cache.key"   # nothing exists yet
    key = load_key(path)
    assert len(key) == 32 and path.read_bytes() == key
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    assert load_key(path) == key
    assert [p.name for p in path.parent.iterdir()] == ["cache.key"]   # no temporary left


def test_a_key_is_made_where_hard_links_are_not_supported(tmp_path, monkeypatch):
    def no_link(*args, **kwargs):
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(os, "link", no_link)
    path = tmp_path / "fuse" / "cache.key"
    key = load_key(path)
    assert load_key(path) == key and path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["cache.key"]


def test_the_default_key_lives_in_the_config_dir(monkeypatch, tmp_path):
    with config.override(cache_key=config.DEFAULT):
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
        assert cache_trust.default_key_path() == tmp_path / "xdg" / "tilelab" / "cache.key"
        monkeypatch.delenv("XDG_CONFIG_HOME")
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        assert cache_trust.default_key_path() == tmp_path / "home" / ".config" / \
            "tilelab" / "cache.key"


def _load(path: str) -> bytes:
    return load_key(Path(path))


def test_processes_making_the_key_at_once_agree(tmp_path):
    path = str(tmp_path / "conf" / "cache.key")
    with ProcessPoolExecutor(max_workers=4) as ex:
        keys = list(ex.map(_load, [path] * 8))
    assert len(set(keys)) == 1 and len(keys[0]) == 32


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620])
def test_a_key_others_can_read_or_write_is_refused(tmp_path, mode):
    path = tmp_path / "cache.key"
    load_key(path)
    path.chmod(mode)
    with pytest.raises(ConfigError) as ei:
        load_key(path)
    msg = str(ei.value)
    assert msg.startswith(f"tilelab cache key {path} can be read or written by others "
                          f"(mode {mode:04o})")
    assert f"hint: chmod 600 {path}" in msg


def test_a_key_owned_by_another_user_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "cache.key"
    load_key(path)
    monkeypatch.setattr(os, "geteuid", lambda: os.stat(path).st_uid + 1)
    with pytest.raises(ConfigError, match=rf"cache key {path} is owned by another user"):
        load_key(path)


def test_a_key_that_is_a_link_or_the_wrong_size_is_refused(tmp_path):
    real = tmp_path / "real.key"
    load_key(real)
    link = tmp_path / "link.key"
    link.symlink_to(real)
    with pytest.raises(ConfigError, match="is a symbolic link"):
        load_key(link)
    short = tmp_path / "short.key"
    short.write_bytes(b"12345")
    short.chmod(0o600)
    with pytest.raises(ConfigError, match="holds 5 bytes, not 32"):
        load_key(short)


@pytest.mark.toolchain
def test_a_key_inside_the_cache_is_refused(tmp_path):
    with config.override(cache_dir=str(tmp_path / "cache"),
                         cache_key=str(tmp_path / "cache" / "cache.key")):
        with pytest.raises(ConfigError, match="lies inside the cache directory"):
            vector_add.compile(*ARGS, arch="sm_90")


@pytest.mark.toolchain
def test_compiling_with_a_key_others_can_read_is_a_config_error(cache_dir):
    vector_add.compile(*ARGS, arch="sm_90")
    key = Path(os.environ["TILELAB_CACHE_KEY"])
    key.chmod(0o644)
    with pytest.raises(ConfigError, match="can be read or written by others"):
        vector_add.compile(*ARGS, arch="sm_90")


@pytest.mark.toolchain
def test_a_key_that_cannot_be_made_compiles_without_caching(tmp_path, monkeypatch,
                                                            recwarn):
    from tilelab.compiler import cache as cache_mod

    monkeypatch.setattr(cache_mod, "_WARNED", set())
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with config.override(cache_dir=str(tmp_path / "cache"),
                         cache_key=str(blocker / "cache.key")):
        arts = [vector_add.compile(*ARGS, arch="sm_90") for _ in range(2)]
    assert not any(a.cache_hit for a in arts) and arts[0].cubin == arts[1].cubin
    warned = [str(w.message) for w in recwarn.list if "cache key" in str(w.message)]
    assert len(warned) == 1 and warned[0].startswith(
        f"tilelab cache key {blocker / 'cache.key'} cannot be made (")
    assert "compiling without caching" in warned[0]


# ---- the cache directory ----------------------------------------------------------------------


@pytest.fixture
def fresh_warnings(monkeypatch):
    from tilelab.compiler import cache as cache_mod

    monkeypatch.setattr(cache_mod, "_WARNED", set())


@pytest.mark.toolchain
def test_a_cache_dir_others_can_write_is_not_used(cache_dir, fresh_warnings, recwarn,
                                                  exports):
    cache_dir.mkdir()
    cache_dir.chmod(0o777)
    arts = [vector_add.compile(*ARGS, arch="sm_90") for _ in range(2)]
    assert not any(a.cache_hit for a in arts) and exports == ["vector_add"] * 2
    assert not (cache_dir / "v1").exists()
    warned = [str(w.message) for w in recwarn.list if "tilelab cache" in str(w.message)]
    assert len(warned) == 1
    assert warned[0].startswith(f"tilelab cache at {cache_dir} is not used: it is writable "
                                "by its group or others (mode 0777)")
    assert f"chmod go-w {cache_dir}" in warned[0]
    cache_dir.chmod(0o700)                              # made private: used again
    vector_add.compile(*ARGS, arch="sm_90")
    assert vector_add.compile(*ARGS, arch="sm_90").cache_hit


@pytest.mark.toolchain
def test_a_cache_dir_of_another_user_is_not_used(cache_dir, fresh_warnings, monkeypatch):
    vector_add.compile(*ARGS, arch="sm_90")
    monkeypatch.setattr(os, "geteuid", lambda: os.stat(cache_dir).st_uid + 1)
    with pytest.warns(RuntimeWarning, match=r"is not used: it is owned by another user"):
        assert not vector_add.compile(*ARGS, arch="sm_90").cache_hit


@pytest.mark.subprocess
def test_a_new_cache_dir_is_private_and_info_says_when_one_is_not(cache_dir):
    vector_add.compile(*ARGS, arch="sm_90")
    assert cache_dir.stat().st_mode & 0o777 == 0o700
    cache_dir.chmod(0o775)
    info = subprocess.run([sys.executable, "-m", "tilelab", "cache", "info"],
                          capture_output=True, text=True, env=dict(os.environ))
    assert "not used: it is writable by its group or others (mode 0775)" in info.stdout


def test_eviction_never_follows_a_link_out_of_the_cache(tmp_path):
    """A link planted among the entries (by whoever wrote the cache before it was
    private) must not make eviction delete what it points at."""
    outside = tmp_path / "home"
    (outside / "project").mkdir(parents=True)
    (outside / "project" / "notes.txt").write_text("keep me")
    cache = DiskCache(tmp_path / "cache", max_bytes=1, key_file=tmp_path / "cache.key")
    assert cache.store("ab" * 32, {"cubin": b"x" * 100}, {"symbol": "k"})
    (cache.dir / "zz").symlink_to(outside)
    (cache.dir / "ab" / ("cd" * 32)).symlink_to(outside / "project")
    cache.store("ef" * 32, {"cubin": b"y" * 100}, {"symbol": "k"})
    cache.evict()
    assert (outside / "project" / "notes.txt").read_text() == "keep me"


# ---- the native launch module kept in the cache ------------------------------------------------


def test_a_planted_native_module_is_rebuilt_not_loaded(tmp_path):
    """The C launch module is code the process loads: one in the cache that this user's
    key did not sign is compiled anew, never returned for loading."""
    from tilelab.runtime import native

    if native._compiler() is None:
        pytest.skip("no C compiler")
    built = native.build(tmp_path)
    good = built.read_bytes()
    built.write_bytes(b"\x7fELF planted by whoever wrote the cache")
    assert native.build(tmp_path) == built and built.read_bytes() == good
    (tmp_path / f"{built.parent.name}.mac").write_text("0" * 64)   # a forged tag
    built.write_bytes(b"\x7fELF planted again")
    assert native.build(tmp_path).read_bytes() == good


def test_no_native_module_from_a_directory_others_can_write(tmp_path, fresh_warnings):
    from tilelab.runtime import native

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.warns(RuntimeWarning, match="is not used: it is writable by its group"):
        with pytest.raises(OSError, match="cannot be trusted to hold a native module"):
            native.build(shared)
