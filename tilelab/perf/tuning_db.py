"""Tuning records on disk: which config won, for which kernel source, GPU and toolchain.

Why a separate store: tuning a kernel costs seconds per config (compiles, warm-up, timed
runs), so a winner found once should serve later processes — but only while everything
it was measured under still holds. A record therefore carries its *key parts* (the
function, the source hash of the host function and its kernels, the arch, the shape
bucket, the tileiras and cuda-tile versions, a hash of the config list); a record whose
parts differ from the caller's is **refused** (reported, never used) and the caller
retunes and overwrites it.

Layout: ``<tilelab cache dir>/autotune/v1/<function>/<hash of function, arch, bucket>.json``.
Each file is one JSON record with a sha256 checksum of its body; it is written to a
temporary file in the same directory and renamed into place, so concurrent writers never
leave half a record (the last complete one wins) and a corrupt or truncated file is
ignored. ``TILELAB_CACHE=0`` disables the store (tuning then lives in memory only).

Example:
    >>> import tempfile
    >>> db = TuningDB(tempfile.mkdtemp())
    >>> k = RecordKey("m.f", "src", "sm_90", '[["tensor",[64],"float32"]]', "13.4", "1.7", "c")
    >>> _ = db.store(k, {"best": {"tile": 64}, "results": []})
    >>> got = db.load(k)
    >>> got.status, got.record["best"]
    ('hit', {'tile': 64})
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

__all__ = ["FORMAT", "RecordKey", "Lookup", "TuningDB", "default_db"]

FORMAT = "tilelab-autotune/1"


@dataclass(frozen=True)
class RecordKey:
    """Everything a tuning result depends on; a stored record must match every part.

    Example:
        >>> a = RecordKey("m.f", "s1", "sm_90", "[]", "13.4.92", "1.7.0", "c")
        >>> b = RecordKey("m.f", "s2", "sm_90", "[]", "13.4.92", "1.7.0", "c")
        >>> a.mismatches(asdict(b))
        ['source']
    """

    function: str    #: module.qualname of the tuned host function
    source: str      #: sha256 of the host function's source and its kernels' fingerprints
    arch: str        #: 'sm_90', ... or 'cpu'
    bucket: str      #: canonical JSON of the bucketed key values
    toolchain: str   #: tileiras version (find_toolchain().version)
    cuda_tile: str   #: cuda-tile package version
    configs: str     #: sha256 of the config list (a changed list invalidates the winner)

    def file_id(self) -> str:
        """The record's file name: function, arch and bucket (the other parts are checked)."""
        blob = json.dumps([self.function, self.arch, self.bucket])
        return hashlib.sha256(blob.encode()).hexdigest()[:32]

    def mismatches(self, stored: Any) -> list[str]:
        """Names of the parts that differ from a stored record's ``parts`` mapping."""
        if not isinstance(stored, dict):
            return [f.name for f in fields(self)]
        return [f.name for f in fields(self) if stored.get(f.name) != getattr(self, f.name)]


@dataclass(frozen=True)
class Lookup:
    """The outcome of :meth:`TuningDB.load`: status 'hit', 'miss', 'refused' or 'corrupt'.

    Example:
        >>> Lookup("miss").record is None
        True
    """

    status: str
    record: dict | None = None
    reason: str = ""
    path: Path | None = None


def _checksum(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _safe_name(function: str) -> str:
    """A directory name for a function: readable prefix plus a hash (no path tricks)."""
    readable = re.sub(r"[^A-Za-z0-9_.-]", "_", function)[-80:].lstrip(".") or "fn"
    return f"{readable}-{hashlib.sha256(function.encode()).hexdigest()[:8]}"


def _default_root() -> Path:
    from tilelab.compiler.cache import _default_dir

    return _default_dir() / "autotune" / "v1"


class TuningDB:
    """A directory of tuning records (see the module docstring).

    Example:
        >>> import tempfile
        >>> db = TuningDB(tempfile.mkdtemp())
        >>> db.load(RecordKey("m.f", "s", "cpu", "[]", "t", "c", "h")).status
        'miss'
    """

    def __init__(self, root: str | os.PathLike | None = None):
        self.root = Path(root) if root is not None else _default_root()

    def path(self, key: RecordKey) -> Path:
        """Where the record of ``key`` lives."""
        return self.root / _safe_name(key.function) / f"{key.file_id()}.json"

    def load(self, key: RecordKey) -> Lookup:
        """The record for ``key``: a 'hit' only when its checksum and every key part match."""
        path = self.path(key)
        try:
            text = path.read_text()
        except FileNotFoundError:
            return Lookup("miss", path=path)
        except OSError as e:
            return Lookup("corrupt", reason=f"unreadable: {e}", path=path)
        record, why = _parse(text)
        if record is None:
            return Lookup("corrupt", reason=why, path=path)
        bad = key.mismatches(record.get("parts"))
        if bad:
            stored = record.get("parts") or {}
            detail = ", ".join(f"{n}: stored {stored.get(n)!r}, now {getattr(key, n)!r}"
                               for n in bad)
            return Lookup("refused", record, f"key parts changed ({detail})", path)
        return Lookup("hit", record, path=path)

    def store(self, key: RecordKey, body: dict) -> Path:
        """Write ``body`` (with the key parts and a checksum added) atomically; returns
        the path. Raises OSError when the directory cannot be written."""
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        record = dict(body, format=FORMAT, parts=asdict(key), created=time.time())
        record.pop("checksum", None)
        record["checksum"] = _checksum(record)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(record, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)  # atomic: readers see the old or the new record, whole
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return path

    def records(self, function: str) -> list[dict]:
        """Every intact record stored for ``function`` (any arch, bucket or version)."""
        folder = self.root / _safe_name(function)
        out = []
        for p in sorted(folder.glob("*.json")) if folder.is_dir() else ():
            try:
                record, _ = _parse(p.read_text())
            except OSError:
                continue
            if record is not None:
                out.append(dict(record, path=str(p)))
        return out

    def clear(self, function: str) -> int:
        """Remove every record of ``function``; returns how many files went."""
        folder = self.root / _safe_name(function)
        n = 0
        for p in folder.glob("*.json") if folder.is_dir() else ():
            try:
                p.unlink()
                n += 1
            except OSError:
                pass
        return n


def _parse(text: str) -> tuple[dict | None, str]:
    """(record, '') for an intact record, else (None, why it is not one)."""
    try:
        record = json.loads(text)
    except ValueError as e:
        return None, f"not JSON ({e})"
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        return None, f"not a {FORMAT} record"
    body = {k: v for k, v in record.items() if k != "checksum"}
    if record.get("checksum") != _checksum(body):
        return None, "checksum mismatch"
    if not isinstance(record.get("best"), dict):
        return None, "no winning config"
    return record, ""


def default_db() -> TuningDB | None:
    """The store under the tilelab cache dir, or None when ``TILELAB_CACHE=0``.

    Example:
        >>> isinstance(default_db(), (TuningDB, type(None)))
        True
    """
    from tilelab import config

    if not config.cache_enabled():
        return None
    return TuningDB()
