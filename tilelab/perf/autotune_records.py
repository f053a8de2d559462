"""Where :func:`tilelab.autotune`'s winners are kept: the environment that keys a record
(arch, tileiras and cuda-tile versions, device), reading a stored winner back
(:func:`lookup`), the body that is stored (:func:`record_body`) and the stored records
a report lists (:func:`stored_records`). The store itself is
:mod:`tilelab.perf.tuning_db`.

Example:
    >>> record_body({"best": {"tile": 64}, "origin": "tuned", "parts": {}, "results": []})
    {'best': {'tile': 64}, 'results': []}
"""
from __future__ import annotations

import importlib.metadata
from typing import Sequence

from tilelab.perf.autotune_keys import canonical, config_json
from tilelab.perf.tuning_db import RecordKey, TuningDB

__all__ = ["versions", "arch", "device_name", "lookup", "record_body", "stored_records"]


def versions() -> tuple[str, str]:
    """(tileiras version, cuda-tile version); 'none' when absent (CPU-only installs).

    Example:
        >>> len(versions())
        2
    """
    try:
        from tilelab.compiler.toolchain import find_toolchain

        toolchain = find_toolchain().version
    except Exception:
        toolchain = "none"
    try:
        cuda_tile = importlib.metadata.version("cuda-tile")
    except importlib.metadata.PackageNotFoundError:
        cuda_tile = "none"
    return toolchain, cuda_tile


def arch() -> str:
    """'cpu' on the CPU backend, else the GPU's arch ('sm_90').

    Example:
        >>> arch() in ("cpu", "gpu") or arch().startswith("sm_")
        True
    """
    from tilelab.runtime.device import backend, current_arch

    if backend() == "cpu":
        return "cpu"
    return current_arch() or "gpu"


def device_name() -> str:
    """The GPU's name, or 'cpu' on the CPU backend.

    Example:
        >>> isinstance(device_name(), str)
        True
    """
    from tilelab.runtime.device import backend

    if backend() == "cpu":
        return "cpu"
    try:
        from tilelab.runtime.device import gpu

        return gpu().name
    except Exception:
        return "gpu"


def lookup(db: TuningDB, key: RecordKey,
           configs: Sequence[dict]) -> tuple[dict | None, dict | None]:
    """(record, event) for ``key``: the stored winner as a record of origin 'disk' when
    it is still one of ``configs``; else None and, for a record that was found but
    cannot be used (refused, corrupt, a winner no longer listed), the event to report.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> db = TuningDB(Path(tempfile.mkdtemp()))
        >>> key = RecordKey("f", "src", "cpu", "[]", "none", "none", "cfgs")
        >>> lookup(db, key, [{"t": 1}])
        (None, None)
    """
    found = db.load(key)
    if found.status == "hit":
        idx = found.record.get("best_index")
        if isinstance(idx, int) and 0 <= idx < len(configs) and \
                canonical(config_json(configs[idx])) == canonical(found.record["best"]):
            return dict(found.record, best=dict(configs[idx]), origin="disk"), None
        reason = "the stored winner is not one of the configs"
    elif found.status in ("refused", "corrupt"):
        reason = found.reason
    else:
        return None, None
    origin = "corrupt" if found.status == "corrupt" else "refused"
    return None, {"origin": origin, "reason": reason, "path": str(found.path),
                  "parts": (found.record or {}).get("parts")}


def record_body(rec: dict) -> dict:
    """What is stored of a tuning record: everything but where it came from and its key
    parts (the store adds those), with the winner as JSON data.

    Example:
        >>> record_body({"best": {"t": (1, 2)}, "origin": "tuned", "best_index": 0})
        {'best': {'t': [1, 2]}, 'best_index': 0}
    """
    body = {k: v for k, v in rec.items() if k not in ("origin", "parts")}
    body["best"] = config_json(rec["best"])
    return body


def stored_records(db: TuningDB | None, function: str, seen: list[dict],
                   current_arch: str) -> list[dict]:
    """The stored records of ``function`` that ``seen`` (this process's records) does
    not cover: other buckets, or other archs, each marked ``"origin": "stored"``.

    Example:
        >>> stored_records(None, "f", [], "cpu")
        []
    """
    if db is None:
        return []
    buckets = {(r.get("parts") or {}).get("bucket") for r in seen}
    out = []
    for r in db.records(function):
        parts = r.get("parts") or {}
        if parts.get("bucket") not in buckets or parts.get("arch") != current_arch:
            out.append(dict(r, origin="stored"))
    return out
