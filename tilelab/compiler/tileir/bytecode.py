"""A reader of Tile IR bytecode's type table: the tile shapes a kernel's bytecode uses,
and where each shape's dimensions lie in the bytes (so that a copy can be patched).

It reads the bytecode cuda-tile 1.7 writes (versions up to 13.4); for bytecode it does
not understand it returns nothing, and the callers treat that as "no tile found".
"""
from __future__ import annotations

__all__ = ["bytecode_tile_shapes"]


def bytecode_tile_shapes(bytecode: bytes) -> list[tuple[int, str, tuple[int, ...], int]]:
    """The tile shapes in Tile IR bytecode's type table: (type id, kind, shape, offset of
    the first dimension's bytes). ``kind`` is ``tile`` or the view kind (whose tile shape
    it is). Returns [] for bytecode this reader does not understand.

    Example:
        >>> bytecode_tile_shapes(b"not bytecode")
        []
    """
    try:
        return _type_table(bytes(bytecode))
    except (IndexError, ValueError):
        return []


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    x, shift = 0, 0
    while True:
        b = buf[i]
        i += 1
        x |= (b & 0x7F) << shift
        if not b & 0x80:
            return x, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _type_table(buf: bytes) -> list[tuple[int, str, tuple[int, ...], int]]:
    if not buf.startswith(b"\x7fTileIR\x00") or len(buf) < 12:
        return []
    version = (buf[8], buf[9])
    i = 12
    while i < len(buf):
        sid = buf[i]
        i += 1
        if sid == 0:
            break
        length, i = _varint(buf, i)
        if sid & 0x80:
            align, i = _varint(buf, i)
            while align > 1 and i % align:
                i += 1
        start, end = i, i + length
        if sid & 0x7F == 0x05:
            return _types(buf, start, end, version)
        i = end
    return []


def _types(buf: bytes, start: int, end: int, version) -> list:
    count, i = _varint(buf, start)
    while (i - start) % 4:
        i += 1
    offsets = [int.from_bytes(buf[i + 4 * k:i + 4 * k + 4], "little") for k in range(count)]
    data = i + 4 * count
    out = []
    unified = version >= (13, 3)
    for tid, off in enumerate(offsets):
        j = data + off
        if j >= end:
            raise ValueError("type offset out of range")
        tag = buf[j]
        j += 1
        if tag == 0x0D:  # tile: element type, int list of 8-byte dims
            _elem, j = _varint(buf, j)
            rank, j = _varint(buf, j)
            dims = tuple(int.from_bytes(buf[j + 8 * k:j + 8 * k + 8], "little", signed=True)
                         for k in range(rank))
            out.append((tid, "tile", dims, j))
        elif tag in (0x0F, 0x14, 0x15):  # partition / gather-scatter / strided view
            if unified or tag != 0x0F:
                _flags, j = _varint(buf, j)
            rank, j = _varint(buf, j)
            dims = tuple(int.from_bytes(buf[j + 4 * k:j + 4 * k + 4], "little", signed=True)
                         for k in range(rank))
            kind = {0x0F: "partition_view", 0x14: "gather_scatter_view",
                    0x15: "strided_view"}[tag]
            out.append((tid, kind, dims, j))
    return out
