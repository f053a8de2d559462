"""Build the Python functions that cuTile compiles and the interpreter runs, from the
checked text only.

A kernel's lowered text and each helper's captured text are compiled here, each into a
namespace of its own that holds exactly what the check resolved: the reserved names of
the generated code (``__tl_ct``, ``__tl_dev``, ``__tl_range``), the snapshotted values
of the names the function reads, the frozen versions of the helpers it calls and, for
user modules, a stand-in module with only the attributes the check resolved. No live
bytecode of the user's and no later rebinding of a global is ever reached from here.

Each text is registered in ``linecache`` under a synthetic name, with blank lines in
front so that line numbers (and, for helpers, columns) are those of the user's file.

A helper is compiled from its checked tree with its default expressions left out, and
given the default values the check accepted (``CheckedFunction.defaults``): Python
evaluated those expressions once, in the user's module, when the ``def`` ran, and
cuTile and the interpreter call the helper with the values, so a default naming a
module constant (``pad=PAD_ZERO``, ``dtype=ct.float32``) needs no name at run time, and
a default edited after the check runs only once it is checked.
"""
from __future__ import annotations

import __future__
import ast
import builtins
import copy
import hashlib
import linecache
import os
import re
import sys
import types
from typing import Any

from tilelab.compiler import tile_index as device_module
from tilelab.compiler.capture import CapturedSource
from tilelab.compiler.safety.ct_objects import unwrap_ct_function
from tilelab.compiler.safety.program import follow

__all__ = ["FROZEN_FILES", "ASSERT_NAME", "build_kernel_function", "frozen_text",
           "assert_text", "reserved",
           "pristine_cutile", "frozen_device", "device_text",
           "user_location", "user_facing"]

#: synthetic filename of a frozen helper -> the user's file (same lines and columns)
FROZEN_FILES: dict[str, str] = {}

_OMIT = object()
_PRISTINE: dict[str, Any] = {}


def pristine_cutile() -> types.ModuleType:
    """A stand-in of ``cuda.tile`` holding its public objects as they were when tilelab
    first used it: generated code reaches cuTile through this, so a later
    ``ct.bid = ...`` cannot redirect a partition's index math."""
    mod = _PRISTINE.get("ct")
    if mod is None:
        import cuda.tile as ct

        mod = types.ModuleType("cuda.tile", "cuda.tile as tilelab's generated code sees it")
        for name in dir(ct):
            if not name.startswith("_"):
                setattr(mod, name, getattr(ct, name))
        _PRISTINE["ct"] = mod
    return mod


def device_text() -> str:
    """The source of :mod:`tilelab.compiler.tile_index`, read once per process."""
    text = _PRISTINE.get("device_text")
    if text is None:
        with open(device_module.__file__, encoding="utf-8") as f:
            text = _PRISTINE["device_text"] = f.read()
    return text


def frozen_device() -> types.ModuleType:
    """A private copy of the device index helpers, compiled from their text once, with
    the pristine cuTile: ``__tl_dev`` in generated code (never the importable module,
    whose functions a user could replace)."""
    mod = _PRISTINE.get("dev")
    if mod is None:
        text = device_text()
        filename = _register("device", "helpers", device_module.__file__, 1, text)
        FROZEN_FILES[filename] = device_module.__file__
        mod = types.ModuleType("tilelab.compiler.tile_index", device_module.__doc__)
        mod.__dict__["__builtins__"] = builtins
        code = compile(text, filename, "exec", dont_inherit=True)
        exec(code, mod.__dict__)
        mod.__dict__["ct"] = pristine_cutile()
        for name in ("static_assert", "static_iter"):  # sub_tile_store's static constructs
            mod.__dict__[name] = getattr(pristine_cutile(), name)
        _PRISTINE["dev"] = mod
    return mod


#: the builtins frozen code may reach by name (those cuTile compiles)
def _restricted_builtins() -> dict:
    found = _PRISTINE.get("builtins")
    if found is None:
        from tilelab.compiler.safety.optable import BUILTIN_CALLS, PRISTINE_BUILTINS

        found = _PRISTINE["builtins"] = {n: PRISTINE_BUILTINS[n] for n in BUILTIN_CALLS}
    return found


#: the reserved name of cuTile's ``ct.assert_``, which a kernel's ``assert`` becomes
ASSERT_NAME = "__tla"


def reserved() -> dict[str, Any]:
    """The reserved names generated code uses; user code may not bind or read them."""
    from tilelab.compiler.safety.optable import PRISTINE_BUILTINS

    return {"__tl_ct": pristine_cutile(), "__tl_dev": frozen_device(),
            "__tl_range": PRISTINE_BUILTINS["range"],
            ASSERT_NAME: pristine_cutile().assert_}


def frozen_text(src: CapturedSource) -> str:
    """A helper's captured text as a module: padded to its lines, decorators blanked."""
    func = src.tree
    lines = assert_text(list(src.lines), src.first_line, func)
    first = src.first_line
    def_idx = func.lineno - first
    for i in range(def_idx):  # decorators (the only allowed one adds no code)
        lines[i] = "\n"
    prefix = ["\n"] * (first - 1)
    if func.col_offset > 0:
        prefix[-1] = "if True:\n"
    return "".join(prefix + lines)


def _register(kind: str, name: str, src_file: str, line: int, text: str) -> str:
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    base = os.path.basename(src_file) or src_file
    filename = f"<tilelab-{kind} {name} {base}:{line} {digest}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    return filename


class _Freezer:
    """Makes frozen functions and namespaces for one checked program."""

    def __init__(self, program: Any):
        from tilelab.compiler.safety.ct_objects import ct_names

        self.ct_ids = ct_names()
        self.program = program
        self.frozen: dict[int, types.FunctionType] = {}
        self.pending: list[tuple[types.FunctionType, Any]] = []
        #: synthetic filename -> user's file, of the helpers frozen so far
        self.files: dict[str, str] = {}

    def base_namespace(self, module_name: str) -> dict:
        ns = {"__name__": module_name, "__builtins__": _restricted_builtins()}
        ns.update(reserved())
        return ns

    def value(self, obj: Any, paths: set[tuple[str, ...]]) -> Any:
        """The frozen counterpart of a resolved object (_OMIT: nothing to bind, such
        as tl.load_like, which the lowering rewrote away)."""
        if id(obj) in self.ct_ids:
            return obj  # a cuTile op: the object itself, as the check saw it
        obj = unwrap_ct_function(obj)  # @ct.function: the helper behind it
        if isinstance(obj, types.FunctionType):
            if id(obj) not in self.program.functions:
                return _OMIT
            return self.helper(obj)
        if isinstance(obj, types.ModuleType):
            if obj.__name__ in ("cuda", "cuda.tile") and obj is sys.modules.get(obj.__name__):
                # cuTile recognizes ct.static_eval / ct.static_iter by the module's own
                # identity; a change to its attributes is seen by the snapshot
                return obj
            return self.module(obj, paths)
        return obj

    def module(self, mod: types.ModuleType, paths: set[tuple[str, ...]]) -> Any:
        """A stand-in of a user module holding only the resolved attributes."""
        stand_in = types.ModuleType(mod.__name__, f"checked view of {mod.__name__}")
        heads: dict[str, set[tuple[str, ...]]] = {}
        for path in paths:
            if path:
                heads.setdefault(path[0], set()).add(path[1:])
        for attr, rest in heads.items():
            obj = follow(mod, (attr,))
            frozen = self.value(obj, {r for r in rest if r})
            if frozen is not _OMIT:
                setattr(stand_in, attr, frozen)
        return stand_in

    def helper(self, fn: types.FunctionType) -> types.FunctionType:
        found = self.frozen.get(id(fn))
        if found is not None:
            return found
        cf = self.program.functions.get(id(fn))
        if cf is None:  # pragma: no cover - every reachable helper was checked
            raise AssertionError(f"helper {fn.__qualname__} was not checked")
        text = frozen_text(cf.source)
        filename = _register("frozen", fn.__qualname__, cf.source.filename,
                             cf.source.tree.lineno, text)
        FROZEN_FILES[filename] = cf.source.filename
        self.files[filename] = cf.source.filename
        ns = self.base_namespace(fn.__module__ or "__main__")
        code = compile(_without_defaults(cf.source.tree), filename, "exec",
                       dont_inherit=True, flags=__future__.annotations.compiler_flag)
        exec(code, ns)
        new = ns[cf.source.tree.name]
        cf.defaults.install(new)
        self.frozen[id(fn)] = new
        self.pending.append((new, cf))
        return new

    def fill(self, ns: dict, cf: Any) -> None:
        for name, obj in cf.resolved.names.items():
            if name.startswith("__"):
                continue  # __name__, __builtins__ and the reserved names stay ours
            frozen = self.value(obj, cf.resolved.module_paths.get(name, set()))
            if frozen is not _OMIT:
                ns[name] = frozen

    def finish(self) -> None:
        while self.pending:
            fn, cf = self.pending.pop()
            self.fill(fn.__globals__, cf)


def _without_defaults(func: ast.FunctionDef) -> ast.Module:
    """A module of the checked ``def`` (file positions kept), without decorators (the
    only one allowed adds no code) and without default expressions (the frozen copy is
    given the checked values instead), its asserts made cuTile's (:class:`_Asserts`)."""
    tree = copy.deepcopy(func)
    tree.decorator_list = []
    tree.args.defaults = []
    tree.args.kw_defaults = [None] * len(tree.args.kwonlyargs)
    tree = _Asserts().visit(tree)
    return ast.Module(body=[tree], type_ignores=[])


class _Asserts(ast.NodeTransformer):
    """``assert cond, "message"`` -> ``__tla( cond, "message")`` at the same positions
    (:func:`assert_text`): the frozen function runs what cuTile compiles from the
    frozen text."""

    def visit_Assert(self, node: ast.Assert) -> ast.Expr:
        func = ast.Name(id=ASSERT_NAME, ctx=ast.Load())
        args = [node.test] + ([node.msg] if node.msg is not None else [])
        call = ast.Call(func=func, args=args, keywords=[])
        ast.copy_location(func, node)
        func.end_lineno = node.lineno
        func.end_col_offset = node.col_offset + len(ASSERT_NAME)
        ast.copy_location(call, node)
        return ast.copy_location(ast.Expr(value=call), node)


def assert_text(lines: list[str], first_line: int, tree: ast.AST) -> list[str]:
    """``lines`` (line ``first_line`` first) with each ``assert cond, "message"`` of
    ``tree`` written as ``__tla( cond, "message")``: cuTile compiles no ``assert``
    statement, and ``__tla`` (a reserved name, :func:`reserved`) is its ``ct.assert_``.
    The 6 letters of the keyword become the 6 characters ``__tla(`` and a ``)`` closes
    the statement, so every other character keeps its line and column."""
    out = list(lines)
    for node in sorted((n for n in ast.walk(tree) if isinstance(n, ast.Assert)),
                       key=lambda n: (n.lineno, n.col_offset), reverse=True):
        i, j = node.lineno - first_line, node.end_lineno - first_line
        end = _char_col(out[j], node.end_col_offset)
        out[j] = out[j][:end] + ")" + out[j][end:]
        col = _char_col(out[i], node.col_offset)
        if out[i][col:col + 6] != "assert":  # pragma: no cover - the node starts there
            raise AssertionError(f"no assert at line {node.lineno}")
        out[i] = out[i][:col] + ASSERT_NAME + "(" + out[i][col + 6:]
    return out


def _char_col(line: str, byte_col: int) -> int:
    return len(line.encode()[:byte_col].decode(errors="ignore"))


def build_kernel_function(lowered: Any, program: Any, kernel_fn: types.FunctionType
                          ) -> tuple[types.FunctionType, dict[str, str]]:
    """The lowered kernel as a function, in a namespace built from the checked program,
    and the synthetic files of its frozen helpers (-> the user's files)."""
    freezer = _Freezer(program)
    cf = program.functions.get(id(kernel_fn)) if kernel_fn is not None else None
    if cf is None:
        cf = next(c for c in program.functions.values() if c.is_kernel)
    ns = freezer.base_namespace(cf.fn.__module__ or "__main__")
    freezer.fill(ns, cf)
    freezer.finish()
    code = compile(lowered.text, lowered.filename, "exec", dont_inherit=True)
    exec(code, ns)
    return ns[lowered.name], dict(freezer.files)


def user_location(filename: str, line: int, col: int | None) -> tuple[str, int, int] | None:
    """(file, line, 1-based col) of a position in a frozen helper's synthetic file."""
    orig = FROZEN_FILES.get(filename)
    if orig is None:
        return None
    return orig, line, (col or 0) + 1


_TILE_PARAM = re.compile(r"__tl_(\w+?)_t(\d+)\b")
_SYNTHETIC = re.compile(r"<tilelab-(?:lowered|frozen) [^>]*>")


def user_facing(text: str, user_file: str | None = None) -> str:
    """A compiler message with the generated code's names put back in the user's terms.

    Example:
        >>> user_facing("bad shape in __tl_ct.store(z, ...) of (__tl_z_t0,)")
        'bad shape in ct.store(z, ...) of (z.tile_shape[0],)'
    """
    text = text.replace("__tl_ct.", "ct.").replace("__tl_dev.", "tl.device.")
    text = text.replace(f"{ASSERT_NAME}(", "ct.assert_(")
    text = text.replace("__tl_range", "range").replace("__tl_group_m", "group_m")
    text = _TILE_PARAM.sub(lambda m: f"{m.group(1)}.tile_shape[{m.group(2)}]", text)

    def synthetic(m: re.Match) -> str:
        return FROZEN_FILES.get(m.group(0)) or user_file or "<kernel>"
    return _SYNTHETIC.sub(synthetic, text)
