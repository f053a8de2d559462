"""The ``%%tile`` cell magic: compile the cell's kernels, run it, show a tabbed view.

Why: in a notebook the unit of work is a cell. ``%%tile`` makes a cell a small lab bench:
its functions become kernels without decorators (see :mod:`tilelab.lab.cell.run` for the
rule), it runs as a normal cell would, and the launches it made are compiled for an arch of
choice, counted, timed and shown (see :mod:`tilelab.lab.views.tabs`).

Example:
    >>> TileMagics.tile.__doc__.splitlines()[2].split()[0]
    '%%tile'

    In a notebook::

        %load_ext tilelab

        %%tile --backend cpu --show +ptx
        def add(z: tl.Out, x: tl.In, y: tl.In):
            z.store(tl.load_like(x, z) + tl.load_like(y, z))
        x = tl.arange(4096, dtype="float32"); z = tl.empty(4096)
        add(z.partition(256), x, x)
"""
from __future__ import annotations

import ast
import re
import time
from typing import Any, Callable

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from tilelab.lab.cell.run import run_parsed_cell
from tilelab.lab.cell.shell import (CellSource, display_name, execute, parse_cell,
                                    prepare_error, register_cell, rename_cells)
from tilelab.lab.report.options import OptionError, TileOptions

__all__ = ["TileMagics", "last_view", "measure_cell_time"]

_LAST: list[Any] = [None]


def last_view() -> Any:
    """The :class:`~tilelab.lab.views.tabs.TileView` of the last ``%%tile`` cell (its
    ``report`` attribute holds the artifacts, launches and measurements), or None.

    Example:
        >>> v = last_view()                                   # doctest: +SKIP
        >>> v.report.kernels[0].artifacts.ptx[:20]            # doctest: +SKIP
    """
    return _LAST[0]


@magics_class
class TileMagics(Magics):
    """The ``%%tile`` magic (registered by ``%load_ext tilelab``).

    Example:
        >>> from IPython.core.interactiveshell import InteractiveShell
        >>> sh = InteractiveShell.instance()
        >>> sh.register_magics(TileMagics)
        >>> "tile" in sh.magics_manager.magics["cell"]
        True
    """

    @magic_arguments(name="%tile")  # the usage line then reads %%tile
    @argument("--arch", default=None, metavar="SM",
              help="target of the compiles shown (sm_80 ... sm_121; default: this GPU, "
                   "else sm_90)")
    @argument("--backend", default=None, choices=("cpu", "gpu"),
              help="where the cell's launches run (default: the GPU when usable, else the "
                   "CPU interpreter; $TILELAB_BACKEND)")
    @argument("--show", default=None, metavar="VIEWS",
              help="tabs to show, comma separated: tileir, safety, lowered, ptx, sass, "
                   "resources, remarks, ownership, roofline, timings, or 'all'; +view/-view "
                   "change the default (all but ptx and sass)")
    @argument("--bench", action="store_true",
              help="time each launch with tl.bench (50 runs on the GPU; the interpreter's "
                   "host time on the CPU)")
    @argument("--no-run", action="store_true", dest="no_run",
              help="do not run the cell: define its functions (imports, defs, classes and "
                   "assignments that launch nothing run) and compile each kernel for its "
                   "TILELAB_EXAMPLES = {'name': (args, ...)} entry")
    @argument("--roofline", default=None, metavar="GPUS",
              help="GPUs whose ceilings the roofline draws, comma separated, with each "
                   "point's bound projected onto them; 'all' is b200,rtx5090,h200 "
                   "(default: the GPU of --arch, or the GPU the cell ran on)")
    @argument("--predict-at", default=None, dest="predict_at", metavar="NAME=N",
              help="predict CPU launches at a GPU-sized problem: every tensor dimension "
                   "equal to the cell's variable NAME is N (e.g. n=2**26; several: "
                   "n=4096,k=512); tile shapes stay the cell's")
    @argument("--save", default=None, metavar="DIR",
              help="write the artifacts (.tileir, .tileirbc, .ptx, .sass, .cubin, "
                   ".lowered.py, resources, remarks), figures (PNG), timings.csv and "
                   "view.html to DIR")
    @argument("--force", action="store_true",
              help="compile again for the views, ignoring the disk cache")
    @argument("--view", default=None, choices=("auto", "widget", "html"),
              help="publish ipywidgets tabs (auto: in a kernel with ipywidgets) or static "
                   "HTML tabs only; $TILELAB_LAB_VIEW")
    @argument("--unsafe", action="store_true",
              help="kernels the magic makes are tl.kernel(unsafe=True): tl.Raw allowed")
    @argument("--no-check-bounds", action="store_true", dest="no_check_bounds",
              help="kernels the magic makes are tl.kernel(check_bounds=False)")
    @argument("--occupancy", type=int, default=None, metavar="N",
              help="cuTile occupancy hint of the kernels the magic makes (1-32)")
    @argument("--num-ctas", type=int, default=None, dest="num_ctas", metavar="N",
              help="cuTile num_ctas hint of the kernels the magic makes (1-16)")
    @argument("--opt-level", type=int, default=None, dest="opt_level", metavar="N",
              help="tileiras optimization level of the kernels the magic makes (0-3)")
    @cell_magic
    def tile(self, line: str, cell: str) -> None:
        """Compile the kernels defined in the cell, run the cell, and show a tabbed view.

        No decorator is needed: each top-level ``def`` of the cell that has a parameter
        annotated ``tl.In``/``tl.Out``/``tl.InOut``/``tl.Raw``, or that the cell launches
        (with a ``.partition(...)`` argument, ``grid=``, ``.launch_async``, ``.compile``
        or ``tl.interpret``), becomes ``tl.kernel`` with this magic's kernel options.
        Functions called from a kernel stay helpers; decorated functions stay as
        decorated; every other function stays plain Python.

        The view's tabs: Source ↔ Tile IR (each op linked to the line it came from),
        Lowered (the cuTile Python the kernel became), PTX, SASS, Resources, Remarks
        (tileiras' optimization remarks), Ownership (which block owns which tile, what a
        block reads), Roofline (each launch: measured on a GPU, predicted on the CPU) and
        Timings (time, GB/s, TFLOP/s and % of roof per launch; compile stages per row).

        Errors of tilelab (SafetyError, CompileError, LaunchError, ...) are shown as one
        message located in the cell; other errors keep Python's traceback. A race found by
        the CPU interpreter still shows the tabs, a Race tab first (the racing elements
        drawn, each race located as In[n], line L), then fails the cell.
        """
        shell = self.shell
        opts = self._options(line)
        t0 = time.perf_counter()
        src = register_cell(shell, cell, line)
        tree = parse_cell(shell, src)  # a SyntaxError is IPython's to show
        run = run_parsed_cell(
            tree, opts, shell.user_ns, cell_name=src.display_name, started=t0,
            execute=lambda module: _execute(shell, module, src),
            rename=lambda f: display_name(shell, f), active_backend=_active_backend,
            keep_race=True)
        report = run.report
        if run.raced is not None:
            report.race_message = rename_cells(str(run.raced), shell, [src.filename])
        view = self._show(report, opts, run.plan.kernels)
        if opts.save:
            self._save(report, view, opts.save)
        if run.raced is not None:
            raise run.raced
        if report.compile_errors:
            raise prepare_error(shell, report.compile_errors[0], src)

    def _options(self, line: str) -> TileOptions:
        """The checked options of the magic line; a bad one is a UsageError naming it."""
        args = parse_argstring(self.tile, line)
        try:
            return TileOptions.from_args(
                arch=args.arch, backend=args.backend, show=args.show, bench=args.bench,
                no_run=args.no_run, roofline=args.roofline, save=args.save,
                force=args.force, view=args.view, unsafe=args.unsafe,
                no_check_bounds=args.no_check_bounds, occupancy=args.occupancy,
                num_ctas=args.num_ctas, opt_level=args.opt_level,
                predict_at=args.predict_at)
        except OptionError as e:
            raise UsageError(f"%%tile: {e}") from None

    @staticmethod
    def _save(report: Any, view: Any, directory: str) -> None:
        """``--save``: write the files, or say (as a UsageError) why they cannot be."""
        from tilelab.lab.cell.save import save_report

        try:
            written = save_report(report, view.to_html(), directory)
        except OSError as e:
            raise UsageError(f"%%tile --save {directory}: cannot write there: {e}") from None
        print(f"%%tile: wrote {len(written)} files to {directory}")

    def _show(self, report: Any, opts: TileOptions, made: tuple[str, ...]) -> Any:
        """Build the view of ``report``, remember it (:func:`last_view`) and display it."""
        from IPython.display import display

        from tilelab.lab.views.panels import build_panels
        from tilelab.lab.views.tabs import TileView

        header = report.summary_line() + f" · {report.seconds:.2f} s"
        if made:
            header += f" · made kernels: {', '.join(made)}"
        view = TileView(build_panels(report), header, report.notes, mode=opts.view_mode,
                        shell=self.shell, report=report)
        _LAST[0] = view
        display(view)
        return view


def plain_doc(doc: str) -> str:
    """A magic's help as plain text that also reads as Markdown: ``%%tile?`` prints it
    raw, so the reST of IPython's argument decorators (the ``::`` literal block, double
    backticks) becomes "Usage:" and single backticks.

    Example:
        >>> print(plain_doc("::\\n\\n  %%tile [--bench]\\n\\nRun ``x``."))
        Usage:
        <BLANKLINE>
          %%tile [--bench]
        <BLANKLINE>
        Run `x`.
    """
    text = re.sub(r"^::\n", "Usage:\n", doc.lstrip("\n"), count=1)
    return re.sub(r"``([^`]+)``", r"`\1`", text)


TileMagics.tile.__doc__ = plain_doc(TileMagics.tile.__doc__ or "")


def _active_backend() -> str:
    """The backend launches will use; a UsageError when the environment forces a GPU
    that is not there (``TILELAB_BACKEND=gpu``)."""
    from tilelab.errors import TilelabError
    from tilelab.runtime.device import backend

    try:
        return backend()
    except TilelabError as e:
        raise UsageError(f"%%tile: {e}") from None


def _execute(shell: Any, tree: ast.Module, src: CellSource) -> None:
    """Run the cell's module through the shell; an error leaving it is made to render
    well first (:func:`~tilelab.lab.cell.shell.prepare_error`)."""
    try:
        execute(shell, tree, src)
    except BaseException as e:
        prepare_error(shell, e, src)
        raise


def measure_cell_time(cell: str, *, line: str = "--backend cpu", repeat: int = 3,
                      ipython: Any = None,
                      clock: Callable[[], float] = time.perf_counter) -> dict[str, Any]:
    """Time a warm ``%%tile`` cell: run it once (cold: compiles, caches), then ``repeat``
    times, and return the cold time, the warm times and their median in seconds, and
    where the warm time goes (``report.seconds``: collecting and drawing the view).

    A benchmark, not a test: the figure depends on the machine.

    Example:
        >>> r = measure_cell_time("import tilelab as tl\\n"
        ...                       "z = tl.zeros(1024); tl.kernels.scale(z, 2.0)")  # doctest: +SKIP
        >>> r["warm_median_s"] < 0.5                                              # doctest: +SKIP
        True
    """
    import statistics

    from IPython.testing.globalipapp import get_ipython

    ip = ipython or get_ipython()
    ip.run_line_magic("load_ext", "tilelab")
    times, collect = [], []
    for i in range(repeat + 1):
        t0 = clock()
        ip.run_cell_magic("tile", line, cell)
        times.append(clock() - t0)
        view = last_view()
        collect.append(getattr(getattr(view, "report", None), "seconds", None))
    warm = times[1:]
    return {"cold_s": times[0], "warm_s": warm, "warm_median_s": statistics.median(warm),
            "collect_s": collect[1:]}
