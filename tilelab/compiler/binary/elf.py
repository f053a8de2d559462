"""The ELF64 container of a cubin: header check, section headers, symbols and notes,
read with :mod:`struct` alone (bounds-checked: a truncated or corrupt file raises
ValueError saying what ran out where). :mod:`tilelab.compiler.binary.cubin` builds on it.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterator

__all__ = ["Section", "Reader", "check_header", "read_sections", "read_symbols",
           "read_notes", "tkinfo", "EM_CUDA", "STT_FUNC", "STO_CUDA_ENTRY", "SHT_SYMTAB",
           "SHT_NOTE", "SHT_NOBITS", "NT_CUDA_CUINFO", "NT_CUDA_TKINFO"]

EM_CUDA = 190
STT_FUNC = 2
STO_CUDA_ENTRY = 0x10  # st_other bit of a kernel (an entry point), as readelf shows it
SHT_SYMTAB = 2
SHT_NOTE = 7
SHT_NOBITS = 8
NT_CUDA_CUINFO = 1000
NT_CUDA_TKINFO = 2000


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


class Reader:
    """Bounds-checked little-endian reads that say where a truncated cubin ran out.

    Example:
        >>> Reader(b"\\x01\\x00").unpack("<I", 0, "a word")
        Traceback (most recent call last):
        ...
        ValueError: truncated cubin: a word at offset 0x0 needs 4 bytes but the file has 2 bytes
    """

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


def check_header(data: bytes) -> None:
    """ValueError unless ``data`` starts like a 64-bit little-endian EM_CUDA ELF.

    Example:
        >>> check_header(b"MZ" + bytes(62))
        Traceback (most recent call last):
        ...
        ValueError: not a cubin: the data does not start with the ELF magic ...
    """
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


def read_sections(r: Reader) -> list[Section]:
    """The section headers, named from the section name table.

    Example:
        >>> [s.name for s in read_sections(Reader(cubin_bytes))][:2]   # doctest: +SKIP
        ['', '.shstrtab']
    """
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


def read_symbols(r: Reader, sections: list[Section]) -> list[_Symbol]:
    """The symbols of the (first) symbol table, in table order (their index is the one
    ``.nv.info`` records name functions by).

    Example:
        >>> r = Reader(cubin_bytes)                                # doctest: +SKIP
        >>> [s.name for s in read_symbols(r, read_sections(r))]   # doctest: +SKIP
        ['', '.text.add_...', 'add_...']
    """
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


def read_notes(r: Reader, section: Section) -> Iterator[tuple[int, str, bytes]]:
    """(type, owner, descriptor) of each note in a SHT_NOTE section.

    Example:
        >>> note = Section(".note", SHT_NOTE, 0, 16)
        >>> list(read_notes(Reader(bytes([4, 0, 0, 0, 0, 0, 0, 0, 232, 3, 0, 0]) + b"NVI\\0"),
        ...                 note))
        [(1000, 'NVI', b'')]
    """
    pos, end = section.offset, section.offset + section.size
    while pos + 12 <= end:
        namesz, descsz, ntype = r.unpack("<III", pos, f"note header in {section.name}")
        pos += 12
        owner = r.slice(pos, namesz, f"note owner in {section.name}").rstrip(b"\0")
        pos += (namesz + 3) & ~3
        desc = r.slice(pos, descsz, f"note body in {section.name}")
        pos += (descsz + 3) & ~3
        yield ntype, owner.decode("ascii", errors="replace"), desc


def tkinfo(desc: bytes) -> dict[str, str]:
    """Decode .note.nv.tkinfo: six u32 (version, then string offsets) and a string table.

    Example:
        >>> import struct
        >>> tkinfo(struct.pack("<6I", 2, 0, 4, 4, 4, 4) + b"obj\\0ptxas\\0")["tool"]
        'ptxas'
    """
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
