"""The disk cache of compiled kernels.

An entry is a directory named by its key (a hash of the lowered source, the
specialization, the arch, the toolchain version and the options) holding the cubin, the
Tile IR bytecode and text, the remarks and a ``meta.json`` with the sha256 of each file
and an HMAC-SHA256 of every other field of ``meta.json`` (the file checksums, the key,
symbol, toolchain, ...) under the user's secret cache key
(:mod:`tilelab.compiler.cache_trust`). A hit is served only when that MAC verifies and
every file matches its checksum, so an entry says who wrote it: this user's tilelab.
Entries are written to a private temporary directory and renamed into place, so two
processes compiling the same kernel at once never see half an entry; an entry that does
not verify (forged, written with another key, corrupt, or unsigned by an older tilelab)
is never loaded: it is removed and rebuilt, counted in ``rejected.json`` (what
``tilelab cache info`` reports), and, unless it merely lacks a signature, warned about. The cache
is bounded: after each store the least recently used entries go until it fits.

The cache directory must be the user's own (:func:`~tilelab.compiler.cache_trust.
untrusted_dir`; it is made with mode 0700): one owned by another user or writable by
others is not used, with a warning. So is a cache that cannot be written (a read-only or
full file system, a path that is not a directory) or whose key cannot be made: each
warns once per process and path, and the compile goes on without caching. A key file
that is not private is a :class:`~tilelab.errors.ConfigError`.

Beside the entries, *shortcuts* (``shortcuts-v1/<name>.json``) let a caller that can name
a compile without running it (``tilelab compile FILE::KERNEL``: the command line and the
environment) find its entry again with no lowering, no cuTile and no key: a shortcut
holds the entry's key, the MAC of the entry's ``meta.json`` and the fingerprint of
every input the compile read (:mod:`tilelab.compiler.input_fingerprints`), is signed
like an entry, and is taken only while every input still has its fingerprint and the
entry is the very one it was made from.
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

from tilelab.compiler.cache_trust import default_key_path, load_key, mac, untrusted_dir, verify
from tilelab.compiler.input_fingerprints import unchanged

__all__ = ["DiskCache", "default_cache", "CacheStats", "signing_key", "read_sidecar",
           "write_sidecar"]

FORMAT = "v1"
DEFAULT_MAX_BYTES = 1 << 30
#: the field of meta.json (and of a shortcut) holding the HMAC-SHA256 of all its other
#: fields under the user's cache key
META_DIGEST = "mac"
SHORTCUTS = "shortcuts-v1"
#: shortcuts kept at most; past it the least recently used go
MAX_SHORTCUTS = 512
#: the record of entries refused since the cache was cleared (``tilelab cache info``)
REJECTED = "rejected.json"
#: refusals the record keeps the reason of
MAX_REJECTED_KEPT = 20

_WARNED: set[str] = set()
_WARNED_LOCK = threading.Lock()


def _meta_digest(meta: dict, key: bytes | None = None, domain: str = "entry") -> str:
    """The MAC of every field of ``meta`` but the MAC itself, under ``key`` (default: the
    user's cache key, :func:`~tilelab.compiler.cache_trust.load_key`)."""
    body = {k: v for k, v in meta.items() if k != META_DIGEST}
    return mac(key if key is not None else load_key(), domain, body)


def _signed(meta: Any, key: bytes, domain: str) -> bool:
    """Whether record ``meta`` carries a MAC that verifies under ``key``."""
    body = {k: v for k, v in meta.items() if k != META_DIGEST}
    return verify(key, domain, body, meta.get(META_DIGEST))


def _warn_once(tag: str, message: str) -> None:
    """Warn once per process and ``tag`` (a cache or key path and what went wrong)."""
    with _WARNED_LOCK:
        if tag in _WARNED:
            return
        _WARNED.add(tag)
    warnings.warn(message, RuntimeWarning, stacklevel=5)


def _warn_unwritable(root: Path, err: OSError) -> None:
    """Warn once per process and cache path that entries cannot be stored."""
    reason = err.strerror or type(err).__name__
    _warn_once(str(root), f"tilelab cache at {root} cannot be written ({reason}); "
               "compiling without caching (set TILELAB_CACHE_DIR to a writable "
               "directory, or TILELAB_CACHE=0)")


def signing_key(root: Path, key_file: Path | None = None) -> bytes | None:
    """The key that signs what is kept under cache directory ``root`` (from ``key_file``,
    default :func:`~tilelab.compiler.cache_trust.default_key_path`), or None, after a
    warning (once per process), when nothing there may be trusted: ``root`` is not the
    user's own (another user's, or writable by others), or no key can be made.
    Raises :class:`~tilelab.errors.ConfigError` for a key file that is not private.

    Example:
        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp())
        >>> len(signing_key(d / "cache", d / "cache.key"))
        32
    """
    why = untrusted_dir(root)
    if why is not None:
        _warn_once(f"untrusted:{root}",
                   f"tilelab cache at {root} is not used: {why}, so others could plant "
                   f"entries or links in it; compiling without caching (chmod go-w {root} "
                   "if it is yours, or set TILELAB_CACHE_DIR to a directory of your own)")
        return None
    path = key_file or default_key_path()
    try:
        return load_key(path, cache_root=root)
    except OSError as e:
        reason = e.strerror or type(e).__name__
        _warn_once(f"key:{path}",
                   f"tilelab cache key {path} cannot be made ({reason}); compiling "
                   "without caching (set TILELAB_CACHE_KEY to a file in a writable "
                   "directory outside the cache, or TILELAB_CACHE=0)")
        return None


class _Rejected(Exception):
    """An entry that must not be loaded; ``warn`` unless it merely predates signing."""

    def __init__(self, reason: str, warn: bool = True):
        super().__init__(reason)
        self.warn = warn


def _default_dir() -> Path:
    from tilelab import config

    env = config.cache_dir()
    if env is not None:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tilelab"


@dataclass(frozen=True)
class CacheStats:
    """What ``tilelab cache info`` prints: size, the key that signs the entries, the
    entries refused since the cache was cleared, and why the cache is not used (if so)."""

    path: Path
    entries: int
    bytes: int
    max_bytes: int
    key_file: Path | None = None
    rejected: int = 0
    last_rejected: str | None = None
    not_used: str | None = None

    def __str__(self) -> str:
        lines = [f"tilelab cache at {self.path}: {self.entries} kernels, "
                 f"{binary_size(self.bytes)} of {binary_size(self.max_bytes)}"]
        if self.not_used:
            lines.append(f"  not used: {self.not_used}")
        if self.key_file is not None:
            lines.append(f"  entries signed with the key in {self.key_file}")
        if self.rejected:
            lines.append(f"  {self.rejected} entries refused since the cache was cleared "
                         f"(last: {self.last_rejected})")
        return "\n".join(lines)


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
                 max_bytes: int | None = None, key_file: str | os.PathLike | None = None):
        self.root = Path(root) if root is not None else _default_dir()
        if max_bytes is None:
            from tilelab import config

            max_bytes = config.cache_max_bytes() or DEFAULT_MAX_BYTES
        self.max_bytes = max_bytes
        #: the key file; None: :func:`~tilelab.compiler.cache_trust.default_key_path`
        #: at each use (so TILELAB_CACHE_KEY takes effect at once)
        self.key_file = Path(key_file) if key_file is not None else None

    def _secret(self) -> bytes | None:
        return signing_key(self.root, self.key_file)

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
        """(files, meta) of an entry this user's key signed, or None: missing, the cache
        not usable, or the entry refused (forged, another key's, corrupt, unsigned: then
        removed, recorded and, but for unsigned, warned about)."""
        return self._load(key)

    def _load(self, key: str, secret: bytes | None = None
              ) -> tuple[dict[str, bytes], dict] | None:
        """:meth:`load` with the signing key ``secret``, or, when None, the key found
        once the entry is known to exist (a miss costs no key)."""
        entry = self._entry(key)
        unreadable = None
        try:
            text = (entry / "meta.json").read_text()
        except (FileNotFoundError, NotADirectoryError):
            return None       # no such entry (or no cache directory at all)
        except OSError as e:
            text, unreadable = "", f"its meta.json cannot be read ({e})"
        if secret is None and (secret := self._secret()) is None:
            return None       # not a cache to trust, nor to clean up
        if unreadable:
            return self._reject(key, unreadable)
        try:
            files, meta = _verified(key, text, entry, secret)
        except _Rejected as r:
            return self._reject(key, str(r), r.warn)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            return self._reject(key, f"it is incomplete or malformed ({e})")
        try:
            os.utime(entry)  # mark as recently used
        except OSError:
            pass
        return files, meta

    def _reject(self, key: str, reason: str, warn: bool = True) -> None:
        """Never load entry ``key``: remove it (the next store rebuilds it), record it
        for ``tilelab cache info`` and, if ``warn``, say so."""
        entry = self._entry(key)
        shutil.rmtree(entry, ignore_errors=True)
        try:
            self._record_rejection(key, reason)
        except (OSError, ValueError):
            pass
        if warn:
            warnings.warn(f"tilelab cache entry {entry} was not loaded: {reason}; it is "
                          "removed and the kernel is compiled again", RuntimeWarning,
                          stacklevel=4)
        return None

    def _record_rejection(self, key: str, reason: str) -> None:
        path = self.root / REJECTED
        try:
            record = json.loads(path.read_text())
            count, last = int(record["count"]), list(record["last"])
        except (OSError, ValueError, KeyError, TypeError):
            count, last = 0, []
        last = [*last, {"time": time.time(), "key": key, "reason": reason}]
        fd, tmp = tempfile.mkstemp(prefix=".rejected-", dir=self.root)
        with os.fdopen(fd, "w") as f:
            json.dump({"count": count + 1, "last": last[-MAX_REJECTED_KEPT:]}, f)
        os.replace(tmp, path)

    def rejections(self) -> tuple[int, str | None]:
        """How many entries were refused since the cache was cleared, and the last
        one's key and reason.

        Example:
            >>> import tempfile
            >>> DiskCache(tempfile.mkdtemp()).rejections()
            (0, None)
        """
        try:
            record = json.loads((self.root / REJECTED).read_text())
            last = record["last"][-1] if record["last"] else None
            return int(record["count"]), (f"{last['key'][:16]}...: {last['reason']}"
                                          if last else None)
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return 0, None

    def store(self, key: str, files: dict[str, bytes], meta: dict) -> bool:
        """Write an entry atomically, then evict old entries past the size bound.

        Returns whether the entry is in the cache. A cache that cannot be written
        (read-only, full, not a directory) warns once and returns False.
        """
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            secret = self._secret()
            if secret is None:
                return False
            return self._store(key, files, meta, secret)
        except OSError as e:
            _warn_unwritable(self.root, e)
            return False

    def _store(self, key: str, files: dict[str, bytes], meta: dict, secret: bytes) -> bool:
        self.dir.mkdir(parents=True, exist_ok=True)
        final = self._entry(key)
        if (final / "meta.json").exists() and self._load(key, secret) is not None:
            return True        # already there and signed (a refused one was removed)
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
            full[META_DIGEST] = _meta_digest(full, secret)
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
            if not _real_dir(sub):    # never follow a link out of the cache
                continue
            for entry in sub.iterdir():
                if entry.name.startswith(".") or not _real_dir(entry):
                    continue
                try:
                    st = entry.lstat()
                    size = sum(f.lstat().st_size for f in entry.iterdir())
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
        """Size, key file, refusals, and why the cache is not used (if it is not)."""
        entries = self._entries()
        rejected, last = self.rejections()
        return CacheStats(self.root, len(entries), sum(s for _, s, _ in entries),
                          self.max_bytes, self.key_file or default_key_path(), rejected,
                          last, untrusted_dir(self.root))

    def clear(self) -> int:
        """Remove every entry, every shortcut and the record of refused entries;
        returns how many entries there were."""
        n = len(self._entries())
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.root / SHORTCUTS, ignore_errors=True)
        (self.root / REJECTED).unlink(missing_ok=True)
        return n

    def _shortcut(self, name: str) -> Path:
        return self.root / SHORTCUTS / f"{name}.json"

    def remember(self, name: str, key: str, inputs: dict[str, str], extra: dict) -> bool:
        """Make shortcut ``name`` to entry ``key`` while every file of ``inputs`` (path ->
        :func:`~tilelab.compiler.input_fingerprints.fingerprint`) is unchanged;
        ``extra`` (JSON) comes back from :meth:`recall`. False when the entry is not
        valid or cannot be written.

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
        secret = self._secret()
        hit = self._load(key, secret) if secret is not None else None
        if hit is None:
            return False
        record = {"entry": key, "entry_digest": hit[1][META_DIGEST], "inputs": inputs,
                  "extra": extra}
        record[META_DIGEST] = _meta_digest(record, secret, "shortcut")
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
        secret = self._secret()
        if secret is None:
            return None
        hit = self._follow(record, secret)
        try:
            if hit is None:
                path.unlink(missing_ok=True)
            else:
                os.utime(path)  # recently used
        except OSError:
            pass
        return hit

    def _follow(self, record: Any, secret: bytes) -> tuple[dict[str, bytes], dict, dict] | None:
        """What a shortcut's record leads to while it holds (signed with ``secret``,
        its inputs unchanged, its entry the one it was made from), else None."""
        try:
            if not _signed(record, secret, "shortcut") or not unchanged(record["inputs"]):
                return None
            hit = self._load(record["entry"], secret)
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


def _verified(key: str, text: str, entry: Path, secret: bytes
              ) -> tuple[dict[str, bytes], dict]:
    """(files, meta) of entry ``key`` whose meta.json in ``entry`` reads ``text``, after
    its MAC (first: nothing an unsigned meta.json names is opened), its key and every
    file's sha256 are checked; raises :class:`_Rejected` naming what failed (ValueError
    and friends for what is not even a meta.json)."""
    meta = json.loads(text)
    if META_DIGEST not in meta:
        raise _Rejected("it is not signed (written by an older tilelab)", warn=False)
    if not _signed(meta, secret, "entry"):
        raise _Rejected("its MAC does not verify with your cache key (it was written with "
                        "another key, or forged)")
    if meta.get("key") != key:
        raise _Rejected(f"it was signed for another kernel ({str(meta.get('key'))[:16]}...)")
    files = {}
    for name, digest in meta["files"].items():
        data = (entry / name).read_bytes()
        if hashlib.sha256(data).hexdigest() != digest:
            raise _Rejected(f"its {name} does not match its checksum")
        files[name] = data
    return files, meta


def _real_dir(path: Path) -> bool:
    """Whether ``path`` is a directory itself, not a link to one."""
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False


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
