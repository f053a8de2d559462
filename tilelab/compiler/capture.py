"""Capture a kernel's source text at definition time.

Kernels are compiled from their source, so it is read when ``@tl.kernel`` runs: from the
file, or from the IPython/Jupyter cell (IPython registers each cell's text in
``linecache``, a fresh name per execution, so a cell re-run with edits is captured
anew). Line and column numbers stay those of the file or cell, so every later message
can point at what the user wrote.
"""
from __future__ import annotations

import ast
import hashlib
import inspect
import linecache
import types
from dataclasses import dataclass, field

from tilelab.errors import SafetyError, SourceLocation

__all__ = ["CapturedSource", "capture_source"]


@dataclass(frozen=True)
class CapturedSource:
    """The source block of one function, parsed, in file coordinates.

    ``lines`` are the block's lines as in the file (decorators included), starting at
    ``first_line`` (1-based). ``tree`` is the ``ast.FunctionDef`` with ``lineno`` and
    ``col_offset`` relative to the file (columns are UTF-8 byte offsets, as in ``ast``).

    Example:
        >>> def f(x):
        ...     return x
        >>> capture_source(f).tree.name
        'f'
    """

    filename: str
    first_line: int
    lines: tuple[str, ...]
    tree: ast.FunctionDef = field(compare=False, repr=False)
    fingerprint: str = ""

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def location(self, node: ast.AST) -> SourceLocation:
        """The user-facing location (1-based column, in characters) of an AST node."""
        line = getattr(node, "lineno", self.first_line)
        col = getattr(node, "col_offset", 0)
        end_line = getattr(node, "end_lineno", line)
        end_col = getattr(node, "end_col_offset", None)
        col_chars = _byte_to_char_col(self.line_text(line), col)
        end_chars = None
        if end_col is not None and end_line == line:
            end_chars = _byte_to_char_col(self.line_text(line), end_col) + 1
        return SourceLocation(self.filename, line, col_chars + 1, end_chars)

    def line_text(self, line: int) -> str:
        idx = line - self.first_line
        if 0 <= idx < len(self.lines):
            return self.lines[idx]
        return linecache.getline(self.filename, line)

    def segment(self, node: ast.AST) -> str:
        """The exact source text of a node."""
        return ast.get_source_segment(self._padded_text(), node) or ""

    def _padded_text(self) -> str:
        return "\n" * (self.first_line - 1) + self.text


def _byte_to_char_col(line: str, byte_col: int) -> int:
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def _source_error(message: str, where: SourceLocation, hint: str | None = None
                  ) -> SafetyError:
    err = SafetyError(message, location=where, hint=hint)
    err.rule = "source"
    return err


def capture_source(fn: types.FunctionType) -> CapturedSource:
    """Read and parse the source of ``fn`` (a plain Python function).

    Raises :class:`~tilelab.errors.SafetyError` when the source cannot be found (a
    function typed at a plain ``python`` prompt or built with ``exec``), since a kernel
    that cannot be read cannot be checked.
    """
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"@tl.kernel needs a Python function, got {type(fn).__name__}")
    code = fn.__code__
    where = SourceLocation(code.co_filename, code.co_firstlineno, 1)
    try:
        file_lines, start = inspect.findsource(fn)
    except (OSError, TypeError):
        raise _source_error(
            f"cannot read the source of {fn.__name__!r} (from {code.co_filename}), so it "
            "cannot be checked", where,
            "define kernels in a .py file, a Jupyter/IPython cell or a %%tile cell; "
            "tilelab compiles and checks kernels from their source text") from None
    block = inspect.getblock(file_lines[start:])
    first_line = start + 1
    # Parse inside an 'if True:' so that indented definitions (in a class or function)
    # and continuation lines with less indentation both parse; then shift positions
    # back to file coordinates (this is how cuTile itself reads kernels).
    indented = "if True:\n " + " ".join(block)
    try:
        module = ast.parse(indented)
    except SyntaxError as e:
        raise _source_error(f"cannot parse {fn.__name__!r} from {code.co_filename}: "
                            f"{e.msg} (was the file edited since it was imported?)",
                            where) from None
    func = module.body[0].body[0]
    if not isinstance(func, ast.FunctionDef):
        raise _source_error(f"@tl.kernel and kernel helpers must be plain 'def' functions, "
                            f"got {type(func).__name__}", where)
    if func.name != code.co_name:
        raise _source_error(f"the source at {code.co_filename}:{first_line} defines "
                            f"{func.name!r}, not {code.co_name!r}: the file changed since "
                            "the function was defined, so its source cannot be checked",
                            where, "re-import the module (or re-run the cell)")
    for node in ast.walk(func):
        if hasattr(node, "lineno"):
            node.lineno += first_line - 2
            node.end_lineno += first_line - 2
            node.col_offset -= 1
            node.end_col_offset -= 1
    text = "".join(block)
    fingerprint = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return CapturedSource(code.co_filename, first_line, tuple(block), func, fingerprint)
