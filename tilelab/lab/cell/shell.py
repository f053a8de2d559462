"""Run a ``%%tile`` cell body through IPython's own machinery, and show its errors well.

Why: tilelab reads kernel source with ``inspect``, which needs the cell's text in
``linecache``; IPython's compiler registers it (``shell.compile.cache``) under the name its
tracebacks print as ``Cell In[n]``. The body is registered with the ``%%tile`` line kept as
a comment, so line numbers are those the user sees in the cell. The body then goes through
the shell's input transformers (``%magics`` inside work), its AST transformers, and runs in
the user namespace, the last expression shown through the display hook like any cell.

Errors: a :class:`~tilelab.errors.TilelabError` (SafetyError, CompileError, LaunchError,
...) is shown as its own located message, without a traceback of tilelab's internals; any
other exception keeps IPython's normal traceback, starting at the cell's own frame. A race
the magic shows in a Race tab is named once: the error printed after the tabs gives the
first race and points to the tab. With the extension loaded, a tilelab error of any cell
(``%%tile`` or not) is shown the same way (:func:`show_errors_located`).

Example:
    >>> from IPython.core.interactiveshell import InteractiveShell
    >>> sh = InteractiveShell.instance()
    >>> src = register_cell(sh, "x = 1\\nx + 1", "--backend cpu")
    >>> src.code.splitlines()[0]
    '# %%tile --backend cpu'
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["CellSource", "register_cell", "parse_cell", "execute", "prepare_error",
           "display_name", "cell_files", "rename_cells", "located_text",
           "show_errors_located", "stop_showing_errors_located"]


@dataclass(frozen=True)
class CellSource:
    """A cell body registered in ``linecache``: its text, file name and display name.

    Example:
        >>> CellSource("x", "x", "<cell>", "In[1]").display_name
        'In[1]'
    """

    raw: str
    code: str
    filename: str
    display_name: str


def register_cell(shell: Any, body: str, line: str) -> CellSource:
    """Transform the body like any cell and register it for ``inspect`` and tracebacks.

    Example:
        >>> import linecache
        >>> register_cell(sh, "pass", "").filename in linecache.cache    # doctest: +SKIP
        True
    """
    header = f"# %%tile {line}".rstrip()
    raw = header + "\n" + body
    code = shell.transform_cell(raw)
    # the running cell's number: IPython 9 counts the cell up before running it, so ask
    # the cell's own ExecutionResult (set while it runs) rather than the counter
    running = getattr(getattr(shell, "displayhook", None), "exec_result", None)
    number = getattr(running, "execution_count", None)
    if number is None:
        number = getattr(shell, "execution_count", 0)
    filename = shell.compile.cache(code, number, raw_code=raw)
    return CellSource(raw, code, filename, display_name(shell, filename))


def parse_cell(shell: Any, src: CellSource) -> ast.Module:
    """Parse with the shell's compiler flags (``__future__`` imports of earlier cells).

    Example:
        >>> type(parse_cell(sh, src)).__name__                 # doctest: +SKIP
        'Module'
    """
    return shell.compile.ast_parse(src.code, filename=src.filename)


def execute(shell: Any, tree: ast.Module, src: CellSource) -> None:
    """Run a (transformed) cell module in the user namespace; the value of a final
    expression goes to the display hook, as in a normal cell.

    Example:
        >>> execute(sh, ast.parse("y = 2"), src)             # doctest: +SKIP
    """
    tree = shell.transform_ast(tree)
    if tree is None:
        return
    body = list(tree.body)
    last = body.pop() if body and isinstance(body[-1], ast.Expr) else None
    if body:
        code = shell.compile(ast.Module(body=body, type_ignores=[]), src.filename, "exec")
        exec(code, shell.user_global_ns, shell.user_ns)
    if last is not None:
        code = shell.compile(ast.Interactive(body=[last]), src.filename, "single")
        exec(code, shell.user_global_ns, shell.user_ns)


def display_name(shell: Any, filename: str) -> str:
    """What IPython calls a file in tracebacks: ``In[3]`` for a cell, else the name.

    Example:
        >>> display_name(sh, "kernels.py")                    # doctest: +SKIP
        'kernels.py'
    """
    fmt = getattr(getattr(shell, "compile", None), "format_code_name", None)
    label = fmt(filename) if fmt is not None and filename else None
    return label[1] if label else filename


def cell_files(shell: Any) -> list[str]:
    """The file names IPython gave the cells run so far (ipykernel's temp files too).

    Example:
        >>> isinstance(cell_files(sh), list)                   # doctest: +SKIP
        True
    """
    known = getattr(getattr(shell, "compile", None), "_filename_map", None)
    return list(known) if isinstance(known, dict) else []


def rename_cells(text: str, shell: Any, names: list[str] = ()) -> str:
    """Cell file names in a message become ``In[n]``, as in IPython's tracebacks;
    ``at FILE:LINE`` becomes ``at In[n], line LINE``. ``names`` adds other files to rename
    (every cell the shell knows is renamed anyway).

    Example:
        >>> rename_cells("write at kernels.py:3", sh)          # doctest: +SKIP
        'write at kernels.py:3'
    """
    for name in dict.fromkeys([*(n for n in names if n), *cell_files(shell)]):
        if name not in text:
            continue
        shown = display_name(shell, name)
        if shown == name:
            continue
        text = re.sub(rf"(\bat ){re.escape(name)}:(\d+)\b(?!:)",
                      lambda m: f"{m.group(1)}{shown}, line {m.group(2)}", text)
        text = text.replace(name, shown)
    return text


def prepare_error(shell: Any, exc: BaseException, src: CellSource | None = None) -> BaseException:
    """Make ``exc`` render well when it leaves the magic, and return it (to re-raise).

    IPython shows an exception with a ``_render_traceback_`` method by calling it: tilelab
    errors render as ``SafetyError: In[3]:6:5: ...`` (their ``str()``, located), other
    errors as IPython's own traceback from the first frame of the cell on. Syntax errors
    and interrupts are left to IPython.

    Example:
        >>> from tilelab.errors import SafetyError
        >>> e = prepare_error(sh, SafetyError("bad store", hint="use z.store"))  # doctest: +SKIP
        >>> e._render_traceback_()                                            # doctest: +SKIP
        ['SafetyError: bad store\\nhint: use z.store']
    """
    from tilelab.errors import TilelabError
    from tilelab.lab.report.record import failed_launch

    if isinstance(exc, (SyntaxError, KeyboardInterrupt, SystemExit)):
        return exc
    if isinstance(exc, TilelabError):
        race = failed_launch(exc)   # the magic shows it in a Race tab before this error
        text = None
        if race is not None:
            from tilelab.lab.views.race_view import race_error_text

            text = race_error_text(exc, race.trace, "above")
        lines = [located_text(shell, exc, src, text)]
    else:
        tb = exc.__traceback__
        if src is not None:
            t = tb
            while t is not None and t.tb_frame.f_code.co_filename != src.filename:
                t = t.tb_next
            tb = t or tb
        lines = shell.InteractiveTB.structured_traceback(type(exc), exc, tb)
    try:
        exc._render_traceback_ = lambda: list(lines)  # type: ignore[attr-defined]
    except (AttributeError, TypeError):  # pragma: no cover - exotic exception types
        pass
    return exc


def located_text(shell: Any, exc: BaseException, src: CellSource | None = None,
                 text: str | None = None) -> str:
    """``Type: In[3]:6:5: message`` + the source line and the hint: how a tilelab error
    reads in a notebook (``text`` replaces ``str(exc)``). Cells are named as IPython names
    them, never by their temporary files.

    Example:
        >>> from tilelab.errors import LaunchError
        >>> located_text(None, LaunchError("bad grid", hint="pass grid=(4,)"))
        'LaunchError: bad grid\\nhint: pass grid=(4,)'
    """
    names = [getattr(getattr(exc, "location", None), "filename", None),
             src.filename if src is not None else None]
    body = str(exc) if text is None else text
    return rename_cells(f"{type(exc).__name__}: {body}", shell, [n for n in names if n])


def _located_handler(shell: Any, etype: type, value: BaseException, tb: Any,
                     tb_offset: Any = None) -> list[str]:
    """IPython's custom-exception handler for tilelab's errors (see
    :func:`show_errors_located`): shows the error as the shell shows any (so ``%tb`` and
    ``%debug`` find it, and a Jupyter kernel sends it as the cell's error), rendered by
    its located text unless the magic prepared a rendering already."""
    if not hasattr(value, "_render_traceback_"):
        lines = [located_text(shell, value)]
        try:
            value._render_traceback_ = lambda: list(lines)  # type: ignore[attr-defined]
        except (AttributeError, TypeError):  # pragma: no cover - exotic exception types
            pass
    shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
    return []


def show_errors_located(shell: Any) -> bool:
    """Show a :class:`~tilelab.errors.TilelabError` raised by any cell as its located
    message and hint (``TileShapeError: In[4]:2:5: tile size 100 ...``), as ``%%tile``
    shows it, instead of a traceback through tilelab's internals; other errors keep
    IPython's traceback. Returns False (and changes nothing) when the shell already has
    a custom exception handler, which is the user's to keep.

    Example:
        >>> show_errors_located(get_ipython())                   # doctest: +SKIP
        True
    """
    from tilelab.errors import TilelabError

    if getattr(shell, "custom_exceptions", None) != ():
        return False
    shell.set_custom_exc((TilelabError,), _located_handler)
    return True


def stop_showing_errors_located(shell: Any) -> None:
    """Undo :func:`show_errors_located` (when its handler is the shell's).

    Example:
        >>> stop_showing_errors_located(get_ipython())           # doctest: +SKIP
    """
    from tilelab.errors import TilelabError

    if getattr(shell, "custom_exceptions", None) == (TilelabError,):
        shell.set_custom_exc((), None)
