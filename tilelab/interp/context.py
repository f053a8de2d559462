"""Per-launch state of the interpreter and where errors point.

While a kernel runs, the ops need three things that are not in their arguments: which
block is executing (``ct.bid``), where to record accesses (the tracer) and which line of
the user's source they were called from (for errors and race reports). This module keeps
that state for the current thread and turns "the innermost frame of tile code" into a
:class:`tilelab.errors.SourceLocation`.
"""
from __future__ import annotations

import ast
import inspect
import sys
import textwrap
import threading
import weakref
from types import CodeType, FrameType
from typing import Any, Callable, TextIO

from tilelab.errors import CompileError, LaunchError, SourceLocation
from tilelab.limits import (DEFAULT_ARCH, MAX_TILE_ELEMENTS, sm_number, tile_elements,
                            tile_limit_hint, tile_limit_message)

__all__ = ["LaunchState", "current", "active", "enter", "register_tile_globals",
           "register_location_map", "user_frame", "current_location", "location_of_frame",
           "location_at", "parameter_location", "function_source", "call_locations",
           "compile_error", "launch_error", "unsupported", "check_tile_shape",
           "caller_locations", "KernelNameError"]


class KernelNameError(CompileError, NameError):
    """A name used in a kernel (or a helper it calls) is not defined: Python's NameError,
    reported at the kernel line that uses the name.

    It is both a ``NameError`` and a :class:`tilelab.errors.CompileError` (cuTile rejects
    such a kernel when compiling it).

    Example:
        >>> e = KernelNameError("NameError: name 'n' is not defined", name="n")
        >>> isinstance(e, NameError), e.name
        (True, 'n')
    """

    def __init__(self, message: str, *, location: SourceLocation | None = None,
                 hint: str | None = None, name: str | None = None):
        super().__init__(message, location=location, hint=hint)
        self.name = name


class LaunchState:
    """What the ops of one ``interpret()`` call share while blocks run.

    Attributes:
        grid: the (x, y, z) grid.
        block: index of the block now running.
        tracer: records accesses and FLOPs, or None when tracing is off.
        stdout: where device ``print``/``printf`` output goes (None: ``sys.stdout``).
        kernel_name: name of the kernel, for messages.
        arch: the GPU the launch stands for ('sm_90'); ``sm`` its number (90). Values of
            a dtype it does not support are refused where an op uses them
            (:mod:`tilelab.interp.values.targets`).
    """

    def __init__(self, grid: tuple[int, int, int], tracer: Any, stdout: TextIO | None,
                 kernel_name: str, arch: str = DEFAULT_ARCH):
        self.grid = grid
        self.arch = arch
        self.sm = sm_number(arch)
        #: the kernel's own function (its parameters' places in the source)
        self.function: Any = None
        self.block: tuple[int, int, int] = (0, 0, 0)
        self.tracer = tracer
        self.stdout = stdout
        self.kernel_name = kernel_name
        self.tile_globals: set[int] = set()
        self.pending_output = ""
        self.blocks_run = 0
        #: True while a static_assert condition is evaluated as plain Python (see
        #: tilelab.interp.ops.static_python): a run-time value may not become a Python int
        self.static_python = False

    def count_flops(self, n: int, *, mma: bool = False) -> None:
        """Add ``n`` floating-point operations to the running block's record."""
        if self.tracer is not None and n:
            self.tracer.count_flops(n, mma=mma)


_local = threading.local()


def current() -> LaunchState:
    """The state of the launch running on this thread.

    Raises LaunchError when a ``cuda.tile`` op of the interpreter is called outside of
    ``tilelab.interp.interpret``.
    """
    state = getattr(_local, "state", None)
    if state is None:
        raise LaunchError("a cuda.tile operation was called outside of a running kernel",
                          hint="run the kernel with tilelab.interp.interpret(kernel, *args, "
                               "grid=...)")
    return state


def active() -> LaunchState | None:
    """The running launch's state, or None outside of a kernel."""
    return getattr(_local, "state", None)


class enter:
    """Context manager that makes ``state`` the current launch state of this thread."""

    def __init__(self, state: LaunchState):
        self._state = state
        self._saved: LaunchState | None = None

    def __enter__(self) -> LaunchState:
        self._saved = getattr(_local, "state", None)
        _local.state = self._state
        return self._state

    def __exit__(self, *exc) -> None:
        _local.state = self._saved


def register_tile_globals(globals_dict: dict) -> None:
    """Mark a rebuilt globals dict: frames running with it are the user's tile code."""
    state = active()
    if state is not None:
        state.tile_globals.add(id(globals_dict))


def user_frame(start: FrameType | None = None) -> FrameType | None:
    """The innermost frame that executes the user's kernel or one of its helpers (the
    device helpers generated code calls, such as the guarded sub-tile store, report at
    the user's line that called them)."""
    state = active()
    if state is None:
        return None
    frame = start if start is not None else sys._getframe(1)
    known = state.tile_globals
    while frame is not None:
        if id(frame.f_globals) in known and \
                not frame.f_code.co_filename.startswith("<tilelab-device "):
            return frame
        frame = frame.f_back
    return None


_positions_cache: "weakref.WeakKeyDictionary[CodeType, list]" = weakref.WeakKeyDictionary()
_location_maps: dict[str, Callable[[int, int], SourceLocation]] = {}


def register_location_map(filename: str, to_user: Callable[[int, int], SourceLocation]) -> None:
    """Report locations in ``filename`` (a generated source file) as ``to_user(line, col)``.

    ``col`` is the 0-based (UTF-8 byte) column Python reports. tilelab's compiler lowers
    kernels into synthetic files; registering its source map makes the interpreter's
    errors, accesses and races point at the user's own cell or file.

    Example:
        >>> register_location_map("<generated>", lambda line, col: SourceLocation(
        ...     "cell.py", line, col + 1))
    """
    _location_maps[filename] = to_user


def location_of_frame(frame: FrameType, lasti: int | None = None) -> SourceLocation:
    """File, line and columns of the instruction a frame is executing."""
    code = frame.f_code
    positions = _positions_cache.get(code)
    if positions is None:
        positions = list(code.co_positions())
        _positions_cache[code] = positions
    index = (frame.f_lasti if lasti is None else lasti) // 2
    line = frame.f_lineno
    col, end_col = 1, None
    if 0 <= index < len(positions):
        pos_line, _end_line, pos_col, pos_end_col = positions[index]
        if pos_line is not None:
            line = pos_line
        if pos_col is not None:
            col = pos_col + 1
            if pos_end_col is not None and _end_line == pos_line:
                end_col = pos_end_col + 1
    mapper = _location_maps.get(code.co_filename)
    if mapper is not None:
        try:
            return mapper(line or 1, col - 1)
        except Exception:  # a broken map must not hide the original location
            pass
    return SourceLocation(code.co_filename, line or 1, col, end_col)


def location_at(filename: str, line: int, col: int) -> SourceLocation:
    """The user's location of (``line``, 0-based ``col``) in ``filename``, through its
    registered map (:func:`register_location_map`) when it is a generated file."""
    mapper = _location_maps.get(filename)
    if mapper is not None:
        try:
            return mapper(line, col)
        except Exception:  # a broken map must not hide the original location
            pass
    return SourceLocation(filename, line, col + 1)


def parameter_location(name: str) -> SourceLocation | None:
    """Where the running kernel declares parameter ``name`` (``x`` also for the items
    ``x[0]`` of a tuple or list argument), as cuTile locates what it refuses about an
    argument; None when the source cannot be read."""
    state = active()
    func = state.function if state is not None else None
    if func is None:
        return None
    base = name.split("[", 1)[0]
    found = function_source(func)
    if found is None:
        return None
    fn, line0, indent = found
    for arg in fn.args.posonlyargs + fn.args.args:
        if arg.arg == base:
            return location_at(func.__code__.co_filename, line0 + arg.lineno,
                               arg.col_offset + indent)
    return None


def function_source(func: Any) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, int, int] \
        | None:
    """``func``'s definition parsed from its source (a generated file's too, through
    ``linecache``), with what turns its node positions into the file's: the line before
    its first (add a node's ``lineno``) and the indent dedenting removed (add a node's
    ``col_offset``); None when the source cannot be read."""
    try:
        lines, start = inspect.getsourcelines(func)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return None
    fn = next((n for n in ast.walk(tree)
               if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if fn is None:
        return None
    return fn, start - 1, len(lines[0]) - len(lines[0].lstrip())


def current_location() -> SourceLocation | None:
    """Location of the kernel line that is calling the running op, when known."""
    frame = user_frame(sys._getframe(1))
    return None if frame is None else location_of_frame(frame)


def compile_error(message: str, hint: str | None = None,
                  foreign: type[BaseException] | None = None) -> CompileError:
    """A CompileError for what cuTile rejects when it compiles, at the calling kernel line
    (``foreign``: the cuTile exception class it stands for, when the message alone does
    not tell, see :mod:`tilelab.interp.frontend.cutile_errors`)."""
    return CompileError(message, location=current_location(), hint=hint, foreign=foreign)


def check_tile_shape(shape: tuple[int, ...]) -> None:
    """Refuse a tile past Tile IR's element limit (:data:`tilelab.limits.MAX_TILE_ELEMENTS`)
    at the kernel line that makes it, with the compiler's message: the GPU toolchain
    refuses such a kernel for every target, so the interpreter must not run it."""
    if tile_elements(shape) > MAX_TILE_ELEMENTS:
        state = active()
        name = state.kernel_name if state is not None else "<kernel>"
        message = tile_limit_message(name, shape)
        chain = caller_locations()
        if chain:   # made in a helper: the calls that led there, as the compiler says them
            message += " (called from " + ", ".join(map(str, chain)) + ")"
        raise compile_error(message, hint=tile_limit_hint())


def caller_locations() -> list[SourceLocation]:
    """Where the tile function running now was called from, outward to the kernel's own
    line: the lines of the user's code on the stack above the innermost one."""
    frame = user_frame(sys._getframe(1))
    return [] if frame is None else call_locations(frame.f_back)


def call_locations(frame: FrameType | None) -> list[SourceLocation]:
    """The lines of the user's code on the stack from ``frame`` outward (where a tile
    function about to run was called from, when ``frame`` is its caller's)."""
    state = active()
    out: list[SourceLocation] = []
    if state is None:
        return out
    known = state.tile_globals
    while frame is not None:
        if id(frame.f_globals) in known and \
                not frame.f_code.co_filename.startswith("<tilelab-device "):
            out.append(location_of_frame(frame))
        frame = frame.f_back
    return out


def launch_error(message: str, hint: str | None = None) -> LaunchError:
    """A LaunchError for a run-time failure in the running block, at the calling line."""
    state = active()
    if state is not None:
        message = f"{message} (block {state.block})"
    return LaunchError(message, location=current_location(), hint=hint)


def unsupported(op: str, why: str, hint: str | None = None) -> CompileError:
    """The error for a cuTile op that the CPU interpreter cannot run."""
    return compile_error(f"{op} is not supported by the CPU interpreter: {why}",
                         hint=hint or "run this kernel on a GPU (tilelab's GPU backend)")
