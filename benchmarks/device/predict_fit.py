"""The CPU prediction model (``tilelab.perf.predict``; its constants in
``tilelab.perf.predict_model``) against GPU measurements, and its
constants fitted to them.

For each case — the tour's kernels (vector add, GEMM, row softmax, persistent GEMM, at a
few sizes; the tour GEMM also on fp32 data, the launches that reach the CUDA-core
efficiency) and the explorer's tile × size grids (``tilelab.lab.views.widgets.explore``: the
GEMM of notebook 03, vector add at the explorer's defaults) — it builds fresh random
inputs, runs the kernel once and checks it against a float64 numpy reference, times it
(``tl.bench``: CUDA events, warm-up, L2 flushed before every call, the median of each
round's median), counts it on the CPU interpreter as the lab does (sampled blocks,
executed and useful FLOPs) and reads its registers, threads and shared memory from the
compiled kernel. That gives the model's input (a ``LaunchShape``), the model's time with
the current constants, and the measured time; :func:`tilelab.perf.predict_fit.
fit_constants` then fits the model's constants (launch floor, efficiencies, tile MMA
law, block latency). The JSON holds the
environment, every case, the fit and the errors before and after; the script prints the
``CONSTANTS`` lines to paste into ``tilelab/perf/predict_model.py``. The fit holds the
constants of :data:`HOLD` at their assumptions.

Bytes: compulsory bytes (``tilelab.perf.counting``) for the tour cases, the interpreter's
tile traffic for the explorer's, as the demo and the explorer place their points; GEMMs
get their ``GemmShape`` (tile reuse through L2) from the launch's own partition.

Run (repository root)::

    python -m benchmarks.device.predict_fit --out benchmarks/results/predict_fit_h200_DATE.json
    python -m benchmarks.device.predict_fit --backend cpu --out /tmp/predict_fit.json   # dry run
    python -m benchmarks.device.predict_fit --refit benchmarks/results/predict_fit_h200_DATE.json

``--refit`` runs nothing: it rebuilds each stored case's model input from the JSON
(``tilelab.perf.predict_fit.rows_from_result``) and fits the current model to the stored
times, so a change to the model can be calibrated again on the CPU.

On the CPU backend it is a dry run: tiny sizes, the interpreter's host time stands in
for the measurement, and the JSON says ``"dry_run": true`` (its constants mean nothing).
"""
from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Sequence

import numpy as np

from benchmarks.common import REPO, RESULTS, env_info, gpu_slug, rel_err, time_rounds, write_json
from tilelab.demo import ref_add, ref_mm, ref_softmax

__all__ = ["Case", "cases", "launch_shape", "run_case", "run", "refit", "report", "main",
           "SCHEMA", "HOLD"]

SCHEMA = "tilelab-predict-fit/1"

#: constants the fit leaves at their assumptions, and why
HOLD = {"eff_cuda": "element-wise math limits none of these launches; the softmax "
                    "launches can also be fitted by a very low element-wise efficiency "
                    "instead of the block latency (a worse fit of the whole run), so "
                    "the fit would depend on where the search starts"}


@dataclass(frozen=True)
class Case:
    """One launch to measure: its name, group (``tour`` or ``explorer``), kernel, the
    parameters shown in the JSON, ``build(device, rng) -> (args, inputs, output)``,
    ``reference(*inputs, sel=...)`` (float64), the tolerance of the check, the
    compulsory work (None: the tile traffic places it), whether it is a GEMM (c, a, b, K),
    how many rows of the output to check (None: all) and how many blocks to count.

    Example:
        >>> [c.name for c in cases("cpu")][:2]
        ['tour vector add n=4096 tile=1024', 'tour GEMM bf16 256³ 128×128×64 grouped']
    """

    name: str
    group: str
    kernel: Any
    params: dict
    build: Callable[[str, np.random.Generator], tuple]
    reference: Callable[..., np.ndarray]
    tolerance: float
    work: Any = None
    gemm: bool = False
    check_rows: int | None = None
    sample_blocks: int = 8


# ============================================================================ cases

def _vector_add(group: str, n: int, tile: int, *, work: bool) -> Case:
    import tilelab as tl
    from tilelab.kernels.examples import vector_add
    from tilelab.perf import counting

    def build(device: str, rng: np.random.Generator):
        x = rng.standard_normal(n, dtype=np.float32)
        y = rng.standard_normal(n, dtype=np.float32)
        z = tl.empty(n, dtype="float32", device=device)
        return ((z.partition(tile), tl.tensor(x, device=device), tl.tensor(y, device=device)),
                (x, y), z)

    return Case(f"{group} vector add n={n} tile={tile}", group, vector_add,
                {"n": n, "tile": tile, "dtype": "float32"}, build, ref_add, 1e-6,
                counting.elementwise(n, dtype="float32") if work else None, sample_blocks=16)


def _gemm(group: str, size: int, tile: int, k_tile: int, dtype: str, schedule: str, *,
          work: bool) -> Case:
    import ml_dtypes

    import tilelab as tl
    from tilelab.kernels.examples import gemm, persistent_gemm
    from tilelab.perf import counting

    sched = {"row-major": None, "grouped": tl.grouped(8),
             "persistent": tl.persistent(group_m=8)}[schedule]
    np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32

    def build(device: str, rng: np.random.Generator):
        a = rng.standard_normal((size, size), dtype=np.float32).astype(np_dtype)
        b = rng.standard_normal((size, size), dtype=np.float32).astype(np_dtype)
        c = tl.empty((size, size), dtype=dtype, device=device)
        part = (c.partition((tile, tile)) if sched is None
                else c.partition((tile, tile), schedule=sched))
        return ((part, tl.tensor(a, device=device), tl.tensor(b, device=device), k_tile),
                (a, b), c)

    short = "bf16" if dtype == "bfloat16" else "f32"
    kernel = persistent_gemm if schedule == "persistent" else gemm
    what = "persistent GEMM" if schedule == "persistent" else "GEMM"
    return Case(f"{group} {what} {short} {size}³ {tile}×{tile}×{k_tile} {schedule}", group,
                kernel, {"m": size, "n": size, "k": size, "tile": [tile, tile],
                         "k_tile": k_tile, "dtype": dtype, "schedule": schedule},
                build, ref_mm, 1e-2, counting.gemm(size, size, size, a_dtype=dtype)
                if work else None, gemm=True, check_rows=64 if size > 1024 else None,
                sample_blocks=4)


def _softmax(rows: int, cols: int) -> Case:
    import tilelab as tl
    from tilelab.kernels.examples import next_pow2, softmax
    from tilelab.perf import counting

    def build(device: str, rng: np.random.Generator):
        x = rng.standard_normal((rows, cols), dtype=np.float32)
        y = tl.empty((rows, cols), dtype="float32", device=device)
        return (y.partition((4, next_pow2(cols))), tl.tensor(x, device=device)), (x,), y

    return Case(f"tour softmax {rows}×{cols}", "tour", softmax,
                {"rows": rows, "cols": cols, "tile": [4, next_pow2(cols)]}, build,
                ref_softmax, 1e-5, counting.softmax(rows, cols, dtype="float32"))


def cases(backend: str) -> list[Case]:
    """The tour at a few sizes, then the explorer's grids: GPU sizes on ``"gpu"``, tiny
    ones on ``"cpu"`` (the dry run). Nothing is allocated until a case is built.

    Example:
        >>> len(cases("gpu")), len(cases("cpu"))
        (39, 13)
    """
    gpu = backend == "gpu"
    vec_n = (1 << 16, 1 << 20, 1 << 24, 1 << 26) if gpu else (4096,)
    mm = (1024, 2048, 4096, 8192) if gpu else (256,)
    f32 = (1024, 2048) if gpu else (128,)
    rows = (1024, 8192, 32768) if gpu else (64,)
    pers = (2048, 8192) if gpu else (256,)
    out = [_vector_add("tour", n, 1024, work=True) for n in vec_n]
    out += [_gemm("tour", s, 128, 64, "bfloat16", "grouped", work=True) for s in mm]
    out += [_gemm("tour", s, 64, 32, "float32", "row-major", work=True) for s in f32]
    out += [_softmax(r, 1000) for r in rows]
    out += [_gemm("tour", s, 128, 64, "bfloat16", "persistent", work=True) for s in pers]
    # the explorer of notebook 03 (sizes 1024-4096 on a GPU) and explore()'s defaults
    ex_mm, ex_tiles = ((1024, 2048, 4096), (16, 32, 64, 128)) if gpu else ((64, 128), (16, 32))
    out += [_gemm("explorer", s, t, 32, "bfloat16", "row-major", work=False)
            for t in ex_tiles for s in ex_mm]
    ex_n, ex_vt = ((1 << 12, 1 << 14, 1 << 16), (64, 128, 256, 512)) if gpu else \
        ((1024, 4096), (64, 256))
    out += [_vector_add("explorer", n, t, work=False) for t in ex_vt for n in ex_n]
    return out


# ============================================================================ one case

def launch_shape(case: Case, args: Sequence[Any], trace: Any,
                 resources: Any = None) -> tuple[Any, dict]:
    """The model's input for one counted launch: a ``LaunchShape`` built as
    ``tilelab.lab.figures.roofline_plot.point_from_trace`` builds it (blocks, useful and
    executed FLOPs, bytes, precision, the kernel's resources), with a GEMM's ``GemmShape``
    taken from its arguments (c, a, b), and what the JSON says of it.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> t = NS(num_blocks=4, flops=8.0, flops_executed=8.0, bytes=96.0,
        ...        flops_mma=0, flops_elementwise=8, args={"x": NS(dtype="float32")})
        >>> c = next(c for c in cases("cpu") if c.group == "explorer" and not c.gemm)
        >>> shape, info = launch_shape(c, (), t, NS(threads_per_block=128, registers=16))
        >>> shape.blocks, shape.dram_bytes, shape.precision, shape.threads, info["gemm"]
        (4, 96.0, 'fp32', 128, None)
    """
    from tilelab.lab.figures.roofline_plot import gemm_shape_of, infer_precision
    from tilelab.perf.predict_model import GemmShape, LaunchShape

    prec = case.work.precision if case.work is not None else infer_precision(trace)
    nbytes = float(case.work.bytes) if case.work is not None else float(trace.bytes)
    gemm, info = None, {"gemm": None}
    if case.gemm:
        part, a, b = args[0], args[1], args[2]
        m, n = (int(s) for s in part.tensor.shape)
        order = [tuple(int(x) for x in t[-2:]) for t in part.order()]
        gemm = GemmShape(m, n, int(a.shape[1]), int(part.tile_shape[0]),
                         int(part.tile_shape[1]), a.itemsize, b.itemsize,
                         part.tensor.itemsize, order, tile_k=int(args[3]))
        info["gemm"] = {k: v for k, v in asdict(gemm).items() if k != "order"}
        info["gemm"].update(order=case.params.get("schedule"),
                            group_m=getattr(part.schedule, "group_m", None))
        # whether the lab's own detection (gemm_shape_of) finds this GEMM
        info["lab_finds_gemm"] = gemm_shape_of(SimpleNamespace(args=args), trace) is not None
    res = {k: _res(resources, k) for k in ("threads_per_block", "registers")}
    shared = (_res(resources, "shared_bytes") or 0) + (_res(resources,
                                                             "reserved_shared_bytes") or 0)
    shape = LaunchShape(blocks=int(trace.num_blocks), useful_flops=float(trace.flops),
                        executed_flops=float(trace.flops_executed or trace.flops),
                        dram_bytes=nbytes, precision=prec, threads=res["threads_per_block"],
                        registers=res["registers"], shared_bytes=shared or None, gemm=gemm)
    info.update({k: v for k, v in asdict(shape).items() if k != "gemm"},
                bytes_from="compulsory (tilelab.perf.counting)" if case.work is not None
                else "tile traffic (interpreter)", traffic_bytes=float(trace.bytes),
                sampled_blocks=len(getattr(trace, "execution_order", ()) or ()))
    return shape, info


def _res(resources: Any, attr: str) -> int | None:
    value = getattr(resources, attr, None)
    return int(value) if isinstance(value, (int, float)) and value > 0 else None


def _check(case: Case, inputs: tuple, output: Any) -> tuple[float, str]:
    if case.check_rows is None:
        return rel_err(np.asarray(output.numpy(), np.float64), case.reference(*inputs))
    lo = output.shape[0] // 2 - case.check_rows // 2
    sel = slice(lo, lo + case.check_rows)
    return rel_err(np.asarray(output[sel].numpy(), np.float64),
                   case.reference(*inputs, sel=sel))


def _free(args: Sequence[Any], notes: list[str]) -> None:
    """Release a case's GPU memory now (the next case's inputs need it); a tensor that
    cannot be freed yet is left to the garbage collector, with a note."""
    from tilelab.runtime.partition import Partition
    from tilelab.runtime.tensor import Tensor

    for a in args:
        t = a.tensor if isinstance(a, Partition) else a
        if isinstance(t, Tensor) and t.device != "cpu":
            try:
                t.free()
            except Exception as e:  # noqa: BLE001 - freeing early only saves memory
                notes.append(f"could not free an argument early: {type(e).__name__}: {e}")


def _measure(case: Case, args: Sequence[Any], backend: str, timing: dict) -> list[float]:
    if backend == "gpu":
        call = lambda: case.kernel.launch_async(*args)  # noqa: E731  (enqueue, no wait)
    else:
        call = lambda: case.kernel(*args)  # noqa: E731
    return time_rounds({case.name: call}, **timing)[case.name]


def run_case(case: Case, backend: str, *, timing: dict, resources: bool,
             seed: int) -> tuple[dict, Any]:
    """Build, check, time, count one case: (its JSON row, its ``LaunchShape`` or None).

    A wrong result is not timed (``status: wrong``); an exception becomes ``status:
    error`` with its traceback.

    Example:
        >>> row, shape = run_case(cases("cpu")[0], "cpu", resources=False, seed=0,
        ...     timing={"rounds": 1, "rep": 1, "warmup": 0})   # doctest: +SKIP
        >>> row["status"], shape.blocks                        # doctest: +SKIP
        ('ok', 4)
    """
    from tilelab.lab.figures.ownership import trace_args

    row: dict[str, Any] = {"name": case.name, "group": case.group, "kernel": case.kernel.name,
                           "params": case.params, "status": "ok", "notes": []}
    t0, args, shape = time.perf_counter(), (), None
    try:
        args, inputs, output = case.build(backend, np.random.default_rng(seed))
        case.kernel(*args)                      # compiles, runs once, waits
        if backend == "gpu":
            import tilelab as tl

            tl.synchronize()
        err, why = _check(case, inputs, output)
        row.update(rel_err=err, tol=case.tolerance)
        if not err <= case.tolerance:
            row.update(status="wrong", reason=why or f"rel_err {err:.2e} > {case.tolerance}")
            return row, None
        times = _measure(case, args, backend, timing)
        row.update(measured_s=statistics.median(times), round_medians_s=times)
        trace = trace_args(case.kernel, args, count_only=True, sample_blocks=case.sample_blocks)
        art = None
        if resources:
            try:
                art = case.kernel.compile(*args).resources
            except Exception as e:  # noqa: BLE001 - the model then assumes 1 block/SM
                row["notes"].append(f"resources unavailable ({type(e).__name__}: {e}); "
                                    "the model assumes one block per SM")
        shape, row["shape"] = launch_shape(case, args, trace, art)
    except Exception as e:  # noqa: BLE001 - one case never stops the run
        row.update(status="error", error=f"{type(e).__name__}: {e}",
                   traceback=traceback.format_exc(limit=6))
        shape = None
    finally:
        if backend == "gpu":
            _free(args, row["notes"])
        row["elapsed_s"] = time.perf_counter() - t0
    return row, shape


# ============================================================================ the run

def _spec(env: dict) -> Any:
    from tilelab.perf.specs import lookup_gpu, spec_for_device

    if env["backend"] != "gpu":
        return lookup_gpu("h200")
    spec = spec_for_device(env["gpu"])
    if spec is None:
        raise SystemExit(f"predict_fit: {env['gpu']} has no datasheet entry in "
                         "tilelab/perf/specs.py, so the model cannot predict it; add one")
    return spec


def _source(out: Path, env: dict, n: int, dry_run: bool) -> str:
    try:
        where = str(out.resolve().relative_to(REPO))
    except ValueError:
        where = out.name
    date = env["date"][:10]
    text = f"fitted to {where} ({env['gpu']}, {date}, {n} launches)"
    return ("DRY RUN, CPU interpreter times, not a calibration: " + text) if dry_run else text


def _fit(rows: list[dict], shapes: list[Any], spec: Any, source: str) -> Any:
    from tilelab.perf import predict
    from tilelab.perf.predict_fit import FitRow, fit_constants

    fit_rows = [FitRow(r["name"], s, r["measured_s"], spec)
                for r, s in zip(rows, shapes) if s is not None]
    if not fit_rows:
        return None
    fit = fit_constants(fit_rows, source=source, hold=HOLD)
    for r, s in zip(rows, shapes):
        if s is not None:
            r["model_before"] = predict(s, spec).summary()
            r["model_after"] = predict(s, spec, constants=fit.constants).summary()
    return fit


def run(backend: str, out: Path, *, budget_s: float = 100.0, resources: bool = True,
        only: str | None = None) -> dict[str, Any]:
    """Measure every case (those whose name contains ``only``), fit, write ``out``;
    returns the JSON data. Cases not started within ``budget_s`` are ``skipped``.

    Example:
        >>> data = run("cpu", Path("/tmp/pf.json"), resources=False)   # doctest: +SKIP
        >>> data["dry_run"], data["fit"]["fitted"][0]                  # doctest: +SKIP
        (True, 'launch_floor')
    """
    env = env_info(backend)
    spec, dry_run = _spec(env), backend != "gpu"
    timing = ({"rounds": 3, "rep": 10, "warmup": 3} if not dry_run
              else {"rounds": 1, "rep": 2, "warmup": 1})
    chosen = [c for c in cases(backend) if only is None or only in c.name]
    t0, rows, shapes = time.perf_counter(), [], []
    for i, case in enumerate(chosen):
        if time.perf_counter() - t0 > budget_s:
            rows.append({"name": case.name, "group": case.group, "status": "skipped",
                         "reason": f"the {budget_s:g} s budget was spent"})
            shapes.append(None)
            continue
        row, shape = run_case(case, backend, timing=timing, resources=resources, seed=i)
        rows.append(row)
        shapes.append(shape)
        print(_line(row), flush=True)
    fit = _fit(rows, shapes, spec, _source(out, env, sum(s is not None for s in shapes),
                                           dry_run))
    data = {"schema": SCHEMA, "dry_run": dry_run,
            "note": ("dry run: the CPU interpreter's host time stands in for the GPU's; the "
                     "fitted constants mean nothing") if dry_run else
            "measured on the GPU; the fit is the model's calibration",
            "env": env, "model": {"gpu": spec.key, "name": spec.name,
                                  "sms": spec.sm_count.value if spec.sm_count else None,
                                  "l2_bytes": spec.l2_size.value if spec.l2_size else None,
                                  "bandwidth_Bps": spec.bandwidth},
            "run": {"argv": sys.argv[1:], "budget_s": budget_s, "resources": resources,
                    "timing": dict(timing, method="tl.bench via benchmarks.common."
                                   "time_rounds: warm-up, L2 flushed before each call, "
                                   "CUDA events (host clock on the CPU); measured_s is "
                                   "the median of the rounds' medians"),
                    "elapsed_s": time.perf_counter() - t0},
            "cases": rows, "fit": fit.to_dict() if fit is not None else None}
    write_json(out, data)
    return data


def refit(path: Path) -> dict[str, Any]:
    """The result file at ``path`` with its fit redone by the current model, from the
    cases it stores (:func:`tilelab.perf.predict_fit.rows_from_result` rebuilds their
    model inputs): no GPU needed. The fit made at the run stays under ``"fit_at_run"``.

    Example:
        >>> data = refit(RESULTS / "predict_fit_h200_2026-12-02.json")
        >>> data["fit"]["after"]["median_abs_log"] < 0.1 < data["fit_at_run"]["after"][
        ...     "median_abs_log"]
        True
    """
    import json

    from tilelab.perf.predict_fit import fit_constants, rows_from_result

    data = json.loads(Path(path).read_text())
    rows = rows_from_result(data)
    source = _source(Path(path), data["env"], len(rows), bool(data.get("dry_run")))
    fit = fit_constants(rows, source=source, hold=HOLD)
    return dict(data, fit=fit.to_dict(), fit_at_run=data.get("fit_at_run", data.get("fit")))


def _fmt_s(s: float | None) -> str:
    from tilelab.perf.roofline import format_seconds

    return format_seconds(s) if s else "-"


def _line(row: dict) -> str:
    what = (f"{_fmt_s(row.get('measured_s')):>10}" if row["status"] == "ok"
            else f"{row['status']}: {row.get('reason') or row.get('error', '')}")
    return f"  {row['name']:<52} {what}"


def report(data: dict) -> str:
    """The run as text: each launch measured vs predicted before and after the fit, the
    errors, and the ``CONSTANTS`` lines to paste.

    Example:
        >>> print(report({"dry_run": True, "fit": None, "cases": []}))
        no launch was measured, so nothing was fitted
    """
    fit = data["fit"]
    if fit is None:
        return "no launch was measured, so nothing was fitted"
    lines = [f"  {'launch':<52}{'measured':>10}{'before':>10}{'after':>10}  after/measured"]
    for r in fit["rows"]:
        lines.append(f"  {r['name']:<52}{_fmt_s(r['measured_s']):>10}"
                     f"{_fmt_s(r['before_s']):>10}{_fmt_s(r['after_s']):>10}  "
                     f"×{r['after_s'] / r['measured_s']:.2f} ({r['limiter_after']})")
    from tilelab.perf.predict_fit import ErrorStats

    for when in ("before", "after"):
        lines.append(f"  {when} the fit: {ErrorStats(**fit[when]).describe()}")
    if data.get("fit_at_run"):
        lines.append("  the model of the run, with its constants: "
                     f"{ErrorStats(**data['fit_at_run']['before']).describe()}")
    lines.append(f"  fitted: {', '.join(fit['fitted']) or 'nothing'}; not constrained by "
                 f"these launches: {', '.join(fit['unconstrained']) or 'none'}")
    lines += [f"  note: {n}" for n in fit["notes"]]
    head = ("# DRY RUN: fitted to the CPU interpreter's host time; do not paste these"
            if data["dry_run"] else "# paste into CONSTANTS in tilelab/perf/predict_model.py:")
    return "\n".join(lines + [head, fit["constant_lines"]])


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m benchmarks.device.predict_fit --out X.json [--backend cpu]``, or
    ``--refit RESULT.json [--out Y.json]`` to refit a stored run without a GPU.

    Example:
        >>> main(["--backend", "cpu", "--out", "/tmp/pf.json"])   # doctest: +SKIP
        0
    """
    ap = argparse.ArgumentParser(prog="python -m benchmarks.device.predict_fit",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None,
                    help="result JSON (default benchmarks/results/predict_fit_<gpu>_<date>.json)")
    ap.add_argument("--backend", choices=("gpu", "cpu"), default=None,
                    help="force a backend (cpu: a dry run at tiny sizes)")
    ap.add_argument("--budget-s", type=float, default=100.0,
                    help="start no case after this many seconds (default 100)")
    ap.add_argument("--no-resources", action="store_true",
                    help="do not compile for registers/threads (the model assumes 1 block/SM)")
    ap.add_argument("--only", default=None, help="only the cases whose name contains this")
    ap.add_argument("--refit", type=Path, default=None, metavar="RESULT.json",
                    help="no run: refit the current model to the cases of this result file "
                    "(no GPU needed); with --out, write the refitted result there")
    ns = ap.parse_args(argv)
    if ns.refit is not None:
        data = refit(ns.refit)
        print(report(data))
        if ns.out is not None:
            write_json(ns.out, data)
            print(f"written to {ns.out}")
        return 0
    if ns.backend:
        os.environ["TILELAB_BACKEND"] = ns.backend
    from tilelab.runtime.device import backend as get_backend

    backend = get_backend()
    out = ns.out or RESULTS / (f"predict_fit_{gpu_slug(env_info(backend, init_gpu=False))}_"
                               f"{datetime.date.today().isoformat()}.json")
    data = run(backend, out, budget_s=ns.budget_s, resources=not ns.no_resources,
               only=ns.only)
    print(report(data))
    print(f"written to {out}")
    return 0 if data["fit"] is not None else 1


if __name__ == "__main__":
    sys.exit(main())
