"""Everything a ``%%tile`` cell produced, gathered once for every view of it.

Why: the widget tabs, the static HTML, the plain-text summary and ``--save`` all show the
same facts, so they are collected here first: per compiled specialization the artifacts
and the source-linked Tile IR (:class:`KernelReport`), per distinct launch the counted work
and time (:class:`LaunchReport`), and the cell-wide roofline. Failures (a kernel that does
not compile, a figure that cannot be drawn) become messages in the report, not exceptions,
so one bad kernel does not hide the others.

Example:
    >>> r = CellReport(cell_name="In[1]", arch="sm_90", backend="cpu")
    >>> r.summary_line()
    'In[1]: no kernels, no launches · backend cpu · arch sm_90'
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from tilelab.lab.figures.images import Image
from tilelab.lab.report.debuginfo import IRLine
from tilelab.lab.report.measure import Measurement

__all__ = ["KernelReport", "LaunchReport", "CellReport", "build_kernel_report",
           "timings_frame"]

_STAGES = ("check", "lower", "frontend", "tileiras")


@dataclass
class KernelReport:
    """One compiled specialization of a kernel, ready to show.

    ``artifacts`` is None when compiling failed (``error`` says why, located in the
    user's source) or was impossible (``error`` says what to do). ``ir_lines`` pair each
    Tile IR line with its user source line; ``remarks`` and ``sass`` are located in the
    user's source too; ``source_*`` describe the kernel's own lines.

    Example:
        >>> KernelReport("add", "z: float32[4096]", "sm_90").title
        'add(z: float32[4096]) for sm_90'
    """

    name: str
    signature: str
    arch: str
    launches: int = 0
    artifacts: Any = None
    error: str | None = None
    error_exc: BaseException | None = field(default=None, repr=False)
    ir_lines: list[IRLine] = field(default_factory=list)
    ir_problem: str | None = None
    source_file: str = ""
    source_first_line: int = 1
    source_lines: tuple[str, ...] = ()
    lowered_source: str = ""
    lowered_first_line: int = 1
    remarks: list = field(default_factory=list)
    sass: str | None = None
    sass_unavailable: str | None = "not disassembled (add sass to --show)"
    ownership: list[Image] = field(default_factory=list)
    ownership_note: str | None = None

    @property
    def title(self) -> str:
        """``name(arguments) for arch``: the heading of the kernel's sections.

        Example:
            >>> KernelReport("k", "x: float32[8]", "sm_80").title
            'k(x: float32[8]) for sm_80'
        """
        return f"{self.name}({self.signature}) for {self.arch}"


@dataclass
class LaunchReport:
    """Identical launches of one specialization: where, how often, and how fast.

    Example:
        >>> LaunchReport("add", "z: f32[8]", (1, 1, 1), "cpu", 2).grid_text
        '(1, 1, 1)'
    """

    name: str
    description: str
    grid: tuple
    device: str
    count: int
    kernel_index: int = -1
    measurement: Measurement = field(default_factory=Measurement)

    @property
    def grid_text(self) -> str:
        """The launch grid as ``(x, y, z)``.

        Example:
            >>> LaunchReport("k", "", [4, 1, 1], "gpu", 1).grid_text
            '(4, 1, 1)'
        """
        return str(tuple(self.grid))


@dataclass
class CellReport:
    """The cell: its kernels, launches, roofline and notes.

    ``rename`` turns file names into what the user sees (``In[3]`` for cells);
    ``race_trace`` and ``race_message`` are set when a race stopped the cell.

    Example:
        >>> CellReport(cell_name="In[2]").kernels
        []
    """

    cell_name: str = ""
    arch: str = "sm_90"
    backend: str = "cpu"
    views: tuple[str, ...] = ()
    kernels: list[KernelReport] = field(default_factory=list)
    launches: list[LaunchReport] = field(default_factory=list)
    roofline: Image | None = None
    roofline_note: str | None = None
    roofline_gpus: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)
    kernel_rule: str = ""
    ran: bool = True
    seconds: float = 0.0
    rename: Callable[[str], str] = field(default=lambda s: s, repr=False)
    #: the trace of a launch that stopped the cell with a race (the Race tab draws it)
    race_trace: Any = field(default=None, repr=False)
    #: that LaunchError's message, cells named as IPython names them
    race_message: str = ""

    def summary_line(self) -> str:
        """``In[3]: 1 kernel, 2 launches · backend cpu · arch sm_90``.

        Example:
            >>> CellReport(cell_name="In[3]", kernels=[KernelReport("k", "", "sm_90")],
            ...            launches=[LaunchReport("k", "", (1, 1, 1), "cpu", 2)]).summary_line()
            'In[3]: 1 kernel, 2 launches · backend cpu · arch sm_90'
        """
        names = len(dict.fromkeys(k.name for k in self.kernels))
        specs = len(self.kernels)
        # launches are listed when measured; otherwise the kernels know their launch counts
        n = sum(l.count for l in self.launches) or sum(k.launches for k in self.kernels)
        kernels = "no kernels" if not names else f"{names} kernel{'s' * (names != 1)}"
        if specs > names:
            kernels += f" ({specs} specializations)"
        launches = ("no launches" if not n else f"{n} launch{'es' * (n != 1)}")
        if not self.ran:
            launches = "not run (--no-run)"
        return (f"{self.cell_name}: {kernels}, {launches} · backend {self.backend} · "
                f"arch {self.arch}")

    @property
    def points(self) -> list[Any]:
        """The roofline points of the launches that have one.

        Example:
            >>> CellReport().points
            []
        """
        return [l.measurement.point for l in self.launches if l.measurement.point is not None]

    @property
    def compile_errors(self) -> list[BaseException]:
        """The CompileErrors the kernels' compiles raised (the cell fails with the first).

        Example:
            >>> from tilelab.errors import CompileError
            >>> k = KernelReport("k", "", "sm_90", error="bad", error_exc=CompileError("bad"))
            >>> [str(e) for e in CellReport(kernels=[k]).compile_errors]
            ['bad']
        """
        from tilelab.errors import CompileError

        return [k.error_exc for k in self.kernels if isinstance(k.error_exc, CompileError)]


def build_kernel_report(kernel: Any, example_args: Sequence[Any], *, arch: str, force: bool,
                        launches: int, signature: str, views: Any = ("tileir",)) -> KernelReport:
    """Compile ``kernel`` for ``example_args`` and collect what ``views`` show (the
    source-linked Tile IR for ``tileir``, remarks for ``remarks``, SASS for ``sass``).

    Example:
        >>> kr = build_kernel_report(add, (z.partition(256), x, y), arch="sm_90",
        ...                          force=False, launches=1, signature="...")  # doctest: +SKIP
        >>> kr.artifacts.tileir.startswith("entry")                # doctest: +SKIP
        True
    """
    from tilelab.compiler.binary.remarks import parse_remarks
    from tilelab.compiler.binary.sass import disassemble
    from tilelab.errors import TilelabError
    from tilelab.lab.report.debuginfo import annotate_tileir

    d = kernel.definition
    src = d.analysis.source
    kr = KernelReport(kernel.name, signature, arch, launches, source_file=src.filename,
                      source_first_line=src.first_line, source_lines=tuple(src.lines))
    try:
        lowered = d.lowered(d.specialize(tuple(example_args)).plan)
        kr.lowered_source, kr.lowered_first_line = lowered.source, lowered.first_line
        art = kr.artifacts = kernel.compile(*example_args, arch=arch, force=force)
    except TilelabError as e:
        kr.error, kr.error_exc = str(e), e
        return kr
    views = set(views)
    where = art.location_map  # maps any earlier name of the same lowered text too
    if "tileir" in views:
        kr.ir_lines, kr.ir_problem = annotate_tileir(art, where)
    if "remarks" in views and art.remarks_text.strip():
        kr.remarks = parse_remarks(art.remarks_text, where)
    if "sass" in views:
        result = disassemble(art.cubin, map_location=where)
        kr.sass, kr.sass_unavailable = result.text, result.unavailable_reason
    return kr


def _ms(seconds: float | None) -> float:
    return seconds * 1e3 if seconds is not None else math.nan


def timings_frame(report: CellReport) -> Any:
    """The Timings tab as a pandas DataFrame: one row per distinct launch (or per compiled
    kernel when nothing ran).

    Columns: kernel, launch, grid, device, launches, arch, compile (``cache hit``,
    ``compiled``, ``failed``), the compile stages in ms, ``device time (µs)`` and what it
    is (``time``: measured or predicted), achieved ``GB/s`` and ``TFLOP/s`` (from the
    counted bytes and FLOPs), ``interpreter (ms)`` with ``--bench`` on the CPU.

    Example:
        >>> timings_frame(CellReport()).columns[:3].tolist()
        ['kernel', 'launch', 'grid']
    """
    import pandas as pd

    rows = []
    items: list[tuple[LaunchReport | None, KernelReport | None]] = []
    for l in report.launches:
        k = report.kernels[l.kernel_index] if 0 <= l.kernel_index < len(report.kernels) else None
        items.append((l, k))
    if not report.launches:
        items = [(None, k) for k in report.kernels]
    for l, k in items:
        art = k.artifacts if k is not None else None
        t = art.timings if art is not None else {}
        m = l.measurement if l is not None else Measurement()
        row = {
            "kernel": l.name if l else k.name,
            "launch": l.description if l else k.signature,
            "grid": l.grid_text if l else "",
            "device": l.device if l else "",
            "launches": l.count if l else 0,
            "arch": k.arch if k else "",
            "compile": ("failed" if k is not None and k.error else
                        "cache hit" if art is not None and art.cache_hit else
                        "compiled" if art is not None else ""),
        }
        for stage in _STAGES:
            row[f"{stage} (ms)"] = _ms(t.get(stage))
        total = t.get("total_compile", t.get("cache_load"))
        row["compile (ms)"] = _ms(total)
        row["device time (µs)"] = m.seconds * 1e6 if m.seconds else math.nan
        row["time"] = m.describe_time()
        row["GB/s"] = m.bandwidth / 1e9 if m.bandwidth else math.nan
        row["TFLOP/s"] = m.flop_rate / 1e12 if m.flop_rate else math.nan
        row["interpreter (ms)"] = _ms(m.host_seconds)
        row["FLOPs"] = m.flops if m.flops is not None else math.nan
        row["bytes"] = m.bytes if m.bytes is not None else math.nan
        rows.append(row)
    columns = ["kernel", "launch", "grid", "device", "launches", "arch", "compile",
               *(f"{s} (ms)" for s in _STAGES), "compile (ms)", "device time (µs)", "time",
               "GB/s", "TFLOP/s", "interpreter (ms)", "FLOPs", "bytes"]
    frame = pd.DataFrame(rows, columns=columns)
    if not frame.empty and frame["interpreter (ms)"].isna().all():
        frame = frame.drop(columns=["interpreter (ms)"])
    return frame
