"""Light and dark looks for the lab's figures, and a guess at which one the notebook uses.

Why: a figure drawn black-on-white is unreadable in JupyterLab's dark theme and the other
way round, and the lab draws figures into tabs it does not style. So every drawing function
takes ``theme=`` (a :class:`Theme`, ``"light"``, ``"dark"`` or None) and None means
:func:`detect_theme`: ``$TILELAB_THEME``, else JupyterLab's saved theme setting, else light.

Figures are made with :func:`new_figure` (a bare :class:`matplotlib.figure.Figure`, not
pyplot), so they never touch pyplot's global state and render with any backend.

Example:
    >>> t = get_theme("dark")
    >>> t.name, t.rc["figure.facecolor"] == t.background
    ('dark', True)
"""
from __future__ import annotations

import json
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping

import numpy as np

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Theme", "LIGHT", "DARK", "light", "dark", "detect_theme", "get_theme",
           "themed", "new_figure", "owner_colors"]

_TAB20 = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
          "#7f7f7f", "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896",
          "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5")
# Owner colors leave out red and its light twin: red means "race" in every figure.
_OWNER_PALETTE = tuple(c for c in _TAB20 if c not in ("#d62728", "#ff9896"))


@dataclass(frozen=True)
class Theme:
    """Colors of one look. ``rc`` turns it into matplotlib rcParams.

    ``palette`` colors owners (up to its length; more blocks use the ``cmap`` colormap),
    ``gpu_colors`` the ceilings of each GPU key, ``point_colors`` the kernels on a
    roofline, ``race`` marks racy elements and ``highlight`` outlines the chosen block.

    Example:
        >>> LIGHT.gpu_color("h200") != DARK.gpu_color("h200")
        True
    """

    name: str
    background: str
    panel: str
    foreground: str
    muted: str
    grid: str
    empty: str
    highlight: str
    race: str
    race_read: str
    cmap: str
    palette: tuple[str, ...] = _OWNER_PALETTE
    gpu_colors: Mapping[str, str] = field(default_factory=dict)
    point_colors: tuple[str, ...] = ("#ff7f0e", "#e377c2", "#bcbd22", "#8c564b", "#17becf",
                                     "#7f7f7f")

    @property
    def rc(self) -> dict[str, Any]:
        """matplotlib rcParams for this look (use with :func:`themed`).

        Example:
            >>> LIGHT.rc["text.color"]
            '#1a1a1a'
        """
        fg, bg = self.foreground, self.background
        return {
            "figure.facecolor": bg, "figure.edgecolor": bg, "savefig.facecolor": bg,
            "savefig.edgecolor": bg, "axes.facecolor": self.panel, "axes.edgecolor": self.muted,
            "axes.labelcolor": fg, "axes.titlecolor": fg, "text.color": fg,
            "xtick.color": fg, "ytick.color": fg, "xtick.labelcolor": fg,
            "ytick.labelcolor": fg, "grid.color": self.grid, "grid.alpha": 0.6,
            "legend.facecolor": self.panel, "legend.edgecolor": self.muted,
            "legend.labelcolor": fg, "font.size": 9.0, "axes.titlesize": 10.0,
            "figure.titlesize": 11.0,
        }

    def gpu_color(self, key: str, index: int = 0) -> str:
        """The color of a GPU's ceilings (by spec key; unknown keys cycle the palette).

        Example:
            >>> LIGHT.gpu_color("current")
            '#d62728'
        """
        return self.gpu_colors.get(key) or self.palette[(index + 4) % len(self.palette)]


LIGHT = Theme("light", background="#ffffff", panel="#ffffff", foreground="#1a1a1a",
              muted="#6b6b6b", grid="#d0d0d0", empty="#eeeeee", highlight="#000000",
              race="#d62728", race_read="#ff7f0e", cmap="viridis",
              gpu_colors={"b200": "#2ca02c", "rtx5090": "#9467bd", "h200": "#1f77b4",
                          "h100": "#17becf", "a100": "#8c564b", "current": "#d62728"})
DARK = Theme("dark", background="#111111", panel="#1b1b1b", foreground="#e6e6e6",
             muted="#9a9a9a", grid="#3a3a3a", empty="#2b2b2b", highlight="#ffffff",
             race="#ff4d4d", race_read="#ffa64d", cmap="plasma",
             gpu_colors={"b200": "#7bd88f", "rtx5090": "#c39bff", "h200": "#6cb6ff",
                         "h100": "#5fe0ee", "a100": "#d2a679", "current": "#ff6b6b"},
             point_colors=("#ffb14e", "#ff8ad8", "#e0e05a", "#d2a679", "#5fe0ee", "#c0c0c0"))

#: rcParams of the light look (``matplotlib.rc_context(light)``)
light: dict[str, Any] = LIGHT.rc
#: rcParams of the dark look
dark: dict[str, Any] = DARK.rc

_THEMES = {"light": LIGHT, "dark": DARK}


def _jupyterlab_settings() -> list[Path]:
    """Where JupyterLab saves the chosen theme (the user's settings, newest layout first)."""
    roots = []
    env = os.environ.get("JUPYTERLAB_SETTINGS_DIR")
    if env:
        roots.append(Path(env))
    roots.append(Path(os.environ.get("JUPYTER_CONFIG_DIR", Path.home() / ".jupyter"))
                 / "lab" / "user-settings")
    name = Path("@jupyterlab") / "apputils-extension" / "themes.jupyterlab-settings"
    return [r / name for r in roots]


def _theme_from_settings(path: Path) -> str | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    text = re.sub(r"^\s*//.*$", "", text, flags=re.M)  # the file is JSON with comments
    try:
        chosen = json.loads(text).get("theme", "")
    except (ValueError, AttributeError):
        m = re.search(r'"theme"\s*:\s*"([^"]*)"', text)
        chosen = m.group(1) if m else ""
    if not chosen:
        return None
    return "dark" if "dark" in chosen.lower() else "light"


def detect_theme() -> str:
    """``"light"`` or ``"dark"``: ``$TILELAB_THEME`` if set, else JupyterLab's saved theme.

    A kernel cannot ask the browser which theme it shows, so this reads what JupyterLab
    saved; set ``TILELAB_THEME=dark`` (or pass ``theme="dark"``) where that guess is wrong.

    Example:
        >>> detect_theme() in ("light", "dark")
        True
    """
    forced = os.environ.get("TILELAB_THEME", "").strip().lower()
    if forced in _THEMES:
        return forced
    for path in _jupyterlab_settings():
        found = _theme_from_settings(path)
        if found:
            return found
    return "light"


def get_theme(theme: "Theme | str | None" = None) -> Theme:
    """A :class:`Theme` from a theme, a name or None (detected).

    Example:
        >>> get_theme("light") is LIGHT
        True
    """
    if isinstance(theme, Theme):
        return theme
    if theme is None or theme == "auto":
        return _THEMES[detect_theme()]
    found = _THEMES.get(str(theme).lower())
    if found is None:
        raise ValueError(f"unknown theme {theme!r}; use 'light', 'dark', 'auto' or a Theme")
    return found


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

    Example:
        >>> new_figure("light", (3, 2)).get_size_inches().tolist()
        [3.0, 2.0]
    """
    from matplotlib.figure import Figure

    t = get_theme(theme)
    kwargs.setdefault("layout", "constrained")
    return Figure(figsize=figsize, facecolor=t.background, edgecolor=t.background, **kwargs)


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
