"""The tabbed result of a ``%%tile`` cell: ipywidgets tabs, and static HTML tabs.

Why: in JupyterLab a widget ``Tab`` is the natural control, but a notebook read later
(nbconvert, GitHub, an nbclient run) has no kernel behind its widgets, and renderers pick
the widget over any HTML in the same output. So a :class:`TileView` publishes the
self-contained HTML page (tabs are radio buttons and CSS, figures inline, no script, no
network) as an output of its own and, with a widget frontend, the widget as a second
output; CSS hides the static copy where the widget rendered. Both are built from the same
:class:`~tilelab.lab.views.panels.Panel` s. Colours use JupyterLab's theme variables
(``--jp-layout-color0``, ...) and the figure colours of
:func:`tilelab.lab.figures.theme.theme_css` (light or dark from ``data-jp-theme-light`` or
``prefers-color-scheme``); the layout fits narrow outputs (tab labels wrap, code scrolls
sideways). Without any CSS (GitHub strips it) the panels appear one after another under
their titles.

Example:
    >>> from tilelab.lab.views.panels import Panel
    >>> v = TileView([Panel("ptx", "PTX", "<pre>.version 9.4</pre>", ".version 9.4")], "In[1]")
    >>> "PTX" in v.to_html() and 'type="radio"' in v.to_html()
    True
"""
from __future__ import annotations

import html
import uuid
from typing import Any, Sequence

from tilelab.lab.figures.theme import theme_css
from tilelab.lab.report.options import VIEW_MODES
from tilelab.lab.views.highlight import CSS as TOKEN_CSS
from tilelab.lab.views.panels import Panel
from tilelab.lab.views.safety_view import CSS as SAFETY_CSS

__all__ = ["CSS", "HIDE_STATIC", "TileView", "widget_frontend"]

CSS = """
.tilelab-view {
  --tl-dim: var(--jp-content-font-color2, rgba(127,127,127,.95));
  --tl-bg2: var(--jp-layout-color1, rgba(127,127,127,.06));
  --tl-border: var(--jp-border-color2, rgba(127,127,127,.35));
  --tl-accent: var(--jp-brand-color1, #1976d2);
  --tl-hover: var(--jp-layout-color3, rgba(127,127,127,.25));
  --tl-target: var(--jp-warn-color3, rgba(255,193,7,.3));
  color: var(--tl-fg); background: var(--tl-bg);
  font-family: var(--jp-ui-font-family, system-ui, sans-serif); font-size: 13px;
  margin: 4px 0; max-width: 100%; min-width: 0; box-sizing: border-box; line-height: 1.4;
}
.tilelab-view p { margin: 4px 0; }
.tilelab-view *, .tilelab-view *::before, .tilelab-view *::after { box-sizing: border-box; }
.tilelab-view .tl-head { margin: 2px 0 6px; overflow-wrap: anywhere; }
.tilelab-view .tl-head code, .tilelab-view h4 code { font-weight: 600; }
.tilelab-view .tl-dim, .tilelab-view .tl-note { color: var(--tl-dim); }
.tilelab-view .tl-note { margin: 4px 0; font-size: 12px; overflow-wrap: anywhere; }
.tilelab-view .tl-tabs { display: flex; flex-wrap: wrap; align-items: flex-end; }
.tilelab-view .tl-tabs > input { position: absolute; opacity: 0; pointer-events: none; }
.tilelab-view .tl-tabs > label {
  flex: 0 0 auto; padding: 4px 10px; margin: 2px 2px -1px 0; cursor: pointer;
  white-space: nowrap; border: 1px solid var(--tl-border); border-bottom: none;
  border-radius: 4px 4px 0 0; background: var(--tl-bg2); color: var(--tl-dim);
}
.tilelab-view .tl-tabs > input:checked + label {
  background: var(--tl-bg); color: var(--tl-fg); border-top: 2px solid var(--tl-accent);
}
.tilelab-view .tl-tabs > input:focus-visible + label { outline: 2px solid var(--tl-accent); }
.tilelab-view .tl-tabs > .tl-panel {
  display: none; flex: 0 0 100%; max-width: 100%; min-width: 0; overflow-x: auto;
  border: 1px solid var(--tl-border); padding: 8px; background: var(--tl-bg);
}
.tilelab-view .tl-tabs > .tl-panel > .tl-panel-title { display: none; }
.tilelab-view .tl-widget-panel > .tl-panel-title { display: none; }
.tilelab-view .tl-widget-panel { max-width: 100%; overflow-x: auto; }
.tilelab-view h4 { margin: 6px 0; font-size: 13px; font-weight: normal; overflow-wrap: anywhere; }
.tilelab-view section.tl-kernel + section.tl-kernel { border-top: 1px solid var(--tl-border);
  margin-top: 10px; padding-top: 6px; }
.tilelab-view pre.tl-code, .tilelab-view pre.tl-error {
  font-family: var(--jp-code-font-family, ui-monospace, SFMono-Regular, Menlo, monospace);
  font-size: 12px; line-height: 1.45; margin: 0; padding: 4px 0; overflow: auto;
  white-space: pre; word-break: normal; overflow-wrap: normal; max-width: 100%;
  max-height: 36em; background: var(--tl-bg2); color: var(--tl-fg); border-radius: 3px;
}
.tilelab-view pre.tl-error { color: var(--jp-error-color1, #d32f2f); padding: 6px 8px;
  white-space: pre-wrap; overflow-wrap: anywhere; }
.tilelab-view .tl-row { display: inline-block; min-width: 100%;
  border-left: 3px solid transparent; padding-right: 8px; }
.tilelab-view .tl-row:target { background: var(--tl-target); }
.tilelab-view .tl-gap { color: var(--tl-dim); padding-left: 3.5em; }
.tilelab-view .tl-ln { display: inline-block; width: 3em; margin-right: .4em; text-align: right;
  color: var(--tl-dim); text-decoration: none; user-select: none; }
.tilelab-view .tl-ln-wide { width: auto; min-width: 3em; }
.tilelab-view a.tl-ln:hover { color: var(--tl-accent); text-decoration: underline; }
.tilelab-view .tl-pair-box { container-type: inline-size; }
.tilelab-view .tl-pair { display: flex; gap: 8px; align-items: flex-start; }
.tilelab-view .tl-col { min-width: 0; }
.tilelab-view .tl-col-src { flex: 0 0 auto; font-size: 12px;
  font-family: var(--jp-code-font-family, ui-monospace, SFMono-Regular, Menlo, monospace);
  width: min(50%, calc((var(--tl-src-ch, 60) + 1) * 1ch + 3.4em + 30px)); }
.tilelab-view .tl-col-ir { flex: 1 1 0; }
@container (max-width: 779px) {
  .tilelab-view .tl-pair { flex-direction: column; align-items: stretch; }
  .tilelab-view .tl-col-src { width: auto; } }
.tilelab-view .tl-col-head { color: var(--tl-dim); font-size: 12px; margin: 0 0 2px;
  overflow-wrap: anywhere; font-family: var(--jp-ui-font-family, system-ui, sans-serif); }
.tilelab-view .tl-jump { display: none; position: sticky; right: 2px; margin-left: 1.5em;
  padding: 0 5px; border-radius: 8px; font-size: 11px; text-decoration: none;
  color: var(--tl-fg); background: var(--tl-panel, var(--tl-bg));
  border: 1px solid var(--tl-accent); }
.tilelab-view .tl-row:hover > .tl-jump { display: inline-block; }
.tilelab-view .tl-aux { opacity: .6; }
.tilelab-view .tl-fold > summary { white-space: normal; padding-left: .5em; }
.tilelab-view .tl-occ { margin: 6px 0 2px; }
.tilelab-view table.tl-occupancy tr.tl-limit td { font-weight: 600; }
.tilelab-view table.tl-table { border-collapse: collapse; font-size: 12px; margin: 6px 0;
  color: var(--tl-fg); background: transparent; max-width: 100%; }
.tilelab-view table.tl-table th, .tilelab-view table.tl-table td {
  border: 1px solid var(--tl-border); padding: 2px 8px; text-align: right; }
.tilelab-view table.tl-table th { background: var(--tl-bg2); white-space: nowrap; }
.tilelab-view table.tl-table td:first-child, .tilelab-view table.tl-table th:first-child,
.tilelab-view table.tl-table td.tl-left { text-align: left; }
.tilelab-view table.tl-races th { text-align: left; }
.tilelab-view table.tl-table td.tl-launch { overflow-wrap: anywhere; min-width: 12em;
  text-align: left; }
.tilelab-view table.tl-table tr.tl-more > td { text-align: left; border-top: none;
  background: var(--tl-bg2); }
.tilelab-view details > summary { cursor: pointer; color: var(--tl-dim); }
.tilelab-view details dl { display: grid; grid-template-columns: max-content 1fr;
  gap: 0 12px; margin: 4px 0; }
.tilelab-view details dt { color: var(--tl-dim); white-space: nowrap; }
.tilelab-view details dd { margin: 0; overflow-wrap: anywhere; }
.tilelab-view figure.tl-figure { margin: 6px 0; max-width: 100%; overflow-x: auto; }
.tilelab-view figure.tl-figure img, .tilelab-view figure.tl-figure svg {
  max-width: 100%; height: auto; display: block; }
.tilelab-view figcaption { color: var(--tl-dim); font-size: 12px; overflow-wrap: anywhere; }
.tilelab-view ul.tl-notes { margin: 4px 0; padding-left: 18px; color: var(--tl-dim);
  font-size: 12px; overflow-wrap: anywhere; }
.tilelab-view .tl-picker { display: flex; flex-wrap: wrap; gap: 2px 6px; }
.tilelab-view .tl-picker > input { position: absolute; opacity: 0; pointer-events: none; }
.tilelab-view .tl-picker > label { cursor: pointer; padding: 2px 8px; border-radius: 10px;
  border: 1px solid var(--tl-border); color: var(--tl-dim); font-size: 12px; }
.tilelab-view .tl-picker > input:checked + label { color: var(--tl-fg);
  border-color: var(--tl-accent); background: var(--tl-bg2); }
.tilelab-view .tl-picker > .tl-pick { display: none; flex: 0 0 100%; min-width: 0; }
.tilelab-widget-tabs .lm-TabBar-content { flex-wrap: wrap; }
.tilelab-widget-tabs .lm-TabBar { min-height: fit-content; height: auto !important; }
.tilelab-widget-tabs .lm-TabBar-tab { flex: 0 0 auto !important; min-width: fit-content !important;
  max-width: none !important; }
.tilelab-widget-tabs .widget-html-content { min-width: 0; max-width: 100%; }
"""
"""Layout and theme CSS of a view (token colours: :data:`tilelab.lab.views.highlight.CSS`)."""

#: the static copy of a view hides where the widget published after it rendered (JupyterLab,
#: an exported page online); where it did not (offline, GitHub) the static copy shows
HIDE_STATIC = (".jp-OutputArea-child:has(.tilelab-static):has(+ .jp-OutputArea-child "
               ".tilelab-view) { display: none; }")
CSS += HIDE_STATIC + "\n"


def widget_frontend(shell: Any = None) -> bool:
    """Whether to publish ipywidgets: a kernel (not a terminal) with ipywidgets importable.

    A kernel cannot see its frontend, so this is a guess; ``$TILELAB_LAB_VIEW=html``
    (or ``%%tile --view html``) turns widgets off where they do not render.

    Example:
        >>> widget_frontend(None)
        False
    """
    if shell is None or type(shell).__name__ != "ZMQInteractiveShell":
        return False
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return getattr(shell, "kernel", None) is not None


class TileView:
    """The tabbed result of a cell: panels, a header line and notes.

    :meth:`to_html` is the static page, :meth:`to_widget` the ipywidgets version,
    :meth:`to_text` a plain-text summary; displaying the object publishes all that apply
    (``mode``: one of :data:`~tilelab.lab.report.options.VIEW_MODES`).

    Example:
        >>> from tilelab.lab.views.panels import Panel
        >>> v = TileView([Panel("timings", "Timings", "<p>t</p>", "t")], "In[4]: 1 kernel")
        >>> print(v.to_text())
        In[4]: 1 kernel
        <BLANKLINE>
        == Timings ==
        t
    """

    def __init__(self, panels: Sequence[Panel], header: str, notes: Sequence[str] = (),
                 *, mode: str = "auto", shell: Any = None, text_views: Sequence[str] | None
                 = ("race", "timings", "roofline", "ownership"), report: Any = None):
        if mode not in VIEW_MODES:
            raise ValueError(f"view mode must be one of {', '.join(VIEW_MODES)}, got {mode!r}")
        self.panels = list(panels)
        self.header = header
        self.notes = list(notes)
        self.mode = mode
        self.shell = shell
        self.text_views = text_views
        #: the :class:`~tilelab.lab.report.cell_report.CellReport` the panels were built
        #: from, if any
        self.report = report
        self.uid = f"tilelab-view-{uuid.uuid4().hex[:12]}"  # unique in any saved page
        self._widgets: dict[bool, Any] = {}   # styled or not -> the widget

    # ------------------------------------------------------------------ pieces
    def _head_html(self) -> str:
        notes = ""
        if self.notes:
            notes = '<ul class="tl-notes">' + "".join(
                f"<li>{html.escape(n)}</li>" for n in self.notes) + "</ul>"
        return f'<div class="tl-head">%%tile · {html.escape(self.header)}</div>{notes}'

    @staticmethod
    def _style() -> str:
        return f"<style>{theme_css()}{CSS}{TOKEN_CSS}{SAFETY_CSS}</style>"

    def to_html(self) -> str:
        """The static page: radio-button tabs, pure HTML and CSS (no script, no kernel).

        Example:
            >>> from tilelab.lab.views.panels import Panel
            >>> page = TileView([Panel("ptx", "PTX", "<b>x</b>", "x")], "h").to_html()
            >>> page.count('class="tl-panel-title"'), page.count('type="radio"')
            (1, 1)
        """
        group = self.uid
        inputs, panels = [], []
        for i, p in enumerate(self.panels):
            pid = f"{group}-{i}"
            checked = " checked" if i == 0 else ""
            inputs.append(f'<input type="radio" name="{group}" id="{pid}"{checked}>'
                          f'<label for="{pid}">{html.escape(p.title)}</label>')
            panels.append(f'<div class="tl-panel" data-view="{p.key}">'
                          f'<h3 class="tl-panel-title">{html.escape(p.title)}</h3>{p.html}</div>')
        show = "".join(f"#{group}-{i}:checked ~ .tl-panel:nth-of-type({i + 1}) "
                       "{ display: block; }" for i in range(len(self.panels)))
        return (f'<div class="tilelab-view tilelab-static" id="{group}">{self._style()}'
                f'<style>{show}</style>'
                f'{self._head_html()}<div class="tl-tabs">{"".join(inputs)}{"".join(panels)}'
                "</div></div>")

    def to_widget(self, styled: bool = True) -> Any:
        """An ipywidgets ``VBox``: the header and a ``Tab`` with one ``HTML`` per panel
        (the header alone for a view without panels: an empty ``Tab`` is a bare strip).

        ``styled=False`` leaves the view's CSS out of the widget: displaying a view
        publishes the static page first, whose ``<style>`` styles the whole page (also
        while the static copy is hidden), so the widget need not store it a second time.

        Example:
            >>> from tilelab.lab.views.panels import Panel
            >>> w = TileView([Panel("ptx", "PTX", "<b>x</b>", "x")], "h").to_widget()
            >>> w.children[1].titles, "<style>" in w.children[0].value
            (('PTX',), True)
        """
        if styled in self._widgets:
            return self._widgets[styled]
        import ipywidgets as widgets

        style = self._style() if styled else ""
        head = widgets.HTML(f'<div class="tilelab-view">{style}{self._head_html()}</div>')
        if not self.panels:
            self._widgets[styled] = widgets.VBox([head])
            return self._widgets[styled]
        children = [widgets.HTML(f'<div class="tilelab-view"><div class="tl-widget-panel">'
                                 f'<h3 class="tl-panel-title">{html.escape(p.title)}</h3>'
                                 f"{p.html}</div></div>") for p in self.panels]
        tab = widgets.Tab(children=children)
        tab.add_class("tilelab-widget-tabs")  # CSS above: labels wrap instead of being cut
        tab.titles = tuple(p.title for p in self.panels)
        self._widgets[styled] = widgets.VBox([head, tab])
        return self._widgets[styled]

    def to_text(self) -> str:
        """A plain-text summary: the header, notes and the text of the summary views
        (race, timings, roofline, ownership); listings are left to the tabs.

        Example:
            >>> from tilelab.lab.views.panels import Panel
            >>> TileView([Panel("ptx", "PTX", "", ".version")], "h", ["n"]).to_text()
            'h\\nnote: n'
        """
        parts = [self.header]
        parts += [f"note: {n}" for n in self.notes]
        for p in self.panels:
            if self.text_views is None or p.key in self.text_views:
                parts.append(f"\n== {p.title} ==\n{p.text}")
        return "\n".join(parts)

    def panel(self, key: str) -> Panel:
        """The panel of a view key (``'tileir'``, ``'timings'``, ...).

        Example:
            >>> from tilelab.lab.views.panels import Panel
            >>> TileView([Panel("ptx", "PTX", "", "")], "h").panel("ptx").title
            'PTX'
        """
        for p in self.panels:
            if p.key == key:
                return p
        raise KeyError(f"no {key!r} tab in this view (tabs: "
                       f"{', '.join(p.key for p in self.panels)})")

    def use_widget(self) -> bool:
        """Whether displaying publishes the widget too (mode and frontend). A view
        without panels (a ``%%tile`` cell with no kernel: a header and a note) never
        does: the static page says all of it, and a widget would add an empty ``Tab``.

        Example:
            >>> from tilelab.lab.views.panels import Panel
            >>> one = [Panel("ptx", "PTX", "x", "x")]
            >>> TileView(one, "h", mode="widget").use_widget(), TileView(one, "h").use_widget()
            (True, False)
            >>> TileView([], "h", ["no kernel"], mode="widget").use_widget()
            False
        """
        if not self.panels or self.mode == "html":
            return False
        if self.mode == "widget":
            return True
        return widget_frontend(self.shell)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict:
        data = {"text/plain": self.to_text(), "text/html": self.to_html()}
        if self.use_widget():
            bundle = self.to_widget()._repr_mimebundle_()
            key = "application/vnd.jupyter.widget-view+json"
            if key in bundle:
                data[key] = bundle[key]
        return data

    def bundles(self) -> list[dict]:
        """The MIME bundles displaying the view publishes, one output each.

        The static page always has an output of its own: nbconvert, GitHub and any
        renderer without widget JavaScript prefer a widget MIME type to ``text/html`` in the
        same bundle and would show nothing offline. With a widget frontend a second output
        holds the widget, and CSS hides the static copy wherever the widget rendered. The
        widget carries no CSS of its own: the static page's styles the whole page.

        Example:
            >>> from tilelab.lab.views.panels import Panel
            >>> [sorted(b) for b in TileView([Panel("ptx", "PTX", "x", "x")], "h").bundles()]
            [['text/html', 'text/plain']]
        """
        static = {"text/plain": self.to_text(), "text/html": self.to_html()}
        if not self.use_widget():
            return [static]
        key = "application/vnd.jupyter.widget-view+json"
        bundle = self.to_widget(styled=False)._repr_mimebundle_()   # the static page's CSS
        if key not in bundle:
            return [static]
        return [static, {key: bundle[key]}]  # its text would repeat the static summary

    def _ipython_display_(self) -> None:
        from IPython.display import display

        for bundle in self.bundles():
            display(bundle, raw=True)

    def __repr__(self) -> str:
        return f"<TileView {self.header!r}: {', '.join(p.title for p in self.panels)}>"
