"""``%%tile --save DIR``: write what the cell produced to files.

Why: the tabs are for reading; files are for diffing, attaching to a bug report, or
feeding other tools (``cuobjdump``, ``nvdisasm``, a profiler). Per compiled
specialization: ``<kernel>.<arch>.tileir``, ``.tileirbc`` (bytecode), ``.ptx``, ``.sass``,
``.cubin``, ``.lowered.py``, ``.resources.txt``, ``.remarks.txt``; a second specialization
of the same kernel gets ``<kernel>-2.<arch>...``. Per cell: ``ownership-<kernel>-<n>.png``,
``roofline.png``, ``timings.csv`` and ``view.html`` (the static tabbed page).

Example:
    >>> from tilelab.lab.report import CellReport
    >>> import tempfile
    >>> save_report(CellReport(), "<html></html>", tempfile.mkdtemp())
    ['view.html']
"""
from __future__ import annotations

from pathlib import Path

from tilelab.lab.panels import remarks_text, sass_text
from tilelab.lab.report import CellReport, timings_frame

__all__ = ["save_report"]


def _stem(name: str, arch: str, seen: dict[str, int]) -> str:
    seen[name] = seen.get(name, 0) + 1
    n = seen[name]
    return f"{name}.{arch}" if n == 1 else f"{name}-{n}.{arch}"


def save_report(report: CellReport, html: str, directory: str | Path) -> list[str]:
    """Write the report's artifacts and figures under ``directory`` (created if needed);
    returns the file names written, in order.

    Example:
        >>> save_report(report, view.to_html(), "out")        # doctest: +SKIP
        ['add.sm_90.tileir', 'add.sm_90.tileirbc', ...]
    """
    root = Path(directory).expanduser()
    root.mkdir(parents=True, exist_ok=True)
    written: list[str] = []

    def put(name: str, data: str | bytes) -> None:
        path = root / name
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data if data.endswith("\n") else data + "\n")
        written.append(name)

    seen: dict[str, int] = {}
    for k in report.kernels:
        stem = _stem(k.name, k.arch, seen)
        if k.lowered_source:
            put(f"{stem}.lowered.py", k.lowered_source)
        art = k.artifacts
        if art is None:
            if k.error:
                put(f"{stem}.error.txt", k.error)
            continue
        put(f"{stem}.tileir", art.tileir)
        put(f"{stem}.tileirbc", art.bytecode)
        put(f"{stem}.cubin", art.cubin)
        if art.ptx:
            put(f"{stem}.ptx", art.ptx)
        sass = sass_text(k, report.rename)
        put(f"{stem}.sass", sass if sass is not None else f"(no SASS: {k.sass_unavailable})")
        put(f"{stem}.resources.txt", str(art.resources))
        put(f"{stem}.remarks.txt", remarks_text(k, report.rename))
        for i, img in enumerate(k.ownership, 1):
            put(f"ownership-{stem.split('.')[0]}-{i}.png", img.png)
    if report.roofline is not None:
        put("roofline.png", report.roofline.png)
    frame = timings_frame(report)
    if not frame.empty:
        put("timings.csv", frame.to_csv(index=False))
    put("view.html", "<!doctype html>\n<meta charset=\"utf-8\">\n" + html
        if not html.lstrip().startswith("<html") else html)
    return written
