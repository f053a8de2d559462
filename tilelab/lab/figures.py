"""Figures for the lab's tabs, as PNG bytes: ownership diagrams and the roofline.

Why: the views are HTML (a static page and widget tabs built from the same content), so
figures travel as PNG images. Drawing is done by :mod:`tilelab.lab.ownership` and
:mod:`tilelab.lab.roofline_plot`; this module calls them, turns the figures into PNGs,
and closes them so that matplotlib's inline backend does not draw them a second time under
the cell.

Example:
    >>> from matplotlib.figure import Figure
    >>> fig = Figure(figsize=(1, 1))
    >>> figure_png(fig)[:8] == b"\\x89PNG\\r\\n\\x1a\\n"
    True
"""
from __future__ import annotations

import io
import sys
from dataclasses import dataclass
from typing import Any, Sequence

__all__ = ["Image", "figure_png", "ownership_images", "roofline_image"]


@dataclass(frozen=True)
class Image:
    """A rendered figure: PNG bytes and a caption (what it shows).

    Example:
        >>> Image(b"", "caption").caption
        'caption'
    """

    png: bytes
    caption: str


def figure_png(fig: Any, dpi: int = 110) -> bytes:
    """The PNG of a matplotlib figure; the figure is closed if pyplot manages it.

    Example:
        >>> from matplotlib.figure import Figure
        >>> len(figure_png(Figure(figsize=(1, 1)))) > 100
        True
    """
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight",
                facecolor=fig.get_facecolor())
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        plt.close(fig)
    return buf.getvalue()


def ownership_images(event: Any, trace: Any = None) -> list[Image]:
    """Ownership pictures of one launch (one per partitioned argument, the first with the
    reads of the first block that ran; race pictures where the trace found races).

    Example:
        >>> imgs = ownership_images(launch_event, trace)     # doctest: +SKIP
        >>> imgs[0].caption                                   # doctest: +SKIP
        'add: which block owns which tile of z'
    """
    from tilelab.lab.ownership import ownership_figures

    out = []
    for fig in ownership_figures(event, trace=trace):
        caption = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) else ""
        out.append(Image(figure_png(fig), caption))
    return out


def roofline_image(points: Sequence[Any], gpus: Sequence[Any], current: Any = None) -> Image:
    """The roofline of ``points`` (:class:`~tilelab.perf.roofline.RooflinePoint`) under the
    ceilings of ``gpus`` (spec keys or :class:`~tilelab.perf.specs.GPUSpec`), plus the
    measured ceilings of this machine's GPU when ``current`` (a
    :class:`~tilelab.perf.ceilings.MeasuredCeilings`) is given.

    Example:
        >>> from tilelab.perf.roofline import RooflinePoint
        >>> img = roofline_image([RooflinePoint("k", 1e6, 1e6, "fp32")], ["h200"])
        >>> img.png[:4] == b"\\x89PNG", img.caption
        (True, 'k: 1 FLOP/B (counted)')
    """
    from tilelab.lab.roofline_plot import roofline_figure

    fig = roofline_figure(list(points), gpus=tuple(gpus), current=current)
    caption = "; ".join(p.describe() for p in points)
    return Image(figure_png(fig), caption)
