"""Typed errors of tilelab.

Every error a user can see says what happened, where (file, line and column of the
user's own source when there is one) and what to do instead. They all derive from
:class:`TilelabError`, so ``except tl.TilelabError`` catches any of them.
"""
from __future__ import annotations

import linecache
import sys
from dataclasses import dataclass

__all__ = [
    "SourceLocation",
    "display_filename",
    "TilelabError",
    "SafetyError",
    "AliasError",
    "BorrowError",
    "CompileError",
    "LaunchError",
    "ConfigError",
    "ToolchainError",
    "with_foreign_class",
]


def display_filename(filename: str) -> str:
    """The name users know a file by: ``In[3]`` for an IPython/Jupyter cell (whose code
    lives in a temporary file such as ``/tmp/ipykernel_123/456.py``), else the path.

    Example:
        >>> display_filename("kernels.py")
        'kernels.py'
    """
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return filename
    try:
        shell = ipython.get_ipython()
        count = shell.compile._filename_map.get(filename) if shell is not None else None
    except Exception:  # an IPython without this map: keep the path
        return filename
    return f"In[{count}]" if isinstance(count, int) else filename


@dataclass(frozen=True)
class SourceLocation:
    """A place in the user's source: 1-based line, 1-based column.

    Example:
        >>> str(SourceLocation("k.py", 3, 5))
        'k.py:3:5'
    """

    filename: str
    line: int
    col: int = 1
    end_col: int | None = None

    def __str__(self) -> str:
        return f"{display_filename(self.filename)}:{self.line}:{self.col}"

    def source_line(self) -> str:
        """The text of the line, or '' when the source is not available."""
        return linecache.getline(self.filename, self.line).rstrip("\n")

    def excerpt(self) -> str:
        """The source line with a caret marker under the columns, for messages."""
        text = self.source_line()
        if not text.strip():
            return ""
        stripped = text.lstrip()
        indent = len(text) - len(stripped)
        start = max(self.col - 1 - indent, 0)
        width = 1
        if self.end_col is not None and self.end_col > self.col:
            width = self.end_col - self.col
        width = max(1, min(width, max(len(stripped) - start, 1)))
        return f"    {stripped}\n    {' ' * start}{'^' * width}"


class TilelabError(Exception):
    """Base class of tilelab's errors.

    Attributes:
        message: what happened, in one sentence.
        location: where in the user's source, when known.
        hint: what to write or do instead, when there is advice to give.

    Example:
        >>> try:
        ...     raise TilelabError("something went wrong", hint="do this instead")
        ... except TilelabError as e:
        ...     print(e)
        something went wrong
        hint: do this instead
    """

    def __init__(self, message: str, *, location: SourceLocation | None = None,
                 hint: str | None = None, foreign: type[BaseException] | None = None):
        Exception.__init__(self, message)   # (not super(): see with_foreign_class)
        self.message = message
        self.location = location
        self.hint = hint
        #: the exception class of another library this error stands for (cuTile's
        #: ``TileTypeError``...), when the raise site knows it; see with_foreign_class
        self.foreign = foreign

    def __str__(self) -> str:
        parts = []
        if self.location is not None:
            parts.append(f"{self.location}: {self.message}")
            excerpt = self.location.excerpt()
            if excerpt:
                parts.append(excerpt)
        else:
            parts.append(self.message)
        if self.hint:
            parts.append(f"hint: {self.hint}")
        return "\n".join(parts)


class SafetyError(TilelabError):
    """A kernel breaks the access discipline of its parameters (raised at definition).

    Example:
        A kernel that stores into a ``tl.In`` parameter is rejected when it is defined::

            @tl.kernel
            def bad(x: tl.In):
                ct.store(x, index=(0,), tile=ct.zeros((16,), ct.float32))  # SafetyError
    """


class AliasError(TilelabError):
    """Two arguments of one launch overlap in memory where one of them is written.

    Example:
        ``add(x.partition(256), x, y)`` raises AliasError: the output ``z`` and the input
        ``x`` are the same memory.
    """


class BorrowError(TilelabError):
    """Host code touches memory that a pending launch or graph still borrows.

    Example:
        Reading ``z.numpy()`` while an async launch that writes ``z`` is still pending
        raises BorrowError naming the kernel and where it was launched.
    """


class CompileError(TilelabError):
    """cuTile or tileiras rejected a kernel; the location points at the user's source.

    Example:
        ``kernel.compile(...)`` of a kernel that adds tiles of mismatched shapes raises
        CompileError at the line of the addition.
    """


class LaunchError(TilelabError):
    """A launch cannot run as asked: bad arguments, grid, device or driver.

    Example:
        Passing partitions with different tile grids to one kernel raises LaunchError
        listing each partition's grid.
    """


class ToolchainError(TilelabError):
    """The compiler toolchain (tileiras, ptxas, libnvvm, cuTile) is missing or broken.

    Example:
        Without the ``nvidia-cuda-tileiras`` package the error says which package to
        install.
    """


class ConfigError(TilelabError, ValueError):
    """A ``TILELAB_*`` setting has a value it does not take (see :mod:`tilelab.config`);
    the message names the variable, the value and the values allowed.

    Example:
        ``TILELAB_BACKEND=tpu`` raises ConfigError: "TILELAB_BACKEND='tpu' is not
        allowed; it takes auto, cpu, gpu (cuda means gpu)".
    """


def with_foreign_class(error: TilelabError, foreign: type[BaseException] | None
                       ) -> TilelabError:
    """Make ``error`` also an instance of ``foreign`` (the same object, its class changed to
    a subclass of both), so that code written for the library tilelab stands in for
    catches it: a refusal of a cuTile kernel is a ``CompileError`` *and* cuTile's
    ``TileTypeError``, keeping tilelab's message, location, hint and traceback.

    ``foreign`` must be an exception class whose instances need no C-level state of
    their own beyond what ``type(error)`` has (any Python-defined exception class, or
    a builtin such as ``TypeError``); None, or a class ``error`` already is, leaves it as
    it is. The combined class keeps the tilelab class's name, so a traceback still reads
    ``CompileError: ...`` (what a newcomer is told to look for); ``error.foreign`` names
    the other class.

    Example:
        >>> class Foreign(Exception): pass
        >>> e = with_foreign_class(CompileError("bad"), Foreign)
        >>> isinstance(e, CompileError), isinstance(e, Foreign), type(e).__name__
        (True, True, 'CompileError')
        >>> e.foreign.__name__
        'Foreign'
    """
    if foreign is None or isinstance(error, foreign):
        return error
    try:
        error.__class__ = _combined(type(error), foreign)
    except TypeError:   # a foreign class with a C layout of its own: keep tilelab's class
        return error
    error.foreign = foreign
    return error


_COMBINED: dict[tuple[type, type], type] = {}


def _combined(base: type, foreign: type) -> type:
    """The subclass of ``base`` and ``foreign`` (one per pair); tilelab's ``__str__`` and
    ``__init__`` come first in its MRO."""
    key = (base, foreign)
    cls = _COMBINED.get(key)
    if cls is None:
        cls = type(base.__name__, (base, foreign), {"__module__": base.__module__,
                                                    "__qualname__": base.__qualname__,
                                                    "__str__": base.__str__,
                                                    "__reduce__": _reduce_combined})
        _COMBINED[key] = cls
    return cls


def _reduce_combined(self: TilelabError):
    """Pickle a combined error as its tilelab class (the foreign class is re-applied)."""
    base = next(c for c in type(self).__mro__[1:] if issubclass(c, TilelabError))
    return (_rebuild, (base, self.foreign, self.message, self.__dict__))


def _rebuild(base: type, foreign: type | None, message: str, state: dict) -> TilelabError:
    error = base.__new__(base, message)
    Exception.__init__(error, message)
    error.__dict__.update(state)
    return with_foreign_class(error, foreign)
