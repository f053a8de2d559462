"""Summaries, targets, the roofline PNG and the printed table of a suite run.

Why separate: the figures the issue asks for (geometric mean vs cuBLAS, fraction of
4.8 TB/s, ratio to SDPA, safe vs raw) are computed from the per-case results only, so a
JSON file from any run (or a merge of runs) can be re-summarized without a GPU.

Example:
    >>> summarize([])["status_counts"]
    {}
"""
from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

__all__ = ["DEFAULT_TARGETS", "summarize", "check_targets", "roofline_png", "table"]

#: Pass marks per figure: the targets of the kernel-library issue (H200, medians, one run).
DEFAULT_TARGETS: dict[str, dict] = {
    "gemm_geomean_vs_cublas": {
        "min": 1.00, "path": ["gemm", "geomean_vs_cublas", "all"],
        "what": "geometric mean over GEMM cases (squares bf16/fp16 1024-16384, Qwen3-8B "
                "projections at M = 1, 16, 128, 2048, 8192) of cuBLAS time / tilelab time"},
    "memory_min_fraction_of_bandwidth": {
        "min": 0.90, "path": ["memory", "min_fraction_of_bandwidth"],
        "what": "worst memory-bound kernel's minimal-byte bandwidth / nominal (4.8 TB/s)"},
    "memory_geomean_vs_torch": {
        "min": 1.00, "path": ["memory", "geomean_vs_torch"],
        "what": "geometric mean of torch time / tilelab time over memory-bound cases"},
    "memory_min_vs_compile": {
        "min": 1.00, "path": ["memory", "min_vs_compile"],
        "what": "worst memory-bound kernel's torch.compile (Inductor) time / tilelab time"},
    "memory_min_fraction_of_copy": {
        "min": 0.95, "path": ["memory", "min_fraction_of_copy"],
        "what": "worst memory-bound kernel's bandwidth / a copy of the same bytes timed in "
                "the same rounds"},
    "attention_geomean_vs_sdpa": {
        "min": 1.00, "path": ["attention", "geomean_vs_sdpa"],
        "what": "geometric mean of SDPA time / tilelab time over sequence lengths"},
    "decode_mean_fraction_of_bandwidth": {
        "min": 0.85, "path": ["decode", "mean_fraction_of_bandwidth"],
        "what": "M = 1 GEMV on Qwen3-8B shapes: mean minimal-byte bandwidth / nominal"},
    "safe_vs_raw_geomean": {
        "min": 0.99, "path": ["safe_vs_raw", "geomean"],
        "what": "geometric mean of raw time / safe time (within 1%), like-for-like pairs"},
}


def _geomean(xs: Iterable[float | None]) -> float | None:
    vals = [x for x in xs if x is not None and x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, vals)) / len(vals)) if vals else None


def _fig(case: dict, key: str) -> float | None:
    return (case.get("figures") or {}).get(key)


def summarize(cases: list[dict]) -> dict:
    """Per-group figures of the issue from per-case results (see README 'Figures')."""
    ok = [c for c in cases if c.get("status") == "ok"]
    by = {g: [c for c in ok if c.get("group") == g]
          for g in ("gemm", "attention", "memory", "decode")}
    out: dict[str, Any] = {"status_counts": dict(Counter(c.get("status") for c in cases))}
    gemm = by["gemm"]
    if gemm:
        fam: dict[str, list] = {}
        for c in gemm:
            tags = c.get("tags", {})
            key = tags.get("family", "other")
            fam.setdefault(key, []).append(_fig(c, "tilelab_vs_torch"))
            if key == "qwen3":
                fam.setdefault(f"qwen3_M{tags.get('M')}", []).append(_fig(c, "tilelab_vs_torch"))
        out["gemm"] = {"geomean_vs_cublas": {"all": _geomean(_fig(c, "tilelab_vs_torch")
                                                             for c in gemm),
                                             **{k: _geomean(v) for k, v in sorted(fam.items())}},
                       "best_fraction_of_peak": max((_fig(c, "tilelab_fraction_of_peak") or 0
                                                     for c in gemm), default=None),
                       "cases": len(gemm)}
    att = by["attention"]
    if att:
        out["attention"] = {
            "geomean_vs_sdpa": _geomean(_fig(c, "tilelab_vs_torch") for c in att),
            "per_seq": {str(c["params"]["S"]): {"vs_sdpa": _fig(c, "tilelab_vs_torch"),
                                                "tflops": (_fig(c, "tilelab_flop_per_s") or 0)
                                                / 1e12}
                        for c in att},
            "cases": len(att)}
    for group, name in (("memory", "per_case"), ("decode", "per_projection")):
        cs = by[group]
        if not cs:
            continue
        fr = [_fig(c, "tilelab_fraction_of_bandwidth") for c in cs]
        vals = [f for f in fr if f is not None]
        copies = [f for f in (_fig(c, "tilelab_fraction_of_copy") for c in cs)
                  if f is not None]
        comp = [f for f in (_fig(c, "tilelab_vs_compile") for c in cs) if f is not None]
        out[group] = {
            name: {c["id"]: {"TBps": (_fig(c, "tilelab_byte_per_s") or 0) / 1e12,
                             "fraction_of_bandwidth": _fig(c, "tilelab_fraction_of_bandwidth"),
                             "fraction_of_copy": _fig(c, "tilelab_fraction_of_copy"),
                             "vs_torch": _fig(c, "tilelab_vs_torch"),
                             "vs_compile": _fig(c, "tilelab_vs_compile")} for c in cs},
            "min_fraction_of_bandwidth": min(vals) if vals else None,
            "min_fraction_of_copy": min(copies) if copies else None,
            "min_vs_compile": min(comp) if comp else None,
            "geomean_vs_compile": _geomean(comp),
            "compile_not_timed": sorted({f"{(c['variants'].get('compile') or {}).get('status')}:"
                                         f" {(c['variants'].get('compile') or {}).get('reason')}"
                                         for c in cs if "compile" in (c.get("variants") or {})
                                         and _fig(c, "tilelab_vs_compile") is None}),
            "mean_fraction_of_bandwidth": sum(vals) / len(vals) if vals else None,
            "geomean_vs_torch": _geomean(_fig(c, "tilelab_vs_torch") for c in cs),
            "cases": len(cs)}
    pairs = [c for c in ok if _fig(c, "safe_vs_raw") is not None]
    fair = [c for c in pairs if _fig(c, "safe_vs_raw_like_for_like")]
    if pairs:
        ops = sorted({c["op"] for c in fair})
        out["safe_vs_raw"] = {
            "geomean": _geomean(_fig(c, "safe_vs_raw") for c in fair),
            "min": min((_fig(c, "safe_vs_raw") for c in fair), default=None),
            "per_op": {op: _geomean(_fig(c, "safe_vs_raw") for c in fair if c["op"] == op)
                       for op in ops},
            "pairs": len(fair), "not_like_for_like": len(pairs) - len(fair)}
    return out


def check_targets(summary: dict, targets: dict | None = None) -> dict:
    """Each target with the achieved figure and whether it is met (None: not measured)."""
    out = {}
    for name, t in (targets or DEFAULT_TARGETS).items():
        v: Any = summary
        for p in t.get("path", []):
            v = v.get(p) if isinstance(v, dict) else None
        out[name] = {"target_min": t.get("min"), "achieved": v, "what": t.get("what", ""),
                     "met": None if v is None else bool(v >= t.get("min", 0))}
    return out


# --------------------------------------------------------------------------- roofline

def _points(cases: list[dict], env: dict, variants=("tilelab",)) -> list:
    from tilelab.perf.roofline import RooflinePoint

    pts = []
    on_gpu = env.get("backend") == "gpu"
    for c in cases:
        w = c.get("work") or {}
        for name in variants:
            v = (c.get("variants") or {}).get(name) or {}
            if not v.get("median_s") or not w.get("bytes"):
                continue
            label = c["id"].split("/", 1)[-1].replace("bfloat16/", "").replace("qwen3_", "")
            pts.append(RooflinePoint(label if name == "tilelab" else f"{label} [{name}]",
                                     float(w["flops"]), float(w["bytes"]), w["precision"],
                                     v["median_s"], measured=on_gpu,
                                     device=env.get("gpu") if on_gpu else None))
    return pts


def roofline_png(cases: list[dict], env: dict, nominal_gpu: str, path: str | Path) -> dict:
    """Draw the tilelab points under the device's ceilings; returns {'path', 'how'} or
    {'error'}. Uses the lab's ``roofline_figure`` when present, else plain matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    pts = _points(cases, env)
    title = f"tilelab suite on {env.get('gpu')}: {len(pts)} kernels (dense ceilings)"
    try:
        from tilelab.lab.figures.roofline_plot import roofline_figure, save_png

        fig = roofline_figure(pts, gpus=(nominal_gpu,), theme="light", title=title)
        save_png(fig, path)
        how = "tilelab.lab.figures.roofline_plot.roofline_figure"
    except Exception as lab_error:   # the lab may be missing or mid-change: draw it here
        try:
            _own_plot(pts, nominal_gpu, title, path)
            how = f"suite matplotlib fallback ({type(lab_error).__name__}: {lab_error})"
        except Exception as e:
            return {"error": f"{type(e).__name__}: {e}"}
    import matplotlib.pyplot as plt

    plt.close("all")
    return {"path": str(path), "how": how, "points": len(pts)}


def _own_plot(pts: list, gpu: str, title: str, path: str | Path) -> None:
    import matplotlib.pyplot as plt

    from tilelab.perf.roofline import Roofline

    r = Roofline([gpu])
    for p in pts:
        r.add_point(p)
    data = r.series()
    fig, ax = plt.subplots(figsize=(10, 5.6))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    for g in data["gpus"]:
        for c in g["ceilings"]:
            line = c["polyline"]
            ax.plot(line["intensity"], line["performance"], label=f"{g['name']} {c['precision']}")
    for p in data["points"]:
        if p["performance"]:
            ax.scatter([p["intensity"]], [p["performance"]], s=14)
            ax.annotate(p["name"], (p["intensity"], p["performance"]), fontsize=5,
                        xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("arithmetic intensity (FLOP/B)")
    ax.set_ylabel("performance (FLOP/s)")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="major", lw=0.4)
    ax.legend(fontsize=7, loc="lower right")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130, bbox_inches="tight")


# --------------------------------------------------------------------------- table

def _t(v: dict | None) -> str:
    s = (v or {}).get("median_s")
    if not s:
        return {"ok": "-", None: "-"}.get((v or {}).get("status"), (v or {}).get("status", "-"))
    return f"{s * 1e3:.3f}ms" if s >= 1e-3 else f"{s * 1e6:.1f}us"


def _host(v: dict | None) -> str:
    """Host time per call of a variant; 's' marks a call that waited for its kernels."""
    if not v or not v.get("host_median_s"):
        return "-"
    return _t({"median_s": v["host_median_s"]}) + ("" if v.get("timed_async", True) else "s")


def _r(x: float | None) -> str:
    return f"{x:.2f}" if x is not None else "-"


def _achieved(c: dict) -> str:
    f, v = c.get("figures") or {}, c.get("variants") or {}
    if c.get("metric") == "flops" and f.get("tilelab_flop_per_s"):
        frac = f.get("tilelab_fraction_of_peak")
        return f"{f['tilelab_flop_per_s'] / 1e12:.1f} TFLOP/s" + \
            (f" ({frac:.0%} of peak)" if frac else "")
    if f.get("tilelab_byte_per_s"):
        ach = f"{f['tilelab_byte_per_s'] / 1e12:.2f} TB/s " \
              f"({f.get('tilelab_fraction_of_bandwidth', 0):.0%} of nominal"
        if f.get("tilelab_fraction_of_copy") is not None:
            ach += f", {f['tilelab_fraction_of_copy']:.1%} of copy"
        return ach + ")"
    return (c.get("error") or (v.get("tilelab") or {}).get("reason") or "")[:60]


def _row(c: dict, vs_old: str) -> str:
    v, f = c.get("variants") or {}, c.get("figures") or {}
    sr = f.get("safe_vs_raw")
    return (f"{c['id'][:44]:<44} {c.get('status', '?'):<8} {_t(v.get('torch')):>10} "
            f"{_t(v.get('tilelab')):>10} {_host(v.get('tilelab')):>10} "
            f"{_t(v.get('raw')):>10} {_r(f.get('tilelab_vs_torch')):>8} "
            f"{_r(f.get('tilelab_vs_compile')):>7} "
            f"{_r(sr) + ('' if f.get('safe_vs_raw_like_for_like', True) else '*'):>8} "
            f"{vs_old:>8}  {_achieved(c)}")


def table(cases: list[dict], summary: dict, targets: dict,
          comparison: dict | None = None) -> str:
    """The plain-text table printed last: one row per case (with its change against the
    previous result, from :func:`benchmarks.suite.compare.compare`), then the group
    figures, the regressions and the targets.

    Example:
        >>> print(table([], {}, {}).splitlines()[0])      # doctest: +NORMALIZE_WHITESPACE
        case status torch tilelab tl host raw tl/torch tl/comp safe/raw vs old achieved
    """
    from .compare import describe_change

    per = (comparison or {}).get("per_case", {})
    head = f"{'case':<44} {'status':<8} {'torch':>10} {'tilelab':>10} {'tl host':>10} " \
           f"{'raw':>10} {'tl/torch':>8} {'tl/comp':>7} {'safe/raw':>8} {'vs old':>8}  achieved"
    lines = [head, "-" * len(head)]
    lines += [_row(c, describe_change(per.get(c["id"]))) for c in cases]
    lines += ["", "tl/torch = torch time / tilelab time (cuBLAS for GEMM, SDPA for attention; "
              ">1: tilelab faster); tl/comp = torch.compile (Inductor) time / tilelab time; "
              "safe/raw = raw time / safe time (* = not like for like)",
              "tl host = host time per tilelab call (median; the call launches without "
              "waiting, sync=False, unless marked s); vs old = tilelab median against the "
              "previous result of the case (! = slower by more than "
              f"{(comparison or {}).get('threshold', 0.02):.0%})"]
    lines += _summary_lines(summary)
    if comparison is not None:
        lines += _comparison_lines(comparison)
    lines.append("targets (the issue's unless --targets):")
    for name, t in targets.items():
        mark = {True: "MET", False: "NOT MET", None: "not measured"}[t["met"]]
        lines.append(f"  {name:<36} >= {t['target_min']:<5} achieved {_r(t['achieved']):>6}  "
                     f"{mark}")
    return "\n".join(lines)


def _summary_lines(summary: dict) -> list[str]:
    lines = []
    g = summary.get("gemm", {}).get("geomean_vs_cublas", {})
    if g:
        lines.append("GEMM geomean vs cuBLAS: " + ", ".join(f"{k} {_r(v)}" for k, v in g.items()))
    for group, key in (("attention", "geomean_vs_sdpa"), ("memory", "min_fraction_of_bandwidth"),
                       ("decode", "mean_fraction_of_bandwidth")):
        if group in summary:
            extra = summary[group].get("min_fraction_of_copy")
            lines.append(f"{group}: {key} {_r(summary[group].get(key))}"
                         + (f" (min fraction of a copy in this run {_r(extra)})"
                            if extra is not None else ""))
    mem = summary.get("memory", {})
    if mem.get("min_vs_compile") is not None:
        lines.append(f"memory vs torch.compile: min {_r(mem['min_vs_compile'])}, geomean "
                     f"{_r(mem.get('geomean_vs_compile'))}")
    for why in mem.get("compile_not_timed", []):
        lines.append(f"memory: torch.compile baseline not timed ({why[:150]})")
    if "safe_vs_raw" in summary:
        s = summary["safe_vs_raw"]
        lines.append(f"safe vs raw: geomean {_r(s['geomean'])} over {s['pairs']} pairs "
                     f"(per op: {', '.join(f'{k} {_r(v)}' for k, v in s['per_op'].items())})")
    lines.append("status: " + ", ".join(f"{k} {v}" for k, v in
                                        summary.get("status_counts", {}).items()))
    return lines


def _comparison_lines(comparison: dict) -> list[str]:
    counts = ", ".join(f"{k} {v}" for k, v in sorted(comparison.get("counts", {}).items()))
    files = ", ".join(comparison.get("files") or []) or "no previous result of this device"
    lines = [f"against the previous results ({files}): {counts or 'no cases'}"]
    for cid in comparison.get("regressions", []):
        e = comparison["per_case"][cid]
        base = ", ".join(f"{n} {ch * 100:+.1f}%" for n, ch in e.get("baselines", {}).items())
        lines.append(f"  REGRESSION {cid}: {e['old_s'] * 1e6:.1f} -> {e['new_s'] * 1e6:.1f} us "
                     f"({e['change'] * 100:+.1f}%; baselines in the same run: {base or '-'})")
    return lines
