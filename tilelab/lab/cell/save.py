"""``%%tile --save DIR``: write what the cell produced to files.

Why: the tabs are for reading; files are for diffing, attaching to a bug report, or
feeding other tools (``cuobjdump``, ``nvdisasm``, a profiler). Per compiled
specialization: ``<kernel>.<arch>.tileir``, ``.tileirbc`` (bytecode), ``.ptx``, ``.sass``,
``.cubin``, ``.lowered.py``, ``.resources.txt``, ``.remarks.txt``; a second specialization
of the same kernel gets ``<kernel>-2.<arch>...``. Per cell: ``ownership-<kernel>-<n>.png``,
``roofline.png``, ``timings.csv`` and ``view.html`` (the static tabbed page).

Example:
    >>> from tilelab.lab.report.cell_report import CellReport
    >>> import tempfile
    >>> save_report(CellReport(), "<html></html>", tempfile.mkdtemp())
    ['view.html']
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from tilelab.lab.report.cell_report import CellReport, timings_frame
from tilelab.lab.views.panels import remarks_text, sass_text

__all__ = ["save_report", "standalone_svg"]


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
            _put_figure(put, f"ownership-{stem.split('.')[0]}-{i}", img)
    if report.roofline is not None:
        _put_figure(put, "roofline", report.roofline)
    frame = timings_frame(report)
    if not frame.empty:
        put("timings.csv", frame.to_csv(index=False))
    put("view.html", "<!doctype html>\n<meta charset=\"utf-8\">\n" + html
        if not html.lstrip().startswith("<html") else html)
    return written


def _put_figure(put: Any, stem: str, img: Any) -> None:
    """A figure as ``stem.svg`` (SVG figures: standalone, in the light look) and/or
    ``stem.png``; a dark PNG variant as ``stem.dark.png``."""
    svg = getattr(img, "svg", None)
    if svg:
        put(f"{stem}.svg", standalone_svg(svg))
    if img.png:
        put(f"{stem}.png", img.png)
    dark = getattr(img, "png_dark", None)
    if dark:
        put(f"{stem}.dark.png", dark)


def standalone_svg(svg: str) -> str:
    """An inline SVG of the view as a file of its own: the ``--tl-*`` variables it colours
    itself with keep their light fallbacks, and the XML namespace is declared.

    Example:
        >>> standalone_svg('<svg width="1"></svg>').startswith('<svg xmlns=')
        True
    """
    start = svg.find("<svg")
    body = svg[start:] if start >= 0 else svg
    if "xmlns=" not in body[:200]:
        body = body.replace("<svg", '<svg xmlns="http://www.w3.org/2000/svg"', 1)
    return body
