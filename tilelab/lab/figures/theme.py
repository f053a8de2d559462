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
           "themed", "new_figure", "owner_colors", "css_variables", "css_var", "theme_css"]

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
    from tilelab import config

    forced = config.theme()
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


# ------------------------------------------------------------------ CSS for the page side

_FIELDS = {"fg": "foreground", "bg": "background", "panel": "panel", "muted": "muted",
           "grid": "grid", "empty": "empty", "highlight": "highlight", "race": "race",
           "race-read": "race_read"}
#: "written by one block" in race pictures (a blue grey, neither owner nor race colour)
_WRITTEN = {"light": "#8fa9c4", "dark": "#4a6a8a"}


def css_variables(theme: "Theme | str | None" = "light") -> dict[str, str]:
    """The ``--tl-*`` custom properties of a look: what SVG figures colour themselves with.

    ``--tl-fg``/``--tl-bg``/``--tl-panel``/``--tl-muted``/``--tl-grid``/``--tl-empty``/
    ``--tl-highlight``/``--tl-race``/``--tl-race-read``/``--tl-written``, the owner palette
    ``--tl-c0`` ..., the roofline points ``--tl-p0`` ... and the GPUs ``--tl-gpu-<key>``.

    Example:
        >>> css_variables("dark")["--tl-race"], css_variables("light")["--tl-c0"]
        ('#ff4d4d', '#1f77b4')
    """
    t = get_theme(theme)
    out = {f"--tl-{k}": getattr(t, f) for k, f in _FIELDS.items()}
    out["--tl-written"] = _WRITTEN.get(t.name, _WRITTEN["light"])
    out.update({f"--tl-c{i}": c for i, c in enumerate(t.palette)})
    out.update({f"--tl-p{i}": c for i, c in enumerate(t.point_colors)})
    out.update({f"--tl-gpu-{k}": c for k, c in t.gpu_colors.items()})
    return out


def css_var(name: str, theme: "Theme | str | None" = "light") -> str:
    """``var(--tl-NAME, fallback)`` for a Theme field (``"foreground"``, ``"race"``),
    ``"palette:3"``, ``"point:2"`` or ``"gpu:h200"``; the fallback is that look's colour.

    Example:
        >>> css_var("race"), css_var("palette:1")
        ('var(--tl-race, #d62728)', 'var(--tl-c1, #ff7f0e)')
    """
    t = get_theme(theme)
    kind, _, rest = name.partition(":")
    if kind == "palette":
        key, value = f"--tl-c{int(rest) % len(t.palette)}", t.palette[int(rest) % len(t.palette)]
    elif kind == "point":
        i = int(rest) % len(t.point_colors)
        key, value = f"--tl-p{i}", t.point_colors[i]
    elif kind == "gpu":
        key, value = f"--tl-gpu-{rest}", t.gpu_color(rest)
    else:
        short = {f: k for k, f in _FIELDS.items()}.get(name)
        if short is None:
            raise ValueError(f"no CSS variable for {name!r}; use one of "
                             f"{', '.join(_FIELDS.values())}, palette:N, point:N or gpu:KEY")
        key, value = f"--tl-{short}", getattr(t, name)
    return f"var({key}, {value})"


#: variables that follow JupyterLab's own colours where its theme defines them
_FROM_JUPYTERLAB = {"--tl-fg": "--jp-content-font-color1", "--tl-bg": "--jp-layout-color0",
                    "--tl-panel": "--jp-layout-color0"}


def _block(selector: str, theme: Theme) -> str:
    values = css_variables(theme)
    for k, jp in _FROM_JUPYTERLAB.items():
        values[k] = f"var({jp}, {values[k]})"
    body = " ".join(f"{k}: {v};" for k, v in values.items())
    return f"{selector} {{ {body} }}"


def theme_css(scope: str = ".tilelab-view") -> str:
    """CSS that sets the ``--tl-*`` figure colours (and shows ``.tl-only-light`` or
    ``.tl-only-dark`` images) for the page's theme, with no script and no re-run.

    The dark look applies under an ancestor with ``data-jp-theme-light="false"``
    (JupyterLab, nbconvert's lab template), else when the browser prefers a dark scheme
    and no ancestor says ``data-jp-theme-light="true"``.

    Example:
        >>> css = theme_css()
        >>> '[data-jp-theme-light="false"] .tilelab-view' in css, "prefers-color-scheme" in css
        (True, True)
    """
    light = f'{scope}, [data-jp-theme-light="true"] {scope}'
    dark = f'[data-jp-theme-light="false"] {scope}'
    show = (f"{scope} .tl-only-dark {{ display: none; }} "
            f'[data-jp-theme-light="false"] {scope} .tl-only-dark {{ display: revert; }} '
            f'[data-jp-theme-light="false"] {scope} .tl-only-light {{ display: none; }}')
    auto_dark = f"body:not([data-jp-theme-light]) {scope}"
    auto_show = (f"body:not([data-jp-theme-light]) {scope} .tl-only-dark {{ display: revert; }} "
                 f"body:not([data-jp-theme-light]) {scope} .tl-only-light {{ display: none; }}")
    return (f"{_block(light, LIGHT)}\n{_block(dark, DARK)}\n{show}\n"
            f"@media (prefers-color-scheme: dark) {{ {_block(auto_dark, DARK)} {auto_show} }}\n")
