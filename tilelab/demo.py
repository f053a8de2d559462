"""``tilelab demo``: the tour's kernels, compiled, run, checked, counted, timed and plotted.

Compiles vector add, a bf16 GEMM (128x128x64 tiles, fp32 accumulation), a row softmax
and a persistent GEMM for the target and prints what each produced (the lowered source
size, Tile IR, cubin, registers, tensor-core remarks, compile timings). Then it runs the
same four kernels — at real sizes on a GPU, at small sizes on the CPU interpreter —
checks every result against a float64 numpy reference, counts FLOPs with the interpreter
(a sample of blocks on the GPU path), times them (measured with ``tl.bench`` on a GPU;
predicted for an H200 from the counts on the CPU), and writes ``summary.csv`` and
``roofline.png`` (the tour under the ceilings of the GPU its times are for, plus the
GPU's measured ceilings when there is one) to ``out_dir``. Every predicted number comes
from :func:`tilelab.perf.predict`: ``summary.csv`` gives its parts (roofline bound, kernel
body, launch floor, total) and its verdict, for measured rows too (what the model
predicts for the GPU that ran them).
"""
from __future__ import annotations

import csv
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

__all__ = ["run_demo", "demo_cases", "TourCase", "TourResult", "tour_cases", "run_tour",
           "write_summary", "print_summary", "print_verdicts", "SUMMARY_FIELDS", "ref_add",
           "ref_mm", "ref_softmax"]


def demo_cases():
    """(name, kernel, example args) of the tour, as specs (no memory needed).

    Example:
        >>> [name for name, _k, _a in demo_cases()][:2]
        ['vector add f32', 'GEMM bf16 128x128x64']
    """
    import tilelab as tl
    from tilelab.kernels.examples import gemm, next_pow2, persistent_gemm, softmax, vector_add

    x = tl.spec(1 << 20, "float32")
    a = tl.spec((4096, 4096), "bfloat16")
    s = tl.spec((4096, 1000), "float32")
    return [
        ("vector add f32", vector_add, (x.partition(1024), x, x)),
        ("GEMM bf16 128x128x64", gemm, (a.partition((128, 128)), a, a, 64)),
        ("row softmax f32", softmax, (s.partition((4, next_pow2(1000))), s)),
        ("persistent GEMM bf16", persistent_gemm,
         (a.partition((128, 128), schedule=tl.persistent(group_m=8)), a, a, 64)),
    ]


# ============================================================================ the tour

@dataclass
class TourCase:
    """One kernel of the run: how to build its arguments, its reference, its counts.

    ``build(device)`` returns ``(args, inputs, output)``: the launch arguments, the input
    arrays as numpy and the output tensor; ``reference(inputs)`` the float64 result (or,
    with ``check_rows``, only that many rows); ``work`` the compulsory FLOPs/bytes
    (:mod:`tilelab.perf.counting`) that place the point on the roofline; ``count_blocks``
    how many blocks the interpreter runs to count a GPU-sized launch.

    Example:
        >>> [c.name for c in tour_cases("cpu")]
        ['vector add', 'GEMM', 'softmax', 'persistent GEMM']
    """

    name: str
    problem: str
    kernel: Any
    build: Callable[[str], tuple]
    reference: Callable[..., np.ndarray]
    work: Any
    tolerance: float
    check_rows: int | None = None
    count_blocks: int = 8


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def ref_add(x: np.ndarray, y: np.ndarray, sel: Any = slice(None)) -> np.ndarray:
    """The vector add's float64 reference, of the rows ``sel``.

    Example:
        >>> ref_add(np.ones(3, np.float32), np.arange(3, dtype=np.float32)).tolist()
        [1.0, 2.0, 3.0]
    """
    return x[sel].astype(np.float64) + y[sel].astype(np.float64)


def ref_mm(a: np.ndarray, b: np.ndarray, sel: Any = slice(None)) -> np.ndarray:
    """The GEMM's float64 reference ``a @ b``, of the rows ``sel`` of ``a``.

    Example:
        >>> ref_mm(np.eye(2, dtype=np.float32), np.full((2, 2), 2, np.float32)).tolist()
        [[2.0, 2.0], [2.0, 2.0]]
    """
    return a[sel].astype(np.float64) @ b.astype(np.float64)


def ref_softmax(x: np.ndarray, sel: Any = slice(None)) -> np.ndarray:
    """The row softmax's float64 reference, of the rows ``sel``.

    Example:
        >>> ref_softmax(np.zeros((1, 4), np.float32)).tolist()
        [[0.25, 0.25, 0.25, 0.25]]
    """
    v = x[sel].astype(np.float64)
    e = np.exp(v - v.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def tour_cases(device: str) -> list[TourCase]:
    """The four kernels at GPU sizes (``device="gpu"``) or small CPU sizes (``"cpu"``).

    Example:
        >>> [c.problem for c in tour_cases("cpu")][:2]
        ['n=65536', '256x384x320']
    """
    import ml_dtypes

    import tilelab as tl
    from tilelab.kernels.examples import gemm, next_pow2, persistent_gemm, softmax, vector_add
    from tilelab.perf import counting

    gpu = device == "gpu"
    bf16 = ml_dtypes.bfloat16
    n = 1 << 26 if gpu else 1 << 16
    m, nn, k = (8192, 8192, 8192) if gpu else (256, 384, 320)
    pm, pn, pk = (8192, 8192, 8192) if gpu else (384, 256, 256)
    rows, cols = (32768, 1000) if gpu else (256, 1000)

    def vec(device_: str):
        x = _rng(1).standard_normal(n, dtype=np.float32)
        y = _rng(2).standard_normal(n, dtype=np.float32)
        z = tl.empty(n, dtype="float32", device=device_)
        return ((z.partition(1024), tl.tensor(x, device=device_), tl.tensor(y, device=device_)),
                (x, y), z)

    def mm(shape: tuple[int, int, int], schedule: Any):
        def build(device_: str):
            mm_, nn_, kk = shape
            a = _rng(3).standard_normal((mm_, kk), dtype=np.float32).astype(bf16)
            b = _rng(4).standard_normal((kk, nn_), dtype=np.float32).astype(bf16)
            c = tl.empty((mm_, nn_), dtype="bfloat16", device=device_)
            return ((c.partition((128, 128), schedule=schedule), tl.tensor(a, device=device_),
                     tl.tensor(b, device=device_), 64), (a, b), c)
        return build

    def sm(device_: str):
        x = _rng(5).standard_normal((rows, cols), dtype=np.float32)
        y = tl.empty((rows, cols), dtype="float32", device=device_)
        return ((y.partition((4, next_pow2(cols))), tl.tensor(x, device=device_)), (x,), y)

    band = 64 if gpu else None
    return [
        TourCase("vector add", f"n={n}", vector_add, vec, ref_add,
                 counting.elementwise(n, dtype="float32", name="vector add"), 1e-6),
        TourCase("GEMM", f"{m}x{nn}x{k}", gemm, mm((m, nn, k), tl.grouped(8)), ref_mm,
                 counting.gemm(m, nn, k, a_dtype="bfloat16", name="GEMM"), 1e-2, band, 2),
        TourCase("softmax", f"{rows}x{cols}", softmax, sm, ref_softmax,
                 counting.softmax(rows, cols, dtype="float32", name="softmax"), 1e-5),
        TourCase("persistent GEMM", f"{pm}x{pn}x{pk}", persistent_gemm,
                 mm((pm, pn, pk), tl.persistent(group_m=8)), ref_mm,
                 counting.gemm(pm, pn, pk, a_dtype="bfloat16", name="persistent GEMM"),
                 1e-2, band, 2),
    ]


@dataclass
class TourResult:
    """What one kernel of the tour did, as the summary reports it.

    Example:
        >>> r = TourResult("k", "n=1", "cpu", "NVIDIA H200 SXM", False, 1e-3, 2e9, 4e9,
        ...                4e9, "fp32", "memory", 1.0, 0.0, True, 4, 4)
        >>> r.gb_per_s, r.tflop_per_s
        (4000.0, 2.0)
    """

    kernel: str
    problem: str
    ran_on: str
    device: str
    measured: bool
    seconds: float | None
    flops: float
    bytes: float
    traffic_bytes: float
    precision: str
    bound: str
    fraction: float | None
    rel_err: float
    ok: bool
    blocks_counted: int
    blocks: int
    point: Any = field(default=None, repr=False)
    prediction: Any = field(default=None, repr=False)

    @property
    def gb_per_s(self) -> float | None:
        """Achieved useful bandwidth (compulsory bytes / time) in GB/s.

        Example:
            >>> TourResult("k", "", "cpu", "", False, 2e-3, 0, 4e9, 4e9, "fp32", "memory",
            ...            1.0, 0.0, True, 1, 1).gb_per_s
            2000.0
        """
        return None if not self.seconds else self.bytes / self.seconds / 1e9

    @property
    def tflop_per_s(self) -> float | None:
        """Achieved TFLOP/s (interpreter-counted FLOPs / time); None without a time.

        Example:
            >>> TourResult("k", "", "cpu", "", False, None, 1e9, 4e9, 4e9, "fp32", "?",
            ...            None, 0.0, True, 1, 1).tflop_per_s is None
            True
        """
        return None if not self.seconds else self.flops / self.seconds / 1e12

    def row(self) -> dict[str, Any]:
        """One CSV row (see :data:`SUMMARY_FIELDS`).

        Example:
            >>> r = TourResult("k", "n=1", "cpu", "H200", False, 1.0, 1.0, 1.0, 1.0, "fp32",
            ...                "memory", 1.0, 0.0, True, 1, 1)
            >>> tuple(r.row()) == SUMMARY_FIELDS, r.row()["timing"]
            (True, 'predicted')
        """
        pr = self.prediction
        return {"kernel": self.kernel, "problem": self.problem, "ran_on": self.ran_on,
                "device": self.device, "timing": "measured" if self.measured else "predicted",
                "seconds": self.seconds,
                "predicted_seconds": pr.total_s if pr else None,
                "kernel_seconds": pr.kernel_s if pr else None,
                "launch_seconds": pr.launch_s if pr else None,
                "bound_seconds": pr.bound_s if pr else None,
                "verdict": pr.verdict if pr else "", "gb_per_s": self.gb_per_s,
                "tflop_per_s": self.tflop_per_s, "precision": self.precision,
                "bound": self.bound, "fraction_of_ceiling": self.fraction,
                "flops": self.flops, "bytes": self.bytes, "traffic_bytes": self.traffic_bytes,
                "blocks_counted": self.blocks_counted, "blocks": self.blocks,
                "max_rel_err": self.rel_err, "check": "ok" if self.ok else "FAILED"}


#: columns of summary.csv
SUMMARY_FIELDS = ("kernel", "problem", "ran_on", "device", "timing", "seconds",
                  "predicted_seconds", "kernel_seconds", "launch_seconds", "bound_seconds",
                  "verdict", "gb_per_s", "tflop_per_s", "precision", "bound",
                  "fraction_of_ceiling", "flops", "bytes", "traffic_bytes", "blocks_counted",
                  "blocks", "max_rel_err", "check")


def _rel_err(out: np.ndarray, ref: np.ndarray) -> float:
    out = np.asarray(out, np.float64)
    if not np.isfinite(out).all():
        return math.inf
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-300))


def _check(case: TourCase, inputs: tuple, output: Any) -> float:
    if case.check_rows is None:
        return _rel_err(output.numpy(), case.reference(*inputs))
    total = output.shape[0]
    lo = max(0, total // 2 - case.check_rows // 2)
    sel = slice(lo, lo + case.check_rows)
    return _rel_err(output[sel].numpy(), case.reference(*inputs, sel=sel))


def _run_case(case: TourCase, device: str, predict_on: str, sample_blocks: int) -> TourResult:
    from types import SimpleNamespace

    import tilelab as tl
    from tilelab.lab.figures.roofline_plot import gemm_shape_of, point_from_trace
    from tilelab.perf import predict
    from tilelab.perf.specs import lookup_gpu, spec_for_device

    args, inputs, output = case.build(device)
    if device == "gpu":
        from tilelab.lab.figures.ownership import trace_args

        case.kernel(*args)
        tl.synchronize()
        err = _check(case, inputs, output)
        r = tl.bench(lambda: case.kernel.launch_async(*args), rep=20, warmup=5, name=case.name)
        # count_only: a persistent launch is counted with one block per tile, so that a
        # sampled block interprets one tile, not tiles / SMs of them
        trace = trace_args(case.kernel, args, count_only=True,
                           sample_blocks=min(sample_blocks, case.count_blocks))
        point = point_from_trace(trace, name=case.name, seconds=r.median, device=r.device,
                                 work=case.work)
        spec = spec_for_device(r.device)
    else:
        trace = tl.interpret(case.kernel, *args)   # runs the kernel and counts every block
        err = _check(case, inputs, output)
        spec = lookup_gpu(predict_on)
        point = None
    # the one prediction, for the GPU the time is for (measured rows: what the model says)
    launch = SimpleNamespace(args=args, kernel=case.kernel)
    pred = None if spec is None else predict(
        trace, spec, name=case.name, precision=case.work.precision,
        dram_bytes=float(case.work.bytes), blocks=_grid_blocks(args),
        gemm=gemm_shape_of(launch, trace))
    point = point or pred.point()
    if device == "gpu":
        _free(args)
    fraction = point.fraction_of_ceiling(spec) if spec is not None else None
    bound = point.bound_on(spec) if spec is not None else "?"
    return TourResult(case.name, case.problem, device, point.device or "?", point.measured,
                      point.seconds, point.flops, point.bytes, float(trace.bytes),
                      point.precision, bound, fraction, err, err <= case.tolerance,
                      len(trace.execution_order), trace.num_blocks, point, pred)


def _grid_blocks(args: tuple) -> int | None:
    """The block count of a launch with a partitioned output (None: not known)."""
    from tilelab.runtime.partition import Partition

    part = next((a for a in args if isinstance(a, Partition)), None)
    return None if part is None else int(part.num_blocks())


def _free(args: tuple) -> None:
    """Release the GPU memory of a case now (prepared launches would keep it alive)."""
    from tilelab.runtime.partition import Partition
    from tilelab.runtime.tensor import Tensor

    for a in args:
        t = a.tensor if isinstance(a, Partition) else a
        if isinstance(t, Tensor) and t.device != "cpu":
            try:
                t.free()
            except Exception:  # noqa: BLE001 - freeing early is an optimisation only
                pass


def run_tour(device: str | None = None, *, predict_on: str = "h200",
             sample_blocks: int = 8) -> list[TourResult]:
    """Run, check, count and time the four kernels on ``device`` (``"gpu"``/``"cpu"``,
    default: tilelab's backend). A kernel that fails to run yields a failed result with
    the error printed, and the tour goes on.

    Example:
        >>> [r.ok for r in run_tour("cpu")]            # doctest: +SKIP
        [True, True, True, True]
    """
    from tilelab.errors import TilelabError
    from tilelab.runtime.device import backend

    device = device or backend()
    results = []
    for case in tour_cases(device):
        try:
            results.append(_run_case(case, device, predict_on, sample_blocks))
        except (TilelabError, ValueError, RuntimeError) as e:
            print(f"  {case.name}: FAILED\n{e}")
            results.append(TourResult(case.name, case.problem, device, "?", False, None, 0.0,
                                      float(case.work.bytes), 0.0, case.work.precision, "?",
                                      None, math.inf, False, 0, 0))
    return results


# ============================================================================ output

def write_summary(results: list[TourResult], path: "str | Path") -> Path:
    """Write the results as CSV (:data:`SUMMARY_FIELDS`).

    Example:
        >>> import tempfile, os
        >>> p = write_summary([], os.path.join(tempfile.mkdtemp(), "s.csv"))
        >>> p.read_text().split(",")[:2]
        ['kernel', 'problem']
    """
    out = Path(path)
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=SUMMARY_FIELDS)
        w.writeheader()
        for r in results:
            w.writerow({k: ("" if v is None else v) for k, v in r.row().items()})
    return out


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def print_summary(results: list[TourResult]) -> None:
    """Print the summary table: kernel, device, time, GB/s, TFLOP/s, fraction of ceiling.

    Example:
        >>> print_summary([])   # doctest: +NORMALIZE_WHITESPACE
        kernel problem device time GB/s TFLOP/s of ceiling timing check
    """
    from tilelab.perf.roofline import format_seconds

    print(f"  {'kernel':<17}{'problem':<16}{'device':<18}{'time':>11}{'GB/s':>9}"
          f"{'TFLOP/s':>9}{'of ceiling':>12}  timing     check")
    for r in results:
        frac = "-" if r.fraction is None else f"{r.fraction:.0%} {r.bound[:3]}"
        dev = r.device.replace("NVIDIA ", "")[:17]
        dev = dev if r.measured else f"{r.ran_on}→{dev}"[:17]
        print(f"  {r.kernel:<17}{r.problem:<16}{dev:<18}{format_seconds(r.seconds):>11}"
              f"{_fmt(r.gb_per_s, '.1f'):>9}{_fmt(r.tflop_per_s, '.2f'):>9}{frac:>12}  "
              f"{'measured' if r.measured else 'predicted':<10} "
              f"{'ok' if r.ok else 'FAILED'} ({r.rel_err:.1e})")


def print_verdicts(results: list[TourResult]) -> None:
    """Print what each time is made of (tilelab.perf.predict's verdict): for predicted rows
    their time, for measured rows what the model predicts for that GPU.

    Example:
        >>> print_verdicts([])
    """
    rows = [r for r in results if r.prediction is not None]
    if not rows:
        return
    print("  what the times are (tilelab.perf.predict: predicted = launch floor + kernel "
          "body; docs/rooflines.md):")
    for r in rows:
        how = "predicted" if not r.measured else \
            f"the model for this GPU says {r.prediction.total_s * 1e6:.4g} µs"
        print(f"    {r.kernel:<17}{how}: {r.prediction.verdict}")


def _roofline_png(results: list[TourResult], path: Path, current: Any) -> str:
    try:
        from tilelab.lab.figures.roofline_plot import roofline_figure, save_png
    except ImportError as e:  # the lab extras are optional
        return f"roofline.png skipped (install tilelab[lab]: {e})"
    points = [r.point for r in results if r.point is not None]
    fig = roofline_figure(points, current=current, theme="light",
                          title="tilelab demo: the tour on the roofline")
    save_png(fig, path)
    return f"roofline written to {path}"


# ============================================================================ the command

def _compile_table(arch: str, out: Path) -> bool:
    import tilelab as tl

    print(f"tilelab {tl.__version__} demo: compiling the tour for {arch}")
    rows = []
    for name, k, args in demo_cases():
        t0 = time.perf_counter()
        try:
            art = k.compile(*args, arch=arch)
        except tl.TilelabError as e:
            print(f"  {name}: FAILED\n{e}")
            return False
        rows.append((name, art, time.perf_counter() - t0, art.resources))
        (out / f"{k.name}.{arch}.tileir").write_text(art.tileir)
        (out / f"{k.name}.lowered.py").write_text(art.lowered_source)
    print(f"  {'kernel':<24}{'Tile IR':>9}{'cubin':>10}{'regs':>6}{'threads':>9}"
          f"{'compile':>10}  remarks")
    for name, art, dt, res in rows:
        hit = " (cached)" if art.cache_hit else ""
        print(f"  {name:<24}{len(art.tileir.splitlines()):>6} ln{len(art.cubin):>9}B"
              f"{res.registers or 0:>6}{res.threads_per_block or 0:>9}{dt * 1e3:>8.0f}ms  "
              f"{_tensor_core_note(art)}{hit}")
    print(f"  toolchain: {rows[0][1].toolchain}")
    print(f"  Tile IR and lowered sources written to {out}/")
    return True


def _tensor_core_note(art) -> str:
    try:
        hits = [r for r in art.remarks if "tensor" in (r.pass_name or "").lower()]
    except Exception as e:  # remarks are informative; never fail the demo on them
        return f"remarks unreadable: {e}"
    return f"{len(hits)} tensor-core remarks" if hits else "-"


def _measured_ceilings(device: str) -> Any:
    if device != "gpu":
        return None
    try:
        from tilelab.perf.ceilings import measure_ceilings

        m = measure_ceilings()
    except Exception as e:  # the datasheet ceilings still make a roofline
        print(f"  measured ceilings unavailable: {e}")
        return None
    print(f"  measured ceilings: {m}")
    return m


def run_demo(arch: str | None = None, out_dir: str = "tilelab-demo", *,
             backend: str | None = None, compile: bool = True) -> int:
    """Compile the tour for ``arch`` and print its table, then run, check, count and time
    the tour on ``backend`` (default: the GPU when usable) and write ``summary.csv`` and
    ``roofline.png`` to ``out_dir``. Returns an exit code (1 if anything failed).

    Example:
        >>> run_demo(out_dir="/tmp/tilelab-demo", backend="cpu")   # doctest: +SKIP
        0
    """
    from tilelab.runtime.device import backend as default_backend
    from tilelab.runtime.kernel import _default_arch

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if compile and not _compile_table(arch or _default_arch(), out):
        return 1
    device = backend or default_backend()
    where = ("on the GPU at real sizes" if device == "gpu"
             else "on the CPU interpreter at small sizes (times predicted for an H200)")
    print(f"running the tour {where}")
    t0 = time.perf_counter()
    results = run_tour(device)
    current = _measured_ceilings(device)
    print_summary(results)
    print_verdicts(results)
    csv_path = write_summary(results, out / "summary.csv")
    print(f"  summary written to {csv_path}")
    print(f"  {_roofline_png(results, out / 'roofline.png', current)}")
    print(f"  tour took {time.perf_counter() - t0:.1f} s")
    print(f"demo files written to {out.resolve()}")
    return 0 if all(r.ok for r in results) else 1
