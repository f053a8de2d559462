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
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DiskCache", "default_cache", "CacheStats", "read_sidecar", "write_sidecar"]

FORMAT = "v1"
DEFAULT_MAX_BYTES = 1 << 30
#: the field of meta.json holding the checksum of all its other fields
META_DIGEST = "meta_sha256"

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
        """Remove every entry; returns how many there were."""
        n = len(self._entries())
        shutil.rmtree(self.dir, ignore_errors=True)
        return n


def read_sidecar(entry: Path, name: str) -> Any:
    """The JSON value of file ``name`` kept in cache entry ``entry`` beside its files
    (derived data, computed after the entry was stored), or None when there is none
    or it cannot be read.

    Example:
        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp())
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
