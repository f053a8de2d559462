"""Turn a cell's recorded launches (or its example arguments) into a :class:`CellReport`.

Why: this is the step between running a cell and showing it: compile each specialization
for the chosen arch, count and time each distinct launch, draw the ownership diagrams and
the roofline. It only does the work the chosen views need (no SASS unless shown, no
tracing when neither ownership, roofline, timings nor ``--bench`` ask for it); ``--save``
needs everything.

Example:
    >>> from tilelab.lab.report.options import TileOptions
    >>> from tilelab.lab.report.record import LaunchRecorder
    >>> r = collect_report(LaunchRecorder(), {}, {}, TileOptions(), cell_name="In[1]")
    >>> r.summary_line()
    'In[1]: no kernels, no launches · backend cpu · arch sm_90'
"""
from __future__ import annotations

import time
from typing import Any, Callable, Mapping

from tilelab.lab.report.cell_report import CellReport, LaunchReport, build_kernel_report
from tilelab.lab.report.measure import Measurement, measure_launch
from tilelab.lab.report.options import VIEWS, TileOptions
from tilelab.lab.report.record import LaunchRecorder, describe_launch

__all__ = ["collect_report", "example_args", "NOTHING_TO_SHOW"]

_MEASURED_VIEWS = {"ownership", "roofline", "timings"}

#: the note of a cell that defined no kernel and launched none (it shows no tabs)
NOTHING_TO_SHOW = ("this cell defined no kernel and launched none, so there are no tabs "
                   "to show: %%tile shows the kernels a cell defines (a def with a tl.In, "
                   "tl.Out, tl.InOut or tl.Raw parameter, or one the cell launches) and "
                   "the launches it makes; a cell without kernels runs the same without "
                   "%%tile")


def example_args(examples: Any, name: str) -> tuple | None:
    """The example arguments of kernel ``name`` in a ``TILELAB_EXAMPLES`` mapping (a tuple,
    a single argument, or a function returning either), or None.

    Example:
        >>> example_args({"add": lambda: (1, 2)}, "add"), example_args({}, "add")
        ((1, 2), None)
    """
    if not isinstance(examples, Mapping) or name not in examples:
        return None
    value = examples[name]
    value = value() if callable(value) else value
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _needed(opts: TileOptions) -> set[str]:
    """The views to compute: those shown, and all of them for ``--save`` (which writes
    every artifact and figure, whichever tabs are shown)."""
    return set(VIEWS) if opts.save else set(opts.views)


def _predict_on(opts: TileOptions) -> str:
    """The GPU CPU launches are predicted on: a ``--roofline`` GPU whose arch matches
    ``--arch``, else the GPU of that arch (:func:`tilelab.perf.prediction.gpu_for_arch`)."""
    from tilelab.perf.prediction import gpu_for_arch
    from tilelab.perf.specs import lookup_gpu

    for key in opts.roofline_gpus:
        if lookup_gpu(key).arch == opts.arch:
            return key
    return gpu_for_arch(opts.arch)


def _predict_at(opts: TileOptions, namespace: Mapping[str, Any] | None,
                notes: list[str]) -> Any:
    """``--predict-at``'s sizes with the values the cell ran with (its variables), or
    None (a note says why when a name is not an integer variable of the cell)."""
    import numbers

    from tilelab.lab.report.measure import PredictAt

    if not opts.predict_at:
        return None
    sizes = []
    for name, value in opts.predict_at:
        ran = (namespace or {}).get(name)
        if isinstance(ran, bool) or not isinstance(ran, numbers.Integral) or ran < 1:
            notes.append(f"--predict-at {name}={value}: the cell has no positive integer "
                         f"variable {name!r} (it sets the size the cell ran at); launches "
                         "are predicted as they ran")
            return None
        sizes.append((name, int(ran), value))
    return PredictAt(tuple(sizes))


def _current_gpu() -> tuple[str | None, Any]:
    """(device name, datasheet spec or None) of this machine's GPU, when kernels ran on it."""
    from tilelab.perf.specs import spec_for_device
    from tilelab.runtime.device import gpu

    name = gpu().name
    return name, spec_for_device(name)


def collect_report(rec: LaunchRecorder, cell_kernels: Mapping[str, Any], examples: Any,
                   opts: TileOptions, *, cell_name: str = "",
                   rename: Callable[[str], str] = lambda s: s, kernel_rule: str = "",
                   backend: str = "cpu",
                   namespace: Mapping[str, Any] | None = None) -> CellReport:
    """Compile, count, time and draw what the cell did (see the module docstring).

    ``cell_kernels`` maps the names of kernels the cell defined to their ``tl.Kernel``;
    those not launched are compiled for their ``TILELAB_EXAMPLES`` entry when there is one.
    ``namespace`` (the cell's variables) gives the sizes ``--predict-at`` names.

    Example:
        >>> report = collect_report(recorder, {"add": add}, {}, opts)   # doctest: +SKIP
        >>> report.kernels[0].artifacts.tileir[:5]                      # doctest: +SKIP
        'entry'
    """
    t0 = time.perf_counter()
    views = _needed(opts)
    report = CellReport(cell_name=cell_name, arch=opts.arch, backend=backend,
                        views=opts.views, roofline_gpus=opts.roofline_gpus, ran=opts.run,
                        kernel_rule=kernel_rule, rename=rename)
    notes = report.notes
    # one compile per specialization, in the order the cell first launched each
    index: dict[tuple, int] = {}
    for bucket in rec.compile_groups():
        first = bucket[0]
        index[first.compile_key] = len(report.kernels)
        report.kernels.append(build_kernel_report(
            first.kernel, first.event.args, arch=opts.arch, force=opts.force,
            launches=sum(g.count for g in bucket),
            signature=describe_launch(first.event.args, first.param_names),
            views=views))
    launched = {id(g.kernel) for g in rec.groups()}
    for name, kernel in cell_kernels.items():
        if id(kernel) in launched:
            continue
        args = example_args(examples, name)
        if args is None:
            how = ("" if not opts.run else "launch it in the cell, or ")
            notes.append(f"{name} was defined but not {'launched' if opts.run else 'compiled'}"
                         f": {how}define TILELAB_EXAMPLES = {{'{name}': (example args, ...)}} "
                         "(tl.spec(...) descriptions work) to compile it")
            continue
        params = tuple(p.name for p in kernel.definition.analysis.params)
        report.kernels.append(build_kernel_report(
            kernel, args, arch=opts.arch, force=opts.force, launches=0,
            signature=describe_launch(args, params), views=views))
    for k in report.kernels:
        if k.error_exc is not None:
            notes.append(f"{k.name} did not compile for {k.arch}: see its tabs")
        if k.error and k.source_file:  # name cells as IPython does: In[3]:6:5
            k.error = k.error.replace(k.source_file, rename(k.source_file))

    # counting, timing and pictures of each distinct launch
    groups = rec.groups()
    if groups and (views & _MEASURED_VIEWS or opts.bench):
        gpu_name, gpu_spec = (None, None)
        predict_on = _predict_on(opts)
        if any(g.event.device == "gpu" for g in groups):
            from tilelab.runtime.device import synchronize

            synchronize()  # the cell's launches have finished before we re-run any
            gpu_name, gpu_spec = _current_gpu()
            if gpu_spec is not None and gpu_spec.key not in report.roofline_gpus:
                report.roofline_gpus = report.roofline_gpus + (gpu_spec.key,)
        if any(g.event.device != "gpu" for g in groups) and \
                predict_on not in report.roofline_gpus:   # the GPU the predictions are for
            report.roofline_gpus = (predict_on,) + report.roofline_gpus
        at = _predict_at(opts, namespace, notes)
        if at is not None and all(g.event.device == "gpu" for g in groups):
            notes.append(f"--predict-at {at.label}: the launches ran on the GPU and are "
                         "measured as they ran; it applies to launches predicted on the CPU")
        drawn: set[tuple] = set()
        for g in groups:
            kidx = index.get(g.compile_key, -1)
            art = report.kernels[kidx].artifacts if kidx >= 0 else None
            m = measure_launch(g.event, bench=opts.bench, predict_on=predict_on,
                               gpu_name=gpu_name, resources=getattr(art, "resources", None),
                               predict_at=at)
            notes.extend(m.notes)
            report.launches.append(LaunchReport(
                g.name, describe_launch(g.event.args, g.param_names), tuple(g.event.grid),
                g.event.device, g.count, kidx, m))
            if "ownership" in views and kidx >= 0 and g.compile_key not in drawn:
                drawn.add(g.compile_key)
                _draw_ownership(report.kernels[kidx], g.event, m)
    if "roofline" in views:
        current = None
        if any(l.device == "gpu" for l in report.launches):
            current = _measured_ceilings(report)
        _draw_roofline(report, current, projections=len(opts.roofline_gpus) > 1)
    if not report.kernels and not groups:
        # no kernel to show: no tabs (they would all be empty), and a note on why
        report.views = ()
        if not cell_kernels:
            notes.append(NOTHING_TO_SHOW)
    report.notes[:] = list(dict.fromkeys(report.notes))
    report.seconds = time.perf_counter() - t0
    return report


def _draw_ownership(k: Any, event: Any, m: Measurement) -> None:
    from tilelab.lab.figures.images import ownership_images

    try:
        k.ownership = ownership_images(event, m.trace)
    except Exception as e:  # a picture must not hide the other tabs
        k.ownership_note = f"no ownership diagram for {k.name}: {type(e).__name__}: {e}"
        return
    if not k.ownership:
        k.ownership_note = (f"{k.name} has no partitioned argument and no trace to draw "
                            "(kernels launched with grid= show what a block reads when traced)")


def _measured_ceilings(report: CellReport) -> Any:
    """This GPU's measured copy and GEMM ceilings (measured once per session)."""
    from tilelab.perf.ceilings import current_ceilings

    try:
        return current_ceilings()
    except Exception as e:  # the datasheet ceilings are still drawn
        report.notes.append(f"could not measure this GPU's ceilings: {type(e).__name__}: {e}")
        return None


def _draw_roofline(report: CellReport, current: Any = None, projections: bool = False
                   ) -> None:
    points = report.points
    if not points:
        report.roofline_note = ("No roofline points: nothing ran in this cell"
                                if not report.launches else
                                "No roofline points: the launches could not be counted")
        return
    from tilelab.lab.figures.images import roofline_image

    try:
        report.roofline = roofline_image(points, report.roofline_gpus or None, current,
                                         projections=projections)
    except ImportError as e:  # matplotlib is an optional dependency (tilelab[lab])
        report.roofline_note = (f"the roofline cannot be drawn without matplotlib ({e}); "
                                "pip install 'tilelab[lab]'. The points are listed below.")
    except Exception as e:  # a picture must not hide the other tabs
        report.roofline_note = f"the roofline could not be drawn: {type(e).__name__}: {e}"
