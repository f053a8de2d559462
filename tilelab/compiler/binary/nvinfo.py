"""The EIATTR records of a cubin's ``.nv.info`` sections: formats, attribute names,
record splitting and kernel parameter records (layouts checked against ``nvdisasm``
13.4; see :mod:`tilelab.compiler.binary.cubin`).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = ["EIATTR", "EIFMT_NVAL", "EIFMT_BVAL", "EIFMT_HVAL", "EIFMT_SVAL", "NvInfoRecord",
           "KernelParam", "attr_id", "nv_info_records", "kernel_params", "dim3"]

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


def attr_id(name: str) -> int:
    """The id of an attribute named in :data:`EIATTR`.

    Example:
        >>> hex(attr_id("EIATTR_REGCOUNT"))
        '0x2f'
    """
    return _ID[name]


def _attr_name(attr: int) -> str:
    return EIATTR.get(attr, f"EIATTR_0x{attr:02x}")


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


def nv_info_records(data: bytes, where: str) -> list[NvInfoRecord]:
    """Split a .nv.info section into records; each is 4 bytes plus an SVAL payload.

    Example:
        >>> nv_info_records(bytes([0x04, 0x2F, 8, 0, 5, 0, 0, 0, 40, 0, 0, 0]), ".nv.info")
        [NvInfoRecord(attr=47, fmt=4, value=b'\\x05\\x00\\x00\\x00(\\x00\\x00\\x00')]
    """
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


def dim3(words: tuple[int, ...]) -> tuple[int, int, int] | None:
    """(x, y, z) from 1-3 words, missing dimensions 1.

    Example:
        >>> dim3((128,)), dim3(())
        ((128, 1, 1), None)
    """
    if not words:
        return None
    x, y, z = (tuple(words[:3]) + (1, 1))[:3]
    return x, y, z


def kernel_params(records: list[NvInfoRecord]) -> tuple[KernelParam, ...]:
    """Parameter records, both layouts ptxas 13.4 writes (checked against nvdisasm):

    - EIATTR_KPARAM_INFO: u32 index, u16 ordinal, u16 offset, u32 flags, size in bits 18+;
    - EIATTR_KPARAM_INFO_V2 (kernels with hidden TMA-descriptor parameters): u32 index,
      u16 ordinal, u16 offset, u16 size, u16 flags.

    Example:
        >>> import struct
        >>> rec = NvInfoRecord(0x45, EIFMT_SVAL, struct.pack("<IHHHH", 0, 1, 8, 4, 0))
        >>> kernel_params([rec])
        (KernelParam(ordinal=1, offset=8, size=4),)
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
