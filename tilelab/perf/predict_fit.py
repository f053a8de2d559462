"""Fit the constants of :mod:`tilelab.perf.predict_model` to measured launch times.

Why: the model's constants are stated assumptions until a GPU run pins them. Given
launches whose shapes the CPU interpreter counted and whose times a GPU measured,
:func:`fit_constants` finds the constants (launch floor, efficiencies, the tile MMA law,
the block latency, the share of SMs that saturates DRAM) that minimise the squared log ratio of
predicted to measured time (a relative error: a 2 µs launch and a 2 ms GEMM weigh the
same), and reports every row's prediction and error before and after the fit.
:func:`rows_from_result` rebuilds the rows from a ``benchmarks/device/predict_fit.py`` result
file, so a fit can be redone without a GPU.

How: each row's constant-free terms (:func:`~tilelab.perf.predict_model.launch_terms`) are
computed once; :func:`~tilelab.perf.predict_model.model_time` then evaluates the model for many
constant sets at once (so the fit uses the model itself, not a copy of it). The search,
in the log of each constant inside stated bounds, samples the box at seeded random
points and runs a pattern search (the best coordinate move, halving the step when none
helps) from the start values and from the best samples; numpy only. A constant that no
row depends on (its term is under half of every row's predicted time; for the tile law:
the time it adds) is *not constrained* by the data: it keeps its start value and its
uncalibrated status, and the result says so. Constants named in ``hold`` are not fitted
at all (the reason is kept in the notes). A fitted value at a bound is listed in
``at_bound`` (an efficiency above 1 is not physical, so the bound is 1).

Example:
    >>> from tilelab.perf import predict
    >>> from tilelab.perf.predict_model import LaunchShape
    >>> def row(name, blocks, dram, flops=0.0, precision="fp32"):
    ...     s = LaunchShape(blocks=blocks, useful_flops=flops, executed_flops=flops,
    ...                     dram_bytes=dram, precision=precision)
    ...     true = {"launch_floor": Constant("launch floor", 3e-6, "s", "truth"),
    ...             "eff_memory": Constant("DRAM efficiency", 0.9, "fraction", "truth")}
    ...     return FitRow(name, s, predict(s, "h200", constants=true).total_s)
    >>> rows = [row("tiny", 1, 1e3), row("stream", 132 * 8, 4e9), row("mid", 132, 2e8)]
    >>> fit = fit_constants(rows, source="example")
    >>> round(fit.constants["launch_floor"].value * 1e6, 2), fit.fitted
    (3.0, ('launch_floor', 'eff_memory'))
    >>> round(fit.constants["eff_memory"].value, 3), fit.after.max_abs_log < 1e-3
    (0.9, True)
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from tilelab.errors import TilelabError
from tilelab.perf.predict_model import (CONSTANTS, UNIT_KEYS, Constant, GemmShape,
                                        LaunchShape, launch_terms, model_time, stack_terms)
from tilelab.perf.prediction import predict

__all__ = ["FitError", "FitRow", "ErrorStats", "FitResult", "fit_constants", "BOUNDS",
           "KEYS", "MIN_SHARE", "load_fit", "constant_lines", "rows_from_result",
           "shape_from_dict"]

#: the constants a fit may set, in the order of the parameter vector
KEYS = ("launch_floor", "eff_memory", "eff_tensor", "eff_cuda_mma", "eff_cuda",
        "tile_latency", "tile_alpha", "block_latency", "dram_sm_share")

#: (low, high) of each fitted constant, in its unit (seconds, fractions, an exponent)
BOUNDS: dict[str, tuple[float, float]] = {
    "launch_floor": (1e-7, 1e-3), "eff_memory": (1e-3, 1.0), "eff_tensor": (1e-3, 1.0),
    "eff_cuda_mma": (1e-3, 1.0), "eff_cuda": (1e-3, 1.0), "tile_latency": (1e-10, 1e-5),
    "tile_alpha": (0.25, 4.0), "block_latency": (1e-8, 1e-4),
    "dram_sm_share": (0.01, 1.0)}

#: a constant is constrained when its term is at least this share of some row's time
MIN_SHARE = 0.5

#: seeded random points of the search box, and how many of the best start a pattern search
SAMPLES, STARTS = 2048, 6


class FitError(TilelabError, ValueError):
    """Rows that cannot be fitted (none, a non-positive or non-finite time, an unknown
    constant); the message names the row and says what to pass instead.

    Example:
        >>> try:
        ...     fit_constants([], source="x")
        ... except FitError as e:
        ...     print(e.message)
        no rows to fit
    """


@dataclass(frozen=True)
class FitRow:
    """One launch to fit: its name, the model's inputs (a
    :class:`~tilelab.perf.predict_model.LaunchShape`), the measured median time in seconds,
    and the GPU (a spec or key) it ran on.

    Example:
        >>> s = LaunchShape(blocks=1, useful_flops=0, executed_flops=0, dram_bytes=4,
        ...                 precision="fp32")
        >>> FitRow("tiny", s, 5e-6).gpu
        'h200'
    """

    name: str
    shape: LaunchShape
    measured_s: float
    gpu: Any = "h200"


@dataclass(frozen=True)
class ErrorStats:
    """Summary of per-row errors ``log(predicted / measured)``: the number of rows, the
    median and largest absolute log ratio, the mean log ratio (the bias: above 0 the
    model is slow), and the worst row's name.

    Example:
        >>> s = ErrorStats.of([0.1, -0.5, 0.2], ["a", "b", "c"])
        >>> s.median_abs_log, s.max_abs_log, s.worst, round(s.max_factor, 3)
        (0.2, 0.5, 'b', 1.649)
    """

    n: int
    median_abs_log: float
    max_abs_log: float
    mean_log: float
    worst: str

    @classmethod
    def of(cls, log_ratios: Sequence[float], names: Sequence[str]) -> "ErrorStats":
        """Stats of ``log_ratios`` (one per row, named by ``names``)."""
        a = np.abs(np.asarray(log_ratios, dtype=np.float64))
        i = int(np.argmax(a))
        return cls(len(a), float(np.median(a)), float(a[i]),
                   float(np.mean(log_ratios)), str(names[i]))

    @property
    def median_factor(self) -> float:
        """The median error as a factor (1.25: off by 25% either way)."""
        return math.exp(self.median_abs_log)

    @property
    def max_factor(self) -> float:
        """The largest error as a factor."""
        return math.exp(self.max_abs_log)

    def describe(self) -> str:
        """One line: median and worst error as factors, and the bias.

        Example:
            >>> ErrorStats.of([0.1, -0.2], ["a", "b"]).describe()
            'median ×1.16, worst ×1.22 (b), bias ×0.95 over 2 launches'
        """
        return (f"median ×{self.median_factor:.3g}, worst ×{self.max_factor:.3g} "
                f"({self.worst}), bias ×{math.exp(self.mean_log):.2g} over {self.n} launches")


@dataclass(frozen=True)
class FitResult:
    """What :func:`fit_constants` found: the model's whole constant set (``constants``:
    fitted ones ``calibrated=True`` with the given source, the others as they were),
    which were fitted, which the data did not constrain, which ended at a bound, the
    number of rows in which each constant's term is at least :data:`MIN_SHARE` of the
    time (``dominates``: key -> rows), per-row results, error stats before and after,
    and the constants held at their start values on request (``held``).

    Example:
        >>> s = LaunchShape(blocks=1, useful_flops=0, executed_flops=0, dram_bytes=4,
        ...                 precision="fp32")
        >>> fit = fit_constants([FitRow("tiny", s, 5e-6)], source="r.json")
        >>> fit.fitted, fit.dominates["launch_floor"], fit.rows[0]["limiter_after"]
        (('launch_floor',), 1, 'launch floor')
    """

    constants: dict[str, Constant]
    fitted: tuple[str, ...]
    unconstrained: tuple[str, ...]
    at_bound: tuple[str, ...]
    dominates: dict[str, int]
    rows: list[dict[str, Any]]
    before: ErrorStats
    after: ErrorStats
    source: str = ""
    notes: tuple[str, ...] = field(default=())
    held: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON (:func:`load_fit` reads it back).

        Example:
            >>> s = LaunchShape(blocks=1, useful_flops=0, executed_flops=0, dram_bytes=4,
            ...                 precision="fp32")
            >>> d = fit_constants([FitRow("tiny", s, 5e-6)], source="r.json").to_dict()
            >>> d["fitted"], d["after"]["max_abs_log"] < 1e-3, sorted(d)[:3]
            (['launch_floor'], True, ['after', 'at_bound', 'before'])
        """
        return {"source": self.source,
                "constants": {k: asdict(c) for k, c in self.constants.items()},
                "fitted": list(self.fitted), "unconstrained": list(self.unconstrained),
                "at_bound": list(self.at_bound), "held": list(self.held),
                "dominates": dict(self.dominates),
                "before": asdict(self.before), "after": asdict(self.after),
                "rows": self.rows, "notes": list(self.notes),
                "constant_lines": constant_lines(self.constants)}

    def constant_lines(self) -> str:
        """The ``CONSTANTS`` entries to paste into :mod:`tilelab.perf.predict_model` (see
        :func:`constant_lines`)."""
        return constant_lines(self.constants)


# ============================================================================ the model

def _terms(rows: Sequence[FitRow]) -> dict[str, np.ndarray]:
    """Per row, the model's constant-free terms (one array entry per row)."""
    out = stack_terms([launch_terms(r.shape, r.gpu) for r in rows])
    return {k: np.atleast_1d(v) for k, v in out.items()}


def _values(x: np.ndarray) -> dict[str, np.ndarray]:
    """Constant values (..., 1) from log parameter vectors ``x`` (..., len(KEYS))."""
    v = np.exp(x)
    return {k: v[..., i:i + 1] for i, k in enumerate(KEYS)}


def _loss(x: np.ndarray, t: dict[str, np.ndarray], log_meas: np.ndarray) -> np.ndarray:
    pred = model_time(t, _values(x))["seconds"]
    return np.sum((np.log(pred) - log_meas) ** 2, axis=-1)


def _usable(t: dict[str, np.ndarray]) -> set[str]:
    """The constants some row's time could depend on."""
    out = {"launch_floor", "eff_memory", "dram_sm_share"}
    out |= {UNIT_KEYS[int(u)] for u in np.unique(t["unit"])}
    if np.any(t["step_flops"] > 0):
        out |= {"tile_latency", "tile_alpha"}
    if np.any((t["resources_known"] > 0) & (t["waves"] > 1)):
        out.add("block_latency")
    return out


# ============================================================================ the search

def _pattern_search(x: np.ndarray, free: Sequence[int], t: dict, log_meas: np.ndarray,
                    lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, float]:
    """A pattern search from ``x``: the ±step moves of every free coordinate, around the
    point and around the point plus its last displacement (which lets the search speed
    along a valley), all evaluated at once; the best that helps is taken, and the step
    halves when none does."""
    x, cur, step = x.copy(), float(_loss(x, t, log_meas)), 0.5
    prev = x
    moves = np.zeros((2 * len(free), len(x)))
    for j, i in enumerate(free):
        moves[2 * j, i], moves[2 * j + 1, i] = 1.0, -1.0
    for _ in range(5_000):
        ahead = np.clip(2 * x - prev, lo, hi)
        ys = np.clip(np.vstack([ahead, ahead + step * moves, x + step * moves]), lo, hi)
        losses = _loss(ys, t, log_meas)
        j = int(np.argmin(losses))
        if losses[j] < cur - 1e-15:
            prev, x, cur = x, ys[j], float(losses[j])
        elif np.any(prev != x):
            prev = x                       # the displacement stopped helping: drop it
        else:
            step /= 2
            if step < 1e-6:
                break
    return x, cur


def _search(x0: np.ndarray, free: Sequence[int], t: dict, log_meas: np.ndarray,
            lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The best pattern search from ``x0`` and from the best of :data:`SAMPLES` seeded
    random points of the box (the other coordinates at ``x0``)."""
    if not free:
        return x0.copy()
    rng = np.random.default_rng(0)
    pts = np.broadcast_to(x0, (SAMPLES, len(x0))).copy()
    pts[:, list(free)] = rng.uniform(lo[list(free)], hi[list(free)], (SAMPLES, len(free)))
    losses = _loss(pts, t, log_meas)
    starts = [x0] + [pts[i] for i in np.argsort(losses)[:STARTS]]
    found = [_pattern_search(s, free, t, log_meas, lo, hi) for s in starts]
    return min(found, key=lambda f: f[1])[0]


def _dominates(x: np.ndarray, t: dict[str, np.ndarray]) -> dict[str, int]:
    """key -> rows in which that constant's term is >= MIN_SHARE of the predicted time
    (the tile law's: the time it adds to the math)."""
    r = model_time(t, _values(x))
    sec = r["seconds"]
    top = np.argmax(np.stack([r["math"], r["memory"], r["latency"]]), axis=0)

    def rows(mask: np.ndarray, term: np.ndarray) -> int:
        return int(np.sum(mask & (term / sec >= MIN_SHARE)))

    everywhere = np.ones_like(sec, dtype=bool)
    out = {"launch_floor": rows(everywhere, r["floor"] + 0 * sec),
           "eff_memory": rows(top == 1, r["memory"] - r["capped"]),
           "dram_sm_share": rows(top == 1, r["capped"]),
           "block_latency": rows(top == 2, r["latency"])}
    for i, key in enumerate(UNIT_KEYS):
        out[key] = rows((top == 0) & (t["unit"] == i), r["math"])
    out["tile_latency"] = out["tile_alpha"] = rows((top == 0) & (t["step_flops"] > 0),
                                                   r["math"] * (1 - r["tile"]))
    return {k: out[k] for k in KEYS}


# ============================================================================ the fit

def _check_rows(rows: Sequence[FitRow], hold: Mapping[str, str]) -> None:
    if not rows:
        raise FitError("no rows to fit", hint="pass FitRow(name, LaunchShape, measured "
                       "seconds, gpu) for each measured launch")
    for r in rows:
        if not (isinstance(r.measured_s, (int, float)) and math.isfinite(r.measured_s)
                and r.measured_s > 0):
            raise FitError(f"row {r.name!r}: measured time {r.measured_s!r} is not a "
                           "positive number of seconds",
                           hint="leave out launches that failed or were not timed")
    for key in hold:
        if key not in KEYS:
            raise FitError(f"cannot hold {key!r}: it is not a fitted constant",
                           hint=f"hold some of {', '.join(KEYS)}")


def _row_report(rows: Sequence[FitRow], before: dict, after: dict) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        b = predict(r.shape, r.gpu, constants=before)
        a = predict(r.shape, r.gpu, constants=after)
        out.append({"name": r.name, "measured_s": r.measured_s, "before_s": b.total_s,
                    "after_s": a.total_s, "log_ratio_before": math.log(b.total_s /
                                                                        r.measured_s),
                    "log_ratio_after": math.log(a.total_s / r.measured_s),
                    "limiter_before": b.limited_by, "limiter_after": a.limited_by})
    return out


def _notes(fitted: Sequence[str], at_bound: Sequence[str],
           hold: Mapping[str, str]) -> tuple[str, ...]:
    out = [f"{k} ended at its bound {BOUNDS[k]}: the data want a value outside it (check "
           "the counted bytes/FLOPs of the rows it dominates)" for k in fitted
           if k in at_bound]
    return tuple(out + [f"{k} held at its start value: {why}" for k, why in hold.items()])


def fit_constants(rows: Sequence[FitRow], *, source: str,
                  constants: dict[str, Constant] | None = None,
                  hold: Mapping[str, str] | None = None) -> FitResult:
    """Fit the model's constants to ``rows`` by least squares on log time.

    ``constants`` are the starting values (default :data:`~tilelab.perf.predict_model.CONSTANTS`);
    a constant the rows do not constrain keeps its starting value, and ``hold`` (key ->
    why) names constants not to fit at all. ``source`` names where the measurements are
    (a result file, the GPU, the date): the fitted constants carry it. Fitted values are
    rounded to three significant figures, and the rows' ``after_s`` are the model's
    times with those rounded values.

    Example:
        >>> s = LaunchShape(blocks=1, useful_flops=0, executed_flops=0, dram_bytes=4,
        ...                 precision="fp32")
        >>> fit = fit_constants([FitRow("tiny", s, 6e-6)], source="one launch")
        >>> fit.fitted, round(fit.constants["launch_floor"].value * 1e6, 3)
        (('launch_floor',), 6.0)
        >>> fit.constants["launch_floor"].describe()
        'launch floor 6 µs (calibrated: one launch)'
    """
    start, hold = dict(CONSTANTS, **(constants or {})), dict(hold or {})
    _check_rows(rows, hold)
    t = _terms(rows)
    log_meas = np.log(np.array([r.measured_s for r in rows], dtype=np.float64))
    lo, hi = (np.log([BOUNDS[k][j] for k in KEYS]) for j in (0, 1))
    x0 = np.clip(np.log([start[k].value for k in KEYS]), lo, hi)
    usable = _usable(t)
    free = [i for i, k in enumerate(KEYS) if k in usable and k not in hold]
    x = _search(x0, free, t, log_meas, lo, hi)
    dom = _dominates(x, t)
    fitted = [i for i in free if dom[KEYS[i]] > 0]
    if fitted != free:           # refit with the unconstrained ones at their start values
        x = _search(x0, fitted, t, log_meas, lo, hi)
        dom = _dominates(x, t)
    out = dict(start)
    for i in fitted:
        # three significant figures: what the data support, and what gets pasted
        out[KEYS[i]] = replace(start[KEYS[i]], value=float(f"{np.exp(x[i]):.3g}"),
                               source=source, calibrated=True)
    names = tuple(KEYS[i] for i in fitted)
    at_bound = tuple(KEYS[i] for i in fitted
                     if min(abs(x[i] - lo[i]), abs(x[i] - hi[i])) < 1e-3)
    report = _row_report(rows, start, out)
    labels = [r["name"] for r in report]
    return FitResult(out, names, tuple(k for k in KEYS if k not in names and k not in hold),
                     at_bound, dom, report,
                     ErrorStats.of([r["log_ratio_before"] for r in report], labels),
                     ErrorStats.of([r["log_ratio_after"] for r in report], labels),
                     source, _notes(names, at_bound, hold), tuple(hold))


# ============================================================================ result files

def shape_from_dict(d: Mapping[str, Any], params: Mapping[str, Any] | None = None
                    ) -> LaunchShape:
    """The :class:`~tilelab.perf.predict_model.LaunchShape` of a result file's case ``shape``
    dict. The GEMM's tile order is rebuilt from its schedule's name (``row-major``;
    ``grouped`` and ``persistent``: grouped order with the dict's ``group_m``, else 8,
    as ``benchmarks/device/predict_fit.py`` launches them); its K-step is the dict's
    ``tile_k``, else the case parameter ``k_tile``.

    Example:
        >>> s = shape_from_dict({"blocks": 4, "useful_flops": 8.0, "executed_flops": 8.0,
        ...     "dram_bytes": 96.0, "precision": "fp32", "threads": 128, "gemm": {
        ...     "m": 64, "n": 64, "k": 64, "tile_m": 32, "tile_n": 32, "order": "grouped"}},
        ...     {"k_tile": 16})
        >>> s.threads, s.gemm.tile_k, s.gemm.order[:3]
        (128, 16, [(0, 0), (1, 0), (0, 1)])
    """
    from tilelab.compiler.tile_index import grouped_tile_index

    keep = {f.name for f in fields(LaunchShape)} - {"gemm"}
    shape = {k: v for k, v in d.items() if k in keep}
    g = d.get("gemm")
    if g:
        gkeep = {f.name for f in fields(GemmShape)} - {"order", "tile_k"}
        gemm = GemmShape(**{k: v for k, v in g.items() if k in gkeep})
        sched = g.get("order") or "row-major"
        if sched not in ("row-major", "grouped", "persistent"):
            raise FitError(f"unknown GEMM schedule {sched!r} in a result file",
                           hint="the schedules are 'row-major', 'grouped' and 'persistent'")
        gm, gn = gemm.tiles
        order = None if sched == "row-major" else [
            grouped_tile_index(i, gm, gn, int(g.get("group_m") or 8)) for i in range(gm * gn)]
        tile_k = g.get("tile_k") or (params or {}).get("k_tile")
        shape["gemm"] = replace(gemm, order=order, tile_k=int(tile_k) if tile_k else None)
    return LaunchShape(**shape)


def rows_from_result(result: "str | Path | dict[str, Any]") -> list[FitRow]:
    """The fit rows of a ``benchmarks/device/predict_fit.py`` result (a path or its data): each
    case that ran (``status: ok``) with its measured time, its model input rebuilt by
    :func:`shape_from_dict` and the GPU the file's model used.

    Example:
        >>> rows = rows_from_result({"model": {"gpu": "h200"}, "cases": [
        ...     {"name": "add", "status": "ok", "measured_s": 4e-6, "params": {},
        ...      "shape": {"blocks": 4, "useful_flops": 8.0, "executed_flops": 8.0,
        ...                "dram_bytes": 96.0, "precision": "fp32", "gemm": None}},
        ...     {"name": "late", "status": "skipped"}]})
        >>> [(r.name, r.shape.blocks, r.gpu) for r in rows]
        [('add', 4, 'h200')]
    """
    data = result if isinstance(result, dict) else json.loads(Path(result).read_text())
    cases = data.get("cases")
    if not isinstance(cases, list):
        raise FitError(f"{result if not isinstance(result, dict) else 'the dict'} has no "
                       "cases", hint="pass a benchmarks/device/predict_fit.py result file")
    gpu = (data.get("model") or {}).get("gpu") or "h200"
    return [FitRow(c["name"], shape_from_dict(c["shape"], c.get("params")),
                   float(c["measured_s"]), gpu)
            for c in cases if c.get("status") == "ok" and c.get("shape")]


# ============================================================================ applying a fit

def load_fit(result: "str | Path | dict[str, Any]") -> dict[str, Constant]:
    """The constants of a fit result (a file :func:`FitResult.to_dict` was written to,
    under its top level or its ``"fit"`` key, or that dict), ready for
    ``tilelab.perf.predict(..., constants=load_fit(path))``.

    Example:
        >>> c = load_fit({"fit": {"constants": {"launch_floor": {"name": "launch floor",
        ...     "value": 3e-6, "unit": "s", "source": "r.json", "calibrated": True}}}})
        >>> c["launch_floor"].describe()
        'launch floor 3 µs (calibrated: r.json)'
    """
    data = result if isinstance(result, dict) else json.loads(Path(result).read_text())
    data = data.get("fit", data)
    if not isinstance(data.get("constants"), dict):
        raise FitError(f"{result if not isinstance(result, dict) else 'the dict'} has no "
                       "fitted constants", hint="pass a benchmarks/device/predict_fit.py result "
                       "file or FitResult.to_dict()")
    out = {}
    for key, c in data["constants"].items():
        if key not in CONSTANTS:
            raise FitError(f"unknown model constant {key!r} in the fit result",
                           hint=f"the model's constants are {', '.join(CONSTANTS)}")
        out[key] = Constant(c["name"], float(c["value"]), c["unit"], c["source"],
                            bool(c.get("calibrated", False)))
    return out


def constant_lines(constants: dict[str, Constant]) -> str:
    """The ``CONSTANTS`` entries of :mod:`tilelab.perf.predict_model` as code to paste.

    Example:
        >>> print(constant_lines({"launch_floor": Constant("launch floor", 3.2e-06, "s",
        ...                                                "r.json", True)}))
        "launch_floor": Constant("launch floor", 3.2e-06, "s",
                                 "r.json", calibrated=True),
    """
    lines = []
    for key, c in constants.items():
        head = f'"{key}": Constant({json.dumps(c.name)}, {c.value:.3g}, {json.dumps(c.unit)},'
        tail = f'{json.dumps(c.source, ensure_ascii=False)}' + (
            ", calibrated=True)," if c.calibrated else "),")
        lines += [head, " " * (head.index("(") + 1) + tail]
    return "\n".join(lines)
