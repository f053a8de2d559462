"""Matplotlib charts that follow the page's theme: SVG whose colours are ``--tl-*`` variables.

Why: the lab's own figures are SVG written with the page's colour variables, but the
notebooks also draw charts with matplotlib (:func:`tilelab.lab.figures.theme.new_figure`
inside ``themed()``), and matplotlib bakes in the colours of the look it drew with: shown
as a PNG, a chart drawn light keeps its dark text after JupyterLab switches to dark. So a
:class:`ThemedFigure` shows itself as SVG in which every colour of the look it was drawn
in (text, background, grid, palette, ...) becomes that colour's variable (``#1a1a1a`` ->
``var(--tl-fg, #1a1a1a)``, see :func:`~tilelab.lab.figures.looks.colour_variables`),
published as one themed HTML output (:mod:`tilelab.lab.figures.output`). Colours that
belong to no look (a colormap's image, a colour the cell chose itself) stay as drawn.

The SVG is trimmed for a notebook: text stays text (``svg.fonttype: none``), coordinates
keep two decimals, unreferenced ids and matplotlib's metadata go, and the ids that are
referenced get a prefix of their own so two charts in one page cannot collide.

Example:
    >>> fig = ThemedFigure(figsize=(2, 1))              # drawn in the light look
    >>> _ = fig.add_subplot().set_title("t", color="#1a1a1a")     # its text colour
    >>> svg = themed_svg(fig)
    >>> svg.startswith("<svg") and "var(--tl-fg, #1a1a1a)" in svg and "#1a1a1a;" not in svg
    True
"""
from __future__ import annotations

import io
import re
import uuid
from typing import Any

import matplotlib
from matplotlib.figure import Figure

__all__ = ["ThemedFigure", "themed_svg"]

_COLOUR = re.compile(r"((?:fill|stroke|stop-color|flood-color)(?::\s*|=\"))(#[0-9a-fA-F]{6})\b")
_DIGITS = re.compile(r"(\d\.\d\d)\d+")
#: matplotlib's font list, shortened (the text is laid out for DejaVu Sans)
_FONTS = re.compile(r"font-family: 'DejaVu Sans'[^;\"]*")


def _recolour(svg: str, theme: Any) -> str:
    from tilelab.lab.figures.looks import colour_variables

    table = colour_variables(theme)

    def sub(m: re.Match) -> str:
        var = table.get(m.group(2).lower())
        return m.group(1) + var if var else m.group(0)

    return _COLOUR.sub(sub, svg)


def _own_ids(svg: str) -> str:
    """Drop the ids nothing refers to; prefix the others (unique in any page)."""
    refs = set(re.findall(r"url\(#([^)]+)\)", svg)) | set(re.findall(r'href="#([^"]+)"', svg))
    prefix = "tl" + uuid.uuid4().hex[:8] + "-"

    def ident(m: re.Match) -> str:
        return f' id="{prefix}{m.group(1)}"' if m.group(1) in refs else ""

    svg = re.sub(r' id="([^"]+)"', ident, svg)
    svg = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}{m.group(1)})", svg)
    return re.sub(r'href="#([^"]+)"', lambda m: f'href="#{prefix}{m.group(1)}"', svg)


def themed_svg(fig: Figure, theme: Any = None) -> str:
    """``fig`` as an inline ``<svg>`` whose colours follow the page's theme.

    ``theme`` is the look ``fig`` was drawn in (default: its ``tilelab_theme``, else
    light): its colours are the ones turned into variables. Implicit black (matplotlib
    writes no fill for black text and shapes) becomes the highlight colour, black in the
    light look and white in the dark one.

    Example:
        >>> from matplotlib.figure import Figure
        >>> f = Figure(figsize=(1, 1)); _ = f.add_subplot().set_title("t")
        >>> "var(--tl-highlight, #000000)" in themed_svg(f, "light")
        True
    """
    theme = theme or getattr(fig, "tilelab_theme", None) or "light"
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", facecolor=fig.get_facecolor(),
                    metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)
    # matplotlib's "*{stroke-linejoin...}" would style the whole page once inline: the
    # same defaults go on the root element, where SVG inherits them
    svg = re.sub(r'<style type="text/css">\*\{[^}]*\}</style>', "", svg)
    svg = re.sub(r"\s*\n\s*", " ", svg)
    svg = re.sub(r">\s+<", "><", svg).replace("<defs></defs>", "").replace("<defs/>", "")
    svg = _DIGITS.sub(r"\1", svg)
    svg = _FONTS.sub("font-family: 'DejaVu Sans', 'Bitstream Vera Sans', Verdana, Arial, "
                     "sans-serif", svg)
    svg = _own_ids(_recolour(svg, theme))
    return svg.replace(
        "<svg ", '<svg class="tl-svg tl-mpl" role="img" stroke-linejoin="round" '
        'stroke-linecap="butt" fill="var(--tl-highlight, #000000)" ', 1)


class ThemedFigure(Figure):
    """A matplotlib :class:`~matplotlib.figure.Figure` that shows itself in a notebook as
    SVG following the page's light or dark theme (:func:`themed_svg`), never as a PNG
    with baked colours. ``tilelab_theme`` is the look it is drawn in (set by
    :func:`~tilelab.lab.figures.theme.new_figure`). Saving and every other use is
    matplotlib's.

    Example:
        >>> ThemedFigure(figsize=(1, 1)).tilelab_theme
        'light'
    """

    tilelab_theme: str = "light"

    def add_subplot(self, *args: Any, **kwargs: Any) -> Any:
        """matplotlib's ``add_subplot``, with the axes made in this figure's look (frame,
        plot area, ticks, labels) even outside ``themed()``."""
        with self._look():
            return super().add_subplot(*args, **kwargs)

    def add_axes(self, *args: Any, **kwargs: Any) -> Any:
        """matplotlib's ``add_axes``, in this figure's look (as :meth:`add_subplot`)."""
        with self._look():
            return super().add_axes(*args, **kwargs)

    def _look(self) -> Any:
        from tilelab.lab.figures.looks import get_theme

        return matplotlib.rc_context(get_theme(self.tilelab_theme).rc)

    def _ipython_display_(self) -> None:
        from tilelab.lab.figures.output import publish

        title = self._suptitle.get_text() if self._suptitle is not None else ""
        titles = [ax.get_title() for ax in self.axes if ax.get_title()]
        text = title or "; ".join(titles) or "a chart"
        w, h = self.get_size_inches()
        publish(themed_svg(self), f"<Figure {w:g}x{h:g} in: {text}>")
