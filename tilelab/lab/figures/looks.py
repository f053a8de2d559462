"""The lab's two looks, light and dark, and the CSS variables that carry them to a page.

Why: a figure drawn black-on-white is unreadable in JupyterLab's dark theme and the other
way round. The lab's figures are SVG coloured by the page's ``--tl-*`` custom properties
(:func:`css_var`), with the light colour as each one's fallback, and every output that
holds a figure carries :func:`theme_css`, which gives the variables their light or dark
values from the page's theme (JupyterLab's ``data-jp-theme-light``, else the browser's
``prefers-color-scheme``) — so a theme switch recolours them without a re-run. The two
:class:`Theme` values here are also what PNG output and matplotlib charts are drawn with
(:mod:`tilelab.lab.figures.theme`), and :func:`detect_theme` guesses which one a kernel's
notebook shows (for pictures that must be concrete, such as PNG files).

This is the bottom of the figures wing: it imports no other module of the lab.

Example:
    >>> get_theme("dark").name, css_var("foreground")
    ('dark', 'var(--tl-fg, #1a1a1a)')
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

__all__ = ["Theme", "LIGHT", "DARK", "detect_theme", "get_theme", "css_variables", "css_var",
           "theme_css", "colour_variables"]

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


def _values(theme: Theme, names: "frozenset[str] | None") -> dict[str, str]:
    values = css_variables(theme)
    for k, jp in _FROM_JUPYTERLAB.items():
        values[k] = f"var({jp}, {values[k]})"
    return {k: v for k, v in values.items() if names is None or k in names}


def _block(selector: str, values: Mapping[str, str]) -> str:
    body = " ".join(f"{k}: {v};" for k, v in values.items())
    return f"{selector} {{ {body} }}"


def theme_css(scope: str = ".tilelab-view", names: "Iterable[str] | None" = None) -> str:
    """CSS that sets the ``--tl-*`` figure colours (and shows ``.tl-only-light`` or
    ``.tl-only-dark`` images) for the page's theme, with no script and no re-run.

    The dark look applies under an ancestor with ``data-jp-theme-light="false"``
    (JupyterLab, nbconvert's lab template), else when the browser prefers a dark scheme
    and no ancestor says ``data-jp-theme-light="true"``. The dark rules repeat only the
    variables whose dark colour differs (the owner palette is the same in both looks);
    ``names`` keeps only the variables a figure uses (the CSS of one plain-cell figure).

    Example:
        >>> css = theme_css()
        >>> '[data-jp-theme-light="false"] .tilelab-view' in css, "prefers-color-scheme" in css
        (True, True)
        >>> theme_css(".f", ["--tl-fg"]).count("--tl-fg:")
        3
    """
    keep = None if names is None else frozenset(names)
    light_values = _values(LIGHT, keep)
    dark_values = {k: v for k, v in _values(DARK, keep).items() if light_values.get(k) != v}
    light = f'{scope}, [data-jp-theme-light="true"] {scope}'
    dark = f'[data-jp-theme-light="false"] {scope}'
    auto_dark = f"body:not([data-jp-theme-light]) {scope}"
    out = [_block(light, light_values)]
    if dark_values:
        out.append(_block(dark, dark_values))
    show = (f"{scope} .tl-only-dark {{ display: none; }} "
            f'[data-jp-theme-light="false"] {scope} .tl-only-dark {{ display: revert; }} '
            f'[data-jp-theme-light="false"] {scope} .tl-only-light {{ display: none; }}')
    auto_show = (f"body:not([data-jp-theme-light]) {scope} .tl-only-dark {{ display: revert; }} "
                 f"body:not([data-jp-theme-light]) {scope} .tl-only-light {{ display: none; }}")
    if names is None:
        out.append(show)
    media = (_block(auto_dark, dark_values) + " " if dark_values else "") + \
        (auto_show if names is None else "")
    if media:
        out.append(f"@media (prefers-color-scheme: dark) {{ {media.strip()} }}")
    return "\n".join(out) + "\n"


def colour_variables(theme: "Theme | str | None" = "light") -> dict[str, str]:
    """``#rrggbb`` of a look -> ``var(--tl-NAME, light colour)``: how a picture drawn in
    that look's concrete colours (a matplotlib chart) is made to follow the page's theme.

    Where one colour serves two roles the first wins, in this order: text, background,
    plot area, secondary text, grid, empty cells, highlight (black in the light look, so
    matplotlib's black defaults turn white in the dark one; black is the highlight in a
    picture drawn in the dark look too), races, the owner palette, the roofline points,
    the GPUs.

    Example:
        >>> colour_variables("light")["#1a1a1a"], colour_variables("dark")["#e6e6e6"]
        ('var(--tl-fg, #1a1a1a)', 'var(--tl-fg, #1a1a1a)')
        >>> colour_variables("light")["#ffffff"], colour_variables("dark")["#000000"]
        ('var(--tl-bg, #ffffff)', 'var(--tl-highlight, #000000)')
    """
    t = get_theme(theme)
    mine, light = css_variables(t), css_variables(LIGHT)
    out: dict[str, str] = {}
    for name, value in mine.items():
        out.setdefault(value.lower(), f"var({name}, {light[name]})")
    # black that no look chose (matplotlib's defaults: hatches, box edges) reads as the
    # light look's black in both: the highlight, white on a dark page
    out.setdefault("#000000", f"var(--tl-highlight, {light['--tl-highlight']})")
    return out
