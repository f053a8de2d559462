"""Disassemble a cubin to SASS with NVIDIA's own disassembler, when one is installed.

SASS is what the GPU runs; the lab shows it beside the PTX and counts instructions in it
(``HGMMA`` proves that a Hopper GEMM uses its tensor cores, ``LDL``/``STL`` reveal local
memory traffic from spills). Decoding SASS is NVIDIA's business, so this module only finds
``nvdisasm`` (or ``cuobjdump``), runs it safely, and reads its text. Without a tool it says
which package to install instead of failing.

Search order: the pip package ``nvidia-cuda-nvdisasm`` (``nvidia/cu13/bin/nvdisasm``, the
same CUDA release as tileiras), then ``nvdisasm`` and ``cuobjdump`` on PATH, then
``$CUDA_HOME/bin`` and ``$CUDA_PATH/bin``. The tool runs without CUDA_HOME/CUDA_PATH in its
environment (an older system CUDA must not leak in) and under a timeout.
"""
from __future__ import annotations

import collections
import functools
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

__all__ = [
    "INSTALL_HINT",
    "TENSOR_CORE_MNEMONICS",
    "Disassembler",
    "SassResult",
    "find_disassembler",
    "disassemble",
    "count_mnemonics",
]

INSTALL_HINT = "pip install nvidia-cuda-nvdisasm==13.4.92"

#: SASS opcodes that run on tensor cores (Ampere HMMA/IMMA, Hopper warpgroup *GMMA,
#: Blackwell tcgen05 UTC*MMA).
TENSOR_CORE_MNEMONICS = frozenset({
    "HMMA", "IMMA", "BMMA", "DMMA", "QMMA", "OMMA",
    "HGMMA", "IGMMA", "QGMMA", "BGMMA",
    "UTCHMMA", "UTCIMMA", "UTCQMMA", "UTCOMMA", "UTCMMA",
})

_DROP_ENV = ("CUDA_HOME", "CUDA_PATH")
LocationMap = Callable[[str, int, int], "tuple[str, int, int] | None"]


@dataclass(frozen=True)
class Disassembler:
    """A disassembler found on this machine.

    Example:
        >>> d = Disassembler("/usr/bin/nvdisasm", "nvdisasm")
        >>> d.kind
        'nvdisasm'
    """

    path: str
    kind: str  # "nvdisasm" or "cuobjdump"

    @property
    def version(self) -> str:
        """The tool's release line, e.g. ``Cuda compilation tools, release 13.4, V13.4.92``."""
        return _tool_version(self.path)

    def __str__(self) -> str:
        return f"{self.path} ({self.version})"


@dataclass(frozen=True)
class SassResult:
    """The SASS of a cubin, or why there is none.

    ``text`` is None exactly when ``unavailable_reason`` says why (no tool, tool failed,
    timed out). ``tool`` names the disassembler and its version.

    Example:
        >>> r = SassResult(text="        /*0000*/  HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], RZ ;")
        >>> r.mnemonics()["HGMMA"], r.uses_tensor_cores
        (1, True)
        >>> SassResult(text=None, unavailable_reason="no disassembler").uses_tensor_cores
        False
    """

    text: str | None
    tool: str | None = None
    unavailable_reason: str | None = None
    _counts: dict = field(default_factory=dict, repr=False, compare=False)

    def mnemonics(self) -> collections.Counter[str]:
        """Instruction counts by base opcode (see :func:`count_mnemonics`); empty without text."""
        if "all" not in self._counts:
            self._counts["all"] = count_mnemonics(self.text or "")
        return collections.Counter(self._counts["all"])

    @property
    def uses_tensor_cores(self) -> bool:
        """Whether any tensor-core instruction (:data:`TENSOR_CORE_MNEMONICS`) appears."""
        counts = self.mnemonics()
        return any(counts[m] for m in TENSOR_CORE_MNEMONICS)

    def __str__(self) -> str:
        return self.text if self.text is not None else f"(no SASS: {self.unavailable_reason})"


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _DROP_ENV}


@functools.lru_cache(maxsize=None)
def _tool_version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True,
                             timeout=30, env=_clean_env())
    except (OSError, subprocess.SubprocessError) as e:
        return f"version unknown: {e}"
    lines = [ln.strip() for ln in (out.stdout + out.stderr).splitlines() if ln.strip()]
    for ln in lines:
        if "release" in ln:
            return ln
    return lines[-1] if lines else "version unknown"


def _pip_tool_dirs() -> Iterable[Path]:
    """``nvidia/cu13/bin`` (then other cuXX) of the installed nvidia namespace packages."""
    try:
        import nvidia  # namespace package of NVIDIA's pip wheels
    except ImportError:
        return []
    roots = [Path(p) for p in getattr(nvidia, "__path__", [])]
    dirs = []
    for root in roots:
        dirs.append(root / "cu13" / "bin")
        dirs.extend(sorted(root.glob("cu*/bin"), reverse=True))
        dirs.append(root / "cuda_nvdisasm" / "bin")
    return dirs


def find_disassembler() -> Disassembler | None:
    """The first nvdisasm/cuobjdump in the documented search order, or None.

    Example:
        >>> d = find_disassembler()
        >>> d is None or d.kind in ("nvdisasm", "cuobjdump")
        True
    """
    for d in _pip_tool_dirs():
        exe = d / "nvdisasm"
        if exe.is_file() and os.access(exe, os.X_OK):
            return Disassembler(str(exe), "nvdisasm")
    for kind in ("nvdisasm", "cuobjdump"):
        found = shutil.which(kind)
        if found:
            return Disassembler(found, kind)
    for var in _DROP_ENV:
        home = os.environ.get(var)
        if not home:
            continue
        for kind in ("nvdisasm", "cuobjdump"):
            exe = Path(home) / "bin" / kind
            if exe.is_file() and os.access(exe, os.X_OK):
                return Disassembler(str(exe), kind)
    return None


_LINE_INFO = re.compile(r'^(\s*//## File ")([^"]*)(", line )(\d+)(.*)$', re.M)


def _map_line_info(text: str, map_location: LocationMap) -> str:
    def sub(m: re.Match) -> str:
        mapped = map_location(m.group(2), int(m.group(4)), 1)
        if mapped is None:
            return m.group(0)
        filename, line, _col = mapped
        return f"{m.group(1)}{filename}{m.group(3)}{line}{m.group(5)}"
    return _LINE_INFO.sub(sub, text)


def disassemble(cubin: bytes, *, line_info: bool = True, timeout: float = 120.0,
                tool: Disassembler | None = None,
                map_location: LocationMap | None = None) -> SassResult:
    """SASS of ``cubin``'s code sections, with source lines when ``line_info`` is set.

    Never raises for a missing or failing tool: the result's ``unavailable_reason`` says
    what happened and what to do. ``map_location(filename, line, col)`` may rewrite the
    ``//## File "...", line N`` annotations (return None to keep one as it is).

    Example:
        >>> r = disassemble(open("gemm_sm90.cubin", "rb").read())  # doctest: +SKIP
        >>> r.mnemonics()["HGMMA"] > 0                               # doctest: +SKIP
        True
    """
    tool = tool or find_disassembler()
    if tool is None:
        return SassResult(
            text=None,
            unavailable_reason=("no SASS disassembler found (looked for the pip package "
                                "nvidia-cuda-nvdisasm, nvdisasm/cuobjdump on PATH, "
                                f"$CUDA_HOME/bin); install one with: {INSTALL_HINT}"))
    described = f"{tool.path} ({tool.version})"
    if tool.kind == "cuobjdump":
        args = [tool.path, "-sass"]
    else:
        args = [tool.path, "--print-code"] + (["--print-line-info"] if line_info else [])
    with tempfile.TemporaryDirectory(prefix="tilelab-sass-") as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(bytes(cubin))
        try:
            proc = subprocess.run(args + [str(path)], capture_output=True, text=True,
                                  timeout=timeout, env=_clean_env())
        except subprocess.TimeoutExpired:
            return SassResult(None, described,
                              f"{tool.kind} did not finish within {timeout:g} s on a "
                              f"{len(cubin)}-byte cubin; pass a larger timeout= to disassemble()")
        except OSError as e:
            return SassResult(None, described, f"could not run {tool.path}: {e}; "
                                                f"reinstall it with: {INSTALL_HINT}")
    if proc.returncode != 0 or not proc.stdout.strip():
        err = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()
        detail = "; ".join(err[:3]).replace(str(path), "<cubin>")
        hint = ""
        if "13.4" not in tool.version:
            hint = (f"; this {tool.kind} is not from CUDA 13.4 and may not know the cubin's "
                    f"architecture: {INSTALL_HINT}")
        return SassResult(None, described,
                          f"{tool.kind} failed (exit code {proc.returncode}): {detail}{hint}")
    text = "\n".join(line.rstrip() for line in proc.stdout.splitlines()).strip("\n") + "\n"
    if map_location is not None:
        text = _map_line_info(text, map_location)
    return SassResult(text, described)


_INSTRUCTION = re.compile(
    r"^\s*/\*[0-9a-fA-F]+\*/\s+(?:\{\s*)?(?:@!?U?P(?:T|\d+)\s+)?([A-Z][A-Z0-9_]*)", re.M)


def count_mnemonics(sass: str) -> collections.Counter[str]:
    """How often each base opcode (``LDG`` for ``LDG.E.128``) appears in nvdisasm or
    cuobjdump output; predicates (``@!P0``) are skipped.

    Example:
        >>> text = '''
        ...         /*0070*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
        ...         /*0080*/              @!P0 STG.E [R6.64], R4 ;
        ...         /*0090*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], RZ ;
        ... '''
        >>> sorted(count_mnemonics(text).items())
        [('HGMMA', 1), ('LDG', 1), ('STG', 1)]
    """
    return collections.Counter(m.group(1) for m in _INSTRUCTION.finditer(sass))
