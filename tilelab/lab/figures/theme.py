"""Light and dark looks for matplotlib charts, and the lab's look names in one place.

Why: a chart drawn black-on-white is unreadable in JupyterLab's dark theme and the other
way round. Every drawing function takes ``theme=`` (a :class:`Theme`, ``"light"``,
``"dark"`` or None) and None means :func:`detect_theme`: ``$TILELAB_THEME``, else
JupyterLab's saved theme setting, else light. The looks themselves and the page's CSS
variables live in :mod:`tilelab.lab.figures.looks` (re-exported here); this module adds
matplotlib: rcParams (:func:`themed`) and :func:`new_figure`, whose figures show
themselves in a notebook as SVG that follows the page's theme without a re-run
(:mod:`tilelab.lab.figures.mpl_svg`).

Figures are made with :func:`new_figure` (a bare :class:`matplotlib.figure.Figure`
subclass, not pyplot), so they never touch pyplot's global state and render with any
backend.

Example:
    >>> t = get_theme("dark")
    >>> t.name, t.rc["figure.facecolor"] == t.background
    ('dark', True)
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from tilelab.lab.figures.looks import (DARK, LIGHT, Theme, colour_variables, css_var,
                                       css_variables, detect_theme, get_theme, theme_css)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Theme", "LIGHT", "DARK", "light", "dark", "detect_theme", "get_theme",
           "themed", "new_figure", "owner_colors", "css_variables", "css_var", "theme_css",
           "colour_variables"]

#: rcParams of the light look (``matplotlib.rc_context(light)``)
light: dict[str, Any] = LIGHT.rc
#: rcParams of the dark look
dark: dict[str, Any] = DARK.rc


@contextmanager
def themed(theme: "Theme | str | None" = None) -> Iterator[Theme]:
    """Apply a theme's rcParams while artists are created.

    Example:
        >>> with themed("dark") as t:
        ...     fig = new_figure(t)
        >>> fig.get_facecolor()[:3] != (1.0, 1.0, 1.0)
        True
    """
    import matplotlib

    t = get_theme(theme)
    with matplotlib.rc_context(t.rc):
        yield t


def new_figure(theme: "Theme | str | None" = None, figsize: tuple[float, float] = (6.4, 4.8),
               **kwargs: Any) -> "Figure":
    """A bare :class:`~matplotlib.figure.Figure` (no pyplot) in the theme's colors.

    It is a :class:`~tilelab.lab.figures.mpl_svg.ThemedFigure`: shown in a notebook, its
    colours of this theme become the page's ``--tl-*`` variables, so the chart follows a
    switch to the other theme without a re-run.

    Example:
        >>> new_figure("light", (3, 2)).get_size_inches().tolist()
        [3.0, 2.0]
        >>> new_figure("dark").tilelab_theme
        'dark'
    """
    from tilelab.lab.figures.mpl_svg import ThemedFigure

    t = get_theme(theme)
    kwargs.setdefault("layout", "constrained")
    fig = ThemedFigure(figsize=figsize, facecolor=t.background, edgecolor=t.background,
                       **kwargs)
    fig.tilelab_theme = t.name
    return fig


def owner_colors(n_blocks: int, theme: "Theme | str | None" = None) -> list[tuple]:
    """One RGBA color per block id ``0..n_blocks-1``.

    Up to the palette's length the colors are distinct categories; beyond it they run
    along the theme's colormap, so neighbouring block ids get neighbouring colors and the
    schedule's order shows as a gradient.

    Example:
        >>> many = owner_colors(300, "light")
        >>> len(owner_colors(4, "light")), len(many), many[0] != many[-1]
        (4, 300, True)
    """
    import matplotlib
    from matplotlib.colors import to_rgba

    t = get_theme(theme)
    n = max(int(n_blocks), 1)
    if n <= len(t.palette):
        return [to_rgba(t.palette[i]) for i in range(n)]
    cmap = matplotlib.colormaps[t.cmap]
    return [tuple(row) for row in cmap(np.linspace(0.08, 0.92, n)).tolist()]
