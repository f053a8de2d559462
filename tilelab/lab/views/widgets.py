"""Sliders for tile and problem sizes that re-run a kernel and move its roofline point.

Why: "what does a bigger tile do?" is best answered by trying it. :func:`explore` builds an
ipywidgets panel: move the tile or problem size and the kernel runs again — on the CPU
interpreter (a sample of the blocks, counted bytes and FLOPs, time predicted for an H200)
or on the GPU (timed with :func:`tilelab.bench`, bytes and FLOPs counted by the
interpreter on a sample) — and the roofline point and the ownership picture are redrawn.

The panel is an ordinary widget and works without a frontend: its state (``point``,
``trace``, ``history``, the figures) is plain Python, so tests and scripts drive it by
setting ``explorer.tile_slider.value``.

Example:
    >>> import tilelab as tl
    >>> from tilelab.kernels.examples import vector_add
    >>> def make_args(tile, n):
    ...     x = tl.ones(n, device="cpu")
    ...     return (tl.empty(n, device="cpu").partition(tile), x, x)
    >>> ex = explore(vector_add, make_args, tile_sizes=(64, 128), problem_sizes=(1024,),
    ...              backend="cpu", theme="light")
    >>> ex.tile_slider.value = 128
    >>> ex.runs, ex.point.name
    (2, 'vector_add tile=128 n=1024')
"""
from __future__ import annotations

import io
import time
from typing import Any, Callable, Sequence

import ipywidgets as widgets

from tilelab.lab.figures.theme import Theme

__all__ = ["Explorer", "explore", "figure_html", "figure_png"]


def figure_png(fig: Any, dpi: int = 80) -> bytes:
    """A figure as PNG bytes (for files and outputs that cannot hold SVG).

    Example:
        >>> from tilelab.lab.figures.theme import new_figure
        >>> figure_png(new_figure("light", (1, 1)))[:4] == b"\\x89PNG"
        True
    """
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, facecolor=fig.get_facecolor())
    return buf.getvalue()


_FIGURE_CSS = (".tilelab-view.tl-explorer-figure { margin: 0; background: transparent; } "
               ".tl-explorer-figure svg { max-width: 100%; height: auto; display: block; }")


def _svg(fig: Any) -> str:
    """Inline SVG coloured by the page's ``--tl-*`` variables: an SVG figure's own, or a
    matplotlib figure's with its theme colours made variables."""
    if hasattr(fig, "to_svg"):
        return fig.to_svg()
    from tilelab.lab.figures.mpl_svg import themed_svg

    return themed_svg(fig)


def figure_html(fig: Any) -> str:
    """A figure as the HTML the panel shows: inline SVG whose colours follow the page's
    light or dark theme through ``--tl-*`` variables (a matplotlib figure too).

    Example:
        >>> from tilelab.lab.figures.theme import new_figure
        >>> html = figure_html(new_figure("light", (1, 1)))
        >>> "<svg" in html and "var(--tl-bg, #ffffff)" in html and "base64" not in html
        True
    """
    from tilelab.lab.figures.theme import theme_css

    return (f'<div class="tilelab-view tl-explorer-figure"><style>{theme_css()}{_FIGURE_CSS}'
            f"</style>{_svg(fig)}</div>")


#: the snapshot an exported page shows where the widget cannot run
_STATIC_CSS = (".tl-explorer-static { color: var(--tl-fg); font-size: 13px; max-width: 100%; "
               "font-family: var(--jp-ui-font-family, system-ui, sans-serif); } "
               ".tl-explorer-static .tl-note { margin: 4px 0; font-size: 12px; "
               "color: var(--jp-content-font-color2, rgba(127,127,127,.95)); } "
               ".tl-explorer-static .tl-explorer-figures { display: flex; flex-wrap: wrap; "
               "gap: 8px; align-items: flex-start; } "
               ".tl-explorer-static .tl-explorer-figures > svg { max-width: 100%; "
               "height: auto; flex: 0 1 auto; min-width: 0; }")


def _label(value: Any) -> str:
    return "×".join(map(str, value)) if isinstance(value, (tuple, list)) else str(value)


def _slider(name: str, values: Sequence[Any]) -> widgets.SelectionSlider:
    if not values:
        raise ValueError(f"explore() needs at least one {name}")
    return widgets.SelectionSlider(options=[(_label(v), v) for v in values], value=values[0],
                                   description=name, continuous_update=False,
                                   style={"description_width": "initial"})


def _wrap_layout() -> widgets.Layout:
    """A row that wraps onto more lines instead of growing wider than the output."""
    return widgets.Layout(flex_flow="row wrap", max_width="100%", align_items="flex-start")


def _figure_layout() -> widgets.Layout:
    """A figure at its natural size, shrunk (aspect kept) to fit the output's width."""
    return widgets.Layout(max_width="100%", height="auto", object_fit="contain",
                          flex="0 1 auto", min_width="0")


class Explorer(widgets.VBox):
    """The panel :func:`explore` returns: sliders, a block picker, a status line and two
    figures (``roofline_view``, ``ownership_view``: HTML widgets holding SVG), plus the
    data behind them. The rows wrap and the figures shrink to fit a narrow output.

    Attributes:
        tile_slider / size_slider / block_picker: the controls. point: the latest
        :class:`~tilelab.perf.roofline.RooflinePoint`. trace: the latest interpreter
        trace. roofline_fig / ownership_fig: the latest figures. history: one dict per
        run (tile, size, point, seconds). runs: how many runs so far. error: the last
        error message (None after a good run).

    Example:
        >>> Explorer.__mro__[1].__name__
        'VBox'
    """

    def __init__(self, kernel: Any, make_args: Callable[[Any, Any], Sequence[Any]], *,
                 tile_sizes: Sequence[Any], problem_sizes: Sequence[Any], backend: str,
                 sample_blocks: int | None, predict_on: Any, theme: "Theme | str | None",
                 work: Callable[[Any, Any], Any] | None, keep: int):
        self.kernel, self.make_args, self.backend = kernel, make_args, backend
        self.sample_blocks, self.predict_on, self.theme = sample_blocks, predict_on, theme
        self.work, self.keep = work, keep
        self.point: Any = None
        self.trace: Any = None
        self.partition: Any = None
        self.roofline_fig: Any = None
        self.ownership_fig: Any = None
        self.history: list[dict[str, Any]] = []
        self.runs = 0
        self.error: str | None = None
        self._quiet = False
        self._args: list[Any] = []          # the last run's launch arguments
        self.tile_slider = _slider("tile", list(tile_sizes))
        self.size_slider = _slider("problem size", list(problem_sizes))
        self.block_picker = widgets.Dropdown(options=[], description="block")
        self.status = widgets.HTML(layout=widgets.Layout(max_width="100%"))
        # the figures: inline SVG coloured by the page's theme, scaled down to the output's
        # width, wrapping under each other when the output is narrow
        self.roofline_view = widgets.HTML(layout=_figure_layout())
        self.ownership_view = widgets.HTML(layout=_figure_layout())
        super().__init__([widgets.HBox([self.tile_slider, self.size_slider, self.block_picker],
                                       layout=_wrap_layout()),
                          self.status, widgets.HBox([self.roofline_view, self.ownership_view],
                                                    layout=_wrap_layout())],
                         layout=widgets.Layout(max_width="100%", overflow="hidden"))
        self.tile_slider.observe(self._on_size, names="value")
        self.size_slider.observe(self._on_size, names="value")
        self.block_picker.observe(self._on_block, names="value")
        self.update()

    # -- display: a static snapshot for pages without widgets, then the widget
    def static_html(self) -> str:
        """The panel as it is now, as static HTML: the sliders' values, the status line and
        both figures (inline SVG in the page's theme), with a note that moving the sliders
        needs a running kernel. nbconvert's page and GitHub show this where the widget
        cannot run; in JupyterLab CSS hides it beside the rendered widget.

        Example:
            >>> "tl-explorer-static" in ex.static_html()      # doctest: +SKIP
            True
        """
        import html

        from tilelab.lab.figures.theme import theme_css
        from tilelab.lab.views.tabs import HIDE_STATIC

        where = (f"tile {_label(self.tile_slider.value)}, problem size "
                 f"{_label(self.size_slider.value)}, block {self.block_picker.value}")
        figures = "".join(_svg(f) for f in (self.roofline_fig, self.ownership_fig)
                          if f is not None)
        return (f'<div class="tilelab-view tilelab-static tl-explorer-static">'
                f"<style>{theme_css()}{_STATIC_CSS}{HIDE_STATIC}</style>"
                f'<p class="tl-note">explore({html.escape(self.kernel.name)}): a snapshot at '
                f"{html.escape(where)}; the sliders move it in a running notebook</p>"
                f"<div>{self.status.value}</div>"
                f'<div class="tl-explorer-figures">{figures}</div></div>')

    def bundles(self) -> list[dict]:
        """The outputs displaying the panel publishes: the static snapshot (its own output,
        so a renderer without widget JavaScript still shows it) and the widget.

        Example:
            >>> [sorted(b) for b in ex.bundles()]            # doctest: +SKIP
            [['text/html', 'text/plain'], ['application/vnd.jupyter.widget-view+json']]
        """
        key = "application/vnd.jupyter.widget-view+json"
        text = f"explore({self.kernel.name}): {_escape_text(self.status.value)}"
        out = [{"text/html": self.static_html(), "text/plain": text}]
        bundle = self._repr_mimebundle_()
        if bundle and key in bundle:
            out.append({key: bundle[key]})      # its text would repeat the snapshot's
        return out

    def _ipython_display_(self) -> None:
        from IPython.display import display

        for bundle in self.bundles():
            display(bundle, raw=True)

    # -- callbacks (observers must not raise: errors go to the status line)
    def _on_size(self, _change: Any) -> None:
        if not self._quiet:
            self.update()

    def _on_block(self, _change: Any) -> None:
        if not self._quiet and self.trace is not None:
            self._draw_ownership()

    # -- running
    def _cpu_args(self, args: Sequence[Any]) -> list[Any]:
        from tilelab.lab.figures.ownership import cpu_copy

        return [cpu_copy(a, None) if _on_gpu(a) else a for a in args]

    def _run(self, tile: Any, size: Any) -> tuple[Any, Any, float | None, str | None]:
        """(trace, partition, seconds, device): run once on the chosen backend."""
        import tilelab as tl
        from tilelab.lab.figures.ownership import trace_args
        from tilelab.runtime.partition import Partition

        args = list(self.make_args(tile, size))
        if self.backend == "gpu":
            self.kernel(*args)                      # compile + warm up
            r = tl.bench(lambda: self.kernel.launch_async(*args), rep=10, warmup=2)
            trace = trace_args(self.kernel, args, sample_blocks=self.sample_blocks)
            seconds, device = r.median, r.device
        else:
            args = self._cpu_args(args)
            trace = tl.interpret(self.kernel, *args, sample_blocks=self.sample_blocks)
            seconds, device = None, None
        # the picture needs only the partition's geometry (and the trace's block count),
        # so a GPU partition is drawn as it is
        part = next((a for a in args if isinstance(a, Partition)), None)
        self._args = args
        return trace, part, seconds, device

    def update(self) -> dict[str, Any] | None:
        """Run with the sliders' values and redraw; returns the run's history entry (None
        when it failed, with the reason in ``error`` and on the status line).

        Example:
            >>> ex.update()["tile"]          # doctest: +SKIP
            64
        """
        from types import SimpleNamespace

        from tilelab.lab.figures.roofline_plot import point_from_trace

        tile, size = self.tile_slider.value, self.size_slider.value
        t0 = time.perf_counter()
        try:
            trace, part, seconds, device = self._run(tile, size)
            work = self.work(tile, size) if self.work is not None else None
            name = f"{self.kernel.name} tile={_label(tile)} n={_label(size)}"
            launch = SimpleNamespace(args=self._args, kernel=self.kernel)  # GEMM tiles
            point = point_from_trace(trace, name=name, seconds=seconds, device=device,
                                     predict_on=self.predict_on, work=work, event=launch)
        except Exception as e:  # shown to the user; the panel keeps its last good state
            self.error = f"{type(e).__name__}: {e}"
            self.status.value = f"<pre style='color:#d62728'>{_escape(self.error)}</pre>"
            return None
        self.error = None
        self.trace, self.partition, self.point = trace, part, point
        self.runs += 1
        entry = {"tile": tile, "size": size, "point": point, "seconds": point.seconds,
                 "measured": point.measured, "wall_s": time.perf_counter() - t0}
        self.history = [h for h in self.history if (h["tile"], h["size"]) != (tile, size)]
        self.history.append(entry)
        self._refresh_blocks()
        self._draw_roofline()
        self._draw_ownership()
        self.status.value = _status(point, trace)
        return entry

    def _refresh_blocks(self) -> None:
        ran = sorted(self.trace.execution_order)
        keep = self.block_picker.value
        self._quiet = True
        try:
            self.block_picker.options = [(str(b), b) for b in ran]
            self.block_picker.value = keep if keep in ran else ran[0]
        finally:
            self._quiet = False

    # -- drawing
    def _draw_roofline(self) -> None:
        from tilelab.lab.figures.roofline_plot import roofline_figure

        points = [h["point"] for h in self.history[-self.keep:]]
        self.roofline_fig = roofline_figure(points, theme=self.theme,
                                            title=f"{self.kernel.name}: roofline")
        self.roofline_view.value = figure_html(self.roofline_fig)

    def _draw_ownership(self) -> None:
        from tilelab.lab.figures.ownership import ownership_figure, reads_figure

        block = self.block_picker.value
        if self.partition is not None:
            self.ownership_fig = ownership_figure(self.partition, trace=self.trace,
                                                  block=block, kernel=self.kernel,
                                                  num_blocks=self.trace.num_blocks,
                                                  theme=self.theme)
        else:
            self.ownership_fig = reads_figure(self.trace, block, kernel=self.kernel,
                                              theme=self.theme)
        self.ownership_view.value = figure_html(self.ownership_fig)


def _on_gpu(value: Any) -> bool:
    """Whether a launch argument is a tilelab tensor (or partition) in GPU memory."""
    from tilelab.runtime.partition import Partition
    from tilelab.runtime.tensor import Tensor

    t = value.tensor if isinstance(value, Partition) else value
    return isinstance(t, Tensor) and t.device != "cpu"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _escape_text(markup: str) -> str:
    """The text of a line of markup (the status line, for ``text/plain``)."""
    import html
    import re

    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def _status(point: Any, trace: Any) -> str:
    from tilelab.perf.roofline import format_flops, format_intensity, format_seconds

    pred = getattr(point, "prediction", None)
    how = (f"measured {format_seconds(point.seconds)} on {point.device}" if point.measured
           else f"predicted {format_seconds(point.seconds)} on {point.device}: "
                f"{pred.verdict}; roofline bound {format_seconds(pred.bound_s)}" if pred
           else "counted, no time")
    sampled = (f"; counted on {len(trace.execution_order)} of {trace.num_blocks} blocks"
               if trace.sampled else "")
    return (f"<b>{_escape(point.name)}</b>: {format_intensity(point.intensity)}, "
            f"{format_flops(point.achieved_flops)}; {_escape(how)}{sampled}")


def explore(kernel: Any, make_args: Callable[[Any, Any], Sequence[Any]], *,
            tile_sizes: Sequence[Any] = (64, 128, 256, 512),
            problem_sizes: Sequence[Any] = (1 << 12, 1 << 14, 1 << 16),
            backend: str | None = None, sample_blocks: int | None = 16,
            predict_on: Any = "h200", theme: "Theme | str | None" = None,
            work: Callable[[Any, Any], Any] | None = None, keep: int = 6) -> Explorer:
    """Sliders over ``tile_sizes`` × ``problem_sizes`` that re-run ``kernel`` and redraw.

    ``make_args(tile, size)`` returns the launch's arguments (build the partition with
    ``tile``). ``backend`` is ``"cpu"`` (interpreter, time predicted for ``predict_on``),
    ``"gpu"`` (timed) or None (the default backend). ``sample_blocks`` bounds the blocks
    the interpreter runs per move. ``work(tile, size)`` may return a
    :class:`~tilelab.perf.counting.Work` to place points by compulsory bytes instead of
    the tiles' traffic. The last ``keep`` configurations stay on the roofline.

    Example:
        >>> import tilelab as tl
        >>> from tilelab.kernels.examples import vector_add
        >>> def make_args(tile, n):
        ...     x = tl.ones(n, device="cpu")
        ...     return (tl.empty(n, device="cpu").partition(tile), x, x)
        >>> ex = explore(vector_add, make_args, tile_sizes=(64, 128), problem_sizes=(1024, 4096),
        ...              backend="cpu", theme="light")
        >>> ex.size_slider.value = 4096
        >>> ex.history[-1]["size"], ex.point.measured
        (4096, False)
    """
    from tilelab.runtime.device import backend as default_backend

    chosen = backend or default_backend()
    if chosen not in ("cpu", "gpu"):
        raise ValueError(f"backend must be 'cpu', 'gpu' or None, got {backend!r}")
    if chosen == "gpu":
        from tilelab.runtime.device import gpu_unavailable_reason

        reason = gpu_unavailable_reason()
        if reason:
            raise RuntimeError(f"explore(backend='gpu') needs a GPU, but none is usable: "
                               f"{reason}; use backend='cpu'")
    return Explorer(kernel, make_args, tile_sizes=tile_sizes, problem_sizes=problem_sizes,
                    backend=chosen, sample_blocks=sample_blocks, predict_on=predict_on,
                    theme=theme, work=work, keep=keep)
