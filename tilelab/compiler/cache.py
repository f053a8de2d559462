"""The disk cache of compiled kernels.

An entry is a directory named by its key (a hash of the lowered source, the
specialization, the arch, the toolchain version and the options) holding the cubin, the
Tile IR bytecode and text, the remarks and a ``meta.json`` with the checksum of each
file and a checksum of every other field of ``meta.json`` itself (symbol, toolchain,
...). Entries are written to a private temporary directory and renamed into place, so
two processes compiling the same kernel at once never see half an entry; an entry whose
checksums do not match is ignored, removed and rebuilt, never loaded. The cache is
bounded: after each store the least recently used entries go until it fits.

A cache that cannot be written (a read-only or full file system, a path that is not a
directory) warns once per process and path, and the compile goes on without caching.

Beside the entries, *shortcuts* (``shortcuts-v1/<name>.json``) let a caller that can name
a compile without running it (``tilelab compile FILE::KERNEL``: the command line and the
environment) find its entry again with no lowering, no cuTile and no key: a shortcut
holds the entry's key, the checksum of the entry's ``meta.json`` and the fingerprint of
every input the compile read (see :func:`fingerprint`), and is taken only while every
input still has its fingerprint and the entry is the very one it was made from.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DiskCache", "default_cache", "CacheStats", "read_sidecar", "write_sidecar",
           "fingerprint", "fingerprints", "unchanged"]

FORMAT = "v1"
DEFAULT_MAX_BYTES = 1 << 30
#: the field of meta.json holding the checksum of all its other fields
META_DIGEST = "meta_sha256"
SHORTCUTS = "shortcuts-v1"
#: shortcuts kept at most; past it the least recently used go
MAX_SHORTCUTS = 512

_WARNED: set[str] = set()
_WARNED_LOCK = threading.Lock()


def _meta_digest(meta: dict) -> str:
    """sha256 of every field of meta.json but the digest itself (canonical JSON)."""
    body = {k: v for k, v in meta.items() if k != META_DIGEST}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _warn_unwritable(root: Path, err: OSError) -> None:
    """Warn once per process and cache path that entries cannot be stored."""
    path = str(root)
    with _WARNED_LOCK:
        if path in _WARNED:
            return
        _WARNED.add(path)
    reason = err.strerror or type(err).__name__
    warnings.warn(f"tilelab cache at {path} cannot be written ({reason}); compiling "
                  "without caching (set TILELAB_CACHE_DIR to a writable directory, or "
                  "TILELAB_CACHE=0)", RuntimeWarning, stacklevel=4)


def _default_dir() -> Path:
    from tilelab import config

    env = config.cache_dir()
    if env is not None:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tilelab"


@dataclass(frozen=True)
class CacheStats:
    """What ``tilelab cache info`` prints."""

    path: Path
    entries: int
    bytes: int
    max_bytes: int

    def __str__(self) -> str:
        return (f"tilelab cache at {self.path}: {self.entries} kernels, "
                f"{binary_size(self.bytes)} of {binary_size(self.max_bytes)}")


def binary_size(n: int) -> str:
    """``n`` bytes in binary units (KiB, MiB, GiB), as the README writes sizes.

    Example:
        >>> binary_size(1 << 30), binary_size(3 * 1024 * 1024 // 2), binary_size(512)
        ('1.0 GiB', '1.5 MiB', '512 B')
    """
    if n < 1024:
        return f"{n} B"
    value = n / 1024
    for unit in ("KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


class DiskCache:
    """A directory of compiled kernels (see the module docstring).

    Example:
        >>> import tempfile
        >>> c = DiskCache(tempfile.mkdtemp())
        >>> c.store("k" * 64, {"cubin": b"x"}, {"symbol": "f"})
        True
        >>> c.load("k" * 64)[0]["cubin"]
        b'x'
    """

    def __init__(self, root: str | os.PathLike | None = None,
                 max_bytes: int | None = None):
        self.root = Path(root) if root is not None else _default_dir()
        if max_bytes is None:
            from tilelab import config

            max_bytes = config.cache_max_bytes() or DEFAULT_MAX_BYTES
        self.max_bytes = max_bytes

    @property
    def dir(self) -> Path:
        return self.root / FORMAT

    def _entry(self, key: str) -> Path:
        return self.dir / key[:2] / key

    def entry_dir(self, key: str) -> Path:
        """The directory of entry ``key`` (where its sidecars go; see
        :func:`write_sidecar`).

        Example:
            >>> DiskCache("/tmp/tlc").entry_dir("ab12").parts[-2:]
            ('ab', 'ab12')
        """
        return self._entry(key)

    def load(self, key: str) -> tuple[dict[str, bytes], dict] | None:
        """(files, meta) of a valid entry, or None (missing or corrupt: then removed)."""
        entry = self._entry(key)
        try:
            meta = json.loads((entry / "meta.json").read_text())
            files = {}
            for name, digest in meta["files"].items():
                data = (entry / name).read_bytes()
                if hashlib.sha256(data).hexdigest() != digest:
                    raise ValueError(f"checksum mismatch in {name}")
                files[name] = data
            if meta.get("key") != key:
                raise ValueError("key mismatch")
            if meta.get(META_DIGEST) != _meta_digest(meta):
                raise ValueError("meta.json checksum mismatch")
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            # corrupt or half-deleted: never load it; drop it so it is rebuilt
            shutil.rmtree(entry, ignore_errors=True)
            return None
        try:
            os.utime(entry)  # mark as recently used
        except OSError:
            pass
        return files, meta

    def store(self, key: str, files: dict[str, bytes], meta: dict) -> bool:
        """Write an entry atomically, then evict old entries past the size bound.

        Returns whether the entry is in the cache. A cache that cannot be written
        (read-only, full, not a directory) warns once and returns False.
        """
        try:
            return self._store(key, files, meta)
        except OSError as e:
            _warn_unwritable(self.root, e)
            return False

    def _store(self, key: str, files: dict[str, bytes], meta: dict) -> bool:
        self.dir.mkdir(parents=True, exist_ok=True)
        final = self._entry(key)
        if (final / "meta.json").exists():
            return True
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key[:16]}-", dir=final.parent))
        try:
            digests = {}
            for name, data in files.items():
                (tmp / name).write_bytes(data)
                digests[name] = hashlib.sha256(data).hexdigest()
            size = sum(len(d) for d in files.values())
            full = dict(meta, key=key, files=digests, bytes=size, created=time.time())
            full = json.loads(json.dumps(full))   # what load() will read back
            full[META_DIGEST] = _meta_digest(full)
            (tmp / "meta.json").write_text(json.dumps(full, indent=1, sort_keys=True))
            try:
                os.rename(tmp, final)
            except OSError:
                # another process stored the same key first; theirs is as good as ours
                shutil.rmtree(tmp, ignore_errors=True)
                if not (final / "meta.json").exists():
                    raise
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        try:
            self.evict()
        except OSError:
            pass
        return True

    def discard(self, key: str) -> None:
        """Remove one entry (it is rebuilt by the next compile)."""
        shutil.rmtree(self._entry(key), ignore_errors=True)

    def _entries(self) -> list[tuple[float, int, Path]]:
        out = []
        if not self.dir.is_dir():
            return out
        for sub in self.dir.iterdir():
            if not sub.is_dir():
                continue
            for entry in sub.iterdir():
                if entry.name.startswith("."):
                    continue
                try:
                    st = entry.stat()
                    size = sum(f.stat().st_size for f in entry.iterdir())
                except OSError:
                    continue
                out.append((st.st_mtime, size, entry))
        return out

    def evict(self) -> int:
        """Remove least recently used entries until the cache fits; returns how many."""
        entries = self._entries()
        total = sum(s for _, s, _ in entries)
        removed = 0
        if total <= self.max_bytes:
            return 0
        for _, size, entry in sorted(entries):
            if total <= self.max_bytes * 0.9:
                break
            shutil.rmtree(entry, ignore_errors=True)
            total -= size
            removed += 1
        return removed

    def stats(self) -> CacheStats:
        entries = self._entries()
        return CacheStats(self.root, len(entries), sum(s for _, s, _ in entries),
                          self.max_bytes)

    def clear(self) -> int:
        """Remove every entry (and every shortcut); returns how many entries there were."""
        n = len(self._entries())
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.root / SHORTCUTS, ignore_errors=True)
        return n

    def _shortcut(self, name: str) -> Path:
        return self.root / SHORTCUTS / f"{name}.json"

    def remember(self, name: str, key: str, inputs: dict[str, str], extra: dict) -> bool:
        """Make shortcut ``name`` to entry ``key`` while every file of ``inputs`` (path ->
        :func:`fingerprint`) is unchanged; ``extra`` (JSON) comes back from
        :meth:`recall`. False when the entry is not valid or cannot be written.

        Example:
            >>> import tempfile
            >>> c = DiskCache(tempfile.mkdtemp())
            >>> c.store("k" * 64, {"cubin": b"x"}, {"symbol": "f"})
            True
            >>> c.remember("cmd", "k" * 64, {}, {"kernel": "f"})
            True
            >>> c.recall("cmd")[2]
            {'kernel': 'f'}
        """
        hit = self.load(key)
        if hit is None:
            return False
        record = {"entry": key, "entry_digest": hit[1][META_DIGEST], "inputs": inputs,
                  "extra": extra}
        record[META_DIGEST] = _meta_digest(record)
        path = self._shortcut(name)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{name[:16]}-", dir=path.parent)
            with os.fdopen(fd, "w") as f:
                json.dump(record, f)
            os.replace(tmp, path)
            self._prune_shortcuts()
        except OSError as e:
            _warn_unwritable(self.root, e)
            return False
        return True

    def recall(self, name: str) -> tuple[dict[str, bytes], dict, dict] | None:
        """(files, meta, extra) of the entry shortcut ``name`` leads to, or None when there
        is no such shortcut or it no longer holds (an input changed; the entry is gone,
        corrupt or rebuilt since; the shortcut itself is corrupt): then it is removed."""
        path = self._shortcut(name)
        try:
            record = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            record = None
        hit = self._follow(record)
        try:
            if hit is None:
                path.unlink(missing_ok=True)
            else:
                os.utime(path)  # recently used
        except OSError:
            pass
        return hit

    def _follow(self, record: Any) -> tuple[dict[str, bytes], dict, dict] | None:
        """What a shortcut's record leads to while it holds, else None."""
        try:
            if record.get(META_DIGEST) != _meta_digest(record) or \
                    not unchanged(record["inputs"]):
                return None
            hit = self.load(record["entry"])
            if hit is None or hit[1].get(META_DIGEST) != record["entry_digest"]:
                return None
            return hit[0], hit[1], record["extra"]
        except (AttributeError, KeyError, TypeError):
            return None

    def _prune_shortcuts(self) -> None:
        folder = self.root / SHORTCUTS
        found = []
        for p in folder.glob("*.json"):
            try:
                found.append((p.stat().st_mtime, p))
            except OSError:
                continue
        for _, p in sorted(found)[:max(0, len(found) - MAX_SHORTCUTS)]:
            p.unlink(missing_ok=True)


def _installed_roots() -> tuple[str, ...]:
    """The interpreter's own trees: the standard library and the site-packages folders."""
    import site

    roots = [os.path.dirname(os.__file__), *getattr(site, "getsitepackages", list)()]
    if getattr(site, "ENABLE_USER_SITE", False):
        roots.append(site.getusersitepackages())
    return tuple({os.path.join(p, "") for p in roots})


def fingerprint(path: str, content: bool = True) -> str | None:
    """What a shortcut checks of one input: the sha256 of the file's bytes (``content``),
    else its size, modification time and inode (for installed files and programs, which
    change only by being replaced); None when it is not a readable regular file.

    Example:
        >>> import tempfile
        >>> f = Path(tempfile.mkdtemp()) / "a.py"
        >>> _ = f.write_text("x = 1\\n")
        >>> fingerprint(str(f))[:7], fingerprint(str(f), content=False)[:5]
        ('sha256:', 'stat:')
    """
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return None
        if not content:
            return f"stat:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"
        with open(path, "rb") as f:
            return "sha256:" + hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def fingerprints(files: Any, programs: Any = (), skip: tuple[str, ...] = ()) -> dict[str, str]:
    """path -> :func:`fingerprint` of every regular file of ``files`` (by content, but
    in the standard library and site-packages) and of ``programs`` (by size, time and
    inode), leaving out paths under ``skip``, ``/proc``, ``/sys`` and ``/dev``, the
    byte-code in ``__pycache__`` folders (derived from sources listed themselves) and
    whatever is not a regular file (any more).

    Example:
        >>> fingerprints([__file__]) == {__file__: fingerprint(__file__)}
        True
    """
    skip = tuple(os.path.join(p, "") for p in (*skip, "/proc", "/sys", "/dev"))
    installed = _installed_roots()
    out: dict[str, str] = {}
    for paths, by_content in ((files, True), (programs, False)):
        for p in paths:
            if p in out or p.startswith(skip) or f"{os.sep}__pycache__{os.sep}" in p:
                continue
            fp = fingerprint(p, by_content and not p.startswith(installed))
            if fp is not None:
                out[p] = fp
    return out


def unchanged(inputs: dict[str, str]) -> bool:
    """Whether every path of ``inputs`` still has the :func:`fingerprint` recorded.

    Example:
        >>> unchanged(fingerprints([__file__])), unchanged({__file__: "sha256:0"})
        (True, False)
    """
    return all(fingerprint(p, fp.startswith("sha256:")) == fp for p, fp in inputs.items())


def read_sidecar(entry: Path, name: str) -> Any:
    """The JSON value of file ``name`` kept in cache entry ``entry`` beside its files
    (derived data, computed after the entry was stored), or None when there is none
    or it cannot be read.

    Example:
        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp())
        >>> _ = (d / "meta.json").write_text("{}")     # an entry
        >>> write_sidecar(d, "x.json", {"a": 1}), read_sidecar(d, "x.json")
        (True, {'a': 1})
    """
    try:
        return json.loads((Path(entry) / name).read_text())
    except (OSError, ValueError):
        return None


def write_sidecar(entry: Path, name: str, value: Any) -> bool:
    """Keep ``value`` (JSON) as file ``name`` in the existing cache entry ``entry``,
    atomically; False when the entry is gone or cannot be written. Sidecars are not
    part of the entry's checksummed files: they hold only what can be recomputed.
    """
    entry = Path(entry)
    if not (entry / "meta.json").is_file():
        return False
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{name}-", dir=entry)
        with os.fdopen(fd, "w") as f:
            json.dump(value, f)
        os.replace(tmp, entry / name)
        return True
    except OSError:
        return False


def default_cache() -> DiskCache | None:
    """The cache the compiler uses, or None when ``TILELAB_CACHE=0`` disables it."""
    from tilelab import config

    if not config.cache_enabled():
        return None
    return DiskCache()
