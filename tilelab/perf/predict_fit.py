"""Fit the constants of :mod:`tilelab.perf.predict` to measured launch times.

Why: the model's launch floor and efficiencies are stated assumptions until a GPU run
pins them. Given launches whose shapes the CPU interpreter counted and whose times a GPU
measured, :func:`fit_constants` finds the launch floor and the DRAM, tensor-core and
CUDA-core efficiencies that minimise the squared log ratio of predicted to measured
time (a relative error: a 2 µs launch and a 2 ms GEMM weigh the same), and reports every
row's prediction and error before and after the fit.

How: the model's time is ``floor + max(compute₁ / eff_kind, memory₁ / eff_memory) ÷
wave use``, where compute₁, memory₁ and wave use are the terms
:func:`~tilelab.perf.predict.predict_launch` gives at unit efficiencies and no floor
(so the fit uses the model itself, not a copy of it). The search is a coarse grid over
the log of each constant followed by a pattern search (halving steps) inside stated
bounds; numpy only. A constant that no row depends on (its term is under half of every
row's predicted time) is *not constrained* by the data: it keeps its current value and
its uncalibrated status, and the result says so. A fitted value at a bound is listed in
``at_bound`` (an efficiency above 1 is not physical, so the bound is 1).

Example:
    >>> from tilelab.perf.predict import LaunchShape, predict_launch
    >>> def row(name, blocks, dram, flops=0.0, precision="fp32"):
    ...     s = LaunchShape(blocks=blocks, useful_flops=flops, executed_flops=flops,
    ...                     dram_bytes=dram, precision=precision)
    ...     true = {"launch_floor": Constant("launch floor", 3e-6, "s", "truth"),
    ...             "eff_memory": Constant("DRAM efficiency", 0.9, "fraction", "truth")}
    ...     return FitRow(name, s, predict_launch(s, "h200", constants=true).seconds)
    >>> rows = [row("tiny", 1, 1e3), row("stream", 132 * 8, 4e9), row("mid", 132, 2e8)]
    >>> fit = fit_constants(rows, source="example")
    >>> round(fit.constants["launch_floor"].value * 1e6, 2), fit.unconstrained
    (3.0, ('eff_tensor', 'eff_cuda'))
    >>> round(fit.constants["eff_memory"].value, 3), fit.after.max_abs_log < 1e-3
    (0.9, True)
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from tilelab.errors import TilelabError
from tilelab.perf.predict import CONSTANTS, Constant, LaunchShape, predict_launch

__all__ = ["FitError", "FitRow", "ErrorStats", "FitResult", "fit_constants", "BOUNDS",
           "MIN_SHARE", "load_fit", "constant_lines"]

#: the fitted constants, in the order of the parameter vector
KEYS = ("launch_floor", "eff_memory", "eff_tensor", "eff_cuda")

#: (low, high) of each fitted constant: the floor in seconds, efficiencies as fractions
BOUNDS: dict[str, tuple[float, float]] = {
    "launch_floor": (1e-7, 1e-3), "eff_memory": (1e-3, 1.0),
    "eff_tensor": (1e-3, 1.0), "eff_cuda": (1e-3, 1.0)}

#: a constant is constrained when its term is at least this share of some row's time
MIN_SHARE = 0.5


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
    :class:`~tilelab.perf.predict.LaunchShape`), the measured median time in seconds,
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
    share of time each constant's term takes in the rows it dominates (``dominates``:
    key -> number of rows), per-row results and error stats before and after.

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
                "at_bound": list(self.at_bound), "dominates": dict(self.dominates),
                "before": asdict(self.before), "after": asdict(self.after),
                "rows": self.rows, "notes": list(self.notes),
                "constant_lines": constant_lines(self.constants)}

    def constant_lines(self) -> str:
        """The ``CONSTANTS`` entries to paste into :mod:`tilelab.perf.predict` (see
        :func:`constant_lines`)."""
        return constant_lines(self.constants)


# ============================================================================ the model

def _kind(precision: str) -> int:
    """Index into KEYS of the efficiency a precision's math runs at (2 tensor, 3 CUDA)."""
    from tilelab.perf.specs import PRECISIONS

    return 2 if PRECISIONS[precision].tensor else 3


_UNIT = {"launch_floor": replace(CONSTANTS["launch_floor"], value=0.0),
         **{k: replace(CONSTANTS[k], value=1.0) for k in KEYS[1:]}}


def _terms(rows: Sequence[FitRow]) -> dict[str, np.ndarray]:
    """Per row: math and DRAM seconds at unit efficiency, wave use, efficiency index."""
    comp, mem, use, kind = [], [], [], []
    for r in rows:
        p = predict_launch(r.shape, r.gpu, constants=_UNIT)
        comp.append(p.compute_s)
        mem.append(p.memory_s)
        use.append(p.wave_efficiency)
        kind.append(_kind(r.shape.precision))
    return {"compute": np.array(comp), "memory": np.array(mem), "use": np.array(use),
            "kind": np.array(kind)}


def _predict(x: np.ndarray, t: dict[str, np.ndarray]) -> np.ndarray:
    """Predicted seconds (..., rows) for parameter vectors ``x`` (..., 4) in log space."""
    v = np.exp(x)
    body = np.maximum(t["compute"] / v[..., t["kind"]], t["memory"] / v[..., 1:2]) / t["use"]
    return v[..., 0:1] + body


def _loss(x: np.ndarray, t: dict[str, np.ndarray], log_meas: np.ndarray) -> np.ndarray:
    return np.sum((np.log(_predict(x, t)) - log_meas) ** 2, axis=-1)


# ============================================================================ the search

def _grid_start(x0: np.ndarray, free: Sequence[int], t: dict, log_meas: np.ndarray,
                lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The best point of a coarse log grid over the free parameters (others at x0)."""
    axes = [np.linspace(lo[i], hi[i], 17 if i == 0 else 13) for i in free]
    mesh = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, len(free))
    best, best_loss = x0, float(_loss(x0, t, log_meas))
    for chunk in np.array_split(mesh, max(1, len(mesh) * len(log_meas) // 500_000)):
        xs = np.broadcast_to(x0, (len(chunk), len(x0))).copy()
        xs[:, list(free)] = chunk
        losses = _loss(xs, t, log_meas)
        i = int(np.argmin(losses))
        if losses[i] < best_loss:
            best, best_loss = xs[i].copy(), float(losses[i])
    return best


def _pattern_search(x: np.ndarray, free: Sequence[int], t: dict, log_meas: np.ndarray,
                    lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Coordinate moves of ±step in log space, halving the step when none helps."""
    x, cur, step = x.copy(), float(_loss(x, t, log_meas)), 0.5
    for _ in range(10_000):
        moved = False
        for i in free:
            for sign in (1.0, -1.0):
                y = x.copy()
                y[i] = min(hi[i], max(lo[i], x[i] + sign * step))
                val = float(_loss(y, t, log_meas))
                if val < cur - 1e-15:
                    x, cur, moved = y, val, True
                    break
        if not moved:
            step /= 2
            if step < 1e-7:
                break
    return x


def _dominates(x: np.ndarray, t: dict[str, np.ndarray]) -> dict[str, int]:
    """key -> rows in which that constant's term is >= MIN_SHARE of the predicted time."""
    v = np.exp(x)
    pred = _predict(x, t)
    comp = t["compute"] / v[t["kind"]] / t["use"]
    mem = t["memory"] / v[1] / t["use"]
    out = {"launch_floor": int(np.sum(v[0] / pred >= MIN_SHARE)),
           "eff_memory": int(np.sum((mem >= comp) & (mem / pred >= MIN_SHARE)))}
    for i, key in ((2, "eff_tensor"), (3, "eff_cuda")):
        out[key] = int(np.sum((t["kind"] == i) & (comp > mem) & (comp / pred >= MIN_SHARE)))
    return out


# ============================================================================ the fit

def _check_rows(rows: Sequence[FitRow]) -> None:
    if not rows:
        raise FitError("no rows to fit", hint="pass FitRow(name, LaunchShape, measured "
                       "seconds, gpu) for each measured launch")
    for r in rows:
        if not (isinstance(r.measured_s, (int, float)) and math.isfinite(r.measured_s)
                and r.measured_s > 0):
            raise FitError(f"row {r.name!r}: measured time {r.measured_s!r} is not a "
                           "positive number of seconds",
                           hint="leave out launches that failed or were not timed")


def _row_report(rows: Sequence[FitRow], before: dict, after: dict) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        b = predict_launch(r.shape, r.gpu, constants=before)
        a = predict_launch(r.shape, r.gpu, constants=after)
        out.append({"name": r.name, "measured_s": r.measured_s, "before_s": b.seconds,
                    "after_s": a.seconds, "log_ratio_before": math.log(b.seconds /
                                                                        r.measured_s),
                    "log_ratio_after": math.log(a.seconds / r.measured_s),
                    "limiter_before": b.limiter, "limiter_after": a.limiter})
    return out


def fit_constants(rows: Sequence[FitRow], *, source: str,
                  constants: dict[str, Constant] | None = None) -> FitResult:
    """Fit the launch floor and the efficiencies to ``rows`` by least squares on log time.

    ``constants`` are the starting values (default :data:`~tilelab.perf.predict.CONSTANTS`);
    a constant the rows do not constrain keeps its starting value. ``source`` names where
    the measurements are (a result file, the GPU, the date): the fitted constants carry it.
    Fitted values are rounded to three significant figures, and the rows' ``after_s``
    are the model's times with those rounded values.

    Example:
        >>> s = LaunchShape(blocks=1, useful_flops=0, executed_flops=0, dram_bytes=4,
        ...                 precision="fp32")
        >>> fit = fit_constants([FitRow("tiny", s, 6e-6)], source="one launch")
        >>> fit.fitted, round(fit.constants["launch_floor"].value * 1e6, 3)
        (('launch_floor',), 6.0)
        >>> fit.constants["launch_floor"].describe()
        'launch floor 6 µs (calibrated: one launch)'
    """
    start = dict(CONSTANTS, **(constants or {}))
    _check_rows(rows)
    t = _terms(rows)
    log_meas = np.log(np.array([r.measured_s for r in rows], dtype=np.float64))
    lo = np.log([BOUNDS[k][0] for k in KEYS])
    hi = np.log([BOUNDS[k][1] for k in KEYS])
    x0 = np.clip(np.log([start[k].value for k in KEYS]), lo, hi)
    free = [i for i in range(4) if i < 2 or np.any(t["kind"] == i)]
    x = _pattern_search(_grid_start(x0, free, t, log_meas, lo, hi), free, t, log_meas, lo, hi)
    dom = _dominates(x, t)
    fitted = [i for i in free if dom[KEYS[i]] > 0]
    if fitted != free:           # refit with the unconstrained ones at their start values
        x = x0.copy()
        x = _pattern_search(_grid_start(x, fitted, t, log_meas, lo, hi), fitted, t,
                            log_meas, lo, hi) if fitted else x
        dom = _dominates(x, t)
    out = dict(start)
    for i in fitted:
        # three significant figures: what the data support, and what gets pasted
        out[KEYS[i]] = replace(start[KEYS[i]], value=float(f"{np.exp(x[i]):.3g}"),
                               source=source, calibrated=True)
    at_bound = tuple(KEYS[i] for i in fitted
                     if min(abs(x[i] - lo[i]), abs(x[i] - hi[i])) < 1e-3)
    report = _row_report(rows, start, out)
    names = [r["name"] for r in report]
    notes = tuple(f"{KEYS[i]} ended at its bound {BOUNDS[KEYS[i]]}: the data want a value "
                  "outside it (check the counted bytes/FLOPs of the rows it dominates)"
                  for i in fitted if KEYS[i] in at_bound)
    return FitResult(out, tuple(KEYS[i] for i in fitted),
                     tuple(k for k in KEYS if KEYS.index(k) not in fitted), at_bound, dom,
                     report, ErrorStats.of([r["log_ratio_before"] for r in report], names),
                     ErrorStats.of([r["log_ratio_after"] for r in report], names),
                     source, notes)


# ============================================================================ applying a fit

def load_fit(result: "str | Path | dict[str, Any]") -> dict[str, Constant]:
    """The constants of a fit result (a file :func:`FitResult.to_dict` was written to,
    under its top level or its ``"fit"`` key, or that dict), ready for
    ``predict_launch(..., constants=load_fit(path))``.

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
                       "fitted constants", hint="pass a benchmarks/predict_fit.py result "
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
    """The ``CONSTANTS`` entries of :mod:`tilelab.perf.predict` as code to paste.

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
