"""Read what a cubin says about its kernels, without any external tool.

A cubin is an ELF64 file (machine ``EM_CUDA``). tilelab shows users the resources each
kernel takes (registers, threads, shared memory, stack), the architecture it was built for,
and the PTX that tileiras handed to ptxas; all of that is in the ELF, so this module reads
it with :mod:`struct` alone and works on any machine, GPU or not.

Where the numbers come from (verified against ``nvdisasm`` section dumps and ``ptxas -v``
on cubins produced by tileiras 13.4 for sm_80, sm_90, sm_100 and sm_120):

- ``.nv.info`` (module-wide) and ``.nv.info.<kernel>`` hold EIATTR records. Each record is
  a 1-byte format, a 1-byte attribute id and a 2-byte field: ``EIFMT_NVAL`` (0x01) leaves
  the field zero, ``EIFMT_BVAL`` (0x02) keeps a byte value in it, ``EIFMT_HVAL`` (0x03) a
  16-bit value, ``EIFMT_SVAL`` (0x04) the size of the payload that follows.
- Static shared memory is the size of the ``.nv.shared.<kernel>`` section; on sm_90 and
  newer it includes the 1 KiB that ptxas adds for the system (``ptxas -v`` leaves it out).
- Spill sizes are printed by ``ptxas -v`` but not stored in the cubin; :func:`parse_ptxas_info`
  reads that printout when a caller has it.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import Mapping

from tilelab.compiler.binary.elf import (NT_CUDA_CUINFO, NT_CUDA_TKINFO, SHT_NOTE,
                                         STO_CUDA_ENTRY, STT_FUNC, Reader, Section,
                                         check_header, read_notes, read_sections,
                                         read_symbols, tkinfo)
from tilelab.compiler.binary.nvinfo import (EIATTR, EIFMT_BVAL, EIFMT_HVAL, EIFMT_NVAL,
                                            EIFMT_SVAL, KernelParam, NvInfoRecord,
                                            kernel_params, nv_info_records)
from tilelab.compiler.binary.resources import Resources, kernel_resources, parse_ptxas_info

__all__ = [
    "EIATTR",
    "EIFMT_NVAL",
    "EIFMT_BVAL",
    "EIFMT_HVAL",
    "EIFMT_SVAL",
    "Section",
    "NvInfoRecord",
    "KernelParam",
    "Resources",
    "CubinInfo",
    "read_cubin",
    "parse_ptxas_info",
]


@dataclass(frozen=True)
class CubinInfo:
    """Everything :func:`read_cubin` found in one cubin.

    - ``arch``: e.g. ``"sm_90a"`` (the ``-arch`` ptxas ran with, from ``.note.nv.tkinfo``,
      else ``"sm_<sm>"`` from the ELF header); ``sm``: the number alone.
    - ``toolkit``: the CUDA release (``"13.4"``) and ``producer``/``producer_version``/
      ``producer_options`` the tool that wrote the SASS.
    - ``kernels``: entry-point names; :meth:`resources`, :meth:`params` and
      :meth:`nv_info` answer per kernel (the only one when no name is given).
    - ``ptx``: the PTX module tileiras gave ptxas (lines joined by ``\\n``; None if the
      cubin was built without ``--lineinfo``); ``tileir``: the Tile IR text, if embedded.

    Example:
        >>> info = read_cubin(open("k.cubin", "rb").read())  # doctest: +SKIP
        >>> print(info.resources())                           # doctest: +SKIP
        >>> info.resources(info.kernels[0]).registers          # doctest: +SKIP
        255
    """

    arch: str
    sm: int
    toolkit: str | None
    producer: str | None
    producer_version: str | None
    producer_options: str | None
    sections: tuple[Section, ...]
    kernels: tuple[str, ...]
    ptx: str | None
    tileir: str | None
    _resources: Mapping[str, Resources] = field(repr=False, default_factory=dict)
    _params: Mapping[str, tuple[KernelParam, ...]] = field(repr=False, default_factory=dict)
    _nv_info: Mapping[str, tuple[NvInfoRecord, ...]] = field(repr=False, default_factory=dict)
    _data: bytes = field(repr=False, compare=False, default=b"")

    def _kernel(self, kernel: str | None) -> str:
        if kernel is None:
            if len(self.kernels) == 1:
                return self.kernels[0]
            raise KeyError(f"the cubin has {len(self.kernels)} kernels; name one of: "
                           f"{', '.join(self.kernels) or '(none)'}")
        if kernel not in self.kernels:
            raise KeyError(f"no kernel {kernel!r} in this cubin; it has: "
                           f"{', '.join(self.kernels) or '(none)'}")
        return kernel

    def resources(self, kernel: str | None = None) -> Resources:
        """What ``kernel`` (default: the cubin's only kernel) takes from the GPU.

        Raises:
            KeyError: no such kernel, or several kernels and none named.
        """
        return self._resources[self._kernel(kernel)]

    def params(self, kernel: str | None = None) -> tuple[KernelParam, ...]:
        """Where ``kernel``'s visible parameters sit in constant bank 0, by ordinal."""
        return self._params[self._kernel(kernel)]

    def nv_info(self, kernel: str | None = None) -> tuple[NvInfoRecord, ...]:
        """All EIATTR records about ``kernel``: its entries of ``.nv.info``, then
        ``.nv.info.<kernel>``, in file order."""
        return self._nv_info[self._kernel(kernel)]

    def section(self, name: str) -> Section | None:
        """The section called ``name``, or None."""
        for s in self.sections:
            if s.name == name:
                return s
        return None

    def section_data(self, name: str) -> bytes:
        """The bytes of section ``name`` (empty for NOBITS sections).

        Raises:
            KeyError: no such section; the message lists the sections there are.
        """
        s = self.section(name)
        if s is None:
            names = ", ".join(x.name for x in self.sections if x.name)
            raise KeyError(f"the cubin has no section {name!r}; it has: {names}")
        if s.is_nobits:
            return b""
        return self._data[s.offset:s.offset + s.size]


# --------------------------------------------------------------------------------------
# PTX


_INTERMEDIATE = re.compile(r"^\.nv_intermediate_source_section\b", re.M)


def _clean_ptx(raw: bytes) -> str:
    """PTX from .nv_debug_ptx_txt: NUL-terminated lines, blank runs collapsed.

    tileiras appends a ``.nv_intermediate_source_section`` holding the Tile IR, which refers
    to a ``.file`` entry the embedded copy lacks; it is cut so that the text is plain PTX
    that ptxas accepts (the Tile IR is in :attr:`CubinInfo.tileir`).
    """
    lines = raw.decode("utf-8", errors="replace").split("\0")
    out: list[str] = []
    for line in lines:
        line = line.rstrip()
        if not line and (not out or not out[-1]):
            continue
        out.append(line)
    text = "\n".join(out).strip("\n")
    m = _INTERMEDIATE.search(text)
    if m:
        text = text[:m.start()].rstrip("\n")
    return text + "\n"


_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$%][\w$%]*)\s*\(")
_DIRECTIVE = re.compile(r"\.(reqntid|maxntid|minnctapersm|maxnreg)\s+([\d\s,]+)")


def _ptx_directives(ptx: str) -> dict[str, dict[str, tuple[int, ...]]]:
    """Per entry: the performance directives between its parameter list and its body."""
    out: dict[str, dict[str, tuple[int, ...]]] = {}
    for m in _ENTRY.finditer(ptx):
        close = ptx.find(")", m.end())
        body = ptx.find("{", close)
        if close < 0 or body < 0:
            continue
        found = {}
        for d in _DIRECTIVE.finditer(ptx, close, body):
            found[d.group(1)] = tuple(int(x) for x in re.split(r"[\s,]+", d.group(2).strip()) if x)
        out[m.group(1)] = found
    return out


# --------------------------------------------------------------------------------------


def read_cubin(data: bytes) -> CubinInfo:
    """Read a cubin's architecture, kernels, resources, PTX and sections.

    Raises ValueError with what is wrong and where when ``data`` is not a well-formed
    cubin (not ELF, not EM_CUDA, truncated, or a corrupt ``.nv.info``).

    Example:
        >>> info = read_cubin(open("vadd.cubin", "rb").read())  # doctest: +SKIP
        >>> info.arch, info.kernels                               # doctest: +SKIP
        ('sm_90a', ('vadd_Kt1_A1f32_...',))
        >>> info.resources().registers                             # doctest: +SKIP
        34
    """
    data = bytes(data)
    check_header(data)
    r = Reader(data)
    sections = read_sections(r)
    by_name = {s.name: s for s in sections}
    arch, sm, toolkit, producer = _arch_and_producer(r, sections)

    ptx = None
    if ".nv_debug_ptx_txt" in by_name:
        s = by_name[".nv_debug_ptx_txt"]
        ptx = _clean_ptx(r.slice(s.offset, s.size, s.name))
    tileir = next((r.slice(s.offset, s.size, s.name).decode("utf-8", "replace").rstrip("\0")
                   for s in sections if s.name.startswith(".nv.tileir.debug_txt")), None)
    directives = _ptx_directives(ptx) if ptx else {}

    module_records: list[NvInfoRecord] = []
    if ".nv.info" in by_name:
        s = by_name[".nv.info"]
        module_records = nv_info_records(r.slice(s.offset, s.size, s.name), s.name)
    reserved = sum(s.size for s in sections if s.name.startswith(".nv.shared.reserved."))

    kernels: list[str] = []
    resources: dict[str, Resources] = {}
    params: dict[str, tuple[KernelParam, ...]] = {}
    nv_info: dict[str, tuple[NvInfoRecord, ...]] = {}
    for index, sym in enumerate(read_symbols(r, sections)):
        if sym.info & 0xF != STT_FUNC or not sym.other & STO_CUDA_ENTRY:
            continue  # not a kernel (device functions are FUNC symbols too)
        name = sym.name
        # .nv.info records name their function by symbol index in their first word.
        own = [rec for rec in module_records if rec.words()[:1] == (index,)]
        info_sec = by_name.get(f".nv.info.{name}")
        local = (nv_info_records(r.slice(info_sec.offset, info_sec.size, info_sec.name),
                                  info_sec.name) if info_sec else [])
        kernels.append(name)
        nv_info[name] = tuple(own + local)
        params[name] = kernel_params(local)
        resources[name] = kernel_resources(name, arch, own + local, by_name, reserved,
                                     directives.get(name, {}))
    return CubinInfo(
        arch=arch, sm=sm, toolkit=toolkit, producer=producer.get("tool"),
        producer_version=producer.get("tool_version"),
        producer_options=producer.get("tool_options"), sections=tuple(sections),
        kernels=tuple(kernels), ptx=ptx, tileir=tileir, _resources=resources,
        _params=params, _nv_info=nv_info, _data=data)


def _arch_and_producer(r: Reader, sections: list[Section]
                       ) -> tuple[str, int, str | None, dict[str, str]]:
    """(arch, sm, toolkit, tkinfo fields) from the ELF flags and the NVIDIA notes.

    The SM number sits in e_flags bits 8-15 from ELF ABI version 8 on (bits 0-7 before)
    and in .note.nv.cuinfo, which also holds the toolkit as major*10+minor (134 = 13.4).
    The ``a``/``f`` suffix is only in the ptxas options of .note.nv.tkinfo (``-arch sm_90a``).
    """
    abi_version = r.data[8]
    (e_flags,) = struct.unpack_from("<I", r.data, 0x30)
    sm = (e_flags >> 8) & 0xFF if abi_version >= 8 else e_flags & 0xFF
    toolkit = None
    producer: dict[str, str] = {}
    for s in sections:
        if s.type != SHT_NOTE:
            continue
        for ntype, _owner, desc in read_notes(r, s):
            if ntype == NT_CUDA_CUINFO and len(desc) >= 6:
                _version, note_sm, tool = struct.unpack_from("<HHH", desc)
                sm = note_sm or sm
                toolkit = f"{tool // 10}.{tool % 10}" if tool else None
            elif ntype == NT_CUDA_TKINFO:
                producer = tkinfo(desc)
    arch = f"sm_{sm}"
    m = re.search(r"-arch\s*=?\s*(sm_(\d+)[a-z]?)\b", producer.get("tool_options", ""))
    if m and int(m.group(2)) == sm:
        arch = m.group(1)
    return arch, sm, toolkit, producer
