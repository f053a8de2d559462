"""What compiling a kernel produces, in one object.

The cubin and the Tile IR are made by the compile itself; PTX, resources, SASS and the
parsed remarks are read out of them on first access (SASS needs an external
disassembler, so it is never computed unless asked for).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from tilelab.compiler.calling_convention import ParamLayout

__all__ = ["Artifacts"]

#: the cache entry's file of ``ptxas -v`` numbers (see Artifacts._ptxas_info)
PTXAS_INFO = "ptxas-info.json"


@dataclass
class Artifacts:
    """The result of ``kernel.compile(...)``.

    Attributes: ``tileir`` (Tile IR text), ``cubin`` (bytes), ``ptx``, ``sass``,
    ``resources``, ``remarks`` (parsed tileiras remarks, mapped to the user's source),
    ``lowered_source`` (the cuTile Python the kernel became), ``timings`` (seconds per
    stage), ``toolchain`` (which tileiras ran), ``cache_hit``, ``accesses`` (the safety
    checker's record of each memory access) and ``validation`` (the Tile IR validator's
    verdict on each memory op).

    Example:
        >>> art = add.compile(z.partition(256), x, y, arch="sm_90")   # doctest: +SKIP
        >>> print(art.resources)                                      # doctest: +SKIP
    """

    kernel_name: str
    symbol: str
    arch: str
    cubin: bytes
    bytecode: bytes
    tileir: str
    remarks_text: str
    lowered_source: str
    timings: dict[str, float]
    toolchain: str
    cache_hit: bool
    params: tuple[ParamLayout, ...]
    key: str
    #: maps (file, line, col) of the lowered source to the user's; set by the compiler
    location_map: Any = field(default=None, repr=False, compare=False)
    #: the disk cache entry these artifacts are stored in (None: not cached), where
    #: what is derived from them later (the ``ptxas -v`` numbers) is kept beside them
    cache_entry: Any = field(default=None, repr=False, compare=False)
    #: the safety checker's record of every memory access of the compiled program, with
    #: why each is safe (``tilelab.compiler.safety.accesses.AccessRecord``, source order)
    accesses: tuple = field(default=(), repr=False, compare=False)
    #: the Tile IR validator's report (``tilelab.compiler.tileir.CheckReport``, its
    #: ``verdicts`` one per memory op); None for an unsafe kernel, compiled without the
    #: check
    validation: Any = field(default=None, repr=False, compare=False)

    @functools.cached_property
    def waits_for_previous_grid(self) -> bool:
        """Whether the kernel waits for the previous kernel of its stream before any
        memory access (the lowering's grid-dependency prologue, found in the Tile IR):
        what the launcher requires to use programmatic dependent launch for it."""
        from tilelab.compiler.tileir.pdl import waits_before_memory

        return waits_before_memory(self.tileir)

    @functools.cached_property
    def triggers_after_wait(self) -> bool:
        """Whether the kernel lets the next kernel of its stream start only after its
        own wait for the previous one (``tileir.pdl.triggers_after_wait``): what a
        kernel that reads before its wait needs of the kernel it is started early
        after."""
        from tilelab.compiler.tileir.pdl import triggers_after_wait

        return triggers_after_wait(self.tileir)

    @functools.cached_property
    def _cubin_info(self):
        from tilelab.compiler.binary.cubin import read_cubin

        return read_cubin(self.cubin)

    @property
    def ptx(self) -> str | None:
        """The PTX tileiras generated (embedded in the cubin), or None."""
        return self._cubin_info.ptx

    @functools.cached_property
    def resources(self):
        """Registers, threads, shared memory, stack frame and spills of the kernel.

        The cubin records all but the spill sizes; those come from running the
        toolchain's ``ptxas -v`` on the embedded PTX once, on first access.
        """
        res = self._cubin_info.resources(self.symbol)
        info = self._ptxas_info()
        return res.with_ptxas_info(info) if info else res

    def _ptxas_info(self) -> dict | None:
        """This kernel's ``ptxas -v`` numbers: kept in the cache entry beside the cubin
        once computed (a cache hit then runs no tool), else computed and kept."""
        from tilelab.compiler.cache import read_sidecar, write_sidecar

        if self.cache_entry is not None:
            kept = read_sidecar(self.cache_entry, PTXAS_INFO)
            if isinstance(kept, dict) and self.symbol in kept:
                return kept[self.symbol]
        info = self._run_ptxas()
        if self.cache_entry is not None:
            write_sidecar(self.cache_entry, PTXAS_INFO, {self.symbol: info})
        return info

    def _run_ptxas(self) -> dict | None:
        import tempfile
        from pathlib import Path

        from tilelab.compiler.binary.cubin import parse_ptxas_info
        from tilelab.compiler.toolchain import find_toolchain

        ptx = self.ptx
        if not ptx:
            return None
        tc = find_toolchain()
        ptxas = tc.bin_dir / "ptxas"
        if not ptxas.exists():
            return None
        arch = self._cubin_info.arch or self.arch
        with tempfile.TemporaryDirectory(prefix="tilelab-ptxas-") as tmp:
            src = Path(tmp) / "k.ptx"
            src.write_text(ptx)
            r = tc.run(ptxas, [f"-arch={arch}", "-v", str(src), "-o", str(Path(tmp) / "k.o")])
        if r.returncode != 0:
            return None
        return parse_ptxas_info(r.stdout + r.stderr).get(self.symbol)

    @functools.cached_property
    def sass(self) -> str | None:
        """SASS from nvdisasm; None (see ``sass_unavailable``) when no disassembler."""
        return self._sass.text

    @property
    def sass_unavailable(self) -> str | None:
        return self._sass.unavailable_reason

    @functools.cached_property
    def _sass(self):
        from tilelab.compiler.binary.sass import disassemble

        return disassemble(self.cubin, map_location=self.location_map)

    @functools.cached_property
    def remarks(self) -> list:
        """tileiras' optimization remarks (deduplicated), located in the user's source."""
        from tilelab.compiler.binary.remarks import parse_remarks

        if not self.remarks_text.strip():
            return []
        return parse_remarks(self.remarks_text, self.location_map)

    def summary(self) -> str:
        """A few lines: what was built, how long it took, and from which toolchain."""
        stages = ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in self.timings.items())
        hit = " (disk cache hit)" if self.cache_hit else ""
        return (f"{self.kernel_name} -> {self.symbol} for {self.arch}{hit}\n"
                f"  cubin {len(self.cubin)} B, Tile IR {len(self.tileir.splitlines())} lines\n"
                f"  timings: {stages}\n  toolchain: {self.toolchain}")

    def __repr__(self) -> str:
        return (f"<Artifacts {self.kernel_name} {self.arch} cubin={len(self.cubin)}B "
                f"cache_hit={self.cache_hit}>")
