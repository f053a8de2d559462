"""What makes a disk-cache entry trustworthy: the user's secret key and the MACs it signs.

A cache entry holds a cubin that a later process loads and runs. Checksums alone cannot
say who wrote it: whoever can write the cache directory (another user of a shared
directory, a cache restored from an artifact store) can recompute them. So every entry
and every shortcut carries an HMAC-SHA256 keyed by a per-user secret that lives outside
the cache: 32 random bytes in ``$XDG_CONFIG_HOME/tilelab/cache.key`` (else
``~/.config/tilelab/cache.key``; ``TILELAB_CACHE_KEY`` names another file), created on
first use with mode 0600 in a directory of mode 0700. An entry whose MAC does not verify
was not written by this user's tilelab and is never served.

The key file must be the user's own and private: a regular file (not a link), owned by
the effective user, readable by nobody else, exactly 32 bytes, and not inside the cache
directory (whoever restores a cache would restore its key with it). Anything else is a
:class:`~tilelab.errors.ConfigError` naming the file and how to fix it. The cache
directory itself must be owned by the user and writable by nobody else
(:func:`untrusted_dir`): in a directory others can write, they could plant links that
make the cache's own clean-up delete or overwrite the user's files.
"""
from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import hmac
import json
import os
import secrets
import stat
from pathlib import Path

from tilelab.errors import ConfigError

__all__ = ["KEY_BYTES", "default_key_path", "load_key", "mac", "verify", "untrusted_dir"]

#: the length of the secret key, in bytes
KEY_BYTES = 32


def default_key_path() -> Path:
    """``TILELAB_CACHE_KEY``, else ``$XDG_CONFIG_HOME/tilelab/cache.key``, else
    ``~/.config/tilelab/cache.key``.

    Example:
        >>> from tilelab import config
        >>> with config.override(cache_key="/tmp/k/cache.key"):
        ...     str(default_key_path())
        '/tmp/k/cache.key'
    """
    from tilelab import config

    chosen = config.cache_key()
    if chosen is not None:
        return chosen
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"),
                                                             ".config")
    return Path(base) / "tilelab" / "cache.key"


def _refuse(path: Path, what: str, hint: str) -> ConfigError:
    return ConfigError(f"tilelab cache key {path} {what}; the disk cache is signed with "
                       "it, so it must be a private file of yours", hint=hint)


@functools.lru_cache(maxsize=64)
def _inside(path: str, root: str) -> bool:
    """Whether file ``path`` is under directory ``root``, links resolved (remembered: it
    guards against a misconfiguration, and a hit asks at every load)."""
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(os.path.join(top, ""))


def _create(path: Path) -> None:
    """Make a new key at ``path`` atomically: written in full to a private temporary
    file, then linked into place, so a concurrent reader sees all 32 bytes or no file;
    a key another process made first is kept."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(KEY_BYTES))
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass                          # another process made the key first: use theirs
        except OSError:
            # a file system without hard links: a rename cannot refuse to replace, so a
            # key another process makes at the same moment may be replaced (the entries
            # it signed then miss once)
            if not os.path.lexists(path):
                os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _read(path: Path) -> bytes:
    """The key's bytes after checking the file is private; FileNotFoundError if none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
        raise _refuse(path, "is a symbolic link", f"replace the link {path} by the key "
                      "file itself, or remove it (a new key is made at the next "
                      "compile)") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(path, "is not a regular file", f"remove {path}; a new key is "
                          "made at the next compile (cached kernels are then rebuilt)")
        if st.st_uid != os.geteuid():
            raise _refuse(path, f"is owned by another user (uid {st.st_uid})",
                          f"remove {path} (a new key of yours is made at the next "
                          "compile), or set TILELAB_CACHE_KEY to a file of your own")
        if st.st_mode & 0o077:
            raise _refuse(path, f"can be read or written by others (mode "
                          f"{stat.S_IMODE(st.st_mode):04o})",
                          f"chmod 600 {path}; if others may have read it, remove it "
                          "instead (a new key is made and cached kernels are rebuilt)")
        data = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) != KEY_BYTES:
        raise _refuse(path, f"holds {len(data)} bytes, not {KEY_BYTES}",
                      f"remove {path}; a new key is made at the next compile")
    return data


def load_key(path: Path | None = None, cache_root: Path | None = None) -> bytes:
    """The user's secret cache key from ``path`` (default :func:`default_key_path`),
    made on first use.

    Raises :class:`~tilelab.errors.ConfigError` for a key file that is not private,
    not the user's, not 32 bytes, a link, or inside ``cache_root``; OSError when no key
    can be made there (an unwritable home: the caller then compiles without caching).

    Example:
        >>> import tempfile
        >>> p = Path(tempfile.mkdtemp()) / "conf" / "cache.key"
        >>> k = load_key(p)
        >>> len(k), load_key(p) == k, oct(p.stat().st_mode & 0o777)
        (32, True, '0o600')
    """
    path = Path(path) if path is not None else default_key_path()
    if cache_root is not None and _inside(str(path), str(cache_root)):
        raise _refuse(path, f"lies inside the cache directory {cache_root}",
                      "keep the key outside the cache (whoever writes or restores the "
                      "cache could replace both): unset TILELAB_CACHE_KEY or point it "
                      "elsewhere")
    try:
        return _read(path)
    except FileNotFoundError:
        _create(path)
    return _read(path)


def mac(key: bytes, domain: str, body: dict) -> str:
    """HMAC-SHA256 (hex) of ``body`` as canonical JSON, under ``key``, for one
    ``domain`` (``"entry"``, ``"shortcut"``) so that one kind of record never passes
    for another.

    Example:
        >>> k = bytes(32)
        >>> a = mac(k, "entry", {"a": 1})
        >>> a == mac(k, "entry", {"a": 1}), a == mac(k, "shortcut", {"a": 1})
        (True, False)
    """
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hmac.new(key, f"tilelab-cache-{domain}\0{text}".encode(), hashlib.sha256
                    ).hexdigest()


def verify(key: bytes, domain: str, body: dict, tag: object) -> bool:
    """Whether ``tag`` is :func:`mac` of ``body`` (compared in constant time).

    Example:
        >>> k = bytes(32)
        >>> tag = mac(k, "entry", {"a": 1})
        >>> verify(k, "entry", {"a": 1}, tag), verify(k, "entry", {"a": 2}, tag)
        (True, False)
    """
    return isinstance(tag, str) and hmac.compare_digest(tag, mac(key, domain, body))


def untrusted_dir(path: Path) -> str | None:
    """Why directory ``path`` cannot hold a cache only its user writes, or None when it
    can: it must be a directory owned by the effective user that neither its group nor
    others may write. None also for a path that does not exist yet (it is made private).

    Example:
        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp())
        >>> untrusted_dir(d) is None
        True
        >>> d.chmod(0o777); untrusted_dir(d)
        'it is writable by its group or others (mode 0777)'
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"it cannot be read ({e.strerror or type(e).__name__})"
    if not stat.S_ISDIR(st.st_mode):
        return None                   # not a directory: storing fails and says so
    if st.st_uid != os.geteuid():
        return f"it is owned by another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return f"it is writable by its group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None
