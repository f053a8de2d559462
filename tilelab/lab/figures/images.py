"""Figures for the lab's tabs: ownership diagrams and the roofline, as inline SVG.

Why: the views are HTML (a static page and widget tabs built from the same content). The
figures are drawn as SVG text (:mod:`tilelab.lab.figures.ownership_svg`,
:mod:`tilelab.lab.figures.roofline_svg`) — no matplotlib in a warm cell, sharp at any size,
and their colours are the page's theme variables, so they follow a theme switch without a
re-run. A PNG is made only on demand (``Image.png``, for ``--save`` and widgets that
need one).

Example:
    >>> from tilelab.perf.roofline import RooflinePoint
    >>> img = roofline_image([RooflinePoint("k", 1e6, 1e6, "fp32")], ["h200"])
    >>> img.svg.startswith("<svg"), img.caption
    (True, 'k: 1 FLOP/B (counted)')
"""
from __future__ import annotations

import io
import sys
from dataclasses import dataclass, field
from typing import Any, Sequence

__all__ = ["Image", "figure_png", "ownership_images", "roofline_image"]


@dataclass(frozen=True)
class Image:
    """A rendered figure: its SVG (``svg``), a caption, and a PNG made on first use
    (``png``; the figure's own theme colours) for outputs that cannot hold SVG.

    Example:
        >>> Image(b"", "caption").caption
        'caption'
    """

    _png: bytes = b""
    caption: str = ""
    svg: str | None = None
    figure: Any = field(default=None, repr=False, compare=False)

    @property
    def png(self) -> bytes:
        """PNG bytes (rendered from the SVG figure the first time they are asked for)."""
        if not self._png and self.figure is not None:
            object.__setattr__(self, "_png", self.figure.to_png(self.figure.theme))
        return self._png


def figure_png(fig: Any, dpi: int = 110) -> bytes:
    """The PNG of a figure (an SVG figure, or a matplotlib one, closed if pyplot manages it).

    Example:
        >>> from matplotlib.figure import Figure
        >>> len(figure_png(Figure(figsize=(1, 1)))) > 100
        True
    """
    if hasattr(fig, "to_png"):
        return fig.to_png(fig.theme, dpi=dpi)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight",
                facecolor=fig.get_facecolor())
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None and getattr(fig.canvas, "manager", None) is not None:
        plt.close(fig)              # only pyplot's own figures have a manager to close
    return buf.getvalue()


def _image(fig: Any) -> Image:
    return Image(b"", fig.suptitle.replace("\n", " "), fig.to_svg(), fig)


def ownership_images(event: Any, trace: Any = None) -> list[Image]:
    """Ownership pictures of one launch (one per partitioned argument, the first with the
    reads of the first block that ran; race pictures where the trace found races).

    Example:
        >>> imgs = ownership_images(launch_event, trace)     # doctest: +SKIP
        >>> imgs[0].caption                                   # doctest: +SKIP
        'add: which block owns which tile of z'
    """
    from tilelab.lab.figures.ownership import ownership_figures

    return [_image(fig) for fig in ownership_figures(event, trace=trace)]


def roofline_image(points: Sequence[Any], gpus: Sequence[Any] | None = None,
                   current: Any = None, *, projections: bool = False) -> Image:
    """The roofline of ``points`` (:class:`~tilelab.perf.roofline.RooflinePoint`) under the
    ceilings of ``gpus`` (spec keys or :class:`~tilelab.perf.specs.GPUSpec`; None: the
    GPU the points' times are for), plus the measured ceilings of this machine's GPU when
    ``current`` (a :class:`~tilelab.perf.ceilings.MeasuredCeilings`) is given;
    ``projections`` marks each point's bound on the other GPUs.

    Example:
        >>> from tilelab.perf.roofline import RooflinePoint
        >>> img = roofline_image([RooflinePoint("k", 1e6, 1e6, "fp32")], ["h200"])
        >>> img.png[:4] == b"\\x89PNG"
        True
    """
    from tilelab.lab.figures.roofline_plot import roofline_figure

    fig = roofline_figure(list(points), gpus=tuple(gpus) if gpus else None, current=current,
                          projections=projections)
    caption = "; ".join(p.describe() for p in points)
    return Image(b"", caption, fig.to_svg(), fig)
