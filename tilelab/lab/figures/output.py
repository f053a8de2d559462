"""A figure as a notebook output that follows the page's light or dark theme.

Why: an SVG or PNG output has its colours fixed when the cell ran, so a figure shown in
a plain cell (``ownership_figure(p)``, ``roofline_figure(points)``, a matplotlib chart
made with :func:`tilelab.lab.figures.theme.new_figure`) would keep its light text on a
dark JupyterLab. So a figure is published as one ``text/html`` output: the SVG inline (an
``image/svg+xml`` output is an ``<img>``, which page CSS cannot reach), its colours the
page's ``--tl-*`` variables with light fallbacks, and a ``<style>`` that defines those
variables for light and dark (:func:`~tilelab.lab.figures.looks.theme_css`, only the
variables the figure uses). JupyterLab, VS Code and nbconvert's pages render it and
follow a theme switch without a re-run; a renderer that strips CSS shows the light look.
No PNG is stored beside it, so a figure costs a notebook only its SVG.

Example:
    >>> html = figure_html('<svg width="4"><rect fill="var(--tl-fg, #1a1a1a)"/></svg>')
    >>> html.startswith('<div class="tilelab-figure">'), "--tl-race" in html, "--tl-bg:" in html
    (True, False, True)
"""
from __future__ import annotations

import re
from typing import Any

__all__ = ["FIGURE_CSS", "figure_html", "figure_bundle", "publish", "used_variables"]

#: how a figure sits in its output: at its natural size, shrunk to a narrow output, on the
#: theme's background (a page that knows no theme but prefers dark gets a dark figure on
#: its white body, still readable)
FIGURE_CSS = (".tilelab-figure { margin: 2px 0; width: fit-content; max-width: 100%; "
              "overflow-x: auto; background: var(--tl-bg); color: var(--tl-fg); } "
              ".tilelab-figure > svg { max-width: 100%; height: auto; display: block; }")
#: the variables the wrapper itself uses
_OWN = ("--tl-fg", "--tl-bg")

_VAR = re.compile(r"var\((--tl-[a-z0-9-]+)")


def used_variables(svg: str) -> list[str]:
    """The ``--tl-*`` variables an SVG refers to, in order of first use.

    Example:
        >>> used_variables('<rect fill="var(--tl-c1, #ff7f0e)" stroke="var(--tl-fg, #000)"/>')
        ['--tl-c1', '--tl-fg']
    """
    return list(dict.fromkeys(_VAR.findall(svg)))


def figure_html(svg: str) -> str:
    """The output's HTML: a ``div.tilelab-figure`` holding the theme CSS of the variables
    ``svg`` uses (and the text and background colours the wrapper takes) and the SVG
    itself (an XML prologue, if any, dropped).

    Example:
        >>> "prefers-color-scheme" in figure_html('<svg><text fill="var(--tl-fg, #111)"/></svg>')
        True
    """
    from tilelab.lab.figures.looks import theme_css

    start = svg.find("<svg")
    body = svg[start:] if start > 0 else svg
    css = theme_css(".tilelab-figure", [*_OWN, *used_variables(body)])
    return f'<div class="tilelab-figure"><style>{css}{FIGURE_CSS}</style>{body}</div>'


def figure_bundle(svg: str, text: str) -> dict[str, str]:
    """The MIME bundle of a figure output: ``text/html`` (:func:`figure_html`) and a
    ``text/plain`` line for terminals.

    Example:
        >>> sorted(figure_bundle("<svg/>", "a figure"))
        ['text/html', 'text/plain']
    """
    return {"text/html": figure_html(svg), "text/plain": text}


def publish(svg: str, text: str) -> None:
    """Display a figure as its themed output (from an object's ``_ipython_display_``).

    Example:
        >>> publish("<svg/>", "a figure")       # doctest: +SKIP
    """
    from IPython.display import display

    bundle: Any = figure_bundle(svg, text)
    display(bundle, raw=True)
