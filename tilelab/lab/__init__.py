"""tilelab.lab: the notebook side of tilelab — ``%%tile``, its tabbed views and figures.

Load it in IPython or Jupyter with ``%load_ext tilelab`` (``tilelab`` delegates to
:func:`load_ipython_extension` here); ``%reload_ext tilelab`` and ``%unload_ext tilelab``
work too. See ``docs/lab.md`` for the magic's options and tabs.

Importing this package does not import IPython; the magic's module is loaded on
:func:`load_ipython_extension`.

The code is in wings by job, each importing only itself and the wings below it:
:mod:`~tilelab.lab.figures` → :mod:`~tilelab.lab.report` → :mod:`~tilelab.lab.views` →
:mod:`~tilelab.lab.cell` and :mod:`~tilelab.lab.course` (side by side) → ``magic`` (see
``docs/lab.md``, "Where the code is").

Example:
    >>> from IPython.core.interactiveshell import InteractiveShell
    >>> sh = InteractiveShell.instance()
    >>> load_ipython_extension(sh)
    >>> "tile" in sh.magics_manager.magics["cell"]
    True
    >>> unload_ipython_extension(sh)
    >>> "tile" in sh.magics_manager.magics["cell"]
    False
"""
from __future__ import annotations

from typing import Any

from tilelab.lab.course.exercises import check
from tilelab.lab.course.expect import expect

__all__ = ["load_ipython_extension", "unload_ipython_extension", "last_view", "check",
           "expect"]


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%%tile`` with an IPython shell (again on reload: never twice).

    Example:
        >>> load_ipython_extension(get_ipython())              # doctest: +SKIP
    """
    from tilelab.lab.cell.shell import show_errors_located
    from tilelab.lab.magic import TileMagics

    unload_ipython_extension(ipython)  # a reload replaces, never duplicates
    ipython.register_magics(TileMagics)
    _show_figures_as_png(ipython)
    show_errors_located(ipython)   # tilelab's errors in any cell: one located message


def _show_figures_as_png(ipython: Any) -> None:
    """Let a matplotlib Figure returned by a cell show as a picture (tilelab's ownership
    and roofline figures) without ``%matplotlib inline``."""
    try:
        from matplotlib.figure import Figure

        formatter = ipython.display_formatter.formatters["image/png"]
    except Exception:  # no matplotlib or no display formatter: nothing to register
        return

    def png(fig: Any) -> bytes:
        import io

        buf = io.BytesIO()
        fig.savefig(buf, format="png", bbox_inches="tight")
        return buf.getvalue()

    formatter.for_type(Figure, png)


def unload_ipython_extension(ipython: Any) -> None:
    """Remove ``%%tile`` from an IPython shell (nothing happens if it is not there).

    Example:
        >>> unload_ipython_extension(get_ipython())            # doctest: +SKIP
    """
    from tilelab.lab.cell.shell import stop_showing_errors_located

    stop_showing_errors_located(ipython)
    manager = getattr(ipython, "magics_manager", None)
    if manager is None:
        return
    cell = manager.magics.get("cell", {})
    fn = cell.get("tile")
    owner = getattr(fn, "__self__", None)
    if fn is not None and type(owner).__name__ == "TileMagics":
        del cell["tile"]
    for name in [n for n, m in manager.registry.items() if type(m).__name__ == "TileMagics"]:
        del manager.registry[name]


def last_view() -> Any:
    """The view of the last ``%%tile`` cell (``.report`` has its artifacts), or None.

    Example:
        >>> last_view() is None or hasattr(last_view(), "report")
        True
    """
    from tilelab.lab.magic import last_view as last

    return last()
