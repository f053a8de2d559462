"""A small SVG scene: the lab's figures, written as SVG text without matplotlib.

Why: a ``%%tile`` view shows an ownership diagram and a roofline in every warm cell, and
matplotlib spent most of such a cell's time drawing them. An SVG written directly is fast,
sharp at any size, and follows the page's theme: every colour is a CSS custom property
with the light look as its fallback (``var(--tl-fg, #1a1a1a)``; the page defines the
variables for light and dark, see :mod:`tilelab.lab.views.tabs`).

A :class:`Scene` is a list of primitives (rectangles, polylines, polygons, circles, text)
in pixel coordinates (y down), plus *records*: what each group of primitives means
(``gid`` and plain data, such as the owner grid a panel draws), for tests and views.
:meth:`Scene.to_svg` writes the SVG; :meth:`Scene.to_png` paints the same primitives with
matplotlib for the few places that need a PNG (``--save``, ``save_png``, notebook
outputs), resolving the colours for a light or dark theme.

Example:
    >>> s = Scene(120, 40)
    >>> s.rect(0, 0, 120, 40, fill=color("background"))
    >>> s.text(60, 24, "hello", size=12, anchor="middle")
    >>> svg = s.to_svg()
    >>> svg.startswith("<svg") and "var(--tl-fg, #1a1a1a)" in svg
    True
"""
from __future__ import annotations

import html
import io
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Sequence

__all__ = ["Scene", "SvgFigure", "Record", "color", "owner_fill", "resolve", "text_width", "FONT"]

#: the font stack of every text (the page's UI font, else sans-serif)
FONT = "var(--jp-ui-font-family, system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, " \
       "sans-serif)"

# theme field -> CSS variable (the page's contract: docs/lab.md, "Figures and themes")
_VARS = {"foreground": "fg", "background": "bg", "panel": "panel", "muted": "muted",
         "grid": "grid", "empty": "empty", "highlight": "highlight", "race": "race",
         "race_read": "race-read"}
_VAR_RE = re.compile(r"var\(--tl-([a-z0-9-]+),\s*([^)]+)\)")


def color(field_name: str) -> str:
    """The CSS colour of a theme field: ``"foreground"``, ``"race"``, ``"palette:3"`` (an
    owner colour), ``"point:2"`` (a roofline point), ``"gpu:h200"`` (a GPU's ceilings).
    The fallback is the light look, so pages without the variables look light.

    Example:
        >>> color("foreground"), color("palette:2")
        ('var(--tl-fg, #1a1a1a)', 'var(--tl-c2, #2ca02c)')
    """
    from tilelab.lab.figures.looks import LIGHT

    kind, _, arg = field_name.partition(":")
    if kind == "palette":
        i = int(arg) % len(LIGHT.palette)
        return f"var(--tl-c{i}, {LIGHT.palette[i]})"
    if kind == "point":
        i = int(arg) % len(LIGHT.point_colors)
        return f"var(--tl-p{i}, {LIGHT.point_colors[i]})"
    if kind == "gpu":
        return f"var(--tl-gpu-{arg}, {LIGHT.gpu_color(arg)})"
    if field_name not in _VARS:
        raise ValueError(f"unknown theme colour {field_name!r}; use one of {sorted(_VARS)}, "
                         "'palette:N', 'point:N' or 'gpu:KEY'")
    return f"var(--tl-{_VARS[field_name]}, {getattr(LIGHT, field_name)})"


def owner_fill(owner: int, num_blocks: int) -> str:
    """The fill of block ``owner``'s tiles: a palette colour (``--tl-c*``) while the blocks
    fit the palette, else a hue running with the block id (the same in both themes), so
    neighbouring ids get neighbouring colours and the schedule's order shows as a gradient.

    Example:
        >>> owner_fill(1, 4), owner_fill(0, 300)
        ('var(--tl-c1, #ff7f0e)', 'hsl(220, 60%, 55%)')
    """
    from tilelab.lab.figures.looks import LIGHT

    if num_blocks <= len(LIGHT.palette):
        return color(f"palette:{owner}")
    hue = (220 + 300 * owner / max(num_blocks - 1, 1)) % 360
    return f"hsl({hue:.0f}, 60%, 55%)"


def resolve(css: str, theme: Any = None) -> str:
    """A CSS colour made concrete for ``theme`` (for PNG output): ``var(--tl-x, fb)`` becomes
    the theme's value of that variable, ``hsl(...)`` a hex colour.

    Example:
        >>> resolve("var(--tl-fg, #1a1a1a)", "dark"), resolve("hsl(0, 100%, 50%)")
        ('#e6e6e6', '#ff0000')
    """
    from tilelab.lab.figures.looks import get_theme

    t = get_theme(theme or "light")
    m = _VAR_RE.fullmatch(css.strip())
    if m:
        name, fallback = m.group(1), m.group(2).strip()
        back = {v: k for k, v in _VARS.items()}
        if name in back:
            return getattr(t, back[name])
        if name[0] in "cp" and name[1:].isdigit():
            seq = t.palette if name[0] == "c" else t.point_colors
            return seq[int(name[1:]) % len(seq)]
        if name.startswith("gpu-"):
            return t.gpu_color(name[4:])
        return fallback
    h = re.fullmatch(r"hsl\(([\d.]+),\s*([\d.]+)%,\s*([\d.]+)%\)", css.strip())
    if h:
        import colorsys

        r, g, b = colorsys.hls_to_rgb(float(h.group(1)) / 360, float(h.group(3)) / 100,
                                      float(h.group(2)) / 100)
        return "#%02x%02x%02x" % (round(r * 255), round(g * 255), round(b * 255))
    return css


def text_width(text: str, size: float) -> float:
    """Estimated width in px of ``text`` at font size ``size`` px (sans-serif; digits and
    lower case about 0.55 em, capitals and wide glyphs more). Used for layout and for the
    collision checks of labels, so it errs on the wide side.

    Example:
        >>> 30 < text_width("gemm 4096", 10) < 60
        True
    """
    wide = sum(1 for c in text if c.isupper() or c in "mwMW%@")
    narrow = sum(1 for c in text if c in "il.,:;|!'() ")
    return size * (0.58 * len(text) + 0.2 * wide - 0.25 * narrow)


@dataclass
class Record:
    """What a group of primitives means: its ``gid`` and plain data (for tests, views).

    Example:
        >>> Record("tiles:z", {"owners": [[0, 1]]}).data["owners"]
        [[0, 1]]
    """

    gid: str
    data: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.data[key]


def _num(v: float) -> str:
    return f"{v:.2f}".rstrip("0").rstrip(".")


class Scene:
    """Primitives in px (y down) on a ``width`` × ``height`` canvas, and their records.

    Example:
        >>> s = Scene(10, 10)
        >>> _ = s.record("dot", x=5)
        >>> s.circle(5, 5, 2, fill=color("race"), gid="dot")
        >>> [r.gid for r in s.find("dot")], s.find("dot")[0]["x"]
        (['dot'], 5)
    """

    def __init__(self, width: float, height: float, *, title: str = "") -> None:
        self.width, self.height, self.title = float(width), float(height), title
        self.items: list[tuple[str, dict[str, Any]]] = []
        self.records: list[Record] = []
        self.prefix = "tl" + uuid.uuid4().hex[:8]

    # ------------------------------------------------------------------ primitives
    def rect(self, x: float, y: float, w: float, h: float, *, fill: str = "none",
             stroke: str | None = None, width: float = 1.0, hatch: bool = False,
             gid: str | None = None, tip: str | None = None, opacity: float = 1.0) -> None:
        """A rectangle; ``hatch`` draws diagonal hatching over the fill; ``tip`` a tooltip."""
        self.items.append(("rect", dict(x=x, y=y, w=w, h=h, fill=fill, stroke=stroke,
                                        sw=width, hatch=hatch, gid=gid, tip=tip,
                                        opacity=opacity)))

    def line(self, points: Sequence[tuple[float, float]], *, stroke: str, width: float = 1.0,
             dash: Sequence[float] | None = None, gid: str | None = None,
             opacity: float = 1.0) -> None:
        """A polyline through ``points``; ``dash`` an SVG dash pattern in px."""
        self.items.append(("line", dict(pts=[(float(a), float(b)) for a, b in points],
                                        stroke=stroke, sw=width, dash=dash, gid=gid,
                                        opacity=opacity)))

    def polygon(self, points: Sequence[tuple[float, float]], *, fill: str,
                stroke: str | None = None, width: float = 1.0, gid: str | None = None,
                opacity: float = 1.0, tip: str | None = None) -> None:
        """A closed polygon (markers: diamonds, squares, triangles)."""
        self.items.append(("polygon", dict(pts=[(float(a), float(b)) for a, b in points],
                                           fill=fill, stroke=stroke, sw=width, gid=gid,
                                           opacity=opacity, tip=tip)))

    def circle(self, x: float, y: float, r: float, *, fill: str = "none",
               stroke: str | None = None, width: float = 1.0, gid: str | None = None,
               tip: str | None = None) -> None:
        """A circle of radius ``r`` px."""
        self.items.append(("circle", dict(x=x, y=y, r=r, fill=fill, stroke=stroke, sw=width,
                                          gid=gid, tip=tip)))

    def text(self, x: float, y: float, text: str, *, size: float = 11.0,
             anchor: str = "start", fill: str | None = None, weight: str = "normal",
             halo: bool = False, gid: str | None = None, rotate: float = 0.0,
             tip: str | None = None) -> None:
        """One line of text with its baseline at ``y``; ``anchor`` start|middle|end;
        ``halo`` outlines it in the background colour (readable over any fill)."""
        self.items.append(("text", dict(x=x, y=y, s=text, size=size, anchor=anchor,
                                        fill=fill or color("foreground"), weight=weight,
                                        halo=halo, gid=gid, rotate=rotate, tip=tip)))

    def record(self, gid: str, **data: Any) -> Record:
        """Say what the primitives of ``gid`` mean (the data tests and views read)."""
        rec = Record(gid, dict(data))
        self.records.append(rec)
        return rec

    def find(self, prefix: str) -> list[Record]:
        """The records whose gid starts with ``prefix``, in drawing order."""
        return [r for r in self.records if r.gid.startswith(prefix)]

    def items_of(self, prefix: str) -> list[dict[str, Any]]:
        """The primitives whose gid starts with ``prefix`` (kind in ``"kind"``)."""
        return [dict(d, kind=k) for k, d in self.items if (d.get("gid") or "").startswith(prefix)]

    # ------------------------------------------------------------------ SVG
    def to_svg(self) -> str:
        """The scene as one ``<svg>`` element (1:1 px size, a viewBox, unique ids)."""
        w, h = _num(self.width), _num(self.height)
        hid = f"{self.prefix}-hatch"
        # text is drawn in the foreground colour unless it says otherwise: the root's fill
        # (every shape writes its own fill), so each text need not repeat it
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="tl-svg" width="{w}" '
               f'height="{h}" viewBox="0 0 {w} {h}" role="img" fill="{color("foreground")}" '
               f'style="font-family:{html.escape(FONT, quote=True)}">']
        if self.title:
            out.append(f"<title>{html.escape(self.title)}</title>")
        if any(k == "rect" and d["hatch"] for k, d in self.items):
            out.append(f'<defs><pattern id="{hid}" width="6" height="6" '
                       'patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
                       f'<line x1="0" y1="0" x2="0" y2="6" stroke="{color("muted")}" '
                       'stroke-width="1.6"/></pattern></defs>')
        for kind, d in self.items:
            out.append(getattr(self, f"_svg_{kind}")(d, hid))
        out.append("</svg>")
        return "".join(out)

    @staticmethod
    def _common(d: dict[str, Any]) -> str:
        parts = []
        if d.get("gid"):
            parts.append(f' data-gid="{html.escape(d["gid"], quote=True)}"')
        if d.get("opacity", 1.0) != 1.0:
            parts.append(f' opacity="{_num(d["opacity"])}"')
        return "".join(parts)

    @staticmethod
    def _stroke(d: dict[str, Any]) -> str:
        if not d.get("stroke"):
            return ""
        width = f' stroke-width="{_num(d["sw"])}"' if d["sw"] != 1 else ""   # 1: SVG's default
        return f' stroke="{d["stroke"]}"{width}'

    @staticmethod
    def _tip(d: dict[str, Any]) -> str:
        return f"<title>{html.escape(d['tip'])}</title>" if d.get("tip") else ""

    def _svg_rect(self, d: dict[str, Any], hid: str) -> str:
        geo = (f'x="{_num(d["x"])}" y="{_num(d["y"])}" width="{_num(d["w"])}" '
               f'height="{_num(d["h"])}"')
        tip = self._tip(d)
        body = (f'<rect {geo} fill="{d["fill"]}"{self._stroke(d)}{self._common(d)}'
                + (f">{tip}</rect>" if tip else "/>"))
        if d["hatch"]:
            body += f'<rect {geo} fill="url(#{hid})" pointer-events="none"/>'
        return body

    def _svg_line(self, d: dict[str, Any], hid: str) -> str:
        pts = " ".join(f"{_num(a)},{_num(b)}" for a, b in d["pts"])
        dash = f' stroke-dasharray="{" ".join(map(_num, d["dash"]))}"' if d["dash"] else ""
        width = f' stroke-width="{_num(d["sw"])}"' if d["sw"] != 1 else ""
        return (f'<polyline points="{pts}" fill="none" stroke="{d["stroke"]}"{width}{dash} '
                f'stroke-linejoin="round"{self._common(d)}/>')

    def _svg_polygon(self, d: dict[str, Any], hid: str) -> str:
        pts = " ".join(f"{_num(a)},{_num(b)}" for a, b in d["pts"])
        tip = self._tip(d)
        return (f'<polygon points="{pts}" fill="{d["fill"]}"{self._stroke(d)}'
                f'{self._common(d)}' + (f">{tip}</polygon>" if tip else "/>"))

    def _svg_circle(self, d: dict[str, Any], hid: str) -> str:
        tip = self._tip(d)
        return (f'<circle cx="{_num(d["x"])}" cy="{_num(d["y"])}" r="{_num(d["r"])}" '
                f'fill="{d["fill"]}"{self._stroke(d)}{self._common(d)}'
                + (f">{tip}</circle>" if tip else "/>"))

    def _svg_text(self, d: dict[str, Any], hid: str) -> str:
        attrs = f'x="{_num(d["x"])}" y="{_num(d["y"])}" font-size="{_num(d["size"])}"'
        if d["anchor"] != "start":                  # SVG's default
            attrs += f' text-anchor="{d["anchor"]}"'
        if d["fill"] != color("foreground"):        # the root's fill
            attrs += f' fill="{d["fill"]}"'
        if d["weight"] != "normal":
            attrs += f' font-weight="{d["weight"]}"'
        if d["halo"]:
            attrs += (f' stroke="{color("background")}" stroke-width="3" '
                      'paint-order="stroke" stroke-linejoin="round"')
        if d["rotate"]:
            attrs += f' transform="rotate({_num(d["rotate"])} {_num(d["x"])} {_num(d["y"])})"'
        return (f"<text {attrs}{self._common(d)}>{self._tip(d)}{html.escape(d['s'])}</text>")

    # ------------------------------------------------------------------ PNG
    def to_png(self, theme: Any = None, dpi: int = 100) -> bytes:
        """The same picture as a PNG (matplotlib's Agg), colours resolved for ``theme``.

        Only for outputs that cannot hold SVG; the lab's views embed :meth:`to_svg`.
        """
        from matplotlib.figure import Figure
        from matplotlib.patches import Circle, Polygon, Rectangle

        def c(value: str | None) -> str:
            return "none" if value in (None, "none") else resolve(value, theme)

        fig = Figure(figsize=(self.width / 100, self.height / 100), dpi=dpi)
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_xlim(0, self.width)
        ax.set_ylim(self.height, 0)
        ax.axis("off")
        pt = 72 / 100   # px -> points at 100 px per inch
        for kind, d in self.items:
            if kind == "rect":
                ax.add_patch(Rectangle((d["x"], d["y"]), d["w"], d["h"], facecolor=c(d["fill"]),
                                       edgecolor=c(d["stroke"]), lw=d["sw"] * pt,
                                       hatch="///" if d["hatch"] else None, alpha=d["opacity"]))
            elif kind == "line":
                xs, ys = zip(*d["pts"]) if d["pts"] else ((), ())
                (ln,) = ax.plot(xs, ys, color=c(d["stroke"]), lw=d["sw"] * pt,
                                alpha=d["opacity"])
                if d["dash"]:
                    ln.set_dashes([v / max(d["sw"], 0.5) for v in d["dash"]])
            elif kind == "polygon":
                ax.add_patch(Polygon(d["pts"], closed=True, facecolor=c(d["fill"]),
                                     edgecolor=c(d["stroke"]), lw=d["sw"] * pt,
                                     alpha=d["opacity"]))
            elif kind == "circle":
                ax.add_patch(Circle((d["x"], d["y"]), d["r"], facecolor=c(d["fill"]),
                                    edgecolor=c(d["stroke"]), lw=d["sw"] * pt))
            else:
                ax.text(d["x"], d["y"], d["s"], fontsize=d["size"] * pt, color=c(d["fill"]),
                        ha={"start": "left", "middle": "center", "end": "right"}[d["anchor"]],
                        va="baseline", rotation=-d["rotate"], rotation_mode="anchor",
                        fontweight=d["weight"])
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi, facecolor=resolve(color("background"), theme))
        return buf.getvalue()


class SvgFigure(Scene):
    """A finished figure: a :class:`Scene` with a title and what it drew (``tilelab``).

    Shows itself in notebooks as inline SVG that follows the page's light or dark theme
    (``_repr_svg_``/``_repr_png_`` give this figure's own theme, for other consumers), and
    saves as SVG or PNG by the file's suffix.

    Example:
        >>> f = SvgFigure(200, 80, title="t", theme="light")
        >>> f.get_size_inches().tolist(), f.suptitle
        ([2.0, 0.8], 't')
    """

    def __init__(self, width: float, height: float, *, title: str = "",
                 theme: Any = None) -> None:
        from tilelab.lab.figures.looks import get_theme

        super().__init__(width, height, title=title)
        self.theme = get_theme(theme)
        self.tilelab: dict[str, Any] = {}

    @property
    def suptitle(self) -> str:
        """The figure's title (what it shows, in one or two lines)."""
        return self.title

    def get_size_inches(self) -> Any:
        """Width and height in inches at 100 px per inch (as matplotlib's figures)."""
        import numpy as np

        return np.array([self.width / 100, self.height / 100])

    def get_facecolor(self) -> str:
        """The background colour of PNG output (matplotlib's name, for code written for
        matplotlib figures)."""
        return resolve(color("background"), self.theme)

    def svg_for(self, theme: Any = None) -> str:
        """The SVG with every colour made concrete for ``theme`` (for pages that do not
        define the ``--tl-*`` variables, such as a notebook's plain output)."""
        return _VAR_RE.sub(lambda m: resolve(m.group(0), theme or self.theme), self.to_svg())

    def _ipython_display_(self) -> None:
        """Shown in a notebook as one themed HTML output (:mod:`tilelab.lab.figures.output`):
        the SVG with the page's colour variables, so it follows a theme switch without a
        re-run; no PNG is stored beside it."""
        from tilelab.lab.figures.output import publish

        publish(self.to_svg(), f"<figure: {self.title}>" if self.title else "<figure>")

    def _repr_svg_(self) -> str:
        return self.svg_for(self.theme)

    def _repr_png_(self) -> bytes:
        return self.to_png(self.theme)

    def savefig(self, fname: Any, format: str | None = None, dpi: int = 100,
                **_ignored: Any) -> None:
        """Write the figure as ``svg`` or ``png`` (default: the file name's suffix, else
        PNG), like matplotlib's ``Figure.savefig``."""
        fmt = (format or str(getattr(fname, "name", fname)).rsplit(".", 1)[-1]).lower()
        if fmt not in ("svg", "png"):
            fmt = "png"
        data = (self.svg_for(self.theme).encode() if fmt == "svg"
                else self.to_png(self.theme, dpi=dpi))
        if hasattr(fname, "write"):
            fname.write(data)
        else:
            with open(fname, "wb") as fh:
                fh.write(data)
