"""Recorded GPU measurements from ``benchmarks/results``, for notebooks run on a CPU.

Why: on Binder or a laptop the notebooks can only *predict* GPU times. A student should
also see real numbers, each labelled with the GPU, the date and the file it came from.
:func:`recorded` reads the newest benchmark-suite result file
(``benchmarks/results/suite_*.json``, schema ``tilelab-suite/1``) and returns the cases
whose id starts with a prefix. When no such file exists (an installed package without
the repository's results), it prints a note saying so and returns None, so a cell that
shows recorded numbers never fails.

Example:
    >>> rec = recorded("memory/add/float32")                   # doctest: +SKIP
    >>> print(rec.label)                                       # doctest: +SKIP
    NVIDIA H200, 2026-11-30, benchmarks/results/suite_r3w_h200_2026-11-30.json
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Recorded", "recorded", "results_dir"]

SCHEMA = "tilelab-suite/1"


def results_dir() -> Path:
    """The repository's ``benchmarks/results`` folder (it may not exist).

    Example:
        >>> results_dir().name
        'results'
    """
    return Path(__file__).resolve().parents[3] / "benchmarks" / "results"


@dataclass
class Recorded:
    """Measured medians of some suite cases: ``rows`` (one dict per case and variant:
    ``case``, ``variant``, ``impl``, ``median_us``, ``flops``, ``bytes``), and where they
    come from (``gpu``, ``date``, ``path``).

    Example:
        >>> r = Recorded("NVIDIA H200", "2026-11-30", "benchmarks/results/x.json", [])
        >>> r.label
        'NVIDIA H200, 2026-11-30, benchmarks/results/x.json'
    """

    gpu: str
    date: str
    path: str
    rows: list[dict[str, Any]]

    @property
    def label(self) -> str:
        """``GPU, date, file``: what a table or figure of these numbers must say."""
        return f"{self.gpu}, {self.date}, {self.path}"

    def median_us(self, case: str, variant: str = "tilelab") -> float | None:
        """The median time in µs of one case and variant, or None if not recorded.

        Example:
            >>> Recorded("g", "d", "p", [{"case": "a", "variant": "tilelab",
            ...                           "median_us": 2.0}]).median_us("a")
            2.0
        """
        for r in self.rows:
            if r["case"] == case and r["variant"] == variant:
                return r["median_us"]
        return None

    def table(self) -> Any:
        """The rows as a pandas DataFrame indexed by case and variant."""
        import pandas as pd

        return pd.DataFrame(self.rows).set_index(["case", "variant"])


def _suite_files(folder: Path) -> list[tuple[str, Path, dict]]:
    found = []
    for path in sorted(folder.glob("suite_*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("schema") == SCHEMA and data.get("cases"):
            found.append((str(data.get("env", {}).get("date", "")), path, data))
    return sorted(found, key=lambda f: (f[0], f[1].name))


def recorded(prefix: str, folder: Path | None = None, quiet: bool = False) -> Recorded | None:
    """The newest recorded suite measurements of the cases whose id starts with
    ``prefix`` (e.g. ``"attention/bfloat16"``), or None with a printed note when no
    result file has them.

    Example:
        >>> recorded("no-such-case", folder=Path("/nonexistent"))
        no recorded GPU measurements: no benchmark-suite result file (suite_*.json) in /nonexistent
    """
    folder = results_dir() if folder is None else Path(folder)
    files = _suite_files(folder) if folder.is_dir() else []
    for date, path, data in reversed(files):
        rows = [{"case": c["id"], "variant": name, "impl": v.get("impl", ""),
                 "median_us": v["median_s"] * 1e6, "flops": c.get("work", {}).get("flops"),
                 "bytes": c.get("work", {}).get("bytes")}
                for c in data["cases"] if c.get("id", "").startswith(prefix)
                for name, v in c.get("variants", {}).items() if v.get("median_s")]
        if rows:
            try:
                shown = str(path.relative_to(folder.parents[1]))
            except (ValueError, IndexError):
                shown = str(path)
            gpu = data.get("env", {}).get("gpu", "unknown GPU")
            return Recorded(gpu, date[:10], shown, rows)
    if not quiet:
        why = (f"no case starting with {prefix!r} in {len(files)} suite file(s)" if files
               else f"no benchmark-suite result file (suite_*.json) in {folder}")
        print(f"no recorded GPU measurements: {why}")
    return None
