"""The result files the code and the docs cite exist, and each claim's folder says what
it holds: ``benchmarks/results/`` keeps the latest run of each benchmark per GPU, and
``benchmarks/results/claims/<claim>/`` the runs a default or a doc rests on, each with a
README (``benchmarks/results/README.md``)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
CLAIMS = RESULTS / "claims"
#: where citations of result files live
CITING = ("tilelab", "docs", "benchmarks", "notebooks", "README.md")

#: a path under benchmarks/results/, possibly a glob (``*``, ``[b]``); placeholders such
#: as ``<gpu>`` or ``DATE`` are templates, not citations
FULL = re.compile(r"benchmarks/results/((?:claims/[\w.-]+/)?[\w*\[\].-]+\.(?:json|txt|png))")
#: a claim-relative citation: claims/<claim>/<file or glob>
CLAIM = re.compile(r"(?<![\w/])claims/([\w.-]+)/([\w*\[\].-]+\.(?:json|txt|png))")
#: a dated result file named alone
BARE = re.compile(r"(?<![\w/*-])([a-z][a-z0-9_-]*_(?:h100|h200|cpu-2core)_20\d\d-\d\d-\d\d[a-z]?"
                  r"\.(?:json|txt|png))")


def citing_files() -> list[Path]:
    out = []
    for top in CITING:
        p = ROOT / top
        files = [p] if p.is_file() else [f for f in p.rglob("*")
                                          if f.suffix in (".py", ".md", ".ipynb")]
        out += [f for f in files if RESULTS not in f.parents and "__pycache__" not in f.parts]
    return out


def citations() -> dict[str, set[str]]:
    """cited path under benchmarks/results (or a bare name) -> the files citing it"""
    found: dict[str, set[str]] = {}
    for f in citing_files():
        # a doctest's file names are its own example data
        text = "\n".join(line for line in f.read_text(encoding="utf-8").splitlines()
                         if ">>>" not in line)
        where = str(f.relative_to(ROOT))
        for m in FULL.finditer(text):
            found.setdefault(m.group(1), set()).add(where)
        for m in CLAIM.finditer(text):
            found.setdefault(f"claims/{m.group(1)}/{m.group(2)}", set()).add(where)
        for m in BARE.finditer(text):
            found.setdefault(f"**/{m.group(1)}", set()).add(where)
    return found


def test_the_readers_find_citations():
    cited = citations()
    assert "claims/tile-sweeps-h200/sweep_h200_*.json" in cited     # (the walk works)
    assert "predict_fit_h200_2026-12-02.json" in cited


def test_every_cited_result_file_exists():
    templates = re.compile(r"<|DATE|^\w\.json$")     # suite_<gpu>_<date>.json, x.json
    missing = {c: sorted(w) for c, w in citations().items()
               if not templates.search(c) and not list(RESULTS.glob(c))}
    assert not missing, ("these result files are cited but not in benchmarks/results "
                         "(moved into a claim's folder? cite benchmarks/results/claims/"
                         f"<claim>/<file>): {missing}")


@pytest.mark.parametrize("claim", sorted(p.name for p in CLAIMS.iterdir() if p.is_dir()))
def test_each_claim_says_what_it_is_what_it_rests_on_and_who_cites_it(claim):
    folder = CLAIMS / claim
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert readme.startswith("# ") and "**Claim.**" in readme and "**Cited by.**" in readme
    assert re.search(r"\*\*Scripts?\.\*\*", readme), claim
    files = sorted(p.name for p in folder.iterdir() if p.name != "README.md")
    assert files, f"claims/{claim} holds no result file"
    assert [f for f in files if f"`{f}`" not in readme] == []
    assert re.search(r"`[0-9a-f]{7}`", readme), "the commit that recorded the runs"
    cited = {c for c in citations() if c.startswith(f"claims/{claim}/")}
    assert cited, f"nothing cites claims/{claim}/: its files are no claim's evidence"


def test_the_results_readme_lists_every_claim_and_every_latest_run():
    readme = (RESULTS / "README.md").read_text(encoding="utf-8")
    for claim in (p.name for p in CLAIMS.iterdir() if p.is_dir()):
        assert f"`claims/{claim}/`" in readme, claim
    for f in RESULTS.iterdir():
        if f.is_file() and f.name != "README.md":
            assert f"`{f.name}`" in readme or (f.suffix == ".png" and
                                               f"`{f.stem}.json` (+ `.png`)" in readme), f.name
