"""Reading compiler listings: located lines of SASS and PTX, set-up lines, device lines.

Why: the linked listings (:mod:`tilelab.lab.views.linked`) draw lines; deciding *which*
lines are set-up (folded), *where* a line came from, and *whether* that place is device
code is a separate job, done here on plain text so it can be tested without HTML.

- ``nvdisasm`` prints ``//## File "f", line N`` before the instructions of each source
  line and pads every instruction to wide columns; :func:`sass_lines` consumes the
  comments and packs the columns (address, predicate, instruction).
- PTX carries ``.loc`` directives when the compiler emits them (:func:`ptx_lines`).
- Line information may name a line of the kernel's file that is host code (a
  ``M = N = K = 256`` statement below the kernel, when the compiler attributes
  generated instructions to a line past the kernel): :func:`device_lines` says which
  lines of the file are the kernel's and its helpers', and only those are linked.

Example:
    >>> sass_lines('//## File "c", line 3\\n        /*0010*/                   NOP ;')[0].text
    '/*0010*/       NOP ;'
    >>> fold_label("tileir", "  %1 = gdc_wait_tko token = %0 -> token")
    'grid-dependency control'
"""
from __future__ import annotations

import ast
import linecache
import re
from typing import Any, Iterable

from tilelab.lab.report.debuginfo import IRLine

__all__ = ["shorten", "is_boilerplate", "fold_label", "sass_lines", "ptx_lines",
           "device_lines", "short_file"]

_LONG = re.compile(r"[A-Za-z_$][\w$]{27,}")
_SASS_FILE = re.compile(r'^\s*//## File "((?:[^"\\]|\\.)*)", line (\d+)')
_SASS_INSTR = re.compile(r"^\s*(/\*[0-9a-fA-F]+\*/)\s*(@!?U?P(?:T|\d+)\s+)?(.*?)\s*$")
_PTX_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"((?:[^"\\]|\\.)*)"')
_PTX_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)")
_SYNTHETIC = re.compile(r"^<tilelab-(\w+) (\S+) ([^ :>]+):\d+ [0-9a-f]+>$")

# (pattern, what the fold summary calls it; "" = counted, not named)
_SETUP: dict[str, tuple[tuple[re.Pattern, str], ...]] = {
    "tileir": (
        (re.compile(r"^\s*(%[\w$.,% ]+ = )?assume\b"), "argument assumptions"),
        (re.compile(r"^\s*(%[\w$.,% ]+ = )?constant\b"), "constants"),
        (re.compile(r"^\s*(%[\w$.,% ]+ = )?make_tensor_view\b"), "tensor views"),
        (re.compile(r"^\s*(%[\w$.,% ]+ = )?make_token\b"), "tokens"),
        (re.compile(r"^\s*(%[\w$.,% ]+ = )?gdc_\w+"), "grid-dependency control"),
    ),
    "sass": (
        (re.compile(r"^\s*(\.(target|elftype|section|align|global|type|size|other)\b|"
                    r"//-{5,})"), "section directives"),
        (re.compile(r"^\s*\.?[\w.$]+:\s*$"), ""),
    ),
    "ptx": (
        (re.compile(r"^\s*\.(version|target|address_size|file)\b"), "module header"),
        (re.compile(r"^\s*(\.hidden\s+)?\.param\b"), "parameters"),
        (re.compile(r"^\s*\.(visible|reg|shared|local)\b"), "declarations"),
        (re.compile(r"^\s*\.(reqntid|maxntid|minnctapersm|maxnreg|language|pragma)\b"),
         "launch directives"),
        (re.compile(r"^\s*(ld\.param\b|mov\.b64\s+%rd\d+,\s*[\w$]+_param_\d+;)"),
         "parameter loads"),
        (re.compile(r"^\s*(\)|\{)\s*$"), ""),
    ),
}


def shorten(text: str, keep: int = 16, tail: int = 8) -> str:
    """``text`` with every identifier of 28 characters or more cut to its first ``keep``
    and last ``tail`` characters around ``…`` (mangled kernel names, parameter names).

    Example:
        >>> shorten("ld.param.b64 %rd7, [gemm_Kt1_A2bf16_A2bf16_A2f32_I64_I64_I32_param_0];")
        'ld.param.b64 %rd7, [gemm_Kt1_A2bf16_…_param_0];'
    """
    return _LONG.sub(lambda m: m.group(0)[:keep] + "…" + m.group(0)[-tail:], text)


def fold_label(kind: str, text: str) -> str | None:
    """What a set-up line is (``"constants"``, ``"parameter loads"``, ...; ``""`` for
    punctuation of a declaration), or None when the line is the kernel's work.

    Example:
        >>> fold_label("ptx", ".hidden\\t.param .align 64 .b8 k_param_15[128],")
        'parameters'
        >>> fold_label("tileir", "  %1 = addf %tile, %tile_20  : tile<256xf32>") is None
        True
    """
    for pattern, label in _SETUP.get(kind, ()):
        if pattern.match(text):
            return label
    return None


def is_boilerplate(kind: str, text: str) -> bool:
    """Whether a listing line is set-up rather than the kernel's work: Tile IR argument
    assumptions, constants, tensor views, tokens and grid-dependency control; SASS section
    directives; PTX declarations and parameter loads.

    Example:
        >>> is_boilerplate("tileir", "  %assume = assume div_by<16>, %arg0 : tile<ptr<f32>>")
        True
        >>> is_boilerplate("tileir", "  %1 = addf %tile, %tile_20  : tile<256xf32>")
        False
    """
    return fold_label(kind, text) is not None


def _sass_text(raw: str) -> str:
    """An instruction line with nvdisasm's padding packed: address, a 5-wide predicate
    column, the instruction."""
    m = _SASS_INSTR.match(raw)
    if not m:
        return raw.rstrip()
    addr, pred, rest = m.group(1), (m.group(2) or "").strip(), m.group(3)
    return f"{addr} {pred:>5} {rest}"


def sass_lines(text: str) -> list[IRLine]:
    """SASS lines located by the ``//## File "f", line N`` comments ``nvdisasm`` prints
    before the instructions of each source line (the comments themselves are consumed);
    instructions lose nvdisasm's column padding.

    Example:
        >>> [l.line for l in sass_lines('.text.k:\\n//## File "c", line 4\\n /*0010*/ NOP ;')]
        [None, 4]
        >>> sass_lines("  /*0040*/     @!UP0 BRA `(.L_x_1) ;")[0].text
        '/*0040*/ @!UP0 BRA `(.L_x_1) ;'
    """
    out, where = [], None
    for raw in text.splitlines():
        m = _SASS_FILE.match(raw)
        if m:
            where = (m.group(1), int(m.group(2)))
            continue
        instr = raw.strip().startswith("/*")
        line = _sass_text(raw) if instr else raw.rstrip()
        if where is not None and instr:
            out.append(IRLine(line, where[0], where[1], 0))
        else:
            out.append(IRLine(line, None, None, None))
    return out


def ptx_lines(text: str, location_map: Any = None) -> tuple[list[IRLine], bool]:
    """PTX lines located by their ``.loc file line col`` directives (``.file`` names the
    files; ``location_map`` maps the lowered source to the user's). Returns the lines and
    whether any line carried a location (tileiras does not always emit ``.loc``).

    Example:
        >>> lines, found = ptx_lines('.file 1 "k.py"\\n.loc 1 7 2\\nadd.f32 %r1, %r2, %r3;')
        >>> found, [(l.text.strip(), l.line) for l in lines if l.line]
        (True, [('add.f32 %r1, %r2, %r3;', 7)])
    """
    files: dict[str, str] = {}
    out, where, found = [], None, False
    for raw in text.splitlines():
        f = _PTX_FILE.match(raw)
        if f:
            files[f.group(1)] = f.group(2)
        m = _PTX_LOC.match(raw)
        if m:
            name = files.get(m.group(1), m.group(1))
            pos = (name, int(m.group(2)), int(m.group(3)))
            mapped = location_map(*pos) if location_map is not None else None
            where = mapped or pos
            continue
        code = raw.strip() and not raw.strip().startswith(("//", "."))
        if where is not None and code:
            found = True
            out.append(IRLine(raw.rstrip(), where[0], int(where[1]), int(where[2])))
        else:
            out.append(IRLine(raw.rstrip(), None, None, None))
    return out, found


def _function_spans(filename: str) -> list[tuple[int, int]]:
    """(first, last) line of every function defined in a file or cell, best effort:
    IPython's ``%``/``!`` lines are blanked first; an unparsable text gives none."""
    lines = linecache.getlines(filename)
    if not lines:
        return []
    text = "".join("\n" if l.lstrip().startswith(("%", "!")) else l for l in lines)
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    return [(n.lineno, n.end_lineno or n.lineno) for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def device_lines(k: Any, ir_lines: Iterable[IRLine] = ()) -> set[int]:
    """The lines of the kernel's file (``k.source_file``) that are device code: the
    kernel's own lines, and every function of the file holding a line the Tile IR's debug
    info names (the helpers the kernel called). A listing links only these; a line that
    names any other line of the file (host code) is shown unlinked.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> k = NS(source_file="<none>", source_first_line=3, source_lines=("a\\n", "b\\n"))
        >>> sorted(device_lines(k, [IRLine("x", "<none>", 9, 0)]))
        [3, 4, 9]
    """
    own = set(range(k.source_first_line, k.source_first_line + len(k.source_lines)))
    named = {l.line for l in ir_lines if l.filename == k.source_file and l.line is not None}
    out = own | named
    for first, last in _function_spans(k.source_file) if named - own else ():
        if any(first <= n <= last for n in named - own):
            out |= set(range(first, last + 1))
    return out


def short_file(name: str) -> str:
    """A file name as a listing's gutter shows it: tilelab's synthetic helper files
    (``<tilelab-device helpers device.py:1 daa3…>``) by their module's base name.

    Example:
        >>> short_file("<tilelab-device helpers device.py:1 daa3626a12>")
        'device.py'
        >>> short_file("/a/b/kernels.py")
        'kernels.py'
    """
    m = _SYNTHETIC.match(name)
    if m:
        return m.group(3)
    return name.replace("\\", "/").rsplit("/", 1)[-1]

