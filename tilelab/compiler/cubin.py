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

import dataclasses
import re
import struct
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

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

EM_CUDA = 190
STT_FUNC = 2
STO_CUDA_ENTRY = 0x10  # st_other bit of a kernel (an entry point), as readelf shows it
SHT_SYMTAB = 2
SHT_NOTE = 7
SHT_NOBITS = 8
NT_CUDA_CUINFO = 1000
NT_CUDA_TKINFO = 2000

EIFMT_NVAL = 0x01
EIFMT_BVAL = 0x02
EIFMT_HVAL = 0x03
EIFMT_SVAL = 0x04
_FORMAT_NAMES = {EIFMT_NVAL: "EIFMT_NVAL", EIFMT_BVAL: "EIFMT_BVAL",
                 EIFMT_HVAL: "EIFMT_HVAL", EIFMT_SVAL: "EIFMT_SVAL"}

# Attribute ids. The ones marked "seen" appear in tileiras 13.4 cubins and were checked
# against the names nvdisasm 13.4 prints for the same bytes (tests/compiler/test_cubin.py
# repeats that check); the rest are public knowledge and are only used for naming.
EIATTR: dict[int, str] = {
    0x04: "EIATTR_CTAIDZ_USED",
    0x05: "EIATTR_MAX_THREADS",
    0x0A: "EIATTR_PARAM_CBANK",               # seen
    0x0C: "EIATTR_CBANK_PARAM_OFFSETS",
    0x0F: "EIATTR_EXTERNS",
    0x10: "EIATTR_REQNTID",                   # seen
    0x11: "EIATTR_FRAME_SIZE",                # seen
    0x12: "EIATTR_MIN_STACK_SIZE",            # seen
    0x17: "EIATTR_KPARAM_INFO",               # seen
    0x19: "EIATTR_CBANK_PARAM_SIZE",          # seen
    0x1B: "EIATTR_MAXREG_COUNT",              # seen
    0x1C: "EIATTR_EXIT_INSTR_OFFSETS",        # seen
    0x1D: "EIATTR_S2RCTAID_INSTR_OFFSETS",
    0x1E: "EIATTR_CRS_STACK_SIZE",            # seen
    0x23: "EIATTR_MAX_STACK_SIZE",
    0x25: "EIATTR_LD_CACHEMOD_INSTR_OFFSETS",
    0x28: "EIATTR_COOP_GROUP_INSTR_OFFSETS",  # seen
    0x29: "EIATTR_COOP_GROUP_MASK_REGIDS",    # seen
    0x2F: "EIATTR_REGCOUNT",                  # seen
    0x31: "EIATTR_INT_WARP_WIDE_INSTR_OFFSETS",  # seen
    0x32: "EIATTR_SHARED_SCRATCH",
    0x35: "EIATTR_SW2861232_WAR",             # seen
    0x36: "EIATTR_SW_WAR",                    # seen
    0x37: "EIATTR_CUDA_API_VERSION",          # seen
    0x38: "EIATTR_NUM_MBARRIERS",             # seen
    0x39: "EIATTR_MBARRIER_INSTR_OFFSETS",    # seen
    0x3D: "EIATTR_CTA_PER_CLUSTER",
    0x3E: "EIATTR_EXPLICIT_CLUSTER",
    0x3F: "EIATTR_MAX_CLUSTER_RANK",
    0x41: "EIATTR_RESERVED_SMEM_USED",        # seen
    0x42: "EIATTR_RESERVED_SMEM_0_SIZE",
    0x45: "EIATTR_KPARAM_INFO_V2",            # seen
    0x4A: "EIATTR_VRC_CTA_INIT_COUNT",        # seen
    0x4C: "EIATTR_NUM_BARRIERS",              # seen
    0x4F: "EIATTR_AT_ENTRY_FRAGMENTS",        # seen
    0x50: "EIATTR_SPARSE_MMA_MASK",           # seen
    0x51: "EIATTR_TCGEN05_1CTA_USED",         # seen
    0x52: "EIATTR_TCGEN05_2CTA_USED",
    0x54: "EIATTR_REG_RECONFIG",              # seen
    0x55: "EIATTR_ANNOTATIONS",               # seen
    0x5B: "EIATTR_BLOCKS_ARE_CLUSTERS",
    0x5F: "EIATTR_MERCURY_ISA_VERSION",       # seen
    0x66: "EIATTR_LANGUAGE",                  # seen
    0x6B: "EIATTR_NVSAL_SW_WAR",              # seen
    0x6D: "EIATTR_PREEXIT_USED",              # seen
}
_ID = {name: attr for attr, name in EIATTR.items()}


def _attr_name(attr: int) -> str:
    return EIATTR.get(attr, f"EIATTR_0x{attr:02x}")


@dataclass(frozen=True)
class Section:
    """One ELF section header of a cubin (``size`` is the section's size even for NOBITS).

    Example:
        >>> Section(".nv.shared.k", 8, 0x400, 4096).is_nobits
        True
    """

    name: str
    type: int
    offset: int
    size: int
    flags: int = 0
    link: int = 0
    info: int = 0

    @property
    def is_nobits(self) -> bool:
        """True for sections that take memory but have no bytes in the file (shared memory)."""
        return self.type == SHT_NOBITS


@dataclass(frozen=True)
class NvInfoRecord:
    """One EIATTR record of a ``.nv.info`` section.

    ``value`` is None for EIFMT_NVAL, an int for EIFMT_BVAL/HVAL and the raw payload bytes
    for EIFMT_SVAL (:meth:`words` splits those into 32-bit words).

    Example:
        >>> r = NvInfoRecord(0x10, EIFMT_SVAL, bytes([128, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0]))
        >>> r.name, r.words()
        ('EIATTR_REQNTID', (128, 1, 1))
    """

    attr: int
    fmt: int
    value: int | bytes | None

    @property
    def name(self) -> str:
        """The attribute's name, ``EIATTR_0x..`` when the id is not in :data:`EIATTR`."""
        return _attr_name(self.attr)

    @property
    def format_name(self) -> str:
        """``EIFMT_NVAL`` … ``EIFMT_SVAL``."""
        return _FORMAT_NAMES.get(self.fmt, f"EIFMT_0x{self.fmt:02x}")

    def words(self) -> tuple[int, ...]:
        """The payload as little-endian u32 words (empty for non-SVAL records)."""
        if not isinstance(self.value, bytes):
            return ()
        n = len(self.value) // 4
        return struct.unpack_from(f"<{n}I", self.value) if n else ()

    def __str__(self) -> str:
        if isinstance(self.value, bytes):
            shown = " ".join(f"0x{w:x}" for w in self.words()) or self.value.hex()
        else:
            shown = "" if self.value is None else f"0x{self.value:x}"
        return f"{self.name} ({self.format_name}) {shown}".rstrip()


@dataclass(frozen=True)
class KernelParam:
    """Where one kernel parameter lives in constant bank 0 (from EIATTR_KPARAM_INFO).

    ``offset`` is relative to the start of the parameter area (see
    :attr:`Resources.param_offset`), so the runtime can check its argument packing.

    Example:
        >>> KernelParam(ordinal=0, offset=0, size=8)
        KernelParam(ordinal=0, offset=0, size=8)
    """

    ordinal: int
    offset: int
    size: int


def _fmt_bytes(n: int) -> str:
    if n >= 1024:
        return f"{n} B ({n / 1024:.1f} KiB)"
    return f"{n} B"


@dataclass(frozen=True)
class Resources:
    """What one kernel takes from the GPU, as the cubin records it.

    Fields are None where the cubin does not say (spill sizes, for one, are only printed
    by ``ptxas -v``; fill them with :meth:`with_ptxas_info`).

    - ``registers``: registers per thread (EIATTR_REGCOUNT); ``max_registers`` the cap
      ptxas worked under (EIATTR_MAXREG_COUNT).
    - ``block_dim``: the required block shape (EIATTR_REQNTID, PTX ``.reqntid``);
      ``max_block_dim`` the upper bound (EIATTR_MAX_THREADS, PTX ``.maxntid``). tile
      kernels launch with block (1,1,1) and the driver expands it from these.
    - ``shared_bytes``: static shared memory per block (``.nv.shared.<kernel>``);
      ``reserved_shared_bytes``: the module's reserved shared memory
      (``.nv.shared.reserved.*``, used e.g. for sm_100 tensor-memory bookkeeping).
    - ``stack_frame_bytes`` (EIATTR_FRAME_SIZE) is the per-thread local memory frame;
      ``min_stack_bytes``/``max_stack_bytes`` EIATTR_MIN/MAX_STACK_SIZE.
    - ``param_bytes``: kernel parameters (EIATTR_CBANK_PARAM_SIZE) at ``param_offset`` in
      constant bank 0, whose whole size is ``const0_bytes``. It includes hidden
      parameters (the TMA descriptors of kernels that use TMA), which
      :meth:`CubinInfo.params` does not list.
    - ``min_blocks_per_sm``: PTX ``.minnctapersm`` (no EIATTR records it).

    Example:
        >>> r = Resources("k", "sm_90a", registers=40, block_dim=(128, 1, 1))
        >>> r.threads_per_block, r.as_dict()["registers"]
        (128, 40)
    """

    kernel: str
    arch: str | None = None
    registers: int | None = None
    max_registers: int | None = None
    block_dim: tuple[int, int, int] | None = None
    max_block_dim: tuple[int, int, int] | None = None
    shared_bytes: int = 0
    reserved_shared_bytes: int = 0
    stack_frame_bytes: int | None = None
    min_stack_bytes: int | None = None
    max_stack_bytes: int | None = None
    spill_store_bytes: int | None = None
    spill_load_bytes: int | None = None
    param_bytes: int | None = None
    param_offset: int | None = None
    const0_bytes: int | None = None
    num_barriers: int | None = None
    num_mbarriers: int | None = None
    min_blocks_per_sm: int | None = None
    cluster_dim: tuple[int, int, int] | None = None

    @property
    def threads_per_block(self) -> int | None:
        """Threads of one block: the product of the required (else maximum) block shape."""
        dims = self.block_dim or self.max_block_dim
        if dims is None:
            return None
        x, y, z = dims
        return x * y * z

    @property
    def local_bytes(self) -> int | None:
        """Per-thread local memory the kernel needs: its stack frame (spills, local arrays)."""
        sizes = [s for s in (self.stack_frame_bytes, self.min_stack_bytes) if s is not None]
        return max(sizes) if sizes else None

    def with_ptxas_info(self, info: Mapping[str, int]) -> "Resources":
        """A copy with the spill sizes (and anything else) from :func:`parse_ptxas_info`.

        Example:
            >>> r = Resources("k").with_ptxas_info({"spill_store_bytes": 8, "spill_load_bytes": 4})
            >>> r.spill_store_bytes, r.spill_load_bytes
            (8, 4)
        """
        known = {f.name for f in dataclasses.fields(self)}
        updates = {k: v for k, v in info.items() if k in known and k != "kernel"}
        return dataclasses.replace(self, **updates)

    def as_dict(self) -> dict[str, Any]:
        """All fields plus ``threads_per_block`` and ``local_bytes``, for tables and JSON.

        Example:
            >>> sorted(Resources("k").as_dict())[:3]
            ['arch', 'block_dim', 'cluster_dim']
        """
        out = dataclasses.asdict(self)
        out["threads_per_block"] = self.threads_per_block
        out["local_bytes"] = self.local_bytes
        return out

    def __str__(self) -> str:
        rows: list[tuple[str, str]] = []
        if self.registers is not None:
            cap = f" (cap {self.max_registers})" if self.max_registers is not None else ""
            rows.append(("registers", f"{self.registers} per thread{cap}"))
        if self.threads_per_block is not None:
            dims = self.block_dim or self.max_block_dim
            how = "required" if self.block_dim else "at most"
            rows.append(("threads/block", f"{self.threads_per_block} ({how} "
                                          f"{dims[0]}x{dims[1]}x{dims[2]})"))
        shared = f"{_fmt_bytes(self.shared_bytes)} static"
        if self.reserved_shared_bytes:
            shared += f" + {self.reserved_shared_bytes} B reserved"
        rows.append(("shared memory", shared))
        if self.stack_frame_bytes is not None:
            rows.append(("stack frame", f"{self.stack_frame_bytes} B per thread"))
        if self.spill_store_bytes is not None or self.spill_load_bytes is not None:
            rows.append(("spills", f"{self.spill_store_bytes or 0} B stored, "
                                   f"{self.spill_load_bytes or 0} B loaded"))
        elif self.stack_frame_bytes:
            rows.append(("spills", "not recorded in the cubin (ptxas -v prints them)"))
        if self.param_bytes is not None:
            const = f", constant bank 0: {self.const0_bytes} B" if self.const0_bytes else ""
            rows.append(("parameters", f"{self.param_bytes} B{const}"))
        if self.num_barriers is not None:
            rows.append(("barriers", str(self.num_barriers)))
        if self.num_mbarriers:
            rows.append(("mbarriers", str(self.num_mbarriers)))
        if self.min_blocks_per_sm is not None:
            rows.append(("min blocks/SM", str(self.min_blocks_per_sm)))
        if self.cluster_dim is not None:
            rows.append(("cluster", "x".join(map(str, self.cluster_dim))))
        width = max(len(k) for k, _ in rows)
        head = self.kernel + (f" ({self.arch})" if self.arch else "")
        return "\n".join([head] + [f"  {k:<{width}}  {v}" for k, v in rows])


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
# ELF


class _Reader:
    """Bounds-checked little-endian reads that say where a truncated cubin ran out."""

    def __init__(self, data: bytes):
        self.data = data

    def unpack(self, fmt: str, offset: int, what: str) -> tuple:
        size = struct.calcsize(fmt)
        if offset < 0 or offset + size > len(self.data):
            raise ValueError(f"truncated cubin: {what} at offset {offset:#x} needs {size} bytes "
                             f"but the file has {len(self.data)} bytes")
        return struct.unpack_from(fmt, self.data, offset)

    def cstr(self, offset: int, what: str) -> str:
        if offset < 0 or offset >= len(self.data):
            raise ValueError(f"corrupt cubin: {what} string at offset {offset:#x} is outside "
                             f"the file ({len(self.data)} bytes)")
        end = self.data.find(b"\0", offset)
        if end < 0:
            end = len(self.data)
        return self.data[offset:end].decode("utf-8", errors="replace")

    def slice(self, offset: int, size: int, what: str) -> bytes:
        if offset < 0 or size < 0 or offset + size > len(self.data):
            raise ValueError(f"truncated cubin: {what} spans {offset:#x}..{offset + size:#x} "
                             f"but the file has {len(self.data)} bytes")
        return self.data[offset:offset + size]


def _check_header(data: bytes) -> None:
    if len(data) < 64 or data[:4] != b"\x7fELF":
        raise ValueError("not a cubin: the data does not start with the ELF magic \\x7fELF "
                         f"(got {data[:4]!r}, {len(data)} bytes); pass the bytes of a .cubin file")
    if data[4] != 2 or data[5] != 1:
        raise ValueError("not a cubin: expected a 64-bit little-endian ELF "
                         f"(EI_CLASS={data[4]}, EI_DATA={data[5]})")
    (machine,) = struct.unpack_from("<H", data, 0x12)
    if machine != EM_CUDA:
        raise ValueError(f"not a cubin: ELF machine is {machine}, not EM_CUDA ({EM_CUDA}); "
                         "this looks like a host object, not GPU code")


def _sections(r: _Reader) -> list[Section]:
    (shoff,) = r.unpack("<Q", 0x28, "section header offset")
    shentsize, shnum, shstrndx = r.unpack("<HHH", 0x3A, "section header counts")
    raw = []
    for i in range(shnum):
        raw.append(r.unpack("<IIQQQQIIQQ", shoff + i * shentsize, f"section header {i}"))
    if not 0 <= shstrndx < shnum:
        raise ValueError(f"corrupt cubin: section name table index {shstrndx} is out of range "
                         f"(0..{shnum - 1})")
    str_off = raw[shstrndx][4]
    out = []
    for i, (name, typ, flags, _addr, off, size, link, info, _align, _es) in enumerate(raw):
        out.append(Section(r.cstr(str_off + name, f"name of section {i}"),
                           typ, off, size, flags, link, info))
    return out


@dataclass(frozen=True)
class _Symbol:
    name: str
    info: int  # low 4 bits: type (STT_FUNC ...)
    other: int  # STO_CUDA_ENTRY marks kernels


def _symbols(r: _Reader, sections: list[Section]) -> list[_Symbol]:
    for s in sections:
        if s.type == SHT_SYMTAB:
            strtab = sections[s.link] if 0 <= s.link < len(sections) else None
            if strtab is None:
                raise ValueError(f"corrupt cubin: {s.name} links to missing string table {s.link}")
            out = []
            for i in range(s.size // 24):
                name, info, other = r.unpack("<IBB", s.offset + 24 * i,
                                             f"symbol {i} of {s.name}")
                out.append(_Symbol(r.cstr(strtab.offset + name, f"name of symbol {i}"),
                                   info, other))
            return out
    return []


def _notes(r: _Reader, section: Section) -> Iterator[tuple[int, str, bytes]]:
    """(type, owner, descriptor) of each note in a SHT_NOTE section."""
    pos, end = section.offset, section.offset + section.size
    while pos + 12 <= end:
        namesz, descsz, ntype = r.unpack("<III", pos, f"note header in {section.name}")
        pos += 12
        owner = r.slice(pos, namesz, f"note owner in {section.name}").rstrip(b"\0")
        pos += (namesz + 3) & ~3
        desc = r.slice(pos, descsz, f"note body in {section.name}")
        pos += (descsz + 3) & ~3
        yield ntype, owner.decode("ascii", errors="replace"), desc


def _tkinfo(desc: bytes) -> dict[str, str]:
    """Decode .note.nv.tkinfo: six u32 (version, then string offsets) and a string table."""
    if len(desc) < 24:
        return {}
    _version, *offsets = struct.unpack_from("<6I", desc)
    table = desc[24:]
    keys = ("object", "tool", "tool_version", "tool_build", "tool_options")
    out = {}
    for key, off in zip(keys, offsets):
        if off < len(table):
            end = table.find(b"\0", off)
            out[key] = table[off:end if end >= 0 else len(table)].decode("utf-8", "replace").strip()
    return out


# --------------------------------------------------------------------------------------
# .nv.info


def _nv_info_records(data: bytes, where: str) -> list[NvInfoRecord]:
    """Split a .nv.info section into records; each is 4 bytes plus an SVAL payload."""
    out, pos = [], 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise ValueError(f"corrupt cubin: {where} ends inside a record header at byte {pos}")
        fmt, attr, field16 = struct.unpack_from("<BBH", data, pos)
        pos += 4
        if fmt == EIFMT_NVAL:
            value: int | bytes | None = None
        elif fmt == EIFMT_BVAL:
            value = field16 & 0xFF
        elif fmt == EIFMT_HVAL:
            value = field16
        elif fmt == EIFMT_SVAL:
            if pos + field16 > len(data):
                raise ValueError(f"corrupt cubin: {_attr_name(attr)} in {where} declares "
                                 f"{field16} payload bytes but only {len(data) - pos} remain")
            value = bytes(data[pos:pos + field16])
            pos += field16
        else:
            raise ValueError(f"corrupt cubin: unknown EIATTR format 0x{fmt:02x} for attribute "
                             f"0x{attr:02x} at byte {pos - 4} of {where}")
        out.append(NvInfoRecord(attr, fmt, value))
    return out


def _dim3(words: tuple[int, ...]) -> tuple[int, int, int] | None:
    """(x, y, z) from 1-3 words, missing dimensions 1."""
    if not words:
        return None
    x, y, z = (tuple(words[:3]) + (1, 1))[:3]
    return x, y, z


def _kparams(records: list[NvInfoRecord]) -> tuple[KernelParam, ...]:
    """Parameter records, both layouts ptxas 13.4 writes (checked against nvdisasm):

    - EIATTR_KPARAM_INFO: u32 index, u16 ordinal, u16 offset, u32 flags, size in bits 18+;
    - EIATTR_KPARAM_INFO_V2 (kernels with hidden TMA-descriptor parameters): u32 index,
      u16 ordinal, u16 offset, u16 size, u16 flags.
    """
    params = []
    for rec in records:
        if not isinstance(rec.value, bytes) or len(rec.value) < 12:
            continue
        if rec.attr == _ID["EIATTR_KPARAM_INFO"]:
            _index, ordinal, offset, flags = struct.unpack_from("<IHHI", rec.value)
            params.append(KernelParam(ordinal, offset, (flags >> 18) & 0x3FFF))
        elif rec.attr == _ID["EIATTR_KPARAM_INFO_V2"]:
            _index, ordinal, offset, size, _flags = struct.unpack_from("<IHHHH", rec.value)
            params.append(KernelParam(ordinal, offset, size))
    return tuple(sorted(params, key=lambda p: p.ordinal))


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
    _check_header(data)
    r = _Reader(data)
    sections = _sections(r)
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
        module_records = _nv_info_records(r.slice(s.offset, s.size, s.name), s.name)
    reserved = sum(s.size for s in sections if s.name.startswith(".nv.shared.reserved."))

    kernels: list[str] = []
    resources: dict[str, Resources] = {}
    params: dict[str, tuple[KernelParam, ...]] = {}
    nv_info: dict[str, tuple[NvInfoRecord, ...]] = {}
    for index, sym in enumerate(_symbols(r, sections)):
        if sym.info & 0xF != STT_FUNC or not sym.other & STO_CUDA_ENTRY:
            continue  # not a kernel (device functions are FUNC symbols too)
        name = sym.name
        # .nv.info records name their function by symbol index in their first word.
        own = [rec for rec in module_records if rec.words()[:1] == (index,)]
        info_sec = by_name.get(f".nv.info.{name}")
        local = (_nv_info_records(r.slice(info_sec.offset, info_sec.size, info_sec.name),
                                  info_sec.name) if info_sec else [])
        kernels.append(name)
        nv_info[name] = tuple(own + local)
        params[name] = _kparams(local)
        resources[name] = _resources(name, arch, own + local, by_name, reserved,
                                     directives.get(name, {}))
    return CubinInfo(
        arch=arch, sm=sm, toolkit=toolkit, producer=producer.get("tool"),
        producer_version=producer.get("tool_version"),
        producer_options=producer.get("tool_options"), sections=tuple(sections),
        kernels=tuple(kernels), ptx=ptx, tileir=tileir, _resources=resources,
        _params=params, _nv_info=nv_info, _data=data)


def _arch_and_producer(r: _Reader, sections: list[Section]
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
        for ntype, _owner, desc in _notes(r, s):
            if ntype == NT_CUDA_CUINFO and len(desc) >= 6:
                _version, note_sm, tool = struct.unpack_from("<HHH", desc)
                sm = note_sm or sm
                toolkit = f"{tool // 10}.{tool % 10}" if tool else None
            elif ntype == NT_CUDA_TKINFO:
                producer = _tkinfo(desc)
    arch = f"sm_{sm}"
    m = re.search(r"-arch\s*=?\s*(sm_(\d+)[a-z]?)\b", producer.get("tool_options", ""))
    if m and int(m.group(2)) == sm:
        arch = m.group(1)
    return arch, sm, toolkit, producer


def _resources(name: str, arch: str, records: list[NvInfoRecord],
               by_name: Mapping[str, Section], reserved: int,
               directives: Mapping[str, tuple[int, ...]]) -> Resources:
    def first(attr: str) -> NvInfoRecord | None:
        for rec in records:
            if rec.attr == _ID[attr]:
                return rec
        return None

    def indexed(attr: str) -> int | None:  # SVAL (symbol index, value)
        rec = first(attr)
        return rec.words()[1] if rec is not None and len(rec.words()) >= 2 else None

    def scalar(attr: str) -> int | None:  # BVAL / HVAL
        rec = first(attr)
        return rec.value if rec is not None and isinstance(rec.value, int) else None

    def dims(attr: str) -> tuple[int, int, int] | None:
        rec = first(attr)
        return _dim3(rec.words()) if rec is not None else None

    block = dims("EIATTR_REQNTID") or _dim3(directives.get("reqntid", ()))
    max_block = dims("EIATTR_MAX_THREADS") or _dim3(directives.get("maxntid", ()))
    cbank = first("EIATTR_PARAM_CBANK")
    param_offset = None
    if cbank is not None and isinstance(cbank.value, bytes) and len(cbank.value) >= 8:
        _sec, param_offset, _size = struct.unpack_from("<IHH", cbank.value)
    const0 = by_name.get(f".nv.constant0.{name}")
    shared = by_name.get(f".nv.shared.{name}")
    min_blocks = directives.get("minnctapersm")
    max_registers = scalar("EIATTR_MAXREG_COUNT")
    if max_registers is None and directives.get("maxnreg"):
        max_registers = directives["maxnreg"][0]
    return Resources(
        kernel=name, arch=arch,
        registers=indexed("EIATTR_REGCOUNT"),
        max_registers=max_registers,
        block_dim=block, max_block_dim=max_block,
        shared_bytes=shared.size if shared else 0,
        reserved_shared_bytes=reserved,
        stack_frame_bytes=indexed("EIATTR_FRAME_SIZE"),
        min_stack_bytes=indexed("EIATTR_MIN_STACK_SIZE"),
        max_stack_bytes=indexed("EIATTR_MAX_STACK_SIZE"),
        param_bytes=scalar("EIATTR_CBANK_PARAM_SIZE"),
        param_offset=param_offset,
        const0_bytes=const0.size if const0 else None,
        num_barriers=scalar("EIATTR_NUM_BARRIERS"),
        num_mbarriers=scalar("EIATTR_NUM_MBARRIERS"),
        min_blocks_per_sm=min_blocks[0] if min_blocks else None,
        cluster_dim=dims("EIATTR_CTA_PER_CLUSTER"),
    )


# --------------------------------------------------------------------------------------
# ptxas -v


_PTXAS_FUNC = re.compile(r"(?:Compiling entry function|Function properties for) '?([\w$.]+)'?")
_PTXAS_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, "
                          r"(\d+) bytes spill loads")
_PTXAS_USED = re.compile(r"Used (\d+) registers")
_PTXAS_SMEM = re.compile(r"(\d+) bytes smem")
_PTXAS_BARRIERS = re.compile(r"used (\d+) barriers")


def parse_ptxas_info(text: str) -> dict[str, dict[str, int]]:
    """Per kernel, the numbers ``ptxas -v`` prints (the only source of spill sizes).

    Keys: ``registers``, ``stack_frame_bytes``, ``spill_store_bytes``,
    ``spill_load_bytes``, ``ptxas_shared_bytes`` (without the 1 KiB system reserve that
    sm_90+ cubins add), ``num_barriers``. Feed one kernel's dict to
    :meth:`Resources.with_ptxas_info`.

    Example:
        >>> out = parse_ptxas_info(
        ...     "ptxas info    : Function properties for k\\n"
        ...     "    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\\n"
        ...     "ptxas info    : Used 40 registers, used 1 barriers, 1024 bytes smem\\n")
        >>> out["k"]["spill_store_bytes"], out["k"]["registers"]
        (4, 40)
    """
    out: dict[str, dict[str, int]] = {}
    current: dict[str, int] | None = None
    for line in text.splitlines():
        m = _PTXAS_FUNC.search(line)
        if m:
            current = out.setdefault(m.group(1), {})
            continue
        if current is None:
            continue
        m = _PTXAS_STACK.search(line)
        if m:
            current["stack_frame_bytes"], current["spill_store_bytes"], \
                current["spill_load_bytes"] = map(int, m.groups())
        m = _PTXAS_USED.search(line)
        if m:
            current["registers"] = int(m.group(1))
            sm = _PTXAS_SMEM.search(line)
            current["ptxas_shared_bytes"] = int(sm.group(1)) if sm else 0
            bm = _PTXAS_BARRIERS.search(line)
            if bm:
                current["num_barriers"] = int(bm.group(1))
    return out
