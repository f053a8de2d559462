"""A run against the previous results: per case, the new median beside the last one
recorded for the same case on the same device, with any slowdown over 2% flagged.

Why: a figure is only known to hold if the next run on the same device reproduces it, and
a 3% slowdown is invisible in a table of 44 cases unless it is computed. The previous
figures come from the suite result files in ``benchmarks/results`` (``suite_*.json`` and
``suite_*.json.gz``, schema ``tilelab-suite/*``) of the same GPU; for each case the newest
file (by the run's date) that timed it wins, so a later run of one group supersedes an
earlier full run for that group's cases only.

Example:
    >>> old = {"c": {"file": "a.json", "date": "d", "medians": {"tilelab": 1.0}}}
    >>> new = [{"id": "c", "variants": {"tilelab": {"median_s": 1.03}}}]
    >>> compare(new, old)["per_case"]["c"]["status"]
    'regression'
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any, Iterable

__all__ = ["THRESHOLD", "load_results", "previous_figures", "compare", "describe_change"]

#: a case is flagged when its new tilelab median exceeds the previous one by more than this
THRESHOLD = 0.02

#: the variants whose medians are carried over and compared (tilelab decides the flag)
VARIANTS = ("tilelab", "torch", "compile", "raw", "tilelab_as_raw", "copy")


def _read(path: Path) -> dict | None:
    try:
        data = path.read_bytes()
        doc = json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)
    except (OSError, ValueError, EOFError):
        return None
    if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith("tilelab-suite/"):
        return None
    return doc


def load_results(where: Iterable[Path], exclude: Iterable[Path] = ()) -> list[tuple[Path, dict]]:
    """The suite result documents in ``where`` (directories, scanned for ``suite_*.json``
    and ``suite_*.json.gz``, or files), oldest run first; files in ``exclude`` (the run's
    own output) and files that are not suite results are left out.

    Example:
        >>> load_results([Path("/no/such/dir")])
        []
    """
    skip = {Path(p).resolve() for p in exclude}
    files: list[Path] = []
    for w in map(Path, where):
        if w.is_dir():
            files += sorted(w.glob("suite_*.json")) + sorted(w.glob("suite_*.json.gz"))
        elif w.is_file():
            files.append(w)
    docs = [(f, d) for f in files if f.resolve() not in skip
            for d in [_read(f)] if d is not None]
    return sorted(docs, key=lambda fd: (str(fd[1].get("env", {}).get("date", "")), fd[0].name))


def previous_figures(docs: list[tuple[Path, dict]], device: str | None = None,
                     slug=None) -> dict[str, dict]:
    """case id -> {file, date, medians {variant: seconds}, elapsed_s (the case's wall
    time)} from the newest document that timed the case's tilelab variant. ``device`` keeps documents of that device only
    (compared through ``slug(env)``, e.g. :func:`benchmarks.common.gpu_slug`).

    Example:
        >>> previous_figures([])
        {}
    """
    out: dict[str, dict] = {}
    for path, doc in docs:                      # oldest first: newer files overwrite
        env = doc.get("env") or {}
        if device is not None and slug is not None and slug(env) != device:
            continue
        for c in doc.get("cases") or []:
            v = c.get("variants") or {}
            meds = {n: (v.get(n) or {}).get("median_s") for n in VARIANTS}
            meds = {n: m for n, m in meds.items() if m}
            if c.get("id") and meds.get("tilelab"):
                out[c["id"]] = {"file": path.name, "date": env.get("date"), "medians": meds,
                                "elapsed_s": c.get("elapsed_s")}
    return out


def _change(new: float | None, old: float | None) -> float | None:
    return new / old - 1.0 if new and old else None


def compare(cases: list[dict], previous: dict[str, dict],
            threshold: float = THRESHOLD) -> dict[str, Any]:
    """Per case: the tilelab median now and before, the change (new / old - 1: above 0
    is slower), and ``status``: 'regression' (slower by more than ``threshold``),
    'faster' (faster by more than it), 'same', 'new' (no previous figure) or
    'not measured' (no median this run). The baselines' changes are listed beside it
    (``baselines``): a baseline that moved as much points at the device (clocks), not
    the kernel.

    Example:
        >>> compare([{"id": "x", "variants": {}}], {})["per_case"]["x"]["status"]
        'not measured'
    """
    per: dict[str, dict] = {}
    for c in cases:
        v = c.get("variants") or {}
        new = (v.get("tilelab") or {}).get("median_s")
        old = previous.get(c["id"])
        entry: dict[str, Any] = {"new_s": new}
        if not new:
            entry["status"] = "not measured"
        elif old is None:
            entry["status"] = "new"
        else:
            ch = _change(new, old["medians"]["tilelab"])
            entry.update(old_s=old["medians"]["tilelab"], change=ch, old_file=old["file"],
                         old_date=old["date"],
                         status="regression" if ch > threshold else
                         "faster" if ch < -threshold else "same")
            entry["baselines"] = {
                n: _change((v.get(n) or {}).get("median_s"), old["medians"].get(n))
                for n in VARIANTS[1:] if (v.get(n) or {}).get("median_s")
                and old["medians"].get(n)}
        per[c["id"]] = entry
    counts: dict[str, int] = {}
    for e in per.values():
        counts[e["status"]] = counts.get(e["status"], 0) + 1
    files = sorted({e["old_file"] for e in per.values() if "old_file" in e})
    return {"threshold": threshold, "files": files, "counts": counts,
            "regressions": [i for i, e in per.items() if e["status"] == "regression"],
            "per_case": per}


def describe_change(entry: dict | None) -> str:
    """The table's 'vs old' cell: '+3.1% !' (a regression), '-0.4%', 'new', or '-'.

    Example:
        >>> describe_change({"status": "regression", "change": 0.031})
        '+3.1% !'
        >>> describe_change({"status": "new"})
        'new'
    """
    if not entry or entry.get("status") == "not measured":
        return "-"
    if entry.get("change") is None:
        return entry.get("status", "-")
    return f"{entry['change'] * 100:+.1f}%" + (" !" if entry["status"] == "regression" else "")
