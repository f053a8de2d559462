"""Show an error a notebook cell expects, without stopping *Run All*.

Why: a cell tagged ``raises-exception`` lets JupyterLab's *Run All* continue past it,
but VS Code and Colab ignore the tag and stop there. :func:`expect` catches the expected
error, shows its type and message (styled in a notebook, plain text elsewhere) and lets
the notebook go on. It is also a check: when the expected error does *not* happen, it
raises ``AssertionError``, so a course that teaches a refusal notices when the refusal
is gone.

Inside a ``%%tile`` cell, an expected launch error still shows its launch: a race the
CPU interpreter found is handed to the cell's recorder
(:func:`tilelab.lab.report.record.record_failure`), so the view below shows the launch
and its Race tab, and the message shown here names the first race only (the tab lists
every one).

Two forms:

- ``with expect(tl.SafetyError): ...`` catches the error raised in the block;
- ``expect(tl.SafetyError, fn, *args)`` calls ``fn(*args)`` and returns the error.

Example:
    >>> import tilelab as tl
    >>> def refuse():
    ...     raise tl.SafetyError("ct.store() writes to 'x', which is tl.In")
    >>> err = expect(tl.SafetyError, refuse)                   # doctest: +ELLIPSIS
    SafetyError (expected): ct.store() writes to 'x', which is tl.In
    >>> type(err).__name__
    'SafetyError'
"""
from __future__ import annotations

import html
from typing import Any, Callable

__all__ = ["expect", "Expected", "show_error", "show_box"]


def show_error(err: BaseException, note: str = "expected", message: str | None = None
               ) -> None:
    """Display ``err`` as ``Type (note): message``: a styled box in a notebook, one text
    block elsewhere. The text form is also the notebook output's ``text/plain``.
    ``message`` replaces ``str(err)`` (a shorter form of it).

    Example:
        >>> show_error(ValueError("bad size"))
        ValueError (expected): bad size
    """
    shown = str(err) if message is None else message
    text = f"{type(err).__name__} ({note}): {shown}"
    head, _, rest = shown.partition("\n")
    body = (f'<div class="tilelab-expected" style="border-left:4px solid #d62728;'
            f'padding:4px 10px;margin:2px 0;font-family:monospace;white-space:pre-wrap">'
            f'<b style="color:#d62728">{html.escape(type(err).__name__)}</b> '
            f'<span style="opacity:.7">({html.escape(note)})</span>: {html.escape(head)}'
            + (f"\n{html.escape(rest)}" if rest else "") + "</div>")
    show_box(text, body)


def show_box(text: str, body: str) -> None:
    """Display ``body`` (HTML) with ``text`` as its ``text/plain`` in IPython; print
    ``text`` anywhere else. What :func:`show_error` and the exercise checker show with.

    Example:
        >>> show_box("PASS saxpy: right", "<b>PASS</b> saxpy: right")
        PASS saxpy: right
    """
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        print(text)
        return
    if get_ipython() is None:
        print(text)
        return
    display({"text/plain": text, "text/html": body}, raw=True)


class Expected:
    """The context manager :func:`expect` returns; ``.error`` is the caught error.

    Example:
        >>> with expect(KeyError) as caught:
        ...     {}["missing"]
        KeyError (expected): 'missing'
        >>> type(caught.error).__name__
        'KeyError'
    """

    def __init__(self, kind: type[BaseException] | tuple[type[BaseException], ...],
                 match: str | None, when: bool):
        self.kind, self.match, self.when = kind, match, when
        self.error: BaseException | None = None

    def __enter__(self) -> "Expected":
        return self

    def __exit__(self, etype: Any, err: BaseException | None, tb: Any) -> bool:
        if err is None:
            if self.when:
                raise AssertionError(f"expected {_names(self.kind)}, but the code ran "
                                     "without an error: what it teaches no longer happens")
            return False
        if not isinstance(err, self.kind):
            return False          # an unexpected error propagates as usual
        if self.match is not None and self.match not in str(err):
            raise AssertionError(f"expected {_names(self.kind)} saying {self.match!r}, "
                                 f"got: {err}") from err
        self.error = err
        show_error(err, "expected", _in_race_tab(err))
        return True


def _in_race_tab(err: BaseException) -> str | None:
    """File the launch ``err`` stopped with the ``%%tile`` cell running now, if any;
    its message then names the first race and points to the Race tab below (None:
    show the error as it is)."""
    from tilelab.lab.report.record import record_failure

    event = record_failure(err)
    if event is None:
        return None
    from tilelab.lab.views.race_view import race_error_text

    return race_error_text(err, event.trace, "below")


def _names(kind: Any) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


def expect(kind: type[BaseException] | tuple[type[BaseException], ...],
           fn: Callable[..., Any] | None = None, *args: Any, match: str | None = None,
           when: bool = True, **kwargs: Any) -> Any:
    """Expect ``kind`` (an exception class or a tuple of them) to be raised.

    With ``fn``, call ``fn(*args, **kwargs)`` and return the caught error; without it,
    return a context manager. ``match`` must then appear in the message. ``when=False``
    makes the error optional (e.g. a race the CPU backend refuses but a GPU runs). A
    missing expected error raises ``AssertionError``; an error of another type passes
    through unchanged.

    Example:
        >>> with expect(ZeroDivisionError, match="division"):
        ...     1 / 0
        ZeroDivisionError (expected): division by zero
        >>> with expect(ZeroDivisionError):
        ...     pass
        Traceback (most recent call last):
        AssertionError: expected ZeroDivisionError, but the code ran without an error: what it teaches no longer happens
    """
    manager = Expected(kind, match, when)
    if fn is None:
        return manager
    with manager:
        fn(*args, **kwargs)
    return manager.error
