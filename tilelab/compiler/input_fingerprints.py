"""Fingerprints of the files a compile read, so a shortcut can tell they are unchanged.

``tilelab compile`` answers a repeated command from a shortcut in the disk cache
(:meth:`tilelab.compiler.cache.DiskCache.recall`) only while every input of the first
run still has the fingerprint recorded then. The user's own files are fingerprinted by
content (sha256); the interpreter's trees (the standard library, site-packages) and the
programs run hold too many, too large files to hash at each run, so they are
fingerprinted by metadata that no user can put back after an edit: size, modification
and change times, inode and device.
"""
from __future__ import annotations

import hashlib
import os
import stat
from typing import Any

__all__ = ["fingerprint", "fingerprints", "unchanged"]


def _installed_roots() -> tuple[str, ...]:
    """The interpreter's own trees: the standard library and the site-packages folders."""
    import site

    roots = [os.path.dirname(os.__file__), *getattr(site, "getsitepackages", list)()]
    if getattr(site, "ENABLE_USER_SITE", False):
        roots.append(site.getusersitepackages())
    return tuple({os.path.join(p, "") for p in roots})


def fingerprint(path: str, content: bool = True) -> str | None:
    """What a shortcut checks of one input: the sha256 of the file's bytes (``content``),
    else its size, modification and change times, inode and device (for installed files
    and programs, too many and too large to hash at each run); None when it is not a
    readable regular file. The change time (``st_ctime_ns``) is set by the kernel at
    every write, rename, chmod and ``utime``, and no user can set it back, so a file
    edited in place with its modification time restored is still seen as changed.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
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
            return (f"stat:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}:"
                    f"{st.st_dev}")
        with open(path, "rb") as f:
            return "sha256:" + hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def fingerprints(files: Any, programs: Any = (), skip: tuple[str, ...] = ()) -> dict[str, str]:
    """path -> :func:`fingerprint` of every regular file of ``files`` (by content, but
    in the standard library and site-packages) and of ``programs`` (by size, times,
    inode and device), leaving out paths under ``skip``, ``/proc``, ``/sys`` and ``/dev``, the
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
